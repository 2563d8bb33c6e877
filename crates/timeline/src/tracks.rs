//! The tracks, described before any event: a process track per process and a thread track
//! per thread, with child tracks for reads and direct IO (in lanes) and for fsyncs; a track
//! per device with counters of its queue depth, requests in flight and bytes per second, and
//! lanes of its requests.

use std::collections::BTreeMap;
use std::io::{self, Write};

use ioblame_decode::Dev;
use rustc_hash::FxHashMap;

use crate::build::Collected;
use crate::proto::{self, CounterDescriptor, ProcessDescriptor, ThreadDescriptor, TrackDescriptor};
use crate::select::Selection;
use crate::writer::PacketWriter;
use crate::{on_role_track, Names, Stats};

/// A track's uuid: tracks are numbered from 1 in the order they are described.
pub(crate) type Uuid = u64;

/// A device's counter tracks.
pub(crate) struct DevTracks {
    pub depth: Uuid,
    pub in_flight: Uuid,
    pub rate: Uuid,
}

/// Where each slice goes.
pub(crate) struct Tracks {
    /// Each thread's track, by (pid, tid).
    pub thread: BTreeMap<(u32, u32), Uuid>,
    /// Each read's or direct IO's lane, by (request, part).
    pub read: FxHashMap<(u32, u32), Uuid>,
    /// Each thread's fsync track, by tid.
    pub blocked: BTreeMap<u32, Uuid>,
    /// Each device's counters.
    pub devices: BTreeMap<Dev, DevTracks>,
    /// Each request's lane (0 for those not drawn).
    pub request: Vec<Uuid>,
}

/// The per-lane layout of slices on a track (`spans` by start): the lane of each, and how
/// many. A slice goes on the lane that fell free first, if free before it begins (strictly:
/// slices on one lane never touch), else on a new lane; O(n log n) however deep the queue.
pub(crate) fn lanes(spans: impl Iterator<Item = (u64, u64)>) -> (Vec<u32>, u32) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut free: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut out = Vec::new();
    let mut n = 0u32;
    for (a, b) in spans {
        let lane = match free.peek() {
            Some(&Reverse((end, lane))) if end < a => {
                free.pop();
                lane
            }
            _ => {
                n += 1;
                n - 1
            }
        };
        free.push(Reverse((b, lane)));
        out.push(lane);
    }
    (out, n)
}

/// Describes the tracks of what `sel` draws of `c`.
pub(crate) fn describe<W: Write>(
    c: &Collected,
    sel: &Selection,
    names: &Names<'_>,
    w: &mut PacketWriter<W>,
    stats: &mut Stats,
) -> io::Result<Tracks> {
    // Tracks: processes and threads, devices; each thread's and device's lanes.
    let tables = names.tables;
    let role_of = |role: u32| tables.roles.get(role as usize);
    let act_role = |act| names.act_role(act);
    // (pid, tid) -> thread name (its first role's comm).
    let mut threads: BTreeMap<(u32, u32), String> = BTreeMap::new();
    for (i, r) in c.runs.iter().enumerate() {
        if sel.keep_run[i] {
            if let Some(role) = role_of(r.role.0) {
                threads
                    .entry((role.pid, role.tid))
                    .or_insert_with(|| role.comm.clone());
            }
        }
    }
    // Reads and direct IO on role tracks: (pid, tid) -> [(request, part)] in queue order.
    let mut reads: BTreeMap<(u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
    for &qi in &sel.order {
        for (pi, p) in c.requests[qi as usize].parts.iter().enumerate() {
            if on_role_track(p) {
                if let Some((pid, tid, comm)) = act_role(p.act) {
                    threads.entry((pid, tid)).or_insert_with(|| comm.to_owned());
                    reads.entry((pid, tid)).or_default().push((qi, pi as u32));
                }
            }
        }
    }
    // A thread that only fsynced is named by its first role, if it has one.
    let mut comm_of_tid: FxHashMap<u32, &str> = FxHashMap::default();
    for r in &tables.roles {
        comm_of_tid.entry(r.tid).or_insert(&r.comm);
    }
    for (i, b) in c.blocked.iter().enumerate() {
        if sel.keep_blocked[i] {
            let name = comm_of_tid
                .get(&b.tid)
                .map_or_else(|| format!("tid {}", b.tid), |c| c.to_string());
            threads.entry((b.pid, b.tid)).or_insert(name);
        }
    }

    let mut next_uuid: Uuid = 1;
    let mut track = |w: &mut PacketWriter<_>, stats: &mut Stats, d: TrackDescriptor| {
        let uuid = next_uuid;
        next_uuid += 1;
        stats.tracks += 1;
        w.track(TrackDescriptor {
            uuid: Some(uuid),
            ..d
        })
        .map(|_| uuid)
    };
    let mut process_uuid: BTreeMap<u32, Uuid> = BTreeMap::new();
    let mut thread_uuid: BTreeMap<(u32, u32), Uuid> = BTreeMap::new();
    for (&(pid, tid), name) in &threads {
        if let std::collections::btree_map::Entry::Vacant(slot) = process_uuid.entry(pid) {
            let pname = threads
                .get(&(pid, pid))
                .cloned()
                .unwrap_or_else(|| name.clone());
            let u = track(
                w,
                stats,
                TrackDescriptor {
                    process: Some(ProcessDescriptor {
                        pid: Some(pid as i32),
                        process_name: Some(pname),
                    }),
                    ..TrackDescriptor::default()
                },
            )?;
            slot.insert(u);
        }
        let u = track(
            w,
            stats,
            TrackDescriptor {
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i64),
                    thread_name: Some(name.clone()),
                }),
                ..TrackDescriptor::default()
            },
        )?;
        thread_uuid.insert((pid, tid), u);
    }
    let child = |parent: Uuid, name: String, rank: i32| TrackDescriptor {
        parent_uuid: Some(parent),
        name: Some(name),
        sibling_order_rank: Some(rank),
        ..TrackDescriptor::default()
    };
    // A read's lane track, by (request, part).
    let mut read_track: FxHashMap<(u32, u32), Uuid> = FxHashMap::default();
    for (key, list) in &reads {
        let t = thread_uuid[key];
        let spans = list.iter().map(|&(q, _)| {
            let r = &c.requests[q as usize];
            (r.queue, r.complete)
        });
        let (lane, n) = lanes(spans);
        let mut uu = Vec::new();
        for l in 0..n {
            uu.push(track(
                w,
                stats,
                child(t, format!("reads and direct IO {}", l + 1), 1 + l as i32),
            )?);
        }
        for (k, &qp) in list.iter().enumerate() {
            read_track.insert(qp, uu[lane[k] as usize]);
        }
    }
    let mut blocked_track: BTreeMap<u32, Uuid> = BTreeMap::new();
    for (i, b) in c.blocked.iter().enumerate() {
        if sel.keep_blocked[i] && !blocked_track.contains_key(&b.tid) {
            let t = thread_uuid[&(b.pid, b.tid)];
            let u = track(w, stats, child(t, "fsync".into(), 0))?;
            blocked_track.insert(b.tid, u);
        }
    }
    // Devices: the requests drawn and those outside the scope.
    let mut devices: BTreeMap<Dev, Vec<u32>> = BTreeMap::new();
    for &qi in &sel.order {
        devices
            .entry(c.requests[qi as usize].dev)
            .or_default()
            .push(qi);
    }
    for o in &c.outside {
        devices.entry(o.0).or_default();
    }
    let mut dev_tracks: BTreeMap<Dev, DevTracks> = BTreeMap::new();
    let mut req_track: Vec<Uuid> = vec![0; c.requests.len()];
    for (&dev, list) in &devices {
        let d = track(
            w,
            stats,
            TrackDescriptor {
                name: Some(format!("device {}", (names.device)(dev))),
                child_ordering: Some(proto::CHILD_ORDERING_EXPLICIT),
                ..TrackDescriptor::default()
            },
        )?;
        let counter = |name: &str, unit: i32, rank: i32| TrackDescriptor {
            parent_uuid: Some(d),
            name: Some(name.into()),
            sibling_order_rank: Some(rank),
            counter: Some(CounterDescriptor {
                unit: Some(unit),
                unit_name: None,
            }),
            ..TrackDescriptor::default()
        };
        let depth = track(w, stats, counter("queue depth", proto::UNIT_COUNT, 0))?;
        let in_flight = track(w, stats, counter("in flight", proto::UNIT_COUNT, 1))?;
        let rate = track(
            w,
            stats,
            counter("bytes per second", proto::UNIT_SIZE_BYTES, 2),
        )?;
        dev_tracks.insert(
            dev,
            DevTracks {
                depth,
                in_flight,
                rate,
            },
        );
        let (lane, n) = lanes(list.iter().map(|&q| {
            let r = &c.requests[q as usize];
            (r.queue, r.complete)
        }));
        let mut uu = Vec::new();
        for l in 0..n {
            uu.push(track(
                w,
                stats,
                child(d, format!("lane {}", l + 1), 3 + l as i32),
            )?);
        }
        for (k, &q) in list.iter().enumerate() {
            req_track[q as usize] = uu[lane[k] as usize];
        }
    }

    Ok(Tracks {
        thread: thread_uuid,
        read: read_track,
        blocked: blocked_track,
        devices: dev_tracks,
        request: req_track,
    })
}

#[cfg(test)]
mod tests {
    use super::lanes;

    /// Overlapping slices go on lanes of their own; a lane is reused once free, never by a
    /// slice that begins when its last one ends.
    #[test]
    fn overlapping_slices_get_lanes_and_free_lanes_are_reused() {
        let spans = [(0, 10), (5, 20), (10, 12), (11, 30), (21, 25)];
        let (lane, n) = lanes(spans.into_iter());
        assert_eq!(n, 3);
        assert_eq!(lane, vec![0, 1, 2, 0, 2]);
        for (i, a) in spans.iter().enumerate() {
            for (j, b) in spans.iter().enumerate().skip(i + 1) {
                if lane[i] == lane[j] {
                    assert!(a.1 < b.0, "{a:?} and {b:?} share lane {}", lane[i]);
                }
            }
        }
    }
}
