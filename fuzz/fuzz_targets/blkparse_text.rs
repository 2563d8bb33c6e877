//! Fuzzes the blkparse text parser: any text must parse line by line, unknown lines counted,
//! never panic; each line is also parsed on its own.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        for line in s.lines() {
            let _ = ioblame_blktrace::text::parse_line(line);
        }
    }
    // As a file: the first line must look like an action for the text reader to take it.
    if let Some(r) =
        ioblame_blktrace::Recording::from_bytes(std::path::Path::new("fuzz.txt"), data.to_vec())
    {
        let n = r.records().count() as u64;
        assert_eq!(n, r.scan().records);
        let _ = ioblame_blktrace::to_events(&r);
    }
});
