//! The non-sample records (COMM, FORK, EXIT, MMAP, MMAP2, LOST, LOST_SAMPLES) and the
//! `sample_id_all` trailer they carry.

use crate::consts::{
    MISC_COMM_EXEC, MISC_MMAP_BUILD_ID, MISC_MMAP_DATA, RECORD_COMM, RECORD_EXIT, RECORD_FORK,
    RECORD_LOST, RECORD_LOST_SAMPLES, RECORD_MMAP, RECORD_MMAP2, SAMPLE_CPU, SAMPLE_ID,
    SAMPLE_IDENTIFIER, SAMPLE_STREAM_ID, SAMPLE_TID, SAMPLE_TIME,
};
use crate::cursor::Cur;
use crate::error::RecordError;
use crate::order::ByteOrder;

/// The `sample_id_all` trailer of a non-sample record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleId {
    /// `TID`: (pid, tid).
    pub pid_tid: Option<(u32, u32)>,
    /// `TIME`.
    pub time: Option<u64>,
    /// `ID`.
    pub id: Option<u64>,
    /// `STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `CPU`.
    pub cpu: Option<u32>,
    /// `IDENTIFIER`.
    pub identifier: Option<u64>,
}

/// Size in bytes of the `sample_id_all` trailer for `sample_type`.
pub fn sample_id_len(sample_type: u64) -> usize {
    [
        SAMPLE_TID,
        SAMPLE_TIME,
        SAMPLE_ID,
        SAMPLE_STREAM_ID,
        SAMPLE_CPU,
        SAMPLE_IDENTIFIER,
    ]
    .iter()
    .filter(|&&b| sample_type & b != 0)
    .count()
        * 8
}

/// Parses the trailer at the end of `body`. Returns the trailer and the body before it.
pub fn parse_sample_id(
    body: &[u8],
    sample_type: u64,
    order: ByteOrder,
) -> Result<(SampleId, &[u8]), RecordError> {
    let n = sample_id_len(sample_type);
    let start = body.len().checked_sub(n).ok_or(RecordError::Truncated {
        what: "sample_id trailer",
        at: 0,
        need: n,
        len: body.len(),
    })?;
    let mut c = Cur::new(&body[start..], order);
    let has = |bit: u64| sample_type & bit != 0;
    // The fields in the order they are recorded (a struct literal evaluates in order).
    let s = SampleId {
        pid_tid: c.u32x2_if(has(SAMPLE_TID), "pid/tid")?,
        time: c.u64_if(has(SAMPLE_TIME), "time")?,
        id: c.u64_if(has(SAMPLE_ID), "id")?,
        stream_id: c.u64_if(has(SAMPLE_STREAM_ID), "stream id")?,
        cpu: c.u32x2_if(has(SAMPLE_CPU), "cpu")?.map(|(cpu, _)| cpu),
        identifier: c.u64_if(has(SAMPLE_IDENTIFIER), "identifier")?,
    };
    Ok((s, &body[..start]))
}

/// A parsed non-sample record this crate understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskRecord<'a> {
    /// `PERF_RECORD_COMM`.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// New name (bytes up to the NUL).
        comm: &'a [u8],
        /// Set by exec.
        exec: bool,
    },
    /// `PERF_RECORD_FORK`.
    Fork {
        /// Child pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Child tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Kernel time of the fork.
        time: u64,
    },
    /// `PERF_RECORD_EXIT`.
    Exit {
        /// Pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Kernel time of the exit.
        time: u64,
    },
    /// `PERF_RECORD_MMAP2` or `PERF_RECORD_MMAP` of an executable mapping.
    Mmap {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// First address.
        addr: u64,
        /// Length.
        len: u64,
        /// File offset of `addr`.
        pgoff: u64,
        /// The file's device major and minor (0 when the record has the build id instead).
        dev: (u32, u32),
        /// The file's inode (0 likewise).
        ino: u64,
        /// The build id, when the record carries it.
        build_id: &'a [u8],
        /// The path (bytes up to the NUL).
        filename: &'a [u8],
    },
    /// `PERF_RECORD_LOST`.
    Lost {
        /// Id of the event whose records were lost.
        id: u64,
        /// How many.
        lost: u64,
    },
    /// `PERF_RECORD_LOST_SAMPLES`.
    LostSamples {
        /// How many.
        lost: u64,
    },
}

/// Parses a COMM, FORK, EXIT, MMAP, MMAP2, LOST or LOST_SAMPLES record whose trailer is laid
/// out for `sample_type`. Returns `Ok(None)` for other record types, and for mappings of
/// data (`PERF_RECORD_MISC_MMAP_DATA`).
pub fn parse_task_record<'a>(
    kind: u32,
    misc: u16,
    body: &'a [u8],
    sample_type: u64,
    order: ByteOrder,
) -> Result<Option<(TaskRecord<'a>, SampleId)>, RecordError> {
    if !matches!(
        kind,
        RECORD_COMM
            | RECORD_EXIT
            | RECORD_FORK
            | RECORD_LOST
            | RECORD_LOST_SAMPLES
            | RECORD_MMAP
            | RECORD_MMAP2
    ) || (matches!(kind, RECORD_MMAP | RECORD_MMAP2) && misc & MISC_MMAP_DATA != 0)
    {
        return Ok(None);
    }
    let (sid, body) = parse_sample_id(body, sample_type, order)?;
    let mut c = Cur::new(body, order);
    let r = match kind {
        RECORD_COMM => {
            let (pid, tid) = c.u32x2("pid/tid")?;
            let rest = &body[8..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            TaskRecord::Comm {
                pid,
                tid,
                comm: &rest[..end],
                exec: misc & MISC_COMM_EXEC != 0,
            }
        }
        RECORD_FORK | RECORD_EXIT => {
            let (pid, ppid) = c.u32x2("pid/ppid")?;
            let (tid, ptid) = c.u32x2("tid/ptid")?;
            let time = c.u64("time")?;
            if kind == RECORD_FORK {
                TaskRecord::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time,
                }
            } else {
                TaskRecord::Exit {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time,
                }
            }
        }
        RECORD_MMAP | RECORD_MMAP2 => {
            let (pid, tid) = c.u32x2("pid/tid")?;
            let addr = c.u64("mmap address")?;
            let len = c.u64("mmap length")?;
            let pgoff = c.u64("mmap offset")?;
            let (mut dev, mut ino, mut build_id) = ((0, 0), 0, &[][..]);
            if kind == RECORD_MMAP2 {
                if misc & MISC_MMAP_BUILD_ID != 0 {
                    let u = c.take(24, "mmap2 build id")?;
                    build_id = &u[4..4 + (u[0] as usize).min(20)];
                } else {
                    dev = c.u32x2("mmap2 device")?;
                    ino = c.u64("mmap2 inode")?;
                    c.u64("mmap2 inode generation")?;
                }
                c.u32x2("mmap2 prot/flags")?;
            }
            let rest = c.take(body.len() - c.pos, "mmap file name")?;
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            TaskRecord::Mmap {
                pid,
                tid,
                addr,
                len,
                pgoff,
                dev,
                ino,
                build_id,
                filename: &rest[..end],
            }
        }
        RECORD_LOST => TaskRecord::Lost {
            id: c.u64("id")?,
            lost: c.u64("lost")?,
        },
        _ => TaskRecord::LostSamples {
            lost: c.u64("lost")?,
        },
    };
    Ok(Some((r, sid)))
}

/// Where an MMAP2 body's device, inode and generation (or its build id) start: after pid,
/// tid, addr, len and pgoff.
pub const MMAP2_ID_AT: usize = 32;
/// Where an MMAP2 body's file name starts: after the 24 bytes of device or build id, and
/// prot and flags.
pub const MMAP2_NAME_AT: usize = MMAP2_ID_AT + 24 + 8;

/// The file name of an MMAP2 body, up to its NUL (`None` without one).
pub fn mmap2_name(body: &[u8]) -> Option<&[u8]> {
    let n = body.get(MMAP2_NAME_AT..)?;
    Some(&n[..n.iter().position(|&b| b == 0)?])
}

/// Writes `build_id` (at most 20 bytes) over the device, inode and generation of the MMAP2
/// body `body`, in the layout the kernel uses with `PERF_RECORD_MISC_MMAP_BUILD_ID`: a
/// length byte, three reserved bytes, 20 bytes of id. The caller sets that `misc` bit.
/// `false` when the body is too short.
pub fn put_mmap2_build_id(body: &mut [u8], build_id: &[u8]) -> bool {
    let Some(slot) = body.get_mut(MMAP2_ID_AT..MMAP2_ID_AT + 24) else {
        return false;
    };
    let n = build_id.len().min(20);
    slot.fill(0);
    slot[0] = n as u8;
    slot[4..4 + n].copy_from_slice(&build_id[..n]);
    true
}

/// Where an MMAP body's file name starts: after pid, tid, addr, len and pgoff.
pub const MMAP_NAME_AT: usize = 32;

/// The file name of an MMAP (`kind` [`RECORD_MMAP`]) or MMAP2 body: the bytes up to its NUL,
/// or to the end of the body without one; empty when the body is too short.
pub fn mapping_name(kind: u32, body: &[u8]) -> &[u8] {
    let at = if kind == RECORD_MMAP {
        MMAP_NAME_AT
    } else {
        MMAP2_NAME_AT
    };
    let name = body.get(at..).unwrap_or_default();
    &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())]
}

/// The records a LOST (`{ u64 id; u64 lost; }`) or LOST_SAMPLES (`{ u64 lost; }`) body
/// reports lost; `None` for other records or a short body.
#[inline]
pub fn lost_count(kind: u32, body: &[u8], order: ByteOrder) -> Option<u64> {
    match kind {
        RECORD_LOST => order.u64_at(body, 8),
        RECORD_LOST_SAMPLES => order.u64_at(body, 0),
        _ => None,
    }
}

/// The id and path of a CGROUP body (`{ u64 id; char path[]; }`, the path NUL-terminated
/// and padded, then the trailer); `None` when the body is too short or the path has no NUL.
pub fn parse_cgroup(body: &[u8], order: ByteOrder) -> Option<(u64, &[u8])> {
    let id = order.u64_at(body, 0)?;
    let rest = body.get(8..)?;
    Some((id, &rest[..rest.iter().position(|&b| b == 0)?]))
}
