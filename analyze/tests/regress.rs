//! The CI regression check on the committed fixture traces (issue 7; no root needed):
//! doctored baselines, damaged traces, exit codes, user-stack keys, `scripts/check-fixtures.sh`.
//! The same check on fresh captures of a real workload is `regress_live.rs`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    support::ioblame(&a)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A baseline of a fixture trace, made with `extra` options.
fn fixture_baseline(dir: &Path, name: &str, extra: &[&str]) -> (PathBuf, String) {
    let trace = fixture(name).join("trace");
    let out = dir.join(format!("{name}.toml"));
    let mut args = vec!["baseline", s(&trace), "-o", s(&out)];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o));
    let t = std::fs::read_to_string(&out).unwrap();
    (out, t)
}

/// The baseline text with the group of role `role` rewritten as unattributed IO of the
/// flusher (`kworker/* via unknown`, no frames): what an analyzer that lost the writer's
/// attribution would have written.
fn as_unattributed(text: &str, role: &str) -> String {
    let mut out = String::new();
    let mut in_group = false;
    for l in text.lines() {
        if l.starts_with("[[group]]") {
            in_group = false;
        }
        if l == format!("role = \"{role}\"") {
            in_group = true;
            out.push_str("role = \"kworker/*\"\n");
            continue;
        }
        if in_group && l.starts_with("via = ") {
            out.push_str("via = \"unknown\"\n");
            continue;
        }
        if in_group && l.starts_with("frames = ") {
            out.push_str("frames = []\n");
            continue;
        }
        if in_group && l.starts_with("name = ") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    // Names are set before the role line: drop the doctored group's.
    let name = format!("name = \"{role} via ");
    out.lines()
        .filter(|l| !l.starts_with(&name))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn check_fixture(name: &str, baseline: &Path, extra: &[&str]) -> Output {
    let trace = fixture(name).join("trace");
    let mut args = vec!["check", s(&trace), "--baseline", s(baseline)];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn strict_check_catches_a_writer_lost_to_unknown() {
    let dir = tempfile::tempdir().unwrap();
    // A default baseline doctored so that writerA's 8 MiB are `kworker/* via unknown`.
    let (_, t) = fixture_baseline(dir.path(), "ext4-two-writers", &[]);
    assert!(t.contains("role = \"writerA\""), "{t}");
    let doctored = as_unattributed(&t, "writerA");
    assert!(!doctored.contains("writerA"), "{doctored}");
    let b = dir.path().join("doctored.toml");
    std::fs::write(&b, &doctored).unwrap();
    // With the pool (the default for noisy real captures) unattributed bytes explain it.
    let o = check_fixture("ext4-two-writers", &b, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Strictly, the writer is new and the unattributed group vanished.
    let o = check_fixture("ext4-two-writers", &b, &["--strict"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(
            "new group writerA via page (sync writeback) on /mnt/ioblame-fixture/g_A.dat: write 8.0 MiB"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "kworker/* via unknown (sync writeback) on /mnt/ioblame-fixture/g_A.dat: vanished: write 8.0 MiB"
        ),
        "{out}"
    );
    // An exact baseline (as scripts/check-fixtures.sh writes them) is strict by itself.
    let (_, t) = fixture_baseline(dir.path(), "ext4-two-writers", &["--exact"]);
    assert!(t.contains("unattributed = \"strict\""), "{t}");
    std::fs::write(&b, as_unattributed(&t, "writerA")).unwrap();
    let o = check_fixture("ext4-two-writers", &b, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // --strict on a baseline made with --strict: the same.
    let (_, t) = fixture_baseline(dir.path(), "ext4-two-writers", &["--strict"]);
    assert!(t.contains("unattributed = \"strict\""), "{t}");
    assert!(t.contains("min_bytes = 262144"), "{t}");
}

#[test]
fn exact_baselines_of_the_fixtures_pass_and_pin_them() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["ext4-two-writers", "xfs-two-writers", "ext4-readahead"] {
        let (b, t) = fixture_baseline(dir.path(), name, &["--exact"]);
        let o = check_fixture(name, &b, &["--strict"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
        // One byte count edited by 4 KiB fails.
        let i = t
            .find("\nwrite_bytes = ")
            .or_else(|| t.find("\nreadahead_bytes = "));
        let i = t[i.unwrap() + 1..]
            .find("[[group]]")
            .map(|j| j + i.unwrap() + 1);
        let g = &t[i.unwrap()..];
        let line = g
            .lines()
            .find(|l| {
                l.starts_with("write_bytes = ")
                    || l.starts_with("readahead_bytes = ")
                    || l.starts_with("read_bytes = ")
            })
            .unwrap();
        let (k, v) = line.split_once(" = ").unwrap();
        let n: u64 = v.split_whitespace().next().unwrap().parse().unwrap();
        let edited = t.replacen(line, &format!("{k} = {}", n + 4096), 1);
        std::fs::write(&b, edited).unwrap();
        let o = check_fixture(name, &b, &["--strict"]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o));
    }
}

/// Damage done to a ring file's bytes.
type Damage = Box<dyn Fn(&mut Vec<u8>)>;

/// A copy of a fixture trace with `damage` applied to its ring file.
fn damaged_copy(dir: &Path, damage: impl Fn(&mut Vec<u8>)) -> PathBuf {
    let src = fixture("ext4-two-writers").join("trace");
    let dst = dir.join("trace");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        let mut b = std::fs::read(e.path()).unwrap();
        damage(&mut b);
        std::fs::write(dst.join(e.file_name()), b).unwrap();
    }
    dst
}

#[test]
fn damaged_truncated_or_empty_traces_are_input_errors() {
    let committed = fixture("ext4-two-writers").join("baseline.toml");
    let cases: [(&str, Damage); 2] = [
        (
            "truncated",
            Box::new(|b: &mut Vec<u8>| b.truncate(b.len() * 2 / 3)),
        ),
        (
            "damaged",
            Box::new(|b: &mut Vec<u8>| {
                let mid = b.len() / 2;
                for x in &mut b[mid..mid + 64] {
                    *x ^= 0xff;
                }
            }),
        ),
    ];
    for (what, damage) in cases {
        let dir = tempfile::tempdir().unwrap();
        let trace = damaged_copy(dir.path(), damage);
        let o = run(&["check", s(&trace), "--baseline", s(&committed)]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {out}");
        assert!(
            out.contains("the trace is damaged or truncated"),
            "{what}: {out}"
        );
        assert!(!out.contains("REGRESSION"), "{what}: {out}");
        assert!(!out.contains("panicked"), "{what}: {out}");
        // No baseline is made from it either.
        let b = dir.path().join("b.toml");
        let o = run(&["baseline", s(&trace), "-o", s(&b)]);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(!b.exists());
    }
    // No IO on the selected devices: nothing to compare.
    let trace = fixture("ext4-two-writers").join("trace");
    let o = run(&[
        "check",
        s(&trace),
        "--baseline",
        s(&committed),
        "--devs",
        "!7:0",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("holds no block IO on the selected devices"),
        "{out}"
    );
}

#[test]
fn a_closed_pipe_keeps_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    // writerA wrote twice as much in the baseline: the trace regressed (-50%).
    let (b, t) = fixture_baseline(dir.path(), "ext4-two-writers", &[]);
    let doubled = t.replacen(
        "write_bytes = 8388608  # 8.0 MiB",
        "write_bytes = 16777216  # 16.0 MiB",
        1,
    );
    assert_ne!(doubled, t);
    std::fs::write(&b, doubled).unwrap();
    let trace = fixture("ext4-two-writers").join("trace");
    for json in [false, true] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ioblame"));
        cmd.args(["check", s(&trace), "--baseline", s(&b)]);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Nobody reads the report (`ioblame check ... | head -0`).
        drop(child.stdout.take());
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(1), "json {json}");
    }
    // Read, it says why.
    let o = check_fixture("ext4-two-writers", &b, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("write bytes 8.0 MiB vs 16.0 MiB baseline"));
}

/// The `[[group]]` blocks of `text` whose lines include every one of `lines`.
fn group_blocks<'t>(text: &'t str, lines: &[&str]) -> Vec<&'t str> {
    text.split("\n[[group]]\n")
        .skip(1)
        .filter(|b| lines.iter().all(|l| b.lines().any(|x| x == *l)))
        .collect()
}

/// The user-stack fixture (wal_append, checkpoint and scan_table of one program): its
/// baseline keys each function's IO apart, passes the trace it was made from, and a
/// checkpoint group edited to half its bytes fails naming that group.
#[test]
fn user_stack_baselines_key_groups_by_the_applications_functions() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("ext4-user-stacks").join("trace");
    let b = dir.path().join("baseline.toml");
    let o = run(&["--no-local-symbols", "baseline", s(&trace), "-o", s(&b)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("keyed by the application's functions (user_frames = 2)"),
        "{}",
        text(&o)
    );
    let t = std::fs::read_to_string(&b).unwrap();
    assert!(t.contains("\nuser_frames = 2  #"), "{t}");
    let ckpt = "file = \"/mnt/ioblame-fixture/ckpt.dat\"";
    for (function, via, file) in [
        (
            "wal_append",
            "page",
            "file = \"/mnt/ioblame-fixture/wal.dat\"",
        ),
        ("checkpoint", "page", ckpt),
        ("scan_table", "readahead", ckpt),
    ] {
        let user = format!("user = [\"{function}\", \"main\"]");
        let via = format!("via = \"{via}\"");
        let groups = group_blocks(&t, &[&user, &via, file, "role = \"iowork\""]);
        assert!(!groups.is_empty(), "{function} in\n{t}");
        for g in groups {
            assert!(
                g.starts_with(&format!("name = \"iowork in {function} via ")),
                "{g}"
            );
        }
    }
    let check = |b: &Path, extra: &[&str]| {
        let mut args = vec!["--no-local-symbols", "check", s(&trace), "--baseline", s(b)];
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = check(&b, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // checkpoint's 2 MiB edited down to 1 MiB: its group fails, by name and frames.
    let g = group_blocks(
        &t,
        &["user = [\"checkpoint\", \"main\"]", "via = \"page\"", ckpt],
    );
    assert_eq!(g.len(), 1, "{t}");
    let g = g[0];
    let edited_group = g.replace(
        "write_bytes = 2097152  # 2.0 MiB",
        "write_bytes = 1048576  # 1.0 MiB",
    );
    assert_ne!(edited_group, g);
    let edited = dir.path().join("edited.toml");
    std::fs::write(&edited, t.replace(g, &edited_group)).unwrap();
    let o = check(&edited, &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(
            "  - iowork in checkpoint via page on /mnt/ioblame-fixture/ckpt.dat: write bytes 2.0 MiB vs 1.0 MiB baseline (+100%, tolerance 15%)\n"
        ),
        "{out}"
    );
    assert!(out.contains("\n      user: checkpoint <- main\n"), "{out}");
    assert!(!out.contains("wal_append"), "{out}");
    let o = check(&edited, &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["regressions"];
    assert_eq!(r.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        r[0]["user"],
        serde_json::json!(["checkpoint", "main"]),
        "{v}"
    );
    assert_eq!(r[0]["metric"], "write_bytes", "{v}");
}

/// The fixture's baseline as `ioblame baseline --exact` wrote it before groups were keyed
/// by user frames (a copy of the committed file of that time, its writeback handles' group
/// moved as the attribution moved them since: 20 KiB of a flusher's delayed allocation are
/// the dirtier's, docs/attribution.md "Journal IO"): it still loads, and the
/// trace, whose intents now carry named user frames, still passes it strictly with every
/// group compared, none new.
#[test]
fn baselines_written_before_user_keys_still_pass_user_stack_traces() {
    let old = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/baseline/ext4-user-stacks.before-user-keys.toml");
    let t = std::fs::read_to_string(&old).unwrap();
    assert!(!t.contains("user"), "{t}");
    let trace = fixture("ext4-user-stacks").join("trace");
    let o = run(&[
        "--no-local-symbols",
        "check",
        "--strict",
        s(&trace),
        "--baseline",
        s(&old),
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("compared 10 of 10 baseline groups with 10 groups of the trace"),
        "{out}"
    );
}

/// Every committed fixture trace still gives its committed baseline (`fixtures/*/baseline.toml`,
/// exact): the analyzer's answer on the fixtures is a contract, checked by `cargo test` as
/// by `scripts/check-fixtures.sh`, which this runs with the binary under test. After an
/// intended change, `scripts/check-fixtures.sh --bless` rewrites them (review the diff).
#[test]
fn committed_fixture_baselines_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = std::process::Command::new(root.join("scripts/check-fixtures.sh"))
        .env("IOBLAME", env!("CARGO_BIN_EXE_ioblame"))
        .current_dir(&root)
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    // It checked every fixture with a trace, not none.
    let checked = t.lines().filter(|l| l.starts_with("== fixture ")).count();
    let traces = std::fs::read_dir(root.join("fixtures"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("trace").is_dir())
        .count();
    assert!(traces >= 5, "{traces} fixture traces");
    assert_eq!(checked, traces, "{t}");
}

#[test]
fn check_fixtures_script_keeps_the_highest_status() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // a: a trace without baseline (input error, 2); b: a regression (1), checked later.
    for (name, src) in [("a", "ext4-readahead"), ("b", "ext4-two-writers")] {
        std::fs::create_dir(root.join(name)).unwrap();
        std::os::unix::fs::symlink(fixture(src).join("trace"), root.join(name).join("trace"))
            .unwrap();
    }
    let (_, t) = fixture_baseline(root, "ext4-two-writers", &["--exact"]);
    std::fs::write(
        root.join("b/baseline.toml"),
        t.replacen("write_bytes = 8388608", "write_bytes = 8392704", 1),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-fixtures.sh");
    let o = std::process::Command::new("bash")
        .arg(&script)
        .env("IOBLAME", env!("CARGO_BIN_EXE_ioblame"))
        .env("FIXTURES", root)
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("fixture a: no baseline.toml"), "{out}");
    assert!(out.contains("REGRESSION"), "{out}");
    // Blessed (every fixture's baseline rewritten, exact), both pass.
    let o = std::process::Command::new("bash")
        .arg(&script)
        .arg("--bless")
        .env("IOBLAME", env!("CARGO_BIN_EXE_ioblame"))
        .env("FIXTURES", root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let blessed = std::fs::read_to_string(root.join("a/baseline.toml")).unwrap();
    assert!(blessed.contains("unattributed = \"strict\""), "{blessed}");
    assert!(blessed.contains("min_bytes = 0 "), "{blessed}");
    let o = std::process::Command::new("bash")
        .arg(&script)
        .env("IOBLAME", env!("CARGO_BIN_EXE_ioblame"))
        .env("FIXTURES", root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

// ---- A baseline from one kernel's symbols, a trace from another build ----

/// The acts of a fixture trace (decode + attribution as the analyzer runs it), with their
/// intents' stacks as raw addresses and their byte totals.
struct FixtureActs {
    tables: ioblame_attrib::Tables,
    totals: Vec<ioblame_attrib::ActTotals>,
    kallsyms: String,
}

fn fixture_acts(name: &str) -> FixtureActs {
    use ioblame_attrib::{ActTotals, Context};
    let trace = ioblame_format::Trace::open(&fixture(name).join("trace")).unwrap();
    let kallsyms = trace.metadata().kallsyms.as_ref().unwrap().text.clone();
    let sym = ioblame_decode::Symbolizer::from_kallsyms(&kallsyms);
    assert!(!sym.is_empty());
    let decoder = ioblame_decode::Decoder::new(trace.header(), trace.metadata());
    let mut ctx = Context::from_trace(trace.header(), trace.metadata());
    ctx.symbols = Some(Box::new(move |a: u64| {
        sym.resolve(a).map(|x| x.name.to_string())
    }));
    let (ios, out) = ioblame_attrib::attribute_trace(&trace, &decoder, ctx);
    let mut totals = vec![ActTotals::default(); out.tables.acts.len()];
    for io in &ios {
        totals[io.act.index()].add(io.dir, io.size);
    }
    FixtureActs {
        tables: out.tables,
        totals,
        kallsyms,
    }
}

/// Another build of the same kernel, booted elsewhere: every text symbol moved by a KASLR
/// offset, and every function grown by 0x40 bytes (so each one also moves by 0x40 per
/// function before it). Returns the kallsyms text and the address map old -> new (an address
/// keeps its function and lands 0x10 further into it).
fn other_build(kallsyms: &str) -> (String, impl Fn(u64) -> u64) {
    const KASLR: u64 = 0x20_0000;
    let mut starts: Vec<u64> = kallsyms
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (a, t) = (f.next()?, f.next()?);
            matches!(t, "t" | "T" | "w" | "W")
                .then(|| u64::from_str_radix(a, 16).ok())
                .flatten()
                .filter(|&a| a != 0)
        })
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let shift = move |a: u64, extra: u64| {
        let rank = starts.partition_point(|&s| s <= a) as u64;
        a + KASLR + rank * 0x40 + extra
    };
    let text: String = kallsyms
        .lines()
        .map(|l| match l.split_once(' ') {
            Some((a, rest)) => match u64::from_str_radix(a, 16) {
                Ok(a) if a != 0 => format!("{:016x} {rest}\n", shift(a, 0)),
                _ => format!("{l}\n"),
            },
            None => format!("{l}\n"),
        })
        .collect();
    (text, move |a| shift(a, 0x10))
}

/// The analyzer's inputs of the check, with each stack address mapped by `map` and
/// symbolized with `kallsyms`.
fn inputs_with<'a>(
    f: &'a FixtureActs,
    kallsyms: &str,
    map: &dyn Fn(u64) -> u64,
) -> Vec<ioblame_baseline::ActInput<'a>> {
    let sym = ioblame_decode::Symbolizer::from_kallsyms(kallsyms);
    let t = &f.tables;
    t.acts
        .iter()
        .zip(&f.totals)
        .filter(|(_, tot)| tot.ios.iter().any(|&n| n > 0))
        .map(|(act, tot)| {
            let intent = &t.intents[act.intent.index()];
            ioblame_baseline::ActInput {
                role: &t.roles[act.role.index()],
                intent,
                frames: intent
                    .stack
                    .iter()
                    .map(|&a| sym.format_frame(map(a)))
                    .collect(),
                // Fixtures recorded without user stacks.
                user: Vec::new(),
                file_path: None,
                via: act.via,
                reason: act.reason,
                recorder: act.recorder,
                totals: *tot,
                sync_write_bytes: 0,
                q2c_ns: 0,
                behind_ns: 0,
                histograms: Vec::new(),
            }
        })
        .collect()
}

#[test]
fn a_baseline_from_one_kernels_symbols_matches_another_build() {
    use ioblame_baseline::{check_with, Baseline, BuildOptions, CheckOptions, Defaults};
    let none: [&str; 0] = [];
    for name in ["ext4-two-writers", "xfs-two-writers"] {
        let f = fixture_acts(name);
        let here = inputs_with(&f, &f.kallsyms, &|a| a);
        let (kallsyms_b, map) = other_build(&f.kallsyms);
        let there = inputs_with(&f, &kallsyms_b, &map);
        // The raw frames differ (addresses, offsets, sizes) ...
        let differ = here
            .iter()
            .zip(&there)
            .filter(|(a, b)| !a.frames.is_empty() && a.frames != b.frames)
            .count();
        assert!(differ > 0 && differ == here.iter().filter(|a| !a.frames.is_empty()).count());
        assert!(here[0..]
            .iter()
            .any(|a| a.frames.iter().any(|f| f.contains('+'))));
        // ... the keys do not: an exact baseline from one build passes the other strictly.
        for opts in [
            BuildOptions::default(),
            BuildOptions {
                defaults: Defaults::exact(),
                ..BuildOptions::default()
            },
        ] {
            let base = Baseline::build(&here, &none, &opts).unwrap();
            assert!(base.symbolized);
            let base = Baseline::from_toml(&base.to_toml()).unwrap();
            let r = check_with(&base, &there, &none, &CheckOptions { strict: true }).unwrap();
            let mut out = Vec::new();
            r.render_text(&mut out).unwrap();
            let out = String::from_utf8(out).unwrap();
            assert!(!r.regressed(), "{name}: {out}");
            if base.defaults == Defaults::exact() {
                // Every group kept and matched, none new.
                assert!(!out.contains("new group"), "{name}: {out}");
                assert_eq!(r.trace_groups, base.groups.len(), "{name}: {out}");
                assert_eq!(r.groups_compared, base.groups.len(), "{name}: {out}");
            }
        }
        // Control: the other build's symbols applied to this build's addresses name the
        // wrong functions, and the check says so.
        let wrong = inputs_with(&f, &kallsyms_b, &|a| a);
        let base = Baseline::build(&here, &none, &BuildOptions::default()).unwrap();
        let r = check_with(&base, &wrong, &none, &CheckOptions { strict: true }).unwrap();
        assert!(r.regressed(), "{name}: wrong symbols must not match");
    }
}
