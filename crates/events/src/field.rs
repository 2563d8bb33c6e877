//! The fields of a tracepoint payload: where one lies ([`FieldSpec`], as a `format` text
//! declares it; [`Field`], resolved for reading), how to read it in either byte order, and
//! [`Payload`], the reader the registry's builders use.
//!
//! ```
//! use ioblame_events::field::{Field, FieldLayout};
//! use ioblame_format::ByteOrder;
//! let pid = Field { offset: 4, size: 4, signed: true, array: false, layout: FieldLayout::Inline };
//! let raw = [7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
//! assert_eq!(pid.i64(&raw, ByteOrder::Little).unwrap(), -1);
//! ```

use ioblame_format::ByteOrder;

use crate::event::{parse_bdi, Dev, Rwbs};

/// Why a field of a payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// The event's format has no field of this name.
    #[error("event `{event}` has no field `{field}`")]
    MissingField {
        /// The event.
        event: String,
        /// The field looked for.
        field: String,
    },
    /// The field exists but cannot be read as asked (e.g. a 16-byte integer).
    #[error("event `{event}`, field `{field}`: {what}")]
    BadField {
        /// The event.
        event: String,
        /// The field.
        field: String,
        /// What does not fit.
        what: String,
    },
    /// The field (or the string a `__data_loc` points at) runs past the payload.
    #[error("field bytes {offset}..{end} run past the {len}-byte payload")]
    OutOfBounds {
        /// First byte of the field.
        offset: usize,
        /// One past its last byte.
        end: usize,
        /// Payload length.
        len: usize,
    },
}

/// One `field:` line of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// Field name, e.g. `rwbs`.
    pub name: String,
    /// Declared type without the name and the array suffix, e.g. `unsigned long`, `char`,
    /// `__data_loc char[]`, `const void *`.
    pub type_name: String,
    /// Byte offset in the payload.
    pub offset: usize,
    /// Size in bytes (for `__data_loc`: the 4-byte locator).
    pub size: usize,
    /// Whether the kernel declares the field signed.
    pub signed: bool,
    /// For `TYPE NAME[N]`: `Some(N)`; `Some(0)` when `N` is not a number (a macro name).
    pub array_len: Option<usize>,
    /// A `__data_loc` (or `__rel_loc`) field: a u32 locator of a variable-length array.
    pub data_loc: bool,
    /// A `__rel_loc` field: the locator's offset counts from the end of the locator itself.
    pub rel_loc: bool,
}

/// How a field's bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldLayout {
    /// Bytes in place at the field's offset (integers, fixed arrays).
    Inline,
    /// A u32 locator: offset (low 16 bits) from the payload start, length (high 16 bits).
    DataLoc,
    /// Like `DataLoc`, but the offset counts from the end of the locator.
    RelLoc,
}

/// A field resolved once from a format: reading it from a payload is a bounds check and a
/// load. Cheap to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the payload.
    pub offset: u16,
    /// Size in bytes.
    pub size: u16,
    /// Signed integer.
    pub signed: bool,
    /// Whether the field is a fixed array (`TYPE NAME[N]`).
    pub array: bool,
    /// Where the bytes are.
    pub layout: FieldLayout,
}

impl Field {
    /// The accessor of a spec.
    pub fn from_spec(s: &FieldSpec) -> Field {
        Field {
            offset: s.offset as u16,
            size: s.size as u16,
            signed: s.signed,
            array: s.array_len.is_some(),
            layout: if s.rel_loc {
                FieldLayout::RelLoc
            } else if s.data_loc {
                FieldLayout::DataLoc
            } else {
                FieldLayout::Inline
            },
        }
    }

    /// Whether the field can be read as an integer (inline, size 1, 2, 4 or 8).
    pub fn is_integer(&self) -> bool {
        self.layout == FieldLayout::Inline && !self.array && matches!(self.size, 1 | 2 | 4 | 8)
    }

    /// Whether the field can be read as a string (a fixed array or a `__data_loc`).
    pub fn is_string(&self) -> bool {
        self.layout != FieldLayout::Inline || self.array
    }

    #[inline]
    fn slice(raw: &[u8], offset: usize, len: usize) -> Result<&[u8], FieldError> {
        let end = offset + len;
        raw.get(offset..end).ok_or(FieldError::OutOfBounds {
            offset,
            end,
            len: raw.len(),
        })
    }

    /// The field's own bytes (for a `__data_loc`: the locator).
    #[inline]
    pub fn raw_bytes<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], FieldError> {
        Self::slice(raw, self.offset as usize, self.size as usize)
    }

    /// The integer value zero-extended (or sign-extended, for signed fields) to 64 bits.
    /// Fields whose size is not 1, 2, 4 or 8 read as [`FieldError::BadField`].
    #[inline]
    pub fn u64(&self, raw: &[u8], order: ByteOrder) -> Result<u64, FieldError> {
        match self.read_u64(raw, order) {
            Some(v) => Ok(v),
            None => Err(self.raw_bytes(raw).map_or_else(
                |e| e,
                |b| FieldError::BadField {
                    event: String::new(),
                    field: String::new(),
                    what: format!("a {}-byte field is not an integer", b.len()),
                },
            )),
        }
    }

    /// [`Field::u64`] without the reason when the payload cannot give it: the decoder's
    /// per-event path, which only counts such events.
    #[inline]
    pub fn read_u64(&self, raw: &[u8], order: ByteOrder) -> Option<u64> {
        let at = self.offset as usize;
        let v = match self.size {
            1 => {
                let a = *raw.get(at)?;
                if self.signed {
                    a as i8 as i64 as u64
                } else {
                    a as u64
                }
            }
            2 => {
                let v = order.u16(raw.get(at..at + 2)?.try_into().ok()?);
                if self.signed {
                    v as i16 as i64 as u64
                } else {
                    v as u64
                }
            }
            4 => {
                let v = order.u32(raw.get(at..at + 4)?.try_into().ok()?);
                if self.signed {
                    v as i32 as i64 as u64
                } else {
                    v as u64
                }
            }
            8 => order.u64(raw.get(at..at + 8)?.try_into().ok()?),
            _ => return None,
        };
        Some(v)
    }

    /// The integer value as signed (sign-extended when the field is signed).
    #[inline]
    pub fn i64(&self, raw: &[u8], order: ByteOrder) -> Result<i64, FieldError> {
        self.u64(raw, order).map(|v| v as i64)
    }

    /// The bytes of a string field up to (not including) the first NUL: a fixed `char[N]`
    /// array, or the array a `__data_loc` points at.
    #[inline]
    pub fn bytes<'a>(&self, raw: &'a [u8], order: ByteOrder) -> Result<&'a [u8], FieldError> {
        if let Some(b) = self.read_bytes(raw, order) {
            return Ok(b);
        }
        // The same steps again, each saying why it fails (an inline field can only be out
        // of bounds, which the first step says).
        let loc = self.raw_bytes(raw)?;
        let [a, c, d, e] = *loc else {
            return Err(FieldError::BadField {
                event: String::new(),
                field: String::new(),
                what: format!("a __data_loc locator of {} bytes", loc.len()),
            });
        };
        let loc = order.u32([a, c, d, e]);
        let b = Self::slice(raw, self.data_offset(loc), (loc >> 16) as usize)?;
        Ok(memchr(b).map_or(b, |n| &b[..n]))
    }

    /// [`Field::bytes`] without the reason when the payload cannot give them.
    #[inline]
    pub fn read_bytes<'a>(&self, raw: &'a [u8], order: ByteOrder) -> Option<&'a [u8]> {
        let at = self.offset as usize;
        let b = match self.layout {
            FieldLayout::Inline => raw.get(at..at + self.size as usize)?,
            FieldLayout::DataLoc | FieldLayout::RelLoc => {
                if self.size != 4 {
                    return None;
                }
                let loc = order.u32(raw.get(at..at + 4)?.try_into().ok()?);
                let off = self.data_offset(loc);
                raw.get(off..off + (loc >> 16) as usize)?
            }
        };
        Some(match memchr(b) {
            Some(n) => &b[..n],
            None => b,
        })
    }

    /// The bytes of an inline array field as they are (no NUL cut): a UUID.
    #[inline]
    pub fn read_array<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        let at = self.offset as usize;
        match self.layout {
            FieldLayout::Inline => raw.get(at..at + self.size as usize),
            FieldLayout::DataLoc | FieldLayout::RelLoc => None,
        }
    }

    /// Where a `__data_loc` (or `__rel_loc`) locator says the data starts.
    #[inline]
    fn data_offset(&self, loc: u32) -> usize {
        let off = (loc & 0xffff) as usize;
        if self.layout == FieldLayout::RelLoc {
            off + self.offset as usize + 4
        } else {
            off
        }
    }

    /// A string field as text (invalid UTF-8 replaced).
    pub fn string(&self, raw: &[u8], order: ByteOrder) -> Result<String, FieldError> {
        Ok(String::from_utf8_lossy(self.bytes(raw, order)?).into_owned())
    }
}

#[inline]
fn memchr(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == 0)
}

/// A field the payload could not give (too short, or not of the resolved kind). The decoder
/// skips such an event and counts it, so the reason is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

/// What reading a field of a [`Payload`] gives.
pub type Read<T> = Result<T, Unreadable>;

/// One payload and the fields of its event resolved against its format: the registry's
/// builders read their entry's `i`th field declaration (`None`: an optional field this
/// kernel lacks, read as 0 or empty).
#[derive(Debug, Clone, Copy)]
pub struct Payload<'a> {
    fields: &'a [Option<Field>],
    raw: &'a [u8],
    order: ByteOrder,
}

impl<'a> Payload<'a> {
    /// The payload `raw` of byte order `order`, whose entry's fields resolved to `fields`.
    #[inline]
    pub fn new(fields: &'a [Option<Field>], raw: &'a [u8], order: ByteOrder) -> Self {
        Payload { fields, raw, order }
    }
    #[inline]
    pub(crate) fn u64(&self, i: usize) -> Read<u64> {
        match self.fields.get(i).copied().flatten() {
            Some(f) => f.read_u64(self.raw, self.order).ok_or(Unreadable),
            None => Ok(0),
        }
    }
    #[inline]
    pub(crate) fn i64(&self, i: usize) -> Read<i64> {
        self.u64(i).map(|v| v as i64)
    }
    #[inline]
    pub(crate) fn u32(&self, i: usize) -> Read<u32> {
        self.u64(i).map(|v| v as u32)
    }
    #[inline]
    pub(crate) fn i32(&self, i: usize) -> Read<i32> {
        self.u64(i).map(|v| v as i32)
    }
    #[inline]
    pub(crate) fn u16(&self, i: usize) -> Read<u16> {
        self.u64(i).map(|v| v as u16)
    }
    #[inline]
    pub(crate) fn u8(&self, i: usize) -> Read<u8> {
        self.u64(i).map(|v| v as u8)
    }
    #[inline]
    fn bytes(&self, i: usize) -> Read<&'a [u8]> {
        match self.fields.get(i).copied().flatten() {
            Some(f) => f.read_bytes(self.raw, self.order).ok_or(Unreadable),
            None => Ok(&[]),
        }
    }
    #[inline]
    pub(crate) fn rwbs(&self, i: usize) -> Read<Rwbs> {
        Ok(Rwbs::parse_bytes(self.bytes(i)?))
    }
    #[inline]
    pub(crate) fn bdi(&self, i: usize) -> Read<Dev> {
        Ok(parse_bdi(self.bytes(i)?))
    }
    /// A 16-byte array (btrfs's `u8 fsid[16]`) as one number, its bytes in order (big-endian,
    /// whatever the trace's byte order: a UUID is bytes); 0 when absent.
    #[inline]
    pub(crate) fn uuid(&self, i: usize) -> Read<u128> {
        match self.fields.get(i).copied().flatten() {
            Some(f) => {
                let b = f.read_array(self.raw).ok_or(Unreadable)?;
                let b: [u8; 16] = b
                    .get(..16)
                    .ok_or(Unreadable)?
                    .try_into()
                    .map_err(|_| Unreadable)?;
                Ok(u128::from_be_bytes(b))
            }
            None => Ok(0),
        }
    }
    pub(crate) fn string(&self, i: usize) -> Read<String> {
        Ok(String::from_utf8_lossy(self.bytes(i)?).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(offset: u16, size: u16, signed: bool) -> Field {
        Field {
            offset,
            size,
            signed,
            array: false,
            layout: FieldLayout::Inline,
        }
    }

    #[test]
    fn integers_in_both_orders() {
        let mut le = vec![0xfeu8, 0xff, 0xfe, 0xff, 0xfd, 0xff, 0xff, 0xff];
        le.extend_from_slice(&0x0102030405060708u64.to_le_bytes());
        let mut be = vec![0xfeu8, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xfd];
        be.extend_from_slice(&0x0102030405060708u64.to_be_bytes());
        for (raw, o) in [(&le, ByteOrder::Little), (&be, ByteOrder::Big)] {
            assert_eq!(int(0, 1, false).u64(raw, o).unwrap(), 0xfe);
            assert_eq!(int(1, 1, true).i64(raw, o).unwrap(), -1);
            assert_eq!(int(2, 2, true).i64(raw, o).unwrap(), -2);
            assert_eq!(int(4, 4, true).i64(raw, o).unwrap(), -3);
            assert_eq!(int(4, 4, false).u64(raw, o).unwrap(), 0xfffffffd);
            assert_eq!(int(8, 8, false).u64(raw, o).unwrap(), 0x0102030405060708);
        }
        assert_eq!(
            int(8, 8, false).u64(&le[..12], ByteOrder::Little),
            Err(FieldError::OutOfBounds {
                offset: 8,
                end: 16,
                len: 12
            })
        );
        assert!(int(0, 3, false).u64(&le, ByteOrder::Little).is_err());
        assert_eq!(int(0, 3, false).read_u64(&le, ByteOrder::Little), None);
    }

    #[test]
    fn payload_reads_by_position() {
        let rwbs = Field {
            offset: 8,
            size: 8,
            signed: false,
            array: true,
            layout: FieldLayout::Inline,
        };
        let loc = Field {
            offset: 16,
            size: 4,
            signed: false,
            array: false,
            layout: FieldLayout::DataLoc,
        };
        let fields = [Some(int(0, 4, true)), Some(rwbs), None, Some(loc)];
        let mut raw = vec![0xfb, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        raw.extend_from_slice(b"WS\0\0\0\0\0\0");
        raw.extend_from_slice(&((5u32 << 16) | 20).to_le_bytes());
        raw.extend_from_slice(b"8:16\0");
        let p = Payload::new(&fields, &raw, ByteOrder::Little);
        assert_eq!(p.i32(0), Ok(-5));
        assert_eq!(p.u8(0), Ok(0xfb));
        assert_eq!(p.rwbs(1), Ok(Rwbs(Rwbs::WRITE | Rwbs::SYNC)));
        // An optional field this kernel lacks reads as zero or empty.
        assert_eq!(p.u64(2), Ok(0));
        assert_eq!(p.string(2), Ok(String::new()));
        assert_eq!(p.bdi(3), Ok((8 << 20) | 16));
        assert_eq!(p.string(3), Ok("8:16".to_string()));
        // A payload too short for a field is unreadable.
        let short = Payload::new(&fields, &raw[..10], ByteOrder::Little);
        assert_eq!(short.rwbs(1), Err(Unreadable));
        assert_eq!(short.string(3), Err(Unreadable));
    }
}
