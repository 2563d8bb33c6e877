//! Fuzzes the baseline file reader: any text must give a baseline or an error, never a
//! panic, and a baseline that reads must write out and read back.
#![no_main]

use ioblame_baseline::Baseline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(b) = Baseline::from_toml(text) {
        let again = b.to_toml();
        if let Err(e) = Baseline::from_toml(&again) {
            panic!("a baseline that read does not read back: {e}\n{again}");
        }
    }
});
