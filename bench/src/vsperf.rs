//! `perf script` against ioblame on one real workload recorded by both at once (root).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};

use crate::measure;

fn sh(cmd: &str) -> Result<String> {
    let o = Command::new("sh").arg("-c").arg(cmd).output()?;
    if !o.status.success() {
        bail!("`{cmd}`: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The recorder next to this binary, built when missing.
fn capture_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("bench binary directory")?;
    let bin = dir.join("ioblame-capture");
    if !bin.is_file() {
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        c.args(["build", "-q", "-p", "ioblame-capture"]);
        if release {
            c.arg("--release");
        }
        if !c.status()?.success() {
            bail!("cargo build -p ioblame-capture failed");
        }
    }
    Ok(bin)
}

/// A loop device with ext4 and the directory of the recordings: the device is released by
/// [`Loop::release`] or on drop, and the directory removed on drop unless `keep`.
struct Loop {
    dir: PathBuf,
    dev: String,
    keep: bool,
    released: bool,
}

impl Loop {
    /// Unmounts and detaches the device, deletes its image, and waits for what the
    /// workload wrote to reach the disk: otherwise the writeback of the 2 GiB image runs
    /// during the timed rounds, and moves the short ioblame runs most.
    fn release(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let _ = sh(&format!(
            "umount {0}/mnt; losetup -d {1}; rm -rf {0}/img {0}/mnt; sync",
            self.dir.display(),
            self.dev
        ));
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        self.release();
        if self.keep {
            println!("kept {0}/trace and {0}/perf.data", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Records the workload under both recorders, then times both analyses, best of `repeat`
/// interleaved rounds. With `from`, times a recording kept by an earlier `--keep` instead
/// (no root needed).
pub fn run(secs: u32, keep: bool, repeat: usize, from: Option<PathBuf>) -> Result<()> {
    let (trace, perf_data, lp) = match from {
        Some(d) => (d.join("trace"), d.join("perf.data"), None),
        None => {
            let (trace, perf_data, mut lp) = record(secs, keep)?;
            lp.release();
            (trace, perf_data, Some(lp))
        }
    };
    time_both(&trace, &perf_data, repeat.max(1))?;
    drop(lp);
    Ok(())
}

/// Records the workload under `perf record` and `ioblame-capture` at once on a fresh loop
/// device: the trace, the perf.data, and the device (torn down on drop).
fn record(secs: u32, keep: bool) -> Result<(PathBuf, PathBuf, Loop)> {
    let cap = capture_bin()?;
    let dir = PathBuf::from(sh("mktemp -d /var/tmp/iob-vsperf.XXXXXX")?);
    sh(&format!("truncate -s 2G {}/img", dir.display()))?;
    let dev = sh(&format!("losetup -f --show {}/img", dir.display()))?;
    let lp = Loop {
        dir: dir.clone(),
        dev: dev.clone(),
        keep,
        released: false,
    };
    sh(&format!(
        "mkfs.ext4 -q -F {dev} && mkdir {0}/mnt && mount {dev} {0}/mnt",
        dir.display()
    ))?;
    let name = dev.trim_start_matches("/dev/").to_string();
    let perf_line = ioblame_perfdata::perf_command(
        std::slice::from_ref(&name),
        ioblame_perfdata::Stacks::Exact,
    )?;
    let mnt = dir.join("mnt");
    let workload = format!(
        "fio --name=w --directory={m} --rw=randwrite --bs=4k --size=256M --runtime={secs} --time_based \
         --ioengine=psync --output=/dev/null && \
         fio --name=d --directory={m} --rw=randrw --bs=16k --size=256M --direct=1 --runtime={secs} \
         --time_based --ioengine=psync --output=/dev/null && \
         sync && echo 3 > /proc/sys/vm/drop_caches && cat {m}/w.0.0 > /dev/null",
        m = mnt.display()
    );
    let perf_data = dir.join("perf.data");
    let perf_line = perf_line
        .replace("-o perf.data", &format!("-o {}", perf_data.display()))
        .replace("-- COMMAND", &format!("-- sh -c '{workload}'"));
    let trace = dir.join("trace");
    println!("recording {secs}+{secs} s of fio under perf record and ioblame-capture at once ...");
    let st = Command::new(&cap)
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--devices", &name, "--", "sh", "-c", &perf_line])
        .stdout(std::process::Stdio::null())
        .status()?;
    if !st.success() {
        bail!("recording failed");
    }
    Ok((trace, perf_data, lp))
}

/// Times `perf script` on `perf_data` and ioblame's end-to-end analysis on `trace` (2
/// threads, 1 thread), `repeat` interleaved rounds, and prints the best of each.
fn time_both(trace: &Path, perf_data: &Path, repeat: usize) -> Result<()> {
    println!(
        "timing perf script, then ioblame (2 threads, 1 thread) on the same events, best of {repeat} rounds ..."
    );
    // perf's records, counted through the converter.
    let conv = ioblame_perfdata::open_perf_data(perf_data, &Default::default())?;
    let perf_events: u64 = conv
        .trace
        .chunks()
        .iter()
        .map(|c| c.header.records as u64)
        .sum();
    drop(conv);
    let perf_bytes = std::fs::metadata(perf_data)?.len();
    let mut perf_secs = f64::INFINITY;
    let (mut two, mut one): (Option<measure::Figures>, Option<measure::Figures>) = (None, None);
    let best = |best: &mut Option<measure::Figures>, f: measure::Figures| {
        if best
            .as_ref()
            .is_none_or(|b| f.process_secs < b.process_secs)
        {
            *best = Some(f);
        }
    };
    for _ in 0..repeat {
        let t0 = Instant::now();
        let st = Command::new("perf")
            .args(["script", "-F", "comm,pid,tid,time,event,trace,ip,sym", "-i"])
            .arg(perf_data)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        perf_secs = perf_secs.min(t0.elapsed().as_secs_f64());
        if !st.success() {
            bail!("perf script failed");
        }
        // Unsampled, as perf script runs: the memory sampler's thread would take CPU.
        best(
            &mut two,
            measure::measure_child("attribute", 2, trace, false)?,
        );
        best(
            &mut one,
            measure::measure_child("attribute", 1, trace, false)?,
        );
    }
    let (Some(two), Some(one)) = (two, one) else {
        bail!("nothing timed");
    };
    let trace_bytes: u64 = std::fs::read_dir(trace)?
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let perf_rate = perf_events as f64 / perf_secs;
    println!(
        "perf.data {:.1} MiB, ioblame trace {:.1} MiB",
        perf_bytes as f64 / 1048576.0,
        trace_bytes as f64 / 1048576.0
    );
    println!(
        "{:<34} {:>10} {:>9} {:>12}  vs perf script",
        "", "events", "secs", "events/s"
    );
    println!(
        "{:<34} {:>10} {:>9.3} {:>12}",
        "perf script -F comm,pid,tid,...",
        perf_events,
        perf_secs,
        measure::group(perf_rate)
    );
    for (n, f) in [(2, &two), (1, &one)] {
        // The whole child process, start-up included, as perf script's time is.
        let rate = f.events as f64 / f.process_secs;
        println!(
            "{:<34} {:>10} {:>9.3} {:>12}  x{:.1} (per event), x{:.1} (wall)",
            format!("ioblame end to end, {n} thread(s)"),
            f.events,
            f.process_secs,
            measure::group(rate),
            rate / perf_rate,
            perf_secs / f.process_secs
        );
    }
    if !two.note.is_empty() {
        println!("{}", two.note);
    }
    println!(
        "(the capture wraps perf record, so its trace spans a little more: both recorders saw the same workload)"
    );
    Ok(())
}
