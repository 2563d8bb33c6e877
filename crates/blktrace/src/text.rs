//! `blkparse` text in its default format, parsed with `nom`:
//!
//! ```text
//!   7,0    1        3     0.000028554  3179  Q  WS 0 + 128 [dd]
//!   8,0    0       12     0.000301010     0  C   W 2048 + 8 [0]
//!   8,0    1       14     0.000101345   120  A   W 4096 + 8 <- (253,0) 2048
//! ```
//!
//! device, CPU, sequence, seconds.nanoseconds, pid, action, rwbs, then what the action
//! prints: `sector + blocks [comm]`, `sector + blocks [error]` (C, R), `[comm]` (P),
//! `[comm] depth` (U, UT), `sector / new_sector [comm]` (X), `sector + blocks <- (maj,min)
//! from_sector` (A), the text of a message (m); with `-t`, an elapsed time in parentheses
//! before the bracket. The per-CPU and total summaries `blkparse` prints at the end are
//! skipped; any other line is counted as unknown, with its line number.
//!
//! The comm in brackets names the pid: the first line that names a pid gives a process
//! notify record just before it, as the binary's notifies do.

use std::path::Path;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit1, space0, space1};
use nom::combinator::{map_res, opt, rest};
use nom::sequence::{delimited, preceded};
use nom::{IResult, Parser};

use crate::record::{cat, Action, Payload, Record};
use crate::Problem;

/// Line numbers of unknown lines kept for the report (the count goes on).
pub const UNKNOWN_LINES_KEPT: usize = 20;

fn num<T: std::str::FromStr>(i: &str) -> IResult<&str, T> {
    map_res(digit1, str::parse::<T>).parse(i)
}

/// The fields every action line starts with.
struct Head<'a> {
    major: u32,
    minor: u32,
    cpu: u32,
    sequence: u32,
    time: u64,
    pid: u32,
    action: &'a str,
    rwbs: &'a str,
}

fn head(i: &str) -> IResult<&str, Head<'_>> {
    let (i, _) = space0(i)?;
    let (i, major) = num(i)?;
    let (i, _) = char(',')(i)?;
    let (i, minor) = num(i)?;
    let (i, _) = space1(i)?;
    let (i, cpu) = num(i)?;
    let (i, _) = space1(i)?;
    let (i, sequence) = num(i)?;
    let (i, _) = space1(i)?;
    let (i, sec) = num::<u64>(i)?;
    let (i, _) = char('.')(i)?;
    let (i, frac) = digit1(i)?;
    let (i, _) = space1(i)?;
    let (i, pid) = num(i)?;
    let (i, _) = space1(i)?;
    let (i, action) = take_while1(|c: char| c.is_ascii_alphabetic() || c == '_')(i)?;
    let (i, _) = space1(i)?;
    let (i, rwbs) = take_while1(|c: char| c.is_ascii_uppercase())(i)?;
    // Nanoseconds: 9 digits as blkparse prints them; fewer or more are scaled.
    let mut ns: u64 = 0;
    for (k, c) in frac.bytes().take(9).enumerate() {
        ns += (c - b'0') as u64 * 10u64.pow(8 - k as u32);
    }
    Ok((
        i,
        Head {
            major,
            minor,
            cpu,
            sequence,
            time: sec.saturating_mul(1_000_000_000).saturating_add(ns),
            pid,
            action,
            rwbs,
        },
    ))
}

/// `sector + blocks`.
fn extent(i: &str) -> IResult<&str, (u64, u32)> {
    let (i, _) = space0(i)?;
    let (i, s) = num(i)?;
    let (i, _) = (space0, char('+'), space0).parse(i)?;
    let (i, n) = num(i)?;
    Ok((i, (s, n)))
}

/// `(elapsed)` printed with `-t`, skipped.
fn elapsed(i: &str) -> IResult<&str, ()> {
    let (i, _) = opt(preceded(
        space0,
        delimited(char('('), take_while(|c: char| c != ')'), char(')')),
    ))
    .parse(i)?;
    Ok((i, ()))
}

/// `[text]`.
fn bracket(i: &str) -> IResult<&str, &str> {
    preceded(
        space0,
        delimited(char('['), take_while(|c: char| c != ']'), char(']')),
    )
    .parse(i)
}

/// What follows the rwbs, by action.
enum Tail<'a> {
    /// `sector + blocks [comm]` (or `[comm]` alone).
    Named(Option<(u64, u32)>, &'a str),
    /// `sector + blocks [error]`.
    Error(Option<(u64, u32)>, u16),
    /// `[comm] depth`.
    Unplug(&'a str, u64),
    /// `sector / new_sector [comm]`.
    Split(u64, u64, &'a str),
    /// `sector + blocks <- (maj,min) from`.
    Remap(u64, u32, u32, u32, u64),
    /// A message.
    Text(&'a str),
}

fn tail<'a>(action: Action, i: &'a str) -> IResult<&'a str, Tail<'a>> {
    match action {
        Action::Complete | Action::Requeue => {
            // `sector + blocks`, or the sector alone when no bytes are left (`C WS 0 [0]`).
            let (i, e) = opt(alt((extent, |i| {
                let (i, _) = space0(i)?;
                let (i, s) = num(i)?;
                Ok((i, (s, 0)))
            })))
            .parse(i)?;
            let (i, _) = elapsed(i)?;
            let (i, err) = bracket(i)?;
            let err = err.trim().parse::<i64>().unwrap_or(0) as u16;
            Ok((i, Tail::Error(e, err)))
        }
        Action::UnplugIo | Action::UnplugTimer => {
            let (i, c) = bracket(i)?;
            let (i, _) = space0(i)?;
            let (i, d) = num(i)?;
            Ok((i, Tail::Unplug(c, d)))
        }
        Action::Split => {
            let (i, _) = space0(i)?;
            let (i, s) = num(i)?;
            let (i, _) = (space0, char('/'), space0).parse(i)?;
            let (i, n) = num(i)?;
            let (i, c) = bracket(i)?;
            Ok((i, Tail::Split(s, n, c)))
        }
        Action::Remap => {
            let (i, (s, n)) = extent(i)?;
            let (i, _) = (space0, tag("<-"), space0, char('(')).parse(i)?;
            let (i, ma) = num(i)?;
            let (i, _) = char(',')(i)?;
            let (i, mi) = num(i)?;
            let (i, _) = (char(')'), space0).parse(i)?;
            let (i, from) = num(i)?;
            Ok((i, Tail::Remap(s, n, ma, mi, from)))
        }
        Action::Message => {
            let (i, t) = preceded(opt(char(' ')), rest).parse(i)?;
            Ok((i, Tail::Text(t)))
        }
        _ => {
            let (i, e) = opt(extent).parse(i)?;
            let (i, _) = elapsed(i)?;
            // Passthrough requests print their command bytes in parentheses first.
            let (i, _) = opt(preceded(
                space0,
                delimited(char('('), take_while(|c: char| c != ')'), char(')')),
            ))
            .parse(i)?;
            let (i, c) = alt((bracket, |i| Ok((i, "")))).parse(i)?;
            Ok((i, Tail::Named(e, c)))
        }
    }
}

fn action_of(s: &str) -> Option<Action> {
    Some(match s {
        "Q" => Action::Queue,
        "M" => Action::BackMerge,
        "F" => Action::FrontMerge,
        "G" => Action::GetRq,
        "S" => Action::SleepRq,
        "R" => Action::Requeue,
        "D" => Action::Issue,
        "C" => Action::Complete,
        "P" => Action::Plug,
        "U" => Action::UnplugIo,
        "UT" => Action::UnplugTimer,
        "I" => Action::Insert,
        "X" => Action::Split,
        "B" => Action::Bounce,
        "A" => Action::Remap,
        "m" => Action::Message,
        "abort" | "Z" => Action::Abort,
        "drv_data" => Action::DrvData,
        "ZP" => Action::ZonePlug,
        "ZU" => Action::ZoneUnplug,
        _ => return None,
    })
}

/// Categories of an rwbs as blkparse prints it (the inverse of `Record::rwbs_text`).
fn categories(rwbs: &str) -> u32 {
    let b = rwbs.as_bytes();
    let mut c = 0;
    let mut i = 0;
    if b.len() >= 2 && b[0] == b'F' && matches!(b[1], b'W' | b'R' | b'D' | b'N') {
        c |= cat::FLUSH;
        i = 1;
    }
    match b.get(i) {
        Some(b'D') => c |= cat::DISCARD,
        Some(b'W') => c |= cat::WRITE,
        Some(b'R') => c |= cat::READ,
        _ => {}
    }
    for &l in b.get(i + 1..).unwrap_or(&[]) {
        c |= match l {
            b'F' => cat::FUA,
            b'A' => cat::AHEAD,
            b'S' => cat::SYNC,
            b'M' => cat::META,
            _ => 0,
        };
    }
    c
}

/// One action line parsed: the record, and the comm it names for its pid (if any).
pub fn parse_line(line: &str) -> Option<(Record, Option<&str>)> {
    let (i, h) = head(line).ok()?;
    let action = action_of(h.action)?;
    let (_, t) = tail(action, i).ok()?;
    let device = (h.major << 20) | (h.minor & 0xfffff);
    let mut r = Record {
        sequence: h.sequence,
        ..Record::new(h.time, h.cpu, h.pid, action, categories(h.rwbs), device)
    };
    let mut comm = None;
    let set = |r: &mut Record, e: Option<(u64, u32)>| {
        if let Some((s, n)) = e {
            r.sector = s;
            r.bytes = n.saturating_mul(512);
        }
    };
    match t {
        Tail::Named(e, c) => {
            set(&mut r, e);
            comm = Some(c);
        }
        Tail::Error(e, err) => {
            set(&mut r, e);
            r.error = err;
        }
        Tail::Unplug(c, d) => {
            comm = Some(c);
            r.payload = Payload::Unplug { depth: d };
        }
        Tail::Split(s, n, c) => {
            r.sector = s;
            comm = Some(c);
            r.payload = Payload::Split { new_sector: n };
        }
        Tail::Remap(s, n, ma, mi, from) => {
            set(&mut r, Some((s, n)));
            r.payload = Payload::Remap {
                from: (ma << 20) | (mi & 0xfffff),
                to: device,
                sector_from: from,
            };
        }
        Tail::Text(t) => {
            r.categories |= cat::NOTIFY;
            r.payload = Payload::Message {
                text: t.to_string(),
            }
        }
    }
    Some((r, comm.filter(|c| !c.is_empty())))
}

/// Lines `blkparse` prints that are no action: its summaries.
fn summary_line(line: &str) -> bool {
    let t = line.trim_start();
    line.starts_with(' ') && !t.is_empty() && t.as_bytes()[0].is_ascii_alphabetic()
        || line.starts_with("CPU")
        || line.starts_with("Total (")
        || line.starts_with("Throughput")
        || line.starts_with("Events (")
        || line.starts_with("Skips:")
        || line.starts_with("Input file")
}

/// Whether `b` (the start of a file) reads as blkparse text: its first non-empty line is
/// an action line.
pub fn looks_like_blkparse(b: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(&b[..b.len().min(4096)])
        .or_else(|e| std::str::from_utf8(&b[..e.valid_up_to()]))
    else {
        return false;
    };
    s.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| parse_line(l).is_some())
}

/// Reads a blkparse text file line by line.
pub(crate) struct TextCursor<'a> {
    data: &'a [u8],
    pos: usize,
    line_no: u64,
    path: &'a Path,
    named: std::collections::HashSet<u32>,
    pending: Option<Record>,
    unknown: u64,
    unknown_lines: Vec<u64>,
}

impl<'a> TextCursor<'a> {
    pub fn new(data: &'a [u8], path: &'a Path) -> TextCursor<'a> {
        TextCursor {
            data,
            pos: 0,
            line_no: 0,
            path,
            named: Default::default(),
            pending: None,
            unknown: 0,
            unknown_lines: Vec::new(),
        }
    }

    pub fn next(&mut self, _problems: &mut Vec<Problem>) -> Option<Record> {
        if let Some(r) = self.pending.take() {
            return Some(r);
        }
        while self.pos < self.data.len() {
            let rest = &self.data[self.pos..];
            let n = rest.iter().position(|&c| c == b'\n');
            let line = &rest[..n.unwrap_or(rest.len())];
            self.pos += n.map_or(rest.len(), |n| n + 1);
            self.line_no += 1;
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || summary_line(line) {
                continue;
            }
            let Some((r, comm)) = parse_line(line) else {
                self.unknown += 1;
                if self.unknown_lines.len() < UNKNOWN_LINES_KEPT {
                    self.unknown_lines.push(self.line_no);
                }
                continue;
            };
            if let Some(c) = comm {
                let names_issuer = !matches!(r.action, Action::Complete | Action::Requeue);
                if names_issuer && self.named.insert(r.pid) {
                    let note = Record {
                        action: Action::Process,
                        categories: cat::NOTIFY,
                        sequence: 0,
                        sector: 0,
                        bytes: 0,
                        error: 0,
                        cgroup: None,
                        payload: Payload::Process {
                            comm: c.to_string(),
                        },
                        ..r.clone()
                    };
                    self.pending = Some(r);
                    return Some(note);
                }
            }
            return Some(r);
        }
        None
    }

    pub fn finish(&mut self, problems: &mut Vec<Problem>) {
        if self.unknown > 0 {
            problems.push(Problem::UnknownLines {
                path: self.path.to_path_buf(),
                count: self.unknown,
                lines: std::mem::take(&mut self.unknown_lines),
            });
            self.unknown = 0;
        }
    }
}
