//! `ioblame-capture record`: the run sequence. Each step lives in a module of its own:
//! the arguments (`args`), opening the events (`open`), the trace and its metadata
//! (`trace`), the writer thread (`writer`), naming the files (`naming`), the drain loop
//! (`drain`), the command run while recording (`command`), the signals that stop it
//! (`signals`), and stopping (`stop`).

mod args;
mod command;
mod drain;
mod naming;
mod open;
mod signals;
mod stop;
mod trace;
mod writer;

use anyhow::{bail, Result};

use args::{check_args, PathsMode};
use command::{exit_code, start_command, wait_command};
use drain::{record_loop, Counts, Recorder, StatusLine};
use naming::{naming_mounts, start_naming};
use open::{enable, open_events, plan};
use signals::install_signals;
use stop::{names_by_id, stop, summary};
use trace::create_trace;
use writer::ToWriter;

pub use args::RecordArgs;

/// Runs `record`; returns the process exit code.
pub fn run(a: RecordArgs) -> Result<u8> {
    // First of all: a SIGINT or SIGTERM during the start (opening the events, reading the
    // kernel's symbols, the FILES walk: seconds on a busy host) stops the recording as soon
    // as it starts, with its files closed, instead of killing the process mid-way.
    install_signals();
    let page = check_args(&a)?;
    let (plan, btrfs) = plan(&a)?;
    let opened = open_events(&a, &plan, page)?;
    let (mut writer, files, facts) = create_trace(&a, &plan, &opened, page, btrfs)?;
    let naming_mounts =
        (a.paths_mode() == PathsMode::Touched).then(|| naming_mounts(&plan, a.devices.is_some()));
    let counts = Counts::new(&a, &plan, &opened, naming_mounts.as_deref());
    let started = enable(&opened.per_cpu, &mut writer)?;
    // From here on every event is recorded: a workload started separately (not as the
    // command) should wait for this line.
    eprintln!(
        "ioblame-capture: recording {} tracepoints on {} CPUs into {}",
        opened.specs.len(),
        opened.per_cpu.len(),
        a.output.display()
    );

    let (link, wt) = writer::start(writer, a.level)?;

    let (mut child, spawn_err) = match start_command(&a.command) {
        Ok(c) => (c, None),
        Err(e) => (None, Some(e)),
    };
    let mut info = facts.info.clone();
    if let Some(c) = &child {
        // The workload scope of the analyzer is this process and its descendants.
        info.push(("command_pid".into(), c.id().to_string()));
        link.send(ToWriter::Info(info.clone()));
    }
    let naming = match naming_mounts {
        Some(ms) => Some(start_naming(ms, &link)?),
        None => None,
    };
    let mut status = StatusLine::new();
    let mut rec = Recorder {
        per_cpu: opened.per_cpu,
        counts,
        info,
        names_tx: naming.as_ref().map(|n| n.tx.clone()),
        link,
        layers: facts.layers,
        btrfs: facts.btrfs,
    };
    let (stop_reason, child_status) = match spawn_err {
        Some(_) => ("the command could not start".to_string(), None),
        None => record_loop(
            &mut rec,
            child.as_mut(),
            a.duration,
            started,
            a.flush_interval,
            &mut status,
        ),
    };
    status.clear();

    let write_failed = rec.failed();
    let stopped = stop(
        rec,
        started,
        files.as_ref(),
        naming.map(|n| (n, a.paths_time)),
        facts.cgroups.as_deref(),
        wt,
    );
    let child_status = wait_command(child, child_status, write_failed);
    let error = stopped.shared.error();
    summary(
        &stopped.counts,
        &names_by_id(&plan.tps, &opened.ids),
        stopped.elapsed,
        stopped.stats.as_ref(),
        &stopped.shared,
        &stop_reason,
    );
    if let Some(e) = spawn_err {
        bail!("{e}");
    }
    if let Some(e) = error {
        bail!("{e}");
    }
    Ok(match child_status {
        Some(st) => exit_code(st),
        None => 0,
    })
}
