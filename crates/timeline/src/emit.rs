//! The events, in time order: each slice's begin and end, each counter's values.

use std::collections::BTreeMap;
use std::io::{self, Write};

use ioblame_attrib::{Dir, Via};
use ioblame_decode::Dev;

use crate::build::{Collected, Part, Run};
use crate::select::Selection;
use crate::tracks::Tracks;
use crate::writer::{Arg, PacketWriter};
use crate::{on_role_track, Names, Stats, RATE_BIN_NS};

/// A step of the time-ordered writing: at `ts`, `group` orders steps at the same time, then
/// `idx` (which one of its kind) and `class` (a request's steps in order), `kind` says what.
///
/// The groups, at one time: 0, the ends of slices that began earlier (a thread's run ends
/// before its next begins); 1, the slices where flows start (runs, reads and direct IO on
/// threads, fsyncs); 2, the requests, which flows from group 1 end at (Perfetto binds a
/// flow's ends in the order it reads them); 3, the ends of slices that began at the same
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Step {
    ts: u64,
    group: u8,
    idx: u32,
    class: u8,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    RunBegin,
    RunEnd,
    /// A request's slice and its queued part begin.
    ReqQueue,
    /// The queued part ends, the on-device part begins.
    ReqIssue,
    /// Both end.
    ReqComplete,
    /// A read's or direct IO's slice on its role's track.
    ReadBegin,
    ReadEnd,
    BlockedBegin,
    BlockedEnd,
    /// A request the scope leaves out: counters only.
    OutQueue,
    OutIssue,
    OutComplete,
    /// A bytes-per-second bin: `idx` into the rates.
    Rate,
}

/// Writes the events of what `sel` draws of `c` on `tracks`.
pub(crate) fn events<W: Write>(
    c: &Collected,
    sel: &Selection,
    tracks: &Tracks,
    names: &Names<'_>,
    window: (u64, u64),
    w: &mut PacketWriter<W>,
    stats: &mut Stats,
) -> io::Result<()> {
    let (from, to) = window;
    let tables = names.tables;
    let role_of = |role: u32| tables.roles.get(role as usize);
    let act_role = |act| names.act_role(act);
    // Bytes per second, per device and bin: each bin with IO, and a zero after each that the
    // next bin of its device does not follow (a counter holds its value until the next).
    let mut rates: Vec<(Dev, u64, f64)> = Vec::new();
    {
        let mut bins: BTreeMap<(Dev, u64), u64> = BTreeMap::new();
        for &qi in &sel.order {
            let r = &c.requests[qi as usize];
            *bins.entry((r.dev, r.complete / RATE_BIN_NS)).or_default() += r.bytes;
        }
        for o in &c.outside {
            if (from..to).contains(&o.2) {
                *bins.entry((o.0, o.4 / RATE_BIN_NS)).or_default() += o.1;
            }
        }
        let mut last: Option<(Dev, u64)> = None;
        for (&(dev, bin), &bytes) in &bins {
            if let Some((ld, lb)) = last {
                if ld != dev || lb + 1 < bin {
                    rates.push((ld, (lb + 1).saturating_mul(RATE_BIN_NS), 0.0));
                }
            }
            rates.push((
                dev,
                bin * RATE_BIN_NS,
                bytes as f64 * 1e9 / RATE_BIN_NS as f64,
            ));
            last = Some((dev, bin));
        }
        if let Some((ld, lb)) = last {
            rates.push((ld, (lb + 1).saturating_mul(RATE_BIN_NS), 0.0));
        }
    }

    // The steps, in time order.
    let mut steps: Vec<Step> = Vec::new();
    let step = |ts, group, class, kind, idx: usize| Step {
        ts,
        group,
        idx: idx as u32,
        class,
        kind,
    };
    // The group of a slice's end: 0 when it began earlier, else after its begin.
    let end_group = |begin: u64, end: u64| if end > begin { 0 } else { 3 };
    for (i, r) in c.runs.iter().enumerate().filter(|(i, _)| sel.keep_run[*i]) {
        steps.push(step(r.start, 1, 0, Kind::RunBegin, i));
        steps.push(step(r.end, end_group(r.start, r.end), 0, Kind::RunEnd, i));
    }
    for &qi in &sel.order {
        let r = &c.requests[qi as usize];
        let i = qi as usize;
        // A request's steps stay in group 2 (its lane is its own; the counters' order at one
        // time is theirs), in order by class.
        steps.push(step(r.queue, 2, 1, Kind::ReqQueue, i));
        steps.push(step(r.issue.max(r.queue), 2, 3, Kind::ReqIssue, i));
        let done = r.complete.max(r.issue).max(r.queue);
        steps.push(step(done, 2, 4, Kind::ReqComplete, i));
        if r.parts.iter().any(on_role_track) {
            steps.push(step(r.queue, 1, 0, Kind::ReadBegin, i));
            steps.push(step(done, end_group(r.queue, done), 5, Kind::ReadEnd, i));
        }
    }
    for (i, b) in c
        .blocked
        .iter()
        .enumerate()
        .filter(|(i, _)| sel.keep_blocked[*i])
    {
        steps.push(step(b.start, 1, 0, Kind::BlockedBegin, i));
        steps.push(step(
            b.end,
            end_group(b.start, b.end),
            6,
            Kind::BlockedEnd,
            i,
        ));
    }
    for (i, o) in c.outside.iter().enumerate() {
        if (from..to).contains(&o.2) {
            steps.push(step(o.2, 2, 1, Kind::OutQueue, i));
            steps.push(step(o.3.max(o.2), 2, 3, Kind::OutIssue, i));
            steps.push(step(o.4.max(o.3).max(o.2), 2, 4, Kind::OutComplete, i));
        }
    }
    for (i, r) in rates.iter().enumerate() {
        steps.push(step(r.1, 2, 7, Kind::Rate, i));
    }
    // Two slices of one lane never touch (lanes() leaves a gap); see [`Step`] for the rest.
    steps.sort_unstable();

    let mut depth: BTreeMap<Dev, (i64, i64)> = BTreeMap::new();
    let text = |s: Option<String>, ino: u64| s.unwrap_or_else(|| format!("inode {ino}"));
    for s in &steps {
        let i = s.idx as usize;
        match s.kind {
            Kind::RunBegin => {
                let r = &c.runs[i];
                let Some(role) = role_of(r.role.0) else {
                    continue;
                };
                let t = tracks.thread[&(role.pid, role.tid)];
                let file = text(
                    (names.path)(r.dev, r.ino).or_else(|| first_path(c, r, names)),
                    r.ino,
                );
                // The bytes it wrote, by act.
                let mut written: Vec<(String, u64)> = Vec::new();
                for &(q, part, bytes) in &r.links {
                    let act = c.requests[q as usize].parts[part as usize].act;
                    let k = format!("act {}", act.0);
                    match written.iter_mut().find(|w| w.0 == k) {
                        Some(w) => w.1 += bytes,
                        None => written.push((k, bytes)),
                    }
                }
                let first_act = r
                    .links
                    .first()
                    .map(|&(q, part, _)| c.requests[q as usize].parts[part as usize].act);
                let mut args: Vec<(&str, Arg<'_>)> = vec![
                    ("file", Arg::Text(file.clone())),
                    ("ino", Arg::U(r.ino)),
                    ("dirtied_bytes", Arg::U(r.dirtied)),
                    ("written_bytes", Arg::U(r.written)),
                    ("dirtied", Arg::U(r.records)),
                    ("via", Arg::S(r.via.name())),
                    ("comm", Arg::S(&role.comm)),
                ];
                let intent = first_act
                    .and_then(|a| tables.act(a))
                    .map(|a| a.intent.index());
                if let Some(ix) = intent {
                    if let Some(n) = names.intents.get(ix) {
                        args.push(("intent", Arg::S(n)));
                    }
                    if let Some(st) = names.stacks.get(ix).filter(|s| !s.is_empty()) {
                        args.push(("stack", Arg::S(st)));
                    }
                }
                if !written.is_empty() {
                    args.push((
                        "written_by_act",
                        Arg::Dict(
                            written
                                .iter()
                                .map(|(k, b)| (k.as_str(), Arg::U(*b)))
                                .collect(),
                        ),
                    ));
                }
                stats.slices += 1;
                let name = format!("dirty {}", short(&file));
                w.begin(
                    t,
                    r.start,
                    &name,
                    &args,
                    sel.run_flows[i].clone(),
                    Vec::new(),
                )?;
            }
            Kind::RunEnd => {
                let r = &c.runs[i];
                if let Some(role) = role_of(r.role.0) {
                    w.end(tracks.thread[&(role.pid, role.tid)], r.end)?;
                }
            }
            Kind::ReqQueue => {
                let r = &c.requests[i];
                let t = tracks.request[i];
                let who = r
                    .parts
                    .first()
                    .and_then(|p| act_role(p.act))
                    .map_or("?", |x| x.2);
                let more = if r.parts.len() > 1 {
                    format!(" +{}", r.parts.len() - 1)
                } else {
                    String::new()
                };
                let name = format!("{} {}{}", dir_name(r.dir), who, more);
                let dev = (names.device)(r.dev);
                let parts: Vec<Vec<(&str, Arg<'_>)>> = r
                    .parts
                    .iter()
                    .map(|p| part_args(p, names, &act_role))
                    .collect();
                let mut args: Vec<(&str, Arg<'_>)> = vec![
                    ("bytes", Arg::U(r.bytes)),
                    ("sector", Arg::U(r.sector)),
                    ("rwbs", Arg::S(&r.rwbs)),
                    ("device", Arg::Text(dev)),
                    ("latency_ns", Arg::U(r.complete.saturating_sub(r.queue))),
                    ("queue_ns", Arg::U(r.issue.saturating_sub(r.queue))),
                    ("service_ns", Arg::U(r.complete.saturating_sub(r.issue))),
                ];
                let part_names: Vec<String> =
                    (1..=r.parts.len()).map(|k| format!("part {k}")).collect();
                if parts.len() == 1 {
                    args.extend(parts.into_iter().next().expect("one"));
                } else {
                    args.push((
                        "parts",
                        Arg::Dict(
                            part_names
                                .iter()
                                .zip(parts)
                                .map(|(k, v)| (k.as_str(), Arg::Dict(v)))
                                .collect(),
                        ),
                    ));
                }
                stats.slices += 1;
                let ending = sel.req_flows.get(&(i as u32)).cloned().unwrap_or_default();
                let starting = sel
                    .culprit_flows
                    .get(&(i as u32))
                    .cloned()
                    .unwrap_or_default();
                w.begin(t, r.queue, &name, &args, starting, ending)?;
                w.begin(t, r.queue, "queued", &[], Vec::new(), Vec::new())?;
                let dt = depth.entry(r.dev).or_default();
                dt.0 += 1;
                let v = dt.0;
                w.counter(tracks.devices[&r.dev].depth, r.queue, v as f64)?;
            }
            Kind::ReqIssue => {
                let r = &c.requests[i];
                let t = tracks.request[i];
                let ts = r.issue.max(r.queue);
                w.end(t, ts)?;
                // The arrow from the request it waited behind longest lands here, when it
                // got the device.
                let behind: Vec<u64> = sel
                    .victim_flows
                    .get(&(i as u32))
                    .copied()
                    .into_iter()
                    .collect();
                w.begin(t, ts, "on device", &[], Vec::new(), behind)?;
                let dt = depth.entry(r.dev).or_default();
                dt.1 += 1;
                let v = dt.1;
                w.counter(tracks.devices[&r.dev].in_flight, ts, v as f64)?;
            }
            Kind::ReqComplete => {
                let r = &c.requests[i];
                let t = tracks.request[i];
                let ts = r.complete.max(r.issue).max(r.queue);
                w.end(t, ts)?;
                w.end(t, ts)?;
                let dt = depth.entry(r.dev).or_default();
                dt.0 -= 1;
                dt.1 -= 1;
                let (a, b) = *dt;
                let d = &tracks.devices[&r.dev];
                w.counter(d.depth, ts, a as f64)?;
                w.counter(d.in_flight, ts, b as f64)?;
            }
            Kind::ReadBegin | Kind::ReadEnd => {
                let r = &c.requests[i];
                for (pi, p) in r.parts.iter().enumerate() {
                    let Some(&t) = tracks.read.get(&(i as u32, pi as u32)) else {
                        continue;
                    };
                    if s.kind == Kind::ReadEnd {
                        w.end(t, r.complete.max(r.queue))?;
                        continue;
                    }
                    let verb = match (p.via, r.dir) {
                        (Via::Direct, Dir::W) => "direct write",
                        (Via::Direct, _) => "direct read",
                        (Via::Readahead, _) => "readahead",
                        _ => "read",
                    };
                    let mut args = part_args(p, names, &act_role);
                    args.push(("latency_ns", Arg::U(r.complete.saturating_sub(r.queue))));
                    args.push(("sector", Arg::U(r.sector)));
                    let flows = sel
                        .read_flows
                        .get(&(i as u32, pi as u32))
                        .map(|&f| vec![f])
                        .unwrap_or_default();
                    stats.slices += 1;
                    w.begin(t, r.queue, verb, &args, flows, Vec::new())?;
                }
            }
            Kind::BlockedBegin => {
                let b = &c.blocked[i];
                let file = text((names.path)(b.dev, b.ino), b.ino);
                let args = vec![
                    ("file", Arg::Text(file)),
                    ("ino", Arg::U(b.ino)),
                    ("blocked_ns", Arg::U(b.end - b.start)),
                ];
                stats.slices += 1;
                w.begin(
                    tracks.blocked[&b.tid],
                    b.start,
                    "fsync",
                    &args,
                    Vec::new(),
                    Vec::new(),
                )?;
            }
            Kind::BlockedEnd => {
                let b = &c.blocked[i];
                w.end(tracks.blocked[&b.tid], b.end)?;
            }
            Kind::OutQueue | Kind::OutIssue | Kind::OutComplete => {
                let o = c.outside[i];
                let dt = depth.entry(o.0).or_default();
                let d = &tracks.devices[&o.0];
                match s.kind {
                    Kind::OutQueue => {
                        dt.0 += 1;
                        w.counter(d.depth, o.2, dt.0 as f64)?;
                    }
                    Kind::OutIssue => {
                        dt.1 += 1;
                        w.counter(d.in_flight, s.ts, dt.1 as f64)?;
                    }
                    _ => {
                        dt.0 -= 1;
                        dt.1 -= 1;
                        let (a, b) = *dt;
                        w.counter(d.depth, s.ts, a as f64)?;
                        w.counter(d.in_flight, s.ts, b as f64)?;
                    }
                }
            }
            Kind::Rate => {
                let (dev, ts, v) = rates[i];
                w.counter(tracks.devices[&dev].rate, ts, v)?;
            }
        }
    }
    Ok(())
}

/// The path of a run's file as its first linked act keys it (a run's device is the disk the
/// kernel named, an act's the filesystem's).
fn first_path(c: &Collected, r: &Run, names: &Names<'_>) -> Option<String> {
    let &(q, part, _) = r.links.first()?;
    let act = names
        .tables
        .act(c.requests[q as usize].parts[part as usize].act)?;
    (act.file.ino == r.ino).then_some(())?;
    (names.path)(act.file.dev, act.file.ino)
}

/// A part's arguments: its act and bytes, role, intent, file, via, stack.
fn part_args<'a>(
    p: &Part,
    names: &'a Names<'_>,
    act_role: &dyn Fn(ioblame_attrib::ActId) -> Option<(u32, u32, &'a str)>,
) -> Vec<(&'static str, Arg<'a>)> {
    let mut args: Vec<(&'static str, Arg<'a>)> = vec![
        ("act", Arg::U(p.act.0 as u64)),
        ("act_bytes", Arg::U(p.bytes)),
    ];
    if let Some((pid, tid, comm)) = act_role(p.act) {
        args.push(("comm", Arg::S(comm)));
        args.push(("pid", Arg::U(pid as u64)));
        args.push(("tid", Arg::U(tid as u64)));
    }
    args.push(("via", Arg::S(p.via.name())));
    if p.lower {
        args.push(("lower_copy", Arg::U(1)));
    }
    if let Some(act) = names.tables.act(p.act) {
        if let Some(n) = names.intents.get(act.intent.index()) {
            args.push(("intent", Arg::S(n)));
        }
        if let Some(st) = names
            .stacks
            .get(act.intent.index())
            .filter(|s| !s.is_empty())
        {
            args.push(("stack", Arg::S(st)));
        }
        if act.file.ino != 0 {
            let file = (names.path)(act.file.dev, act.file.ino)
                .unwrap_or_else(|| format!("inode {}", act.file.ino));
            args.push(("file", Arg::Text(file)));
        }
        if let Some(r) = act.reason {
            args.push(("reason", Arg::S(r.name())));
        }
    }
    args
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::R => "R",
        Dir::A => "RA",
        Dir::W => "W",
    }
}

/// A path's last component (the slice's name; the whole path is an argument).
fn short(path: &str) -> &str {
    path.rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(path)
}
