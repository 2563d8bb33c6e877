//! `ioblame perf-command`: the `perf record` command line that records what the attribution
//! needs on this kernel, for hosts with stock perf and no ioblame-capture.

use std::io::Write;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct PerfCommandArgs {
    /// Devices to record (names or MAJ:MIN); default all.
    #[arg(long, value_delimiter = ',', value_name = "DEV,...")]
    devices: Vec<String>,
    /// Which stack events get a kernel callchain, as `ioblame-capture --stacks`: `exact`
    /// (not `block_dirty_buffer`, whose stack the analyzer takes from its thread's dirtying
    /// event: the same intents at about half the kernel's cost), `all` or `none` (no
    /// callchain: no intents). `sampled:N` has no perf line (perf takes no per-event sample
    /// period on tracepoints): record it with `ioblame-capture`.
    #[arg(long, default_value = "exact", value_name = "MODE")]
    stacks: ioblame_perfdata::Stacks,
    /// User-space stacks too, as `ioblame-capture record --user-stacks`, and perf's MMAP2
    /// records carry the files' build ids (`--buildid-mmap`, Linux and perf 5.12 or later;
    /// before 5.12, `--buildid-all`: perf's build-id table), so that the analysis names the
    /// functions from files of the same build id (`--symbols`, debug directories, the local
    /// file). `fp` (the default): the stack events' callchains go on into user space (frame
    /// pointers: code built without them gives short stacks); `dwarf[:SIZE]`: perf copies
    /// SIZE bytes (default 8K) of the user stack with each (`call-graph=dwarf`), unwound by
    /// the files' call frame information when analysed.
    #[arg(long, num_args = 0..=1, default_missing_value = "fp", value_name = "fp|dwarf[:SIZE]")]
    user_stacks: Option<ioblame_perfdata::UserStacks>,
}

/// `ioblame perf-command`.
pub fn run(out: &mut impl Write, a: PerfCommandArgs) -> Result<()> {
    let opts = ioblame_perfdata::CommandOptions {
        stacks: a.stacks,
        user_stacks: a.user_stacks,
    };
    let (cmd, notes) = ioblame_perfdata::perf_command_for(&a.devices, opts)?;
    for n in notes {
        eprintln!("ioblame: note: {n}");
    }
    writeln!(out, "{cmd}")?;
    Ok(())
}
