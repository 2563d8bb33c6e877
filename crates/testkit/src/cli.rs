//! Checks of a binary's shell completions and man pages (its `completions SHELL` and hidden
//! `man --out DIR` subcommands): bash and fish load the script and complete a subcommand
//! from it, zsh loads it and registers its function for the program (zsh completes only
//! inside its line editor), and `man -l` renders each page without a warning. A shell or `man` that is missing
//! skips its check, except in CI (`CI` set), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::need::{on_path, skip as missing};

fn run(cmd: &mut Command) -> (String, String, bool) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// Loads `bin`'s completion script in bash, zsh and fish; bash and fish complete `partial`
/// (the start of a subcommand) after the program's name into `want`, zsh registers
/// `_PROGRAM` for the program. Returns the shells checked.
pub fn check_completions(bin: &Path, partial: &str, want: &str) -> Vec<&'static str> {
    let name = bin.file_name().unwrap().to_string_lossy().into_owned();
    let dir = tempfile_dir(&name);
    let mut checked = Vec::new();
    for shell in ["bash", "zsh", "fish"] {
        let (script, err, ok) = run(Command::new(bin).args(["completions", shell]));
        assert!(
            ok && !script.is_empty(),
            "{name} completions {shell}: {err}"
        );
        // The hidden `man` subcommand is not offered (clap_complete lists hidden ones).
        assert!(
            !script.contains("Write the man pages")
                && !script
                    .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                    .any(|w| w == "man"),
            "{name} completions {shell} offer the hidden man subcommand:\n{script}"
        );
        let file = dir.join(format!("{name}.{shell}"));
        std::fs::write(&file, &script).unwrap();
        if !on_path(shell) {
            missing(shell);
            continue;
        }
        let f = file.display();
        let (probe, args): (String, Vec<String>) = match shell {
            // The function clap registers, called as bash calls it.
            "bash" => (
                format!(
                    "source {f} && complete -p {name} && COMP_WORDS=({name} {partial}) && \
                     COMP_CWORD=1 && COMP_LINE='{name} {partial}' && COMP_POINT=${{#COMP_LINE}} && \
                     $(complete -p {name} | sed -E 's/.*-F ([^ ]+).*/\\1/') {name} {partial} {name} && \
                     printf '%s\\n' \"${{COMPREPLY[@]}}\""
                ),
                vec!["--norc".into(), "-c".into()],
            ),
            "zsh" => (
                format!(
                    "autoload -U compinit && compinit -u -D && source {f} && \
                     print -r -- \"${{_comps[{name}]}}\""
                ),
                vec!["-f".into(), "-c".into()],
            ),
            _ => (
                format!("source {f}; complete -C'{name} {partial}'"),
                vec!["--no-config".into(), "-c".into()],
            ),
        };
        let (out, err, ok) = run(Command::new(shell).args(&args).arg(&probe));
        assert!(
            ok,
            "{shell} could not load {name}'s completions:\n{out}\n{err}"
        );
        assert!(
            err.trim().is_empty(),
            "{shell} complained loading {name}'s completions: {err}"
        );
        let expect = if shell == "zsh" {
            format!("_{name}")
        } else {
            want.to_string()
        };
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(expect.as_str())
                    || l.split('\t').next() == Some(expect.as_str())),
            "{shell}: {name} {partial}<TAB> gave no {expect}:\n{out}"
        );
        checked.push(shell);
    }
    checked
}

/// The subcommands `bin --help` lists (`help` aside).
pub fn subcommands(bin: &Path) -> Vec<String> {
    let (help, err, ok) = run(Command::new(bin).arg("--help"));
    assert!(ok, "{} --help: {err}", bin.display());
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Writes `bin`'s man pages (`man --out DIR`), checks that there is one for the program and
/// one for each subcommand its `--help` lists, and that `man -l` renders each, naming the
/// page, without a warning. Returns the directory.
pub fn check_man_pages(bin: &Path) -> PathBuf {
    let name = bin.file_name().unwrap().to_string_lossy().into_owned();
    let subs = subcommands(bin);
    let mut pages = vec![name.clone()];
    pages.extend(subs.iter().map(|c| format!("{name}-{c}")));
    let dir = tempfile_dir(&format!("{name}-man"));
    let (_, err, ok) = run(Command::new(bin).arg("man").arg("--out").arg(&dir));
    assert!(ok, "{name} man: {err}");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut want: Vec<String> = pages.iter().map(|p| format!("{p}.1")).collect();
    assert!(want.len() > 2, "{name} lists subcommands: {want:?}");
    want.sort();
    assert_eq!(found, want, "{name}'s man pages");
    if !on_path("man") {
        missing("man");
        return dir;
    }
    for (p, sub) in pages
        .iter()
        .zip(std::iter::once(None).chain(subs.iter().map(Some)))
    {
        let file = dir.join(format!("{p}.1"));
        let (out, err, ok) = run(Command::new("man")
            .arg("--warnings")
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80"));
        assert!(ok, "man -l {}: {err}", file.display());
        assert!(err.trim().is_empty(), "man -l {}: {err}", file.display());
        assert!(
            out.contains("NAME") && out.contains(p.as_str()),
            "{}:\n{out}",
            file.display()
        );
        // The synopsis invokes the program and its subcommand (`ioblame perf-command`), and
        // no page is referred to that is not written (`ioblame-help(1)`).
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        let synopsis = flat
            .split("SYNOPSIS")
            .nth(1)
            .and_then(|s| s.split_whitespace().next().map(str::to_string));
        let invoked = match sub {
            Some(c) => flat.contains(&format!("SYNOPSIS {name} {c} ")),
            None => synopsis.as_deref() == Some(name.as_str()),
        };
        assert!(invoked, "{}: synopsis {synopsis:?}:\n{out}", file.display());
        assert!(!out.contains("-help(1)"), "{}:\n{out}", file.display());
    }
    dir
}

/// A fresh directory for `what` under the system's temporary directory.
fn tempfile_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ioblame-cli-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
