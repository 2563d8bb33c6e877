//! The records of the data section, re-emitted as the trace's chunks.
//!
//! SAMPLE, COMM, FORK, EXIT, LOST and LOST_SAMPLES records are written again in the file's
//! byte order into chunks of one CPU each (~1 MiB), in the order the parser yields them; the
//! time and CPU of non-sample records are read from their `sample_id` trailer as the attr's
//! own flags describe it. An attr without IDENTIFIER gets its id prepended to samples and
//! appended to `sample_id` trailers. CGROUP records (`perf record --all-cgroups`: one per
//! cgroup alive at start, synthesized by perf, then one per cgroup created while recording)
//! become the trace's cgroup table. With user stacks, the executable user mappings (MMAP,
//! MMAP2) are kept, MMAP2 records without a build id given the build-id table's
//! ([`UserMaps`]). Big-endian files have each CPU's records put back in
//! time order (see [`crate::attrs::RawAttr`] for why). Other record types are dropped and
//! counted; perf's kernel map record gives the reference symbol the kernel symbols are
//! checked against.

use std::collections::BTreeMap;

use ioblame_format::{ByteOrder, ChunkBuilder, EncodedChunk};
use ioblame_perfrec::{
    lost_count, mapping_name, mmap2_name, parse_cgroup, parse_sample_id, put_mmap2_build_id,
    MISC_MMAP_BUILD_ID, MISC_MMAP_DATA, RECORD_CGROUP, RECORD_COMM, RECORD_EXIT, RECORD_FORK,
    RECORD_LOST, RECORD_LOST_SAMPLES, RECORD_MMAP, RECORD_MMAP2, RECORD_SAMPLE,
};

use crate::attrs::AttrInfo;
use crate::errors::{Corruption, PerfDataError};
use crate::parser::{record_name, Parser, Record};

/// Target size of the uncompressed records of one chunk.
const CHUNK_TARGET: usize = 1 << 20;
/// zstd level of the converted chunks.
const ZSTD_LEVEL: i32 = 3;

/// perf's kernel map record (`[kernel.kallsyms]_text`): a reference symbol and its address at
/// recording time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelRef {
    /// The symbol (`_text`).
    pub symbol: String,
    /// Its address in the recording.
    pub address: u64,
}

/// The highest CPU number a record may carry; a record with a higher one is damaged and
/// dropped (counted in [`Records::dropped`]).
pub(crate) const MAX_CPU: u32 = (1 << 16) - 1;

/// What is done with the mappings of a recording with user stacks.
#[derive(Debug, Default)]
pub(crate) struct UserMaps {
    /// Whether the records keep the executable user mappings (MMAP, MMAP2), which the
    /// attribution follows to place user frames; without user stacks they are dropped.
    pub keep: bool,
    /// Build ids by path (perf's `HEADER_BUILD_ID`), for MMAP2 records without one.
    pub build_ids: std::collections::HashMap<Vec<u8>, Vec<u8>>,
}

/// What became of the user mappings.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MapCounts {
    /// Executable user mappings kept.
    pub kept: u64,
    /// Of those, the MMAP2 records given their build id from the build-id table.
    pub from_table: u64,
    /// Of those, the mappings of files (not `[vdso]` and the like) left without a build id.
    pub without: u64,
}

/// The converted records.
#[derive(Debug)]
pub(crate) struct Records {
    /// The chunks, per CPU in record order.
    pub chunks: Vec<EncodedChunk>,
    /// The largest CPU of a record kept.
    pub max_cpu: u32,
    /// perf's kernel map record, if the file has one.
    pub kernel_ref: Option<KernelRef>,
    /// The records dropped, by type name.
    pub dropped: BTreeMap<String, u64>,
    /// The cgroups named by CGROUP records: id -> path under the cgroup2 mount (the last
    /// record of an id wins).
    pub cgroups: BTreeMap<u64, String>,
    /// What became of the user mappings.
    pub maps: MapCounts,
}

impl Records {
    /// The note that names the records dropped, if any.
    pub fn dropped_note(&self) -> Option<String> {
        (!self.dropped.is_empty()).then(|| {
            let list: Vec<String> = self
                .dropped
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            format!(
                "records ioblame does not use were dropped: {}",
                list.join(", ")
            )
        })
    }
}

/// Converts the records `parser` yields, of a file in byte order `order` whose attrs are
/// `infos`; `user` says what to do with the mappings.
pub(crate) fn convert(
    parser: &mut Parser,
    order: ByteOrder,
    infos: &[AttrInfo],
    user: &UserMaps,
) -> Result<Records, PerfDataError> {
    let path = parser.path().to_path_buf();
    let corrupt = |what| PerfDataError::corrupt(&path, what);
    // Big-endian files: the parser misreads `sample_id_all` (see [`RawAttr`]), so it sorts
    // non-sample records without their times. Their records are kept per CPU and put back
    // in time order at the end (the whole file's records in memory: such files are rare).
    //
    // [`RawAttr`]: crate::attrs::RawAttr
    let mut chunks = Chunks::new(order == ByteOrder::Big);
    let mut dropped: BTreeMap<String, u64> = BTreeMap::new();
    let mut max_cpu = 0u32;
    let mut kernel_ref: Option<KernelRef> = None;
    let mut cgroups: BTreeMap<u64, String> = BTreeMap::new();
    let mut maps = MapCounts::default();
    let mut buf = Vec::with_capacity(256);
    let mut body_buf: Vec<u8> = Vec::new();
    while let Some(rec) = parser.next_record()? {
        let rec = match rec {
            Record::Event(r) => r,
            Record::User(t) => {
                let name = format!("{t:?}").replace('"', "");
                *dropped.entry(name).or_default() += 1;
                continue;
            }
        };
        let t = rec.kind;
        if kernel_ref.is_none() && matches!(t, RECORD_MMAP | RECORD_MMAP2) {
            kernel_ref = kernel_ref_symbol(order, t, &rec.body);
        }
        if t == RECORD_CGROUP {
            match cgroup_record(order, &rec.body) {
                Some((id, path)) => {
                    cgroups.insert(id, path);
                }
                None => *dropped.entry("damaged CGROUP".into()).or_default() += 1,
            }
            continue;
        }
        let mut misc = rec.misc;
        let user_map = user.keep && is_user_map(order, t, misc, &rec.body);
        if !user_map
            && !matches!(
                t,
                RECORD_SAMPLE
                    | RECORD_COMM
                    | RECORD_FORK
                    | RECORD_EXIT
                    | RECORD_LOST
                    | RECORD_LOST_SAMPLES
            )
        {
            *dropped.entry(record_name(t)).or_default() += 1;
            continue;
        }
        let (time, cpu) = rec.time_and_cpu()?;
        let mut body: &[u8] = &rec.body;
        if user_map {
            maps.kept += 1;
            if t == RECORD_MMAP2 && misc & MISC_MMAP_BUILD_ID == 0 {
                // Without the kernel's build id: the one perf's table lists for the path.
                let id = mmap2_name(body).and_then(|n| user.build_ids.get(n));
                body_buf.clear();
                body_buf.extend_from_slice(body);
                if id.is_some_and(|id| put_mmap2_build_id(&mut body_buf, id)) {
                    misc |= MISC_MMAP_BUILD_ID;
                    body = &body_buf;
                    maps.from_table += 1;
                } else if !special_map(t, body) {
                    maps.without += 1;
                }
            } else if t == RECORD_MMAP && !special_map(t, body) {
                maps.without += 1;
            }
        }
        let info = infos
            .get(rec.attr_index)
            .ok_or_else(|| corrupt(Corruption::UnknownAttr(rec.attr_index)))?;
        // Time and CPU of non-sample records from their trailer as the attr's own flags
        // describe it (the parser may have misread them, see [`RawAttr`]).
        //
        // [`RawAttr`]: crate::attrs::RawAttr
        let (mut time, mut cpu) = (time, cpu);
        if t != RECORD_SAMPLE && info.sample_id_all {
            let (tt, cc) = sample_id_trailer(order, info.sample_type, body);
            time = tt.or(time);
            cpu = cc.or(cpu);
        }
        let cpu = cpu.unwrap_or(0);
        if cpu > MAX_CPU {
            // A damaged record: no kernel numbers CPUs this high (NR_CPUS is at most 8192).
            *dropped
                .entry(format!(
                    "records with an impossible CPU number (>{MAX_CPU})"
                ))
                .or_default() += 1;
            continue;
        }
        let (pre, post) = match info.add_id {
            Some(id) if t == RECORD_SAMPLE => (Some(id), None),
            Some(id) if info.sample_id_all => (None, Some(id)),
            _ => (None, None),
        };
        reemit(&mut buf, order, t, misc, pre, body, post).map_err(corrupt)?;
        max_cpu = max_cpu.max(cpu);
        chunks.push(cpu, &buf, time, lost_count(t, body, order));
    }
    Ok(Records {
        chunks: chunks.finish(),
        max_cpu,
        kernel_ref,
        dropped,
        cgroups,
        maps,
    })
}

/// Whether a record of type `t` is a mapping of user code: an MMAP or MMAP2 of a process
/// (not perf's kernel and module maps, pid -1), executable (no `RECORD_MISC_MMAP_DATA`).
fn is_user_map(order: ByteOrder, t: u32, misc: u16, body: &[u8]) -> bool {
    matches!(t, RECORD_MMAP | RECORD_MMAP2)
        && misc & MISC_MMAP_DATA == 0
        && order.u32_at(body, 0).is_some_and(|pid| pid != u32::MAX)
}

/// Whether a user mapping is of no file that has a build id: `[vdso]`, `[vsyscall]`,
/// `//anon` and the like (perf's names of special mappings), or one without a name.
fn special_map(t: u32, body: &[u8]) -> bool {
    let name = mapping_name(t, body);
    name.is_empty() || name.starts_with(b"[") || name.starts_with(b"//")
}

/// The (id, path) of a CGROUP record's body: `{ u64 id; char path[]; }`, the path
/// NUL-terminated and padded to 8 bytes, then the `sample_id` trailer. `None` when the body
/// is too short, the path has no NUL, or it is not an absolute path in UTF-8.
fn cgroup_record(order: ByteOrder, body: &[u8]) -> Option<(u64, String)> {
    let (id, path) = parse_cgroup(body, order)?;
    let path = std::str::from_utf8(path).ok()?;
    path.starts_with('/').then(|| (id, path.to_string()))
}

/// Writes record `t` with `body` to `out` in byte order `order`: its header, the id `pre`
/// before the body and the id `post` after it.
#[inline]
fn reemit(
    out: &mut Vec<u8>,
    order: ByteOrder,
    t: u32,
    misc: u16,
    pre: Option<u64>,
    body: &[u8],
    post: Option<u64>,
) -> Result<(), Corruption> {
    let size = 8 + body.len() + 8 * (usize::from(pre.is_some()) + usize::from(post.is_some()));
    let size = u16::try_from(size).map_err(|_| Corruption::RecordTooLong(size))?;
    out.clear();
    out.extend_from_slice(&order.put32(t));
    out.extend_from_slice(&order.put16(misc));
    out.extend_from_slice(&order.put16(size));
    if let Some(id) = pre {
        out.extend_from_slice(&order.put64(id));
    }
    out.extend_from_slice(body);
    if let Some(id) = post {
        out.extend_from_slice(&order.put64(id));
    }
    Ok(())
}

/// The sample_id trailer of a non-sample record of an attr with `sample_id_all`: (time,
/// cpu), read from the end of the body by the attr's sample type.
fn sample_id_trailer(
    order: ByteOrder,
    sample_type: u64,
    body: &[u8],
) -> (Option<u64>, Option<u32>) {
    parse_sample_id(body, sample_type, order).map_or((None, None), |(s, _)| (s.time, s.cpu))
}

/// The kernel reference symbol of a `RECORD_MMAP`/`MMAP2` body, if it is perf's kernel
/// map (`[kernel.kallsyms]_text`, pid -1): perf stores the symbol's address in `pgoff`.
fn kernel_ref_symbol(order: ByteOrder, t: u32, body: &[u8]) -> Option<KernelRef> {
    if order.u32_at(body, 0)? != u32::MAX {
        return None;
    }
    let pgoff = order.u64_at(body, 24)?;
    let sym = std::str::from_utf8(mapping_name(t, body))
        .ok()?
        .strip_prefix("[kernel.kallsyms]")?;
    (!sym.is_empty() && pgoff != 0).then(|| KernelRef {
        symbol: sym.to_string(),
        address: pgoff,
    })
}

/// A record held back to be put in time order: (sort key, record, time, records lost).
type Pending = (u64, Vec<u8>, Option<u64>, Option<u64>);

/// The chunks being filled, one builder per CPU.
struct Chunks {
    builders: BTreeMap<u32, ChunkBuilder>,
    done: Vec<EncodedChunk>,
    /// When records are put back in time order: the records held, per CPU.
    pending: Option<BTreeMap<u32, Vec<Pending>>>,
}

impl Chunks {
    /// Chunks filled in push order, or, with `reorder`, in time order per CPU.
    fn new(reorder: bool) -> Chunks {
        Chunks {
            builders: BTreeMap::new(),
            done: Vec::new(),
            pending: reorder.then(BTreeMap::new),
        }
    }

    /// Adds a record of `cpu` at `time` reporting `lost` records lost.
    #[inline]
    fn push(&mut self, cpu: u32, rec: &[u8], time: Option<u64>, lost: Option<u64>) {
        match &mut self.pending {
            Some(pending) => {
                // A record without a time sorts with the one before it.
                let q = pending.entry(cpu).or_default();
                let key = time.or_else(|| q.last().map(|r| r.0)).unwrap_or(0);
                q.push((key, rec.to_vec(), time, lost));
            }
            None => self.append(cpu, rec, time, lost),
        }
    }

    /// Appends one record to its CPU's chunk, finishing the chunk when it is full.
    #[inline]
    fn append(&mut self, cpu: u32, rec: &[u8], time: Option<u64>, lost: Option<u64>) {
        let b = self
            .builders
            .entry(cpu)
            .or_insert_with(|| ChunkBuilder::new(cpu));
        // perf's synthesized records (tasks alive at start) carry a zero time: not a time.
        b.push(rec, time.filter(|&t| t != 0));
        if let Some(n) = lost {
            b.add_lost(n);
        }
        if b.len() >= CHUNK_TARGET {
            self.done.extend(b.finish(ZSTD_LEVEL));
        }
    }

    /// All the chunks: the held records in time order per CPU (the ring buffer's order,
    /// restored where the parser sorted records by times it could not read), then each
    /// CPU's last chunk.
    fn finish(mut self) -> Vec<EncodedChunk> {
        for (cpu, mut q) in self.pending.take().unwrap_or_default() {
            q.sort_by_key(|r| r.0);
            for (_, rec, time, lost) in q {
                self.append(cpu, &rec, time, lost);
            }
        }
        for b in self.builders.values_mut() {
            self.done.extend(b.finish(ZSTD_LEVEL));
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_records() {
        let body = |order: ByteOrder, id: u64, path: &[u8]| {
            let mut b = order.put64(id).to_vec();
            b.extend_from_slice(path);
            // Padding, then a sample_id trailer (time, cpu).
            b.resize(b.len().next_multiple_of(8), 0);
            b.extend_from_slice(&[7u8; 16]);
            b
        };
        for order in [ByteOrder::Little, ByteOrder::Big] {
            assert_eq!(
                cgroup_record(order, &body(order, 481, b"/system.slice/a.service\0")),
                Some((481, "/system.slice/a.service".to_string()))
            );
            assert_eq!(
                cgroup_record(order, &body(order, 1, b"/\0")),
                Some((1, "/".to_string()))
            );
        }
        let le = ByteOrder::Little;
        // Too short, no NUL, not a path, not UTF-8.
        assert_eq!(cgroup_record(le, &[1, 2, 3]), None);
        assert_eq!(cgroup_record(le, &le.put64(5)), None);
        assert_eq!(cgroup_record(le, &body(le, 5, b"x\0")), None);
        assert_eq!(cgroup_record(le, &body(le, 5, b"/\xff\0")), None);
    }

    #[test]
    fn kernel_reference_symbol() {
        let mut mmap = Vec::new();
        mmap.extend_from_slice(&u32::MAX.to_le_bytes());
        mmap.extend_from_slice(&u32::MAX.to_le_bytes());
        for v in [0xffffffff81000000u64, 0x1000000, 0xffffffff81000000] {
            mmap.extend_from_slice(&v.to_le_bytes());
        }
        mmap.extend_from_slice(b"[kernel.kallsyms]_text\0\0");
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, RECORD_MMAP, &mmap),
            Some(KernelRef {
                symbol: "_text".to_string(),
                address: 0xffffffff81000000
            })
        );
        // A user mapping, or a body cut short, is not the kernel map.
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, RECORD_MMAP, &mmap[..30]),
            None
        );
        let mut user = mmap.clone();
        user[..4].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, RECORD_MMAP, &user),
            None
        );
        // MMAP2: the name 32 bytes further.
        let mut mmap2 = mmap[..32].to_vec();
        mmap2.extend([0u8; 32]);
        mmap2.extend_from_slice(b"[kernel.kallsyms]_stext\0");
        assert_eq!(
            kernel_ref_symbol(ByteOrder::Little, RECORD_MMAP2, &mmap2).map(|r| r.symbol),
            Some("_stext".to_string())
        );
    }

    #[test]
    fn trailer_time_and_cpu() {
        let st = ioblame_perfrec::SAMPLE_TID
            | ioblame_perfrec::SAMPLE_TIME
            | ioblame_perfrec::SAMPLE_CPU;
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut body = b"comm\0\0\0\0".to_vec();
            body.extend(order.put32(5));
            body.extend(order.put32(6));
            body.extend(order.put64(1234));
            body.extend(order.put32(3));
            body.extend([0u8; 4]);
            assert_eq!(sample_id_trailer(order, st, &body), (Some(1234), Some(3)));
            // No trailer fields, or a body shorter than the trailer.
            assert_eq!(sample_id_trailer(order, 0, &body), (None, None));
            assert_eq!(sample_id_trailer(order, st, &body[..16]), (None, None));
        }
    }

    #[test]
    fn records_written_again_with_ids() {
        let mut out = Vec::new();
        reemit(&mut out, ByteOrder::Big, 9, 1, Some(7), &[0xaa; 8], None).unwrap();
        let mut want = vec![0, 0, 0, 9, 0, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 7];
        want.extend([0xaa; 8]);
        assert_eq!(out, want);
        reemit(&mut out, ByteOrder::Little, 3, 0, None, &[1, 2], Some(7)).unwrap();
        assert_eq!(out, [3, 0, 0, 0, 0, 0, 18, 0, 1, 2, 7, 0, 0, 0, 0, 0, 0, 0]);
        reemit(&mut out, ByteOrder::Little, 3, 0, None, &[1, 2], None).unwrap();
        assert_eq!(out, [3, 0, 0, 0, 0, 0, 10, 0, 1, 2]);
        let e = reemit(
            &mut out,
            ByteOrder::Little,
            9,
            0,
            Some(1),
            &[0; 65528],
            None,
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "a record of 65544 bytes exceeds 65535"
        );
    }

    #[test]
    fn chunks_per_cpu_in_push_or_time_order() {
        let rec = [9, 0, 0, 0, 0, 0, 8, 0];
        for reorder in [false, true] {
            let mut c = Chunks::new(reorder);
            c.push(1, &rec, Some(30), None);
            c.push(1, &rec, None, Some(5));
            c.push(0, &rec, Some(0), None);
            c.push(1, &rec, Some(10), None);
            c.push(1, &rec, Some(20), Some(2));
            let chunks = c.finish();
            let h: Vec<_> = chunks.iter().map(|c| &c.header).collect();
            assert_eq!(h.len(), 2);
            assert_eq!((h[0].cpu, h[0].records, h[0].first_ts), (0, 1, 0));
            assert_eq!((h[1].cpu, h[1].records, h[1].lost), (1, 4, 7));
            let span = (h[1].first_ts, h[1].last_ts);
            assert_eq!(span, if reorder { (10, 30) } else { (30, 20) });
        }
    }

    #[test]
    fn dropped_records_note() {
        let mut r = Records {
            chunks: Vec::new(),
            max_cpu: 0,
            kernel_ref: None,
            dropped: BTreeMap::new(),
            cgroups: BTreeMap::new(),
            maps: MapCounts::default(),
        };
        assert_eq!(r.dropped_note(), None);
        r.dropped.insert(record_name(RECORD_MMAP2), 3);
        r.dropped.insert("PERF_FINISHED_ROUND".into(), 1);
        assert_eq!(
            r.dropped_note().unwrap(),
            "records ioblame does not use were dropped: 3 MMAP2, 1 PERF_FINISHED_ROUND"
        );
    }
}
