//! The statistics of one interval: exact count, minimum, mean and maximum, and percentiles
//! from a log-linear histogram whose error is bounded relative to the value.
//!
//! # The percentile method and its error
//!
//! Values are nanoseconds. Values below 256 ns have a bucket each (exact). Above, each power
//! of two `[2^e, 2^(e+1))` is cut into 128 equal buckets ([`SUB_BUCKETS`]), so a bucket
//! `[lo, hi)` is at most `lo / 128` wide. A percentile `p` is the **nearest-rank** value:
//! the `ceil(p/100 * n)`-th smallest of the `n` values (as `btt -q`/`-l` files would give
//! when sorted). The histogram finds the bucket holding that rank and returns the middle of
//! the bucket, clamped to the exact minimum and maximum: the answer differs from the exact
//! nearest-rank value by at most half a bucket, **at most 1/256 (0.39%) of the value**, and
//! is exact below 256 ns and whenever the rank falls on the minimum or maximum.
//!
//! Memory does not grow with the number of values: a histogram holds one counter per
//! bucket between the smallest and largest bucket used (at most 7,424 for the whole `u64`
//! range; latencies from 1 µs to 1 s use about 2,600).

/// Buckets per power of two above 256 ns: the relative width of a bucket is at most
/// `1 / SUB_BUCKETS`.
pub const SUB_BUCKETS: u64 = 1 << SUB_BITS;
const SUB_BITS: u32 = 7;

/// The largest relative error of a percentile: half a bucket.
pub const MAX_RELATIVE_ERROR: f64 = 1.0 / (2 * SUB_BUCKETS) as f64;

/// The bucket of a value.
fn index(v: u64) -> u32 {
    if v < SUB_BUCKETS {
        return v as u32;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - SUB_BITS;
    let m = (v >> shift) as u32;
    ((shift + 1) << SUB_BITS) + (m - SUB_BUCKETS as u32)
}

/// The values of bucket `i`: `[lo, hi]`, both included.
fn bounds(i: u32) -> (u64, u64) {
    if (i as u64) < SUB_BUCKETS {
        return (i as u64, i as u64);
    }
    let shift = (i >> SUB_BITS) - 1;
    let m = (i as u64 & (SUB_BUCKETS - 1)) + SUB_BUCKETS;
    let lo = m << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// A histogram of `u64` values in log-linear buckets (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogHistogram {
    /// The bucket of `counts[0]`.
    first: u32,
    counts: Vec<u64>,
}

impl LogHistogram {
    /// Counts one value.
    #[inline]
    pub fn add(&mut self, v: u64) {
        let i = index(v);
        if self.counts.is_empty() {
            self.first = i;
            self.counts.push(1);
            return;
        }
        if i < self.first {
            let grow = (self.first - i) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = i;
        }
        let k = (i - self.first) as usize;
        if k >= self.counts.len() {
            self.counts.resize(k + 1, 0);
        }
        self.counts[k] += 1;
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        for (k, &c) in other.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (lo, _) = bounds(other.first + k as u32);
            let i = index(lo);
            self.add(lo);
            let k = (i - self.first) as usize;
            self.counts[k] += c - 1;
        }
    }

    /// The middle of the bucket holding the value of rank `rank` (1-based), if there is one.
    fn at_rank(&self, rank: u64) -> Option<u64> {
        let mut seen = 0u64;
        for (k, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(self.first + k as u32);
                return Some(lo + (hi - lo) / 2);
            }
        }
        None
    }

    /// Buckets in use (the memory held is one `u64` each).
    pub fn buckets(&self) -> usize {
        self.counts.len()
    }
}

/// The nearest rank of percentile `p` (0 < p <= 100) among `n` values: `ceil(p/100 * n)`,
/// at least 1.
pub fn nearest_rank(p: f64, n: u64) -> u64 {
    ((p / 100.0 * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// One interval's statistics: exact n, min, max and sum, and the histogram for percentiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stat {
    /// Number of values.
    pub n: u64,
    /// Smallest value (ns); 0 when `n` is 0.
    pub min: u64,
    /// Largest value (ns).
    pub max: u64,
    /// Sum of the values (ns).
    pub sum: u128,
    hist: LogHistogram,
}

impl Stat {
    /// Counts one value (ns).
    #[inline]
    pub fn add(&mut self, v: u64) {
        if self.n == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
        self.sum += v as u128;
        self.hist.add(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Stat) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.n += other.n;
        self.sum += other.sum;
        self.hist.merge(&other.hist);
    }

    /// The mean (ns), if there are values.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }

    /// Percentile `p` (0 < p <= 100) by nearest rank, within [`MAX_RELATIVE_ERROR`] of the
    /// exact value (ns), if there are values.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = nearest_rank(p, self.n);
        if rank == 1 {
            return Some(self.min);
        }
        if rank == self.n {
            return Some(self.max);
        }
        self.hist.at_rank(rank).map(|v| v.clamp(self.min, self.max))
    }

    /// The histogram's buckets in use.
    pub fn buckets(&self) -> usize {
        self.hist.buckets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_every_value() {
        let mut prev_hi = None::<u64>;
        for i in 0..7424u32 {
            let (lo, hi) = bounds(i);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            // At most lo/128 wide.
            assert!(
                hi - lo < lo.max(1) / SUB_BUCKETS + 1,
                "bucket {i}: {lo}..={hi}"
            );
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
        assert_eq!(index(u64::MAX), 7423);
        for v in 0..256 {
            assert_eq!(bounds(index(v)), (v, v));
        }
    }

    /// A small deterministic generator (xorshift), so the test needs no crate.
    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Every percentile of many value sets is within the documented error of the exact
    /// nearest-rank value, and n, min, max, mean are exact.
    #[test]
    fn percentiles_are_within_the_bound_of_the_exact_values() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for case in 0..200 {
            let n = 1 + (xorshift(&mut seed) % 5000) as usize;
            let spread = 1 + xorshift(&mut seed) % 40;
            let mut vals: Vec<u64> = (0..n)
                .map(|_| {
                    let bits = xorshift(&mut seed) % spread;
                    xorshift(&mut seed) % (1u64 << bits).max(2)
                })
                .collect();
            let mut s = Stat::default();
            vals.iter().for_each(|&v| s.add(v));
            vals.sort_unstable();
            assert_eq!(s.n, n as u64);
            assert_eq!(s.min, vals[0]);
            assert_eq!(s.max, vals[n - 1]);
            let sum: u128 = vals.iter().map(|&v| v as u128).sum();
            assert_eq!(s.sum, sum);
            for p in [1.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0] {
                let exact = vals[(nearest_rank(p, n as u64) - 1) as usize];
                let got = s.percentile(p).unwrap();
                let err = got.abs_diff(exact) as f64;
                assert!(
                    err <= exact as f64 * MAX_RELATIVE_ERROR,
                    "case {case} p{p}: {got} vs exact {exact} (n {n})"
                );
                if exact < 256 {
                    assert_eq!(got, exact, "case {case} p{p}");
                }
            }
        }
    }

    #[test]
    fn nearest_rank_is_btt_style_ceil() {
        assert_eq!(nearest_rank(50.0, 1), 1);
        assert_eq!(nearest_rank(50.0, 2), 1);
        assert_eq!(nearest_rank(50.0, 3), 2);
        assert_eq!(nearest_rank(99.0, 100), 99);
        assert_eq!(nearest_rank(99.0, 101), 100);
        assert_eq!(nearest_rank(100.0, 7), 7);
    }

    #[test]
    fn merge_equals_adding_everything() {
        let mut seed = 12345;
        let (mut a, mut b, mut both) = (Stat::default(), Stat::default(), Stat::default());
        for i in 0..10_000 {
            let v = xorshift(&mut seed) % (1 << (i % 30));
            if i % 3 == 0 { &mut a } else { &mut b }.add(v);
            both.add(v);
        }
        a.merge(&b);
        assert_eq!(a, both);
        assert_eq!(Stat::default().percentile(50.0), None);
    }

    /// Memory is flat: ten million values in a realistic range use a fixed number of buckets.
    #[test]
    fn memory_is_flat_in_the_number_of_values() {
        let mut s = Stat::default();
        let mut seed = 7;
        for _ in 0..2_000_000 {
            s.add(1_000 + xorshift(&mut seed) % 1_000_000_000);
        }
        // The buckets between those of the range's ends, whatever the number of values.
        let range = (index(1_000_001_000) - index(1_000) + 1) as usize;
        assert!(s.buckets() <= range);
        for _ in 0..2_000_000 {
            s.add(1_000 + xorshift(&mut seed) % 1_000_000_000);
        }
        assert!(s.buckets() <= range);
        assert!(range < 2_700, "{range}");
    }
}
