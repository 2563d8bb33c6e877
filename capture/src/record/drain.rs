//! The drain loop: every CPU's ring read into chunks handed to the writer, what the records
//! tell counted and gathered on the way (`Counts`: the inodes they touch, the user stacks), a
//! FLUSHED mark after each flush round, the stacked devices and user mappings looked at
//! again, the status line, until a write failure, a signal, the command's exit or
//! `--duration` stops it.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::io::IsTerminal;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use ioblame_format::{kernel_dev, BlockDevice, Mount};

use super::args::{human, RecordArgs};
use super::open::{Cpu, Opened, Plan};
use super::signals;
use super::writer::{ToWriter, WriterLink};
use crate::perf;
use crate::touched::{IdHasher, Touched};
use crate::ustack::UserStacks;
use crate::{btrfs, layers, snapshot};

/// Most user mappings kept (`--user-stacks`); the capture info says when more were seen.
const USER_MAPS_MAX: usize = 200_000;

/// Chunks flush at this many bytes per CPU, or at least every `--flush-interval`.
const CHUNK_BYTES: usize = 1 << 20;

/// The longest wait for the rings between two reads (a flush due sooner wakes the loop
/// sooner): how late a signal, the command's exit or `--duration` may be seen.
const POLL_MAX: Duration = Duration::from_millis(100);

/// What the drain loop counted and gathered of the records.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) records: u64,
    pub(super) samples: u64,
    pub(super) lost: u64,
    pub(super) ring_errors: u64,
    pub(super) per_id: HashMap<u64, u64, BuildHasherDefault<IdHasher>>,
    /// The cgroups the kernel said were created while recording (CGROUP records), in
    /// order: named in the trace's cgroup table even if removed before the end.
    pub(super) cgroups: Vec<ioblame_format::Cgroup>,
    /// The inodes the records refer to (`--paths touched`).
    pub(super) touched: Touched,
    /// The user stacks' processes, mappings and files (`--user-stacks`).
    pub(super) ustack: Option<UserStacks>,
}

impl Counts {
    /// Nothing counted yet; the inodes to gather on the filesystems of `naming_mounts`
    /// (`--paths touched`), and the user stacks of the events that carry them
    /// (`--user-stacks`).
    pub(super) fn new(
        a: &RecordArgs,
        plan: &Plan,
        opened: &Opened,
        naming_mounts: Option<&[Mount]>,
    ) -> Counts {
        let touched = naming_mounts.map(|ms| {
            let ats: Vec<_> = plan
                .tps
                .iter()
                .zip(&opened.specs)
                .map(|(t, s)| (t.inode_at(), s.callchain))
                .collect();
            let devs = ms.iter().map(|m| kernel_dev(m.major, m.minor)).collect();
            Touched::for_filesystems(
                &ats,
                &opened.ids,
                a.paths_max_entries,
                Some(devs),
                bdi_to_fs(ms, &plan.block_devices),
            )
        });
        let ustack = a.user_stacks.map(|mode| {
            let ids = opened
                .specs
                .iter()
                .zip(&opened.ids)
                .filter(|(s, _)| s.user_callchain || s.copies_stack())
                .flat_map(|(_, ids)| ids.iter().copied());
            UserStacks::new(ids, USER_MAPS_MAX, a.user_symbols_max, mode.copy_size() > 0)
        });
        Counts {
            touched: touched.unwrap_or_default(),
            ustack,
            ..Counts::default()
        }
    }
}

/// For each disk with exactly one of `mounts` on a partition of it: the disk's kernel dev_t
/// -> the partition's (writeback events name the backing device, the disk).
fn bdi_to_fs(mounts: &[Mount], block_devices: &[BlockDevice]) -> HashMap<u32, u32> {
    let mut on_disk: HashMap<u32, Vec<u32>> = HashMap::new();
    for m in mounts {
        let part = block_devices
            .iter()
            .find(|b| (b.major, b.minor) == (m.major, m.minor) && !b.parent.is_empty());
        let disk = part.and_then(|p| block_devices.iter().find(|b| b.name == p.parent));
        if let Some(d) = disk {
            on_disk
                .entry(kernel_dev(d.major, d.minor))
                .or_default()
                .push(kernel_dev(m.major, m.minor));
        }
    }
    on_disk
        .into_iter()
        .filter_map(|(disk, fss)| (fss.len() == 1).then(|| (disk, fss[0])))
        .collect()
}

pub(super) fn drain(c: &mut Cpu, counts: &mut Counts, link: &WriterLink) {
    let Cpu {
        ring, builder, cpu, ..
    } = c;
    let r = ring.drain(|rec| {
        // A cgroup created: kept for the cgroup table, not in the chunks.
        if let Some(c) = perf::cgroup_record(rec) {
            counts.cgroups.push(c);
            return;
        }
        counts.touched.see(rec);
        if let Some(u) = &mut counts.ustack {
            u.see(rec);
        }
        let info = perf::record_info(rec);
        builder.push(rec, info.ts);
        counts.records += 1;
        if rec.len() >= 16
            && u32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]) == perf::RECORD_SAMPLE
        {
            counts.samples += 1;
            let mut id = [0u8; 8];
            id.copy_from_slice(&rec[8..16]);
            *counts.per_id.entry(u64::from_ne_bytes(id)).or_default() += 1;
        }
        if info.lost > 0 {
            builder.add_lost(info.lost);
            counts.lost += info.lost;
        }
        if builder.len() >= CHUNK_BYTES {
            link.send_chunk(builder);
        }
    });
    if let Err(e) = r {
        // Marked in the chunk header (CHUNK_RING_DISCARDED), so the analyzer reports it too.
        builder.add_discarded(e.pending);
        counts.ring_errors += 1;
        eprintln!("ioblame-capture: warning: cpu {cpu}: {e}");
    }
}

/// The events being recorded, what was counted of them, and the way to the writer thread.
pub(super) struct Recorder {
    pub(super) per_cpu: Vec<Cpu>,
    pub(super) counts: Counts,
    /// Where the inodes seen for the first time go to be named (`--paths touched`).
    pub(super) names_tx: Option<std::sync::mpsc::Sender<Vec<(u32, u64)>>>,
    /// The way to the writer thread.
    pub(super) link: WriterLink,
    /// The stacked devices seen so far.
    pub(super) layers: layers::LayerWatch,
    /// The btrfs filesystems seen so far.
    pub(super) btrfs: btrfs::BtrfsWatch,
    /// The CAPTURE_INFO pairs written so far (added to at stop with `--user-stacks`).
    pub(super) info: Vec<(String, String)>,
}

impl Recorder {
    /// Reads every CPU's ring into its chunk, sending the chunks that are full, and the
    /// inodes seen for the first time to the namer.
    fn drain_all(&mut self) {
        for c in self.per_cpu.iter_mut() {
            drain(c, &mut self.counts, &self.link);
        }
        if let Some(n) = &self.names_tx {
            let fresh = self.counts.touched.take_fresh();
            if !fresh.is_empty() {
                let _ = n.send(fresh);
            }
        }
    }

    /// Sends every CPU's chunk as it is.
    fn flush_all(&mut self) {
        for c in self.per_cpu.iter_mut() {
            self.link.send_chunk(&mut c.builder);
        }
    }

    /// Has the writer mark the trace complete below `clock_ns`, taken before the rings were
    /// read for the chunks just sent (see [`flushed_mark`]).
    fn mark_flushed(&self, clock_ns: u64) {
        self.link.mark_flushed(clock_ns);
    }

    /// Whether the writer failed (and stopped).
    pub(super) fn failed(&self) -> bool {
        self.link.failed()
    }
}

/// The status line printed while recording: on a terminal one line, rewritten every second;
/// otherwise a line every five seconds.
pub(super) struct StatusLine {
    tty: bool,
    every: Duration,
    last: Instant,
    last_records: u64,
}

impl StatusLine {
    pub(super) fn new() -> StatusLine {
        let tty = std::io::stderr().is_terminal();
        StatusLine {
            tty,
            every: if tty {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(5)
            },
            last: Instant::now(),
            last_records: 0,
        }
    }

    /// Prints the line when it is due; `written`: bytes the writer wrote.
    fn tick(&mut self, counts: &Counts, written: u64) {
        if self.last.elapsed() >= self.every {
            let secs = self.last.elapsed().as_secs_f64();
            let rate = (counts.records - self.last_records) as f64 / secs;
            let line = format!(
                "ioblame-capture: {:.0} events/s, {} records, {} written, {} lost",
                rate,
                counts.records,
                human(written),
                counts.lost
            );
            if self.tty {
                eprint!("\r{line}\x1b[K");
            } else {
                eprintln!("{line}");
            }
            self.last = Instant::now();
            self.last_records = counts.records;
        }
    }

    /// Clears the line on a terminal.
    pub(super) fn clear(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}

/// Drains the rings into the writer until something stops the recording: a write failure,
/// a signal, the command's exit or `--duration` since `started`. Returns why, with the
/// command's exit status when it exited.
///
/// Every `flush_every` it sends every CPU's chunk as it is, then a FLUSHED mark: the clock is
/// read before the rings are, so every record older than the mark was in a ring when it was
/// read, and is in a chunk sent before the mark.
pub(super) fn record_loop(
    rec: &mut Recorder,
    mut child: Option<&mut Child>,
    duration: Option<Duration>,
    started: Instant,
    flush_every: Duration,
    status: &mut StatusLine,
) -> (String, Option<ExitStatus>) {
    let mut last_flush = Instant::now();
    let mut pfds: Vec<libc::pollfd> = rec
        .per_cpu
        .iter()
        .map(|c| libc::pollfd {
            fd: c.events[0].fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // Until the next flush is due, at most POLL_MAX (rounded up to whole milliseconds).
        let wait = POLL_MAX.min(flush_every.saturating_sub(last_flush.elapsed()));
        let wait_ms = wait.as_micros().div_ceil(1000) as libc::c_int;
        // SAFETY: pfds is a valid array of pollfd of the given length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) };
        // The events' clock (perf's clockid), read before the rings.
        let flush = (last_flush.elapsed() >= flush_every)
            .then(|| (Instant::now(), snapshot::clock_ns(libc::CLOCK_MONOTONIC)));
        rec.drain_all();
        // User stacks: the mappings and symbols of what was drained, read now, while short
        // lived processes (a container's job) most likely still live; written at the flush.
        if flush.is_none() {
            if let Some(u) = rec.counts.ustack.as_mut().filter(|u| u.has_work()) {
                u.work(snapshot::clock_ns(libc::CLOCK_MONOTONIC));
            }
        }
        if let Some((at, clock)) = flush {
            rec.flush_all();
            // A loop device or dm target set up since: its mapping, from about now
            // (before the IO through it is charged, the analysis needs it; a second is
            // early enough for a device that must be set up, formatted and mounted first).
            // These tables go before the round's flush mark: a follower (`ioblame top`)
            // hands on the events up to the mark once it read them, and needs the tables
            // first (`Follow::take_layers`, `Follow::take_btrfs`).
            if let Some(l) = rec.layers.rescan_loops(clock) {
                rec.link.send(ToWriter::Loops(l));
            }
            if let Some(t) = rec.layers.rescan_dm(clock) {
                rec.link.send(ToWriter::DmTargets(t));
            }
            // A btrfs filesystem mounted or a chunk allocated since: the chunk map, from
            // about now (the IO to the new chunk is mapped to its device with it).
            if let Some(b) = rec.btrfs.rescan(clock) {
                rec.link.send(ToWriter::Btrfs(b));
            }
            rec.mark_flushed(clock);
            // The mappings of the processes whose user stacks were seen since, and the
            // symbols of the files they went through, read while the processes live.
            if let Some(m) = rec.counts.ustack.as_mut().and_then(|u| u.flush(clock)) {
                rec.link.send(ToWriter::UserMaps(m));
            }
            last_flush = at;
        }
        if rec.failed() {
            return ("write failure".into(), None);
        }
        let sig = signals::received();
        if sig != 0 {
            return (format!("signal {sig}"), None);
        }
        if let Some(ch) = child.as_mut() {
            if let Ok(Some(st)) = ch.try_wait() {
                return ("command exited".into(), Some(st));
            }
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            return ("duration reached".into(), None);
        }
        status.tick(&rec.counts, rec.link.bytes_written());
    }
}
