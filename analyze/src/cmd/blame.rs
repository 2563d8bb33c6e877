//! `ioblame blame`: who made each IO slow. Every victim IO's Q2C is split into its own
//! service time, the time it waited behind each other request on its device (charged to
//! that request's act, as the attribution charges it) and idle time
//! ([`ioblame_latency::blame`]; `docs/latency.md`, "Blame"); victims are summed per process
//! (or cgroup, or the `--victim` selection) and their culprits ranked (named by [`keys`]).

mod keys;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use anyhow::{bail, Result};
use clap::Args;
use ioblame_attrib::{CgroupNames, Tables};
use ioblame_counters::output::printable;
use ioblame_counters::DevSelection;
use ioblame_latency::{Blame, BlameEngine, Idle, Victim};
use ioblame_pipeline::ResolvedScope;
use serde_json::{json, Value};

use self::keys::CKey;
pub use self::keys::{By, Names};
use super::at_least_one;
use crate::diagnostics;
use crate::session::{DevArgs, Ready, Session, TraceArgs};
use crate::text::dev_str;

#[derive(Args, Debug)]
pub struct BlameArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    devs: DevArgs,
    /// What the culprits are summed by: `act` (role + intent + file), `task`, `process`, or
    /// `cgroup` (then the victims are summed by cgroup too).
    #[arg(long, value_enum, default_value = "act", value_name = "KEY")]
    by: By,
    /// One victim group instead of one per process: `pid:N`, `comm:NAME`, `cgroup:/PATH`
    /// (and below) or `act:N`.
    #[arg(long, value_name = "WHO")]
    victim: Option<VictimSel>,
    /// Only each victim group's slowest IOs: those above its P-th percentile of Q2C (the
    /// tail people are paged for), 0 <= P < 100.
    #[arg(long, value_name = "P", value_parser = tail_percentile)]
    tail: Option<f64>,
    /// Only victims queued at or after this many seconds into the trace.
    #[arg(long, value_name = "SECONDS")]
    from: Option<f64>,
    /// Only victims queued before this many seconds into the trace.
    #[arg(long, value_name = "SECONDS")]
    to: Option<f64>,
    /// Culprits listed per victim group (at least 1; the rest are summed).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one())]
    top: usize,
    /// JSON lines: one `"kind": "victim"` object per victim group and one `"kind":
    /// "culprit"` per culprit of it (keys in docs/latency.md).
    #[arg(long)]
    json: bool,
    /// One JSON line per victim IO, with its own, idle and culprits' times (they add up to
    /// its Q2C).
    #[arg(long)]
    ios: bool,
}

/// `--tail P`: a percentile in [0, 100).
fn tail_percentile(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?}: a percentile from 0 to below 100")),
    }
}

/// The victims spoken of, as one group (`--victim`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VictimSel {
    /// `pid:N`: the IO of process N.
    Pid(u32),
    /// `comm:NAME`: the IO of tasks of that command name.
    Comm(String),
    /// `cgroup:/PATH`: the IO of tasks in that cgroup or below.
    Cgroup(String),
    /// `act:N`: the IO of act N (`ioblame acts` numbers them).
    Act(u32),
}

impl std::str::FromStr for VictimSel {
    type Err = String;
    fn from_str(s: &str) -> Result<VictimSel, String> {
        let (k, v) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected pid:N, comm:NAME, cgroup:/PATH or act:N"))?;
        let num = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("{s:?}: {v:?} is no number"))
        };
        match k {
            "pid" => Ok(VictimSel::Pid(num(v)?)),
            "act" => Ok(VictimSel::Act(num(v)?)),
            "comm" if !v.is_empty() => Ok(VictimSel::Comm(v.to_owned())),
            "cgroup" if v.starts_with('/') => Ok(VictimSel::Cgroup(v.to_owned())),
            _ => Err(format!(
                "{s:?}: expected pid:N, comm:NAME, cgroup:/PATH or act:N"
            )),
        }
    }
}

impl std::fmt::Display for VictimSel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VictimSel::Pid(n) => write!(f, "pid:{n}"),
            VictimSel::Comm(c) => write!(f, "comm:{c}"),
            VictimSel::Cgroup(c) => write!(f, "cgroup:{c}"),
            VictimSel::Act(n) => write!(f, "act:{n}"),
        }
    }
}

/// What `ioblame blame` is asked.
#[derive(Debug, Clone)]
pub struct Options {
    /// Culprits summed by.
    pub by: By,
    /// One victim group instead of one per process.
    pub victim: Option<VictimSel>,
    /// Only each group's slowest IOs: those above its P-th percentile of Q2C.
    pub tail: Option<f64>,
    /// Victims queued at or after this many seconds into the trace.
    pub from: Option<f64>,
    /// Victims queued before this many seconds into the trace.
    pub to: Option<f64>,
    /// Culprits listed per victim group in the text.
    pub top: usize,
    /// JSON lines.
    pub json: bool,
    /// One JSON line per victim IO instead of per group.
    pub ios: bool,
}

/// A victim group's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum VKey {
    Process(u32),
    Cgroup(Option<String>),
    Selected,
}

#[derive(Debug, Default)]
struct Group {
    /// Every IO's Q2C (ns), for the percentiles.
    q2c: Vec<u64>,
    ios: u64,
    latency: u64,
    own: u64,
    idle: u64,
    /// `idle` by cause ([`Idle`]).
    idle_by: [u64; Idle::COUNT],
    bytes: u64,
    culprits: HashMap<CKey, u64>,
    /// A role of the group, for its name (the first seen).
    role: Option<u32>,
}

impl Group {
    fn waited(&self) -> u64 {
        self.culprits.values().sum()
    }
}

/// Whether a victim's act is selected by `sel`.
fn selected(sel: &VictimSel, act_id: u32, names: &Names<'_>) -> bool {
    let (act, role) = (names.act(act_id), names.role_of(act_id));
    match sel {
        VictimSel::Pid(n) => role.pid == *n,
        VictimSel::Comm(c) => role.comm == *c,
        VictimSel::Act(n) => act_id == *n,
        VictimSel::Cgroup(path) => names.cgroup_of_act(act).is_some_and(|c| {
            let p = path.trim_end_matches('/');
            p.is_empty() || c == p || c.starts_with(&format!("{p}/"))
        }),
    }
}

/// The slowest IOs of a group: the Q2C from which an IO is in the tail above percentile `p`
/// (the `n - floor(p/100 * n)` slowest, at least one; ties with the last kept are kept).
fn tail_threshold(q2c: &mut [u64], p: f64) -> u64 {
    q2c.sort_unstable();
    let n = q2c.len();
    let below = (p * n as f64 / 100.0).floor() as usize;
    q2c[below.min(n.saturating_sub(1))]
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ioblame_latency::hist::nearest_rank(p, sorted.len() as u64) as usize;
    sorted[rank - 1]
}

/// A duration as a person reads it: `812 ns`, `61.2 µs`, `42.1 ms`, `1.84 s`.
pub fn human_ns(ns: u64) -> String {
    let x = ns as f64;
    let (v, unit) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        (x / 1e3, "µs")
    } else if ns < 1_000_000_000 {
        (x / 1e6, "ms")
    } else {
        (x / 1e9, "s")
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Thousands separated by commas.
fn count(n: u64) -> String {
    ioblame_latency::output::thousands(n)
}

/// Feeds the blame engine from an analysis: every IO stands ahead of others (the
/// recorder's own too: it held the device); victims are the IOs of acts in `scope` (the
/// recorder's only when shown) queued inside `window` (ns, the trace's clock).
pub struct Blamer<'s> {
    engine: BlameEngine,
    show_recorder: bool,
    scope: &'s ResolvedScope,
    window: (u64, u64),
}

impl<'s> Blamer<'s> {
    /// A feeder of the devices `devs` selects of `input`, selecting victims as said.
    pub fn new(
        input: &ioblame_pipeline::Input,
        devs: &DevSelection,
        show_recorder: bool,
        scope: &'s ResolvedScope,
        window: (u64, u64),
    ) -> Self {
        let sel = devs.clone();
        let mut engine = BlameEngine::with_devices(move |d| sel.enabled(d));
        // iocost's events name disks.
        engine.name_disks(crate::text::dev_names(input.trace()));
        Blamer {
            engine,
            show_recorder,
            scope,
            window,
        }
    }

    /// One decoded event.
    pub fn event(&mut self, ev: &ioblame_decode::Event) {
        self.engine.push_event(ev);
    }

    /// One charged IO the scope leaves out: it stands ahead of others, never a victim.
    pub fn culprit(&mut self, io: &ioblame_attrib::Io, tables: &Tables) {
        ioblame_pipeline::blame::push_io(&mut self.engine, io, tables, |_, _| false);
    }

    /// One charged IO.
    pub fn io(&mut self, io: &ioblame_attrib::Io, tables: &Tables) {
        let (show, scope, window) = (self.show_recorder, self.scope, self.window);
        ioblame_pipeline::blame::push_io(&mut self.engine, io, tables, |io, tables| {
            let act = &tables.acts[io.act.index()];
            (show || !act.recorder)
                && (window.0..window.1).contains(&io.queue_time)
                && scope.act_in(act, tables)
        });
    }

    /// Every victim's split.
    pub fn finish(self) -> Blame {
        self.engine.finish()
    }
}

/// Runs the attribution and the blame pass over the trace `r` holds, on its devices: the
/// splits and the analysis ([`Blamer`] selects the victims queued inside `window`).
fn analyze(r: &Ready<'_>, window: (u64, u64)) -> (Blame, ioblame_pipeline::Analysis) {
    // The IO outside the scope stands ahead of the scope's too.
    let blamer = std::cell::RefCell::new(Blamer::new(
        &r.trace,
        &r.devs,
        r.show_recorder,
        &r.scope,
        window,
    ));
    let a = r.analyze_observed_all(
        |ev| blamer.borrow_mut().event(ev),
        |io, tables| blamer.borrow_mut().io(io, tables),
        |io, tables| blamer.borrow_mut().culprit(io, tables),
    );
    (blamer.into_inner().finish(), a)
}

/// `ioblame blame`.
pub fn run(out: &mut impl Write, a: BlameArgs, session: &Session) -> Result<()> {
    let o = session.open_selected(&a.trace, &a.devs)?;
    let scope = session.scope(&o.trace, false)?;
    let opts = Options {
        by: a.by,
        victim: a.victim,
        tail: a.tail,
        from: a.from,
        to: a.to,
        top: a.top,
        json: a.json,
        ios: a.ios,
    };
    let start = o.trace.header().start_clock_ns;
    let at = |s: Option<f64>, dflt: u64| {
        s.map_or(dflt, |s| start.saturating_add((s.max(0.0) * 1e9) as u64))
    };
    let window = (at(opts.from, 0), at(opts.to, u64::MAX));
    if let (Some(f), Some(t)) = (opts.from, opts.to) {
        if f >= t {
            bail!("--from must come before --to");
        }
    }
    // What needs the trace's tables only is refused before the analysis.
    let cgroups = CgroupNames::of(&o.trace);
    if cgroups.is_none() {
        if opts.by == By::Cgroup {
            bail!(
                "the trace has no cgroup table (recorded without cgroups): --by cgroup needs one"
            );
        }
        if let Some(VictimSel::Cgroup(c)) = &opts.victim {
            bail!("--victim cgroup:{c}: the trace has no cgroup table (recorded without cgroups)");
        }
    }
    if opts.by == By::Cgroup || matches!(opts.victim, Some(VictimSel::Cgroup(_))) {
        if let Some(d) = ioblame_pipeline::cgroups_flat(&o.trace) {
            diagnostics::say(&d);
        }
    }
    let r = o.ready(scope);
    let (blame, a) = analyze(&r, window);
    let (trace, tables) = (&r.trace, &a.tables);
    let intents = ioblame_attrib::intent_names(tables, &r.symbols);
    let paths = diagnostics::charged_paths(trace, tables, true);
    let names = Names::new(trace, tables, &intents, &paths, cgroups.as_ref());
    if let Some(VictimSel::Act(n)) = &opts.victim {
        if *n as usize >= tables.acts.len() {
            bail!("--victim act:{n}: the trace has {} acts", tables.acts.len());
        }
    }
    render(out, &blame, &names, &opts, trace.blktrace().is_some())
}

/// `ioblame blame`'s text, JSON lines or per-IO lines of `blame`, named by `names`; the
/// note on culprits being issuers with `blktrace`.
pub fn render(
    out: &mut impl Write,
    blame: &Blame,
    names: &Names<'_>,
    opts: &Options,
    blktrace: bool,
) -> Result<()> {
    let tables = names.tables;
    let vkey = |v: &Victim| -> Option<VKey> {
        match &opts.victim {
            Some(s) => selected(s, v.key, names).then_some(VKey::Selected),
            None if opts.by == By::Cgroup => {
                Some(VKey::Cgroup(names.cgroup_of_act(names.act(v.key))))
            }
            None => Some(VKey::Process(names.role_of(v.key).pid)),
        }
    };
    if blktrace && !opts.json && !opts.ios {
        writeln!(
            out,
            "note: a blktrace recording knows no dirtier: culprits are the tasks that queued the IO"
        )?;
    }
    // The tail's thresholds, per group.
    let mut thresholds: HashMap<VKey, u64> = HashMap::new();
    if let Some(p) = opts.tail {
        let mut all: HashMap<VKey, Vec<u64>> = HashMap::new();
        for v in &blame.victims {
            if let Some(k) = vkey(v) {
                all.entry(k).or_default().push(v.q2c);
            }
        }
        for (k, mut q) in all {
            thresholds.insert(k, tail_threshold(&mut q, p));
        }
    }
    if opts.ios {
        // Each group's tail only, with --tail.
        let shown = |v: &Victim| vkey(v).filter(|k| thresholds.get(k).is_none_or(|&t| v.q2c >= t));
        return per_io(out, blame, names, opts, &shown);
    }
    let mut groups: BTreeMap<VKey, Group> = BTreeMap::new();
    for v in &blame.victims {
        let Some(k) = vkey(v) else { continue };
        let g = groups.entry(k.clone()).or_default();
        g.q2c.push(v.q2c);
        if thresholds.get(&k).is_some_and(|&t| v.q2c < t) {
            continue;
        }
        g.role.get_or_insert(names.act(v.key).role.0);
        g.ios += 1;
        g.latency += v.q2c;
        g.own += v.own;
        g.idle += v.idle;
        for (a, b) in g.idle_by.iter_mut().zip(v.idle_by) {
            *a += b;
        }
        g.bytes += v.bytes;
        for &(c, ns) in blame.culprits_of(v) {
            *g.culprits.entry(names.ckey(c, opts.by)).or_default() += ns;
        }
    }
    for g in groups.values_mut() {
        g.q2c.sort_unstable();
    }
    // The most delayed by others first.
    let mut order: Vec<(&VKey, &Group)> = groups.iter().filter(|(_, g)| g.ios > 0).collect();
    order.sort_by(|a, b| b.1.waited().cmp(&a.1.waited()).then(a.0.cmp(b.0)));
    let vname = |k: &VKey, g: &Group| -> String {
        match k {
            VKey::Process(pid) => {
                let comm = g
                    .role
                    .map(|r| printable(&tables.roles[r as usize].comm).into_owned())
                    .unwrap_or_default();
                format!("{comm} (pid {pid})")
            }
            VKey::Cgroup(c) => format!("cgroup {}", c.as_deref().unwrap_or("(not recorded)")),
            VKey::Selected => opts
                .victim
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
        }
    };
    if opts.json {
        for (k, g) in order {
            let mut v = json!({"kind": "victim"});
            victim_json(&mut v, k, g, names, opts);
            v["ios"] = g.ios.into();
            v["bytes"] = g.bytes.into();
            v["latency_ns"] = g.latency.into();
            v["own_ns"] = g.own.into();
            v["idle_ns"] = g.idle.into();
            v["idle_by"] = idle_json(&g.idle_by);
            v["wait_ns"] = g.waited().into();
            v["p50_ns"] = percentile(&g.q2c, 50.0).into();
            v["p99_ns"] = percentile(&g.q2c, 99.0).into();
            if let Some(p) = opts.tail {
                v["tail"] = p.into();
            }
            writeln!(out, "{v}")?;
            for (c, ns) in ranked(g) {
                let mut v = json!({"kind": "culprit"});
                victim_json(&mut v, k, g, names, opts);
                names.cjson(c, &mut v);
                v["wait_ns"] = ns.into();
                v["share"] = (ns as f64 / g.latency.max(1) as f64).into();
                writeln!(out, "{v}")?;
            }
        }
        return Ok(());
    }
    let devs: std::collections::BTreeSet<u32> = blame
        .victims
        .iter()
        .filter(|v| vkey(v).is_some())
        .map(|v| v.dev)
        .collect();
    let total: u64 = order.iter().map(|(_, g)| g.latency).sum();
    let waited: u64 = order.iter().map(|(_, g)| g.waited()).sum();
    writeln!(
        out,
        "ioblame blame: {} IOs waited {} in all on {} device{}; {} ({:.0}%) of it behind other IO",
        count(order.iter().map(|(_, g)| g.ios).sum()),
        human_ns(total),
        devs.len(),
        if devs.len() == 1 { "" } else { "s" },
        human_ns(waited),
        pct(waited, total),
    )?;
    if let Some(p) = opts.tail {
        writeln!(
            out,
            "  (the tail: each group's IOs above its p{p} of Q2C; p50 and p99 are of all its IOs)"
        )?;
    }
    let none = order.is_empty();
    for (k, g) in order {
        writeln!(out)?;
        let ranked = ranked(g);
        let mut head = format!(
            "{} waited {} in {} IO{} (p50 {}, p99 {})",
            vname(k, g),
            human_ns(g.latency),
            count(g.ios),
            if g.ios == 1 { "" } else { "s" },
            human_ns(percentile(&g.q2c, 50.0)),
            human_ns(percentile(&g.q2c, 99.0)),
        );
        let mut parts = Vec::new();
        if let Some((c, ns)) = ranked.first() {
            let whose = if is_self(k, c, names) {
                "its own other IO: "
            } else {
                ""
            };
            parts.push(format!(
                "{:.0}% behind {whose}{}",
                pct(*ns, g.latency),
                names.clabel(c)
            ));
        }
        parts.push(format!("{:.0}% own", pct(g.own, g.latency)));
        parts.push(format!("{:.0}% idle", pct(g.idle, g.latency)));
        if ranked.len() > 1 {
            let rest: u64 = ranked[1..].iter().map(|c| c.1).sum();
            parts.push(format!(
                "{:.0}% behind {} other{}",
                pct(rest, g.latency),
                ranked.len() - 1,
                if ranked.len() == 2 { "" } else { "s" }
            ));
        }
        head.push_str(": ");
        head.push_str(&parts.join(", "));
        writeln!(out, "{head}")?;
        writeln!(out, "  {:>10} {:>6}  BEHIND", "WAIT", "SHARE")?;
        for (c, ns) in ranked.iter().take(opts.top) {
            writeln!(
                out,
                "  {:>10} {:>5.1}%  {}{}",
                human_ns(*ns),
                pct(*ns, g.latency),
                if is_self(k, c, names) {
                    "(itself) "
                } else {
                    ""
                },
                names.clabel(c)
            )?;
        }
        if ranked.len() > opts.top {
            let rest: u64 = ranked[opts.top..].iter().map(|c| c.1).sum();
            writeln!(
                out,
                "  {:>10} {:>5.1}%  {} more",
                human_ns(rest),
                pct(rest, g.latency),
                ranked.len() - opts.top
            )?;
        }
        writeln!(
            out,
            "  {:>10} {:>5.1}%  (own service: its share of the device while in flight)",
            human_ns(g.own),
            pct(g.own, g.latency)
        )?;
        writeln!(
            out,
            "  {:>10} {:>5.1}%  (idle: nothing in flight on the device){}",
            human_ns(g.idle),
            pct(g.idle, g.latency),
            if g.idle > 0 { ", its request:" } else { "" }
        )?;
        for c in Idle::ALL {
            let ns = g.idle_by[c as usize];
            if ns > 0 {
                writeln!(
                    out,
                    "  {:>10} {:>5.1}%    {}",
                    human_ns(ns),
                    pct(ns, g.latency),
                    c.describe()
                )?;
            }
        }
    }
    if none {
        writeln!(
            out,
            "\nno IO of the victims selected completed on the selected devices"
        )?;
    }
    let unexplained: u64 = groups
        .values()
        .map(|g| g.idle_by[Idle::Unexplained as usize])
        .sum();
    if unexplained > 0 {
        writeln!(
            out,
            "\nnote: {} of the idle time is unexplained: the trace lacks its requests' block_getrq events (queued before the recording, or not recorded), or they completed in parts",
            human_ns(unexplained)
        )?;
    }
    let s = &blame.stats;
    if s.phases_forgotten > 0 {
        writeln!(
            out,
            "\nnote: the phases of {} request{} were forgotten (too many waiting at once): their idle time is unexplained",
            count(s.phases_forgotten),
            if s.phases_forgotten == 1 { "" } else { "s" },
        )?;
    }
    if s.unmatched > 0 {
        writeln!(
            out,
            "\nnote: {} flush or discard completion{} matched no issue (issued before the recording): their time in flight is not known",
            count(s.unmatched),
            if s.unmatched == 1 { "" } else { "s" },
        )?;
    }
    Ok(())
}

/// Whether culprit `c` is the victim group `v` itself (its own other IO stood ahead).
fn is_self(v: &VKey, c: &CKey, names: &Names<'_>) -> bool {
    let pid_of_tid = |t: &u32| names.tasks.get(t).map(|x| x.1);
    match (v, c) {
        (VKey::Process(p), CKey::Act(a)) => names.role_of(*a).pid == *p,
        (VKey::Process(p), CKey::Task(r)) => names.tables.roles[*r as usize].pid == *p,
        (VKey::Process(p), CKey::Process(q)) => p == q,
        (VKey::Process(p), CKey::FlushBy(t) | CKey::OtherBy(t)) => pid_of_tid(t) == Some(*p),
        (VKey::Cgroup(a), CKey::Cgroup(b)) => a == b,
        _ => false,
    }
}

/// A group's culprits, largest wait first (ties by key).
fn ranked(g: &Group) -> Vec<(&CKey, u64)> {
    let mut v: Vec<(&CKey, u64)> = g.culprits.iter().map(|(k, &ns)| (k, ns)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

/// The victim group's keys (`victim_comm`, `victim_pid`, `victim_cgroup`, `victim`).
fn victim_json(v: &mut Value, k: &VKey, g: &Group, names: &Names<'_>, opts: &Options) {
    let role = g.role.map(|r| &names.tables.roles[r as usize]);
    match k {
        VKey::Process(pid) => {
            v["victim_comm"] = role.map(|r| r.comm.clone()).into();
            v["victim_pid"] = (*pid).into();
            if let (Some(_), Some(r)) = (names.cgroups, g.role) {
                v["victim_cgroup"] = names.cgroup_of_role(r).into();
            }
        }
        VKey::Cgroup(c) => v["victim_cgroup"] = c.clone().into(),
        VKey::Selected => {
            v["victim"] = opts.victim.as_ref().map(|s| s.to_string()).into();
        }
    }
}

/// `--ios`: one JSON line per victim IO, with its split.
fn per_io(
    out: &mut impl Write,
    blame: &Blame,
    names: &Names<'_>,
    opts: &Options,
    vkey: &dyn Fn(&Victim) -> Option<VKey>,
) -> Result<()> {
    for v in &blame.victims {
        if vkey(v).is_none() {
            continue;
        }
        let role = names.role_of(v.key);
        let mut j = json!({
            "kind": "io",
            "dev": dev_str(v.dev),
            "queue_ns": v.queue,
            "complete_ns": v.complete,
            "bytes": v.bytes,
            "act": v.key,
            "victim_comm": role.comm,
            "victim_pid": role.pid,
            "latency_ns": v.q2c,
            "own_ns": v.own,
            "idle_ns": v.idle,
            "idle_by": idle_json(&v.idle_by),
        });
        let mut cs: BTreeMap<CKey, u64> = BTreeMap::new();
        for &(c, ns) in blame.culprits_of(v) {
            *cs.entry(names.ckey(c, opts.by)).or_default() += ns;
        }
        let mut list: Vec<(CKey, u64)> = cs.into_iter().collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        j["culprits"] = list
            .iter()
            .map(|(c, ns)| {
                let mut x = json!({});
                names.cjson(c, &mut x);
                x["wait_ns"] = (*ns).into();
                x
            })
            .collect::<Vec<_>>()
            .into();
        writeln!(out, "{j}")?;
    }
    Ok(())
}

/// Idle time by cause, every cause named ([`Idle::name`]), in nanoseconds.
fn idle_json(by: &[u64; Idle::COUNT]) -> Value {
    let mut m = serde_json::Map::new();
    for c in Idle::ALL {
        m.insert(c.name().into(), by[c as usize].into());
    }
    Value::Object(m)
}

/// The report's blame section ([`ioblame_report::BlameSection`]): one row per victim act and
/// culprit act (flushes and other ops by the task that asked, own and idle as rows of their
/// own), with the time of the victim's tail (its process's IOs above the process's p99),
/// and `text`, `ioblame blame`'s text.
pub fn section(
    blame: &Blame,
    names: &Names<'_>,
    text: String,
    notes: Vec<String>,
) -> ioblame_report::BlameSection {
    use ioblame_report::{BlameKind, BlameRow};
    let pid_of = |act: u32| names.role_of(act).pid;
    // Each victim process's p99 of Q2C.
    let mut q2c: HashMap<u32, Vec<u64>> = HashMap::new();
    for v in &blame.victims {
        q2c.entry(pid_of(v.key)).or_default().push(v.q2c);
    }
    let thresholds: HashMap<u32, u64> = q2c
        .into_iter()
        .map(|(pid, mut q)| (pid, tail_threshold(&mut q, 99.0)))
        .collect();
    // (victim act, what its time went to) -> (ns, tail ns).
    #[derive(PartialEq, Eq, Hash, PartialOrd, Ord, Clone)]
    enum Part {
        Own,
        Idle(Idle),
        Culprit(CKey),
    }
    let mut sums: BTreeMap<(u32, Part), (u64, u64)> = BTreeMap::new();
    for v in &blame.victims {
        let tail = v.q2c >= thresholds[&pid_of(v.key)];
        let mut add = |p: Part, ns: u64| {
            let e = sums.entry((v.key, p)).or_default();
            e.0 += ns;
            if tail {
                e.1 += ns;
            }
        };
        add(Part::Own, v.own);
        for c in Idle::ALL {
            if v.idle_by[c as usize] > 0 {
                add(Part::Idle(c), v.idle_by[c as usize]);
            }
        }
        for &(c, ns) in blame.culprits_of(v) {
            add(Part::Culprit(names.ckey(c, By::Act)), ns);
        }
    }
    let rows = sums
        .into_iter()
        .map(|((victim, part), (ns, tail_ns))| {
            let role = names.role_of(victim);
            let mut row = BlameRow {
                victim_act: victim,
                victim_pid: role.pid,
                victim_comm: role.comm.clone(),
                victim_cgroup: names.cgroup_of_act(names.act(victim)),
                kind: BlameKind::Own,
                culprit_act: None,
                culprit_pid: None,
                culprit_comm: None,
                culprit_cgroup: None,
                culprit_via: None,
                culprit_label: String::new(),
                wait_ns: ns,
                tail_wait_ns: tail_ns,
            };
            match part {
                Part::Own => row.culprit_label = "own".into(),
                Part::Idle(c) => {
                    row.kind = BlameKind::Idle;
                    row.culprit_label = format!("idle: {}", c.name());
                }
                Part::Culprit(k) => {
                    row.culprit_label = names.clabel(&k);
                    match k {
                        CKey::Act(a) => {
                            let (ca, cr) = (names.act(a), names.role_of(a));
                            row.kind = BlameKind::Act;
                            row.culprit_act = Some(a);
                            row.culprit_pid = Some(cr.pid);
                            row.culprit_comm = Some(cr.comm.clone());
                            row.culprit_cgroup = names.cgroup_of_act(ca);
                            row.culprit_via = Some(ca.via.name().to_owned());
                        }
                        CKey::FlushBy(t) | CKey::OtherBy(t) => {
                            row.kind = if matches!(k, CKey::FlushBy(_)) {
                                BlameKind::Flush
                            } else {
                                BlameKind::OtherOp
                            };
                            if let Some((r, pid, comm)) = names.tasks.get(&t) {
                                row.culprit_pid = Some(*pid);
                                row.culprit_comm = Some(comm.clone());
                                row.culprit_cgroup = r.and_then(|r| names.cgroup_of_role(r));
                            }
                        }
                        CKey::Flush => row.kind = BlameKind::Flush,
                        _ => row.kind = BlameKind::OtherOp,
                    }
                }
            }
            row
        })
        .collect();
    ioblame_report::BlameSection { text, rows, notes }
}
