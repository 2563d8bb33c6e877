//! Fuzzes the JIT symbol maps a trace carries (PERF_MAPS, `/tmp/perf-PID.map` text): any
//! text must parse (bad lines counted, never a panic), and looking any address up must not
//! panic. Input: the map's text (lossy UTF-8), then, after a NUL, u64 LE addresses to look up.
#![no_main]

use ioblame_symbolize::PerfMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (text, addrs) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let m = PerfMap::parse(&String::from_utf8_lossy(text));
    let _ = m.len();
    for a in addrs.chunks(8) {
        let mut x = [0u8; 8];
        x[..a.len()].copy_from_slice(a);
        let _ = m.lookup(u64::from_le_bytes(x));
    }
    let _ = m.lookup(0);
    let _ = m.lookup(u64::MAX);
});
