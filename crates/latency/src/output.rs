//! The breakdown as a text table and as JSON lines (`docs/latency.md` documents both).

use std::io::{self, Write};

use ioblame_events::event::{dev_major, dev_minor, Dev};
use serde_json::Value;

use crate::breakdown::{Breakdown, Interval};
use crate::hist::Stat;
use crate::Latency;

/// The percentiles shown.
pub const PERCENTILES: [f64; 3] = [50.0, 95.0, 99.0];

/// What an act is, for its rows: filled in by the caller from the attribution's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActLabel {
    /// The act's number (as `ioblame acts` shows it).
    pub act: u32,
    /// The charged role's command name.
    pub role: String,
    /// The charged role's pid.
    pub pid: u32,
    /// The intent's number.
    pub intent: u32,
    /// How the IO was linked (`page`, `direct`, ...).
    pub via: String,
    /// The file: its path where known, else `MAJ:MIN/INO`.
    pub file: String,
    /// The intent's short name (`ioblame_attrib::intent_names`), empty when unknown.
    pub intent_name: String,
}

impl ActLabel {
    fn title(&self) -> String {
        format!(
            "act {}: {}[{}] int={} {} {}",
            self.act, self.role, self.pid, self.intent, self.via, self.file
        )
    }
}

/// Names for the rows: device names and act labels, from the trace and the attribution.
pub struct Labels<'a> {
    /// A device's name (`sda`, `loop0`), if the trace knows it.
    pub dev_name: &'a dyn Fn(Dev) -> Option<String>,
    /// An act's label, from its index.
    pub act: &'a dyn Fn(usize) -> Option<ActLabel>,
    /// A process name (from the trace) as the text output writes it: escaped.
    pub process: &'a dyn Fn(&str) -> String,
}

impl Labels<'_> {
    /// Labels that know no device name and no act.
    pub const NONE: Labels<'static> = Labels {
        dev_name: &|_| None,
        act: &|_| None,
        process: &|p| p.to_owned(),
    };
}

/// `MAJ:MIN` of a kernel device number.
pub fn dev_str(dev: Dev) -> String {
    format!("{}:{}", dev_major(dev), dev_minor(dev))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The rows of one group: (interval, stat) of every interval with values, the remapper
/// intervals only when they have values.
fn rows(b: &Breakdown) -> impl Iterator<Item = (Interval, &Stat)> {
    Interval::ALL
        .into_iter()
        .map(|i| (i, b.get(i)))
        .filter(|(_, s)| s.n > 0)
}

fn table(out: &mut impl Write, title: &str, b: &Breakdown) -> io::Result<()> {
    writeln!(out, "== {title} ==")?;
    writeln!(
        out,
        "{:<8} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "interval", "n", "min_us", "avg_us", "p50_us", "p95_us", "p99_us", "max_us"
    )?;
    for (i, s) in rows(b) {
        let p = PERCENTILES.map(|p| s.percentile(p).map_or(0.0, us));
        writeln!(
            out,
            "{:<8} {:>10} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>12.3}",
            i.name(),
            s.n,
            us(s.min),
            s.mean().unwrap_or(0.0) / 1000.0,
            p[0],
            p[1],
            p[2],
            us(s.max)
        )?;
    }
    writeln!(out)
}

/// What one group of the breakdown is, as its JSON line and the dataset's `latency` table
/// key it: `group` (`all`, `device`, `process` or `act`), `dev` (`MAJ:MIN` or `all`), `name`
/// (the device's or process's name, the act's title) and, for an act, its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupKey {
    /// `all`, `device`, `process` or `act`.
    pub group: &'static str,
    /// `MAJ:MIN` of a device row, else `all`.
    pub dev: String,
    /// The row's name: `all`, the device's name (else `MAJ:MIN`), the process's name, or
    /// the act's title (`act #N` when the act has no label).
    pub name: String,
    /// The act's number, on act rows.
    pub act: Option<u32>,
}

/// Every group of `lat` with its key, in output order (all, devices, processes, acts), and
/// the intervals it has values for: act rows only Q2C and D2C.
pub fn keyed_rows<'a>(
    lat: &'a Latency,
    labels: &Labels<'_>,
) -> Vec<(GroupKey, Vec<(Interval, &'a Stat)>)> {
    groups(lat, labels)
        .into_iter()
        .map(|(g, b)| {
            let act_row = matches!(g, Group::Act(..));
            let key = match g {
                Group::All => GroupKey {
                    group: "all",
                    dev: "all".into(),
                    name: "all".into(),
                    act: None,
                },
                Group::Device(dev, name) => GroupKey {
                    group: "device",
                    dev: dev_str(dev),
                    name: name.unwrap_or_else(|| dev_str(dev)),
                    act: None,
                },
                Group::Process(name) => GroupKey {
                    group: "process",
                    dev: "all".into(),
                    name,
                    act: None,
                },
                Group::Act(i, label) => GroupKey {
                    group: "act",
                    dev: "all".into(),
                    name: label
                        .as_ref()
                        .map_or_else(|| format!("act #{i}"), ActLabel::title),
                    act: Some(label.map_or(i as u32, |l| l.act)),
                },
            };
            let stats = rows(b)
                .filter(|(i, _)| !act_row || matches!(i, Interval::Q2C | Interval::D2C))
                .collect();
            (key, stats)
        })
        .collect()
}

/// The group titles and breakdowns, in output order: all, devices, processes, acts.
fn groups<'a>(lat: &'a Latency, labels: &Labels<'_>) -> Vec<(Group, &'a Breakdown)> {
    let mut v = vec![(Group::All, &lat.all)];
    for (dev, b) in &lat.devices {
        v.push((Group::Device(*dev, (labels.dev_name)(*dev)), b));
    }
    for (name, b) in &lat.processes {
        v.push((Group::Process(name.clone()), b));
    }
    for (act, b) in &lat.acts {
        v.push((Group::Act(*act, (labels.act)(*act)), b));
    }
    v
}

enum Group {
    All,
    Device(Dev, Option<String>),
    Process(String),
    Act(usize, Option<ActLabel>),
}

/// The text table: one block per group (all devices, each device, each process, each act),
/// one line per interval with values; times in µs.
pub fn text(out: &mut impl Write, lat: &Latency, labels: &Labels<'_>) -> io::Result<()> {
    writeln!(
        out,
        "# btt's latency breakdown; times in µs; pNN: nearest rank, within 0.4% (docs/latency.md)"
    )?;
    writeln!(out)?;
    for (g, b) in groups(lat, labels) {
        let title = match g {
            Group::All => "all devices".to_owned(),
            Group::Device(dev, name) => match name {
                Some(n) => format!("device {} ({n})", dev_str(dev)),
                None => format!("device {}", dev_str(dev)),
            },
            Group::Process(name) => format!("process {}", (labels.process)(&name)),
            Group::Act(i, label) => match label {
                Some(l) if !l.intent_name.is_empty() => format!("{}: {}", l.title(), l.intent_name),
                Some(l) => l.title(),
                None => format!("act #{i}"),
            },
        };
        table(out, &title, b)?;
    }
    if lat.stats.pending_at_end > 0 {
        writeln!(
            out,
            "# {} bios queued and not completed when the trace ended (not counted)",
            lat.stats.pending_at_end
        )?;
    }
    Ok(())
}

/// A JSON object whose keys keep the order they are pushed in.
#[derive(Default)]
struct Obj(Vec<(&'static str, Value)>);

impl Obj {
    fn insert(&mut self, k: &'static str, v: impl Into<Value>) {
        self.0.push((k, v.into()));
    }

    /// Writes `"key":value` pairs, comma separated, without the braces.
    fn write_fields(&self, out: &mut impl Write) -> io::Result<()> {
        for (n, (k, v)) in self.0.iter().enumerate() {
            if n > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, k)?;
            out.write_all(b":")?;
            serde_json::to_writer(&mut *out, v)?;
        }
        Ok(())
    }
}

/// One interval's figures, in the documented key order.
fn stat_json(out: &mut impl Write, s: &Stat) -> io::Result<()> {
    let p = PERCENTILES.map(|p| s.percentile(p).map(us));
    let mut o = Obj::default();
    o.insert("n", s.n);
    o.insert("min_us", (s.n > 0).then(|| us(s.min)));
    o.insert("avg_us", s.mean().map(|m| m / 1000.0));
    o.insert("max_us", (s.n > 0).then(|| us(s.max)));
    o.insert("p50_us", p[0]);
    o.insert("p95_us", p[1]);
    o.insert("p99_us", p[2]);
    out.write_all(b"{")?;
    o.write_fields(out)?;
    out.write_all(b"}")
}

/// One JSON object per line and group: `{"group": "all"|"device"|"process"|"act", "dev":
/// "MAJ:MIN" or "all", "name": ..., "q2q": {...}, ..., "q2c": {...}}`. Every interval of
/// btt's "All Devices" list is present (n 0 and nulls when empty); the remapper ones
/// (`q2q_dm`, `q2a_dm`, `q2c_dm`) only when they have values; act rows have only `q2c` and
/// `d2c`, with the act's fields.
pub fn json_lines(out: &mut impl Write, lat: &Latency, labels: &Labels<'_>) -> io::Result<()> {
    for (g, b) in groups(lat, labels) {
        let mut o = Obj::default();
        let act_row = matches!(g, Group::Act(..));
        match g {
            Group::All => {
                o.insert("dev", "all");
                o.insert("name", "all");
                o.insert("group", "all");
            }
            Group::Device(dev, name) => {
                o.insert("dev", dev_str(dev));
                o.insert("name", name.unwrap_or_else(|| dev_str(dev)));
                o.insert("group", "device");
            }
            Group::Process(name) => {
                o.insert("dev", "all");
                o.insert("name", name);
                o.insert("group", "process");
            }
            Group::Act(i, label) => {
                o.insert("dev", "all");
                match label {
                    Some(l) => {
                        o.insert("name", l.title());
                        o.insert("group", "act");
                        o.insert("act", l.act);
                        o.insert("role", l.role);
                        o.insert("pid", l.pid);
                        o.insert("intent", l.intent);
                        o.insert("intent_name", l.intent_name);
                        o.insert("via", l.via);
                        o.insert("file", l.file);
                    }
                    None => {
                        o.insert("name", format!("act #{i}"));
                        o.insert("group", "act");
                    }
                }
            }
        }
        out.write_all(b"{")?;
        o.write_fields(out)?;
        for i in Interval::ALL {
            let s = b.get(i);
            let shown = if act_row {
                matches!(i, Interval::Q2C | Interval::D2C)
            } else {
                !i.is_dm() || s.n > 0
            };
            if !shown {
                continue;
            }
            write!(out, ",\"{}\":", i.key())?;
            stat_json(out, s)?;
        }
        writeln!(out, "}}")?;
    }
    Ok(())
}

/// `n` with its digits grouped by three, commas between (`10,273`): how the text outputs
/// (`ioblame blame`'s, the benchmarks') print counts.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
