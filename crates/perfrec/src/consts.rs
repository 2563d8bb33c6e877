//! The constants of the perf record format (`include/uapi/linux/perf_event.h`): record
//! types, `misc` bits, sample type bits and callchain context markers.

/// `PERF_RECORD_MMAP`.
pub const RECORD_MMAP: u32 = 1;
/// `PERF_RECORD_LOST`.
pub const RECORD_LOST: u32 = 2;
/// `PERF_RECORD_COMM`.
pub const RECORD_COMM: u32 = 3;
/// `PERF_RECORD_EXIT`.
pub const RECORD_EXIT: u32 = 4;
/// `PERF_RECORD_FORK`.
pub const RECORD_FORK: u32 = 7;
/// `PERF_RECORD_SAMPLE`.
pub const RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`.
pub const RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_LOST_SAMPLES`.
pub const RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_CGROUP` (Linux 5.7): a cgroup was created: its id and path.
pub const RECORD_CGROUP: u32 = 19;

/// `PERF_RECORD_MISC_CPUMODE_MASK`.
pub const MISC_CPUMODE_MASK: u16 = 0b111;
/// `PERF_RECORD_MISC_KERNEL`.
pub const MISC_KERNEL: u16 = 1;
/// `PERF_RECORD_MISC_USER`.
pub const MISC_USER: u16 = 2;
/// `PERF_RECORD_MISC_MMAP_DATA`: a mapping that is not executable.
pub const MISC_MMAP_DATA: u16 = 1 << 13;
/// `PERF_RECORD_MISC_COMM_EXEC`: a COMM record caused by exec (same bit as `MMAP_DATA`).
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID` (Linux 5.12): an MMAP2 record carrying the build id in
/// place of the device and inode.
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: in perf's `build_id_event`, `build_id[20]` holds the
/// id's length.
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `PERF_SAMPLE_IP`.
pub const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`.
pub const SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_ADDR`.
pub const SAMPLE_ADDR: u64 = 1 << 3;
/// `PERF_SAMPLE_READ` (not supported).
pub const SAMPLE_READ: u64 = 1 << 4;
/// `PERF_SAMPLE_CALLCHAIN`.
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_ID`.
pub const SAMPLE_ID: u64 = 1 << 6;
/// `PERF_SAMPLE_CPU`.
pub const SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`.
pub const SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_STREAM_ID`.
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
/// `PERF_SAMPLE_RAW`.
pub const SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_SAMPLE_BRANCH_STACK` (not supported).
pub const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
/// `PERF_SAMPLE_REGS_USER`: the ABI of the user registers (a u64, 0 for a kernel thread),
/// then, unless 0, the registers of `perf_event_attr.sample_regs_user`, one u64 each in the
/// order of their bits; after `RAW`.
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
/// `PERF_SAMPLE_STACK_USER`: a copy of the top of the user stack: its size (a u64), then,
/// unless 0, that many bytes and the size the kernel could copy (`dyn_size`, a u64); after
/// `REGS_USER`.
pub const SAMPLE_STACK_USER: u64 = 1 << 13;
/// `PERF_SAMPLE_WEIGHT`: a u64 after `STACK_USER` (read past, not kept).
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
/// `PERF_SAMPLE_DATA_SRC`: a u64 after `WEIGHT` (read past, not kept; perf's
/// `--call-graph dwarf` asks for it).
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
/// `PERF_SAMPLE_IDENTIFIER`.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `PERF_SAMPLE_CGROUP` (Linux 5.7): the id of the task's cgroup in the cgroup2 hierarchy,
/// a u64 after `RAW`.
pub const SAMPLE_CGROUP: u64 = 1 << 21;

/// The `sample_type` bits this crate can parse.
pub const SUPPORTED_SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_CALLCHAIN
    | SAMPLE_RAW
    | SAMPLE_REGS_USER
    | SAMPLE_STACK_USER
    | SAMPLE_WEIGHT
    | SAMPLE_DATA_SRC
    | SAMPLE_CGROUP;

/// `PERF_SAMPLE_REGS_ABI_NONE`: no user registers (a kernel thread).
pub const REGS_ABI_NONE: u64 = 0;
/// `PERF_SAMPLE_REGS_ABI_32`.
pub const REGS_ABI_32: u64 = 1;
/// `PERF_SAMPLE_REGS_ABI_64`.
pub const REGS_ABI_64: u64 = 2;
/// x86's `PERF_REG_X86_BP` (`perf_event_x86_regs`): a bit of `sample_regs_user`.
pub const X86_REG_BP: u32 = 6;
/// x86's `PERF_REG_X86_SP`.
pub const X86_REG_SP: u32 = 7;
/// x86's `PERF_REG_X86_IP`.
pub const X86_REG_IP: u32 = 8;
/// arm64's `PERF_REG_ARM64_X29`, the frame pointer (`perf_event_arm64_regs`).
pub const ARM64_REG_FP: u32 = 29;
/// arm64's `PERF_REG_ARM64_LR`.
pub const ARM64_REG_LR: u32 = 30;
/// arm64's `PERF_REG_ARM64_SP`.
pub const ARM64_REG_SP: u32 = 31;
/// arm64's `PERF_REG_ARM64_PC`.
pub const ARM64_REG_PC: u32 = 32;

/// The user registers a stack copy is unwound from, on one architecture: their bit numbers
/// in `sample_regs_user` (the recorder asks for [`UnwindRegs::mask`]; a decoder reads them
/// with `UserRegs::get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnwindRegs {
    /// The instruction pointer.
    pub ip: u32,
    /// The stack pointer.
    pub sp: u32,
    /// The frame pointer.
    pub fp: u32,
    /// The link register, where the architecture has one.
    pub lr: Option<u32>,
}

impl UnwindRegs {
    /// x86_64's `IP`, `SP`, `BP`.
    pub const X86_64: UnwindRegs = UnwindRegs {
        ip: X86_REG_IP,
        sp: X86_REG_SP,
        fp: X86_REG_BP,
        lr: None,
    };
    /// aarch64's `PC`, `SP`, `X29`, `LR`.
    pub const AARCH64: UnwindRegs = UnwindRegs {
        ip: ARM64_REG_PC,
        sp: ARM64_REG_SP,
        fp: ARM64_REG_FP,
        lr: Some(ARM64_REG_LR),
    };

    /// Those of `machine` (`uname -m`, as a trace's header records it), if known.
    pub fn of_machine(machine: &str) -> Option<UnwindRegs> {
        match machine {
            "x86_64" => Some(UnwindRegs::X86_64),
            "aarch64" | "arm64" => Some(UnwindRegs::AARCH64),
            _ => None,
        }
    }

    /// `sample_regs_user`: a bit per register.
    pub const fn mask(&self) -> u64 {
        let lr = match self.lr {
            Some(r) => 1 << r,
            None => 0,
        };
        1 << self.ip | 1 << self.sp | 1 << self.fp | lr
    }
}

/// Most bytes of user stack a sample may carry (a record is at most 64 KiB).
pub const MAX_STACK_USER: u64 = 65528;

/// Callchain entries at or above this value are context markers (`PERF_CONTEXT_MAX`).
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PERF_CONTEXT_USER`: the user frames follow.
pub const CONTEXT_USER: u64 = -512i64 as u64;
/// `PERF_CONTEXT_KERNEL`: the kernel frames follow.
pub const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// Cap on callchain depth accepted (perf's own maximum is 127 + markers by default, and
/// `kernel.perf_event_max_stack` is at most 65535 on any kernel).
pub const MAX_CALLCHAIN: u64 = 65535;

/// Bytes of a `perf_event_header` (type u32, misc u16, size u16).
pub const HEADER_LEN: usize = 8;
