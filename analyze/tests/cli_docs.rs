//! `ioblame completions SHELL` loads in bash, zsh and fish and completes subcommands; `ioblame
//! man` writes a page for the program and each subcommand, which `man -l` renders.

use std::path::Path;

#[test]
fn completions_load_in_each_shell() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame"));
    let checked = ioblame_testkit::cli::check_completions(bin, "rep", "report");
    eprintln!("completions checked in {checked:?}");
}

#[test]
fn man_pages_render() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame"));
    let subs = ioblame_testkit::cli::subcommands(bin);
    for c in ["report", "acts", "completions"] {
        assert!(subs.iter().any(|s| s == c), "{c} in {subs:?}");
    }
    assert!(
        !subs.iter().any(|s| s == "man"),
        "the man subcommand is hidden"
    );
    ioblame_testkit::cli::check_man_pages(bin);
}
