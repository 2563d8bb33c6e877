//! The address spaces of the processes whose user stacks were recorded: which module each
//! user frame's address fell in, and at which file offset (docs/attribution.md, "User
//! frames"). Built from the recorder's reading of `/proc/PID/maps` (the trace's USER_MAPS)
//! and the mappings made while recording (`PERF_RECORD_MMAP2`), kept across fork and
//! dropped at exec and exit.

use std::sync::Arc;

use ioblame_decode::{Event, EventKind};
use ioblame_format::{kernel_dev, UserMap};
use rustc_hash::FxHashMap;

use crate::model::{Module, UserFrame};

/// How the records name anonymous executable memory; its modules are `//anon:PID`.
const ANON: &str = "//anon";

/// Whether a mapping's path is anonymous memory (`//anon`, or `[anon:NAME]` as
/// `/proc/PID/maps` shows a named one).
fn is_anon(path: &str) -> bool {
    path.starts_with(ANON) || path.starts_with("[anon")
}

/// One executable mapping of a process.
#[derive(Debug, Clone)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    module: Arc<Module>,
}

/// Where user addresses go, per process, as the events tell over time.
#[derive(Debug, Default)]
pub(crate) struct AddressSpaces {
    /// Each process's mappings, sorted by start, not overlapping.
    maps: FxHashMap<u32, Vec<Map>>,
    /// The recorder's readings, by process, to apply again after an exec they came after.
    read: FxHashMap<u32, Vec<UserMap>>,
    /// Build ids by file (device, inode), for mappings recorded without one.
    build_ids: FxHashMap<(u32, u64), Vec<u8>>,
    /// Modules interned by build id (or path, without one).
    modules: FxHashMap<(Vec<u8>, String), Arc<Module>>,
    /// Per process, bumped whenever one of its mappings changes: resolutions cached under
    /// an older generation are stale.
    generations: FxHashMap<u32, u64>,
    /// The next generation number (generations are never reused, so a process gone and
    /// back does not meet an old one).
    next_generation: u64,
}

impl AddressSpaces {
    /// The spaces as the recorder read them: every reading applies from the start (the
    /// mapping held when read, and a process maps its binary and libraries first).
    pub fn new(user_maps: &[UserMap]) -> AddressSpaces {
        let mut s = AddressSpaces::default();
        for m in user_maps {
            if !m.build_id.is_empty() && m.ino != 0 {
                s.build_ids.insert(
                    (kernel_dev(m.dev_major, m.dev_minor), m.ino),
                    m.build_id.clone(),
                );
            }
            s.read.entry(m.pid).or_default().push(m.clone());
        }
        let pids: Vec<u32> = s.read.keys().copied().collect();
        for pid in pids {
            s.apply_read(pid, None);
        }
        s
    }

    /// The generation of `pid`'s mappings: it changes whenever one of them does.
    pub fn generation(&self, pid: u32) -> u64 {
        self.generations.get(&pid).copied().unwrap_or(0)
    }

    /// Marks `pid`'s mappings changed.
    fn changed(&mut self, pid: u32) {
        self.next_generation += 1;
        self.generations.insert(pid, self.next_generation);
    }

    /// Applies the recorder's readings of `pid` (those read after `after`, if given).
    fn apply_read(&mut self, pid: u32, after: Option<u64>) {
        let Some(read) = self.read.get(&pid) else {
            return;
        };
        let mut read: Vec<UserMap> = read
            .iter()
            .filter(|m| after.is_none_or(|t| m.seen_ns >= t))
            .cloned()
            .collect();
        // A later reading of a range replaces an earlier one.
        read.sort_by_key(|m| m.seen_ns);
        for m in read {
            let dev = kernel_dev(m.dev_major, m.dev_minor);
            let (module, pgoff) =
                self.mapped(pid, m.start, m.pgoff, &m.build_id, &m.path, dev, m.ino);
            self.insert(pid, m.start, m.end, pgoff, module);
        }
    }

    /// The module of a mapping of `pid` at `start`, and the offset of `start` in it: for
    /// anonymous executable memory (a JIT's code, `//anon`), a module of the process whose
    /// offsets are the addresses themselves (what its perf map names).
    #[allow(clippy::too_many_arguments)]
    fn mapped(
        &mut self,
        pid: u32,
        start: u64,
        pgoff: u64,
        build_id: &[u8],
        path: &str,
        dev: u32,
        ino: u64,
    ) -> (Arc<Module>, u64) {
        if is_anon(path) {
            let path = format!("{ANON}:{pid}");
            return (self.module(&[], &path, 0, 0), start);
        }
        (self.module(build_id, path, dev, ino), pgoff)
    }

    fn module(&mut self, build_id: &[u8], path: &str, dev: u32, ino: u64) -> Arc<Module> {
        let build_id = if build_id.is_empty() {
            self.build_ids.get(&(dev, ino)).cloned().unwrap_or_default()
        } else {
            build_id.to_vec()
        };
        // Without a build id, a module is its path: two files of one path are one module.
        let key_path = if build_id.is_empty() { path } else { "" };
        self.modules
            .entry((build_id.clone(), key_path.to_string()))
            .or_insert_with(|| {
                Arc::new(Module {
                    build_id,
                    path: path.to_string(),
                })
            })
            .clone()
    }

    /// Maps `[start, end)` of `pid`, replacing what was mapped there.
    fn insert(&mut self, pid: u32, start: u64, end: u64, pgoff: u64, module: Arc<Module>) {
        if end <= start {
            return;
        }
        self.changed(pid);
        let maps = self.maps.entry(pid).or_default();
        let mut kept: Vec<Map> = Vec::with_capacity(maps.len() + 2);
        for m in maps.drain(..) {
            if m.end <= start || m.start >= end {
                kept.push(m);
                continue;
            }
            // The parts outside the new mapping stay.
            if m.start < start {
                kept.push(Map {
                    end: start,
                    ..m.clone()
                });
            }
            if m.end > end {
                kept.push(Map {
                    start: end,
                    // Offsets wrap as addresses do: a damaged record's page offset near
                    // 2^64 must not overflow (fuzzing found it).
                    pgoff: m.pgoff.wrapping_add(end - m.start),
                    ..m
                });
            }
        }
        kept.push(Map {
            start,
            end,
            pgoff,
            module,
        });
        kept.sort_by_key(|m| m.start);
        *maps = kept;
    }

    /// Follows the task events: mappings made, processes forked (the child has its
    /// parent's mappings), exec'd (the old image is gone) and exited.
    pub fn on_event(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Mmap {
                pid,
                start,
                len,
                pgoff,
                dev,
                ino,
                build_id,
                path,
            } => {
                let (module, pgoff) = self.mapped(*pid, *start, *pgoff, build_id, path, *dev, *ino);
                self.insert(*pid, *start, start.saturating_add(*len), pgoff, module);
            }
            // perf.data's records of the processes alive at start come as forks at time 0,
            // each followed by its own mappings: not the parent's copy.
            EventKind::Fork { pid, ppid, .. } if pid != ppid && ev.time != 0 => {
                if let Some(parent) = self.maps.get(ppid).cloned() {
                    self.changed(*pid);
                    self.maps.insert(*pid, parent);
                }
            }
            EventKind::Comm {
                pid, exec: true, ..
            } => {
                if self.maps.remove(pid).is_some() {
                    self.changed(*pid);
                }
                // Readings taken after the exec are of the new image.
                self.apply_read(*pid, Some(ev.time));
            }
            EventKind::Exit { pid, tid, .. } if pid == tid && self.maps.remove(pid).is_some() => {
                self.changed(*pid);
            }
            _ => {}
        }
    }

    /// The executable mappings of process `pid`, for the unwinding of its stack copies.
    pub fn executable(&self, pid: u32) -> Vec<ioblame_unwind::Mapped<'_>> {
        self.maps.get(&pid).map_or_else(Vec::new, |maps| {
            maps.iter()
                .map(|m| ioblame_unwind::Mapped {
                    start: m.start,
                    end: m.end,
                    pgoff: m.pgoff,
                    build_id: &m.module.build_id,
                    path: &m.module.path,
                })
                .collect()
        })
    }

    /// The frame of user address `ip` of process `pid`.
    pub fn frame(&self, pid: u32, ip: u64) -> UserFrame {
        let hit = self.maps.get(&pid).and_then(|maps| {
            let i = maps.partition_point(|m| m.start <= ip);
            maps[..i].last().filter(|m| ip < m.end)
        });
        match hit {
            Some(m) => UserFrame {
                module: Some(m.module.clone()),
                offset: (ip - m.start).wrapping_add(m.pgoff),
                names: Vec::new(),
            },
            None => UserFrame {
                module: None,
                offset: ip,
                names: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(time: u64, kind: EventKind) -> Event {
        Event {
            time,
            cpu: 0,
            pid: 0,
            tid: 0,
            kind,
            stack: None,
            cgroup: 0,
            stack_copy: None,
        }
    }

    fn mmap(pid: u32, start: u64, len: u64, pgoff: u64, id: u8, path: &str) -> Event {
        ev(
            10,
            EventKind::Mmap {
                pid,
                start,
                len,
                pgoff,
                dev: 0,
                ino: 0,
                build_id: vec![id; 20],
                path: path.into(),
            },
        )
    }

    fn at(s: &AddressSpaces, pid: u32, ip: u64) -> (Option<String>, u64) {
        let f = s.frame(pid, ip);
        (f.module.map(|m| m.path.clone()), f.offset)
    }

    #[test]
    fn addresses_become_module_offsets_across_fork_exec_and_remaps() {
        let read = UserMap {
            pid: 7,
            start: 0x1000,
            end: 0x3000,
            pgoff: 0x2000,
            dev_major: 8,
            dev_minor: 1,
            ino: 5,
            build_id: vec![1; 20],
            seen_ns: 50,
            path: "/bin/app".into(),
        };
        let mut s = AddressSpaces::new(std::slice::from_ref(&read));
        assert_eq!(at(&s, 7, 0x1010), (Some("/bin/app".into()), 0x2010));
        assert_eq!(at(&s, 7, 0x3000), (None, 0x3000));
        assert_eq!(at(&s, 8, 0x1010), (None, 0x1010));
        // A library mapped over the upper half of the binary's range.
        s.on_event(&mmap(7, 0x2000, 0x2000, 0, 2, "/lib/libc.so"));
        assert_eq!(at(&s, 7, 0x1fff), (Some("/bin/app".into()), 0x2fff));
        assert_eq!(at(&s, 7, 0x2004), (Some("/lib/libc.so".into()), 4));
        // A forked child has the same mappings; a thread changes nothing.
        s.on_event(&ev(
            20,
            EventKind::Fork {
                pid: 9,
                ppid: 7,
                tid: 9,
                ptid: 7,
            },
        ));
        assert_eq!(at(&s, 9, 0x2004), (Some("/lib/libc.so".into()), 4));
        // The parent execs before the recorder's reading: the reading is of the new image
        // and stands; the old mappings are gone.
        s.on_event(&ev(
            30,
            EventKind::Comm {
                pid: 7,
                tid: 7,
                comm: "app".into(),
                exec: true,
            },
        ));
        assert_eq!(at(&s, 7, 0x1010), (Some("/bin/app".into()), 0x2010));
        assert_eq!(at(&s, 7, 0x2004), (Some("/bin/app".into()), 0x3004));
        // An exec after the reading: nothing known until its mappings come.
        s.on_event(&ev(
            60,
            EventKind::Comm {
                pid: 9,
                tid: 9,
                comm: "sh".into(),
                exec: true,
            },
        ));
        assert_eq!(at(&s, 9, 0x2004), (None, 0x2004));
        // A mapping recorded without a build id takes the one read for its file.
        s.on_event(&ev(
            70,
            EventKind::Mmap {
                pid: 9,
                start: 0x4000,
                len: 0x1000,
                pgoff: 0,
                dev: kernel_dev(8, 1),
                ino: 5,
                build_id: Vec::new(),
                path: "/proc/self/root/bin/app".into(),
            },
        ));
        let f = s.frame(9, 0x4008);
        assert_eq!(f.module.unwrap().build_id, vec![1; 20]);
        s.on_event(&ev(
            80,
            EventKind::Exit {
                pid: 9,
                ppid: 1,
                tid: 9,
                ptid: 1,
            },
        ));
        assert_eq!(at(&s, 9, 0x4008), (None, 0x4008));
        // A JIT's code: a module of its process, offsets are addresses.
        s.on_event(&mmap(7, 0x7f00_0000_0000, 0x1000, 0, 0, "//anon"));
        let f = s.frame(7, 0x7f00_0000_0040);
        assert_eq!(f.offset, 0x7f00_0000_0040);
        let m = f.module.unwrap();
        assert_eq!(m.path, "//anon:7");
        assert_eq!(m.jit_pid(), Some(7));
    }

    /// Damaged records (a page offset near 2^64, a mapping to the end of the address space)
    /// give wrapped offsets, never an overflow: the events fuzzer found the split of such a
    /// mapping by a later one.
    #[test]
    fn offsets_near_the_top_of_u64_wrap_instead_of_overflowing() {
        let mut s = AddressSpaces::new(&[]);
        s.on_event(&mmap(7, 0x1000, 0x3000, u64::MAX - 0x10, 1, "/bin/app"));
        assert_eq!(at(&s, 7, 0x1020), (Some("/bin/app".into()), 0x0f));
        // A mapping inside it splits it: the upper part's offset wraps too.
        s.on_event(&mmap(7, 0x2000, 0x1000, 0, 2, "/lib/libc.so"));
        assert_eq!(at(&s, 7, 0x3000), (Some("/bin/app".into()), 0x1fef));
        // A mapping whose length runs past the top ends there.
        s.on_event(&mmap(7, u64::MAX - 0xff, u64::MAX, u64::MAX, 3, "/x"));
        assert_eq!(at(&s, 7, u64::MAX - 1), (Some("/x".into()), 0xfd));
    }

    /// perf.data's records of the processes alive at start: a fork at time 0 from the
    /// parent, then the process's own mappings. It does not inherit the parent's.
    #[test]
    fn perf_s_forks_at_time_zero_copy_nothing() {
        let mut s = AddressSpaces::new(&[]);
        s.on_event(&mmap(100, 0x55cd_0000_0000, 0xc1000, 0, 1, "/usr/bin/bash"));
        let fork = |time| {
            ev(
                time,
                EventKind::Fork {
                    pid: 200,
                    ppid: 100,
                    tid: 200,
                    ptid: 100,
                },
            )
        };
        s.on_event(&fork(0));
        s.on_event(&mmap(200, 0x562c_0000_0000, 0xb000, 0, 2, "/usr/bin/tail"));
        assert_eq!(at(&s, 200, 0x55cd_0000_1234), (None, 0x55cd_0000_1234));
        // A fork while recording does.
        s.on_event(&fork(5));
        assert_eq!(
            at(&s, 200, 0x55cd_0000_1234),
            (Some("/usr/bin/bash".into()), 0x1234)
        );
    }
}
