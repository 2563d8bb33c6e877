//! The analyzer's session: the global flags (`--kallsyms`, `--btrfs-map`, `--scope`, `--symbols`,
//! `--no-local-symbols`) parsed once, and what an analysis subcommand starts from, handed to
//! it ready-made (as ripgrep's `HiArgs` hands each mode its parts): the trace opened, its
//! devices selected ([`Opened`]), its kernel symbols and the scope resolved ([`Ready`]), and
//! the analysis run over them with its progress bar, diagnostics and user frames named.
//!
//! The subcommands' own flags stay in their modules (`crate::cmd`); the two argument groups
//! every analysis reads, the trace ([`TraceArgs`]) and the devices ([`DevArgs`]), are here
//! because the session opens them.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use ioblame_attrib::{Dirtied, Io, Tables};
use ioblame_counters::DevSelection;
use ioblame_decode::{Event, Symbolizer};
use ioblame_format::Trace;
use ioblame_pipeline::{
    Analysis, Input, Options, ResolvedScope, Scope, SideFiles, UserSymbolOptions,
};

use crate::diagnostics;

/// The input: an ioblame trace (directory, or ring files of one capture) or a perf.data file.
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// An ioblame trace directory, one or more of its ring files (.iob), or a perf.data
    /// recording.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    pub trace: Vec<PathBuf>,
}

/// Device selection, as ioblame's `devs` file.
#[derive(Args, Debug, Clone, Default)]
pub struct DevArgs {
    /// Devices to analyse: white-space separated names or MAJ:MIN, `!` negates
    /// (e.g. 'sda sdb !8:0'), resolved against the trace's own device table.
    #[arg(long, value_name = "LIST")]
    pub devs: Option<String>,
    /// Also show the recorder's own IO (hidden by default).
    #[arg(long)]
    pub show_recorder: bool,
}

/// The global flags, parsed once.
#[derive(Debug, Clone)]
pub struct Session {
    /// `--kallsyms`: the recording host's kernel symbols, for a perf.data recording.
    kallsyms: Option<PathBuf>,
    /// `--btrfs-map`: the recording host's btrfs chunk maps, for a perf.data recording.
    btrfs_map: Option<PathBuf>,
    /// `--scope`, when given.
    scope: Option<Scope>,
    /// Where user frames' symbols are looked for besides the trace (`--symbols`,
    /// `--no-local-symbols`).
    user_symbols: UserSymbolOptions,
}

impl Session {
    /// A session of the global flags: `kallsyms`, `btrfs_map`, `scope`, the `--symbols`
    /// directories and whether this machine's files may name user frames (not
    /// `--no-local-symbols`).
    pub fn new(
        kallsyms: Option<PathBuf>,
        btrfs_map: Option<PathBuf>,
        scope: Option<Scope>,
        symbols: Vec<PathBuf>,
        local_symbols: bool,
    ) -> Session {
        Session {
            kallsyms,
            btrfs_map,
            scope,
            user_symbols: UserSymbolOptions {
                dirs: symbols,
                system: local_symbols,
                local_files: local_symbols,
            },
        }
    }

    /// Where user frames' symbols and unwind tables are looked for besides the trace.
    pub fn user_symbols(&self) -> &UserSymbolOptions {
        &self.user_symbols
    }

    /// `--kallsyms`.
    pub fn kallsyms(&self) -> Option<&Path> {
        self.kallsyms.as_deref()
    }

    /// What a perf.data recording lacks, as given: `--kallsyms`, `--btrfs-map`.
    pub fn side_files(&self) -> SideFiles<'_> {
        SideFiles {
            kallsyms: self.kallsyms(),
            btrfs_map: self.btrfs_map.as_deref(),
        }
    }

    /// `--scope`, when given.
    pub fn scope_given(&self) -> Option<&Scope> {
        self.scope.as_ref()
    }

    /// Opens the trace `paths` name, printing its notes and the damage found
    /// ([`diagnostics::open_trace`]).
    pub fn open(&self, paths: &[PathBuf]) -> Result<Input> {
        diagnostics::open_trace(paths, &self.side_files())
    }

    /// Opens the trace and selects its devices (`--devs`; without it, the trace's default
    /// devices, [`Input::default_devs`]).
    pub fn open_selected(&self, trace: &TraceArgs, devs: &DevArgs) -> Result<Opened<'_>> {
        let t = self.open(&trace.trace)?;
        let sel = match &devs.devs {
            Some(s) => DevSelection::parse(s, &t.metadata().block_devices)?,
            // For blktrace recordings: the lowest level of stacked devices.
            None => t.default_devs(),
        };
        Ok(Opened {
            session: self,
            trace: t,
            devs: sel,
            devs_given: devs.devs.is_some(),
            show_recorder: devs.show_recorder,
        })
    }

    /// The opening most analyses share: the trace opened, its devices selected, its kernel
    /// symbols (a note when it has none) and `--scope` resolved (default `all`), in this order.
    pub fn ready(&self, trace: &TraceArgs, devs: &DevArgs) -> Result<Ready<'_>> {
        self.ready_checked(trace, devs, |_| Ok(()))
    }

    /// [`Session::ready`], with `check` run on the trace once its devices are selected and
    /// before its symbols are read (a subcommand's own refusals, such as counters' filters
    /// naming devices the trace lacks).
    pub fn ready_checked(
        &self,
        trace: &TraceArgs,
        devs: &DevArgs,
        check: impl FnOnce(&Input) -> Result<()>,
    ) -> Result<Ready<'_>> {
        let o = self.open_selected(trace, devs)?;
        check(&o.trace)?;
        let symbols = diagnostics::symbols_of(&o.trace);
        let scope = self.scope(&o.trace, false)?;
        Ok(o.ready_with(symbols, scope))
    }

    /// `--scope` resolved against `trace`; without it `all`, or for `baseline` and `check`
    /// (`ci`) `workload` when the trace names its command.
    pub fn scope(&self, trace: &Trace, ci: bool) -> Result<ResolvedScope> {
        resolve_scope(trace, self.scope_given(), ci)
    }

    /// Names the user frames of `tables`, from the trace and where the global flags say
    /// ([`diagnostics::name_user_frames`]).
    pub fn name_user_frames(&self, trace: &Trace, tables: &mut Tables) {
        diagnostics::name_user_frames(trace, tables, &self.user_symbols);
    }
}

/// The scope `given` names, resolved against `trace`; without one, `all`, or with `ci`
/// (`baseline`, `check`) `workload` when the trace names its command.
pub fn resolve_scope(trace: &Trace, given: Option<&Scope>, ci: bool) -> Result<ResolvedScope> {
    if matches!(given, Some(Scope::Cgroup(_))) {
        if let Some(d) = ioblame_pipeline::cgroups_flat(trace) {
            diagnostics::say(&d);
        }
    }
    Ok(match given {
        Some(s) => ResolvedScope::resolve(s, trace)?,
        None if ci => ResolvedScope::default_for_ci(trace),
        None => ResolvedScope::resolve(&Scope::All, trace)?,
    })
}

/// A trace opened for a subcommand, its devices selected: the first half of the opening,
/// for subcommands that check more before the symbols are read.
pub struct Opened<'s> {
    session: &'s Session,
    /// The trace.
    pub trace: Input,
    /// The devices analysed.
    pub devs: DevSelection,
    /// Whether `--devs` was given (for messages).
    pub devs_given: bool,
    /// Whether the recorder's own IO is shown (`--show-recorder`).
    pub show_recorder: bool,
}

impl<'s> Opened<'s> {
    /// The rest of the opening: the trace's kernel symbols (a note on stderr when it has
    /// none), with `scope`.
    pub fn ready(self, scope: ResolvedScope) -> Ready<'s> {
        let symbols = diagnostics::symbols_of(&self.trace);
        self.ready_with(symbols, scope)
    }

    fn ready_with(self, symbols: Symbolizer, scope: ResolvedScope) -> Ready<'s> {
        Ready {
            session: self.session,
            trace: self.trace,
            devs: self.devs,
            devs_given: self.devs_given,
            show_recorder: self.show_recorder,
            symbols,
            scope,
        }
    }
}

/// Everything an analysis subcommand needs, ready-made: the trace, the devices selected, the
/// kernel symbols and the scope; its analysis run over them.
pub struct Ready<'s> {
    session: &'s Session,
    /// The trace.
    pub trace: Input,
    /// The devices analysed.
    pub devs: DevSelection,
    /// Whether `--devs` was given (for messages).
    pub devs_given: bool,
    /// Whether the recorder's own IO is shown.
    pub show_recorder: bool,
    /// The trace's kernel symbols.
    pub symbols: Symbolizer,
    /// The scope, resolved.
    pub scope: ResolvedScope,
}

impl Ready<'_> {
    /// Runs the analysis ([`ioblame_pipeline::analyze`]) with a progress bar, `on_io` shown
    /// each IO charged; prints what it found to say and names the user frames.
    pub fn analyze(&self, on_io: impl FnMut(&Io, &Tables)) -> Analysis {
        self.analyze_observed_all(|_| {}, on_io, |_, _| {})
    }

    /// [`Ready::analyze`], also showing `on_event` every decoded event
    /// ([`ioblame_pipeline::analyze_observed`]).
    pub fn analyze_observed(
        &self,
        on_event: impl FnMut(&Event),
        on_io: impl FnMut(&Io, &Tables),
    ) -> Analysis {
        self.analyze_observed_all(on_event, on_io, |_, _| {})
    }

    /// [`Ready::analyze_observed`], also showing `outside` each IO of the selected devices
    /// that the scope leaves out ([`ioblame_pipeline::analyze_observed_all`]).
    pub fn analyze_observed_all(
        &self,
        on_event: impl FnMut(&Event),
        on_io: impl FnMut(&Io, &Tables),
        outside: impl FnMut(&Io, &Tables),
    ) -> Analysis {
        let none: Option<fn(&Dirtied, &Tables)> = None;
        self.analyze_logged(on_event, on_io, outside, none)
    }

    /// [`Ready::analyze_observed_all`], also showing `on_dirtied`, when given, what each
    /// role dirtied ([`ioblame_pipeline::analyze_logged`]).
    pub fn analyze_logged<D: FnMut(&Dirtied, &Tables)>(
        &self,
        on_event: impl FnMut(&Event),
        on_io: impl FnMut(&Io, &Tables),
        outside: impl FnMut(&Io, &Tables),
        on_dirtied: Option<D>,
    ) -> Analysis {
        let opts = Options {
            symbols: &self.symbols,
            devs: &self.devs,
            show_recorder: self.show_recorder,
            scope: &self.scope,
            user_symbols: &self.session.user_symbols,
        };
        let user = &self.session.user_symbols;
        diagnostics::analyze(
            &self.trace,
            &opts,
            user,
            on_event,
            on_io,
            outside,
            on_dirtied,
        )
    }
}
