//! What an entry of the event registry ([`crate::table`]) says about a tracepoint, the
//! recording sets, and the macros the table is written with.

use crate::event::EventKind;
use crate::field::{Payload, Read};

/// Builds an event's kind from its payload into the event already in place (in the decoded
/// chunk's vector): returning the kind by value, through the function pointer, made the
/// caller copy each one from the stack where it had just been written piecewise, and that
/// reload waited on the stores (a third of the decoding time).
pub type Build = fn(&Payload<'_>, &mut EventKind) -> Read<()>;

/// One tracepoint ioblame knows: an entry of [`EVENTS`](crate::table::EVENTS).
#[derive(Debug, Clone, Copy)]
pub struct EventDef {
    /// `subsystem:name` on current kernels.
    pub name: &'static str,
    /// The names of the same tracepoint on older kernels, recorded when `name` is absent and
    /// decoded like it.
    pub aliases: &'static [&'static str],
    /// The smallest recording set that holds it (the sets nest: minimal, default, full);
    /// `None`: recorded only when named on the command line.
    pub set: Option<Set>,
    /// Whether its samples carry a kernel callchain: its stack is the intent of the IO.
    pub callchain: bool,
    /// Whether the recorder may leave its callchain out (`--stacks exact`): the analyzer then
    /// gives it the stack of its thread's dirtying event (see docs/attribution.md, "Stacks
    /// of dirty buffers").
    pub stack_from_folio: bool,
    /// Its own in-kernel filter, besides the device filter every event with a device field
    /// gets.
    pub filter: Option<Filter>,
    /// The fields its typed event reads, by name: `build` reads the `i`th of them as field
    /// `i` of its [`Payload`].
    pub fields: &'static [FieldDecl],
    /// Builds its typed event; `None`: it decodes as [`EventKind::Other`].
    pub build: Option<Build>,
}

impl EventDef {
    /// Whether `name` is this tracepoint's name or one of its older ones.
    pub fn is_named(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
    /// The fields that name the inode the event refers to, as (device, inode): the device is
    /// an integer `dev` or `s_dev` (kernel encoding), or the bdi `name` (the text
    /// `MAJ:MIN`); `None` when the event names no inode. The recorder names these inodes.
    pub fn inode_fields(&self) -> Option<(&'static FieldDecl, &'static FieldDecl)> {
        let ino = self
            .fields
            .iter()
            .find(|f| !f.string && f.names().any(|n| n == "ino" || n == "i_ino"))?;
        let dev = self
            .fields
            .iter()
            .find(|f| f.names().any(|n| n == "dev" || n == "s_dev" || n == "name"))?;
        Some((dev, ino))
    }
}

/// A field a typed event reads, as its registry entry declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDecl {
    /// The field's name; `a|b`: `a`, or `b` on kernels that name it so; a trailing `?`:
    /// absent on some kernels, read as 0 there.
    pub decl: &'static str,
    /// Read as a string (a `char[N]` or a `__data_loc` array), not as an integer.
    pub string: bool,
}

impl FieldDecl {
    /// The names the field may have, the current one first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        self.decl.trim_end_matches('?').split('|')
    }
    /// Whether a kernel may lack the field.
    pub fn optional(&self) -> bool {
        self.decl.ends_with('?')
    }
}

/// An in-kernel filter of one tracepoint (perf's `--filter`, tracefs' `filter` syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    /// The expression.
    pub expr: &'static str,
    /// A field declaration (`TYPE NAME`, as the format writes it) the event's format must
    /// have for the filter to apply: kernels without that field would reject it.
    pub requires: Option<&'static str>,
    /// A tracepoint (`subsystem:name`) that must be recorded too for the filter to apply:
    /// what the filter drops is worth recording on kernels without it (`None`: always).
    pub applies_with: Option<&'static str>,
}

/// A predefined set of tracepoints to record. The sets nest: what `minimal` holds, `default`
/// holds; what `default` holds, `full` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Set {
    /// The block layer core, the dirtiers and the map events.
    Minimal,
    /// What the attribution needs on ext4, xfs and generic paths.
    Default,
    /// `default` and the events of each write call, page faults and plugging.
    Full,
}

impl Set {
    /// Every set, in the order they are listed to users.
    pub const ALL: [Set; 3] = [Set::Default, Set::Minimal, Set::Full];

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Set::Minimal => "minimal",
            Set::Default => "default",
            Set::Full => "full",
        }
    }

    /// A one-line description.
    pub const fn description(self) -> &'static str {
        match self {
            Set::Default => "everything the attribution needs on ext4, xfs and generic paths",
            Set::Minimal => "block layer core, dirtiers and the map events only",
            Set::Full => "default + per-write-call events, page faults and plugging",
        }
    }

    /// The set of this name.
    pub fn from_name(name: &str) -> Option<Set> {
        Set::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether this set holds the tracepoint.
    pub fn holds(self, def: &EventDef) -> bool {
        def.set.is_some_and(|s| s <= self)
    }
}

/// `None`, or `Some` of the expression.
macro_rules! option {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}

/// `false`, or the expression.
macro_rules! flag {
    () => {
        false
    };
    ($e:expr) => {
        $e
    };
}

/// Whether a [`Payload`] reader gives a string.
macro_rules! reads_string {
    (rwbs) => {
        true
    };
    (bdi) => {
        true
    };
    (string) => {
        true
    };
    (uuid) => {
        true
    };
    ($int:ident) => {
        false
    };
}

/// The builder of a typed event: `member: reader = "field"` reads field `"field"` with the
/// [`Payload`] method `reader` into `member`, by its position in the list; `member: value`
/// after the `;` sets a constant. The positions are an enum's discriminants, constants the
/// compiler folds: each read is a bounds-checked load at a fixed slot, as written by hand.
macro_rules! builder {
    ($kind:ident { $($m:ident : $r:ident),* ; $($cm:ident : $cv:expr),* }) => {{
        #[inline]
        fn build(
            p: &$crate::field::Payload<'_>,
            out: &mut $crate::event::EventKind,
        ) -> $crate::field::Read<()> {
            /// The position of each member's field in the entry's field list.
            #[allow(non_camel_case_types)]
            enum At { $($m),* }
            *out = $crate::event::EventKind::$kind {
                $($m: p.$r(At::$m as usize)?,)*
                $($cm: $cv,)*
            };
            Ok(())
        }
        build as $crate::entry::Build
    }};
}

/// Declares the registry: the table [`EVENTS`](crate::table::EVENTS) and
/// [`builtin_format`](crate::table::builtin_format), the format text of
/// each entry, from `crates/events/formats/<subsystem>_<name>.format`.
///
/// An entry is `"subsystem":"name" { ... }` with, in this order and each optional:
/// `aliases: ["subsystem:older_name", ...],`, `set: Minimal|Default|Full,`,
/// `callchain: true,`, `stack_from_folio: true,`, `filter: FILTER,` and
/// `kind: Variant { member: reader = "field", ... ; member: constant, ... },`.
macro_rules! registry {
    ($(
        $sys:literal : $ev:literal {
            $(aliases: [$($alias:literal),* $(,)?],)?
            $(set: $set:ident,)?
            $(callchain: $cc:literal,)?
            $(stack_from_folio: $sf:literal,)?
            $(filter: $filter:expr,)?
            $(kind: $kind:ident {
                $($m:ident : $r:ident = $f:literal),* $(,)?
                $(; $($cm:ident : $cv:expr),* $(,)?)?
            },)?
        }
    )*) => {
        /// Every tracepoint ioblame knows, in the order the `default` set records them (then
        /// those only `full` adds, then those of no set).
        pub static EVENTS: &[$crate::entry::EventDef] = &[$(
            $crate::entry::EventDef {
                name: concat!($sys, ":", $ev),
                aliases: &[$($($alias),*)?],
                set: option!($($crate::entry::Set::$set)?),
                callchain: flag!($($cc)?),
                stack_from_folio: flag!($($sf)?),
                filter: option!($($filter)?),
                fields: &[$($(
                    $crate::entry::FieldDecl { decl: $f, string: reads_string!($r) }
                ),*)?],
                build: option!($(builder!($kind { $($m : $r),* ; $($($cm : $cv),*)? }))?),
            },
        )*];

        /// The format text of a registry entry (`subsystem:name`, its current name) on the
        /// kernel the registry's format files come from (`crates/events/formats`): for
        /// synthetic traces.
        pub fn builtin_format(name: &str) -> Option<&'static str> {
            match name {
                $(concat!($sys, ":", $ev) => Some(include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"), "/formats/", $sys, "_", $ev, ".format"
                ))),)*
                _ => None,
            }
        }
    };
}

pub(crate) use {builder, flag, option, reads_string, registry};
