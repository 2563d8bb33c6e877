//! User-space stacks (`record --user-stacks`): which processes had user frames in the
//! recorded callchains, their executable mappings (MMAP2 records, else `/proc/PID/maps`)
//! with each file's build id, and the symbol tables of the files the frames hit, written at
//! stop so that the trace stays self-contained.
//!
//! The drain loop hands every record to [`UserStacks::see`], which only copies what it needs
//! (a new user stack's frames, an MMAP2 record, an exec); the work with files happens after
//! each drain of the rings ([`UserStacks::work`], while short-lived processes most likely
//! live), at each flush ([`UserStacks::flush`]: the mappings for USER_MAPS, grown perf maps)
//! and at stop ([`UserStacks::finish`]). ELF files are read with
//! `object` through a read cache: the headers, the notes and the sections copied, never the
//! whole file.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioblame_format::{ElfLoad, ElfSection, PerfMap, UserMap, UserSymbols, UNWIND_SECTIONS};
use object::read::elf::{FileHeader, ProgramHeader};
use object::read::ReadCache;
use object::{Object, ObjectSection};

use ioblame_perfrec::{
    parse_sample_id, parse_task_record, ByteOrder, SampleLayout, TaskRecord, HEADER_LEN,
    MISC_COMM_EXEC, MISC_MMAP_BUILD_ID, RECORD_COMM, RECORD_MMAP2, RECORD_SAMPLE, SAMPLE_CALLCHAIN,
};

use crate::perf::{NATIVE_UNWIND, SAMPLE_REGS_USER, SAMPLE_STACK_USER, SAMPLE_TYPE, UNWIND_REGS};
use crate::touched::IdHasher;

type Fast = BuildHasherDefault<IdHasher>;

/// The records are read where they were written.
const NATIVE: ByteOrder = ByteOrder::native();
/// Most (pid, address) pairs waiting for the next flush; beyond it new stacks are skipped
/// (counted) until then.
const MAX_PENDING_IPS: usize = 1 << 20;
/// Most distinct user stacks remembered (a stack seen again costs one lookup); the set is
/// emptied when it reaches this.
const MAX_STACKS: usize = 1 << 20;
/// Most processes with copied stacks waiting for their maps to be read.
const MAX_COPIED_WAITING: usize = 1 << 12;
/// Most MMAP2 records and execs waiting for the next flush.
const MAX_PENDING_EVENTS: usize = 1 << 18;
/// How many times a process's `/proc/PID/maps` is read at most (again when frames fall
/// outside every mapping known, say after a `dlopen`).
const MAX_MAPS_READS: u8 = 3;
/// The share of the recorder's time that copying symbol tables may take: a token bucket
/// ([`UserStacks::work`]) gains this share of the time that passes, up to
/// [`SYMBOLS_CREDIT_MAX`], and pays for the time copying took (a file is copied whole, so the
/// credit may go below zero, and is paid back before the next copy).
const SYMBOLS_SHARE: f64 = 0.2;
/// The most credit the bucket holds (seconds): also what the first call may spend.
const SYMBOLS_CREDIT_MAX: f64 = 0.2;
/// The least credit a copy starts with (seconds).
const SYMBOLS_CREDIT_MIN: f64 = 0.005;
/// The least time between two readings of a process's maps (after the first).
const MAPS_READ_EVERY: Duration = Duration::from_secs(1);
/// Most bytes of sections copied of one file: a USER_SYMBOLS block holds at most 256 MiB
/// compressed and 1 GiB uncompressed (`ioblame_format::MAX_USER_SYMBOLS`).
const MAX_FILE_SYMBOLS: u64 = 240 << 20;

/// The sections copied into the trace, when the file has them.
const SECTIONS: &[&str] = &[".symtab", ".strtab", ".dynsym", ".dynstr", ".gnu_debugdata"];

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsLine {
    pub start: u64,
    pub end: u64,
    /// The mapping is executable (`x` in the permissions).
    pub exec: bool,
    pub pgoff: u64,
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
    /// The path, `[vdso]` and the like, or empty (anonymous); " (deleted)" kept.
    pub path: String,
}

/// Parses one line of `/proc/PID/maps`:
/// `START-END PERMS OFFSET MAJ:MIN INODE [PATH]`, numbers in hex but the inode; the path may
/// hold spaces.
pub fn parse_maps_line(line: &str) -> Option<MapsLine> {
    let mut rest = line;
    let mut field = || {
        let r = rest.trim_start_matches(' ');
        let end = r.find(' ').unwrap_or(r.len());
        let (f, tail) = r.split_at(end);
        rest = tail;
        (!f.is_empty()).then_some(f)
    };
    let range = field()?;
    let perms = field()?;
    let off = field()?;
    let dev = field()?;
    let ino = field()?;
    let (s, e) = range.split_once('-')?;
    let (ma, mi) = dev.split_once(':')?;
    let path = rest.trim_start_matches(' ').trim_end_matches('\n');
    Some(MapsLine {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        exec: perms.as_bytes().get(2) == Some(&b'x'),
        pgoff: u64::from_str_radix(off, 16).ok()?,
        major: u32::from_str_radix(ma, 16).ok()?,
        minor: u32::from_str_radix(mi, 16).ok()?,
        ino: ino.parse().ok()?,
        path: path.to_string(),
    })
}

/// An MMAP2 record's contents.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mmap2 {
    pub pid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// Device and inode, when the record gives them (no build id).
    pub dev_ino: Option<(u32, u32, u64)>,
    /// The build id, when the record gives it (`PERF_RECORD_MISC_MMAP_BUILD_ID`).
    pub build_id: Option<Vec<u8>>,
    pub filename: String,
    /// Its time (the `sample_id_all` trailer), 0 when the record is too short.
    pub time: u64,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    NATIVE.u32_at(b, o)
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    NATIVE.u64_at(b, o)
}

/// The time of a non-sample record from its `sample_id_all` trailer (laid out for
/// [`SAMPLE_TYPE`]), 0 when the record is too short.
fn trailer_time(rec: &[u8]) -> u64 {
    let body = rec.get(HEADER_LEN..).unwrap_or_default();
    parse_sample_id(body, SAMPLE_TYPE, NATIVE)
        .ok()
        .and_then(|(s, _)| s.time)
        .unwrap_or(0)
}

/// Parses a PERF_RECORD_MMAP2 of the recording, with its device and inode or its build id
/// ([`ioblame_perfrec::parse_task_record`]). `None` for another record or a damaged one.
pub fn parse_mmap2(rec: &[u8]) -> Option<Mmap2> {
    if u32_at(rec, 0)? != RECORD_MMAP2 {
        return None;
    }
    let misc = NATIVE.u16_at(rec, 4)?;
    let body = rec.get(HEADER_LEN..)?;
    let (m, sid) = parse_task_record(RECORD_MMAP2, misc, body, SAMPLE_TYPE, NATIVE).ok()??;
    let TaskRecord::Mmap {
        pid,
        addr,
        len,
        pgoff,
        dev,
        ino,
        build_id,
        filename,
        ..
    } = m
    else {
        return None;
    };
    let (dev_ino, build_id) = if misc & MISC_MMAP_BUILD_ID != 0 {
        (None, Some(build_id.to_vec()))
    } else {
        (Some((dev.0, dev.1, ino)), None)
    };
    Some(Mmap2 {
        pid,
        addr,
        len,
        pgoff,
        dev_ino,
        build_id,
        filename: String::from_utf8_lossy(filename).into_owned(),
        time: sid.time.unwrap_or(0),
    })
}

/// Where the samples with a callchain keep their fields (the stack events' sample type; the
/// cgroup id, when they carry one, comes after everything read here).
const STACK_LAYOUT: SampleLayout = match SampleLayout::new(SAMPLE_TYPE | SAMPLE_CALLCHAIN) {
    Some(l) => l,
    None => panic!("the recorder's sample type is one ioblame-perfrec parses"),
};

/// Where the samples with a stack copy keep their fields (`--user-stacks dwarf`).
const COPY_LAYOUT: Option<SampleLayout> = SampleLayout::with_regs(
    SAMPLE_TYPE | SAMPLE_CALLCHAIN | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
    UNWIND_REGS,
);

/// The user instruction pointer of a sample with a stack copy, with the sample's pid.
/// `None` when the record is no such sample, or its task had no user registers (a kernel
/// thread).
pub fn copied_ip(rec: &[u8]) -> Option<(u32, u64)> {
    let body = rec.get(HEADER_LEN..)?;
    let s = COPY_LAYOUT?.parse(body, NATIVE)?;
    Some((s.pid_tid?.0, s.regs_user?.get(NATIVE_UNWIND?.ip)?))
}

/// The user frames of a sample's callchain (after `PERF_CONTEXT_USER`, up to the next
/// context marker), with the sample's pid. `None` when the record is no sample with a
/// callchain, or has no user frame.
pub fn user_frames(rec: &[u8]) -> Option<(u32, &[u8])> {
    let body = rec.get(HEADER_LEN..)?;
    let s = STACK_LAYOUT.parse(body, NATIVE)?;
    let user = s.callchain?.user();
    (!user.is_empty()).then_some((s.pid_tid?.0, user))
}

/// A file a mapping maps: its identity and what was read of it.
#[derive(Debug, Default)]
struct FileInfo {
    build_id: Vec<u8>,
    path: String,
    /// Where it can be read while a process maps it: (pid, start, end) of mappings.
    seen_in: Vec<(u32, u64, u64)>,
    /// A user frame fell in it.
    hit: bool,
    /// Its symbols were copied (or could not be: not tried again).
    done: bool,
}

/// One mapping of a process.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    start: u64,
    end: u64,
    /// Index into `UserStacks::files`.
    file: usize,
}

/// A mapping event waiting for the next flush.
#[derive(Debug)]
enum Pending {
    Mmap(Mmap2),
    Exec(u32),
}

/// What the recording learnt of user stacks so far.
pub struct UserStacks {
    /// The sample ids whose samples carry a callchain.
    ids: HashSet<u64, Fast>,
    /// Hashes of the (pid, user stack) seen.
    stacks: HashSet<u64, Fast>,
    /// (pid, address) pairs of stacks seen since the last flush.
    pending_ips: Vec<(u32, u64)>,
    /// Mapping events since the last flush, with their time.
    pending: Vec<(u64, Pending)>,
    /// User frames skipped because `pending_ips` was full.
    skipped: u64,
    /// Each process's mappings, by start.
    maps: HashMap<u32, Vec<Mapping>>,
    /// How often each process's maps were read.
    reads: HashMap<u32, u8>,
    files: Vec<FileInfo>,
    /// Build id -> index into `files`.
    by_build_id: HashMap<Vec<u8>, usize>,
    /// (major, minor, inode) -> the file's build id (empty when it has none or is no ELF).
    by_dev_ino: HashMap<(u32, u32, u64), Vec<u8>>,
    /// Every mapping read (written as USER_MAPS).
    user_maps: Vec<UserMap>,
    user_maps_set: HashSet<(u32, u64, u64, u64)>,
    maps_changed: bool,
    max_maps: usize,
    maps_capped: bool,
    /// The symbol tables copied, to write at stop.
    symbols: Vec<UserSymbols>,
    symbols_bytes: u64,
    max_symbols_bytes: u64,
    /// Files whose symbols were left out: path and why.
    left_out: Vec<(String, String)>,
    /// Files hit that could not be read any more (the processes gone).
    unreadable: usize,
    /// Processes with user frames in no file mapping (JIT code, or a walk gone astray):
    /// their `perf-PID.map`, if they write one, is copied.
    jit_pids: HashSet<u32, Fast>,
    /// The perf maps read, by process.
    perf_maps: HashMap<u32, String>,
    perf_maps_bytes: u64,
    /// When [`UserStacks::work`] last ran.
    last_work: Option<Instant>,
    /// The symbol copying's credit, in seconds ([`SYMBOLS_SHARE`]).
    symbols_credit: f64,
    /// When each process's maps were last read.
    read_at: HashMap<u32, Instant>,
    /// The samples copy user stacks (`--user-stacks dwarf`): the unwind tables are copied
    /// too, of every file mapped by the processes in `copied`.
    copies: bool,
    /// Processes whose stacks were copied since the last [`UserStacks::work`].
    copied: HashSet<u32, Fast>,
}

/// Most bytes of perf maps kept (all processes).
const MAX_PERF_MAPS_BYTES: u64 = 64 << 20;

impl UserStacks {
    /// Looks at the samples of `ids` (the events with a callchain); keeps at most `max_maps`
    /// mappings and `max_symbols_bytes` of symbol tables.
    /// With `copies`, the samples carry stack copies (`--user-stacks dwarf`).
    pub fn new(
        ids: impl IntoIterator<Item = u64>,
        max_maps: usize,
        max_symbols_bytes: u64,
        copies: bool,
    ) -> Self {
        UserStacks {
            ids: ids.into_iter().collect(),
            stacks: HashSet::default(),
            pending_ips: Vec::new(),
            pending: Vec::new(),
            skipped: 0,
            maps: HashMap::new(),
            reads: HashMap::new(),
            files: Vec::new(),
            by_build_id: HashMap::new(),
            by_dev_ino: HashMap::new(),
            user_maps: Vec::new(),
            user_maps_set: HashSet::new(),
            maps_changed: false,
            max_maps,
            maps_capped: false,
            symbols: Vec::new(),
            symbols_bytes: 0,
            max_symbols_bytes,
            left_out: Vec::new(),
            unreadable: 0,
            jit_pids: HashSet::default(),
            perf_maps: HashMap::new(),
            perf_maps_bytes: 0,
            last_work: None,
            symbols_credit: SYMBOLS_CREDIT_MAX,
            read_at: HashMap::new(),
            copies,
            copied: HashSet::default(),
        }
    }

    /// Looks at one drained record: a sample's user stack not seen before, an MMAP2 record,
    /// an exec.
    #[inline]
    pub fn see(&mut self, rec: &[u8]) {
        let Some(kind) = u32_at(rec, 0) else {
            return;
        };
        match kind {
            RECORD_SAMPLE => self.see_sample(rec),
            RECORD_MMAP2 if self.pending.len() < MAX_PENDING_EVENTS => {
                if let Some(m) = parse_mmap2(rec) {
                    self.pending.push((m.time, Pending::Mmap(m)));
                }
            }
            RECORD_COMM => {
                let misc = NATIVE.u16_at(rec, 4).unwrap_or(0);
                if misc & MISC_COMM_EXEC != 0 && self.pending.len() < MAX_PENDING_EVENTS {
                    if let Some(pid) = u32_at(rec, 8) {
                        self.pending.push((trailer_time(rec), Pending::Exec(pid)));
                    }
                }
            }
            _ => {}
        }
    }

    fn see_sample(&mut self, rec: &[u8]) {
        let Some(id) = u64_at(rec, 8) else {
            return;
        };
        if !self.ids.contains(&id) {
            return;
        }
        let copied_pc: [u8; 8];
        let (pid, ips) = if self.copies {
            // Which frames a copy holds is known only once unwound: the files the process
            // maps all get their tables copied, and the pc (its one address known here)
            // tells whether its maps are known.
            let Some((pid, ip)) = copied_ip(rec) else {
                return;
            };
            self.copied.insert(pid);
            copied_pc = ip.to_ne_bytes();
            (pid, &copied_pc[..])
        } else {
            match user_frames(rec) {
                Some(f) => f,
                None => return,
            }
        };
        let mut h = IdHasher::default();
        h.write_u32(pid);
        for ip in ips.chunks_exact(8) {
            h.write_u64(u64::from_ne_bytes(ip.try_into().unwrap_or_default()));
        }
        if !self.stacks.insert(h.finish()) {
            return;
        }
        if self.stacks.len() >= MAX_STACKS {
            self.stacks.clear();
        }
        let n = ips.len() / 8;
        if self.pending_ips.len() + n > MAX_PENDING_IPS {
            self.skipped += n as u64;
            return;
        }
        for ip in ips.chunks_exact(8) {
            let ip = u64::from_ne_bytes(ip.try_into().unwrap_or_default());
            self.pending_ips.push((pid, ip));
        }
    }

    /// Whether records seen since the last [`UserStacks::work`] wait for it.
    pub fn has_work(&self) -> bool {
        !self.pending.is_empty()
            || !self.pending_ips.is_empty()
            || !self.copied.is_empty()
            || self.symbols_pending()
    }

    /// Whether a file hit has symbols not copied yet.
    fn symbols_pending(&self) -> bool {
        self.files.iter().any(|f| f.hit && !f.done)
    }

    /// [`UserStacks::work`], the perf maps of JIT processes that grew since read, then every
    /// mapping read so far when some are new (for a USER_MAPS block, written at each flush).
    pub fn flush(&mut self, clock_ns: u64) -> Option<Vec<UserMap>> {
        self.work(clock_ns);
        let grown: Vec<u32> = self
            .jit_pids
            .iter()
            .copied()
            .filter(|pid| {
                let had = self.perf_maps.get(pid).map_or(0, |t| t.len() as u64);
                perf_map_paths(*pid)
                    .iter()
                    .find_map(|p| std::fs::metadata(p).ok())
                    .is_some_and(|m| m.len() != had)
            })
            .collect();
        for pid in grown {
            self.read_perf_map(pid);
        }
        if self.maps_changed {
            self.maps_changed = false;
            return Some(self.user_maps.clone());
        }
        None
    }

    /// The work on the records seen since the last call, at a clock reading of `clock_ns`,
    /// done at every drain of the rings (at most 100 ms apart) while the processes most
    /// likely live: the mappings of the MMAP2 records, the maps of the processes with frames
    /// outside every known mapping, the build ids, the symbols of the files hit for the
    /// first time (for a share of the time, [`SYMBOLS_SHARE`]).
    pub fn work(&mut self, clock_ns: u64) {
        let now = Instant::now();
        if let Some(t) = self.last_work {
            self.symbols_credit = (self.symbols_credit + (now - t).as_secs_f64() * SYMBOLS_SHARE)
                .min(SYMBOLS_CREDIT_MAX);
        }
        self.last_work = Some(now);
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(|(t, _)| *t);
        for (_, p) in pending {
            match p {
                Pending::Exec(pid) => {
                    self.maps.remove(&pid);
                    self.reads.remove(&pid);
                    self.read_at.remove(&pid);
                }
                Pending::Mmap(m) => self.add_mmap2(m),
            }
        }
        let mut ips = std::mem::take(&mut self.pending_ips);
        ips.sort_unstable();
        ips.dedup();
        // Frames outside every mapping known: their processes' maps are read (a few times at
        // most: after a dlopen, say; at once the first time, then at most once a second, the
        // frames waiting for it), and the frames looked up again.
        let mut outside = Vec::new();
        let mut to_read: Vec<u32> = Vec::new();
        let mut later = Vec::new();
        for (pid, ip) in ips {
            if self.hit(pid, ip) {
                continue;
            }
            if self.reads.get(&pid).copied().unwrap_or(0) < MAX_MAPS_READS {
                if self
                    .read_at
                    .get(&pid)
                    .is_some_and(|t| now.duration_since(*t) < MAPS_READ_EVERY)
                {
                    later.push((pid, ip));
                    continue;
                }
                if to_read.last() != Some(&pid) {
                    to_read.push(pid);
                }
            }
            outside.push((pid, ip));
        }
        self.pending_ips = later;
        for &pid in &to_read {
            *self.reads.entry(pid).or_default() += 1;
            self.read_at.insert(pid, now);
            self.read_maps(pid, clock_ns);
        }
        let mut fresh_jit = Vec::new();
        for (pid, ip) in outside {
            if !self.hit(pid, ip) && self.jit_pids.insert(pid) {
                fresh_jit.push(pid);
            }
        }
        for pid in fresh_jit {
            self.read_perf_map(pid);
        }
        // Stacks copied: every file their processes map may hold one of their frames. A
        // process whose maps are not read yet (the reading put off) waits for the next time.
        let copied = std::mem::take(&mut self.copied);
        for pid in copied {
            match self.maps.get(&pid) {
                Some(ms) => {
                    for m in ms {
                        self.files[m.file].hit = true;
                    }
                }
                None if self.copied.len() < MAX_COPIED_WAITING => {
                    self.copied.insert(pid);
                }
                None => {}
            }
        }
        if self.symbols_credit >= SYMBOLS_CREDIT_MIN && self.symbols_pending() {
            let start = Instant::now();
            self.copy_symbols(Some(start + Duration::from_secs_f64(self.symbols_credit)));
            self.symbols_credit -= start.elapsed().as_secs_f64();
        }
    }

    /// Whether `ip` of `pid` falls in a known mapping; marks its file hit.
    fn hit(&mut self, pid: u32, ip: u64) -> bool {
        let Some(ms) = self.maps.get(&pid) else {
            return false;
        };
        let i = ms.partition_point(|m| m.start <= ip);
        match i.checked_sub(1).map(|i| ms[i]) {
            Some(m) if ip < m.end => {
                self.files[m.file].hit = true;
                true
            }
            _ => false,
        }
    }

    /// The file of build id `build_id` (created when new), seen mapped at `[start, end)` of
    /// `pid`.
    fn file(&mut self, build_id: &[u8], path: &str, pid: u32, start: u64, end: u64) -> usize {
        let i = match self.by_build_id.get(build_id) {
            Some(&i) => i,
            None => {
                self.files.push(FileInfo {
                    build_id: build_id.to_vec(),
                    path: path.to_string(),
                    ..FileInfo::default()
                });
                self.by_build_id
                    .insert(build_id.to_vec(), self.files.len() - 1);
                self.files.len() - 1
            }
        };
        let f = &mut self.files[i];
        if !f.done && f.seen_in.len() < 8 && !f.seen_in.contains(&(pid, start, end)) {
            f.seen_in.push((pid, start, end));
        }
        i
    }

    /// Adds a mapping of `pid`, replacing those it overlaps.
    fn map(&mut self, pid: u32, m: Mapping) {
        let ms = self.maps.entry(pid).or_default();
        ms.retain(|x| x.end <= m.start || x.start >= m.end);
        let i = ms.partition_point(|x| x.start < m.start);
        ms.insert(i, m);
    }

    /// Records a mapping read (USER_MAPS), up to the cap.
    fn keep(&mut self, m: UserMap) {
        if !self.user_maps_set.insert((m.pid, m.start, m.end, m.ino)) {
            return;
        }
        if self.user_maps.len() >= self.max_maps {
            self.maps_capped = true;
            return;
        }
        self.user_maps.push(m);
        self.maps_changed = true;
    }

    fn add_mmap2(&mut self, m: Mmap2) {
        if m.filename.starts_with('[') || m.filename.starts_with("//") || m.len == 0 {
            return;
        }
        let end = m.addr.saturating_add(m.len);
        let build_id = match (&m.build_id, m.dev_ino) {
            (Some(b), _) => b.clone(),
            (None, Some((ma, mi, ino))) => {
                let b = self.build_id_cached(m.pid, m.addr, end, &m.filename, (ma, mi, ino));
                if !b.is_empty() {
                    // The analysis finds the build id of a record without one by its file.
                    self.keep(UserMap {
                        pid: m.pid,
                        start: m.addr,
                        end,
                        pgoff: m.pgoff,
                        dev_major: ma,
                        dev_minor: mi,
                        ino,
                        build_id: b.clone(),
                        seen_ns: m.time,
                        path: m.filename.clone(),
                    });
                }
                b
            }
            (None, None) => Vec::new(),
        };
        if build_id.is_empty() {
            return;
        }
        let file = self.file(&build_id, &m.filename, m.pid, m.addr, end);
        self.map(
            m.pid,
            Mapping {
                start: m.addr,
                end,
                file,
            },
        );
    }

    /// The build id of a file mapped at `[start, end)` of `pid`, by its device and inode,
    /// read once per file.
    fn build_id_cached(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        path: &str,
        key: (u32, u32, u64),
    ) -> Vec<u8> {
        if let Some(b) = self.by_dev_ino.get(&key) {
            return b.clone();
        }
        let b = candidates(pid, start, end, path)
            .iter()
            .find_map(|p| build_id_of(p))
            .unwrap_or_default();
        self.by_dev_ino.insert(key, b.clone());
        b
    }

    /// Reads `/proc/PID/maps`: its executable file mappings, each with its file's build id.
    fn read_maps(&mut self, pid: u32, clock_ns: u64) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        for l in text.lines().filter_map(parse_maps_line) {
            if l.exec && l.ino == 0 && (l.path.is_empty() || l.path.starts_with("[anon")) {
                // Anonymous executable memory (a JIT's code): kept, so that its frames are
                // told from a walk gone astray, and named by the process's perf map.
                self.keep(UserMap {
                    pid,
                    start: l.start,
                    end: l.end,
                    seen_ns: clock_ns,
                    path: ANON.into(),
                    ..UserMap::default()
                });
                continue;
            }
            if !l.exec || l.ino == 0 || l.path.starts_with('[') || l.path.is_empty() {
                continue;
            }
            let key = (l.major, l.minor, l.ino);
            let b = self.build_id_cached(pid, l.start, l.end, &l.path, key);
            self.keep(UserMap {
                pid,
                start: l.start,
                end: l.end,
                pgoff: l.pgoff,
                dev_major: l.major,
                dev_minor: l.minor,
                ino: l.ino,
                build_id: b.clone(),
                seen_ns: clock_ns,
                path: l.path.clone(),
            });
            if b.is_empty() {
                continue;
            }
            let file = self.file(&b, &l.path, pid, l.start, l.end);
            self.map(
                pid,
                Mapping {
                    start: l.start,
                    end: l.end,
                    file,
                },
            );
        }
    }

    /// Reads the perf map of `pid` (`/tmp/perf-PID.map` in its root, PID as its namespace
    /// numbers it), replacing an older copy; bounded by [`MAX_PERF_MAPS_BYTES`].
    fn read_perf_map(&mut self, pid: u32) {
        let Some(text) = perf_map_paths(pid)
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
        else {
            return;
        };
        let old = self.perf_maps.get(&pid).map_or(0, |t| t.len() as u64);
        let total = self.perf_maps_bytes - old + text.len() as u64;
        if total > MAX_PERF_MAPS_BYTES {
            self.left_out.push((
                format!("perf-{pid}.map"),
                format!(
                    "{} bytes over the perf maps' {MAX_PERF_MAPS_BYTES}",
                    text.len()
                ),
            ));
            return;
        }
        self.perf_maps_bytes = total;
        self.perf_maps.insert(pid, text);
    }

    /// Copies the symbol tables of the files hit not yet copied, until `deadline`.
    fn copy_symbols(&mut self, deadline: Option<Instant>) {
        for i in 0..self.files.len() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            let f = &self.files[i];
            if !f.hit || f.done {
                continue;
            }
            let mut tried: Vec<PathBuf> = Vec::new();
            for &(pid, start, end) in &f.seen_in {
                for p in candidates(pid, start, end, &f.path) {
                    if !tried.contains(&p) {
                        tried.push(p);
                    }
                }
            }
            let build_id = f.build_id.clone();
            let path = f.path.clone();
            let got = tried
                .iter()
                .find_map(|p| read_symbols(p, &build_id, self.copies).ok().flatten());
            let f = &mut self.files[i];
            f.done = true;
            f.seen_in = Vec::new();
            let mut s = match got {
                None => {
                    self.unreadable += 1;
                    self.left_out.push((path, "unreadable".into()));
                    continue;
                }
                Some(Symbols::TooBig(bytes)) => {
                    self.left_out
                        .push((path, format!("{bytes} bytes, more than one block holds")));
                    continue;
                }
                Some(Symbols::Read(s)) => s,
            };
            s.path = path.clone();
            let bytes: u64 = s.sections.iter().map(|x| x.data.len() as u64).sum();
            if self.symbols_bytes + bytes > self.max_symbols_bytes {
                self.left_out
                    .push((path, format!("{bytes} bytes over --user-symbols-max")));
                continue;
            }
            self.symbols_bytes += bytes;
            self.symbols.push(s);
        }
    }

    /// At stop: the last records' mappings, then every symbol table left to copy. Returns
    /// the mappings when some are new, the symbol tables, and what to say in the capture
    /// info.
    pub fn finish(mut self, clock_ns: u64) -> Finished {
        // Every process's maps may be read once more now: no frame waits for a later reading.
        self.read_at.clear();
        let maps = self.flush(clock_ns);
        self.copy_symbols(None);
        // The JIT has compiled more since: the maps of the processes still here again.
        let pids: Vec<u32> = self.jit_pids.iter().copied().collect();
        for pid in pids {
            self.read_perf_map(pid);
        }
        let mut info = vec![
            ("user_maps".to_string(), self.user_maps.len().to_string()),
            ("user_symbols".to_string(), self.symbols.len().to_string()),
            (
                "user_symbols_bytes".to_string(),
                self.symbols_bytes.to_string(),
            ),
        ];
        if self.maps_capped {
            info.push(("user_maps_capped".into(), "yes".into()));
        }
        if !self.left_out.is_empty() {
            let v: Vec<String> = self
                .left_out
                .iter()
                .map(|(p, why)| format!("{p} ({why})"))
                .collect();
            info.push(("user_symbols_left_out".into(), v.join("; ")));
        }
        if self.skipped > 0 {
            info.push(("user_frames_skipped".into(), self.skipped.to_string()));
        }
        if !self.perf_maps.is_empty() {
            info.push(("perf_maps".into(), self.perf_maps.len().to_string()));
        }
        let mut perf_maps: Vec<PerfMap> = self
            .perf_maps
            .into_iter()
            .map(|(pid, text)| PerfMap { pid, text })
            .collect();
        perf_maps.sort_by_key(|m| m.pid);
        Finished {
            maps,
            symbols: self.symbols,
            perf_maps,
            info,
            left_out: self.left_out.len(),
        }
    }
}

/// What [`UserStacks::finish`] returns.
pub struct Finished {
    /// Every mapping read, when the last flush found new ones.
    pub maps: Option<Vec<UserMap>>,
    /// The symbol tables to write.
    pub symbols: Vec<UserSymbols>,
    /// The JIT symbol maps to write.
    pub perf_maps: Vec<PerfMap>,
    /// CAPTURE_INFO pairs.
    pub info: Vec<(String, String)>,
    /// Files whose symbols were left out (unreadable or over the cap).
    pub left_out: usize,
}

/// The path USER_MAPS gives anonymous executable memory (as MMAP2 records name it).
pub const ANON: &str = "//anon";

/// Where the perf map of `pid` may be: `/tmp/perf-NSPID.map` in its root (NSPID its pid in
/// its own namespace, the last of `NSpid` in its status), then `/tmp/perf-PID.map` here.
fn perf_map_paths(pid: u32) -> Vec<PathBuf> {
    let nspid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|v| v.split_whitespace().last()?.parse::<u32>().ok())
        })
        .unwrap_or(pid);
    vec![
        PathBuf::from(format!("/proc/{pid}/root/tmp/perf-{nspid}.map")),
        PathBuf::from(format!("/tmp/perf-{pid}.map")),
    ]
}

/// Where the file mapped at `[start, end)` of `pid` may be read: `/proc/PID/map_files`
/// (right across mount namespaces, and for a deleted file), the path in the process's root,
/// the path as it is here.
fn candidates(pid: u32, start: u64, end: u64, path: &str) -> Vec<PathBuf> {
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let mut v = vec![PathBuf::from(format!(
        "/proc/{pid}/map_files/{start:x}-{end:x}"
    ))];
    if path.starts_with('/') {
        v.push(PathBuf::from(format!("/proc/{pid}/root{path}")));
        v.push(PathBuf::from(path));
    }
    v
}

/// The build id of the ELF file at `path` (its `NT_GNU_BUILD_ID` note), `None` when it
/// cannot be read, is no ELF file or has none.
pub fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    let f = File::open(path).ok()?;
    let cache = ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    let b = obj.build_id().ok()??;
    (!b.is_empty()).then(|| b.to_vec())
}

/// What [`read_symbols`] found in a file of the build id asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Symbols {
    /// The symbol tables.
    Read(UserSymbols),
    /// Nothing read: the symbol sections' size, from the section headers, is over
    /// [`MAX_FILE_SYMBOLS`] (more than one USER_SYMBOLS block holds).
    TooBig(u64),
}

/// What `UserSymbols` needs of an ELF file: class, byte order, machine, `PT_LOAD` segments,
/// the symbol sections, and with `unwind` the unwind tables. `Ok(None)` when the file's
/// build id is not `build_id` (another file now at that path).
pub fn read_symbols(path: &Path, build_id: &[u8], unwind: bool) -> Result<Option<Symbols>, String> {
    let f = File::open(path).map_err(|e| e.to_string())?;
    let cache = ReadCache::new(f);
    let data = &cache;
    let r = match object::FileKind::parse(data).map_err(|e| e.to_string())? {
        object::FileKind::Elf32 => read_elf::<object::elf::FileHeader32<object::Endianness>, _>(
            data, build_id, false, unwind,
        ),
        object::FileKind::Elf64 => read_elf::<object::elf::FileHeader64<object::Endianness>, _>(
            data, build_id, true, unwind,
        ),
        _ => return Err("not an ELF file".into()),
    };
    r.map_err(|e| e.to_string())
}

fn read_elf<'a, Elf, R>(
    data: R,
    build_id: &[u8],
    class64: bool,
    unwind: bool,
) -> object::Result<Option<Symbols>>
where
    Elf: FileHeader<Endian = object::Endianness>,
    R: object::ReadRef<'a>,
{
    let file = object::read::elf::ElfFile::<Elf, R>::parse(data)?;
    if file.build_id()? != Some(build_id) {
        return Ok(None);
    }
    let e = file.endian();
    let loads = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD)
        .map(|p| ElfLoad {
            offset: p.p_offset(e).into(),
            vaddr: p.p_vaddr(e).into(),
            filesz: p.p_filesz(e).into(),
            flags: p.p_flags(e),
        })
        .collect();
    let mut sections = Vec::new();
    // Sizes from the headers first: a file too big for one block is not read.
    let names = || {
        // The unwind tables too with stack copies (`--user-stacks dwarf`).
        let extra: &[&str] = if unwind { &UNWIND_SECTIONS } else { &[] };
        SECTIONS.iter().chain(extra)
    };
    let total: u64 = names()
        .filter_map(|n| file.section_by_name(n))
        .map(|s| object::ObjectSection::size(&s))
        .sum();
    if total > MAX_FILE_SYMBOLS {
        return Ok(Some(Symbols::TooBig(total)));
    }
    for name in names() {
        if let Some(s) = file.section_by_name(name) {
            // A compressed section (SHF_COMPRESSED: `.debug_frame` in some debug builds) is
            // not read raw: the recorder links no decompressor.
            if s.compressed_file_range()?.format != object::CompressionFormat::None {
                continue;
            }
            let d = s.data()?;
            if !d.is_empty() {
                sections.push(ElfSection {
                    name: name.to_string(),
                    addr: s.address(),
                    data: d.to_vec(),
                });
            }
        }
    }
    Ok(Some(Symbols::Read(UserSymbols {
        build_id: build_id.to_vec(),
        path: String::new(),
        class64,
        big_endian: e == object::Endianness::Big,
        machine: file.elf_header().e_machine(e),
        loads,
        sections,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_perfrec::CONTEXT_USER;

    #[test]
    fn maps_lines() {
        let l = parse_maps_line(
            "55d0c0a00000-55d0c0a02000 r-xp 00002000 fd:01 1234567    /usr/bin/my prog (deleted)",
        )
        .unwrap();
        assert_eq!(
            l,
            MapsLine {
                start: 0x55d0c0a00000,
                end: 0x55d0c0a02000,
                exec: true,
                pgoff: 0x2000,
                major: 0xfd,
                minor: 1,
                ino: 1234567,
                path: "/usr/bin/my prog (deleted)".into(),
            }
        );
        let anon = parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.exec, anon.ino, anon.path.as_str()), (false, 0, ""));
        let anon = parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(anon.path, "");
        let vdso =
            parse_maps_line("7ffd5e5f3000-7ffd5e5f5000 r-xp 00000000 00:00 0    [vdso]").unwrap();
        assert_eq!((vdso.exec, vdso.path.as_str()), (true, "[vdso]"));
        let big = parse_maps_line("1000-2000 r-xp 00000000 103:1f 4294967297 /x").unwrap();
        assert_eq!((big.major, big.minor, big.ino), (0x103, 0x1f, 4294967297));
        for bad in [
            "",
            "1000-2000 r-xp",
            "zz-2000 r-xp 0 00:00 0",
            "1000 r-xp 0 0:0 0",
        ] {
            assert_eq!(parse_maps_line(bad), None, "{bad:?}");
        }
    }

    fn header(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend(misc.to_ne_bytes());
        r.extend(((8 + body.len()) as u16).to_ne_bytes());
        r.extend(body);
        r
    }

    fn trailer(time: u64) -> Vec<u8> {
        let mut t = vec![0u8; 8];
        t.extend(time.to_ne_bytes());
        t.extend([0u8; 16]);
        t
    }

    /// An MMAP2 record of `pid` mapping `[addr, addr + len)`.
    fn mmap2(pid: u32, addr: u64, len: u64, build_id: Option<&[u8]>, name: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(pid.to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        b.extend(addr.to_ne_bytes());
        b.extend(len.to_ne_bytes());
        b.extend(0x1000u64.to_ne_bytes());
        match build_id {
            Some(id) => {
                b.push(id.len() as u8);
                b.extend([0u8; 3]);
                let mut x = id.to_vec();
                x.resize(20, 0);
                b.extend(x);
            }
            None => {
                b.extend(259u32.to_ne_bytes());
                b.extend(2u32.to_ne_bytes());
                b.extend(77u64.to_ne_bytes());
                b.extend(0u64.to_ne_bytes());
            }
        }
        b.extend(5u32.to_ne_bytes());
        b.extend(2u32.to_ne_bytes());
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        n.resize(n.len().div_ceil(8) * 8, 0);
        b.extend(n);
        b.extend(trailer(1234));
        let misc = if build_id.is_some() {
            MISC_MMAP_BUILD_ID | 2
        } else {
            2
        };
        header(RECORD_MMAP2, misc, &b)
    }

    /// A sample of `id` and `pid` whose callchain is `chain`.
    fn sample(id: u64, pid: u32, chain: &[u64]) -> Vec<u8> {
        let mut b = id.to_ne_bytes().to_vec();
        b.extend(pid.to_ne_bytes());
        b.extend(pid.to_ne_bytes());
        b.extend(99u64.to_ne_bytes());
        b.extend(0u64.to_ne_bytes());
        b.extend((chain.len() as u64).to_ne_bytes());
        for ip in chain {
            b.extend(ip.to_ne_bytes());
        }
        b.extend(4u32.to_ne_bytes());
        b.extend([1u8, 0, 0, 0]);
        header(RECORD_SAMPLE, 0, &b)
    }

    const KERNEL: u64 = ioblame_perfrec::CONTEXT_KERNEL;

    #[test]
    fn mmap2_records() {
        let id = [0xab_u8; 20];
        let m = parse_mmap2(&mmap2(7, 0x5000, 0x3000, Some(&id), "/bin/x")).unwrap();
        assert_eq!(
            m,
            Mmap2 {
                pid: 7,
                addr: 0x5000,
                len: 0x3000,
                pgoff: 0x1000,
                dev_ino: None,
                build_id: Some(id.to_vec()),
                filename: "/bin/x".into(),
                time: 1234,
            }
        );
        let m = parse_mmap2(&mmap2(7, 0x5000, 0x3000, None, "/lib/y.so")).unwrap();
        assert_eq!((m.dev_ino, m.build_id), (Some((259, 2, 77)), None));
        assert_eq!(m.filename, "/lib/y.so");
        // A short build id keeps its size.
        let m = parse_mmap2(&mmap2(
            7,
            0x5000,
            0x3000,
            Some(&[1, 2, 3, 4, 5, 6, 7, 8]),
            "/z",
        ))
        .unwrap();
        assert_eq!(m.build_id.unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
        // Cut short, or another kind: nothing.
        let r = mmap2(7, 0x5000, 0x3000, None, "/lib/y.so");
        assert!(parse_mmap2(&r[..70]).is_none());
        assert!(parse_mmap2(&sample(1, 2, &[])).is_none());
    }

    #[test]
    fn user_frames_follow_the_user_marker() {
        let s = sample(
            1,
            42,
            &[
                KERNEL,
                0xffff_ffff_8100_0000,
                CONTEXT_USER,
                0x401000,
                0x402000,
            ],
        );
        let (pid, ips) = user_frames(&s).unwrap();
        assert_eq!(pid, 42);
        let ips: Vec<u64> = ips
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(ips, [0x401000, 0x402000]);
        // A later context ends them.
        let s = sample(1, 42, &[CONTEXT_USER, 0x401000, (-2048i64) as u64, 5]);
        assert_eq!(user_frames(&s).unwrap().1.len(), 8);
        // Kernel frames only, a marker without frames, no callchain: nothing.
        assert!(user_frames(&sample(1, 42, &[KERNEL, 0xffff_ffff_8100_0000])).is_none());
        assert!(user_frames(&sample(1, 42, &[KERNEL, 1, CONTEXT_USER])).is_none());
        assert!(user_frames(&sample(1, 42, &[])).is_none());
        // A callchain longer than the record: nothing, no panic.
        let mut s = sample(1, 42, &[CONTEXT_USER, 1, 2]);
        s[40..48].copy_from_slice(&1000u64.to_ne_bytes());
        assert!(user_frames(&s).is_none());
    }

    #[test]
    fn frames_hit_the_mapped_files() {
        let mut u = UserStacks::new([1], 100, 1 << 20, false);
        let id_a = [0xaa_u8; 20];
        let id_b = [0xbb_u8; 20];
        u.see(&mmap2(42, 0x400000, 0x10000, Some(&id_a), "/gone/a"));
        u.see(&mmap2(42, 0x700000, 0x10000, Some(&id_b), "/gone/b"));
        // Of another event (no callchain asked), then of ours twice: one stack kept.
        u.see(&sample(2, 42, &[KERNEL, 1, CONTEXT_USER, 0x401000]));
        u.see(&sample(
            1,
            42,
            &[KERNEL, 1, CONTEXT_USER, 0x401000, 0x402000],
        ));
        u.see(&sample(
            1,
            42,
            &[KERNEL, 1, CONTEXT_USER, 0x401000, 0x402000],
        ));
        assert_eq!(u.pending_ips.len(), 2);
        assert_eq!(u.pending.len(), 2);
        // Nothing read from /proc: the MMAP2 records had build ids, the files are gone.
        assert_eq!(u.flush(1), None);
        let hit: Vec<bool> = u.files.iter().map(|f| f.hit).collect();
        assert_eq!(hit, [true, false]);
        assert!(u.files[0].done, "tried once");
        assert_eq!(u.unreadable, 1);
        // An exec forgets the mappings: a frame there is outside every known one (pid 42
        // does not exist here, so its maps read gives nothing).
        let mut exec = Vec::new();
        exec.extend(42u32.to_ne_bytes());
        exec.extend(42u32.to_ne_bytes());
        exec.extend(*b"x\0\0\0\0\0\0\0");
        exec.extend(trailer(2000));
        u.see(&header(RECORD_COMM, MISC_COMM_EXEC, &exec));
        u.see(&sample(1, 42, &[CONTEXT_USER, 0x701000]));
        u.flush(2);
        assert!(!u.files[1].hit);
        assert!(!u.maps.contains_key(&42));
        let f = u.finish(3);
        assert!(f.symbols.is_empty());
        assert_eq!(f.left_out, 1);
    }

    /// An MMAP2 record without a build id (a kernel before 5.12, or one that could not read
    /// it): the recorder reads it from the file, and keeps the mapping for USER_MAPS.
    #[test]
    fn mmap2_without_build_id_is_read_from_the_file() {
        let pid = std::process::id();
        let here = mmap2_without_build_id_is_read_from_the_file as *const () as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let l = maps
            .lines()
            .filter_map(parse_maps_line)
            .find(|l| l.start <= here && here < l.end)
            .unwrap();
        let mut rec = mmap2(pid, l.start, l.end - l.start, None, &l.path);
        rec[48..56].copy_from_slice(&l.ino.to_ne_bytes());
        rec[40..44].copy_from_slice(&l.major.to_ne_bytes());
        rec[44..48].copy_from_slice(&l.minor.to_ne_bytes());
        let mut u = UserStacks::new([1], 10, 1 << 30, false);
        u.see(&rec);
        u.see(&sample(1, pid, &[CONTEXT_USER, here]));
        let got = u.flush(9).expect("the mapping kept");
        assert_eq!(
            got.len(),
            1,
            "no /proc read: the frame is in the MMAP2 mapping"
        );
        let want = build_id_of(Path::new(&l.path)).expect("a build id");
        assert_eq!(got[0].build_id, want);
        assert_eq!(
            (got[0].ino, got[0].seen_ns),
            (l.ino, 1234),
            "the record's time"
        );
        assert!(u.files[0].hit);
    }

    #[test]
    fn reads_its_own_maps_build_ids_and_symbols() {
        // This test binary: its frames resolved through /proc/self/maps.
        let pid = std::process::id();
        let here = reads_its_own_maps_build_ids_and_symbols as *const () as u64;
        let mut u = UserStacks::new([1], 1000, 1 << 30, false);
        u.see(&sample(1, pid, &[CONTEXT_USER, here]));
        let maps = u.flush(5).expect("maps read");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let me = maps
            .iter()
            .find(|m| m.start <= here && here < m.end)
            .expect("the mapping of this function");
        assert_eq!(me.pid, pid);
        assert_eq!(me.seen_ns, 5);
        assert_eq!(Path::new(&me.path), exe);
        let want = build_id_of(&exe);
        assert_eq!(Some(me.build_id.clone()), want);
        assert!(
            maps.iter().all(|m| m.path.starts_with('/')),
            "file mappings only"
        );
        let f = u.finish(6);
        assert!(f.maps.is_none(), "nothing new");
        assert_eq!(f.symbols.len(), 1, "{:?}", f.info);
        let s = &f.symbols[0];
        assert_eq!(Some(s.build_id.clone()), want);
        assert!(
            s.loads.iter().any(|l| l.flags & 1 != 0),
            "an executable PT_LOAD"
        );
        let names: Vec<&str> = s.sections.iter().map(|x| x.name.as_str()).collect();
        assert!(
            names.contains(&".symtab") && names.contains(&".strtab"),
            "{names:?}"
        );
        assert_eq!(s.class64, cfg!(target_pointer_width = "64"));
        assert_eq!(s.big_endian, cfg!(target_endian = "big"));
        // Another build id at that path: not taken.
        assert_eq!(read_symbols(&exe, &[1, 2, 3], false).unwrap(), None);
    }

    #[test]
    fn maps_are_read_again_a_second_later_or_at_stop() {
        let pid = std::process::id();
        let here = maps_are_read_again_a_second_later_or_at_stop as *const () as u64;
        let mut u = UserStacks::new([1], 1000, 1 << 30, false);
        u.see(&sample(1, pid, &[CONTEXT_USER, here]));
        u.work(5);
        assert_eq!(u.reads.get(&pid), Some(&1));
        // A frame in no mapping known (as after a dlopen) just after: it waits for the next
        // reading, a second on, and is not taken for JIT code meanwhile.
        u.see(&sample(1, pid, &[CONTEXT_USER, 0x1000]));
        u.work(6);
        assert!(u.has_work());
        assert_eq!(u.pending_ips, [(pid, 0x1000)]);
        assert_eq!(u.reads.get(&pid), Some(&1));
        assert!(!u.jit_pids.contains(&pid));
        // A second on the maps are read again; still in none, it is the process's JIT code.
        std::thread::sleep(MAPS_READ_EVERY);
        u.work(7);
        assert_eq!(u.reads.get(&pid), Some(&2));
        assert!(u.pending_ips.is_empty());
        assert!(u.jit_pids.contains(&pid));
    }
}
