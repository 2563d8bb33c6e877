//! `ioblame-bench latency-vs DIR [--repeat 3]`: `btt` against `ioblame latency` on a
//! blktrace recording of `sda` (such as `blktrace-gen` writes). btt reads one file, so
//! `blkparse -d` first merges the per-CPU files into a dump (not timed; btt users run it
//! too); then, in interleaved rounds, `btt -i DUMP` and `ioblame latency DIR` (the release
//! binary beside this one, reading the per-CPU files on its second thread) each run as a
//! whole child process. Prints the best time of each, records/s, the ratio, peak resident
//! memory, and whether both counted the same bios (Q2C n of all devices).
//!
//! The timed ioblame process is `ioblame-bench latency DIR`, which makes the library calls
//! `ioblame latency --json` makes (open the input, stream its events into the engine, print
//! the JSON lines) without the attribution, as `ioblame latency` does on an input without
//! dirtier events; it avoids a release build of the analyzer and its report libraries.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use ioblame_latency::output::{json_lines, Labels};
use ioblame_latency::Engine;

use crate::blktrace::{print_runs, run, Run};

/// A scratch directory, removed when dropped.
struct Tmp(std::path::PathBuf);

impl Tmp {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// btt's "All Devices" Q2C count from its `.avg` file.
fn btt_q2c_n(avg: &str) -> Option<u64> {
    let all = avg.split("All Devices").nth(1)?;
    all.lines()
        .find(|l| l.starts_with("Q2C "))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// `btt` vs `ioblame latency` on the recording in `dir` (device `sda`).
pub fn vs(dir: &Path, repeat: usize) -> Result<()> {
    let me = std::env::current_exe()?;
    let rec = ioblame_blktrace::Recording::open(&[dir.to_path_buf()])?;
    let records = rec.scan().records;
    drop(rec);
    let tmp = Tmp(std::env::temp_dir().join(format!("ioblame-latency-vs.{}", std::process::id())));
    std::fs::create_dir_all(tmp.path())?;
    let dump = tmp.path().join("dump.bin");
    let t0 = std::time::Instant::now();
    let st = Command::new("blkparse")
        .current_dir(tmp.path())
        .args(["-q", "-O", "-i", "sda", "-D"])
        .arg(dir)
        .arg("-d")
        .arg(&dump)
        .status()
        .context("blkparse")?;
    if !st.success() {
        bail!("blkparse -d failed");
    }
    println!(
        "blktrace recording: {records} records; blkparse -d made btt's dump in {:.1} s; best of {repeat} interleaved rounds",
        t0.elapsed().as_secs_f64()
    );
    let (mut bt, mut ib): (Option<Run>, Option<Run>) = (None, None);
    let keep = |best: &mut Option<Run>, r: Run| match best {
        Some(b) => {
            b.max_rss_kib = b.max_rss_kib.max(r.max_rss_kib);
            b.secs = b.secs.min(r.secs);
        }
        None => *best = Some(r),
    };
    for _ in 0..repeat {
        keep(
            &mut bt,
            run(Command::new("btt")
                .current_dir(tmp.path())
                .arg("-i")
                .arg(&dump)
                .args(["-o", "btt"]))?,
        );
        keep(&mut ib, run(Command::new(&me).arg("latency").arg(dir))?);
    }
    let (Some(bt), Some(ib)) = (bt, ib) else {
        bail!("nothing timed");
    };
    print_runs(
        records,
        &[("btt -i DUMP", &bt), ("ioblame latency --json DIR", &ib)],
    );
    println!(
        "ioblame latency vs btt: x{:.2} records/s",
        bt.secs / ib.secs
    );
    // Both counted the same bios.
    let out = Command::new(&me).arg("latency").arg(dir).output()?;
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let ours: Option<u64> = first
        .split("\"q2c\":{\"n\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok());
    let theirs = std::fs::read_to_string(tmp.path().join("btt.avg"))
        .ok()
        .and_then(|a| btt_q2c_n(&a));
    println!("Q2C n of all devices: ioblame {ours:?}, btt {theirs:?}");
    Ok(())
}

/// `ioblame latency --json INPUT` without the attribution: the engine over the input's
/// events, the JSON lines on stdout.
pub fn latency(input: &Path) -> Result<()> {
    let mut notes = Vec::new();
    let input = ioblame_pipeline::open_trace(&[input.to_path_buf()], None, &mut notes)?;
    let mut engine = Engine::default();
    for t in &input.metadata().tasks {
        if t.comm != ioblame_pipeline::unnamed_task(t.pid) {
            engine.set_comm(t.tid, &t.comm);
        }
    }
    ioblame_pipeline::events(&input, |ev| engine.push(ev), |_| {});
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    json_lines(&mut out, &engine.finish(), &Labels::NONE)?;
    Ok(())
}
