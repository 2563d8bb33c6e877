//! Fuzzes the kernel symbol table: any kallsyms text must load (lines it cannot read are
//! skipped), and resolving and formatting any address must not panic.
#![no_main]

use ioblame_decode::symbols::Symbolizer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let s = Symbolizer::from_kallsyms(&text);
    let _ = (s.len(), s.is_empty());
    // Addresses from the input itself, and the edges of the address space.
    let mut addrs: Vec<u64> = data
        .chunks_exact(8)
        .take(32)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    addrs.extend([0, 1, u64::MAX, 0xffff_ffff_8100_0000]);
    for a in addrs {
        if let Some(sym) = s.resolve(a) {
            let _ = sym.to_string();
        }
        let _ = s.format_frame(a);
    }
});
