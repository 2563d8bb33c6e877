//! Expectations of a ground-truth scenario, checked one by one: every expectation is
//! evaluated and recorded (a failed one does not stop the others), and [`Checks::finish`]
//! fails the test once, listing every failed expectation. With `IOBLAME_LAB_RESULTS=FILE` each
//! expectation is also appended to FILE as one JSON line, which the kernel lab
//! (`scripts/kernel-lab/kernels.sh`) turns into docs/kernels.md:
//!
//! ```text
//! {"kernel":"6.1.0-56-amd64","recorder":"ioblame-capture","fs":"ext4","scenario":"writeback",
//!  "expectation":"fsync by the writer: writerF on f.dat","ok":true,"got":4194304,
//!  "want":4194304,"gap":null}
//! ```
//!
//! An expectation that fails where [`known_gap`] names a reason is recorded with that reason
//! (`gap`) and does not fail the test.

use std::fmt::Debug;
use std::io::Write;

use serde_json::{json, Value};

use super::Recorder;

/// The reason why `expectation` of `scenario` cannot hold on `kernel` with `recorder` on
/// `fs`, when it is a known, declared gap (an event the kernel does not have, say): the
/// expectation is then recorded as a gap, not a failure.
///
/// A gap is declared here by hand, each with its reason, only where the kernel lab shows the
/// kernel (or the recording) lacks what the rule needs and the analyzer's outputs say so
/// (`ioblame_pipeline::Diagnostic`); every other failed expectation fails its test, on every
/// kernel.
pub fn known_gap(
    kernel: &str,
    recorder: Recorder,
    fs: &str,
    scenario: &str,
    expectation: &str,
) -> Option<String> {
    if kernel.starts_with("5.10.")
        && recorder == Recorder::Perf
        && fs == "xfs"
        && scenario.starts_with("writeback")
        && (expectation.contains("two writers of one file") || expectation.contains("names h.dat"))
    {
        // The outputs say it: Diagnostic::UnmappedWriteback.
        return Some(
            "5.10's xfs writeback emits no iomap sector map; its xfs block numbers \
             (xfs_bmap_post_update, xfs_map_blocks_*) need the filesystem's geometry, which \
             ioblame-capture records and a perf.data recording does not have: a file with two \
             dirtiers goes to the lost intent, with its file"
                .into(),
        );
    }
    None
}

/// The scenario of ext4 with 1 KiB blocks, whose block size must come from the trace's mount
/// table.
pub const ONE_KIB_BLOCKS: &str = "1 KiB blocks, two writers of one file";

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// One scenario's expectations, recorder and filesystem.
pub struct Checks {
    kernel: String,
    recorder: Recorder,
    fs: String,
    scenario: String,
    /// Shown once under the failures (the charges of the whole trace, say).
    context: String,
    failed: Vec<String>,
    gaps: Vec<String>,
    count: usize,
    finished: bool,
}

impl Checks {
    /// The expectations of `scenario` recorded by `recorder` on `fs`.
    pub fn new(recorder: Recorder, fs: &str, scenario: &str) -> Checks {
        Checks {
            kernel: kernel_release(),
            recorder,
            fs: fs.to_string(),
            scenario: scenario.to_string(),
            context: String::new(),
            failed: Vec::new(),
            gaps: Vec::new(),
            count: 0,
            finished: false,
        }
    }

    /// What a failure report shows once, after the list of failed expectations.
    pub fn context(&mut self, text: String) {
        self.context = text;
    }

    /// Expects `got == want`; `ctx` is shown with a failure.
    pub fn eq<T: PartialEq + Debug + Into<Value>>(
        &mut self,
        name: &str,
        got: T,
        want: T,
        ctx: &str,
    ) {
        let ok = got == want;
        let detail = format!("got {got:?}, want {want:?}");
        self.record(name, ok, got.into(), want.into(), &detail, ctx);
    }

    /// Expects `ok`; `got` and `want` say what was seen and what was expected, for the
    /// record and the failure message.
    pub fn truth(&mut self, name: &str, ok: bool, got: &str, want: &str, ctx: &str) {
        let detail = format!("got {got}, want {want}");
        self.record(name, ok, json!(got), json!(want), &detail, ctx);
    }

    fn record(&mut self, name: &str, ok: bool, got: Value, want: Value, detail: &str, ctx: &str) {
        self.count += 1;
        let gap = if ok {
            None
        } else {
            known_gap(&self.kernel, self.recorder, &self.fs, &self.scenario, name)
        };
        if !ok {
            let ctx = if ctx.is_empty() {
                String::new()
            } else {
                format!(" ({ctx})")
            };
            match &gap {
                Some(why) => self
                    .gaps
                    .push(format!("{name}: {detail}{ctx} [known gap: {why}]")),
                None => self.failed.push(format!("{name}: {detail}{ctx}")),
            }
        }
        self.append(json!({
            "kernel": self.kernel,
            "recorder": self.recorder.name(),
            "fs": self.fs,
            "scenario": self.scenario,
            "expectation": name,
            "ok": ok,
            "got": got,
            "want": want,
            "gap": gap,
        }));
    }

    /// Appends `line` to `$IOBLAME_LAB_RESULTS`, when set.
    fn append(&self, line: Value) {
        let Some(path) = std::env::var_os("IOBLAME_LAB_RESULTS") else {
            return;
        };
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("IOBLAME_LAB_RESULTS {path:?}: {e}"));
        // One write per line: appends of whole lines do not interleave.
        f.write_all(format!("{line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("IOBLAME_LAB_RESULTS {path:?}: {e}"));
    }

    /// Fails the test when an expectation failed (known gaps aside), listing each.
    pub fn finish(mut self) {
        self.finished = true;
        for g in &self.gaps {
            eprintln!(
                "{} {} {}: {g}",
                self.recorder.name(),
                self.fs,
                self.scenario
            );
        }
        if !self.failed.is_empty() {
            panic!(
                "{} {} {} on {}: {} of {} expectations failed:\n  {}\n{}",
                self.recorder.name(),
                self.fs,
                self.scenario,
                self.kernel,
                self.failed.len(),
                self.count,
                self.failed.join("\n  "),
                self.context
            );
        }
    }
}

impl Drop for Checks {
    /// A scenario that panicked before its end (the recording failed, say) is recorded as
    /// such, so the lab's table shows it rather than a scenario with fewer expectations.
    fn drop(&mut self) {
        if !self.finished && std::thread::panicking() {
            self.append(json!({
                "kernel": self.kernel,
                "recorder": self.recorder.name(),
                "fs": self.fs,
                "scenario": self.scenario,
                "expectation": "the scenario runs to its end",
                "ok": false,
                "got": "a panic (see the test's output)",
                "want": "no panic",
                "gap": null,
            }));
        }
    }
}
