//! `ioblame iolog`: one line per IO, as ioblame's iolog (direction, size @ sector, role,
//! file, intent and stack), written as the analysis charges it.

use std::io::Write;

use anyhow::Result;
use clap::Args;

use crate::diagnostics;
use crate::session::{DevArgs, Session, TraceArgs};
use crate::text::{self, SymFrames};

#[derive(Args, Debug)]
pub struct IologArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    devs: DevArgs,
}

/// `ioblame iolog`.
pub fn run(out: &mut impl Write, a: IologArgs, session: &Session) -> Result<()> {
    let r = session.ready(&a.trace, &a.devs)?;
    let frames = SymFrames(&r.symbols);
    let show_recorder = r.show_recorder;
    let mut err = None;
    // Looked up as the IOs come: each lookup decompresses at most the group of the table that
    // holds the inode, once.
    let paths: &ioblame_format::Trace = &r.trace;
    let an = r.analyze(|io, tables| {
        if err.is_some() {
            return;
        }
        let act = &tables.acts[io.act.index()];
        if act.recorder && !show_recorder {
            return;
        }
        if let Err(e) = text::iolog_entry(out, io, tables, &frames, paths) {
            err = Some(e);
        }
    });
    diagnostics::charged_paths(&r.trace, &an.tables, show_recorder);
    match err {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
