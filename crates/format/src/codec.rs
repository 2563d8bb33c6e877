//! Little-endian encoding helpers for ioblame's own structures.
//!
//! Every read is bounds-checked; strings and vectors are length-prefixed and their declared
//! lengths are checked against the bytes that remain before anything is allocated.
// The decoding half serves the reader (feature `reader`); the recorder builds the format
// without it and only encodes.
#![cfg_attr(not(feature = "reader"), allow(dead_code))]

use crate::error::{DecodeError, FrameError};

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
    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
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

/// Largest element count a decoder reserves room for before it has decoded the elements:
/// a declared count only bounds what may follow, so vectors start at most this large and grow
/// with what is actually decoded.
pub(crate) const INITIAL_CAPACITY: usize = 1024;

/// Largest ratio of a metadata frame's declared uncompressed length to its compressed length
/// that the reader accepts. Real kallsyms text compresses about 6:1 (9:1 with hidden
/// addresses) and path tables about 10-30:1; zstd can reach several thousand to one on
/// repetitive input, which would let a few kilobytes of a hostile file claim the whole
/// 256 MiB cap.
pub const MAX_METADATA_RATIO: usize = 256;

/// Decompresses `z`, which must be exactly one zstd frame declaring exactly `declared` bytes
/// of content, without allocating more than `declared` bytes, and only after checking
/// `declared` against `cap` and (if given) against `max_ratio` times the frame's size.
pub(crate) fn zstd_frame(
    z: &[u8],
    declared: usize,
    cap: usize,
    max_ratio: Option<usize>,
) -> Result<Vec<u8>, FrameError> {
    zstd_frame_into(z, declared, cap, max_ratio, Vec::new())
}

/// [`zstd_frame`], decompressing into `buf` (whatever it held is dropped): a buffer big
/// enough already saves the allocation and the first touch of fresh pages.
pub(crate) fn zstd_frame_into(
    z: &[u8],
    declared: usize,
    cap: usize,
    max_ratio: Option<usize>,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>, FrameError> {
    check_frame(z, declared, cap, max_ratio)?;
    if buf.capacity() < declared {
        // Not `reserve`: growing would copy the stale contents.
        buf = Vec::with_capacity(declared);
    }
    buf.clear();
    decompress_exact(z, &mut buf, declared)?;
    Ok(buf)
}

/// Decompresses `z`, a frame [`check_frame`] accepted for `declared` bytes, into `out`
/// (the spare room of a vector, or a slice of exactly `declared` bytes): an error unless it
/// gives exactly `declared` bytes.
pub(crate) fn decompress_exact<C: zstd::zstd_safe::WriteBuf + ?Sized>(
    z: &[u8],
    out: &mut C,
    declared: usize,
) -> Result<(), FrameError> {
    let got = with_decompressor(|d| d.decompress_to_buffer(z, out)).map_err(FrameError::Zstd)?;
    if got != declared {
        return Err(FrameError::Decompressed { got, declared });
    }
    Ok(())
}

/// Checks that `z` is exactly one zstd frame declaring exactly `declared` bytes of content,
/// and `declared` against `cap` and (if given) against `max_ratio` times the frame's size.
pub(crate) fn check_frame(
    z: &[u8],
    declared: usize,
    cap: usize,
    max_ratio: Option<usize>,
) -> Result<(), FrameError> {
    if declared > cap {
        return Err(FrameError::OverCap { declared, cap });
    }
    if let Some(ratio) = max_ratio {
        let most = z.len().saturating_mul(ratio).max(1 << 16);
        if declared > most {
            return Err(FrameError::OverRatio {
                declared,
                frame: z.len(),
                ratio,
            });
        }
    }
    match zstd::zstd_safe::find_frame_compressed_size(z) {
        Ok(frame) if frame == z.len() => {}
        Ok(frame) => {
            return Err(FrameError::Trailing {
                frame,
                given: z.len(),
            })
        }
        Err(_) => return Err(FrameError::NotAFrame),
    }
    match zstd::zstd_safe::get_frame_content_size(z) {
        Ok(Some(holds)) if holds == declared as u64 => Ok(()),
        Ok(Some(holds)) => Err(FrameError::ContentSize { holds, declared }),
        Ok(None) => Err(FrameError::NoContentSize),
        Err(_) => Err(FrameError::BadFrameHeader),
    }
}

thread_local! {
    /// One zstd decompression context per thread, reused across frames: creating one costs
    /// more than decompressing a small chunk.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's decompression context (made on first use).
fn with_decompressor<T>(
    f: impl FnOnce(&mut zstd::bulk::Decompressor<'static>) -> std::io::Result<T>,
) -> std::io::Result<T> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let d = match &mut *slot {
            Some(d) => d,
            none => none.insert(zstd::bulk::Decompressor::new()?),
        };
        f(d)
    })
}
