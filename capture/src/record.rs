//! `ioblame-capture record`: open the events, drain the rings, hand chunks to the writer.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ioblame_format::{
    encode_chunk, ChunkBuilder, ChunkHeader, EventDesc, Header, Metadata, RingOptions, RingStats,
    RingWriter, EVENT_CALLCHAIN, EVENT_TASK_RECORDS,
};

use crate::perf::{self, Event, EventSpec, Ring};
use crate::snapshot;
use ioblame_tracepoints::{self as events, FilterDev, Tracepoint};

/// Arguments of `record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Output directory for the ring files (created; must not already hold a trace).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Stop after this long (e.g. 30s, 500ms, 2m).
    #[arg(long, value_parser = crate::parse_duration)]
    pub duration: Option<Duration>,
    /// Only record IO of these block devices (names such as sda, loop0, or MAJ:MIN),
    /// filtered in the kernel.
    #[arg(long, value_name = "DEV,...")]
    pub devices: Option<String>,
    /// Event set: default, minimal, full, or a comma-separated list of sys:name.
    #[arg(long, default_value = "default")]
    pub events: String,
    /// Roll to a new ring file at this size.
    #[arg(long, default_value = "64M", value_parser = crate::parse_size)]
    pub file_size: u64,
    /// Delete the oldest ring files beyond this total size.
    #[arg(long, default_value = "1G", value_parser = crate::parse_size)]
    pub max_size: u64,
    /// perf ring buffer size per CPU (rounded up to a power of two pages).
    #[arg(long, default_value = "16M", value_parser = crate::parse_size)]
    pub buffer_size: u64,
    /// Deepest kernel callchain recorded on the stack events.
    #[arg(long, default_value_t = 32)]
    pub stack_depth: u16,
    /// zstd level of the chunks.
    #[arg(long, default_value_t = 3)]
    pub level: i32,
    /// Command to run while recording (system-wide); the capture exits with its status.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler that only stores an atomic is
        // async-signal-safe; no SA_RESTART so poll() returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Chunks flush at this many bytes per CPU.
const CHUNK_BYTES: usize = 1 << 20;
/// ... or at least this often.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

struct Cpu {
    cpu: u32,
    events: Vec<Event>,
    ring: Ring,
    builder: ChunkBuilder,
}

/// Shared state between the reader loop and the writer thread.
#[derive(Default)]
struct Shared {
    failed: AtomicBool,
    error: Mutex<Option<String>>,
    bytes: AtomicU64,
    chunks: AtomicU64,
    files: AtomicU64,
}

type RawChunk = (ChunkHeader, Vec<u8>);

fn writer_thread(
    mut w: RingWriter,
    rx: Receiver<RawChunk>,
    level: i32,
    shared: Arc<Shared>,
) -> Option<RingStats> {
    let fail = |what: String| {
        *shared.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
        shared.failed.store(true, Ordering::SeqCst);
    };
    for (h, recs) in rx.iter() {
        let enc = encode_chunk(h, &recs, level);
        if let Err(e) = w.write_chunk(&enc) {
            fail(io_message(&e));
            // Stop writing: the file was cut back to its last whole block and stays readable.
            return None;
        }
        let s = w.stats();
        shared.bytes.store(s.bytes_written, Ordering::Relaxed);
        shared.chunks.store(s.chunks, Ordering::Relaxed);
        shared
            .files
            .store(s.files_created as u64, Ordering::Relaxed);
    }
    match w.finish() {
        Ok(s) => Some(s),
        Err(e) => {
            fail(io_message(&e));
            None
        }
    }
}

fn io_message(e: &ioblame_format::Error) -> String {
    if let ioblame_format::Error::Io { path, source } = e {
        if source.raw_os_error() == Some(libc::ENOSPC)
            || source.raw_os_error() == Some(libc::EDQUOT)
        {
            return format!(
                "output filesystem is full writing {} ({source}); recording stopped, the chunks \
                 already written stay readable; free space or use a smaller --max-size",
                path.display()
            );
        }
    }
    format!("writing the trace failed: {e}")
}

#[derive(Default)]
struct Counts {
    records: u64,
    samples: u64,
    lost: u64,
    ring_errors: u64,
    per_id: HashMap<u64, u64>,
}

fn send(tx: &SyncSender<RawChunk>, b: &mut ChunkBuilder, shared: &Shared) {
    if let Some(c) = b.take_raw() {
        // Blocks when the writer lags: the kernel then drops (and reports) records instead of
        // this process growing without bound. After a write failure chunks are dropped.
        if let Err(TrySendError::Full(c)) = tx.try_send(c) {
            if !shared.failed.load(Ordering::Relaxed) {
                let _ = tx.send(c);
            }
        }
    }
}

fn drain(c: &mut Cpu, counts: &mut Counts, tx: &SyncSender<RawChunk>, shared: &Shared) {
    let Cpu {
        ring, builder, cpu, ..
    } = c;
    let r = ring.drain(|rec| {
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
            send(tx, builder, shared);
        }
    });
    if let Err(e) = r {
        counts.ring_errors += 1;
        eprintln!("ioblame-capture: warning: cpu {cpu}: {e}; records skipped");
    }
}

fn human(n: u64) -> String {
    let f = n as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Runs `record`; returns the process exit code.
pub fn run(a: RecordArgs) -> Result<u8> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let max_stack_sys: u16 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(127);
    if a.stack_depth == 0 || a.stack_depth > max_stack_sys {
        bail!(
            "--stack-depth {} must be within 1..={max_stack_sys} (kernel.perf_event_max_stack)",
            a.stack_depth
        );
    }
    if a.buffer_size < page as u64 * 2 || a.buffer_size > 1 << 30 {
        bail!("--buffer-size must be between {} and 1G", page * 2);
    }
    if !(1..=19).contains(&a.level) {
        bail!("--level must be within 1..=19");
    }

    let tfs = events::tracefs()?;
    let names = events::set_names(&a.events)?;
    let is_set = matches!(a.events.as_str(), "default" | "minimal" | "full");
    let (tps, notes) = events::resolve(&tfs, &names, !is_set)?;
    for n in &notes {
        eprintln!("ioblame-capture: note: {n}");
    }
    let block_devices = events::block_devices();
    let fdevs: Vec<FilterDev> = match &a.devices {
        Some(s) => events::resolve_devices(s, &block_devices)?,
        None => Vec::new(),
    };

    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("reading /sys/devices/system/cpu/online")?;
    let cpus = snapshot::parse_cpulist(&online).context("parsing the online CPU list")?;
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| snapshot::parse_cpulist(&s).ok())
        .and_then(|v| v.into_iter().max())
        .map_or(0, |m| m + 1)
        .max(cpus.iter().max().map_or(1, |m| m + 1));

    let data_pages = (a.buffer_size as usize).div_ceil(page).next_power_of_two();
    let data_bytes = data_pages * page;
    let watermark = (data_bytes / 4).min(4 << 20) as u32;
    let filters: Vec<String> = tps.iter().map(|t| events::filter_for(t, &fdevs)).collect();
    let specs: Vec<EventSpec> = tps
        .iter()
        .enumerate()
        .map(|(i, t)| EventSpec {
            config: t.id,
            callchain: t.callchain,
            max_stack: a.stack_depth,
            task: i == 0,
            watermark,
        })
        .collect();

    // Open everything (disabled).
    let mut per_cpu: Vec<Cpu> = Vec::new();
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); tps.len()];
    for &cpu in &cpus {
        let mut evs = Vec::with_capacity(tps.len());
        for (i, (t, spec)) in tps.iter().zip(&specs).enumerate() {
            let ev = Event::open(spec, cpu, &t.name)?;
            if !filters[i].is_empty() {
                ev.set_filter(&filters[i], &t.name)?;
            }
            ids[i].push(ev.id()?);
            evs.push(ev);
        }
        let ring = Ring::map(&evs[0], data_pages, page)?;
        for ev in &evs[1..] {
            ev.set_output(&evs[0])?;
        }
        per_cpu.push(Cpu {
            cpu,
            events: evs,
            ring,
            builder: ChunkBuilder::new(cpu),
        });
    }

    // Metadata and header.
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating output directory {}", a.output.display()))?;
    let out_abs = std::fs::canonicalize(&a.output).unwrap_or_else(|_| a.output.clone());
    let output_dev = snapshot::dev_of(&out_abs)?;
    let desc_ids = ids;
    let descs: Vec<EventDesc> = tps
        .iter()
        .zip(&specs)
        .zip(filters.iter().zip(desc_ids.iter().cloned()))
        .map(|((t, s), (f, ids))| event_desc(t, s, f, ids))
        .collect();
    let (kallsyms, kwarn) = snapshot::kallsyms();
    if let Some(w) = kwarn {
        eprintln!("ioblame-capture: warning: {w}");
    }
    let devices_info = fdevs
        .iter()
        .map(|d| format!("{}:{}", d.major, d.minor))
        .collect::<Vec<_>>()
        .join(",");
    let meta = Metadata {
        events: descs,
        kallsyms,
        block_devices,
        mounts: snapshot::mounts(),
        tasks: snapshot::tasks(),
        capture_info: vec![
            ("command".into(), shell_join(&a.command)),
            ("devices".into(), devices_info),
            ("event_set".into(), a.events.clone()),
            ("output_dir".into(), out_abs.display().to_string()),
            ("output_dev".into(), output_dev),
            ("stack_depth".into(), a.stack_depth.to_string()),
            ("buffer_size".into(), data_bytes.to_string()),
        ],
    };
    let (hostname, kernel_release, machine) = snapshot::uname();
    let header = Header {
        byte_order: ioblame_format::ByteOrder::native(),
        word_size: std::mem::size_of::<usize>() as u8,
        page_size: page as u32,
        cpu_count: possible,
        clock_id: libc::CLOCK_MONOTONIC,
        recorder_pid: std::process::id(),
        file_index: 0,
        start_time_ns: snapshot::clock_ns(libc::CLOCK_REALTIME),
        start_clock_ns: snapshot::clock_ns(libc::CLOCK_MONOTONIC),
        trace_id: snapshot::random_u64(),
        hostname,
        kernel_release,
        machine,
        recorder_version: format!("ioblame-capture {}", env!("CARGO_PKG_VERSION")),
    };
    let opts = RingOptions {
        file_size: a.file_size,
        max_size: a.max_size,
    };
    let writer = RingWriter::create(&a.output, header, meta, opts)
        .map_err(|e| anyhow::anyhow!(io_message(&e)))?;

    let shared = Arc::new(Shared::default());
    let (tx, rx) = sync_channel::<RawChunk>(64);
    let wshared = shared.clone();
    let level = a.level;
    let wt = std::thread::Builder::new()
        .name("ioblame-writer".into())
        .spawn(move || writer_thread(writer, rx, level, wshared))
        .context("starting the writer thread")?;

    install_signals();
    for c in &per_cpu {
        for ev in &c.events {
            ev.enable()?;
        }
    }
    let started = Instant::now();
    let mut child = None;
    let mut spawn_err = None;
    let mut stop_reason = String::new();
    if !a.command.is_empty() {
        match std::process::Command::new(&a.command[0])
            .args(&a.command[1..])
            .spawn()
        {
            Ok(c) => child = Some(c),
            Err(e) => {
                spawn_err = Some(format!("cannot run {}: {e}", a.command[0]));
                stop_reason = "the command could not start".into();
            }
        }
    }

    let tty = std::io::stderr().is_terminal();
    let status_every = if tty {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    };
    let mut counts = Counts::default();
    let mut last_flush = Instant::now();
    let mut last_status = Instant::now();
    let mut last_status_records = 0u64;
    let mut child_status: Option<std::process::ExitStatus> = None;
    let mut pfds: Vec<libc::pollfd> = per_cpu
        .iter()
        .map(|c| libc::pollfd {
            fd: c.events[0].fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();

    while spawn_err.is_none() {
        // SAFETY: pfds is a valid array of pollfd of the given length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        for c in per_cpu.iter_mut() {
            drain(c, &mut counts, &tx, &shared);
        }
        if last_flush.elapsed() >= FLUSH_EVERY {
            for c in per_cpu.iter_mut() {
                send(&tx, &mut c.builder, &shared);
            }
            last_flush = Instant::now();
        }
        if shared.failed.load(Ordering::SeqCst) {
            stop_reason = "write failure".into();
            break;
        }
        let sig = SIGNAL.load(Ordering::SeqCst);
        if sig != 0 {
            stop_reason = format!("signal {sig}");
            break;
        }
        if let Some(ch) = child.as_mut() {
            if let Ok(Some(st)) = ch.try_wait() {
                child_status = Some(st);
                stop_reason = "command exited".into();
                break;
            }
        }
        if a.duration.is_some_and(|d| started.elapsed() >= d) {
            stop_reason = "duration reached".into();
            break;
        }
        if last_status.elapsed() >= status_every {
            let secs = last_status.elapsed().as_secs_f64();
            let rate = (counts.records - last_status_records) as f64 / secs;
            let line = format!(
                "ioblame-capture: {:.0} events/s, {} records, {} written, {} lost",
                rate,
                counts.records,
                human(shared.bytes.load(Ordering::Relaxed)),
                counts.lost
            );
            if tty {
                eprint!("\r{line}\x1b[K");
            } else {
                eprintln!("{line}");
            }
            last_status = Instant::now();
            last_status_records = counts.records;
        }
    }
    if tty {
        eprint!("\r\x1b[K");
    }

    // Stop: disable, drain what is left, flush, close.
    for c in &per_cpu {
        for ev in &c.events {
            ev.disable();
        }
    }
    if !shared.failed.load(Ordering::SeqCst) {
        for c in per_cpu.iter_mut() {
            drain(c, &mut counts, &tx, &shared);
            send(&tx, &mut c.builder, &shared);
        }
    }
    let elapsed = started.elapsed();
    drop(tx);
    let stats = wt.join().unwrap_or(None);
    drop(per_cpu);

    // The command: forward a stopping signal, then wait for it.
    if let Some(mut ch) = child {
        if child_status.is_none() {
            let sig = SIGNAL.load(Ordering::SeqCst);
            if sig != 0 {
                // SAFETY: sending a signal to our own child.
                unsafe { libc::kill(ch.id() as i32, sig) };
            } else {
                // SAFETY: as above; --duration or a write failure ended the capture first.
                unsafe { libc::kill(ch.id() as i32, libc::SIGTERM) };
            }
            child_status = ch.wait().ok();
        }
    }

    let error = shared
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut names_by_id: HashMap<u64, &str> = HashMap::new();
    for (t, d) in tps.iter().zip(&desc_ids) {
        for id in d {
            names_by_id.insert(*id, t.name.as_str());
        }
    }
    summary(
        &counts,
        &names_by_id,
        elapsed,
        stats.as_ref(),
        &shared,
        &stop_reason,
    );
    if let Some(e) = spawn_err {
        bail!("{e}");
    }
    if let Some(e) = error {
        bail!("{e}");
    }
    Ok(match child_status {
        Some(st) => exit_code(st),
        None => 0,
    })
}

fn exit_code(st: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128u8.wrapping_add(s as u8),
        _ => 1,
    }
}

fn summary(
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

fn event_desc(t: &Tracepoint, s: &EventSpec, filter: &str, ids: Vec<u64>) -> EventDesc {
    EventDesc {
        name: t.name.clone(),
        tracefs_id: t.id as u32,
        sample_type: s.sample_type(),
        read_format: 0,
        flags: if s.callchain { EVENT_CALLCHAIN } else { 0 }
            | if s.task { EVENT_TASK_RECORDS } else { 0 },
        max_stack: if s.callchain { s.max_stack } else { 0 },
        filter: filter.to_string(),
        format: t.format.clone(),
        ids,
    }
}

fn shell_join(v: &[String]) -> String {
    v.iter()
        .map(|s| {
            if !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&c))
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
