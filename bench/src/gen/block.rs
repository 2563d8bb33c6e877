//! The simulated page cache and block layer: pages cached (and evicted by kswapd when the
//! cache is full), blocks allocated, requests queued as one bio or two back-merged, issued,
//! and completed a few requests later, slightly out of issue order.

use anyhow::Result;
use ioblame_decode::synth::Val;

use super::{kdev, page_fields, Gen, Pending, DEVS, E, KSWAPD, PAGE_CACHE_PAGES};

impl Gen {
    /// A page added to the page cache by `pid`; kswapd evicts the oldest ones in batches
    /// when the cache is full.
    pub(super) fn cache_page(
        &mut self,
        cpu: u32,
        pid: u32,
        d: usize,
        ino: u64,
        index: u64,
    ) -> Result<()> {
        let pfn = 0x10_0000 + self.rng.below(1 << 23);
        self.sample(
            cpu,
            E::AddToPageCache,
            pid,
            &[],
            &page_fields(d, ino, index, pfn),
        )?;
        self.cached.push_back((d, ino, index, pfn));
        if self.cached.len() >= PAGE_CACHE_PAGES + 32 {
            let kcpu = self.rng.below(self.cpus as u64) as u32;
            let mut evicted = 0;
            // Dirty pages go back to the end, once each at most per batch.
            for _ in 0..32 + self.dirty_pages.len().min(PAGE_CACHE_PAGES) {
                if evicted == 32 {
                    break;
                }
                let Some((d, ino, index, pfn)) = self.cached.pop_front() else {
                    break;
                };
                if self.dirty_pages.contains(&(d, ino, index)) {
                    self.cached.push_back((d, ino, index, pfn));
                    continue;
                }
                evicted += 1;
                self.sample(
                    kcpu,
                    E::DeleteFromPageCache,
                    KSWAPD,
                    &[],
                    &page_fields(d, ino, index, pfn),
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn alloc(&mut self, d: usize, blocks: u64) -> u64 {
        let b = self.next_block[d];
        let span = DEVS[d].3 / 4096 - 1_000_000;
        self.next_block[d] = 100_000 + (b - 100_000 + blocks + self.rng.below(64)) % span;
        b
    }

    /// A request of `nr` sectors at `sector` of disk `d`, queued by `pid` with `stack` as one
    /// bio or (`merge`) two, the second back-merged into the first; got, inserted, issued.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request(
        &mut self,
        cpu: u32,
        pid: u32,
        comm: &str,
        stack: &[u64],
        d: usize,
        sector: u64,
        nr: u64,
        rwbs: &'static str,
        merge: bool,
        wb: Option<(u64, u64, u64)>,
    ) -> Result<()> {
        let dev = Val::U(kdev(d));
        let first = if merge { (nr / 2).max(8) & !7 } else { nr };
        let bio = |s: u64, n: u64| {
            [
                ("dev", dev),
                ("sector", Val::U(s)),
                ("nr_sector", Val::U(n)),
                ("rwbs", Val::Str(rwbs)),
                ("comm", Val::Str(comm)),
            ]
        };
        self.sample(cpu, E::BioQueue, pid, stack, &bio(sector, first))?;
        self.sample(cpu, E::GetRq, pid, &[], &bio(sector, first))?;
        if first < nr {
            self.sample(
                cpu,
                E::BioQueue,
                pid,
                stack,
                &bio(sector + first, nr - first),
            )?;
            self.sample(
                cpu,
                E::BioBackmerge,
                pid,
                &[],
                &bio(sector + first, nr - first),
            )?;
        }
        let rq = [
            ("dev", dev),
            ("sector", Val::U(sector)),
            ("nr_sector", Val::U(nr)),
            ("bytes", Val::U(nr * 512)),
            ("rwbs", Val::Str(rwbs)),
            ("comm", Val::Str(comm)),
        ];
        self.sample(cpu, E::RqInsert, pid, &[], &rq)?;
        self.sample(cpu, E::RqIssue, pid, &[], &rq)?;
        self.sample(cpu, E::IoStart, pid, &[], &rq)?;
        self.inflight[d].push_back(Pending {
            d,
            sector,
            nr,
            rwbs,
            comm: comm.to_string(),
            wb,
        });
        while self.inflight[d].len() > 16 {
            self.complete_one(d)?;
        }
        Ok(())
    }

    pub(super) fn complete_one(&mut self, d: usize) -> Result<()> {
        // Not strictly in issue order: sometimes a younger request finishes first.
        let len = self.inflight[d].len();
        let i = if len > 3 && self.rng.chance(4) {
            1 + self.rng.below(2) as usize
        } else {
            0
        };
        let Some(p) = self.inflight[d].remove(i) else {
            return Ok(());
        };
        // Completions run in interrupt context on whatever CPU.
        let cpu = self.rng.below(self.cpus as u64) as u32;
        let dev = Val::U(kdev(p.d));
        self.sample(
            cpu,
            E::RqComplete,
            0,
            &[],
            &[
                ("dev", dev),
                ("sector", Val::U(p.sector)),
                ("nr_sector", Val::U(p.nr)),
                ("error", Val::I(0)),
                ("rwbs", Val::Str(p.rwbs)),
            ],
        )?;
        self.sample(
            cpu,
            E::IoDone,
            0,
            &[],
            &[
                ("dev", dev),
                ("sector", Val::U(p.sector)),
                ("nr_sector", Val::U(p.nr)),
                ("bytes", Val::U(0)),
                ("rwbs", Val::Str(p.rwbs)),
                ("comm", Val::Str(&p.comm)),
            ],
        )?;
        if let Some((ino, _, _)) = p.wb {
            self.sample(
                cpu,
                E::SbClearWb,
                0,
                &[],
                &[("dev", dev), ("ino", Val::U(ino)), ("state", Val::U(0x80))],
            )?;
        }
        Ok(())
    }
}
