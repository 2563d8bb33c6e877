//! The kernel symbols (`/proc/kallsyms` of the recording host): the KALLSYMS block of
//! format 1.1 (one zstd frame) and the KALLSYMS_PARTS block of 1.2 (parts of whole lines,
//! decompressed in parallel under the `parallel` feature).

use crate::codec::{check_frame, decompress_exact, zstd_frame, Dec, Enc, MAX_METADATA_RATIO};
use crate::error::DecodeError;

/// A snapshot of `/proc/kallsyms` of the recording host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Kallsyms {
    /// The text of `/proc/kallsyms`.
    pub text: String,
    /// Whether the addresses were hidden (all zero, `kptr_restrict` or missing privilege).
    pub restricted: bool,
}

/// Cap on the uncompressed size of the kallsyms section.
pub const MAX_KALLSYMS: usize = 256 << 20;

/// The kallsyms text compressed as one frame (KALLSYMS, format 1.1): written by the
/// tests only, as older recorders did.
#[cfg(test)]
pub(crate) fn encode_kallsyms(k: &Kallsyms) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(k.restricted as u32).u32(k.text.len() as u32);
    let z = zstd::bulk::compress(k.text.as_bytes(), 1).unwrap_or_default();
    e.bytes(&z);
    e.buf
}

pub(crate) fn decode_kallsyms(b: &[u8]) -> Result<Kallsyms, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("kallsyms flags")?;
    let len = d.u32("kallsyms length")? as usize;
    let z = d.take(d.remaining(), "kallsyms")?;
    let raw = zstd_frame(z, len, MAX_KALLSYMS, Some(MAX_METADATA_RATIO))
        .map_err(|e| DecodeError::new(4, format!("kallsyms: {e}")))?;
    let text = String::from_utf8(raw).map_err(|_| DecodeError::new(8, "kallsyms: not UTF-8"))?;
    Ok(Kallsyms {
        text,
        restricted: flags & 1 != 0,
    })
}

/// Text per part of a KALLSYMS_PARTS block (a part ends at the end of a line, so it may be
/// a line longer).
const KALLSYMS_PART: usize = 1 << 20;

/// Most parts a KALLSYMS_PARTS block may have.
const MAX_KALLSYMS_PARTS: usize = 1024;

/// The kallsyms text in parts of whole lines, each its own zstd frame (KALLSYMS_PARTS,
/// format 1.2): a reader decompresses them at once on several cores. One frame took the
/// analyzer 5 ms on a 5.4 MB snapshot while its other cores had nothing to do yet.
pub(crate) fn encode_kallsyms_parts(k: &Kallsyms) -> Vec<u8> {
    let text = k.text.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = start.saturating_add(KALLSYMS_PART).min(text.len());
        if let Some(nl) = text[end..].iter().position(|&c| c == b'\n') {
            end += nl + 1;
        } else {
            end = text.len();
        }
        parts.push(&text[start..end]);
        start = end;
    }
    // Level 1: on a 5.4 MB /proc/kallsyms (kernel 6.18) it gives about 1.0 MB in 0.02 s
    // where level 6 gave 0.84 MB in 0.09 s, a third of the recorder's start-up CPU.
    let mut c = zstd::bulk::Compressor::new(1).ok();
    let frames: Vec<Vec<u8>> = parts
        .iter()
        .map(|p| {
            c.as_mut()
                .and_then(|c| c.compress(p).ok())
                .unwrap_or_default()
        })
        .collect();
    let mut e = Enc::default();
    e.u32(k.restricted as u32)
        .u32(text.len() as u32)
        .u32(parts.len() as u32);
    for (p, z) in parts.iter().zip(&frames) {
        e.u32(z.len() as u32).u32(p.len() as u32);
    }
    for z in &frames {
        e.bytes(z);
    }
    e.buf
}

pub(crate) fn decode_kallsyms_parts(b: &[u8]) -> Result<Kallsyms, DecodeError> {
    let mut d = Dec::new(b);
    let flags = d.u32("kallsyms flags")?;
    let len = d.u32("kallsyms length")? as usize;
    if len > MAX_KALLSYMS {
        return Err(DecodeError::new(
            4,
            format!("kallsyms: declares {len} bytes, over the cap of {MAX_KALLSYMS}"),
        ));
    }
    let n = d.count(8, "kallsyms parts")?;
    if n > MAX_KALLSYMS_PARTS {
        return Err(DecodeError::new(
            8,
            format!("kallsyms: {n} parts, more than {MAX_KALLSYMS_PARTS}"),
        ));
    }
    let mut sizes = Vec::with_capacity(n);
    let mut total = 0usize;
    for _ in 0..n {
        let z = d.u32("kallsyms part length")? as usize;
        let u = d.u32("kallsyms part text length")? as usize;
        total = total.saturating_add(u);
        sizes.push((z, u));
    }
    if total != len {
        return Err(DecodeError::new(
            4,
            format!("kallsyms: the parts hold {total} bytes, the block declares {len}"),
        ));
    }
    // The whole against the frames' total size, as one frame's would be (tiny frames of
    // 64 KiB each could otherwise declare 64 MiB from a few kilobytes).
    let packed = sizes.iter().fold(0usize, |a, &(z, _)| a.saturating_add(z));
    let most = packed.saturating_mul(MAX_METADATA_RATIO).max(1 << 16);
    if len > most {
        return Err(DecodeError::new(
            4,
            format!(
                "kallsyms: declares {len} bytes from {packed} bytes of frames, more than \
                 {MAX_METADATA_RATIO} times their size"
            ),
        ));
    }
    let mut frames = Vec::with_capacity(n);
    for &(z, u) in &sizes {
        let at = d.pos();
        let f = d.take(z, "kallsyms part")?;
        // Each part's size against its frame's before anything is allocated.
        check_frame(f, u, MAX_KALLSYMS, Some(MAX_METADATA_RATIO))
            .map_err(|e| DecodeError::new(at, format!("kallsyms part: {e}")))?;
        frames.push((at, f));
    }
    if d.remaining() != 0 {
        return Err(DecodeError::new(
            d.pos(),
            format!("kallsyms: {} bytes after the last part", d.remaining()),
        ));
    }
    let mut text = vec![0u8; len];
    let mut outs = Vec::with_capacity(n);
    let mut rest: &mut [u8] = &mut text;
    for &(_, u) in &sizes {
        let (part, tail) = rest.split_at_mut(u);
        outs.push(part);
        rest = tail;
    }
    // Per part: where its frame is in the payload, the frame (checked above), and its
    // place in the text.
    type Job<'a, 'b> = ((usize, &'a [u8]), &'b mut [u8]);
    let jobs: Vec<Job> = frames.into_iter().zip(outs).collect();
    let run = |((at, f), out): Job| {
        let declared = out.len();
        decompress_exact(f, out, declared)
            .map_err(|e| DecodeError::new(at, format!("kallsyms part: {e}")))
    };
    #[cfg(feature = "parallel")]
    let done: Result<Vec<()>, DecodeError> = {
        use rayon::prelude::*;
        jobs.into_par_iter().map(run).collect()
    };
    #[cfg(not(feature = "parallel"))]
    let done: Result<Vec<()>, DecodeError> = jobs.into_iter().map(run).collect();
    done?;
    let text = String::from_utf8(text).map_err(|_| DecodeError::new(8, "kallsyms: not UTF-8"))?;
    Ok(Kallsyms {
        text,
        restricted: flags & 1 != 0,
    })
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    /// Kallsyms-like text of `lines` lines.
    fn text(lines: usize) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for i in 0..lines {
            let _ = writeln!(s, "ffffffff{:08x} T symbol_number_{i}", i * 48);
        }
        s
    }

    /// The parts' text lengths and their texts, decompressed one by one.
    fn parts_of(b: &[u8]) -> Vec<Vec<u8>> {
        let n = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
        let mut at = 12 + 8 * n;
        (0..n)
            .map(|i| {
                let o = 12 + 8 * i;
                let z = u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
                let u = u32::from_le_bytes(b[o + 4..o + 8].try_into().unwrap()) as usize;
                let part = zstd::bulk::decompress(&b[at..at + z], u).unwrap();
                at += z;
                part
            })
            .collect()
    }

    #[test]
    fn kallsyms_parts_round_trip_in_whole_lines() {
        // A line of `text` is 41-45 bytes: 30,000 lines are one part and a bit. The 1 MiB
        // mark right before a newline, and right after one.
        let mut before = text(30_000);
        let cut = before[..KALLSYMS_PART].rfind('\n').unwrap() + 1;
        before.insert_str(cut, &"x".repeat(KALLSYMS_PART - cut));
        before.insert(KALLSYMS_PART, '\n');
        assert_eq!(before.as_bytes()[KALLSYMS_PART], b'\n');
        let mut after = text(30_000);
        let cut = after[..KALLSYMS_PART - 1].rfind('\n').unwrap() + 1;
        after.insert_str(cut, &"y".repeat(KALLSYMS_PART - 1 - cut));
        after.insert(KALLSYMS_PART - 1, '\n');
        assert_eq!(after.as_bytes()[KALLSYMS_PART - 1], b'\n');
        let cases = [
            String::new(),
            text(10),
            text(30_000),
            before,
            after,
            text(90_000),
            "no newline at the end".to_string(),
        ];
        for (i, t) in cases.into_iter().enumerate() {
            let k = Kallsyms {
                text: t,
                restricted: i == 1,
            };
            let b = encode_kallsyms_parts(&k);
            let parts = parts_of(&b);
            assert!(parts.len() >= k.text.len() / KALLSYMS_PART, "case {i}");
            assert_eq!(parts.concat(), k.text.as_bytes(), "case {i}");
            for (j, p) in parts.iter().enumerate() {
                if j + 1 < parts.len() {
                    // Cut at the first line end at or past the mark.
                    assert!(p.len() > KALLSYMS_PART, "case {i} part {j}");
                    assert!(p.ends_with(b"\n"), "case {i} part {j}");
                    assert!(
                        !p[KALLSYMS_PART..p.len() - 1].contains(&b'\n'),
                        "case {i} part {j}"
                    );
                }
            }
            assert_eq!(decode_kallsyms_parts(&b).unwrap(), k, "case {i}");
        }
    }

    #[test]
    fn kallsyms_in_one_frame_still_reads() {
        let k = Kallsyms {
            text: text(30_000),
            restricted: false,
        };
        assert_eq!(decode_kallsyms(&encode_kallsyms(&k)).unwrap(), k);
    }

    #[test]
    fn damaged_kallsyms_parts_are_errors() {
        let k = Kallsyms {
            text: text(60_000),
            restricted: false,
        };
        let good = encode_kallsyms_parts(&k);
        let n = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
        assert!(n >= 2);
        let set =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        // The declared length disagrees with the parts'.
        let mut b = good.clone();
        set(&mut b, 4, k.text.len() as u32 + 1);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("the parts hold"));
        // A part's text length disagrees with its frame (and the total is kept equal).
        let mut b = good.clone();
        let u0 = u32::from_le_bytes(b[16..20].try_into().unwrap());
        let u1 = u32::from_le_bytes(b[24..28].try_into().unwrap());
        set(&mut b, 16, u0 - 1);
        set(&mut b, 24, u1 + 1);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("frame holds"));
        // Bytes after the last part.
        let mut b = good.clone();
        b.push(0);
        assert!(decode_kallsyms_parts(&b)
            .unwrap_err()
            .what
            .contains("after the last part"));
        // Truncated, a part count beyond the block, a flipped byte inside a frame.
        assert!(decode_kallsyms_parts(&good[..good.len() - 1]).is_err());
        let mut b = good.clone();
        set(&mut b, 8, u32::MAX);
        assert!(decode_kallsyms_parts(&b).is_err());
        let mut b = good.clone();
        let last = b.len() - 100;
        b[last] ^= 0xff;
        assert!(decode_kallsyms_parts(&b).is_err());
    }
}
