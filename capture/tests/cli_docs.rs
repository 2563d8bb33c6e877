//! `ioblame-capture completions SHELL` loads in bash, zsh and fish and completes
//! subcommands; `ioblame-capture man` writes a page for the program and each subcommand,
//! which `man -l` renders.

use std::path::Path;

#[test]
fn completions_load_in_each_shell() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame-capture"));
    let checked = ioblame_testkit::cli::check_completions(bin, "rec", "record");
    eprintln!("completions checked in {checked:?}");
}

#[test]
fn man_pages_render() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame-capture"));
    let dir = ioblame_testkit::cli::check_man_pages(bin);
    let top = std::fs::read_to_string(dir.join("ioblame-capture.1")).unwrap();
    assert!(top.contains(".SH EXAMPLES"), "{top}");
}
