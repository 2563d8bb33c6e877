//! What the timeline draws, collected from an analysis as it runs ([`Builder`]): each role's
//! dirtying folded into runs, its fsyncs, and every charged request with its parts, each
//! part linked to the runs that dirtied its bytes (the flows). Kept compact, written at the
//! end ([`crate::write`]), when every name is known.

use ioblame_attrib::{ActId, Dir, Dirtied, Io, RoleId, Tables, Via};
use ioblame_decode::Dev;
use rustc_hash::FxHashMap;

/// No run.
const NONE: u32 = u32::MAX;

/// The most pages a folio record, or an IO looked up by page, is taken to span: the page
/// cache's largest folios are 2 MiB of 4 KiB pages (more only on damaged input, where the
/// rest is left unlinked).
const MAX_PAGES: u64 = 1 << 11;

/// The fsync starts kept per thread for the runs they end (the latest).
const FSYNCS_KEPT: usize = 64;

/// The most 512-byte sectors a buffer record, or an IO looked up by sector, is taken to span
/// (a buffer is at most a page, 64 KiB on any architecture).
const MAX_SECTORS: u64 = 1 << 12;

/// A dirtying run: consecutive dirtying of one file by one role (docs/timeline.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The role charged with what it dirtied.
    pub role: RoleId,
    /// The file's inode (0: buffers of no known file).
    pub ino: u64,
    /// The device the kernel named (a folio's backing disk, a buffer's disk).
    pub dev: Dev,
    /// How its IO is linked back (the first record's).
    pub via: Via,
    /// Its first and last dirtying (ns, the trace's clock).
    pub start: u64,
    /// See [`Run::start`].
    pub end: u64,
    /// Bytes made dirty.
    pub dirtied: u64,
    /// Folios and buffers made dirty.
    pub records: u64,
    /// The IO bytes charged to it that its flows lead to.
    pub written: u64,
    /// Its flows: the requests (index in [`Collected::requests`]) it caused, the part of
    /// each, and the bytes of it the run dirtied.
    pub links: Vec<(u32, u32, u64)>,
}

/// A part of a request charged to one act.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The act charged.
    pub act: ActId,
    /// How it was linked.
    pub via: Via,
    /// Its bytes.
    pub bytes: u64,
    /// Whether it is a lower layer's copy of IO charged above it (a loop device's backing
    /// file).
    pub lower: bool,
    /// The runs whose dirtying it wrote, with the bytes of it each dirtied.
    pub runs: Vec<(u32, u64)>,
}

/// A request: its device, place, times and parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The device.
    pub dev: Dev,
    /// Its first 512-byte sector.
    pub sector: u64,
    /// Its bytes (the parts' sum).
    pub bytes: u64,
    /// The direction.
    pub dir: Dir,
    /// The request's rwbs, as blktrace prints it.
    pub rwbs: String,
    /// Queued (its earliest bio), issued, completed (ns).
    pub queue: u64,
    /// See [`Request::queue`].
    pub issue: u64,
    /// See [`Request::queue`].
    pub complete: u64,
    /// Its parts, one per act.
    pub parts: Vec<Part>,
}

/// A thread blocked in fsync (`ext4_sync_file_enter` to `_exit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Process and thread.
    pub pid: u32,
    /// See [`Blocked::pid`].
    pub tid: u32,
    /// The file's filesystem device and inode.
    pub dev: Dev,
    /// See [`Blocked::dev`].
    pub ino: u64,
    /// Enter and exit (ns).
    pub start: u64,
    /// See [`Blocked::start`].
    pub end: u64,
}

/// What the timeline draws.
#[derive(Debug, Default)]
pub struct Collected {
    /// The dirtying runs, in the order they began.
    pub runs: Vec<Run>,
    /// The charged requests, in completion order.
    pub requests: Vec<Request>,
    /// The fsyncs, in the order they ended.
    pub blocked: Vec<Blocked>,
    /// Requests on the devices drawn that the scope leaves out: they count in the devices'
    /// queue depth, and are not drawn (queue, issue, complete).
    pub outside: Vec<(Dev, u64, u64, u64, u64)>,
    /// Flows made (a part linked to a run, a read to its device's slice comes later).
    pub links: u64,
    /// Parts of written-back IO (via page, buffer or inode) that no run was found for
    /// (dirtied before the recording, or its record lost), and their bytes.
    pub unlinked: (u64, u64),
}

/// A page's or a buffer's last two dirtyings (time, run): the one in effect when a request
/// was queued is the latest before it.
#[derive(Debug, Clone, Copy)]
struct Hist {
    last: (u64, u32),
    prev: (u64, u32),
}

impl Hist {
    fn put(&mut self, time: u64, run: u32) {
        self.prev = self.last;
        self.last = (time, run);
    }

    /// The run in effect at `t`.
    fn at(&self, t: u64) -> u32 {
        if self.last.0 <= t {
            self.last.1
        } else if self.prev.0 <= t {
            self.prev.1
        } else {
            NONE
        }
    }
}

/// The collecting side: fed the analysis's decoded events' fsyncs ([`Builder::fsync`]), its
/// dirtied records ([`Builder::dirtied`]) and its charged IOs ([`Builder::io`]).
#[derive(Debug)]
pub struct Builder {
    out: Collected,
    /// Runs of one role stop after this long without dirtying.
    run_gap: u64,
    /// The page size pages are counted in.
    page: u64,
    /// Per thread, its open run.
    open: FxHashMap<u32, u32>,
    /// Per thread, the times its fsyncs began since its open run's last record.
    fsync_starts: FxHashMap<u32, Vec<u64>>,
    /// Per thread, the fsync it is in: (pid, dev, ino, start).
    in_fsync: FxHashMap<u32, (u32, Dev, u64, u64)>,
    /// A folio's dirtyings, by (role, inode, page).
    pages: FxHashMap<(u32, u64, u64), Hist>,
    /// A buffer's dirtyings, by (role, disk, sector).
    sectors: FxHashMap<(u32, Dev, u64), Hist>,
}

impl Builder {
    /// A builder: runs end after `run_gap` ns without dirtying; folios in pages of
    /// `page_size` bytes.
    pub fn new(run_gap: u64, page_size: u64) -> Builder {
        Builder {
            out: Collected::default(),
            run_gap,
            page: page_size.max(512),
            open: FxHashMap::default(),
            fsync_starts: FxHashMap::default(),
            in_fsync: FxHashMap::default(),
            pages: FxHashMap::default(),
            sectors: FxHashMap::default(),
        }
    }

    /// `ext4_sync_file_enter` (`exit == false`) or `_exit` of thread `tid` at `time`.
    pub fn fsync(&mut self, time: u64, (pid, tid): (u32, u32), dev: Dev, ino: u64, exit: bool) {
        if !exit {
            self.in_fsync.insert(tid, (pid, dev, ino, time));
            let starts = self.fsync_starts.entry(tid).or_default();
            // A thread that fsyncs without dirtying keeps its latest only.
            if starts.len() >= FSYNCS_KEPT {
                starts.remove(0);
            }
            starts.push(time);
            return;
        }
        if let Some((pid, dev, ino, start)) = self.in_fsync.remove(&tid) {
            self.out.blocked.push(Blocked {
                pid,
                tid,
                dev,
                ino,
                start,
                end: time.max(start),
            });
        }
    }

    /// Something a role dirtied: its run goes on, or a new one begins (another file, another
    /// role of the thread, a gap, an fsync of the thread since).
    pub fn dirtied(&mut self, d: &Dirtied, tables: &Tables) {
        let Some(role) = tables.roles.get(d.role.index()) else {
            return;
        };
        let tid = role.tid;
        let open = self.open.get(&tid).copied();
        let goes_on = open.is_some_and(|i| {
            let r = &self.out.runs[i as usize];
            let fsynced = self
                .fsync_starts
                .get(&tid)
                .is_some_and(|s| s.iter().any(|&t| t > r.end && t <= d.time));
            r.role == d.role
                && r.ino == d.ino
                && r.dev == d.dev
                && d.time.saturating_sub(r.end) <= self.run_gap
                && !fsynced
        });
        let i = match open {
            Some(i) if goes_on => i,
            _ => {
                let i = self.out.runs.len() as u32;
                self.out.runs.push(Run {
                    role: d.role,
                    ino: d.ino,
                    dev: d.dev,
                    via: d.via,
                    start: d.time,
                    end: d.time,
                    dirtied: 0,
                    records: 0,
                    written: 0,
                    links: Vec::new(),
                });
                self.open.insert(tid, i);
                i
            }
        };
        let r = &mut self.out.runs[i as usize];
        r.end = r.end.max(d.time);
        r.dirtied += d.bytes;
        r.records += 1;
        if let Some(s) = self.fsync_starts.get_mut(&tid) {
            let end = r.end;
            s.retain(|&t| t > end);
        }
        let fresh = Hist {
            last: (0, NONE),
            prev: (0, NONE),
        };
        if d.buffer {
            let n = (d.bytes / 512).clamp(1, MAX_SECTORS);
            for s in d.pos..d.pos.saturating_add(n) {
                self.sectors
                    .entry((d.role.0, d.dev, s))
                    .or_insert(fresh)
                    .put(d.time, i);
            }
        } else {
            let first = d.pos / self.page;
            let n = d.bytes.div_ceil(self.page).clamp(1, MAX_PAGES);
            for p in first..first.saturating_add(n) {
                self.pages
                    .entry((d.role.0, d.ino, p))
                    .or_insert(fresh)
                    .put(d.time, i);
            }
        }
    }

    /// A charged IO the scope leaves out: counted in its device's queue depth only.
    pub fn outside(&mut self, io: &Io) {
        self.out.outside.push((
            io.dev,
            io.size,
            io.queue_time,
            io.issue_time,
            io.complete_time,
        ));
    }

    /// A charged IO: a request of its own, or the next part of the request before it (the
    /// attribution hands a split request's parts out one after the other, with the same
    /// device and times).
    pub fn io(&mut self, io: &Io, tables: &Tables) {
        let runs = self.runs_of(io, tables);
        let req = self.out.requests.len() as u32;
        let same = io.split
            && self.out.requests.last().is_some_and(|r| {
                r.dev == io.dev
                    && r.issue == io.issue_time
                    && r.complete == io.complete_time
                    && !r.parts.is_empty()
            });
        let (req, part) = match self.out.requests.last() {
            Some(last) if same => (req - 1, last.parts.len() as u32),
            _ => (req, 0),
        };
        let mut written = 0;
        for &(run, bytes) in &runs {
            let r = &mut self.out.runs[run as usize];
            r.written += bytes;
            r.links.push((req, part, bytes));
            written += bytes;
            self.out.links += 1;
        }
        if matches!(io.via, Via::Page | Via::Buffer | Via::Inode) && written < io.size {
            self.out.unlinked.0 += 1;
            self.out.unlinked.1 += io.size - written;
        }
        let part = Part {
            act: io.act,
            via: io.via,
            bytes: io.size,
            lower: io.lower,
            runs,
        };
        if same {
            let r = self.out.requests.last_mut().expect("checked");
            r.sector = r.sector.min(io.sector);
            r.bytes += io.size;
            r.queue = r.queue.min(io.queue_time);
            r.parts.push(part);
        } else {
            self.out.requests.push(Request {
                dev: io.dev,
                sector: io.sector,
                bytes: io.size,
                dir: io.dir,
                rwbs: io.rwbs.to_string(),
                queue: io.queue_time,
                issue: io.issue_time,
                complete: io.complete_time,
                parts: vec![part],
            });
        }
    }

    /// The runs whose dirtying `io` wrote: of its act's role, the run in effect at its
    /// queueing for each of its pages (by file offset) or, failing that, each of its
    /// sectors; with the bytes of it each one dirtied.
    fn runs_of(&self, io: &Io, tables: &Tables) -> Vec<(u32, u64)> {
        if !matches!(io.via, Via::Page | Via::Buffer | Via::Inode) {
            return Vec::new();
        }
        let Some(act) = tables.act(io.act) else {
            return Vec::new();
        };
        let role = act.role.0;
        let mut found: Vec<(u32, u64)> = Vec::new();
        let mut add = |run: u32, bytes: u64| {
            if run == NONE {
                return;
            }
            match found.iter_mut().find(|f| f.0 == run) {
                Some(f) => f.1 += bytes,
                None => found.push((run, bytes)),
            }
        };
        let mut left = io.size;
        if let (Some(ino), Some(foff)) = (io.ino, io.file_offset) {
            let first = foff / self.page;
            let last = (foff.saturating_add(io.size.max(1)) - 1) / self.page;
            for p in first..=last.min(first.saturating_add(MAX_PAGES)) {
                let a = p.saturating_mul(self.page).max(foff);
                let b = (p + 1)
                    .saturating_mul(self.page)
                    .min(foff.saturating_add(io.size));
                if let Some(h) = self.pages.get(&(role, ino, p)) {
                    let run = h.at(io.queue_time);
                    if run != NONE {
                        add(run, b - a);
                        left -= b - a;
                    }
                }
            }
        }
        if left == io.size {
            // No page: by sector, in 1 KiB steps (buffers are at least that).
            let n = (io.size / 512).min(MAX_SECTORS);
            let mut s = 0;
            while s < n {
                let step = 2.min(n - s);
                let h =
                    (0..step).find_map(|k| self.sectors.get(&(role, io.dev, io.sector + s + k)));
                if let Some(h) = h {
                    add(h.at(io.queue_time), step * 512);
                }
                s += step;
            }
        }
        // Bytes found are at most the IO's.
        let total: u64 = found.iter().map(|f| f.1).sum();
        if total > io.size {
            let mut over = total - io.size;
            for f in found.iter_mut().rev() {
                let cut = over.min(f.1);
                f.1 -= cut;
                over -= cut;
            }
        }
        found
    }

    /// What was collected (fsyncs never exited are left out).
    pub fn finish(self) -> Collected {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::{Act, FileKey, IntentId, Role};
    use ioblame_decode::Rwbs;

    fn tables() -> Tables {
        let mut t = Tables::default();
        for (tid, comm) in [(10, "writer"), (20, "other"), (30, "kworker/u8:1")] {
            t.roles.push(Role {
                pid: tid,
                tid,
                comm: comm.into(),
                generation: 0,
                cgroup: 0,
                lineage: false,
            });
        }
        for (role, ino) in [(0, 12), (1, 12), (0, 13)] {
            t.acts.push(Act {
                role: RoleId(role),
                intent: IntentId(0),
                file: FileKey { dev: 7 << 20, ino },
                via: Via::Page,
                reason: None,
                issuer: None,
                recorder: false,
            });
        }
        t
    }

    fn dirtied(role: u32, ino: u64, page: u64, time: u64) -> Dirtied {
        Dirtied {
            role: RoleId(role),
            stack: 0,
            via: Via::Page,
            dev: 7 << 20,
            ino,
            pos: page * 4096,
            buffer: false,
            bytes: 4096,
            time,
        }
    }

    fn io(act: u32, ino: u64, foff: u64, size: u64, queue: u64) -> Io {
        let mut io = Io::new(7 << 20, Dir::W, size, ActId(act));
        io.via = Via::Page;
        io.ino = Some(ino);
        io.file_offset = Some(foff);
        io.rwbs = Rwbs::parse("W");
        io.queue_time = queue;
        io.issue_time = queue + 10;
        io.complete_time = queue + 20;
        io.issuer = RoleId(2);
        io
    }

    /// Runs fold one role's consecutive dirtying of one file; another file, a gap or an
    /// fsync of the thread ends them.
    #[test]
    fn runs_fold_consecutive_dirtying_of_one_file() {
        let t = tables();
        let mut b = Builder::new(1000, 4096);
        for (i, page) in (0..4).enumerate() {
            b.dirtied(&dirtied(0, 12, page, 100 + i as u64 * 10), &t);
        }
        b.dirtied(&dirtied(0, 13, 0, 200), &t); // another file
        b.dirtied(&dirtied(0, 13, 1, 5000), &t); // a gap
        b.fsync(5100, (10, 10), 7 << 20, 13, false);
        b.dirtied(&dirtied(0, 13, 2, 5200), &t); // after an fsync began
        b.fsync(5300, (10, 10), 7 << 20, 13, true);
        b.dirtied(&dirtied(1, 12, 9, 5400), &t); // another role
        let c = b.finish();
        let runs: Vec<_> = c
            .runs
            .iter()
            .map(|r| (r.role.0, r.ino, r.start, r.end, r.dirtied))
            .collect();
        assert_eq!(
            runs,
            vec![
                (0, 12, 100, 130, 16384),
                (0, 13, 200, 200, 4096),
                (0, 13, 5000, 5000, 4096),
                (0, 13, 5200, 5200, 4096),
                (1, 12, 5400, 5400, 4096),
            ]
        );
        assert_eq!(
            c.blocked,
            vec![Blocked {
                pid: 10,
                tid: 10,
                dev: 7 << 20,
                ino: 13,
                start: 5100,
                end: 5300
            }]
        );
    }

    /// A written-back IO links to the runs of its act's role that dirtied its pages last
    /// before it was queued, with the bytes of each; the other role's run of the same file
    /// gets nothing.
    #[test]
    fn an_io_flows_from_the_runs_that_dirtied_its_pages() {
        let t = tables();
        let mut b = Builder::new(50, 4096);
        b.dirtied(&dirtied(0, 12, 0, 100), &t);
        b.dirtied(&dirtied(0, 12, 1, 110), &t);
        b.dirtied(&dirtied(1, 12, 2, 120), &t); // other's page
        b.dirtied(&dirtied(0, 12, 3, 500), &t); // a second run (gap)
        b.io(&io(0, 12, 0, 4 * 4096, 1000), &t); // act 0: writer's pages 0..4
                                                 // Page 0 dirtied again after that IO was queued: a third run, not linked to it.
        b.dirtied(&dirtied(0, 12, 0, 2000), &t);
        let c = b.finish();
        assert_eq!(c.requests.len(), 1);
        assert_eq!(c.requests[0].parts[0].runs, vec![(0, 8192), (2, 4096)]);
        assert_eq!(c.runs[0].links, vec![(0, 0, 8192)]);
        assert_eq!(c.runs[1].links, vec![]);
        assert_eq!(c.runs[2].written, 4096);
        assert_eq!(c.runs[3].written, 0);
        assert_eq!(c.links, 2);
        // Page 2 was the other role's: the writer's part has 4096 bytes unlinked.
        assert_eq!(c.unlinked, (1, 4096));
    }

    /// A split request's parts make one request.
    #[test]
    fn a_split_requests_parts_are_one_request() {
        let t = tables();
        let mut b = Builder::new(50, 4096);
        let mut a = io(0, 12, 0, 4096, 1000);
        let mut o = io(1, 12, 4096, 8192, 990);
        a.split = true;
        o.split = true;
        o.sector = 8;
        (o.issue_time, o.complete_time) = (a.issue_time, a.complete_time);
        b.io(&a, &t);
        b.io(&o, &t);
        b.io(&io(2, 13, 0, 4096, 1000), &t);
        let c = b.finish();
        assert_eq!(c.requests.len(), 2);
        let r = &c.requests[0];
        assert_eq!((r.bytes, r.queue, r.parts.len()), (12288, 990, 2));
    }
}
