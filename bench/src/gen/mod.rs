//! A deterministic generator of large, realistic ioblame traces, written to disk as it goes.
//!
//! The simulated host: `cpus` CPUs, three disks (`sda`, `sdb`, `nvme0n1`) with ext4, `tasks`
//! long-lived tasks (databases, JVM workers, copies, ...) of which one in a few hundred
//! operations exits and is replaced by a freshly forked and exec'd one, a flusher and a jbd2
//! thread. The tasks do, over `files` files per disk:
//!
//! * buffered writes: per `write(2)` a jbd2 handle and (once per file) the inode dirtied, then
//!   per page a page-cache add (new pages), `writeback_dirty_folio` and `block_dirty_buffer`
//!   (delalloc), with the task's kernel stack; the flusher later writes the dirty ranges back
//!   with the whole ext4 writeback sequence (writepages, da_write_folios, map_blocks
//!   enter/exit, sb mark/clear writeback) and bios that are queued, back-merged, got,
//!   inserted, issued and completed;
//! * direct IO: iomap dio begin, dstmap, the task's own bios, dio complete;
//! * readahead: sync/async ra, ra_order, page-cache adds, a readahead bio;
//! * fsync-like journal commits by jbd2 (start, flushing, logging, journal bio, end);
//! * page-cache eviction: the simulated host caches 4 GiB; kswapd evicts the oldest pages
//!   (`mm_filemap_delete_from_page_cache`) as new ones come in.
//!
//! Up to 16 requests are in flight per disk and complete slightly out of issue order. Kernel
//! stacks are 10 to 28 frames deep and come from a few hundred distinct code paths inside a
//! kallsyms table of 60,000 symbols. Event payloads are the 6.18 tracefs formats of the
//! event registry (`crates/events/formats`), records are the capture's sample layout, chunks
//! are zstd compressed ring files. Same options, same bytes.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context as _, Result};
use ioblame_decode::synth::{builtin_format, TraceBuilder, Val};
use ioblame_format::{BlockDevice, ByteOrder, Kallsyms, RingOptions, RingWriter};

mod block;
mod kernel;
mod rng;

use kernel::{kallsyms, Stacks};
use rng::Rng;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Events (records) to write, at least.
    pub events: u64,
    /// Seed of the generator.
    pub seed: u64,
    /// CPUs of the simulated host.
    pub cpus: u32,
    /// Tasks doing IO at any time.
    pub tasks: u32,
    /// Files per device.
    pub files: u64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            events: 5_000_000,
            seed: 1,
            cpus: 4,
            tasks: 300,
            files: 2000,
        }
    }
}

/// (name, major, minor, bytes).
const DEVS: [(&str, u32, u32, u64); 3] = [
    ("sda", 8, 0, 1 << 34),
    ("sdb", 8, 16, 1 << 33),
    ("nvme0n1", 259, 0, 1 << 35),
];
const BDI: [&str; 3] = ["8:0", "8:16", "259:0"];
/// ext4's delalloc buffer_head block number sentinel, as `block_dirty_buffer` reports it.
const DELALLOC_BLOCK: u64 = u64::MAX - 65535;

fn kdev(d: usize) -> u64 {
    ((DEVS[d].1 as u64) << 20) | DEVS[d].2 as u64
}

/// Declares the events of the trace, in trace order: [`E`], whose variants index [`EVENTS`],
/// the registry names of those events, and [`CALLCHAIN`], whether each carries a kernel
/// stack (as the registry says, checked when compiling: a name the event registry lacks
/// does not compile).
macro_rules! trace_events {
    ($($v:ident = $name:literal,)*) => {
        /// Index of each event in [`EVENTS`] (and in the trace).
        #[derive(Clone, Copy)]
        #[repr(u16)]
        #[allow(dead_code)] // every variant is an index into EVENTS; not all are named in the code
        enum E {
            $($v,)*
        }

        /// The registry name of each event of the trace, by [`E`].
        const EVENTS: &[&str] = &[$($name,)*];

        /// Whether each event of the trace carries a callchain, by [`E`].
        const CALLCHAIN: &[bool] = &[$(
            match ioblame_events::find($name) {
                Some(d) => d.callchain,
                None => panic!(concat!($name, " is not in the event registry")),
            },
        )*];
    };
}

// Every event of the trace: the capture's default set, minus the ones this workload never
// fires.
trace_events! {
    BioQueue = "block:block_bio_queue",
    BioBackmerge = "block:block_bio_backmerge",
    GetRq = "block:block_getrq",
    RqInsert = "block:block_rq_insert",
    RqIssue = "block:block_rq_issue",
    IoStart = "block:block_io_start",
    RqComplete = "block:block_rq_complete",
    IoDone = "block:block_io_done",
    DirtyBuffer = "block:block_dirty_buffer",
    DirtyFolio = "writeback:writeback_dirty_folio",
    MarkInodeDirty = "writeback:writeback_mark_inode_dirty",
    DirtyInodeStart = "writeback:writeback_dirty_inode_start",
    DirtyInode = "writeback:writeback_dirty_inode",
    WbStart = "writeback:writeback_start",
    WbWritten = "writeback:writeback_written",
    WbPagesWritten = "writeback:writeback_pages_written",
    SingleInodeStart = "writeback:writeback_single_inode_start",
    SingleInode = "writeback:writeback_single_inode",
    SbMarkWb = "writeback:sb_mark_inode_writeback",
    SbClearWb = "writeback:sb_clear_inode_writeback",
    AddToPageCache = "filemap:mm_filemap_add_to_page_cache",
    DeleteFromPageCache = "filemap:mm_filemap_delete_from_page_cache",
    SyncRa = "readahead:page_cache_sync_ra",
    AsyncRa = "readahead:page_cache_async_ra",
    RaOrder = "readahead:page_cache_ra_order",
    Writepages = "ext4:ext4_writepages",
    WritepagesResult = "ext4:ext4_writepages_result",
    DaWriteFoliosStart = "ext4:ext4_da_write_folios_start",
    DaWriteFoliosEnd = "ext4:ext4_da_write_folios_end",
    MapBlocksEnter = "ext4:ext4_ext_map_blocks_enter",
    MapBlocksExit = "ext4:ext4_ext_map_blocks_exit",
    IterDstmap = "iomap:iomap_iter_dstmap",
    DioBegin = "iomap:iomap_dio_rw_begin",
    DioComplete = "iomap:iomap_dio_complete",
    HandleStart = "jbd2:jbd2_handle_start",
    StartCommit = "jbd2:jbd2_start_commit",
    CommitFlushing = "jbd2:jbd2_commit_flushing",
    CommitLogging = "jbd2:jbd2_commit_logging",
    EndCommit = "jbd2:jbd2_end_commit",
    Fork = "sched:sched_process_fork",
    Exec = "sched:sched_process_exec",
    Exit = "sched:sched_process_exit",
}

/// A request in flight: completes after a few later operations.
struct Pending {
    d: usize,
    sector: u64,
    nr: u64,
    rwbs: &'static str,
    comm: String,
    /// The writeback of an inode to finish with it: (ino, first page, pages).
    wb: Option<(u64, u64, u64)>,
}

/// A task doing IO.
struct Task {
    pid: u32,
    comm: String,
    /// Index into the stack tables (its code paths).
    paths: usize,
    /// Its disk and first file.
    d: usize,
    file0: u64,
}

/// The generator's state.
struct Gen {
    t: TraceBuilder,
    w: RingWriter,
    rng: Rng,
    time: u64,
    records: u64,
    since_flush: u64,
    cpus: u32,
    inflight: Vec<std::collections::VecDeque<Pending>>,
    next_block: [u64; 3],
    journal_block: u64,
    stack_buf: Vec<u64>,
    /// The simulated page cache, oldest first: (disk, ino, index, pfn).
    cached: std::collections::VecDeque<(usize, u64, u64, u64)>,
    /// Pages dirty and not yet written back: (disk, ino, index). A kernel never evicts
    /// them (it writes them first), so kswapd passes over them.
    dirty_pages: std::collections::HashSet<(usize, u64, u64)>,
}

/// The payload of `mm_filemap_add_to_page_cache` and `_delete_from_page_cache` for a
/// one-page folio.
fn page_fields(d: usize, ino: u64, index: u64, pfn: u64) -> [(&'static str, Val<'static>); 5] {
    [
        ("pfn", Val::U(pfn)),
        ("i_ino", Val::U(ino)),
        ("index", Val::U(index)),
        ("s_dev", Val::U(kdev(d))),
        ("order", Val::U(0)),
    ]
}

/// `I_DIRTY_PAGES` as the simulated 6.18 kernel numbers it.
const I_DIRTY_PAGES: u64 = 0x40;
const FLUSHER: u32 = 60;
const JBD2: u32 = 70;
const KSWAPD: u32 = 90;
/// Pages the simulated host caches (4 GiB): older ones are evicted by kswapd, as the
/// capture's `mm_filemap_delete_from_page_cache` events show on a real host.
const PAGE_CACHE_PAGES: usize = 1 << 20;

impl Gen {
    fn tick(&mut self) -> u64 {
        self.time += 40 + self.rng.below(160);
        self.time
    }

    fn counted(&mut self) -> Result<()> {
        self.records += 1;
        self.since_flush += 1;
        if self.since_flush >= 4096 * self.cpus as u64 {
            self.since_flush = 0;
            self.t.flush_all();
            for c in self.t.take_chunks() {
                self.w.write_chunk(&c)?;
            }
        }
        Ok(())
    }

    fn sample(
        &mut self,
        cpu: u32,
        e: E,
        pid: u32,
        stack: &[u64],
        f: &[(&str, Val<'_>)],
    ) -> Result<()> {
        let time = self.tick();
        let id = e as u16;
        let stack = if CALLCHAIN[id as usize] { stack } else { &[] };
        self.t
            .sample(cpu % self.cpus, id, time, pid, pid, stack, f)
            .with_context(|| format!("encoding {}", EVENTS[id as usize]))?;
        self.counted()
    }

    fn comm(&mut self, cpu: u32, pid: u32, comm: &str, exec: bool) -> Result<()> {
        let time = self.tick();
        self.t.comm(cpu % self.cpus, time, pid, pid, comm, exec);
        self.counted()
    }

    fn fork_exit(&mut self, cpu: u32, fork: bool, ids: (u32, u32, u32, u32)) -> Result<()> {
        let time = self.tick();
        self.t.fork_exit(cpu % self.cpus, time, fork, ids);
        self.counted()
    }
}

/// Writes a trace of at least `o.events` records into directory `dir`; returns the records.
pub fn generate(dir: &Path, o: &GenOptions) -> Result<u64> {
    let mut t = TraceBuilder::new(ByteOrder::native(), o.cpus);
    for (&n, &callchain) in EVENTS.iter().zip(CALLCHAIN) {
        let fmt = builtin_format(n).with_context(|| format!("no format for {n}"))?;
        t.add_event(n, fmt, callchain)?;
    }
    {
        let m = t.metadata_mut();
        m.kallsyms = Some(Kallsyms {
            text: kallsyms(),
            restricted: false,
        });
        m.block_devices = DEVS
            .iter()
            .map(|&(name, major, minor, size)| BlockDevice {
                name: name.into(),
                major,
                minor,
                size_sectors: size / 512,
                logical_block_size: 512,
                ..Default::default()
            })
            .collect();
    }
    let w = RingWriter::create(
        dir,
        t.header().clone(),
        t.metadata().clone(),
        RingOptions {
            file_size: 256 << 20,
            max_size: 0,
        },
    )?;
    let mut rng = Rng(o.seed);
    let st = Stacks::new(&mut rng);
    let mut g = Gen {
        t,
        w,
        rng,
        time: 1_000_000_000,
        records: 0,
        since_flush: 0,
        cpus: o.cpus,
        inflight: (0..DEVS.len()).map(|_| Default::default()).collect(),
        next_block: [100_000; 3],
        journal_block: 0,
        stack_buf: Vec::new(),
        cached: Default::default(),
        dirty_pages: Default::default(),
    };
    let kinds = [
        "postgres", "java", "dd", "rsync", "nginx", "mysqld", "cp", "tar",
    ];
    let mut next_pid = 1000u32;
    let mut new_task = |g: &mut Gen, i: u32| -> Task {
        let pid = next_pid;
        next_pid += 1 + g.rng.below(3) as u32;
        let k = g.rng.below(kinds.len() as u64) as usize;
        Task {
            pid,
            comm: format!("{}-{}", kinds[k], i),
            paths: g.rng.below(1 << 20) as usize,
            d: if g.rng.chance(2) {
                2
            } else {
                g.rng.below(2) as usize
            },
            file0: 12 + g.rng.below(o.files),
        }
    };
    let mut tasks: Vec<Task> = Vec::new();
    for i in 0..o.tasks {
        let tk = new_task(&mut g, i);
        g.comm(tk.pid, tk.pid, &tk.comm, true)?;
        tasks.push(tk);
    }
    g.comm(0, FLUSHER, "kworker/u8:3-flush-8:0", false)?;
    g.comm(1, JBD2, "jbd2/sda1-8", false)?;
    g.comm(2, KSWAPD, "kswapd0", false)?;
    // Dirty pages waiting for writeback: (dev, ino, first page, pages).
    let mut dirty: Vec<(usize, u64, u64, u64)> = Vec::new();
    let mut ops = 0u64;
    let mut born = o.tasks;
    while g.records < o.events {
        ops += 1;
        let ti = g.rng.below(tasks.len() as u64) as usize;
        let (pid, paths, file0, home) = {
            let tk = &tasks[ti];
            (tk.pid, tk.paths, tk.file0, tk.d)
        };
        let comm = tasks[ti].comm.clone();
        let cpu = if g.rng.chance(8) {
            g.rng.below(o.cpus as u64) as u32
        } else {
            pid % o.cpus
        };
        // Each task works on a few files (a database's tables, a log, a copy's source and
        // target), mostly on its disk.
        let d = if g.rng.chance(8) {
            g.rng.below(3) as usize
        } else {
            home
        };
        let ino = 12 + (file0 + g.rng.below(6)) % o.files;
        let sdev = Val::U(kdev(d));
        let path = |v: &Vec<Vec<u64>>, r: &mut Rng| (paths + r.below(3) as usize) % v.len();
        match g.rng.below(20) {
            // Buffered write of 1..16 pages.
            0..=11 => {
                let pages = 1 + g.rng.below(16);
                let first = g.rng.below(8192);
                let p = path(&st.write, &mut g.rng);
                g.sample(
                    cpu,
                    E::HandleStart,
                    pid,
                    &st.handle[p],
                    &[
                        ("dev", sdev),
                        ("tid", Val::U(ops / 200)),
                        ("type", Val::U(2)),
                        ("line_no", Val::U(6043)),
                        ("requested_blocks", Val::I(2)),
                    ],
                )?;
                if g.rng.chance(4) {
                    let f = [
                        ("name", Val::Str(BDI[d])),
                        ("ino", Val::U(ino)),
                        ("state", Val::U(0)),
                        ("flags", Val::U(1)),
                    ];
                    g.sample(cpu, E::DirtyInodeStart, pid, &[], &f)?;
                    g.sample(cpu, E::MarkInodeDirty, pid, &st.inode[p], &f)?;
                    g.sample(cpu, E::DirtyInode, pid, &[], &f)?;
                }
                for pg in first..first + pages {
                    if g.rng.chance(2) {
                        g.cache_page(cpu, pid, d, ino, pg)?;
                    }
                    g.dirty_pages.insert((d, ino, pg));
                    g.sample(
                        cpu,
                        E::DirtyFolio,
                        pid,
                        &st.write[p],
                        &[
                            ("name", Val::Str(BDI[d])),
                            ("ino", Val::U(ino)),
                            ("index", Val::U(pg)),
                        ],
                    )?;
                    g.sample(
                        cpu,
                        E::DirtyBuffer,
                        pid,
                        &st.buffer[p],
                        &[
                            ("dev", sdev),
                            ("sector", Val::U(DELALLOC_BLOCK)),
                            ("size", Val::U(4096)),
                        ],
                    )?;
                }
                dirty.push((d, ino, first, pages));
            }
            // Direct IO of 4 KiB..512 KiB.
            12..=15 => {
                let nr = 8u64 << g.rng.below(8);
                let pos = g.rng.below(1 << 18) * 4096;
                let rwbs = if g.rng.chance(2) { "WS" } else { "R" };
                let p = path(&st.dio, &mut g.rng);
                g.stack_buf.clone_from(&st.dio[p]);
                let stack = std::mem::take(&mut g.stack_buf);
                let f = [
                    ("dev", sdev),
                    ("ino", Val::U(ino)),
                    ("isize", Val::U(1 << 30)),
                    ("pos", Val::U(pos)),
                    ("count", Val::U(nr * 512)),
                ];
                g.sample(cpu, E::DioBegin, pid, &[], &f)?;
                let blk = g.alloc(d, nr / 8);
                g.sample(
                    cpu,
                    E::IterDstmap,
                    pid,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("addr", Val::U(blk * 4096)),
                        ("offset", Val::U(pos)),
                        ("length", Val::U(nr * 512)),
                        ("type", Val::U(2)),
                        ("flags", Val::U(0x1)),
                        ("bdev", sdev),
                    ],
                )?;
                g.request(cpu, pid, &comm, &stack, d, blk * 8, nr, rwbs, false, None)?;
                g.stack_buf = stack;
                g.sample(
                    cpu,
                    E::DioComplete,
                    pid,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("isize", Val::U(1 << 30)),
                        ("pos", Val::U(pos)),
                        ("ret", Val::U(nr * 512)),
                    ],
                )?;
            }
            // Readahead of 4..32 pages.
            _ => {
                let pages = 4u64 << g.rng.below(4);
                let index = g.rng.below(1 << 14) * pages;
                let p = path(&st.ra, &mut g.rng);
                g.stack_buf.clone_from(&st.ra[p]);
                let stack = std::mem::take(&mut g.stack_buf);
                let ra = [
                    ("i_ino", Val::U(ino)),
                    ("s_dev", sdev),
                    ("index", Val::U(index)),
                    ("order", Val::U(0)),
                    ("size", Val::U(pages)),
                    ("async_size", Val::U(pages / 2)),
                    ("ra_pages", Val::U(32)),
                    ("req_count", Val::U(pages)),
                ];
                let e = if g.rng.chance(2) {
                    E::SyncRa
                } else {
                    E::AsyncRa
                };
                g.sample(cpu, e, pid, &[], &ra)?;
                g.sample(cpu, E::RaOrder, pid, &[], &ra[..7])?;
                for pg in index..index + pages {
                    g.cache_page(cpu, pid, d, ino, pg)?;
                }
                let blk = g.alloc(d, pages);
                g.request(
                    cpu,
                    pid,
                    &comm,
                    &stack,
                    d,
                    blk * 8,
                    pages * 8,
                    "RA",
                    false,
                    None,
                )?;
                g.stack_buf = stack;
            }
        }
        // Writeback by the flusher every ~40 operations: every dirty range, one request each.
        if ops % 40 == 0 && !dirty.is_empty() {
            let reason = (ops / 40 % 3) as i64; // background, vmscan, sync
            let batch = std::mem::take(&mut dirty);
            let work = [
                ("name", Val::Str("8:0")),
                ("nr_pages", Val::U(1024)),
                ("sb_dev", Val::U(0)),
                ("for_background", Val::I((reason == 0) as i64)),
                ("reason", Val::I(reason)),
            ];
            g.sample(0, E::WbStart, FLUSHER, &[], &work)?;
            let stack = st.wb[(ops as usize / 40) % st.wb.len()].clone();
            let mut written = 0;
            // Ranges of each inode still to write in this batch: an inode leaving its
            // writeback with some left says so (I_DIRTY_PAGES), as the kernel's state does.
            let mut left: HashMap<(usize, u64), usize> = HashMap::new();
            for &(d, ino, _, _) in &batch {
                *left.entry((d, ino)).or_default() += 1;
            }
            for (d, ino, first, pages) in batch {
                for pg in first..first + pages {
                    g.dirty_pages.remove(&(d, ino, pg));
                }
                let still_dirty = left.get_mut(&(d, ino)).map_or(0, |n| {
                    *n -= 1;
                    *n
                }) > 0;
                let sdev = Val::U(kdev(d));
                let name = Val::Str(BDI[d]);
                g.sample(
                    0,
                    E::SingleInodeStart,
                    FLUSHER,
                    &[],
                    &[
                        ("name", name),
                        ("ino", Val::U(ino)),
                        ("state", Val::U(0x4)),
                        ("writeback_index", Val::U(first)),
                        ("nr_to_write", Val::I(1024)),
                    ],
                )?;
                g.sample(
                    0,
                    E::Writepages,
                    FLUSHER,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("nr_to_write", Val::I(1024)),
                        ("writeback_index", Val::U(first)),
                    ],
                )?;
                let folios = [
                    ("dev", sdev),
                    ("ino", Val::U(ino)),
                    ("start_pos", Val::I((first * 4096) as i64)),
                    ("next_pos", Val::I(((first + pages) * 4096) as i64)),
                    ("nr_to_write", Val::I(1024)),
                ];
                g.sample(0, E::DaWriteFoliosStart, FLUSHER, &[], &folios)?;
                let map = [
                    ("dev", sdev),
                    ("ino", Val::U(ino)),
                    ("lblk", Val::U(first)),
                    ("len", Val::U(pages)),
                    ("flags", Val::U(0x1)),
                ];
                g.sample(0, E::MapBlocksEnter, FLUSHER, &[], &map)?;
                let pblk = g.alloc(d, pages);
                g.sample(
                    0,
                    E::MapBlocksExit,
                    FLUSHER,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("flags", Val::U(0x1)),
                        ("pblk", Val::U(pblk)),
                        ("lblk", Val::U(first)),
                        ("len", Val::U(pages)),
                        ("ret", Val::I(pages as i64)),
                    ],
                )?;
                g.sample(
                    0,
                    E::SbMarkWb,
                    FLUSHER,
                    &[],
                    &[("dev", sdev), ("ino", Val::U(ino)), ("state", Val::U(0x4))],
                )?;
                let merge = pages >= 4 && g.rng.chance(3);
                g.request(
                    0,
                    FLUSHER,
                    "kworker/u8:3",
                    &stack,
                    d,
                    pblk * 8,
                    pages * 8,
                    "W",
                    merge,
                    Some((ino, first, pages)),
                )?;
                g.sample(
                    0,
                    E::DaWriteFoliosEnd,
                    FLUSHER,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("start_pos", Val::I((first * 4096) as i64)),
                        ("next_pos", Val::I(((first + pages) * 4096) as i64)),
                        ("nr_to_write", Val::I(1024 - pages as i64)),
                        ("ret", Val::I(0)),
                    ],
                )?;
                g.sample(
                    0,
                    E::WritepagesResult,
                    FLUSHER,
                    &[],
                    &[
                        ("dev", sdev),
                        ("ino", Val::U(ino)),
                        ("ret", Val::I(0)),
                        ("pages_written", Val::I(pages as i64)),
                    ],
                )?;
                g.sample(
                    0,
                    E::SingleInode,
                    FLUSHER,
                    &[],
                    &[
                        ("name", name),
                        ("ino", Val::U(ino)),
                        ("state", Val::U(if still_dirty { I_DIRTY_PAGES } else { 0 })),
                        ("writeback_index", Val::U(first + pages)),
                        ("nr_to_write", Val::I(1024)),
                        ("wrote", Val::U(pages)),
                    ],
                )?;
                written += pages;
            }
            g.sample(0, E::WbWritten, FLUSHER, &[], &work)?;
            g.sample(
                0,
                E::WbPagesWritten,
                FLUSHER,
                &[],
                &[("pages", Val::U(written))],
            )?;
        }
        // A journal commit every ~200 operations.
        if ops % 200 == 0 {
            let jcpu = 1 % o.cpus;
            let tr = [("dev", Val::U(kdev(0))), ("transaction", Val::U(ops / 200))];
            g.sample(jcpu, E::StartCommit, JBD2, &[], &tr)?;
            g.sample(jcpu, E::CommitFlushing, JBD2, &[], &tr)?;
            g.sample(jcpu, E::CommitLogging, JBD2, &[], &tr)?;
            let stack = st.jbd[(ops as usize / 200) % st.jbd.len()].clone();
            let sector = 2048 + (g.journal_block % 32768) * 8;
            g.journal_block += 5;
            g.request(
                jcpu,
                JBD2,
                "jbd2/sda1-8",
                &stack,
                0,
                sector,
                40,
                "WS",
                false,
                None,
            )?;
            g.sample(jcpu, E::EndCommit, JBD2, &[], &tr)?;
        }
        // A task exits and a new one is forked and exec'd every ~300 operations.
        if g.rng.chance(300) {
            let old = tasks.swap_remove(ti);
            let parent = &tasks[g.rng.below(tasks.len() as u64) as usize];
            let (ppid, pcomm) = (parent.pid, parent.comm.clone());
            let pcpu = ppid % o.cpus;
            let cpu = old.pid % o.cpus;
            g.sample(
                cpu,
                E::Exit,
                old.pid,
                &[],
                &[
                    ("comm", Val::Str(&old.comm)),
                    ("pid", Val::I(old.pid as i64)),
                    ("prio", Val::I(120)),
                    ("group_dead", Val::U(1)),
                ],
            )?;
            g.fork_exit(cpu, false, (old.pid, 1, old.pid, 1))?;
            born += 1;
            let tk = new_task(&mut g, born);
            g.sample(
                pcpu,
                E::Fork,
                ppid,
                &[],
                &[
                    ("parent_comm", Val::Str(&pcomm)),
                    ("parent_pid", Val::I(ppid as i64)),
                    ("child_comm", Val::Str(&pcomm)),
                    ("child_pid", Val::I(tk.pid as i64)),
                ],
            )?;
            g.fork_exit(pcpu, true, (tk.pid, ppid, tk.pid, ppid))?;
            let cpu = tk.pid % o.cpus;
            let file = format!("/usr/bin/{}", tk.comm);
            g.sample(
                cpu,
                E::Exec,
                tk.pid,
                &[],
                &[
                    ("filename", Val::Str(&file)),
                    ("pid", Val::I(tk.pid as i64)),
                    ("old_pid", Val::I(tk.pid as i64)),
                ],
            )?;
            g.comm(cpu, tk.pid, &tk.comm, true)?;
            tasks.push(tk);
        }
    }
    for d in 0..DEVS.len() {
        while !g.inflight[d].is_empty() {
            g.complete_one(d)?;
        }
    }
    g.t.flush_all();
    for c in g.t.take_chunks() {
        g.w.write_chunk(&c)?;
    }
    g.w.finish()?;
    Ok(g.records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::{attribute_stream, Context};
    use ioblame_decode::Decoder;
    use ioblame_format::Trace;

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn same_seed_same_bytes_and_it_analyses_cleanly() {
        let o = GenOptions {
            events: 60_000,
            ..Default::default()
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let n = generate(&a.path().join("t"), &o).unwrap();
        assert!(n >= 60_000);
        generate(&b.path().join("t"), &o).unwrap();
        assert_eq!(files(&a.path().join("t")), files(&b.path().join("t")));
        let c = tempfile::tempdir().unwrap();
        generate(&c.path().join("t"), &GenOptions { seed: 2, ..o }).unwrap();
        assert_ne!(files(&a.path().join("t")), files(&c.path().join("t")));

        let t = Trace::open(&a.path().join("t")).unwrap();
        assert!(t.problems().is_empty(), "{:?}", t.problems());
        let d = Decoder::new(t.header(), t.metadata());
        assert!(d.problems().is_empty(), "{:?}", d.problems());
        let ctx = Context::from_trace(t.header(), t.metadata());
        let (mut ios, mut bytes) = (0usize, 0u64);
        let run = attribute_stream(
            &t,
            &d,
            ctx,
            |io, _| {
                ios += 1;
                bytes += io.size;
            },
            |_| {},
        );
        let stats = run.stream;
        assert_eq!(stats.decode.error_count(), 0);
        assert_eq!(stats.out_of_order, 0);
        assert_eq!(stats.events, n);
        let done = run.attribution;
        assert!(ios > 1000, "{ios} IOs");
        // Nearly every byte is charged to a known act.
        assert!(
            done.summary.unknown_bytes * 50 < bytes,
            "{} of {bytes} bytes unknown",
            done.summary.unknown_bytes
        );
        assert_eq!(done.summary.out_of_order_events, 0);
    }
}
