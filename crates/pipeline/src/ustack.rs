//! User frames named after the attribution (docs/attribution.md, "User frames"): each
//! intent's user frames symbolized by build id (the trace's tables, `--symbols`
//! directories, the system's debug files, the local file if its build id matches), and what
//! could not be: modules without symbols, and stacks that end inside a function that is not a
//! thread's entry (code built without frame pointers).

use std::collections::BTreeMap;

use ioblame_attrib::{Tables, UserFrame};
use ioblame_format::Trace;
pub use ioblame_symbolize::Options as UserSymbolOptions;
use ioblame_symbolize::{PerfMap, Symbolizer};

use crate::diag::Diagnostic;

/// Functions a thread's stack starts in (C runtimes' and glibc's, musl's, Rust's and Go's
/// thread entries): a user stack whose outermost frame is one of these is whole.
const ENTRIES: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "__libc_start_main_impl",
    "libc_start_main_stage2",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "__clone_internal",
    "thread_start",
    "_dl_start",
    "_dl_start_user",
    "__start",
    "start",
    "runtime.goexit",
    "runtime.rt0_go",
];

/// Names the user frames of `tables`' intents (their [`UserFrame::names`]), and says once
/// what could not be named and which stacks were cut short. Traces without user frames
/// cost nothing.
pub fn symbolize_user_frames(
    trace: &Trace,
    tables: &mut Tables,
    opts: &UserSymbolOptions,
) -> Vec<Diagnostic> {
    if tables.intents.iter().all(|it| it.user.is_empty()) {
        return Vec::new();
    }
    let mut diags = Vec::new();
    let (symbols, problems) = trace.user_symbols();
    diags.extend(problems.into_iter().map(Diagnostic::Trace));
    let mut sym = Symbolizer::new(symbols, opts.clone());
    let mut jit = JitMaps::new(trace, opts, &mut diags);
    for it in &mut tables.intents {
        for (i, f) in it.user.iter_mut().enumerate() {
            let Some(m) = &f.module else { continue };
            // A caller's frame is a return address: the call is the byte before it.
            let at = if i == 0 {
                f.offset
            } else {
                f.offset.saturating_sub(1)
            };
            f.names = match m.jit_pid() {
                Some(pid) => jit.name(pid, at).into_iter().collect(),
                None => sym.symbolize(&m.build_id, &m.path, at).functions,
            };
        }
    }
    let bytes = intent_bytes(tables);
    // Modules with frames nothing could name, with the bytes of the intents concerned.
    let mut unnamed: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (it, b) in tables.intents.iter().zip(&bytes) {
        let mut seen: Vec<(String, String)> = Vec::new();
        for f in it.user.iter().filter(|f| f.names.is_empty()) {
            let Some(m) = &f.module else { continue };
            let key = match m.jit_pid() {
                Some(pid) => (format!("JIT code of process {pid}"), "no perf map".into()),
                None => (m.path.clone(), ioblame_format::build_id_hex(&m.build_id)),
            };
            if !seen.contains(&key) {
                *unnamed.entry(key.clone()).or_default() += b;
                seen.push(key);
            }
        }
    }
    unnamed.retain(|_, b| *b > 0);
    if !unnamed.is_empty() {
        diags.push(Diagnostic::UserSymbolsMissing {
            modules: unnamed
                .keys()
                .map(|(p, id)| {
                    let id = if id.is_empty() {
                        "no build id"
                    } else {
                        id.as_str()
                    };
                    format!("{p} ({id})")
                })
                .collect(),
            bytes: affected(tables, &bytes, |f| f.module.is_some() && f.names.is_empty()),
        });
    }
    let outside = affected(tables, &bytes, |f| f.module.is_none());
    // Stacks unwound from copies: the walk's frame limit does not bound their user frames.
    let copied = trace
        .metadata()
        .events
        .iter()
        .map(|e| e.stack_user)
        .max()
        .filter(|&n| n > 0);
    // Stacks cut short: the outermost frame named, and not a thread's entry. A stack as
    // deep as the recording's limit was cut by the limit, not by missing frame pointers.
    let limit = trace
        .metadata()
        .events
        .iter()
        .map(|e| e.max_stack as usize)
        .max()
        .filter(|&m| m > 0)
        // perf's default: kernel.perf_event_max_stack, 127 unless raised.
        .unwrap_or(127);
    let mut short: BTreeMap<String, u64> = BTreeMap::new();
    let mut deep = 0u64;
    for (i, it) in tables.intents.iter().enumerate() {
        let Some(last) = it.user.last() else { continue };
        // The kernel's frames, its context markers and the user frames count to the limit.
        if copied.is_none() && it.stack.len() + it.user.len() + 2 >= limit {
            deep += bytes[i];
            continue;
        }
        let Some(name) = last.names.last() else {
            continue;
        };
        if ENTRIES.contains(&name.as_str()) {
            continue;
        }
        let module = last.module.as_ref().map_or("?", |m| m.path.as_str());
        let base = module.rsplit('/').next().unwrap_or(module);
        *short.entry(format!("{base} ({name})")).or_default() += bytes[i];
    }
    short.retain(|_, b| *b > 0);
    if !short.is_empty() || outside > 0 {
        diags.push(Diagnostic::UserStacksShort {
            ends: short.keys().cloned().collect(),
            bytes: short.values().sum(),
            outside_bytes: outside,
            copied,
        });
    }
    if deep > 0 {
        diags.push(Diagnostic::UserStacksAtLimit {
            bytes: deep,
            limit: limit as u32,
        });
    }
    diags
}

/// The JIT symbol maps of the processes: the trace's copies (PERF_MAPS), else, when local
/// files may be read and this is the boot that recorded the trace (its `boot_id`; a pid
/// means nothing elsewhere), `/tmp/perf-PID.map` here. Parsed when first needed.
struct JitMaps {
    maps: std::collections::HashMap<u32, Option<PerfMap>>,
    /// The trace's map texts not parsed yet.
    texts: std::collections::HashMap<u32, String>,
    local: bool,
}

impl JitMaps {
    fn new(trace: &Trace, opts: &UserSymbolOptions, diags: &mut Vec<Diagnostic>) -> JitMaps {
        let (maps, problems) = trace.perf_maps();
        diags.extend(problems.into_iter().map(Diagnostic::Trace));
        let this_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .is_some_and(|id| trace.metadata().info("boot_id") == Some(id.trim()));
        JitMaps {
            maps: Default::default(),
            texts: maps.into_iter().map(|m| (m.pid, m.text)).collect(),
            local: opts.local_files && this_boot,
        }
    }

    /// The name of JIT code at `addr` of process `pid`, marked as JIT code.
    fn name(&mut self, pid: u32, addr: u64) -> Option<String> {
        let local = self.local;
        let text = self.texts.remove(&pid);
        let map = self.maps.entry(pid).or_insert_with(|| {
            text.or_else(|| {
                local
                    .then(|| std::fs::read_to_string(format!("/tmp/perf-{pid}.map")).ok())
                    .flatten()
            })
            .map(|t| PerfMap::parse(&t))
        });
        map.as_ref()?.lookup(addr).map(|n| format!("{n} [jit]"))
    }
}

/// Bytes charged per intent (lower copies aside).
fn intent_bytes(tables: &Tables) -> Vec<u64> {
    let mut v = vec![0u64; tables.intents.len()];
    for (_, a, t) in tables.acts_with_totals() {
        if let Some(b) = v.get_mut(a.intent.index()) {
            *b += t.bytes.iter().sum::<u64>();
        }
    }
    v
}

/// The bytes of the intents with a user frame that `hit` holds.
fn affected(tables: &Tables, bytes: &[u64], hit: impl Fn(&UserFrame) -> bool) -> u64 {
    tables
        .intents
        .iter()
        .zip(bytes)
        .filter(|(it, _)| it.user.iter().any(&hit))
        .map(|(_, b)| b)
        .sum()
}
