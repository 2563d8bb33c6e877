//! Unwinding this test binary's own stack, copied as the kernel copies a sample's: the
//! frames found are the functions that called each other, by the binary's `.eh_frame`
//! (Rust builds omit frame pointers), and a copy cut short ends as [`End::CopyEnd`].

use super::*;
use ioblame_format::ElfSection;
use object::{Object, ObjectSection, ObjectSymbol};
use std::os::unix::fs::FileExt;

/// This binary as the recorder copies it (`--user-stacks dwarf`): its segments, its symbol
/// table and unwind tables, with their addresses.
fn this_binary() -> (UserSymbols, Vec<u8>) {
    let data = std::fs::read("/proc/self/exe").unwrap();
    let f = object::File::parse(&*data).unwrap();
    let build_id = f.build_id().unwrap().unwrap_or(b"self").to_vec();
    let sections = [".eh_frame", ".eh_frame_hdr", ".debug_frame"]
        .iter()
        .filter_map(|n| {
            let s = f.section_by_name(n)?;
            Some(ElfSection {
                name: n.to_string(),
                addr: s.address(),
                data: s.data().ok()?.to_vec(),
            })
        })
        .collect();
    let object::File::Elf64(elf) = &f else {
        panic!("not a 64-bit ELF")
    };
    let e = elf.endian();
    use object::read::elf::ProgramHeader;
    let loads = elf
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD)
        .map(|p| ElfLoad {
            offset: p.p_offset(e),
            vaddr: p.p_vaddr(e),
            filesz: p.p_filesz(e),
            flags: p.p_flags(e),
        })
        .collect();
    let s = UserSymbols {
        build_id,
        path: "self".into(),
        class64: true,
        machine: 62,
        loads,
        sections,
        ..Default::default()
    };
    (s, data)
}

/// The executable mappings of this process's binary, from `/proc/self/maps`.
fn own_maps() -> Vec<(u64, u64, u64)> {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| l.ends_with(exe.to_str().unwrap()))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (range, perms, off) = (w.next()?, w.next()?, w.next()?);
            let (a, b) = range.split_once('-')?;
            perms.contains('x').then(|| {
                (
                    u64::from_str_radix(a, 16).unwrap(),
                    u64::from_str_radix(b, 16).unwrap(),
                    u64::from_str_radix(off, 16).unwrap(),
                )
            })
        })
        .collect()
}

/// The registers here and `len` bytes of the stack from the stack pointer up, read through
/// `/proc/self/mem` (which stops at the end of the mapping, where a plain read would fault).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn copy_here(len: usize) -> StackCopy {
    let (ip, sp, fp): (u64, u64, u64);
    // SAFETY: reads three registers into outputs; touches no memory and no other register.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {fp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            fp = out(reg) fp,
            options(nomem, nostack, preserves_flags)
        );
    }
    let mem = std::fs::File::open("/proc/self/mem").unwrap();
    let mut bytes = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match mem.read_at(&mut bytes[got..], sp + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    bytes.truncate(got);
    StackCopy {
        ip,
        sp,
        fp,
        lr: 0,
        full: got == len,
        bytes: bytes.into(),
    }
}

#[inline(never)]
fn inner_level(len: usize) -> StackCopy {
    let c = copy_here(len);
    std::hint::black_box(c)
}

#[inline(never)]
fn outer_level(len: usize) -> StackCopy {
    let c = inner_level(len);
    std::hint::black_box(c)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn this_stack_unwinds_by_its_call_frame_information() {
    let (sym, data) = this_binary();
    let maps = own_maps();
    let build_id = sym.build_id.clone();
    let tables = UnwindTables::new(std::slice::from_ref(&sym));
    assert!(tables.has(&build_id), "the test binary has .eh_frame");
    assert!(
        tables.files[&build_id].eh_frame_hdr.is_some(),
        "the linker's index is kept"
    );
    let mut u = Unwinder::new(Arch::X86_64, tables);
    let mapped = || {
        maps.iter()
            .map(|&(start, end, pgoff)| Mapped {
                start,
                end,
                pgoff,
                build_id: &build_id,
                path: "self",
            })
            .collect()
    };
    let copy = outer_level(16 << 10);
    let mut out = Vec::new();
    let end = u.unwind(1, 1, mapped, &copy, &mut out);
    // Each frame named by the symbol table, moved by where this binary was loaded.
    let f = object::File::parse(&*data).unwrap();
    let syms: Vec<(u64, u64, String)> = f
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.size(), s.name().unwrap_or("?").to_string()))
        .collect();
    let here = syms.iter().find(|s| s.2.contains("copy_here")).unwrap().0;
    let bias = (copy_here as fn(usize) -> StackCopy as usize as u64).wrapping_sub(here);
    let names: Vec<String> = out
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let a = if i == 0 { a } else { a - 1 }.wrapping_sub(bias);
            syms.iter()
                .find(|s| s.0 <= a && a < s.0 + s.1)
                .map_or_else(|| format!("{a:#x}"), |s| s.2.clone())
        })
        .collect();
    let pos = |f: &str| names.iter().position(|n| n.contains(f));
    let (c, i, o) = (pos("copy_here"), pos("inner_level"), pos("outer_level"));
    assert_eq!(c, Some(0), "{names:?}");
    assert_eq!(i, Some(1), "{names:?}");
    assert_eq!(o, Some(2), "{names:?}");
    assert!(
        pos("this_stack_unwinds").is_some_and(|t| t == 3),
        "the test's own frame next: {names:?}"
    );
    assert!(matches!(end, End::Root | End::Stopped | End::CopyEnd));
    // The same copy cut to 64 bytes: the frames inside it, then the copy's end.
    let short = StackCopy {
        bytes: copy.bytes[..64].into(),
        full: true,
        ..copy.clone()
    };
    let end = u.unwind(1, 1, || unreachable!("same generation"), &short, &mut out);
    assert!(out.len() < names.len(), "{out:?}");
    assert_eq!(end, End::CopyEnd);
    // A copy that ended at the stack's top (the kernel copied less than asked) is whole:
    // what lies above it is no frame of it.
    let top = StackCopy {
        full: false,
        ..short.clone()
    };
    assert_ne!(u.unwind(1, 1, Vec::new, &top, &mut out), End::CopyEnd);
    // A process whose mappings changed is built again, here with no file: frame pointers
    // only, which this build does not keep: fewer frames.
    let end = u.unwind(1, 2, Vec::new, &copy, &mut out);
    assert_eq!(out.first(), Some(&copy.ip));
    assert!(out.len() <= names.len());
    let _ = end;
}

#[test]
fn files_without_unwind_tables_are_not_kept() {
    let s = UserSymbols {
        build_id: vec![1],
        sections: vec![ElfSection {
            name: ".symtab".into(),
            addr: 0,
            data: vec![1],
        }],
        ..Default::default()
    };
    assert!(UnwindTables::new(&[s]).is_empty());
    assert_eq!(Arch::of_machine("x86_64"), Some(Arch::X86_64));
    assert_eq!(Arch::of_machine("riscv64"), None);
}

#[test]
fn a_copy_outside_every_module_gives_its_pc_and_stops() {
    let mut u = Unwinder::new(Arch::X86_64, UnwindTables::default());
    let copy = StackCopy {
        ip: 0x1000,
        sp: 0x7000,
        fp: 0x7010,
        lr: 0,
        bytes: vec![0u8; 32].into(),
        full: true,
    };
    let mut out = Vec::new();
    let end = u.unwind(9, 0, Vec::new, &copy, &mut out);
    // The frame-pointer fallback reads a return address of 0 there: the end.
    assert_eq!((&out[..], end), (&[0x1000][..], End::Root));
    // Damaged registers: no panic.
    let bad = StackCopy {
        ip: u64::MAX,
        sp: u64::MAX - 3,
        fp: 0,
        lr: u64::MAX,
        bytes: vec![0xff; 64].into(),
        full: true,
    };
    u.unwind(9, 0, Vec::new, &bad, &mut out);
    let mut a = Unwinder::new(Arch::Aarch64, UnwindTables::default());
    a.unwind(9, 0, Vec::new, &bad, &mut out);
}

/// A `.eh_frame` of one CIE whose initial instructions define the CFA by `expression`
/// (`DW_CFA_def_cfa_expression`), then the terminator.
fn eh_frame_with(expression: &[u8]) -> Vec<u8> {
    let mut body = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b];
    body.push(0x0f);
    body.push(expression.len() as u8);
    body.extend_from_slice(expression);
    while (body.len() + 4) % 4 != 0 {
        body.push(0); // DW_CFA_nop
    }
    let mut v = (body.len() as u32).to_le_bytes().to_vec();
    v.extend(body);
    v.extend([0, 0, 0, 0]);
    v
}

#[test]
fn tables_with_a_looping_expression_are_left_out() {
    let file = |expression: &[u8]| UserSymbols {
        build_id: vec![7],
        sections: vec![ElfSection {
            name: ".eh_frame".into(),
            addr: 0x2000,
            data: eh_frame_with(expression),
        }],
        ..Default::default()
    };
    // DW_OP_breg7 0 (rsp): kept.
    assert!(UnwindTables::new(&[file(&[0x77, 0])]).has(&[7]));
    // DW_OP_skip -3: jumps back onto itself, forever (gimli sets no bound): left out.
    assert!(UnwindTables::new(&[file(&[0x2f, 0xfd, 0xff])]).is_empty());
    // DW_OP_bra likewise.
    assert!(UnwindTables::new(&[file(&[0x30, 0x28, 0xfd, 0xff])]).is_empty());
}
