//! Fuzzes the symbol tables a trace carries (USER_SYMBOLS): any bytes as `PT_LOAD` segments
//! and as `.symtab`/`.strtab`, `.dynsym`/`.dynstr` and `.gnu_debugdata` sections, in either
//! class and byte order, must load (damage reported, never a panic), and symbolizing any
//! offset must not panic. Nothing outside the input is read (no directory, system or local
//! file).
//!
//! Input: a flags byte (1: ELFCLASS64, 2: big-endian, 4: EM_ARM), a segment count (mod 5),
//! that many segments of 28 bytes (offset, address, file size: u64 LE; flags: u32 LE), five
//! u16 LE section lengths in the order above, the sections' bytes, then u64 LE file offsets
//! to symbolize. `fuzz/make-seeds.py` writes seeds of this layout from a gcc-built program.
#![no_main]

use ioblame_format::{ElfLoad, ElfSection, UserSymbols};
use ioblame_symbolize::{Options, Symbolizer};
use libfuzzer_sys::fuzz_target;

const SECTIONS: [&str; 5] = [".symtab", ".strtab", ".dynsym", ".dynstr", ".gnu_debugdata"];

#[path = "common/input.rs"]
mod input;
use input::{take, u64_of};

fuzz_target!(|data: &[u8]| {
    let mut d = data;
    let flags = take(&mut d, 1).first().copied().unwrap_or(0);
    let nloads = take(&mut d, 1).first().copied().unwrap_or(0) % 5;
    let mut loads = Vec::new();
    for _ in 0..nloads {
        let l = take(&mut d, 28);
        if l.len() < 28 {
            break;
        }
        loads.push(ElfLoad {
            offset: u64_of(&l[0..8]),
            vaddr: u64_of(&l[8..16]),
            filesz: u64_of(&l[16..24]),
            flags: u64_of(&l[24..28]) as u32,
        });
    }
    let lens: Vec<usize> = (0..5).map(|_| u64_of(take(&mut d, 2)) as usize).collect();
    let sections = SECTIONS
        .iter()
        .zip(lens)
        .map(|(name, n)| ElfSection {
            name: name.to_string(),
            addr: 0,
            data: take(&mut d, n).to_vec(),
        })
        .collect();
    let mut offsets: Vec<u64> = d.chunks(8).take(16).map(u64_of).collect();
    for l in &loads {
        offsets.extend([
            l.offset,
            l.offset.wrapping_add(l.filesz / 2),
            l.offset.wrapping_add(l.filesz.saturating_sub(1)),
        ]);
    }
    offsets.extend([0, u64::MAX]);
    let id = vec![0xab; 20];
    let s = UserSymbols {
        build_id: id.clone(),
        path: "/fuzz".into(),
        class64: flags & 1 != 0,
        big_endian: flags & 2 != 0,
        machine: if flags & 4 != 0 { 40 } else { 62 },
        loads,
        sections,
    };
    let mut sym = Symbolizer::new(vec![s], Options::default());
    for o in offsets {
        let f = sym.symbolize(&id, "/fuzz", o);
        let _ = f.functions.len();
    }
    for m in sym.modules() {
        for p in &m.problems {
            let _ = p.to_string();
        }
    }
});
