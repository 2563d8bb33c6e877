//! perf's pipe mode (`perf record -o -`): a stream with no file header to seek in. The header's
//! contents travel as records at the start of the stream instead: one `HEADER_ATTR` per attr
//! (the attr and its ids), one `HEADER_FEATURE` per feature section, `HEADER_TRACING_DATA`
//! (followed by the tracing data itself, outside the record's size), `EVENT_UPDATE` and
//! `HEADER_BUILD_ID`; the kernel's records and perf's own (`FINISHED_ROUND`, `COMPRESSED`, ...)
//! follow.
//!
//! [`unpipe`] rewrites such a stream as the file perf would have written: the header, the
//! attrs with their ids, the data section (every record that is not a header record, in
//! stream order) and the feature sections (the tracing data among them), in the stream's byte
//! order. The rest of the conversion then reads it like any perf.data file. The stream is
//! read once, front to back, and may end anywhere: a record cut by the end of the stream (a
//! recording still running, or killed) ends the data there with a note.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use ioblame_format::ByteOrder;

use crate::errors::{Corruption, PerfDataError};
use crate::inflate::{self, Inflation};

/// Size of perf's pipe header (`magic`, `size`).
pub(crate) const PIPE_HEADER_LEN: usize = 16;
/// Size of `struct perf_file_header`.
const FILE_HEADER_LEN: u64 = 104;
/// Size of the `{ u64 offset; u64 size; }` that locates a section.
const SECTION_LEN: u64 = 16;
/// `PERF_ATTR_SIZE_VER0`: the smallest `perf_event_attr`.
const ATTR_SIZE_VER0: usize = 64;
/// The most attrs a stream may declare (as the file header's check allows).
const MAX_ATTRS: usize = 1 << 16;
/// The largest tracing data accepted (the format text of every tracepoint of a kernel is a few
/// MiB).
const MAX_TRACING_DATA: u64 = 256 << 20;

/// `PERF_RECORD_HEADER_ATTR`.
const HEADER_ATTR: u32 = 64;
/// `PERF_RECORD_HEADER_EVENT_TYPE` (obsolete).
const HEADER_EVENT_TYPE: u32 = 65;
/// `PERF_RECORD_HEADER_TRACING_DATA`.
const HEADER_TRACING_DATA: u32 = 66;
/// `PERF_RECORD_HEADER_BUILD_ID`.
const HEADER_BUILD_ID: u32 = 67;
/// `PERF_RECORD_AUXTRACE`: followed by its own data, outside the record's size.
const AUXTRACE: u32 = 71;
/// `PERF_RECORD_EVENT_UPDATE`.
const EVENT_UPDATE: u32 = 78;
/// `PERF_RECORD_HEADER_FEATURE`.
const HEADER_FEATURE: u32 = 80;
/// Feature bit of `HEADER_TRACING_DATA`.
const FEATURE_TRACING_DATA: u64 = 1;

/// The byte order of a pipe-mode stream whose first bytes are `h`: the perf.data magic, then
/// a header size of 16 (a perf.data file says 104 there).
pub(crate) fn pipe_order(h: &[u8]) -> Option<ByteOrder> {
    let order = match h.get(..8)? {
        b"PERFILE2" => ByteOrder::Little,
        b"2ELIFREP" => ByteOrder::Big,
        _ => return None,
    };
    (order.u64_at(h, 8)? == PIPE_HEADER_LEN as u64).then_some(order)
}

/// What [`unpipe`] found besides the file it wrote.
#[derive(Debug, Default)]
pub(crate) struct Unpiped {
    /// The size of the file written.
    pub len: u64,
    /// Notes for the user (the stream cut short, records dropped).
    pub notes: Vec<String>,
}

/// Reads `input`, a pipe-mode stream named `path` in errors (its 16-byte header included),
/// and writes the perf.data file it stands for to `out` (from its start).
pub(crate) fn unpipe<R: Read, W: Write + Seek>(
    path: &Path,
    mut input: R,
    out: &mut W,
) -> Result<Unpiped, PerfDataError> {
    let io = |source| PerfDataError::io(path, source);
    let corrupt = |what| PerfDataError::corrupt(path, what);
    let mut head = [0u8; PIPE_HEADER_LEN];
    input.read_exact(&mut head).map_err(io)?;
    let Some(order) = pipe_order(&head) else {
        return Err(PerfDataError::NotPerfData {
            path: path.to_path_buf(),
        });
    };
    let mut attrs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut features: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    // Where the data section starts in `out`, once the first data record has come.
    let mut data_start: Option<u64> = None;
    let mut data_len = 0u64;
    let mut offset = PIPE_HEADER_LEN as u64;
    let mut dropped = 0u64;
    let mut notes = Vec::new();
    let mut body = Vec::new();
    let mut inflation: Option<Inflation> = None;
    loop {
        let mut h = [0u8; 8];
        match read_full(&mut input, &mut h).map_err(io)? {
            0 => break,
            8 => {}
            n => {
                notes.push(cut_note(offset, n, 8));
                break;
            }
        }
        let kind = order.u32_at(&h, 0).unwrap_or(0);
        let size = usize::from(order.u16([h[6], h[7]]));
        if size < 8 {
            notes.push(format!(
                "the stream is damaged at byte {offset} (a record of {size} bytes): the records \
                 after it are not read"
            ));
            break;
        }
        body.resize(size - 8, 0);
        let got = read_full(&mut input, &mut body).map_err(io)?;
        if got < body.len() {
            notes.push(cut_note(offset, 8 + got, size));
            break;
        }
        offset += size as u64;
        if kind == inflate::COMPRESSED || kind == inflate::COMPRESSED2 {
            let inflation = inflation.get_or_insert_with(Inflation::new);
            if let Err(limit) = inflation.check(kind, &body, order) {
                return Err(corrupt(Corruption::CompressedTooLarge {
                    offset: offset - size as u64,
                    len: size as u64,
                    limit,
                }));
            }
        }
        match kind {
            HEADER_ATTR => {
                if data_start.is_some() {
                    return Err(corrupt(Corruption::PipeAttrAfterData { offset }));
                }
                if attrs.len() >= MAX_ATTRS {
                    return Err(corrupt(Corruption::PipeTooManyAttrs));
                }
                let attr_size = order.u32_at(&body, 4).unwrap_or(0) as usize;
                if attr_size < ATTR_SIZE_VER0 || attr_size > body.len() {
                    return Err(corrupt(Corruption::PipeAttrSize {
                        offset,
                        size: attr_size,
                    }));
                }
                let ids = &body[attr_size..];
                attrs.push((
                    body[..attr_size].to_vec(),
                    ids[..ids.len() / 8 * 8].to_vec(),
                ));
            }
            HEADER_FEATURE => {
                if let Some(feature) = order.u64_at(&body, 0).filter(|f| *f < 256) {
                    features.insert(feature, body[8..].to_vec());
                }
            }
            HEADER_TRACING_DATA => {
                let len = u64::from(order.u32_at(&body, 0).unwrap_or(0));
                if len > MAX_TRACING_DATA {
                    return Err(corrupt(Corruption::PipeTracingDataTooLong { len }));
                }
                let mut data = Vec::new();
                (&mut input).take(len).read_to_end(&mut data).map_err(io)?;
                if (data.len() as u64) < len {
                    notes.push(format!(
                        "the stream ends inside its tracing data ({} of {len} bytes): no \
                         tracepoint can be decoded",
                        data.len()
                    ));
                    break;
                }
                offset += len;
                features.insert(FEATURE_TRACING_DATA, data);
            }
            HEADER_EVENT_TYPE | HEADER_BUILD_ID | EVENT_UPDATE => {}
            AUXTRACE => {
                // Its data follows the record; ioblame has no use for it.
                let len = order.u64_at(&body, 0).unwrap_or(0);
                let skipped = io::copy(&mut (&mut input).take(len), &mut io::sink()).map_err(io)?;
                offset += skipped;
                dropped += 1;
                if skipped < len {
                    notes.push(cut_note(offset, 0, 8));
                    break;
                }
            }
            _ => {
                if data_start.is_none() {
                    data_start = Some(write_attrs(out, order, &attrs).map_err(io)?);
                }
                out.write_all(&h).map_err(io)?;
                out.write_all(&body).map_err(io)?;
                data_len += size as u64;
            }
        }
    }
    let data_start = match data_start {
        Some(s) => s,
        None => write_attrs(out, order, &attrs).map_err(io)?,
    };
    let len = finish(
        out,
        order,
        &head[..8],
        &attrs,
        (data_start, data_len),
        &features,
    )
    .map_err(io)?;
    if dropped > 0 {
        notes.push(format!("{dropped} AUXTRACE records dropped (not used)"));
    }
    Ok(Unpiped { len, notes })
}

/// The note for a stream that ends `got` bytes into a record of `size` bytes at `offset`.
fn cut_note(offset: u64, got: usize, size: usize) -> String {
    format!(
        "the stream ends inside a record ({got} of {size} bytes at byte {offset}; a recording \
         cut short or still running): everything before it is read"
    )
}

/// Reads into `buf` until it is full or the input ends; the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The size every attr takes in the attrs section: the largest attr of the stream.
fn attr_size(attrs: &[(Vec<u8>, Vec<u8>)]) -> usize {
    attrs
        .iter()
        .map(|(a, _)| a.len())
        .max()
        .unwrap_or(ATTR_SIZE_VER0)
}

/// Writes the space for the file header, the attrs section (each attr padded to the largest,
/// with the `{ offset, size }` of its ids) and the ids; returns where the data starts.
fn write_attrs<W: Write + Seek>(
    out: &mut W,
    order: ByteOrder,
    attrs: &[(Vec<u8>, Vec<u8>)],
) -> io::Result<u64> {
    out.seek(SeekFrom::Start(0))?;
    out.write_all(&[0u8; FILE_HEADER_LEN as usize])?;
    let size = attr_size(attrs);
    let entry = size as u64 + SECTION_LEN;
    let mut ids_at = FILE_HEADER_LEN + entry * attrs.len() as u64;
    for (attr, ids) in attrs {
        let mut a = attr.clone();
        a.resize(size, 0);
        a[4..8].copy_from_slice(&order.put32(size as u32));
        out.write_all(&a)?;
        out.write_all(&order.put64(ids_at))?;
        out.write_all(&order.put64(ids.len() as u64))?;
        ids_at += ids.len() as u64;
    }
    for (_, ids) in attrs {
        out.write_all(ids)?;
    }
    Ok(ids_at)
}

/// Writes the feature sections after the data and then the file header; the file's size.
fn finish<W: Write + Seek>(
    out: &mut W,
    order: ByteOrder,
    magic: &[u8],
    attrs: &[(Vec<u8>, Vec<u8>)],
    (data_start, data_len): (u64, u64),
    features: &BTreeMap<u64, Vec<u8>>,
) -> io::Result<u64> {
    let table = data_start + data_len;
    out.seek(SeekFrom::Start(table))?;
    let mut at = table + SECTION_LEN * features.len() as u64;
    for data in features.values() {
        out.write_all(&order.put64(at))?;
        out.write_all(&order.put64(data.len() as u64))?;
        at += data.len() as u64;
    }
    for data in features.values() {
        out.write_all(data)?;
    }
    let mut bits = [0u64; 4];
    for f in features.keys() {
        bits[*f as usize / 64] |= 1 << (f % 64);
    }
    let entry = attr_size(attrs) as u64 + SECTION_LEN;
    let mut h = magic.to_vec();
    for v in [
        FILE_HEADER_LEN,
        entry,
        FILE_HEADER_LEN,
        entry * attrs.len() as u64,
        data_start,
        data_len,
        0,
        0,
    ]
    .into_iter()
    .chain(bits)
    {
        h.extend(order.put64(v));
    }
    out.seek(SeekFrom::Start(0))?;
    out.write_all(&h)?;
    out.flush()?;
    Ok(at)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// A record of type `kind` with `body`, in `order`.
    fn record(order: ByteOrder, kind: u32, body: &[u8]) -> Vec<u8> {
        let mut r = order.put32(kind).to_vec();
        r.extend(order.put16(0));
        r.extend(order.put16((8 + body.len()) as u16));
        r.extend(body);
        r
    }

    /// A stream of one 72-byte attr with ids 7 and 8, a hostname feature, tracing data `td`
    /// and two data records.
    fn stream(order: ByteOrder, td: &[u8]) -> Vec<u8> {
        let mut s = match order {
            ByteOrder::Little => b"PERFILE2".to_vec(),
            ByteOrder::Big => b"2ELIFREP".to_vec(),
        };
        s.extend(order.put64(16));
        let mut attr = vec![0u8; 72];
        attr[4..8].copy_from_slice(&order.put32(72));
        attr.extend(order.put64(7));
        attr.extend(order.put64(8));
        s.extend(record(order, HEADER_ATTR, &attr));
        let mut feat = order.put64(3).to_vec();
        feat.extend(b"host\0\0\0\0");
        s.extend(record(order, HEADER_FEATURE, &feat));
        let mut t = order.put32(td.len() as u32).to_vec();
        t.extend([0u8; 4]);
        s.extend(record(order, HEADER_TRACING_DATA, &t));
        s.extend(td);
        s.extend(record(order, 3, &[1u8; 16]));
        s.extend(record(order, 68, &[]));
        s
    }

    #[test]
    fn a_stream_becomes_the_file_perf_would_write() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let s = stream(order, b"tracing!");
            let mut out = Cursor::new(Vec::new());
            let u = unpipe(Path::new("-"), &s[..], &mut out).unwrap();
            assert!(u.notes.is_empty(), "{:?}", u.notes);
            let f = out.into_inner();
            assert_eq!(u.len, f.len() as u64);
            let u64at = |o| order.u64_at(&f, o).unwrap();
            assert_eq!(&f[..8], &s[..8]);
            assert_eq!(u64at(8), 104);
            // One attr of 72 bytes + its ids section; its two ids after it.
            assert_eq!((u64at(16), u64at(24), u64at(32)), (88, 104, 88));
            assert_eq!((u64at(104 + 72), u64at(104 + 80)), (192, 16));
            assert_eq!((u64at(192), u64at(200)), (7, 8));
            // The data: the two records, 24 + 8 bytes.
            assert_eq!((u64at(40), u64at(48)), (208, 32));
            assert_eq!(order.u32_at(&f, 208), Some(3));
            // Features: tracing data (bit 1) and hostname (bit 3), in bit order.
            assert_eq!(u64at(72), 0b1010);
            let table = 240;
            assert_eq!((u64at(table), u64at(table + 8)), (272, 8));
            assert_eq!(&f[272..280], b"tracing!");
            assert_eq!(&f[280..288], b"host\0\0\0\0");
            assert_eq!(f.len(), 288);
        }
    }

    #[test]
    fn a_stream_cut_anywhere_gives_what_came_before_with_a_note() {
        let order = ByteOrder::Little;
        let s = stream(order, b"tracing!");
        let full = {
            let mut out = Cursor::new(Vec::new());
            unpipe(Path::new("-"), &s[..], &mut out).unwrap();
            out.into_inner()
        };
        let data_end = s.len() - 8 - 24;
        for cut in PIPE_HEADER_LEN..s.len() {
            let mut out = Cursor::new(Vec::new());
            let u = unpipe(Path::new("-"), &s[..cut], &mut out).unwrap();
            let boundary = [16, 112, 136, data_end, data_end + 24].contains(&cut);
            assert_eq!(u.notes.is_empty(), boundary, "cut at {cut}: {:?}", u.notes);
            let f = out.into_inner();
            let order_ok = order.u64_at(&f, 8) == Some(104);
            assert!(order_ok, "cut at {cut}");
            if cut >= data_end + 24 {
                assert_eq!(order.u64_at(&f, 48), Some(24), "cut at {cut}");
            }
        }
        assert_eq!(order.u64_at(&full, 48), Some(32));
    }

    #[test]
    fn damaged_streams_are_errors_or_notes() {
        let order = ByteOrder::Little;
        let run = |s: &[u8]| unpipe(Path::new("-"), s, &mut Cursor::new(Vec::new()));
        // Not a stream.
        assert!(matches!(
            run(b"PERFILE2\x68\0\0\0\0\0\0\0"),
            Err(PerfDataError::NotPerfData { .. })
        ));
        // An attr smaller than the first attr version.
        let mut s = stream(order, b"");
        s[16 + 12..16 + 16].copy_from_slice(&order.put32(8));
        let e = run(&s).unwrap_err().to_string();
        assert!(e.contains("attr of 8 bytes"), "{e}");
        // Tracing data declaring 4 GiB.
        let mut s = stream(order, b"");
        s[144..148].copy_from_slice(&order.put32(u32::MAX));
        let e = run(&s).unwrap_err().to_string();
        assert!(e.contains("4294967295 bytes of tracing data"), "{e}");
        // A record of size 0: read up to it.
        let mut s = stream(order, b"");
        let at = s.len() - 8;
        s[at + 6..at + 8].copy_from_slice(&[0, 0]);
        let u = run(&s).unwrap();
        assert!(u.notes[0].contains("damaged at byte"), "{:?}", u.notes);
    }
}
