//! The attribution's output model: roles, intents, acts and IOs (ioblame's vocabulary).

use ioblame_decode::{Dev, Rwbs};

/// An id that indexes one of the [`Tables`]: a number that prints as itself.
macro_rules! table_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into its table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// The id of entry `i` of its table, if `i` fits an id.
            #[inline]
            pub fn from_index(i: usize) -> Option<$name> {
                u32::try_from(i).ok().map($name)
            }
        }

        impl std::fmt::Display for $name {
            /// The number, as `u32` prints it (with the same width, fill and alignment).
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$name> for u32 {
            fn from(id: $name) -> u32 {
                id.0
            }
        }
    };
}

table_id! {
    /// Index of a role in [`Tables::roles`].
    RoleId
}
table_id! {
    /// Index of an intent in [`Tables::intents`]; also its `#NR` as ioblame prints it.
    IntentId
}
table_id! {
    /// Index of an act in [`Tables::acts`].
    ActId
}

/// Intent #0: ioblame's "nomem" intent (an intent could not be created).
pub const INTENT_NOMEM: IntentId = IntentId(0);
/// Intent #1: ioblame's "lost" intent: the origin of the IO is unknown (dirtied before the
/// capture began, records lost, no link found).
pub const INTENT_LOST: IntentId = IntentId(1);

/// ioblame's direction classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Reads, readahead excluded.
    R,
    /// Readahead.
    A,
    /// Writes.
    W,
}

impl Dir {
    /// All directions, in index order.
    pub const ALL: [Dir; 3] = [Dir::R, Dir::A, Dir::W];
    /// Index 0..3 (R, A, W) for per-direction arrays.
    pub fn index(self) -> usize {
        match self {
            Dir::R => 0,
            Dir::A => 1,
            Dir::W => 2,
        }
    }
    /// The class of a block request from its rwbs: `None` for discards, flushes and
    /// other ops.
    pub fn from_rwbs(rwbs: Rwbs) -> Option<Dir> {
        if rwbs.is_write() {
            Some(Dir::W)
        } else if rwbs.is_read() {
            Some(if rwbs.has(Rwbs::AHEAD) {
                Dir::A
            } else {
                Dir::R
            })
        } else {
            None
        }
    }
    /// The letter ioblame uses.
    pub fn letter(self) -> char {
        match self {
            Dir::R => 'R',
            Dir::A => 'A',
            Dir::W => 'W',
        }
    }
}

/// How an IO was linked to the act it is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Via {
    /// A data page (folio) dirtier.
    Page,
    /// A buffer_head dirtier.
    Buffer,
    /// An inode dirtier.
    Inode,
    /// Journal IO, charged to the journal thread (with its transaction).
    Journal,
    /// Direct IO, charged to the issuer.
    Direct,
    /// A read, charged to the issuer.
    Read,
    /// Readahead, charged to the issuer.
    Readahead,
    /// No link found: charged to the lost intent with the best context known.
    Unknown,
    /// A write charged to the task that queued it, in a recording without dirtier events
    /// (blktrace): buffered writes are then charged to the flusher that issued them.
    Issuer,
}

impl Via {
    /// Every via, in output order: the order reports, baselines and counters list and
    /// number them in ([`Via::index`]).
    pub const ALL: [Via; 9] = [
        Via::Page,
        Via::Buffer,
        Via::Inode,
        Via::Journal,
        Via::Direct,
        Via::Read,
        Via::Readahead,
        Via::Unknown,
        Via::Issuer,
    ];

    /// Its position in [`Via::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The via named `name` ([`Via::name`]).
    pub fn from_name(name: &str) -> Option<Via> {
        Via::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The lower-case name used in every output.
    pub fn name(self) -> &'static str {
        match self {
            Via::Page => "page",
            Via::Buffer => "buffer",
            Via::Inode => "inode",
            Via::Journal => "journal",
            Via::Direct => "direct",
            Via::Read => "read",
            Via::Readahead => "readahead",
            Via::Unknown => "unknown",
            Via::Issuer => "issuer",
        }
    }
}

/// The kernel's `enum wb_reason`, the modifier of writeback intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WbReason(pub u32);

impl WbReason {
    /// The kernel's name for the reason (the reason is ioblame's number,
    /// `ioblame_decode::WB_REASON_NAMES`, translated from the trace's own when it differs).
    pub fn name(self) -> &'static str {
        ioblame_decode::WB_REASON_NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("other")
    }
    /// ioblame's intent modifier for this reason: `IOB_MODIFIER_WB | reason`.
    pub fn modifier(self) -> u32 {
        0x1000_0000 | self.0
    }
}

/// The high bits of the modifier of blktrace intents: the request flags are in the low bits
/// ([`blktrace_modifier`]).
pub const MODIFIER_BLKTRACE: u32 = 0x2000_0000;

/// The intent modifier of an IO of a blktrace recording (no stacks, no writeback reason):
/// [`MODIFIER_BLKTRACE`] with the request's `rwbs` flags (`ioblame_decode::Rwbs` bits).
pub fn blktrace_modifier(rwbs: ioblame_decode::Rwbs) -> u32 {
    MODIFIER_BLKTRACE | rwbs.0 as u32
}

/// The request flags of a blktrace intent's modifier, if it is one.
pub fn blktrace_flags(modifier: u32) -> Option<ioblame_decode::Rwbs> {
    (modifier >> 28 == 2).then_some(ioblame_decode::Rwbs((modifier & 0xffff) as u16))
}

/// Who acts: a task under one name. pid reuse and exec start new roles (a new
/// generation), and so does a rename after the task acted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Role {
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Command name when the role acted: a task renamed after acting (`prctl`, a kworker
    /// taking another work item) continues as a new role with the same generation.
    pub comm: String,
    /// Generation: 0 for the first task seen with this tid, incremented on each exec or
    /// tid reuse, so two tasks never merge.
    pub generation: u32,
    /// The id of the task's cgroup in the cgroup2 hierarchy when it acted (the samples'
    /// `PERF_SAMPLE_CGROUP`; the trace's CGROUPS table names it); 0 when not recorded. A
    /// task that acts in another cgroup continues as a new role.
    pub cgroup: u64,
    /// The task is of the lineage of [`crate::Context::scope_root`]: a task of that process
    /// or a descendant (fork and clone, threads included, across exec) forked while the
    /// trace recorded. Always false without a root.
    pub lineage: bool,
}

/// An intent: a stack (kernel frames, then user frames when recorded) plus a modifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Intent {
    /// ioblame's modifier: 0, or `0x10000000 | wb_reason` for writeback; in blktrace
    /// recordings, [`blktrace_modifier`] (`0x20000000 | request flags`).
    pub modifier: u32,
    /// Kernel return addresses, innermost first.
    pub stack: Vec<u64>,
    /// The application's frames below the kernel's, innermost first (recorded with
    /// `--user-stacks`; empty otherwise): each a module and an offset in it, so that one
    /// binary's frame is the same in every process whatever its load address.
    pub user: Vec<UserFrame>,
}

/// An ELF file mapped executable in a process whose user stacks were recorded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Module {
    /// Its build id (`NT_GNU_BUILD_ID`), empty when neither the kernel nor the recorder
    /// could read it.
    pub build_id: Vec<u8>,
    /// Its path on the recording host (`[vdso]` and the like for special mappings).
    pub path: String,
}

impl Module {
    /// The process whose anonymous executable memory (a JIT's code) the module is: its
    /// path is `//anon:PID`, and its offsets are addresses (named by the process's perf map).
    pub fn jit_pid(&self) -> Option<u32> {
        self.path.strip_prefix("//anon:")?.parse().ok()
    }
}

/// One user-space frame of an intent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserFrame {
    /// The module the address fell in; `None` when no recorded mapping held it.
    pub module: Option<std::sync::Arc<Module>>,
    /// The file offset in the module of the frame's address (for a caller's frame, its
    /// return address); without a module, the address itself.
    pub offset: u64,
    /// The function names, filled in by symbolization (`ioblame-symbolize`): the function
    /// holding the address, preceded by the functions inlined into it there, innermost
    /// first. Empty when not (or not yet) symbolized.
    pub names: Vec<String>,
}

/// A file: device and inode, with a path where the trace can name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// Device of the filesystem (kernel encoding); for block-device inodes, the device.
    pub dev: Dev,
    /// Inode number (0 when unknown).
    pub ino: u64,
}

/// An act: role + intent + file, the unit IOs are charged to. Acts of the lost intent are
/// also told apart by their issuer and reason, the best context known for them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Act {
    /// The role charged.
    pub role: RoleId,
    /// The intent (stack + modifier) of the charged action.
    pub intent: IntentId,
    /// The file.
    pub file: FileKey,
    /// How IOs of this act were linked.
    pub via: Via,
    /// The writeback reason of its IOs: the one the intent's modifier encodes, and for the
    /// lost intent (whose modifier is 0) the reason the IO was issued with.
    pub reason: Option<WbReason>,
    /// For acts of the lost intent ([`Via::Unknown`], whose role is the `<unknown>` role):
    /// the task that queued the IO, when known. `None` for other acts (their IOs name their
    /// issuer, [`Io::issuer`]).
    pub issuer: Option<RoleId>,
    /// Whether the role is the recorder itself (its IO is charged normally; outputs may
    /// hide it).
    pub recorder: bool,
}

/// Totals of the IOs charged to one act, per direction (indexed by [`Dir::index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActTotals {
    /// Bytes per direction (R, A, W).
    pub bytes: [u64; 3],
    /// IO count per direction (R, A, W).
    pub ios: [u64; 3],
    /// Bytes of these IOs whose queue..completion span touched a window where the kernel
    /// lost records ([`Io::in_lost_window`]): their attribution may be incomplete.
    pub lost_window_bytes: u64,
    /// Bytes per direction of the lower layers' copies of this act's IO ([`Io::lower`]):
    /// not in [`ActTotals::bytes`], which counts the act's IO once.
    pub lower_bytes: [u64; 3],
    /// IO count per direction of those copies.
    pub lower_ios: [u64; 3],
    /// Bytes of its IOs with a [`Io::journal_share`] (journal IO divided among handles).
    pub journal_shared_bytes: u64,
    /// The sum over those IOs of bytes × share, rounded per IO: with
    /// `journal_shared_bytes`, the act's bytes-weighted share ([`ActTotals::journal_share`]).
    pub journal_share_bytes: u64,
}

impl ActTotals {
    /// Adds one IO.
    pub fn add(&mut self, dir: Dir, bytes: u64) {
        self.bytes[dir.index()] += bytes;
        self.ios[dir.index()] += 1;
    }
    /// Adds one charged IO, its bytes in lost windows and journal share included; a lower
    /// layer's copy ([`Io::lower`]) to the lower bytes only.
    pub fn add_io(&mut self, io: &Io) {
        if io.lower {
            self.add_lower(io.dir, io.size);
            return;
        }
        self.add(io.dir, io.size);
        if io.in_lost_window {
            self.lost_window_bytes += io.size;
        }
        self.add_journal_share(io.size, io.journal_share);
    }
    /// Adds the journal share of an IO of `bytes`, if it has one.
    pub fn add_journal_share(&mut self, bytes: u64, share: Option<f64>) {
        if let Some(s) = share {
            self.journal_shared_bytes += bytes;
            self.journal_share_bytes += (bytes as f64 * s.clamp(0.0, 1.0)).round() as u64;
        }
    }
    /// The bytes-weighted mean of the journal shares of its IOs that have one (`None` when
    /// none has).
    pub fn journal_share(&self) -> Option<f64> {
        (self.journal_shared_bytes > 0)
            .then(|| self.journal_share_bytes as f64 / self.journal_shared_bytes as f64)
    }
    /// Adds one lower layer's copy of this act's IO.
    pub fn add_lower(&mut self, dir: Dir, bytes: u64) {
        self.lower_bytes[dir.index()] += bytes;
        self.lower_ios[dir.index()] += 1;
    }
    /// Bytes over all directions.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }
    /// IOs over all directions.
    pub fn total_ios(&self) -> u64 {
        self.ios.iter().sum()
    }
}

/// The interned tables of an attribution: what [`Io::issuer`], [`Io::act`], [`Act::role`]
/// and [`Act::intent`] index into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    /// Roles, in order of first use.
    pub roles: Vec<Role>,
    /// Intents; #0 is nomem and #1 lost (both with empty stacks), the others in order of
    /// first use.
    pub intents: Vec<Intent>,
    /// Acts, in order of first use.
    pub acts: Vec<Act>,
    /// Totals per act, parallel to `acts`.
    pub totals: Vec<ActTotals>,
}

impl Tables {
    /// The acts with their ids and totals, in id order.
    pub fn acts_with_totals(&self) -> impl Iterator<Item = (ActId, &Act, &ActTotals)> + '_ {
        self.acts
            .iter()
            .zip(&self.totals)
            .enumerate()
            .map(|(i, (a, t))| (ActId(i as u32), a, t))
    }
    /// The intents with their ids (ioblame's `#NR`), in id order.
    pub fn intents_with_ids(&self) -> impl Iterator<Item = (IntentId, &Intent)> + '_ {
        self.intents
            .iter()
            .enumerate()
            .map(|(i, it)| (IntentId(i as u32), it))
    }
    /// A role by id.
    pub fn role(&self, id: RoleId) -> Option<&Role> {
        self.roles.get(id.index())
    }
    /// An intent by id.
    pub fn intent(&self, id: IntentId) -> Option<&Intent> {
        self.intents.get(id.index())
    }
    /// An act by id.
    pub fn act(&self, id: ActId) -> Option<&Act> {
        self.acts.get(id.index())
    }
}

/// One IO as charged: a completed request, or the part of one charged to a single act when
/// a request held pages of several dirtiers.
#[derive(Debug, Clone, PartialEq)]
pub struct Io {
    /// Device the request ran on (kernel encoding).
    pub dev: Dev,
    /// First 512-byte sector of this IO (or of this part of the request).
    pub sector: u64,
    /// Size in bytes.
    pub size: u64,
    /// ioblame's direction class.
    pub dir: Dir,
    /// The request's rwbs.
    pub rwbs: Rwbs,
    /// Time the (earliest) bio was queued (ns, trace clock).
    pub queue_time: u64,
    /// Time the request was (last) issued to the device.
    pub issue_time: u64,
    /// Time the request completed.
    pub complete_time: u64,
    /// `issue - queue`, µs.
    pub wait_time: u64,
    /// `complete - issue`, µs.
    pub io_time: u64,
    /// Sector scaled to 0..=65535 over the device size.
    pub offset: u32,
    /// Distance from the end of the IO completed just before on this device, scaled like
    /// `offset`.
    pub seek_dist: u32,
    /// The task that queued the bio.
    pub issuer: RoleId,
    /// The act charged.
    pub act: ActId,
    /// How the link was made.
    pub via: Via,
    /// Writeback reason, where writeback issued the IO.
    pub reason: Option<WbReason>,
    /// Inode where known.
    pub ino: Option<u64>,
    /// Byte offset in the file where known.
    pub file_offset: Option<u64>,
    /// Whether the request was split between several acts (this is one part).
    pub split: bool,
    /// The jbd2 transaction being committed, for journal IO issued inside a commit; for a
    /// btrfs commit's or log sync's divided writes, the analyzer's count of the filesystem's
    /// transactions and log transactions (docs/attribution.md, "btrfs").
    pub journal_txn: Option<u32>,
    /// For journal IO divided among the handles of its transaction (docs/attribution.md,
    /// "Journal IO"): the act's share of the blocks the transaction's handles dirtied, 0 to
    /// 1 (the journal thread's is the share of the handles not seen). `None` for other IO.
    pub journal_share: Option<f64>,
    /// Whether its queue..completion span touched a window where the kernel lost records
    /// (`Summary::lost_windows`): what charged it may have been among the records lost.
    pub in_lost_window: bool,
    /// The lower layer's copy of IO already charged on the device above it: the loop
    /// device's backing file written (or read) for the IO of [`Io::act`] on the loop device
    /// (docs/attribution.md, "Loop devices"). Its bytes count for its device, not again for
    /// the act ([`ActTotals::lower_bytes`]).
    pub lower: bool,
}

impl Io {
    /// An IO of `size` bytes in direction `dir` on `dev`, charged to `act`, with nothing
    /// else known: the plain rwbs of its direction (`R`, `RA`, `W`), linked as reads are
    /// (`Read`, `Readahead`) or, for a write, by no link (`Unknown`), issued by role 0;
    /// times, positions and waits zero; no reason, inode, file offset, split, journal or
    /// lower copy. For tests and synthetic inputs: `Io { via: Via::Page, ..Io::new(...) }`.
    pub fn new(dev: Dev, dir: Dir, size: u64, act: ActId) -> Io {
        let (rwbs, via) = match dir {
            Dir::R => (Rwbs::READ, Via::Read),
            Dir::A => (Rwbs::READ | Rwbs::AHEAD, Via::Readahead),
            Dir::W => (Rwbs::WRITE, Via::Unknown),
        };
        Io {
            dev,
            sector: 0,
            size,
            dir,
            rwbs: Rwbs(rwbs),
            queue_time: 0,
            issue_time: 0,
            complete_time: 0,
            wait_time: 0,
            io_time: 0,
            offset: 0,
            seek_dist: 0,
            issuer: RoleId(0),
            act,
            via,
            reason: None,
            ino: None,
            file_offset: None,
            split: false,
            journal_txn: None,
            journal_share: None,
            in_lost_window: false,
            lower: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vias' output order and names, pinned once: reports, baselines (whose files number
    /// them) and counter filters read them from here.
    #[test]
    fn vias_in_output_order() {
        assert_eq!(
            Via::ALL.map(Via::name),
            [
                "page",
                "buffer",
                "inode",
                "journal",
                "direct",
                "read",
                "readahead",
                "unknown",
                "issuer"
            ]
        );
        for (i, v) in Via::ALL.into_iter().enumerate() {
            assert_eq!(v.index(), i);
            assert_eq!(Via::from_name(v.name()), Some(v));
        }
        assert_eq!(Via::from_name("flush"), None);
    }

    /// `Io::new`: the plain rwbs and link of each direction, nothing else known.
    #[test]
    fn a_new_io_knows_its_direction_only() {
        let io = Io::new(7, Dir::A, 4096, ActId(3));
        assert_eq!((io.dev, io.size, io.act), (7, 4096, ActId(3)));
        assert_eq!((io.rwbs, io.via), (Rwbs::parse("RA"), Via::Readahead));
        assert_eq!(Io::new(7, Dir::W, 1, ActId(0)).via, Via::Unknown);
        assert_eq!(Io::new(7, Dir::R, 1, ActId(0)).rwbs, Rwbs::parse("R"));
        assert!(io.ino.is_none() && !io.split && !io.lower && io.queue_time == 0);
    }

    #[test]
    fn ids_print_as_their_numbers() {
        assert_eq!(format!("{}", ActId(42)), "42");
        assert_eq!(
            format!("{:>5}|{:<3}|", RoleId(7), IntentId(1)),
            "    7|1  |"
        );
        assert_eq!(u32::from(INTENT_LOST), 1);
        assert_eq!(RoleId(3).index(), 3);
        assert_eq!(ActId::from_index(5), Some(ActId(5)));
        assert_eq!(ActId::from_index(usize::MAX), None);
        assert!(ActId(2) < ActId(10));
    }

    #[test]
    fn tables_are_indexed_by_ids() {
        let t = Tables {
            intents: vec![
                Intent {
                    modifier: 0,
                    stack: Vec::new(),
                    user: Vec::new(),
                },
                Intent {
                    modifier: 0,
                    stack: vec![1],
                    user: Vec::new(),
                },
            ],
            ..Tables::default()
        };
        assert_eq!(t.intent(INTENT_LOST).map(|i| i.stack.len()), Some(1));
        assert!(t.act(ActId(0)).is_none());
        assert_eq!(
            t.intents_with_ids().map(|(id, _)| id).collect::<Vec<_>>(),
            vec![INTENT_NOMEM, INTENT_LOST]
        );
    }
}
