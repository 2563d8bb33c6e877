//! Charging: the rules that pick what each sector of a queued bio is charged to, and the
//! IOs a completed request makes, one per act (see docs/attribution.md, "The charging
//! order" and "Splitting a request between acts").
//!
//! Reads, readahead and direct IO are charged to the issuer. The sectors of a write bio
//! (not direct IO) find their owner by the rules for writes, first match wins per sector
//! (each rule is a section of docs/attribution.md):
//! 0. on btrfs, a dirty folio of the file an ordered extent names, or of the btree inode for
//!    a tree block, through the chunk map ("btrfs");
//! 1. a dirty buffer covering the sector ("Dirty buffers");
//! 2. a dirty folio, through the sector->file maps the issuing thread just emitted or, for
//!    the block-device inode, the sector itself ("Dirty folios and the sector maps");
//! 3. journal IO: the issuing journal thread; a commit's is then divided among its
//!    transaction's handles (`crate::journal`) ("Journal IO");
//! 4. inside a `write_inode` bracket: the inode's dirtier ("write_inode brackets");
//! 5. inside a `single_inode` (or `ext4_writepages`) bracket: the inode's only dirtier,
//!    if it has exactly one ("single_inode brackets");
//! 6. otherwise the lost intent, with the file, issuer and reason known ("Lost and
//!    unknown").

use ioblame_decode::{Dev, Rwbs};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::btrfs::Btrfs;
use crate::charge::{Charge, Frag, NO_SHARE, SHARE_ONE};
use crate::context::{DevInfo, Devices, STACK_DIO, STACK_JOURNAL, STACK_RELOCATION};
use crate::contexts::{BioCtx, Rmap, NO_REASON, NO_TXN};
use crate::dirty::{Dirtier, Dirty};
use crate::intents::{ActKey, Intents, StackId};
use crate::interval::{adv_off, Paint, NO_OFF};
use crate::model::*;
use crate::roles::Roles;
use crate::summary::{Losses, Summary, UnknownContext};

/// A bio being queued, as the charging rules see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bio {
    /// The device as queued.
    pub dev: Dev,
    /// What is known of it (its disk, the partition start).
    pub info: DevInfo,
    /// First sector (of `dev`).
    pub s: u64,
    /// End sector.
    pub e: u64,
    /// The bio's rwbs.
    pub rwbs: Rwbs,
    /// When it was queued.
    pub time: u64,
    /// The task queueing it.
    pub issuer: RoleId,
    /// The issuer's stack.
    pub stack: StackId,
    /// The classes of that stack ([`STACK_DIO`], [`STACK_JOURNAL`]).
    pub flags: u8,
    /// The brackets the issuer is in.
    pub ctx: BioCtx,
    /// Charge every sector to the issuer ([`crate::Context::issuer_only`]).
    pub issuer_only: bool,
}

impl Bio {
    /// Direct IO: inside a direct IO's bracket (bounded by its size) or with a direct IO
    /// stack, but never metadata (bitmap or extent reads the direct IO needed).
    #[inline]
    pub fn is_direct(&self) -> bool {
        !self.rwbs.has(Rwbs::META) && (self.ctx.dio.is_some() || self.flags & STACK_DIO != 0)
    }

    /// Journal IO: inside a jbd2 commit bracket, or with a journal stack.
    fn is_journal(&self) -> bool {
        self.ctx.txn != NO_TXN || self.flags & STACK_JOURNAL != 0
    }

    /// The issuer's charge, as every rule starts from it: the lost intent with the context
    /// known.
    fn base(&self) -> Charge {
        Charge {
            role: self.issuer,
            stack: self.stack,
            via: Via::Unknown,
            fdev: self.dev,
            ino: 0,
            issuer: self.issuer,
            reason: self.ctx.reason,
            txn: if self.is_journal() {
                self.ctx.txn
            } else {
                NO_TXN
            },
            share: NO_SHARE,
            qtime: self.time,
            rwbs: self.rwbs,
            lower: false,
        }
    }

    /// The inode of the writeback bracket the issuer is in (0 if none).
    fn bracket_ino(&self) -> u64 {
        let disk = self.info.disk;
        self.ctx
            .wb_ino
            .filter(|w| w.0 == disk || w.0 == 0)
            .or(self.ctx.wp_ino)
            .map(|w| w.1)
            .unwrap_or(0)
    }
}

/// What each sector of `bio` is charged to: reads, readahead and direct IO to the issuer,
/// writes by the rules for writes. `maps` are the sector->file maps the issuer emitted for
/// these sectors. The dirty state the rules link is taken from `dirty`.
pub(crate) fn charge_bio(
    dirty: &mut Dirty,
    devs: &Devices,
    bio: &Bio,
    maps: &[(u64, u64, Rmap)],
    btrfs: Option<&mut Btrfs>,
) -> Paint<Frag> {
    let base = bio.base();
    let mut paint = Paint::default();
    let direct = bio.is_direct();
    if !bio.rwbs.is_write() || direct || bio.issuer_only {
        // A btrfs file is known by its superblock's device, not the disk's; a direct write
        // makes the ordered extents it writes its issuer's.
        let fdev = btrfs.and_then(|b| {
            if direct && bio.rwbs.is_write() && b.on(bio.info.disk) {
                let writer = crate::dirty::Dirtier {
                    role: base.role,
                    stack: base.stack,
                };
                b.direct_write(bio.info.disk, (bio.s, bio.e), writer);
            }
            b.sb_dev_at(bio.info.disk, bio.s)
        });
        let fdev = fdev.unwrap_or(base.fdev);
        to_issuer(bio, direct, &Charge { fdev, ..base }, maps, &mut paint);
    } else {
        let bracket_ino = bio.bracket_ino();
        // Rule 0: btrfs's data and tree blocks, through its chunk map.
        let unlinked = match btrfs {
            Some(b) if b.on(bio.info.disk) => b.charge(
                dirty,
                bio.info.disk,
                (bio.s, bio.e),
                &base,
                bio.time,
                |x, y, f| paint.fill(x, y, f, None),
            ),
            _ => Vec::new(),
        };
        dirty_buffers(dirty, bio, &base, bracket_ino, maps, &mut paint);
        dirty_folios(dirty, bio, &base, maps, &mut paint);
        journal(bio, &base, &mut paint);
        write_inode(dirty, bio, &base, &mut paint);
        single_dirtier(dirty, devs, bio, &base, &mut paint);
        // btrfs's parts of no dirtier: lost, with their file.
        for u in unlinked {
            let c = Charge {
                fdev: u.sb_dev,
                ino: u.ino,
                reason: if base.reason == NO_REASON {
                    u.reason
                } else {
                    base.reason
                },
                ..base
            };
            paint.fill(u.a, u.b, &Frag { c, foff: u.foff }, None);
        }
        unknown(bio, &base, bracket_ino, maps, &mut paint);
    }
    paint
}

/// Reads, readahead and direct IO (`direct`, [`Bio::is_direct`]): the issuer, with the file
/// of the maps or, elsewhere, of the direct IO's bracket or of what the issuer last read
/// (see docs/attribution.md, "Direct IO and reads").
fn to_issuer(
    bio: &Bio,
    direct: bool,
    base: &Charge,
    maps: &[(u64, u64, Rmap)],
    paint: &mut Paint<Frag>,
) {
    let rwbs = bio.rwbs;
    let via = if direct {
        Via::Direct
    } else if rwbs.is_write() {
        // Only when charging issuers alone: a write nothing tells direct or buffered.
        Via::Issuer
    } else if rwbs.has(Rwbs::AHEAD) {
        Via::Readahead
    } else {
        Via::Read
    };
    let c = Charge { via, ..*base };
    // A balance reading into the relocation inode: no file of the filesystem's.
    let relocation = bio.flags & STACK_RELOCATION != 0;
    for &(a, b, r) in maps.iter().filter(|_| !relocation) {
        paint.fill(
            a,
            b,
            &Frag {
                c: Charge { ino: r.ino, ..c },
                foff: r.foff,
            },
            None,
        );
    }
    let ino = if relocation {
        0
    } else if direct {
        bio.ctx.dio.map(|d| d.ino).unwrap_or(0)
    } else if rwbs.is_read() && !rwbs.has(Rwbs::META) {
        bio.ctx.read_file.map(|f| f.1).unwrap_or(0)
    } else {
        0
    };
    paint.fill(
        bio.s,
        bio.e,
        &Frag {
            c: Charge { ino, ..c },
            foff: NO_OFF,
        },
        None,
    );
}

/// Neighbouring dirty buffers of a request charged alike: sectors `[a, b)`, their charge,
/// and the dirtier whose folios their bytes count against, if any.
struct BhRun {
    a: u64,
    b: u64,
    frag: Frag,
    consume: Option<Dirtier>,
}

/// Rule 1: a dirty buffer_head covering the sector, its first dirtier (see
/// docs/attribution.md, "Dirty buffers"). Exact sectors; the file from the maps, the
/// buffer's record, or the writeback bracket.
fn dirty_buffers(
    dirty: &mut Dirty,
    bio: &Bio,
    base: &Charge,
    bracket_ino: u64,
    maps: &[(u64, u64, Rmap)],
    paint: &mut Paint<Frag>,
) {
    let disk = bio.info.disk;
    let mut bhs = Vec::new();
    dirty.take_buffers(disk, bio.s, bio.e, &mut bhs);
    let bdev_ino = bio.dev as u64;
    // Neighbouring buffers of one dirtier (writeback merges a file's dirty blocks into one
    // bio) are filled, and their bytes consumed, as one run.
    let mut run: Option<BhRun> = None;
    for (a, b, bh) in bhs {
        let hit = maps.iter().find(|r| r.0 <= a && a < r.1);
        let (ino, foff) = match hit {
            Some(&(ra, _, r)) => (r.ino, adv_off(r.foff, a - ra)),
            None if bh.ino != 0 => (bh.ino, NO_OFF),
            None => (bracket_ino, NO_OFF),
        };
        let c = Charge {
            role: bh.owner.role,
            stack: bh.owner.stack,
            via: bh.via,
            ino,
            ..*base
        };
        // A data buffer written with no map (an ext4 overwrite): the page holding it is
        // written too, though which one is not known; count the bytes against the dirtier's
        // folios of the file (the maps do it exactly).
        let consume = (hit.is_none()
            && bh.ino == 0
            && bh.via == Via::Buffer
            && ino != 0
            && ino != bdev_ino
            && !bio.rwbs.has(Rwbs::META))
        .then_some(bh.owner);
        let frag = Frag { c, foff };
        match &mut run {
            Some(r) if r.b == a && r.frag.continued_by(r.a, a, &frag) && r.consume == consume => {
                r.b = b;
            }
            _ => {
                if let Some(r) = run.take() {
                    charge_bh_run(dirty, disk, r, paint);
                }
                run = Some(BhRun {
                    a,
                    b,
                    frag,
                    consume,
                });
            }
        }
    }
    if let Some(r) = run {
        charge_bh_run(dirty, disk, r, paint);
    }
}

/// Fills a run of dirty buffers into the request being assembled and, for data buffers
/// written without a map, counts their bytes against the dirtier's folios.
fn charge_bh_run(dirty: &mut Dirty, disk: Dev, r: BhRun, paint: &mut Paint<Frag>) {
    paint.fill(r.a, r.b, &r.frag, None);
    if let Some(owner) = r.consume {
        dirty.consume(disk, r.frag.c.ino, owner, Via::Page, (r.b - r.a) * 512);
    }
}

/// Rule 2: a dirty folio, found through the sector->file maps the issuing thread just
/// emitted or, for the block-device inode (`ino == dev_t`), through the sector itself (see
/// docs/attribution.md, "Dirty folios and the sector maps").
fn dirty_folios(
    dirty: &mut Dirty,
    bio: &Bio,
    base: &Charge,
    maps: &[(u64, u64, Rmap)],
    paint: &mut Paint<Frag>,
) {
    let disk = bio.info.disk;
    for &(a, b, r) in maps {
        folio_owners(dirty, disk, r.ino, (a, b), r.foff, base, paint);
    }
    let bdev_ino = bio.dev as u64;
    if dirty.has_folios(disk, bdev_ino) && bio.s >= bio.info.part_start {
        let foff = (bio.s - bio.info.part_start).saturating_mul(512);
        folio_owners(dirty, disk, bdev_ino, (bio.s, bio.e), foff, base, paint);
    }
}

/// Charges the dirty folios of `(bdi, ino)` that the sectors `[a, b)` (file bytes from
/// `foff`) write to their dirtiers, and counts them written.
#[inline]
fn folio_owners(
    dirty: &mut Dirty,
    bdi: Dev,
    ino: u64,
    (a, b): (u64, u64),
    foff: u64,
    base: &Charge,
    paint: &mut Paint<Frag>,
) {
    dirty.write_folios(bdi, ino, a, b, foff, |sa, sb, owner, via, foff| {
        let c = Charge {
            role: owner.role,
            stack: owner.stack,
            via,
            ino,
            ..*base
        };
        paint.fill(sa, sb, &Frag { c, foff }, None);
    });
}

/// Rule 3: journal IO (a jbd2 commit bracket, a jbd2/xlog stack), charged to the journal
/// thread itself; the attributor then divides a commit's among its transaction's handles
/// (`Journals::apportion`). A metadata write with preflush or FUA is a log write too (xfs
/// log, jbd2 commit record) even without the bracket or symbols (see docs/attribution.md,
/// "Journal IO").
fn journal(bio: &Bio, base: &Charge, paint: &mut Paint<Frag>) {
    let rwbs = bio.rwbs;
    let log_write = rwbs.has(Rwbs::META) && (rwbs.has(Rwbs::PREFLUSH) || rwbs.has(Rwbs::FUA));
    if bio.is_journal() || log_write {
        paint.fill(
            bio.s,
            bio.e,
            &Frag {
                c: Charge {
                    via: Via::Journal,
                    ..*base
                },
                foff: NO_OFF,
            },
            None,
        );
    }
}

/// Rule 4: inside a `write_inode` bracket, the inode's dirtier (see docs/attribution.md,
/// "write_inode brackets").
fn write_inode(dirty: &Dirty, bio: &Bio, base: &Charge, paint: &mut Paint<Frag>) {
    let Some(wi) = bio.ctx.wi_ino else {
        return;
    };
    if let Some(d) = dirty.inode_dirtier(wi) {
        let c = Charge {
            role: d.role,
            stack: d.stack,
            via: Via::Inode,
            ino: wi.1,
            ..*base
        };
        paint.fill(bio.s, bio.e, &Frag { c, foff: NO_OFF }, None);
    }
}

/// Rule 5: inside a `single_inode` (or `ext4_writepages`) bracket, the single dirtier of
/// that inode, if it has exactly one; the pages written are counted against it (see
/// docs/attribution.md, "single_inode brackets").
fn single_dirtier(
    dirty: &mut Dirty,
    devs: &Devices,
    bio: &Bio,
    base: &Charge,
    paint: &mut Paint<Frag>,
) {
    let disk = bio.info.disk;
    let ctx = &bio.ctx;
    let single = ctx.wb_ino.filter(|w| w.0 == disk || w.0 == 0).or(ctx
        .wp_ino
        .filter(|_| ctx.ext4_wp || ctx.iomap_wp)
        .map(|(d, i)| (devs.info(d).disk, i)));
    let Some(wb) = single else {
        return;
    };
    if let Some((d, via)) = dirty.only_dirtier(wb.0, wb.1) {
        let c = Charge {
            role: d.role,
            stack: d.stack,
            via,
            ino: wb.1,
            ..*base
        };
        let mut filled = Vec::new();
        paint.fill(bio.s, bio.e, &Frag { c, foff: NO_OFF }, Some(&mut filled));
        // The pages written are the owner's, at offsets not known.
        let bytes = filled.iter().map(|(a, b)| (b - a) * 512).sum();
        dirty.consume(wb.0, wb.1, d, via, bytes);
    }
}

/// Rule 6: no link found. The lost intent, with the best context known: the file of the
/// maps or of the writeback bracket (see docs/attribution.md, "Lost and unknown").
fn unknown(
    bio: &Bio,
    base: &Charge,
    bracket_ino: u64,
    maps: &[(u64, u64, Rmap)],
    paint: &mut Paint<Frag>,
) {
    for &(a, b, r) in maps {
        paint.fill(
            a,
            b,
            &Frag {
                c: Charge {
                    ino: r.ino,
                    ..*base
                },
                foff: r.foff,
            },
            None,
        );
    }
    paint.fill(
        bio.s,
        bio.e,
        &Frag {
            c: Charge {
                ino: bracket_ino,
                ..*base
            },
            foff: NO_OFF,
        },
        None,
    );
}

/// The parts of the attribution an IO is charged into.
pub(crate) struct Books<'a> {
    /// The output tables.
    pub tables: &'a mut Tables,
    /// The tasks (for the `<unknown>` role).
    pub roles: &'a mut Roles,
    /// The interning of intents and acts.
    pub intents: &'a mut Intents,
    /// The totals.
    pub summary: &'a mut Summary,
    /// Device sizes, for offsets.
    pub devices: &'a Devices,
    /// The loss windows.
    pub losses: &'a Losses,
}

/// The completed part of one request, as [`Charging::emit`] charges it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done<'p> {
    /// The disk.
    pub disk: Dev,
    /// Its sectors with their charges, in order.
    pub parts: &'p [(u64, u64, Frag)],
    /// The request's rwbs.
    pub rwbs: Rwbs,
    /// When it was (last) issued.
    pub issue: u64,
    /// When it completed.
    pub complete: u64,
    /// Charged without completing (swept as stale): no seek.
    pub swept: bool,
}

/// The IOs charged, and what charging them keeps.
#[derive(Debug, Default)]
pub(crate) struct Charging {
    /// IOs charged since the last drain.
    pub ios: Vec<Io>,
    /// The end of the IO completed last, per disk (for seek distances).
    last_end: FxHashMap<Dev, u64>,
    /// Bytes and IOs charged to the lost intent per `(dev, ino, issuer, reason)`.
    unknown_ctx: FxHashMap<(Dev, u64, RoleId, u32), (u64, u64)>,
    /// Disks warned about for having no known size.
    warned_no_size: FxHashSet<Dev>,
    /// Intents are blktrace's: the empty stack with the request flags as the modifier
    /// ([`crate::Context::issuer_only`]).
    pub issuer_only: bool,
}

impl Charging {
    /// Charging with blktrace's intents or not ([`crate::Context::issuer_only`]).
    pub fn new(issuer_only: bool) -> Charging {
        Charging {
            issuer_only,
            ..Charging::default()
        }
    }

    /// `sectors` scaled to 0..=65535 over the size of `disk` (0 when unknown, warned once).
    fn scale(&mut self, b: &mut Books<'_>, disk: Dev, sectors: u64) -> u32 {
        let size = b.devices.info(disk).size;
        if size == 0 {
            if self.warned_no_size.insert(disk) {
                b.summary.warn(|| {
                    format!(
                        "device {}:{} has no known size: offsets and seek distances are 0",
                        disk >> 20,
                        disk & 0xfffff
                    )
                });
            }
            return 0;
        }
        ((sectors as u128 * 65536 / size as u128).min(65535)) as u32
    }

    /// Emits the IOs of (the completed part of) one request: one per act.
    pub fn emit(&mut self, mut b: Books<'_>, d: Done<'_>) {
        let parts = d.parts;
        let Some(&(first, _, _)) = parts.first() else {
            return;
        };
        let last = parts.iter().map(|p| p.1).max().unwrap_or(first);
        let total: u64 = parts.iter().map(|p| (p.1 - p.0) * 512).sum();
        let Some(dir) = Dir::from_rwbs(d.rwbs) else {
            b.summary.other_bytes += total;
            b.summary.other_ios += 1;
            return;
        };
        let prev_end = if d.swept {
            None
        } else {
            self.last_end.insert(d.disk, last)
        };
        let seek = match prev_end {
            Some(pe) => self.scale(&mut b, d.disk, first.abs_diff(pe)),
            None => 0,
        };
        // Group parts by what they are charged to.
        let mut groups: Vec<(Charge, u64, u64, u64, u64)> = Vec::new(); // charge, sector, bytes, qtime, foff
        for &(a, e, f) in parts {
            let key = Charge {
                qtime: 0,
                rwbs: Rwbs::default(),
                ..f.c
            };
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => {
                    g.2 += (e - a) * 512;
                    g.3 = g.3.min(f.c.qtime);
                }
                None => groups.push((key, a, (e - a) * 512, f.c.qtime, f.foff)),
            }
        }
        let split = groups.len() > 1;
        let in_lost = b.losses.touches(
            parts.iter().map(|p| p.2.c.qtime).min().unwrap_or(d.issue),
            d.complete,
        );
        for (c, sector, bytes, qtime, foff) in groups {
            let reason = (c.reason != NO_REASON).then_some(WbReason(c.reason));
            let intent = if c.via == Via::Unknown {
                INTENT_LOST
            } else {
                let modifier = if self.issuer_only {
                    blktrace_modifier(d.rwbs)
                } else {
                    reason.map(|r| r.modifier()).unwrap_or(0)
                };
                b.intents.intent(&mut b.tables.intents, modifier, c.stack)
            };
            let file = FileKey {
                dev: c.fdev,
                ino: c.ino,
            };
            let act = if c.via == Via::Unknown {
                // Charged to nobody known: the <unknown> role, told apart by who queued
                // the IO and why.
                let unknown = b.roles.unknown(&mut b.tables.roles);
                let issuer = (c.issuer != unknown).then_some(c.issuer);
                let key = ActKey {
                    role: unknown,
                    intent,
                    file,
                    via: c.via,
                    reason: c.reason,
                    issuer,
                };
                b.intents.act(b.tables, key)
            } else {
                let key = ActKey {
                    role: c.role,
                    intent,
                    file,
                    via: c.via,
                    reason: c.reason,
                    issuer: None,
                };
                b.intents.act(b.tables, key)
            };
            let offset = self.scale(&mut b, d.disk, sector);
            let journal_share = (c.share != NO_SHARE).then(|| c.share as f64 / SHARE_ONE as f64);
            let tot = &mut b.tables.totals[act.index()];
            let s = &mut *b.summary;
            s.bytes[dir.index()] += bytes;
            s.ios[dir.index()] += 1;
            if c.lower {
                // Counted for the device, not again for the act (nor in the notes of
                // what the act's IO lacks: its upper IO is).
                tot.add_lower(dir, bytes);
                s.lower_bytes += bytes;
            } else {
                tot.add(dir, bytes);
                tot.add_journal_share(bytes, journal_share);
            }
            if in_lost && !c.lower {
                tot.lost_window_bytes += bytes;
                s.bytes_in_lost_windows += bytes;
            }
            if c.via == Via::Unknown && !c.lower {
                s.unknown_bytes += bytes;
                s.unknown_ios += 1;
                let u = self
                    .unknown_ctx
                    .entry((c.fdev, c.ino, c.issuer, c.reason))
                    .or_default();
                u.0 += bytes;
                u.1 += 1;
            }
            let queue_time = qtime.min(d.issue);
            self.ios.push(Io {
                dev: d.disk,
                sector,
                size: bytes,
                dir,
                rwbs: d.rwbs,
                queue_time,
                issue_time: d.issue,
                complete_time: d.complete,
                wait_time: d.issue.saturating_sub(queue_time) / 1000,
                io_time: d.complete.saturating_sub(d.issue) / 1000,
                offset,
                seek_dist: seek,
                issuer: c.issuer,
                act,
                via: c.via,
                reason,
                ino: (c.ino != 0).then_some(c.ino),
                file_offset: (foff != NO_OFF).then_some(foff),
                split,
                journal_txn: (c.txn != NO_TXN).then_some(c.txn),
                journal_share,
                in_lost_window: in_lost,
                lower: c.lower,
            });
        }
    }

    /// The contexts of the bytes charged to the lost intent, largest first.
    pub fn unknown_contexts(&self) -> Vec<UnknownContext> {
        let mut uc: Vec<UnknownContext> = self
            .unknown_ctx
            .iter()
            .map(
                |(&(dev, ino, issuer, reason), &(bytes, ios))| UnknownContext {
                    file: FileKey { dev, ino },
                    issuer,
                    reason: (reason != NO_REASON).then_some(WbReason(reason)),
                    bytes,
                    ios,
                },
            )
            .collect();
        uc.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(a.file.cmp(&b.file))
                .then(a.issuer.cmp(&b.issuer))
                .then(a.reason.cmp(&b.reason))
        });
        uc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::InodeBits;
    use crate::contexts::Dio;
    use crate::dirty::BhEnt;
    use ioblame_format::BlockDevice;

    const DISK: Dev = 8 << 20;
    const ISSUER: u32 = 9;

    fn bio(rwbs: Rwbs, s: u64, e: u64, ctx: BioCtx) -> Bio {
        Bio {
            dev: DISK,
            info: DevInfo {
                disk: DISK,
                part_start: 0,
                size: 1 << 20,
            },
            s,
            e,
            rwbs,
            time: 100,
            issuer: RoleId(ISSUER),
            stack: 0,
            flags: 0,
            ctx,
            issuer_only: false,
        }
    }

    /// A recording without dirtier events (blktrace): writes, reads and readahead all go to
    /// the issuer, writes via `issuer`, even where a dirty folio would have named a dirtier.
    #[test]
    fn issuer_only_charges_every_bio_to_its_issuer() {
        let devs = Devices::default();
        let mut d = dirty();
        d.put_buffer(
            DISK,
            0,
            8,
            BhEnt {
                owner: Dirtier {
                    role: RoleId(1),
                    stack: 0,
                },
                via: Via::Buffer,
                ino: 0,
                t: 0,
            },
        );
        let only = |rwbs| Bio {
            issuer_only: true,
            ..bio(rwbs, 0, 8, BioCtx::default())
        };
        let p = charge_bio(&mut d, &devs, &only(w()), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Issuer, 0)]);
        let p = charge_bio(&mut d, &devs, &only(Rwbs::parse("RA")), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Readahead, 0)]);
        let p = charge_bio(&mut d, &devs, &only(Rwbs::parse("RS")), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Read, 0)]);
        // The same write charged by the rules goes to the buffer's dirtier.
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 8, BioCtx::default()), &[], None);
        assert_eq!(who(&p), vec![(0, 8, 1, Via::Buffer, 0)]);
    }

    fn w() -> Rwbs {
        Rwbs::parse("W")
    }

    /// Each part as `(start, end, role, via, ino)`.
    fn who(p: &Paint<Frag>) -> Vec<(u64, u64, u32, Via, u64)> {
        p.segs
            .iter()
            .map(|&(a, b, f)| (a, b, f.c.role.0, f.c.via, f.c.ino))
            .collect()
    }

    fn dirtier(role: u32) -> Dirtier {
        Dirtier {
            role: RoleId(role),
            stack: 0,
        }
    }

    fn map(a: u64, b: u64, ino: u64, foff: u64) -> (u64, u64, Rmap) {
        (a, b, Rmap { ino, foff, t: 0 })
    }

    fn dirty() -> Dirty {
        Dirty::new(4096, InodeBits::V6_18)
    }

    #[test]
    fn reads_and_direct_io_go_to_the_issuer() {
        let devs = Devices::default();
        let mut d = dirty();
        let ctx = BioCtx {
            read_file: Some((DISK, 12)),
            ..BioCtx::default()
        };
        let maps = [map(0, 8, 13, 4096)];
        let p = charge_bio(
            &mut d,
            &devs,
            &bio(Rwbs::parse("R"), 0, 16, ctx),
            &maps,
            None,
        );
        assert_eq!(
            who(&p),
            vec![
                (0, 8, ISSUER, Via::Read, 13),
                (8, 16, ISSUER, Via::Read, 12)
            ]
        );
        assert_eq!((p.segs[0].2.foff, p.segs[1].2.foff), (4096, NO_OFF));
        let p = charge_bio(&mut d, &devs, &bio(Rwbs::parse("RA"), 0, 8, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Readahead, 12)]);
        // metadata reads name no file
        let p = charge_bio(&mut d, &devs, &bio(Rwbs::parse("RM"), 0, 8, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Read, 0)]);
        // a write inside a direct IO's bracket, or with a direct IO stack
        let dio = BioCtx {
            dio: Some(Dio {
                dev: DISK,
                ino: 14,
                left: 4096,
            }),
            ..BioCtx::default()
        };
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 8, dio), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Direct, 14)]);
        let stack_dio = Bio {
            flags: STACK_DIO,
            ..bio(w(), 0, 8, BioCtx::default())
        };
        assert!(stack_dio.is_direct());
        let p = charge_bio(&mut d, &devs, &stack_dio, &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Direct, 0)]);
        // never metadata
        assert!(!bio(Rwbs(Rwbs::WRITE | Rwbs::META), 0, 8, dio).is_direct());
    }

    #[test]
    fn write_rules_first_match_wins() {
        let devs = Devices::default();
        let mut d = dirty();
        // rule 1: a dirty buffer at sectors 0..8
        d.put_buffer(
            DISK,
            0,
            8,
            BhEnt {
                owner: dirtier(1),
                via: Via::Buffer,
                ino: 0,
                t: 0,
            },
        );
        // rule 2: a dirty page of inode 12, mapped at sectors 8..16 (and also covered by the
        // buffer's sectors: the buffer wins there)
        d.put_folio(DISK, 12, 1, dirtier(2), Via::Page, 0);
        d.put_folio(DISK, 12, 0, dirtier(2), Via::Page, 0);
        let maps = [map(0, 16, 12, 0)];
        let ctx = BioCtx {
            wb_ino: Some((DISK, 12)),
            reason: 2,
            ..BioCtx::default()
        };
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 32, ctx), &maps, None);
        assert_eq!(
            who(&p),
            vec![
                (0, 8, 1, Via::Buffer, 12),
                (8, 16, 2, Via::Page, 12),
                // rule 6: the rest is the issuer's, lost, in the bracket's file
                (16, 32, ISSUER, Via::Unknown, 12),
            ]
        );
        assert_eq!(p.segs[1].2.foff, 4096);
        assert!(p
            .segs
            .iter()
            .all(|s| s.2.c.reason == 2 && s.2.c.issuer == RoleId(ISSUER)));
        // the buffer is taken; both pages the map wrote are forgotten (the one under the
        // buffer too: written either way)
        assert_eq!((d.buffers_len(), d.folios_len()), (0, 0));
    }

    #[test]
    fn journal_io_beats_the_inode_brackets() {
        let devs = Devices::default();
        let mut d = dirty();
        d.put_inode(DISK, 20, dirtier(3), 0);
        let ctx = BioCtx {
            wi_ino: Some((DISK, 20)),
            txn: 5,
            ..BioCtx::default()
        };
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 8, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Journal, 0)]);
        assert_eq!(p.segs[0].2.c.txn, 5);
        // rule 4 without the commit bracket
        let ctx = BioCtx { txn: NO_TXN, ..ctx };
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 8, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 8, 3, Via::Inode, 20)]);
        assert_eq!(p.segs[0].2.c.txn, NO_TXN);
        // a metadata write with FUA is a log write, bracket or not
        let log = Rwbs(Rwbs::WRITE | Rwbs::META | Rwbs::FUA);
        let p = charge_bio(&mut d, &devs, &bio(log, 0, 8, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Journal, 0)]);
        // a journal stack, without the bracket
        let b = Bio {
            flags: STACK_JOURNAL,
            ..bio(w(), 0, 8, BioCtx::default())
        };
        let p = charge_bio(&mut d, &devs, &b, &[], None);
        assert_eq!(who(&p), vec![(0, 8, ISSUER, Via::Journal, 0)]);
    }

    #[test]
    fn a_single_dirtier_takes_the_unmapped_sectors_and_its_pages() {
        let devs = Devices::default();
        let mut d = dirty();
        for i in 0..4 {
            d.put_folio(DISK, 30, i, dirtier(4), Via::Page, 0);
        }
        let ctx = BioCtx {
            wb_ino: Some((DISK, 30)),
            ..BioCtx::default()
        };
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 16, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 16, 4, Via::Page, 30)]);
        // 8 KiB written: two of the four pages
        assert_eq!(d.folios_len(), 2);
        // with two dirtiers, none is the single one
        d.put_folio(DISK, 30, 9, dirtier(5), Via::Page, 0);
        let p = charge_bio(&mut d, &devs, &bio(w(), 0, 16, ctx), &[], None);
        assert_eq!(who(&p), vec![(0, 16, ISSUER, Via::Unknown, 30)]);
    }

    /// A charge of `role` by `via` for inode `ino`.
    fn charge(role: u32, via: Via, ino: u64) -> Frag {
        Frag {
            c: Charge {
                role: RoleId(role),
                via,
                ino,
                ..Charge::unmatched(RoleId(ISSUER), DISK, 50, w())
            },
            foff: NO_OFF,
        }
    }

    struct Ledger {
        tables: Tables,
        roles: Roles,
        intents: Intents,
        summary: Summary,
        devices: Devices,
        losses: Losses,
        charging: Charging,
    }

    impl Ledger {
        fn new(size: u64) -> Ledger {
            let disk = BlockDevice {
                name: "sda".into(),
                major: 8,
                minor: 0,
                size_sectors: size,
                ..BlockDevice::default()
            };
            let mut roles = Roles::default();
            let mut tables = Tables {
                intents: Intents::reserved(),
                ..Tables::default()
            };
            for tid in 0..=ISSUER {
                roles.role_for(&mut tables.roles, tid, tid);
            }
            Ledger {
                tables,
                roles,
                intents: Intents::new(None, None),
                summary: Summary::default(),
                devices: Devices::new(&[disk], &[]),
                losses: Losses::default(),
                charging: Charging::default(),
            }
        }

        fn emit(&mut self, parts: &[(u64, u64, Frag)], rwbs: Rwbs, swept: bool) {
            let books = Books {
                tables: &mut self.tables,
                roles: &mut self.roles,
                intents: &mut self.intents,
                summary: &mut self.summary,
                devices: &self.devices,
                losses: &self.losses,
            };
            let done = Done {
                disk: DISK,
                parts,
                rwbs,
                issue: 1_000_000,
                complete: 3_000_000,
                swept,
            };
            self.charging.emit(books, done);
        }
    }

    #[test]
    fn a_request_is_split_by_act() {
        let mut t = Ledger::new(1 << 16);
        let a = charge(1, Via::Page, 12);
        let b = charge(2, Via::Buffer, 12);
        t.emit(&[(0, 8, a), (8, 16, b), (16, 24, a)], w(), false);
        let ios = std::mem::take(&mut t.charging.ios);
        assert_eq!(ios.len(), 2);
        assert!(ios.iter().all(|io| io.split));
        assert_eq!(
            ios.iter()
                .map(|io| (io.sector, io.size, io.act.0, io.via))
                .collect::<Vec<_>>(),
            vec![(0, 8192, 0, Via::Page), (8, 4096, 1, Via::Buffer)]
        );
        assert_eq!(ios[0].wait_time, (1_000_000 - 50) / 1000);
        assert_eq!(ios[0].io_time, 2000);
        assert_eq!(t.tables.totals[0].bytes[Dir::W.index()], 8192);
        assert_eq!(t.tables.acts[1].role, RoleId(2));
        // the intent of both: the empty stack, no modifier
        assert_eq!(t.tables.intents.len(), 3);
        assert_eq!(t.summary.bytes[Dir::W.index()], 12288);
        // the next IO's seek distance from the end of this one (sector 24), scaled
        t.emit(&[(1024, 1032, a)], w(), false);
        let io = &t.charging.ios[0];
        assert!(!io.split);
        assert_eq!(io.seek_dist, 1000);
        assert_eq!(io.offset, 1024);
    }

    #[test]
    fn unlinked_io_goes_to_the_unknown_role_by_issuer() {
        let mut t = Ledger::new(1 << 16);
        t.emit(&[(0, 8, charge(ISSUER, Via::Unknown, 12))], w(), true);
        let u = t.roles.unknown(&mut t.tables.roles);
        let io = &t.charging.ios[0];
        let act = &t.tables.acts[io.act.index()];
        assert_eq!(
            (act.role, act.intent, act.issuer),
            (u, INTENT_LOST, Some(RoleId(ISSUER)))
        );
        assert_eq!((io.issuer, io.seek_dist), (RoleId(ISSUER), 0));
        assert_eq!((t.summary.unknown_bytes, t.summary.unknown_ios), (4096, 1));
        let uc = t.charging.unknown_contexts();
        assert_eq!(uc.len(), 1);
        assert_eq!(
            (uc[0].file.ino, uc[0].issuer, uc[0].bytes),
            (12, RoleId(ISSUER), 4096)
        );
    }

    #[test]
    fn other_requests_are_counted_and_unsized_devices_warned_once() {
        let mut t = Ledger::new(1 << 16);
        t.emit(&[(0, 8, charge(1, Via::Page, 12))], Rwbs::parse("D"), false);
        assert!(t.charging.ios.is_empty());
        assert_eq!((t.summary.other_bytes, t.summary.other_ios), (4096, 1));
        let mut t = Ledger::new(0);
        for _ in 0..3 {
            t.emit(&[(8, 16, charge(1, Via::Page, 12))], w(), false);
        }
        assert!(t.charging.ios.iter().all(|io| io.offset == 0));
        assert_eq!(t.summary.warnings.len(), 1);
    }
}
