//! Reading a fuzz input field by field: what the targets whose input is a layout of fields
//! share (`user_symbols`, `unwind`). A field cut short by the input's end is what is left.

/// The next `n` bytes of `d` (fewer at its end), `d` moved past them.
pub fn take<'a>(d: &mut &'a [u8], n: usize) -> &'a [u8] {
    let n = n.min(d.len());
    let (a, b) = d.split_at(n);
    *d = b;
    a
}

/// Up to 8 bytes as a little-endian u64 (missing bytes 0).
pub fn u64_of(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    u64::from_le_bytes(x)
}
