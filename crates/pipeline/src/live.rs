//! The analysis of a recording still being written (`ioblame top`): [`Follow`] reads the
//! chunks a running recorder appends to its ring directory and hands on their events in the
//! offline analysis' order, up to the time the recorder says every CPU is flushed to;
//! [`Live`] attributes them as they come, with the same rules and the same selection of IO
//! as [`crate::analyze`], so that a live run's totals at the end are those of the offline
//! analysis of the same files.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioblame_attrib::{Attributor, Dirtied, Io, Tables};
use ioblame_decode::{DecodeStats, Decoder, Event, StreamStats};
use ioblame_format::{Problem, Trace, TraceFile};

use crate::analyze::{conclude, context_of, decoder_problems, Totals};
use crate::diag::Diagnostic;
use crate::{Analysis, Options};

/// How far behind the newest chunk a trace without flush marks (recorded before format 1.6,
/// whose recorder flushed every CPU's chunk at least every second) is taken to be complete.
pub const UNMARKED_LAG: Duration = Duration::from_secs(2);

/// A ring file seen by a [`Follow`].
struct Seen {
    /// Whether it was closed (indexed): it changes no more.
    closed: bool,
}

/// Follows a ring directory a recorder is writing: each [`Follow::read`] takes the chunks
/// appended since the last one, and [`Follow::emit_ready`] hands on, in the offline
/// analysis' order (by time, then CPU, each CPU in record order), the events every CPU is
/// known to be flushed past.
pub struct Follow {
    dir: PathBuf,
    /// The trace as it was when the follow started: its oldest file's header and metadata
    /// describe the capture, as for the offline analysis.
    trace: Trace,
    decoder: Decoder,
    seen: BTreeMap<PathBuf, Seen>,
    /// Per CPU, the sequence number of the next chunk to take.
    next_seq: BTreeMap<u32, u64>,
    /// Per CPU, events decoded and not yet handed on.
    queues: BTreeMap<u32, VecDeque<Event>>,
    /// Every record before this time is read (the recorder's flush marks).
    flushed: u64,
    /// The latest record time of any chunk read (for traces without marks).
    newest: u64,
    /// Whether any file had a flush mark.
    marked: bool,
    /// The time of the last event handed on.
    last_time: u64,
    stats: StreamStats,
    problems: Vec<Problem>,
    /// When the newest file was last seen to change (or a new file to appear).
    last_change: Instant,
    /// The btrfs filesystems and chunk maps of every file read (the recorder writes the
    /// list again when a chunk is allocated or a filesystem mounted), and whether it grew
    /// since [`Follow::take_btrfs`].
    btrfs: Vec<ioblame_format::BtrfsFs>,
    btrfs_grew: bool,
    /// The loop devices and device-mapper targets of every file read (the recorder writes
    /// the lists again when a loop device is set up or a target appears), and whether they
    /// grew since [`Follow::take_layers`].
    loops: Vec<ioblame_format::LoopDevice>,
    dm_targets: Vec<ioblame_format::DmTarget>,
    layers_grew: bool,
    /// Per file and list kind (BTRFS, LOOPS, DM_TARGETS), the offset of the last list
    /// merged.
    lists_seen: BTreeMap<(PathBuf, u16), u64>,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("dir", &self.dir)
            .field("files", &self.seen.len())
            .field("flushed", &self.flushed)
            .finish()
    }
}

/// What one [`Follow::read`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStep {
    /// Chunks taken.
    pub chunks: u64,
    /// Whether the recording looks finished: its newest file is closed and nothing changed
    /// for [`Follow::ENDED_AFTER`].
    pub ended: bool,
}

impl Follow {
    /// How long the newest file must stay closed, with no newer file, before the recording
    /// counts as ended (a roll closes a file and opens the next within milliseconds).
    pub const ENDED_AFTER: Duration = Duration::from_secs(2);

    /// Starts following the ring directory `dir` (its first file must exist).
    pub fn open(dir: &Path) -> Result<Follow, ioblame_format::Error> {
        let trace = Trace::open(dir)?;
        let decoder = Decoder::new(trace.header(), trace.metadata());
        let btrfs = trace.btrfs();
        let (loops, dm_targets) = (trace.loops(), trace.dm_targets());
        let stats = StreamStats {
            decode: DecodeStats {
                per_event: vec![0; decoder.event_count()],
                ..Default::default()
            },
            ..Default::default()
        };
        Ok(Follow {
            dir: dir.to_path_buf(),
            trace,
            decoder,
            seen: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            queues: BTreeMap::new(),
            flushed: 0,
            newest: 0,
            marked: false,
            last_time: 0,
            stats,
            problems: Vec::new(),
            last_change: Instant::now(),
            btrfs,
            btrfs_grew: false,
            loops,
            dm_targets,
            layers_grew: false,
            lists_seen: BTreeMap::new(),
        })
    }

    /// The btrfs filesystems and chunk maps of every file read so far, when they grew since
    /// the last call (a chunk allocated or a filesystem mounted while recording): the
    /// attribution needs them before the IO to the new chunk ([`Live::catch_up`]).
    pub fn take_btrfs(&mut self) -> Option<&[ioblame_format::BtrfsFs]> {
        std::mem::take(&mut self.btrfs_grew).then_some(&self.btrfs[..])
    }

    /// The loop devices and device-mapper targets of every file read so far, when they grew
    /// since the last call (a loop device set up or a dm target created while recording):
    /// the attribution needs them before the IO through the new device
    /// ([`Live::catch_up`]).
    pub fn take_layers(
        &mut self,
    ) -> Option<(&[ioblame_format::LoopDevice], &[ioblame_format::DmTarget])> {
        std::mem::take(&mut self.layers_grew).then_some((&self.loops[..], &self.dm_targets[..]))
    }

    /// Merges the newer LOOPS, DM_TARGETS and BTRFS lists of `file` (at `path`), decoding
    /// only those whose offset was not seen.
    fn merge_lists(&mut self, path: &Path, file: &TraceFile) {
        use ioblame_format::block::kind;
        for k in [kind::BTRFS, kind::LOOPS, kind::DM_TARGETS] {
            let Some(at) = file.latest_offset(k) else {
                continue;
            };
            let key = (path.to_path_buf(), k);
            if self.lists_seen.get(&key) == Some(&at) {
                continue;
            }
            let seen = match k {
                kind::BTRFS => file.btrfs_latest().map(|(at, list)| {
                    self.btrfs_grew |= ioblame_format::merge_btrfs(&mut self.btrfs, &list);
                    at
                }),
                kind::LOOPS => file.loops_latest().map(|(at, list)| {
                    self.layers_grew |= ioblame_format::merge_loops(&mut self.loops, &list);
                    at
                }),
                _ => file.dm_targets_latest().map(|(at, list)| {
                    self.layers_grew |=
                        ioblame_format::merge_dm_targets(&mut self.dm_targets, &list);
                    at
                }),
            };
            if let Some(at) = seen {
                self.lists_seen.insert(key, at);
            }
        }
    }

    /// The trace as opened (its header and metadata describe the capture).
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The decoder of the trace's records.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// What reading met so far: chunks, bytes, damage, event counts.
    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    /// Every record before this time (ns, the trace's clock) has been read.
    pub fn flushed(&self) -> u64 {
        if self.marked {
            self.flushed
        } else {
            self.newest.saturating_sub(UNMARKED_LAG.as_nanos() as u64)
        }
    }

    /// Whether the recorder writes flush marks (format 1.6); without them the follow lags
    /// [`UNMARKED_LAG`] behind the newest chunk.
    pub fn marked(&self) -> bool {
        self.marked
    }

    /// Damage and gaps met since the last call (chunks deleted by the ring's size cap before
    /// they were read, damaged chunks, unreadable files).
    pub fn take_problems(&mut self) -> Vec<Problem> {
        std::mem::take(&mut self.problems)
    }

    /// Reads the chunks appended since the last call: new ring files, and what the newest
    /// files gained.
    pub fn read(&mut self) -> Result<ReadStep, ioblame_format::Error> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(|source| ioblame_format::Error::Io {
                path: self.dir.clone(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "iob"))
            .collect();
        // In ring order: `ioblame-NNNNNN.iob`, a seventh digit from index 1000000 on.
        names.sort_by(|a, b| {
            let (a, b) = (a.as_os_str(), b.as_os_str());
            a.len().cmp(&b.len()).then(a.cmp(b))
        });
        // Files deleted by the ring's size cap are forgotten.
        self.seen.retain(|p, _| names.contains(p));
        self.lists_seen.retain(|(p, _), _| names.contains(p));
        let mut step = ReadStep::default();
        let mut changed = false;
        let trace_id = self.trace.header().trace_id;
        for path in &names {
            if self.seen.get(path).is_some_and(|s| s.closed) {
                continue;
            }
            let file = match TraceFile::open(path) {
                Ok(f) => f,
                Err(e) => {
                    // A file being created has no header yet; it is read next time.
                    if !self.seen.contains_key(path)
                        && std::fs::metadata(path).is_ok_and(|m| m.len() > 4096)
                    {
                        self.problems.push(Problem {
                            path: path.clone(),
                            offset: 0,
                            what: format!("unreadable, skipped: {e}"),
                        });
                        self.seen.insert(path.clone(), Seen { closed: true });
                    }
                    continue;
                }
            };
            if file.header().trace_id != trace_id {
                self.seen.insert(path.clone(), Seen { closed: true });
                continue;
            }
            if !self.seen.contains_key(path) {
                changed = true;
            }
            // Written before the flush mark of the round that found them (so before the
            // events up to that mark are handed on). Only a list not seen yet is decoded.
            self.merge_lists(path, &file);
            let n = self.take_chunks(&file);
            changed |= n > 0;
            step.chunks += n;
            if let Some(t) = file.flushed() {
                self.marked = true;
                self.flushed = self.flushed.max(t);
            }
            self.seen.insert(
                path.clone(),
                Seen {
                    closed: file.indexed(),
                },
            );
        }
        let newest_closed = names
            .last()
            .is_some_and(|p| self.seen.get(p).is_some_and(|s| s.closed));
        if changed {
            self.last_change = Instant::now();
        }
        step.ended = newest_closed && self.last_change.elapsed() >= Self::ENDED_AFTER;
        Ok(step)
    }

    /// Decodes the chunks of `file` not taken yet; returns how many.
    fn take_chunks(&mut self, file: &TraceFile) -> u64 {
        let mut n = 0;
        for &(offset, h) in file.chunks() {
            let next = self.next_seq.entry(h.cpu).or_insert(0);
            if h.seq < *next {
                continue;
            }
            if h.seq > *next {
                let why = if *next == 0 && file.header().file_index > 0 {
                    "older ring files were deleted by the size cap"
                } else {
                    "deleted by the ring's size cap before they were read, or missing"
                };
                self.problems.push(Problem {
                    path: file.path().to_path_buf(),
                    offset: 0,
                    what: format!(
                        "cpu {}: chunks {}..{} are not in the trace ({why})",
                        h.cpu, next, h.seq
                    ),
                });
            }
            let Some(after) = h.seq.checked_add(1) else {
                self.problems.push(Problem {
                    path: file.path().to_path_buf(),
                    offset,
                    what: format!(
                        "cpu {}: chunk sequence number {} is not valid; skipped",
                        h.cpu, h.seq
                    ),
                });
                continue;
            };
            *next = after;
            n += 1;
            self.stats.chunks += 1;
            self.newest = self.newest.max(h.last_ts);
            match file.decompress_at(offset) {
                Ok(chunk) => {
                    self.stats.bytes += chunk.data.len() as u64;
                    let d = self.decoder.decode_chunk_into(&chunk, Vec::new());
                    self.stats.decode.merge(&d.stats);
                    self.queues.entry(h.cpu).or_default().extend(d.events);
                }
                Err(e) => self.stats.damaged.push(ioblame_decode::DamagedChunk {
                    cpu: h.cpu,
                    seq: h.seq,
                    error: e.to_string(),
                }),
            }
        }
        n
    }

    /// Hands `f` every event read whose time is below [`Follow::flushed`], in the offline
    /// analysis' order; returns how many.
    pub fn emit_ready(&mut self, f: impl FnMut(&Event)) -> u64 {
        let limit = self.flushed();
        self.emit(Some(limit), f)
    }

    /// Hands `f` every event read (the recording has ended).
    pub fn emit_all(&mut self, f: impl FnMut(&Event)) -> u64 {
        self.emit(None, f)
    }

    /// Hands `f` the events read whose time is below `limit` (which must not exceed what
    /// is complete: [`Follow::flushed`]).
    #[cfg(test)]
    pub(crate) fn emit_below(&mut self, limit: u64, f: impl FnMut(&Event)) -> u64 {
        self.emit(Some(limit), f)
    }

    /// The k-way merge of the per-CPU queues by `(time, cpu)` of their fronts (the offline
    /// stream's, `ioblame_decode::for_each_event`), stopping at the first front not below
    /// `limit` (none: every event): a CPU with nothing queued has nothing below it left to
    /// come.
    fn emit(&mut self, limit: Option<u64>, mut f: impl FnMut(&Event)) -> u64 {
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> = self
            .queues
            .iter()
            .filter_map(|(&cpu, q)| q.front().map(|e| Reverse((e.time, cpu))))
            .collect();
        let mut n = 0;
        while let Some(Reverse((t, cpu))) = heap.pop() {
            if limit.is_some_and(|l| t >= l) {
                break;
            }
            let Some(q) = self.queues.get_mut(&cpu) else {
                break;
            };
            let Some(ev) = q.pop_front() else {
                continue;
            };
            if ev.time < self.last_time {
                self.stats.out_of_order += 1;
            }
            self.last_time = ev.time;
            n += 1;
            f(&ev);
            if let Some(e) = q.front() {
                heap.push(Reverse((e.time, cpu)));
            }
        }
        self.stats.events += n;
        n
    }

    /// The time of the last event handed on (ns, the trace's clock).
    pub fn last_time(&self) -> u64 {
        self.last_time
    }

    /// Events read and not yet handed on.
    pub fn queued(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }
}

/// The attribution of a live recording: events go in one by one ([`Live::push`]), the IOs
/// charged on the selected devices and in the scope, and what was dirtied, come out
/// ([`Live::take`]), and [`Live::finish`] ends it as [`crate::analyze`] ends a whole run.
pub struct Live<'a> {
    attr: Attributor,
    totals: Totals<'a>,
    opts: Options<'a>,
    diagnostics: Vec<Diagnostic>,
    buf: Vec<Io>,
    ios: Vec<Io>,
}

impl std::fmt::Debug for Live<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("attr", &self.attr).finish()
    }
}

impl<'a> Live<'a> {
    /// The attribution of the trace `follow` reads, selecting IO as `opts` says.
    pub fn new(follow: &Follow, opts: &Options<'a>) -> Live<'a> {
        let mut diagnostics = decoder_problems(follow.decoder());
        let ctx = context_of(follow.trace(), follow.decoder(), opts, &mut diagnostics);
        let mut attr = Attributor::new(ctx);
        attr.log_dirtied();
        Live {
            attr,
            totals: Totals::new(opts),
            opts: *opts,
            diagnostics,
            buf: Vec::new(),
            ios: Vec::new(),
        }
    }

    /// Hands on to the attribution what `follow` read: the events ready
    /// ([`Follow::emit_ready`]), or every event at the end (`end`: [`Follow::emit_all`]),
    /// after the newer btrfs chunk maps, loop devices and dm targets the files hold
    /// ([`Follow::take_btrfs`], [`Follow::take_layers`]). Returns the events handed on.
    pub fn catch_up(&mut self, follow: &mut Follow, end: bool) -> u64 {
        if let Some(t) = follow.take_btrfs() {
            self.attr.update_btrfs(t);
        }
        if let Some((loops, dm)) = follow.take_layers() {
            self.attr.update_layers(loops, dm);
        }
        if end {
            follow.emit_all(|ev| self.push(ev))
        } else {
            follow.emit_ready(|ev| self.push(ev))
        }
    }

    /// Attributes one event (in the order [`Follow`] hands them on).
    pub fn push(&mut self, ev: &Event) {
        self.attr.push(ev);
        self.attr.drain_ios_into(&mut self.buf);
        if !self.buf.is_empty() {
            let tables = self.attr.tables();
            for io in self.buf.drain(..) {
                if self.totals.count(&io, tables) {
                    self.ios.push(io);
                }
            }
        }
    }

    /// The IOs charged and counted since the last call (on a selected device, in the
    /// scope; the recorder's own included, their act flagged), and what was dirtied (every
    /// role's: the caller selects) but in the last moments, which may change yet
    /// ([`Attributor::drain_dirtied_into`]): `end`, once every event was pushed, takes
    /// those too.
    pub fn take(&mut self, ios: &mut Vec<Io>, dirtied: &mut Vec<Dirtied>, end: bool) {
        ios.append(&mut self.ios);
        self.attr.drain_dirtied_into(dirtied, end);
    }

    /// The tables so far.
    pub fn tables(&self) -> &Tables {
        self.attr.tables()
    }

    /// The frames of a [`Dirtied`]'s stack.
    pub fn stack_frames(&self, id: u32) -> &[u64] {
        self.attr.stack_frames(id)
    }

    /// Ends the attribution once `follow` handed on every event ([`Follow::emit_all`]):
    /// the IOs the end left pending go to `on_io` (counted as [`Live::take`]'s), and the
    /// result is [`crate::analyze`]'s for the same files.
    pub fn finish(mut self, follow: &mut Follow, mut on_io: impl FnMut(&Io, &Tables)) -> Analysis {
        let done = self.attr.finish();
        for io in &done.ios {
            if self.totals.count(io, &done.tables) {
                on_io(io, &done.tables);
            }
        }
        let mut diagnostics = self.diagnostics;
        diagnostics.extend(follow.take_problems().into_iter().map(Diagnostic::Trace));
        conclude(
            done,
            self.totals,
            follow.stats().clone(),
            diagnostics,
            follow.trace(),
            &self.opts,
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::Dir;
    use ioblame_counters::DevSelection;

    use crate::{analyze, open_trace, symbols_of, ResolvedScope};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(name)
            .join("trace")
    }

    /// Following a finished recording, its events handed on in several steps (as marks
    /// would let them), gives the offline analysis' result: the same tables, totals, summary
    /// and event count, on every real ioblame fixture.
    #[test]
    fn a_followed_trace_is_analysed_as_offline() {
        for name in [
            "ext4-two-writers",
            "xfs-two-writers",
            "ext4-direct",
            "ext4-mmap",
            "ext4-readahead",
            "btrfs-writers",
        ] {
            let dir = fixture(name);
            let input = open_trace(std::slice::from_ref(&dir), None, &mut Vec::new()).unwrap();
            let (sym, _) = symbols_of(input.trace());
            let devs = DevSelection::all();
            let scope = ResolvedScope::all();
            let opts = Options {
                symbols: &sym,
                devs: &devs,
                show_recorder: false,
                scope: &scope,
                user_symbols: &Default::default(),
            };
            let mut offline_ios = Vec::new();
            let offline = analyze(&input, &opts, |io, _| offline_ios.push(io.clone()), |_| {});

            let mut follow = Follow::open(&dir).unwrap();
            let mut live = Live::new(&follow, &opts);
            let step = follow.read().unwrap();
            assert!(step.chunks > 0, "{name}");
            // The older fixtures predate flush marks; a finished recording's marks hold
            // all of it, so the steps below see the same events either way.
            assert_eq!(follow.marked(), name == "btrfs-writers", "{name}");
            let (first, last) = {
                let c = follow.trace().chunks();
                (
                    c.iter().map(|c| c.header.first_ts).min().unwrap(),
                    c.iter().map(|c| c.header.last_ts).max().unwrap(),
                )
            };
            let mut ios = Vec::new();
            let mut dirtied = Vec::new();
            let mut handed = 0;
            for k in 1..8 {
                let limit = first + (last - first) / 8 * k;
                handed += follow.emit_below(limit, |ev| live.push(ev));
                live.take(&mut ios, &mut dirtied, false);
            }
            handed += follow.emit_all(|ev| live.push(ev));
            live.take(&mut ios, &mut dirtied, true);
            let done = live.finish(&mut follow, |io, _| ios.push(io.clone()));
            assert_eq!(handed, offline.stream.events, "{name}");
            assert_eq!(done.stream.events, offline.stream.events, "{name}");
            assert_eq!(done.tables, offline.tables, "{name}");
            assert_eq!(done.summary, offline.summary, "{name}");
            assert_eq!(ios, offline_ios, "{name}");
            assert_eq!(follow.queued(), 0, "{name}");
            assert!(follow.take_problems().is_empty(), "{name}");
            // What was dirtied is told, and no more than was written back and left dirty.
            let written: u64 = offline
                .tables
                .totals
                .iter()
                .map(|t| t.bytes[Dir::W.index()])
                .sum();
            let dirtied_bytes: u64 = dirtied.iter().map(|d| d.bytes).sum();
            if name.contains("two-writers") {
                assert!(dirtied_bytes > 0, "{name}");
                assert!(
                    dirtied_bytes <= written + offline.summary.total_bytes(),
                    "{name}: {dirtied_bytes} dirtied, {written} written"
                );
            }
        }
    }

    /// The offset of the last block of `kind` in a trace file's bytes (walking its blocks:
    /// a 16-byte preamble, then each a 24-byte header, `IOBk`, kind, flags, payload length).
    fn last_block(bytes: &[u8], kind: u16) -> Option<usize> {
        let (mut at, mut last) = (16, None);
        while at + 24 <= bytes.len() && bytes[at..at + 4] == *b"IOBk" {
            let k = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
            let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            if k == kind {
                last = Some(at);
            }
            at += 24 + len;
        }
        last
    }

    /// A chunk allocated while the recording is followed: the recorder writes the BTRFS list
    /// again (the `btrfs-writers` fixture's second one names the data chunk writerF's
    /// transaction allocated). A follower that started before it takes it when it appears,
    /// and the IO on that chunk is linked to its dirtiers as offline, not lost.
    #[test]
    fn a_chunk_allocated_while_followed_is_taken() {
        let src = fixture("btrfs-writers");
        let input = open_trace(std::slice::from_ref(&src), None, &mut Vec::new()).unwrap();
        let (sym, _) = symbols_of(input.trace());
        let devs = DevSelection::all();
        let scope = ResolvedScope::all();
        let opts = Options {
            symbols: &sym,
            devs: &devs,
            show_recorder: false,
            scope: &scope,
            user_symbols: &Default::default(),
        };
        let offline = analyze(&input, &opts, |_, _| {}, |_| {});

        // The recording as a follower found it before the second BTRFS list was written.
        let bytes = std::fs::read(src.join("ioblame-000000.iob")).unwrap();
        let cut = last_block(&bytes, 0x20).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ioblame-000000.iob");
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut follow = Follow::open(dir.path()).unwrap();
        let chunks_before: usize = follow.trace().btrfs().iter().map(|f| f.chunks.len()).sum();
        let mut live = Live::new(&follow, &opts);
        follow.read().unwrap();
        assert!(follow.take_btrfs().is_none());
        // The rest is written; the follower reads it, then hands the events on.
        std::fs::write(&path, &bytes).unwrap();
        follow.read().unwrap();
        let grown: usize = follow.btrfs.iter().map(|f| f.chunks.len()).sum();
        assert!(
            grown > chunks_before,
            "{grown} chunks, {chunks_before} before"
        );
        live.catch_up(&mut follow, true);
        assert!(follow.take_btrfs().is_none());
        let done = live.finish(&mut follow, |_, _| {});
        assert_eq!(done.summary, offline.summary);
        assert_eq!(done.tables, offline.tables);
    }
}
