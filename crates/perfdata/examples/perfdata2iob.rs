//! Converts a perf.data file and prints what the conversion found.
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: perfdata2iob PERF.DATA [KALLSYMS]");
        std::process::exit(2);
    };
    let opts = ioblame_perfdata::PerfDataOptions {
        kallsyms: args.next().map(PathBuf::from),
        ..Default::default()
    };
    match ioblame_perfdata::open_perf_data(&path, &opts) {
        Ok(c) => {
            let h = c.trace.header();
            println!("{h:?}");
            for e in &c.trace.metadata().events {
                println!(
                    "event {} id {} sample_type {:#x} flags {} ids {} format {} bytes filter {:?}",
                    e.name,
                    e.tracefs_id,
                    e.sample_type,
                    e.flags,
                    e.ids.len(),
                    e.format.len(),
                    e.filter
                );
            }
            let mut records = 0;
            for ch in c.trace.chunks() {
                records += ch.header.records;
            }
            println!("{} chunks, {records} records", c.trace.chunks().len());
            for p in c.trace.problems() {
                println!("problem: {p}");
            }
            for n in &c.notes {
                println!("note: {n}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
