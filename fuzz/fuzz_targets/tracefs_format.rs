//! Fuzzes the tracefs `format` text parser and the print-fmt evaluator: any text must parse
//! into an event format or give an error, every quoted symbol of its print fmt must evaluate
//! or give `None`, and a decoder and an attribution context built on it (as the analyzer
//! builds them from a trace's format texts) must not panic.
#![no_main]

use ioblame_attrib::Context;
use ioblame_decode::format::{print_symbol_value, EventFormat};
use ioblame_decode::Decoder;
use ioblame_format::{ByteOrder, EventDesc, Header, Metadata};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = EventFormat::parse(text) {
        for spec in &f.fields {
            let _ = f.field(&spec.name);
        }
        // Every quoted name of the print fmt, as the attribution looks up inode state bits.
        for name in f.print_fmt.split('"').skip(1).step_by(2).take(64) {
            let _ = f.print_symbol_value(name);
        }
    }
    // The raw evaluator on the whole text (a print fmt may be anything).
    for name in text.split('"').skip(1).step_by(2).take(16) {
        let _ = print_symbol_value(text, name);
    }
    // The decoder and the attribution's context built on the text as a writeback event's
    // format (the context evaluates the inode state bits in writeback formats).
    let header = Header {
        byte_order: ByteOrder::native(),
        word_size: 8,
        page_size: 4096,
        cpu_count: 1,
        clock_id: 1,
        recorder_pid: 0,
        file_index: 0,
        start_time_ns: 0,
        start_clock_ns: 0,
        trace_id: 1,
        hostname: String::new(),
        kernel_release: "6.18.0".into(),
        machine: "x86_64".into(),
        recorder_version: String::new(),
    };
    let meta = Metadata {
        events: vec![EventDesc {
            name: "writeback:writeback_dirty_inode_start".into(),
            tracefs_id: 1,
            sample_type: 0x10086,
            read_format: 0,
            flags: 0,
            max_stack: 0,
            filter: String::new(),
            format: text.to_string(),
            ids: vec![1],
            ..Default::default()
        }],
        ..Metadata::default()
    };
    let _ = Decoder::new(&header, &meta).problems().len();
    let _ = Context::from_trace(&header, &meta);
});
