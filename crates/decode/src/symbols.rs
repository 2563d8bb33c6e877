//! Kernel symbols from a `/proc/kallsyms` snapshot.
//!
//! ```
//! use ioblame_decode::symbols::Symbolizer;
//! let s = Symbolizer::from_kallsyms(
//!     "ffffffff811c5390 T __mark_inode_dirty\nffffffff811c56c0 t next_fn\n",
//! );
//! assert_eq!(s.format_frame(0xffffffff811c55b0), "[ffffffff811c55b0] __mark_inode_dirty+0x220/0x330");
//! ```

use std::sync::Arc;

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

/// Resolves kernel addresses to `symbol+offset/size`. Cloning it is cheap: clones share
/// one table.
#[derive(Debug, Clone, Default)]
pub struct Symbolizer {
    table: Arc<Table>,
}

/// The symbols of one snapshot.
#[derive(Debug, Default)]
struct Table {
    /// Sorted by address; among aliases at one address the first listed.
    syms: Vec<Entry>,
    /// Every kept name, one after the other.
    names: String,
    /// Module names; index 0 is the kernel itself.
    modules: Vec<Box<str>>,
}

/// One symbol: its address, where its name lies in [`Table::names`], its module.
#[derive(Debug, Clone, Copy)]
struct Entry {
    addr: u64,
    name: u32,
    name_len: u16,
    module: u16,
}

/// The value of each hexadecimal digit, 0xff for other bytes.
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// A hexadecimal number of 1 to 16 digits.
#[inline]
fn hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |v, &c| {
        let d = HEX[c as usize];
        (d != 0xff).then(|| v << 4 | u64::from(d))
    })
}

/// Whether `c` is a hexadecimal digit.
fn is_hex(c: u8) -> bool {
    HEX[c as usize] != 0xff
}

/// Whether `c` separates the words of a kallsyms line.
fn sep(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// The first index at or after `i` whose byte `stop` does not accept.
fn skip(b: &[u8], mut i: usize, stop: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && stop(b[i]) {
        i += 1;
    }
    i
}

impl Table {
    /// Numbers module `m`: its index in [`Table::modules`], or 0 (the kernel's) once 64 Ki
    /// modules are numbered.
    fn add_module(&mut self, m: &str) -> u16 {
        match u16::try_from(self.modules.len()) {
            Ok(i) => {
                self.modules.push(m.into());
                i
            }
            Err(_) => 0,
        }
    }
}

/// Texts at least this long are parsed in two halves at once.
const SPLIT_AT: usize = 256 << 10;

/// The symbols of part of a kallsyms text, in the order listed.
struct Part {
    table: Table,
    /// Whether the addresses never decrease.
    sorted: bool,
}

impl Part {
    /// The symbols of this part, then those of `next` (the part of the text after it).
    fn join(mut self, next: Part) -> Part {
        let t = &mut self.table;
        // Its modules, as numbered in this table (0, the kernel, stays 0).
        let modules: Vec<u16> = next
            .table
            .modules
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if i == 0 {
                    return 0;
                }
                match t.modules.iter().position(|x| x == m) {
                    Some(j) => j as u16,
                    None => t.add_module(m),
                }
            })
            .collect();
        let base = t.names.len();
        let fits = |e: &Entry| u32::try_from(base + e.name as usize + e.name_len as usize).is_ok();
        self.sorted = self.sorted
            && next.sorted
            && match (t.syms.last(), next.table.syms.first()) {
                (Some(a), Some(b)) => a.addr <= b.addr,
                _ => true,
            };
        t.names.push_str(&next.table.names);
        t.syms
            .extend(next.table.syms.iter().filter(|e| fits(e)).map(|e| Entry {
                name: (base + e.name as usize) as u32,
                module: modules[e.module as usize],
                ..*e
            }));
        self
    }
}

/// Parses the lines of `text` (whole lines) into a table, unsorted, with room for the
/// symbols of `room` bytes of text (the parts joined after it included).
fn parse_part(text: &str, room: usize) -> Part {
    let mut t = Table {
        modules: vec!["".into()],
        // Names are most of the text (55% of a 6.18 kernel's): one allocation for all of
        // them, and one for the entries (a line is 44 bytes on average there), so that
        // neither is copied as it grows.
        names: String::with_capacity(room / 5 * 3),
        syms: Vec::with_capacity(room / 40),
    };
    let mut module_ix: rustc_hash::FxHashMap<&str, u16> = Default::default();
    let mut sorted = true;
    let mut pos = 0;
    while pos < text.len() {
        let (line, next) = next_line(text, pos);
        pos = next;
        let Some((addr, ty, name, rest)) = line else {
            continue;
        };
        if addr == 0 || !matches!(ty, b't' | b'T' | b'w' | b'W') {
            continue;
        }
        let Ok(name_len) = u16::try_from(name.len()) else {
            continue;
        };
        let Ok(at) = u32::try_from(t.names.len()) else {
            break;
        };
        let module = match rest
            .trim_matches([' ', '\t'])
            .strip_prefix('[')
            .and_then(|m| m.strip_suffix(']'))
        {
            Some(m) => match module_ix.get(m) {
                Some(&i) => i,
                None => {
                    let i = t.add_module(m);
                    if i != 0 {
                        module_ix.insert(m, i);
                    }
                    i
                }
            },
            None => 0,
        };
        t.names.push_str(name);
        sorted &= t.syms.last().is_none_or(|e| e.addr <= addr);
        t.syms.push(Entry {
            addr,
            name: at,
            name_len,
            module,
        });
    }
    Part { table: t, sorted }
}

/// Whether `c` ends a kallsyms name: a newline, tab or space.
fn name_stop(c: u8) -> bool {
    matches!(c, b'\n' | b'\t' | b' ')
}

/// The first index at or after `i` whose byte ends a name ([`name_stop`]), or `b.len()`.
/// Eight bytes at a time: names are most of the text, and are scanned for their end.
fn name_end(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(w) = b.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        let x = u64::from_le_bytes(w);
        // The high bit of each byte below 0x21 (the three stops among them). Borrows only
        // move up, to later bytes, so the lowest bit set marks the first such byte.
        let low = x.wrapping_sub(ONES * 0x21) & !x & HIGHS;
        if low == 0 {
            i += 8;
            continue;
        }
        let k = i + (low.trailing_zeros() / 8) as usize;
        if name_stop(b[k]) {
            return k;
        }
        // Another control byte inside a name: go on after it.
        i = k + 1;
    }
    skip(b, i, |c| !name_stop(c))
}

/// The kallsyms line of `text` starting at `pos`, `"ffffffff811c5390 T __mark_inode_dirty"`
/// or `"ffffffffc0a00000 t ext4_writepages\t[ext4]"`: its address, type, name and the rest
/// (the module), `None` when malformed; and where the next line starts. Separators are
/// ASCII, so the slices are `str`s.
fn next_line(text: &str, pos: usize) -> (Option<(u64, u8, &str, &str)>, usize) {
    let b = text.as_bytes();
    // The kernel's own layout, `"%px %c %s"` then `"\t[module]"`, on a 64-bit host: one
    // pass over the name finds the end of the line.
    let head = b
        .get(pos..pos + 19)
        .and_then(|h| <&[u8; 19]>::try_from(h).ok());
    if let Some(h) = head {
        let ty = h[17];
        if let (Some(addr), b' ', b' ') = (hex(&h[..16]), h[16], h[18]) {
            if !sep(ty) && ty != b'\n' {
                let n0 = pos + 19;
                let n1 = name_end(b, n0);
                match b.get(n1) {
                    Some(b' ') => {}
                    _ if n1 == n0 => {}
                    Some(b'\t') => {
                        let end = text[n1..].find('\n').map_or(text.len(), |k| n1 + k);
                        return (Some((addr, ty, &text[n0..n1], &text[n1..end])), end + 1);
                    }
                    _ => return (Some((addr, ty, &text[n0..n1], "")), n1 + 1),
                }
            }
        }
    }
    let end = text[pos..].find('\n').map_or(text.len(), |k| pos + k);
    (parse_words(&text[pos..end]), end + 1)
}

/// A kallsyms line in any spacing: words separated by runs of spaces and tabs.
fn parse_words(line: &str) -> Option<(u64, u8, &str, &str)> {
    let b = line.as_bytes();
    let i = skip(b, 0, sep);
    let j = skip(b, i, is_hex);
    let addr = hex(&b[i..j])?;
    if !b.get(j).copied().is_some_and(sep) {
        return None;
    }
    let t = skip(b, j, sep);
    let ty = *b.get(t)?;
    if !b.get(t + 1).copied().is_some_and(sep) {
        return None;
    }
    let n0 = skip(b, t + 1, sep);
    let n1 = skip(b, n0, |c| !sep(c));
    (n1 > n0).then(|| (addr, ty, &line[n0..n1], &line[n1..]))
}

impl Symbolizer {
    /// Parses kallsyms text, keeping text symbols (`t`, `T`, `w`, `W`). Malformed lines are
    /// ignored. A restricted snapshot (all addresses zero) gives an empty symbolizer.
    ///
    /// A large text is parsed in two halves at once on the current rayon pool (a 5 MB
    /// snapshot takes several milliseconds, while the analyzer has nothing else to do yet).
    pub fn from_kallsyms(text: &str) -> Symbolizer {
        let half = if text.len() >= SPLIT_AT {
            text.len() / 2
        } else {
            text.len()
        };
        Self::from_kallsyms_split(text, half)
    }

    /// [`Symbolizer::from_kallsyms`] with the text parsed in two parts, split at the first
    /// line that starts at or after byte `at` (one part if there is none).
    fn from_kallsyms_split(text: &str, at: usize) -> Symbolizer {
        // After the newline ending the line before `at` (a char boundary, whatever `at` is).
        let b = text.as_bytes();
        let mid = match at.checked_sub(1) {
            None => 0,
            Some(p) => b
                .get(p..)
                .and_then(|rest| rest.iter().position(|&c| c == b'\n'))
                .map_or(b.len(), |k| p + k + 1),
        };
        let mut t = if 0 < mid && mid < text.len() {
            let (a, b) = rayon::join(
                || parse_part(&text[..mid], text.len()),
                || parse_part(&text[mid..], text.len() - mid),
            );
            a.join(b)
        } else {
            parse_part(text, text.len())
        };
        // Stable: among aliases at one address the first listed wins.
        if !t.sorted {
            t.table.syms.sort_by_key(|e| e.addr);
        }
        t.table.syms.dedup_by_key(|e| e.addr);
        t.table.syms.shrink_to_fit();
        t.table.names.shrink_to_fit();
        Symbolizer {
            table: Arc::new(t.table),
        }
    }

    /// Number of symbols kept.
    pub fn len(&self) -> usize {
        self.table.syms.len()
    }

    /// Whether no symbol is known (e.g. restricted kallsyms).
    pub fn is_empty(&self) -> bool {
        self.table.syms.is_empty()
    }

    /// The symbol containing `addr`, if any.
    pub fn resolve(&self, addr: u64) -> Option<Sym<'_>> {
        let t = &*self.table;
        let i = t.syms.partition_point(|e| e.addr <= addr).checked_sub(1)?;
        let e = t.syms[i];
        let size = t.syms.get(i + 1).map_or(0, |n| n.addr - e.addr);
        let offset = addr - e.addr;
        if size == 0 && offset >= LAST_SYMBOL_SPAN {
            return None;
        }
        let at = e.name as usize;
        Some(Sym {
            name: t.names.get(at..at + e.name_len as usize).unwrap_or(""),
            offset,
            size,
            module: (e.module != 0).then(|| &*t.modules[e.module as usize]),
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
ffffffff81250000  T   spaced_out
ffffffffc0a00000 t ext4_writepages\t[ext4]
ffffffffc0a00400 T ext4_da_write_begin\t[ext4]
";

    /// The word-at-a-time scan finds what a byte-by-byte one does: stops at every offset
    /// and alignment, other control bytes (and bytes with the high bit) inside names.
    #[test]
    fn name_end_matches_a_byte_scan() {
        let alphabet = [
            b'a', b'_', b'.', b'\n', b'\t', b' ', b'\r', 0x01, 0x20, 0x21, 0xc3, 0x7f,
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..40 {
            for _ in 0..200 {
                let b: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Mostly name bytes, so stops come late as well as early.
                        if x % 4 == 0 {
                            alphabet[(x >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (x >> 8) as u8 % 26
                        }
                    })
                    .collect();
                for i in 0..=b.len() {
                    assert_eq!(
                        name_end(&b, i),
                        skip(&b, i, |c| !name_stop(c)),
                        "{b:?} from {i}"
                    );
                }
            }
        }
    }

    /// Every symbol of `s`, in address order, with its name and module.
    fn listing(s: &Symbolizer) -> Vec<(u64, String, Option<String>)> {
        let t = &*s.table;
        t.syms
            .iter()
            .map(|e| {
                let name = &t.names[e.name as usize..e.name as usize + e.name_len as usize];
                let module = (e.module != 0).then(|| t.modules[e.module as usize].to_string());
                (e.addr, name.to_string(), module)
            })
            .collect()
    }

    /// Parsed in two parts, split anywhere, a text gives the table it gives in one: modules
    /// met in both parts, aliases across the split (the first listed wins), out-of-order
    /// lines, malformed ones.
    #[test]
    fn parsing_in_two_parts_gives_the_same_table() {
        let mut text = String::from(K);
        for i in 0..60u64 {
            let addr = 0xffffffff81000000 + (i * 7919) % 400 * 0x10;
            let module = match i % 5 {
                0 => "\t[ext4]",
                1 => "\t[xfs]",
                2 => "\t[mod_{i}]",
                _ => "",
            };
            let module = module.replace("{i}", &(i % 3).to_string());
            text.push_str(&format!("{addr:016x} t f_{i}{module}\n"));
            if i % 17 == 0 {
                text.push_str("not a symbol line\n");
            }
        }
        let whole = listing(&Symbolizer::from_kallsyms_split(&text, text.len()));
        assert!(whole.len() > 50);
        for at in 0..=text.len() {
            let two = listing(&Symbolizer::from_kallsyms_split(&text, at));
            assert_eq!(two, whole, "split at {at}");
        }
        // Each part in order, the two out of order at the split.
        let halves = "ffffffff81002000 T f_a\nffffffff81003000 T f_b\n\
                      ffffffff81001000 T f_c\nffffffff81001500 T f_d\n";
        let at = halves.find("ffffffff81001000").unwrap();
        assert_eq!(
            listing(&Symbolizer::from_kallsyms_split(halves, at)),
            listing(&Symbolizer::from_kallsyms_split(halves, halves.len()))
        );
        // A large text is split by `from_kallsyms` itself.
        let mut big = String::new();
        while big.len() < SPLIT_AT * 2 {
            big.push_str(&text);
        }
        assert_eq!(
            listing(&Symbolizer::from_kallsyms(&big)),
            listing(&Symbolizer::from_kallsyms_split(&big, big.len()))
        );
    }

    #[test]
    fn resolves_with_offset_size_and_module() {
        let s = Symbolizer::from_kallsyms(K);
        assert_eq!(s.len(), 7);
        assert_eq!(s.resolve(0xffffffff81250001).unwrap().name, "spaced_out");
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

    /// The kernel's own layout is read by the fast path exactly as word by word.
    #[test]
    fn the_fast_path_reads_lines_as_words_do() {
        let lines = [
            "ffffffff811c5390 T __mark_inode_dirty",
            "ffffffffc0a00000 t ext4_writepages\t[ext4]",
            "ffffffffc0a00000 t ext4_writepages\t[ext4] ",
            "ffffffff811c5390 T name ",
            "ffffffff811c5390 T  name",
            "ffffffff811c5390   name",
            "ffffffff811c53g0 T name",
            "0000000000000000 A fixed_percpu_data",
            "ffffffff811c5390 T ",
        ];
        for l in lines {
            assert_eq!(next_line(l, 0), (parse_words(l), l.len() + 1), "{l:?}");
            // The same line inside a text: it ends at its newline.
            let text = format!("x\n{l}\nffffffff81000000 T next\n");
            assert_eq!(next_line(&text, 2), (parse_words(l), l.len() + 3), "{l:?}");
        }
        assert_eq!(
            next_line(lines[1], 0).0,
            Some((0xffffffffc0a00000, b't', "ext4_writepages", "\t[ext4]"))
        );
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
