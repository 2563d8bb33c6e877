//! `ioblame top --batch` and `--json`: each interval printed as text (like `top -b`) or as
//! JSON lines, and the totals at exit.

use std::io::Write;

use anyhow::Result;

use super::model::Stat;
use super::rows::{self, Ctx, Shape};
use super::{acts_in_order, Span, TopArgs};
use crate::text::{self, Frames as _, Paths};

/// The paths of the acts shown, looked up once.
struct MapPaths(std::collections::HashMap<(u32, u64), String>);

impl Paths for MapPaths {
    fn path(&self, dev: u32, ino: u64) -> Option<&str> {
        self.0.get(&(dev, ino)).map(String::as_str)
    }
}

/// Asks for the paths of every file of the interval's sums (`total`: the run's) and reads the
/// recording's name tables again (when due; at the end, its final ones).
fn want_paths(ctx: &mut Ctx<'_>, total: bool) {
    let (model, tables, names) = (ctx.model, ctx.tables, &mut *ctx.names);
    let sums = if total { &model.total } else { &model.interval };
    for id in sums.acts.keys() {
        if let Some(act) = tables.act(*id) {
            names.path(act.file.dev, act.file.ino, true);
        }
    }
    for b in sums.bases.keys() {
        if let Some(i) = model.info.get(b) {
            names.path(i.dev, b.ino, i.dev_exact);
        }
    }
    if total {
        names.refresh_now();
    } else {
        names.refresh();
    }
}

fn interval_keys(v: &mut serde_json::Value, span: Span, total: bool) {
    v["interval"] = if total {
        serde_json::Value::Null
    } else {
        span.number.into()
    };
    v["interval_start"] = (span.start_ns as f64 / 1e9).into();
    v["interval_length"] = (span.len_ns as f64 / 1e9).into();
    v["total"] = total.into();
}

fn view_keys(v: &mut serde_json::Value, s: &Stat) {
    v["dirtied_bytes"] = s.dirtied.into();
    v["device_time_us"] = s.dev_us.into();
    v["queue_time_us"] = s.queue_us.into();
    v["behind_ns"] = s.behind_ns.into();
}

/// The JSON objects of `sums`: one per act (the keys of `ioblame acts --json`, its totals
/// those of the span), then one per role, stack and file that dirtied bytes (`"act":
/// null`: not an act until its IO).
fn sums_json(out: &mut impl Write, ctx: &mut Ctx<'_>, span: Span, total: bool) -> Result<()> {
    let (model, tables, symbols) = (ctx.model, ctx.tables, ctx.symbols);
    let names = &mut *ctx.names;
    let sums = if total { &model.total } else { &model.interval };
    let frames = text::SymFrames(symbols);
    // Named by kernel stack, as the view groups (user frames stay unnamed in top).
    let intent_names = ioblame_attrib::names::kernel_intent_names(tables, symbols);
    let mut lines = Vec::new();
    let ids = acts_in_order(sums);
    let mut paths = MapPaths(Default::default());
    for &id in &ids {
        if let Some(act) = tables.act(id) {
            if let Some(p) = names.path(act.file.dev, act.file.ino, true) {
                paths.0.insert((act.file.dev, act.file.ino), p);
            }
        }
    }
    {
        let cgroups = names.cgroups();
        for id in ids {
            let a = &sums.acts[&id];
            let mut v = text::act_json(
                tables,
                &frames,
                &intent_names,
                &paths,
                cgroups,
                id,
                &a.totals,
            );
            v["kind"] = "io".into();
            interval_keys(&mut v, span, total);
            view_keys(
                &mut v,
                &Stat {
                    dirtied: 0,
                    ..a.stat
                },
            );
            lines.push(v);
        }
    }
    let mut dirtied: Vec<_> = sums.bases.iter().filter(|(_, s)| s.dirtied > 0).collect();
    dirtied.sort_by(|a, b| b.1.dirtied.cmp(&a.1.dirtied).then(a.0.cmp(b.0)));
    for (b, s) in dirtied {
        let role = tables.role(b.role);
        let info = model.info.get(b).copied();
        let dev = info.map_or(0, |i| i.dev);
        let path = names.path(dev, b.ino, info.is_some_and(|i| i.dev_exact));
        let mut v = serde_json::json!({
            "kind": "dirtied",
            "act": null,
            "role": b.role.0,
            "pid": role.map(|r| r.pid),
            "tid": role.map(|r| r.tid),
            "gen": role.map(|r| r.generation),
            "comm": role.map(|r| r.comm.as_str()),
            "intent": null,
            "intent_name": names.intent(model, symbols, b.stack),
            "dev": text::dev_str(dev),
            "ino": b.ino,
            "path": path,
            "frames": model.stack_frames(b.stack).iter().map(|&x| frames.name(x)).collect::<Vec<_>>(),
        });
        if let Some(c) = names.cgroups() {
            v["cgroup"] = role.and_then(|r| c.of_role(r)).into();
        }
        interval_keys(&mut v, span, total);
        view_keys(&mut v, s);
        lines.push(v);
    }
    // The span's own line, last: what it summed over everything shown (written even when
    // nothing happened, so that a reader sees each interval end).
    let mut v = serde_json::json!({ "kind": if total { "total" } else { "interval" } });
    interval_keys(&mut v, span, total);
    let all = &sums.all;
    v["dirtied_bytes"] = all.dirtied.into();
    v["read_bytes"] = all.read.into();
    v["write_bytes"] = all.written.into();
    v["ios"] = all.ios.into();
    v["device_time_us"] = all.dev_us.into();
    v["queue_time_us"] = all.queue_us.into();
    v["behind_ns"] = all.behind_ns.into();
    lines.push(v);
    for v in lines {
        writeln!(out, "{v}")?;
    }
    Ok(())
}

/// An interval as JSON lines.
pub fn interval_json(out: &mut impl Write, ctx: &mut Ctx<'_>, span: Span) -> Result<()> {
    want_paths(ctx, false);
    sums_json(out, ctx, span, false)
}

/// The run's totals as JSON lines (`"total": true`).
pub fn totals_json(out: &mut impl Write, ctx: &mut Ctx<'_>, span: Span) -> Result<()> {
    want_paths(ctx, true);
    sums_json(out, ctx, span, true)
}

fn text_block(
    out: &mut impl Write,
    a: &TopArgs,
    ctx: &mut Ctx<'_>,
    title: String,
    secs: f64,
    totals: bool,
) -> Result<()> {
    let shape = Shape {
        group: a.group,
        sort: a.sort,
        reverse: false,
        totals,
        filter: String::new(),
    };
    let width = 220;
    let model = ctx.model;
    let sums = if totals {
        &model.total
    } else {
        &model.interval
    };
    let rows = rows::text_rows(ctx, &shape, secs);
    writeln!(out, "{title}  {}", rows::summary(&sums.all, secs, totals))?;
    writeln!(out, "{}", rows::header(width, totals, a.sort).trim_end())?;
    for r in rows.iter().take(a.rows) {
        for l in rows::row_lines(r, width) {
            writeln!(out, "{}", l.trim_end())?;
        }
    }
    if rows.len() > a.rows {
        writeln!(out, "({} more rows)", rows.len() - a.rows)?;
    }
    writeln!(out)?;
    Ok(())
}

/// An interval as text.
pub fn interval_text(
    out: &mut impl Write,
    a: &TopArgs,
    ctx: &mut Ctx<'_>,
    span: Span,
) -> Result<()> {
    want_paths(ctx, false);
    let title = format!(
        "ioblame top: interval {} at {:.2}s ({:.2}s) by {}",
        span.number,
        span.start_ns as f64 / 1e9,
        span.secs(),
        a.group.name()
    );
    text_block(out, a, ctx, title, span.secs(), false)
}

/// The run's totals as text.
pub fn totals_text(out: &mut impl Write, a: &TopArgs, ctx: &mut Ctx<'_>, span: Span) -> Result<()> {
    want_paths(ctx, true);
    let title = format!(
        "ioblame top: totals over {:.2}s by {}",
        span.secs(),
        a.group.name()
    );
    text_block(out, a, ctx, title, span.secs(), true)
}
