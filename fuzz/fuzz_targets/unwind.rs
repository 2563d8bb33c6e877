//! Fuzzes the unwinding of stack copies (`ioblame-unwind`): any bytes as a file's unwind
//! tables (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`, at any addresses, with any
//! segments), mapped anywhere, and any registers and stack bytes, must unwind to at most
//! `MAX_FRAMES` frames or stop, never panic.
//!
//! gimli and framehop do arithmetic on the tables' values that overflows on damaged ones (a
//! panic in builds with overflow checks, as fuzzing's and the debug analyzer's; found here:
//! gimli's `DW_OP_piece` size, framehop's return address read below a tiny stack pointer).
//! `ioblame-unwind` catches their panics (the stack ends there); libFuzzer's panic hook
//! aborts before any catch, so this target lets the panics raised inside those two crates
//! through to it, and every other panic (ours) still aborts.
//!
//! Input: a segment (offset, address, file size: u64 LE; flags: u32 LE), the mapping (start,
//! end, file offset: u64 LE), three sections each as (address: u64 LE, length: u16 LE,
//! bytes), the registers (ip, sp, fp, lr: u64 LE), then the stack's bytes.
#![no_main]

use ioblame_decode::StackCopy;
use ioblame_format::{ElfLoad, ElfSection, UserSymbols};
use ioblame_unwind::{Arch, Mapped, UnwindTables, Unwinder, MAX_FRAMES};
use libfuzzer_sys::fuzz_target;

#[path = "common/input.rs"]
mod input;
use input::{take, u64_of};

/// Installs, once, a panic hook that leaves gimli's and framehop's panics to
/// `ioblame-unwind`'s catch and hands every other one to libFuzzer's (which aborts).
fn tolerate_table_parsers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fuzzer = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map(|l| l.file()).unwrap_or_default();
            if !(file.contains("/gimli-") || file.contains("/framehop-")) {
                fuzzer(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    tolerate_table_parsers();
    let mut d = data;
    let word = |d: &mut &[u8]| u64_of(take(d, 8));
    let load = ElfLoad {
        offset: word(&mut d),
        vaddr: word(&mut d),
        filesz: word(&mut d),
        flags: u64_of(take(&mut d, 4)) as u32,
    };
    let (start, end, pgoff) = (word(&mut d), word(&mut d), word(&mut d));
    let mut sections = Vec::new();
    for name in [".eh_frame", ".eh_frame_hdr", ".debug_frame"] {
        let addr = word(&mut d);
        let n = u64_of(take(&mut d, 2)) as usize;
        sections.push(ElfSection {
            name: name.into(),
            addr,
            data: take(&mut d, n).to_vec(),
        });
    }
    let copy = StackCopy {
        ip: word(&mut d),
        sp: word(&mut d),
        fp: word(&mut d),
        lr: word(&mut d),
        full: true,
        bytes: d.into(),
    };
    let id = vec![0xcd; 20];
    let s = UserSymbols {
        build_id: id.clone(),
        path: "/fuzz".into(),
        class64: true,
        loads: vec![load],
        sections,
        ..Default::default()
    };
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let mut u = Unwinder::new(arch, UnwindTables::new(std::slice::from_ref(&s)));
        let maps = || {
            vec![Mapped {
                start,
                end,
                pgoff,
                build_id: &id,
                path: "/fuzz",
            }]
        };
        let mut out = Vec::new();
        let _ = u.unwind(1, 1, maps, &copy, &mut out);
        assert!(out.len() <= MAX_FRAMES);
    }
});
