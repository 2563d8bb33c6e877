//! A sector's charge: what each sector of a queued bio is charged to ([`Charge`]), with the
//! file offset it maps to ([`Frag`]), as the charging rules set it, the requests carry it to
//! completion, the journal divides it among a transaction's handles and the layers copy it
//! to a lower device. A leaf of those modules: it uses none of them.

use ioblame_decode::{Dev, Rwbs};

use crate::contexts::{NO_REASON, NO_TXN};
use crate::intents::StackId;
use crate::interval::{adv_off, Advance};
use crate::model::{RoleId, Via};

/// No journal share: the IO was not apportioned among handles.
pub(crate) const NO_SHARE: u32 = u32::MAX;

/// Shares are kept in millionths.
pub(crate) const SHARE_ONE: u64 = 1_000_000;

/// What a sector of a queued bio is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Charge {
    /// The role charged.
    pub role: RoleId,
    /// The stack of the charged action.
    pub stack: StackId,
    /// How the link was made.
    pub via: Via,
    /// The file's device.
    pub fdev: Dev,
    /// The file's inode (0 when unknown).
    pub ino: u64,
    /// The task that queued the bio.
    pub issuer: RoleId,
    /// The writeback reason the bio was queued with, or [`NO_REASON`].
    pub reason: u32,
    /// The jbd2 transaction of journal IO, or [`NO_TXN`].
    pub txn: u32,
    /// Of journal IO divided among a transaction's handles, the charged act's share of
    /// the transaction's dirtied blocks in millionths, or [`NO_SHARE`].
    pub share: u32,
    /// When the bio was queued.
    pub qtime: u64,
    /// The rwbs of the bio (the request's, for sectors no bio was seen for).
    pub rwbs: Rwbs,
    /// A copy, on the lower device, of IO charged on the device above (a loop device's
    /// backing file): [`crate::Io::lower`].
    pub lower: bool,
}

impl Charge {
    /// The charge of IO that matches nothing queued or issued: the lost intent (the
    /// `<unknown>` role `unknown`), with no file, issuer or reason known.
    pub fn unmatched(unknown: RoleId, dev: Dev, time: u64, rwbs: Rwbs) -> Charge {
        Charge {
            role: unknown,
            stack: 0,
            via: Via::Unknown,
            fdev: dev,
            ino: 0,
            issuer: unknown,
            reason: NO_REASON,
            txn: NO_TXN,
            share: NO_SHARE,
            qtime: time,
            rwbs,
            lower: false,
        }
    }

    /// This charge moved to the lost intent (the `<unknown>` role `unknown`), keeping the
    /// file, issuer and reason.
    pub fn lost(self, unknown: RoleId) -> Charge {
        Charge {
            role: unknown,
            stack: 0,
            via: Via::Unknown,
            txn: NO_TXN,
            share: NO_SHARE,
            ..self
        }
    }
}

/// A charge plus the file byte offset of the interval's first sector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frag {
    /// The charge.
    pub c: Charge,
    /// The file byte offset, or [`crate::interval::NO_OFF`].
    pub foff: u64,
}

impl Advance for Frag {
    fn advance(&self, sectors: u64) -> Self {
        Frag {
            c: self.c,
            foff: adv_off(self.foff, sectors),
        }
    }
}

impl Frag {
    /// Whether `next`, at sector `at`, continues this fragment that starts at `start`: the
    /// same charge, and the file offset this one reaches there.
    #[inline]
    pub fn continued_by(&self, start: u64, at: u64, next: &Frag) -> bool {
        self.c == next.c && adv_off(self.foff, at - start) == next.foff
    }
}

/// Sector intervals with their charges.
pub(crate) type Parts = Vec<(u64, u64, Frag)>;
