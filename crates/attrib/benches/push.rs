//! Throughput of `Attributor::push` on a synthetic buffered-write + readahead + direct IO
//! mix (run with `cargo bench -p ioblame-attrib`). Prints events per second.

use std::time::Instant;

use ioblame_attrib::{Attributor, Context};
use ioblame_decode::{Event, EventKind, Rwbs};

fn main() {
    const DEV: u32 = 7 << 20;
    let stack: Box<[u64]> = (0..14u64)
        .map(|i| 0xffff_ffff_8100_0000 + i * 0x1234)
        .collect();
    let bio_stack: Box<[u64]> = (0..12u64)
        .map(|i| 0xffff_ffff_8200_0000 + i * 0x777)
        .collect();
    let mut events = Vec::new();
    let mut t = 0u64;
    let mut ev = |pid: u32, kind: EventKind, st: Option<&[u64]>| {
        t += 100;
        events.push(Event {
            time: t,
            cpu: (t % 4) as u32,
            pid,
            tid: pid,
            kind,
            stack: st.map(std::sync::Arc::from),
            cgroup: 0,
            stack_copy: None,
        });
    };
    let w = Rwbs::parse("W");
    for i in 0..200_000u64 {
        let pid = 100 + (i % 7) as u32;
        let ino = 12 + i % 5;
        // dirtier: page cache add, folio dirty, delalloc buffer
        ev(
            pid,
            EventKind::AddToPageCache {
                s_dev: DEV,
                ino,
                index: i,
                order: 0,
                pfn: i,
            },
            None,
        );
        ev(
            pid,
            EventKind::DirtyFolio {
                bdi: DEV,
                ino,
                index: i,
            },
            Some(&stack),
        );
        ev(
            pid,
            EventKind::DirtyBuffer {
                dev: DEV,
                blocknr: u64::MAX - 65535,
                size: 4096,
            },
            Some(&stack),
        );
        // writeback: map, queue, getrq, issue, complete
        let pblk = 100_000 + i;
        ev(
            50,
            EventKind::Ext4MapBlocks {
                dev: DEV,
                ino,
                flags: 0,
                pblk,
                lblk: i,
                len: 1,
                mflags: 0,
                ret: 1,
            },
            None,
        );
        ev(
            50,
            EventKind::BioQueue {
                dev: DEV,
                sector: pblk * 8,
                nr_sector: 8,
                rwbs: w,
            },
            Some(&bio_stack),
        );
        ev(
            50,
            EventKind::GetRq {
                dev: DEV,
                sector: pblk * 8,
                nr_sector: 8,
                rwbs: w,
            },
            None,
        );
        ev(
            70,
            EventKind::RqIssue {
                dev: DEV,
                sector: pblk * 8,
                nr_sector: 8,
                bytes: 4096,
                rwbs: w,
            },
            None,
        );
        ev(
            0,
            EventKind::RqComplete {
                dev: DEV,
                sector: pblk * 8,
                nr_sector: 8,
                error: 0,
                rwbs: w,
            },
            None,
        );
    }
    let n = events.len();
    for round in 0..3 {
        let mut a = Attributor::new(Context::default());
        let start = Instant::now();
        let mut ios = 0usize;
        let mut buf = Vec::new();
        for (i, e) in events.iter().enumerate() {
            a.push(e);
            if i % 4096 == 0 {
                a.drain_ios_into(&mut buf);
                ios += buf.len();
                buf.clear();
            }
        }
        ios += a.drain_ios().len();
        let out = a.finish();
        let dt = start.elapsed().as_secs_f64();
        println!(
            "round {round}: {n} events in {dt:.3} s = {:.2} M events/s ({ios} IOs, {} acts, unknown {} B)",
            n as f64 / dt / 1e6,
            out.tables.acts.len(),
            out.summary.unknown_bytes
        );
    }
}
