//! The baseline: groups of acts under stable keys, their metrics and the tolerances.

use std::collections::BTreeMap;

use ioblame_attrib::{ActTotals, Dir, Intent, Role, Via, WbReason};
use ioblame_counters::{CounterSpec, Location, SLOTS};

use crate::error::{BaselineError, InputError};
use crate::keys::{file_pattern, frame_name, intent_frames, role_pattern, user_key, ReasonClass};
use crate::tolerances::Tolerances;

/// Version of the baseline file format written by this crate.
pub const FORMAT_VERSION: u32 = 1;

/// Most frames an intent key (`[keys] frames`) or a user key (`[keys] user_frames`) may
/// hold.
pub(crate) const MAX_FRAMES: usize = 64;

/// One act of the attribution, as the driver hands it over (see the crate docs).
#[derive(Debug, Clone)]
pub struct ActInput<'a> {
    /// The role charged (only its `comm` is used: pids change between runs).
    pub role: &'a Role,
    /// The intent (only its modifier is used, when `reason` is `None`).
    pub intent: &'a Intent,
    /// The intent's stack, symbolized, innermost first (`name+0xoff/0xsize`, bare names or
    /// raw addresses are all accepted).
    pub frames: Vec<String>,
    /// The intent's user frames that name the application, innermost first: those
    /// `ioblame_attrib::names::application_frames` selects, each labelled by
    /// `ioblame_attrib::names::user_frame_label` (the function's name, or `MODULE+0xOFFSET`
    /// unsymbolized). Empty without user frames (a recording without `--user-stacks`).
    pub user: Vec<String>,
    /// The file's path where the trace names it.
    pub file_path: Option<String>,
    /// How the act's IOs were linked.
    pub via: Via,
    /// The writeback reason of the intent (`None`: taken from the intent's modifier).
    pub reason: Option<WbReason>,
    /// Whether the act belongs to the recorder itself (such acts are skipped).
    pub recorder: bool,
    /// Bytes and IOs per direction.
    pub totals: ActTotals,
    /// Bytes of the act's writes whose rwbs has `S`.
    pub sync_write_bytes: u64,
    /// One histogram per counter, in the order of the counter specs.
    pub histograms: Vec<[u64; SLOTS]>,
    /// The Q2C of the act's IOs, summed (ns), as `ioblame blame` splits them; 0 when not
    /// measured (no `behind_share` for its group then).
    pub q2c_ns: u64,
    /// The part of `q2c_ns` its IOs spent waiting behind other requests on their devices
    /// (neither their own service nor idle).
    pub behind_ns: u64,
}

/// The words used for a direction in messages.
pub(crate) fn dir_word(d: Dir) -> &'static str {
    match d {
        Dir::R => "read",
        Dir::A => "readahead",
        Dir::W => "write",
    }
}

/// How unattributed IO (via `unknown`, the lost intent) is judged (`[defaults]
/// unattributed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unattributed {
    /// `"pool"`: unattributed bytes are a pool that explains changes of the groups whose IO
    /// writeback links to a dirtier (via page, buffer or inode): a group losing bytes that
    /// the unattributed IO gained is not a regression. For noisy real captures, where
    /// writeback links a varying share of pages to their dirtiers from run to run.
    #[default]
    Pool,
    /// `"strict"`: unattributed IO is compared like any other group (`kworker/* via
    /// unknown`), and explains nothing: a writer whose bytes went unattributed has vanished.
    /// For deterministic inputs and for catching an analyzer that loses attribution.
    Strict,
}

impl Unattributed {
    /// The name used in the baseline file.
    pub fn name(self) -> &'static str {
        match self {
            Unattributed::Pool => "pool",
            Unattributed::Strict => "strict",
        }
    }

    /// The mode by its name.
    pub fn from_name(s: &str) -> Option<Unattributed> {
        match s {
            "pool" => Some(Unattributed::Pool),
            "strict" => Some(Unattributed::Strict),
            _ => None,
        }
    }
}

/// The global settings of a baseline (`[defaults]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    /// Absolute significance floor in bytes.
    pub min_bytes: u64,
    /// Relative significance floor, a share of the run's total bytes.
    pub min_share: f64,
    /// IOs needed on both sides before average IO sizes and histogram shapes are compared.
    pub min_ios: u64,
    /// How unattributed IO is judged.
    pub unattributed: Unattributed,
    /// The tolerances (every key set).
    pub tolerances: Tolerances,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            min_bytes: 256 * 1024,
            min_share: 0.01,
            min_ios: 32,
            unattributed: Unattributed::Pool,
            tolerances: Tolerances::recommended(),
        }
    }
}

impl Defaults {
    /// Settings for a deterministic input (a committed trace analysed again by a changed
    /// analyzer): no significance floor, every group and IO count compared, unattributed IO
    /// [strict](Unattributed::Strict), [exact tolerances](Tolerances::exact).
    pub fn exact() -> Defaults {
        Defaults {
            min_bytes: 0,
            min_share: 0.0,
            min_ios: 1,
            unattributed: Unattributed::Strict,
            tolerances: Tolerances::exact(),
        }
    }

    /// The significance floor for runs of these total byte counts:
    /// `max(min_bytes, min_share * max(totals))`.
    pub fn floor(&self, totals: &[u64]) -> u64 {
        let t = totals.iter().copied().max().unwrap_or(0);
        self.min_bytes.max((self.min_share * t as f64) as u64)
    }
}

/// A counter of the baseline.
#[derive(Debug, Clone)]
pub struct Counter {
    /// The normalized spec text (what counters are matched by).
    pub spec: String,
    /// The parsed spec.
    pub parsed: CounterSpec,
}

impl Counter {
    /// Parses a spec (`n`: 1-based number for errors).
    pub fn parse(text: &str, n: usize) -> Result<Counter, ioblame_counters::SpecError> {
        let parsed = CounterSpec::parse(text, Location::Counter(n))?;
        Ok(Counter {
            spec: parsed.to_string(),
            parsed,
        })
    }
}

/// The key a group is matched by. Strings may be globs in a hand-edited baseline.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// Role pattern ([`crate::keys::role_pattern`]).
    pub role: String,
    /// How the IOs were linked.
    pub via: ViaKey,
    /// Writeback reason class.
    pub reason: ReasonClass,
    /// File pattern ([`crate::keys::file_pattern`]), `-` when unknown.
    pub file: String,
    /// Intent frames ([`crate::keys::intent_frames`]), innermost first.
    pub frames: Vec<String>,
    /// The application's frames ([`crate::keys::user_key`]), innermost first: empty without
    /// user frames, and in baselines that keep none (`[keys] user_frames = 0`, every file
    /// written before user frames were keyed).
    pub user: Vec<String>,
}

/// [`Via`] with an order and the names of the file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViaKey(pub u8);

impl ViaKey {
    /// The key of a via.
    pub fn of(v: Via) -> ViaKey {
        ViaKey(v.index() as u8)
    }
    /// The via.
    pub fn via(self) -> Via {
        Via::ALL
            .get(self.0 as usize)
            .copied()
            .unwrap_or(Via::Unknown)
    }
    /// The via by name.
    pub fn from_name(s: &str) -> Option<ViaKey> {
        Via::from_name(s).map(ViaKey::of)
    }
    /// The name.
    pub fn name(self) -> &'static str {
        self.via().name()
    }
}

/// A histogram of a group, as proportions.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupHist {
    /// Index of the counter in [`Baseline::counters`].
    pub counter: usize,
    /// IOs counted.
    pub n: u64,
    /// Proportion of IOs per slot (sums to 1).
    pub p: [f64; SLOTS],
}

/// One group: the acts that share a key, with their metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// A readable label used in messages (editable; not part of the key).
    pub name: String,
    /// The key.
    pub key: GroupKey,
    /// Bytes per direction (R, A, W).
    pub bytes: [u64; 3],
    /// IOs per direction (R, A, W).
    pub ios: [u64; 3],
    /// Share of write bytes whose requests had `S`.
    pub sync_write_share: f64,
    /// Share of its IOs' Q2C spent waiting behind other requests (`ioblame blame`); `None`
    /// when not measured (a file written before, or IOs of no device time).
    pub behind_share: Option<f64>,
    /// Histogram shapes, for counters that counted at least one IO.
    pub hist: Vec<GroupHist>,
    /// Per-group tolerance overrides.
    pub tolerance: Tolerances,
}

impl Group {
    /// Bytes over all directions.
    pub fn total_bytes(&self) -> u64 {
        sat_sum(self.bytes.iter().copied())
    }
    /// Whether the group holds unattributed IO (the lost intent).
    pub fn is_unknown(&self) -> bool {
        self.key.via.via() == Via::Unknown
    }

    /// The group's bytes, IOs and sync-write bytes as a [`Sum`] (without histograms).
    pub(crate) fn sum(&self) -> Sum {
        Sum {
            bytes: self.bytes,
            ios: self.ios,
            sync_write_bytes: (self.sync_write_share * self.bytes[Dir::W.index()] as f64).round()
                as u64,
            hist: Vec::new(),
            ..Sum::default()
        }
    }
}

/// Options of [`Baseline::build`].
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Frames kept in intent keys.
    pub frames: usize,
    /// The application's frames kept in user keys when the inputs have user frames (2: the
    /// function that did the IO and its caller, or a helper and the function that called
    /// it); a baseline of inputs without user frames keeps none
    /// ([`Baseline::user_frames`]).
    pub user_frames: usize,
    /// Global settings and tolerances written into the baseline.
    pub defaults: Defaults,
    /// Groups smaller than this fraction of the significance floor are left out of the file
    /// (they could never be compared); `0.0` keeps every group.
    pub keep_fraction: f64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            frames: 4,
            user_frames: 2,
            defaults: Defaults::default(),
            keep_fraction: 0.125,
        }
    }
}

/// A baseline: what a trace showed, grouped by stable keys, and how much may change.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Frames kept in intent keys (the check normalises its trace the same way).
    pub frames: usize,
    /// The application's frames kept in user keys ([`GroupKey::user`]); the check
    /// normalises its trace the same way. 0 (no user keys) when the baseline's trace had no
    /// user frames, and in files written before user frames were keyed: their groups stay
    /// as they were, whatever the traces checked against them hold.
    pub user_frames: usize,
    /// Global settings and tolerances.
    pub defaults: Defaults,
    /// The counters the histograms belong to.
    pub counters: Vec<Counter>,
    /// Total bytes of the trace per direction (R, A, W), left-out groups included.
    pub total_bytes: [u64; 3],
    /// The groups, largest first.
    pub groups: Vec<Group>,
    /// Whether the intents were symbolized (function names). `false` when the trace had no
    /// kernel symbols (every frame `?`): such a baseline cannot tell code paths apart, and a
    /// trace is only comparable with it when it lacks symbols too (see [`crate::check`]).
    pub symbolized: bool,
    /// The scope of the trace's IO the baseline describes (`workload`, `all`, `pid:N`,
    /// `cgroup:PATH`, as `ioblame --scope` names it); `None` in files written before scopes
    /// existed (their IO is all of the trace). `check` uses it unless told another.
    pub scope: Option<String>,
}

/// The acts of one trace summed by key (shared by build and check).
#[derive(Debug, Clone, Default)]
pub(crate) struct Sum {
    pub bytes: [u64; 3],
    pub ios: [u64; 3],
    pub sync_write_bytes: u64,
    /// Per counter (of the trace's own counter list).
    pub hist: Vec<[u64; SLOTS]>,
    /// The Q2C of the IOs (ns) and its part behind other requests.
    pub q2c_ns: u64,
    pub behind_ns: u64,
}

impl Sum {
    pub fn total(&self) -> u64 {
        sat_sum(self.bytes.iter().copied())
    }

    /// Adds `other`, histograms included.
    pub fn add(&mut self, other: &Sum) {
        self.add_counts(other);
        if self.hist.len() < other.hist.len() {
            self.hist.resize(other.hist.len(), [0; SLOTS]);
        }
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            for (x, y) in a.iter_mut().zip(b) {
                *x = x.saturating_add(*y);
            }
        }
    }

    /// Adds the bytes, IOs and sync-write bytes of `other`, not its histograms.
    pub fn add_counts(&mut self, other: &Sum) {
        for i in 0..3 {
            self.bytes[i] = self.bytes[i].saturating_add(other.bytes[i]);
            self.ios[i] = self.ios[i].saturating_add(other.ios[i]);
        }
        self.sync_write_bytes = self.sync_write_bytes.saturating_add(other.sync_write_bytes);
        self.q2c_ns = self.q2c_ns.saturating_add(other.q2c_ns);
        self.behind_ns = self.behind_ns.saturating_add(other.behind_ns);
    }

    /// The share of the IOs' Q2C spent behind other requests, when measured.
    pub fn behind_share(&self) -> Option<f64> {
        (self.q2c_ns > 0).then(|| self.behind_ns.min(self.q2c_ns) as f64 / self.q2c_ns as f64)
    }

    pub fn sync_share(&self) -> f64 {
        let w = self.bytes[Dir::W.index()];
        if w == 0 {
            0.0
        } else {
            (self.sync_write_bytes.min(w)) as f64 / w as f64
        }
    }
}

/// A sum that saturates instead of overflowing (hand-edited files may hold anything).
pub(crate) fn sat_sum(it: impl Iterator<Item = u64>) -> u64 {
    it.fold(0, u64::saturating_add)
}

/// Adds bytes per direction to `to` (saturating).
pub(crate) fn add_bytes(to: &mut [u64; 3], bytes: &[u64; 3]) {
    for (t, b) in to.iter_mut().zip(bytes) {
        *t = t.saturating_add(*b);
    }
}

/// A byte count as a signed amount (saturating).
pub(crate) fn si(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Parses counter spec texts.
pub(crate) fn parse_counters<S: AsRef<str>>(specs: &[S]) -> Result<Vec<Counter>, BaselineError> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| Counter::parse(s.as_ref(), i + 1).map_err(BaselineError::Counter))
        .collect()
}

/// Sums the inputs by key (recorder acts skipped), with `frames` kernel frames and
/// `user_frames` user frames kept in the keys.
pub(crate) fn sum_inputs(
    inputs: &[ActInput<'_>],
    n_counters: usize,
    frames: usize,
    user_frames: usize,
) -> Result<BTreeMap<GroupKey, Sum>, BaselineError> {
    let mut out: BTreeMap<GroupKey, Sum> = BTreeMap::new();
    for (i, a) in inputs.iter().enumerate() {
        if a.recorder {
            continue;
        }
        if a.histograms.len() != n_counters && !a.histograms.is_empty() {
            return Err(BaselineError::Input(InputError::Histograms {
                act: i,
                histograms: a.histograms.len(),
                counters: n_counters,
            }));
        }
        let reason = match a.reason {
            Some(r) => ReasonClass::of(Some(r)),
            None => ReasonClass::of_modifier(a.intent.modifier),
        };
        let key = GroupKey {
            role: role_pattern(&a.role.comm),
            via: ViaKey::of(a.via),
            reason,
            file: file_pattern(a.file_path.as_deref()),
            frames: intent_frames(&a.frames, frames),
            user: user_key(&a.user, user_frames),
        };
        let s = out.entry(key).or_default();
        s.add(&Sum {
            bytes: a.totals.bytes,
            ios: a.totals.ios,
            sync_write_bytes: a.sync_write_bytes,
            hist: a.histograms.clone(),
            q2c_ns: a.q2c_ns,
            behind_ns: a.behind_ns,
        });
    }
    Ok(out)
}

/// Whether the inputs' stacks were symbolized: `Some(false)` when they have frames and none
/// of them resolved to a function name, `Some(true)` when one did, `None` without frames
/// (a recording without callchains).
pub fn inputs_symbolized(inputs: &[ActInput<'_>]) -> Option<bool> {
    let mut any = false;
    for a in inputs.iter().filter(|a| !a.recorder) {
        for f in &a.frames {
            any = true;
            if frame_name(f) != "?" {
                return Some(true);
            }
        }
    }
    any.then_some(false)
}

/// Proportions of a histogram (all zero for an empty one).
pub(crate) fn proportions(h: &[u64; SLOTS]) -> [f64; SLOTS] {
    let n = sat_sum(h.iter().copied());
    let mut p = [0.0; SLOTS];
    if n > 0 {
        for (o, &c) in p.iter_mut().zip(h) {
            *o = c as f64 / n as f64;
        }
    }
    p
}

/// Whether any input (the recorder's aside) has user frames.
pub(crate) fn inputs_have_user_frames(inputs: &[ActInput<'_>]) -> bool {
    inputs.iter().any(|a| !a.recorder && !a.user.is_empty())
}

/// The role of a key as labels say it: with the application's function that did the IO
/// when the key has user frames (`iowork in wal_append`), else the role alone.
pub(crate) fn role_label(k: &GroupKey) -> String {
    match k.user.first() {
        Some(f) => format!("{} in {f}", k.role),
        None => k.role.clone(),
    }
}

/// The readable label of a key.
pub(crate) fn key_label(k: &GroupKey) -> String {
    let mut s = format!("{} via {}", role_label(k), k.via.name());
    if k.reason != ReasonClass::None {
        s.push_str(&format!(" ({} writeback)", k.reason));
    }
    if k.file != "-" {
        s.push_str(" on ");
        s.push_str(&k.file);
    }
    s
}

impl Baseline {
    /// Builds a baseline from the acts of a trace and the counter specs their histograms
    /// follow (one histogram per spec per act, or none).
    pub fn build<S: AsRef<str>>(
        inputs: &[ActInput<'_>],
        counter_specs: &[S],
        opts: &BuildOptions,
    ) -> Result<Baseline, BaselineError> {
        let counters = parse_counters(counter_specs)?;
        let frames = opts.frames.max(1);
        let user_frames = if inputs_have_user_frames(inputs) {
            opts.user_frames.min(MAX_FRAMES)
        } else {
            0
        };
        let sums = sum_inputs(inputs, counters.len(), frames, user_frames)?;
        let mut total_bytes = [0u64; 3];
        for s in sums.values() {
            add_bytes(&mut total_bytes, &s.bytes);
        }
        let floor = opts.defaults.floor(&[sat_sum(total_bytes.iter().copied())]);
        let keep = (floor as f64 * opts.keep_fraction.max(0.0)) as u64;
        let mut groups: Vec<Group> = sums
            .into_iter()
            .filter(|(_, s)| s.total() > 0 && s.total() >= keep)
            .map(|(key, s)| Group {
                name: key_label(&key),
                bytes: s.bytes,
                ios: s.ios,
                sync_write_share: s.sync_share(),
                behind_share: s.behind_share(),
                hist: s
                    .hist
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.iter().any(|&c| c > 0))
                    .map(|(i, h)| GroupHist {
                        counter: i,
                        n: sat_sum(h.iter().copied()),
                        p: proportions(h),
                    })
                    .collect(),
                tolerance: Tolerances::default(),
                key,
            })
            .collect();
        groups.sort_by(|a, b| {
            b.total_bytes()
                .cmp(&a.total_bytes())
                .then_with(|| a.key.cmp(&b.key))
        });
        // Distinct names: same role, via, reason, file and leading user function with other
        // frames get `#2`, ...
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for g in &mut groups {
            let n = seen.entry(g.name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                g.name = format!("{} #{}", g.name, n);
            }
        }
        let mut defaults = opts.defaults.clone();
        defaults.tolerances = defaults.tolerances.or(&Tolerances::recommended());
        Ok(Baseline {
            frames,
            user_frames,
            defaults,
            counters,
            total_bytes,
            groups,
            symbolized: inputs_symbolized(inputs) != Some(false),
            scope: None,
        })
    }

    /// Total bytes over all directions.
    pub fn total(&self) -> u64 {
        sat_sum(self.total_bytes.iter().copied())
    }
}
