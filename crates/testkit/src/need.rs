//! What a test needs that a machine may lack (root, a tool, a kernel feature, a Python
//! module): the test skips here and says why, but **fails under CI** (`CI` set), where
//! `scripts/install-test-deps.sh` installs everything and a skip would hide a broken setup.
//!
//! ```no_run
//! if !ioblame_testkit::need::met(ioblame_testkit::need::on_path("btt"), "btt (the blktrace package)") {
//!     return;
//! }
//! ```

use std::fmt::Display;
use std::process::Command;

/// The environment variable that skips the live tests (real recordings on this kernel; the
/// `*_live` test files and the `live` modules), as `just test-quick` does: set it to `1`.
pub const SKIP_LIVE_VAR: &str = "IOBLAME_SKIP_LIVE";

/// Whether live tests run: `false`, after saying so, when [`SKIP_LIVE_VAR`] is `1` (even under
/// CI: skipping them was asked for).
pub fn live() -> bool {
    if std::env::var_os(SKIP_LIVE_VAR).is_some_and(|v| v == "1") {
        eprintln!("SKIPPED: a live test ({SKIP_LIVE_VAR}=1)");
        return false;
    }
    true
}

/// Whether this run is CI's (`CI` set), where nothing a test needs may be missing.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The test cannot run: under CI this panics with `what` is required; elsewhere it prints
/// `SKIPPED: needs WHAT` on stderr, and the caller returns.
#[track_caller]
pub fn skip(what: impl Display) {
    if in_ci() {
        panic!("{what} is required in CI (scripts/install-test-deps.sh installs it)");
    }
    eprintln!("SKIPPED: needs {what}");
}

/// `ok`, after [`skip`]ping with `what` when it is false: `if !met(cond, "…") { return; }`.
#[track_caller]
pub fn met(ok: bool, what: impl Display) -> bool {
    if !ok {
        skip(what);
    }
    ok
}

/// `value`, after [`skip`]ping with `what` when it is `None`.
#[track_caller]
pub fn some<T>(value: Option<T>, what: impl Display) -> Option<T> {
    if value.is_none() {
        skip(what);
    }
    value
}

/// Whether `tool` is an executable file in a directory of `PATH`.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Whether this process runs as root (effective uid 0, from `/proc/self/status`).
pub fn root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    })
}

/// Whether `python3` imports module `m`.
pub fn python_module(m: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {m}")])
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn met_passes_what_is_there_through() {
        assert!(met(true, "nothing"));
        assert_eq!(some(Some(3), "a three"), Some(3));
    }

    #[test]
    fn a_missing_need_skips_here_and_fails_in_ci() {
        let r = std::panic::catch_unwind(|| met(false, "a unicorn"));
        if in_ci() {
            let e = r.expect_err("CI must fail");
            let msg = e.downcast_ref::<String>().unwrap();
            assert!(msg.contains("a unicorn is required in CI"), "{msg}");
        } else {
            assert_eq!(r.ok(), Some(false));
        }
    }

    #[test]
    fn tools_found_on_path() {
        assert!(on_path("sh"));
        assert!(!on_path("no-such-tool-ioblame"));
    }
}
