//! Fuzzes the counter spec and filter parsers: any text, as a counters file, as command-line
//! specs, and as a filter of its own, must parse or give an error, never a panic.
#![no_main]

use ioblame_counters::{CounterSet, Filter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(set) = CounterSet::parse_text(text, "fuzz.counters") {
        for s in set.specs() {
            let _ = s.spec_text();
            for i in 0..8 {
                let _ = s.slot_range(i);
            }
        }
    }
    let _ = CounterSet::parse_args(&text.lines().collect::<Vec<_>>());
    if let Ok(f) = Filter::parse(text) {
        let _ = f.device_names();
    }
});
