//! The live view's log of what each role dirtied ([`Dirtied`]): kept only when asked
//! ([`crate::Attributor::log_dirtied`]), a record per folio or buffer made dirty, a folio's
//! record giving way to the records of the buffers its thread dirtied right after it. It
//! changes nothing the attribution charges.

use ioblame_decode::{Dev, BUFFER_FOLIO_MAX_GAP_NS};
use rustc_hash::FxHashMap;

use crate::model::{RoleId, Via};

/// Threads whose last folio dirtied is remembered (then the map starts over).
const LAST_FOLIOS_MAX: usize = 1 << 16;

/// Something a role dirtied (a folio or a buffer made dirty), as a live view counts the
/// bytes dirtied per second ([`crate::Attributor::log_dirtied`]). Not an act yet: its IO,
/// and the writeback reason that completes its intent, come later, and are charged to the
/// same role, stack and file when it is written (a folio dirtied again before its writeback
/// is not dirtied anew).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dirtied {
    /// The role charged with it.
    pub role: RoleId,
    /// Its stack when it dirtied ([`crate::Attributor::stack_frames`]).
    pub stack: u32,
    /// How its IO will be linked back (page, buffer, or through the inode's dirtier).
    pub via: Via,
    /// The device the kernel named: a folio's backing device (the disk of a filesystem on a
    /// partition), a buffer's disk.
    pub dev: Dev,
    /// The inode, 0 when unknown (a buffer of no known file).
    pub ino: u64,
    /// Where: a folio's first byte in its file (its index times the page size); a buffer's
    /// first 512-byte sector on [`Dirtied::dev`] (a buffer dirtied with its folio, see
    /// [`DirtiedLog::buffer`], keeps its sector: its file is the folio's).
    pub pos: u64,
    /// Whether [`Dirtied::pos`] is a buffer's sector rather than a folio's file offset.
    pub buffer: bool,
    /// Bytes made dirty: the folio's (its order as the page cache told it) or the buffer's.
    pub bytes: u64,
    /// When (ns, the trace's clock).
    pub time: u64,
}

/// A thread's last folio dirtied, for the dirty buffers that follow it.
#[derive(Debug, Clone, Copy)]
struct LastFolio {
    ino: u64,
    time: u64,
    /// Its record's position in the dirtied list, while there.
    at: Option<usize>,
}

/// What was dirtied since the last drain, when logging ([`DirtiedLog::start`]).
#[derive(Debug, Default)]
pub(crate) struct DirtiedLog {
    /// The records not drained yet; `None` when not logging.
    list: Option<Vec<Dirtied>>,
    /// When logging: per thread, its last folio dirtied (see [`DirtiedLog::buffer`]).
    last_folio: FxHashMap<u32, LastFolio>,
}

impl DirtiedLog {
    /// Logs what is dirtied from now on.
    pub fn start(&mut self) {
        self.list.get_or_insert_with(Vec::new);
    }

    /// Whether it logs.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.list.is_some()
    }

    /// Moves the records into `out` (nothing unless logging): all of them (`all`), otherwise
    /// all but those of the last [`BUFFER_FOLIO_MAX_GAP_NS`] before `now` (a folio's record
    /// may yet give way to its buffers', [`DirtiedLog::buffer`]).
    pub fn drain_into(&mut self, out: &mut Vec<Dirtied>, all: bool, now: u64) {
        let Some(d) = &mut self.list else {
            return;
        };
        let keep_from = if all {
            u64::MAX
        } else {
            now.saturating_sub(BUFFER_FOLIO_MAX_GAP_NS)
        };
        let n = d.partition_point(|x| x.time < keep_from);
        out.extend(d.drain(..n).filter(|x| x.bytes > 0));
        for f in self.last_folio.values_mut() {
            f.at = f.at.and_then(|i| i.checked_sub(n));
        }
    }

    /// When logging: a dirty folio's record, dirtied by thread `tid`.
    pub fn folio(&mut self, tid: u32, rec: Dirtied) {
        let Some(d) = &mut self.list else {
            return;
        };
        let at = Some(d.len());
        d.push(rec);
        if self.last_folio.len() >= LAST_FOLIOS_MAX {
            self.last_folio.clear();
        }
        self.last_folio.insert(
            tid,
            LastFolio {
                ino: rec.ino,
                time: rec.time,
                at,
            },
        );
    }

    /// When logging: a dirty buffer's record, dirtied by thread `tid`. A buffer its thread
    /// dirtied right after a folio ([`BUFFER_FOLIO_MAX_GAP_NS`], the rule that gives it the
    /// folio's stack) is part of that folio, dirtied through its buffers (ext4 writing over
    /// allocated blocks): it is of the folio's file, and the bytes are counted by buffer
    /// (exact where the folio's size is not known), the folio's record dropped.
    /// Delayed-allocation buffers are not traced: their folio's record stands.
    pub fn buffer(&mut self, tid: u32, mut rec: Dirtied) {
        let Some(d) = &mut self.list else {
            return;
        };
        if let Some(f) = self.last_folio.get_mut(&tid) {
            if rec.time.saturating_sub(f.time) <= BUFFER_FOLIO_MAX_GAP_NS {
                if rec.ino == 0 {
                    rec.ino = f.ino;
                }
                if let Some(x) = f.at.take().and_then(|i| d.get_mut(i)) {
                    x.bytes = 0;
                }
                // The next buffers of the same write follow this one.
                f.time = rec.time;
            }
        }
        d.push(rec);
    }
}
