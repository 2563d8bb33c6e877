//! Symbol tables read from raw section bytes (`Elf32_Sym`/`Elf64_Sym` entries and their
//! string table, in either byte order), as the trace carries them: every read is bounds
//! checked, any bytes load (entries that cannot be read are skipped, counted), and the
//! result is a sorted vector searched by address.

use ioblame_format::ElfLoad;

/// Which table a symbol came from; the lower, the more trusted at equal addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Origin {
    /// `.symtab`.
    Symtab = 0,
    /// `.symtab` of the xz-compressed `.gnu_debugdata`.
    DebugData = 1,
    /// `.dynsym`.
    Dynsym = 2,
}

const STT_NOTYPE: u8 = 0;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;
const STB_LOCAL: u8 = 0;
const STB_GLOBAL: u8 = 1;
const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;
const PF_X: u32 = 1;
/// Longest symbol name read; longer ones are cut there.
const MAX_NAME: usize = 4096;

/// One symbol of the merged table.
#[derive(Debug, Clone)]
struct Sym {
    addr: u64,
    size: u64,
    origin: Origin,
    func: bool,
    binding: u8,
    name: Box<str>,
}

/// How good a symbol is among several at the same address: perf's choice (sized, global
/// over weak over local, fewer leading underscores, shorter), after the table and the type.
fn preference(s: &Sym) -> (Origin, bool, bool, u8, usize, usize) {
    let bind = match s.binding {
        STB_GLOBAL => 0,
        STB_LOCAL => 2,
        _ => 1,
    };
    let underscores = s.name.bytes().take_while(|&b| b == b'_').count();
    (
        s.origin,
        !s.func,
        s.size == 0,
        bind,
        underscores,
        s.name.len(),
    )
}

/// A module's symbols, sorted by address, one per address.
#[derive(Debug, Default)]
pub(crate) struct Symbols {
    syms: Vec<Sym>,
    /// The executable segments' address ranges (start, end), for symbols without a size.
    exec: Vec<(u64, u64)>,
    /// Entries skipped because they could not be read (name out of range, table cut short).
    pub(crate) damaged: usize,
}

/// The byte order and class of the tables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) class64: bool,
    pub(crate) big_endian: bool,
    /// ARM: a function symbol's low bit marks Thumb code and is not part of its address.
    pub(crate) thumb_bit: bool,
}

impl Layout {
    fn u16(&self, b: &[u8], at: usize) -> u16 {
        let x = [b[at], b[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(x)
        } else {
            u16::from_le_bytes(x)
        }
    }
    fn u32(&self, b: &[u8], at: usize) -> u32 {
        let mut x = [0; 4];
        x.copy_from_slice(&b[at..at + 4]);
        if self.big_endian {
            u32::from_be_bytes(x)
        } else {
            u32::from_le_bytes(x)
        }
    }
    fn u64(&self, b: &[u8], at: usize) -> u64 {
        let mut x = [0; 8];
        x.copy_from_slice(&b[at..at + 8]);
        if self.big_endian {
            u64::from_be_bytes(x)
        } else {
            u64::from_le_bytes(x)
        }
    }
    fn entry_size(&self) -> usize {
        if self.class64 {
            24
        } else {
            16
        }
    }
}

/// A string of a string table, NUL-terminated, at most [`MAX_NAME`] bytes.
fn name_at(strtab: &[u8], at: usize) -> Option<&[u8]> {
    let rest = strtab.get(at..)?;
    let end = rest.iter().take(MAX_NAME).position(|&b| b == 0)?;
    Some(&rest[..end])
}

/// The address ranges of the executable segments among `loads`.
pub(crate) fn exec_ranges(loads: &[ElfLoad]) -> Vec<(u64, u64)> {
    loads
        .iter()
        .filter(|l| l.flags & PF_X != 0)
        .map(|l| (l.vaddr, l.vaddr.saturating_add(l.filesz)))
        .collect()
}

impl Symbols {
    /// An empty table for a module whose executable segments span `exec` (start, end).
    pub(crate) fn new(exec: Vec<(u64, u64)>) -> Symbols {
        Symbols {
            exec,
            ..Symbols::default()
        }
    }

    fn in_exec(&self, addr: u64) -> Option<(u64, u64)> {
        self.exec
            .iter()
            .copied()
            .find(|&(s, e)| s <= addr && addr < e)
    }

    /// Adds the code symbols of one table (`symtab`'s entries named in `strtab`).
    pub(crate) fn add_table(
        &mut self,
        layout: Layout,
        symtab: &[u8],
        strtab: &[u8],
        origin: Origin,
    ) {
        let es = layout.entry_size();
        if symtab.len() % es != 0 {
            self.damaged += 1;
        }
        // Entry 0 is the null symbol.
        for e in symtab.chunks_exact(es).skip(1) {
            let (name, value, size, info, shndx) = if layout.class64 {
                (
                    layout.u32(e, 0),
                    layout.u64(e, 8),
                    layout.u64(e, 16),
                    e[4],
                    layout.u16(e, 6),
                )
            } else {
                (
                    layout.u32(e, 0),
                    u64::from(layout.u32(e, 4)),
                    u64::from(layout.u32(e, 8)),
                    e[12],
                    layout.u16(e, 14),
                )
            };
            let typ = info & 0xf;
            let binding = info >> 4;
            let func = typ == STT_FUNC || typ == STT_GNU_IFUNC;
            if !(func || typ == STT_NOTYPE) || shndx == SHN_UNDEF {
                continue;
            }
            let mut addr = value;
            if func && layout.thumb_bit {
                addr &= !1;
            }
            // Untyped symbols name code only inside an executable segment, and never an
            // absolute value or a common block.
            if !func && (shndx >= SHN_LORESERVE || self.in_exec(addr).is_none()) {
                continue;
            }
            let Some(raw) = name_at(strtab, name as usize) else {
                self.damaged += 1;
                continue;
            };
            // Mapping symbols ($x, $d, $a, $t) and assembler locals.
            if raw.is_empty() || raw[0] == b'$' || raw.starts_with(b".L") {
                continue;
            }
            self.syms.push(Sym {
                addr,
                size,
                origin,
                func,
                binding,
                name: String::from_utf8_lossy(raw).into(),
            });
        }
    }

    /// Sorts the symbols by address and keeps the best of each address.
    pub(crate) fn finish(&mut self) {
        self.syms.sort_by(|a, b| {
            a.addr
                .cmp(&b.addr)
                .then_with(|| preference(a).cmp(&preference(b)))
        });
        self.syms.dedup_by(|later, first| later.addr == first.addr);
        self.syms.shrink_to_fit();
    }

    /// How many symbols the table holds.
    pub(crate) fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether a table of `origin` contributed symbols.
    pub(crate) fn has(&self, origin: Origin) -> bool {
        self.syms.iter().any(|s| s.origin == origin)
    }

    /// The raw name of the symbol holding `addr`: the one with the greatest address at or
    /// below it whose size covers it, or, without a size, the nearest before it in the same
    /// executable segment.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&str> {
        let end = self.syms.partition_point(|s| s.addr <= addr);
        let i = end.checked_sub(1)?;
        // A sized symbol covering `addr` (the nearest first: an earlier, larger one may
        // enclose it, e.g. a function with nested local labels).
        if let Some(s) = self.syms[i.saturating_sub(8)..=i]
            .iter()
            .rev()
            .find(|s| s.size != 0 && addr - s.addr < s.size)
        {
            return Some(&s.name);
        }
        let s = &self.syms[i];
        if s.size != 0 {
            return None;
        }
        let seg = self.in_exec(addr)?;
        (seg.0 <= s.addr).then_some(&*s.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym64(name: u32, info: u8, shndx: u16, value: u64, size: u64, be: bool) -> Vec<u8> {
        let mut v = Vec::new();
        let w32 = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        let w16 = |x: u16| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        let w64 = |x: u64| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        v.extend(w32(name));
        v.push(info);
        v.push(0);
        v.extend(w16(shndx));
        v.extend(w64(value));
        v.extend(w64(size));
        v
    }

    fn sym32(name: u32, info: u8, shndx: u16, value: u32, size: u32) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(name.to_be_bytes());
        v.extend(value.to_be_bytes());
        v.extend(size.to_be_bytes());
        v.push(info);
        v.push(0);
        v.extend(shndx.to_be_bytes());
        v
    }

    const LOADS: [ElfLoad; 1] = [ElfLoad {
        offset: 0x1000,
        vaddr: 0x1000,
        filesz: 0x1000,
        flags: 5,
    }];

    #[test]
    fn both_classes_and_orders() {
        let strtab = b"\0alpha\0beta\0gamma\0";
        for be in [false, true] {
            let mut t = vec![0u8; 24];
            t.extend(sym64(1, 0x12, 1, 0x1100, 0x10, be)); // alpha FUNC GLOBAL
            t.extend(sym64(7, 0x02, 1, 0x1200, 0, be)); // beta FUNC LOCAL, no size
            t.extend(sym64(12, 0x11, 2, 0x1300, 8, be)); // gamma OBJECT: not code
            let mut s = Symbols::new(exec_ranges(&LOADS));
            let layout = Layout {
                class64: true,
                big_endian: be,
                thumb_bit: false,
            };
            s.add_table(layout, &t, strtab, Origin::Symtab);
            s.finish();
            assert_eq!(s.len(), 2);
            assert_eq!(s.lookup(0x1100), Some("alpha"));
            assert_eq!(s.lookup(0x110f), Some("alpha"));
            assert_eq!(s.lookup(0x1110), None);
            assert_eq!(s.lookup(0x1250), Some("beta"));
            assert_eq!(s.lookup(0x1fff), Some("beta"));
            assert_eq!(s.lookup(0x2000), None, "past the executable segment");
            assert_eq!(s.lookup(0x10ff), None);
        }
        let mut t = vec![0u8; 16];
        t.extend(sym32(1, 0x12, 1, 0x1100, 0x10));
        let mut s = Symbols::new(exec_ranges(&LOADS));
        let layout = Layout {
            class64: false,
            big_endian: true,
            thumb_bit: false,
        };
        s.add_table(layout, &t, strtab, Origin::Dynsym);
        s.finish();
        assert_eq!(s.lookup(0x1104), Some("alpha"));
    }

    #[test]
    fn symtab_wins_and_damage_is_counted() {
        let strtab = b"\0dyn_name\0full_name\0";
        let mut dynsym = vec![0u8; 24];
        dynsym.extend(sym64(1, 0x12, 1, 0x1100, 0x10, false));
        dynsym.extend(sym64(999, 0x12, 1, 0x1400, 0x10, false)); // name out of range
        let mut symtab = vec![0u8; 24];
        symtab.extend(sym64(10, 0x02, 1, 0x1100, 0x10, false));
        symtab.extend([1, 2, 3]); // cut short
        let layout = Layout {
            class64: true,
            big_endian: false,
            thumb_bit: false,
        };
        let mut s = Symbols::new(exec_ranges(&LOADS));
        s.add_table(layout, &dynsym, strtab, Origin::Dynsym);
        s.add_table(layout, &symtab, strtab, Origin::Symtab);
        s.finish();
        assert_eq!(s.lookup(0x1108), Some("full_name"));
        assert_eq!(s.damaged, 2);
    }
}
