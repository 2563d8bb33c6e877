//! perf_event_open: the events, their mmap'd ring buffers and reading records out of them.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};
use perf_event_open_sys as sys;
use sys::bindings as b;

use ioblame_perfrec::UnwindRegs;
use ioblame_perfrec::{
    lost_count, parse_cgroup, parse_sample_id, ByteOrder, SampleLayout, HEADER_LEN, SAMPLE_CPU,
    SAMPLE_IDENTIFIER, SAMPLE_RAW, SAMPLE_TID, SAMPLE_TIME,
};
/// The perf record format's constants used by the recorder (`ioblame-perfrec`; the names
/// kept here for the modules that take them from `perf`).
pub use ioblame_perfrec::{
    RECORD_CGROUP, RECORD_SAMPLE, SAMPLE_CALLCHAIN, SAMPLE_CGROUP, SAMPLE_REGS_USER,
    SAMPLE_STACK_USER,
};

/// sample_type of every event (CALLCHAIN is added on the stack events, CGROUP on them with
/// `--cgroups`).
pub const SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;

/// The records are read where they were written.
const NATIVE: ByteOrder = ByteOrder::native();

/// Where a sample's time lies in the record: the same for every event (the fields that
/// [`EventSpec::sample_type`] adds come after it).
const SAMPLE_TIME_AT: usize = HEADER_LEN
    + match SampleLayout::new(SAMPLE_TYPE) {
        Some(l) => match l.time_at() {
            Some(at) => at,
            None => panic!("SAMPLE_TYPE has TIME"),
        },
        None => panic!("SAMPLE_TYPE is one ioblame-perfrec parses"),
    };

/// How to open one event.
#[derive(Debug, Clone, Copy)]
pub struct EventSpec {
    /// tracefs id.
    pub config: u64,
    /// Kernel callchain on samples.
    pub callchain: bool,
    /// The callchain goes on into user space (frame pointers; `--user-stacks`): no
    /// `exclude_callchain_user`.
    pub user_callchain: bool,
    /// One sample every this many hits (1: every hit).
    pub sample_period: u64,
    /// The task's cgroup id on samples (`PERF_SAMPLE_CGROUP`).
    pub cgroup: bool,
    /// sample_max_stack.
    pub max_stack: u16,
    /// COMM/FORK/EXIT records.
    pub task: bool,
    /// MMAP2 records (executable mappings), with the task records (`--user-stacks`).
    pub mmap: bool,
    /// The build id in the MMAP2 records (`build_id`, Linux 5.12), with `mmap`.
    pub mmap_build_id: bool,
    /// CGROUP records (a cgroup created while recording: its id and path), with the task
    /// records.
    pub cgroup_records: bool,
    /// Ring wakeup watermark in bytes.
    pub watermark: u32,
    /// With the callchain, a copy of this many bytes of the top of the user stack and the
    /// registers that unwind it ([`UNWIND_REGS`]; `--user-stacks dwarf`); 0: none.
    pub stack_user: u32,
}

/// The user registers a stack copy is unwound from, on this recorder's architecture
/// (`None`: one the analysis does not unwind).
#[cfg(target_arch = "x86_64")]
pub const NATIVE_UNWIND: Option<UnwindRegs> = Some(UnwindRegs::X86_64);
/// The user registers a stack copy is unwound from.
#[cfg(target_arch = "aarch64")]
pub const NATIVE_UNWIND: Option<UnwindRegs> = Some(UnwindRegs::AARCH64);
/// The user registers a stack copy is unwound from.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const NATIVE_UNWIND: Option<UnwindRegs> = None;

/// `sample_regs_user` of the stack copies: [`NATIVE_UNWIND`]'s registers (0: none).
pub const UNWIND_REGS: u64 = match NATIVE_UNWIND {
    Some(r) => r.mask(),
    None => 0,
};

impl EventSpec {
    /// The sample_type this spec produces.
    pub fn sample_type(&self) -> u64 {
        SAMPLE_TYPE
            | if self.callchain { SAMPLE_CALLCHAIN } else { 0 }
            | if self.copies_stack() {
                SAMPLE_REGS_USER | SAMPLE_STACK_USER
            } else {
                0
            }
            | if self.cgroup { SAMPLE_CGROUP } else { 0 }
    }

    /// Whether its samples copy the user stack.
    pub fn copies_stack(&self) -> bool {
        self.callchain && self.stack_user > 0 && UNWIND_REGS != 0
    }

    /// `sample_regs_user`: the user registers of its samples (0: none).
    pub fn regs_user(&self) -> u64 {
        if self.copies_stack() {
            UNWIND_REGS
        } else {
            0
        }
    }

    /// The perf_event_attr.
    pub fn attr(&self) -> b::perf_event_attr {
        let mut a = b::perf_event_attr {
            type_: b::PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<b::perf_event_attr>() as u32,
            config: self.config,
            sample_type: self.sample_type(),
            ..Default::default()
        };
        a.__bindgen_anon_1.sample_period = self.sample_period.max(1);
        a.set_disabled(1);
        a.set_sample_id_all(1);
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = self.watermark;
        if self.callchain {
            if !self.user_callchain {
                a.set_exclude_callchain_user(1);
            }
            a.sample_max_stack = self.max_stack;
        }
        if self.copies_stack() {
            a.sample_regs_user = UNWIND_REGS;
            a.sample_stack_user = self.stack_user;
        }
        if self.task {
            a.set_comm(1);
            a.set_comm_exec(1);
            a.set_task(1);
            if self.cgroup_records {
                a.set_cgroup(1);
            }
            if self.mmap {
                a.set_mmap(1);
                a.set_mmap2(1);
                if self.mmap_build_id {
                    a.set_build_id(1);
                }
            }
        }
        a
    }
}

/// One open perf event on one CPU.
#[derive(Debug)]
pub struct Event {
    fd: OwnedFd,
}

fn errno_hint(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            // perf_allow_tracepoint: tracepoints need CAP_PERFMON unless paranoid is -1; CPU-wide
            // events and kernel callchains are allowed then too.
            format!(
                "permission denied ({e}): system-wide tracepoints need root or CAP_PERFMON; \
                 kernel.perf_event_paranoid is {paranoid}, and only -1 lets other users record \
                 them (they still need read access to tracefs)"
            )
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) => {
            format!("{e}: this kernel does not support the tracepoint through perf")
        }
        Some(libc::EOVERFLOW) => {
            format!("{e}: --stack-depth exceeds kernel.perf_event_max_stack")
        }
        Some(libc::EMFILE) => {
            format!("{e}: too many open files; raise `ulimit -n` or use fewer events")
        }
        _ => e.to_string(),
    }
}

impl Event {
    /// Opens `spec` on `cpu` system-wide, disabled.
    pub fn open(spec: &EventSpec, cpu: u32, name: &str) -> Result<Event> {
        let mut attr = spec.attr();
        // SAFETY: attr is a fully initialised perf_event_attr whose size field matches the
        // struct; pid -1 with a cpu is a system-wide per-CPU event; no group fd.
        let fd = unsafe {
            sys::perf_event_open(&mut attr, -1, cpu as i32, -1, b::PERF_FLAG_FD_CLOEXEC as _)
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            bail!("perf_event_open({name}, cpu {cpu}): {}", errno_hint(&e));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Event { fd })
    }

    /// Raw fd.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// The sample id (PERF_EVENT_IOC_ID).
    pub fn id(&self) -> Result<u64> {
        let mut id = 0u64;
        // SAFETY: the ioctl writes one u64 into `id`.
        let rc = unsafe { sys::ioctls::ID(self.fd(), &mut id) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error()).context("PERF_EVENT_IOC_ID");
        }
        Ok(id)
    }

    /// Sets the in-kernel filter.
    pub fn set_filter(&self, filter: &str, name: &str) -> Result<()> {
        let c = std::ffi::CString::new(filter).context("filter contains NUL")?;
        // SAFETY: the kernel reads a NUL-terminated string; c outlives the call.
        let rc = unsafe { sys::ioctls::SET_FILTER(self.fd(), c.as_ptr() as *mut _) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            bail!("{name}: the kernel rejected the filter '{filter}': {e}");
        }
        Ok(())
    }

    /// Redirects this event's records into `target`'s ring buffer.
    pub fn set_output(&self, target: &Event) -> Result<()> {
        // SAFETY: both fds are open perf events on the same CPU.
        let rc = unsafe { sys::ioctls::SET_OUTPUT(self.fd(), target.fd()) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error()).context("PERF_EVENT_IOC_SET_OUTPUT");
        }
        Ok(())
    }

    /// Enables the event.
    pub fn enable(&self) -> Result<()> {
        // SAFETY: plain ioctl on our fd.
        let rc = unsafe { sys::ioctls::ENABLE(self.fd(), 0) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error()).context("PERF_EVENT_IOC_ENABLE");
        }
        Ok(())
    }

    /// Disables the event.
    pub fn disable(&self) {
        // SAFETY: plain ioctl on our fd; failure is harmless at shutdown.
        unsafe { sys::ioctls::DISABLE(self.fd(), 0) };
    }
}

/// A mmap'd perf ring buffer.
///
/// Invariant, set up by [`Ring::map`] and relied on by every access: `base` is the start of
/// a live mapping of `map_len` bytes, owned by this ring (unmapped when it is dropped), whose
/// first page is the kernel's `perf_event_mmap_page` and whose data area is
/// `[data_off, data_off + data_size)`, inside the mapping, `data_size` a power of two.
#[derive(Debug)]
pub struct Ring {
    base: *mut u8,
    map_len: usize,
    data_off: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this struct and only accessed through &mut self.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps 1 + `data_pages` pages of `ev` (data_pages a power of two).
    pub fn map(ev: &Event, data_pages: usize, page: usize) -> Result<Ring> {
        let map_len = (data_pages + 1) * page;
        // SAFETY: mapping a perf fd shared read-write is the documented interface; the result
        // is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                ev.fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::ENOMEM) {
                bail!(
                    "mmap of a {} KiB perf ring buffer failed ({e}); lower --buffer-size or \
                     raise kernel.perf_event_mlock_kb / `ulimit -l`",
                    map_len / 1024
                );
            }
            bail!("mmap of the perf ring buffer failed: {e}");
        }
        let base = p as *mut u8;
        let meta = base as *const b::perf_event_mmap_page;
        // SAFETY: the first page is the kernel's perf_event_mmap_page.
        let (off, size) = unsafe { ((*meta).data_offset, (*meta).data_size) };
        let (data_off, data_size) = if size == 0 {
            (page, data_pages * page)
        } else {
            (off as usize, size as usize)
        };
        if data_off + data_size > map_len || !data_size.is_power_of_two() {
            // SAFETY: unmapping what we mapped.
            unsafe { libc::munmap(p, map_len) };
            bail!("perf ring buffer layout is unexpected ({data_off}+{data_size} > {map_len})");
        }
        Ok(Ring {
            base,
            map_len,
            data_off,
            data_size,
            scratch: Vec::new(),
        })
    }

    /// The control page's head and tail, shared with the kernel. They borrow the ring, so
    /// they cannot outlive the mapping (unmapped only when the ring is dropped).
    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        let meta = self.base as *const b::perf_event_mmap_page;
        // SAFETY: `base` is the start of a live mapping (made in `map`, unmapped in `drop`)
        // whose first page is a perf_event_mmap_page; data_head/data_tail are naturally
        // aligned u64 fields of it, written by the kernel only through atomic accesses, and
        // AtomicU64 has the same layout as u64. The returned references borrow `self`.
        unsafe {
            (
                &*(std::ptr::addr_of!((*meta).data_head) as *const AtomicU64),
                &*(std::ptr::addr_of!((*meta).data_tail) as *const AtomicU64),
            )
        }
    }

    /// Copies `out.len()` bytes (at most the data area's size) of the data area starting at
    /// ring position `pos`, wrapping at the end of the area, into `out`.
    ///
    /// The data area is shared with the kernel, which writes into it while we read, so no Rust
    /// reference to it is ever made: bytes are copied out through raw pointers, and only from
    /// `[tail, head)`, which the kernel does not write until we move the tail past it.
    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let off = (pos % self.data_size as u64) as usize;
        let first = (self.data_size - off).min(out.len());
        let rest = (out.len() - first).min(self.data_size);
        // SAFETY: `data_off + data_size <= map_len` (checked in `map`), `off < data_size`,
        // `off + first <= data_size` and `rest <= data_size`, so both source ranges lie in the
        // mapping; `out` is a distinct, writable buffer of at least `first + rest` bytes. The
        // kernel does not write these bytes concurrently: callers copy only from `[tail, head)`
        // with `head` loaded with Acquire ordering, which orders the kernel's writes of those
        // bytes before our reads.
        unsafe {
            let data = self.base.add(self.data_off);
            std::ptr::copy_nonoverlapping(data.add(off), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), rest);
        }
    }

    /// Reads every complete record available, calling `f` with each one (header included),
    /// then releases the space to the kernel. Returns the bytes consumed.
    ///
    /// When the ring is inconsistent (a record whose size is impossible), the rest of what is
    /// pending cannot be parsed: it is discarded (the space released) and the error says how
    /// many bytes were lost, for the chunk header.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> Result<u64, RingCorrupt> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let (head_a, tail_a) = self.head_tail();
        // Acquire: the record bytes the kernel wrote before publishing `head` are visible.
        let head = head_a.load(Ordering::Acquire);
        let start = tail_a.load(Ordering::Relaxed);
        let size = self.data_size as u64;
        let mut tail = start;
        let mut bad = None;
        if head.wrapping_sub(start) > size {
            // The kernel never gets more than the area ahead of the tail.
            bad = Some((0, head.wrapping_sub(start)));
        }
        while bad.is_none() && head.wrapping_sub(tail) >= 8 {
            let avail = head.wrapping_sub(tail);
            let mut hdr = [0u8; 8];
            self.copy_out(tail, &mut hdr);
            let rsize = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if rsize < 8 || rsize > avail {
                bad = Some((rsize, avail));
                break;
            }
            scratch.resize(rsize as usize, 0);
            self.copy_out(tail, &mut scratch);
            f(&scratch);
            tail = tail.wrapping_add(rsize);
        }
        let r = if let Some((rsize, pending)) = bad {
            // Skip everything pending: no record boundary can be found past a bad size.
            tail_a.store(head, Ordering::Release);
            Err(RingCorrupt { rsize, pending })
        } else {
            // Release: our reads of the records happen before the kernel may overwrite them.
            tail_a.store(tail, Ordering::Release);
            Ok(tail.wrapping_sub(start))
        };
        self.scratch = scratch;
        r
    }
}

/// A perf ring buffer found inconsistent: its pending data was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingCorrupt {
    /// The impossible record size found (0 when the head itself was out of range).
    pub rsize: u64,
    /// Bytes that were pending from that record on, now discarded.
    pub pending: u64,
}

impl std::fmt::Display for RingCorrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "corrupt perf ring: record of size {} with {} bytes pending; those bytes were \
             discarded",
            self.rsize, self.pending
        )
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping exactly once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}

/// What a record means for the chunk: its timestamp and the records it says were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordInfo {
    /// Timestamp (CLOCK_MONOTONIC ns), when the record carries one.
    pub ts: Option<u64>,
    /// Records lost (LOST / LOST_SAMPLES).
    pub lost: u64,
}

/// The cgroup a PERF_RECORD_CGROUP names: its id and path (`id` u64 at 8, then the path,
/// NUL-terminated); `None` for other records or a damaged one.
pub fn cgroup_record(rec: &[u8]) -> Option<ioblame_format::Cgroup> {
    if NATIVE.u32_at(rec, 0)? != RECORD_CGROUP {
        return None;
    }
    let (id, path) = parse_cgroup(rec.get(HEADER_LEN..)?, NATIVE)?;
    Some(ioblame_format::Cgroup {
        id,
        path: String::from_utf8_lossy(path).into_owned(),
    })
}

/// Extracts the timestamp and loss count of one record, given that every event uses
/// `SAMPLE_TYPE` (with CALLCHAIN or CGROUP, which come after the time) and sample_id_all.
pub fn record_info(rec: &[u8]) -> RecordInfo {
    let Some(kind) = NATIVE.u32_at(rec, 0) else {
        return RecordInfo::default();
    };
    if kind == RECORD_SAMPLE {
        return RecordInfo {
            ts: NATIVE.u64_at(rec, SAMPLE_TIME_AT),
            lost: 0,
        };
    }
    let body = rec.get(HEADER_LEN..).unwrap_or_default();
    let ts = parse_sample_id(body, SAMPLE_TYPE, NATIVE)
        .ok()
        .and_then(|(s, _)| s.time);
    RecordInfo {
        ts,
        lost: lost_count(kind, body, NATIVE).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn trailer(time: u64) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&1u32.to_ne_bytes());
        t.extend_from_slice(&2u32.to_ne_bytes());
        t.extend_from_slice(&time.to_ne_bytes());
        t.extend_from_slice(&0u32.to_ne_bytes());
        t.extend_from_slice(&0u32.to_ne_bytes());
        t.extend_from_slice(&77u64.to_ne_bytes());
        t
    }

    #[test]
    fn sample_and_trailer_times() {
        let mut body = 77u64.to_ne_bytes().to_vec();
        body.extend_from_slice(&5u32.to_ne_bytes());
        body.extend_from_slice(&6u32.to_ne_bytes());
        body.extend_from_slice(&123456u64.to_ne_bytes());
        body.extend_from_slice(&[0u8; 8]);
        let s = rec(9, &body);
        assert_eq!(
            record_info(&s),
            RecordInfo {
                ts: Some(123456),
                lost: 0
            }
        );

        let mut comm = 5u32.to_ne_bytes().to_vec();
        comm.extend_from_slice(&5u32.to_ne_bytes());
        comm.extend_from_slice(b"dd\0\0\0\0\0\0");
        comm.extend_from_slice(&trailer(999));
        assert_eq!(
            record_info(&rec(3, &comm)),
            RecordInfo {
                ts: Some(999),
                lost: 0
            }
        );

        let mut lost = 77u64.to_ne_bytes().to_vec();
        lost.extend_from_slice(&42u64.to_ne_bytes());
        lost.extend_from_slice(&trailer(1000));
        assert_eq!(
            record_info(&rec(2, &lost)),
            RecordInfo {
                ts: Some(1000),
                lost: 42
            }
        );

        let mut ls = 17u64.to_ne_bytes().to_vec();
        ls.extend_from_slice(&trailer(1001));
        assert_eq!(
            record_info(&rec(13, &ls)),
            RecordInfo {
                ts: Some(1001),
                lost: 17
            }
        );

        // Truncated records do not panic.
        assert_eq!(record_info(&[9, 0, 0]), RecordInfo::default());
        assert_eq!(record_info(&rec(9, &[1, 2])).ts, None);
        assert_eq!(record_info(&rec(3, &[1, 2])).ts, None);
    }

    /// A ring over anonymous memory laid out as the kernel's: a control page, then a data area
    /// of `pages` pages.
    fn fake_ring(pages: usize) -> Ring {
        let page = 4096;
        let map_len = (pages + 1) * page;
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Ring {
            base: p as *mut u8,
            map_len,
            data_off: page,
            data_size: pages * page,
            scratch: Vec::new(),
        }
    }

    /// Writes `bytes` at ring position `pos` (wrapping) and publishes the head.
    fn produce(r: &Ring, pos: u64, bytes: &[u8], head: u64) {
        for (i, b) in bytes.iter().enumerate() {
            let off = (pos as usize + i) % r.data_size;
            // SAFETY: off < data_size, inside our anonymous mapping.
            unsafe { *r.base.add(r.data_off + off) = *b };
        }
        r.head_tail().0.store(head, Ordering::Release);
    }

    fn tail_of(r: &Ring) -> u64 {
        r.head_tail().1.load(Ordering::Acquire)
    }

    #[test]
    fn drain_reads_whole_and_wrapped_records_and_discards_a_corrupt_ring() {
        let mut r = fake_ring(1);
        let a = rec(9, &[1u8; 24]);
        let b = rec(3, &[2u8; 56]);
        // Start near the end of the area so that `b` wraps around it.
        let start = 4096 - 40;
        r.head_tail().1.store(start, Ordering::Release);
        let mut bytes = a.clone();
        bytes.extend(&b);
        let head = start + bytes.len() as u64;
        produce(&r, start, &bytes, head);
        let mut got = Vec::new();
        assert_eq!(r.drain(|x| got.push(x.to_vec())), Ok(bytes.len() as u64));
        assert_eq!(got, vec![a.clone(), b]);
        assert_eq!(tail_of(&r), head);

        // Nothing new: nothing read.
        assert_eq!(r.drain(|_| panic!("no record")), Ok(0));

        // A record of size 4 (impossible): it and everything after it are discarded.
        let mut bad = a.clone();
        bad.extend([3, 0, 0, 0, 0, 0, 4, 0]);
        bad.extend(&a);
        let head2 = head + bad.len() as u64;
        produce(&r, head, &bad, head2);
        let mut n = 0;
        let e = r.drain(|_| n += 1).unwrap_err();
        assert_eq!(n, 1, "the record before the damage is read");
        assert_eq!(
            e,
            RingCorrupt {
                rsize: 4,
                pending: (bad.len() - a.len()) as u64
            }
        );
        assert_eq!(tail_of(&r), head2, "the space is released");

        // A head further ahead than the area: all of it is discarded.
        let head3 = head2 + 5000;
        produce(&r, head2, &[], head3);
        assert_eq!(
            r.drain(|_| panic!("no record")),
            Err(RingCorrupt {
                rsize: 0,
                pending: 5000
            })
        );
        assert_eq!(tail_of(&r), head3);
    }

    /// The record format's constants (`ioblame-perfrec`) are the kernel headers' ones.
    #[test]
    fn the_record_format_is_the_kernel_headers() {
        use ioblame_perfrec as p;
        let sample_type = b::PERF_SAMPLE_IDENTIFIER
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_RAW;
        assert_eq!(SAMPLE_TYPE, sample_type as u64);
        assert_eq!(SAMPLE_CALLCHAIN, b::PERF_SAMPLE_CALLCHAIN as u64);
        assert_eq!(SAMPLE_CGROUP, b::PERF_SAMPLE_CGROUP as u64);
        for (ours, kernel) in [
            (p::RECORD_COMM, b::PERF_RECORD_COMM),
            (p::RECORD_LOST, b::PERF_RECORD_LOST),
            (p::RECORD_SAMPLE, b::PERF_RECORD_SAMPLE),
            (p::RECORD_MMAP2, b::PERF_RECORD_MMAP2),
            (p::RECORD_LOST_SAMPLES, b::PERF_RECORD_LOST_SAMPLES),
            (p::RECORD_CGROUP, b::PERF_RECORD_CGROUP),
        ] {
            assert_eq!(ours, kernel);
        }
        assert_eq!(p::MISC_COMM_EXEC as u32, b::PERF_RECORD_MISC_COMM_EXEC);
        assert_eq!(
            p::MISC_MMAP_BUILD_ID as u32,
            b::PERF_RECORD_MISC_MMAP_BUILD_ID
        );
        assert_eq!(p::CONTEXT_USER, b::PERF_CONTEXT_USER);
        assert_eq!(p::CONTEXT_MAX, b::PERF_CONTEXT_MAX);
        // The time of a sample, read at a fixed place by `record_info`.
        assert_eq!(SAMPLE_TIME_AT, 24);
    }

    #[test]
    fn cgroup_records_name_the_cgroup() {
        let mut body = 4242u64.to_ne_bytes().to_vec();
        body.extend_from_slice(b"/ioblame/t1\0\0\0\0\0");
        body.extend_from_slice(&trailer(7));
        let c = cgroup_record(&rec(19, &body)).unwrap();
        assert_eq!((c.id, c.path.as_str()), (4242, "/ioblame/t1"));
        assert!(cgroup_record(&rec(3, &body)).is_none());
        // No NUL: damaged.
        assert!(cgroup_record(&rec(19, &4242u64.to_ne_bytes())).is_none());
    }

    #[test]
    fn attr_settings() {
        let spec = EventSpec {
            config: 42,
            callchain: true,
            user_callchain: false,
            sample_period: 1,
            cgroup: false,
            max_stack: 32,
            task: true,
            mmap: false,
            mmap_build_id: false,
            cgroup_records: true,
            watermark: 4096,
            stack_user: 0,
        };
        let a = spec.attr();
        assert_eq!((a.sample_regs_user, a.sample_stack_user), (0, 0));
        let copy = EventSpec {
            stack_user: 2048,
            ..spec
        };
        let c = copy.attr();
        assert_eq!(
            c.sample_type,
            SAMPLE_TYPE | SAMPLE_CALLCHAIN | SAMPLE_REGS_USER | SAMPLE_STACK_USER
        );
        assert_eq!(
            (c.sample_regs_user, c.sample_stack_user),
            (UNWIND_REGS, 2048)
        );
        assert_eq!(
            c.exclude_callchain_user(),
            1,
            "the copy replaces the kernel's walk"
        );
        // No copy without a callchain: the events whose stacks are no intent pay nothing.
        let no_chain = EventSpec {
            callchain: false,
            ..copy
        };
        assert_eq!(no_chain.attr().sample_type & SAMPLE_STACK_USER, 0);
        assert_eq!(a.type_, b::PERF_TYPE_TRACEPOINT);
        assert_eq!(a.config, 42);
        assert_eq!(a.sample_type, SAMPLE_TYPE | SAMPLE_CALLCHAIN);
        assert_eq!(a.exclude_callchain_user(), 1);
        assert_eq!(a.sample_max_stack, 32);
        // SAFETY: sample_period is the member of the union this spec sets.
        assert_eq!(unsafe { a.__bindgen_anon_1.sample_period }, 1);
        let sampled = EventSpec {
            sample_period: 64,
            ..spec
        }
        .attr();
        // SAFETY: as above.
        assert_eq!(unsafe { sampled.__bindgen_anon_1.sample_period }, 64);
        assert_eq!((a.comm(), a.comm_exec(), a.task()), (1, 1, 1));
        assert_eq!(a.cgroup(), 1);
        assert_eq!((a.sample_id_all(), a.use_clockid(), a.clockid), (1, 1, 1));
        let plain = EventSpec {
            callchain: false,
            task: false,
            ..spec
        }
        .attr();
        assert_eq!(plain.sample_type, SAMPLE_TYPE);
        let with_cgroup = EventSpec {
            cgroup: true,
            ..spec
        }
        .attr();
        assert_eq!(
            with_cgroup.sample_type,
            SAMPLE_TYPE | SAMPLE_CALLCHAIN | SAMPLE_CGROUP
        );
        assert_eq!(
            (plain.comm(), plain.task(), plain.sample_max_stack),
            (0, 0, 0)
        );
        assert_eq!((a.mmap(), a.mmap2(), a.build_id()), (0, 0, 0));
        let user = EventSpec {
            user_callchain: true,
            mmap: true,
            mmap_build_id: true,
            ..spec
        }
        .attr();
        assert_eq!(user.exclude_callchain_user(), 0);
        assert_eq!(user.exclude_callchain_kernel(), 0);
        assert_eq!((user.mmap(), user.mmap2(), user.build_id()), (1, 1, 1));
        assert_eq!(user.mmap_data(), 0);
        let no_build_id = EventSpec { mmap: true, ..spec }.attr();
        assert_eq!((no_build_id.mmap2(), no_build_id.build_id()), (1, 0));
    }
}
