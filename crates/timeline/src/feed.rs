//! The timeline's side of an analysis ([`Feed`]): a [`Builder`] fed from the analysis's
//! observers, which hand values by shared reference (one closure each).

use std::cell::RefCell;

use ioblame_attrib::{Dirtied, Io, Tables};
use ioblame_decode::{Event, EventKind};

use crate::build::{Builder, Collected};
use crate::RUN_GAP_NS;

/// A builder fed the fsyncs among the decoded events, the charged IOs (the recorder's own,
/// unless shown, only as their device's queue) and what each role dirtied.
pub struct Feed {
    b: RefCell<Builder>,
    show_recorder: bool,
}

impl Feed {
    /// A feed for a trace of pages of `page_size` bytes; the recorder's IO drawn when
    /// `show_recorder`.
    pub fn new(page_size: u64, show_recorder: bool) -> Feed {
        Feed {
            b: RefCell::new(Builder::new(RUN_GAP_NS, page_size)),
            show_recorder,
        }
    }

    /// A decoded event.
    pub fn event(&self, ev: &Event) {
        if let EventKind::Ext4SyncFile { dev, ino, exit } = ev.kind {
            self.b
                .borrow_mut()
                .fsync(ev.time, (ev.pid, ev.tid), dev, ino, exit);
        }
    }

    /// A charged IO in the scope.
    pub fn io(&self, io: &Io, tables: &Tables) {
        // The recorder's own IO, as in the other outputs, only when shown; it held the
        // device either way.
        if tables.act(io.act).is_some_and(|a| a.recorder) && !self.show_recorder {
            self.b.borrow_mut().outside(io);
        } else {
            self.b.borrow_mut().io(io, tables);
        }
    }

    /// A charged IO the scope leaves out.
    pub fn outside(&self, io: &Io) {
        self.b.borrow_mut().outside(io);
    }

    /// What a role dirtied.
    pub fn dirtied(&self, d: &Dirtied, tables: &Tables) {
        self.b.borrow_mut().dirtied(d, tables);
    }

    /// What was collected.
    pub fn finish(self) -> Collected {
        self.b.into_inner().finish()
    }
}
