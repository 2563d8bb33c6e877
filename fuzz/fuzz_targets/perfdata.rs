//! Fuzzes the perf.data converter through its in-memory entry point: any bytes (a perf.data
//! file or perf's pipe-mode stream) must convert or give an error, never a panic, and the
//! converted trace's chunks must decode. Symbols come from a one-line kallsyms file: the seeds
//! were recorded on this host, and reading its /proc/kallsyms at every input would make the
//! target a hundred times slower.
//!
//! The converter calls the third-party parser under `catch_unwind` and turns its panics into
//! errors; libfuzzer-sys's panic hook would abort on those caught panics, so the target
//! installs its own hook, silent for panics in registry crates: a panic that escapes the
//! converter (ioblame's own code) is printed and still reaches libfuzzer-sys, which aborts
//! on it and keeps the input.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use ioblame_decode::Decoder;
use ioblame_perfdata::{perf_data_from_bytes, PerfDataOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let name = std::path::Path::new("fuzz.data");
    static KALLSYMS: OnceLock<PathBuf> = OnceLock::new();
    let ks = KALLSYMS.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            // Print ioblame's own panics (they escape and crash the run); the third-party
            // parser's are caught and are just noise.
            if info
                .location()
                .is_some_and(|l| !l.file().contains("/registry/"))
            {
                eprintln!("{info}");
            }
        }));
        let p = std::env::temp_dir().join(format!("ioblame-fuzz-kallsyms-{}", std::process::id()));
        std::fs::write(&p, "ffffffff81000000 T _text\n").expect("write the kallsyms file");
        p
    });
    let opts = PerfDataOptions {
        kallsyms: Some(ks.clone()),
        ..Default::default()
    };
    let Ok(c) = perf_data_from_bytes(name, data.to_vec(), &opts) else {
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
