//! The trace created: the output directory, the header, the metadata (events, kernel
//! symbols, devices, mounts, tasks, cgroups, stacked devices, btrfs filesystems, capture
//! info) and the FILES table of the start, in the first ring file.

use anyhow::{Context, Result};
use ioblame_format::{
    EventDesc, Metadata, RingOptions, RingWriter, EVENT_CALLCHAIN, EVENT_STACK_SAMPLE,
    EVENT_TASK_RECORDS,
};
use ioblame_tracepoints::Tracepoint;

use super::args::{human, ring_options, size_arg_up, PathsMode, RecordArgs};
use super::naming::FilesWalk;
use super::open::{Opened, Plan};
use super::writer::io_message;
use crate::perf::EventSpec;
use crate::{btrfs, cgroups, layers, paths, snapshot};

/// What the trace was created with that the capture adds to later.
pub(super) struct Facts {
    /// The CAPTURE_INFO pairs (the command's pid is added once it started).
    pub(super) info: Vec<(String, String)>,
    /// The cgroups at start; `None` when cgroups are not recorded.
    pub(super) cgroups: Option<Vec<ioblame_format::Cgroup>>,
    /// The stacked devices at start, looked at again while recording.
    pub(super) layers: layers::LayerWatch,
    /// The btrfs filesystems at start, looked at again while recording.
    pub(super) btrfs: btrfs::BtrfsWatch,
}

/// Creates the output directory and the trace in it: the header, the metadata and the FILES
/// table taken before recording starts (so that the walk's own reads are not recorded).
/// Returns the writer, the walk to repeat
/// when recording ends (none with `--no-paths`) and the facts written.
pub(super) fn create_trace<'a>(
    a: &RecordArgs,
    plan: &'a Plan,
    opened: &Opened,
    page: usize,
    btrfs_watch: btrfs::BtrfsWatch,
) -> Result<(RingWriter, Option<FilesWalk<'a>>, Facts)> {
    let created = !a.output.exists();
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating output directory {}", a.output.display()))?;
    let out_abs = std::fs::canonicalize(&a.output).unwrap_or_else(|_| a.output.clone());
    let output_dev = snapshot::dev_of(&out_abs)?;
    let descs: Vec<EventDesc> = plan
        .tps
        .iter()
        .zip(&opened.specs)
        .zip(opened.filters.iter().zip(opened.ids.iter().cloned()))
        .map(|((t, s), (f, ids))| event_desc(t, s, f, ids))
        .collect();
    let (kallsyms, kwarn) = snapshot::kallsyms();
    if let Some(w) = kwarn {
        eprintln!("ioblame-capture: warning: {w}");
    }
    let devices_info = plan
        .fdevs
        .iter()
        .map(|d| format!("{}:{}", d.major, d.minor))
        .collect::<Vec<_>>()
        .join(",");
    let mounts = snapshot::mounts();
    let files = FilesWalk {
        mounts: mounts.clone(),
        devs: a
            .devices
            .as_ref()
            .map(|_| plan.fdevs.iter().map(|d| (d.major, d.minor)).collect()),
        block_devices: &plan.block_devices,
        limits: paths::Limits {
            max_entries: a.paths_max_entries,
            budget: a.paths_time,
        },
    };
    let walk = a.paths_mode() == PathsMode::Walk;
    let start_files = walk.then(|| files.walk(0));
    let start_cgroups = opened
        .specs
        .iter()
        .any(|s| s.cgroup)
        .then(cgroups::snapshot);
    let layer_watch = layers::LayerWatch::start();
    let header = snapshot::header(kallsyms.as_ref(), page as u32, opened.possible);
    let meta = Metadata {
        events: descs,
        kallsyms,
        block_devices: plan.block_devices.clone(),
        mounts,
        tasks: snapshot::tasks(),
        cgroups: start_cgroups.clone().unwrap_or_default(),
        loops: layer_watch.loops().to_vec(),
        dm_targets: layer_watch.dm_targets().to_vec(),
        user_maps: Vec::new(),
        btrfs: btrfs_watch.filesystems().to_vec(),
        capture_info: vec![
            ("command".into(), shell_join(&a.command)),
            ("devices".into(), devices_info),
            ("event_set".into(), a.events.clone()),
            ("output_dir".into(), out_abs.display().to_string()),
            ("output_dev".into(), output_dev),
            ("stack_depth".into(), a.stack_depth.to_string()),
            ("stacks".into(), a.stacks.name()),
            ("buffer_size".into(), opened.data_bytes.to_string()),
        ],
    };
    let mut meta = meta;
    if start_cgroups.is_some() {
        if let Some(mount) = cgroups::root_without_controllers() {
            eprintln!(
                "ioblame-capture: warning: the cgroup2 hierarchy at {} enables no controller at its \
                 root (cgroup.subtree_control is empty): the kernel then reports every task in \
                 the root cgroup, and acts will all be in / (enable one, as systemd does: echo \
                 +pids > {}/cgroup.subtree_control)",
                mount.display(),
                mount.display()
            );
            meta.capture_info
                .push(("cgroup_root_controllers".into(), "none".into()));
        }
    }
    if let Some(mode) = a.user_stacks {
        let build_id = opened.specs.iter().any(|s| s.mmap_build_id);
        meta.capture_info.extend([
            ("user_stacks".into(), mode.name()),
            (
                "mmap_build_id".into(),
                if build_id { "yes" } else { "no" }.into(),
            ),
        ]);
        // Which boot recorded: an analysis on this same boot may read what the trace lacks
        // from here (a JIT's perf map), and no other may.
        if let Some(id) = snapshot::boot_id() {
            meta.capture_info.push(("boot_id".into(), id));
        }
    }
    let opts = ring_options(a);
    let facts = Facts {
        info: meta.capture_info.clone(),
        cgroups: start_cgroups,
        layers: layer_watch,
        btrfs: btrfs_watch,
    };
    let writer = RingWriter::create_fitted(&a.output, header, meta, start_files.as_ref(), opts);
    if writer.is_err() && created {
        // Refused before any file was made: leave no empty directory behind.
        let _ = std::fs::remove_dir(&a.output);
    }
    // (`--file-size 0` with a cap, the other refusal, is `check_args`'.)
    let writer = writer.map_err(|e| match e {
        ioblame_format::Error::RingTooSmall {
            file_start,
            file_size,
            max_size,
        } => anyhow::anyhow!(
            "--max-size {} cannot hold two ring files of {} and their last blocks (each \
             begins with {} of metadata, the kernel's symbols and any walk's file names, so \
             that it reads alone): the ring would keep only the file being written; use \
             --max-size {} or more, or 0 for no cap",
            human(max_size),
            human(file_size),
            human(file_start),
            size_arg_up(RingOptions::least_max_size(file_size, file_start))
        ),
        e => anyhow::anyhow!(io_message(&e)),
    })?;
    let fitted = writer.options();
    if a.file_size.is_some_and(|f| f != fitted.file_size) {
        eprintln!(
            "ioblame-capture: --file-size {} is less than twice the {} of metadata every ring \
             file begins with; files roll at {} ({} bytes)",
            human(opts.file_size),
            human(fitted.file_size / 2),
            human(fitted.file_size),
            fitted.file_size
        );
    }
    Ok((writer, walk.then_some(files), facts))
}

fn event_desc(t: &Tracepoint, s: &EventSpec, filter: &str, ids: Vec<u64>) -> EventDesc {
    EventDesc {
        name: t.name.clone(),
        tracefs_id: t.id as u32,
        sample_type: s.sample_type(),
        read_format: 0,
        flags: if s.callchain { EVENT_CALLCHAIN } else { 0 }
            | if s.task { EVENT_TASK_RECORDS } else { 0 }
            | if s.sample_period > 1 {
                EVENT_STACK_SAMPLE
            } else {
                0
            },
        max_stack: if s.callchain { s.max_stack } else { 0 },
        filter: filter.to_string(),
        format: t.format.clone(),
        ids,
        regs_user: s.regs_user(),
        stack_user: if s.copies_stack() { s.stack_user } else { 0 },
    }
}

fn shell_join(v: &[String]) -> String {
    v.iter()
        .map(|s| {
            if !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&c))
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
