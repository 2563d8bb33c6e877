//! The event registry's lookups: an entry by name, and the lists derived from the table
//! ([`crate::table`]) for the recorder and the decoder. What an entry holds is
//! [`EventDef`].

pub use crate::entry::{Build, EventDef, FieldDecl, Filter, Set};
use crate::table::EVENTS;

impl Set {
    /// The names of its tracepoints, in [`EVENTS`] order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        EVENTS.iter().filter(move |d| self.holds(d)).map(|d| d.name)
    }
}

/// `a == b`, in a `const fn`.
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The entry of the tracepoint named `name` (its current or an older name). Usable in
/// constants: a name that must be in the registry can be checked at compile time.
pub const fn find(name: &str) -> Option<&'static EventDef> {
    let mut i = 0;
    while i < EVENTS.len() {
        let d = &EVENTS[i];
        if str_eq(d.name, name) {
            return Some(d);
        }
        let mut j = 0;
        while j < d.aliases.len() {
            if str_eq(d.aliases[j], name) {
                return Some(d);
            }
            j += 1;
        }
        i += 1;
    }
    None
}

/// The names (current and older) of the tracepoints the decoder turns into typed events.
pub fn typed_names() -> impl Iterator<Item = &'static str> {
    EVENTS
        .iter()
        .filter(|d| d.build.is_some())
        .flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()))
}

/// Whether entry `d` is in the list `which` (0: callchain, 1: stack from folio).
const fn listed(d: &EventDef, which: u8) -> bool {
    match which {
        0 => d.callchain,
        _ => d.stack_from_folio,
    }
}

const fn callchain_count(which: u8) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < EVENTS.len() {
        if listed(&EVENTS[i], which) {
            n += 1 + EVENTS[i].aliases.len();
        }
        i += 1;
    }
    n
}

const fn callchain_names<const N: usize>(which: u8) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut n, mut i) = (0, 0);
    while i < EVENTS.len() {
        let d = &EVENTS[i];
        if listed(d, which) {
            out[n] = d.name;
            n += 1;
            let mut j = 0;
            while j < d.aliases.len() {
                out[n] = d.aliases[j];
                n += 1;
                j += 1;
            }
        }
        i += 1;
    }
    out
}

/// The tracepoints whose kernel stack is the intent, by every name they have: they are
/// recorded with a callchain (the entries with `callchain: true`).
pub const CALLCHAIN_EVENTS: &[&str] = &callchain_names::<{ callchain_count(0) }>(0);

/// The stack events whose callchain the recorder leaves out by default (`--stacks exact`),
/// by every name they have: the analyzer gives each the stack of its thread's dirtying
/// event (the entries with `stack_from_folio: true`).
pub const STACK_FROM_FOLIO_EVENTS: &[&str] = &callchain_names::<{ callchain_count(1) }>(1);

const fn rename_count() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < EVENTS.len() {
        n += EVENTS[i].aliases.len();
        i += 1;
    }
    n
}

const fn renames<const N: usize>() -> [(&'static str, &'static str); N] {
    let mut out = [("", ""); N];
    let (mut n, mut i) = (0, 0);
    while i < EVENTS.len() {
        let d = &EVENTS[i];
        let mut j = 0;
        while j < d.aliases.len() {
            out[n] = (d.name, d.aliases[j]);
            n += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// Older names to fall back on when the current one is absent: (current, older), from the
/// entries' `aliases`.
pub const RENAMES: &[(&str, &str)] = &renames::<{ rename_count() }>();

/// Entries of the registry that are an older kernel's form of another entry, recorded
/// besides it because a kernel may define both names and fire only the older one (Debian's
/// 5.10 defines `iomap_iter_dstmap` and maps through `iomap_apply_dstmap`): (older entry,
/// newer entry). A kernel without the older one lacks nothing when it has the newer.
pub const OLDER_FORMS: &[(&str, &str)] = &[("iomap:iomap_apply_dstmap", "iomap:iomap_iter_dstmap")];
