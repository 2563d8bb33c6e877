//! `ioblame intents`: the intents (kernel stack + modifier) that `int=NR` numbers refer to,
//! every one of them, the recorder's and all devices' included.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use ioblame_counters::DevSelection;

use crate::session::{DevArgs, Session, TraceArgs};
use crate::text::{self, SymFrames};

#[derive(Args, Debug)]
pub struct IntentsArgs {
    #[command(flatten)]
    trace: TraceArgs,
}

/// `ioblame intents`.
pub fn run(out: &mut impl Write, a: IntentsArgs, session: &Session) -> Result<()> {
    let mut r = session.ready(&a.trace, &DevArgs::default())?;
    r.devs = DevSelection::all();
    r.show_recorder = true;
    let an = r.analyze(|_, _| {});
    let names = ioblame_attrib::intent_names(&an.tables, &r.symbols);
    text::intents(out, &an.tables, &names, &SymFrames(&r.symbols))?;
    Ok(())
}
