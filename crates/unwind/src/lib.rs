//! Offline unwinding of user stack copies (`ioblame-capture record --user-stacks dwarf`,
//! `perf record --call-graph dwarf`): a sample's user registers and the top of its user stack
//! become the return addresses of its frames, by the call frame information of the files the
//! process mapped (`.eh_frame` and its `.eh_frame_hdr` index, else `.debug_frame`), with
//! frame pointers where a file has none (docs/attribution.md, "User frames").
//!
//! The tables come from the trace (the USER_SYMBOLS blocks, format 1.10), so a trace alone
//! unwinds on another machine; the unwinding itself is `framehop`'s, samply's unwinder.
//! [`Unwinder`] keeps one framehop unwinder per process, rebuilt when the process's
//! mappings change, and the modules made of each file's tables per place it is mapped.

use std::sync::Arc;

use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder as _};
use ioblame_events::StackCopy;
use ioblame_format::{ElfLoad, UserSymbols};
use rustc_hash::{FxHashMap, FxHashSet};

/// The section bytes framehop reads, shared by every module made of one file.
type Bytes = Arc<[u8]>;

/// A file mapped at one place: its build id, the mapping's start, end and file offset.
type Placed = (Vec<u8>, u64, u64, u64);

/// How far above a copy a read still counts as the next frame's (a frame of up to 64 KiB).
const BEYOND: u64 = 64 << 10;

/// The lowest stack pointer unwound from.
const MIN_SP: u64 = 4096;

/// `PF_X`: an executable segment.
const PF_X: u32 = 1;

/// Most frames one stack copy gives.
pub const MAX_FRAMES: usize = 256;
/// Most modules remembered (then the cache starts over).
const MODULES_MAX: usize = 1 << 14;
/// Most processes whose unwinders are kept (then they start over).
const PROCESSES_MAX: usize = 1 << 12;

/// The CPU architecture of the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86_64: `rip`, `rsp`, `rbp`.
    X86_64,
    /// aarch64: `pc`, `sp`, `x29`, `lr`.
    Aarch64,
}

impl Arch {
    /// The architecture of `machine` (`uname -m`), if one this crate unwinds.
    pub fn of_machine(machine: &str) -> Option<Arch> {
        match machine {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" | "arm64" => Some(Arch::Aarch64),
            _ => None,
        }
    }
}

/// A section of a file's unwind tables: its address in the file and its bytes.
#[derive(Debug, Clone)]
struct Section {
    addr: u64,
    data: Bytes,
}

impl Section {
    fn svma(&self) -> std::ops::Range<u64> {
        self.addr..self.addr.saturating_add(self.data.len() as u64)
    }
}

/// One file's unwind tables, with the segments that place them.
#[derive(Debug, Clone, Default)]
struct FileTables {
    path: String,
    loads: Vec<ElfLoad>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    debug_frame: Option<Section>,
}

/// The unwind tables of the files a trace holds, by build id.
#[derive(Debug, Clone, Default)]
pub struct UnwindTables {
    files: FxHashMap<Vec<u8>, Arc<FileTables>>,
}

impl UnwindTables {
    /// The tables of `symbols` (a trace's USER_SYMBOLS blocks, or files read elsewhere):
    /// those with `.eh_frame` or `.debug_frame`.
    pub fn new(symbols: &[UserSymbols]) -> UnwindTables {
        let mut t = UnwindTables::default();
        for s in symbols {
            t.add(s);
        }
        t
    }

    /// Adds one file's tables (a file already known is kept as it is).
    pub fn add(&mut self, s: &UserSymbols) {
        if s.build_id.is_empty() || self.files.contains_key(&s.build_id) {
            return;
        }
        let section = |name: &str| {
            s.sections
                .iter()
                .find(|x| x.name == name && !x.data.is_empty())
                .map(|x| Section {
                    addr: x.addr,
                    data: Bytes::from(&x.data[..]),
                })
        };
        // A table with a looping expression is left out (framehop would run it forever).
        let mut eh_frame = section(".eh_frame");
        let checked = eh_frame.as_ref().and_then(|e| cfi_checked(e, true));
        if checked.is_none() {
            eh_frame = None;
        }
        // An index that does not index this `.eh_frame`'s checked entries is dropped:
        // framehop then indexes the section itself, as far as the entries read (and gimli's
        // search trusts the index's arithmetic).
        let eh_frame_hdr = section(".eh_frame_hdr").filter(|h| {
            eh_frame
                .as_ref()
                .zip(checked.as_ref())
                .is_some_and(|(e, c)| hdr_indexes(h, e, c))
        });
        let debug_frame = section(".debug_frame").filter(|d| cfi_checked(d, false).is_some());
        let f = FileTables {
            path: s.path.clone(),
            loads: s.loads.clone(),
            eh_frame_hdr,
            eh_frame,
            debug_frame,
        };
        if f.eh_frame.is_some() || f.debug_frame.is_some() {
            self.files.insert(s.build_id.clone(), Arc::new(f));
        }
    }

    /// Whether the file of `build_id` has tables here.
    pub fn has(&self, build_id: &[u8]) -> bool {
        self.files.contains_key(build_id)
    }

    /// How many files have tables.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no file has.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Finds the unwind tables of a file the tables lack, by build id and recorded path.
pub type Loader = Box<dyn FnMut(&[u8], &str) -> Option<UserSymbols> + Send>;

/// The offsets of the FDEs of a `.eh_frame` (`eh`) or `.debug_frame` section whose call
/// frame instructions, and their CIE's, have only DWARF expressions that end; `None` when
/// one branches (`DW_OP_skip`, `DW_OP_bra`; the expressions compilers emit, for PLT entries
/// and signal frames, never do). framehop evaluates expressions with gimli without a bound
/// on their steps: a damaged table's loop would hang the analysis (fuzzing found it).
/// Entries past a damaged one are not read (nor are they by framehop's own index).
fn cfi_checked(s: &Section, eh: bool) -> Option<FxHashSet<u64>> {
    let data = gimli::EndianSlice::new(&s.data[..], gimli::LittleEndian);
    if eh {
        let bases = gimli::BaseAddresses::default().set_eh_frame(s.addr);
        entries_checked(&gimli::EhFrame::from(data), &bases)
    } else {
        let mut section = gimli::DebugFrame::from(data);
        section.set_address_size(8);
        entries_checked(&section, &gimli::BaseAddresses::default())
    }
}

/// [`cfi_checked`] of one section's entries.
fn entries_checked<'a, S: gimli::UnwindSection<Slice<'a>>>(
    section: &S,
    bases: &gimli::BaseAddresses,
) -> Option<FxHashSet<u64>>
where
    S::Offset: gimli::UnwindOffset<usize>,
{
    let mut fdes = FxHashSet::default();
    let mut cies: FxHashSet<usize> = FxHashSet::default();
    let mut entries = section.entries(bases);
    while let Ok(Some(e)) = entries.next() {
        match e {
            gimli::CieOrFde::Cie(cie) => {
                if !instructions_end(
                    cie.instructions(section, bases),
                    section,
                    cie.address_size(),
                ) {
                    return None;
                }
                cies.insert(cie.offset());
            }
            gimli::CieOrFde::Fde(partial) => {
                let Ok(fde) = partial.parse(gimli::UnwindSection::cie_from_offset) else {
                    continue;
                };
                // Its CIE, wherever it lies (framehop reads it through the FDE).
                let cie = fde.cie();
                if cies.insert(cie.offset())
                    && !instructions_end(
                        cie.instructions(section, bases),
                        section,
                        cie.address_size(),
                    )
                {
                    return None;
                }
                let size = cie.address_size();
                if !instructions_end(fde.instructions(section, bases), section, size) {
                    return None;
                }
                fdes.insert(fde.offset() as u64);
            }
        }
    }
    Some(fdes)
}

/// A section's bytes as gimli reads them.
type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// Whether the expressions of one entry's instructions end (see [`cfi_terminates`]).
fn instructions_end<'a, S: gimli::UnwindSection<Slice<'a>>>(
    mut it: gimli::CallFrameInstructionIter<'_, Slice<'a>>,
    section: &S,
    address_size: u8,
) -> bool {
    use gimli::CallFrameInstruction as I;
    let encoding = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size,
    };
    while let Ok(Some(i)) = it.next() {
        let expression = match i {
            I::DefCfaExpression { expression }
            | I::Expression { expression, .. }
            | I::ValExpression { expression, .. } => expression,
            _ => continue,
        };
        let Ok(e) = expression.get(section) else {
            return false;
        };
        let mut ops = e.operations(encoding);
        loop {
            match ops.next() {
                Ok(None) => break,
                Ok(Some(gimli::Operation::Skip { .. } | gimli::Operation::Bra { .. })) | Err(_) => {
                    return false
                }
                Ok(Some(_)) => {}
            }
        }
    }
    true
}

/// Whether `hdr` is an `.eh_frame_hdr` of the usual encodings (the linkers' only ones:
/// `eh_frame_ptr` pc-relative, the count unsigned, the table relative to the header, all
/// 4 bytes) that points at `eh_frame` and whose table is sorted and lands on its `checked`
/// FDEs ([`cfi_checked`]).
fn hdr_indexes(hdr: &Section, eh_frame: &Section, checked: &FxHashSet<u64>) -> bool {
    let h = &hdr.data[..];
    let i32_at = |o: usize| -> Option<i64> {
        Some(i64::from(i32::from_le_bytes(
            h.get(o..o + 4)?.try_into().ok()?,
        )))
    };
    const PCREL_SDATA4: u8 = 0x1b;
    const UDATA4: u8 = 0x03;
    const DATAREL_SDATA4: u8 = 0x3b;
    if h.len() < 12 || h[..4] != [1, PCREL_SDATA4, UDATA4, DATAREL_SDATA4] {
        return false;
    }
    let at = |base: u64, rel: i64| base.checked_add_signed(rel);
    let Some(ptr) = i32_at(4).and_then(|r| at(hdr.addr.checked_add(4)?, r)) else {
        return false;
    };
    if ptr != eh_frame.addr {
        return false;
    }
    let count = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
    if count
        .checked_mul(8)
        .and_then(|n| n.checked_add(12))
        .is_none_or(|n| n > h.len())
    {
        return false;
    }
    let end = eh_frame.svma().end;
    let mut last = None;
    for i in 0..count {
        let o = 12 + 8 * i;
        let (Some(loc), Some(fde)) = (i32_at(o), i32_at(o + 4)) else {
            return false;
        };
        let (Some(loc), Some(fde)) = (at(hdr.addr, loc), at(hdr.addr, fde)) else {
            return false;
        };
        if fde < eh_frame.addr || fde >= end || last.is_some_and(|l| loc < l) {
            return false;
        }
        if !checked.contains(&(fde - eh_frame.addr)) {
            return false;
        }
        last = Some(loc);
    }
    true
}

/// An executable mapping of a process: `[start, end)` maps the file of `build_id` from
/// byte `pgoff` on.
#[derive(Debug, Clone, Copy)]
pub struct Mapped<'a> {
    /// First address.
    pub start: u64,
    /// First address after.
    pub end: u64,
    /// The file offset of `start`.
    pub pgoff: u64,
    /// The file's build id (empty when unknown).
    pub build_id: &'a [u8],
    /// The file's path on the recording host.
    pub path: &'a str,
}

/// How an unwinding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At the stack's root: the unwinder found the outermost frame.
    Root,
    /// The next frame lies beyond the copy (a stack deeper than the copy).
    CopyEnd,
    /// The unwinding failed (no rule, a return address of 0, a frame that went nowhere), or
    /// stopped at [`MAX_FRAMES`].
    Stopped,
}

/// The unwinders of one process's address space.
enum Proc {
    X86(UnwinderX86_64<Bytes>),
    Arm(UnwinderAarch64<Bytes>),
}

/// Unwinds stack copies, process by process.
pub struct Unwinder {
    arch: Arch,
    tables: UnwindTables,
    /// Each process's unwinder, with the generation of its mappings it was built for.
    procs: FxHashMap<u32, (u64, Proc)>,
    /// Modules by (build id, start, end, pgoff).
    modules: FxHashMap<Placed, Option<Module<Bytes>>>,
    x86_cache: Box<CacheX86_64>,
    arm_cache: Box<CacheAarch64>,
    /// Where the files the tables lack are looked for, each once.
    loader: Option<Loader>,
    /// The build ids asked of the loader.
    asked: rustc_hash::FxHashSet<Vec<u8>>,
}

impl std::fmt::Debug for Unwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwinder")
            .field("arch", &self.arch)
            .field("files", &self.tables.len())
            .field("processes", &self.procs.len())
            .finish()
    }
}

impl Unwinder {
    /// An unwinder of `arch`'s stacks by `tables`.
    pub fn new(arch: Arch, tables: UnwindTables) -> Unwinder {
        Unwinder {
            arch,
            tables,
            procs: FxHashMap::default(),
            modules: FxHashMap::default(),
            x86_cache: Box::new(CacheX86_64::new()),
            arm_cache: Box::new(CacheAarch64::new()),
            loader: None,
            asked: Default::default(),
        }
    }

    /// The same, asking `loader` for the tables of a file the tables lack (once a file).
    pub fn with_loader(mut self, loader: Loader) -> Unwinder {
        self.loader = Some(loader);
        self
    }

    /// The tables it unwinds by.
    pub fn tables(&self) -> &UnwindTables {
        &self.tables
    }

    /// The architecture it unwinds.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Unwinds `copy`, taken in process `pid` whose mappings are in their `generation`
    /// (any change of them changes it; `maps` lists them, asked only then), into `out`:
    /// the instruction pointer, then the return addresses, innermost first.
    pub fn unwind<'m>(
        &mut self,
        pid: u32,
        generation: u64,
        maps: impl FnOnce() -> Vec<Mapped<'m>>,
        copy: &StackCopy,
        out: &mut Vec<u64>,
    ) -> End {
        out.clear();
        // No stack lies in the first page: registers that say so are damaged (and framehop
        // reads the return address below the stack pointer).
        if copy.sp < MIN_SP || copy.ip == 0 {
            if copy.ip != 0 {
                out.push(copy.ip);
            }
            return End::Stopped;
        }
        let stale = self.procs.get(&pid).is_none_or(|(g, _)| *g != generation);
        if stale {
            let p = self.build(&maps());
            if self.procs.len() >= PROCESSES_MAX {
                self.procs.clear();
            }
            self.procs.insert(pid, (generation, p));
        }
        let Some((_, p)) = self.procs.get(&pid) else {
            return End::Stopped;
        };
        let sp = copy.sp;
        let bytes = &copy.bytes;
        let top = sp.saturating_add(bytes.len() as u64);
        let mut beyond = false;
        let mut read = |addr: u64| -> Result<u64, ()> {
            let at = addr.checked_sub(sp).and_then(|o| usize::try_from(o).ok());
            match at.and_then(|o| bytes.get(o..o.checked_add(8)?)) {
                Some(w) => Ok(u64::from_le_bytes(w.try_into().map_err(|_| ())?)),
                None => {
                    // The next frame lies just above a copy the kernel filled: the stack goes
                    // on. (Below the stack pointer, far above it, or above a copy that ended
                    // at the stack's top, it is a frame gone astray.)
                    let above = addr.checked_sub(top.saturating_sub(8));
                    beyond |= copy.full && above.is_some_and(|a| a < BEYOND);
                    Err(())
                }
            }
        };
        let (x86_cache, arm_cache) = (&mut self.x86_cache, &mut self.arm_cache);
        // framehop and gimli read tables from the trace, which may be damaged: a panic of
        // theirs (an arithmetic overflow found by fuzzing, in builds that check) ends this
        // stack, not the analysis.
        let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match p {
            Proc::X86(u) => {
                let regs = UnwindRegsX86_64::new(copy.ip, copy.sp, copy.fp);
                let mut it = u.iter_frames(copy.ip, regs, x86_cache, &mut read);
                collect(|| it.next(), out)
            }
            Proc::Arm(u) => {
                // Return addresses signed by pointer authentication carry the signature in
                // their top bits: stripped above the highest code address known.
                let mask = PtrAuthMask::from_max_known_address(u.max_known_code_address());
                let regs =
                    UnwindRegsAarch64::new_with_ptr_auth_mask(mask, copy.lr, copy.sp, copy.fp);
                let mut it = u.iter_frames(copy.ip, regs, arm_cache, &mut read);
                collect(|| it.next(), out)
            }
        }));
        let end = walked.unwrap_or(End::Stopped);
        match end {
            End::Stopped if beyond => End::CopyEnd,
            e => e,
        }
    }

    /// A process's unwinder: a module for each of its mappings whose file has tables.
    fn build(&mut self, maps: &[Mapped<'_>]) -> Proc {
        let mut p = match self.arch {
            Arch::X86_64 => Proc::X86(UnwinderX86_64::new()),
            Arch::Aarch64 => Proc::Arm(UnwinderAarch64::new()),
        };
        if self.modules.len() >= MODULES_MAX {
            self.modules.clear();
        }
        for m in maps {
            if !m.build_id.is_empty()
                && !self.tables.files.contains_key(m.build_id)
                && self.asked.insert(m.build_id.to_vec())
            {
                if let Some(s) = self.loader.as_mut().and_then(|l| l(m.build_id, m.path)) {
                    self.tables.add(&s);
                }
            }
            let Some(t) = self.tables.files.get(m.build_id) else {
                continue;
            };
            let key = (m.build_id.to_vec(), m.start, m.end, m.pgoff);
            let module = self
                .modules
                .entry(key)
                .or_insert_with(|| {
                    // Indexing a damaged table must not end the analysis either.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| module(t, m)))
                        .ok()
                        .flatten()
                })
                .clone();
            if let Some(module) = module {
                match &mut p {
                    Proc::X86(u) => u.add_module(module),
                    Proc::Arm(u) => u.add_module(module),
                }
            }
        }
        p
    }
}

/// Frames from an iterator's `next` into `out`, and how it ended.
fn collect(
    mut next: impl FnMut() -> Result<Option<framehop::FrameAddress>, framehop::Error>,
    out: &mut Vec<u64>,
) -> End {
    loop {
        if out.len() >= MAX_FRAMES {
            return End::Stopped;
        }
        match next() {
            Ok(Some(f)) => out.push(f.address()),
            Ok(None) => return End::Root,
            Err(_) => return End::Stopped,
        }
    }
}

/// The module of file tables `t` mapped at `m`: its addresses are the file's, moved by
/// where the segment holding `m.pgoff` was mapped. `None` when no segment holds it.
fn module(t: &FileTables, m: &Mapped<'_>) -> Option<Module<Bytes>> {
    // The kernel maps a segment from its offset rounded down to a page (of any size): the
    // mapping's offset may lie before the segment's, inside the one before it. The
    // executable segment whose bytes the mapping's file range overlaps is the one mapped.
    let len = m.end.saturating_sub(m.start);
    let holds = |l: &&ElfLoad| {
        l.offset < m.pgoff.saturating_add(len) && m.pgoff < l.offset.saturating_add(l.filesz)
    };
    let load = t
        .loads
        .iter()
        .filter(|l| l.flags & PF_X != 0)
        .find(holds)
        .or_else(|| t.loads.iter().find(holds))?;
    // The file address of the mapping's first byte, and how far the mapping moved it.
    let svma = load.vaddr.wrapping_add(m.pgoff).wrapping_sub(load.offset);
    let bias = m.start.wrapping_sub(svma);
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        eh_frame_svma: t.eh_frame.as_ref().map(Section::svma),
        eh_frame: t.eh_frame.as_ref().map(|s| s.data.clone()),
        eh_frame_hdr_svma: t.eh_frame_hdr.as_ref().map(Section::svma),
        eh_frame_hdr: t.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
        debug_frame: t.debug_frame.as_ref().map(|s| s.data.clone()),
        ..Default::default()
    };
    Some(Module::new(t.path.clone(), m.start..m.end, bias, info))
}

#[cfg(test)]
mod tests;
