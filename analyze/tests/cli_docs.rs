//! `ioblame completions SHELL` loads in bash, zsh and fish and completes subcommands; `ioblame
//! man` writes a page for the program and each subcommand, which `man -l` renders.

use std::path::Path;

#[test]
fn completions_load_in_each_shell() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame"));
    let checked = ioblame_testkit::cli::check_completions(bin, "rep", "report");
    eprintln!("completions checked in {checked:?}");
    // Output directories complete as directories.
    let fish = std::process::Command::new(bin)
        .args(["completions", "fish"])
        .output()
        .unwrap();
    let fish = String::from_utf8_lossy(&fish.stdout);
    for opt in ["report\" -s o -l output", "-l dataset", "-l report"] {
        assert!(
            fish.lines()
                .any(|l| l.contains(opt) && l.contains("__fish_complete_directories")),
            "{opt} does not complete directories:\n{fish}"
        );
    }
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
    let dir = ioblame_testkit::cli::check_man_pages(bin);
    // The program's page has the examples and the environment clap does not know of.
    let top = std::fs::read_to_string(dir.join("ioblame.1")).unwrap();
    for want in [
        ".SH EXAMPLES",
        ".SH ENVIRONMENT",
        "NO_COLOR",
        "RAYON_NUM_THREADS",
    ] {
        assert!(top.contains(want), "{want} in ioblame.1:\n{top}");
    }
}

/// `scripts/install.sh` (what `just install` runs after building) installs both binaries,
/// a man page per program and subcommand that `man` finds under the prefix, and completions
/// bash loads; `--uninstall` removes every file it installed.
#[test]
fn install_script_installs_and_removes_everything() {
    let bin = Path::new(env!("CARGO_BIN_EXE_ioblame"));
    let dir = bin.parent().unwrap();
    if !ioblame_testkit::need::met(
        dir.join("ioblame-capture").is_file(),
        "ioblame-capture built beside ioblame (cargo test --workspace builds it)",
    ) {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh");
    let destdir = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let o = std::process::Command::new(&script)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[dir.as_os_str(), "/usr".as_ref(), destdir.path().as_os_str()]);
    let root = destdir.path().join("usr");
    let files = |root: &Path| -> Vec<String> {
        walk(root)
            .into_iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect()
    };
    let installed = files(&root);
    let pages = installed
        .iter()
        .filter(|f| f.starts_with("share/man/man1/"))
        .count();
    let subs = ioblame_testkit::cli::subcommands(bin).len();
    let capture_subs = ioblame_testkit::cli::subcommands(&dir.join("ioblame-capture")).len();
    assert_eq!(
        pages,
        1 + subs + 1 + capture_subs,
        "a page per program and subcommand: {installed:?}"
    );
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        // man finds the pages under the prefix.
        let found = std::process::Command::new("man")
            .arg("-M")
            .arg(root.join("share/man"))
            .args(["-w", "ioblame-capture-record"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&found.stdout)
                .trim()
                .ends_with("share/man/man1/ioblame-capture-record.1"),
            "{}",
            String::from_utf8_lossy(&found.stderr)
        );
    }
    for want in [
        "bin/ioblame",
        "bin/ioblame-capture",
        "share/man/man1/ioblame-report.1",
        "share/man/man1/ioblame-capture-record.1",
        "share/bash-completion/completions/ioblame",
        "share/zsh/site-functions/_ioblame-capture",
        "share/fish/vendor_completions.d/ioblame.fish",
    ] {
        assert!(
            installed.iter().any(|f| f == want),
            "{want} in {installed:?}"
        );
    }
    let version = std::process::Command::new(root.join("bin/ioblame"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("ioblame "));
    let bash = std::process::Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p ioblame",
            root.join("share/bash-completion/completions/ioblame")
                .display()
        ))
        .output()
        .unwrap();
    assert!(
        bash.status.success(),
        "{}",
        String::from_utf8_lossy(&bash.stderr)
    );
    run(&[
        "--uninstall".as_ref(),
        "/usr".as_ref(),
        destdir.path().as_os_str(),
    ]);
    assert_eq!(files(&root), Vec::<String>::new(), "left after --uninstall");
}

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}
