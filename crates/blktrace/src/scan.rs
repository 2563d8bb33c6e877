//! The first reading of a recording: what the analysis needs to know before the records
//! come in time order (devices and their levels, partitions, task names, the wall clock),
//! and what `ioblame info` shows.

use std::collections::{BTreeMap, HashMap, HashSet};

use ioblame_events::Dev;

use crate::reader::{Cursor, Source};
use crate::record::{Action, Payload};
use crate::Problem;

/// Messages kept (the count goes on).
pub const MESSAGES_KEPT: usize = 100;

/// One device the recording names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceInfo {
    /// Kernel encoding (`major << 20 | minor`).
    pub dev: Dev,
    /// A name: the `NAME` of the `NAME.blktrace.N` files that hold its records, else
    /// `MAJ:MIN`.
    pub name: String,
    /// Records of this device.
    pub records: u64,
    /// The end of the highest sector an IO touched (blktrace records no device size).
    pub sector_end: u64,
    /// Q records.
    pub queued: u64,
    /// D records.
    pub issued: u64,
    /// C records.
    pub completed: u64,
    /// Bios of this device were remapped to another device (it is a stacked device: dm,
    /// md), so the same IO shows again lower down.
    pub upper: bool,
    /// A partition (known from its remap records): the disk and the start sector. The
    /// kernel remaps a partition's bio to its disk before queueing it (`A` from the
    /// partition to the disk, then `Q` on the disk): a device remapped from that has no
    /// record of its own, whose number is a partition's of that disk (the same major, or
    /// the extended major 259) and whose remaps all keep one offset, is a partition.
    pub partition_of: Option<(Dev, u64)>,
}

/// What the first reading found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Records read.
    pub records: u64,
    /// Records per action, indexed by [`Action::index`].
    pub by_action: [u64; 24],
    /// Version 7 and version 8 records.
    pub versions: [u64; 2],
    /// Devices, by number.
    pub devices: Vec<DeviceInfo>,
    /// Task names from the process notifies (`pid`, first name given).
    pub tasks: Vec<(u32, String)>,
    /// Pids that queued (or, on a device recorded without Q, issued) IO and that no notify
    /// names.
    pub unnamed: Vec<u32>,
    /// The wall clock the timestamp notify gives (ns since the Unix epoch), and the record
    /// time it was taken at.
    pub wall_clock: Option<(u64, u64)>,
    /// Messages (`time`, device, text), the first [`MESSAGES_KEPT`].
    pub messages: Vec<(u64, Dev, String)>,
    /// Messages in all.
    pub message_count: u64,
    /// Time of the first and last record.
    pub span: (u64, u64),
    /// Highest CPU number + 1.
    pub cpus: u32,
    /// Records carrying a cgroup id, and the distinct ids (up to 4096).
    pub cgroup_records: u64,
    /// Distinct cgroup ids seen (up to 4096).
    pub cgroups: Vec<u64>,
    /// Damage and other things read past, in the order found.
    pub problems: Vec<Problem>,
}

impl Scan {
    /// The device `dev`.
    pub fn device(&self, dev: Dev) -> Option<&DeviceInfo> {
        self.devices
            .binary_search_by_key(&dev, |d| d.dev)
            .ok()
            .map(|i| &self.devices[i])
    }
}

/// Whether `part` can be a partition of `disk` by its number: the same major (sd, vd, a loop
/// device with `max_part`) or the extended major 259 (`losetup -P`, nvme, md partitions),
/// and not the disk itself.
fn partition_number(part: Dev, disk: Dev) -> bool {
    part != disk && (part >> 20 == disk >> 20 || part >> 20 == 259)
}

/// `NAME` and `CPU` of a file named `NAME.blktrace.CPU`.
fn name_cpu(path: &std::path::Path) -> Option<(String, u32)> {
    let f = path.file_name()?.to_str()?;
    let (name, cpu) = f.rsplit_once(".blktrace.")?;
    Some((name.to_string(), cpu.parse().ok()?))
}

pub(crate) fn scan(sources: &[Source], mut problems: Vec<Problem>) -> Scan {
    let mut s = Scan {
        span: (u64::MAX, 0),
        ..Scan::default()
    };
    let mut devs: BTreeMap<Dev, DeviceInfo> = BTreeMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut issuers: HashSet<u32> = HashSet::new();
    let mut d_issuers: HashMap<Dev, HashSet<u32>> = HashMap::new();
    let mut cgroups: HashSet<u64> = HashSet::new();
    let mut dev_names: HashMap<Dev, HashSet<String>> = HashMap::new();
    // Remaps from one device to another: from -> (to, offset), None once they disagree.
    let mut remapped: BTreeMap<Dev, Option<(Dev, u64)>> = BTreeMap::new();
    for src in sources {
        let named = name_cpu(&src.path);
        let mut mismatched = 0u64;
        let mut cur = Cursor::new(src);
        let mut file_devs: HashSet<Dev> = HashSet::new();
        while let Some(r) = cur.next(&mut problems) {
            s.records += 1;
            s.by_action[r.action.index()] += 1;
            s.versions[(r.version == 8) as usize] += 1;
            s.span.0 = s.span.0.min(r.time);
            s.span.1 = s.span.1.max(r.time);
            s.cpus = s.cpus.max(r.cpu.saturating_add(1));
            if let Some((_, cpu)) = &named {
                if *cpu != r.cpu && src.kind == crate::Kind::Binary {
                    mismatched += 1;
                }
            }
            if let Some(cg) = r.cgroup {
                s.cgroup_records += 1;
                if cgroups.len() < 4096 {
                    cgroups.insert(cg);
                }
            }
            let notify = matches!(
                r.action,
                Action::Process | Action::Timestamp | Action::Message
            );
            if !notify {
                file_devs.insert(r.device);
                let d = devs.entry(r.device).or_default();
                d.records += 1;
                if r.bytes > 0 {
                    d.sector_end = d
                        .sector_end
                        .max(r.sector.saturating_add(r.nr_sectors() as u64));
                }
            }
            match (&r.action, &r.payload) {
                (Action::Queue, _) => {
                    devs.entry(r.device).or_default().queued += 1;
                    issuers.insert(r.pid);
                }
                (Action::Issue, _) => {
                    devs.entry(r.device).or_default().issued += 1;
                    d_issuers.entry(r.device).or_default().insert(r.pid);
                }
                (Action::Complete, _) => devs.entry(r.device).or_default().completed += 1,
                (Action::Process, Payload::Process { comm }) => {
                    names.entry(r.pid).or_insert_with(|| comm.clone());
                }
                (Action::Timestamp, Payload::Timestamp { sec, nsec }) if s.wall_clock.is_none() => {
                    let wall = *sec as u64 * 1_000_000_000 + *nsec as u64;
                    s.wall_clock = Some((wall, r.time));
                }
                (Action::Message, Payload::Message { text }) => {
                    s.message_count += 1;
                    if s.messages.len() < MESSAGES_KEPT {
                        s.messages.push((r.time, r.device, text.clone()));
                    }
                }
                (
                    Action::Remap,
                    Payload::Remap {
                        from,
                        to,
                        sector_from,
                    },
                ) => {
                    if from == to && *from != r.device {
                        // A partition's bio moved to its disk.
                        let start = r.sector.saturating_sub(*sector_from);
                        devs.entry(*from).or_default().partition_of = Some((r.device, start));
                    } else if from != to && *from != r.device {
                        let shape = r.sector.checked_sub(*sector_from).map(|o| (*to, o));
                        remapped
                            .entry(*from)
                            .and_modify(|e| {
                                if *e != shape {
                                    *e = None;
                                }
                            })
                            .or_insert(shape);
                        devs.entry(*from).or_default();
                        devs.entry(*to).or_default();
                    }
                }
                _ => {}
            }
        }
        cur.finish(&mut problems);
        if mismatched > 0 {
            problems.push(Problem::CpuMismatch {
                path: src.path.clone(),
                records: mismatched,
            });
        }
        if let (Some((name, _)), 1) = (&named, file_devs.len()) {
            for d in file_devs {
                dev_names.entry(d).or_default().insert(name.clone());
            }
        }
    }
    if s.records == 0 {
        s.span = (0, 0);
    }
    for (from, shape) in remapped {
        let d = devs.entry(from).or_default();
        match shape {
            Some((disk, start)) if d.records == 0 && partition_number(from, disk) => {
                d.partition_of = Some((disk, start));
            }
            _ => d.upper = true,
        }
    }
    for (dev, mut d) in devs {
        d.dev = dev;
        d.name = match dev_names.get(&dev) {
            Some(n) if n.len() == 1 => n.iter().next().cloned().unwrap_or_default(),
            _ => format!("{}:{}", dev >> 20, dev & 0xfffff),
        };
        // Issuers of IO recorded without Q are the D's tasks.
        if d.queued == 0 {
            if let Some(p) = d_issuers.get(&dev) {
                issuers.extend(p.iter().copied());
            }
        }
        s.devices.push(d);
    }
    let mut tasks: Vec<(u32, String)> = names.into_iter().collect();
    tasks.sort();
    let mut unnamed: Vec<u32> = issuers
        .into_iter()
        .filter(|p| tasks.binary_search_by_key(p, |t| t.0).is_err())
        .collect();
    unnamed.sort_unstable();
    s.tasks = tasks;
    s.unnamed = unnamed;
    let mut cg: Vec<u64> = cgroups.into_iter().collect();
    cg.sort_unstable();
    s.cgroups = cg;
    s.problems = problems;
    s
}
