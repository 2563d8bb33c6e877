//! The names `ioblame top` shows: files' paths and cgroups' paths as the recording names
//! them (the recorder appends names while it records, so they are looked up again, at most
//! every [`REFRESH`]), and the intents' names over the stacks seen so far.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioblame_attrib::names::{name_stacks, normalize};
use ioblame_attrib::{CgroupNames, Symbolizer as _};
use ioblame_decode::{dev_major, Dev};
use ioblame_format::Trace;

use super::model::Model;

/// The shortest time between two readings of the recording's name tables.
pub const REFRESH: Duration = Duration::from_secs(2);

/// Names looked up so far, and those still wanted.
pub struct Names {
    dir: PathBuf,
    /// The recorded filesystems' devices.
    mounts: Vec<Dev>,
    /// The block devices' names.
    devices: HashMap<Dev, String>,
    paths: HashMap<(Dev, u64), String>,
    wanted: HashSet<(Dev, u64)>,
    last: Option<Instant>,
    cgroups: Option<CgroupNames>,
    /// Intent names by the view's stack id, for the first `named` stacks.
    intents: Vec<String>,
    named: usize,
}

impl Names {
    /// The names of the trace in `dir` (`trace`: as first opened).
    pub fn new(dir: &Path, trace: &Trace) -> Names {
        Names {
            dir: dir.to_path_buf(),
            mounts: trace
                .metadata()
                .mounts
                .iter()
                .map(|m| ioblame_format::kernel_dev(m.major, m.minor))
                .collect(),
            devices: trace
                .metadata()
                .block_devices
                .iter()
                .map(|d| (ioblame_format::kernel_dev(d.major, d.minor), d.name.clone()))
                .collect(),
            paths: HashMap::new(),
            wanted: HashSet::new(),
            last: None,
            cgroups: CgroupNames::of(trace),
            intents: Vec::new(),
            named: 0,
        }
    }

    /// Names given outright (the view's tests): paths by file, cgroups, devices.
    #[cfg(test)]
    pub fn fixed(
        paths: &[((Dev, u64), &str)],
        cgroups: &[(u64, &str)],
        devices: &[(Dev, &str)],
    ) -> Names {
        Names {
            dir: PathBuf::new(),
            mounts: Vec::new(),
            devices: devices.iter().map(|(d, n)| (*d, n.to_string())).collect(),
            paths: paths.iter().map(|(k, p)| (*k, p.to_string())).collect(),
            wanted: HashSet::new(),
            // Never read: the directory is not a trace.
            last: Some(Instant::now() + Duration::from_secs(1 << 20)),
            cgroups: CgroupNames::new(cgroups.iter().map(|(id, p)| ioblame_format::Cgroup {
                id: *id,
                path: p.to_string(),
            })),
            intents: Vec::new(),
            named: 0,
        }
    }

    /// The path of inode `ino` of `dev`, as the recording names it. `exact`: `dev` is the
    /// file's filesystem (an act's); otherwise it is the disk a dirtying named, and the
    /// recorded filesystems on it are tried.
    pub fn path(&mut self, dev: Dev, ino: u64, exact: bool) -> Option<String> {
        if ino == 0 || ino == dev as u64 {
            return None;
        }
        let candidates: Vec<Dev> = if exact {
            vec![dev]
        } else {
            std::iter::once(dev)
                .chain(
                    self.mounts
                        .iter()
                        .copied()
                        .filter(|&m| m != dev && dev_major(m) == dev_major(dev)),
                )
                .collect()
        };
        for d in &candidates {
            if let Some(p) = self.paths.get(&(*d, ino)) {
                return Some(p.clone());
            }
        }
        for d in candidates {
            self.wanted.insert((d, ino));
        }
        None
    }

    /// A device's name (`sda`), or `MAJ:MIN`.
    pub fn device(&self, dev: Dev) -> String {
        match self.devices.get(&dev) {
            Some(n) => n.clone(),
            None => crate::text::dev_str(dev),
        }
    }

    /// The path of cgroup `id`.
    pub fn cgroup(&self, id: u64) -> Option<&str> {
        self.cgroups.as_ref()?.path(id)
    }

    /// The cgroup table as read last.
    pub fn cgroups(&self) -> Option<&CgroupNames> {
        self.cgroups.as_ref()
    }

    /// Reads the recording's name tables again for the names wanted, when [`REFRESH`] has
    /// passed since the last time.
    pub fn refresh(&mut self) {
        if self.wanted.is_empty() || self.last.is_some_and(|t| t.elapsed() < REFRESH) {
            return;
        }
        self.refresh_now();
    }

    /// Reads the recording's name tables again (the recording ended: its last tables are
    /// written).
    pub fn refresh_now(&mut self) {
        self.last = Some(Instant::now());
        let Ok(trace) = Trace::open(&self.dir) else {
            return;
        };
        let table = trace.paths_of(&self.wanted);
        for (dev, ino, p) in table.iter() {
            self.paths.insert((dev, ino), p.to_string());
        }
        self.wanted.retain(|k| !self.paths.contains_key(k));
        if let Some(c) = CgroupNames::of(&trace) {
            self.cgroups = Some(c);
        }
    }

    /// The name of the view's stack `id`: its entry point and the frames that tell it from
    /// the other stacks seen so far (`docs/attribution.md`, "Intent names"; the writeback
    /// reason is not part of it: the view's rows hold the acts of every reason).
    pub fn intent(&mut self, model: &Model, symbols: &ioblame_decode::Symbolizer, id: u32) -> &str {
        let stacks = model.stacks();
        if self.named != stacks.len() {
            // The first two slots stand for the reserved intents #0 and #1.
            let mut all: Vec<(u32, Vec<String>)> = vec![(0, Vec::new()), (0, Vec::new())];
            all.extend(stacks.iter().map(|s| {
                (
                    0,
                    s.iter()
                        .map(|&a| match symbols.symbol(a) {
                            Some(n) if !normalize(&n).is_empty() => normalize(&n).to_string(),
                            _ => format!("{a:#x}"),
                        })
                        .collect(),
                )
            }));
            self.intents = name_stacks(&all).split_off(2);
            self.named = stacks.len();
        }
        self.intents.get(id as usize).map_or("?", |s| s.as_str())
    }
}
