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

mod sweep;
use sweep::{prepare, sweep, Prepared, Swept};

#[cfg(test)]
mod tests;
