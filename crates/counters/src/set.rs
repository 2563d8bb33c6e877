//! A set of counters and the per-act histograms they fill.

use std::path::Path;

use ioblame_attrib::{ActId, Io};
use ioblame_format::BlockDevice;

use crate::context::IoContext;
use crate::devs::DevSelection;
use crate::error::{CountersError, Location};
use crate::spec::{CounterSpec, SLOTS};

/// The most counters one set may hold.
pub const MAX_COUNTERS: usize = 64;

/// The counters used when none is given: IO sizes, wait times and device times for reads,
/// readahead and writes separately, then read (with readahead) and write offsets.
///
/// Sizes are in bytes, times in µs, offsets in 1/65536 of the device (eighths of the device).
pub const DEFAULT_COUNTERS: &[&str] = &[
    "R size 0 4096 8192 16384 32768 65536 131072 524288 0",
    "A size 0 4096 8192 16384 32768 65536 131072 524288 0",
    "W size 0 4096 8192 16384 32768 65536 131072 524288 0",
    "R wait_time 0 100 250 500 1000 2500 10000 50000 0",
    "A wait_time 0 100 250 500 1000 2500 10000 50000 0",
    "W wait_time 0 100 250 500 1000 2500 10000 50000 0",
    "R io_time 0 100 250 500 1000 2500 10000 50000 0",
    "A io_time 0 100 250 500 1000 2500 10000 50000 0",
    "W io_time 0 100 250 500 1000 2500 10000 50000 0",
    "RA offset 0 8192 16384 24576 32768 40960 49152 57344 0",
    "W offset 0 8192 16384 24576 32768 40960 49152 57344 0",
];

/// One eight-slot histogram.
pub type Histogram = [u64; SLOTS];

/// Counters and their per-act histograms (one histogram per counter per act).
///
/// Counts are `u64` (ioblame's were `u32`).
#[derive(Debug, Clone)]
pub struct CounterSet {
    specs: Vec<CounterSpec>,
    devs: DevSelection,
    /// `counts[act * specs.len() + counter]`.
    counts: Vec<Histogram>,
    /// Bit per act: an IO charged to it was recorded (on a selected device).
    used: Vec<u64>,
}

impl CounterSet {
    /// A set of the given counters, recording IO of every device.
    pub fn from_specs(specs: Vec<CounterSpec>) -> Result<CounterSet, CountersError> {
        if specs.is_empty() {
            return Err(CountersError::Empty {
                what: "counters".to_string(),
            });
        }
        if specs.len() > MAX_COUNTERS {
            return Err(CountersError::TooMany {
                count: specs.len(),
                max: MAX_COUNTERS,
            });
        }
        Ok(CounterSet {
            specs,
            devs: DevSelection::all(),
            counts: Vec::new(),
            used: Vec::new(),
        })
    }

    /// Parses counters given on the command line, one spec per argument (`counter N` in
    /// errors, 1-based). With no argument, the [default set](DEFAULT_COUNTERS).
    pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<CounterSet, CountersError> {
        if args.is_empty() {
            return Ok(CounterSet::default_set());
        }
        if args.len() > MAX_COUNTERS {
            return Err(CountersError::TooMany {
                count: args.len(),
                max: MAX_COUNTERS,
            });
        }
        let specs = args
            .iter()
            .enumerate()
            .map(|(n, a)| CounterSpec::parse(a.as_ref(), Location::Counter(n + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        CounterSet::from_specs(specs)
    }

    /// Reads counters from a file: one spec per line, blank lines and `#` comments (whole
    /// lines, or the rest of a line from a `#` outside quotes) ignored. Errors are located
    /// as `FILE:LINE, column C`.
    pub fn parse_file(path: impl AsRef<Path>) -> Result<CounterSet, CountersError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CountersError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        CounterSet::parse_text(&text, path)
    }

    /// Parses the contents of a counters file; `path` only names it in errors.
    pub fn parse_text(text: &str, path: impl AsRef<Path>) -> Result<CounterSet, CountersError> {
        let path = path.as_ref();
        let mut specs = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = strip_comment(line.strip_suffix('\r').unwrap_or(line));
            if line.trim().is_empty() {
                continue;
            }
            if specs.len() == MAX_COUNTERS {
                return Err(CountersError::TooMany {
                    count: specs.len() + 1,
                    max: MAX_COUNTERS,
                });
            }
            let location = Location::File {
                path: path.to_path_buf(),
                line: n + 1,
            };
            specs.push(CounterSpec::parse(line, location)?);
        }
        if specs.is_empty() {
            return Err(CountersError::Empty {
                what: path.display().to_string(),
            });
        }
        CounterSet::from_specs(specs)
    }

    /// The [default counters](DEFAULT_COUNTERS).
    pub fn default_set() -> CounterSet {
        let specs = DEFAULT_COUNTERS
            .iter()
            .enumerate()
            .map(|(n, s)| {
                CounterSpec::parse(s, Location::Counter(n + 1))
                    .expect("the default counters are valid (checked by a test)")
            })
            .collect();
        CounterSet {
            specs,
            devs: DevSelection::all(),
            counts: Vec::new(),
            used: Vec::new(),
        }
    }

    /// Records only IO of the selected devices from now on.
    pub fn with_devs(mut self, devs: DevSelection) -> CounterSet {
        self.devs = devs;
        self
    }

    /// The device names the counters' filters compare `dev` with (in counter order), which
    /// [`resolve_devices`](Self::resolve_devices) must resolve.
    pub fn device_names(&self) -> Vec<&str> {
        self.specs
            .iter()
            .filter_map(|s| s.filter.as_ref())
            .flat_map(|f| f.device_names())
            .collect()
    }

    /// Resolves the device names of the filters (`dev == sda`) against the trace's device
    /// table, as `--devs` does. Call it once the trace is open, before recording; until
    /// then a name matches no device. Fails on the first unknown name, naming its counter.
    pub fn resolve_devices(&mut self, devices: &[BlockDevice]) -> Result<(), CountersError> {
        for (i, spec) in self.specs.iter_mut().enumerate() {
            if let Some(f) = spec.filter.as_mut() {
                f.resolve_devices(devices)
                    .map_err(|source| CountersError::Device {
                        counter: i + 1,
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// Resolves the cgroup paths of the filters (`cgroup == /a/b`) against the trace's
    /// cgroup table (id, path). Fails, naming the counter, when a filter compares `cgroup`
    /// and the table is empty (the trace recorded no cgroups).
    pub fn resolve_cgroups(&mut self, cgroups: &[(u64, &str)]) -> Result<(), CountersError> {
        for (i, spec) in self.specs.iter_mut().enumerate() {
            if let Some(f) = spec.filter.as_mut() {
                if cgroups.is_empty() && f.uses_cgroup() {
                    return Err(CountersError::NoCgroups { counter: i + 1 });
                }
                f.resolve_cgroups(cgroups);
            }
        }
        Ok(())
    }

    /// The device selection.
    pub fn devs(&self) -> &DevSelection {
        &self.devs
    }

    /// The counters.
    pub fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// Number of counters.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether the set has no counter (never true for a set built by this crate).
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Makes room for acts `0..n` so that [`record`](Self::record) never allocates for them.
    pub fn reserve_acts(&mut self, n: usize) {
        let need = n.saturating_mul(self.specs.len());
        if self.counts.len() < need {
            self.counts.resize(need, [0; SLOTS]);
        }
        let words = n.div_ceil(64);
        if self.used.len() < words {
            self.used.resize(words, 0);
        }
    }

    /// Counts an IO in every counter that records it, in the histograms of act `io.act`.
    ///
    /// Allocates only the first time an act id beyond those seen (or reserved) appears.
    #[inline]
    pub fn record(&mut self, io: &Io, ctx: &IoContext<'_>) {
        // A lower layer's copy (a loop device's backing file) is the act's IO again: each
        // act's IO is counted once, on the device above.
        if !self.devs.enabled(io.dev) || io.lower {
            return;
        }
        let a = io.act.index();
        if self.used.len() <= a / 64 {
            self.used.resize(a / 64 + 1, 0);
        }
        self.used[a / 64] |= 1 << (a % 64);
        let n = self.specs.len();
        let Some(end) = (io.act.index())
            .checked_mul(n)
            .and_then(|b| b.checked_add(n))
        else {
            return;
        };
        let base = end - n;
        for (c, spec) in self.specs.iter().enumerate() {
            if let Some(slot) = spec.classify(io, ctx) {
                if self.counts.len() < end {
                    self.counts.resize(end, [0; SLOTS]);
                }
                self.counts[base + c][slot] += 1;
            }
        }
    }

    /// Adds the counts of `other`, a set with the same counters (e.g. filled by another
    /// thread over other IOs). Returns `false`, changing nothing, when the counters differ in
    /// number.
    pub fn merge(&mut self, other: &CounterSet) -> bool {
        if other.specs.len() != self.specs.len() {
            return false;
        }
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), [0; SLOTS]);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += *y;
            }
        }
        if self.used.len() < other.used.len() {
            self.used.resize(other.used.len(), 0);
        }
        for (a, b) in self.used.iter_mut().zip(&other.used) {
            *a |= *b;
        }
        true
    }

    /// The histograms of an act, one per counter (all zero for an act never counted).
    pub fn act_histograms(&self, act: ActId) -> &[Histogram] {
        let n = self.specs.len();
        let base = (act.index()).saturating_mul(n);
        self.counts
            .get(base..base.saturating_add(n))
            .unwrap_or(&ZEROS[..n.min(MAX_COUNTERS)])
    }

    /// One histogram of an act (`None` when `counter` is out of range).
    pub fn histogram(&self, act: ActId, counter: usize) -> Option<&Histogram> {
        self.act_histograms(act).get(counter)
    }

    /// Whether an act has at least one nonzero count.
    pub fn is_counted(&self, act: ActId) -> bool {
        self.act_histograms(act).iter().flatten().any(|&c| c != 0)
    }

    /// Whether an act was used: an IO charged to it was recorded (on a selected device),
    /// whether or not a counter counted it. The outputs list the acts used, as ioblame's
    /// `counters_pipe` listed "all acts which have been used".
    pub fn is_used(&self, act: ActId) -> bool {
        let a = act.index();
        self.used
            .get(a / 64)
            .is_some_and(|w| w & (1 << (a % 64)) != 0)
            || self.is_counted(act)
    }

    /// Number of acts with room in the histogram table or the used bits (acts at or beyond
    /// it are all zero and unused).
    pub fn act_capacity(&self) -> usize {
        let counted = self.counts.len().checked_div(self.specs.len()).unwrap_or(0);
        counted.max(self.used.len() * 64)
    }
}

static ZEROS: [Histogram; MAX_COUNTERS] = [[0; SLOTS]; MAX_COUNTERS];

/// `line` without a `#` comment (a `#` inside single or double quotes is kept).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments() {
        assert_eq!(strip_comment("# all"), "");
        assert_eq!(strip_comment("R size 0 # x"), "R size 0 ");
        assert_eq!(
            strip_comment("R if comm == \"a#b\" # c"),
            "R if comm == \"a#b\" "
        );
        assert_eq!(strip_comment("R if comm == 'a#b'"), "R if comm == 'a#b'");
    }

    #[test]
    fn default_set_is_valid() {
        for (n, s) in DEFAULT_COUNTERS.iter().enumerate() {
            CounterSpec::parse(s, Location::Counter(n + 1)).unwrap();
        }
        assert_eq!(CounterSet::default_set().len(), DEFAULT_COUNTERS.len());
    }
}
