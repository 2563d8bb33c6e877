//! Fuzzes the perf.data converter through its in-memory entry point: any bytes (a perf.data
//! file or perf's pipe-mode stream) must convert or give an error, never a panic, and the
//! converted trace's chunks must decode.
#![no_main]

use ioblame_decode::Decoder;
use ioblame_perfdata::{perf_data_from_bytes, PerfDataOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let name = std::path::Path::new("fuzz.data");
    let Ok(c) = perf_data_from_bytes(name, data.to_vec(), &PerfDataOptions::default()) else {
        return;
    };
    let t = &c.trace;
    let d = Decoder::new(t.header(), t.metadata());
    for r in t.chunks() {
        if let Ok(chunk) = t.decompress(r) {
            let _ = d.decode_chunk(&chunk);
        }
    }
});
