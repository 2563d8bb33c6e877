//! The intervals of btt's breakdown, and one group's statistics of each.

use crate::hist::Stat;

/// An interval of btt's breakdown (`doc/btt.tex`, "Definitions"), between two events of
/// the same IO. The `*dm` ones are those of IO queued on a device btt takes for a remapper
/// (major 9, md; 253 and 254, device mapper), which btt reports apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Interval {
    /// Queue to queue: between two bios queued (on one device, by one process, or overall).
    Q2Q,
    /// Queue to remap: a bio queued on a stacked device to its remap to the lower one.
    Q2A,
    /// Queue to get request.
    Q2G,
    /// Get request to insert.
    G2I,
    /// Queue to merge: a bio merged into a request.
    Q2M,
    /// Insert to issue.
    I2D,
    /// Merge to issue.
    M2D,
    /// Issue to complete: the device's time, per bio.
    D2C,
    /// Queue to complete: the whole time, per bio (a merged bio completes with its request).
    Q2C,
    /// Q2Q on a remapper device.
    Q2Qdm,
    /// Q2A on a remapper device.
    Q2Adm,
    /// Q2C on a remapper device.
    Q2Cdm,
}

impl Interval {
    /// Every interval, in the order of the outputs.
    pub const ALL: [Interval; 12] = [
        Interval::Q2Q,
        Interval::Q2A,
        Interval::Q2G,
        Interval::G2I,
        Interval::Q2M,
        Interval::I2D,
        Interval::M2D,
        Interval::D2C,
        Interval::Q2C,
        Interval::Q2Qdm,
        Interval::Q2Adm,
        Interval::Q2Cdm,
    ];

    /// btt's name (`Q2C`, `Q2Cdm`).
    pub fn name(self) -> &'static str {
        match self {
            Interval::Q2Q => "Q2Q",
            Interval::Q2A => "Q2A",
            Interval::Q2G => "Q2G",
            Interval::G2I => "G2I",
            Interval::Q2M => "Q2M",
            Interval::I2D => "I2D",
            Interval::M2D => "M2D",
            Interval::D2C => "D2C",
            Interval::Q2C => "Q2C",
            Interval::Q2Qdm => "Q2Qdm",
            Interval::Q2Adm => "Q2Adm",
            Interval::Q2Cdm => "Q2Cdm",
        }
    }

    /// The key in JSON (`q2c`, `q2c_dm`).
    pub fn key(self) -> &'static str {
        match self {
            Interval::Q2Q => "q2q",
            Interval::Q2A => "q2a",
            Interval::Q2G => "q2g",
            Interval::G2I => "g2i",
            Interval::Q2M => "q2m",
            Interval::I2D => "i2d",
            Interval::M2D => "m2d",
            Interval::D2C => "d2c",
            Interval::Q2C => "q2c",
            Interval::Q2Qdm => "q2q_dm",
            Interval::Q2Adm => "q2a_dm",
            Interval::Q2Cdm => "q2c_dm",
        }
    }

    /// Whether this is one of the remapper intervals, shown only when it has values.
    pub fn is_dm(self) -> bool {
        matches!(self, Interval::Q2Qdm | Interval::Q2Adm | Interval::Q2Cdm)
    }
}

/// One group's (all devices, a device, a process, an act) statistics of every interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Breakdown {
    stats: [Stat; 12],
}

impl Breakdown {
    /// The statistics of one interval.
    pub fn get(&self, i: Interval) -> &Stat {
        &self.stats[i as usize]
    }

    /// Counts one value (ns) of an interval.
    #[inline]
    pub fn add(&mut self, i: Interval, v: u64) {
        self.stats[i as usize].add(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Breakdown) {
        for (a, b) in self.stats.iter_mut().zip(&other.stats) {
            a.merge(b);
        }
    }

    /// Whether no interval has a value.
    pub fn is_empty(&self) -> bool {
        self.stats.iter().all(|s| s.n == 0)
    }
}
