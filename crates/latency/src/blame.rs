//! Who made each IO slow: every IO's queue-to-completion time (Q2C) split into the time it
//! waited behind each other request on its device, its own service time, and idle time
//! (`docs/latency.md`, "Blame", gives the model and the kernel facts it leans on).
//!
//! The model, per device (the whole disk; each level of a stacked device apart):
//!
//! * A **request is in flight** from its last issue to its completion (for a bio-based
//!   device such as dm, from its queue to its completion): the attribution's times, so a
//!   requeued request is in flight from the issue that completed it, and the time before
//!   counts as waiting.
//! * At each instant, the time of every IO still waiting for its completion (queued, or in
//!   flight itself) is **split equally among the n requests then in flight** on its device:
//!   1/n to each. The share of the victim's own request is its **own** service time; the
//!   share of every other request is charged to that request's **culprit** (its act, or its
//!   acts in proportion to their bytes when the request was split between acts). While it
//!   waits, the victim holds no share: the requests in flight hold the device or the tags it
//!   needs. While it is in flight with n others, 1/(n+1) is its own.
//! * With no request in flight, the victim's time is **idle**, named by the phase its own
//!   request was in ([`Idle`]: before it had a request, where the throttlers wait; in its
//!   task's plug; in the scheduler; requeued), from the request's `block_getrq`,
//!   `block_rq_insert` and first `block_rq_issue`, and the throttlers seen acting on the
//!   device (`wbt:wbt_timer`, `iocost:*`).
//!
//! So for every victim `own + Σ culprits + idle = Q2C` exactly: idle is an integer count of
//! nanoseconds with no request in flight, and the rest, which is the busy time, is cut by
//! largest remainder so the integers add up (ties to own first).
//!
//! The computation does not depend on how many requests a victim overlapped: per device,
//! `F(t) = ∫ 1/n` over busy time and, per culprit key `X`, `H_X(t) = ∫ k_X / n` (`k_X` the
//! requests of `X` in flight, weighted by their part of the bytes) are kept as breakpoint
//! histories; a victim spanning `[a, b)` owes `X` exactly `H_X(b) - H_X(a)` less `X`'s part
//! of its own request's share, `F(b) - F(issue)`. Only the keys active in `[a, b)` are
//! visited (those in flight, and those whose last change falls inside the span).

use std::collections::{BTreeSet, HashMap, VecDeque};

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use ioblame_events::event::{Dev, Event, EventKind, Rwbs};

/// The culprit key of flush requests whose requester is unknown (a cache flush moves no
/// data: the attribution charges no act for it).
pub const FLUSH: u32 = u32::MAX;
/// The culprit key of discards, write-zeroes and other requests that move no data, whose
/// requester is unknown.
pub const OTHER_OP: u32 = u32::MAX - 1;
/// The caller's culprit keys (act indices) are below this; the engine's own keys name the
/// task that asked for a flush or another op ([`Culprit`]).
pub const MAX_CALLER_KEY: u32 = 1 << 30;
const FLUSH_BY: u32 = 1 << 31;
const OTHER_BY: u32 = 1 << 30;
const NONE: u64 = u64::MAX;

/// Preflush bios waiting per device beyond this many are forgotten, oldest first (a
/// bio-based device, dm or md, never issues the flush that would take them).
const MAX_PREFLUSH: usize = 1024;
/// Flush requests in flight per device beyond this many are forgotten, oldest first.
const MAX_FLUSHES: usize = 1024;
/// Victims split by one sweep at least (a sweep replays its device's requests before its
/// victims: smaller ranges would replay more than they split).
const MIN_CHUNK: usize = 4096;
/// A waiting request's phases not touched for this long are forgotten first when the map is
/// full (60 s: no request waits that long on a working device).
const PHASES_STALE_NS: u64 = 60_000_000_000;
/// No-data bios, other ops and flush links remembered at most (then forgotten at once: they
/// only name requesters).
const MAX_PENDING: usize = 65_536;

/// What a culprit key stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Culprit {
    /// The caller's key (ioblame: an act's index).
    Key(u32),
    /// Cache flushes asked for by this task (thread id) with an empty preflush bio
    /// (`blkdev_issue_flush`: an fsync with no journal commit, a log force), or whose data
    /// request was never charged.
    FlushBy(u32),
    /// Discards, write-zeroes and other ops queued by this task (thread id).
    OtherBy(u32),
    /// Flushes whose requester the trace does not show (a preflush queued before it began).
    Flush,
    /// Other ops whose requester the trace does not show.
    Other,
}

impl Culprit {
    /// The meaning of culprit key `k`.
    pub fn of(k: u32) -> Culprit {
        match k {
            FLUSH => Culprit::Flush,
            OTHER_OP => Culprit::Other,
            k if k & FLUSH_BY != 0 => Culprit::FlushBy(k & !FLUSH_BY),
            k if k & OTHER_BY != 0 => Culprit::OtherBy(k & !OTHER_BY),
            k => Culprit::Key(k),
        }
    }
}

/// Where a victim's idle time went (no request in flight on its device): the phase its own
/// request was in, from the request's block events (`docs/latency.md`, "Idle time").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Idle {
    /// Before it had a request (`block_bio_queue` to `block_getrq`, where
    /// `rq_qos_throttle()` sleeps), a write wbt may hold (not O_DIRECT) on a device where
    /// writeback throttling was seen acting (`wbt:wbt_timer`): held by wbt, or the submit
    /// path's own time (no tracepoint tells them apart).
    Wbt,
    /// Before it had a request, on a device where iocost was seen acting (`iocost:*`):
    /// held by iocost, or the submit path's own time.
    Iocost,
    /// Before it had a request, a write wbt may hold on a device where both were seen.
    WbtOrIocost,
    /// Before it had a request, no throttler seen acting on the device: the submit path
    /// (splitting, the CPU, a request's allocation, a throttler with no tracepoint such as
    /// io.latency).
    Submit,
    /// From `block_getrq` to `block_rq_insert`: the request sat in its task's plug list.
    Plug,
    /// From `block_rq_insert` to its first `block_rq_issue`: held by the I/O scheduler, on
    /// the dispatch list, or waiting for the queue to run.
    Scheduler,
    /// From `block_getrq` to its first issue with no insert recorded: in its task's plug,
    /// then issued directly (no scheduler).
    Dispatch,
    /// From its first issue to the last: the driver handed it back (`block_rq_requeue`).
    Requeue,
    /// Where the trace lacks the events to place it (no `block_getrq` recorded for its
    /// request, or no phase at all: a request queued before the recording, a trace without
    /// those events).
    Unexplained,
}

impl Idle {
    /// Every cause, in output order.
    pub const ALL: [Idle; 9] = [
        Idle::Wbt,
        Idle::Iocost,
        Idle::WbtOrIocost,
        Idle::Submit,
        Idle::Plug,
        Idle::Scheduler,
        Idle::Dispatch,
        Idle::Requeue,
        Idle::Unexplained,
    ];
    /// How many causes.
    pub const COUNT: usize = Idle::ALL.len();

    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Idle::Wbt => "wbt",
            Idle::Iocost => "iocost",
            Idle::WbtOrIocost => "wbt_or_iocost",
            Idle::Submit => "submit",
            Idle::Plug => "plug",
            Idle::Scheduler => "scheduler",
            Idle::Dispatch => "dispatch",
            Idle::Requeue => "requeue",
            Idle::Unexplained => "unexplained",
        }
    }

    /// What it means, in a few words, for text outputs.
    pub fn describe(self) -> &'static str {
        match self {
            Idle::Wbt => "before it had a request, wbt acting on the device",
            Idle::Iocost => "before it had a request, iocost acting on the device",
            Idle::WbtOrIocost => "before it had a request, wbt and iocost acting on the device",
            Idle::Submit => "before it had a request (no throttler seen on the device)",
            Idle::Plug => "in its task's plug",
            Idle::Scheduler => "inserted, waiting for dispatch (I/O scheduler, dispatch list)",
            Idle::Dispatch => "in its task's plug or dispatched directly (no insert seen)",
            Idle::Requeue => "requeued by the driver",
            Idle::Unexplained => "unexplained (its request's events are not in the trace)",
        }
    }
}

/// A data request's phases (`NONE` where not seen): its `block_getrq`, first
/// `block_rq_insert` and first `block_rq_issue`, and its last issue (the key of
/// [`BlameEngine::issued`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Phases {
    g: u64,
    i: u64,
    d: u64,
    last: u64,
}

impl Default for Phases {
    fn default() -> Phases {
        Phases::UNSEEN
    }
}

impl Phases {
    const UNSEEN: Phases = Phases {
        g: NONE,
        i: NONE,
        d: NONE,
        last: NONE,
    };

    /// Its latest event's time (0 for none).
    fn latest(&self) -> u64 {
        [self.g, self.i, self.d, self.last]
            .into_iter()
            .filter(|&t| t != NONE)
            .max()
            .unwrap_or(0)
    }
}

/// The throttlers seen acting on a device.
const WBT: u8 = 1;
const IOCOST: u8 = 2;

/// Who asked for a flush: a preflush bio's data request (charged later by the attribution,
/// at its device and first sector), or the task that queued an empty one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requester {
    Data { sector: u64, tid: u32 },
    Task(u32),
}

/// A flush or other-op request issued and not yet completed.
#[derive(Debug, Clone)]
struct Uncharged {
    issue: u64,
    requesters: Vec<Requester>,
}

/// One charged IO (a request, or the part of one charged to one act), as the attribution
/// emits it at its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoPart {
    /// The device the request ran on (kernel encoding; a whole disk).
    pub dev: Dev,
    /// The first sector of this part (a request that asked for a flush pays for it: the
    /// engine finds it by the sector of its preflush bio).
    pub sector: u64,
    /// Earliest queue time of its sectors (ns).
    pub queue: u64,
    /// The request's last issue (ns); its queue time on a bio-based device.
    pub issue: u64,
    /// Its completion (ns).
    pub complete: u64,
    /// Bytes of this part.
    pub bytes: u64,
    /// Who the part is charged to when it stands ahead of another IO (the caller's key,
    /// below [`MAX_CALLER_KEY`]: ioblame charges the act's index).
    pub culprit: u32,
    /// Whether writeback throttling may hold it: a write, not a direct one
    /// (`wbt_should_throttle()` exempts `REQ_SYNC | REQ_IDLE`, which O_DIRECT sets; reads
    /// are never held).
    pub wbt_may_hold: bool,
    /// Whose latency this part is, when it is a victim the caller wants split (the caller's
    /// key); `None` for a culprit only (a loop device's lower copy, a part out of scope).
    pub victim: Option<u32>,
}

/// One victim IO's Q2C, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    /// The caller's victim key ([`IoPart::victim`]).
    pub key: u32,
    /// Its device.
    pub dev: Dev,
    /// Queue time (ns).
    pub queue: u64,
    /// Completion (ns).
    pub complete: u64,
    /// Its bytes.
    pub bytes: u64,
    /// `complete - queue` (ns): `own + idle + Σ culprits`.
    pub q2c: u64,
    /// Its own request's share of the time (ns).
    pub own: u64,
    /// Time with no request in flight on the device (ns).
    pub idle: u64,
    /// `idle` by cause, indexed by [`Idle`] (`idle_by[Idle::Plug as usize]`); they add up
    /// to `idle`.
    pub idle_by: [u64; Idle::COUNT],
    /// Which of [`Blame`]'s culprit lists holds its culprits (one per device swept).
    part: u32,
    first_culprit: u32,
    culprits: u32,
}

/// What the engine met besides the splits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlameStats {
    /// Requests seen in flight (charged ones, flushes and other ops).
    pub requests: u64,
    /// Flush requests among them.
    pub flushes: u64,
    /// Discards and other ops among them.
    pub other_ops: u64,
    /// Charged IOs, flushes and other ops with no time on the device (completions that
    /// matched nothing issued, parts forgotten without a completion): neither victims nor
    /// culprits.
    pub no_device_time: u64,
    /// Flush or other-op completions that matched no issue (issued before the recording).
    pub unmatched: u64,
    /// Flushes charged to the acts of the data request that asked for them (a journal
    /// commit's preflush: its handles' acts).
    pub flushes_linked: u64,
    /// Flush requests requeued (their requesters wait for the next flush issued).
    pub flush_requeues: u64,
    /// Parts whose culprit key was not below [`MAX_CALLER_KEY`] (left out: neither victims
    /// nor culprits).
    pub bad_keys: u64,
    /// Victims whose busy time the shares did not account for (rounding aside): their
    /// busy time went to their own share. Zero unless a request was left without a part.
    pub unshared: u64,
    /// Data requests whose phases were forgotten (more than 65,536 waiting or unclaimed at
    /// once): their victims' idle time is unexplained.
    pub phases_forgotten: u64,
}

/// The splits of a trace's victims ([`BlameEngine::finish`]).
#[derive(Debug, Clone, Default)]
pub struct Blame {
    /// Every victim, by completion time (then device and queue time).
    pub victims: Vec<Victim>,
    /// Per device swept, its victims' culprits.
    culprits: Vec<Vec<(u32, u64)>>,
    /// What the engine met.
    pub stats: BlameStats,
}

impl Blame {
    /// The time (ns) `v` waited behind each culprit key, in no particular order; keys that
    /// cost it nothing are left out.
    pub fn culprits_of(&self, v: &Victim) -> &[(u32, u64)] {
        let a = v.first_culprit as usize;
        &self.culprits[v.part as usize][a..a + v.culprits as usize]
    }
}

/// A request as the engine keeps it until the sweep.
#[derive(Debug, Clone, Copy)]
struct Req {
    issue: u64,
    complete: u64,
    first_part: u32,
    parts: u32,
}

#[derive(Debug, Clone, Copy)]
struct VictimIn {
    queue: u64,
    complete: u64,
    req: u32,
    key: u32,
    bytes: u64,
    phases: Phases,
    wbt_may_hold: bool,
}

/// A part of a flush or other-op request: one requester's equal share of it (its `group`),
/// cut by bytes among the acts of the data request that asked for it.
#[derive(Debug, Clone, Copy)]
struct LatePart {
    req: u32,
    group: u32,
    culprit: u32,
    bytes: u64,
}

#[derive(Debug, Default)]
struct DevLog {
    reqs: Vec<Req>,
    /// The parts of flush and other-op requests, known at the end.
    late_parts: Vec<LatePart>,
    /// `(culprit, weight)`: the part's share of its request (bytes, or equal parts).
    parts: Vec<(u32, f64)>,
    part_bytes: Vec<u64>,
    victims: Vec<VictimIn>,
}

impl DevLog {
    fn push_req(&mut self, issue: u64, complete: u64) -> u32 {
        self.reqs.push(Req {
            issue,
            complete,
            first_part: self.parts.len() as u32,
            parts: 0,
        });
        (self.reqs.len() - 1) as u32
    }

    fn push_part(&mut self, req: u32, culprit: u32, bytes: u64) {
        let r = &mut self.reqs[req as usize];
        debug_assert_eq!(r.first_part + r.parts, self.parts.len() as u32);
        r.parts += 1;
        self.parts.push((culprit, 0.0));
        self.part_bytes.push(bytes);
    }

    /// Puts the late parts with their requests (each request's parts stay contiguous), each
    /// requester an equal share, cut by bytes among its acts.
    fn settle(&mut self) {
        let mut late = std::mem::take(&mut self.late_parts);
        late.sort_by_key(|p| (p.req, p.group));
        let mut i = 0;
        while i < late.len() {
            let req = late[i].req;
            let j = i + late[i..].iter().take_while(|p| p.req == req).count();
            let parts = &late[i..j];
            let mut groups: Vec<u32> = parts.iter().map(|p| p.group).collect();
            groups.dedup();
            let r = &mut self.reqs[req as usize];
            r.first_part = self.parts.len() as u32;
            r.parts = parts.len() as u32;
            for p in parts {
                let same: Vec<&LatePart> = parts.iter().filter(|q| q.group == p.group).collect();
                let total: u64 = same.iter().map(|q| q.bytes).sum();
                let within = if total == 0 {
                    1.0 / same.len() as f64
                } else {
                    p.bytes as f64 / total as f64
                };
                self.parts.push((p.culprit, within / groups.len() as f64));
                self.part_bytes.push(p.bytes);
            }
            i = j;
        }
    }

    /// Each part's weight: its bytes over its request's, or equal parts for a request of
    /// no bytes.
    fn weigh(&mut self) {
        for r in &self.reqs {
            let range = r.first_part as usize..(r.first_part + r.parts) as usize;
            let total: u64 = self.part_bytes[range.clone()].iter().sum();
            for i in range {
                self.parts[i].1 = if total == 0 {
                    1.0 / r.parts as f64
                } else {
                    self.part_bytes[i] as f64 / total as f64
                };
            }
        }
    }
}

/// Splits the Q2C of every victim IO: fed the decoded events in time order
/// ([`BlameEngine::push_event`], for the requests the attribution does not charge: flushes,
/// discards) and the attribution's charged IOs in the order it emits them
/// ([`BlameEngine::push_io`]; the parts of one request come one after the other).
#[derive(Default)]
pub struct BlameEngine {
    devs: HashMap<Dev, DevLog>,
    /// The request the last part joined: `(dev, issue, complete, index)`.
    last: Option<(Dev, u64, u64, u32)>,
    /// Preflush bios queued and not yet served by a flush, per device.
    preflush: HashMap<Dev, Vec<Requester>>,
    /// Flush requests in flight, per device, oldest first.
    flushes: HashMap<Dev, VecDeque<Uncharged>>,
    /// Who queued the no-data bios waiting at `(dev, sector)`.
    other_bios: HashMap<(Dev, u64), u32>,
    /// Other-op requests in flight at `(dev, sector)`, with their size.
    others: HashMap<(Dev, u64), (Uncharged, u32)>,
    /// Flush requests waiting for the data request that asked for them: `(dev, sector)` ->
    /// the placeholder parts (in the device's late parts) to charge to its acts.
    links: HashMap<(Dev, u64), Vec<u32>>,
    /// The placeholders of the flushes the request being emitted asked for, and whether
    /// each has taken its first part.
    paying: Vec<(u32, bool)>,
    /// The devices whose events are followed (all when `None`).
    select: Option<Box<dyn Fn(Dev) -> bool + Send>>,
    /// Data requests waiting, by device and first sector: their phases so far.
    pending: FxHashMap<(Dev, u64), Phases>,
    /// Data requests issued, by device and issue time, until their charged IO comes.
    issued: FxHashMap<(Dev, u64), Phases>,
    /// The phases of the request the last part joined.
    last_phases: Phases,
    /// The throttlers seen acting per device ([`WBT`], [`IOCOST`]).
    throttlers: FxHashMap<Dev, u8>,
    /// The disks iocost was seen acting on, by kernel name (resolved at the end).
    iocost_disks: BTreeSet<String>,
    /// The trace's disks by kernel name ([`BlameEngine::name_disks`]).
    disks: HashMap<String, Dev>,
    stats: BlameStats,
}

impl std::fmt::Debug for BlameEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlameEngine")
            .field("devices", &self.devs.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl BlameEngine {
    /// An engine with nothing seen, following every device's events.
    pub fn new() -> BlameEngine {
        BlameEngine::default()
    }

    /// An engine following the events of the devices `select` accepts (kernel encoding):
    /// the IO of other devices can stand ahead of no victim it splits.
    pub fn with_devices(select: impl Fn(Dev) -> bool + Send + 'static) -> BlameEngine {
        BlameEngine {
            select: Some(Box::new(select)),
            ..BlameEngine::default()
        }
    }

    fn selected(&self, dev: Dev) -> bool {
        self.select.as_ref().is_none_or(|s| s(dev))
    }

    /// The trace's block devices, `(device, kernel name)`: iocost's events name disks.
    pub fn name_disks(&mut self, disks: impl IntoIterator<Item = (Dev, String)>) {
        self.disks
            .extend(disks.into_iter().map(|(dev, name)| (name, dev)));
    }

    /// The phases of the data request at `(dev, sector)`, made if unseen. Bounded: when
    /// full, the requests seen last more than [`PHASES_STALE_NS`] before `now` (merged away
    /// unseen, completed on a device not followed) are forgotten, and if that is not enough,
    /// all.
    fn phases_at(&mut self, dev: Dev, sector: u64, now: u64) -> &mut Phases {
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&(dev, sector)) {
            let horizon = now.saturating_sub(PHASES_STALE_NS);
            self.stats.phases_forgotten +=
                forget_stale(&mut self.pending, |_, p| p.latest() >= horizon);
        }
        self.pending.entry((dev, sector)).or_insert(Phases::UNSEEN)
    }

    /// Feeds one decoded event (time order): flush and other-op requests are followed from
    /// their issue to their completion, with who asked for them; everything else is the
    /// attribution's to charge.
    pub fn push_event(&mut self, ev: &Event) {
        match ev.kind {
            EventKind::GetRq {
                dev,
                sector,
                nr_sector,
                rwbs,
            } if nr_sector > 0 && !moves_no_data(rwbs) && self.selected(dev) => {
                *self.phases_at(dev, sector, ev.time) = Phases {
                    g: ev.time,
                    ..Phases::UNSEEN
                };
            }
            EventKind::RqInsert {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } if nr_sector > 0 && !moves_no_data(rwbs) && self.selected(dev) => {
                let p = self.phases_at(dev, sector, ev.time);
                if p.i == NONE {
                    p.i = ev.time;
                }
            }
            EventKind::BioFrontmerge {
                dev,
                sector,
                nr_sector,
                ..
            } if self.selected(dev) => {
                // The request that began after the bio now begins with it.
                if let Some(p) = self
                    .pending
                    .remove(&(dev, sector.saturating_add(nr_sector as u64)))
                {
                    self.pending.insert((dev, sector), p);
                }
            }
            EventKind::RqMerge { dev, sector, .. } if self.selected(dev) => {
                // A request merged into another: it is gone.
                self.pending.remove(&(dev, sector));
            }
            EventKind::Wbt { bdi, .. } if bdi != 0 => {
                *self.throttlers.entry(bdi).or_default() |= WBT;
            }
            EventKind::Iocost { ref disk } if !self.iocost_disks.contains(disk) => {
                self.iocost_disks.insert(disk.clone());
            }
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                rwbs,
            } if self.selected(dev) => {
                if rwbs.has(Rwbs::PREFLUSH) {
                    let r = if nr_sector > 0 {
                        Requester::Data {
                            sector,
                            tid: ev.tid,
                        }
                    } else {
                        Requester::Task(ev.tid)
                    };
                    let waiting = self.preflush.entry(dev).or_default();
                    if waiting.len() >= MAX_PREFLUSH {
                        waiting.remove(0);
                    }
                    waiting.push(r);
                } else if nr_sector > 0 && moves_no_data(rwbs) {
                    if self.other_bios.len() >= MAX_PENDING {
                        self.other_bios.clear();
                    }
                    self.other_bios.insert((dev, sector), ev.tid);
                }
            }
            EventKind::RqRequeue {
                dev,
                nr_sector,
                rwbs,
                ..
            } if nr_sector == 0 && rwbs.has(Rwbs::FLUSH) && self.selected(dev) => {
                // The flush issued last goes back: its requesters wait for the next issue.
                if let Some(u) = self.flushes.get_mut(&dev).and_then(VecDeque::pop_back) {
                    let waiting = self.preflush.entry(dev).or_default();
                    let mut back = u.requesters;
                    back.append(waiting);
                    *waiting = back;
                    self.stats.flush_requeues += 1;
                }
            }
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } if self.selected(dev) => {
                if nr_sector == 0 && rwbs.has(Rwbs::FLUSH) {
                    // One flush serves every preflush waiting when it is issued.
                    let requesters = self.preflush.remove(&dev).unwrap_or_default();
                    let fifo = self.flushes.entry(dev).or_default();
                    if fifo.len() >= MAX_FLUSHES {
                        fifo.pop_front();
                        self.stats.unmatched += 1;
                    }
                    fifo.push_back(Uncharged {
                        issue: ev.time,
                        requesters,
                    });
                } else if nr_sector > 0 && !moves_no_data(rwbs) {
                    // A data request: its first issue is a phase; its charged IO, at its
                    // completion, finds the phases by this (last) issue.
                    let t = ev.time;
                    let p = self.phases_at(dev, sector, t);
                    if p.d == NONE {
                        p.d = t;
                    }
                    // Issued again (requeued, re-dispatched): only the last issue is looked
                    // up.
                    let old = std::mem::replace(&mut p.last, t);
                    let p = *p;
                    if old != NONE {
                        self.issued.remove(&(dev, old));
                    }
                    if self.issued.len() >= MAX_PENDING {
                        // Issues whose charged IO never came (a device's IO not charged).
                        let horizon = t.saturating_sub(PHASES_STALE_NS);
                        self.stats.phases_forgotten +=
                            forget_stale(&mut self.issued, |&(_, at), _| at >= horizon);
                    }
                    self.issued.insert((dev, t), p);
                } else if nr_sector > 0 && moves_no_data(rwbs) {
                    let requesters = match self.other_bios.remove(&(dev, sector)) {
                        Some(tid) => vec![Requester::Task(tid)],
                        // A re-dispatch keeps its requester; the last issue counts.
                        None => self
                            .others
                            .remove(&(dev, sector))
                            .map(|(u, _)| u.requesters)
                            .unwrap_or_default(),
                    };
                    let u = Uncharged {
                        issue: ev.time,
                        requesters,
                    };
                    if self.others.len() >= MAX_PENDING {
                        self.others.clear();
                    }
                    self.others.insert((dev, sector), (u, nr_sector));
                }
            }
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector,
                rwbs,
                ..
            } if self.selected(dev) => {
                if nr_sector == 0 && rwbs.has(Rwbs::FLUSH) {
                    match self.flushes.get_mut(&dev).and_then(VecDeque::pop_front) {
                        Some(u) => {
                            self.stats.flushes += 1;
                            self.uncharged(dev, u, ev.time, FLUSH, 0);
                        }
                        None => self.stats.unmatched += 1,
                    }
                } else if nr_sector > 0 && !moves_no_data(rwbs) {
                    self.pending.remove(&(dev, sector));
                } else if nr_sector > 0 && moves_no_data(rwbs) {
                    match self.others.remove(&(dev, sector)) {
                        Some((u, nr)) => {
                            if nr > nr_sector {
                                // A partial completion: the rest stays in flight.
                                self.others.insert(
                                    (dev, sector.saturating_add(nr_sector as u64)),
                                    (u.clone(), nr - nr_sector),
                                );
                            }
                            self.stats.other_ops += 1;
                            let bytes = nr_sector as u64 * 512;
                            self.uncharged(dev, u, ev.time, OTHER_OP, bytes);
                        }
                        None => self.stats.unmatched += 1,
                    }
                }
            }
            _ => {}
        }
    }

    /// A flush or other op completed: a request whose parts are its requesters (a flush
    /// asked for by a data request waits for that request's charges, [`Self::push_io`]).
    fn uncharged(&mut self, dev: Dev, u: Uncharged, complete: u64, unknown: u32, bytes: u64) {
        self.last = None;
        if u.issue >= complete {
            self.stats.no_device_time += 1;
            return;
        }
        if self.links.len() >= MAX_PENDING {
            // Data requests that never came (another level's, lost): their flushes keep the
            // task that queued them.
            self.links.clear();
        }
        self.stats.requests += 1;
        let log = self.devs.entry(dev).or_default();
        let r = log.push_req(u.issue, complete);
        let mut part = |group: u32, culprit: u32| {
            log.late_parts.push(LatePart {
                req: r,
                group,
                culprit,
                bytes,
            });
            (log.late_parts.len() - 1) as u32
        };
        if u.requesters.is_empty() {
            part(0, unknown);
        }
        let by = if unknown == FLUSH { FLUSH_BY } else { OTHER_BY };
        for (g, q) in u.requesters.into_iter().enumerate() {
            match q {
                Requester::Task(tid) => {
                    part(g as u32, by | (tid & (OTHER_BY - 1)));
                }
                Requester::Data { sector, tid } => {
                    // Until the data request is charged, the task that queued it.
                    let i = part(g as u32, by | (tid & (OTHER_BY - 1)));
                    self.links.entry((dev, sector)).or_default().push(i);
                }
            }
        }
    }

    /// Feeds one charged IO. Consecutive parts with the same device, issue and completion
    /// are one request. A part with no time on the device (completed when issued) is
    /// neither victim nor culprit.
    pub fn push_io(&mut self, io: IoPart) {
        if io.issue >= io.complete {
            self.stats.no_device_time += 1;
            return;
        }
        if io.culprit >= MAX_CALLER_KEY {
            self.stats.bad_keys += 1;
            return;
        }
        let log = self.devs.entry(io.dev).or_default();
        let req = match self.last {
            Some((d, i, c, r))
                if d == io.dev
                    && i == io.issue
                    && c == io.complete
                    && r as usize + 1 == log.reqs.len() =>
            {
                r
            }
            _ => {
                self.stats.requests += 1;
                // A data request that asked for flushes pays for them.
                self.paying = self
                    .links
                    .remove(&(io.dev, io.sector))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| (i, false))
                    .collect();
                self.stats.flushes_linked += self.paying.len() as u64;
                self.last_phases = self
                    .issued
                    .remove(&(io.dev, io.issue))
                    .unwrap_or(Phases::UNSEEN);
                log.push_req(io.issue, io.complete)
            }
        };
        self.last = Some((io.dev, io.issue, io.complete, req));
        log.push_part(req, io.culprit, io.bytes);
        for (i, taken) in &mut self.paying {
            let p = &mut log.late_parts[*i as usize];
            if *taken {
                let mut more = *p;
                more.culprit = io.culprit;
                more.bytes = io.bytes;
                log.late_parts.push(more);
            } else {
                p.culprit = io.culprit;
                p.bytes = io.bytes;
                *taken = true;
            }
        }
        if let Some(key) = io.victim {
            log.victims.push(VictimIn {
                queue: io.queue.min(io.issue),
                complete: io.complete,
                req,
                key,
                bytes: io.bytes,
                phases: self.last_phases,
                wbt_may_hold: io.wbt_may_hold,
            });
        }
    }

    /// Splits every victim's Q2C.
    pub fn finish(self) -> Blame {
        self.finish_in(MIN_CHUNK)
    }

    /// [`BlameEngine::finish`], a sweep splitting `min_chunk` victims at least.
    fn finish_in(self, min_chunk: usize) -> Blame {
        let mut out = Blame {
            stats: self.stats,
            ..Blame::default()
        };
        let mut throttlers = self.throttlers;
        for name in &self.iocost_disks {
            if let Some(&dev) = self.disks.get(name) {
                *throttlers.entry(dev).or_default() |= IOCOST;
            }
        }
        let mut devs: Vec<(Dev, DevLog)> = self.devs.into_iter().collect();
        devs.sort_by_key(|(d, _)| *d);
        let prepared: Vec<Prepared> = devs
            .into_par_iter()
            .map(|(dev, log)| {
                let t = throttlers.get(&dev).copied().unwrap_or(0);
                prepare(dev, log, t)
            })
            .collect();
        // The devices are independent, and a device's victims too once its requests are
        // replayed: split in parallel by ranges of victims, about four per thread, each into
        // lists of its own.
        let total: usize = prepared.iter().map(|p| p.log.victims.len()).sum();
        let chunk = (total / (4 * rayon::current_num_threads().max(1))).max(min_chunk);
        let tasks: Vec<(usize, std::ops::Range<usize>)> = prepared
            .iter()
            .enumerate()
            .flat_map(|(d, p)| {
                let n = p.log.victims.len();
                (0..n.div_ceil(chunk)).map(move |c| (d, c * chunk..((c + 1) * chunk).min(n)))
            })
            .collect();
        let swept: Vec<Swept> = tasks
            .into_par_iter()
            .map(|(d, range)| sweep(&prepared[d], range))
            .collect();
        for (i, d) in swept.into_iter().enumerate() {
            out.stats.unshared += d.unshared;
            out.victims.extend(d.victims.into_iter().map(|v| Victim {
                part: i as u32,
                ..v
            }));
            out.culprits.push(d.culprits);
        }
        // By completion (then device and queue time, then the sweep's order, whatever the ranges:
        // the same order on any number of threads); the culprits stay where they are.
        out.victims
            .sort_by_key(|v| (v.complete, v.dev, v.queue, v.part, v.first_culprit));
        out
    }
}

/// Empties a full map of phases of what `fresh` rejects, and of everything if that leaves
/// it half full still; returns how many entries it forgot.
fn forget_stale<K, V>(map: &mut FxHashMap<K, V>, mut fresh: impl FnMut(&K, &V) -> bool) -> u64 {
    let before = map.len();
    map.retain(|k, v| fresh(k, v));
    if map.len() >= MAX_PENDING / 2 {
        map.clear();
    }
    (before - map.len()) as u64
}

/// Whether a request of these flags carries no data the attribution charges (a discard,
/// secure erase, write-zeroes or other op; not a flush, which has no sectors).
fn moves_no_data(rwbs: Rwbs) -> bool {
    !rwbs.is_read() && !rwbs.is_write() && !rwbs.has(Rwbs::FLUSH)
}

/// A breakpoint of a device's busy clocks: from `t` on, `n` requests in flight;
/// `f = ∫ 1/n` and `g = ∫ [n > 0]` up to `t`.
#[derive(Debug, Clone, Copy)]
struct Clock {
    t: u64,
    f: f64,
    g: u64,
    n: u32,
}

/// A breakpoint of one culprit key: from `t` on, weight `k` in flight; `h = ∫ k/n` up to
/// `t`, when the device's `f` was `f`.
#[derive(Debug, Clone, Copy, Default)]
struct KeyPoint {
    t: u64,
    h: f64,
    f: f64,
    k: f64,
}

#[derive(Debug, Default)]
struct KeyState {
    /// The last of `points` (all zero before the first), kept inline: most reads need only
    /// it, and the history is elsewhere on the heap.
    last: KeyPoint,
    points: Vec<KeyPoint>,
    /// Requests of the key in flight.
    count: u32,
}

impl KeyState {
    fn now(&self) -> KeyPoint {
        self.last
    }

    /// `H(t)` for any `t` up to the key's last point or later, given the device's `F(t)`.
    fn h_at(&self, t: u64, f_t: f64) -> f64 {
        let p = self.last;
        if p.t <= t {
            // Before the first point `last` is all zero: H is 0.
            return p.h + p.k * (f_t - p.f);
        }
        // A victim's span is recent: gallop back from the last point, then search.
        let n = self.points.len();
        let mut step = 1;
        let mut lo = n.saturating_sub(1);
        while lo > 0 && self.points[lo].t > t {
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        let hi = (lo + step).min(n);
        let i = lo + self.points[lo..hi].partition_point(|p| p.t <= t);
        if i == 0 {
            return 0.0;
        }
        let p = self.points[i - 1];
        p.h + p.k * (f_t - p.f)
    }
}

struct Sweep {
    clocks: Vec<Clock>,
    /// Per dense key id.
    keys: Vec<KeyState>,
    /// Per dense key id: its last change, or `u64::MAX`.
    last_change: Vec<u64>,
    /// Per dense key id: its place in `active`, or `u32::MAX`.
    active_at: Vec<u32>,
    /// The dense ids with requests in flight.
    active: Vec<u32>,
    /// `(time, key)` of the keys' changes in time order (the sweep's order), for the keys
    /// that changed inside a span: an entry counts only if it is its key's last
    /// (`last_at`); the others are dropped now and then ([`Sweep::compact`]).
    changes: Vec<(u64, u32)>,
    /// Per dense key id: the place of its last change in `changes`, or `u32::MAX`.
    last_at: Vec<u32>,
    /// Keys with an entry in `changes`.
    changed: usize,
    /// Per dense key id: the victim (plus one) that last visited it.
    seen: Vec<u32>,
}

impl Sweep {
    fn new(keys: usize) -> Sweep {
        Sweep {
            clocks: vec![Clock {
                t: 0,
                f: 0.0,
                g: 0,
                n: 0,
            }],
            keys: (0..keys).map(|_| KeyState::default()).collect(),
            last_change: vec![u64::MAX; keys],
            active_at: vec![u32::MAX; keys],
            active: Vec::new(),
            changes: Vec::new(),
            last_at: vec![u32::MAX; keys],
            changed: 0,
            seen: vec![0; keys],
        }
    }

    /// `(F(t), G(t))` for any `t` up to now.
    fn clocks_at(&self, t: u64) -> (f64, u64) {
        let last = self.clocks[self.clocks.len() - 1];
        let c = if t >= last.t {
            last
        } else {
            let i = self.clocks.partition_point(|c| c.t <= t).max(1);
            self.clocks[i - 1]
        };
        if c.n == 0 || t <= c.t {
            (c.f, c.g)
        } else {
            (c.f + (t - c.t) as f64 / c.n as f64, c.g + (t - c.t))
        }
    }

    /// `n` changes by `delta` at `t`.
    fn step(&mut self, t: u64, delta: i32) -> f64 {
        let (f, g) = self.clocks_at(t);
        let n = self.clocks.last().map_or(0, |c| c.n);
        let n = (n as i64 + delta as i64).max(0) as u32;
        match self.clocks.last_mut() {
            Some(c) if c.t == t => {
                c.n = n;
            }
            _ => self.clocks.push(Clock { t, f, g, n }),
        }
        f
    }

    /// Key `key`'s (dense id) weight in flight changes by `dw` at `t`, when the device's `F`
    /// is `f`.
    fn key_step(&mut self, key: u32, t: u64, f: f64, dw: f64, starts: bool) {
        let s = &mut self.keys[key as usize];
        let p = s.now();
        let h = p.h + p.k * (f - p.f);
        if starts {
            s.count += 1;
        } else {
            s.count = s.count.saturating_sub(1);
        }
        let k = if s.count == 0 {
            0.0
        } else {
            (p.k + dw).max(0.0)
        };
        let point = KeyPoint { t, h, f, k };
        match s.points.last_mut() {
            Some(last) if last.t == t => *last = point,
            _ => s.points.push(point),
        }
        s.last = point;
        let at = self.active_at[key as usize];
        if s.count == 0 {
            if at != u32::MAX {
                self.active.swap_remove(at as usize);
                if let Some(&moved) = self.active.get(at as usize) {
                    self.active_at[moved as usize] = at;
                }
                self.active_at[key as usize] = u32::MAX;
            }
        } else if at == u32::MAX {
            self.active_at[key as usize] = self.active.len() as u32;
            self.active.push(key);
        }
        let old = std::mem::replace(&mut self.last_change[key as usize], t);
        if old != t {
            if old == u64::MAX {
                self.changed += 1;
            }
            self.last_at[key as usize] = self.changes.len() as u32;
            self.changes.push((t, key));
            if self.changes.len() > 2 * self.changed + 4096 {
                self.compact();
            }
        }
    }

    /// Drops the entries of `changes` that are not their key's last (keeping the order): at
    /// most as many stale entries as live ones, plus 4,096, stay between two compactions.
    fn compact(&mut self) {
        let mut j = 0;
        for i in 0..self.changes.len() {
            let (t, key) = self.changes[i];
            if self.last_at[key as usize] == i as u32 {
                self.changes[j] = (t, key);
                self.last_at[key as usize] = j as u32;
                j += 1;
            }
        }
        self.changes.truncate(j);
    }

    /// Appends to `keys` the keys in flight now and those whose last change is after `a`,
    /// once each (`stamp`, new for each call, marks those taken).
    fn keys_since(&mut self, a: u64, stamp: u32, keys: &mut Vec<u32>) {
        let from = self.changes.partition_point(|&(t, _)| t <= a);
        let later = self.changes[from..]
            .iter()
            .enumerate()
            .filter(|&(i, &(_, key))| self.last_at[key as usize] == (from + i) as u32)
            .map(|(_, &(_, key))| key);
        for k in self.active.iter().copied().chain(later) {
            if self.seen[k as usize] != stamp {
                self.seen[k as usize] = stamp;
                keys.push(k);
            }
        }
    }
}

/// One device's victims and their culprits.
#[derive(Default)]
struct Swept {
    victims: Vec<Victim>,
    culprits: Vec<(u32, u64)>,
    unshared: u64,
}

/// What every sweep of one device reads: its culprit keys as dense ids, its parts with
/// them, and its points in time order.
struct Prepared {
    dev: Dev,
    log: DevLog,
    throttlers: u8,
    parts: Vec<(u32, f64)>,
    original: Vec<u32>,
    /// `(time, what, index)`: 0 a request starts, 1 a request ends, 2 a victim ends.
    points: Vec<(u64, u8, u32)>,
}

/// Weighs and settles a device's log, and lays its points out in time order.
fn prepare(dev: Dev, mut log: DevLog, throttlers: u8) -> Prepared {
    log.weigh();
    log.settle();
    let mut dense: FxHashMap<u32, u32> = FxHashMap::default();
    let mut original: Vec<u32> = Vec::new();
    let parts: Vec<(u32, f64)> = log
        .parts
        .iter()
        .map(|&(key, w)| {
            let id = *dense.entry(key).or_insert_with(|| {
                original.push(key);
                (original.len() - 1) as u32
            });
            (id, w)
        })
        .collect();
    // (time, what): 0 a request starts, 1 a request ends, 2 a victim ends.
    let mut points: Vec<(u64, u8, u32)> =
        Vec::with_capacity(log.reqs.len() * 2 + log.victims.len());
    for (i, r) in log.reqs.iter().enumerate() {
        points.push((r.issue, 0, i as u32));
        points.push((r.complete, 1, i as u32));
    }
    for (i, v) in log.victims.iter().enumerate() {
        points.push((v.complete, 2, i as u32));
    }
    // At one instant the order does not change any integral; starts first, then ends.
    points.sort_unstable();
    Prepared {
        dev,
        log,
        throttlers,
        parts,
        original,
        points,
    }
}

/// Sweeps one device's requests in time order, splitting its victims of ranks `victims`
/// (their order of completion): the requests before the first are replayed to build the
/// clocks, so the victims of one device can be split by several sweeps in parallel.
fn sweep(p: &Prepared, victims: std::ops::Range<usize>) -> Swept {
    let (dev, log, throttlers) = (p.dev, &p.log, p.throttlers);
    let (parts, original) = (&p.parts, &p.original);
    let mut out = Swept {
        victims: Vec::with_capacity(victims.len()),
        ..Swept::default()
    };
    let mut rank = 0usize;
    let mut s = Sweep::new(original.len());
    let mut vals: Vec<(u32, f64)> = Vec::new();
    let mut keys: Vec<u32> = Vec::new();
    let mut cut = Cut::default();
    let mut stamp = 0u32;
    for &(t, what, i) in &p.points {
        match what {
            0 | 1 => {
                let r = log.reqs[i as usize];
                let starts = what == 0;
                let f = s.step(t, if starts { 1 } else { -1 });
                for &(key, w) in &parts[r.first_part as usize..(r.first_part + r.parts) as usize] {
                    s.key_step(key, t, f, if starts { w } else { -w }, starts);
                }
            }
            _ => {
                rank += 1;
                if rank <= victims.start {
                    continue;
                }
                if rank > victims.end {
                    break;
                }
                let v = log.victims[i as usize];
                let (a, b) = (v.queue, v.complete);
                let (fa, ga) = s.clocks_at(a);
                let (fb, gb) = s.clocks_at(b);
                let busy = gb - ga;
                let q2c = b - a;
                let idle = q2c - busy;
                let r = log.reqs[v.req as usize];
                let own_parts = &parts[r.first_part as usize..(r.first_part + r.parts) as usize];
                let (fs, _) = s.clocks_at(r.issue.max(a));
                let own = (fb - fs).max(0.0);
                // The keys in flight now, and those that changed inside the span, once each.
                stamp = stamp.wrapping_add(1).max(1);
                keys.clear();
                s.keys_since(a, stamp, &mut keys);
                vals.clear();
                for &key in &keys {
                    let st = &s.keys[key as usize];
                    let mut x = st.h_at(b, fb) - st.h_at(a, fa);
                    for &(k, w) in own_parts {
                        if k == key {
                            x -= w * own;
                        }
                    }
                    if x > 0.0 {
                        vals.push((original[key as usize], x));
                    }
                }
                let first = out.culprits.len() as u32;
                let idle_by = idle_split(&s, &v, a, r.issue.max(a), idle, throttlers);
                let (own_ns, unshared) = cut.apportion(busy, own, &vals, &mut out.culprits);
                if unshared {
                    out.unshared += 1;
                }
                out.victims.push(Victim {
                    key: v.key,
                    dev,
                    queue: a,
                    complete: b,
                    bytes: v.bytes,
                    q2c,
                    own: own_ns,
                    idle,
                    idle_by,
                    part: 0,
                    first_culprit: first,
                    culprits: out.culprits.len() as u32 - first,
                });
            }
        }
    }
    out
}

/// A victim's idle time in `[a, issue)` cut at its request's phases (its own request is in
/// flight from `issue` on: no idle after). The parts add up to `idle` exactly.
fn idle_split(
    s: &Sweep,
    v: &VictimIn,
    a: u64,
    issue: u64,
    idle: u64,
    throttlers: u8,
) -> [u64; Idle::COUNT] {
    let mut by = [0u64; Idle::COUNT];
    if idle == 0 {
        return by;
    }
    let before = match (
        throttlers & WBT != 0 && v.wbt_may_hold,
        throttlers & IOCOST != 0,
    ) {
        (true, true) => Idle::WbtOrIocost,
        (true, false) => Idle::Wbt,
        (false, true) => Idle::Iocost,
        (false, false) => Idle::Submit,
    };
    let p = v.phases;
    // The phases in order, each from the end of the one before, clamped to [a, issue]
    // (steps ending at `issue` after it are empty).
    use Idle::{Dispatch, Plug, Requeue, Scheduler, Unexplained};
    let end = (issue, Requeue);
    let steps = match (p.g != NONE, p.i != NONE, p.d != NONE) {
        (_, _, false) => [(issue, Unexplained); 4],
        (true, true, true) => [(p.g, before), (p.i, Plug), (p.d, Scheduler), end],
        (true, false, true) => [(p.g, before), (p.d, Dispatch), end, end],
        (false, true, true) => [(p.i, Unexplained), (p.d, Scheduler), end, end],
        (false, false, true) => [(p.d, Unexplained), end, end, end],
    };
    // Idle in [at, to) is its length less the busy clock's growth, each boundary's clock
    // read once.
    let (mut at, mut busy_at) = (a, s.clocks_at(a).1);
    for (to, cause) in steps {
        let to = to.clamp(at, issue.max(at));
        let busy_to = s.clocks_at(to).1;
        by[cause as usize] += (to - at) - (busy_to - busy_at);
        (at, busy_at) = (to, busy_to);
    }
    // Exact by construction (the victim's own request is in flight from `issue`); any
    // difference is the trace's, and stays unexplained.
    let sum: u64 = by.iter().sum();
    let u = &mut by[Idle::Unexplained as usize];
    if sum <= idle {
        *u += idle - sum;
    } else {
        *u = u.saturating_sub(sum - idle);
    }
    by
}

/// The scratch of [`Cut::apportion`], reused from victim to victim.
#[derive(Debug, Default)]
struct Cut {
    /// (index: 0 own, i + 1 culprit i; floor; remainder)
    parts: Vec<(usize, u64, f64)>,
    order: Vec<usize>,
}

impl Cut {
    /// Cuts `total` integer nanoseconds in proportion to `own` and the culprits' real-valued
    /// shares `vals` by largest remainder (ties to own, then in `vals`' order, the order the
    /// sweep met the keys): the integers
    /// add up to `total`. Appends the culprits' non-zero shares to `out`; returns own's.
    /// When the shares are all zero but `total` is not (no part accounted for the busy time),
    /// `total` goes to own and the flag says so.
    fn apportion(
        &mut self,
        total: u64,
        own: f64,
        vals: &[(u32, f64)],
        out: &mut Vec<(u32, u64)>,
    ) -> (u64, bool) {
        if total == 0 {
            return (0, false);
        }
        let sum: f64 = own + vals.iter().map(|v| v.1).sum::<f64>();
        if sum <= 0.0 {
            return (total, true);
        }
        let scale = total as f64 / sum;
        self.parts.clear();
        self.parts.extend(
            std::iter::once(own)
                .chain(vals.iter().map(|v| v.1))
                .enumerate()
                .map(|(i, x)| {
                    let y = x * scale;
                    let fl = (y.floor() as u64).min(total);
                    (i, fl, y - fl as f64)
                }),
        );
        let floors: u64 = self.parts.iter().map(|c| c.1).sum();
        if floors > total {
            // Rounding pushed the floors over (only possible by a nanosecond or so): take
            // the excess from the largest.
            let mut excess = floors - total;
            self.order.clear();
            self.order.extend(0..self.parts.len());
            let parts = &self.parts;
            self.order
                .sort_by_key(|&i| (std::cmp::Reverse(parts[i].1), i));
            for &i in &self.order {
                let c = &mut self.parts[i];
                let t = excess.min(c.1);
                c.1 -= t;
                excess -= t;
            }
        } else if floors < total {
            let mut left = total - floors;
            self.order.clear();
            self.order.extend(0..self.parts.len());
            let parts = &self.parts;
            let by_remainder =
                |x: &usize, y: &usize| parts[*y].2.total_cmp(&parts[*x].2).then(x.cmp(y));
            let n = self.order.len();
            if (left as usize) < n {
                // Only the `left` largest remainders take a nanosecond: select them, no sort
                // (the order is total, so which they are does not depend on the method).
                self.order
                    .select_nth_unstable_by(left as usize, by_remainder);
            } else {
                self.order.sort_by(by_remainder);
            }
            while left > 0 {
                let take = (left as usize).min(n);
                for &i in &self.order[..take] {
                    self.parts[i].1 += 1;
                }
                left -= take as u64;
            }
        }
        for c in &self.parts[1..] {
            if c.1 > 0 {
                out.push((vals[c.0 - 1].0, c.1));
            }
        }
        (self.parts[0].1, false)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    const D: Dev = 7 << 20;
    const DM: Dev = 253 << 20;

    fn part(dev: Dev, q: u64, d: u64, c: u64, culprit: u32, victim: Option<u32>) -> IoPart {
        IoPart {
            dev,
            sector: 0,
            queue: q,
            issue: d,
            complete: c,
            bytes: 4096,
            culprit,
            wbt_may_hold: false,
            victim,
        }
    }

    fn issue(dev: Dev, sector: u64, nr: u32, rwbs: &str) -> EventKind {
        EventKind::RqIssue {
            dev,
            sector,
            nr_sector: nr,
            bytes: nr * 512,
            rwbs: Rwbs::parse(rwbs),
        }
    }

    fn complete(dev: Dev, sector: u64, nr: u32, rwbs: &str) -> EventKind {
        EventKind::RqComplete {
            dev,
            sector,
            nr_sector: nr,
            error: 0,
            rwbs: Rwbs::parse(rwbs),
        }
    }

    /// A victim's own and idle time and its culprits' waits.
    type Split = (u64, u64, Vec<(u32, u64)>);

    /// `(own, idle, culprits largest first)` of the victims of key `key`, in completion
    /// order.
    fn split(b: &Blame, key: u32) -> Vec<Split> {
        b.victims
            .iter()
            .filter(|v| v.key == key)
            .map(|v| {
                let mut c = b.culprits_of(v).to_vec();
                c.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                (v.own, v.idle, c)
            })
            .collect()
    }

    fn check_sums(b: &Blame) {
        for v in &b.victims {
            let c: u64 = b.culprits_of(v).iter().map(|c| c.1).sum();
            assert_eq!(v.own + v.idle + c, v.q2c, "{v:?}");
            assert_eq!(v.q2c, v.complete - v.queue);
            assert_eq!(v.idle_by.iter().sum::<u64>(), v.idle, "{v:?}");
        }
    }

    #[test]
    fn overlapping_requests_share_each_instant_equally() {
        // A (culprit 1) in flight [0, 100); the victim queued at 10, issued at 50,
        // completed at 150; B (culprit 3) in flight [60, 120).
        //   [10, 50)  A alone:          A 40
        //   [50, 60)  A, V:             A 5,     own 5
        //   [60, 100) A, V, B:          A 40/3,  own 40/3, B 40/3
        //   [100,120) V, B:                      own 10,   B 10
        //   [120,150) V:                         own 30
        // A = 58.33, own = 58.33, B = 23.33: 140 cut by largest remainder, own first.
        let mut e = BlameEngine::new();
        e.push_io(part(D, 0, 0, 100, 1, None));
        e.push_io(part(D, 55, 60, 120, 3, None));
        e.push_io(part(D, 10, 50, 150, 2, Some(9)));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 9), vec![(59, 0, vec![(1, 58), (3, 23)])]);
        assert_eq!(b.stats.requests, 3);
    }

    #[test]
    fn time_with_nothing_in_flight_is_idle() {
        let mut e = BlameEngine::new();
        e.push_io(part(D, 0, 30, 40, 1, Some(1)));
        // Another device's request does not stand ahead of it.
        e.push_io(part(DM, 0, 0, 40, 2, None));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 1), vec![(10, 30, vec![])]);
    }

    fn rq(kind: fn(Dev, u64, u32, Rwbs) -> EventKind, dev: Dev, sector: u64) -> EventKind {
        kind(dev, sector, 8, Rwbs::parse("W"))
    }
    fn getrq(dev: Dev, sector: u64, nr_sector: u32, rwbs: Rwbs) -> EventKind {
        EventKind::GetRq {
            dev,
            sector,
            nr_sector,
            rwbs,
        }
    }
    fn insert(dev: Dev, sector: u64, nr_sector: u32, rwbs: Rwbs) -> EventKind {
        EventKind::RqInsert {
            dev,
            sector,
            nr_sector,
            bytes: nr_sector * 512,
            rwbs,
        }
    }

    fn idle_of(v: &Victim) -> Vec<(&'static str, u64)> {
        Idle::ALL
            .iter()
            .filter(|&&c| v.idle_by[c as usize] > 0)
            .map(|&c| (c.name(), v.idle_by[c as usize]))
            .collect()
    }

    #[test]
    fn idle_time_is_named_by_its_requests_phase() {
        // Victim 1 (a write at sector 0 on D, where wbt acts): queued at 0, getrq at 20,
        // insert at 35, issued at 50, requeued, issued again at 80, completed at 100.
        // Culprit 9 in flight [10, 30) and [60, 70) (two requests).
        //   [0, 10)  idle, before a request: wbt 10
        //   [10, 20) behind 9 (10); [20, 30) behind 9 (10), in the plug
        //   [30, 35) idle, plug 5; [35, 40) idle, scheduler 5; [40, 45) behind victim
        //   2's request (5); [45, 50) scheduler 5
        //   [50, 60) idle, requeue 10; [60, 70) behind 9 (10); [70, 80) requeue 10
        //   [80, 100) own 20
        // Victim 2 (a read at sector 64, same device): queued at 0, getrq at 5, issued at
        // 40 with no insert, completed at 45: [0, 5) submit (wbt holds no read);
        // [5, 10) dispatch 5; [10, 30) behind 9; [30, 40) dispatch 10; [40, 45) own.
        // Victim 3 on DM, no events: [0, 10) unexplained, then own.
        let mut e = BlameEngine::new();
        let w = |t, k| Event::of_task(t, 1, k);
        e.push_event(&w(
            1,
            EventKind::Wbt {
                bdi: D,
                inflight: 1,
            },
        ));
        e.push_event(&w(5, rq(getrq, D, 64)));
        e.push_event(&w(20, rq(getrq, D, 0)));
        e.push_event(&w(35, rq(insert, D, 0)));
        e.push_event(&w(40, issue(D, 64, 8, "R")));
        e.push_event(&w(50, issue(D, 0, 8, "W")));
        e.push_event(&w(
            50,
            EventKind::RqRequeue {
                dev: D,
                sector: 0,
                nr_sector: 8,
                rwbs: Rwbs::parse("W"),
            },
        ));
        e.push_event(&w(80, issue(D, 0, 8, "W")));
        e.push_io(part(D, 10, 10, 30, 9, None));
        let mut v2 = part(D, 0, 40, 45, 2, Some(2));
        v2.sector = 64;
        e.push_io(v2);
        e.push_io(part(D, 60, 60, 70, 9, None));
        let mut v1 = part(D, 0, 80, 100, 1, Some(1));
        v1.wbt_may_hold = true;
        e.push_io(v1);
        e.push_io(part(DM, 0, 10, 20, 3, Some(3)));
        // A discard's request has no phases kept (it is never a victim); the issues of the
        // requeued request left none behind.
        e.push_event(&w(90, getrq(D, 512, 8, Rwbs::parse("D"))));
        assert!(e.issued.is_empty(), "{:?}", e.issued);
        assert!(!e.pending.contains_key(&(D, 512)));
        let b = e.finish();
        check_sums(&b);
        for v in &b.victims {
            assert_eq!(v.idle_by.iter().sum::<u64>(), v.idle, "{v:?}");
        }
        assert_eq!(split(&b, 1), vec![(20, 45, vec![(9, 30), (2, 5)])]);
        let v = |k| b.victims.iter().find(|v| v.key == k).unwrap();
        assert_eq!(
            idle_of(v(1)),
            vec![("wbt", 10), ("plug", 5), ("scheduler", 10), ("requeue", 20)]
        );
        assert_eq!(idle_of(v(2)), vec![("submit", 5), ("dispatch", 15)]);
        assert_eq!(idle_of(v(3)), vec![("unexplained", 10)]);
    }

    #[test]
    fn iocost_names_the_disks_it_acts_on() {
        // A read queued at 0, getrq at 30, issued at 30: on the disk iocost acts on, its
        // 30 ns before a request are iocost's; on another disk, the submit path's.
        for (disk, want) in [("nvme0n1", "iocost"), ("sda", "submit")] {
            let mut e = BlameEngine::new();
            e.name_disks([(D, "nvme0n1".to_string()), (DM, "dm-0".to_string())]);
            let w = |t, k| Event::of_task(t, 1, k);
            e.push_event(&w(
                1,
                EventKind::Iocost {
                    disk: disk.to_string(),
                },
            ));
            e.push_event(&w(30, rq(getrq, D, 0)));
            e.push_event(&w(30, issue(D, 0, 8, "R")));
            e.push_io(part(D, 0, 30, 40, 1, Some(1)));
            let b = e.finish();
            assert_eq!(idle_of(&b.victims[0]), vec![(want, 30)]);
        }
    }

    #[test]
    fn parts_of_one_request_are_one_request_split_by_bytes() {
        // A request split between culprits 1 (3 KiB) and 2 (1 KiB), in flight [0, 40);
        // the victim waits [0, 40) behind it alone, then is served [40, 50).
        let mut e = BlameEngine::new();
        let mut p = part(D, 0, 0, 40, 1, None);
        p.bytes = 3072;
        e.push_io(p);
        p.culprit = 2;
        p.bytes = 1024;
        e.push_io(p);
        e.push_io(part(D, 0, 40, 50, 5, Some(5)));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 5), vec![(10, 0, vec![(1, 30), (2, 10)])]);
        assert_eq!(b.stats.requests, 2);
    }

    #[test]
    fn merged_bios_ride_together_and_are_not_each_others_culprits() {
        // Two victims' bios (queued at 0 and 15) merged into one request issued at 20 and
        // completed at 30 (the attribution emits its two parts); C (culprit 5) in flight
        // [0, 25).
        //   victim 1: [0, 20) C 20; [20, 25) C 2.5, own 2.5; [25, 30) own 5: own 7.5, C 22.5
        //   victim 2: [15, 20) C 5; [20, 25) C 2.5, own 2.5; [25, 30) own 5: own 7.5, C 7.5
        let mut e = BlameEngine::new();
        e.push_io(part(D, 0, 0, 25, 5, None));
        e.push_io(part(D, 0, 20, 30, 1, Some(1)));
        e.push_io(part(D, 15, 20, 30, 2, Some(2)));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 1), vec![(8, 0, vec![(5, 22)])]);
        assert_eq!(split(&b, 2), vec![(8, 0, vec![(5, 7)])]);
    }

    #[test]
    fn flushes_and_discards_are_charged_to_who_asked_for_them() {
        let ev = Event::of_task;
        let queue = |dev, sector, nr, rwbs: &str| EventKind::BioQueue {
            dev,
            sector,
            nr_sector: nr,
            rwbs: Rwbs::parse(rwbs),
        };
        let mut e = BlameEngine::new();
        // Task 7's empty preflush (an fsync's blkdev_issue_flush): a flush in flight
        // [0, 30). Task 11's discard in flight [20, 40).
        e.push_event(&ev(0, 7, queue(D, 0, 0, "FWS")));
        e.push_event(&ev(0, 0, issue(D, 0, 0, "FF")));
        e.push_event(&ev(20, 11, queue(D, 800, 8, "D")));
        e.push_event(&ev(20, 0, issue(D, 800, 8, "D")));
        e.push_event(&ev(30, 0, complete(D, u64::MAX, 0, "FF")));
        e.push_event(&ev(40, 0, complete(D, 800, 8, "D")));
        // Task 9's commit block with a preflush at sector 500: its flush in flight
        // [40, 60), then the block itself [60, 70), charged to acts 3 (3 KiB) and 4 (1 KiB)
        // (a journal commit divided among its handles): the flush is theirs too.
        e.push_event(&ev(35, 9, queue(D, 500, 8, "FWFS")));
        e.push_event(&ev(40, 0, issue(D, 0, 0, "FF")));
        e.push_event(&ev(60, 0, complete(D, u64::MAX, 0, "FF")));
        let mut p = part(D, 35, 60, 70, 3, None);
        p.sector = 500;
        p.bytes = 3072;
        e.push_io(p);
        p.culprit = 4;
        p.bytes = 1024;
        e.push_io(p);
        // The victim waits [0, 90), served [90, 100):
        //   [0, 20) the first flush 20; [20, 30) it 5, the discard 5; [30, 40) the discard
        //   10; [40, 60) the second flush 20: act 3 15, act 4 5; [60, 70) the commit block:
        //   act 3 7.5, act 4 2.5; [70, 90) idle; [90, 100) own.
        e.push_io(part(D, 0, 90, 100, 1, Some(1)));
        let b = e.finish();
        check_sums(&b);
        let task7 = FLUSH_BY | 7;
        let task11 = OTHER_BY | 11;
        assert_eq!(
            split(&b, 1),
            vec![(10, 20, vec![(task7, 25), (3, 23), (task11, 15), (4, 7)])]
        );
        assert_eq!(Culprit::of(task7), Culprit::FlushBy(7));
        assert_eq!(Culprit::of(task11), Culprit::OtherBy(11));
        assert_eq!(Culprit::of(3), Culprit::Key(3));
        assert_eq!((b.stats.flushes, b.stats.other_ops), (2, 1));
        assert_eq!(b.stats.flushes_linked, 1);
    }

    #[test]
    fn a_flush_nobody_is_seen_asking_for_is_said_so() {
        let mut e = BlameEngine::new();
        e.push_event(&Event::of_task(0, 1, issue(D, 0, 0, "FF")));
        e.push_event(&Event::of_task(30, 1, complete(D, u64::MAX, 0, "FF")));
        e.push_io(part(D, 10, 30, 40, 1, Some(1)));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 1), vec![(10, 0, vec![(FLUSH, 20)])]);
    }

    /// A flush requeued (the driver was busy) and issued again is one flush, in flight from
    /// the issue that completed it; the next flush is its own.
    #[test]
    fn a_requeued_flush_is_in_flight_from_its_last_issue() {
        let requeue = EventKind::RqRequeue {
            dev: D,
            sector: 0,
            nr_sector: 0,
            rwbs: Rwbs::parse("FF"),
        };
        let mut e = BlameEngine::new();
        e.push_event(&Event::of_task(
            0,
            7,
            EventKind::BioQueue {
                dev: D,
                sector: 0,
                nr_sector: 0,
                rwbs: Rwbs::parse("FWS"),
            },
        ));
        e.push_event(&Event::of_task(0, 1, issue(D, 0, 0, "FF")));
        e.push_event(&Event::of_task(1, 1, requeue));
        e.push_event(&Event::of_task(100, 1, issue(D, 0, 0, "FF")));
        e.push_event(&Event::of_task(110, 1, complete(D, u64::MAX, 0, "FF")));
        e.push_event(&Event::of_task(1000, 1, issue(D, 0, 0, "FF")));
        e.push_event(&Event::of_task(1010, 1, complete(D, u64::MAX, 0, "FF")));
        // A read alone on the device in between, and one waiting behind the first flush.
        e.push_io(part(D, 500, 500, 520, 1, Some(1)));
        e.push_io(part(D, 90, 120, 130, 2, Some(2)));
        let b = e.finish();
        check_sums(&b);
        assert_eq!(split(&b, 1), vec![(20, 0, vec![])]);
        // [90, 100) idle; [100, 110) behind the flush task 7 asked for; [110, 120) idle.
        assert_eq!(split(&b, 2), vec![(10, 20, vec![(FLUSH_BY | 7, 10)])]);
        assert_eq!(b.stats.flush_requeues, 1);
    }

    /// Events of the devices not selected are not followed.
    #[test]
    fn other_devices_events_are_not_followed() {
        let mut e = BlameEngine::with_devices(|d| d == D);
        e.push_event(&Event::of_task(0, 1, issue(DM, 0, 0, "FF")));
        e.push_event(&Event::of_task(10, 1, complete(DM, u64::MAX, 0, "FF")));
        let b = e.finish();
        assert_eq!(b.stats.flushes, 0);
    }

    #[test]
    fn no_device_time_is_neither_victim_nor_culprit() {
        let mut e = BlameEngine::new();
        e.push_io(part(D, 0, 50, 50, 1, Some(1)));
        e.push_io(part(D, 0, 10, 60, 2, Some(2)));
        let b = e.finish();
        assert_eq!(b.victims.len(), 1);
        assert_eq!(split(&b, 2), vec![(50, 10, vec![])]);
        assert_eq!(b.stats.no_device_time, 1);
    }

    /// A xorshift generator from `seed`: `next(n)` is below `n`.
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    #[test]
    fn victims_split_by_ranges_are_split_as_by_one_sweep() {
        // 400 requests on two devices, every one a victim: split by one sweep per device,
        // and by sweeps of a dozen victims each (each replaying the requests before).
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut ios = Vec::new();
        for i in 0..400u32 {
            let q = next(20_000);
            let d = q + next(500);
            let c = d + 1 + next(800);
            let dev = if next(3) == 0 { DM } else { D };
            ios.push(part(dev, q, d, c, next(7) as u32, Some(i)));
        }
        ios.sort_by_key(|p| (p.complete, p.issue));
        ios.dedup_by_key(|p| (p.dev, p.issue, p.complete));
        let run = |min_chunk: usize| {
            let mut e = BlameEngine::new();
            for p in &ios {
                e.push_io(*p);
            }
            e.finish_in(min_chunk)
        };
        let (one, many) = (run(usize::MAX), run(1));
        check_sums(&many);
        assert_eq!(one.victims.len(), ios.len());
        assert_eq!(one.victims.len(), many.victims.len());
        // Nothing but the victims' ties would differ in order: make some.
        assert!(one
            .victims
            .windows(2)
            .any(|w| w[0].complete == w[1].complete));
        for (a, b) in one.victims.iter().zip(&many.victims) {
            assert_eq!(
                (a.key, a.q2c, a.own, a.idle, a.idle_by),
                (b.key, b.q2c, b.own, b.idle, b.idle_by)
            );
            assert_eq!(one.culprits_of(a), many.culprits_of(b), "{a:?}");
        }
    }

    /// The engine against a brute-force split, nanosecond by nanosecond, on random
    /// requests: within a nanosecond per share, and exactly Q2C in all.
    #[test]
    fn agrees_with_a_brute_force_split() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..200 {
            let mut e = BlameEngine::new();
            let mut reqs = Vec::new();
            for i in 0..(1 + next(12)) as u32 {
                let q = next(200);
                let d = q + next(60);
                let c = d + 1 + next(80);
                let culprit = next(4) as u32;
                // Two requests of the same issue and completion would be one to the engine.
                if !reqs
                    .iter()
                    .any(|r: &(u64, u64, u64, u32, u32)| (r.1, r.2) == (d, c))
                {
                    reqs.push((q, d, c, culprit, i));
                }
            }
            // Emitted in completion order, as the attribution does.
            reqs.sort_by_key(|r| r.2);
            for &(q, d, c, culprit, i) in &reqs {
                e.push_io(part(D, q, d, c, culprit, Some(i)));
            }
            let b = e.finish();
            check_sums(&b);
            for v in &b.victims {
                let &(q, d, c, _, _) = reqs.iter().find(|r| r.4 == v.key).unwrap();
                let (mut own, mut idle) = (0.0f64, 0u64);
                let mut by: HashMap<u32, f64> = HashMap::new();
                for t in q..c {
                    let live: Vec<_> = reqs.iter().filter(|r| r.1 <= t && t < r.2).collect();
                    if live.is_empty() {
                        idle += 1;
                        continue;
                    }
                    let n = live.len() as f64;
                    for r in live {
                        if r.4 == v.key {
                            own += 1.0 / n;
                        } else {
                            *by.entry(r.3).or_default() += 1.0 / n;
                        }
                    }
                }
                let _ = d;
                assert_eq!(v.idle, idle, "{v:?}");
                assert!((v.own as f64 - own).abs() <= 1.0, "{v:?} own {own}");
                let got = b.culprits_of(v);
                for (k, x) in &by {
                    let g = got.iter().find(|c| c.0 == *k).map_or(0, |c| c.1);
                    assert!((g as f64 - x).abs() <= 1.0, "{v:?} key {k}: {g} vs {x}");
                }
            }
        }
    }
}
