//! Fuzzes the sample fields of stack copies (`PERF_SAMPLE_REGS_USER`, `STACK_USER`, and the
//! `WEIGHT` and `DATA_SRC` words perf's `--call-graph dwarf` adds): any body, under any
//! sample type of the supported bits and any register mask, must parse or be refused without
//! a panic, and the layout's quick read must agree with the full walk.
//!
//! Input: the sample type's bits (u32 LE, masked to the supported ones), the register mask
//! (u64 LE), then the sample body.
#![no_main]

use ioblame_decode::record::{parse_sample_regs, SampleLayout, SampleParts, SUPPORTED_SAMPLE_TYPE};
use ioblame_format::ByteOrder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let bits = u32::from_le_bytes(data[..4].try_into().unwrap_or_default()) as u64;
    let st = (bits | bits << 32) & SUPPORTED_SAMPLE_TYPE;
    let mask = u64::from_le_bytes(data[4..12].try_into().unwrap_or_default());
    let body = &data[12..];
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let full = parse_sample_regs(body, st, mask, order);
        if let Ok(s) = &full {
            if let Some(r) = s.regs_user {
                for reg in 0..70 {
                    let _ = r.get(reg);
                }
            }
            let _ = s.stack_user.map(<[u8]>::len);
        }
        if let Some(l) = SampleLayout::with_regs(st, mask) {
            let quick = l.parse(body, order);
            match (&full, quick) {
                (Ok(s), Some(q)) => assert_eq!(SampleParts::from(*s), q),
                (Ok(_), None) => panic!("the layout refused what the walk read"),
                (Err(_), Some(_)) => panic!("the layout read what the walk refused"),
                (Err(_), None) => {}
            }
        }
    }
});
