//! The baseline file: a TOML document written for people to read and edit.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ioblame_counters::SLOTS;
use serde::Deserialize;
use toml::Spanned;

use crate::error::{line_col, BaselineError, FileProblem};
use crate::keys::ReasonClass;
use crate::model::{
    add_bytes, Baseline, Counter, Defaults, Group, GroupHist, GroupKey, Unattributed, ViaKey,
    FORMAT_VERSION, MAX_FRAMES,
};
use crate::tolerances::{Tol, Tolerances, TOLERANCE_KEYS};

/// What each tolerance means, as written next to it in `[defaults]`.
fn tolerance_comment(key: &str) -> &'static str {
    match key {
        "read_bytes" => {
            "factor: bytes may grow x(1+t) or shrink /(1+t); reads depend on the page cache"
        }
        "readahead_bytes" => "readahead windows adapt to timing: loose",
        "write_bytes" => "what the application writes is the most stable metric",
        "read_io_size" => {
            "average bytes per IO, same factor; catches reads that turned small/random"
        }
        "readahead_io_size" => "",
        "write_io_size" => "IO counts jitter with merging: fails only past 2.5x",
        "sync_write_share" => {
            "absolute change of the share of write bytes with S (0.15 = 15 points)"
        }
        "behind_share" => {
            "growth of the share of Q2C spent behind other IO (ioblame blame; 0.1 = 10 points)"
        }
        "hist_size" => "histogram shapes: earth mover's distance in slots, or \"off\"",
        "hist_offset" => "where on the device: host and filesystem state, not the application",
        "hist_seek_dist" => "",
        "hist_wait_time" => "timing: the CI host's load, not the application",
        "hist_io_time" => "",
        _ => "",
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(o, "\\u{:04X}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A float as a TOML float, with at most `dec` decimals and at least one.
fn toml_float(v: f64, dec: usize) -> String {
    let mut s = format!("{v:.dec$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.push('0');
        }
    }
    if s == "-0.0" {
        s = "0.0".into();
    }
    s
}

/// Decimals of the proportions of a histogram of `n` IOs: 3, or enough that two different
/// counts never round to the same proportion (the check rounds the trace's proportions the
/// same way, so an unchanged histogram compares as exactly equal).
pub(crate) fn hist_decimals(n: u64) -> usize {
    let digits = n.max(1).ilog10() as usize + 1;
    (digits + 1).clamp(3, 12)
}

/// `v` rounded to `dec` decimals as the file writes and reads it back.
pub(crate) fn rounded(v: f64, dec: usize) -> f64 {
    toml_float(v, dec).parse().unwrap_or(v)
}

/// A tolerance as TOML.
fn toml_tol(t: Tol) -> String {
    match t {
        Tol::Off => "\"off\"".to_string(),
        Tol::Value(v) => toml_float(v, 4),
    }
}

/// Bytes for people.
pub(crate) fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", b.round() as i64)
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

impl Baseline {
    /// The baseline as a commented TOML document (see `docs/ci-regression.md`).
    pub fn to_toml(&self) -> String {
        let mut o = String::new();
        let d = &self.defaults;
        let _ = writeln!(
            o,
            "# ioblame baseline: the IO behaviour a trace showed, grouped by stable keys.\n\
             # Made by `ioblame baseline`; checked by `ioblame check TRACE --baseline FILE`.\n\
             # Edit freely: tolerances here or per group (`tolerance.write_bytes = 0.10`, or \"off\"),\n\
             # globs in role/file (`*` any text, `?` one character). See docs/ci-regression.md."
        );
        let _ = writeln!(o, "version = {FORMAT_VERSION}\n");
        let _ = writeln!(o, "[keys]");
        let _ = writeln!(
            o,
            "frames = {}  # distinctive innermost frames kept in intent keys",
            self.frames
        );
        if self.user_frames > 0 {
            let _ = writeln!(
                o,
                "user_frames = {}  # the application's innermost frames kept in group keys (user = [...])",
                self.user_frames
            );
        }
        if !self.symbolized {
            let _ = writeln!(
                o,
                "symbols = false  # made without kernel symbols: every frame is \"?\""
            );
        }
        if let Some(scope) = &self.scope {
            let _ = writeln!(
                o,
                "scope = {}  # the trace's IO described (ioblame --scope); check uses it by default",
                toml_str(scope)
            );
        }
        o.push('\n');
        let _ = writeln!(o, "[defaults]");
        if *d == Defaults::exact() {
            let _ = writeln!(
                o,
                "# exact (`ioblame baseline --exact`): for a fixed input such as a committed trace; nothing may move"
            );
        }
        let _ = writeln!(
            o,
            "min_bytes = {}  # groups and changes below max(min_bytes, min_share * total bytes) are ignored",
            d.min_bytes
        );
        let _ = writeln!(o, "min_share = {}", toml_float(d.min_share, 6));
        let _ = writeln!(
            o,
            "min_ios = {}  # IO sizes and histograms are compared with at least this many IOs on both sides",
            d.min_ios
        );
        let _ = writeln!(
            o,
            "unattributed = \"{}\"  # \"pool\": unattributed bytes explain changes of writeback groups; \"strict\": compared like any group",
            d.unattributed.name()
        );
        let recommended = Tolerances::recommended();
        // A baseline without the wait behind others (written from a trace analysed without
        // it, or before it existed) writes no recommended tolerance for it: old files
        // round-trip.
        let blamed = self.groups.iter().any(|g| g.behind_share.is_some());
        for k in TOLERANCE_KEYS {
            if k == "behind_share" && !blamed && d.tolerances.get(k) == recommended.get(k) {
                continue;
            }
            if let Some(t) = d.tolerances.get(k) {
                // The reasoning is that of the recommended value: not written next to others.
                let c = if Some(t) == recommended.get(k) {
                    tolerance_comment(k)
                } else {
                    ""
                };
                if c.is_empty() {
                    let _ = writeln!(o, "{k} = {}", toml_tol(t));
                } else {
                    let _ = writeln!(o, "{k} = {}  # {c}", toml_tol(t));
                }
            }
        }
        let _ = writeln!(o, "\n[totals]  # the whole trace, small groups included");
        let _ = writeln!(o, "read_bytes = {}", self.total_bytes[0]);
        let _ = writeln!(o, "readahead_bytes = {}", self.total_bytes[1]);
        let _ = writeln!(o, "write_bytes = {}", self.total_bytes[2]);
        for (i, c) in self.counters.iter().enumerate() {
            let _ = writeln!(o, "\n[[counter]]  # {i}");
            let _ = writeln!(o, "spec = {}", toml_str(&c.spec));
        }
        for g in &self.groups {
            o.push('\n');
            write_group(&mut o, g);
        }
        o
    }

    /// Reads a baseline file. Errors name the line and column.
    pub fn from_toml(text: &str) -> Result<Baseline, BaselineError> {
        let doc: Doc = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => {
                let (line, column) = line_col(text, span.start);
                BaselineError::Parse {
                    line,
                    column,
                    problem: FileProblem::Toml(e.message().trim().to_string()),
                }
            }
            None => BaselineError::Invalid(e.message().trim().to_string()),
        })?;
        let at = |span: std::ops::Range<usize>, problem: FileProblem| {
            let (line, column) = line_col(text, span.start);
            BaselineError::Parse {
                line,
                column,
                problem,
            }
        };
        if *doc.version.get_ref() != FORMAT_VERSION {
            return Err(at(
                doc.version.span(),
                FileProblem::UnsupportedVersion {
                    version: *doc.version.get_ref(),
                    supported: FORMAT_VERSION,
                },
            ));
        }
        let frames = *doc.keys.frames.get_ref();
        if frames == 0 || frames > MAX_FRAMES {
            return Err(at(
                doc.keys.frames.span(),
                FileProblem::FramesRange { max: MAX_FRAMES },
            ));
        }
        // Files written before user frames were keyed have none: their groups stay whole.
        let user_frames = doc.keys.user_frames.as_ref().map_or(0, |u| *u.get_ref());
        if let Some(u) = doc
            .keys
            .user_frames
            .as_ref()
            .filter(|_| user_frames > MAX_FRAMES)
        {
            return Err(at(
                u.span(),
                FileProblem::UserFramesRange { max: MAX_FRAMES },
            ));
        }
        let mut defaults = Defaults::default();
        let mut tolerances = Tolerances::default();
        for (k, v) in &doc.defaults {
            match k.as_str() {
                "min_bytes" | "min_ios" => {
                    let n = v
                        .get_ref()
                        .as_integer()
                        .filter(|&n| n >= 0)
                        .ok_or_else(|| {
                            at(v.span(), FileProblem::NotWholeNumber { key: k.clone() })
                        })? as u64;
                    if k == "min_bytes" {
                        defaults.min_bytes = n;
                    } else {
                        defaults.min_ios = n;
                    }
                }
                "unattributed" => {
                    defaults.unattributed = v
                        .get_ref()
                        .as_str()
                        .and_then(Unattributed::from_name)
                        .ok_or_else(|| at(v.span(), FileProblem::UnattributedMode))?;
                }
                "min_share" => {
                    defaults.min_share = number(v.get_ref())
                        .filter(|x| (0.0..=1.0).contains(x))
                        .ok_or_else(|| at(v.span(), FileProblem::MinShare))?;
                }
                _ => {
                    if !TOLERANCE_KEYS.contains(&k.as_str()) {
                        return Err(at(v.span(), FileProblem::UnknownSetting { key: k.clone() }));
                    }
                    let t = tol_value(k, v).map_err(|p| at(v.span(), p))?;
                    tolerances.set(k, t);
                }
            }
        }
        // Keys left out of a hand-edited file keep the recommended values.
        defaults.tolerances = tolerances.or(&Tolerances::recommended());
        let mut counters = Vec::with_capacity(doc.counter.len());
        for (i, c) in doc.counter.iter().enumerate() {
            let parsed = Counter::parse(c.spec.get_ref(), i + 1).map_err(|e| {
                let span = c.spec.span();
                // Point into the string: one past the opening quote.
                let (line, column) = line_col(text, span.start);
                BaselineError::Parse {
                    line,
                    column: column + e.column,
                    problem: FileProblem::CounterSpec(e),
                }
            })?;
            counters.push(parsed);
        }
        let mut groups = Vec::with_capacity(doc.group.len());
        for g in doc.group {
            groups.push(group_from_doc(
                g,
                counters.len(),
                (frames, user_frames),
                &at,
            )?);
        }
        let mut total_bytes = [
            doc.totals.read_bytes,
            doc.totals.readahead_bytes,
            doc.totals.write_bytes,
        ];
        if total_bytes.iter().all(|&b| b == 0) {
            for g in &groups {
                add_bytes(&mut total_bytes, &g.bytes);
            }
        }
        // Files written before `symbols` existed: unsymbolized when every frame is `?`.
        let symbolized = doc.keys.symbols.unwrap_or_else(|| {
            let mut all = groups.iter().flat_map(|g| g.key.frames.iter()).peekable();
            all.peek().is_none() || all.any(|f| f != "?")
        });
        Ok(Baseline {
            frames,
            user_frames,
            defaults,
            counters,
            total_bytes,
            groups,
            symbolized,
            scope: doc.keys.scope,
        })
    }
}

/// Writes one `[[group]]`.
fn write_group(o: &mut String, g: &Group) {
    let k = &g.key;
    let _ = writeln!(o, "[[group]]");
    let _ = writeln!(o, "name = {}", toml_str(&g.name));
    let _ = writeln!(o, "role = {}", toml_str(&k.role));
    let _ = writeln!(o, "via = {}", toml_str(k.via.name()));
    let _ = writeln!(o, "reason = {}", toml_str(k.reason.name()));
    let _ = writeln!(o, "file = {}", toml_str(&k.file));
    let frames: Vec<String> = k.frames.iter().map(|f| toml_str(f)).collect();
    let _ = writeln!(o, "frames = [{}]", frames.join(", "));
    if !k.user.is_empty() {
        let user: Vec<String> = k.user.iter().map(|f| toml_str(f)).collect();
        let _ = writeln!(o, "user = [{}]", user.join(", "));
    }
    for (i, w) in ["read", "readahead", "write"].iter().enumerate() {
        if g.bytes[i] > 0 || g.ios[i] > 0 {
            let _ = writeln!(
                o,
                "{w}_bytes = {}  # {}",
                g.bytes[i],
                human_bytes(g.bytes[i] as f64)
            );
            let _ = writeln!(o, "{w}_ios = {}", g.ios[i]);
        }
    }
    if g.bytes[2] > 0 {
        let _ = writeln!(
            o,
            "sync_write_share = {}",
            toml_float(g.sync_write_share, 4)
        );
    }
    if let Some(b) = g.behind_share {
        let _ = writeln!(
            o,
            "behind_share = {}  # of its IOs' Q2C, behind other IO",
            toml_float(b, 4)
        );
    }
    if !g.hist.is_empty() {
        let _ = writeln!(o, "hist = [  # per counter: IOs counted, share per slot");
        for h in &g.hist {
            let dec = hist_decimals(h.n);
            let p: Vec<String> = h.p.iter().map(|&x| toml_float(x, dec)).collect();
            let _ = writeln!(
                o,
                "  {{ counter = {}, n = {}, p = [{}] }},",
                h.counter,
                h.n,
                p.join(", ")
            );
        }
        let _ = writeln!(o, "]");
    }
    for key in TOLERANCE_KEYS {
        if let Some(t) = g.tolerance.get(key) {
            let _ = writeln!(o, "tolerance.{key} = {}", toml_tol(t));
        }
    }
}

/// A TOML number as f64.
fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Float(f) if f.is_finite() => Some(*f),
        toml::Value::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

/// The value of tolerance `key` (one of [`TOLERANCE_KEYS`]): a number >= 0 or "off".
fn tol_value(key: &str, v: &Spanned<toml::Value>) -> Result<Tol, FileProblem> {
    match v.get_ref() {
        toml::Value::String(s) if s == "off" => Ok(Tol::Off),
        other => number(other)
            .filter(|x| *x >= 0.0)
            .map(Tol::Value)
            .ok_or_else(|| FileProblem::BadTolerance {
                key: key.to_string(),
            }),
    }
}

/// Converts a parsed `[[group]]`, checking what serde cannot (`frames`: `[keys] frames` and
/// `user_frames`).
fn group_from_doc(
    g: GroupDoc,
    n_counters: usize,
    (frames, user_frames): (usize, usize),
    at: &dyn Fn(std::ops::Range<usize>, FileProblem) -> BaselineError,
) -> Result<Group, BaselineError> {
    let via = ViaKey::from_name(g.via.get_ref()).ok_or_else(|| {
        at(
            g.via.span(),
            FileProblem::UnknownVia {
                via: g.via.get_ref().clone(),
            },
        )
    })?;
    if g.frames.get_ref().len() > frames {
        return Err(at(
            g.frames.span(),
            FileProblem::TooManyFrames {
                got: g.frames.get_ref().len(),
                max: frames,
            },
        ));
    }
    if g.user.get_ref().len() > user_frames {
        return Err(at(
            g.user.span(),
            FileProblem::TooManyUserFrames {
                got: g.user.get_ref().len(),
                max: user_frames,
            },
        ));
    }
    let share = *g.sync_write_share.get_ref();
    if !(0.0..=1.0).contains(&share) {
        return Err(at(g.sync_write_share.span(), FileProblem::SyncShare));
    }
    let behind = match &g.behind_share {
        Some(b) if !(0.0..=1.0).contains(b.get_ref()) => {
            return Err(at(b.span(), FileProblem::BehindShare));
        }
        Some(b) => Some(*b.get_ref()),
        None => None,
    };
    let mut hist = Vec::with_capacity(g.hist.len());
    for h in g.hist {
        let c = *h.counter.get_ref();
        if c >= n_counters {
            return Err(at(
                h.counter.span(),
                FileProblem::NoSuchCounter {
                    counter: c,
                    counters: n_counters,
                },
            ));
        }
        let v = h.p.get_ref();
        if v.len() != SLOTS || v.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(at(h.p.span(), FileProblem::Proportions));
        }
        // Kept as written (rounded); the check normalises.
        let mut p = [0.0; SLOTS];
        for (o, x) in p.iter_mut().zip(v) {
            *o = *x;
        }
        hist.push(GroupHist {
            counter: c,
            n: h.n,
            p,
        });
    }
    let mut tolerance = Tolerances::default();
    for (k, v) in &g.tolerance {
        if !TOLERANCE_KEYS.contains(&k.as_str()) {
            return Err(at(
                v.span(),
                FileProblem::UnknownTolerance { key: k.clone() },
            ));
        }
        tolerance.set(k, tol_value(k, v).map_err(|p| at(v.span(), p))?);
    }
    let key = GroupKey {
        role: g.role,
        via,
        reason: g.reason,
        file: g.file,
        frames: g.frames.into_inner(),
        user: g.user.into_inner(),
    };
    Ok(Group {
        name: g.name.unwrap_or_else(|| crate::model::key_label(&key)),
        key,
        bytes: [g.read_bytes, g.readahead_bytes, g.write_bytes],
        ios: [g.read_ios, g.readahead_ios, g.write_ios],
        sync_write_share: share,
        behind_share: behind,
        hist,
        tolerance,
    })
}

/// The document as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    version: Spanned<u32>,
    #[serde(default)]
    keys: KeysDoc,
    #[serde(default)]
    defaults: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    totals: TotalsDoc,
    #[serde(default)]
    counter: Vec<CounterDoc>,
    #[serde(default)]
    group: Vec<GroupDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysDoc {
    #[serde(default = "default_frames")]
    frames: Spanned<usize>,
    #[serde(default)]
    user_frames: Option<Spanned<usize>>,
    #[serde(default)]
    symbols: Option<bool>,
    #[serde(default)]
    scope: Option<String>,
}

impl Default for KeysDoc {
    fn default() -> Self {
        KeysDoc {
            frames: default_frames(),
            user_frames: None,
            symbols: None,
            scope: None,
        }
    }
}

fn default_frames() -> Spanned<usize> {
    Spanned::new(0..0, 4)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TotalsDoc {
    #[serde(default)]
    read_bytes: u64,
    #[serde(default)]
    readahead_bytes: u64,
    #[serde(default)]
    write_bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CounterDoc {
    spec: Spanned<String>,
}

fn default_file() -> String {
    "-".to_string()
}

fn default_share() -> Spanned<f64> {
    Spanned::new(0..0, 0.0)
}

fn default_frames_list() -> Spanned<Vec<String>> {
    Spanned::new(0..0, Vec::new())
}

fn default_reason() -> ReasonClass {
    ReasonClass::None
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupDoc {
    #[serde(default)]
    name: Option<String>,
    role: String,
    via: Spanned<String>,
    #[serde(default = "default_reason")]
    reason: ReasonClass,
    #[serde(default = "default_file")]
    file: String,
    #[serde(default = "default_frames_list")]
    frames: Spanned<Vec<String>>,
    #[serde(default = "default_frames_list")]
    user: Spanned<Vec<String>>,
    #[serde(default)]
    read_bytes: u64,
    #[serde(default)]
    read_ios: u64,
    #[serde(default)]
    readahead_bytes: u64,
    #[serde(default)]
    readahead_ios: u64,
    #[serde(default)]
    write_bytes: u64,
    #[serde(default)]
    write_ios: u64,
    #[serde(default = "default_share")]
    sync_write_share: Spanned<f64>,
    #[serde(default)]
    behind_share: Option<Spanned<f64>>,
    #[serde(default)]
    hist: Vec<HistDoc>,
    #[serde(default)]
    tolerance: BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistDoc {
    counter: Spanned<usize>,
    n: u64,
    p: Spanned<Vec<f64>>,
}
