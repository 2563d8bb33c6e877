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
    /// The file to write (it must not exist).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
}

/// Writes the map of every btrfs filesystem mounted now (exit status 0), or refuses when
/// there is none or no chunk tree could be read (an error).
pub fn run(a: &BtrfsMapArgs) -> Result<u8> {
    let (watch, problems) = btrfs::BtrfsWatch::start();
    for p in &problems {
        eprintln!("ioblame-capture: warning: {p}");
    }
    let fs = watch.filesystems();
    if fs.is_empty() {
        bail!("no btrfs filesystem is mounted here (or none could be asked: see the warnings)");
    }
    if fs.iter().all(|f| f.chunks.is_empty()) {
        bail!(
            "no btrfs chunk map could be read (see the warnings; the chunk tree is read with \
             BTRFS_IOC_TREE_SEARCH, which needs root: CAP_SYS_ADMIN)"
        );
    }
    let mut info = vec![("btrfs_map".to_string(), "yes".to_string())];
    if let Ok(id) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        info.push(("boot_id".into(), id.trim().to_string()));
    }
    let meta = Metadata {
        block_devices: host::block_devices(),
        mounts: snapshot::mounts(),
        btrfs: fs.to_vec(),
        capture_info: info,
        ..Default::default()
    };
    let header = snapshot::header(None, page_size(), 0);
    let w = FileWriter::create(&a.output, &header, &meta)
        .with_context(|| format!("writing {}", a.output.display()))?;
    w.finish()
        .with_context(|| format!("writing {}", a.output.display()))?;
    for f in fs {
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

/// The page size.
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u32
    } else {
        4096
    }
}
