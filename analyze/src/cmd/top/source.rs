//! Where `ioblame top` reads from: a recorder it starts (`ioblame-capture record` into a
//! temporary ring, or `--keep DIR`), or a recording it follows (`--follow`); and how a run is
//! asked to stop (a signal, or the view's `q`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use ioblame_pipeline::Follow;

use super::TopArgs;

/// Set by SIGINT, SIGTERM and SIGHUP.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a signal asked the run to stop.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The signals that stop a run, caught so that it stops its recorder and says what it saw.
pub struct Stop;

impl Stop {
    /// Catches SIGINT, SIGTERM and SIGHUP (in the view, keys arrive as input, not signals:
    /// these come from elsewhere).
    pub fn install() -> Stop {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only stores an atomic, which is async-signal-safe; the
            // sigaction is zeroed then filled as sigaction(2) asks.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        Stop
    }

    /// Sleeps until `deadline`; true when a signal asked to stop first.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        loop {
            if stop_requested() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
        }
    }
}

/// The recorder `ioblame top` started.
struct Recorder {
    child: Child,
    /// Its stderr.
    log: PathBuf,
    /// The temporary directory to remove at the end (none with `--keep`).
    temp: Option<PathBuf>,
    /// Its exit status, once it exited.
    exited: Option<ExitStatus>,
}

/// Where the trace is, and the recorder writing it when `ioblame top` started one.
pub struct Source {
    dir: PathBuf,
    recorder: Option<Recorder>,
}

/// How long the recorder may take to write its first file (it reads the kernel's symbols
/// and the mounts first).
const FIRST_FILE_WAIT: Duration = Duration::from_secs(120);

/// The recorder binary: `--capture`, else `ioblame-capture` beside this program, else the
/// one on PATH.
fn capture_binary(given: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return p.to_path_buf();
    }
    if let Ok(exe) = std::env::current_exe() {
        let beside = exe.with_file_name("ioblame-capture");
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("ioblame-capture")
}

impl Source {
    /// Starts the recorder, or notes the directory to follow.
    pub fn start(a: &TopArgs) -> Result<Source> {
        if let Some(dir) = &a.follow {
            if !dir.is_dir() {
                bail!("--follow {}: not a directory", dir.display());
            }
            return Ok(Source {
                dir: dir.clone(),
                recorder: None,
            });
        }
        let (dir, temp) = match &a.keep {
            Some(d) => (d.clone(), None),
            None => {
                // A fresh directory only we can enter (mkdtemp, mode 0700): nothing another
                // user placed there can be written through as root.
                let base = tempfile::Builder::new()
                    .prefix("ioblame-top-")
                    .tempdir()
                    .context("creating a temporary directory")?
                    .keep();
                (base.join("trace"), Some(base))
            }
        };
        // The recorder's stderr, beside its ring files (readers take only `.iob` files).
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let log = dir.join("capture.log");
        let log_file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&log)
            .with_context(|| format!("creating {}", log.display()))?;
        let bin = capture_binary(a.capture.as_deref());
        let mut cmd = Command::new(&bin);
        cmd.arg("record")
            .arg("-o")
            .arg(&dir)
            .arg("--max-size")
            .arg(&a.max_size)
            .arg("--flush-interval")
            .arg(&a.flush_interval)
            .args(&a.record)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of the
        // parent: a recorder whose `ioblame top` dies stops (and finishes its trace) instead
        // of recording on.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT as libc::c_ulong);
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| {
            format!(
                "starting the recorder {} (install ioblame-capture, or give --capture PATH or \
                 --follow TRACE_DIR)",
                bin.display()
            )
        })?;
        Ok(Source {
            dir,
            recorder: Some(Recorder {
                child,
                log,
                temp,
                exited: None,
            }),
        })
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Waits for the trace's first file and starts following it.
    pub fn wait_for_trace(&mut self, stop: &Stop) -> Result<Follow> {
        let started = Instant::now();
        loop {
            let has_file = std::fs::read_dir(&self.dir).is_ok_and(|rd| {
                rd.filter_map(|e| e.ok())
                    .any(|e| e.path().extension().is_some_and(|x| x == "iob"))
            });
            if has_file {
                match Follow::open(&self.dir) {
                    // Once the recorder wrote a chunk or a mark, the file's metadata (written
                    // before them, and again once the events are on) is whole.
                    // And it is this recorder's (not an older trace left in --keep's directory).
                    Ok(f)
                        if (!f.trace().chunks().is_empty()
                            || f.trace().files().iter().any(|x| x.flushed().is_some()))
                            && self.recorder.as_ref().is_none_or(|r| {
                                f.trace().header().recorder_pid == r.child.id()
                            }) =>
                    {
                        return Ok(f)
                    }
                    Ok(_) => {}
                    // The first file is being written: its header may not be whole yet.
                    Err(e) if started.elapsed() > Duration::from_secs(10) => {
                        return Err(e).with_context(|| format!("reading {}", self.dir.display()))
                    }
                    Err(_) => {}
                }
            } else if self.recorder.is_none() && started.elapsed() > Duration::from_secs(10) {
                bail!("{}: no trace file (.iob) appeared", self.dir.display());
            }
            if self.recorder_exited() {
                bail!(
                    "the recorder stopped before recording: {}",
                    self.recorder_log()
                );
            }
            if started.elapsed() > FIRST_FILE_WAIT {
                bail!(
                    "the recorder wrote no trace in {} s: {}",
                    FIRST_FILE_WAIT.as_secs(),
                    self.recorder_log()
                );
            }
            if stop.wait_until(Instant::now() + Duration::from_millis(100)) {
                bail!("stopped before the recording started");
            }
        }
    }

    /// Whether the recorder it started exited (never for a followed recording).
    pub fn recorder_exited(&mut self) -> bool {
        let Some(r) = &mut self.recorder else {
            return false;
        };
        if r.exited.is_none() {
            r.exited = r.child.try_wait().ok().flatten();
        }
        r.exited.is_some()
    }

    /// The last lines the recorder printed.
    fn recorder_log(&self) -> String {
        let Some(r) = &self.recorder else {
            return String::new();
        };
        let text = std::fs::read_to_string(&r.log).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.rsplit('\r').next().unwrap_or(l))
            .filter(|l| !l.trim().is_empty())
            .collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n  ");
        if tail.is_empty() {
            "it printed nothing".into()
        } else {
            format!("it said:\n  {tail}")
        }
    }

    /// Stops the recorder it started (SIGINT: it finishes its trace) and waits for it;
    /// the message of a recorder that failed.
    pub fn stop_recorder(&mut self, _stop: &Stop) -> Option<String> {
        let failed = {
            let r = self.recorder.as_mut()?;
            if r.exited.is_none() {
                // SAFETY: kill(2) on the child's pid, which is ours until we reap it.
                unsafe { libc::kill(r.child.id() as libc::pid_t, libc::SIGINT) };
                let deadline = Instant::now() + Duration::from_secs(60);
                while r.exited.is_none() {
                    r.exited = r.child.try_wait().ok().flatten();
                    if Instant::now() > deadline {
                        let _ = r.child.kill();
                        r.exited = r.child.wait().ok();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            r.exited.is_some_and(|s| !s.success())
        };
        failed.then(|| format!("the recorder failed: {}", self.recorder_log()))
    }

    /// The directory kept at the end (`--keep`); the temporary ring is removed when the
    /// source is dropped.
    pub fn kept(&self) -> Option<&Path> {
        self.recorder
            .as_ref()
            .filter(|r| r.temp.is_none())
            .map(|_| self.dir.as_path())
    }
}

impl Drop for Source {
    /// Stops a recorder still running (an error ended the run) and removes the temporary
    /// ring.
    fn drop(&mut self) {
        let _ = self.stop_recorder(&Stop);
        if let Some(base) = self.recorder.as_ref().and_then(|r| r.temp.as_ref()) {
            let _ = std::fs::remove_dir_all(base);
        }
    }
}
