//! Device selection: names, MAJ:MIN, negation, order, unknown devices.

mod common;

use common::*;
use ioblame_attrib::{ActId, Dir};
use ioblame_counters::{CounterSet, DevError, DevSelection, IoContext};
use ioblame_format::BlockDevice;

fn dev(name: &str, major: u32, minor: u32) -> BlockDevice {
    BlockDevice {
        name: name.to_string(),
        major,
        minor,
        size_sectors: 1 << 20,
        logical_block_size: 512,
        ..Default::default()
    }
}

fn table() -> Vec<BlockDevice> {
    vec![
        dev("sda", 8, 0),
        dev("sdb", 8, 16),
        dev("sdc", 8, 32),
        dev("loop0", 7, 0),
    ]
}

fn enabled(spec: &str) -> Vec<&'static str> {
    let t = table();
    let sel = DevSelection::parse(spec, &t).unwrap();
    let names = ["sda", "sdb", "sdc", "loop0"];
    names
        .into_iter()
        .zip(&t)
        .filter(|(_, d)| sel.enabled(d.kernel_dev()))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn nothing_enables_all() {
    assert_eq!(enabled(""), ["sda", "sdb", "sdc", "loop0"]);
    assert_eq!(enabled("  \t "), ["sda", "sdb", "sdc", "loop0"]);
    let sel = DevSelection::parse("", &table()).unwrap();
    assert!(sel.is_all());
    assert!(
        sel.enabled(kdev(253, 0)),
        "devices missing from the table too"
    );
    assert_eq!(sel, DevSelection::all());
}

#[test]
fn names_and_numbers() {
    assert_eq!(enabled("sda sdb"), ["sda", "sdb"]);
    assert_eq!(enabled("8:32"), ["sdc"]);
    assert_eq!(enabled("/dev/loop0"), ["loop0"]);
    let sel = DevSelection::parse("sda", &table()).unwrap();
    assert!(
        !sel.enabled(kdev(253, 0)),
        "a positive first item disables everything else"
    );
    assert!(!sel.is_all());
    // A MAJ:MIN outside the table is accepted.
    let sel = DevSelection::parse("253:0", &table()).unwrap();
    assert!(sel.enabled(kdev(253, 0)));
    assert!(!sel.enabled(kdev(8, 0)));
}

#[test]
fn negation_and_order() {
    // The doc's sequence: sda sdb, then sdc, then !8:0.
    assert_eq!(enabled("sda sdb sdc !8:0"), ["sdb", "sdc"]);
    // A negative first item keeps every other device enabled.
    assert_eq!(enabled("!sdb"), ["sda", "sdc", "loop0"]);
    assert_eq!(enabled("!sdb !7:0"), ["sda", "sdc"]);
    // Later items win.
    assert_eq!(enabled("!sdb sdb"), ["sda", "sdb", "sdc", "loop0"]);
    assert_eq!(enabled("sdb !sdb"), Vec::<&str>::new());
    assert_eq!(enabled("sdb !8:16 sdb"), ["sdb"]);
    let t = table();
    let sel = DevSelection::parse("sda sdb sdc !8:0", &t).unwrap();
    let listed: Vec<&str> = sel
        .enabled_devices(&t)
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(listed, ["sdb", "sdc"]);
}

#[test]
fn errors() {
    let e = DevSelection::parse("sda sdz", &table()).unwrap_err();
    assert_eq!(
        e,
        DevError::Unknown {
            name: "sdz".to_string(),
            known: "sda (8:0), sdb (8:16), sdc (8:32), loop0 (7:0)".to_string()
        }
    );
    assert_eq!(
        e.to_string(),
        "unknown device 'sdz' (the trace knows: sda (8:0), sdb (8:16), sdc (8:32), loop0 (7:0))"
    );
    assert_eq!(
        DevSelection::parse("!nvme0n1", &[])
            .unwrap_err()
            .to_string(),
        "unknown device 'nvme0n1' (the trace knows: none)"
    );
    assert_eq!(
        DevSelection::parse("sda !", &table())
            .unwrap_err()
            .to_string(),
        "bad device '!': expected a device name or MAJ:MIN after '!'"
    );
    for bad in ["8:x", "8:", ":0", "4096:0", "8:1048576", "-1:0"] {
        assert_eq!(
            DevSelection::parse(bad, &table()).unwrap_err().to_string(),
            format!("bad device '{bad}': MAJ:MIN needs two decimal numbers (major below 4096, minor below 1048576)")
        );
    }
}

#[test]
fn counter_set_honours_selection() {
    let t = table();
    let mut set = CounterSet::parse_args(&["RAW size 0 1 2 3 4 5 6 7 0"])
        .unwrap()
        .with_devs(DevSelection::parse("!sdb", &t).unwrap());
    let ctx = IoContext::new(1, "x");
    let mut io = io_at(0, Dir::R, 10, 0);
    io.dev = kdev(8, 16);
    set.record(&io, &ctx);
    io.dev = kdev(8, 0);
    set.record(&io, &ctx);
    set.record(&io, &ctx);
    assert_eq!(set.histogram(ActId(0), 0), Some(&[0, 0, 0, 0, 0, 0, 0, 2]));
    assert!(!set.devs().enabled_io(&{
        let mut i = io.clone();
        i.dev = kdev(8, 16);
        i
    }));
}

/// The filter's `dev` takes device names too, resolved against the trace's device table as
/// `--devs` does; an unknown name is an error naming the counter.
#[test]
fn filter_dev_names_resolve_against_the_trace() {
    let t = table();
    let mut set = CounterSet::parse_args(&[
        "RAW size 0 1 2 3 4 5 6 7 0 if dev == sdb",
        "RAW size 0 1 2 3 4 5 6 7 0 if dev != \"/dev/sdb\" && dev != loop0",
    ])
    .unwrap();
    assert_eq!(set.device_names(), ["sdb", "/dev/sdb", "loop0"]);
    set.resolve_devices(&t).unwrap();
    let ctx = IoContext::new(1, "x");
    for (d, n) in [(kdev(8, 16), 1), (kdev(8, 0), 2), (kdev(7, 0), 3)] {
        let mut io = io_at(0, Dir::R, 10, 0);
        io.dev = d;
        for _ in 0..n {
            set.record(&io, &ctx);
        }
    }
    assert_eq!(set.histogram(ActId(0), 0), Some(&[0, 0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(set.histogram(ActId(0), 1), Some(&[0, 0, 0, 0, 0, 0, 0, 2]));

    let mut bad = CounterSet::parse_args(&[
        "R size 0 1 2 3 4 5 6 7 0",
        "W size 0 1 2 3 4 5 6 7 0 if dev == sdz",
    ])
    .unwrap();
    assert_eq!(
        bad.resolve_devices(&t).unwrap_err().to_string(),
        "counter 2: unknown device 'sdz' (the trace knows: sda (8:0), sdb (8:16), sdc (8:32), loop0 (7:0))"
    );
    // Without a device table, names cannot match: `==` is false, `!=` true.
    let mut unresolved =
        CounterSet::parse_args(&["R size 0 1 2 3 4 5 6 7 0 if dev != sdb"]).unwrap();
    unresolved.record(&io_at(0, Dir::R, 10, 0), &ctx);
    assert_eq!(
        unresolved.histogram(ActId(0), 0),
        Some(&[0, 0, 0, 0, 0, 0, 0, 1])
    );
}

/// Selecting a device without IO says so; for a partition, that its requests are counted on
/// its whole disk.
#[test]
fn warnings_for_selected_devices_without_io() {
    let mut t = table();
    t.push(BlockDevice {
        part_start: 2048,
        parent: "sda".to_string(),
        ..dev("sda1", 8, 1)
    });
    let has_io = |d: u32| d == kdev(8, 0);
    let sel = DevSelection::parse("sda1 sdb 8:48", &t).unwrap();
    assert_eq!(
        sel.warnings(&t, has_io),
        [
            "--devs selects sda1 (8:1), which has no IO in the trace: it is a partition, and the block layer counts its requests on the whole disk sda (8:0); select sda instead",
            "--devs selects sdb (8:16), which has no IO in the trace",
            "--devs selects 8:48, which has no IO in the trace",
        ]
    );
    // Devices enabled by default (a selection starting with '!') and devices with IO: quiet.
    assert!(DevSelection::parse("!sdb", &t)
        .unwrap()
        .warnings(&t, has_io)
        .is_empty());
    assert!(DevSelection::parse("sda", &t)
        .unwrap()
        .warnings(&t, has_io)
        .is_empty());
    assert!(DevSelection::all().warnings(&t, has_io).is_empty());
}
