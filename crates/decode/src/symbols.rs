//! Kernel symbols from a `/proc/kallsyms` snapshot.
//!
//! ```
//! use ioblame_decode::symbols::Symbolizer;
//! let s = Symbolizer::from_kallsyms(
//!     "ffffffff811c5390 T __mark_inode_dirty\nffffffff811c56c0 t next_fn\n",
//! );
//! assert_eq!(s.format_frame(0xffffffff811c55b0), "[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330");
//! ```

/// A resolved address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sym<'a> {
    /// Symbol name.
    pub name: &'a str,
    /// Offset of the address from the symbol's start.
    pub offset: u64,
    /// Distance to the next symbol (0 when unknown: the last symbol).
    pub size: u64,
    /// Module, for symbols of a loaded module (`[ext4]` in kallsyms).
    pub module: Option<&'a str>,
}

impl std::fmt::Display for Sym<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{:#x}", self.name, self.offset)?;
        if self.size > 0 {
            write!(f, "/{:#x}", self.size)?;
        }
        if let Some(m) = self.module {
            write!(f, " [{m}]")?;
        }
        Ok(())
    }
}

/// Largest distance past the last known symbol still attributed to it.
const LAST_SYMBOL_SPAN: u64 = 1 << 20;

/// Resolves kernel addresses to `symbol+offset/size`.
#[derive(Debug, Clone, Default)]
pub struct Symbolizer {
    /// (address, name index, module index) sorted by address.
    syms: Vec<(u64, u32, u32)>,
    names: Vec<Box<str>>,
    modules: Vec<Box<str>>,
}

impl Symbolizer {
    /// Parses kallsyms text, keeping text symbols (`t`, `T`, `w`, `W`). Malformed lines are
    /// ignored. A restricted snapshot (all addresses zero) gives an empty symbolizer.
    pub fn from_kallsyms(text: &str) -> Symbolizer {
        let mut s = Symbolizer {
            modules: vec!["".into()],
            ..Default::default()
        };
        let mut module_ix: std::collections::HashMap<&str, u32> = Default::default();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = match it
                .next()
                .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
            {
                Some(m) => *module_ix.entry(m).or_insert_with(|| {
                    s.modules.push(m.into());
                    (s.modules.len() - 1) as u32
                }),
                None => 0,
            };
            s.names.push(name.into());
            s.syms.push((addr, (s.names.len() - 1) as u32, module));
        }
        // Stable: among aliases at one address the first listed wins.
        s.syms.sort_by_key(|&(a, _, _)| a);
        s.syms.dedup_by_key(|&mut (a, _, _)| a);
        s
    }

    /// Number of symbols kept.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether no symbol is known (e.g. restricted kallsyms).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol containing `addr`, if any.
    pub fn resolve(&self, addr: u64) -> Option<Sym<'_>> {
        let i = self
            .syms
            .partition_point(|&(a, _, _)| a <= addr)
            .checked_sub(1)?;
        let (start, name, module) = self.syms[i];
        let size = self.syms.get(i + 1).map_or(0, |&(next, _, _)| next - start);
        let offset = addr - start;
        if size == 0 && offset >= LAST_SYMBOL_SPAN {
            return None;
        }
        Some(Sym {
            name: &self.names[name as usize],
            offset,
            size,
            module: (module != 0).then(|| &*self.modules[module as usize]),
        })
    }

    /// One stack frame as ioblame prints it: `[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330`
    /// (the bare address when unresolved).
    pub fn format_frame(&self, addr: u64) -> String {
        match self.resolve(addr) {
            Some(s) => format!("[{addr:016x}] {s}"),
            None => format!("[{addr:016x}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff811c5390 T __mark_inode_dirty
ffffffff811c5390 T alias_of_mark
ffffffff811c56c0 t next_fn
ffffffff82000000 D some_data
ffffffff81300000 W weak_fn
garbage line
ffffffffc0a00000 t ext4_writepages\t[ext4]
ffffffffc0a00400 T ext4_da_write_begin\t[ext4]
";

    #[test]
    fn resolves_with_offset_size_and_module() {
        let s = Symbolizer::from_kallsyms(K);
        assert_eq!(s.len(), 6);
        let m = s.resolve(0xffffffff811c55b0).unwrap();
        assert_eq!(
            (m.name, m.offset, m.size, m.module),
            ("__mark_inode_dirty", 0x220, 0x330, None)
        );
        assert_eq!(
            s.format_frame(0xffffffff811c55b0),
            "[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330"
        );
        let e = s.resolve(0xffffffffc0a00010).unwrap();
        assert_eq!((e.name, e.module), ("ext4_writepages", Some("ext4")));
        assert_eq!(e.to_string(), "ext4_writepages+0x10/0x400 [ext4]");
        // Data symbols are not kept: the address falls in the preceding text symbol.
        assert_eq!(s.resolve(0xffffffff82000010).unwrap().name, "weak_fn");
        assert!(s.resolve(0xffffffff80000000).is_none());
        // Past the last symbol: resolved only nearby, without a size.
        assert_eq!(
            s.resolve(0xffffffffc0a00410).unwrap().to_string(),
            "ext4_da_write_begin+0x10 [ext4]"
        );
        assert!(s.resolve(0xffffffffc0f00000).is_none());
    }

    #[test]
    fn restricted_kallsyms_resolve_nothing() {
        let s = Symbolizer::from_kallsyms(
            "0000000000000000 T _stext\n0000000000000000 T __mark_inode_dirty\n",
        );
        assert!(s.is_empty());
        assert!(s.resolve(0xffffffff811c55b0).is_none());
        assert_eq!(s.format_frame(0xffffffff811c55b0), "[ffffffff811c55b0]");
    }
}
