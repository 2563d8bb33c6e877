//! `perf record -z` writes the records as zstd, in `COMPRESSED` records of at most 64 KiB
//! that `linux-perf-data` decompresses whole into memory. A few KiB of zstd can stand for
//! gigabytes, so each compressed record is decompressed here first, into a small scratch
//! buffer that is counted and thrown away, and a record that expands more than
//! [`MAX_RATIO`] times (plus 1 MiB) is refused before the parser sees the file. perf's own
//! records expand about 5 to 10 times.

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};

use ioblame_format::ByteOrder;

/// How many times its size a compressed record may expand (plus [`SLACK`]).
pub(crate) const MAX_RATIO: u64 = 128;
/// What any compressed record may expand to besides [`MAX_RATIO`] times its size.
const SLACK: u64 = 1 << 20;
/// `PERF_RECORD_COMPRESSED`: the body is zstd.
pub(crate) const COMPRESSED: u32 = 81;
/// `PERF_RECORD_COMPRESSED2`: the body is the zstd length (u64), then zstd and padding.
pub(crate) const COMPRESSED2: u32 = 83;

/// The zstd stream of a file's compressed records, decompressed only to be measured.
pub(crate) struct Inflation {
    dctx: DCtx<'static>,
    scratch: Vec<u8>,
}

impl Inflation {
    /// A fresh stream (perf writes one zstd stream across all the records of a file).
    pub fn new() -> Inflation {
        Inflation {
            dctx: DCtx::create(),
            scratch: vec![0; 256 << 10],
        }
    }

    /// Measures the record of type `kind` with `body` (in byte order `order`): `Err` with
    /// the limit when it expands past it. Damaged zstd is left for the parser to report.
    pub fn check(&mut self, kind: u32, body: &[u8], order: ByteOrder) -> Result<(), u64> {
        let z = match kind {
            COMPRESSED => body,
            COMPRESSED2 => {
                let n = order.u64_at(body, 0).unwrap_or(0);
                match usize::try_from(n).ok().and_then(|n| body.get(8..8 + n)) {
                    Some(z) => z,
                    None => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
        let limit = MAX_RATIO * z.len() as u64 + SLACK;
        let mut input = InBuffer::around(z);
        let mut total = 0u64;
        loop {
            let mut out = OutBuffer::around(&mut self.scratch[..]);
            if self.dctx.decompress_stream(&mut out, &mut input).is_err() {
                return Ok(());
            }
            let n = out.pos();
            total += n as u64;
            if total > limit {
                return Err(limit);
            }
            if n < self.scratch.len() && input.pos() == z.len() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_ratios_pass_and_bombs_are_refused() {
        let o = ByteOrder::Little;
        // Text-like records compress a few times: fine.
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 977).to_le_bytes())
            .collect();
        let z = zstd::bulk::compress(&text, 1).unwrap();
        assert_eq!(Inflation::new().check(COMPRESSED, &z, o), Ok(()));
        // 1 GiB of zeros in a few KiB: refused once past the limit, without holding it.
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            std::io::Write::write_all(&mut enc, &zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        let limit = MAX_RATIO * bomb.len() as u64 + SLACK;
        assert_eq!(Inflation::new().check(COMPRESSED, &bomb, o), Err(limit));
        // The same in a COMPRESSED2 record (length first); damaged zstd is the parser's.
        let mut r2 = (bomb.len() as u64).to_le_bytes().to_vec();
        r2.extend(&bomb);
        assert_eq!(Inflation::new().check(COMPRESSED2, &r2, o), Err(limit));
        assert_eq!(Inflation::new().check(COMPRESSED, b"not zstd", o), Ok(()));
        assert_eq!(Inflation::new().check(9, &bomb, o), Ok(()));
    }
}
