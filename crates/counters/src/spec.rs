//! One counter: `DIR FIELD B0 B1 B2 B3 B4 B5 B6 B7 B8 [if FILTER]`.

use std::fmt;

use ioblame_attrib::{Dir, Io};

use crate::context::IoContext;
use crate::error::{Location, SpecError};
use crate::filter::{self, Filter};
use crate::parse::{fail, found, is_mismatch, number, token, word, ws, Res};

/// Number of histogram slots of a counter.
pub const SLOTS: usize = 8;

/// The IO field a counter records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Start of the IO scaled to 0..=65535 over the device ([`Io::offset`]).
    Offset,
    /// Size in bytes ([`Io::size`]).
    Size,
    /// Time queued before issue, µs ([`Io::wait_time`]).
    WaitTime,
    /// Time on the device, µs ([`Io::io_time`]).
    IoTime,
    /// Distance from the previous IO completed on the device, scaled like `offset`
    /// ([`Io::seek_dist`]).
    SeekDist,
}

impl Field {
    /// All fields, in the order of the documentation.
    pub const ALL: [Field; 5] = [
        Field::Offset,
        Field::Size,
        Field::WaitTime,
        Field::IoTime,
        Field::SeekDist,
    ];

    /// The name used in specs and filters.
    pub fn name(self) -> &'static str {
        match self {
            Field::Offset => "offset",
            Field::Size => "size",
            Field::WaitTime => "wait_time",
            Field::IoTime => "io_time",
            Field::SeekDist => "seek_dist",
        }
    }

    /// The field by its name.
    pub fn from_name(s: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The unit of the field's values, for readable outputs.
    pub fn unit(self) -> &'static str {
        match self {
            Field::Offset | Field::SeekDist => "1/65536 of the device",
            Field::Size => "bytes",
            Field::WaitTime | Field::IoTime => "µs",
        }
    }

    /// The field's value for an IO.
    #[inline]
    pub fn value(self, io: &Io) -> u64 {
        match self {
            Field::Offset => u64::from(io.offset),
            Field::Size => io.size,
            Field::WaitTime => io.wait_time,
            Field::IoTime => io.io_time,
            Field::SeekDist => u64::from(io.seek_dist),
        }
    }
}

/// A set of directions (`R`, `A`, `W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DirMask(u8);

impl DirMask {
    /// The empty set.
    pub const EMPTY: DirMask = DirMask(0);

    /// The set with `d` added.
    pub fn with(self, d: Dir) -> DirMask {
        DirMask(self.0 | Self::bit(d))
    }

    /// Whether `d` is in the set.
    #[inline]
    pub fn contains(self, d: Dir) -> bool {
        self.0 & Self::bit(d) != 0
    }

    #[inline]
    fn bit(d: Dir) -> u8 {
        1 << d.index()
    }
}

impl fmt::Display for DirMask {
    /// The letters in `RAW` order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in Dir::ALL {
            if self.contains(d) {
                write!(f, "{}", d.letter())?;
            }
        }
        Ok(())
    }
}

/// One counter: which IOs it records, what field, the nine slot boundaries and an optional
/// filter.
#[derive(Debug, Clone)]
pub struct CounterSpec {
    /// Directions recorded.
    pub dirs: DirMask,
    /// Field recorded.
    pub field: Field,
    /// Boundaries B0..B8: slot `i` holds `B[i] <= v < B[i+1]`; `B8 == 0` means no upper
    /// limit.
    pub bounds: [u64; 9],
    /// Extra condition an IO must meet to be recorded.
    pub filter: Option<Filter>,
}

impl CounterSpec {
    /// Parses one spec, e.g. `RA offset 0 8192 16384 24576 32768 40960 49152 57344 0` or
    /// `RAW io_time 0 100 250 500 1000 2500 10000 50000 0 if size < 131072`. Errors carry
    /// `location` and the column of the offending token.
    pub fn parse(text: &str, location: Location) -> Result<CounterSpec, SpecError> {
        match spec(text) {
            Ok((_, s)) => Ok(s),
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                Err(e.into_spec_error(text, location))
            }
            Err(nom::Err::Incomplete(_)) => Err(SpecError {
                location,
                column: text.chars().count() + 1,
                message: "incomplete counter spec".to_string(),
            }),
        }
    }

    /// The slot a value falls in, or `None` when it is below `B0` or (with `B8 != 0`) at or
    /// above `B8`.
    #[inline]
    pub fn slot(&self, v: u64) -> Option<usize> {
        let b = &self.bounds;
        if v < b[0] || (b[8] != 0 && v >= b[8]) {
            return None;
        }
        // The largest i with B[i] <= v; bounds do not decrease, so then v < B[i+1].
        let mut i = 0;
        while i + 1 < SLOTS && b[i + 1] <= v {
            i += 1;
        }
        Some(i)
    }

    /// The slot an IO is counted in by this counter, or `None` when the counter does not
    /// record it (direction, range or filter).
    #[inline]
    pub fn classify(&self, io: &Io, ctx: &IoContext<'_>) -> Option<usize> {
        if !self.dirs.contains(io.dir) {
            return None;
        }
        let slot = self.slot(self.field.value(io))?;
        match &self.filter {
            Some(f) if !f.matches(io, ctx) => None,
            _ => Some(slot),
        }
    }

    /// The spec without its filter, normalized: `DIR FIELD B0 .. B8`.
    pub fn spec_text(&self) -> String {
        let mut s = format!("{} {}", self.dirs, self.field.name());
        for b in self.bounds {
            s.push(' ');
            s.push_str(&b.to_string());
        }
        s
    }

    /// The range of slot `i` as `[lo,hi)` (or `[lo,inf)` for an unbounded last slot).
    pub fn slot_range(&self, i: usize) -> String {
        let b = &self.bounds;
        let lo = b.get(i).copied().unwrap_or(0);
        match b.get(i + 1) {
            Some(&0) if i + 1 == SLOTS => format!("[{lo},inf)"),
            Some(hi) => format!("[{lo},{hi})"),
            None => format!("[{lo},?)"),
        }
    }
}

impl fmt::Display for CounterSpec {
    /// The normalized spec, with ` if FILTER` when there is one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec_text())?;
        if let Some(flt) = &self.filter {
            write!(f, " if {}", flt.text())?;
        }
        Ok(())
    }
}

fn dirs(i: &str) -> Res<'_, DirMask> {
    let (rest, tok) = match token(i) {
        Ok(x) => x,
        Err(e) if is_mismatch(&e) => return fail(i, "empty counter spec"),
        Err(e) => return Err(e),
    };
    let mut mask = DirMask::EMPTY;
    for (off, c) in tok.char_indices() {
        let d = match c {
            'R' => Dir::R,
            'A' => Dir::A,
            'W' => Dir::W,
            _ => {
                return fail(
                    &i[off..],
                    format!(
                        "unknown direction '{c}' in '{tok}' (DIR is a combination of R, A and W)"
                    ),
                )
            }
        };
        if mask.contains(d) {
            return fail(&i[off..], format!("direction '{c}' given twice in '{tok}'"));
        }
        mask = mask.with(d);
    }
    Ok((rest, mask))
}

fn field<'a>(i: &'a str, dir_tok: &str) -> Res<'a, Field> {
    let (rest, w) = match token(i) {
        Ok(x) => x,
        Err(e) if is_mismatch(&e) => return fail(i, format!("expected a field after '{dir_tok}'")),
        Err(e) => return Err(e),
    };
    match Field::from_name(w) {
        Some(f) => Ok((rest, f)),
        None => fail(
            i,
            format!("unknown field '{w}' (expected offset, size, wait_time, io_time or seek_dist)"),
        ),
    }
}

fn spec(text: &str) -> Res<'_, CounterSpec> {
    let (i, _) = ws(text)?;
    let dir_start = i;
    let (i, dirs) = dirs(i)?;
    let dir_tok = &dir_start[..dir_start.len() - i.len()];
    let (i, _) = ws(i)?;
    let (mut i, field) = field(i, dir_tok)?;
    let mut bounds = [0u64; 9];
    let mut prev_tok = field.name();
    for k in 0..bounds.len() {
        let (at, _) = ws(i)?;
        let (rest, v) = match number(at) {
            Ok(x) => x,
            Err(e) if is_mismatch(&e) => {
                return fail(
                    at,
                    format!(
                        "expected boundary B{k} (a number) after '{prev_tok}', {}",
                        found(at)
                    ),
                )
            }
            Err(e) => return Err(e),
        };
        if k > 0 && !(k == 8 && v == 0) && v < bounds[k - 1] {
            return fail(
                at,
                format!(
                    "boundary B{k} ({v}) is smaller than B{} ({}); boundaries must not decrease",
                    k - 1,
                    bounds[k - 1]
                ),
            );
        }
        bounds[k] = v;
        prev_tok = &at[..at.len() - rest.len()];
        i = rest;
    }
    let (at, _) = ws(i)?;
    if at.is_empty() {
        return Ok((
            at,
            CounterSpec {
                dirs,
                field,
                bounds,
                filter: None,
            },
        ));
    }
    match word(at) {
        Ok((rest, "if")) => {
            let (rest, flt) = filter::filter_after_if(rest, text)?;
            Ok((
                rest,
                CounterSpec {
                    dirs,
                    field,
                    bounds,
                    filter: Some(flt),
                },
            ))
        }
        _ => fail(
            at,
            format!(
                "expected 'if' or the end of the counter after B8, {}",
                found(at)
            ),
        ),
    }
}
