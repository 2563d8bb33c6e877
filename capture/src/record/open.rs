//! Opening the events: the plan of what to record on this kernel, every event opened
//! (disabled) on every online CPU with its filter, each CPU's events writing into one ring,
//! the kernel probed for what it refuses; then enabled.

use std::time::Instant;

use anyhow::{Context, Result};
use ioblame_format::{BlockDevice, ChunkBuilder, RingWriter};
use ioblame_tracepoints::{self as events, FilterDev, Tracepoint};

use super::args::{max_stack_sys, RecordArgs, UserStackMode};
use super::writer::io_message;
use crate::perf::{Event, EventSpec, Ring};
use crate::{host, snapshot};

/// User frames a stack event may carry beyond `--stack-depth` kernel frames
/// (`--user-stacks`).
const USER_STACK_FRAMES: u16 = 64;

pub(super) struct Cpu {
    pub(super) cpu: u32,
    pub(super) events: Vec<Event>,
    pub(super) ring: Ring,
    pub(super) builder: ChunkBuilder,
}

/// What to record: the events of `--events` found on this kernel and the devices of
/// `--devices`.
pub(super) struct Plan {
    /// The events, as this kernel has them; with `--stacks sampled:N`, then a second
    /// event for each dirtying one (`stack_samples`).
    pub(super) tps: Vec<Tracepoint>,
    /// Parallel to `tps`: the sample period of an event that samples the stacks of the
    /// event of the same name, `None` for the others.
    pub(super) stack_samples: Vec<Option<u32>>,
    /// The block devices of this host.
    pub(super) block_devices: Vec<BlockDevice>,
    /// The devices to filter on (none: every device), the btrfs filesystems on them included.
    pub(super) fdevs: Vec<FilterDev>,
}

/// Finds the events in tracefs (with a note for each missing or renamed one) and resolves
/// `--devices` (with the btrfs filesystems on them: hence the btrfs watch, started here).
pub(super) fn plan(a: &RecordArgs) -> Result<(Plan, crate::btrfs::BtrfsWatch)> {
    let tfs = host::tracefs()?;
    let names = events::set_names(&a.events)?;
    let is_set = matches!(a.events.as_str(), "default" | "minimal" | "full");
    let (tps, notes) = events::resolve(&tfs, &names, !is_set)?;
    for n in &notes {
        eprintln!("ioblame-capture: note: {n}");
    }
    let block_devices = host::block_devices();
    let mut fdevs: Vec<FilterDev> = match &a.devices {
        Some(s) => events::resolve_devices(s, &block_devices)?,
        None => Vec::new(),
    };
    let (btrfs, btrfs_problems) = crate::btrfs::BtrfsWatch::start();
    for p in btrfs_problems {
        eprintln!("ioblame-capture: warning: {p}");
    }
    if !fdevs.is_empty() {
        fdevs.extend(crate::btrfs::filter_devs(btrfs.filesystems(), &fdevs));
    }
    let mut tps = tps;
    let mut stack_samples = vec![None; tps.len()];
    let sampled: Vec<(Tracepoint, u32)> = tps
        .iter()
        .filter_map(|t| Some((t.clone(), a.stacks.sampled(&t.name)?)))
        .collect();
    for (t, n) in sampled {
        tps.push(t);
        stack_samples.push(Some(n));
    }
    Ok((
        Plan {
            tps,
            stack_samples,
            block_devices,
            fdevs,
        },
        btrfs,
    ))
}

/// The online CPUs, and how many CPUs the kernel may number (the header's `cpu_count`).
fn cpus() -> Result<(Vec<u32>, u32)> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("reading /sys/devices/system/cpu/online")?;
    let cpus = snapshot::parse_cpulist(&online).context("parsing the online CPU list")?;
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| snapshot::parse_cpulist(&s).ok())
        .and_then(|v| v.into_iter().max())
        .map_or(0, |m| m + 1)
        .max(cpus.iter().max().map_or(1, |m| m + 1));
    Ok((cpus, possible))
}

/// The plan's events, open (disabled) on every online CPU.
pub(super) struct Opened {
    /// Each CPU's events, the first one owning the ring the others write into.
    pub(super) per_cpu: Vec<Cpu>,
    /// How each event was opened, in the plan's order.
    pub(super) specs: Vec<EventSpec>,
    /// Each event's in-kernel filter (empty: none).
    pub(super) filters: Vec<String>,
    /// Each event's sample ids, one per CPU.
    pub(super) ids: Vec<Vec<u64>>,
    /// How many CPUs the kernel may number.
    pub(super) possible: u32,
    /// The size of each CPU's ring data area.
    pub(super) data_bytes: usize,
}

/// Opens every event of the plan on every online CPU, disabled, with its filter, each CPU's
/// events writing into one ring.
pub(super) fn open_events(a: &RecordArgs, plan: &Plan, page: usize) -> Result<Opened> {
    let (cpus, possible) = cpus()?;
    let tps = &plan.tps;
    let data_pages = (a.buffer_size as usize).div_ceil(page).next_power_of_two();
    let data_bytes = data_pages * page;
    let watermark = (data_bytes / 4).min(4 << 20) as u32;
    let filters: Vec<String> = tps
        .iter()
        .map(|t| events::plan_filter(t, &plan.fdevs, tps))
        .collect();
    // With user stacks, the user frames come after the kernel's, within the same limit.
    let user = a.user_stacks.is_some();
    // With a stack copy the kernel does not walk the user frames (perf --call-graph dwarf).
    let stack_user = a.user_stacks.map_or(0, |m| m.copy_size());
    let max_stack = if a.user_stacks == Some(UserStackMode::Fp) {
        (a.stack_depth.saturating_add(USER_STACK_FRAMES)).min(max_stack_sys())
    } else {
        a.stack_depth
    };
    let specs: Vec<EventSpec> = tps
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let callchain =
                plan.stack_samples[i].is_some() || (t.callchain && a.stacks.callchain(&t.name));
            EventSpec {
                config: t.id,
                callchain,
                user_callchain: callchain && a.user_stacks == Some(UserStackMode::Fp),
                sample_period: plan.stack_samples[i].unwrap_or(1).into(),
                cgroup: t.callchain && !a.no_cgroups,
                max_stack,
                task: i == 0,
                mmap: i == 0 && user,
                mmap_build_id: i == 0 && user,
                cgroup_records: i == 0 && !a.no_cgroups,
                watermark,
                stack_user,
            }
        })
        .collect();
    let specs = with_cgroups_if_supported(specs, &cpus, tps);
    let specs = with_mmap_build_id_if_supported(specs, &cpus, tps);
    if stack_user > 0 && crate::perf::UNWIND_REGS == 0 {
        anyhow::bail!(
            "--user-stacks dwarf: this recorder does not know the registers that unwind a \
             stack on {} (x86_64 and aarch64 only): use --user-stacks fp",
            std::env::consts::ARCH
        );
    }
    if user && !specs.iter().any(|s| s.user_callchain || s.copies_stack()) {
        eprintln!(
            "ioblame-capture: warning: --user-stacks: no recorded event carries a stack \
             (--stacks {}): no user stack will be recorded",
            a.stacks.name()
        );
    }

    let mut per_cpu: Vec<Cpu> = Vec::new();
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); tps.len()];
    for &cpu in &cpus {
        let mut evs = Vec::with_capacity(tps.len());
        for (i, (t, spec)) in tps.iter().zip(&specs).enumerate() {
            let ev = Event::open(spec, cpu, &t.name)?;
            if !filters[i].is_empty() {
                ev.set_filter(&filters[i], &t.name)?;
            }
            ids[i].push(ev.id()?);
            evs.push(ev);
        }
        let ring = Ring::map(&evs[0], data_pages, page)?;
        for ev in &evs[1..] {
            ev.set_output(&evs[0])?;
        }
        per_cpu.push(Cpu {
            cpu,
            events: evs,
            ring,
            builder: ChunkBuilder::new(cpu),
        });
    }
    Ok(Opened {
        per_cpu,
        specs,
        filters,
        ids,
        possible,
        data_bytes,
    })
}

/// `specs`, without `PERF_SAMPLE_CGROUP` when this kernel refuses it (before 5.7, or
/// without cgroup2): a probe opens the first event asking for it on the first CPU. A
/// warning says what is lost.
fn with_cgroups_if_supported(
    mut specs: Vec<EventSpec>,
    cpus: &[u32],
    tps: &[Tracepoint],
) -> Vec<EventSpec> {
    let Some(i) = specs.iter().position(|s| s.cgroup) else {
        return specs;
    };
    let probe = EventSpec {
        task: false,
        ..specs[i]
    };
    if let Err(e) = Event::open(&probe, cpus.first().copied().unwrap_or(0), &tps[i].name) {
        eprintln!(
            "ioblame-capture: warning: this kernel does not record the cgroup of samples \
             (PERF_SAMPLE_CGROUP, Linux 5.7): acts will have no cgroup ({e:#})"
        );
        for s in &mut specs {
            s.cgroup = false;
            s.cgroup_records = false;
        }
    }
    specs
}

/// `specs`, without the build id in the MMAP2 records when this kernel refuses it (before
/// 5.12): a probe opens the event of the task records on the first CPU. The recorder then
/// reads the build ids of the files itself.
fn with_mmap_build_id_if_supported(
    mut specs: Vec<EventSpec>,
    cpus: &[u32],
    tps: &[Tracepoint],
) -> Vec<EventSpec> {
    let Some(i) = specs.iter().position(|s| s.mmap_build_id) else {
        return specs;
    };
    let cpu = cpus.first().copied().unwrap_or(0);
    if let Err(e) = Event::open(&specs[i], cpu, &tps[i].name) {
        let without = EventSpec {
            mmap_build_id: false,
            ..specs[i]
        };
        if Event::open(&without, cpu, &tps[i].name).is_ok() {
            eprintln!(
                "ioblame-capture: note: this kernel does not put build ids in MMAP2 records \
                 (Linux 5.12): the recorder reads them from the files ({e:#})"
            );
            for s in &mut specs {
                s.mmap_build_id = false;
            }
        }
    }
    specs
}

/// Enables the events, then lists the tasks again: the first file names every task alive
/// before or after the events were enabled, so none forked (or exited) in between is missed.
/// The second list is a later TASKS block, which wins (docs/format.md). Returns when
/// recording started.
pub(super) fn enable(per_cpu: &[Cpu], writer: &mut RingWriter) -> Result<Instant> {
    let tasks_before = snapshot::tasks();
    for c in per_cpu {
        for ev in &c.events {
            ev.enable()?;
        }
    }
    let started = Instant::now();
    writer
        .write_tasks(&snapshot::merge_tasks(tasks_before, snapshot::tasks()))
        .map_err(|e| anyhow::anyhow!(io_message(&e)))?;
    Ok(started)
}
