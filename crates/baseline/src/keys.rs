//! Stable keys: what makes the groups of two runs (or two hosts) comparable.
//!
//! Everything that changes between runs of the same workload is normalised away: pids and
//! per-CPU or per-device digits in command names, kernel addresses and offsets in stack
//! frames, inode numbers, per-run digits in paths.

use std::fmt;

use ioblame_attrib::WbReason;
use serde::{Deserialize, Serialize};

/// Writeback reasons, coarsened to what the application controls.
///
/// The flusher's own reasons (`background`, `periodic`, `laptop_timer`, `forker_thread`,
/// `foreign_flush`, `fs_free_space`) depend on timing and on the host's dirty limits, so one
/// run may see `periodic` where the next sees `background`: they share the class `flusher`.
/// `sync` (sync(2), syncfs) and `vmscan` (memory pressure; RHEL 8's `free_more_mem` too) are
/// distinct behaviours, and `none` means the task issued the IO itself (fsync, O_DIRECT,
/// reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum ReasonClass {
    /// Not issued by writeback.
    None,
    /// Issued by the flusher on its own schedule (background, periodic, ...).
    Flusher,
    /// Writeback started by sync(2) or syncfs(2).
    Sync,
    /// Writeback started by page reclaim.
    Vmscan,
}

impl ReasonClass {
    /// The class of a writeback reason (`None`: not writeback).
    pub fn of(reason: Option<WbReason>) -> ReasonClass {
        match reason.map(|r| r.0) {
            None => ReasonClass::None,
            // vmscan, and RHEL 8's free_more_mem (a buffer allocation that failed for
            // memory: reclaim by another name).
            Some(1) | Some(8) => ReasonClass::Vmscan,
            Some(2) => ReasonClass::Sync,
            Some(_) => ReasonClass::Flusher,
        }
    }

    /// The class of an intent modifier (`0x10000000 | reason` for writeback).
    pub fn of_modifier(modifier: u32) -> ReasonClass {
        if modifier & 0x1000_0000 != 0 {
            ReasonClass::of(Some(WbReason(modifier & 0x0fff_ffff)))
        } else {
            ReasonClass::None
        }
    }

    /// The name used in the baseline file.
    pub fn name(self) -> &'static str {
        match self {
            ReasonClass::None => "none",
            ReasonClass::Flusher => "flusher",
            ReasonClass::Sync => "sync",
            ReasonClass::Vmscan => "vmscan",
        }
    }

    /// The class by its name.
    pub fn from_name(s: &str) -> Option<ReasonClass> {
        [
            ReasonClass::None,
            ReasonClass::Flusher,
            ReasonClass::Sync,
            ReasonClass::Vmscan,
        ]
        .into_iter()
        .find(|c| c.name() == s)
    }
}

/// A writeback reason class name that is not one ([`ReasonClass`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown writeback reason class '{0}' (expected none, flusher, sync or vmscan)")]
pub struct UnknownReasonClass(pub String);

impl TryFrom<String> for ReasonClass {
    type Error = UnknownReasonClass;
    fn try_from(s: String) -> Result<Self, UnknownReasonClass> {
        ReasonClass::from_name(&s).ok_or(UnknownReasonClass(s))
    }
}

impl fmt::Display for ReasonClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Separators after which a run of digits is taken as a varying number.
const SEPARATORS: &[char] = &['-', '_', ':', '.', '#', '@', ' ', ',', '=', '+'];

/// The role pattern of a command name.
///
/// Kernel threads named `base/instance` (`kworker/u8:1`, `kworker/u8:0-flush-7:0`,
/// `jbd2/loop3-8`, `ksoftirqd/0`) become `base/*`. Elsewhere a run of digits that follows
/// a separator (`-_:.#@ ,=+`) or starts the name becomes `*` (`worker-3` -> `worker-*`);
/// digits glued to letters are kept (`python3`, `kswapd0`), and a plain name like `writerA`
/// stays as is. An empty name is `?`.
pub fn role_pattern(comm: &str) -> String {
    let comm = comm.trim();
    if comm.is_empty() {
        return "?".to_string();
    }
    if let Some(i) = comm.find('/') {
        if i > 0 {
            return format!("{}/*", &comm[..i]);
        }
    }
    replace_numbers(comm, |prev| prev.is_none_or(|p| SEPARATORS.contains(&p)))
}

/// The file pattern of a path (`-` when the path is not known).
///
/// Runs of digits that follow a non-alphanumeric character (`000123.sst`, `app.4711.log`,
/// `/proc/1234/`) or are at least four digits long become `*`; under `/dev/` every run of
/// digits does (`/dev/loop3` -> `/dev/loop*`), and `mktemp` names (`tmp.` and ten
/// characters) become `tmp.*`, as do the temporary names of Rust's `tempfile` (`.tmp` and six
/// characters: `.tmp*`) and Python's `tempfile` (`tmp` and eight: `tmp*`). Hand-edited
/// baselines may use any glob.
pub fn file_pattern(path: Option<&str>) -> String {
    let Some(path) = path.map(str::trim).filter(|p| !p.is_empty()) else {
        return "-".to_string();
    };
    let dev = path.starts_with("/dev/");
    let mut out = String::with_capacity(path.len());
    for (i, comp) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if let Some(rest) = comp.strip_prefix("tmp.") {
            if rest.len() >= 6 && rest.chars().all(|c| c.is_ascii_alphanumeric()) {
                out.push_str("tmp.*");
                continue;
            }
        }
        // The Rust `tempfile` crate's `.tmpXXXXXX` and Python's `tmpXXXXXXXX`.
        if let Some(rest) = comp.strip_prefix(".tmp") {
            if rest.len() == 6 && rest.chars().all(|c| c.is_ascii_alphanumeric()) {
                out.push_str(".tmp*");
                continue;
            }
        }
        if let Some(rest) = comp.strip_prefix("tmp") {
            if rest.len() == 8
                && rest
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                out.push_str("tmp*");
                continue;
            }
        }
        out.push_str(&replace_numbers_long(comp, dev));
    }
    out
}

/// Replaces digit runs for which `varies(previous char)` holds by `*`.
fn replace_numbers(s: &str, varies: impl Fn(Option<char>) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev: Option<char> = None;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() && varies(prev) {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
            if !out.ends_with('*') {
                out.push('*');
            }
            prev = Some('0');
            continue;
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

/// Path component variant of [`replace_numbers`]: also long runs, and every run when `all`.
fn replace_numbers_long(s: &str, all: bool) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let after_sep = start == 0 || !chars[start - 1].is_ascii_alphanumeric();
            if all || after_sep || i - start >= 4 {
                if !out.ends_with('*') {
                    out.push('*');
                }
            } else {
                out.extend(&chars[start..i]);
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Innermost frames that say how an IO or a dirtying happened in general, not which code
/// path did it: dropped from the front of a stack before the distinctive frames are kept.
const GENERIC_FRAMES: &[&str] = &[
    "?",
    "submit_bio_noacct_nocheck",
    "submit_bio_noacct",
    "submit_bio",
    "__submit_bio",
    "submit_bio_wait",
    "submit_bh",
    "submit_bh_wbc",
    "blk_mq_submit_bio",
    "__folio_mark_dirty",
    "folio_mark_dirty",
    "filemap_dirty_folio",
    "block_dirty_folio",
    "noop_dirty_folio",
    "folio_account_dirtied",
    "__set_page_dirty",
    "set_page_dirty",
    "__set_page_dirty_nobuffers",
    "mark_buffer_dirty",
    "mark_buffer_dirty_inode",
    "__mark_inode_dirty",
    "mark_inode_dirty",
    "block_commit_write",
    "block_write_end",
    "generic_write_end",
    "iomap_write_end",
    "__iomap_write_end",
];

/// The bare function name of a symbolized frame: no `[address]` prefix, `+0xoff/0xsize`,
/// ` [module]` or compiler suffix (`.isra.0`, `.constprop.0`, `.part.0`, `.cold`); an
/// unresolved frame (a bare address) is `?`.
pub fn frame_name(raw: &str) -> String {
    let mut s = raw.trim();
    if s.starts_with('[') {
        if let Some(end) = s.find(']') {
            s = s[end + 1..].trim_start();
        }
    }
    let s = s.split_whitespace().next().unwrap_or("");
    let s = s.split('+').next().unwrap_or("");
    let s = s.split('.').next().unwrap_or("");
    let hex = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || (hex.len() >= 8 && hex.chars().all(|c| c.is_ascii_hexdigit())) {
        return "?".to_string();
    }
    s.to_string()
}

/// The intent key of a stack: the bare names of its frames (innermost first), the generic
/// innermost frames dropped, at most `depth` frames kept.
///
/// When every frame is generic, the first `depth` frames are kept as they are.
pub fn intent_frames<S: AsRef<str>>(frames: &[S], depth: usize) -> Vec<String> {
    let names: Vec<String> = frames.iter().map(|f| frame_name(f.as_ref())).collect();
    let start = names
        .iter()
        .position(|n| !GENERIC_FRAMES.contains(&n.as_str()))
        .unwrap_or(0);
    names.into_iter().skip(start).take(depth).collect()
}

/// Compiler suffixes of a function's clones and split parts (GCC's `.cold`, `.isra.0`,
/// `.constprop.0`, `.part.0`, `.lto_priv.0`, `.localalias`, `.clone.0`; LLVM's
/// `.llvm.NNNN`): they name how one build compiled the function, not which function it is.
const CLONE_SUFFIXES: &[&str] = &[
    "cold",
    "isra",
    "constprop",
    "part",
    "lto_priv",
    "localalias",
    "clone",
    "llvm",
];

/// `name` without the compiler's clone suffixes at its end ([`CLONE_SUFFIXES`], each with
/// the numbers that follow it, and C++'s demangled ` [clone .cold]` forms). Dots that are
/// part of the name stay (`main.(*DB).Write` in Go, `main.main.func1.1`).
fn without_clone_suffixes(name: &str) -> &str {
    let mut name = name.trim();
    while let Some(head) = name
        .strip_suffix(']')
        .and_then(|n| n.rsplit_once(" [clone ."))
        .map(|(head, _)| head.trim_end())
    {
        name = head;
    }
    let mut cut = name.len();
    let mut rest = name;
    while let Some((head, tail)) = rest.rsplit_once('.') {
        if CLONE_SUFFIXES.contains(&tail) {
            cut = head.len();
        } else if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        rest = head;
    }
    if cut == 0 {
        name
    } else {
        &name[..cut]
    }
}

/// The key of one user frame, given by its label (`ioblame_attrib::names::user_frame_label`:
/// the function's name, or `MODULE+0xOFFSET` when nothing named it, or `[unknown]`).
///
/// A function is its name without the compiler's clone suffixes (`checkpoint.isra.0` ->
/// `checkpoint`; C++ and Rust names as demangled, Go's with their dots). A frame nothing
/// named is its module's file name and `+?` (`iowork+0x12d5` -> `iowork+?`): the offset
/// changes with every build of the module, so it is dropped, and the frames of one
/// unsymbolized module all share the key (as unresolved kernel frames are all `?`). A JIT's
/// anonymous code is `anon:*+?` (its module names the process: `anon:4242+0x7f...`); a frame
/// outside every mapping, `?`.
pub fn user_frame_key(label: &str) -> String {
    let label = label.trim();
    if label.is_empty() || label.starts_with("[unknown]") {
        return "?".to_string();
    }
    if let Some((module, hex)) = label.rsplit_once("+0x") {
        let offset = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if offset && !module.is_empty() && !module.contains(char::is_whitespace) {
            let module = if module.starts_with("anon:") {
                "anon:*"
            } else {
                module
            };
            return format!("{module}+?");
        }
    }
    without_clone_suffixes(label).to_string()
}

/// The user key of an intent: the keys ([`user_frame_key`]) of its first `depth` frames
/// that name the application, innermost first. `labels` are those frames' labels, as
/// `ioblame_attrib::names::application_frames` selects them (the C library's system call
/// wrapper and other leading library frames skipped, nothing past a frame outside every
/// mapping) and `ioblame_attrib::names::user_frame_label` writes them.
pub fn user_key<S: AsRef<str>>(labels: &[S], depth: usize) -> Vec<String> {
    labels
        .iter()
        .take(depth)
        .map(|l| user_frame_key(l.as_ref()))
        .collect()
}

/// Whether `text` matches the glob `pattern`: `*` matches any run of characters (`/`
/// included), `?` any one character, everything else itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Position after the last `*` seen and the text position it is trying to cover up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi + 1, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles() {
        assert_eq!(role_pattern("kworker/u8:1"), "kworker/*");
        assert_eq!(role_pattern("kworker/u8:0-flush-7:0"), "kworker/*");
        assert_eq!(role_pattern("jbd2/loop3-8"), "jbd2/*");
        assert_eq!(role_pattern("writerA"), "writerA");
        assert_eq!(role_pattern("python3"), "python3");
        assert_eq!(role_pattern("worker-12"), "worker-*");
        assert_eq!(role_pattern("pool-1-thread-2"), "pool-*-thread-*");
        assert_eq!(role_pattern(""), "?");
    }

    #[test]
    fn files() {
        assert_eq!(file_pattern(None), "-");
        assert_eq!(file_pattern(Some("/data/out.bin")), "/data/out.bin");
        assert_eq!(file_pattern(Some("/db/000123.sst")), "/db/*.sst");
        assert_eq!(
            file_pattern(Some("/var/log/app.4711.log")),
            "/var/log/app.*.log"
        );
        assert_eq!(file_pattern(Some("/mnt/ext4/f")), "/mnt/ext4/f");
        assert_eq!(file_pattern(Some("/dev/loop3")), "/dev/loop*");
        assert_eq!(file_pattern(Some("/tmp/tmp.Ab3dEf9hIj/x")), "/tmp/tmp.*/x");
        assert_eq!(file_pattern(Some("/tmp/.tmpAb3dEf/x")), "/tmp/.tmp*/x");
        assert_eq!(file_pattern(Some("/tmp/tmpk3_d9x0a/x")), "/tmp/tmp*/x");
        assert_eq!(file_pattern(Some("/srv/tmpfiles/x")), "/srv/tmpfiles/x");
        assert_eq!(file_pattern(Some("/srv/data20240101")), "/srv/data*");
    }

    #[test]
    fn frames() {
        assert_eq!(
            frame_name("[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330"),
            "__mark_inode_dirty"
        );
        assert_eq!(
            frame_name("ext4_da_write_end+0x1c/0x2a0 [ext4]"),
            "ext4_da_write_end"
        );
        assert_eq!(frame_name("iomap_dio_rw.isra.0+0x10"), "iomap_dio_rw");
        assert_eq!(frame_name("0xffffffffc0a01234"), "?");
        assert_eq!(frame_name("ffffffffc0a01234"), "?");
        let stack = [
            "__folio_mark_dirty+0x10/0x300",
            "mark_buffer_dirty+0x40/0x100",
            "block_commit_write+0x10/0x80",
            "block_write_end+0x30/0x50",
            "ext4_da_write_end+0x50/0x300",
            "generic_perform_write+0x100/0x200",
            "ext4_buffered_write_iter+0x50/0x100",
            "vfs_write+0x200/0x400",
            "ksys_write+0x60/0xe0",
        ];
        assert_eq!(
            intent_frames(&stack, 4),
            [
                "ext4_da_write_end",
                "generic_perform_write",
                "ext4_buffered_write_iter",
                "vfs_write"
            ]
        );
        assert_eq!(
            intent_frames(&["submit_bio", "submit_bh"], 4),
            ["submit_bio", "submit_bh"]
        );
        assert!(intent_frames::<&str>(&[], 4).is_empty());
    }

    #[test]
    fn user_frames() {
        assert_eq!(user_frame_key("wal_append"), "wal_append");
        assert_eq!(user_frame_key("checkpoint.isra.0"), "checkpoint");
        assert_eq!(
            user_frame_key("checkpoint.constprop.0.isra.0"),
            "checkpoint"
        );
        assert_eq!(user_frame_key("scan_table.cold"), "scan_table");
        assert_eq!(user_frame_key("flush.llvm.1234567890"), "flush");
        assert_eq!(
            user_frame_key("db::Wal::append(unsigned long) [clone .cold]"),
            "db::Wal::append(unsigned long)"
        );
        // Dots that belong to the name stay.
        assert_eq!(user_frame_key("main.(*DB).Write"), "main.(*DB).Write");
        assert_eq!(user_frame_key("main.main.func1.1"), "main.main.func1.1");
        assert_eq!(user_frame_key(".cold"), ".cold");
        assert_eq!(
            user_frame_key("<db::Wal as std::io::Write>::write"),
            "<db::Wal as std::io::Write>::write"
        );
        // Unsymbolized: the module, not the offset that moves with every build.
        assert_eq!(user_frame_key("iowork+0x12d5"), "iowork+?");
        assert_eq!(user_frame_key("libc.so.6+0x2724a"), "libc.so.6+?");
        assert_eq!(user_frame_key("anon:4242+0x7f00dead0000"), "anon:*+?");
        assert_eq!(user_frame_key("[unknown]"), "?");
        assert_eq!(user_frame_key("[unknown] 0x7f00"), "?");
        assert_eq!(user_frame_key("jitted_fn [jit]"), "jitted_fn [jit]");
        assert_eq!(
            user_key(&["wal_append", "main", "libc.so.6+0x2724a"], 2),
            ["wal_append", "main"]
        );
        assert_eq!(
            user_key(&["iowork+0x1293", "main"], 4),
            ["iowork+?", "main"]
        );
        assert!(user_key(&["wal_append"], 0).is_empty());
        assert!(user_key::<&str>(&[], 2).is_empty());
    }

    /// The labels the key reads are the attribution's own (`user_frame_label`): an
    /// unsymbolized frame keyed by its module whatever its offset.
    #[test]
    fn user_frame_keys_read_the_attributions_labels() {
        use ioblame_attrib::names::{application_frames, user_frame_label};
        use ioblame_attrib::{Module, UserFrame};
        use std::sync::Arc;
        let m = |path: &str| {
            Some(Arc::new(Module {
                build_id: vec![7; 20],
                path: path.into(),
            }))
        };
        let f = |module, offset, name: Option<&str>| UserFrame {
            module,
            offset,
            names: name.map(|n| vec![n.to_string()]).unwrap_or_default(),
        };
        let key = |user: &[UserFrame]| -> Vec<String> {
            let labels: Vec<String> = application_frames(user)
                .iter()
                .map(user_frame_label)
                .collect();
            user_key(&labels, 3)
        };
        let build = |off: u64| {
            vec![
                f(m("/lib/x86_64-linux-gnu/libc.so.6"), 0xf8350, Some("write")),
                f(m("/usr/local/bin/iowork"), off, None),
                f(m("/usr/local/bin/iowork"), off + 0x100, Some("main")),
                f(m("//anon:4242"), 0x7f00_0000_0000 + off, None),
                f(None, 0x10, None),
                f(m("/usr/local/bin/iowork"), 0x10, Some("never_reached")),
            ]
        };
        assert_eq!(key(&build(0x1293)), ["iowork+?", "main", "anon:*+?"]);
        assert_eq!(key(&build(0x1293)), key(&build(0x2000)));
    }

    #[test]
    fn globs() {
        assert!(glob_match("kworker/*", "kworker/*"));
        assert!(glob_match("kworker/*", "kworker/u8:1"));
        assert!(glob_match("/db/*.sst", "/db/*.sst"));
        assert!(glob_match("/db/*.sst", "/db/a/b.sst"));
        assert!(!glob_match("/db/*.sst", "/db/a.log"));
        assert!(glob_match("w?iter*", "writerA"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }
}
