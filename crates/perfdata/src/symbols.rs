//! The trace's kernel symbols. perf.data carries no `/proc/kallsyms`: the symbols come from
//! the file the user names, else this host's when it is the recording host, else a copy in
//! the tracing data; they are then checked against perf's kernel map record (the address of
//! a reference symbol at recording time) and shifted when they are from another boot.

use std::path::Path;

use ioblame_format::Kallsyms;

use crate::errors::PerfDataError;
use crate::parser::Host;
use crate::records::KernelRef;

/// The trace's kernel symbols, or `None`; notes say where they came from, whether they were
/// shifted, and why there are none. `given` is the user's kallsyms copy, `host` the
/// recording's host, `tracing_copy` the kallsyms text in the tracing data (usually empty).
pub(crate) fn kernel_symbols(
    given: Option<&Path>,
    host: &Host,
    tracing_copy: &str,
    kernel_ref: Option<&KernelRef>,
    notes: &mut Vec<String>,
) -> Result<Option<Kallsyms>, PerfDataError> {
    let this_host = (
        read_trim("/proc/sys/kernel/hostname"),
        read_trim("/proc/sys/kernel/osrelease"),
    );
    let text = source(given, host, this_host, tracing_copy, notes)?;
    // Check the symbols against the recording's own kernel map: a copy from another boot
    // (KASLR) or another kernel build would name the wrong functions.
    let kallsyms = text.map(|text| match kernel_ref {
        Some(r) => checked_against(text, r, notes),
        None => text,
    });
    let kallsyms = kallsyms.map(|text| {
        let restricted = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .all(|a| a.bytes().all(|c| c == b'0'));
        Kallsyms { text, restricted }
    });
    if kallsyms.as_ref().is_none_or(|k| k.restricted) {
        notes.push(
            "no kernel symbols: pass --kallsyms FILE (a copy of /proc/kallsyms from the recording \
             host); stacks are printed as addresses"
                .into(),
        );
    }
    Ok(kallsyms)
}

/// The kallsyms text, from the first source that has one: `given`, this host's
/// `/proc/kallsyms` when `this_host` (host name, kernel release) is the recording `host`,
/// the tracing data's copy.
fn source(
    given: Option<&Path>,
    host: &Host,
    this_host: (Option<String>, Option<String>),
    tracing_copy: &str,
    notes: &mut Vec<String>,
) -> Result<Option<String>, PerfDataError> {
    let (this_name, this_release) = this_host;
    Ok(if let Some(p) = given {
        let text = std::fs::read_to_string(p).map_err(|source| PerfDataError::Kallsyms {
            path: p.to_path_buf(),
            source,
        })?;
        notes.push(format!("kernel symbols from {}", p.display()));
        Some(text)
    } else if this_name.as_deref() == Some(host.hostname.as_str())
        && this_release.as_deref() == Some(host.os_release.as_str())
        && !host.hostname.is_empty()
    {
        match std::fs::read_to_string("/proc/kallsyms") {
            Ok(t) => {
                notes.push("using this host's /proc/kallsyms (the recording host)".into());
                Some(t)
            }
            Err(_) => None,
        }
    } else if !tracing_copy.is_empty() {
        notes.push("kernel symbols from the kallsyms copy in the file's tracing data".into());
        Some(tracing_copy.to_string())
    } else {
        None
    })
}

/// `text` as it fits the recording's kernel map `r`: shifted when `r`'s symbol is elsewhere
/// (another boot), kept with a note when it lacks the symbol.
fn checked_against(text: String, r: &KernelRef, notes: &mut Vec<String>) -> String {
    let (sym, addr) = (&r.symbol, r.address);
    match kallsyms_address(&text, sym) {
        Some(a) if a == addr || a == 0 => text,
        Some(a) => {
            let delta = addr.wrapping_sub(a);
            notes.push(format!(
                "the kernel symbols are from another boot: {sym} is at {a:#x} there and at \
                 {addr:#x} in the recording; core kernel symbols were shifted by {:#x}, \
                 module symbols are left as they are and may be wrong",
                delta as i64
            ));
            relocate_kallsyms(&text, delta)
        }
        None => {
            notes.push(format!(
                "the kernel symbols lack {sym}, the recording's reference symbol: they may \
                 be from another kernel"
            ));
            text
        }
    }
}

/// The address of `sym` among the core kernel symbols of a kallsyms text.
fn kallsyms_address(text: &str, sym: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _kind, name) = (f.next()?, f.next()?, f.next()?);
        (name == sym && f.next().is_none())
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
    })
}

/// Shifts the core kernel symbols of a kallsyms text by `delta` (a KASLR offset); module
/// symbols (`[module]` suffix) load elsewhere on every boot and are kept.
fn relocate_kallsyms(text: &str, delta: u64) -> String {
    let mut out = String::with_capacity(text.len());
    for l in text.lines() {
        let shifted = (!l.trim_end().ends_with(']'))
            .then(|| l.split_once(' '))
            .flatten()
            .and_then(|(a, rest)| {
                let a = u64::from_str_radix(a, 16).ok()?;
                Some(format!("{:016x} {rest}", a.wrapping_add(delta)))
            });
        out.push_str(shifted.as_deref().unwrap_or(l));
        out.push('\n');
    }
    out
}

/// The trimmed text of a small file, if it can be read.
fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "ffffffff8a000000 T _text\nffffffff8a001000 T foo\nffffffffc0001000 t m [ext4]\n";

    fn host(name: &str, release: &str) -> Host {
        Host {
            hostname: name.into(),
            os_release: release.into(),
            ..Default::default()
        }
    }

    #[test]
    fn reference_symbol_and_relocation() {
        assert_eq!(kallsyms_address(TEXT, "_text"), Some(0xffffffff8a000000));
        assert_eq!(kallsyms_address(TEXT, "m"), None);
        let moved = relocate_kallsyms(TEXT, 0xffffffff81000000u64.wrapping_sub(0xffffffff8a000000));
        assert_eq!(
            moved,
            "ffffffff81000000 T _text\nffffffff81001000 T foo\nffffffffc0001000 t m [ext4]\n"
        );
    }

    #[test]
    fn checked_against_the_kernel_map() {
        let r = |address| KernelRef {
            symbol: "_text".into(),
            address,
        };
        let mut notes = Vec::new();
        assert_eq!(
            checked_against(TEXT.into(), &r(0xffffffff8a000000), &mut notes),
            TEXT
        );
        assert!(notes.is_empty());
        let moved = checked_against(TEXT.into(), &r(0xffffffff81000000), &mut notes);
        assert!(moved.starts_with("ffffffff81000000 T _text\n"), "{moved}");
        assert_eq!(
            notes,
            ["the kernel symbols are from another boot: _text is at 0xffffffff8a000000 there and \
              at 0xffffffff81000000 in the recording; core kernel symbols were shifted by \
              0xfffffffff7000000, module symbols are left as they are and may be wrong"]
        );
        notes.clear();
        let other = KernelRef {
            symbol: "_stext".into(),
            address: 1,
        };
        assert_eq!(checked_against(TEXT.into(), &other, &mut notes), TEXT);
        assert!(
            notes[0].starts_with("the kernel symbols lack _stext"),
            "{notes:?}"
        );
        // Restricted symbols (all zero) are kept as they are.
        notes.clear();
        let zero = "0000000000000000 T _text\n";
        assert_eq!(checked_against(zero.into(), &r(5), &mut notes), zero);
        assert!(notes.is_empty());
    }

    #[test]
    fn sources_in_order() {
        let d = tempfile::tempdir().unwrap();
        let given = d.path().join("kallsyms");
        std::fs::write(&given, TEXT).unwrap();
        let mut notes = Vec::new();
        let recorded = host("rec", "6.1");
        let this = || (Some("rec".to_string()), Some("6.1".to_string()));
        let got = source(Some(&given), &recorded, this(), "copy", &mut notes).unwrap();
        assert_eq!(got.as_deref(), Some(TEXT));
        assert_eq!(notes, [format!("kernel symbols from {}", given.display())]);
        notes.clear();
        let missing = d.path().join("nope");
        assert!(matches!(
            source(Some(&missing), &recorded, this(), "", &mut notes),
            Err(PerfDataError::Kallsyms { .. })
        ));
        // Another host: the tracing data's copy, else none.
        let elsewhere = (Some("other".to_string()), Some("6.1".to_string()));
        let got = source(None, &recorded, elsewhere.clone(), "copy", &mut notes).unwrap();
        assert_eq!(got.as_deref(), Some("copy"));
        assert_eq!(
            notes,
            ["kernel symbols from the kallsyms copy in the file's tracing data"]
        );
        notes.clear();
        assert_eq!(
            source(None, &recorded, elsewhere, "", &mut notes).unwrap(),
            None
        );
        // A file without a host name is never this host's.
        let unnamed = host("", "6.1");
        let blank = (Some(String::new()), Some("6.1".to_string()));
        assert_eq!(source(None, &unnamed, blank, "", &mut notes).unwrap(), None);
        assert!(notes.is_empty(), "{notes:?}");
        // This host: its /proc/kallsyms, when it can be read.
        let got = source(None, &recorded, this(), "copy", &mut notes).unwrap();
        if std::fs::read_to_string("/proc/kallsyms").is_ok() {
            assert!(got.is_some());
            assert_eq!(
                notes,
                ["using this host's /proc/kallsyms (the recording host)"]
            );
        } else {
            assert_eq!(got, None);
        }
    }

    #[test]
    fn no_or_restricted_symbols_are_a_note() {
        let d = tempfile::tempdir().unwrap();
        let given = d.path().join("kallsyms");
        std::fs::write(&given, "0000000000000000 T _text\n").unwrap();
        let mut notes = Vec::new();
        let k = kernel_symbols(Some(&given), &host("", ""), "", None, &mut notes).unwrap();
        assert!(k.unwrap().restricted);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[1].starts_with("no kernel symbols: pass --kallsyms FILE"));
        std::fs::write(&given, TEXT).unwrap();
        notes.clear();
        let k = kernel_symbols(Some(&given), &host("", ""), "", None, &mut notes).unwrap();
        assert!(!k.unwrap().restricted);
        assert_eq!(notes.len(), 1, "{notes:?}");
        notes.clear();
        let k = kernel_symbols(None, &host("", ""), "", None, &mut notes).unwrap();
        assert!(k.is_none());
        assert_eq!(notes.len(), 1, "{notes:?}");
    }
}
