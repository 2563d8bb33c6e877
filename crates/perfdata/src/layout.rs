//! The layout of a perf.data file: its magic and byte order, `struct perf_file_header`, the
//! sections it points to and the table of feature sections after the data.
//!
//! [`check`] reads the header and checks every section and feature section against the file
//! size before `linux-perf-data` sees the file, so that the parser never allocates for a
//! section that is not there. The numbers of the file are read and written with the helpers
//! here, in the file's byte order.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use ioblame_format::ByteOrder;

use crate::attrs::RawAttr;
use crate::errors::{Corruption, EventDescError, PerfDataError};
use crate::inflate::{Inflation, COMPRESSED, COMPRESSED2};

/// Size of `struct perf_file_header`.
const PERF_FILE_HEADER_LEN: u64 = 104;
/// Feature bit of `HEADER_EVENT_DESC`.
const HEADER_EVENT_DESC: u32 = 12;
/// Feature bit of `HEADER_CMDLINE`.
const HEADER_CMDLINE: u32 = 11;
/// Size of the `{ u64 offset; u64 size; }` that locates each section.
const SECTION_LEN: u64 = 16;

/// What [`check`] found in a sound header.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The file's byte order, from its magic.
    pub order: ByteOrder,
    /// The attrs as written, for what the parser reads wrong in big-endian files (empty when
    /// the attrs section has an implausible entry size or count).
    pub attrs: Vec<RawAttr>,
    /// Whether the `HEADER_CMDLINE` section (if any) may be given to the parser: its string
    /// count fits in it. The parser reserves room for the declared count first, and a
    /// count of billions aborts the process (found by fuzzing).
    pub cmdline_ok: bool,
}

/// The byte order a file magic announces: `PERFILE2` as written by a host of the file's
/// order, read in the same order; `2ELIFREP` from a host of the other order.
fn order_of_magic(magic: &[u8]) -> Option<ByteOrder> {
    match magic {
        b"PERFILE2" => Some(ByteOrder::Little),
        b"2ELIFREP" => Some(ByteOrder::Big),
        _ => None,
    }
}

/// Whether `path` starts with the perf.data magic (`PERFILE2`, or `2ELIFREP` for a file of the
/// other byte order).
pub fn is_perf_data(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && order_of_magic(&magic).is_some()
}

/// Checks the perf file header and the feature section table of `f` (`len` bytes, named
/// `path` in errors) against the file size, and the counts inside the event descriptions
/// against their section; leaves `f` at its start.
pub(crate) fn check<F: Read + Seek>(
    path: &Path,
    f: &mut F,
    len: u64,
) -> Result<Layout, PerfDataError> {
    let io = |source| PerfDataError::io(path, source);
    let corrupt = |what| PerfDataError::corrupt(path, what);
    let mut h = [0u8; PERF_FILE_HEADER_LEN as usize];
    if len < PERF_FILE_HEADER_LEN {
        let mut m = [0u8; 8];
        if f.read_exact(&mut m).is_ok() && order_of_magic(&m).is_some() {
            return Err(corrupt(Corruption::ShortHeader { len }));
        }
        return Err(PerfDataError::NotPerfData {
            path: path.to_path_buf(),
        });
    }
    f.read_exact(&mut h).map_err(io)?;
    let Some(order) = order_of_magic(&h[..8]) else {
        return Err(PerfDataError::NotPerfData {
            path: path.to_path_buf(),
        });
    };
    let u64at = |o: usize| order.u64_at(&h, o).unwrap_or(0);
    let section = |name: &'static str, o: usize| -> Result<(u64, u64), PerfDataError> {
        let (offset, size) = (u64at(o), u64at(o + 8));
        match offset.checked_add(size) {
            Some(end) if end <= len => Ok((offset, size)),
            _ => Err(corrupt(Corruption::SectionPastEnd {
                name,
                offset,
                size,
                len,
            })),
        }
    };
    let header_size = u64at(8);
    if header_size != PERF_FILE_HEADER_LEN {
        return Err(corrupt(Corruption::HeaderSize { size: header_size }));
    }
    let (attrs_off, attrs_size) = section("attrs", 24)?;
    let attr_entry = u64at(16);
    let (data_off, data_size) = section("data", 40)?;
    section("event types", 56)?;
    if data_size == 0 && data_off == 0 {
        return Err(corrupt(Corruption::Unfinished));
    }
    let feature_word = |w: usize| u64at(72 + 8 * w);
    let features: u64 = (0..4)
        .map(|w| u64::from(feature_word(w).count_ones()))
        .sum();
    let table = data_off + data_size;
    if table + SECTION_LEN * features > len {
        return Err(corrupt(Corruption::FeatureTablePastEnd {
            features,
            offset: table,
            len,
        }));
    }
    f.seek(SeekFrom::Start(table)).map_err(io)?;
    let mut t = vec![0u8; (SECTION_LEN * features) as usize];
    f.read_exact(&mut t).map_err(io)?;
    let mut cmdline_ok = true;
    // The table lists the sections of the feature bits set, in bit order.
    let bits = (0..256u32).filter(|b| feature_word(*b as usize / 64) >> (b % 64) & 1 != 0);
    for ((index, e), bit) in t.chunks_exact(SECTION_LEN as usize).enumerate().zip(bits) {
        let (offset, size) = (
            order.u64_at(e, 0).unwrap_or(0),
            order.u64_at(e, 8).unwrap_or(0),
        );
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(corrupt(Corruption::FeaturePastEnd {
                index,
                offset,
                size,
                len,
            }));
        }
        if bit == HEADER_CMDLINE {
            // `u32 count`, then `count` strings of at least 4 bytes (their length) each.
            f.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut c = [0u8; 4];
            cmdline_ok = size >= 4
                && f.read_exact(&mut c).is_ok()
                && u64::from(order.u32(c)) <= (size - 4) / 4;
        }
        if bit == HEADER_EVENT_DESC {
            f.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut s = vec![0u8; size as usize];
            f.read_exact(&mut s).map_err(io)?;
            check_event_desc(&s, order)
                .map_err(|what| corrupt(Corruption::EventDesc { offset, size, what }))?;
        }
    }
    // Each attrs entry is a `perf_event_attr` followed by the `{ offset, size }` of its ids.
    let mut attrs = Vec::new();
    if attr_entry >= SECTION_LEN + 48 && attrs_size / attr_entry <= 1 << 16 {
        f.seek(SeekFrom::Start(attrs_off)).map_err(io)?;
        let mut b = vec![0u8; (attrs_size / attr_entry * attr_entry) as usize];
        f.read_exact(&mut b).map_err(io)?;
        for a in b.chunks_exact(attr_entry as usize) {
            attrs.push(RawAttr::parse(&a[..a.len() - SECTION_LEN as usize], order));
        }
    }
    check_compressed(f, order, data_off, data_size).map_err(|e| match e {
        Checked::Io(e) => io(e),
        Checked::Bomb(what) => corrupt(what),
    })?;
    f.seek(SeekFrom::Start(0)).map_err(io)?;
    Ok(Layout {
        order,
        attrs,
        cmdline_ok,
    })
}

/// Why [`check_compressed`] stopped.
enum Checked {
    Io(std::io::Error),
    Bomb(Corruption),
}

/// Walks the records of the data section (`size` bytes at `offset`) and measures each
/// compressed record ([`Inflation`]): one that expands too far is a [`Corruption`]. A record
/// header that cannot be read ends the walk: the parser reports it.
fn check_compressed<F: Read + Seek>(
    f: &mut F,
    order: ByteOrder,
    offset: u64,
    size: u64,
) -> Result<(), Checked> {
    f.seek(SeekFrom::Start(offset)).map_err(Checked::Io)?;
    let mut r = std::io::BufReader::with_capacity(64 << 10, f);
    let mut inflation: Option<Inflation> = None;
    let mut at = 0u64;
    let mut body = Vec::new();
    while at + 8 <= size {
        let mut h = [0u8; 8];
        if r.read_exact(&mut h).is_err() {
            break;
        }
        let kind = order.u32_at(&h, 0).unwrap_or(0);
        let len = u64::from(order.u16([h[6], h[7]]));
        if len < 8 || at + len > size {
            break;
        }
        if kind == COMPRESSED || kind == COMPRESSED2 {
            body.resize(len as usize - 8, 0);
            r.read_exact(&mut body).map_err(Checked::Io)?;
            let inflation = inflation.get_or_insert_with(Inflation::new);
            if let Err(limit) = inflation.check(kind, &body, order) {
                return Err(Checked::Bomb(Corruption::CompressedTooLarge {
                    offset: offset + at,
                    len,
                    limit,
                }));
            }
        } else {
            r.seek_relative(len as i64 - 8).map_err(Checked::Io)?;
        }
        at += len;
    }
    Ok(())
}

/// Checks the counts inside a `HEADER_EVENT_DESC` section against its size: the parser
/// reserves memory for the declared number of events and of ids of each before reading
/// them, so a damaged count would make it ask for gigabytes and abort the process.
fn check_event_desc(s: &[u8], order: ByteOrder) -> Result<(), EventDescError> {
    let u32at = |o: usize| order.u32_at(s, o).ok_or(EventDescError::CutShort(o));
    let nr = u32at(0)? as usize;
    let attr_size = u32at(4)? as usize;
    // Each event takes at least its attr, an id count and a string length.
    if attr_size == 0 || nr.saturating_mul(attr_size + 8) > s.len() {
        return Err(EventDescError::TooManyEvents {
            events: nr,
            attr_size,
            len: s.len(),
        });
    }
    let mut o = 8;
    for index in 0..nr {
        o += attr_size;
        let ids = u32at(o)? as usize;
        let name = u32at(o + 4)? as usize;
        o += 8;
        let need = name.saturating_add(ids.saturating_mul(8));
        if need > s.len() - o.min(s.len()) {
            return Err(EventDescError::EventTooLong { index, name, ids });
        }
        o += need;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// A little- or big-endian header with `attrs` (one 80-byte attr + ids section per
    /// entry), an 8-byte data section and the feature sections `features` (bit, bytes).
    fn file(order: ByteOrder, attrs: usize, features: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut b = match order {
            ByteOrder::Little => b"PERFILE2".to_vec(),
            ByteOrder::Big => b"2ELIFREP".to_vec(),
        };
        let attr_entry = 80 + 16;
        let attrs_off = 104;
        let data_off = attrs_off + attr_entry * attrs;
        for v in [
            104,
            attr_entry,
            attrs_off,
            attr_entry * attrs,
            data_off,
            8,
            0,
            0,
        ] {
            b.extend(order.put64(v as u64));
        }
        let mut bits = [0u64; 4];
        for (bit, _) in features {
            bits[*bit as usize / 64] |= 1 << (bit % 64);
        }
        for w in bits {
            b.extend(order.put64(w));
        }
        for i in 0..attrs {
            let mut a = vec![0u8; 80];
            // The bitfield word: `disabled` (bit 0) and, per attr, `sample_id_all` (bit 18).
            let flags: u64 = 1 | (i as u64) << 18;
            a[40..48].copy_from_slice(&order.put64(if order == ByteOrder::Big {
                flags.reverse_bits()
            } else {
                flags
            }));
            b.extend(a);
            b.extend([0u8; 16]);
        }
        b.extend([0u8; 8]);
        let mut at = b.len() + 16 * features.len();
        for (_, s) in features {
            b.extend(order.put64(at as u64));
            b.extend(order.put64(s.len() as u64));
            at += s.len();
        }
        for (_, s) in features {
            b.extend(s);
        }
        b
    }

    fn checked(b: &[u8]) -> Result<Layout, PerfDataError> {
        check(Path::new("f"), &mut Cursor::new(b), b.len() as u64)
    }

    fn corruption(b: &[u8]) -> String {
        match checked(b) {
            Err(e @ PerfDataError::Corrupt { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sound_files_of_both_orders() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let b = file(order, 2, &[(3, b"host\0\0\0\0".to_vec())]);
            let l = checked(&b).unwrap();
            assert_eq!(l.order, order);
            assert_eq!(l.attrs.len(), 2);
            assert_eq!(l.attrs[0].flags, 1);
            assert_eq!(l.attrs[1].flags, 1 | 1 << 18);
        }
    }

    #[test]
    fn not_perf_data_or_short() {
        assert!(matches!(
            checked(b"hello world"),
            Err(PerfDataError::NotPerfData { .. })
        ));
        assert!(matches!(
            checked(&[b'x'; 200]),
            Err(PerfDataError::NotPerfData { .. })
        ));
        assert_eq!(
            corruption(b"PERFILE2\0\0"),
            "f: corrupt or truncated perf.data: 10 bytes, shorter than the 104-byte header"
        );
    }

    #[test]
    fn damaged_headers() {
        let good = file(ByteOrder::Little, 1, &[(3, vec![0; 8])]);
        let mut b = good.clone();
        b[8] = 100;
        assert_eq!(
            corruption(&b),
            "f: corrupt or truncated perf.data: header size 100, expected 104"
        );
        let mut b = good.clone();
        b[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            corruption(&b),
            format!(
                "f: corrupt or truncated perf.data: the data section ({} bytes at offset 200) \
                 runs past the end of the file ({} bytes)",
                u64::MAX,
                good.len()
            )
        );
        let mut b = good.clone();
        b[40..56].fill(0);
        assert_eq!(
            corruption(&b),
            "f: corrupt or truncated perf.data: the header was never completed (perf record did \
             not exit cleanly)"
        );
        let mut b = good.clone();
        b[72..80].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(corruption(&b).contains("the table of 64 feature sections at offset 208"));
        // The one feature section's size.
        let mut b = good.clone();
        b[216..224].copy_from_slice(&1000u64.to_le_bytes());
        assert!(corruption(&b).contains("feature section 0 (1000 bytes at offset 224) runs past"));
    }

    #[test]
    fn command_line_counts() {
        let o = ByteOrder::Little;
        let list = |n: u32| {
            let mut s = o.put32(n).to_vec();
            s.extend(o.put32(4));
            s.extend(b"perf");
            s
        };
        assert!(
            checked(&file(o, 1, &[(HEADER_CMDLINE, list(1))]))
                .unwrap()
                .cmdline_ok
        );
        assert!(checked(&file(o, 1, &[(3, vec![0; 8])])).unwrap().cmdline_ok);
        // A count of 4 billion strings in 12 bytes: not for the parser.
        let l = checked(&file(o, 1, &[(HEADER_CMDLINE, list(u32::MAX))])).unwrap();
        assert!(!l.cmdline_ok);
        assert!(
            !checked(&file(o, 1, &[(HEADER_CMDLINE, vec![1, 0])]))
                .unwrap()
                .cmdline_ok
        );
    }

    #[test]
    fn event_description_counts() {
        let o = ByteOrder::Little;
        let desc = |nr: u32, attr: u32, ids: u32, name: u32| {
            let mut s = Vec::new();
            s.extend(o.put32(nr));
            s.extend(o.put32(attr));
            s.extend([0u8; 8]);
            s.extend(o.put32(ids));
            s.extend(o.put32(name));
            s.extend(b"block:x\0");
            s.extend(o.put64(7));
            s
        };
        assert_eq!(check_event_desc(&desc(1, 8, 1, 8), o), Ok(()));
        assert_eq!(
            check_event_desc(&desc(2, 8, 1, 8), o),
            Err(EventDescError::CutShort(48))
        );
        assert_eq!(
            check_event_desc(&desc(1000, 8, 1, 8), o),
            Err(EventDescError::TooManyEvents {
                events: 1000,
                attr_size: 8,
                len: 40
            })
        );
        assert_eq!(
            check_event_desc(&desc(1, 8, u32::MAX, 8), o),
            Err(EventDescError::EventTooLong {
                index: 0,
                name: 8,
                ids: u32::MAX as usize
            })
        );
        assert_eq!(
            check_event_desc(&[1, 0], o),
            Err(EventDescError::CutShort(0))
        );
        // In the file: the section is named in the error.
        let b = file(o, 1, &[(HEADER_EVENT_DESC, desc(1000, 8, 1, 8))]);
        assert!(corruption(&b).contains(
            "the event descriptions (40 bytes at offset 224): 1000 events of 8-byte attrs do not \
             fit in 40 bytes"
        ));
    }
}
