//! blktrace records as the typed block events the attribution takes
//! (`ioblame_events::Event`), the same the block tracepoints decode to:
//!
//! | record | event |
//! |---|---|
//! | Q | `BioQueue` (the issuer: the Q's pid) |
//! | D | `RqIssue`; on a device recorded without Q, a `BioQueue` with the D's pid first |
//! | C | `RqComplete` on a device with D records, else `BioComplete` (bio-based: dm, md) |
//! | R | `RqRequeue` |
//! | A | `BioRemap`: from the upper device, or a partition, to the lower device or disk (the attribution tells a partition by the device table the scan made, [`crate::DeviceInfo::partition_of`]) |
//! | process notify | `Comm` (the pid's name) |
//!
//! The other actions (M, F, G, S, P, U, UT, I, X, B, abort, drv_data, zone actions,
//! timestamp and message notifies) are read and counted ([`crate::Scan`]) but give no event:
//! the attribution follows requests by their sectors at queue, issue and completion.

use std::sync::mpsc::sync_channel;

use ioblame_events::{Dev, Event, EventKind};

use crate::record::{Action, Payload, Record};
use crate::{Recording, Scan};

/// Events per batch handed from the reading thread to the caller's.
const BATCH: usize = 4096;

/// Turns records into events, knowing the recording's devices.
#[derive(Debug, Clone)]
pub struct Converter {
    /// Devices with D records (the others complete bios).
    issue_devs: Vec<Dev>,
    /// Devices with D records and no Q record.
    no_queue: Vec<Dev>,
    /// Partitions: (partition, disk, start).
    parts: Vec<(Dev, Dev, u64)>,
}

impl Converter {
    /// A converter for the recording `scan` describes.
    pub fn new(scan: &Scan) -> Converter {
        Converter {
            issue_devs: scan
                .devices
                .iter()
                .filter(|d| d.issued > 0)
                .map(|d| d.dev)
                .collect(),
            no_queue: scan
                .devices
                .iter()
                .filter(|d| d.issued > 0 && d.queued == 0)
                .map(|d| d.dev)
                .collect(),
            parts: scan
                .devices
                .iter()
                .filter_map(|d| d.partition_of.map(|(disk, start)| (d.dev, disk, start)))
                .collect(),
        }
    }

    /// The events of `r`, handed to `out` (none, one, or two).
    #[inline]
    pub fn convert(&self, r: &Record, mut out: impl FnMut(Event)) {
        let ev = |kind| Event {
            time: r.time,
            cpu: r.cpu,
            pid: r.pid,
            tid: r.pid,
            kind,
            stack: None,
            // The blkcg id blktrace records with the cgroup flag: an id in the cgroup2
            // hierarchy, as PERF_SAMPLE_CGROUP's.
            cgroup: r.cgroup.unwrap_or(0),
            stack_copy: None,
        };
        let (dev, sector, nr_sector) = (r.device, r.sector, r.nr_sectors());
        match r.action {
            Action::Queue => out(ev(EventKind::BioQueue {
                dev,
                sector,
                nr_sector,
                rwbs: r.rwbs(),
            })),
            Action::Issue => {
                let rwbs = r.rwbs();
                if self.no_queue.contains(&dev) {
                    out(ev(EventKind::BioQueue {
                        dev,
                        sector,
                        nr_sector,
                        rwbs,
                    }));
                }
                out(ev(EventKind::RqIssue {
                    dev,
                    sector,
                    nr_sector,
                    bytes: r.bytes,
                    rwbs,
                }))
            }
            Action::Complete => {
                let error = r.error as i16 as i32;
                let rwbs = r.rwbs();
                out(ev(if self.issue_devs.contains(&dev) {
                    EventKind::RqComplete {
                        dev,
                        sector,
                        nr_sector,
                        error,
                        rwbs,
                    }
                } else {
                    EventKind::BioComplete {
                        dev,
                        sector,
                        nr_sector,
                        error,
                        rwbs,
                    }
                }))
            }
            // The request layer's steps, for btt's intervals (`ioblame latency`); the
            // attribution does not use them.
            Action::GetRq => out(ev(EventKind::GetRq {
                dev,
                sector,
                nr_sector,
                rwbs: r.rwbs(),
            })),
            Action::Insert => out(ev(EventKind::RqInsert {
                dev,
                sector,
                nr_sector,
                bytes: r.bytes,
                rwbs: r.rwbs(),
            })),
            Action::BackMerge => out(ev(EventKind::BioBackmerge {
                dev,
                sector,
                nr_sector,
                rwbs: r.rwbs(),
            })),
            Action::FrontMerge => out(ev(EventKind::BioFrontmerge {
                dev,
                sector,
                nr_sector,
                rwbs: r.rwbs(),
            })),
            Action::Requeue => out(ev(EventKind::RqRequeue {
                dev,
                sector,
                nr_sector,
                rwbs: r.rwbs(),
            })),
            Action::Remap => {
                let Payload::Remap {
                    from,
                    to,
                    sector_from,
                } = r.payload
                else {
                    return;
                };
                let (dev, sector) = if from == to {
                    // A partition's remap: its start, as the tracepoint gives it.
                    (from, sector)
                } else {
                    // The bio went to `to` (a partition: the IO runs on its disk, at the
                    // partition's start plus the sector).
                    match self.parts.iter().find(|p| p.0 == to) {
                        Some(&(_, disk, start)) if disk == r.device => {
                            (disk, sector.saturating_add(start))
                        }
                        _ => (r.device, sector),
                    }
                };
                out(ev(EventKind::BioRemap {
                    dev,
                    sector,
                    nr_sector,
                    old_dev: from,
                    old_sector: sector_from,
                    rwbs: r.rwbs(),
                }))
            }
            Action::Process => {
                if let Payload::Process { comm } = &r.payload {
                    out(ev(EventKind::Comm {
                        pid: r.pid,
                        tid: r.pid,
                        comm: comm.clone(),
                        exec: false,
                    }))
                }
            }
            _ => {}
        }
    }
}

/// The events of a whole recording, in time order, read on this thread (for tests and
/// small recordings; [`Recording::for_each_event`] reads on another thread).
pub fn to_events(rec: &Recording) -> Vec<Event> {
    let conv = Converter::new(rec.scan());
    let mut v = Vec::new();
    for r in rec.records() {
        conv.convert(&r, |e| v.push(e));
    }
    v
}

impl Recording {
    /// Calls `f` with every event of the recording in time order, and the event after it
    /// (for prefetching). The files are read and converted on a second thread, at most a
    /// few batches ahead of `f`: memory does not grow with the recording. Returns the
    /// events given.
    pub fn for_each_event(&self, mut f: impl FnMut(&Event, Option<&Event>)) -> u64 {
        let (tx, rx) = sync_channel::<Vec<Event>>(4);
        let (back_tx, back_rx) = sync_channel::<Vec<Event>>(8);
        let conv = Converter::new(&self.scan);
        let mut n = 0u64;
        std::thread::scope(|sc| {
            sc.spawn(move || {
                let mut batch = Vec::with_capacity(BATCH);
                for r in self.records() {
                    conv.convert(&r, |e| batch.push(e));
                    if batch.len() >= BATCH {
                        let fresh = back_rx
                            .try_recv()
                            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                        if tx.send(std::mem::replace(&mut batch, fresh)).is_err() {
                            return;
                        }
                    }
                }
                if !batch.is_empty() {
                    let _ = tx.send(batch);
                }
            });
            let mut prev: Option<Event> = None;
            for mut batch in rx {
                for e in batch.drain(..) {
                    if let Some(p) = prev.take() {
                        f(&p, Some(&e));
                        n += 1;
                    }
                    prev = Some(e);
                }
                let _ = back_tx.try_send(batch);
            }
            if let Some(p) = prev {
                f(&p, None);
                n += 1;
            }
        });
        n
    }
}
