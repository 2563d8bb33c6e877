//! What `ioblame top` shows: the IOs charged and the bytes dirtied, summed per interval and
//! since the start, per act and per the rows of each grouping.
//!
//! The view's unit is the act without its modifier: the role, the stack and the file
//! ([`Base`]). Bytes are dirtied before the writeback reason that completes an act's intent
//! is known, so the acts of one role, stack and file that differ only in their writeback
//! reason, or in how their IO was linked, are one row; the JSON output keeps the acts apart.

use std::collections::{BTreeMap, HashMap};

use ioblame_attrib::{ActId, ActTotals, Dirtied, Io, RoleId, Tables};
use ioblame_decode::Dev;

/// Sums of one interval or of the whole run, for one row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Bytes made dirty.
    pub dirtied: u64,
    /// Bytes read (readahead included).
    pub read: u64,
    /// Bytes written.
    pub written: u64,
    /// IOs (reads and writes).
    pub ios: u64,
    /// Device time: the sum of the IOs' issue-to-completion times, µs.
    pub dev_us: u64,
    /// The sum of the IOs' queue-to-issue times, µs.
    pub queue_us: u64,
    /// The time other IOs waited behind this one's (as `ioblame blame` splits each wait
    /// among the requests then on the device), ns.
    pub behind_ns: u64,
}

impl Stat {
    /// Adds a charged IO.
    pub fn add_io(&mut self, io: &Io) {
        match io.dir.index() {
            2 => self.written += io.size,
            _ => self.read += io.size,
        }
        self.ios += 1;
        self.dev_us += io.io_time;
        self.queue_us += io.wait_time;
    }

    /// Adds another row's sums.
    pub fn add(&mut self, o: &Stat) {
        self.dirtied += o.dirtied;
        self.read += o.read;
        self.written += o.written;
        self.ios += o.ios;
        self.dev_us += o.dev_us;
        self.queue_us += o.queue_us;
        self.behind_ns += o.behind_ns;
    }

    /// Mean queue latency, µs (0 without IO).
    pub fn queue_lat_us(&self) -> u64 {
        self.queue_us.checked_div(self.ios).unwrap_or(0)
    }

    /// Mean device latency, µs (0 without IO).
    pub fn dev_lat_us(&self) -> u64 {
        self.dev_us.checked_div(self.ios).unwrap_or(0)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Stat::default()
    }
}

/// An act's sums, as `ioblame acts` counts them, and its device and queue time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActStat {
    /// Bytes and IOs per direction, as the offline analysis' per-act totals.
    pub totals: ActTotals,
    /// The view's sums.
    pub stat: Stat,
}

/// The view's unit: a role, the stack it acted with (the view's own numbering, see
/// [`Model::stack_frames`]) and the inode it acted on (0: none known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Base {
    /// The role.
    pub role: RoleId,
    /// The stack.
    pub stack: u32,
    /// The inode.
    pub ino: u64,
}

/// What is known of a [`Base`] besides its sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseInfo {
    /// The file's device: the charged act's, else the device the dirtying named.
    pub dev: Dev,
    /// Whether `dev` is an act's (the file's filesystem), not only a dirtying's (its disk).
    pub dev_exact: bool,
    /// The latest act charged with an IO of it (none: only dirtied so far).
    pub act: Option<ActId>,
}

/// A row's waits: (the victims', the culprits') bases with their ns, most first.
pub type Waits = (Vec<(Base, u64)>, Vec<(Base, u64)>);

/// How rows are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupBy {
    /// One row per role, stack and file.
    Act,
    /// Per task (role).
    Task,
    /// Per process.
    Process,
    /// Per cgroup of the task.
    Cgroup,
    /// Per file.
    File,
    /// Per intent (stack).
    Intent,
    /// Per device (the IO's; for bytes dirtied, the device the kernel named).
    Device,
}

impl GroupBy {
    /// All, in the order `g` cycles through them.
    pub const ALL: [GroupBy; 7] = [
        GroupBy::Act,
        GroupBy::Task,
        GroupBy::Process,
        GroupBy::Cgroup,
        GroupBy::File,
        GroupBy::Intent,
        GroupBy::Device,
    ];

    /// Its name (`--group`, the view's title).
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Act => "act",
            GroupBy::Task => "task",
            GroupBy::Process => "process",
            GroupBy::Cgroup => "cgroup",
            GroupBy::File => "file",
            GroupBy::Intent => "intent",
            GroupBy::Device => "device",
        }
    }

    /// The grouping after this one.
    pub fn next(self) -> GroupBy {
        let i = GroupBy::ALL.iter().position(|&g| g == self).unwrap_or(0);
        GroupBy::ALL[(i + 1) % GroupBy::ALL.len()]
    }
}

impl std::str::FromStr for GroupBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        GroupBy::ALL
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = GroupBy::ALL.iter().map(|g| g.name()).collect();
                format!("unknown grouping {s:?} (one of {})", names.join(", "))
            })
    }
}

/// A row's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowKey {
    /// [`GroupBy::Act`].
    Base(Base),
    /// [`GroupBy::Task`].
    Role(RoleId),
    /// [`GroupBy::Process`]: the process id.
    Process(u32),
    /// [`GroupBy::Cgroup`]: the cgroup id (0: none known).
    Cgroup(u64),
    /// [`GroupBy::File`]: device and inode.
    File(Dev, u64),
    /// [`GroupBy::Intent`]: the stack.
    Stack(u32),
    /// [`GroupBy::Device`].
    Device(Dev),
}

/// One row of a grouping: its key, its sums, and the base with the most bytes in it (whose
/// role, stack and file stand for the row where the grouping merged several).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// What the row groups by.
    pub key: RowKey,
    /// The sums of the interval or the run.
    pub stat: Stat,
    /// The largest base in it (none for a device row made of dirtying alone).
    pub top: Option<Base>,
}

/// The sums of one interval, or of the run.
#[derive(Debug, Clone, Default)]
pub struct Sums {
    /// Per base.
    pub bases: HashMap<Base, Stat>,
    /// Per act.
    pub acts: BTreeMap<ActId, ActStat>,
    /// Per device.
    pub devices: BTreeMap<Dev, Stat>,
    /// Over everything shown.
    pub all: Stat,
    /// Who waited behind whom: (victim's base, culprit's base, the device) -> ns.
    pub waits: HashMap<(Base, Base, Dev), u64>,
}

impl Sums {
    fn clear(&mut self) {
        self.bases.clear();
        self.acts.clear();
        self.devices.clear();
        self.all = Stat::default();
        self.waits.clear();
    }
}

/// The sums of the current interval and of the run, fed with the live analysis' IOs and
/// dirtyings.
#[derive(Debug, Default)]
pub struct Model {
    /// The interval being summed.
    pub interval: Sums,
    /// Since the start.
    pub total: Sums,
    /// What is known of each base.
    pub info: HashMap<Base, BaseInfo>,
    /// The view's stacks by frames, and back.
    stacks: Vec<Vec<u64>>,
    stack_ids: HashMap<Vec<u64>, u32>,
    /// The attribution's stack ids of dirtyings -> the view's.
    dirty_stacks: HashMap<u32, u32>,
    /// Per act, its base.
    act_bases: Vec<Option<Base>>,
    /// Whether the recorder's own IO and dirtying is shown.
    pub show_recorder: bool,
    /// The recorder's roles (their dirtying is left out unless shown).
    pub recorder_pid: Option<u32>,
}

impl Model {
    /// An empty model.
    pub fn new(show_recorder: bool, recorder_pid: Option<u32>) -> Model {
        Model {
            show_recorder,
            recorder_pid,
            ..Model::default()
        }
    }

    /// The view's id of a stack.
    fn stack_id(&mut self, frames: &[u64]) -> u32 {
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(frames.to_vec());
        self.stack_ids.insert(frames.to_vec(), id);
        id
    }

    /// The frames of the view's stack `id`.
    pub fn stack_frames(&self, id: u32) -> &[u64] {
        self.stacks.get(id as usize).map_or(&[], |s| s)
    }

    /// The stacks in the view's numbering.
    pub fn stacks(&self) -> &[Vec<u64>] {
        &self.stacks
    }

    /// The base of act `id`.
    fn act_base(&mut self, id: ActId, tables: &Tables) -> Option<Base> {
        if let Some(Some(b)) = self.act_bases.get(id.index()) {
            return Some(*b);
        }
        let act = tables.act(id)?;
        let stack = self.stack_id(&tables.intents[act.intent.index()].stack);
        let b = Base {
            role: act.role,
            stack,
            ino: act.file.ino,
        };
        if self.act_bases.len() <= id.index() {
            self.act_bases.resize(id.index() + 1, None);
        }
        self.act_bases[id.index()] = Some(b);
        Some(b)
    }

    /// Counts a charged IO (one [`ioblame_pipeline::Live::take`] gave: on a selected
    /// device, in the scope).
    pub fn add_io(&mut self, io: &Io, tables: &Tables) {
        let Some(act) = tables.act(io.act) else {
            return;
        };
        if act.recorder && !self.show_recorder {
            return;
        }
        let dev = act.file.dev;
        let Some(base) = self.act_base(io.act, tables) else {
            return;
        };
        let info = self.info.entry(base).or_insert(BaseInfo {
            dev,
            dev_exact: true,
            act: None,
        });
        info.dev = dev;
        info.dev_exact = true;
        info.act = Some(io.act);
        for s in [&mut self.interval, &mut self.total] {
            s.devices.entry(io.dev).or_default().add_io(io);
            let a = s.acts.entry(io.act).or_default();
            a.totals.add_io(io);
            if io.lower {
                // A lower layer's copy (a loop device's backing file): its device's IO,
                // counted in the act's lower bytes (as `ioblame acts` counts it), not as
                // the act's IO again.
                continue;
            }
            s.bases.entry(base).or_default().add_io(io);
            a.stat.add_io(io);
            s.all.add_io(io);
        }
    }

    /// Counts a dirtying; `frames` is its stack, `tables` the attribution's.
    pub fn add_dirtied(&mut self, d: &Dirtied, frames: &[u64], tables: &Tables) {
        if !self.show_recorder {
            let pid = tables.role(d.role).map(|r| r.pid);
            if pid.is_some() && pid == self.recorder_pid {
                return;
            }
        }
        let stack = match self.dirty_stacks.get(&d.stack) {
            Some(&s) => s,
            None => {
                let s = self.stack_id(frames);
                self.dirty_stacks.insert(d.stack, s);
                s
            }
        };
        let base = Base {
            role: d.role,
            stack,
            ino: d.ino,
        };
        self.info.entry(base).or_insert(BaseInfo {
            dev: d.dev,
            dev_exact: false,
            act: None,
        });
        for s in [&mut self.interval, &mut self.total] {
            s.bases.entry(base).or_default().dirtied += d.bytes;
            s.devices.entry(d.dev).or_default().dirtied += d.bytes;
            s.all.dirtied += d.bytes;
        }
    }

    /// Counts a wait: an IO of act `victim` on `dev` waited `ns` behind act `culprit`'s IO
    /// ([`super::blame::LiveBlame`]). The recorder's own, either side, only when shown.
    pub fn add_wait(&mut self, (victim, culprit, dev, ns): super::blame::Wait, tables: &Tables) {
        let recorder = |a: ActId| tables.act(a).is_none_or(|a| a.recorder);
        if !self.show_recorder && (recorder(victim) || recorder(culprit)) {
            return;
        }
        let (Some(v), Some(c)) = (
            self.act_base(victim, tables),
            self.act_base(culprit, tables),
        ) else {
            return;
        };
        if let Some(act) = tables.act(culprit) {
            self.info.entry(c).or_insert(BaseInfo {
                dev: act.file.dev,
                dev_exact: true,
                act: Some(culprit),
            });
        }
        for s in [&mut self.interval, &mut self.total] {
            s.bases.entry(c).or_default().behind_ns += ns;
            s.acts.entry(culprit).or_default().stat.behind_ns += ns;
            s.devices.entry(dev).or_default().behind_ns += ns;
            s.all.behind_ns += ns;
            *s.waits.entry((v, c, dev)).or_default() += ns;
        }
    }

    /// The row of `by` that base `b` (or, for devices, device `dev`) is in.
    pub fn key_of(&self, b: &Base, dev: Dev, by: GroupBy, tables: &Tables) -> RowKey {
        let role = tables.role(b.role);
        match by {
            GroupBy::Act => RowKey::Base(*b),
            GroupBy::Task => RowKey::Role(b.role),
            GroupBy::Process => RowKey::Process(role.map_or(0, |r| r.pid)),
            GroupBy::Cgroup => RowKey::Cgroup(role.map_or(0, |r| r.cgroup)),
            GroupBy::File => RowKey::File(self.info.get(b).map_or(0, |i| i.dev), b.ino),
            GroupBy::Intent => RowKey::Stack(b.stack),
            GroupBy::Device => RowKey::Device(dev),
        }
    }

    /// Who waited behind row `key` of `by` in `sums` (the victims' bases, most time first)
    /// and whom its IOs waited behind (the culprits'), ns each: [`Waits`].
    pub fn waits_of(&self, sums: &Sums, key: RowKey, by: GroupBy, tables: &Tables) -> Waits {
        let mut victims: HashMap<Base, u64> = HashMap::new();
        let mut culprits: HashMap<Base, u64> = HashMap::new();
        for (&(v, c, dev), &ns) in &sums.waits {
            if self.key_of(&c, dev, by, tables) == key {
                *victims.entry(v).or_default() += ns;
            }
            if self.key_of(&v, dev, by, tables) == key {
                *culprits.entry(c).or_default() += ns;
            }
        }
        let sorted = |m: HashMap<Base, u64>| {
            let mut v: Vec<(Base, u64)> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v
        };
        (sorted(victims), sorted(culprits))
    }

    /// Starts a new interval (what the last one summed is dropped).
    pub fn next_interval(&mut self) {
        self.interval.clear();
    }

    /// The rows of `sums` grouped by `by`; `cgroup_of` and `pid_of` read the roles.
    pub fn rows(&self, sums: &Sums, by: GroupBy, tables: &Tables) -> Vec<Row> {
        if by == GroupBy::Device {
            return sums
                .devices
                .iter()
                .map(|(&dev, st)| Row {
                    key: RowKey::Device(dev),
                    stat: *st,
                    top: self.largest_on(sums, dev),
                })
                .collect();
        }
        let mut rows: HashMap<RowKey, (Stat, Base, u64)> = HashMap::new();
        for (b, st) in &sums.bases {
            let key = self.key_of(b, 0, by, tables);
            let weight = st.dirtied + st.read + st.written;
            let e = rows.entry(key).or_insert((Stat::default(), *b, 0));
            e.0.add(st);
            if weight > e.2 || (weight == e.2 && *b < e.1) {
                e.1 = *b;
                e.2 = weight;
            }
        }
        rows.into_iter()
            .map(|(key, (stat, top, _))| Row {
                key,
                stat,
                top: Some(top),
            })
            .collect()
    }

    /// The base with the most bytes whose file is on `dev`.
    fn largest_on(&self, sums: &Sums, dev: Dev) -> Option<Base> {
        sums.bases
            .iter()
            .filter(|(b, _)| self.info.get(b).is_some_and(|i| i.dev == dev))
            .max_by_key(|(b, st)| (st.dirtied + st.read + st.written, std::cmp::Reverse(**b)))
            .map(|(b, _)| *b)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ioblame_attrib::{Act, Dir, FileKey, Intent, Role, Via};

    fn tables() -> Tables {
        let mut t = Tables {
            roles: vec![role(10, "writerA", 7), role(11, "writerB", 7)],
            ..Tables::default()
        };
        t.intents = reserved_intents();
        t.intents.extend([
            Intent {
                modifier: 0x1000_0000 | 4,
                stack: vec![1, 2, 3],
                user: Vec::new(),
            },
            Intent {
                modifier: 0x1000_0000 | 1,
                stack: vec![1, 2, 3],
                user: Vec::new(),
            },
        ]);
        let act = |role, intent, ino| Act {
            role: RoleId(role),
            intent: ioblame_attrib::IntentId(intent),
            file: FileKey { dev: 8, ino },
            via: Via::Page,
            reason: None,
            issuer: None,
            recorder: false,
        };
        t.acts = vec![act(0, 2, 12), act(0, 3, 12), act(1, 2, 13)];
        t
    }

    /// The tables' first two intents (#0 nomem and #1 lost, stackless), as an attribution
    /// starts them.
    pub(crate) fn reserved_intents() -> Vec<Intent> {
        let empty = Intent {
            modifier: 0,
            stack: vec![],
            user: Vec::new(),
        };
        vec![empty.clone(), empty]
    }

    /// A role of the tests: `pid`'s main thread named `comm`, in cgroup `cgroup`.
    pub(crate) fn role(pid: u32, comm: &str, cgroup: u64) -> Role {
        Role {
            pid,
            tid: pid,
            comm: comm.into(),
            generation: 0,
            cgroup,
            lineage: false,
        }
    }

    /// An IO of the tests on device 7:0, charged to act `act`, with its queue and device
    /// times (µs).
    pub(crate) fn io(act: u32, dir: Dir, size: u64, wait: u64, time: u64) -> Io {
        Io {
            wait_time: wait,
            io_time: time,
            issuer: RoleId(3),
            via: Via::Page,
            ..Io::new(7 << 20, dir, size, ActId(act))
        }
    }

    /// Acts differing only in their writeback reason are one base; dirtying with the same
    /// stack joins them; intervals restart while totals go on.
    #[test]
    fn acts_of_one_role_stack_and_file_are_one_row() {
        let t = tables();
        let mut m = Model::new(false, None);
        m.add_dirtied(
            &Dirtied {
                role: RoleId(0),
                stack: 99,
                via: Via::Page,
                dev: 8,
                ino: 12,
                pos: 0,
                buffer: false,
                bytes: 8192,
                time: 1,
            },
            &[1, 2, 3],
            &t,
        );
        m.add_io(&io(0, Dir::W, 4096, 10, 100), &t);
        m.add_io(&io(1, Dir::W, 4096, 10, 100), &t);
        m.add_io(&io(2, Dir::R, 512, 10, 100), &t);
        let rows = m.rows(&m.interval, GroupBy::Act, &t);
        assert_eq!(rows.len(), 2);
        let a = rows
            .iter()
            .find(|r| matches!(r.key, RowKey::Base(b) if b.role == RoleId(0)))
            .unwrap();
        assert_eq!(
            a.stat,
            Stat {
                dirtied: 8192,
                read: 0,
                written: 8192,
                ios: 2,
                dev_us: 200,
                queue_us: 20,
                behind_ns: 0,
            }
        );
        assert_eq!(m.interval.acts.len(), 3);
        assert_eq!(m.interval.acts[&ActId(0)].totals.bytes[2], 4096);
        let by_cgroup = m.rows(&m.interval, GroupBy::Cgroup, &t);
        assert_eq!(by_cgroup.len(), 1);
        assert_eq!(by_cgroup[0].stat.written + by_cgroup[0].stat.read, 8704);
        assert_eq!(by_cgroup[0].top.unwrap().role, RoleId(0));
        m.next_interval();
        assert!(m.rows(&m.interval, GroupBy::Task, &t).is_empty());
        assert_eq!(m.total.all.written, 8192);
        assert_eq!(m.total.all.dirtied, 8192);
        let devices = m.rows(&m.total, GroupBy::Device, &t);
        let disk = devices.iter().find(|r| r.key == RowKey::Device(7 << 20));
        assert_eq!(disk.map(|r| r.stat.ios), Some(3));
    }

    /// The recorder's own dirtying is left out unless shown.
    #[test]
    fn the_recorders_dirtying_is_hidden() {
        let t = tables();
        let d = Dirtied {
            role: RoleId(1),
            stack: 1,
            via: Via::Page,
            dev: 8,
            ino: 13,
            pos: 0,
            buffer: false,
            bytes: 4096,
            time: 1,
        };
        let mut m = Model::new(false, Some(11));
        m.add_dirtied(&d, &[5], &t);
        assert!(m.total.all.is_empty());
        let mut m = Model::new(true, Some(11));
        m.add_dirtied(&d, &[5], &t);
        assert_eq!(m.total.all.dirtied, 4096);
    }

    /// A wait counts for the culprit's row (and device, and the whole), in the interval and
    /// the run; the row's waits name its victims, and the victim's row its culprits.
    #[test]
    fn waits_count_for_the_culprit_and_name_both_sides() {
        let t = tables();
        let mut m = Model::new(false, None);
        m.add_io(&io(0, Dir::W, 4096, 10, 100), &t);
        m.add_io(&io(2, Dir::W, 4096, 10, 100), &t);
        // Act 2 (writerB) waited 3 ms behind act 0 (writerA), then 1 ms behind act 1 (writerA,
        // another reason: the same base).
        m.add_wait((ActId(2), ActId(0), 7 << 20, 3_000_000), &t);
        m.add_wait((ActId(2), ActId(1), 7 << 20, 1_000_000), &t);
        let by_task = m.rows(&m.interval, GroupBy::Task, &t);
        let of = |role: u32| {
            by_task
                .iter()
                .find(|r| r.key == RowKey::Role(RoleId(role)))
                .unwrap()
                .stat
                .behind_ns
        };
        assert_eq!((of(0), of(1)), (4_000_000, 0));
        assert_eq!(m.interval.all.behind_ns, 4_000_000);
        assert_eq!(m.interval.devices[&(7 << 20)].behind_ns, 4_000_000);
        assert_eq!(m.interval.acts[&ActId(0)].stat.behind_ns, 3_000_000);
        let (victims, culprits) =
            m.waits_of(&m.interval, RowKey::Role(RoleId(0)), GroupBy::Task, &t);
        assert_eq!(victims.len(), 1);
        assert_eq!((victims[0].0.role, victims[0].1), (RoleId(1), 4_000_000));
        assert!(culprits.is_empty());
        let (_, culprits) = m.waits_of(&m.interval, RowKey::Role(RoleId(1)), GroupBy::Task, &t);
        assert_eq!(culprits.iter().map(|c| c.1).sum::<u64>(), 4_000_000);
        // By device, the wait is the device's both ways.
        let (v, c) = m.waits_of(&m.interval, RowKey::Device(7 << 20), GroupBy::Device, &t);
        assert_eq!((v.len(), c.len()), (1, 1));
        m.next_interval();
        assert_eq!(m.interval.all.behind_ns, 0);
        assert_eq!(m.total.all.behind_ns, 4_000_000);
    }
}
