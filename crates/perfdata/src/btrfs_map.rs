//! The btrfs chunk maps a perf.data recording lacks, taken from the file `ioblame-capture
//! btrfs-map` wrote on the recording host (an ioblame trace file without events; any ioblame
//! trace's BTRFS table serves as well).
//!
//! btrfs writes at logical addresses that only its chunk map places on the disk, and no event
//! gives the map; with it, the converted trace carries the BTRFS table a capture would, and
//! the analysis is the same (docs/perf-data.md, "btrfs").

use std::path::Path;

use ioblame_format::{BlockDevice, Metadata, Trace};

use crate::parser::Host;
use crate::PerfDataError;

/// Adds the btrfs filesystems of the map file `path` to `meta` (the converted recording's,
/// `recording`, whose host is `host`), with the block devices their devices are and lie on;
/// a note says what was taken, and another when the map is older than the recording (taken
/// before it, or left from an earlier one: `perf record` renames an old perf.data, not its
/// map). A map of another host, or a file that is no ioblame trace, is an error.
pub(crate) fn add_btrfs_map(
    path: &Path,
    recording: &Path,
    host: &Host,
    meta: &mut Metadata,
    notes: &mut Vec<String>,
) -> Result<(), PerfDataError> {
    let map = Trace::open(path).map_err(|source| PerfDataError::BtrfsMap {
        path: path.to_path_buf(),
        source,
    })?;
    let h = map.header();
    let other = |a: &str, b: &str| !a.is_empty() && !b.is_empty() && a != b;
    if other(&h.hostname, &host.hostname) || other(&h.kernel_release, &host.os_release) {
        return Err(PerfDataError::BtrfsMapOtherHost {
            path: path.to_path_buf(),
            map: format!("{} ({})", h.hostname, h.kernel_release),
            recording: format!("{} ({})", host.hostname, host.os_release),
        });
    }
    for p in map.problems() {
        notes.push(format!("btrfs map {}: {p}", path.display()));
    }
    let fs = map.btrfs();
    let chunks: usize = fs.iter().map(|f| f.chunks.len()).sum();
    meta.block_devices = devices_of(&fs, &map.metadata().block_devices);
    notes.push(format!(
        "btrfs: the chunk maps of {} filesystem(s) ({chunks} chunks) from {}: btrfs's writes \
         are placed on their disks as in a capture (a chunk allocated after the map was \
         taken, or removed before, is not in it)",
        fs.len(),
        path.display()
    ));
    meta.btrfs = fs;
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(m), Some(r)) = (modified(path), modified(recording)) {
        if m < r {
            notes.push(format!(
                "btrfs map {} is older than the recording: taken before it (a chunk allocated \
                 while recording is not in it) or left from an earlier one (the filesystems' \
                 devices and bdis are then another mount's); take it after perf record",
                path.display()
            ));
        }
    }
    Ok(())
}

/// The block devices of `all` that a device of `fs` is, or lies on (a partition's disk:
/// the chunk maps' device bytes are placed on the disk the bios name).
fn devices_of(fs: &[ioblame_format::BtrfsFs], all: &[BlockDevice]) -> Vec<BlockDevice> {
    let mut v: Vec<BlockDevice> = Vec::new();
    let mut add = |b: &BlockDevice| {
        if !v.contains(b) {
            v.push(b.clone());
        }
    };
    for d in fs.iter().flat_map(|f| &f.devices) {
        let Some(b) = all
            .iter()
            .find(|b| (b.major, b.minor) == (d.major, d.minor))
        else {
            continue;
        };
        add(b);
        if let Some(disk) = all
            .iter()
            .find(|x| !b.parent.is_empty() && x.name == b.parent)
        {
            add(disk);
        }
    }
    v
}
