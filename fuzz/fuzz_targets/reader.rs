//! Fuzzes the trace reader: any bytes must give a trace or a clear error, never a panic, and
//! every chunk found must decompress or fail cleanly, and its records iterate without panic;
//! the metadata, FLUSHED, FILES, USER_SYMBOLS and BTRFS sections decode or fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.iob");
    let Ok(f) = ioblame_format::TraceFile::from_bytes(path, data.to_vec()) else {
        return;
    };
    let order = f.header().byte_order;
    // What a live follower reads of a file opened again and again: the last FLUSHED mark
    // (that block alone decoded) and the chunks found.
    let _ = f.flushed();
    let _ = f.chunks().len();
    let t = ioblame_format::Trace::from_files(vec![f], vec![]);
    // Every metadata section and FILES table decodes or fails cleanly.
    let _ = t.metadata().events.len();
    // Lookups first (each decodes one group of a FILE_INDEX table), then the whole tables.
    let _ = t.paths_summary();
    for ino in [0u64, 2, 12, 13, 14, u64::MAX] {
        let _ = t.file_name(7 << 20, ino);
    }
    let _ = t.paths().iter().count();
    // Format 1.8: the user-space mappings and the symbol tables (read on demand).
    let _ = t.user_maps().len();
    let _ = t.user_symbols();
    let _ = t.perf_maps();
    let _ = t.path_problems();
    // Format 1.9: the btrfs filesystems and their chunk maps, merged over the files.
    let _ = t.btrfs().len();
    for c in t.chunks() {
        if let Ok(chunk) = t.decompress(c) {
            for r in chunk.records(order) {
                if r.is_err() {
                    break;
                }
            }
        }
    }
});
