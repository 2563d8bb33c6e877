//! What ioblame knows about each kernel tracepoint, in one place.
//!
//! * [`table`]: the event registry, one entry per tracepoint: its name and older names, the
//!   recording set that holds it, whether it carries a kernel stack, its in-kernel filter,
//!   and how its typed event is built from the fields it reads by name;
//! * [`registry`]: what an entry holds ([`EventDef`]), the sets ([`Set`]), lookups
//!   ([`find`]) and the lists derived from the table ([`CALLCHAIN_EVENTS`], [`RENAMES`]);
//! * [`event`]: the typed events the attribution consumes ([`Event`], [`EventKind`]);
//! * [`field`]: payload fields and the reader the builders use ([`Payload`]).
//!
//! The recorder (`ioblame-tracepoints`, `ioblame-capture`), the `perf record` command line
//! (`ioblame-perfdata`), the decoder and its synthetic traces (`ioblame-decode`) and the
//! benchmark generator all derive from the table. This crate is light on purpose: the
//! recorder links it.
//!
//! ```
//! use ioblame_events::{find, Set};
//! let q = find("block:block_bio_queue").unwrap();
//! assert!(q.callchain && Set::Minimal.holds(q));
//! let fields: Vec<&str> = q.fields.iter().map(|f| f.decl).collect();
//! assert_eq!(fields, ["dev", "sector", "nr_sector", "rwbs"]);
//! // An older name finds the same entry.
//! let folio = find("writeback:writeback_dirty_page").unwrap();
//! assert_eq!(folio.name, "writeback:writeback_dirty_folio");
//! ```
#![deny(missing_docs)]

mod entry;
pub mod event;
pub mod field;
pub mod registry;
pub mod table;

pub use event::*;
pub use field::{Payload, Read, Unreadable};
pub use registry::{
    find, typed_names, Build, EventDef, FieldDecl, Filter, Set, CALLCHAIN_EVENTS, OLDER_FORMS,
    RENAMES, STACK_FROM_FOLIO_EVENTS,
};
pub use table::{builtin_format, EVENTS};

#[cfg(test)]
mod tests;
