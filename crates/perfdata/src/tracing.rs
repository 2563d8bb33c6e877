//! The `HEADER_TRACING_DATA` feature section of a perf.data file.
//!
//! perf copies the tracefs description of every recorded tracepoint into the file
//! (`tools/perf/util/trace-event-info.c` writes it, `trace-event-read.c` reads it):
//!
//! ```text
//! "\x17\x08\x44tracing"  version "0.6\0"  u8 big-endian  u8 long size  u32 page size
//! "header_page\0"  u64 size  text        "header_event\0"  u64 size  text
//! u32 count, per ftrace event: u64 size, format text
//! u32 systems, per system: NUL-terminated name, u32 count, per event: u64 size, format text
//! u32 size, kallsyms text (perf writes 0 bytes nowadays)
//! u32 size, ftrace printk formats   [u64 size, saved cmdlines: version >= 0.6]
//! ```
//!
//! Integers are in the byte order given by the big-endian byte. Every length is checked
//! against what remains before it is used.

use std::collections::BTreeMap;

use ioblame_format::ByteOrder;

use crate::errors::TracingDataError;

/// Magic at the start of the tracing data.
const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// What ioblame keeps of the tracing data.
#[derive(Debug, Default, Clone)]
pub(crate) struct TracingData {
    /// Page size of the recording host.
    pub page_size: u32,
    /// Size of `long` on the recording kernel.
    pub long_size: u8,
    /// Event format texts by tracefs id, with `system:name`.
    pub formats: BTreeMap<u64, (String, String)>,
    /// The kallsyms text perf stored, if any (usually empty).
    pub kallsyms: String,
}

/// A cursor over the section that checks every length against what remains.
struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
    order: ByteOrder,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], TracingDataError> {
        let rest = self.b.len() - self.pos;
        if n > rest as u64 {
            return Err(TracingDataError::CutShort {
                what,
                need: n,
                offset: self.pos,
                remain: rest,
            });
        }
        let s = &self.b[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], TracingDataError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N as u64, what)?);
        Ok(a)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, TracingDataError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, TracingDataError> {
        Ok(self.order.u32(self.array(what)?))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, TracingDataError> {
        Ok(self.order.u64(self.array(what)?))
    }
    fn cstr(&mut self, what: &'static str) -> Result<&'a [u8], TracingDataError> {
        let rest = &self.b[self.pos..];
        let n = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or(TracingDataError::Unterminated { what })?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }
    fn expect(&mut self, lit: &[u8], what: &'static str) -> Result<(), TracingDataError> {
        let got = self.take(lit.len() as u64, what)?;
        if got != lit {
            return Err(TracingDataError::Unexpected {
                what,
                found: got.to_vec(),
            });
        }
        Ok(())
    }
    fn sized_text(&mut self, what: &'static str) -> Result<&'a [u8], TracingDataError> {
        let n = self.u64(what)?;
        self.take(n, what)
    }
}

/// Reads `name:` and `ID:` from a tracefs format text.
fn name_and_id(text: &str) -> Option<(&str, u64)> {
    let mut name = None;
    let mut id = None;
    for line in text.lines().take(4) {
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        }
    }
    Some((name?, id?))
}

/// Parses the tracing data section.
pub(crate) fn parse(b: &[u8]) -> Result<TracingData, TracingDataError> {
    let mut r = Rd {
        b,
        pos: 0,
        order: ByteOrder::Little,
    };
    r.expect(MAGIC, "the magic \\x17\\x08\\x44tracing")?;
    r.cstr("version")?;
    if r.u8("endianness")? != 0 {
        r.order = ByteOrder::Big;
    }
    let long_size = r.u8("long size")?;
    let page_size = r.u32("page size")?;
    r.expect(b"header_page\0", "\"header_page\"")?;
    r.sized_text("header_page")?;
    r.expect(b"header_event\0", "\"header_event\"")?;
    r.sized_text("header_event")?;
    let mut out = TracingData {
        page_size,
        long_size,
        ..Default::default()
    };
    let mut add = |system: &str, text: &[u8]| {
        let text = String::from_utf8_lossy(text).into_owned();
        if let Some((name, id)) = name_and_id(&text) {
            let full = format!("{system}:{name}");
            out.formats.insert(id, (full, text));
        }
    };
    let n = r.u32("ftrace format count")?;
    for _ in 0..n {
        let t = r.sized_text("ftrace format")?;
        add("ftrace", t);
    }
    let systems = r.u32("system count")?;
    for _ in 0..systems {
        let system = String::from_utf8_lossy(r.cstr("system name")?).into_owned();
        let n = r.u32("event count")?;
        for _ in 0..n {
            let t = r.sized_text("event format")?;
            add(&system, t);
        }
    }
    // kallsyms: optional in practice (old files end here).
    if r.pos < b.len() {
        let n = r.u32("kallsyms size")?;
        let k = r.take(n as u64, "kallsyms")?;
        out.kallsyms = String::from_utf8_lossy(k).into_owned();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(big: bool) -> Vec<u8> {
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u64b = |v: u64| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = MAGIC.to_vec();
        b.extend(b"0.6\0");
        b.push(big as u8);
        b.push(8);
        b.extend(u32b(4096));
        b.extend(b"header_page\0");
        b.extend(u64b(3));
        b.extend(b"abc");
        b.extend(b"header_event\0");
        b.extend(u64b(0));
        b.extend(u32b(1));
        let f = b"name: function\nID: 1\nformat:\n";
        b.extend(u64b(f.len() as u64));
        b.extend(f);
        b.extend(u32b(1));
        b.extend(b"block\0");
        b.extend(u32b(1));
        let f = b"name: block_rq_issue\nID: 2104\nformat:\n\tfield:unsigned short common_type;\n";
        b.extend(u64b(f.len() as u64));
        b.extend(f);
        b.extend(u32b(0));
        b.extend(u32b(0));
        b
    }

    #[test]
    fn parses_both_byte_orders() {
        for big in [false, true] {
            let t = parse(&build(big)).unwrap();
            assert_eq!(t.page_size, 4096);
            assert_eq!(t.long_size, 8);
            assert_eq!(t.formats[&2104].0, "block:block_rq_issue");
            assert!(t.formats[&2104]
                .1
                .starts_with("name: block_rq_issue\nID: 2104\n"));
            assert_eq!(t.formats[&1].0, "ftrace:function");
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let b = build(false);
        // Cutting inside the event list must fail; cutting after it is tolerated.
        let end_of_events = b.len() - 8;
        for cut in 0..end_of_events {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut big_len = build(false);
        let pos = MAGIC.len() + 4 + 2 + 4 + 12;
        big_len[pos..pos + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&big_len).is_err());
    }

    #[test]
    fn errors_say_what_and_where() {
        let mut b = build(false);
        assert_eq!(
            parse(&b[..20]).unwrap_err().to_string(),
            "tracing data: \"header_page\" needs 12 bytes at offset 20 but only 0 remain"
        );
        b[0] = b'x';
        assert_eq!(
            parse(&b).unwrap_err().to_string(),
            "tracing data: expected the magic \\x17\\x08\\x44tracing, found [120, 8, 68, 116, \
             114, 97, 99, 105, 110, 103]"
        );
        let mut b = build(false);
        b.truncate(MAGIC.len() + 2);
        assert_eq!(
            parse(&b).unwrap_err(),
            TracingDataError::Unterminated { what: "version" }
        );
    }
}
