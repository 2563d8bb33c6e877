//! Stopping: the events disabled and drained a last time, the tables of the end (user
//! stacks' mappings and symbols, file names, the FILES walk, cgroups) handed to the writer,
//! the writer joined, the events' teardown handed to a child; then the summary.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ioblame_format::{RingStats, FILES_AT_END};
use ioblame_tracepoints::Tracepoint;

use super::args::human;
use super::drain::{drain, Counts, Recorder};
use super::naming::{FilesWalk, Naming};
use super::open::Cpu;
use super::writer::{Shared, ToWriter};
use crate::cgroups;
use crate::perf::Event;
use crate::snapshot;

/// What is left when recording has stopped.
pub(super) struct Stopped {
    pub(super) counts: Counts,
    pub(super) shared: Arc<Shared>,
    /// How long recording lasted.
    pub(super) elapsed: Duration,
    /// The writer's statistics; none when it failed.
    pub(super) stats: Option<RingStats>,
}

/// Stops recording: disables the events, drains what is left, has the FILES table of the
/// end (`files`) written after the last chunk, waits for the writer to finish the trace, then
/// closes the events.
pub(super) fn stop(
    rec: Recorder,
    started: Instant,
    files: Option<&FilesWalk>,
    naming: Option<(Naming, Duration)>,
    start_cgroups: Option<&[ioblame_format::Cgroup]>,
    wt: JoinHandle<Option<RingStats>>,
) -> Stopped {
    let Recorder {
        mut per_cpu,
        mut counts,
        names_tx,
        link,
        layers: _,
        mut btrfs,
        mut info,
    } = rec;
    for c in &per_cpu {
        for ev in &c.events {
            ev.disable();
        }
    }
    // Read before the last drain, as in the recording loop: the last mark covers every
    // record the events made.
    let clock = snapshot::clock_ns(libc::CLOCK_MONOTONIC);
    if !link.failed() {
        for c in per_cpu.iter_mut() {
            drain(c, &mut counts, &link);
            link.send_chunk(&mut c.builder);
        }
        // The btrfs chunks allocated since the last flush (a recording shorter than the
        // flush interval saw none): the IO to them needs their map, written before the mark
        // so that a follower has it before the events the mark lets it hand on.
        if let Some(b) = btrfs.rescan(clock) {
            link.send(ToWriter::Btrfs(b));
        }
        link.mark_flushed(clock);
    }
    let elapsed = started.elapsed();
    // The last records' mappings and every symbol table the stacks need, read before the
    // workload is stopped: after the last chunk.
    if let Some(u) = counts.ustack.take() {
        let done = u.finish(clock);
        eprintln!(
            "ioblame-capture: user stacks: {} mappings, symbols of {} files ({}){}",
            done.info
                .iter()
                .find(|(k, _)| k == "user_maps")
                .map_or("0", |(_, v)| v.as_str()),
            done.symbols.len(),
            human(done.symbols.iter().map(symbols_bytes).sum()),
            if done.left_out > 0 {
                format!(
                    ", {} files left out (capture info user_symbols_left_out)",
                    done.left_out
                )
            } else {
                String::new()
            }
        );
        if let Some(m) = done.maps {
            link.send(ToWriter::UserMaps(m));
        }
        for s in done.symbols {
            link.send(ToWriter::UserSymbols(Box::new(s)));
        }
        for m in done.perf_maps {
            link.send(ToWriter::PerfMap(m));
        }
        info.extend(done.info);
        link.send(ToWriter::Info(info));
    }
    hand_off_events(&mut per_cpu);
    // The inodes of the last records, then the names: those found while recording, looked up
    // again (renamed files get their new name), and a walk for what no handle named.
    if let Some((n, budget)) = naming {
        let fresh = counts.touched.take_fresh();
        if !fresh.is_empty() {
            let _ = n.tx.send(fresh);
        }
        drop(names_tx);
        let over_cap = counts.touched.over_cap();
        let t = n.finish(budget, over_cap);
        link.send(ToWriter::Names(t));
    }
    // The FILES table at the end names the files created during the capture. A failed
    // writer has stopped: nothing more is written (nor walked).
    if let Some(f) = files {
        link.send_with(|| Some(ToWriter::Files(f.walk(FILES_AT_END))));
    }
    // The cgroups created while recording, with those of the start (a reader takes the
    // first file's table and the last's).
    if let Some(start) = start_cgroups {
        link.send_with(|| {
            // The walk at the end wins over the CGROUP records (a path reused), which win
            // over the start's.
            let seen = cgroups::merge(start, std::mem::take(&mut counts.cgroups));
            let end = cgroups::merge(&seen, cgroups::snapshot());
            (end.as_slice() != start).then_some(ToWriter::Cgroups(end))
        });
    }
    let shared = link.close();
    let stats = wt.join().unwrap_or(None);
    drop(per_cpu);
    Stopped {
        counts,
        shared,
        elapsed,
        stats,
    }
}

/// Closes the (disabled, drained) events of `per_cpu` without making the recorder wait for
/// the kernel's teardown: a forked child holds the last references and closes them when it
/// exits, after this process has dropped its own. The rings stay mapped until `per_cpu` is
/// dropped.
///
/// The last close of a tracepoint's perf events unregisters its probe and waits for RCU
/// grace periods (`perf_trace_destroy` → `tracepoint_synchronize_unregister`) under the
/// kernel's `event_mutex`: 25-60 ms per tracepoint on this kernel, about 2.4 s for the
/// default set. The mutex serialises them, so closing from several threads gains nothing
/// (measured: the closes of 35 threads, one per tracepoint, completed one after another).
/// The events are disabled and drained before this runs, so the child's teardown cannot
/// lose or add a record; a capture started right after this one waits for it in
/// `perf_event_open`. Where no child can be forked, the events are closed here.
fn hand_off_events(per_cpu: &mut [Cpu]) {
    let events: Vec<Event> = per_cpu
        .iter_mut()
        .flat_map(|c| std::mem::take(&mut c.events))
        .collect();
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [rd, wr] = fds;
    // SAFETY: the child of a multithreaded process calls only async-signal-safe functions
    // (close, read, _exit) on descriptors it inherited, and allocates nothing.
    match unsafe { libc::fork() } {
        // SAFETY: as above: the child only closes, reads and exits.
        0 => unsafe {
            libc::close(wr);
            for fd in 0..3 {
                libc::close(fd);
            }
            // Until the parent has closed its copies of the events (and so the write end).
            let mut b = 0u8;
            while libc::read(rd, (&mut b as *mut u8).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            // Exiting closes the events: the last references, so the teardown runs here.
            libc::_exit(0)
        },
        _ => {
            // After the fork (failed or not) the parent closes its read end, then its events
            // (cheap while the child holds references), then the write end, which lets the
            // child go on.
            // SAFETY: `rd` is ours and closed once.
            unsafe { libc::close(rd) };
            drop(events);
            // SAFETY: `wr` is ours and closed once.
            unsafe { libc::close(wr) };
        }
    }
}

/// The event names by sample id: `ids` holds each of `tps`'s ids.
pub(super) fn names_by_id<'a>(tps: &'a [Tracepoint], ids: &[Vec<u64>]) -> HashMap<u64, &'a str> {
    let mut names: HashMap<u64, &str> = HashMap::new();
    for (t, d) in tps.iter().zip(ids) {
        for id in d {
            names.insert(*id, t.name.as_str());
        }
    }
    names
}

pub(super) fn summary(
    c: &Counts,
    names: &HashMap<u64, &str>,
    elapsed: Duration,
    stats: Option<&RingStats>,
    shared: &Shared,
    why: &str,
) {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let (bytes, files, chunks) = match stats {
        Some(s) => (s.bytes_on_disk, s.files_created, s.chunks),
        None => (
            shared.bytes.load(Ordering::Relaxed),
            shared.files.load(Ordering::Relaxed).max(1) as u32,
            shared.chunks.load(Ordering::Relaxed),
        ),
    };
    eprintln!(
        "ioblame-capture: stopped ({why}) after {:.1} s: {} records ({} samples, {:.0}/s), \
         {} chunks, {} on disk in {} file(s), {} lost{}",
        secs,
        c.records,
        c.samples,
        c.samples as f64 / secs,
        chunks,
        human(bytes),
        files,
        c.lost,
        if c.ring_errors > 0 {
            format!(", {} ring errors", c.ring_errors)
        } else {
            String::new()
        }
    );
    let mut per_event: HashMap<&str, u64> = HashMap::new();
    for (id, n) in &c.per_id {
        *per_event
            .entry(names.get(id).copied().unwrap_or("?"))
            .or_default() += n;
    }
    let mut v: Vec<_> = per_event.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !v.is_empty() {
        let top: Vec<String> = v.iter().take(8).map(|(n, k)| format!("{n} {k}")).collect();
        eprintln!("ioblame-capture: top events: {}", top.join(", "));
    }
    if c.lost > 0 {
        eprintln!(
            "ioblame-capture: warning: the kernel dropped {} records; raise --buffer-size, \
             narrow --devices or use --events minimal",
            c.lost
        );
    }
}

/// The bytes of the sections of a symbol table.
fn symbols_bytes(s: &ioblame_format::UserSymbols) -> u64 {
    s.sections.iter().map(|x| x.data.len() as u64).sum()
}
