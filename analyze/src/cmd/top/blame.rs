//! Who made the IO slow, live: each interval's charged IOs split as `ioblame blame` splits
//! them ([`ioblame_latency::BlameEngine`]; docs/latency.md, "Blame"), with the previous
//! interval's IOs standing ahead of them too (a request that completed before the interval
//! began may still have held the device while an IO of it waited).

use ioblame_attrib::{ActId, Io};
use ioblame_decode::Dev;
use ioblame_latency::blame::Culprit;
use ioblame_latency::{BlameEngine, IoPart};

/// One victim's wait behind one culprit act: (victim act, culprit act, the victim's device,
/// ns).
pub type Wait = (ActId, ActId, Dev, u64);

/// The IOs of the interval being summed, and of the one before.
#[derive(Debug, Default)]
pub struct LiveBlame {
    prev: Vec<IoPart>,
    cur: Vec<IoPart>,
}

impl LiveBlame {
    /// A charged IO of the interval (a loop device's lower copy stands ahead of others, but
    /// its wait is the loop device's IO's).
    pub fn push(&mut self, io: &Io) {
        self.cur
            .push(ioblame_pipeline::blame::io_part(io, !io.lower));
    }

    /// Splits the interval's IOs, the previous interval's standing ahead of them, and starts
    /// the next interval: every wait behind an act (flushes and other ops are not charged
    /// IOs: `top` does not see them).
    pub fn interval(&mut self) -> Vec<Wait> {
        let mut engine = BlameEngine::new();
        for p in &self.prev {
            engine.push_io(IoPart { victim: None, ..*p });
        }
        for p in &self.cur {
            engine.push_io(*p);
        }
        let b = engine.finish();
        let mut out = Vec::new();
        for v in &b.victims {
            for &(c, ns) in b.culprits_of(v) {
                if let Culprit::Key(k) = Culprit::of(c) {
                    out.push((ActId(v.key), ActId(k), v.dev, ns));
                }
            }
        }
        self.prev = std::mem::take(&mut self.cur);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioblame_attrib::Dir;

    fn io(act: u32, queue: u64, issue: u64, complete: u64) -> Io {
        let mut io = Io::new(7 << 20, Dir::R, 4096, ActId(act));
        io.queue_time = queue;
        io.issue_time = issue;
        io.complete_time = complete;
        io
    }

    /// A victim waits behind a request of the previous interval and one of its own; each
    /// wait is split once, in the interval the victim completed in.
    #[test]
    fn a_wait_behind_the_previous_interval_counts() {
        let mut b = LiveBlame::default();
        b.push(&io(1, 0, 0, 1000)); // act 1 holds the device 0..1000
        assert_eq!(b.interval(), vec![]);
        b.push(&io(2, 500, 1000, 1500)); // act 2 waits 500..1000 behind it
        let w = b.interval();
        assert_eq!(w, vec![(ActId(2), ActId(1), 7 << 20, 500)]);
        // Nothing is split twice.
        assert_eq!(b.interval(), vec![]);
    }
}
