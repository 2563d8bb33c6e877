//! ioblame's recording plan, shared by the recorder (`ioblame-capture`) and the `perf record`
//! command line of `ioblame perf-command`: the tracepoint sets the attribution needs
//! ([`set_names`]), the events that carry a kernel callchain, older names of renamed events
//! (all three from the event registry, `ioblame-events`), their resolution against a
//! kernel's tracefs ([`resolve`]), the in-kernel filters ([`filter_for`]) and the devices to
//! filter on ([`resolve_devices`]).
//!
//! Planning is pure: it works on what the caller read (the text of `/proc/self/mountinfo`,
//! tracefs files, the block devices). The readers of a tracefs or sysfs directory the caller
//! names ([`find_tracefs`], [`lookup`], [`block_devices_at`]) only read; nothing here mounts
//! tracefs or reads a fixed system path: the recorder does that.
#![deny(missing_docs)]

macro_rules! bail {
    ($($t:tt)*) => { return Err(Error::Usage(format!($($t)*))) };
}

mod devices;
pub mod mountinfo;
mod tracefs;

pub use devices::{block_devices_at, loop_devices_at, parse_majmin, resolve_devices};
pub use tracefs::{find_tracefs, lookup, resolve, resolve_with, tracefs_mounts, TRACEFS_PATHS};

use ioblame_events::Set;

/// What went wrong while planning a recording.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An `--events` entry that is neither a set nor `sys:name`.
    #[error("--events: '{0}' is neither a set (default, minimal, full) nor sys:name")]
    NotAnEvent(String),
    /// An `--events` list that names no event.
    #[error("--events: empty event list")]
    EmptyEventList,
    /// Another bad argument (`--devices`, an event name that is not `sys:name`), or an
    /// event this kernel lacks.
    #[error("{0}")]
    Usage(String),
    /// tracefs or sysfs could not be read.
    #[error("{0}")]
    System(String),
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Events whose kernel stack is the intent, by every name they have: they get a callchain
/// (the registry's entries with `callchain: true`).
pub use ioblame_events::CALLCHAIN_EVENTS;

/// Stack events whose callchain `--stacks exact` leaves out: the analyzer gives each the
/// stack of its thread's dirtying event (the registry's entries with `stack_from_folio`).
pub use ioblame_events::STACK_FROM_FOLIO_EVENTS;

/// The stack event that is never sampled (`--stacks sampled:N`): the issuing task's stack
/// on a bio tells direct IO and the journals' IO apart (docs/attribution.md), which decides
/// who is charged, so it stays exact.
pub const ISSUER_STACK_EVENT: &str = "block:block_bio_queue";

/// Which stack events carry a kernel callchain: the recorder's `--stacks` and
/// `ioblame perf-command --stacks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stacks {
    /// One callchain per dirtying write: the events of [`STACK_FROM_FOLIO_EVENTS`]
    /// (`block_dirty_buffer`) go without, and the analyzer gives each the stack of its
    /// thread's dirtying event. The intents are the same as with [`Stacks::All`].
    #[default]
    Exact,
    /// A callchain on every stack event ([`CALLCHAIN_EVENTS`]).
    All,
    /// The dirtying events (every stack event but [`ISSUER_STACK_EVENT`]) without a
    /// callchain, plus, for each, a second perf event on the same tracepoint that samples one
    /// hit in N per CPU with a callchain. Bytes per task and file stay exact; each dirtying
    /// event takes the stack last sampled on its thread: the intents are a sample.
    Sampled(u32),
    /// No callchain at all: bytes per task and file stay exact, the intents have no stacks.
    /// The cheapest recording (the floor `bench-capture` measures the others against).
    None,
}

impl Stacks {
    /// Whether event `name` (one of [`CALLCHAIN_EVENTS`] or not) is recorded with a
    /// callchain in this mode (on every sample: the sampled second events aside).
    pub fn callchain(self, name: &str) -> bool {
        match self {
            Stacks::All => CALLCHAIN_EVENTS.contains(&name),
            Stacks::Exact => {
                CALLCHAIN_EVENTS.contains(&name) && !STACK_FROM_FOLIO_EVENTS.contains(&name)
            }
            Stacks::Sampled(_) => name == ISSUER_STACK_EVENT,
            Stacks::None => false,
        }
    }
    /// The sample period of event `name`'s second, stack-sampling event, when this mode
    /// records one.
    pub fn sampled(self, name: &str) -> Option<u32> {
        match self {
            Stacks::Sampled(n)
                if CALLCHAIN_EVENTS.contains(&name) && name != ISSUER_STACK_EVENT =>
            {
                Some(n)
            }
            _ => None,
        }
    }
    /// The mode's name, as the option takes it and the trace records it.
    pub fn name(self) -> String {
        match self {
            Stacks::Exact => "exact".into(),
            Stacks::All => "all".into(),
            Stacks::Sampled(n) => format!("sampled:{n}"),
            Stacks::None => "none".into(),
        }
    }
}

impl std::str::FromStr for Stacks {
    type Err = String;
    fn from_str(s: &str) -> Result<Stacks, String> {
        match s {
            "exact" => Ok(Stacks::Exact),
            "all" => Ok(Stacks::All),
            "none" => Ok(Stacks::None),
            _ => match s.strip_prefix("sampled:").map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 2 => Ok(Stacks::Sampled(n)),
                Some(_) => Err(format!(
                    "`{s}`: the period of sampled:N is a whole number from 2 (sampled:64: one \
                     dirtying event in 64 per CPU carries a callchain)"
                )),
                None => Err(format!(
                    "unknown stacks mode `{s}` (exact, all, sampled:N, none)"
                )),
            },
        }
    }
}

/// How user stacks are recorded: the recorder's `--user-stacks` and `ioblame perf-command
/// --user-stacks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserStacks {
    /// The kernel walks the frame pointers: the return addresses only.
    #[default]
    Fp,
    /// A copy of this many bytes of the top of the user stack, with the registers that
    /// unwind it, unwound offline by the files' call frame information.
    Dwarf(u32),
}

impl UserStacks {
    /// The copy `dwarf` alone asks for: 4 KiB left 93% of sqlite3's stacks unfinished and
    /// 8 KiB 0.6%, while 16 KiB lost records under 4 KiB writes at full speed
    /// (docs/benchmarks.md, "User stacks by CFI").
    pub const DWARF_DEFAULT: u32 = 8192;
    /// The largest copy: a sample is one perf record, at most 64 KiB with its callchain
    /// and payload (and perf.data's converter adds an id to each).
    pub const DWARF_MAX: u32 = 32768;

    /// Its name, as the option takes it and the trace records it (`fp`, `dwarf:SIZE`).
    pub fn name(self) -> String {
        match self {
            UserStacks::Fp => "fp".into(),
            UserStacks::Dwarf(n) => format!("dwarf:{n}"),
        }
    }

    /// The bytes of stack copied with each stack sample (0 for `fp`).
    pub fn copy_size(self) -> u32 {
        match self {
            UserStacks::Fp => 0,
            UserStacks::Dwarf(n) => n,
        }
    }
}

impl std::str::FromStr for UserStacks {
    type Err = String;
    /// `fp`, `dwarf` or `dwarf:SIZE` (bytes, `K` for KiB; a multiple of 8 from 64 to
    /// [`UserStacks::DWARF_MAX`]).
    fn from_str(s: &str) -> Result<UserStacks, String> {
        match s.split_once(':') {
            None if s == "fp" => Ok(UserStacks::Fp),
            None if s == "dwarf" => Ok(UserStacks::Dwarf(UserStacks::DWARF_DEFAULT)),
            Some(("dwarf", n)) => {
                let (digits, unit) = match n.strip_suffix(['K', 'k']) {
                    Some(d) => (d, 1024),
                    None => (n, 1),
                };
                let size = digits
                    .parse::<u32>()
                    .ok()
                    .and_then(|d| d.checked_mul(unit))
                    .filter(|&b| (64..=UserStacks::DWARF_MAX).contains(&b) && b % 8 == 0);
                size.map(UserStacks::Dwarf).ok_or_else(|| {
                    format!(
                        "`{s}`: the stack copy is a multiple of 8 bytes from 64 to {} (dwarf:8192, \
                         dwarf:8K)",
                        UserStacks::DWARF_MAX
                    )
                })
            }
            _ => Err(format!("`{s}`: expected fp, dwarf or dwarf:SIZE")),
        }
    }
}

/// Older names to fall back on when the new one is absent: (new, old), the registry's
/// `aliases`.
pub use ioblame_events::RENAMES;

/// The names of the predefined event sets, with a one-line description.
pub const SETS: &[(&str, &str)] = &{
    let all = Set::ALL;
    let mut v = [("", ""); Set::ALL.len()];
    let mut i = 0;
    while i < v.len() {
        v[i] = (all[i].name(), all[i].description());
        i += 1;
    }
    v
};

/// The event names of a set (`default`, `minimal`, `full`) or of a comma-separated list of
/// `sys:name`.
pub fn set_names(spec: &str) -> Result<Vec<String>> {
    let v: Vec<&str> = match Set::from_name(spec) {
        Some(set) => set.names().collect(),
        None => {
            let mut v = Vec::new();
            for n in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                match n.split_once(':') {
                    Some((s, e))
                        if !s.is_empty()
                            && !e.is_empty()
                            && !n.contains('/')
                            && !n.contains("..") => {}
                    _ => return Err(Error::NotAnEvent(n.to_string())),
                }
                v.push(n);
            }
            if v.is_empty() {
                return Err(Error::EmptyEventList);
            }
            v
        }
    };
    let mut out: Vec<String> = Vec::new();
    for n in v {
        if !out.iter().any(|x| x == n) {
            out.push(n.to_string());
        }
    }
    Ok(out)
}

/// The advice given when this process may not use tracefs or perf.
pub const PRIVILEGE_HINT: &str = "run as root (or with CAP_PERFMON and read access to tracefs)";

/// A tracepoint found in tracefs.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    /// `sys:name` as found on this kernel.
    pub name: String,
    /// tracefs id (the perf config).
    pub id: u64,
    /// The full `format` text.
    pub format: String,
    /// Whether its samples carry a callchain.
    pub callchain: bool,
}

/// Where a field lies in a tracepoint's payload (byte offset and size), as its format text
/// declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldAt {
    /// Byte offset in the payload.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// The field `name` of a format text (`field:TYPE NAME[N];\toffset:O;\tsize:S;...`).
pub fn field_at(format: &str, name: &str) -> Option<FieldAt> {
    format.lines().find_map(|l| {
        let mut parts = l.trim_start().strip_prefix("field:")?.split(';');
        let decl = parts.next()?.trim();
        let field = decl.rsplit(' ').next()?;
        let field = field.split('[').next()?;
        if field != name {
            return None;
        }
        let num = |p: Option<&str>, key: &str| -> Option<usize> {
            p?.trim().strip_prefix(key)?.parse().ok()
        };
        Some(FieldAt {
            offset: num(parts.next(), "offset:")?,
            size: num(parts.next(), "size:")?,
        })
    })
}

/// Where a recorded event names an inode ([`Tracepoint::inode_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeAt {
    /// The filesystem's device: an integer in the kernel encoding, or (`bdi`) the backing
    /// device's name, the text `MAJ:MIN`.
    pub dev: FieldAt,
    /// Whether `dev` is the bdi name.
    pub bdi: bool,
    /// The inode number (4 or 8 bytes).
    pub ino: FieldAt,
}

impl Tracepoint {
    /// Where this event's payload names the inode it refers to, from the registry's fields
    /// ([`ioblame_events::EventDef::inode_fields`]) found in this kernel's format; `None`
    /// for events that name none, or whose fields are not where they can be read.
    pub fn inode_at(&self) -> Option<InodeAt> {
        let (dev, ino) = ioblame_events::find(&self.name)?.inode_fields()?;
        let locate = |d: &ioblame_events::FieldDecl| {
            d.names()
                .find_map(|n| field_at(&self.format, n).map(|f| (n, f)))
        };
        let (dev_name, dev_at) = locate(dev)?;
        let (_, ino_at) = locate(ino)?;
        let bdi = dev_name == "name";
        let ok = matches!(ino_at.size, 4 | 8)
            && (if bdi {
                dev_at.size >= 8
            } else {
                dev_at.size == 4
            });
        ok.then_some(InodeAt {
            dev: dev_at,
            bdi,
            ino: ino_at,
        })
    }
}

fn has_field(format: &str, decl: &str) -> bool {
    format
        .lines()
        .any(|l| l.trim_start().starts_with(&format!("field:{decl};")))
}

/// Which device field an event can be filtered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DevField {
    Dev,
    SDev,
    BdiName,
}

fn dev_field(format: &str) -> Option<DevField> {
    let has = |decl: &str| has_field(format, decl);
    if has("dev_t dev") {
        Some(DevField::Dev)
    } else if has("dev_t s_dev") {
        Some(DevField::SDev)
    } else if has("char name[32]") {
        Some(DevField::BdiName)
    } else {
        None
    }
}

/// A device to filter on: its numbers and its whole disk's numbers (for request-level events
/// and the bdi name). For a whole disk both are the same. A btrfs filesystem on the devices
/// filtered is one too ([`FilterDev::btrfs`]): its superblock's anonymous device, and as its
/// disk `BDI_SEQ_MAJOR:N` for its bdi `btrfs-N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterDev {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Whole disk major.
    pub disk_major: u32,
    /// Whole disk minor.
    pub disk_minor: u32,
}

impl FilterDev {
    /// The btrfs filesystem of superblock device `major:minor` whose bdi is `btrfs-N`
    /// (`bdi_seq` `Some(N)`; `None` on kernels before 5.9, which do not name it in sysfs: its
    /// writeback events then pass no device filter).
    pub fn btrfs(major: u32, minor: u32, bdi_seq: Option<u32>) -> FilterDev {
        FilterDev {
            major,
            minor,
            disk_major: ioblame_events::event::BDI_SEQ_MAJOR,
            disk_minor: bdi_seq.unwrap_or(u32::MAX),
        }
    }

    /// The bdi name of its disk, as the writeback events carry it.
    fn bdi_name(&self) -> String {
        if self.disk_major == ioblame_events::event::BDI_SEQ_MAJOR {
            format!("btrfs-{}", self.disk_minor)
        } else {
            format!("{}:{}", self.disk_major, self.disk_minor)
        }
    }
}

/// Whether an event's `dev` is the whole disk (`disk_devt`): every block event but the
/// buffer events (`block_dirty_buffer`, `block_touch_buffer`, whose `dev` is the buffer's
/// device, a partition's own). Request events carry the disk, and so do the bio events:
/// their `dev` is `bio_dev()`, the disk of the bio's device, on every kernel (5.10 to 7.3
/// checked; a partition's bio shows first in `block_bio_remap` with the partition as
/// `old_dev`). Filesystem events (`dev`, `s_dev`) carry the partition.
pub fn disk_level(name: &str) -> bool {
    name.starts_with("block:block_") && !name.ends_with("_buffer")
}

/// The in-kernel filter of one event (empty: none): the devices, and the event's own filter
/// from the event registry ([`ioblame_events::Filter`]).
///
/// Devices are matched by the number the event carries: block events ([`disk_level`]) and
/// the writeback bdi name by the whole disk of each device, filesystem and page-cache events
/// (`dev`, `s_dev`) and the buffer events by the device itself. [`resolve_devices`] lists a
/// whole disk's partitions with it, so `--devices sda` keeps the IO of filesystems on `sda1`,
/// and `--devices sda1` keeps the bios and requests of `sda` (those of other partitions
/// included: they carry no partition).
///
/// Every event is taken to be recorded: an entry's filter that applies only with another
/// event recorded ([`ioblame_events::Filter::applies_with`]) applies. [`plan_filter`] gives
/// the filter within a recording plan.
pub fn filter_for(tp: &Tracepoint, devs: &[FilterDev]) -> String {
    plan_filter(tp, devs, &[])
}

/// [`filter_for`] of `tp` when the events `plan` are recorded (empty: all of them): an
/// entry's filter with [`ioblame_events::Filter::applies_with`] applies only when that event
/// is in `plan`.
pub fn plan_filter(tp: &Tracepoint, devs: &[FilterDev], plan: &[Tracepoint]) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !devs.is_empty() {
        let or = |f: &dyn Fn(&FilterDev) -> String| {
            let mut v: Vec<String> = Vec::new();
            for s in devs.iter().map(f) {
                if !v.contains(&s) {
                    v.push(s);
                }
            }
            v.join(" || ")
        };
        let disk = disk_level(&tp.name);
        let num = |d: &FilterDev| {
            if disk {
                ioblame_format::kernel_dev(d.disk_major, d.disk_minor)
            } else {
                ioblame_format::kernel_dev(d.major, d.minor)
            }
        };
        match dev_field(&tp.format) {
            Some(DevField::Dev) => parts.push(or(&|d| format!("dev == {}", num(d)))),
            Some(DevField::SDev) => parts.push(or(&|d| format!("s_dev == {}", num(d)))),
            Some(DevField::BdiName) => parts.push(or(&|d| format!("name == \"{}\"", d.bdi_name()))),
            None => {}
        }
    }
    // The event's own filter, where this kernel's format has the field it tests.
    if let Some(f) = ioblame_events::find(&tp.name).and_then(|d| d.filter) {
        let with = |name: &str| {
            plan.is_empty()
                || plan
                    .iter()
                    .any(|t| ioblame_events::find(&t.name).is_some_and(|d| d.is_named(name)))
        };
        if f.requires.is_none_or(|decl| has_field(&tp.format, decl))
            && f.applies_with.is_none_or(with)
        {
            parts.push(f.expr.to_string());
        }
    }
    match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        _ => parts
            .iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(" && "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_stack_modes_parse_and_name_themselves() {
        for (arg, want) in [
            ("fp", UserStacks::Fp),
            ("dwarf", UserStacks::Dwarf(8192)),
            ("dwarf:2048", UserStacks::Dwarf(2048)),
            ("dwarf:16K", UserStacks::Dwarf(16384)),
        ] {
            let got: UserStacks = arg.parse().unwrap();
            assert_eq!(got, want, "{arg}");
            assert_eq!(got.name().parse::<UserStacks>(), Ok(want));
        }
        assert_eq!(UserStacks::Dwarf(512).copy_size(), 512);
        assert_eq!(UserStacks::Fp.copy_size(), 0);
        for bad in [
            "dwarf:0",
            "dwarf:60",
            "dwarf:100",
            "dwarf:64K",
            "dwarf:x",
            "lbr",
            "fp:8",
        ] {
            assert!(bad.parse::<UserStacks>().is_err(), "{bad}");
        }
    }

    fn tp(name: &str, fields: &str) -> Tracepoint {
        Tracepoint {
            name: name.into(),
            id: 1,
            format: format!("name: x\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n{fields}"),
            callchain: false,
        }
    }

    /// The page-cache add keeps its `order > 0` filter only where the readahead events,
    /// which name a read's file, are recorded too; the delete keeps it everywhere.
    #[test]
    fn page_cache_add_filter_needs_the_readahead_events() {
        let order = "\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n";
        let add = tp("filemap:mm_filemap_add_to_page_cache", order);
        let del = tp("filemap:mm_filemap_delete_from_page_cache", order);
        let ra = tp("readahead:page_cache_ra_order", "");
        let q = tp("block:block_bio_queue", "");
        let without = [add.clone(), del.clone(), q.clone()];
        assert_eq!(plan_filter(&add, &[], &without), "");
        assert_eq!(plan_filter(&del, &[], &without), "order > 0");
        let with = [add.clone(), del.clone(), q, ra];
        assert_eq!(plan_filter(&add, &[], &with), "order > 0");
        assert_eq!(plan_filter(&del, &[], &with), "order > 0");
        // No plan named: every event taken to be recorded.
        assert_eq!(filter_for(&add, &[]), "order > 0");
    }

    #[test]
    fn sets_expand() {
        let d = set_names("default").unwrap();
        assert!(d.contains(&"block:block_bio_queue".to_string()));
        assert!(d.contains(&"jbd2:jbd2_handle_start".to_string()));
        assert!(!d.iter().any(|n| n.ends_with("block_plug")));
        assert!(!d.iter().any(|n| n == "iomap:iomap_iter"));
        assert!(!d.iter().any(|n| n == "ext4:ext4_da_write_begin"));
        let f = set_names("full").unwrap();
        assert!(f.contains(&"iomap:iomap_iter".to_string()));
        assert!(f.len() > d.len());
        let m = set_names("minimal").unwrap();
        assert!(m.len() < d.len());
        assert_eq!(
            set_names("block:block_rq_issue, sched:sched_process_exec,block:block_rq_issue")
                .unwrap(),
            vec!["block:block_rq_issue", "sched:sched_process_exec"]
        );
        assert!(matches!(set_names("bogus"), Err(Error::NotAnEvent(n)) if n == "bogus"));
        assert!(matches!(set_names("a:../b"), Err(Error::NotAnEvent(_))));
        assert!(matches!(set_names(","), Err(Error::EmptyEventList)));
        assert_eq!(
            set_names("bogus").unwrap_err().to_string(),
            "--events: 'bogus' is neither a set (default, minimal, full) nor sys:name"
        );
        for (set, what) in SETS {
            assert!(!what.is_empty());
            assert_eq!(
                set_names(set).unwrap(),
                Set::from_name(set).unwrap().names().collect::<Vec<_>>()
            );
        }
        assert_eq!(
            SETS.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            ["default", "minimal", "full"]
        );
    }

    #[test]
    fn filters() {
        let devs = [
            FilterDev {
                major: 7,
                minor: 0,
                disk_major: 7,
                disk_minor: 0,
            },
            FilterDev {
                major: 8,
                minor: 1,
                disk_major: 8,
                disk_minor: 0,
            },
        ];
        let b = tp(
            "block:block_bio_queue",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        // A bio's `dev` is its disk: sda1's bios are matched as sda's.
        assert_eq!(filter_for(&b, &devs), "dev == 7340032 || dev == 8388608");
        let s = tp(
            "filemap:x",
            "\tfield:dev_t s_dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&s, &devs[..1]), "s_dev == 7340032");
        let n = tp(
            "writeback:x",
            "\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&n, &devs), "name == \"7:0\" || name == \"8:0\"");
        let d = tp(
            "block:block_dirty_buffer",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n",
        );
        assert_eq!(
            filter_for(&d, &devs[..1]),
            "(dev == 7340032) && (sector < 4611686018427387904)"
        );
        assert_eq!(filter_for(&d, &[]), "sector < 4611686018427387904");
        let none = tp(
            "sched:x",
            "\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;\n",
        );
        assert_eq!(filter_for(&none, &devs), "");
        let mid = tp(
            "writeback:writeback_mark_inode_dirty",
            "\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;\n\tfield:unsigned long flags;\toffset:56;\tsize:8;\tsigned:0;\n",
        );
        assert_eq!(filter_for(&mid, &[]), "flags & 59");
        for name in [
            "filemap:mm_filemap_add_to_page_cache",
            "filemap:mm_filemap_delete_from_page_cache",
        ] {
            let add = tp(
                name,
                "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n",
            );
            assert_eq!(filter_for(&add, &[]), "order > 0");
            assert_eq!(
                filter_for(&add, &devs[..1]),
                "(s_dev == 7340032) && (order > 0)"
            );
            // Kernels before large folios have no order field: every folio is one page.
            let old = tp(
                name,
                "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n",
            );
            assert_eq!(filter_for(&old, &[]), "");
        }
        assert_eq!(
            filter_for(&mid, &devs[..1]),
            "(name == \"7:0\") && (flags & 59)"
        );
    }
}

#[cfg(test)]
mod stacks_tests {
    use super::*;

    #[test]
    fn modes_parse_and_choose_the_callchains() {
        let p = |s: &str| s.parse::<Stacks>();
        assert_eq!(p("exact"), Ok(Stacks::Exact));
        assert_eq!(p("sampled:64"), Ok(Stacks::Sampled(64)));
        assert!(p("sampled:1").unwrap_err().contains("from 2"));
        assert!(p("sampled:x").is_err());
        assert!(p("some")
            .unwrap_err()
            .contains("exact, all, sampled:N, none"));
        for m in ["exact", "all", "sampled:8", "none"] {
            assert_eq!(p(m).unwrap().name(), m);
        }
        let (folio, buffer, bio) = (
            "writeback:writeback_dirty_folio",
            "block:block_dirty_buffer",
            ISSUER_STACK_EVENT,
        );
        assert!(Stacks::Exact.callchain(folio) && !Stacks::Exact.callchain(buffer));
        assert!(Stacks::All.callchain(buffer));
        assert!(!Stacks::None.callchain(bio));
        let s = Stacks::Sampled(64);
        assert!(!s.callchain(folio) && !s.callchain(buffer) && s.callchain(bio));
        assert_eq!((s.sampled(folio), s.sampled(buffer)), (Some(64), Some(64)));
        assert_eq!(s.sampled(bio), None);
        assert_eq!(s.sampled("sched:sched_process_exec"), None);
        assert_eq!(Stacks::Exact.sampled(folio), None);
    }
}

#[cfg(test)]
mod inode_tests {
    use super::*;

    fn tp(name: &str, fields: &str) -> Tracepoint {
        Tracepoint {
            name: name.into(),
            id: 1,
            format: format!(
                "name: x\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n{fields}\nprint fmt: \"\"\n"
            ),
            callchain: false,
        }
    }

    #[test]
    fn events_that_name_an_inode() {
        let t = tp(
            "ext4:ext4_sync_file_enter",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;",
        );
        assert_eq!(
            t.inode_at(),
            Some(InodeAt {
                dev: FieldAt { offset: 8, size: 4 },
                bdi: false,
                ino: FieldAt {
                    offset: 16,
                    size: 8
                },
            })
        );
        let t = tp(
            "writeback:writeback_dirty_inode",
            "\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;\n\tfield:ino_t ino;\toffset:40;\tsize:8;\tsigned:0;\n\tfield:unsigned long state;\toffset:48;\tsize:8;\tsigned:0;\n\tfield:unsigned long flags;\toffset:56;\tsize:8;\tsigned:0;",
        );
        let at = t.inode_at().unwrap();
        assert!(at.bdi);
        assert_eq!((at.dev.offset, at.ino.offset), (8, 40));
        // s_dev and i_ino (the page cache events).
        let t = tp(
            "filemap:mm_filemap_add_to_page_cache",
            "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;",
        );
        assert_eq!(
            t.inode_at().map(|a| (a.dev.offset, a.ino.offset)),
            Some((32, 16))
        );
        // Block events name no inode; unknown events neither.
        let t = tp(
            "block:block_rq_issue",
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;",
        );
        assert_eq!(t.inode_at(), None);
        assert_eq!(
            tp("x:y", "\tfield:ino_t ino;\toffset:8;\tsize:8;\tsigned:0;").inode_at(),
            None
        );
    }
}
