//! Running the `ioblame` binary on the bundled fixtures, for the tests that check its
//! outputs (`cli.rs`, `latency.rs`, `fleet.rs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The trace directory of the bundled fixture `name`.
pub fn fixture(name: &str) -> String {
    root()
        .join("fixtures")
        .join(name)
        .join("trace")
        .display()
        .to_string()
}

/// Runs the `ioblame` binary built for the tests with `args`.
pub fn ioblame(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioblame"))
        .args(args)
        .output()
        .expect("runs ioblame")
}

/// Runs ioblame and expects success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = ioblame(args);
    assert!(
        o.status.success(),
        "ioblame {args:?} failed: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8 output")
}
