//! The block layers under the recorded devices: loop devices over files (LOOPS block) and
//! one-to-one device-mapper targets (DM_TARGETS block), format 1.7.

use super::host::kernel_dev;
use crate::codec::{Dec, Enc, INITIAL_CAPACITY};
use crate::error::DecodeError;

/// A device-mapper target mapping sectors `[start, start + length)` of a dm device one to
/// one onto a lower device from `lower_offset` on (DM_TARGETS block, format 1.7): sector `S`
/// of the dm device is sector `S - start + lower_offset` of the lower device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DmTarget {
    /// The dm device's major number.
    pub major: u32,
    /// The dm device's minor number.
    pub minor: u32,
    /// First sector of the dm device the target covers.
    pub start: u64,
    /// Sectors it covers.
    pub length: u64,
    /// The target type, `linear` or `crypt`.
    pub target: String,
    /// The lower device's major number.
    pub lower_major: u32,
    /// The lower device's minor number.
    pub lower_minor: u32,
    /// The lower device's sector of the target's first sector.
    pub lower_offset: u64,
    /// From when the mapping holds (trace clock, ns); 0: before the recording began.
    pub since_ns: u64,
}

impl DmTarget {
    /// The dm device in the kernel encoding.
    pub fn kernel_dev(&self) -> u32 {
        kernel_dev(self.major, self.minor)
    }
    /// The lower device in the kernel encoding.
    pub fn lower_kernel_dev(&self) -> u32 {
        kernel_dev(self.lower_major, self.lower_minor)
    }
    /// Whether `other` is the same target, whenever it was found.
    pub fn same_target(&self, other: &DmTarget) -> bool {
        DmTarget {
            since_ns: 0,
            ..self.clone()
        } == DmTarget {
            since_ns: 0,
            ..other.clone()
        }
    }
}

/// A loop device backed by a file (LOOPS block, format 1.7): sector `S` of the loop device
/// is byte `S * 512 + offset` of the backing file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoopDevice {
    /// The loop device's major number.
    pub major: u32,
    /// The loop device's minor number.
    pub minor: u32,
    /// The device of the filesystem holding the backing file (its `st_dev`): major.
    pub backing_major: u32,
    /// The same device's minor.
    pub backing_minor: u32,
    /// The backing file's inode number.
    pub backing_ino: u64,
    /// Byte offset in the backing file of the loop device's sector 0 (`lo_offset`).
    pub offset: u64,
    /// The loop device's size limit in bytes, 0 for none (`lo_sizelimit`).
    pub size_limit: u64,
    /// Whether the loop device reads and writes its backing file with direct IO.
    pub direct_io: bool,
    /// From when the mapping holds (trace clock, ns): 0 when it was set up before the
    /// recording began.
    pub since_ns: u64,
    /// The backing file's path as the recording host's sysfs names it.
    pub backing_file: String,
}

impl LoopDevice {
    /// The loop device in the kernel encoding (`major << 20 | minor`).
    pub fn kernel_dev(&self) -> u32 {
        kernel_dev(self.major, self.minor)
    }
    /// The backing file's filesystem device in the kernel encoding.
    pub fn backing_kernel_dev(&self) -> u32 {
        kernel_dev(self.backing_major, self.backing_minor)
    }
    /// Whether `other` is the same mapping (the same loop device over the same file at the
    /// same offset), whenever it was found.
    pub fn same_mapping(&self, other: &LoopDevice) -> bool {
        let key = |l: &LoopDevice| {
            let (a, b, c) = (l.major, l.minor, l.backing_major);
            (a, b, c, l.backing_minor, l.backing_ino, l.offset)
        };
        key(self) == key(other)
    }
}

/// Merges one LOOPS list into `into` (one entry per loop device and mapping,
/// [`LoopDevice::same_mapping`]; sorted by device then time); returns whether `into` gained
/// one. `Trace::loops` merges a ring's files with it, a live follower each newer list.
pub fn merge_loops(into: &mut Vec<LoopDevice>, from: &[LoopDevice]) -> bool {
    merge_by(into, from, LoopDevice::same_mapping, |l| {
        (l.major, l.minor, 0, l.since_ns)
    })
}

/// Merges one DM_TARGETS list into `into` (one entry per target, [`DmTarget::same_target`];
/// sorted by device, start and time); returns whether `into` gained one. `Trace::dm_targets`
/// merges a ring's files with it, a live follower each newer list.
pub fn merge_dm_targets(into: &mut Vec<DmTarget>, from: &[DmTarget]) -> bool {
    merge_by(into, from, DmTarget::same_target, |t| {
        (t.major, t.minor, t.start, t.since_ns)
    })
}

/// Adds to `into` the entries of `from` it has no `same` one of, then sorts it by `key`
/// when it gained one; returns whether it did.
fn merge_by<T: Clone>(
    into: &mut Vec<T>,
    from: &[T],
    same: fn(&T, &T) -> bool,
    key: fn(&T) -> (u32, u32, u64, u64),
) -> bool {
    let mut changed = false;
    for t in from {
        if !into.iter().any(|x| same(x, t)) {
            into.push(t.clone());
            changed = true;
        }
    }
    if changed {
        into.sort_by_key(key);
    }
    changed
}

/// Most entries a LOOPS or DM_TARGETS block may hold (a host has a few hundred at most).
pub const MAX_LAYER_ENTRIES: usize = 1 << 16;

/// `LoopDevice::direct_io` in a LOOPS entry's flags.
const LOOP_DIRECT_IO: u32 = 1;

/// A LOOPS payload (format 1.7): a count, then each mapping as a length-prefixed entry (so
/// that newer minor versions can add trailing fields to an entry).
pub(crate) fn encode_loops(v: &[LoopDevice]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for l in v {
        let mut x = Enc::default();
        x.u32(l.major)
            .u32(l.minor)
            .u32(l.backing_major)
            .u32(l.backing_minor)
            .u64(l.backing_ino)
            .u64(l.offset)
            .u64(l.size_limit)
            .u64(l.since_ns)
            .u32(if l.direct_io { LOOP_DIRECT_IO } else { 0 })
            .str(&l.backing_file);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a LOOPS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_loops(b: &[u8]) -> Result<Vec<LoopDevice>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 48, "loop device count")?;
    if n > MAX_LAYER_ENTRIES {
        return Err(DecodeError::new(
            0,
            format!("{n} loop devices: more than {MAX_LAYER_ENTRIES}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("loop entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "loop entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<LoopDevice, DecodeError> {
            Ok(LoopDevice {
                major: x.u32("loop major")?,
                minor: x.u32("loop minor")?,
                backing_major: x.u32("backing major")?,
                backing_minor: x.u32("backing minor")?,
                backing_ino: x.u64("backing inode")?,
                offset: x.u64("loop offset")?,
                size_limit: x.u64("loop size limit")?,
                since_ns: x.u64("loop since")?,
                direct_io: x.u32("loop flags")? & LOOP_DIRECT_IO != 0,
                backing_file: x.str("backing file")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

/// A DM_TARGETS payload (format 1.7): a count, then each target as a length-prefixed entry.
pub(crate) fn encode_dm_targets(v: &[DmTarget]) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(v.len() as u32);
    for t in v {
        let mut x = Enc::default();
        x.u32(t.major)
            .u32(t.minor)
            .u64(t.start)
            .u64(t.length)
            .u32(t.lower_major)
            .u32(t.lower_minor)
            .u64(t.lower_offset)
            .u64(t.since_ns)
            .str(&t.target);
        e.u32(x.buf.len() as u32).bytes(&x.buf);
    }
    e.buf
}

/// Decodes a DM_TARGETS payload; bytes after the known fields of an entry are skipped.
pub(crate) fn decode_dm_targets(b: &[u8]) -> Result<Vec<DmTarget>, DecodeError> {
    let mut d = Dec::new(b);
    let n = d.count(4 + 52, "dm target count")?;
    if n > MAX_LAYER_ENTRIES {
        return Err(DecodeError::new(
            0,
            format!("{n} dm targets: more than {MAX_LAYER_ENTRIES}"),
        ));
    }
    let mut v = Vec::with_capacity(n.min(INITIAL_CAPACITY));
    for _ in 0..n {
        let len = d.u32("dm target entry length")? as usize;
        let at = d.pos();
        let entry = d.take(len, "dm target entry")?;
        let mut x = Dec::new(entry);
        let rel = |e: DecodeError| DecodeError::new(at + e.at, e.what);
        let mut one = || -> Result<DmTarget, DecodeError> {
            Ok(DmTarget {
                major: x.u32("dm major")?,
                minor: x.u32("dm minor")?,
                start: x.u64("dm target start")?,
                length: x.u64("dm target length")?,
                lower_major: x.u32("lower major")?,
                lower_minor: x.u32("lower minor")?,
                lower_offset: x.u64("lower offset")?,
                since_ns: x.u64("dm since")?,
                target: x.str("dm target type")?,
            })
        };
        v.push(one().map_err(rel)?);
    }
    Ok(v)
}

#[cfg(all(test, feature = "reader"))]
mod tests {
    use super::*;

    fn a_loop() -> LoopDevice {
        LoopDevice {
            major: 7,
            minor: 3,
            backing_major: 259,
            backing_minor: 2,
            backing_ino: 1234,
            offset: 1 << 20,
            size_limit: 0,
            direct_io: true,
            since_ns: 55,
            backing_file: "/data/disk.img".into(),
        }
    }

    fn a_target() -> DmTarget {
        DmTarget {
            major: 253,
            minor: 0,
            start: 0,
            length: 1 << 21,
            target: "crypt".into(),
            lower_major: 259,
            lower_minor: 3,
            lower_offset: 32768,
            since_ns: 0,
        }
    }

    #[test]
    fn newer_lists_merge_what_they_add() {
        // A follower's first list, then the recorder's next (the same mappings, seen again
        // from a later time, and a new one): only the new one is added, once.
        let mut loops = vec![a_loop()];
        let again = LoopDevice {
            since_ns: 99,
            ..a_loop()
        };
        assert!(!merge_loops(&mut loops, std::slice::from_ref(&again)));
        let other = LoopDevice {
            minor: 1,
            since_ns: 50,
            ..a_loop()
        };
        assert!(merge_loops(&mut loops, &[again, other.clone()]));
        assert_eq!(loops, vec![other, a_loop()]);
        let mut targets = vec![a_target()];
        assert!(!merge_dm_targets(&mut targets, &[a_target()]));
        let next = DmTarget {
            start: a_target().start + a_target().length,
            ..a_target()
        };
        assert!(merge_dm_targets(&mut targets, &[a_target(), next.clone()]));
        assert_eq!(targets, vec![a_target(), next]);
    }

    #[test]
    fn loops_and_dm_targets_round_trip() {
        let loops = vec![a_loop(), LoopDevice::default()];
        assert_eq!(decode_loops(&encode_loops(&loops)).unwrap(), loops);
        let targets = vec![a_target(), DmTarget::default()];
        assert_eq!(
            decode_dm_targets(&encode_dm_targets(&targets)).unwrap(),
            targets
        );
        assert_eq!(a_loop().kernel_dev(), (7 << 20) | 3);
        assert_eq!(a_loop().backing_kernel_dev(), (259 << 20) | 2);
        assert_eq!(a_target().lower_kernel_dev(), (259 << 20) | 3);
    }

    #[test]
    fn fields_of_newer_versions_after_an_entry_are_skipped() {
        let mut b = encode_loops(&[a_loop()]);
        let len = u32::from_le_bytes(b[4..8].try_into().unwrap());
        b[4..8].copy_from_slice(&(len + 4).to_le_bytes());
        b.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(decode_loops(&b).unwrap(), vec![a_loop()]);
        let mut b = encode_dm_targets(&[a_target()]);
        b.truncate(b.len() - 1);
        assert!(decode_dm_targets(&b).is_err());
    }

    #[test]
    fn the_same_mapping_or_target_found_again_later() {
        let later = LoopDevice {
            since_ns: 99,
            size_limit: 5,
            ..a_loop()
        };
        assert!(a_loop().same_mapping(&later));
        let elsewhere = LoopDevice {
            offset: 0,
            ..a_loop()
        };
        assert!(!a_loop().same_mapping(&elsewhere));
        let t = DmTarget {
            since_ns: 7,
            ..a_target()
        };
        assert!(a_target().same_target(&t));
        let t = DmTarget {
            lower_offset: 0,
            ..a_target()
        };
        assert!(!a_target().same_target(&t));
    }
}
