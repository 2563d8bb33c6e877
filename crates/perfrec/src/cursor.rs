//! A bounds-checked reader over a record body.

use crate::error::RecordError;
use crate::order::ByteOrder;

/// Bounds-checked reader over a record body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cur<'a> {
    b: &'a [u8],
    pub(crate) pos: usize,
    order: ByteOrder,
}

impl<'a> Cur<'a> {
    pub(crate) fn new(b: &'a [u8], order: ByteOrder) -> Self {
        Cur { b, pos: 0, order }
    }
    #[inline]
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|e| self.b.get(self.pos..e))
            .ok_or(RecordError::Truncated {
                what,
                at: self.pos,
                need: n,
                len: self.b.len(),
            })?;
        self.pos += n;
        Ok(s)
    }
    #[inline]
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, RecordError> {
        let s = self.take(8, what)?;
        Ok(self
            .order
            .u64([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
    }
    /// The next `u64` if the field is `present` in the record, else `None` and nothing read.
    pub(crate) fn u64_if(
        &mut self,
        present: bool,
        what: &'static str,
    ) -> Result<Option<u64>, RecordError> {
        present.then(|| self.u64(what)).transpose()
    }

    /// The next two `u32` if the field is `present` in the record, else `None`.
    pub(crate) fn u32x2_if(
        &mut self,
        present: bool,
        what: &'static str,
    ) -> Result<Option<(u32, u32)>, RecordError> {
        present.then(|| self.u32x2(what)).transpose()
    }

    /// Two u32 in one u64 slot (`{ u32 pid, tid; }`, `{ u32 cpu, res; }`).
    #[inline]
    pub(crate) fn u32x2(&mut self, what: &'static str) -> Result<(u32, u32), RecordError> {
        let s = self.take(8, what)?;
        Ok((
            self.order.u32([s[0], s[1], s[2], s[3]]),
            self.order.u32([s[4], s[5], s[6], s[7]]),
        ))
    }
}
