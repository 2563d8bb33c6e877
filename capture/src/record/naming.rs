//! The FILES table: the walk of the recorded filesystems (`--paths walk`, and what no handle
//! named), and the namer thread that names the inodes the records refer to as they first
//! appear (`--paths touched`).

use std::collections::HashSet;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ioblame_format::{
    BlockDevice, FileTable, Mount, FILES_AT_END, FILES_CAPPED, FILES_TIMED_OUT, FILES_TOUCHED,
};

use super::open::Plan;
use super::writer::{ToWriter, WriterLink};
use crate::names::{self, Found, Name, Namer};
use crate::{paths, snapshot};

/// The walk of the recorded filesystems that makes a FILES table.
pub(super) struct FilesWalk<'a> {
    pub(super) mounts: Vec<Mount>,
    /// The devices of `--devices` (none: every block device's filesystems).
    pub(super) devs: Option<Vec<(u32, u32)>>,
    pub(super) block_devices: &'a [BlockDevice],
    pub(super) limits: paths::Limits,
}

impl FilesWalk<'_> {
    /// Walks the filesystems; `flags` is added to the table's.
    /// Warns when the walk was cut short (the analyzer says so too).
    pub(super) fn walk(&self, flags: u32) -> FileTable {
        let ms = paths::mounts_to_walk(&self.mounts, self.devs.as_deref(), self.block_devices);
        let t = paths::walk(&ms, self.limits, flags);
        let when = if flags & FILES_AT_END != 0 {
            "end"
        } else {
            "start"
        };
        if t.flags & FILES_TIMED_OUT != 0 {
            eprintln!(
                "ioblame-capture: warning: the walk for file paths at the {when} stopped after \
                 {:?} (--paths-time) with {} paths: some files will be unnamed",
                self.limits.budget,
                t.entries.len()
            );
        }
        if t.flags & FILES_CAPPED != 0 {
            eprintln!(
                "ioblame-capture: warning: the walk for file paths at the {when} stopped at \
                 {} paths (--paths-max-entries): some files will be unnamed",
                self.limits.max_entries
            );
        }
        t
    }
}

/// How often the namer hands the names it found to the writer while recording: a recorder
/// killed later keeps them.
const NAMES_EVERY: Duration = Duration::from_secs(2);

/// What the namer thread returns: itself, every name found, the inodes left to the walk.
type NamerDone = (Namer, names::Table, HashSet<(u32, u64)>);

/// The naming of the inodes the trace refers to (`--paths touched`): a thread that names them
/// as the recording finds them.
pub(super) struct Naming {
    pub(super) tx: std::sync::mpsc::Sender<Vec<(u32, u64)>>,
    pub(super) thread: JoinHandle<NamerDone>,
    /// The mounts it names in (one per filesystem), for the walk at the end.
    pub(super) mounts: Vec<Mount>,
    /// Set when the recording ends: past it the namer leaves what is queued to the walk, so
    /// a backlog of lookups cannot hold the stop beyond `--paths-time`.
    pub(super) deadline: Arc<std::sync::OnceLock<Instant>>,
}

/// The filesystems whose files are named: one mount each (every mount of a btrfs: each
/// mounted subvolume is looked in), of the recorded devices (`devices_given`), or of every
/// block device.
pub(super) fn naming_mounts(plan: &Plan, devices_given: bool) -> Vec<Mount> {
    let all = snapshot::mounts();
    let devs: Option<Vec<(u32, u32)>> =
        devices_given.then(|| plan.fdevs.iter().map(|d| (d.major, d.minor)).collect());
    paths::mounts_to_name(&all, devs.as_deref(), &plan.block_devices)
        .into_iter()
        .cloned()
        .collect()
}

/// Starts the namer thread on `mounts`.
pub(super) fn start_naming(mounts: Vec<Mount>, link: &WriterLink) -> Result<Naming> {
    let mut namer = Namer::new(&mounts.iter().collect::<Vec<_>>());
    namer.close_nested();
    for n in &namer.notes {
        eprintln!("{n}");
    }
    let (ntx, nrx) = std::sync::mpsc::channel::<Vec<(u32, u64)>>();
    let wlink = link.clone();
    let deadline: Arc<std::sync::OnceLock<Instant>> = Arc::default();
    let d = deadline.clone();
    let thread = std::thread::Builder::new()
        .name("ioblame-namer".into())
        .spawn(move || namer_thread(namer, nrx, wlink, &d))
        .context("starting the namer thread")?;
    Ok(Naming {
        tx: ntx,
        thread,
        mounts,
        deadline,
    })
}

/// Names each inode as it first appears; every [`NAMES_EVERY`] hands the new names to the
/// writer. Returns, when the recording ends, the namer, every name found and the inodes left
/// to the walk.
fn namer_thread(
    mut namer: Namer,
    rx: Receiver<Vec<(u32, u64)>>,
    link: WriterLink,
    deadline: &std::sync::OnceLock<Instant>,
) -> NamerDone {
    use std::sync::mpsc::RecvTimeoutError;
    let mut table = names::Table::default();
    let mut part = names::Table::default();
    let mut to_walk: HashSet<(u32, u64)> = HashSet::new();
    let mut last = Instant::now();
    // When the nested btrfs subvolumes were opened: they are open only while there are
    // btrfs inodes to name, at most NAMES_EVERY at a time (a deleted one's tree waits).
    let mut nested_since: Option<Instant> = None;
    loop {
        let mut idle = false;
        match rx.recv_timeout(NAMES_EVERY) {
            Ok(batch) => {
                let btrfs = batch
                    .iter()
                    .any(|k| namer.is_btrfs(k.0) && table.get(*k).is_none());
                if btrfs && nested_since.is_none() {
                    namer.rediscover();
                    nested_since = Some(Instant::now());
                }
                for k in batch {
                    // Touched keeps only the recorded filesystems' inodes; a filesystem whose
                    // mount point could not be read is not known here.
                    if !namer.knows(k.0) || table.get(k).is_some() || to_walk.contains(&k) {
                        continue;
                    }
                    if deadline.get().is_some_and(|d| Instant::now() >= *d) {
                        to_walk.insert(k);
                        continue;
                    }
                    let name = match namer.name(k.0, k.1) {
                        Found::Named(p) => Name::Path(p),
                        Found::Unnamed(w) => Name::Unnamed(w),
                        Found::Walk => {
                            to_walk.insert(k);
                            continue;
                        }
                    };
                    table.set(k, name.clone());
                    part.set(k, name);
                }
            }
            Err(RecvTimeoutError::Timeout) => idle = true,
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if nested_since.is_some_and(|t| idle || t.elapsed() >= NAMES_EVERY) {
            namer.close_nested();
            nested_since = None;
        }
        if last.elapsed() >= NAMES_EVERY && !part.is_empty() {
            link.send(ToWriter::Names(part.table(FILES_TOUCHED)));
            part = names::Table::default();
            last = Instant::now();
        }
    }
    (namer, table, to_walk)
}

impl Naming {
    /// Ends the naming (the sender must be dropped, or this waits for it): looks every named
    /// inode up again (a renamed file gets its new name; half of `budget` at most), walks the
    /// filesystems for the inodes no handle named (the rest of `budget`), and returns the
    /// whole table, with the flags of what was left out. Prints what it did.
    pub(super) fn finish(self, budget: Duration, over_cap: usize) -> FileTable {
        let started = Instant::now();
        let _ = self.deadline.set(started + budget / 2);
        drop(self.tx);
        let Ok((mut namer, mut table, mut to_walk)) = self.thread.join() else {
            eprintln!("ioblame-capture: warning: the namer thread failed: no file names");
            return FileTable::default();
        };
        let while_recording = namer.stats;
        // Subvolumes created while recording are asked too; btrfs inodes none of the
        // subvolumes held then are looked up again with the others.
        namer.rediscover();
        let named: Vec<(u32, u64)> = table
            .iter()
            .filter(|(k, n)| match n {
                Name::Path(_) => true,
                Name::Unnamed(w) => {
                    matches!(
                        w,
                        ioblame_format::Unnamed::Deleted | ioblame_format::Unnamed::NoPath
                    ) && namer.is_btrfs(k.0)
                }
            })
            .map(|(k, _)| *k)
            .collect();
        let mut renames_left = 0;
        for (i, k) in named.iter().enumerate() {
            if started.elapsed() >= budget / 2 {
                renames_left = named.len() - i;
                break;
            }
            match namer.name(k.0, k.1) {
                Found::Named(p) => table.set(*k, Name::Path(p)),
                // A btrfs inode number another subvolume holds by now: the events may
                // be of either file (this replaces the path found earlier).
                Found::Unnamed(w @ ioblame_format::Unnamed::Ambiguous) => {
                    table.set(*k, Name::Unnamed(w))
                }
                _ => {}
            }
        }
        let mut flags = FILES_TOUCHED | FILES_AT_END;
        let mut by_walk = 0;
        if !to_walk.is_empty() {
            let ms: Vec<&Mount> = self.mounts.iter().collect();
            let t = paths::find(&ms, &mut to_walk, budget.saturating_sub(started.elapsed()));
            by_walk = t.entries.len();
            for e in t.entries {
                table.set((e.dev, e.ino), Name::Path(e.path));
            }
            flags |= t.flags & FILES_TIMED_OUT;
        }
        for k in to_walk {
            table.set(k, Name::Unnamed(ioblame_format::Unnamed::NotFound));
        }
        if over_cap > 0 {
            flags |= FILES_CAPPED;
            eprintln!(
                "ioblame-capture: warning: {over_cap} or more files beyond --paths-max-entries \
                 were touched and are not named"
            );
        }
        if renames_left > 0 {
            eprintln!(
                "ioblame-capture: note: {renames_left} files were not looked up again within \
                 --paths-time: if renamed, they keep their earlier name"
            );
        }
        let (n, unnamed) = table.counts();
        // Named on btrfs (by its inode lookup unless the kernel refused it: then by the walk).
        let on_btrfs = if namer.stats.by_ino_paths > 0 {
            table
                .iter()
                .filter(|(k, n)| matches!(n, Name::Path(_)) && namer.is_btrfs(k.0))
                .count()
        } else {
            0
        };
        let by_btrfs = if on_btrfs > 0 {
            format!(", {on_btrfs} by btrfs's inode lookup")
        } else {
            String::new()
        };
        let mut line = format!(
            "ioblame-capture: named {n} of {} files the trace refers to ({} by file handle\
             {by_btrfs}, {by_walk} by a walk): {} lookups in {:.3} s while recording, {:.3} s \
             at the end",
            n + unnamed.values().sum::<usize>(),
            n.saturating_sub(by_walk + on_btrfs),
            while_recording.by_handle
                + while_recording.by_ino_paths
                + while_recording.ambiguous
                + while_recording.deleted
                + while_recording.to_walk,
            while_recording.time.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        for (code, k) in unnamed {
            if let Some(w) = ioblame_format::Unnamed::from_code(code) {
                line.push_str(&format!("; {k} {}", w.describe()));
            }
        }
        eprintln!("{line}");
        table.table(flags)
    }
}
