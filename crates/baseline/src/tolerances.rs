//! Tolerances: how far a trace may move from its baseline, per metric, and the names of
//! their keys.

use ioblame_attrib::Dir;
use ioblame_counters::Field;

/// A tolerance: a number, or `off` (the check is not made).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tol {
    /// The check is not made.
    Off,
    /// The allowed deviation (its meaning depends on the metric, see [`Tolerances`]).
    Value(f64),
}

impl Tol {
    /// The value, `None` when off.
    pub fn value(self) -> Option<f64> {
        match self {
            Tol::Off => None,
            Tol::Value(v) => Some(v),
        }
    }
}

/// Tolerances per metric; `None` means "not set here" (a group falls back to the defaults).
///
/// * `*_bytes` (per direction): a factor. With `t`, bytes may grow to `(1+t)` times the
///   baseline or shrink to `1/(1+t)` of it (`0.15`: +15% / -13%).
/// * `*_io_size` (per direction): the same factor for the average IO size (bytes per IO):
///   what changes when IOs turn small or random, or stop merging.
/// * `sync_write_share`: the largest allowed absolute change of the share of write bytes
///   whose requests had `S` (`0.15`: 15 points).
/// * `behind_share`: the largest allowed growth of the share of a group's IOs' Q2C spent
///   waiting behind other requests (`ioblame blame`), absolute (`0.1`: 10 points); a
///   shrinking share never fails.
/// * `hist_*` (per counter field): the largest allowed earth mover's distance between the
///   baseline's and the trace's histogram shapes, in slots (`1.5`: all of the distribution
///   may move by one slot and half of it by one more, or a quarter of it by six).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tolerances {
    /// Read bytes factor.
    pub read_bytes: Option<Tol>,
    /// Readahead bytes factor.
    pub readahead_bytes: Option<Tol>,
    /// Write bytes factor.
    pub write_bytes: Option<Tol>,
    /// Average read size factor.
    pub read_io_size: Option<Tol>,
    /// Average readahead size factor.
    pub readahead_io_size: Option<Tol>,
    /// Average write size factor.
    pub write_io_size: Option<Tol>,
    /// Absolute change of the sync-write share.
    pub sync_write_share: Option<Tol>,
    /// Absolute growth of the share of Q2C spent behind other requests.
    pub behind_share: Option<Tol>,
    /// Shape distance of `size` counters.
    pub hist_size: Option<Tol>,
    /// Shape distance of `offset` counters.
    pub hist_offset: Option<Tol>,
    /// Shape distance of `seek_dist` counters.
    pub hist_seek_dist: Option<Tol>,
    /// Shape distance of `wait_time` counters.
    pub hist_wait_time: Option<Tol>,
    /// Shape distance of `io_time` counters.
    pub hist_io_time: Option<Tol>,
}

/// The names of the tolerance keys, in file order.
pub const TOLERANCE_KEYS: [&str; 13] = [
    "read_bytes",
    "readahead_bytes",
    "write_bytes",
    "read_io_size",
    "readahead_io_size",
    "write_io_size",
    "sync_write_share",
    "behind_share",
    "hist_size",
    "hist_offset",
    "hist_seek_dist",
    "hist_wait_time",
    "hist_io_time",
];

impl Tolerances {
    /// The defaults written into new baselines (see `docs/ci-regression.md` for the
    /// reasoning).
    pub fn recommended() -> Tolerances {
        Tolerances {
            read_bytes: Some(Tol::Value(0.25)),
            readahead_bytes: Some(Tol::Value(0.5)),
            write_bytes: Some(Tol::Value(0.15)),
            read_io_size: Some(Tol::Value(1.5)),
            readahead_io_size: Some(Tol::Value(1.5)),
            write_io_size: Some(Tol::Value(1.5)),
            sync_write_share: Some(Tol::Value(0.15)),
            behind_share: Some(Tol::Value(0.1)),
            hist_size: Some(Tol::Value(1.5)),
            hist_offset: Some(Tol::Off),
            hist_seek_dist: Some(Tol::Value(2.0)),
            hist_wait_time: Some(Tol::Off),
            hist_io_time: Some(Tol::Off),
        }
    }

    /// Tolerances for a deterministic input checked against its own baseline (the fixture
    /// traces of ioblame's own CI): nothing may move. Byte counts, average IO sizes and
    /// histogram shapes must be equal (histograms are compared as the file rounds them, one
    /// IO moving to another slot fails); the sync-write share may differ by the rounding of
    /// the file (4 decimals); every histogram is compared.
    pub fn exact() -> Tolerances {
        let mut t = Tolerances::default();
        for k in TOLERANCE_KEYS {
            let v = if k.ends_with("_share") { 0.001 } else { 0.0 };
            t.set(k, Tol::Value(v));
        }
        t
    }

    /// The tolerance of a key by name (see [`TOLERANCE_KEYS`]).
    pub fn get(&self, key: &str) -> Option<Tol> {
        *self.slot(key)?
    }

    /// The slot of a key by name.
    fn slot(&self, key: &str) -> Option<&Option<Tol>> {
        Some(match key {
            "read_bytes" => &self.read_bytes,
            "readahead_bytes" => &self.readahead_bytes,
            "write_bytes" => &self.write_bytes,
            "read_io_size" => &self.read_io_size,
            "readahead_io_size" => &self.readahead_io_size,
            "write_io_size" => &self.write_io_size,
            "sync_write_share" => &self.sync_write_share,
            "behind_share" => &self.behind_share,
            "hist_size" => &self.hist_size,
            "hist_offset" => &self.hist_offset,
            "hist_seek_dist" => &self.hist_seek_dist,
            "hist_wait_time" => &self.hist_wait_time,
            "hist_io_time" => &self.hist_io_time,
            _ => return None,
        })
    }

    /// Sets a key by name; `false` when there is no such key.
    pub fn set(&mut self, key: &str, tol: Tol) -> bool {
        let slot = match key {
            "read_bytes" => &mut self.read_bytes,
            "readahead_bytes" => &mut self.readahead_bytes,
            "write_bytes" => &mut self.write_bytes,
            "read_io_size" => &mut self.read_io_size,
            "readahead_io_size" => &mut self.readahead_io_size,
            "write_io_size" => &mut self.write_io_size,
            "sync_write_share" => &mut self.sync_write_share,
            "behind_share" => &mut self.behind_share,
            "hist_size" => &mut self.hist_size,
            "hist_offset" => &mut self.hist_offset,
            "hist_seek_dist" => &mut self.hist_seek_dist,
            "hist_wait_time" => &mut self.hist_wait_time,
            "hist_io_time" => &mut self.hist_io_time,
            _ => return false,
        };
        *slot = Some(tol);
        true
    }

    /// This set with the unset keys taken from `defaults`.
    pub fn or(&self, defaults: &Tolerances) -> Tolerances {
        let mut t = *self;
        for k in TOLERANCE_KEYS {
            if t.get(k).is_none() {
                if let Some(d) = defaults.get(k) {
                    t.set(k, d);
                }
            }
        }
        t
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        TOLERANCE_KEYS.iter().all(|k| self.get(k).is_none())
    }

    /// Per key, the looser of this set and `other` (`off` is the loosest; a key set on one
    /// side only keeps that side's value).
    pub(crate) fn loosest(&self, other: &Tolerances) -> Tolerances {
        let mut out = Tolerances::default();
        for k in TOLERANCE_KEYS {
            let t = match (self.get(k), other.get(k)) {
                (Some(Tol::Off), _) | (_, Some(Tol::Off)) => Tol::Off,
                (Some(Tol::Value(x)), Some(Tol::Value(y))) => Tol::Value(x.max(y)),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => continue,
            };
            out.set(k, t);
        }
        out
    }
}

/// The tolerance key of a direction's bytes.
pub(crate) fn bytes_key(d: Dir) -> &'static str {
    match d {
        Dir::R => "read_bytes",
        Dir::A => "readahead_bytes",
        Dir::W => "write_bytes",
    }
}

/// The tolerance key of a direction's average IO size.
pub(crate) fn io_size_key(d: Dir) -> &'static str {
    match d {
        Dir::R => "read_io_size",
        Dir::A => "readahead_io_size",
        Dir::W => "write_io_size",
    }
}

/// The tolerance key of a counter field's histograms.
pub(crate) fn hist_key(f: Field) -> &'static str {
    match f {
        Field::Size => "hist_size",
        Field::Offset => "hist_offset",
        Field::SeekDist => "hist_seek_dist",
        Field::WaitTime => "hist_wait_time",
        Field::IoTime => "hist_io_time",
    }
}
