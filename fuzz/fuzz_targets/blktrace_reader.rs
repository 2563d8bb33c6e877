//! Fuzzes the blktrace binary reader: any bytes must read as records (with damage reported)
//! or be refused, never panic; the scan, the time-ordered records and the events they
//! become are all computed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Binary input: make the first word blktrace's magic so the reader is reached.
    let mut b = data.to_vec();
    if b.len() >= 4 && ioblame_blktrace::record::magic(&b).is_none() {
        b[1..4].copy_from_slice(&[0x74, 0x61, 0x65]);
    }
    let Some(r) = ioblame_blktrace::Recording::from_bytes(std::path::Path::new("fuzz"), b) else {
        return;
    };
    let n = r.records().count() as u64;
    assert_eq!(n, r.scan().records);
    for p in &r.scan().problems {
        let _ = p.to_string();
    }
    let _ = ioblame_blktrace::to_events(&r);
});
