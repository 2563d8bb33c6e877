//! Counter spec parsing (good and bad specs, exact messages) and slot boundary semantics.

mod common;

use std::io::Write as _;

use ioblame_attrib::{ActId, Dir};
use ioblame_counters::{
    CounterSet, CounterSpec, CountersError, Field, Location, SpecError, DEFAULT_COUNTERS,
    MAX_COUNTERS,
};

/// The message for `spec` given as the second counter.
fn err(spec: &str) -> String {
    match CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0", spec]) {
        Ok(_) => panic!("accepted: {spec}"),
        Err(e) => e.to_string(),
    }
}

/// `W size 0 1 2 3 4 5 6 7 0 if FILTER`: the filter starts at column 29.
fn ferr(filter: &str) -> String {
    err(&format!("W size 0 1 2 3 4 5 6 7 0 if {filter}"))
}

fn one(spec: &str) -> CounterSpec {
    CounterSpec::parse(spec, Location::Counter(1)).unwrap()
}

#[test]
fn good_specs() {
    let s = one("RA offset 0 8192 16384 24576 32768 40960 49152 57344 0");
    assert!(s.dirs.contains(Dir::R) && s.dirs.contains(Dir::A) && !s.dirs.contains(Dir::W));
    assert_eq!(s.field, Field::Offset);
    assert_eq!(
        s.bounds,
        [0, 8192, 16384, 24576, 32768, 40960, 49152, 57344, 0]
    );
    assert!(s.filter.is_none());

    // Letters in any order, tabs and extra blanks, hex numbers.
    let s = one("\tWR   wait_time 0x0 0x10 0x20 32 33 34 35 36 0x100  ");
    assert_eq!(s.dirs.to_string(), "RW");
    assert_eq!(s.field, Field::WaitTime);
    assert_eq!(s.bounds, [0, 16, 32, 32, 33, 34, 35, 36, 256]);

    for (name, f) in [
        ("size", Field::Size),
        ("io_time", Field::IoTime),
        ("seek_dist", Field::SeekDist),
    ] {
        assert_eq!(one(&format!("W {name} 0 1 2 3 4 5 6 7 8")).field, f);
    }

    // Equal boundaries are allowed; B8 = 0 after large boundaries too.
    let s = one("A size 5 5 5 5 5 5 5 5 5");
    assert_eq!(s.bounds, [5; 9]);

    let s = one("RAW io_time 10000 25000 50000 100000 500000 1000000 2500000 5000000 0 if offset >= 16384 && size < 131072 && io_time >= 10000");
    assert_eq!(s.dirs.to_string(), "RAW");
    assert_eq!(
        s.filter.as_ref().unwrap().text(),
        "offset >= 16384 && size < 131072 && io_time >= 10000"
    );
    assert_eq!(
        s.to_string(),
        "RAW io_time 10000 25000 50000 100000 500000 1000000 2500000 5000000 0 if offset >= 16384 && size < 131072 && io_time >= 10000"
    );
    assert_eq!(
        s.spec_text(),
        "RAW io_time 10000 25000 50000 100000 500000 1000000 2500000 5000000 0"
    );

    // `if` directly followed by a parenthesis.
    let s = one("W size 0 1 2 3 4 5 6 7 0 if(size < 3)");
    assert_eq!(s.filter.unwrap().text(), "(size < 3)");
}

#[test]
fn bad_dir_and_field() {
    assert_eq!(err(""), "counter 2, column 1: empty counter spec");
    assert_eq!(err("   "), "counter 2, column 4: empty counter spec");
    assert_eq!(
        err("RX size 0 1 2 3 4 5 6 7 0"),
        "counter 2, column 2: unknown direction 'X' in 'RX' (DIR is a combination of R, A and W)"
    );
    assert_eq!(
        err("ra size 0 1 2 3 4 5 6 7 0"),
        "counter 2, column 1: unknown direction 'r' in 'ra' (DIR is a combination of R, A and W)"
    );
    assert_eq!(
        err("RAR size 0 1 2 3 4 5 6 7 0"),
        "counter 2, column 3: direction 'R' given twice in 'RAR'"
    );
    assert_eq!(
        err("RA"),
        "counter 2, column 3: expected a field after 'RA'"
    );
    assert_eq!(
        err("RA offst 0 1 2 3 4 5 6 7 0"),
        "counter 2, column 4: unknown field 'offst' (expected offset, size, wait_time, io_time or seek_dist)"
    );
    // Forgetting DIR: the field name is read as directions.
    assert_eq!(
        err("size 0 1 2 3 4 5 6 7 0"),
        "counter 2, column 1: unknown direction 's' in 'size' (DIR is a combination of R, A and W)"
    );
}

#[test]
fn bad_bounds() {
    assert_eq!(
        err("RA offset"),
        "counter 2, column 10: expected boundary B0 (a number) after 'offset', found the end"
    );
    assert_eq!(
        err("RA offset 0 8192"),
        "counter 2, column 17: expected boundary B2 (a number) after '8192', found the end"
    );
    assert_eq!(
        err("RA offset 0 8192 abc 3 4 5 6 7 0"),
        "counter 2, column 18: expected boundary B2 (a number) after '8192', found 'abc'"
    );
    assert_eq!(
        err("RA offset 0 8192 12k 3 4 5 6 7 0"),
        "counter 2, column 18: expected boundary B2 (a number) after '8192', found '12k'"
    );
    assert_eq!(
        err("RA offset 0 -1 2 3 4 5 6 7 0"),
        "counter 2, column 13: expected boundary B1 (a number) after '0', found '-'"
    );
    assert_eq!(
        err("W size 0 10 5 20 30 40 50 60 0"),
        "counter 2, column 13: boundary B2 (5) is smaller than B1 (10); boundaries must not decrease"
    );
    assert_eq!(
        err("W size 0 1 2 3 4 5 6 8 7"),
        "counter 2, column 24: boundary B8 (7) is smaller than B7 (8); boundaries must not decrease"
    );
    assert_eq!(
        err("W size 0 1 2 3 4 5 6 7 99999999999999999999"),
        "counter 2, column 24: number '99999999999999999999' is too large"
    );
    assert_eq!(
        err("W size 0 1 2 3 4 5 6 7 0 9"),
        "counter 2, column 26: expected 'if' or the end of the counter after B8, found '9'"
    );
    assert_eq!(
        err("W size 0 1 2 3 4 5 6 7 0 iff size < 3"),
        "counter 2, column 26: expected 'if' or the end of the counter after B8, found 'iff'"
    );
}

#[test]
fn bad_filters() {
    assert_eq!(
        ferr(""),
        "counter 2, column 29: expected a filter after 'if'"
    );
    assert_eq!(
        ferr("size <"),
        "counter 2, column 35: expected a number after 'size <'"
    );
    assert_eq!(
        ferr("size < x"),
        "counter 2, column 36: expected a number after 'size <'"
    );
    assert_eq!(
        ferr("io_time >= 0x"),
        "counter 2, column 40: expected a number after 'io_time >='"
    );
    assert_eq!(
        ferr("sz < 3"),
        "counter 2, column 29: unknown filter field 'sz' (expected offset, size, wait_time, io_time, seek_dist, pid, tgid, comm, dev, ino, via, reason or cgroup)"
    );
    assert_eq!(
        ferr("size 3"),
        "counter 2, column 34: expected a comparison operator (==, !=, <, <=, >, >=) after 'size', found '3'"
    );
    assert_eq!(
        ferr("size = 3"),
        "counter 2, column 34: expected a comparison operator (==, !=, <, <=, >, >=) after 'size', found '='"
    );
    assert_eq!(
        ferr("comm"),
        "counter 2, column 33: expected a comparison operator (==, != or ~) after 'comm', found the end"
    );
    assert_eq!(
        ferr("size ~ 3"),
        "counter 2, column 34: operator '~' cannot be used with size ('~' is only for comm and cgroup)"
    );
    assert_eq!(
        ferr("comm < dd"),
        "counter 2, column 34: operator '<' cannot be used with comm (use ==, != or ~)"
    );
    assert_eq!(
        ferr("via > page"),
        "counter 2, column 33: operator '>' cannot be used with via (use == or !=)"
    );
    assert_eq!(
        ferr("comm =="),
        "counter 2, column 36: expected a string after 'comm =='"
    );
    assert_eq!(
        ferr("comm == \"dd"),
        "counter 2, column 37: unterminated string (missing closing \")"
    );
    assert_eq!(
        ferr("comm ~ \"ab[c\""),
        "counter 2, column 39: unterminated '[' in glob pattern"
    );
    assert_eq!(
        ferr("(size < 3"),
        "counter 2, column 38: expected ')' to close the '(' at column 29, found the end"
    );
    assert_eq!(ferr("size < 3 )"), "counter 2, column 38: unmatched ')'");
    assert_eq!(
        ferr("size < 3 & size > 1"),
        "counter 2, column 38: expected '&&', '||' or the end of the filter, found '&' (a single '&' or '|' is not an operator)"
    );
    assert_eq!(
        ferr("size < 3 size > 1"),
        "counter 2, column 38: expected '&&', '||' or the end of the filter, found 'size'"
    );
    assert_eq!(
        ferr("size < 3 &&"),
        "counter 2, column 40: expected a condition after '&&', found the end"
    );
    assert_eq!(
        ferr("size < 3 || && size > 1"),
        "counter 2, column 41: expected a condition after '||', found '&'"
    );
    assert_eq!(
        ferr("!"),
        "counter 2, column 30: expected a condition after '!', found the end"
    );
    assert_eq!(
        ferr("()"),
        "counter 2, column 30: expected a condition after '(', found ')'"
    );
    assert_eq!(
        ferr("via == foo"),
        "counter 2, column 36: unknown via 'foo' (expected page, buffer, inode, journal, direct, read, readahead, unknown or issuer)"
    );
    assert_eq!(
        ferr("reason == nope"),
        "counter 2, column 39: unknown reason 'nope' (expected background, vmscan, sync, periodic, laptop_timer, fs_free_space, forker_thread, foreign_flush, free_more_mem, other, none or a number)"
    );
    assert_eq!(
        ferr("dev == 8:x"),
        "counter 2, column 36: expected a device (MAJ:MIN, a number or a name) after 'dev ==', found '8:x'"
    );
    // A name is taken (resolved later against the trace); a string that is no name is not.
    assert!(CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0 if dev == \"sda\""]).is_ok());
    assert_eq!(
        ferr("dev == \"s da\""),
        "counter 2, column 36: expected a device (MAJ:MIN, a number or a name) after 'dev ==', found 's da'"
    );
    assert_eq!(
        ferr("dev == 12x"),
        "counter 2, column 36: expected a device (MAJ:MIN, a number or a name) after 'dev ==', found '12x'"
    );
    assert_eq!(
        ferr("pid == 99999999999999999999"),
        "counter 2, column 36: number '99999999999999999999' is too large"
    );
    let deep = format!("{}size < 3{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(
        ferr(&deep),
        "counter 2, column 93: filter nested deeper than 64 levels"
    );
    let nots = format!("{}size < 3", "!".repeat(100));
    assert_eq!(
        ferr(&nots),
        "counter 2, column 93: filter nested deeper than 64 levels"
    );
}

#[test]
fn error_is_typed() {
    let e = CounterSpec::parse("W size 0 1 2 3 4 5 6 7 0 if size < x", Location::Counter(7))
        .unwrap_err();
    assert_eq!(
        e,
        SpecError {
            location: Location::Counter(7),
            column: 36,
            message: "expected a number after 'size <'".to_string()
        }
    );
    // Columns count characters, not bytes.
    let e = CounterSpec::parse(
        "W size 0 1 2 3 4 5 6 7 0 if comm == 'é' && size < y",
        Location::Counter(1),
    )
    .unwrap_err();
    assert_eq!(e.column, 51);
}

#[test]
fn args_and_defaults() {
    let empty: [&str; 0] = [];
    let set = CounterSet::parse_args(&empty).unwrap();
    assert_eq!(set.len(), DEFAULT_COUNTERS.len());
    let set = CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0".to_string()]).unwrap();
    assert_eq!(set.len(), 1);
    let many = vec!["R size 0 1 2 3 4 5 6 7 0"; MAX_COUNTERS + 1];
    assert_eq!(
        CounterSet::parse_args(&many).unwrap_err().to_string(),
        "65 counters given, at most 64 are allowed"
    );
    // Counter numbers are 1-based over all counters.
    let e = CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0", "R size 0 1 2 3 4 5 6 7 0", "Q"])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "counter 3, column 1: unknown direction 'Q' in 'Q' (DIR is a combination of R, A and W)"
    );
}

#[test]
fn files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counters.txt");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "# read offsets, then write sizes of dd\n").unwrap();
    writeln!(
        f,
        "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0   # offsets"
    )
    .unwrap();
    writeln!(f, "   ").unwrap();
    writeln!(
        f,
        "W size 0 4096 8192 16384 32768 65536 131072 524288 0 if comm == \"a#b\" # x\r"
    )
    .unwrap();
    drop(f);
    let set = CounterSet::parse_file(&path).unwrap();
    assert_eq!(set.len(), 2);
    assert_eq!(
        set.specs()[1].filter.as_ref().unwrap().text(),
        "comm == \"a#b\""
    );

    std::fs::write(
        &path,
        "# c\nR size 0 1 2 3 4 5 6 7 0\n\nW size 0 1 2 3 4 5 6 7 0 if size <= \n",
    )
    .unwrap();
    let e = CounterSet::parse_file(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:4, column 37: expected a number after 'size <='",
            path.display()
        )
    );
    match e {
        CountersError::Spec(SpecError {
            location: Location::File { line, .. },
            column,
            ..
        }) => {
            assert_eq!((line, column), (4, 37));
        }
        other => panic!("unexpected {other:?}"),
    }

    std::fs::write(&path, "# nothing\n\n").unwrap();
    assert_eq!(
        CounterSet::parse_file(&path).unwrap_err().to_string(),
        format!("{}: no counter given", path.display())
    );

    let missing = dir.path().join("missing");
    let e = CounterSet::parse_file(&missing).unwrap_err();
    assert!(matches!(e, CountersError::Io { .. }), "{e:?}");
    assert!(e
        .to_string()
        .starts_with(&format!("{}: ", missing.display())));
}

#[test]
fn slot_boundaries() {
    let s = one("R size 100 200 300 400 500 600 700 800 900");
    assert_eq!(s.slot(0), None);
    assert_eq!(s.slot(99), None, "below B0");
    assert_eq!(s.slot(100), Some(0), "v == B0");
    assert_eq!(s.slot(199), Some(0));
    assert_eq!(s.slot(200), Some(1), "v == B1 goes up");
    assert_eq!(s.slot(450), Some(3));
    assert_eq!(s.slot(800), Some(7));
    assert_eq!(s.slot(899), Some(7));
    assert_eq!(s.slot(900), None, "v == B8 is out");
    assert_eq!(s.slot(u64::MAX), None);

    // B8 = 0: no upper limit.
    let s = one("R size 100 200 300 400 500 600 700 800 0");
    assert_eq!(s.slot(99), None);
    assert_eq!(s.slot(800), Some(7));
    assert_eq!(s.slot(u64::MAX), Some(7));

    // Equal boundaries: empty slots are skipped.
    let s = one("R size 0 10 10 10 20 20 30 30 40");
    assert_eq!(s.slot(9), Some(0));
    assert_eq!(s.slot(10), Some(3));
    assert_eq!(s.slot(19), Some(3));
    assert_eq!(s.slot(20), Some(5));
    assert_eq!(s.slot(30), Some(7));
    assert_eq!(s.slot(40), None);

    // All boundaries 0: everything in slot 7.
    let s = one("R size 0 0 0 0 0 0 0 0 0");
    assert_eq!(s.slot(0), Some(7));
    assert_eq!(s.slot(12345), Some(7));

    assert_eq!(s.slot_range(7), "[0,inf)");
    let s = one("R size 100 200 300 400 500 600 700 800 900");
    assert_eq!(s.slot_range(0), "[100,200)");
    assert_eq!(s.slot_range(7), "[800,900)");
}

#[test]
fn record_by_direction_and_field() {
    use common::*;
    let mut set = CounterSet::parse_args(&[
        "R size 0 4096 8192 16384 32768 65536 131072 262144 0",
        "A size 0 4096 8192 16384 32768 65536 131072 262144 0",
        "W offset 0 8192 16384 24576 32768 40960 49152 57344 0",
        "RAW wait_time 10 20 30 40 50 60 70 80 90",
        "RW io_time 0 1 2 3 4 5 6 7 0",
        "W seek_dist 0 8192 16384 24576 32768 40960 49152 57344 0",
    ])
    .unwrap();
    let ctx = ioblame_counters::IoContext::new(1, "x");
    set.record(&io_at(0, Dir::R, 4096, 0), &ctx);
    set.record(&io_at(0, Dir::R, 4095, 0), &ctx);
    set.record(&io_at(0, Dir::A, 131072, 0), &ctx);
    let mut w = io_at(2, Dir::W, 512, 8192);
    w.wait_time = 95;
    w.io_time = 3;
    w.seek_dist = 65535;
    set.record(&w, &ctx);
    let mut w2 = io_at(2, Dir::W, 512, 8191);
    w2.wait_time = 10;
    set.record(&w2, &ctx);

    assert_eq!(set.histogram(ActId(0), 0), Some(&[1, 1, 0, 0, 0, 0, 0, 0]));
    assert_eq!(set.histogram(ActId(0), 1), Some(&[0, 0, 0, 0, 0, 0, 1, 0]));
    assert_eq!(set.histogram(ActId(0), 2), Some(&[0; 8]));
    assert_eq!(
        set.histogram(ActId(0), 3),
        Some(&[0; 8]),
        "wait_time 0 is below B0"
    );
    assert_eq!(
        set.histogram(ActId(0), 4),
        Some(&[2, 0, 0, 0, 0, 0, 0, 0]),
        "R counted, A not"
    );
    assert_eq!(set.histogram(ActId(1), 0), Some(&[0; 8]));
    assert!(!set.is_counted(ActId(1)));
    assert_eq!(set.histogram(ActId(2), 2), Some(&[1, 1, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        set.histogram(ActId(2), 3),
        Some(&[1, 0, 0, 0, 0, 0, 0, 0]),
        "95 >= B8 is out"
    );
    assert_eq!(set.histogram(ActId(2), 4), Some(&[1, 0, 0, 1, 0, 0, 0, 0]));
    assert_eq!(set.histogram(ActId(2), 5), Some(&[1, 0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(set.histogram(ActId(2), 6), None);
    assert_eq!(set.histogram(ActId(99), 0), Some(&[0; 8]));

    // Merging adds.
    let mut other = set.clone();
    assert!(other.merge(&set));
    assert_eq!(
        other.histogram(ActId(2), 2),
        Some(&[2, 2, 0, 0, 0, 0, 0, 0])
    );
    assert!(!other.merge(&CounterSet::default_set()));
}

/// Mangled specs never panic, and every error column lies within the text (or one past it).
#[test]
fn mangled_specs_never_panic() {
    let seeds = [
        "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
        "W size 0 4096 8192 16384 32768 65536 131072 524288 0 if (comm ~ \"dd*\" || via == journal) && !(size < 0x1000)",
        "RAW io_time 0 1 2 3 4 5 6 7 0 if dev == \"8:16\" && reason != none && pid >= 3 && ino <= 9 && comm == 'a[b'",
    ];
    let alphabet: Vec<char> = "RAW 0x19()&|!=<>~\"'[]*?:if-é\t".chars().collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let seed = seeds[(next() % seeds.len() as u64) as usize];
        let mut chars: Vec<char> = seed.chars().collect();
        for _ in 0..(next() % 4 + 1) {
            let pos = (next() % (chars.len() as u64 + 1)) as usize;
            match next() % 3 {
                0 if pos < chars.len() => {
                    chars.remove(pos);
                }
                1 if pos < chars.len() => {
                    chars[pos] = alphabet[(next() % alphabet.len() as u64) as usize]
                }
                _ => chars.insert(pos, alphabet[(next() % alphabet.len() as u64) as usize]),
            }
        }
        let text: String = chars.into_iter().collect();
        if let Err(e) = CounterSpec::parse(&text, Location::Counter(1)) {
            let len = text.chars().count();
            assert!((1..=len + 1).contains(&e.column), "{text:?}: {e}");
            assert!(
                !e.message.is_empty() && !e.message.contains('\n'),
                "{text:?}: {e}"
            );
        }
    }
}
