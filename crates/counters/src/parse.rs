//! nom building blocks shared by the counter spec and filter grammars.
//!
//! Every parser works on a suffix of the whole spec text, so the position of an error is
//! `whole.len() - rest.len()`; [`PErr::into_spec_error`] turns it into a 1-based column.

use nom::branch::alt;
use nom::bytes::complete::{tag_no_case, take_while1};
use nom::character::complete::{digit1, hex_digit1, multispace0};
use nom::error::{ErrorKind, ParseError};
use nom::sequence::preceded;
use nom::{IResult, Parser};

use crate::error::{Location, SpecError};

/// A parse error: where, and (for failures) a message.
#[derive(Debug)]
pub(crate) struct PErr<'a> {
    /// The input at the offending token.
    pub at: &'a str,
    /// The message; empty for a plain "did not match" from a nom combinator.
    pub msg: String,
}

impl<'a> ParseError<&'a str> for PErr<'a> {
    fn from_error_kind(input: &'a str, _kind: ErrorKind) -> Self {
        PErr {
            at: input,
            msg: String::new(),
        }
    }
    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }
}

impl PErr<'_> {
    /// The typed error, with the column computed against `whole` (of which `at` is a suffix).
    pub fn into_spec_error(self, whole: &str, location: Location) -> SpecError {
        SpecError {
            location,
            column: column_of(whole, self.at),
            message: if self.msg.is_empty() {
                "syntax error".to_string()
            } else {
                self.msg
            },
        }
    }
}

/// 1-based character column of `rest` (a suffix of `whole`) within `whole`.
pub(crate) fn column_of(whole: &str, rest: &str) -> usize {
    let off = whole.len().saturating_sub(rest.len());
    whole.get(..off).map_or(off, |p| p.chars().count()) + 1
}

pub(crate) type Res<'a, O> = IResult<&'a str, O, PErr<'a>>;

/// An unrecoverable error at `at`.
pub(crate) fn fail<'a, O>(at: &'a str, msg: impl Into<String>) -> Res<'a, O> {
    Err(nom::Err::Failure(PErr {
        at,
        msg: msg.into(),
    }))
}

/// Whether a parse error is a plain mismatch (the caller reports what it expected).
pub(crate) fn is_mismatch(e: &nom::Err<PErr<'_>>) -> bool {
    matches!(e, nom::Err::Error(_))
}

/// Skips white space.
pub(crate) fn ws(i: &str) -> Res<'_, &str> {
    multispace0(i)
}

/// Characters that may continue a word or a number.
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// An identifier: letters, digits and `_`.
pub(crate) fn word(i: &str) -> Res<'_, &str> {
    take_while1(is_word_char)(i)
}

/// A run of non-blank characters.
pub(crate) fn token(i: &str) -> Res<'_, &str> {
    take_while1(|c: char| !c.is_whitespace())(i)
}

/// The next token of `i` for messages: a word, or a single other character, or `None` at
/// the end.
pub(crate) fn peek_token(i: &str) -> Option<&str> {
    let i = i.trim_start();
    let mut chars = i.char_indices();
    let (_, c) = chars.next()?;
    if is_word_char(c) {
        let end = i.find(|c: char| !is_word_char(c)).unwrap_or(i.len());
        Some(&i[..end])
    } else {
        Some(&i[..c.len_utf8()])
    }
}

/// `found 'X'` or `found the end` for messages.
pub(crate) fn found(i: &str) -> String {
    match peek_token(i) {
        Some(t) => format!("found '{t}'"),
        None => "found the end".to_string(),
    }
}

/// A number: decimal, or hexadecimal with `0x`; it must not run into a word character.
/// A mismatch is a recoverable error; a number too large for u64 is a failure.
pub(crate) fn number(i: &str) -> Res<'_, u64> {
    let (rest, (digits, radix)) = alt((
        preceded(tag_no_case("0x"), hex_digit1).map(|d| (d, 16)),
        digit1.map(|d| (d, 10)),
    ))
    .parse(i)?;
    if rest.starts_with(is_word_char) {
        return Err(nom::Err::Error(PErr::from_error_kind(i, ErrorKind::Digit)));
    }
    match u64::from_str_radix(digits, radix) {
        Ok(v) => Ok((rest, v)),
        Err(_) => fail(
            i,
            format!("number '{}' is too large", &i[..i.len() - rest.len()]),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(number("42 x").unwrap(), (" x", 42));
        assert_eq!(number("0x1F)").unwrap(), (")", 31));
        assert_eq!(number("0X10").unwrap(), ("", 16));
        assert!(is_mismatch(&number("12ab").unwrap_err()));
        assert!(is_mismatch(&number("abc").unwrap_err()));
        assert!(is_mismatch(&number("0xg").unwrap_err()));
        assert!(!is_mismatch(&number("99999999999999999999").unwrap_err()));
        assert_eq!(number("18446744073709551615").unwrap().1, u64::MAX);
    }

    #[test]
    fn columns() {
        let s = "ab çd ef";
        assert_eq!(column_of(s, s), 1);
        assert_eq!(column_of(s, &s[s.len()..]), 9);
        assert_eq!(column_of(s, &s[7..]), 7);
    }

    #[test]
    fn peeking() {
        assert_eq!(peek_token("  abc def"), Some("abc"));
        assert_eq!(peek_token("&& x"), Some("&"));
        assert_eq!(peek_token("   "), None);
        assert_eq!(found("é"), "found 'é'");
    }
}
