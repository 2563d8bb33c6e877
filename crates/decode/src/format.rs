//! The tracefs `format` text of a tracepoint, and typed access to the fields of its raw
//! payload.
//!
//! ```
//! use ioblame_decode::format::EventFormat;
//! use ioblame_format::ByteOrder;
//! let text = "name: demo\nID: 7\nformat:\n\
//!     \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
//!     \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
//!     \tfield:char rwbs[4];\toffset:8;\tsize:4;\tsigned:0;\n\n\
//!     print fmt: \"%s\", REC->rwbs\n";
//! let f = EventFormat::parse(text).unwrap();
//! assert_eq!((f.name.as_str(), f.id, f.fields.len()), ("demo", 7, 3));
//! let raw = [7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'W', b'S', 0, 0];
//! let pid = f.field("common_pid").unwrap();
//! assert_eq!(pid.i64(&raw, ByteOrder::Little).unwrap(), -1);
//! assert_eq!(f.field("rwbs").unwrap().bytes(&raw, ByteOrder::Little).unwrap(), b"WS");
//! ```

use nom::branch::alt;
use nom::bytes::complete::{tag, take_till, take_while1};
use nom::character::complete::{digit1, space0};
use nom::combinator::{map_res, opt, rest};
use nom::sequence::{delimited, preceded, terminated};
use nom::{IResult, Parser};

pub use ioblame_events::field::{Field, FieldError, FieldLayout, FieldSpec};

/// A malformed `format` text: which line, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("format of `{event}`, line {line}: {what}: {text:?}")]
pub struct FormatError {
    /// Event name as far as known (the `name:` line), or empty.
    pub event: String,
    /// 1-based line number.
    pub line: usize,
    /// The offending line.
    pub text: String,
    /// What is wrong.
    pub what: String,
}

/// A parsed tracefs `format` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// The `name:` (without the subsystem).
    pub name: String,
    /// The `ID:` (the payload's `common_type`).
    pub id: u32,
    /// The fields, common ones included, in file order.
    pub fields: Vec<FieldSpec>,
    /// The `print fmt:` text, empty when absent.
    pub print_fmt: String,
}

enum Line<'a> {
    Name(&'a str),
    Id(u32),
    FormatStart,
    Field(FieldSpec),
    PrintFmt(&'a str),
    Blank,
}

fn number<T: std::str::FromStr>(i: &str) -> IResult<&str, T> {
    map_res(digit1, str::parse::<T>).parse(i)
}

/// `NAME:NUMBER;` with surrounding blanks.
fn attr<'a>(
    name: &'static str,
) -> impl Parser<&'a str, Output = usize, Error = nom::error::Error<&'a str>> {
    delimited((space0, tag(name), tag(":")), number::<usize>, tag(";"))
}

fn field_line(i: &str) -> IResult<&str, FieldSpec> {
    let (i, _) = (space0, tag("field"), opt(tag(" special")), tag(":")).parse(i)?;
    let (i, decl) = terminated(take_till(|c| c == ';'), tag(";")).parse(i)?;
    let (i, offset) = attr("offset").parse(i)?;
    let (i, size) = attr("size").parse(i)?;
    let (i, signed) = opt(attr("signed")).parse(i)?;
    let (i, _) = space0(i)?;
    let spec = parse_decl(decl, offset, size, signed.unwrap_or(0) != 0).ok_or_else(|| {
        nom::Err::Failure(nom::error::Error::new(decl, nom::error::ErrorKind::Verify))
    })?;
    Ok((i, spec))
}

/// Splits `TYPE NAME`, `TYPE NAME[N]`, `__data_loc TYPE[] NAME` into a spec.
fn parse_decl(decl: &str, offset: usize, size: usize, signed: bool) -> Option<FieldSpec> {
    let decl = decl.trim();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // The name is the last identifier, possibly followed by `[N]`.
    let (head, array_len) = match decl.strip_suffix(']') {
        Some(d) => {
            let open = d.rfind('[')?;
            let n = &d[open + 1..];
            let len = if n.is_empty() {
                None
            } else {
                Some(n.parse().unwrap_or(0))
            };
            (&d[..open], len)
        }
        None => (decl, None),
    };
    let head = head.trim_end();
    let name_start = head
        .char_indices()
        .rev()
        .take_while(|&(_, c)| ident(c))
        .last()
        .map(|(i, _)| i)?;
    let name = &head[name_start..];
    let type_name = head[..name_start].trim();
    if name.is_empty() || type_name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let data_loc = type_name.starts_with("__data_loc") || type_name.starts_with("__rel_loc");
    Some(FieldSpec {
        name: name.to_string(),
        type_name: type_name.to_string(),
        offset,
        size,
        signed,
        array_len,
        data_loc,
        rel_loc: type_name.starts_with("__rel_loc"),
    })
}

fn line(i: &str) -> IResult<&str, Line<'_>> {
    alt((
        preceded(
            (tag("name:"), space0),
            take_while1(|c: char| !c.is_whitespace()),
        )
        .map(Line::Name),
        preceded((tag("ID:"), space0), number::<u32>).map(Line::Id),
        (tag("format:"), space0).map(|_| Line::FormatStart),
        preceded((space0, tag("print fmt:"), space0), rest).map(Line::PrintFmt),
        field_line.map(Line::Field),
        space0.map(|_| Line::Blank),
    ))
    .parse(i)
}

impl EventFormat {
    /// Parses a tracefs `format` text. Errors name the offending line.
    pub fn parse(text: &str) -> Result<EventFormat, FormatError> {
        let mut name = None;
        let mut id = None;
        let mut fields: Vec<FieldSpec> = Vec::new();
        let mut print_fmt = String::new();
        let mut last_line = 0;
        for (n, l) in text.lines().enumerate() {
            last_line = n + 1;
            let err = |what: &str, name: &Option<String>| FormatError {
                event: name.clone().unwrap_or_default(),
                line: n + 1,
                text: l.to_string(),
                what: what.to_string(),
            };
            if !print_fmt.is_empty() {
                // Continuation of a multi-line print fmt (not produced by current kernels).
                print_fmt.push('\n');
                print_fmt.push_str(l);
                continue;
            }
            match line(l) {
                Ok((rest, parsed)) if rest.trim().is_empty() => match parsed {
                    Line::Name(s) => name = Some(s.to_string()),
                    Line::Id(v) => id = Some(v),
                    Line::FormatStart | Line::Blank => {}
                    Line::Field(f) => {
                        if f.offset
                            .checked_add(f.size)
                            .is_none_or(|e| e > u16::MAX as usize)
                        {
                            return Err(err("field lies beyond 64 KiB", &name));
                        }
                        if fields.iter().any(|g| g.name == f.name) {
                            return Err(err("duplicate field name", &name));
                        }
                        fields.push(f)
                    }
                    Line::PrintFmt(s) => print_fmt = s.to_string(),
                },
                Ok(_) | Err(_) => {
                    let what = if l.trim_start().starts_with("field") {
                        "malformed field line (expected `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`)"
                    } else {
                        "unrecognised line"
                    };
                    return Err(err(what, &name));
                }
            }
        }
        let missing = |what: &str| FormatError {
            event: name.clone().unwrap_or_default(),
            line: last_line,
            text: String::new(),
            what: what.to_string(),
        };
        let Some(id) = id else {
            return Err(missing("no `ID:` line"));
        };
        let Some(name) = name.clone() else {
            return Err(missing("no `name:` line"));
        };
        Ok(EventFormat {
            name,
            id,
            fields,
            print_fmt,
        })
    }

    /// The spec of a field, by name.
    pub fn spec(&self, name: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A resolved accessor for a field, or [`FieldError::MissingField`].
    pub fn field(&self, name: &str) -> Result<Field, FieldError> {
        let s = self.spec(name).ok_or_else(|| FieldError::MissingField {
            event: self.name.clone(),
            field: name.to_string(),
        })?;
        Ok(Field::from_spec(s))
    }

    /// The value the print fmt's `__print_flags`/`__print_symbolic` tables give the
    /// symbol `name` (`{(1 << 4), "I_DIRTY_SYNC"}` gives 16), where the kernel wrote a
    /// number there; `None` when the symbol is absent or its value is left as a name
    /// (enum constants without `TRACE_DEFINE_ENUM`).
    pub fn print_symbol_value(&self, name: &str) -> Option<u64> {
        print_symbol_value(&self.print_fmt, name)
    }
}

/// See [`EventFormat::print_symbol_value`]: the value of the table entry `{VALUE, "name"}`
/// in a print fmt text.
pub fn print_symbol_value(print_fmt: &str, name: &str) -> Option<u64> {
    let quoted = format!("\"{name}\"");
    let mut from = 0;
    while let Some(i) = print_fmt[from..].find(&quoted) {
        let at = from + i;
        from = at + quoted.len();
        // `{VALUE, "name"}`: the value runs from the entry's `{` to the comma.
        let before = print_fmt[..at].trim_end();
        let Some(before) = before.strip_suffix(',') else {
            continue;
        };
        if !print_fmt[from..].trim_start().starts_with('}') {
            continue;
        }
        let Some(open) = before.rfind('{') else {
            continue;
        };
        return eval_const(&before[open + 1..]);
    }
    None
}

/// Evaluates the constant expressions the kernel's tables hold: integers (decimal, hex,
/// `U`/`L` suffixes), parentheses, integer casts, `<<` and `|`. Nesting deeper than
/// [`MAX_NESTING`] is not evaluated (`None`): the text comes from the trace, and a crafted
/// one must not overflow the stack.
fn eval_const(text: &str) -> Option<u64> {
    let toks = tokens(text)?;
    let mut pos = 0;
    let v = expr_or(&toks, &mut pos, 0)?;
    (pos == toks.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(u64),
    Word,
    Open,
    Close,
    Shl,
    Or,
}

fn tokens(text: &str) -> Option<Vec<Tok>> {
    let b = text.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' => i += 1,
            b'(' => {
                v.push(Tok::Open);
                i += 1
            }
            b')' => {
                v.push(Tok::Close);
                i += 1
            }
            b'|' => {
                v.push(Tok::Or);
                i += 1
            }
            b'<' if b.get(i + 1) == Some(&b'<') => {
                v.push(Tok::Shl);
                i += 2
            }
            b'0'..=b'9' => {
                let start = i;
                while i < b.len() && b[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                let lit = text[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
                let n = match lit.strip_prefix("0x").or_else(|| lit.strip_prefix("0X")) {
                    Some(h) => u64::from_str_radix(h, 16).ok()?,
                    None => lit.parse().ok()?,
                };
                v.push(Tok::Num(n));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                v.push(Tok::Word);
            }
            _ => return None,
        }
    }
    Some(v)
}

/// How deep parentheses and casts may nest in a table's value: the kernel's are a few
/// levels deep.
const MAX_NESTING: u32 = 64;

fn expr_or(t: &[Tok], pos: &mut usize, depth: u32) -> Option<u64> {
    let mut v = expr_shl(t, pos, depth)?;
    while t.get(*pos) == Some(&Tok::Or) {
        *pos += 1;
        v |= expr_shl(t, pos, depth)?;
    }
    Some(v)
}

fn expr_shl(t: &[Tok], pos: &mut usize, depth: u32) -> Option<u64> {
    let mut v = atom(t, pos, depth)?;
    while t.get(*pos) == Some(&Tok::Shl) {
        *pos += 1;
        let n = atom(t, pos, depth)?;
        v = v.checked_shl(u32::try_from(n).ok()?)?;
    }
    Some(v)
}

fn atom(t: &[Tok], pos: &mut usize, depth: u32) -> Option<u64> {
    if depth >= MAX_NESTING {
        return None;
    }
    match t.get(*pos)? {
        Tok::Num(n) => {
            *pos += 1;
            Some(*n)
        }
        Tok::Open => {
            // A cast `(unsigned long)` (words only) applies to what follows.
            let words = t[*pos + 1..]
                .iter()
                .take_while(|x| **x == Tok::Word)
                .count();
            if words > 0 && t.get(*pos + 1 + words) == Some(&Tok::Close) {
                *pos += words + 2;
                return atom(t, pos, depth + 1);
            }
            *pos += 1;
            let v = expr_or(t, pos, depth + 1)?;
            (t.get(*pos) == Some(&Tok::Close)).then(|| *pos += 1)?;
            Some(v)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ioblame_format::ByteOrder;

    /// A table value nested past `MAX_NESTING` is left unevaluated instead of overflowing
    /// the stack (the print fmt comes from the trace); the kernel's own depths still work.
    #[test]
    fn deeply_nested_table_values_are_refused_not_overflowed() {
        for (open, close) in [("(", ")"), ("(unsigned long)(", ")")] {
            let deep = format!(
                "{{{}1{}, \"X\"}}",
                open.repeat(300_000),
                close.repeat(300_000)
            );
            assert_eq!(print_symbol_value(&deep, "X"), None);
        }
        let shallow = format!("{{{}1 << 4{}, \"X\"}}", "(".repeat(40), ")".repeat(40));
        assert_eq!(print_symbol_value(&shallow, "X"), Some(16));
        let casts = format!("{{{}(1 << 4), \"X\"}}", "(unsigned long)".repeat(40));
        assert_eq!(print_symbol_value(&casts, "X"), Some(16));
    }

    /// Every format text at hand, named `<subsystem>_<name>`: the event registry's and
    /// those of other tracepoints in `tests/formats`.
    fn formats() -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = ioblame_events::EVENTS
            .iter()
            .map(|d| {
                let text = ioblame_events::builtin_format(d.name).unwrap();
                (d.name.replacen(':', "_", 1), text.to_string())
            })
            .collect();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/formats");
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "format") {
                let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
                v.push((stem, std::fs::read_to_string(&p).unwrap()));
            }
        }
        v
    }

    fn load(name: &str) -> EventFormat {
        EventFormat::parse(ioblame_events::builtin_format(name).unwrap()).unwrap()
    }

    #[test]
    fn every_format_parses() {
        let mut n = 0;
        for (stem, t) in formats() {
            let f = EventFormat::parse(&t).unwrap_or_else(|e| panic!("{stem}: {e}"));
            // The name is `<subsystem>_<name>`.
            assert!(stem.ends_with(&f.name), "{stem} vs {}", f.name);
            assert!(f.id > 0);
            assert_eq!(f.spec("common_type").unwrap().offset, 0);
            assert_eq!(f.spec("common_pid").unwrap().offset, 4);
            assert!(f.spec("common_pid").unwrap().signed);
            assert!(!f.print_fmt.is_empty());
            assert!(f.fields.len() > 4, "{stem}");
            n += 1;
        }
        assert!(n >= 90, "only {n} format files");
    }

    fn check(f: &EventFormat, name: &str, ty: &str, off: usize, size: usize) {
        let s = f
            .spec(name)
            .unwrap_or_else(|| panic!("{}: no {name}", f.name));
        assert_eq!(
            (s.type_name.as_str(), s.offset, s.size),
            (ty, off, size),
            "{}.{name}",
            f.name
        );
    }

    #[test]
    fn offsets_match_the_kernel_events_table() {
        let f = load("block:block_rq_issue");
        assert_eq!((f.name.as_str(), f.id), ("block_rq_issue", 2104));
        check(&f, "dev", "dev_t", 8, 4);
        check(&f, "sector", "sector_t", 16, 8);
        check(&f, "nr_sector", "unsigned int", 24, 4);
        check(&f, "bytes", "unsigned int", 28, 4);
        check(&f, "ioprio", "unsigned short", 32, 2);
        check(&f, "rwbs", "char", 34, 10);
        check(&f, "comm", "char", 44, 16);
        check(&f, "cmd", "__data_loc char[]", 60, 4);
        let rwbs = f.spec("rwbs").unwrap();
        assert_eq!(rwbs.array_len, Some(10));
        assert!(!rwbs.data_loc);
        let cmd = f.spec("cmd").unwrap();
        assert!(cmd.data_loc && cmd.array_len.is_none());

        let f = load("writeback:writeback_single_inode_start");
        check(&f, "name", "char", 8, 32);
        check(&f, "nr_to_write", "long", 72, 8);
        assert!(f.spec("nr_to_write").unwrap().signed);
        check(&f, "cgroup_ino", "ino_t", 88, 8);

        let f = load("iomap:iomap_add_to_ioend");
        check(&f, "addr", "u64", 40, 8);
        check(&f, "type", "u16", 64, 2);
        check(&f, "bdev", "dev_t", 68, 4);

        let f = load("xfs:xfs_buf_submit");
        check(&f, "buf_ops", "const void *", 56, 8);
        check(&f, "lockval", "unsigned", 36, 4);

        let f = load("filemap:mm_filemap_add_to_page_cache");
        check(&f, "pfn", "unsigned long", 8, 8);
        check(&f, "order", "unsigned char", 36, 1);

        let f = load("sched:sched_process_fork");
        check(&f, "child_comm", "__data_loc char[]", 16, 4);
        check(&f, "child_pid", "pid_t", 20, 4);

        let f = load("ext4:ext4_writepages");
        check(&f, "for_kupdate", "char", 68, 1);
        check(&f, "range_cyclic", "char", 69, 1);
    }

    #[test]
    fn errors_name_the_line() {
        let t = "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n\tfield:int b;\toffset:zz;\tsize:4;\n";
        let e = EventFormat::parse(t).unwrap_err();
        assert_eq!(e.line, 5);
        assert!(e.to_string().contains("line 5"), "{e}");
        assert!(e.text.contains("offset:zz"));
        let e = EventFormat::parse("name: x\nformat:\n").unwrap_err();
        assert!(e.what.contains("ID"), "{e}");
        let e = EventFormat::parse("name: x\nID: 1\nbogus here\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = EventFormat::parse("name: x\nID: 1\n\tfield:int;\toffset:0;\tsize:4;\tsigned:1;\n")
            .unwrap_err();
        assert_eq!(e.line, 3);
    }

    #[test]
    fn old_kernels_without_signed_and_with_macro_arrays() {
        let t = "name: old\nID: 9\nformat:\n\tfield:char comm[TASK_COMM_LEN];\toffset:8;\tsize:16;\n\tfield special:int x;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__rel_loc char[] s;\toffset:28;\tsize:4;\tsigned:0;\n";
        let f = EventFormat::parse(t).unwrap();
        assert_eq!(f.spec("comm").unwrap().array_len, Some(0));
        assert!(!f.spec("comm").unwrap().signed);
        assert!(f.spec("x").unwrap().signed);
        assert!(f.spec("s").unwrap().rel_loc);
        assert!(f.print_fmt.is_empty());
    }

    #[test]
    fn integer_access_both_orders_and_sign_extension() {
        let t = "name: n\nID: 1\nformat:\n\tfield:u8 a;\toffset:0;\tsize:1;\tsigned:0;\n\tfield:s8 b;\toffset:1;\tsize:1;\tsigned:1;\n\tfield:short c;\toffset:2;\tsize:2;\tsigned:1;\n\tfield:int d;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:u32 e;\toffset:4;\tsize:4;\tsigned:0;\n\tfield:u64 f;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:char g[3];\toffset:16;\tsize:3;\tsigned:0;\n";
        let f = EventFormat::parse(t).unwrap();
        let mut le = vec![0xfeu8, 0xff, 0xfe, 0xff, 0xfd, 0xff, 0xff, 0xff];
        le.extend_from_slice(&0x0102030405060708u64.to_le_bytes());
        le.extend_from_slice(b"ab\0");
        let mut be = vec![0xfeu8, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xfd];
        be.extend_from_slice(&0x0102030405060708u64.to_be_bytes());
        be.extend_from_slice(b"ab\0");
        for (raw, o) in [(&le, ByteOrder::Little), (&be, ByteOrder::Big)] {
            let g = |n: &str| f.field(n).unwrap();
            assert_eq!(g("a").u64(raw, o).unwrap(), 0xfe);
            assert_eq!(g("b").i64(raw, o).unwrap(), -1);
            assert_eq!(g("c").i64(raw, o).unwrap(), -2);
            assert_eq!(g("d").i64(raw, o).unwrap(), -3);
            assert_eq!(g("e").u64(raw, o).unwrap(), 0xfffffffd);
            assert_eq!(g("f").u64(raw, o).unwrap(), 0x0102030405060708);
            assert_eq!(g("g").bytes(raw, o).unwrap(), b"ab");
            assert!(g("g").u64(raw, o).is_err());
        }
        // Out of bounds is an error, not a panic.
        let short = &le[..12];
        assert!(matches!(
            f.field("f").unwrap().u64(short, ByteOrder::Little),
            Err(FieldError::OutOfBounds {
                offset: 8,
                end: 16,
                len: 12
            })
        ));
        let e = f.field("nope").unwrap_err();
        assert_eq!(e.to_string(), "event `n` has no field `nope`");
    }

    #[test]
    fn data_loc_strings() {
        let f = load("sched:sched_process_exec");
        let fl = f.field("filename").unwrap();
        for o in [ByteOrder::Little, ByteOrder::Big] {
            let mut raw = vec![0u8; 20];
            let loc: u32 = (9 << 16) | 20;
            let b = match o {
                ByteOrder::Little => loc.to_le_bytes(),
                ByteOrder::Big => loc.to_be_bytes(),
            };
            raw[8..12].copy_from_slice(&b);
            raw.extend_from_slice(b"/bin/dd\0\0");
            assert_eq!(fl.bytes(&raw, o).unwrap(), b"/bin/dd");
            assert_eq!(fl.string(&raw, o).unwrap(), "/bin/dd");
            raw.truncate(25);
            assert!(matches!(
                fl.bytes(&raw, o),
                Err(FieldError::OutOfBounds { .. })
            ));
        }
    }
}
