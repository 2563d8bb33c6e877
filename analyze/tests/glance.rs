//! What a person sees first: intent names in `acts` (text and JSON), `--top`, and colour
//! only on a terminal without `NO_COLOR` (a terminal is made with `script`).

use std::path::Path;
use std::process::Command;

fn trace() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/ext4-two-writers/trace")
        .display()
        .to_string()
}

fn ioblame(args: &[&str], env: &[(&str, &str)]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_ioblame"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("runs ioblame");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn acts_name_their_intents_and_take_top() {
    let t = trace();
    let json = ioblame(&["acts", "--json", "--top", "2", &t], &[]);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{json}");
    assert_eq!(
        rows[0]["intent_name"],
        "write(2) › ext4_buffered_write_iter › __folio_mark_dirty [wb:sync]"
    );
    assert!(
        rows[0]["frames"].as_array().unwrap().len() > 5,
        "the full stack stays"
    );
    let text = ioblame(&["acts", "--top", "3", &t], &[]);
    assert_eq!(text.lines().count(), 1 + 3, "{text}");
    assert!(
        text.lines().next().unwrap().ends_with("INTENT NAME"),
        "{text}"
    );
    assert!(
        text.contains("writerA") && text.contains("› __folio_mark_dirty [wb:sync]"),
        "{text}"
    );
    // The whole table: the long kworker comm widens its column, every row stays aligned.
    let all = ioblame(&["acts", &t], &[]);
    let head = all.lines().next().unwrap();
    let col = head.find(" FILE ").unwrap() + 1;
    for l in all.lines().skip(1) {
        assert!(
            l.get(col..)
                .is_some_and(|f| f.starts_with('/') || f.starts_with("- ")),
            "misaligned:\n{head}\n{l}"
        );
    }
    assert!(all.contains("kworker/u8:1-flush-7:0"), "{all}");

    let summary = ioblame(&["report", &t, "--top", "2", "-o", &tmp("glance-top")], &[]);
    let listed = summary
        .lines()
        .filter(|l| l.trim_start().starts_with("intent #"))
        .count();
    assert_eq!(listed, 2 + 2, "two acts in each list:\n{summary}");
    // Empty lists are refused, not printed.
    for cmd in [
        vec!["acts", "--top", "0", &t],
        vec!["report", &t, "--top", "0", "-o", "/nonexistent"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ioblame"))
            .args(&cmd)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--top"),
            "{cmd:?}"
        );
    }
}

fn tmp(name: &str) -> String {
    std::env::temp_dir()
        .join(format!("ioblame-{name}-{}", std::process::id()))
        .display()
        .to_string()
}

/// Runs `ioblame ARGS` on a pseudo-terminal (`script`), returns what it printed.
fn on_terminal(args: &str, env: &[(&str, &str)]) -> Option<String> {
    let o = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{} {args}", env!("CARGO_BIN_EXE_ioblame")))
        .arg("/dev/null")
        .envs(env.iter().copied())
        .env_remove("CLICOLOR_FORCE")
        .env_remove("NO_COLOR")
        .output()
        .ok()?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let t = trace();
    let piped = ioblame(&["acts", &t], &[]);
    assert!(!piped.contains('\x1b'), "no colour into a pipe");
    let args = format!("acts {t} --top 2");
    let Some(tty) = ioblame_testkit::need::some(on_terminal(&args, &[]), "script (util-linux)")
    else {
        return;
    };
    assert!(tty.contains("\x1b[1m"), "colour on a terminal: {tty:?}");
    let report = on_terminal(&format!("report {t} -o {}", tmp("glance-tty")), &[]).unwrap();
    assert!(report.contains("\x1b[1mioblame report:"), "{report:?}");
    let no_color = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{} {args}", env!("CARGO_BIN_EXE_ioblame")))
        .arg("/dev/null")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .unwrap();
    let no_color = String::from_utf8_lossy(&no_color.stdout);
    assert!(no_color.contains("writerA"), "{no_color}");
    assert!(!no_color.contains('\x1b'), "NO_COLOR: {no_color:?}");
}
