//! Bounded in-memory aggregates of the IO stream: per act, per role and time bucket, a
//! decimated sample of IO positions and per-via latency histograms.

use std::collections::BTreeMap;

use ioblame_attrib::{ActId, ActTotals, Dir, Io, RoleId, Tables, Via};

/// Most time buckets kept; past it the bucket width doubles and pairs merge.
pub(crate) const MAX_BUCKETS: u64 = 512;
/// First bucket width: 10 ms.
const FIRST_BUCKET_NS: u64 = 10_000_000;
/// Most offset points kept per device for the seekwatcher charts; past it every other point
/// is dropped and only every `2^k`-th IO of the device is sampled.
pub(crate) const MAX_POINTS: usize = 20_000;
/// Devices whose IO positions are sampled (the first seen); others are only counted.
pub(crate) const MAX_SAMPLED_DEVS: usize = 16;
/// Devices counted; IO of further devices is left out of the per-device figures.
pub(crate) const MAX_DEVS: usize = 4096;
/// Time buckets kept per act (the page's "IOs over time" of an act); past it the act
/// buckets' width doubles.
pub(crate) const MAX_ACT_BUCKETS: u64 = 64;
/// Latency histogram buckets: bucket `i` holds `2^(i-1) <= µs < 2^i` (bucket 0: 0 µs).
pub(crate) const LAT_BUCKETS: usize = 32;

/// One sampled IO position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Point {
    /// Completion time relative to the base, ns.
    pub t: u64,
    /// Offset scaled to 0..=65535.
    pub offset: u32,
    pub dir: Dir,
}

/// A decimated sample of IO positions: every `2^stride_log`-th IO, at most [`MAX_POINTS`].
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    /// Sampled positions, in push order.
    pub points: Vec<Point>,
    /// Sample every `2^stride_log`-th IO.
    pub stride_log: u32,
    /// IOs offered.
    n: u64,
}

impl Sampler {
    fn push(&mut self, p: Point) {
        if self.n & ((1u64 << self.stride_log) - 1) == 0 {
            if self.points.len() >= MAX_POINTS {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride_log += 1;
            }
            if self.n & ((1u64 << self.stride_log) - 1) == 0 {
                self.points.push(p);
            }
        }
        self.n += 1;
    }
}

/// IO of one device.
#[derive(Debug, Default)]
pub(crate) struct DevAgg {
    /// IOs.
    pub ios: u64,
    /// Bytes.
    pub bytes: u64,
    /// Sampled positions (`None` past the first [`MAX_SAMPLED_DEVS`] devices).
    pub sample: Option<Sampler>,
}

/// What [`crate::ReportWriter::push_io`] accumulates.
#[derive(Debug, Default)]
pub(crate) struct Aggregates {
    /// Base time (ns, trace clock) of the charts' time axis.
    pub base: Option<u64>,
    /// Latest completion seen, relative to the base.
    pub end: u64,
    /// Bytes and IOs per direction per act id, of the IOs given (what `ios.parquet` holds).
    pub act_totals: Vec<ActTotals>,
    /// Sum of io_time (µs) per act id.
    pub act_io_us: Vec<u64>,
    /// Sum of wait_time (µs) per act id.
    pub act_wait_us: Vec<u64>,
    /// Width of a time bucket, ns.
    pub bucket_ns: u64,
    /// Bytes per (bucket, role), sparse.
    pub role_buckets: BTreeMap<(u64, RoleId), u64>,
    /// Bytes per role (for choosing the top roles).
    pub role_bytes: BTreeMap<RoleId, u64>,
    /// Per device (kernel encoding): counts and sampled positions.
    pub devs: BTreeMap<u32, DevAgg>,
    /// IOs seen.
    pub n_ios: u64,
    /// Wait (0) and io (1) time histograms per via class.
    pub latency: [[[u64; LAT_BUCKETS]; Via::ALL.len()]; 2],
    /// Device time histogram per act: IOs per (act id, [`lat_bucket`]), sparse.
    pub act_latency: BTreeMap<(u32, u8), u64>,
    /// Width of an act time bucket, ns.
    pub act_bucket_ns: u64,
    /// Bytes per (act id, act time bucket), sparse; at most [`MAX_ACT_BUCKETS`] per act.
    pub act_buckets: BTreeMap<(u32, u64), u64>,
}

/// The latency bucket of a value in µs.
pub(crate) fn lat_bucket(us: u64) -> usize {
    ((64 - us.leading_zeros()) as usize).min(LAT_BUCKETS - 1)
}

impl Aggregates {
    pub(crate) fn new(base: Option<u64>) -> Aggregates {
        Aggregates {
            base,
            bucket_ns: FIRST_BUCKET_NS,
            act_bucket_ns: FIRST_BUCKET_NS,
            ..Aggregates::default()
        }
    }

    pub(crate) fn push(&mut self, io: &Io, tables: &Tables) {
        let base = *self.base.get_or_insert(io.queue_time.min(io.complete_time));
        let t = io.complete_time.saturating_sub(base);
        self.end = self.end.max(t);
        let a = io.act.index();
        // Per-act sums only for acts the tables hold (bounds the vectors by the act table),
        // and only once per IO: a lower layer's copy (a loop device's backing file) is the
        // act's IO again.
        let a = if io.lower { usize::MAX } else { a };
        if a < tables.acts.len() && self.act_io_us.len() <= a {
            self.act_io_us.resize(a + 1, 0);
            self.act_wait_us.resize(a + 1, 0);
            self.act_totals.resize(a + 1, ActTotals::default());
        }
        if let (Some(x), Some(y), Some(tot)) = (
            self.act_io_us.get_mut(a),
            self.act_wait_us.get_mut(a),
            self.act_totals.get_mut(a),
        ) {
            *x = x.saturating_add(io.io_time);
            *y = y.saturating_add(io.wait_time);
            tot.add(io.dir, io.size);
            let act = io.act.0;
            *self
                .act_latency
                .entry((act, lat_bucket(io.io_time) as u8))
                .or_default() += 1;
            while t / self.act_bucket_ns >= MAX_ACT_BUCKETS {
                self.act_bucket_ns *= 2;
                let old = std::mem::take(&mut self.act_buckets);
                for ((a, b), v) in old {
                    *self.act_buckets.entry((a, b / 2)).or_default() += v;
                }
            }
            *self
                .act_buckets
                .entry((act, t / self.act_bucket_ns))
                .or_default() += io.size;
        }

        let role = tables.act(io.act).map_or(RoleId(u32::MAX), |x| x.role);
        while !io.lower && t / self.bucket_ns >= MAX_BUCKETS {
            self.bucket_ns *= 2;
            let old = std::mem::take(&mut self.role_buckets);
            for ((b, r), v) in old {
                *self.role_buckets.entry((b / 2, r)).or_default() += v;
            }
        }
        if !io.lower {
            *self
                .role_buckets
                .entry((t / self.bucket_ns, role))
                .or_default() += io.size;
            *self.role_bytes.entry(role).or_default() += io.size;
        }

        let n_devs = self.devs.len();
        if n_devs < MAX_DEVS || self.devs.contains_key(&io.dev) {
            let d = self.devs.entry(io.dev).or_insert_with(|| DevAgg {
                sample: (n_devs < MAX_SAMPLED_DEVS).then(Sampler::default),
                ..DevAgg::default()
            });
            d.ios += 1;
            d.bytes = d.bytes.saturating_add(io.size);
            if let Some(s) = d.sample.as_mut() {
                s.push(Point {
                    t,
                    offset: io.offset,
                    dir: io.dir,
                });
            }
        }
        self.n_ios += 1;

        let v = io.via.index();
        self.latency[0][v][lat_bucket(io.wait_time)] += 1;
        self.latency[1][v][lat_bucket(io.io_time)] += 1;
    }

    /// The io_time sum of an act (0 when it had no IO).
    pub(crate) fn io_us(&self, act: ActId) -> u64 {
        self.act_io_us.get(act.index()).copied().unwrap_or(0)
    }

    /// The per-act totals of the IOs given, one per act of `tables` (so that every output
    /// counts exactly the IOs of `ios.parquet`).
    pub(crate) fn totals_for(&self, tables: &Tables) -> Vec<ActTotals> {
        let mut v = self.act_totals.clone();
        v.resize(tables.acts.len(), ActTotals::default());
        v
    }

    /// The devices with sampled positions, most IOs first (ties by device number), at most
    /// `max`; and how many devices with IO are left out.
    pub(crate) fn top_devices(&self, max: usize) -> (Vec<(u32, &DevAgg)>, usize) {
        let mut v: Vec<(u32, &DevAgg)> = self
            .devs
            .iter()
            .filter(|(_, d)| d.sample.is_some())
            .map(|(&k, d)| (k, d))
            .collect();
        v.sort_by_key(|&(k, d)| (std::cmp::Reverse(d.ios), k));
        let left = self.devs.len().saturating_sub(v.len().min(max));
        v.truncate(max);
        (v, left)
    }

    /// The wait_time sum of an act.
    pub(crate) fn wait_us(&self, act: ActId) -> u64 {
        self.act_wait_us.get(act.index()).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ioblame_attrib::{Act, ActTotals, FileKey, Role, Tables, INTENT_LOST};
    use ioblame_decode::Rwbs;

    fn io(i: u64, t: u64) -> Io {
        let dir = if i % 2 == 0 { Dir::R } else { Dir::W };
        Io {
            sector: i,
            rwbs: Rwbs(Rwbs::READ),
            queue_time: t,
            issue_time: t,
            complete_time: t,
            wait_time: i % 1000,
            io_time: i % 5000,
            offset: (i % 65536) as u32,
            via: Via::Read,
            ..Io::new(1, dir, 4096, ActId((i % 3) as u32))
        }
    }

    #[test]
    fn aggregates_stay_bounded() {
        let act = |role| Act {
            role: RoleId(role),
            intent: INTENT_LOST,
            file: FileKey { dev: 1, ino: 0 },
            via: Via::Read,
            reason: None,
            issuer: None,
            recorder: false,
        };
        let t = Tables {
            roles: vec![
                Role {
                    pid: 1,
                    tid: 1,
                    comm: "a".into(),
                    generation: 0,
                    cgroup: 0,
                    lineage: false,
                };
                2
            ],
            intents: vec![],
            acts: vec![act(0), act(1)],
            totals: vec![ActTotals::default(); 2],
        };
        let mut a = Aggregates::new(None);
        let n = 100_000u64;
        // One IO every 10 ms for 1000 s; act 2 is not in the tables.
        for i in 0..n {
            a.push(&io(i, 5_000_000_000 + i * 10_000_000), &t);
        }
        assert_eq!(a.n_ios, n);
        assert_eq!(a.base, Some(5_000_000_000));
        assert!(a.role_buckets.keys().all(|&(b, _)| b < MAX_BUCKETS));
        assert!(a.bucket_ns * MAX_BUCKETS > a.end);
        let bytes: u64 = a.role_buckets.values().sum();
        assert_eq!(bytes, n * 4096);
        assert_eq!(a.role_bytes.values().sum::<u64>(), n * 4096);
        let s = a.devs[&1].sample.as_ref().unwrap();
        assert_eq!(a.devs[&1].ios, n);
        assert!(s.points.len() <= MAX_POINTS && s.points.len() > MAX_POINTS / 2);
        // Points are every 2^k-th IO, in time order.
        let step = 1u64 << s.stride_log;
        assert_eq!(s.points[1].t - s.points[0].t, step * 10_000_000);
        assert_eq!(a.act_io_us.len(), 2, "no room made for an unknown act");
        assert!(a
            .act_buckets
            .keys()
            .all(|&(x, b)| x < 2 && b < MAX_ACT_BUCKETS));
        assert_eq!(
            a.act_buckets.values().sum::<u64>(),
            a.act_totals
                .iter()
                .map(|t| t.bytes.iter().sum::<u64>())
                .sum::<u64>()
        );
        assert_eq!(
            a.act_latency.values().sum::<u64>(),
            a.act_totals.iter().map(|t| t.total_ios()).sum::<u64>()
        );
        assert!(a.act_bucket_ns * MAX_ACT_BUCKETS > a.end);
        assert_eq!(a.act_totals.len(), 2);
        let ios: u64 = a.act_totals.iter().map(|t| t.total_ios()).sum();
        assert_eq!(ios, (0..n).filter(|i| i % 3 != 2).count() as u64);
        let want: u64 = (0..n).filter(|i| i % 3 == 0).map(|i| i % 5000).sum();
        assert_eq!(a.io_us(ActId(0)), want);
        let lat: u64 = a.latency[1].iter().flatten().sum();
        assert_eq!(lat, n);
    }

    #[test]
    fn devices_are_sampled_apart_and_bounded() {
        let t = Tables::default();
        let mut a = Aggregates::new(None);
        // Device 0 has one IO, devices 1.. have more; many devices: the map stays bounded.
        for d in 0..(MAX_DEVS as u32 + 100) {
            for k in 0..=(d.min(3)) {
                let mut x = io(u64::from(k), 1000);
                x.dev = d;
                a.push(&x, &t);
            }
        }
        assert_eq!(a.devs.len(), MAX_DEVS);
        let sampled = a.devs.values().filter(|d| d.sample.is_some()).count();
        assert_eq!(sampled, MAX_SAMPLED_DEVS);
        let (top, left) = a.top_devices(4);
        let ids: Vec<u32> = top.iter().map(|x| x.0).collect();
        assert_eq!(ids, [3, 4, 5, 6], "most IOs first, then by number");
        assert_eq!(left, MAX_DEVS - 4);
        assert_eq!(top[0].1.sample.as_ref().unwrap().points.len(), 4);
    }

    #[test]
    fn latency_buckets() {
        assert_eq!(lat_bucket(0), 0);
        assert_eq!(lat_bucket(1), 1);
        assert_eq!(lat_bucket(2), 2);
        assert_eq!(lat_bucket(3), 2);
        assert_eq!(lat_bucket(1024), 11);
        assert_eq!(lat_bucket(u64::MAX), LAT_BUCKETS - 1);
    }
}
