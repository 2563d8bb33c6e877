//! The byte order of the recording host, which is the byte order of every perf record.

/// Byte order of the recording host, which is the byte order of every raw perf record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first (x86, most ARM and RISC-V hosts).
    Little,
    /// Most significant byte first (s390x, some POWER and MIPS hosts).
    Big,
}

impl ByteOrder {
    /// The byte order of the machine running this code.
    pub const fn native() -> Self {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
    /// Reads a u16 in this byte order.
    #[inline]
    pub fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }
    /// Reads a u32 in this byte order.
    #[inline]
    pub fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }
    /// Reads a u64 in this byte order.
    #[inline]
    pub fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        }
    }
    /// The u16 at `at` of `b`, if it fits.
    #[inline]
    pub fn u16_at(self, b: &[u8], at: usize) -> Option<u16> {
        Some(self.u16(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
    }
    /// The u32 at `at` of `b`, if it fits.
    #[inline]
    pub fn u32_at(self, b: &[u8], at: usize) -> Option<u32> {
        Some(self.u32(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
    }
    /// The u64 at `at` of `b`, if it fits.
    #[inline]
    pub fn u64_at(self, b: &[u8], at: usize) -> Option<u64> {
        Some(self.u64(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
    }
    /// `v` in this byte order.
    #[inline]
    pub fn put16(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
    /// `v` in this byte order.
    #[inline]
    pub fn put32(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
    /// `v` in this byte order.
    #[inline]
    pub fn put64(self, v: u64) -> [u8; 8] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}
