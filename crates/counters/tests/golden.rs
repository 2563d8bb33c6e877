//! Golden tests of the three text outputs. `BLESS=1 cargo test -p ioblame-counters --test
//! golden` rewrites the files under tests/golden/.

mod common;

use common::*;
use ioblame_attrib::{Act, ActId, Dir, Io, Role, Via};
use ioblame_counters::{output, CounterSet, IoContext};

fn golden(name: &str, actual: &str) {
    ioblame_testkit::assert_golden!(name, actual);
}

/// The tables of the doc's `counters_pipe` example: sync_supers writing the super block,
/// then dd (exited, so no comm) copying a file with O_DIRECT, plus an act that never gets a
/// count (it must not be printed).
fn doc_tables() -> (Vec<Role>, Vec<Act>) {
    let sdb = kdev(8, 16);
    let roles = vec![role(20, "sync_supers"), role(1708, "")];
    let acts = vec![
        act(0, 66, sdb, 0x0, Via::Buffer),
        act(1, 58, sdb, 0x71, Via::Direct),
        act(1, 59, sdb, 0x71, Via::Direct),
        act(1, 12, sdb, 0x71, Via::Read), // never counted
        act(1, 62, sdb, 0x2727, Via::Direct),
        act(1, 63, sdb, 0x2727, Via::Direct),
        act(1, 31, sdb, 0x2727, Via::Page),
        act(1, 65, sdb, 0x2727, Via::Inode),
    ];
    (roles, acts)
}

/// IOs giving the doc's counts: (act, direction, count), all 4K in the first eighth.
fn doc_ios() -> Vec<Io> {
    let mut v = Vec::new();
    for (act, dir, n) in [
        (0, Dir::W, 2),
        (1, Dir::R, 11),
        (2, Dir::R, 11),
        (4, Dir::W, 10),
        (5, Dir::W, 10),
        (6, Dir::W, 2),
        (7, Dir::W, 1),
    ] {
        for k in 0..n {
            let mut io = io_at(act, dir, 4096, 100 + k * 8);
            io.via = match dir {
                Dir::W => Via::Direct,
                _ => Via::Read,
            };
            v.push(io);
        }
    }
    v
}

fn fill(set: &mut CounterSet, roles: &[Role], acts: &[Act], ios: &[Io]) {
    for io in ios {
        let ctx = IoContext::for_act(acts, roles, io.act);
        set.record(io, &ctx);
    }
}

const DOC_COUNTERS: [&str; 2] = [
    "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
    "W offset 0 8192 16384 24576 32768 40960 49152 57344 0",
];

fn render(
    f: impl Fn(&mut Vec<u8>, &CounterSet, &[Act], &[Role]) -> std::io::Result<()>,
    set: &CounterSet,
    acts: &[Act],
    roles: &[Role],
) -> String {
    let mut out = Vec::new();
    f(&mut out, set, acts, roles).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn counters_pipe_matches_the_doc() {
    let (roles, acts) = doc_tables();
    let mut set = CounterSet::parse_args(&DOC_COUNTERS).unwrap();
    fill(&mut set, &roles, &acts, &doc_ios());
    let out = render(
        |w, s, a, r| output::counters_pipe(w, s, a, r),
        &set,
        &acts,
        &roles,
    );

    // The doc's sample, byte for byte, without its two-space indentation of the pid lines
    // and with gen=0x0 (traces have no inode generations).
    let doc = "  pid-20 (sync_supers) int=66 dev=0x800010 ino=0x0 gen=0x0
\t  0       0       0       0       0       0       0       0
\t  2       0       0       0       0       0       0       0
  pid-1708 int=58 dev=0x800010 ino=0x71 gen=0x3e0d99f2
\t 11       0       0       0       0       0       0       0
\t  0       0       0       0       0       0       0       0
  pid-1708 int=59 dev=0x800010 ino=0x71 gen=0x3e0d99f2
\t 11       0       0       0       0       0       0       0
\t  0       0       0       0       0       0       0       0
  pid-1708 int=62 dev=0x800010 ino=0x2727 gen=0xf4739822
\t  0       0       0       0       0       0       0       0
\t 10       0       0       0       0       0       0       0
  pid-1708 int=63 dev=0x800010 ino=0x2727 gen=0xf4739822
\t  0       0       0       0       0       0       0       0
\t 10       0       0       0       0       0       0       0
  pid-1708 int=31 dev=0x800010 ino=0x2727 gen=0xf4739822
\t  0       0       0       0       0       0       0       0
\t  2       0       0       0       0       0       0       0
  pid-1708 int=65 dev=0x800010 ino=0x2727 gen=0xf4739822
\t  0       0       0       0       0       0       0       0
\t  1       0       0       0       0       0       0       0
";
    let expected: String = doc
        .lines()
        .map(|l| {
            let l = l.strip_prefix("  ").unwrap_or(l);
            let l = match l.find(" gen=0x") {
                Some(p) => format!("{} gen=0x0", &l[..p]),
                None => l.to_string(),
            };
            l + "\n"
        })
        .collect();
    assert_eq!(out, expected);
    golden("counters_pipe.txt", &out);
}

/// A richer case: comms, a recorder act, a filter with quotes, counts of every width.
fn rich() -> (CounterSet, Vec<Role>, Vec<Act>) {
    let roles = vec![
        role(20, "sync_supers"),
        role(1708, "dd"),
        role(311, "jbd2/vda1-8"),
        role(4242, "ioblame-capture"),
    ];
    let vda = kdev(253, 0);
    let acts = vec![
        act(0, 66, vda, 0, Via::Buffer),
        act(1, 58, vda, 0x71, Via::Direct),
        act(2, 40, vda, 8, Via::Journal),
        Act {
            recorder: true,
            ..act(3, 70, kdev(7, 0), 0x2727, Via::Page)
        },
        act(1, 59, vda, 0x71, Via::Readahead),
    ];
    let mut set = CounterSet::parse_args(&[
        "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
        "W size 0 4096 8192 16384 32768 65536 131072 524288 0 if comm ~ \"dd*\" || via == journal",
        "RAW io_time 0 100 250 500 1000 2500 10000 50000 0",
    ])
    .unwrap();
    let mut ios = Vec::new();
    // dd: direct writes of 4K (1234 of them) and 1M, reads over the device.
    for k in 0..1234u32 {
        let mut io = io_at(1, Dir::W, 4096, k * 53 % 65536);
        io.io_time = 120;
        ios.push(io);
    }
    let mut big = io_at(1, Dir::W, 1 << 20, 60000);
    big.io_time = 60000;
    ios.push(big);
    for k in 0..8u32 {
        let mut io = io_at(1, Dir::R, 4096, k * 8192);
        io.io_time = 50 * u64::from(k);
        ios.push(io);
    }
    // readahead by dd.
    for k in 0..3u32 {
        ios.push(io_at(4, Dir::A, 131072, 40000 + k));
    }
    // journal commits: 12K writes, counted by the filter's via clause.
    for _ in 0..5 {
        let mut io = io_at(2, Dir::W, 12288, 30000);
        io.via = Via::Journal;
        io.io_time = 700;
        ios.push(io);
    }
    // The recorder: writes with comm ioblame-capture, kept only by io_time.
    for _ in 0..100_000 {
        let mut io = io_at(3, Dir::W, 65536, 100);
        io.io_time = 3000;
        ios.push(io);
    }
    // sync_supers (act 0) has no IO: it must not be printed.
    fill(&mut set, &roles, &acts, &ios);
    (set, roles, acts)
}

#[test]
fn counters_pipe_rich() {
    let (set, roles, acts) = rich();
    let out = render(
        |w, s, a, r| output::counters_pipe(w, s, a, r),
        &set,
        &acts,
        &roles,
    );
    golden("counters_pipe_rich.txt", &out);
}

#[test]
fn pretty() {
    let (set, roles, acts) = rich();
    let out = render(|w, s, a, r| output::pretty(w, s, a, r), &set, &acts, &roles);
    golden("pretty.txt", &out);
}

#[test]
fn json() {
    let (set, roles, acts) = rich();
    let out = render(|w, s, a, r| output::json(w, s, a, r), &set, &acts, &roles);
    for line in out.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["counters"][1]["filter"],
        "comm ~ \"dd*\" || via == journal"
    );
    assert_eq!(first["counters"][0]["filter"], serde_json::Value::Null);
    golden("counters.jsonl", &out);
}

#[test]
fn empty_outputs() {
    let (roles, acts) = doc_tables();
    let set = CounterSet::parse_args(&DOC_COUNTERS).unwrap();
    assert_eq!(
        render(
            |w, s, a, r| output::counters_pipe(w, s, a, r),
            &set,
            &acts,
            &roles
        ),
        ""
    );
    let json = render(|w, s, a, r| output::json(w, s, a, r), &set, &acts, &roles);
    assert_eq!(json.lines().count(), 1);
    golden(
        "pretty_empty.txt",
        &render(|w, s, a, r| output::pretty(w, s, a, r), &set, &acts, &roles),
    );
}

/// Roles are threads: the act header names the task's own pid (the tid, ioblame's
/// `pid-N`), the filter's `pid` is that same number and `tgid` the process.
#[test]
fn threads_are_named_by_their_own_pid() {
    let roles = vec![Role {
        pid: 1700,
        tid: 1708,
        comm: "dd".to_string(),
        generation: 0,
        cgroup: 0,
        lineage: false,
    }];
    let acts = vec![act(0, 58, kdev(8, 16), 0x71, Via::Direct)];
    let mut set = CounterSet::parse_args(&[
        "W size 0 1 2 3 4 5 6 7 0 if pid == 1708",
        "W size 0 1 2 3 4 5 6 7 0 if tgid == 1700 && pid != 1700",
        "W size 0 1 2 3 4 5 6 7 0 if pid == 1700",
    ])
    .unwrap();
    fill(&mut set, &roles, &acts, &[io_at(0, Dir::W, 4096, 0)]);
    let pipe = render(
        |w, s, a, r| output::counters_pipe(w, s, a, r),
        &set,
        &acts,
        &roles,
    );
    assert_eq!(
        pipe,
        "pid-1708 (dd) int=58 dev=0x800010 ino=0x71 gen=0x0\n\
         \t  0       0       0       0       0       0       0       1\n\
         \t  0       0       0       0       0       0       0       1\n\
         \t  0       0       0       0       0       0       0       0\n"
    );
    let pretty = render(|w, s, a, r| output::pretty(w, s, a, r), &set, &acts, &roles);
    assert!(
        pretty.contains("act 0: dd pid 1708 tgid 1700 intent #58"),
        "{pretty}"
    );
    let json = render(|w, s, a, r| output::json(w, s, a, r), &set, &acts, &roles);
    let v: serde_json::Value = serde_json::from_str(json.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        (v["pid"].as_u64(), v["tid"].as_u64()),
        (Some(1700), Some(1708))
    );
}

/// A comm with a line break or an escape sequence cannot break the line-based
/// counters_pipe nor reach the terminal: control characters are escaped (`\n`, `\x1b`), and
/// so is the backslash.
#[test]
fn comms_are_escaped_in_text_outputs() {
    let roles = vec![role(7, "ev\nil\u{1b}[31m\\x\u{85}")];
    let acts = vec![act(0, 58, kdev(8, 16), 0x71, Via::Direct)];
    let mut set = CounterSet::parse_args(&["W size 0 1 2 3 4 5 6 7 0"]).unwrap();
    fill(&mut set, &roles, &acts, &[io_at(0, Dir::W, 4096, 0)]);
    let pipe = render(
        |w, s, a, r| output::counters_pipe(w, s, a, r),
        &set,
        &acts,
        &roles,
    );
    assert_eq!(
        pipe.lines().next().unwrap(),
        r"pid-7 (ev\nil\x1b[31m\\x\u{85}) int=58 dev=0x800010 ino=0x71 gen=0x0"
    );
    assert_eq!(pipe.lines().count(), 2, "{pipe}");
    let pretty = render(|w, s, a, r| output::pretty(w, s, a, r), &set, &acts, &roles);
    assert!(
        pretty.contains(r"act 0: ev\nil\x1b[31m\\x\u{85} pid 7 "),
        "{pretty}"
    );
    for out in [&pipe, &pretty] {
        assert!(!out
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'));
    }
    // JSON keeps the raw value (serde escapes it).
    let json = render(|w, s, a, r| output::json(w, s, a, r), &set, &acts, &roles);
    let v: serde_json::Value = serde_json::from_str(json.lines().nth(1).unwrap()).unwrap();
    assert_eq!(v["comm"], "ev\nil\u{1b}[31m\\x\u{85}");
    assert_eq!(output::printable("plain"), "plain");
    assert!(matches!(
        output::printable("plain"),
        std::borrow::Cow::Borrowed(_)
    ));
}

/// As ioblame's counters_pipe ("all acts which have been used"), every act that had an IO
/// recorded is printed, even when no counter counted it; acts without IO are not.
#[test]
fn acts_used_without_counts_are_printed() {
    let (roles, acts) = doc_tables();
    let mut set = CounterSet::parse_args(&DOC_COUNTERS[..1]).unwrap();
    // Act 0 (sync_supers) writes: the read-offset counter does not count it.
    fill(&mut set, &roles, &acts, &[io_at(0, Dir::W, 4096, 0)]);
    assert!(set.is_used(ActId(0)) && !set.is_counted(ActId(0)));
    assert!(!set.is_used(ActId(1)));
    let pipe = render(
        |w, s, a, r| output::counters_pipe(w, s, a, r),
        &set,
        &acts,
        &roles,
    );
    assert_eq!(
        pipe,
        "pid-20 (sync_supers) int=66 dev=0x800010 ino=0x0 gen=0x0\n\
         \t  0       0       0       0       0       0       0       0\n"
    );
    let json = render(|w, s, a, r| output::json(w, s, a, r), &set, &acts, &roles);
    assert_eq!(json.lines().count(), 2, "{json}");
    let pretty = render(|w, s, a, r| output::pretty(w, s, a, r), &set, &acts, &roles);
    assert!(pretty.contains("Totals over 1 acts:"), "{pretty}");
    // Merging keeps the acts used.
    let mut other = CounterSet::parse_args(&DOC_COUNTERS[..1]).unwrap();
    assert!(other.merge(&set));
    assert!(other.is_used(ActId(0)));
    // An IO on a device left out does not use its act.
    let mut sel = CounterSet::parse_args(&DOC_COUNTERS[..1])
        .unwrap()
        .with_devs(ioblame_counters::DevSelection::parse("!8:16", &[]).unwrap());
    fill(&mut sel, &roles, &acts, &[io_at(0, Dir::W, 4096, 0)]);
    assert!(!sel.is_used(ActId(0)));
}
