//! Little-endian encoding helpers for ioblame's own structures.
//!
//! Every read is bounds-checked; strings and vectors are length-prefixed and their declared
//! lengths are checked against the bytes that remain before anything is allocated.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

use crate::error::DecodeError;

/// Longest string any ioblame structure may hold (format texts included).
pub const MAX_STRING: usize = 1 << 20;

/// Appends little-endian values to a buffer.
#[derive(Default)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A string: u32 byte length, then the UTF-8 bytes (truncated at `MAX_STRING`).
    pub fn str(&mut self, s: &str) -> &mut Self {
        let mut end = s.len().min(MAX_STRING);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u32(end as u32);
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
}

/// Reads little-endian values from a byte slice with bounds checks.
pub(crate) struct Dec<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Dec { data, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::new(
                self.pos,
                format!("{what}: needs {n} bytes, only {} remain", self.remaining()),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.arr(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    pub fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.arr(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    pub fn str(&mut self, what: &str) -> Result<String, DecodeError> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        if n > MAX_STRING {
            return Err(DecodeError::new(
                at,
                format!("{what}: string length {n} exceeds the cap of {MAX_STRING}"),
            ));
        }
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| DecodeError::new(at, format!("{what}: not valid UTF-8")))
    }
    /// A u32 element count, checked so that `count * min_elem_size` fits in what remains.
    pub fn count(&mut self, min_elem_size: usize, what: &str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_elem_size.max(1)) > self.remaining() {
            return Err(DecodeError::new(
                at,
                format!(
                    "{what}: {n} entries cannot fit in the {} bytes that remain",
                    self.remaining()
                ),
            ));
        }
        Ok(n)
    }
}
