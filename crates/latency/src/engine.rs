//! btt's state machine over the block events, in time order.
//!
//! What btt 1.2 does (its `trace_*.c`, `devs.c`, `dip_rb.c`, `inlines.h`, checked against
//! `btt` on crafted blktrace dumps), and so what this does; `docs/latency.md` has the same
//! with the differences:
//!
//! * Only a bio's **Q** is kept, per device, in sector order, until a C covers it. G, I, M
//!   and D are matched against the pending Q's and dropped. A Q whose first sector is that
//!   of a pending Q replaces it (btt keeps one per sector; the old one is forgotten).
//! * **Q**: Q2Q (Q2Qdm on a remapper device) since the previous Q overall (any device), on
//!   the device and of the process. The first Q or A seen on a device ends its
//!   *pre-culling*: btt ignores a device's events before its first Q or A.
//! * **G**, **I**, **M** (bio back and front merges, request merges): the pending Q holding
//!   the event's first sector gets the time; Q2G = G - Q, G2I = I - G (if the Q had a G),
//!   Q2M = M - Q.
//! * **D**: every pending Q whose sectors lie inside the request's gets the issue time (a
//!   requeued request issued again moves it), and I2D = D - I if the Q had an I, else
//!   M2D = D - M if it had an M.
//! * **C** (request and bio completions): every pending Q inside the completed sectors
//!   gets Q2C = C - Q (Q2Cdm on a remapper device) and, if it was issued, D2C = C - D; then
//!   it is forgotten. So both are per bio, and a merged bio completes with its request.
//! * **A** (remap): counts as the lower device's event; if the upper device has a pending
//!   Q holding the remap's old sector, Q2A = A - Q (Q2Adm on a remapper). Remaps link
//!   nothing else: each device's Q's complete with that device's C's.
//! * **R** (requeue), **X** (split), plugs: no interval (btt counts requeues only for its
//!   active-request figures).
//! * Q, G, I, M, D and C of zero bytes are ignored (flushes).
//! * A difference of zero or less counts as 1 ns (btt's `tdelta`).
//!
//! Each value goes to the overall group, the Q's device and the Q's process (by name, as
//! btt merges processes of the same name).

use std::collections::{BTreeMap, HashMap};

use ioblame_events::event::{Dev, Event, EventKind};

use crate::breakdown::{Breakdown, Interval};
use crate::Latency;

const NONE: u64 = u64::MAX;

/// btt's `remapper_dev`: md (9) and the majors device mapper usually has (253, 254).
pub fn is_remapper(dev: Dev) -> bool {
    matches!(ioblame_events::event::dev_major(dev), 9 | 253 | 254)
}

/// btt's `tdelta`: `to - from`, or 1 when `to` is not later.
#[inline]
fn tdelta(from: u64, to: u64) -> u64 {
    if from < to {
        to - from
    } else {
        1
    }
}

/// A bio queued and not yet completed.
#[derive(Debug, Clone, Copy)]
struct Pending {
    start: u64,
    end: u64,
    time: u64,
    g: u64,
    i: u64,
    m: u64,
    d: u64,
    process: u32,
    /// Order queued (the oldest wins where pending bios overlap).
    seq: u64,
}

#[derive(Debug)]
struct DevState {
    dev: Dev,
    remapper: bool,
    /// btt's pre-culling: events before the first Q or A are ignored.
    culling: bool,
    last_q: u64,
    /// Pending Q's by first sector: btt keeps one per sector (its tree refuses a second
    /// with the same start, and drops that Q).
    pending: BTreeMap<u64, u32>,
    /// The longest Q seen, in sectors: how far back a Q holding a sector may start.
    max_len: u64,
    stats: Breakdown,
}

#[derive(Debug)]
struct Process {
    name: String,
    last_q: u64,
    stats: Breakdown,
}

/// What the engine met besides the intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Block events seen on selected devices.
    pub block_events: u64,
    /// Events ignored because their device had not yet shown a Q or A (btt's pre-culling).
    pub culled: u64,
    /// G, I and M that found no pending Q.
    pub unmatched_gim: u64,
    /// D and C that found no pending Q.
    pub unmatched_dc: u64,
    /// Requeues seen.
    pub requeues: u64,
    /// Pending Q's forgotten because a new Q started at the same sector (btt keeps one
    /// per sector).
    pub replaced_q: u64,
    /// Q's still pending at the end (queued, never completed).
    pub pending_at_end: u64,
}

/// btt's latency breakdown, fed the decoded events in time order ([`Engine::push`]) and,
/// for the per-act figures, the attribution's IOs ([`Engine::push_act_io`]).
pub struct Engine {
    select: Box<dyn Fn(Dev) -> bool + Send>,
    devs: Vec<DevState>,
    last_dev: usize,
    slab: Vec<Pending>,
    free: Vec<u32>,
    seq: u64,
    all: Breakdown,
    last_q: u64,
    processes: Vec<Process>,
    by_name: HashMap<String, u32>,
    by_tid: HashMap<u32, u32>,
    comms: HashMap<u32, String>,
    acts: Vec<Breakdown>,
    scratch: Vec<u32>,
    stats: EngineStats,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("devs", &self.devs.len())
            .field("pending", &(self.slab.len() - self.free.len()))
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new(|_| true)
    }
}

impl Engine {
    /// An engine counting the events of the devices `select` accepts (kernel encoding).
    pub fn new(select: impl Fn(Dev) -> bool + Send + 'static) -> Engine {
        Engine {
            select: Box::new(select),
            devs: Vec::new(),
            last_dev: 0,
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            all: Breakdown::default(),
            last_q: NONE,
            processes: Vec::new(),
            by_name: HashMap::new(),
            by_tid: HashMap::new(),
            comms: HashMap::new(),
            acts: Vec::new(),
            scratch: Vec::new(),
            stats: EngineStats::default(),
        }
    }

    /// Names a task (from the trace's task table at start; later names come as events).
    pub fn set_comm(&mut self, tid: u32, comm: &str) {
        self.comms.insert(tid, comm.to_owned());
    }

    /// Feeds one event; events must come in time order.
    pub fn push(&mut self, ev: &Event) {
        let t = ev.time;
        if let Some(dev) = block_dev(&ev.kind) {
            // blktrace names a task (its process notify) at its first event on a traced
            // device, whatever the event: btt's process groups are bound then.
            if (self.select)(dev) && !self.by_tid.contains_key(&ev.tid) {
                self.process_of(ev.tid);
            }
        }
        match &ev.kind {
            // A bio of no data (a flush) is no Q to btt.
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                ..
            } if *nr_sector > 0 && (self.select)(*dev) => {
                self.queue(t, ev.tid, *dev, *sector, *nr_sector as u64);
            }
            EventKind::GetRq {
                dev,
                sector,
                nr_sector,
                ..
            } => self.gim(t, *dev, *sector, *nr_sector, Step::G),
            EventKind::RqInsert {
                dev,
                sector,
                nr_sector,
                ..
            } => self.gim(t, *dev, *sector, *nr_sector, Step::I),
            EventKind::BioBackmerge {
                dev,
                sector,
                nr_sector,
                ..
            }
            | EventKind::BioFrontmerge {
                dev,
                sector,
                nr_sector,
                ..
            }
            | EventKind::RqMerge {
                dev,
                sector,
                nr_sector,
                ..
            } => self.gim(t, *dev, *sector, *nr_sector, Step::M),
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector,
                ..
            } => self.issue(t, *dev, *sector, *nr_sector),
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector,
                ..
            }
            | EventKind::BioComplete {
                dev,
                sector,
                nr_sector,
                ..
            } => self.complete(t, *dev, *sector, *nr_sector),
            EventKind::BioRemap {
                dev,
                old_dev,
                old_sector,
                ..
            } => self.remap(t, *dev, *old_dev, *old_sector),
            EventKind::RqRequeue { dev, .. } if (self.select)(*dev) => self.requeue(*dev),
            EventKind::Comm { tid, comm, .. } => {
                self.comms.insert(*tid, comm.clone());
            }
            _ => {}
        }
    }

    /// Counts one IO the attribution charged to act number `act` (its index), with its
    /// queue, issue and completion times (ns): Q2C and D2C of the act.
    pub fn push_act_io(&mut self, act: usize, queue: u64, issue: u64, complete: u64) {
        if self.acts.len() <= act {
            self.acts.resize_with(act + 1, Breakdown::default);
        }
        let b = &mut self.acts[act];
        b.add(Interval::Q2C, tdelta(queue, complete));
        b.add(Interval::D2C, tdelta(issue, complete));
    }

    /// btt's `io_setup`: the device's state, or `None` while the device is pre-culled and
    /// this event does not end it (`ends_culling`: a Q or an A).
    fn setup(&mut self, dev: Dev, ends_culling: bool) -> Option<usize> {
        self.stats.block_events += 1;
        let k = if self.devs.get(self.last_dev).is_some_and(|d| d.dev == dev) {
            self.last_dev
        } else if let Some(k) = self.devs.iter().position(|d| d.dev == dev) {
            k
        } else {
            self.devs.push(DevState {
                dev,
                remapper: is_remapper(dev),
                culling: true,
                last_q: NONE,
                pending: BTreeMap::new(),
                max_len: 0,
                stats: Breakdown::default(),
            });
            self.devs.len() - 1
        };
        self.last_dev = k;
        let d = &mut self.devs[k];
        if d.culling {
            if ends_culling {
                d.culling = false;
            } else {
                self.stats.culled += 1;
                return None;
            }
        }
        Some(k)
    }

    /// The process group of a task: its name when known (tasks of one name share a group,
    /// as in btt), else `pidNNNNNNNNN`. A task keeps the group it was given at its first
    /// block event on a selected device (where blktrace writes its process notify).
    fn process_of(&mut self, tid: u32) -> u32 {
        if let Some(&p) = self.by_tid.get(&tid) {
            return p;
        }
        // btt names a process by its notify's comm up to the first `/` (`kworker/u8:1`
        // and `jbd2/sda1-8` are `kworker` and `jbd2`).
        // The idle task (pid 0, interrupts) is btt's `kernel`.
        let name = match self.comms.get(&tid) {
            _ if tid == 0 => "kernel".to_owned(),
            Some(c) => c.split('/').next().unwrap_or_default().to_owned(),
            None => format!("pid{tid:09}"),
        };
        let p = match self.by_name.get(&name) {
            Some(&p) => p,
            None => {
                let p = self.processes.len() as u32;
                self.processes.push(Process {
                    name: name.clone(),
                    last_q: NONE,
                    stats: Breakdown::default(),
                });
                self.by_name.insert(name, p);
                p
            }
        };
        self.by_tid.insert(tid, p);
        p
    }

    fn queue(&mut self, t: u64, tid: u32, dev: Dev, sector: u64, nr: u64) {
        let Some(k) = self.setup(dev, true) else {
            return;
        };
        if let Some(old) = self.devs[k].pending.remove(&sector) {
            // btt keeps one pending Q per first sector: a new one replaces the old, which
            // is forgotten without a Q2C.
            self.free.push(old);
            self.stats.replaced_q += 1;
        }
        let p = self.process_of(tid);
        let q2q = if self.devs[k].remapper {
            Interval::Q2Qdm
        } else {
            Interval::Q2Q
        };
        // One "last Q" overall, whatever the device: a Q on a remapper counts in Q2Qdm.
        if self.last_q != NONE {
            self.all.add(q2q, tdelta(self.last_q, t));
        }
        self.last_q = t;
        let d = &mut self.devs[k];
        if d.last_q != NONE {
            d.stats.add(q2q, tdelta(d.last_q, t));
        }
        d.last_q = t;
        let pr = &mut self.processes[p as usize];
        if pr.last_q != NONE {
            pr.stats.add(q2q, tdelta(pr.last_q, t));
        }
        pr.last_q = t;
        let q = Pending {
            start: sector,
            end: sector.saturating_add(nr),
            time: t,
            g: NONE,
            i: NONE,
            m: NONE,
            d: NONE,
            process: p,
            seq: self.seq + 1,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = q;
                i
            }
            None => {
                self.slab.push(q);
                (self.slab.len() - 1) as u32
            }
        };
        let d = &mut self.devs[k];
        d.max_len = d.max_len.max(nr);
        self.seq += 1;
        d.pending.insert(sector, idx);
    }

    /// btt's `dip_find_sec`: a pending Q of device `k` holding `sector`. btt returns the
    /// first its tree walk meets; here the oldest one (they differ only when pending bios
    /// overlap, and then the oldest is the one nearer the tree's root in the cases seen).
    fn find_sec(&self, k: usize, sector: u64) -> Option<u32> {
        let d = &self.devs[k];
        let mut best: Option<(u64, u32)> = None;
        for (&start, &qi) in d.pending.range(..=sector).rev() {
            if start.saturating_add(d.max_len) <= sector {
                break;
            }
            let q = &self.slab[qi as usize];
            if sector < q.end && best.is_none_or(|(s, _)| q.seq < s) {
                best = Some((q.seq, qi));
            }
        }
        best.map(|(_, qi)| qi)
    }

    /// Into `self.scratch`, btt's `dip_foreach_list`: the pending Q's of device `k` whose
    /// sectors lie inside `[start, end]`, in sector order.
    fn contained(&mut self, k: usize, start: u64, end: u64) {
        self.scratch.clear();
        let d = &self.devs[k];
        for (_, &qi) in d.pending.range(start..=end) {
            if self.slab[qi as usize].end <= end {
                self.scratch.push(qi);
            }
        }
    }

    /// Adds a value to the overall group, the Q's device and the Q's process.
    #[inline]
    fn update(&mut self, k: usize, process: u32, i: Interval, v: u64) {
        self.all.add(i, v);
        self.devs[k].stats.add(i, v);
        self.processes[process as usize].stats.add(i, v);
    }

    fn gim(&mut self, t: u64, dev: Dev, sector: u64, nr: u32, step: Step) {
        if nr == 0 || !(self.select)(dev) {
            return;
        }
        let Some(k) = self.setup(dev, false) else {
            return;
        };
        let Some(qi) = self.find_sec(k, sector) else {
            self.stats.unmatched_gim += 1;
            return;
        };
        let q = &mut self.slab[qi as usize];
        let (p, qt) = (q.process, q.time);
        match step {
            Step::G => {
                q.g = t;
                self.update(k, p, Interval::Q2G, tdelta(qt, t));
            }
            Step::I => {
                q.i = t;
                let g = q.g;
                if g != NONE {
                    self.update(k, p, Interval::G2I, tdelta(g, t));
                }
            }
            Step::M => {
                q.m = t;
                self.update(k, p, Interval::Q2M, tdelta(qt, t));
            }
        }
    }

    /// The D or C of `nr` sectors at `sector` on `dev`, when the device is selected and
    /// set up: its device's index, with the pending Q's it covers in `self.scratch`
    /// (counted unmatched when there are none).
    fn covered(&mut self, dev: Dev, sector: u64, nr: u32) -> Option<usize> {
        if nr == 0 || !(self.select)(dev) {
            return None;
        }
        let k = self.setup(dev, false)?;
        self.contained(k, sector, sector.saturating_add(nr as u64));
        if self.scratch.is_empty() {
            self.stats.unmatched_dc += 1;
        }
        Some(k)
    }

    fn issue(&mut self, t: u64, dev: Dev, sector: u64, nr: u32) {
        let Some(k) = self.covered(dev, sector, nr) else {
            return;
        };
        for j in 0..self.scratch.len() {
            let qi = self.scratch[j] as usize;
            let q = self.slab[qi];
            if q.i != NONE {
                self.update(k, q.process, Interval::I2D, tdelta(q.i, t));
            } else if q.m != NONE {
                self.update(k, q.process, Interval::M2D, tdelta(q.m, t));
            }
            self.slab[qi].d = t;
        }
    }

    fn complete(&mut self, t: u64, dev: Dev, sector: u64, nr: u32) {
        let Some(k) = self.covered(dev, sector, nr) else {
            return;
        };
        let q2c = if self.devs[k].remapper {
            Interval::Q2Cdm
        } else {
            Interval::Q2C
        };
        for j in 0..self.scratch.len() {
            let qi = self.scratch[j];
            let q = self.slab[qi as usize];
            self.update(k, q.process, q2c, tdelta(q.time, t));
            if q.d != NONE {
                self.update(k, q.process, Interval::D2C, tdelta(q.d, t));
            }
        }
        let d = &mut self.devs[k];
        for &qi in &self.scratch {
            let q = &self.slab[qi as usize];
            d.pending.remove(&q.start);
            self.free.push(qi);
        }
    }

    fn requeue(&mut self, dev: Dev) {
        if self.setup(dev, false).is_some() {
            self.stats.requeues += 1;
        }
    }

    fn remap(&mut self, t: u64, dev: Dev, old_dev: Dev, old_sector: u64) {
        if !(self.select)(dev) {
            return;
        }
        if self.setup(dev, true).is_none() {
            return;
        }
        let Some(k) = self.devs.iter().position(|d| d.dev == old_dev) else {
            return;
        };
        if let Some(qi) = self.find_sec(k, old_sector) {
            let q = self.slab[qi as usize];
            let i = if self.devs[k].remapper {
                Interval::Q2Adm
            } else {
                Interval::Q2A
            };
            self.update(k, q.process, i, tdelta(q.time, t));
        }
    }

    /// The breakdowns: overall, per device (by device number), per process (by name), per
    /// act (by act number); groups without any value are left out.
    pub fn finish(self) -> Latency {
        let mut stats = self.stats;
        stats.pending_at_end = (self.slab.len() - self.free.len()) as u64;
        let mut devices: Vec<(Dev, Breakdown)> = self
            .devs
            .into_iter()
            .filter(|d| !d.stats.is_empty())
            .map(|d| (d.dev, d.stats))
            .collect();
        devices.sort_by_key(|(d, _)| *d);
        let mut processes: Vec<(String, Breakdown)> = self
            .processes
            .into_iter()
            .filter(|p| !p.stats.is_empty())
            .map(|p| (p.name, p.stats))
            .collect();
        processes.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let acts = self
            .acts
            .into_iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .collect();
        Latency {
            all: self.all,
            devices,
            processes,
            acts,
            stats,
        }
    }
}

/// The device of a block event (one blktrace records), if `kind` is one.
fn block_dev(kind: &EventKind) -> Option<Dev> {
    match kind {
        EventKind::BioQueue { dev, .. }
        | EventKind::BioBackmerge { dev, .. }
        | EventKind::BioFrontmerge { dev, .. }
        | EventKind::BioSplit { dev, .. }
        | EventKind::BioRemap { dev, .. }
        | EventKind::BioComplete { dev, .. }
        | EventKind::GetRq { dev, .. }
        | EventKind::RqInsert { dev, .. }
        | EventKind::RqIssue { dev, .. }
        | EventKind::RqMerge { dev, .. }
        | EventKind::RqRequeue { dev, .. }
        | EventKind::RqComplete { dev, .. } => Some(*dev),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy)]
enum Step {
    G,
    I,
    M,
}
