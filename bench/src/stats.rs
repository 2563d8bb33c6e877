//! `ioblame-bench stats TRACE`: the shape of a trace (event mix, stacks, tasks, files,
//! bytes per event), to compare a generated trace with a real capture.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use ioblame_decode::stream::{for_each_event, StreamOptions};
use ioblame_decode::{Decoder, EventKind};
use ioblame_format::Trace;

/// Prints the shape of the trace at `path`.
pub fn print(path: &Path) -> Result<()> {
    let t = Trace::open(path).with_context(|| format!("opening {}", path.display()))?;
    let d = Decoder::new(t.header(), t.metadata());
    let (mut n, mut with_stack, mut frames) = (0u64, 0u64, 0u64);
    let mut stacks: HashSet<std::sync::Arc<[u64]>> = HashSet::new();
    let mut tasks: HashSet<u32> = HashSet::new();
    let mut files: HashSet<(u32, u64)> = HashSet::new();
    let mut devs: HashMap<u32, u64> = HashMap::new();
    let mut cpus: HashSet<u32> = HashSet::new();
    let s = for_each_event(&t, &d, &StreamOptions::default(), |ev| {
        n += 1;
        cpus.insert(ev.cpu);
        if ev.pid != 0 {
            tasks.insert(ev.tid);
        }
        if let Some(st) = &ev.stack {
            with_stack += 1;
            frames += st.len() as u64;
            stacks.insert(st.clone());
        }
        match ev.kind {
            EventKind::DirtyFolio { bdi, ino, .. } => {
                files.insert((bdi, ino));
            }
            EventKind::AddToPageCache { s_dev, ino, .. } => {
                files.insert((s_dev, ino));
            }
            EventKind::IomapDioBegin { dev, ino, .. } => {
                files.insert((dev, ino));
            }
            EventKind::RqIssue { dev, .. } => *devs.entry(dev).or_default() += 1,
            _ => {}
        }
    });
    let compressed: u64 = t
        .chunks()
        .iter()
        .map(|c| c.header.compressed_len as u64)
        .sum();
    // Written at once, and a reader that stops early (`| head`) is no error.
    let mut out = String::new();
    writeln!(
        out,
        "{n} events, {} chunks, {} CPUs, {:.1} compressed / {:.1} raw bytes per event",
        s.chunks,
        cpus.len(),
        compressed as f64 / n.max(1) as f64,
        s.bytes as f64 / n.max(1) as f64
    )?;
    writeln!(
        out,
        "{} tasks, {} files (dev:ino), {} devices with requests, {:.1}% of the events with a \
         stack, {:.1} frames on average, {} distinct stacks, {} decode errors",
        tasks.len(),
        files.len(),
        devs.len(),
        100.0 * with_stack as f64 / n.max(1) as f64,
        frames as f64 / with_stack.max(1) as f64,
        stacks.len(),
        s.decode.error_count()
    )?;
    let mut v = s.counts_by_kind(&d);
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (name, c) in v {
        writeln!(
            out,
            "  {:>6.2}%  {c:>10}  {name}",
            100.0 * c as f64 / n.max(1) as f64
        )?;
    }
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
