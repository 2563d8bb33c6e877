//! Inputs the `perfdata` fuzz target once crashed on (tests/data/fuzz-regressions/): each must
//! convert or give an error, and a converted trace's chunks must decode and attribute,
//! without a panic.

use std::path::Path;

use ioblame_decode::Decoder;
use ioblame_perfdata::{perf_data_from_bytes, PerfDataOptions};

#[test]
fn every_former_crash_converts_or_errs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz-regressions");
    let tmp = tempfile::tempdir().expect("temp dir");
    let ks = tmp.path().join("kallsyms");
    std::fs::write(&ks, "ffffffff81000000 T _text\n").expect("write kallsyms");
    let opts = PerfDataOptions {
        kallsyms: Some(ks.clone()),
        ..Default::default()
    };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("read the regressions dir") {
        let path = e.expect("dir entry").path();
        let data = std::fs::read(&path).expect("read input");
        n += 1;
        let Ok(c) = perf_data_from_bytes(&path, data, &opts) else {
            continue;
        };
        let t = &c.trace;
        let d = Decoder::new(t.header(), t.metadata());
        for r in t.chunks() {
            if let Ok(chunk) = t.decompress(r) {
                let _ = d.decode_chunk(&chunk);
            }
        }
        let ctx = ioblame_attrib::Context::from_trace(t.header(), t.metadata());
        let _ = ioblame_attrib::attribute_trace(t, &d, ctx);
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}
