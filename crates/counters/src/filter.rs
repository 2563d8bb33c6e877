//! Counter filters in the style of the kernel's trace event filters.
//!
//! ```text
//! filter    := or
//! or        := and ( '||' and )*
//! and       := unary ( '&&' unary )*
//! unary     := '!' unary | '(' or ')' | predicate
//! predicate := FIELD OP VALUE
//! ```
//!
//! Precedence: `!` > comparisons > `&&` > `||`; `!` applies to the condition or the
//! parenthesized group right after it. Numbers are decimal or `0x` hexadecimal. Fields:
//!
//! | field | values | operators |
//! | --- | --- | --- |
//! | `offset`, `size`, `wait_time`, `io_time`, `seek_dist` | numbers (decimal or `0x` hex) | `== != < <= > >=` |
//! | `pid` (the charged task's own pid, i.e. its thread id, as ioblame's filters and the `pid-N` of `counters_pipe`), `tgid` (its process id), `ino` (of the IO, 0 when unknown) | numbers | `== != < <= > >=` |
//! | `comm` (of the charged role) | strings, quoted (`"..."` or `'...'`) or bare | `==`, `!=`, `~` (glob: `*`, `?`, `[a-z]`, `[!x]`) |
//! | `dev` (of the IO) | `"MAJ:MIN"`, bare `MAJ:MIN`, the kernel encoding `major << 20 \| minor` as a number, or a device name (`sda`, `/dev/sda`, quoted or bare) resolved against the trace's device table ([`crate::CounterSet::resolve_devices`]) | `==`, `!=` |
//! | `via` | `page buffer inode journal direct read readahead unknown issuer` | `==`, `!=` |
//! | `cgroup` (of the charged role: the cgroup2 cgroup of the task that dirtied or issued) | a path under the cgroup2 mount (`/system.slice/nginx.service`), quoted or bare; `~` globs it, so `cgroup ~ '/system.slice/*'` is the cgroups below one; resolved against the trace's cgroup table ([`crate::CounterSet::resolve_cgroups`]) | `==`, `!=`, `~` |
//! | `reason` (writeback reason) | `background vmscan sync periodic laptop_timer fs_free_space forker_thread foreign_flush other`, `none` (no writeback reason), or a number | `==`, `!=` |
//!
//! Evaluation allocates nothing: strings and globs are parsed once, here.

use ioblame_attrib::{Io, Via, WbReason};
use ioblame_format::BlockDevice;
use nom::bytes::complete::{tag, take_while1};
use nom::Parser;

use crate::context::IoContext;
use crate::device::{maj_min, resolve_name};
use crate::error::{DevError, Location, SpecError};
use crate::parse::{fail, found, is_mismatch, number, word, ws, PErr, Res};

/// Maximum nesting of parentheses and `!` in a filter (deeper input is rejected rather than
/// risking the stack).
pub const MAX_DEPTH: usize = 64;

/// A parsed filter.
#[derive(Debug, Clone)]
pub struct Filter {
    text: String,
    root: Node,
}

impl Filter {
    /// Parses a filter on its own (errors are located as `filter, column C`).
    pub fn parse(text: &str) -> Result<Filter, SpecError> {
        let run = |text| -> Res<'_, Filter> {
            let (i, _) = ws(text)?;
            if i.is_empty() {
                return fail(i, "empty filter");
            }
            whole_filter(i, "", text)
        };
        match run(text) {
            Ok((_, f)) => Ok(f),
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                Err(e.into_spec_error(text, Location::Filter))
            }
            Err(nom::Err::Incomplete(_)) => Err(SpecError {
                location: Location::Filter,
                column: text.chars().count() + 1,
                message: "incomplete filter".to_string(),
            }),
        }
    }

    /// The filter's text as given (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The device names the filter compares `dev` with, in order of appearance.
    pub fn device_names(&self) -> Vec<&str> {
        let mut v = Vec::new();
        self.root.device_names(&mut v);
        v
    }

    /// Resolves the device names of the filter against a trace's device table (names with
    /// or without `/dev/`). Until then a name matches no device: `dev == NAME` is false and
    /// `dev != NAME` true. Fails on the first name the table does not hold.
    pub fn resolve_devices(&mut self, devices: &[BlockDevice]) -> Result<(), DevError> {
        self.root.resolve_devices(devices)
    }

    /// Whether the filter compares `cgroup`.
    pub fn uses_cgroup(&self) -> bool {
        self.root.uses_cgroup()
    }

    /// Resolves the cgroup paths of the filter (`cgroup == /a/b`, `cgroup ~ '/a/*'`) against
    /// the trace's cgroup table (id, path); until then `cgroup` matches nothing.
    pub fn resolve_cgroups(&mut self, cgroups: &[(u64, &str)]) {
        self.root.resolve_cgroups(cgroups);
    }

    /// Whether an IO passes the filter.
    #[inline]
    pub fn matches(&self, io: &Io, ctx: &IoContext<'_>) -> bool {
        self.root.eval(io, ctx)
    }
}

/// A filter expression.
#[derive(Debug, Clone)]
enum Node {
    Or(Vec<Node>),
    And(Vec<Node>),
    Not(Box<Node>),
    Num {
        field: NumField,
        op: CmpOp,
        value: u64,
    },
    Comm {
        negate: bool,
        pat: StrPat,
    },
    Dev {
        negate: bool,
        dev: u32,
    },
    /// A device by name; `dev` is set by [`Filter::resolve_devices`].
    DevName {
        negate: bool,
        name: Box<str>,
        dev: Option<u32>,
    },
    Via {
        negate: bool,
        via: Via,
    },
    Reason {
        negate: bool,
        reason: ReasonPat,
    },
    /// A cgroup by path; `ids` (sorted) is set by [`Filter::resolve_cgroups`].
    Cgroup {
        negate: bool,
        pat: StrPat,
        ids: Option<Box<[u64]>>,
    },
}

/// What `reason` is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReasonPat {
    /// `none`: not issued by writeback.
    None,
    /// A number: that exact `enum wb_reason` value.
    Is(u32),
    /// A name ([`WbReason::name`]); `other` covers every value without a name.
    Name(&'static str),
}

impl ReasonPat {
    #[inline]
    fn matches(self, r: Option<WbReason>) -> bool {
        match (self, r) {
            (ReasonPat::None, r) => r.is_none(),
            (ReasonPat::Is(n), Some(r)) => r.0 == n,
            (ReasonPat::Name(n), Some(r)) => r.name() == n,
            (_, None) => false,
        }
    }
}

impl Node {
    fn device_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Node::Or(v) | Node::And(v) => v.iter().for_each(|n| n.device_names(out)),
            Node::Not(n) => n.device_names(out),
            Node::DevName { name, .. } => out.push(name),
            _ => {}
        }
    }

    fn resolve_devices(&mut self, devices: &[BlockDevice]) -> Result<(), DevError> {
        match self {
            Node::Or(v) | Node::And(v) => v.iter_mut().try_for_each(|n| n.resolve_devices(devices)),
            Node::Not(n) => n.resolve_devices(devices),
            Node::DevName { name, dev, .. } => {
                *dev = Some(resolve_name(name, devices)?);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn uses_cgroup(&self) -> bool {
        match self {
            Node::Or(v) | Node::And(v) => v.iter().any(Node::uses_cgroup),
            Node::Not(n) => n.uses_cgroup(),
            Node::Cgroup { .. } => true,
            _ => false,
        }
    }

    fn resolve_cgroups(&mut self, cgroups: &[(u64, &str)]) {
        match self {
            Node::Or(v) | Node::And(v) => v.iter_mut().for_each(|n| n.resolve_cgroups(cgroups)),
            Node::Not(n) => n.resolve_cgroups(cgroups),
            Node::Cgroup { pat, ids, .. } => {
                let mut v: Vec<u64> = cgroups
                    .iter()
                    .filter(|(_, p)| pat.matches(p.as_bytes()))
                    .map(|&(id, _)| id)
                    .collect();
                v.sort_unstable();
                *ids = Some(v.into());
            }
            _ => {}
        }
    }

    fn eval(&self, io: &Io, ctx: &IoContext<'_>) -> bool {
        match self {
            Node::Or(v) => v.iter().any(|n| n.eval(io, ctx)),
            Node::And(v) => v.iter().all(|n| n.eval(io, ctx)),
            Node::Not(n) => !n.eval(io, ctx),
            Node::Num { field, op, value } => op.apply(field.value(io, ctx), *value),
            Node::Comm { negate, pat } => pat.matches(ctx.comm.as_bytes()) != *negate,
            Node::Dev { negate, dev } => (io.dev == *dev) != *negate,
            Node::DevName { negate, dev, .. } => (Some(io.dev) == *dev) != *negate,
            Node::Via { negate, via } => (io.via == *via) != *negate,
            Node::Reason { negate, reason } => reason.matches(io.reason) != *negate,
            Node::Cgroup { negate, ids, .. } => {
                ids.as_ref()
                    .is_some_and(|ids| ids.binary_search(&ctx.cgroup).is_ok())
                    != *negate
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumField {
    Offset,
    Size,
    WaitTime,
    IoTime,
    SeekDist,
    Pid,
    Tgid,
    Ino,
}

impl NumField {
    #[inline]
    fn value(self, io: &Io, ctx: &IoContext<'_>) -> u64 {
        match self {
            NumField::Offset => u64::from(io.offset),
            NumField::Size => io.size,
            NumField::WaitTime => io.wait_time,
            NumField::IoTime => io.io_time,
            NumField::SeekDist => u64::from(io.seek_dist),
            NumField::Pid => u64::from(ctx.pid),
            NumField::Tgid => u64::from(ctx.tgid),
            NumField::Ino => io.ino.unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Glob,
}

impl CmpOp {
    #[inline]
    fn apply(self, a: u64, b: u64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Glob => false,
        }
    }
}

/// A string pattern: exact bytes or a glob.
#[derive(Debug, Clone)]
enum StrPat {
    Exact(Box<[u8]>),
    Glob(Glob),
}

impl StrPat {
    #[inline]
    fn matches(&self, s: &[u8]) -> bool {
        match self {
            StrPat::Exact(p) => **p == *s,
            StrPat::Glob(g) => g.matches(s),
        }
    }
}

/// One element of a glob.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GlobTok {
    Lit(u8),
    /// `?`: any one byte.
    Any,
    /// `*`: any run of bytes.
    Star,
    /// `[...]`: inclusive byte ranges, possibly negated with `!` or `^`.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

impl GlobTok {
    #[inline]
    fn matches_one(&self, c: u8) -> bool {
        match self {
            GlobTok::Lit(l) => *l == c,
            GlobTok::Any => true,
            GlobTok::Star => false,
            GlobTok::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

/// A glob pattern as the kernel's filters take it (`glob_match`): `*`, `?`, `[...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob(Vec<GlobTok>);

/// A glob pattern that does not compile: a `[` without its `]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unterminated '[' in glob pattern")]
struct UnterminatedClass {
    /// Byte offset of the `[` in the pattern.
    at: usize,
}

impl Glob {
    /// Compiles a pattern.
    fn compile(p: &[u8]) -> Result<Glob, UnterminatedClass> {
        let mut toks = Vec::new();
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                b'*' => {
                    if toks.last() != Some(&GlobTok::Star) {
                        toks.push(GlobTok::Star);
                    }
                    i += 1;
                }
                b'?' => {
                    toks.push(GlobTok::Any);
                    i += 1;
                }
                b'[' => {
                    let start = i;
                    i += 1;
                    let negated = matches!(p.get(i), Some(b'!' | b'^'));
                    if negated {
                        i += 1;
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let Some(&c) = p.get(i) else {
                            return Err(UnterminatedClass { at: start });
                        };
                        // A ']' right after '[' (or '[!') is a literal member.
                        if c == b']' && !first {
                            i += 1;
                            break;
                        }
                        first = false;
                        if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&e| e != b']') {
                            let hi = p[i + 2];
                            ranges.push((c.min(hi), c.max(hi)));
                            i += 3;
                        } else {
                            ranges.push((c, c));
                            i += 1;
                        }
                    }
                    toks.push(GlobTok::Class { negated, ranges });
                }
                c => {
                    toks.push(GlobTok::Lit(c));
                    i += 1;
                }
            }
        }
        Ok(Glob(toks))
    }

    /// Whether `s` matches the whole pattern. Backtracks to the last `*` only, so it runs in
    /// O(len(s) * len(pattern)) and allocates nothing.
    fn matches(&self, s: &[u8]) -> bool {
        let p = &self.0;
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some(GlobTok::Star) => {
                    star = Some((pi, si));
                    pi += 1;
                }
                Some(t) if t.matches_one(s[si]) => {
                    pi += 1;
                    si += 1;
                }
                _ => match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|t| *t == GlobTok::Star)
    }
}

/// Parses `if FILTER` up to the end of the spec: `i` is just after `if`.
pub(crate) fn filter_after_if<'a>(i: &'a str, whole: &'a str) -> Res<'a, Filter> {
    let (at, _) = ws(i)?;
    if at.is_empty() {
        return fail(at, "expected a filter after 'if'");
    }
    whole_filter(at, "if", whole)
}

/// A filter that must extend to the end of `i` (which starts at its first token).
fn whole_filter<'a>(i: &'a str, after: &str, whole: &str) -> Res<'a, Filter> {
    let (rest, root) = or_expr(i, after, 0, whole)?;
    let (rest, _) = ws(rest)?;
    if !rest.is_empty() {
        let msg = match rest.as_bytes()[0] {
            b'&' | b'|' => format!(
                "expected '&&', '||' or the end of the filter, {} (a single '&' or '|' is not an operator)",
                found(rest)
            ),
            b')' => "unmatched ')'".to_string(),
            _ => format!("expected '&&', '||' or the end of the filter, {}", found(rest)),
        };
        return fail(rest, msg);
    }
    let text = i[..i.len() - rest.len()].trim_end().to_string();
    Ok((rest, Filter { text, root }))
}

fn or_expr<'a>(i: &'a str, after: &str, depth: usize, whole: &str) -> Res<'a, Node> {
    chain(i, after, depth, whole, "||", and_expr, Node::Or)
}

fn and_expr<'a>(i: &'a str, after: &str, depth: usize, whole: &str) -> Res<'a, Node> {
    chain(i, after, depth, whole, "&&", unary, Node::And)
}

/// `term (op term)*` of one operator: the terms parsed by `term`, joined by `node` when
/// there are several.
fn chain<'a>(
    i: &'a str,
    after: &str,
    depth: usize,
    whole: &str,
    op: &'static str,
    term: fn(&'a str, &str, usize, &str) -> Res<'a, Node>,
    node: fn(Vec<Node>) -> Node,
) -> Res<'a, Node> {
    let (mut i, first) = term(i, after, depth, whole)?;
    let mut terms = vec![first];
    loop {
        let (at, _) = ws(i)?;
        match tag::<_, _, PErr<'a>>(op).parse(at) {
            Ok((rest, _)) => {
                let (rest, n) = term(rest, op, depth, whole)?;
                terms.push(n);
                i = rest;
            }
            Err(_) => break,
        }
    }
    Ok((
        i,
        if terms.len() == 1 {
            terms.remove(0)
        } else {
            node(terms)
        },
    ))
}

fn unary<'a>(i: &'a str, after: &str, depth: usize, whole: &str) -> Res<'a, Node> {
    let (at, _) = ws(i)?;
    if depth >= MAX_DEPTH {
        return fail(at, format!("filter nested deeper than {MAX_DEPTH} levels"));
    }
    if let Some(rest) = at.strip_prefix('!') {
        if !rest.starts_with('=') {
            let (rest, n) = unary(rest, "!", depth + 1, whole)?;
            return Ok((rest, Node::Not(Box::new(n))));
        }
    }
    if let Some(rest) = at.strip_prefix('(') {
        let (rest, n) = or_expr(rest, "(", depth + 1, whole)?;
        let (close, _) = ws(rest)?;
        return match close.strip_prefix(')') {
            Some(rest) => Ok((rest, n)),
            None => fail(
                close,
                format!(
                    "expected ')' to close the '(' at column {}, {}",
                    crate::parse::column_of(whole, at),
                    found(close)
                ),
            ),
        };
    }
    predicate(at, after)
}

const FIELDS: &str =
    "offset, size, wait_time, io_time, seek_dist, pid, tgid, comm, dev, ino, via, reason or cgroup";

fn predicate<'a>(at: &'a str, after: &str) -> Res<'a, Node> {
    let (rest, name) = match word(at) {
        Ok(x) => x,
        Err(e) if is_mismatch(&e) => {
            let msg = if after.is_empty() {
                format!("expected a condition, {}", found(at))
            } else {
                format!("expected a condition after '{after}', {}", found(at))
            };
            return fail(at, msg);
        }
        Err(e) => return Err(e),
    };
    enum Kind {
        Num(NumField),
        Comm,
        Dev,
        Via,
        Reason,
        Cgroup,
    }
    let kind = match name {
        "offset" => Kind::Num(NumField::Offset),
        "size" => Kind::Num(NumField::Size),
        "wait_time" => Kind::Num(NumField::WaitTime),
        "io_time" => Kind::Num(NumField::IoTime),
        "seek_dist" => Kind::Num(NumField::SeekDist),
        "pid" => Kind::Num(NumField::Pid),
        "tgid" => Kind::Num(NumField::Tgid),
        "ino" => Kind::Num(NumField::Ino),
        "comm" => Kind::Comm,
        "dev" => Kind::Dev,
        "via" => Kind::Via,
        "reason" => Kind::Reason,
        "cgroup" => Kind::Cgroup,
        _ => {
            return fail(
                at,
                format!("unknown filter field '{name}' (expected {FIELDS})"),
            )
        }
    };
    let (op_at, _) = ws(rest)?;
    let (val_at, (op, op_text)) = match cmp_op(op_at) {
        Ok((r, x)) => (r, x),
        Err(_) => {
            let ops = match kind {
                Kind::Num(_) => "==, !=, <, <=, >, >=",
                Kind::Comm | Kind::Cgroup => "==, != or ~",
                _ => "== or !=",
            };
            return fail(
                op_at,
                format!(
                    "expected a comparison operator ({ops}) after '{name}', {}",
                    found(op_at)
                ),
            );
        }
    };
    let allowed = match kind {
        Kind::Num(_) => op != CmpOp::Glob,
        Kind::Comm | Kind::Cgroup => matches!(op, CmpOp::Eq | CmpOp::Ne | CmpOp::Glob),
        _ => matches!(op, CmpOp::Eq | CmpOp::Ne),
    };
    if !allowed {
        let hint = match kind {
            Kind::Num(_) => "'~' is only for comm and cgroup",
            Kind::Comm | Kind::Cgroup => "use ==, != or ~",
            _ => "use == or !=",
        };
        return fail(
            op_at,
            format!("operator '{op_text}' cannot be used with {name} ({hint})"),
        );
    }
    let ctx = format!("{name} {op_text}");
    let (v_at, _) = ws(val_at)?;
    let negate = op == CmpOp::Ne;
    match kind {
        Kind::Num(field) => match number(v_at) {
            Ok((rest, value)) => Ok((rest, Node::Num { field, op, value })),
            Err(e) if is_mismatch(&e) => fail(v_at, format!("expected a number after '{ctx}'")),
            Err(e) => Err(e),
        },
        Kind::Comm | Kind::Cgroup => {
            let (rest, s) = string(v_at, &ctx)?;
            let pat = if op == CmpOp::Glob {
                let quoted = v_at.starts_with(['"', '\'']);
                match Glob::compile(s.as_bytes()) {
                    Ok(g) => StrPat::Glob(g),
                    Err(e) => {
                        let pos = e.at + usize::from(quoted);
                        return fail(v_at.get(pos..).unwrap_or(v_at), e.to_string());
                    }
                }
            } else {
                StrPat::Exact(s.as_bytes().into())
            };
            if matches!(kind, Kind::Cgroup) {
                return Ok((
                    rest,
                    Node::Cgroup {
                        negate,
                        pat,
                        ids: None,
                    },
                ));
            }
            Ok((rest, Node::Comm { negate, pat }))
        }
        Kind::Dev => match dev_value(v_at, &ctx)? {
            (rest, DevValue::Num(dev)) => Ok((rest, Node::Dev { negate, dev })),
            (rest, DevValue::Name(name)) => Ok((
                rest,
                Node::DevName {
                    negate,
                    name: name.into(),
                    dev: None,
                },
            )),
        },
        Kind::Via => {
            let (rest, s) = string(v_at, &ctx)?;
            let Some(via) = Via::from_name(s) else {
                return fail(
                    v_at,
                    format!("unknown via '{s}' (expected {})", via_names()),
                );
            };
            Ok((rest, Node::Via { negate, via }))
        }
        Kind::Reason => {
            if let Ok((rest, n)) = number(v_at) {
                return Ok((
                    rest,
                    Node::Reason {
                        negate,
                        reason: ReasonPat::Is(u32::try_from(n).unwrap_or(u32::MAX)),
                    },
                ));
            }
            let (rest, s) = string(v_at, &ctx)?;
            // ioblame's reasons by name, in their order, then "other" (every number past
            // them is named so).
            let names: Vec<&'static str> = (0u32..)
                .map(|r| WbReason(r).name())
                .take_while(|&n| n != "other")
                .chain(["other"])
                .collect();
            let reason = match s {
                "none" => ReasonPat::None,
                _ => match names.iter().find(|&&n| n == s) {
                    Some(&n) => ReasonPat::Name(n),
                    None => {
                        return fail(
                            v_at,
                            format!(
                                "unknown reason '{s}' (expected {}, none or a number)",
                                names.join(", ")
                            ),
                        )
                    }
                },
            };
            Ok((rest, Node::Reason { negate, reason }))
        }
    }
}

fn cmp_op(i: &str) -> Res<'_, (CmpOp, &str)> {
    for (t, op) in [
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<=", CmpOp::Le),
        (">=", CmpOp::Ge),
        ("<", CmpOp::Lt),
        (">", CmpOp::Gt),
        ("~", CmpOp::Glob),
    ] {
        if let Ok((rest, m)) = tag::<_, _, PErr<'_>>(t).parse(i) {
            return Ok((rest, (op, m)));
        }
    }
    Err(nom::Err::Error(PErr {
        at: i,
        msg: String::new(),
    }))
}

/// Every via's name, as the parser's error lists them: `page, buffer, ... unknown or issuer`.
fn via_names() -> String {
    let names = Via::ALL.map(Via::name);
    let (last, rest) = (names[names.len() - 1], &names[..names.len() - 1]);
    format!("{} or {last}", rest.join(", "))
}

/// A string value: `"..."`, `'...'` (no escapes, as in the kernel's filters) or a bare run
/// of characters that are not blank, quotes, parentheses or operators.
fn string<'a>(i: &'a str, ctx: &str) -> Res<'a, &'a str> {
    if let Some(q) = i.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let body = &i[1..];
        return match body.find(q) {
            Some(end) => Ok((&body[end + 1..], &body[..end])),
            None => fail(i, format!("unterminated string (missing closing {q})")),
        };
    }
    match take_while1::<_, _, PErr<'a>>(|c: char| {
        !c.is_whitespace()
            && !matches!(
                c,
                '"' | '\'' | '(' | ')' | '&' | '|' | '!' | '=' | '<' | '>' | '~'
            )
    })
    .parse(i)
    {
        Ok(x) => Ok(x),
        Err(_) => fail(i, format!("expected a string after '{ctx}'")),
    }
}

/// What `dev` is compared with.
enum DevValue<'a> {
    /// MAJ:MIN or the kernel encoding.
    Num(u32),
    /// A device name, resolved later against the trace's device table.
    Name(&'a str),
}

/// A device name: `sda`, `nvme0n1p2`, `dm-0`, `/dev/mapper/x` (letters, digits and `/-_.`,
/// not starting with a digit).
fn is_dev_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
}

/// A device: `"MAJ:MIN"`, bare `MAJ:MIN`, a number in the kernel encoding, or a name.
fn dev_value<'a>(i: &'a str, ctx: &str) -> Res<'a, DevValue<'a>> {
    let quoted = i.starts_with(['"', '\'']);
    let (rest, s) = if quoted {
        string(i, ctx)?
    } else {
        match take_while1::<_, _, PErr<'a>>(|c: char| {
            c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '-' | '_' | '.')
        })
        .parse(i)
        {
            Ok(x) => x,
            Err(_) => {
                return fail(
                    i,
                    format!("expected a device (MAJ:MIN, a number or a name) after '{ctx}'"),
                )
            }
        }
    };
    let bad = || {
        fail(
            i,
            format!("expected a device (MAJ:MIN, a number or a name) after '{ctx}', found '{s}'"),
        )
    };
    if let Some((ma, mi)) = s.split_once(':') {
        match maj_min(ma, mi) {
            Some(dev) => Ok((rest, DevValue::Num(dev))),
            None => bad(),
        }
    } else if is_dev_name(s) {
        Ok((rest, DevValue::Name(s)))
    } else {
        match number(s) {
            Ok(("", v)) if v <= u64::from(u32::MAX) => Ok((rest, DevValue::Num(v as u32))),
            _ => bad(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(p: &str) -> Glob {
        Glob::compile(p.as_bytes()).unwrap()
    }

    #[test]
    fn globs() {
        assert!(g("dd*").matches(b"dd"));
        assert!(g("dd*").matches(b"ddrescue"));
        assert!(!g("dd*").matches(b"add"));
        assert!(g("*dd").matches(b"add"));
        assert!(g("*d*").matches(b"xdx"));
        assert!(!g("*d*").matches(b"xxx"));
        assert!(g("k?orker").matches(b"kworker"));
        assert!(!g("k?orker").matches(b"korker"));
        assert!(g("kworker/[0-9]*").matches(b"kworker/3:1"));
        assert!(!g("kworker/[0-9]*").matches(b"kworker/u8:1"));
        assert!(g("kworker/[!0-9]*").matches(b"kworker/u8:1"));
        assert!(g("[]x]").matches(b"]"));
        assert!(g("a*b*c").matches(b"aXbYbZc"));
        assert!(!g("a*b*c").matches(b"aXbYbZ"));
        assert!(g("").matches(b""));
        assert!(!g("").matches(b"a"));
        assert!(g("**").matches(b""));
        let e = Glob::compile(b"ab[cd").unwrap_err();
        assert_eq!(e, UnterminatedClass { at: 2 });
        assert_eq!(e.to_string(), "unterminated '[' in glob pattern");
    }
}
