//! Small formatting helpers shared by the outputs.

use std::borrow::Cow;

use ioblame_attrib::{ActId, Symbolizer, Tables, WbReason};
pub use ioblame_counters::output::printable;
use ioblame_decode::{dev_major, dev_minor};

/// `MAJ:MIN` of a kernel-encoded device.
pub fn dev_str(dev: u32) -> String {
    format!("{}:{}", dev_major(dev), dev_minor(dev))
}

/// The writeback reason an intent's modifier encodes (`0x10000000 | reason`).
pub fn modifier_reason(modifier: u32) -> Option<WbReason> {
    (modifier >> 28 == 1).then_some(WbReason(modifier & 0x0fff_ffff))
}

/// Bytes in binary units with two decimals (`1.50 MiB`), plain bytes below 1 KiB.
pub fn human_bytes(bytes: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

/// A duration given in µs, in the largest fitting unit (`850 µs`, `12.30 ms`, `4.00 s`).
pub fn human_us(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// The function name of a frame: the symbolizer's name without a `+0x..` suffix (control
/// characters escaped, [`printable`]), or the address in hex.
pub fn frame_name(sym: &dyn Symbolizer, addr: u64) -> String {
    match sym.symbol(addr) {
        Some(n) => {
            let n = n.split('+').next().unwrap_or("").trim();
            if n.is_empty() {
                format!("{addr:#x}")
            } else {
                printable(n).into_owned()
            }
        }
        None => format!("{addr:#x}"),
    }
}

/// A role's task ids as the text outputs print them: `pid T`, the task's own pid (its thread
/// id, as ioblame's `pid-N`), followed by `tgid P` when the task is not its process' main
/// thread.
pub fn task_ids(role: Option<&ioblame_attrib::Role>) -> String {
    match role {
        Some(r) if r.pid != r.tid => format!("pid {} tgid {}", r.tid, r.pid),
        Some(r) => format!("pid {}", r.tid),
        None => "pid 0".to_string(),
    }
}

/// The comm of an act's role (`?` when unknown or empty), control characters escaped
/// ([`printable`]).
pub fn act_comm(tables: &Tables, act: ActId) -> Cow<'_, str> {
    tables
        .act(act)
        .and_then(|a| tables.role(a.role))
        .map(|r| r.comm.as_str())
        .filter(|c| !c.is_empty())
        .map_or(Cow::Borrowed("?"), printable)
}

/// Escapes text for HTML element content and attribute values.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                out.push_str(&format!("&#x{:x};", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// Text safe for a chart label: control characters escaped ([`printable`]), at most `max`
/// characters.
pub fn label(s: &str, max: usize) -> String {
    let s = printable(s);
    let mut out: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape() {
        assert_eq!(
            html_escape("<script>\"a\" & 'b'\u{1}"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&#x1;"
        );
    }

    #[test]
    fn units() {
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_us(999), "999 µs");
        assert_eq!(human_us(12_300), "12.30 ms");
        assert_eq!(dev_str((8 << 20) | 1), "8:1");
        assert_eq!(modifier_reason(0x1000_0002).map(|r| r.name()), Some("sync"));
        assert_eq!(modifier_reason(0), None);
        let mut r = ioblame_attrib::Role {
            pid: 7,
            tid: 7,
            comm: String::new(),
            generation: 0,
            cgroup: 0,
            lineage: false,
        };
        assert_eq!(task_ids(Some(&r)), "pid 7");
        r.tid = 9;
        assert_eq!(task_ids(Some(&r)), "pid 9 tgid 7");
    }
}
