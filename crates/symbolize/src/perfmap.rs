//! JIT symbol maps: the perf convention (`/tmp/perf-PID.map`), one `START SIZE NAME` line per
//! function a JIT compiled, START and SIZE in hex (with or without `0x`), NAME the rest of the
//! line. A later line for an address wins (code recompiled in place).

/// Most entries kept of one map.
pub const MAX_PERF_MAP_ENTRIES: usize = 1 << 22;

/// How far back a lookup looks for a later entry covering the address.
const OVERLAP_SCAN: usize = 64;

/// A parsed perf map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfMap {
    /// (start, end, line number, name), sorted by start then line.
    entries: Vec<(u64, u64, u32, String)>,
    /// Lines that were not `START SIZE NAME`.
    pub bad_lines: usize,
}

impl PerfMap {
    /// Parses a map's text; lines that do not parse are counted, not fatal.
    pub fn parse(text: &str) -> PerfMap {
        let mut m = PerfMap::default();
        for (i, line) in text.lines().enumerate() {
            if m.entries.len() >= MAX_PERF_MAP_ENTRIES {
                m.bad_lines += 1;
                continue;
            }
            match parse_line(line) {
                Some((start, size, name)) if size > 0 => {
                    let end = start.saturating_add(size);
                    m.entries.push((start, end, i as u32, name.to_string()));
                }
                _ if line.trim().is_empty() => {}
                _ => m.bad_lines += 1,
            }
        }
        m.entries.sort_by_key(|e| (e.0, e.2));
        m
    }

    /// How many functions the map names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map names none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The function holding `addr`: of the entries covering it (among the nearest starts),
    /// the one written last.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        self.entries[..i]
            .iter()
            .rev()
            .take(OVERLAP_SCAN)
            .filter(|e| addr < e.1)
            .max_by_key(|e| e.2)
            .map(|e| e.3.as_str())
    }
}

fn hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

fn parse_line(line: &str) -> Option<(u64, u64, &str)> {
    let line = line.trim_end();
    let (start, rest) = line.split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ')?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    Some((hex(start)?, hex(size)?, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_the_last_one_for_an_address_wins() {
        let m = PerfMap::parse(
            "7f0000001000 40 jit_wal_append\n\
             0x7f0000001040 0x20 LazyCompile:*checkpoint /app/db.js:12\n\
             garbage\n\
             \n\
             7f0000001000 10 recompiled\n",
        );
        assert_eq!(m.len(), 3);
        assert_eq!(m.bad_lines, 1);
        assert_eq!(m.lookup(0x7f00_0000_1004), Some("recompiled"));
        assert_eq!(m.lookup(0x7f00_0000_1020), Some("jit_wal_append"));
        assert_eq!(
            m.lookup(0x7f00_0000_1050),
            Some("LazyCompile:*checkpoint /app/db.js:12")
        );
        assert_eq!(m.lookup(0x7f00_0000_1060), None);
        assert_eq!(m.lookup(0x1000), None);
        // Sizes that wrap do not panic.
        let m = PerfMap::parse("fffffffffffffff0 ff wrap\n");
        assert_eq!(m.lookup(u64::MAX - 1), Some("wrap"));
    }
}
