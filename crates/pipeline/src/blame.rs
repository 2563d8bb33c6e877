//! The blame pass over an analysis: every charged IO goes to
//! [`ioblame_latency::BlameEngine`] with its act as the culprit key (so the IO a victim
//! waited behind is charged as the attribution charges it: the dirtier of a written-back
//! page, the issuer of a read or a direct IO, a commit's handles, the upper act of a lower
//! copy), and as a victim when the caller selects it (`docs/latency.md`, "Blame").

use ioblame_attrib::{Io, Tables};
use ioblame_latency::{BlameEngine, IoPart};

/// The engine's view of a charged IO: its act is the culprit key; with `victim`, the act is
/// also the victim key.
pub fn io_part(io: &Io, victim: bool) -> IoPart {
    IoPart {
        dev: io.dev,
        sector: io.sector,
        queue: io.queue_time,
        issue: io.issue_time,
        complete: io.complete_time,
        bytes: io.size,
        culprit: io.act.0,
        wbt_may_hold: io.rwbs.is_write() && io.via != ioblame_attrib::Via::Direct,
        victim: victim.then_some(io.act.0),
    }
}

/// Feeds `engine` one charged IO: every IO stands ahead of others, but only IOs `victim`
/// accepts are split. A lower copy (a loop device's backing file written for the act's IO
/// on the loop device) is never a victim: its act's wait is the loop device's IO's.
pub fn push_io(
    engine: &mut BlameEngine,
    io: &Io,
    tables: &Tables,
    victim: impl FnOnce(&Io, &Tables) -> bool,
) {
    let v = !io.lower && victim(io, tables);
    engine.push_io(io_part(io, v));
}

#[cfg(test)]
mod tests {
    use ioblame_attrib::{attribute_events, Context, EventFeed, Tables};
    use ioblame_decode::{Dev, Event, EventKind, Rwbs};
    use ioblame_latency::{Blame, BlameEngine};

    const D: Dev = 8 << 20;
    const DM: Dev = 253 << 20;

    struct Feed(Vec<Event>);

    impl EventFeed for Feed {
        fn feed(self, mut f: impl FnMut(&Event, Option<&Event>)) {
            for (i, ev) in self.0.iter().enumerate() {
                f(ev, self.0.get(i + 1));
            }
        }
    }

    fn ev(time: u64, tid: u32, kind: EventKind) -> Event {
        Event::of_task(time, tid, kind)
    }
    fn r() -> Rwbs {
        Rwbs::parse("R")
    }
    fn q(t: u64, tid: u32, dev: Dev, sector: u64) -> Event {
        ev(
            t,
            tid,
            EventKind::BioQueue {
                dev,
                sector,
                nr_sector: 8,
                rwbs: r(),
            },
        )
    }
    fn d(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
        ev(
            t,
            0,
            EventKind::RqIssue {
                dev,
                sector,
                nr_sector: n,
                bytes: n * 512,
                rwbs: r(),
            },
        )
    }
    fn c(t: u64, dev: Dev, sector: u64, n: u32) -> Event {
        ev(
            t,
            0,
            EventKind::RqComplete {
                dev,
                sector,
                nr_sector: n,
                error: 0,
                rwbs: r(),
            },
        )
    }

    /// A victim's device, role's tid, own and idle time, and its culprits' (role's tid, ns).
    type Split = (Dev, u32, u64, u64, Vec<(u32, u64)>);

    /// Attributes `events` and splits every IO's Q2C, per victim by device then completion.
    fn blame(events: Vec<Event>) -> Vec<Split> {
        let mut engine = BlameEngine::new();
        let done = attribute_events(
            Context::default(),
            Feed(events),
            |io, tables| super::push_io(&mut engine, io, tables, |_, _| true),
            |_| {},
        );
        let tables_at_end: Tables = done.tables;
        let b: Blame = engine.finish();
        let tid = |act: u32| {
            let a = &tables_at_end.acts[act as usize];
            tables_at_end.roles[a.role.index()].tid
        };
        let mut out: Vec<_> = b
            .victims
            .iter()
            .map(|v| {
                for (k, _) in b.culprits_of(v) {
                    assert!(*k < tables_at_end.acts.len() as u32);
                }
                let cs = b
                    .culprits_of(v)
                    .iter()
                    .map(|&(k, ns)| (tid(k), ns))
                    .collect();
                let total: u64 = b.culprits_of(v).iter().map(|c| c.1).sum();
                assert_eq!(v.own + v.idle + total, v.q2c, "{v:?}");
                (v.dev, tid(v.key), v.own, v.idle, cs)
            })
            .collect();
        out.sort_by_key(|x| x.0);
        out
    }

    #[test]
    fn a_requeued_request_waits_until_the_issue_that_completes_it() {
        // The culprit (tid 10) is in flight [0, 40). The victim (tid 20) is queued at 0,
        // issued at 10, requeued at 20 (the driver was busy: it served nothing), issued
        // again at 50 and completed at 60:
        //   [0, 40)  behind the culprit: 40; [40, 50) nothing in flight: idle 10;
        //   [50, 60) its own service: 10.
        let events = vec![
            q(0, 10, D, 0),
            q(0, 20, D, 100),
            d(0, D, 0, 8),
            d(10, D, 100, 8),
            ev(
                20,
                0,
                EventKind::RqRequeue {
                    dev: D,
                    sector: 100,
                    nr_sector: 8,
                    rwbs: r(),
                },
            ),
            c(40, D, 0, 8),
            d(50, D, 100, 8),
            c(60, D, 100, 8),
        ];
        let got = blame(events);
        assert_eq!(got[1], (D, 20, 10, 10, vec![(10, 40)]));
        // The culprit was alone on the device: its time is its own.
        assert_eq!(got[0], (D, 10, 40, 0, vec![]));
    }

    #[test]
    fn merged_bios_share_their_request_and_wait_behind_others() {
        // Readers 20 and 30 queue adjacent bios at 0 and 15, merged into one request
        // issued at 20 and completed at 30; reader 10's request is in flight [0, 25).
        //   reader 20: [0, 20) behind 10: 20; [20, 25) half each: 2.5 and 2.5; [25, 30)
        //   own 5: own 7.5, 10's 22.5, cut to 8 and 22 (ties go to own).
        //   reader 30: [15, 20) 5; [20, 25) 2.5 and 2.5; [25, 30) own 5: own 8, 10's 7.
        let events = vec![
            q(0, 10, D, 0),
            d(0, D, 0, 8),
            q(0, 20, D, 200),
            q(15, 30, D, 208),
            ev(
                15,
                30,
                EventKind::BioBackmerge {
                    dev: D,
                    sector: 208,
                    nr_sector: 8,
                    rwbs: r(),
                },
            ),
            d(20, D, 200, 16),
            c(25, D, 0, 8),
            c(30, D, 200, 16),
        ];
        let got = blame(events);
        let of = |tid| got.iter().find(|x| x.1 == tid).unwrap().clone();
        assert_eq!(of(20), (D, 20, 8, 0, vec![(10, 22)]));
        assert_eq!(of(30), (D, 30, 8, 0, vec![(10, 7)]));
    }

    #[test]
    fn a_stacked_device_is_blamed_at_its_own_level() {
        // Two readers of a bio-based dm device: 20's bio queued at 0 and completed at 60,
        // 10's at 20 and 45 (in flight from queue to completion: no request layer). Below,
        // on the disk, 20's remapped bio is in flight [10, 50) and 10's [30, 40).
        //   dm:   20: [0, 20) own 20; [20, 45) half: 12.5 each; [45, 60) own 15:
        //         own 47.5, 10's 12.5: 48 and 12.
        //   disk: 20: [10, 30) own 20; [30, 40) half: 5 each; [40, 50) own 10: own 35, 5.
        let remap = |t, tid, sector, old_sector| {
            ev(
                t,
                tid,
                EventKind::BioRemap {
                    dev: D,
                    sector,
                    nr_sector: 8,
                    old_dev: DM,
                    old_sector,
                    rwbs: r(),
                },
            )
        };
        let bio_c = |t, sector| {
            ev(
                t,
                0,
                EventKind::BioComplete {
                    dev: DM,
                    sector,
                    nr_sector: 8,
                    error: 0,
                    rwbs: r(),
                },
            )
        };
        let events = vec![
            q(0, 20, DM, 0),
            remap(5, 20, 1000, 0),
            q(10, 20, D, 1000),
            d(10, D, 1000, 8),
            q(20, 10, DM, 64),
            remap(25, 10, 1064, 64),
            q(30, 10, D, 1064),
            d(30, D, 1064, 8),
            c(40, D, 1064, 8),
            bio_c(45, 64),
            c(50, D, 1000, 8),
            bio_c(60, 0),
        ];
        let got = blame(events);
        let at = |dev, tid| {
            got.iter()
                .find(|x| x.0 == dev && x.1 == tid)
                .unwrap()
                .clone()
        };
        assert_eq!(at(DM, 20), (DM, 20, 48, 0, vec![(10, 12)]));
        assert_eq!(at(D, 20), (D, 20, 35, 0, vec![(10, 5)]));
        assert_eq!(at(DM, 10), (DM, 10, 13, 0, vec![(20, 12)]));
    }
}
