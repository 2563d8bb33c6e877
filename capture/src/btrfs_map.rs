//! `ioblame-capture btrfs-map`: the btrfs filesystems' chunk maps saved on their own, for a
//! recording made without them (stock `perf record`, whose perf.data cannot hold them).
//!
//! The file is an ioblame trace file with no events: the header (host name, kernel, boot),
//! the host's block devices and mounts, and the BTRFS table the recorder writes
//! ([`crate::btrfs::BtrfsWatch`], the same reading). The analyzer takes it with a perf.data
//! recording (`--btrfs-map`, or found beside it as `PERF.DATA.btrfs`) and converts the two
//! into one trace (`ioblame_perfdata::PerfDataOptions::btrfs_map`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use ioblame_format::{FileWriter, Metadata};

use crate::{btrfs, host, snapshot};

/// `ioblame-capture btrfs-map`'s arguments.
#[derive(Args, Debug)]
pub struct BtrfsMapArgs {
    /// The file to write (replaced if it exists).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

/// Writes the map of every btrfs filesystem mounted now whose chunk tree was read,
/// replacing `--output` (exit status 0), or refuses when there is none (an error).
pub fn run(a: &BtrfsMapArgs) -> Result<u8> {
    let (watch, problems) = btrfs::BtrfsWatch::start();
    for p in &problems {
        eprintln!("ioblame-capture: warning: {p}");
    }
    if watch.filesystems().is_empty() {
        bail!("no btrfs filesystem is mounted here (or none could be asked: see the warnings)");
    }
    // A filesystem without chunks would place nothing and hide that its writes are not
    // placed (the analysis says so of a filesystem the map does not hold).
    let (fs, without): (Vec<_>, Vec<_>) = watch
        .filesystems()
        .iter()
        .cloned()
        .partition(|f| !f.chunks.is_empty());
    for f in &without {
        eprintln!(
            "ioblame-capture: warning: btrfs {}:{} ({}) left out: its chunk map could not be read",
            f.major, f.minor, f.bdi
        );
    }
    if fs.is_empty() {
        bail!(
            "no btrfs chunk map could be read (see the warnings; the chunk tree is read with \
             BTRFS_IOC_TREE_SEARCH, which needs root: CAP_SYS_ADMIN)"
        );
    }
    let mut info = vec![("btrfs_map".to_string(), "yes".to_string())];
    info.extend(snapshot::boot_id().map(|id| ("boot_id".to_string(), id)));
    let meta = Metadata {
        block_devices: host::block_devices(),
        mounts: snapshot::mounts(),
        btrfs: fs.clone(),
        capture_info: info,
        ..Default::default()
    };
    let header = snapshot::header(None, snapshot::page_size() as u32, 0);
    // Written beside, then renamed over `--output`: a map taken again after the next
    // recording replaces the last one, and a reader never sees half a file.
    let mut tmp = a.output.clone().into_os_string();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let written = FileWriter::create(&tmp, &header, &meta).and_then(|w| w.finish());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow::Error::from(e).context(format!("writing {}", a.output.display())));
    }
    std::fs::rename(&tmp, &a.output).with_context(|| {
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}", a.output.display())
    })?;
    for f in &fs {
        let mount = meta
            .mounts
            .iter()
            .find(|m| (m.major, m.minor) == (f.major, f.minor))
            .map(|m| m.mount_point.as_str())
            .unwrap_or("?");
        eprintln!(
            "ioblame-capture: btrfs at {mount} ({}:{}, {}): {} device(s), {} chunk(s)",
            f.major,
            f.minor,
            f.bdi,
            f.devices.len(),
            f.chunks.len()
        );
    }
    eprintln!(
        "ioblame-capture: wrote {} (analyse a perf.data recording of this boot with \
         --btrfs-map {0}, or name it PERF.DATA.btrfs beside it)",
        a.output.display()
    );
    Ok(0)
}
