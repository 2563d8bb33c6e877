//! Filters over every field, precedence and parentheses.

mod common;

use common::*;
use ioblame_attrib::{ActId, Dir, Io, Via};
use ioblame_counters::{CounterSet, Filter, IoContext};

fn eval(filter: &str, io: &Io, ctx: &IoContext<'_>) -> bool {
    Filter::parse(filter)
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
        .matches(io, ctx)
}

/// An IO with every filterable field set to something distinct.
fn sample() -> Io {
    let mut io = io_at(0, Dir::W, 131072, 20000);
    io.dev = kdev(8, 16);
    io.wait_time = 1500;
    io.io_time = 12000;
    io.seek_dist = 300;
    io.ino = Some(0x71);
    io.via = Via::Page;
    io.reason = common::reason(3);
    io
}

const CTX: IoContext<'static> = IoContext {
    pid: 1708,
    tgid: 1700,
    comm: "dd",
    cgroup: 0,
};

#[track_caller]
fn check(filter: &str, expect: bool) {
    assert_eq!(eval(filter, &sample(), &CTX), expect, "{filter}");
}

#[test]
fn numeric_fields() {
    for (f, yes, no) in [
        ("offset >= 16384", true, false),
        ("offset == 20000", true, false),
        ("size < 131072", false, true),
        ("size <= 131072", true, false),
        ("size == 0x20000", true, false),
        ("wait_time > 1000", true, false),
        ("wait_time > 1500", false, true),
        ("io_time >= 10000", true, false),
        ("io_time != 12000", false, true),
        ("seek_dist < 301", true, false),
        ("seek_dist > 300", false, true),
        ("pid == 1708", true, false),
        ("pid != 1708", false, true),
        ("pid == 1700", false, true),
        ("tgid == 1700", true, false),
        ("tgid > 1700", false, true),
        ("ino == 0x71", true, false),
        ("ino == 113", true, false),
        ("ino < 100", false, true),
    ] {
        let _ = no;
        check(f, yes);
        check(&format!("!({f})"), !yes);
    }
    // Unknown inode compares as 0.
    let mut io = sample();
    io.ino = None;
    assert!(eval("ino == 0", &io, &CTX));
    assert!(!eval("ino == 0x71", &io, &CTX));
}

#[test]
fn comm() {
    check("comm == \"dd\"", true);
    check("comm == dd", true);
    check("comm == 'dd'", true);
    check("comm == \"d\"", false);
    check("comm != \"dd\"", false);
    check("comm != \"cp\"", true);
    check("comm ~ \"d*\"", true);
    check("comm ~ \"dd*\"", true);
    check("comm ~ \"*d\"", true);
    check("comm ~ \"c*\"", false);
    check("comm ~ \"?d\"", true);
    check("comm ~ \"[a-c]d\"", false);
    check("comm ~ \"[!a-c]d\"", true);
    check("comm ~ d?", true);
    // `==` is exact: no glob.
    check("comm == \"d*\"", false);
    let kw = IoContext::new(42, "kworker/u8:3");
    let io = sample();
    assert!(eval("comm ~ \"kworker/*\"", &io, &kw));
    assert!(eval("comm == \"kworker/u8:3\"", &io, &kw));
    assert!(!eval("comm ~ \"kworker/[0-9]*\"", &io, &kw));
    // Unknown comm is empty.
    assert!(eval("comm == \"\"", &io, &IoContext::new(1, "")));
    assert!(eval("comm ~ \"*\"", &io, &IoContext::new(1, "")));
}

#[test]
fn dev() {
    check("dev == \"8:16\"", true);
    check("dev == 8:16", true);
    check("dev == '8:0'", false);
    check("dev != 8:0", true);
    check("dev != 8:16", false);
    check("dev == 0x800010", true);
    check("dev == 8388624", true);
    check("dev == 0x800000", false);
    check("dev == 259:1", false);
    let mut io = sample();
    io.dev = kdev(259, 1);
    assert!(eval("dev == 259:1", &io, &CTX));
}

#[test]
fn via() {
    check("via == page", true);
    check("via == \"page\"", true);
    check("via != page", false);
    check("via == direct", false);
    let mut io = sample();
    for v in Via::ALL {
        let name = v.name();
        io.via = v;
        assert!(eval(&format!("via == {name}"), &io, &CTX), "{name}");
        assert!(!eval(&format!("via != {name}"), &io, &CTX), "{name}");
        let other = if name == "page" { "buffer" } else { "page" };
        assert!(!eval(&format!("via == {other}"), &io, &CTX), "{name}");
    }
}

#[test]
fn reason() {
    check("reason == periodic", true);
    check("reason == 3", true);
    check("reason == sync", false);
    check("reason != sync", true);
    check("reason == none", false);
    let mut io = sample();
    io.reason = None;
    assert!(eval("reason == none", &io, &CTX));
    assert!(!eval("reason == background", &io, &CTX));
    assert!(eval("reason != background", &io, &CTX));
    io.reason = common::reason(0);
    assert!(eval("reason == background", &io, &CTX));
    assert!(eval("reason == 0", &io, &CTX));
    io.reason = common::reason(1);
    assert!(eval("reason == vmscan", &io, &CTX));
    io.reason = common::reason(2);
    assert!(eval("reason == 'sync'", &io, &CTX));
    io.reason = common::reason(7);
    assert!(eval("reason == foreign_flush", &io, &CTX));
    assert!(!eval("reason == other", &io, &CTX));
    // RHEL 8's reason, which the decoder numbers 8 (docs/attribution.md).
    io.reason = common::reason(8);
    assert!(eval("reason == free_more_mem", &io, &CTX));
    assert!(!eval("reason == other", &io, &CTX));
    io.reason = common::reason(9);
    assert!(eval("reason == other", &io, &CTX));
    io.reason = common::reason(42);
    assert!(eval("reason == other", &io, &CTX));
    assert!(eval("reason == 42", &io, &CTX));
    assert!(!eval("reason == 8", &io, &CTX));
}

#[test]
fn precedence_and_parentheses() {
    // && binds tighter than ||: true || (false && false) is true.
    check("size == 131072 || size == 1 && pid == 1", true);
    // (true || false) && false is false.
    check("(size == 131072 || size == 1) && pid == 1", false);
    // false && false || true is true.
    check("size == 1 && pid == 1 || comm == dd", true);
    check("size == 1 && (pid == 1 || comm == dd)", false);
    // ! applies to the next condition only.
    check("!size == 1 && pid == 1708", true);
    check("!(size == 131072 && pid == 1)", true);
    check("!size == 131072 || pid == 1", false);
    check("!!size == 131072", true);
    check("! ( ! (size == 131072) )", true);
    // Chains.
    check("size == 1 || size == 2 || size == 131072", true);
    check("size > 1 && size > 2 && size > 131072", false);
    check("((((size == 131072))))", true);
    // No blanks needed.
    check("size==131072&&pid==1708&&comm~\"d*\"", true);
    check("(size<1)||(pid!=1)", true);
}

#[test]
fn the_doc_example() {
    // "IO in the latter half of the device, smaller than 128k and taking 10ms or more."
    let f = "offset >= 16384 && size < 131072 && io_time >= 10000";
    let mut io = sample();
    assert!(!eval(f, &io, &CTX));
    io.size = 65536;
    assert!(eval(f, &io, &CTX));
    io.io_time = 9999;
    assert!(!eval(f, &io, &CTX));
}

#[test]
fn filtered_counter() {
    let mut set = CounterSet::parse_args(&[
        "RAW io_time 10000 25000 50000 100000 500000 1000000 2500000 5000000 0 if offset >= 16384 && size < 131072",
        "W size 0 4096 8192 16384 32768 65536 131072 524288 0 if comm ~ \"dd*\"",
    ])
    .unwrap();
    let mut io = sample();
    set.record(&io, &CTX); // size 131072: counter 0 filters it out.
    io.size = 4096;
    set.record(&io, &CTX);
    set.record(&io, &IoContext::new(1, "cp"));
    // io_time 12000 is in slot 0; the 128K IO is filtered out, the comm does not matter.
    assert_eq!(set.histogram(ActId(0), 0), Some(&[2, 0, 0, 0, 0, 0, 0, 0]));
    // Sizes 128K and 4K by dd; cp's 4K is filtered out.
    assert_eq!(set.histogram(ActId(0), 1), Some(&[0, 1, 0, 0, 0, 0, 1, 0]));
}

#[test]
fn standalone_parse_errors() {
    assert_eq!(
        Filter::parse("").unwrap_err().to_string(),
        "filter, column 1: empty filter"
    );
    assert_eq!(
        Filter::parse("size <").unwrap_err().to_string(),
        "filter, column 7: expected a number after 'size <'"
    );
    assert_eq!(
        Filter::parse("&& size < 1").unwrap_err().to_string(),
        "filter, column 1: expected a condition, found '&'"
    );
}

#[test]
fn cgroup_paths_resolve_against_the_trace_table() {
    let table = [
        (1u64, "/"),
        (5, "/system.slice"),
        (6, "/system.slice/nginx.service"),
        (7, "/user.slice"),
    ];
    let ctx = |cgroup| IoContext { cgroup, ..CTX };
    for (text, yes, no) in [
        ("cgroup == /system.slice/nginx.service", 6, 5),
        ("cgroup == '/system.slice'", 5, 6),
        ("cgroup ~ '/system.slice/*'", 6, 5),
        ("cgroup ~ '/system.slice*'", 5, 7),
        ("cgroup != /user.slice", 1, 7),
        ("!(cgroup == /) && comm == dd", 7, 1),
    ] {
        let mut f = Filter::parse(text).unwrap();
        assert!(f.uses_cgroup());
        // Unresolved, a cgroup predicate matches nothing.
        assert!(
            !f.matches(&sample(), &ctx(yes)) || text.contains("!"),
            "{text}"
        );
        f.resolve_cgroups(&table);
        assert!(f.matches(&sample(), &ctx(yes)), "{text} on {yes}");
        assert!(!f.matches(&sample(), &ctx(no)), "{text} on {no}");
    }
    assert!(!Filter::parse("comm == dd").unwrap().uses_cgroup());
    let e = Filter::parse("cgroup > 3").unwrap_err().to_string();
    assert!(e.contains("cannot be used with cgroup"), "{e}");
    let mut set = CounterSet::parse_args(&["W size 0 1 2 3 4 5 6 7 0 if cgroup == /a"]).unwrap();
    let e = set.resolve_cgroups(&[]).unwrap_err().to_string();
    assert!(e.contains("counter 1") && e.contains("no cgroups"), "{e}");
    set.resolve_cgroups(&table).unwrap();
}
