//! Short names of intents: the entry point (system call or kernel thread) and the frames
//! that tell one intent from the others, e.g. `write(2) › ext4_buffered_write_iter ›
//! __folio_mark_dirty [wb:sync]`. The rule is in docs/attribution.md, "Intent names"; it
//! uses only generic naming conventions of the kernel (syscall wrappers, `ret_from_fork`,
//! `kthread`, `worker_thread`, `do_*` and `vfs_*`), never a list of one kernel's functions.

use crate::context::Symbolizer;
use crate::model::{Intent, IntentId, Tables, UserFrame, INTENT_LOST, INTENT_NOMEM};

/// Separates the parts of a name.
pub const SEP: &str = " › ";

/// The short name of every intent of `tables`, indexed by [`IntentId::index`]; frames are
/// named by `sym` (unknown addresses as `0x...`).
pub fn intent_names(tables: &Tables, sym: &dyn Symbolizer) -> Vec<String> {
    names_of(tables, sym, true)
}

/// [`intent_names`] from the kernel stacks alone, user frames left out (`ioblame top`, which
/// groups by kernel stack and does not name user frames).
pub fn kernel_intent_names(tables: &Tables, sym: &dyn Symbolizer) -> Vec<String> {
    names_of(tables, sym, false)
}

fn names_of(tables: &Tables, sym: &dyn Symbolizer, user: bool) -> Vec<String> {
    let stacks: Vec<(u32, Vec<String>)> = tables
        .intents
        .iter()
        .map(|it| {
            let frames = it
                .stack
                .iter()
                .map(|&a| match sym.symbol(a) {
                    Some(n) if !normalize(&n).is_empty() => normalize(&n).to_string(),
                    _ => format!("{a:#x}"),
                })
                .collect();
            (it.modifier, frames)
        })
        .collect();
    let mut names = kernel_names(&stacks);
    // A blktrace recording has no stacks: its intents differ only by the request flags.
    for (name, it) in names.iter_mut().zip(&tables.intents) {
        if let Some(flags) = crate::blktrace_flags(it.modifier).filter(|_| it.stack.is_empty()) {
            *name = format!("no stack (blktrace) {flags}");
        }
    }
    // The application's frame leads (docs/attribution.md, "Intent names").
    let leads = if user {
        user_leads(&tables.intents, &names)
    } else {
        vec![None; names.len()]
    };
    for (name, lead) in names.iter_mut().zip(leads) {
        if let Some(lead) = lead {
            *name = if name.as_str() == NO_STACK {
                lead
            } else {
                format!("{lead}{SEP}{name}")
            };
        }
    }
    number_equal(&mut names);
    names
}

/// The name of an intent without a stack.
const NO_STACK: &str = "[no stack]";

/// How a user frame is shown: its function (the innermost of those inlined there), or,
/// unsymbolized, its module's file name and offset (`libfoo.so+0x1a2b`), or, outside any
/// recorded mapping, `[unknown]` (the attribution keeps no address there, as the walk went
/// astray; frames of other sources keep theirs: `[unknown] 0x...`).
pub fn user_frame_label(f: &UserFrame) -> String {
    if let Some(n) = f.names.first() {
        return n.clone();
    }
    match &f.module {
        Some(m) => {
            let base = m.path.rsplit('/').next().unwrap_or(&m.path);
            format!("{base}+{:#x}", f.offset)
        }
        None if f.offset == 0 => "[unknown]".to_string(),
        None => format!("[unknown] {:#x}", f.offset),
    }
}

/// Whether a user frame is a library's rather than the application's: in a shared object
/// or a special mapping (`[vdso]`), or a function of the Rust or C++ standard library
/// linked into the application.
pub fn is_library_frame(f: &UserFrame) -> bool {
    let lib_module = f.module.as_ref().is_some_and(|m| {
        let base = m.path.rsplit('/').next().unwrap_or(&m.path);
        base.contains(".so") || base.starts_with('[')
    });
    let lib_name = f.names.last().is_some_and(|n| {
        let n = n.trim_start_matches(['<', '&']);
        ["std::", "core::", "alloc::", "__libc_", "__GI_"]
            .iter()
            .any(|p| n.starts_with(p))
    });
    lib_module || lib_name
}

/// The user frames of an intent (innermost first) that name the application, as intent
/// names read them: from the first frame that is not a library's ([`is_library_frame`]: the
/// C library's system call wrapper and what it called through) on, or from the first frame
/// when every frame is a library's; and only up to the first frame outside every recorded
/// mapping (the walk went astray there: that frame and those after it are not trusted).
/// Empty for an intent without user frames, or whose first frame is already astray.
///
/// The lead of an intent's name is one of these ([`intent_names`]); `ioblame baseline`
/// keys its groups by the first few (`crates/baseline`, `[keys] user_frames`).
pub fn application_frames(user: &[UserFrame]) -> &[UserFrame] {
    let known = user.iter().position(|f| f.module.is_none());
    let user = &user[..known.unwrap_or(user.len())];
    let from = user.iter().position(|f| !is_library_frame(f)).unwrap_or(0);
    &user[from..]
}

/// The main loops of the common interpreters, and what they interpret: a stack through one
/// runs code whose own functions the native frames do not show (a perf map, where the
/// interpreter writes one, names them as JIT code).
const INTERPRETERS: &[(&str, &str)] = &[
    ("_PyEval_EvalFrameDefault", "python"),
    ("_PyEval_EvalFrame", "python"),
    ("PyEval_EvalCode", "python"),
    ("vm_exec_core", "ruby"),
    ("rb_vm_exec", "ruby"),
    ("Perl_runops_standard", "perl"),
    ("Perl_runops_debug", "perl"),
    ("luaV_execute", "lua"),
    ("execute_ex", "php"),
    ("php_execute_script", "php"),
    ("Builtins_InterpreterEntryTrampoline", "javascript"),
];

/// The language an intent's user frames interpret, if they run through an interpreter's
/// main loop (and no frame was named from a JIT's map).
fn interpreted(user: &[UserFrame]) -> Option<&'static str> {
    if user
        .iter()
        .any(|f| f.names.iter().any(|n| n.ends_with(" [jit]")))
    {
        return None;
    }
    user.iter().find_map(|f| {
        let n = f.names.last()?;
        INTERPRETERS
            .iter()
            .find(|(name, _)| n == name)
            .map(|(_, lang)| *lang)
    })
}

/// The user frame that leads each intent's name, if it has user frames: the application's
/// deepest frame (from the first that is not a library's, [`is_library_frame`]) that tells
/// it apart from the other intents of the same kernel name — the first frame at which its
/// path up from there differs from all of theirs — or that first application frame when
/// none does or it has no namesake. Frames from the first outside every recorded mapping on
/// are left out (the walk went astray there).
fn user_leads(intents: &[Intent], kernel: &[String]) -> Vec<Option<String>> {
    let seqs: Vec<Vec<String>> = intents
        .iter()
        .map(|it| {
            application_frames(&it.user)
                .iter()
                .map(user_frame_label)
                .collect()
        })
        .collect();
    (0..intents.len())
        .map(|i| {
            let seq = &seqs[i];
            if seq.is_empty() {
                return None;
            }
            let others: Vec<&Vec<String>> = (0..intents.len())
                .filter(|&k| k != i && kernel[k] == kernel[i] && !seqs[k].is_empty())
                .map(|k| &seqs[k])
                .filter(|o| *o != seq)
                .collect();
            let at = (0..seq.len())
                .find(|&j| others.iter().all(|o| o.get(..=j) != Some(&seq[..=j])))
                .unwrap_or(0);
            Some(match interpreted(&intents[i].user) {
                Some(lang) => format!("{} [{lang} interpreter]", seq[at]),
                None => seq[at].clone(),
            })
        })
        .collect()
}

/// Equal names: the intent number tells them apart.
fn number_equal(names: &mut [String]) {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for n in names.iter() {
        *seen.entry(n.clone()).or_default() += 1;
    }
    for (i, n) in names.iter_mut().enumerate() {
        if seen.get(n.as_str()).is_some_and(|&c| c > 1) {
            n.push_str(&format!(" (#{i})"));
        }
    }
}

/// A function name without a `+0x../0x..` offset and without compiler suffixes
/// (`.constprop.0`, `.isra.0`, `.part.0`, `.cold`).
pub fn normalize(name: &str) -> &str {
    let n = name.split(['+', ' ']).next().unwrap_or("");
    n.split('.').next().unwrap_or("")
}

/// The name of a system call entered through `frame`, if `frame` is one of the generic
/// syscall wrappers: `__<arch>_sys_NAME`, `__<arch>_compat_sys_NAME`, `__se_sys_NAME`,
/// `__do_sys_NAME`, `ksys_NAME`, `sys_NAME`, `SyS_NAME`, `compat_sys_NAME`.
pub fn syscall_of(frame: &str) -> Option<&str> {
    let rest = frame.strip_prefix("__").map_or(frame, |r| {
        // `__x64_sys_`, `__arm64_sys_`, `__se_sys_`, `__do_sys_`, and their compat forms.
        r.split_once('_').map_or(r, |(_, after)| after)
    });
    let name = rest
        .strip_prefix("sys_")
        .or_else(|| rest.strip_prefix("compat_sys_"))
        .or_else(|| frame.strip_prefix("ksys_"))
        .or_else(|| frame.strip_prefix("SyS_"))?;
    // `__x64_sys_` must not match functions such as `__foo_sys_bar` outside the wrappers:
    // the part before `sys_` is an arch, `se`, `do` or nothing.
    if let Some(after) = frame.strip_prefix("__") {
        let arch = after.split('_').next().unwrap_or("");
        let known = matches!(
            arch,
            "x64"
                | "ia32"
                | "x32"
                | "arm64"
                | "arm"
                | "riscv"
                | "s390x"
                | "s390"
                | "powerpc"
                | "loongarch"
                | "se"
                | "do"
        );
        if !known {
            return None;
        }
    }
    (!name.is_empty()).then_some(name)
}

/// Where a stack entered the kernel, and the frames inside that entry (outermost first).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// `write(2)`, `kworker wb_workfn`, `kthread kjournald2`, `thread io_wq_worker`, `page
    /// fault`, `softirq`, or the outermost named frame when none of these is recognised.
    label: String,
    /// The frames inside the entry, outermost first, without the entry's own plumbing.
    path: Vec<String>,
}

/// An address the symbolizer could not name (`0x...`).
fn is_unknown(frame: &str) -> bool {
    frame.starts_with("0x")
}

/// Where a new task starts running: `ret_from_fork*` (x86's `ret_from_fork_asm` and
/// `ret_from_fork`, arm64's and riscv's `ret_from_fork`) or `ret_from_kernel_thread*`.
fn is_thread_start(frame: &str) -> bool {
    frame.starts_with("ret_from_fork") || frame.starts_with("ret_from_kernel_thread")
}

/// Finds the entry of a stack given innermost first.
fn entry_of(frames: &[String]) -> Entry {
    let outer: Vec<&str> = frames.iter().rev().map(String::as_str).collect();
    let mut label = None;
    // Unknown addresses outside everything else say nothing about the entry.
    let start = outer.iter().position(|f| !is_unknown(f)).unwrap_or(0);
    let mut inside = outer.len();
    // What marks the entry's own plumbing (see below).
    let mut syscall: Option<(&str, String)> = None;
    let mut suffix: Option<&str> = None;
    let mut i = start;
    while i < outer.len() {
        let f = outer[i];
        if let Some(sc) = syscall_of(f) {
            // Skip the syscall's further wrappers too (`__se_sys_x`, `__do_sys_x`, `ksys_x`).
            let mut j = i + 1;
            while j < outer.len() && syscall_of(outer[j]).is_some() {
                j += 1;
            }
            label = Some(format!("{sc}(2)"));
            let stem = sc.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
            syscall = Some((sc, stem.into()));
            inside = j;
            break;
        }
        if is_thread_start(f) {
            // The thread function is the first frame inside the thread start frames.
            let j = i + outer[i..].iter().take_while(|x| is_thread_start(x)).count();
            match outer.get(j) {
                // A kernel thread: named below.
                Some(&"kthread") => {
                    i = j;
                    continue;
                }
                Some(thread) => {
                    label = Some(format!("thread {thread}"));
                    inside = j + 1;
                }
                None => {
                    label = Some("thread".into());
                    inside = j;
                }
            }
            break;
        }
        if f == "kthread" {
            match outer.get(i + 1).copied() {
                Some("worker_thread" | "rescuer_thread") => {
                    // The work function runs inside `process_one_work`.
                    let pow = outer[i..].iter().position(|x| *x == "process_one_work");
                    match pow
                        .map(|p| i + p + 1)
                        .and_then(|w| Some((w, outer.get(w)?)))
                    {
                        Some((w, work)) => {
                            label = Some(format!("kworker {work}"));
                            inside = w + 1;
                        }
                        // A worker that runs no work (or not through `process_one_work`).
                        None => {
                            label = Some("kworker".into());
                            inside = i + 2;
                        }
                    }
                }
                Some(thread) => {
                    label = Some(format!("kthread {thread}"));
                    inside = i + 2;
                }
                None => label = Some("kthread".into()),
            }
            break;
        }
        if f.ends_with("page_fault") {
            label = Some("page fault".into());
            suffix = Some("_fault");
            inside = i + 1;
            break;
        }
        if f.contains("softirq") {
            label = Some("softirq".into());
            suffix = Some("softirq");
            inside = i + 1;
            break;
        }
        i += 1;
    }
    let label = match label {
        Some(l) => l,
        None => {
            // No known entry: the outermost named frame names it (the outermost frame when
            // none is named).
            inside = (start + 1).min(outer.len());
            outer.get(start).map_or_else(String::new, |f| f.to_string())
        }
    };
    let mut path: Vec<String> = outer
        .get(inside..)
        .unwrap_or(&[])
        .iter()
        .map(|s| s.to_string())
        .collect();
    // The entry's own plumbing, at the start of the path: under a syscall NAME, the VFS entry
    // points (`vfs_*`) and frames `NAME`, `do_STEM*`, `__do_STEM*` or containing `sys_STEM`
    // (STEM is NAME without trailing digits: `do_fsync` under fsync(2), `do_sys_openat2`
    // under openat(2)); and when the leading run of such frames and other `do_*`, `__do_*`
    // frames reaches a `vfs_*` frame, that whole run (`do_fsync vfs_fsync_range` under
    // fdatasync(2), `do_writev vfs_writev do_iter_readv_writev` under writev(2)). Under a
    // fault, frames ending in `_fault` (`do_user_addr_fault`, `handle_mm_fault`); under a
    // softirq, frames containing `softirq`. The innermost frame always stays.
    let candidates = path.len().saturating_sub(1);
    let plumbing = match (&syscall, suffix) {
        (Some((name, stem)), _) => {
            let own = |f: &str| {
                !stem.is_empty()
                    && (f == *name
                        || f.starts_with("vfs_")
                        || f.starts_with(&format!("do_{stem}"))
                        || f.starts_with(&format!("__do_{stem}"))
                        || f.contains(&format!("sys_{stem}")))
            };
            let to_vfs = path
                .iter()
                .take_while(|f| own(f) || f.starts_with("do_") || f.starts_with("__do_"))
                .count();
            if path[..to_vfs].iter().any(|f| f.starts_with("vfs_")) {
                to_vfs.min(candidates)
            } else {
                path[..candidates].iter().take_while(|f| own(f)).count()
            }
        }
        (None, Some("_fault")) => path[..candidates]
            .iter()
            .take_while(|f| f.ends_with("_fault"))
            .count(),
        (None, Some(s)) => path[..candidates]
            .iter()
            .take_while(|f| f.contains(s))
            .count(),
        (None, None) => 0,
    };
    path.drain(..plumbing);
    Entry { label, path }
}

/// Common leading length of two sequences.
fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// For each item `(group, sequence)`: the longest common start of its sequence with any
/// *other* sequence of its group, `None` when its group has no other sequence. Sorting
/// puts the closest sequence next to each one, so this takes `O(n log n)` comparisons.
fn closest_in_group<G: Ord>(items: &[(G, &[String])]) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[a].cmp(&items[b]));
    // Runs of equal items, in sorted order.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        match runs.last_mut() {
            Some((start, end)) if items[order[*start]] == items[i] => *end = k + 1,
            _ => runs.push((k, k + 1)),
        }
    }
    let mut out = vec![None; items.len()];
    for (r, &(start, end)) in runs.iter().enumerate() {
        let me = &items[order[start]];
        let lcp_with = |other: Option<&(usize, usize)>| {
            other
                .map(|&(s, _)| &items[order[s]])
                .filter(|o| o.0 == me.0)
                .map(|o| common_prefix(me.1, o.1))
        };
        let best =
            lcp_with(r.checked_sub(1).and_then(|p| runs.get(p))).max(lcp_with(runs.get(r + 1)));
        for &i in &order[start..end] {
            out[i] = best;
        }
    }
    out
}

/// The frame at which `own` parts from its closest other sequence, which shares its first
/// `k` frames: the next frame, or its last when `own` is a prefix of the other.
fn parting(own: &[String], k: Option<usize>) -> Option<&String> {
    let k = k?;
    own.get(k).or(own.last())
}

/// The writeback reason suffix of a modifier (` [wb:sync]`), ` [0x..]` for another
/// modifier, empty for 0.
fn modifier_suffix(modifier: u32) -> String {
    if modifier == 0 {
        String::new()
    } else if modifier >> 28 == 1 {
        format!(" [wb:{}]", crate::WbReason(modifier & 0x0fff_ffff).name())
    } else {
        format!(" [{modifier:#x}]")
    }
}

/// Names a set of intents given as (modifier, frames innermost first), indexed by intent id
/// (#0 is nomem and #1 lost whatever their frames). The rule, per intent:
///
/// 1. **Entry**: from the outermost named frame in (unknown `0x...` addresses outside it
///    skipped), the first system call wrapper gives `NAME(2)` ([`syscall_of`]); a thread
///    start (`ret_from_fork*`, `ret_from_kernel_thread*`) gives `thread FN`, FN the first
///    frame inside the thread start frames (`thread` when there is none), unless FN is
///    `kthread`; `kthread` gives `kthread FN` (FN the frame inside it; `kthread` when there
///    is none), or for a workqueue worker (`worker_thread`, `rescuer_thread`) `kworker
///    WORK`, WORK the frame inside `process_one_work` (`kworker`, its path from inside the
///    worker, when there is none); a
///    `*page_fault` frame gives `page fault`; a `*softirq*` frame `softirq`; otherwise the
///    outermost named frame itself (the outermost frame when none is named).
/// 2. **Path**: the frames inside the entry, outermost first, without the leading frames
///    that are the entry's plumbing: under a syscall NAME (STEM: NAME without trailing
///    digits) `vfs_*`, `NAME`, `do_STEM*`, `__do_STEM*` and frames containing `sys_STEM`,
///    or, when the leading run of those and other `do_*`, `__do_*` frames contains a
///    `vfs_*` frame, that whole run; under a fault frames ending in `_fault`; under a
///    softirq frames containing `softirq`. The innermost frame always stays.
/// 3. **First frame**: the path's first frame (the code the entry went to).
/// 4. **Parting frame**: among the intents with the same entry, where this path parts from
///    the closest other path (the first frame after their longest common start; its last
///    frame when it is a prefix of another; identical paths do not count). With no other intent of that entry, or when
///    that is the first frame: where the stack, read from its innermost frame, parts from
///    the closest other stack of the trace (if that frame is on the path).
/// 5. The name is `ENTRY › FIRST › PARTING` (the parting frame left out when absent or equal
///    to the first; just `ENTRY` when the path is empty), then ` [wb:REASON]` for a
///    writeback modifier; names still equal (stacks with the same functions at other
///    offsets) get ` (#N)`. A stackless intent is `[no stack]` ([`intent_names`] names
///    those of a blktrace recording `no stack (blktrace) FLAGS`).
pub fn name_stacks(intents: &[(u32, Vec<String>)]) -> Vec<String> {
    let mut names = kernel_names(intents);
    number_equal(&mut names);
    names
}

/// [`name_stacks`] without telling equal names apart.
fn kernel_names(intents: &[(u32, Vec<String>)]) -> Vec<String> {
    let entries: Vec<Entry> = intents.iter().map(|(_, f)| entry_of(f)).collect();
    // The intents compared: those with a stack, #0 and #1 aside.
    let real: Vec<usize> = (2..intents.len())
        .filter(|&i| !intents[i].1.is_empty())
        .collect();
    let mut in_entry = vec![None; intents.len()];
    let mut in_trace = vec![None; intents.len()];
    let by_entry: Vec<(&str, &[String])> = real
        .iter()
        .map(|&i| (entries[i].label.as_str(), entries[i].path.as_slice()))
        .collect();
    let whole: Vec<((), &[String])> = real
        .iter()
        .map(|&i| ((), intents[i].1.as_slice()))
        .collect();
    for (k, (a, b)) in closest_in_group(&by_entry)
        .into_iter()
        .zip(closest_in_group(&whole))
        .enumerate()
    {
        in_entry[real[k]] = a;
        in_trace[real[k]] = b;
    }
    let mut names: Vec<String> = Vec::with_capacity(intents.len());
    for (i, ((modifier, frames), e)) in intents.iter().zip(&entries).enumerate() {
        let id = IntentId(i as u32);
        if id == INTENT_NOMEM {
            names.push("[nomem]".into());
            continue;
        }
        if id == INTENT_LOST {
            names.push("[lost]".into());
            continue;
        }
        if frames.is_empty() {
            names.push(format!("[no stack]{}", modifier_suffix(*modifier)));
            continue;
        }
        let mut parts = vec![e.label.clone()];
        if let Some(first) = e.path.first() {
            parts.push(first.clone());
            let part = parting(&e.path, in_entry[i])
                .filter(|p| *p != first)
                .or_else(|| {
                    parting(frames, in_trace[i]).filter(|p| *p != first && e.path[1..].contains(p))
                });
            if let Some(p) = part {
                parts.push(p.clone());
            }
        }
        names.push(parts.join(SEP) + &modifier_suffix(*modifier));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames given outermost first (as one reads a call path), returned innermost first.
    fn st(outer_first: &str) -> Vec<String> {
        outer_first
            .split_whitespace()
            .rev()
            .map(String::from)
            .collect()
    }

    fn names(stacks: &[(u32, &str)]) -> Vec<String> {
        let mut v = vec![(0, vec![]), (0, vec![])];
        v.extend(stacks.iter().map(|&(m, s)| (m, st(s))));
        name_stacks(&v)[2..].to_vec()
    }

    const WRITE: &str = "entry_SYSCALL_64_after_hwframe do_syscall_64 ksys_write vfs_write \
        ext4_buffered_write_iter generic_perform_write ext4_da_write_end block_write_end \
        block_commit_write mark_buffer_dirty";

    #[test]
    fn syscall_wrappers() {
        assert_eq!(syscall_of("__x64_sys_openat"), Some("openat"));
        assert_eq!(syscall_of("__arm64_sys_write"), Some("write"));
        assert_eq!(syscall_of("__se_sys_pwrite64"), Some("pwrite64"));
        assert_eq!(syscall_of("__do_sys_fsync"), Some("fsync"));
        assert_eq!(syscall_of("ksys_write"), Some("write"));
        assert_eq!(syscall_of("__ia32_compat_sys_pwritev"), Some("pwritev"));
        assert_eq!(syscall_of("sys_write"), Some("write"));
        assert_eq!(syscall_of("do_syscall_64"), None);
        assert_eq!(syscall_of("do_sys_openat2"), None);
        assert_eq!(syscall_of("__foo_sys_bar"), None);
        assert_eq!(syscall_of("__sys_"), None);
        assert_eq!(
            normalize("ext4_mb_scan_groups_linear.constprop.0+0x73/0xe0"),
            "ext4_mb_scan_groups_linear"
        );
    }

    #[test]
    fn folio_and_buffer_dirtied_by_one_write_path() {
        // The folio dirtier's stack is the buffer dirtier's plus one frame: the parting
        // frame is what tells them apart.
        let n = names(&[
            (0x1000_0002, &format!("{WRITE} __folio_mark_dirty")),
            (0x1000_0002, WRITE),
        ]);
        assert_eq!(
            n,
            [
                "write(2) › ext4_buffered_write_iter › __folio_mark_dirty [wb:sync]",
                "write(2) › ext4_buffered_write_iter › mark_buffer_dirty [wb:sync]",
            ]
        );
    }

    #[test]
    fn one_intent_per_entry_parts_from_the_inside() {
        let n = names(&[
            (
                0,
                "entry_SYSCALL_64_after_hwframe do_syscall_64 __x64_sys_openat do_sys_openat2 \
                 do_filp_open path_openat ext4_create __ext4_new_inode ext4_read_inode_bitmap \
                 ext4_read_bh submit_bio_noacct_nocheck",
            ),
            (
                0x1000_0003,
                "ret_from_fork_asm ret_from_fork kthread worker_thread process_one_work \
                 wb_workfn wb_writeback writeback_sb_inodes do_writepages ext4_writepages \
                 ext4_mb_prefetch ext4_read_block_bitmap_nowait submit_bio_noacct_nocheck",
            ),
        ]);
        assert_eq!(
            n,
            [
                "openat(2) › do_filp_open › ext4_read_bh",
                "kworker wb_workfn › wb_writeback › ext4_read_block_bitmap_nowait [wb:periodic]",
            ]
        );
    }

    #[test]
    fn kernel_threads_part_where_their_paths_do() {
        let j = "ret_from_fork_asm ret_from_fork kthread kjournald2 \
                 jbd2_journal_commit_transaction";
        let n = names(&[
            (
                0,
                &format!("{j} jbd2_journal_update_sb_log_tail jbd2_write_superblock submit_bio"),
            ),
            (0, &format!("{j} submit_bio")),
            (0, &format!("{j} journal_submit_commit_record submit_bio")),
        ]);
        assert_eq!(
            n,
            [
                "kthread kjournald2 › jbd2_journal_commit_transaction › jbd2_journal_update_sb_log_tail",
                "kthread kjournald2 › jbd2_journal_commit_transaction › submit_bio",
                "kthread kjournald2 › jbd2_journal_commit_transaction › journal_submit_commit_record",
            ]
        );
    }

    #[test]
    fn other_entries_and_special_intents() {
        let stacks = vec![
            (0, vec![]),
            (0, vec![]),
            (0, st("asm_exc_page_fault exc_page_fault do_user_addr_fault handle_mm_fault do_wp_page filemap_page_mkwrite")),
            (0, st("0xffffffff81000000 0xffffffff81000010")),
            (0, vec![]),
            (0x1000_0001, vec![]),
        ];
        assert_eq!(
            name_stacks(&stacks),
            [
                "[nomem]",
                "[lost]",
                "page fault › do_wp_page › filemap_page_mkwrite",
                "0xffffffff81000000 › 0xffffffff81000010",
                "[no stack]",
                "[no stack] [wb:vmscan]",
            ]
        );
    }

    #[test]
    fn same_functions_at_other_offsets_get_their_number() {
        let n = names(&[(0, WRITE), (0, WRITE)]);
        assert_eq!(n[0], "write(2) › ext4_buffered_write_iter (#2)");
        assert_eq!(n[1], "write(2) › ext4_buffered_write_iter (#3)");
    }

    #[test]
    fn plumbing_is_only_the_entry_s_own() {
        // `generic_perform_write` ends with the syscall's name but is not its plumbing.
        let n = names(&[
            (
                0,
                "ksys_write vfs_write generic_perform_write folio_mark_dirty",
            ),
            (
                0,
                "__x64_sys_fsync do_fsync vfs_fsync_range ext4_sync_file submit_bio",
            ),
        ]);
        assert_eq!(n[0], "write(2) › generic_perform_write › folio_mark_dirty");
        assert_eq!(n[1], "fsync(2) › ext4_sync_file › submit_bio");
    }

    #[test]
    fn different_filesystems_under_one_syscall() {
        let n = names(&[
            (0, WRITE),
            (
                0,
                "entry_SYSCALL_64 do_syscall_64 __x64_sys_pwrite64 vfs_write xfs_file_write_iter \
                 xfs_file_buffered_write iomap_file_buffered_write iomap_write_iter \
                 filemap_dirty_folio",
            ),
        ]);
        // The first frames already differ: the parting frame comes from the innermost side.
        assert_eq!(
            n[0],
            "write(2) › ext4_buffered_write_iter › mark_buffer_dirty"
        );
        assert_eq!(
            n[1],
            "pwrite64(2) › xfs_file_write_iter › filemap_dirty_folio"
        );
    }

    const IO_WQ: &str = "ret_from_fork_asm ret_from_fork io_wq_worker io_worker_handle_work \
        io_wq_submit_work io_issue_sqe";

    #[test]
    fn threads_started_without_kthread() {
        // An io_uring worker runs from `ret_from_fork` without `kthread`: the thread function
        // is the first frame inside the thread start frames.
        let n = names(&[
            (
                0,
                &format!("{IO_WQ} io_write ext4_file_write_iter iomap_dio_rw submit_bio"),
            ),
            (
                0,
                &format!("{IO_WQ} io_read ext4_file_read_iter iomap_dio_rw submit_bio"),
            ),
            // Kernel threads keep their names whatever their thread start frames (x86's two,
            // arm64's one, none).
            (
                0,
                "ret_from_fork_asm ret_from_fork kthread kjournald2 submit_bio",
            ),
            (0, "ret_from_fork kthread kswapd0 shrink_folio_list"),
            (
                0x1000_0003,
                "ret_from_fork kthread worker_thread process_one_work wb_workfn \
                 ext4_writepages",
            ),
            (0, "kthread xfsaild xfsaild_push"),
        ]);
        assert_eq!(
            n,
            [
                "thread io_wq_worker › io_worker_handle_work › io_write",
                "thread io_wq_worker › io_worker_handle_work › io_read",
                "kthread kjournald2 › submit_bio",
                "kthread kswapd0 › shrink_folio_list",
                "kworker wb_workfn › ext4_writepages [wb:periodic]",
                "kthread xfsaild › xfsaild_push",
            ]
        );
        // Alone in its trace, the worker's name says where it went in.
        let n = names(&[(0, &format!("{IO_WQ} io_write submit_bio"))]);
        assert_eq!(n, ["thread io_wq_worker › io_worker_handle_work"]);
    }

    #[test]
    fn thread_entries_with_nothing_inside() {
        let n = names(&[
            (0, "ret_from_fork_asm ret_from_fork kthread"),
            (0, "ret_from_fork kthread worker_thread"),
            (
                0,
                "ret_from_fork kthread worker_thread schedule process_one_work",
            ),
            (0, "ret_from_fork_asm ret_from_fork"),
            // No `process_one_work`: a worker, not a work function.
            (0, "ret_from_fork kthread worker_thread schedule"),
        ]);
        assert_eq!(
            n,
            [
                "kthread",
                "kworker",
                "kworker › schedule › process_one_work",
                "thread",
                "kworker › schedule"
            ]
        );
    }

    #[test]
    fn unknown_outermost_frames_are_no_entry() {
        let n = names(&[
            // No entry recognised: the outermost named frame names it.
            (
                0,
                "0xffffffff81000000 0xffffffff81000010 ext4_file_write_iter iomap_dio_rw \
                 submit_bio",
            ),
            // An entry further in is found as before.
            (
                0,
                "0xffffffff81000000 do_syscall_64 ksys_write vfs_write \
                 ext4_buffered_write_iter mark_buffer_dirty",
            ),
            (
                0,
                "0xffffffff81000000 ret_from_fork kthread kjournald2 submit_bio",
            ),
            // Unknown frames further in are frames like the others.
            (0, "ext4_file_read_iter 0xffffffffc0001000 submit_bio"),
        ]);
        assert_eq!(
            n,
            [
                "ext4_file_write_iter › iomap_dio_rw",
                "write(2) › ext4_buffered_write_iter › mark_buffer_dirty",
                "kthread kjournald2 › submit_bio",
                "ext4_file_read_iter › 0xffffffffc0001000",
            ]
        );
    }

    #[test]
    fn syscall_plumbing_down_to_the_vfs() {
        let sys = "entry_SYSCALL_64_after_hwframe do_syscall_64";
        let n = names(&[
            // fdatasync shares fsync's code: `do_fsync vfs_fsync_range` reaches the VFS.
            (
                0,
                &format!(
                    "{sys} __x64_sys_fdatasync do_fsync vfs_fsync_range ext4_sync_file submit_bio"
                ),
            ),
            (
                0,
                &format!(
                    "{sys} __x64_sys_fsync do_fsync vfs_fsync_range ext4_sync_file submit_bio"
                ),
            ),
            // The VFS's own `do_*` frames inside `vfs_*` go with it.
            (
                0,
                &format!(
                    "{sys} __x64_sys_writev do_writev vfs_writev do_iter_readv_writev \
                     ext4_file_write_iter ext4_buffered_write_iter mark_buffer_dirty"
                ),
            ),
            (
                0,
                &format!(
                    "{sys} __x64_sys_pwritev2 do_pwritev vfs_writev do_iter_write \
                     do_iter_readv_writev xfs_file_write_iter filemap_dirty_folio"
                ),
            ),
            // A function named as the syscall is its own.
            (
                0,
                &format!(
                    "{sys} __x64_sys_sync_file_range ksys_sync_file_range sync_file_range \
                     __filemap_fdatawrite_range do_writepages ext4_writepages"
                ),
            ),
            // No `vfs_*` frame in the run: only the syscall's own `do_*` frames go.
            (
                0,
                &format!(
                    "{sys} __x64_sys_openat do_sys_openat2 do_filp_open path_openat \
                     ext4_lookup ext4_read_bh"
                ),
            ),
            (
                0,
                &format!(
                    "{sys} __x64_sys_exit_group do_group_exit do_exit mmput exit_mmap \
                     submit_bio"
                ),
            ),
            // The innermost frame always stays.
            (0, "__x64_sys_fdatasync do_fsync vfs_fsync_range"),
        ]);
        assert_eq!(
            n,
            [
                "fdatasync(2) › ext4_sync_file",
                "fsync(2) › ext4_sync_file",
                "writev(2) › ext4_file_write_iter › mark_buffer_dirty",
                "pwritev2(2) › xfs_file_write_iter › filemap_dirty_folio",
                "sync_file_range(2) › __filemap_fdatawrite_range › ext4_writepages",
                "openat(2) › do_filp_open › ext4_read_bh",
                "exit_group(2) › do_group_exit › exit_mmap",
                "fdatasync(2) › vfs_fsync_range",
            ]
        );
    }

    #[test]
    fn blktrace_intents_are_named_by_their_flags() {
        use crate::model::{blktrace_modifier, Intent};
        use ioblame_decode::Rwbs;
        let intent = |modifier, stack: Vec<u64>| Intent {
            modifier,
            stack,
            user: Vec::new(),
        };
        let tables = Tables {
            intents: vec![
                intent(0, vec![]),
                intent(0, vec![]),
                intent(blktrace_modifier(Rwbs::parse("WS")), vec![]),
                intent(blktrace_modifier(Rwbs::parse("RM")), vec![]),
                intent(0, vec![]),
            ],
            ..Tables::default()
        };
        let sym = |_: u64| -> Option<String> { None };
        assert_eq!(
            intent_names(&tables, &sym),
            [
                "[nomem]",
                "[lost]",
                "no stack (blktrace) WS",
                "no stack (blktrace) RM",
                "[no stack]",
            ]
        );
    }

    #[test]
    fn application_frames_lead_the_names_of_intents_with_user_stacks() {
        use crate::model::{Intent, Module, UserFrame};
        use std::sync::Arc;
        let app = Arc::new(Module {
            build_id: vec![1; 20],
            path: "/usr/bin/db".into(),
        });
        let libc = Arc::new(Module {
            build_id: vec![2; 20],
            path: "/lib/x86_64-linux-gnu/libc.so.6".into(),
        });
        let f = |m: &Arc<Module>, off: u64, name: Option<&str>| UserFrame {
            module: Some(m.clone()),
            offset: off,
            names: name.map(|n| vec![n.to_string()]).unwrap_or_default(),
        };
        let write = f(&libc, 0x10, Some("write"));
        let user = |frames: Vec<UserFrame>| Intent {
            modifier: 0,
            stack: vec![1, 2],
            user: frames,
        };
        let tables = Tables {
            intents: vec![
                Intent::default(),
                Intent::default(),
                // Two functions writing through one helper of the application.
                user(vec![
                    write.clone(),
                    f(&app, 0x100, Some("write_all_or_die")),
                    f(&app, 0x200, Some("wal_flush")),
                ]),
                user(vec![
                    write.clone(),
                    f(&app, 0x100, Some("write_all_or_die")),
                    f(&app, 0x300, Some("checkpoint")),
                ]),
                // Unsymbolized, alone with its kernel path: its first application frame.
                Intent {
                    modifier: 0,
                    stack: vec![1, 3],
                    user: vec![write, f(&app, 0x4a0, None)],
                },
                // Outside any mapping.
                Intent {
                    modifier: 0,
                    stack: vec![1, 4],
                    user: vec![UserFrame {
                        module: None,
                        offset: 0x7f00,
                        names: vec![],
                    }],
                },
            ],
            ..Tables::default()
        };
        let sym = |a: u64| -> Option<String> {
            Some(
                match a {
                    1 => "__x64_sys_write",
                    2 => "ext4_buffered_write_iter",
                    3 => "ext4_sync_file",
                    _ => "vfs_read",
                }
                .into(),
            )
        };
        let n = intent_names(&tables, &sym);
        assert!(n[2].starts_with("wal_flush › write(2)"), "{}", n[2]);
        // Through an interpreter's loop: said.
        let mut py = tables.clone();
        py.intents[4]
            .user
            .push(f(&app, 0x900, Some("_PyEval_EvalFrameDefault")));
        let p = intent_names(&py, &sym);
        assert!(
            p[4].starts_with("db+0x4a0 [python interpreter] › write(2)"),
            "{}",
            p[4]
        );
        assert!(n[3].starts_with("checkpoint › write(2)"), "{}", n[3]);
        assert!(n[4].starts_with("db+0x4a0 › write(2)"), "{}", n[4]);
        // Nothing but a frame outside every mapping: no user part to lead with.
        assert!(!n[5].contains("unknown"), "{}", n[5]);
    }

    #[test]
    fn application_frames_skip_the_leading_library_frames_and_stop_astray() {
        use crate::model::{Module, UserFrame};
        use std::sync::Arc;
        let m = |path: &str| {
            Arc::new(Module {
                build_id: vec![1; 20],
                path: path.into(),
            })
        };
        let (app, libc, vdso) = (m("/usr/bin/db"), m("/lib/libc.so.6"), m("[vdso]"));
        let f = |m: Option<&Arc<Module>>, name: &str| UserFrame {
            module: m.cloned(),
            offset: 0x10,
            names: vec![name.to_string()],
        };
        let label = |u: &[UserFrame]| -> Vec<String> {
            application_frames(u).iter().map(user_frame_label).collect()
        };
        let stack = [
            f(Some(&vdso), "__vdso_clock_gettime"),
            f(Some(&libc), "write"),
            f(Some(&app), "wal_append"),
            f(Some(&libc), "__libc_start_call_main"),
            f(Some(&app), "_start"),
        ];
        // Leading library frames skipped, later ones kept (as the name's lead reads them).
        assert_eq!(
            label(&stack),
            ["wal_append", "__libc_start_call_main", "_start"]
        );
        // A frame of the application's own copy of the C or Rust library is a library's.
        let linked = [f(Some(&app), "__libc_write"), f(Some(&app), "main")];
        assert_eq!(label(&linked), ["main"]);
        // From the first frame outside every mapping on, nothing is trusted.
        let astray = [
            f(Some(&libc), "write"),
            f(Some(&app), "wal_append"),
            f(None, "x"),
            f(Some(&app), "main"),
        ];
        assert_eq!(label(&astray), ["wal_append"]);
        // Only library frames: kept, from the first.
        let lib = [f(Some(&libc), "open"), f(None, "x")];
        assert_eq!(label(&lib), ["open"]);
        assert!(application_frames(&[f(None, "x")]).is_empty());
        assert!(application_frames(&[]).is_empty());
    }
}
