//! The block layer's events: a bio queued is charged sector by sector ([`charge_bio`]) and
//! waits for its request; remaps, issues, requeues and completions move the charges along
//! ([`crate::requests`]), and a completion emits one IO per act ([`crate::charging::Charging::emit`]); what
//! matches nothing, or never completes, is charged to the lost intent (see
//! docs/attribution.md, "The charging order", "Requests: merges, splits, remaps, requeues").

use ioblame_decode::{Dev, Event, Rwbs};

use super::Attributor;
use crate::charge::{Charge, Frag, Parts};
use crate::charging::{charge_bio, Bio, Books, Done};
use crate::context::{STACK_BTRFS_COMMIT, STACK_BTRFS_LOG_SYNC};
use crate::contexts::NO_TXN;
use crate::interval::Paint;
use crate::interval::NO_OFF;
use crate::model::Via;

impl Attributor {
    /// `block_bio_queue`: each sector of the bio gets its charge (see [`charge_bio`]) and
    /// waits, queued, for the request that takes it.
    pub(super) fn on_bio_queue(&mut self, ev: &Event, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        if nr == 0 {
            self.summary.empty_flush_bios += 1;
            return;
        }
        // A partition's bio carries its disk; its remap named the partition.
        let dev = self.requests.bio_dev(dev, sector);
        let info = self.devices.info(dev);
        let seq = self.requests.next_seq();
        // A bio remapped from a stacked device inherits the upper bio's charges.
        if self
            .requests
            .queue_remapped(info.disk, sector, seq, ev.time)
        {
            return;
        }
        let (s, e) = (sector, sector.saturating_add(nr as u64));
        let issuer = self
            .roles
            .role_in(&mut self.tables.roles, ev.pid, ev.tid, ev.cgroup);
        let stack = self.intents.stack_of(ev);
        // ext4 maps waiting for their filesystem's block size (no mount table: perf.data).
        self.contexts
            .size_ext4_maps(&mut self.devices, ev.tid, ev.time, info.disk, s);
        // The thread's context, and the maps it emitted for these sectors (consumed).
        let mut maps = Vec::new();
        let ctx = self.contexts.for_bio(ev.tid, info.disk, s, e, &mut maps);
        let bio = Bio {
            dev,
            info,
            s,
            e,
            rwbs,
            time: ev.time,
            issuer,
            stack,
            flags: self.intents.flags(stack),
            ctx,
            issuer_only: self.charging.issuer_only,
        };
        if bio.is_direct() && ctx.dio.is_some() {
            self.contexts.dio_queued(ev.tid, (nr as u64) * 512);
        }
        let btrfs = (!self.btrfs.is_empty()).then_some(&mut self.btrfs);
        let mut paint = charge_bio(&mut self.dirty, &self.devices, &bio, &maps, btrfs);
        if ctx.txn != NO_TXN {
            // A commit's journal IO, divided among its transaction's handles.
            self.journals.apportion(ctx.txn_dev, ctx.txn, &mut paint);
        }
        if rwbs.is_write() && self.btrfs.on(info.disk) {
            self.btrfs_commit_io(bio.flags, info.disk, &mut paint);
        }
        if !self.layers.is_empty() {
            self.summary.lower_unlinked_bytes +=
                self.layers.apply(&self.requests, info.disk, &mut paint);
            // A dm target that resubmits without a remap (dm-crypt before 5.16).
            let r = &self.requests;
            self.layers
                .link_dm(r, info.disk, (s, e), ev.time, &mut paint);
        }
        if ctx.iomap_wp && maps.is_empty() && rwbs.is_write() {
            // iomap writeback with no map (5.10): what no rule linked is a kernel gap.
            self.summary.unmapped_writeback_bytes += paint
                .segs
                .iter()
                .filter(|(_, _, f)| f.c.via == Via::Unknown)
                .map(|(a, b, _)| (b - a) * 512)
                .sum::<u64>();
        }
        self.requests.queue(info.disk, seq, paint.segs);
    }

    /// A write on `disk`, where btrfs may be, by a thread whose stack has the classes
    /// `flags`: the sectors of a transaction commit's own tree blocks (first dirtied with a
    /// stack holding `btrfs_commit_transaction`, whoever submits them: before 6.5 btrfs's
    /// checksum workers submitted tree block writes) and, from the committing thread
    /// itself, the superblock copies become journal IO of the transaction being
    /// committed, divided among the acts that dirtied its other tree blocks and its
    /// extents, as a jbd2 commit among its handles; a log sync's own blocks (first dirtied
    /// in `btrfs_sync_log`) and, from its thread, its superblock copies, journal IO of the
    /// log transaction it syncs, divided among the fsyncs that dirtied its log blocks
    /// (docs/attribution.md, "btrfs"). A transaction (or log transaction) no act was seen
    /// in keeps them with the committer (or the log syncer).
    fn btrfs_commit_io(&mut self, flags: u8, disk: Dev, paint: &mut Paint<Frag>) {
        let committer = flags & STACK_BTRFS_COMMIT != 0;
        let log_syncer = !committer && flags & STACK_BTRFS_LOG_SYNC != 0;
        let mut txns: Vec<(Dev, u32)> = Vec::new();
        for seg in &mut paint.segs {
            let c = &mut seg.2.c;
            let supers = c.via == Via::Journal && c.txn == NO_TXN && (committer || log_syncer);
            let block = if c.via == Via::Page
                && c.ino == crate::btrfs::BTREE_INO
                && self.btrfs.is_sb_dev(c.fdev)
            {
                self.intents.flags(c.stack)
            } else {
                0
            };
            // Whose own write: a commit's (true) or a log sync's (false); a superblock
            // copy's place.
            let (sb, copy, commit) = if supers {
                match self.btrfs.super_at(disk, seg.0) {
                    Some((sb, first)) => (Some(sb), Some((disk, first)), committer),
                    None => (None, None, false),
                }
            } else if block & STACK_BTRFS_COMMIT != 0 {
                (Some(c.fdev), None, true)
            } else if block & STACK_BTRFS_LOG_SYNC != 0 {
                (Some(c.fdev), None, false)
            } else {
                (None, None, false)
            };
            let Some(sb) = sb else { continue };
            let txn = if commit {
                self.btrfs.txn_committing(sb, copy)
            } else {
                self.btrfs.log_syncing(sb, copy)
            };
            let Some(txn) = txn else { continue };
            if !self.journals.has_owners(sb, txn) {
                continue;
            }
            c.via = Via::Journal;
            c.txn = txn;
            if !txns.contains(&(sb, txn)) {
                txns.push((sb, txn));
            }
        }
        for (sb, txn) in txns {
            self.journals.apportion(sb, txn, paint);
        }
    }

    /// `block_bio_remap`: a partition's remap tells its start and names the partition of
    /// the bio queued next; a stacked device's hands the upper bio's charges to the lower
    /// one ([`crate::requests::Requests::remap`]).
    pub(super) fn on_remap(
        &mut self,
        dev: Dev,
        sector: u64,
        nr: u32,
        old_dev: Dev,
        old_sector: u64,
    ) {
        let r = &mut self.requests;
        let contradicted = r.remap(&mut self.devices, (dev, sector), nr, (old_dev, old_sector));
        if let Some(old) = contradicted {
            let start = sector - old_sector;
            self.summary.warn(|| {
                format!(
                    "device {}:{}: partition start {start} from remap differs from metadata {old}",
                    old_dev >> 20,
                    old_dev & 0xfffff
                )
            });
        }
    }

    /// `block_rq_issue`: the request takes the queued sectors it covers; those no bio was
    /// seen for are charged to the lost intent.
    pub(super) fn on_issue(&mut self, time: u64, dev: Dev, sector: u64, nr: u32, rwbs: Rwbs) {
        let disk = self.devices.info(dev).disk;
        let Some(mut paint) = self
            .requests
            .issue(&mut self.summary, disk, time, sector, nr)
        else {
            return;
        };
        let e = sector.saturating_add(nr as u64);
        if !paint.covers(sector, e) {
            // Bios queued before the capture or lost: charged to the lost intent.
            let c = self.unmatched_charge(dev, time, rwbs);
            paint.fill(sector, e, &Frag { c, foff: NO_OFF }, None);
        }
        self.requests
            .start(disk, sector, nr, time, rwbs, paint.segs);
    }

    /// `block_rq_requeue`: counted when a request in flight is there.
    pub(super) fn on_requeue(&mut self, dev: Dev, sector: u64) {
        let disk = self.devices.info(dev).disk;
        if self.requests.requeued(disk, sector) {
            self.summary.requeues += 1;
        }
    }

    /// `block_rq_complete`: the IOs of the completed part of the request.
    pub(super) fn on_complete(
        &mut self,
        time: u64,
        dev: Dev,
        sector: u64,
        nr: u32,
        error: i32,
        rwbs: Rwbs,
    ) {
        let disk = self.devices.info(dev).disk;
        if nr == 0 {
            if rwbs.has(Rwbs::FLUSH) && self.requests.flush_completed(disk) {
                self.summary.flushes_completed += 1;
            } else {
                self.summary.ignored_zero_completions += 1;
            }
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let n = nr as u64;
        let Some(done) = self.requests.complete(disk, sector, n) else {
            self.emit_unmatched(dev, disk, (sector, sector.saturating_add(n)), time, rwbs);
            return;
        };
        self.emit(Done {
            disk,
            parts: &done.parts,
            rwbs: done.rwbs,
            issue: done.issue,
            complete: time,
            swept: false,
        });
        if done.partial {
            self.summary.partial_completions += 1;
        }
    }

    /// `block_bio_complete` on a disk without a request layer: the IOs of the bio.
    pub(super) fn on_bio_complete(
        &mut self,
        time: u64,
        dev: Dev,
        sector: u64,
        nr: u32,
        error: i32,
        rwbs: Rwbs,
    ) {
        let disk = self.devices.info(dev).disk;
        if self.requests.is_rq_based(disk) || nr == 0 {
            return;
        }
        if error != 0 {
            self.summary.io_errors += 1;
        }
        let e = sector.saturating_add(nr as u64);
        // None: a bio completed already with the bio it was chained to.
        let Some(parts) = self.requests.bio_complete(disk, sector, e) else {
            return;
        };
        if parts.is_empty() {
            self.emit_unmatched(dev, disk, (sector, e), time, rwbs);
            return;
        }
        // No request layer: the device saw the bio when it was queued.
        let issue = parts.iter().map(|p| p.2.c.qtime).min().unwrap_or(time);
        self.emit(Done {
            disk,
            parts: &parts,
            rwbs,
            issue,
            complete: time,
            swept: false,
        });
    }

    /// The charge of IO that matches nothing queued or issued (see [`Charge::unmatched`]).
    pub(super) fn unmatched_charge(&mut self, dev: Dev, time: u64, rwbs: Rwbs) -> Charge {
        let unknown = self.roles.unknown(&mut self.tables.roles);
        Charge::unmatched(unknown, dev, time, rwbs)
    }

    /// A completion of sectors `[a, b)` that matches nothing queued or issued: one IO
    /// charged to the lost intent, with no file, issuer or reason known.
    pub(super) fn emit_unmatched(
        &mut self,
        dev: Dev,
        disk: Dev,
        (a, b): (u64, u64),
        time: u64,
        rwbs: Rwbs,
    ) {
        self.summary.unmatched_completions += 1;
        let c = self.unmatched_charge(dev, time, rwbs);
        self.emit(Done {
            disk,
            parts: &[(a, b, Frag { c, foff: NO_OFF })],
            rwbs,
            issue: time,
            complete: time,
            swept: false,
        });
    }

    /// Emits parts that will never complete as IOs charged to the lost intent, with the
    /// file, issuer and reason they were queued with (no device time, no seek).
    pub(super) fn emit_lost(&mut self, disk: Dev, mut parts: Parts, rwbs: Rwbs, at: u64) {
        let unknown = self.roles.unknown(&mut self.tables.roles);
        for p in &mut parts {
            p.2.c = p.2.c.lost(unknown);
        }
        self.emit(Done {
            disk,
            parts: &parts,
            rwbs,
            issue: at,
            complete: at,
            swept: true,
        });
    }

    /// Emits the IOs of (the completed part of) one request: one per act.
    pub(super) fn emit(&mut self, done: Done<'_>) {
        let books = Books {
            tables: &mut self.tables,
            roles: &mut self.roles,
            intents: &mut self.intents,
            summary: &mut self.summary,
            devices: &self.devices,
            losses: &self.losses,
        };
        self.charging.emit(books, done);
    }
}
