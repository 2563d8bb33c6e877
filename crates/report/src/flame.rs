//! IO flame graphs: folded stacks `outer;...;inner;NAME;comm weight` of the charged intents
//! (NAME the intent's short name), drawn with inferno: the code path at the root, the role
//! that took it on top.

use std::collections::BTreeMap;

use ioblame_attrib::{ActId, IntentId, Symbolizer, Tables, INTENT_LOST, INTENT_NOMEM};

use crate::util::frame_name;

/// What a flame graph is weighted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Bytes charged.
    Bytes,
    /// Device time (µs) of the IOs charged.
    IoTime,
}

/// A frame name safe in folded stacks: no `;`, control characters escaped as in the text
/// outputs ([`crate::util::printable`]).
fn clean(s: &str) -> String {
    let s = crate::util::printable(s).replace(';', ":");
    if s.trim().is_empty() {
        "?".to_string()
    } else {
        s
    }
}

/// The folded frames of an intent: `frames` (innermost first) outermost first, then its
/// `name`; each followed by `;`.
fn stack_prefix(frames: impl DoubleEndedIterator<Item = String>, name: &str) -> String {
    let mut line = String::new();
    for f in frames.rev() {
        line.push_str(&clean(&f));
        line.push(';');
    }
    line.push_str(&clean(name));
    line.push(';');
    line
}

/// One folded stack without its weight, as [`folded_stacks`] writes them:
/// `outer;...;inner;NAME;comm`, from the frame names innermost first, the intent's short
/// name (`[lost]`, `[no stack]` for a stack without frames) and the role's comm.
pub fn folded_stack(frames: &[String], name: &str, comm: &str) -> String {
    let mut line = stack_prefix(frames.iter().cloned(), name);
    line.push_str(&clean(comm));
    line
}

/// Folded stacks, one line per distinct stack (sorted): the intent's frames outermost first
/// (its user frames, when recorded, below its kernel frames)
/// (so a code path taken by several roles is one tower), then the intent's short name
/// (`intent_names`, by intent id; it ends with the writeback reason where the intent has
/// one, `[wb:sync]`), then the role's comm as the leaf. Intents without a stack show as
/// `[lost]` / `[nomem]` / `[no stack]` (with the reason). `weight(act)` gives each act's
/// weight; zero weights are left out.
pub fn folded_stacks(
    t: &Tables,
    sym: &dyn Symbolizer,
    intent_names: &[String],
    weight: impl Fn(ActId) -> u64,
) -> Vec<String> {
    let mut names: BTreeMap<IntentId, String> = BTreeMap::new();
    let mut acc: BTreeMap<String, u64> = BTreeMap::new();
    for (id, a, _) in t.acts_with_totals() {
        let w = weight(id);
        if w == 0 {
            continue;
        }
        let Some(intent) = t.intent(a.intent) else {
            continue;
        };
        let frames = names.entry(a.intent).or_insert_with(|| {
            let name = match (intent.stack.is_empty(), a.intent) {
                (true, INTENT_LOST) => "[lost]",
                (true, INTENT_NOMEM) => "[nomem]",
                _ => intent_names
                    .get(a.intent.index())
                    .map_or("?", String::as_str),
            };
            // The application's frames (innermost first after the kernel's) end up below
            // the kernel's, the outermost at the root.
            let user = intent
                .user
                .iter()
                .map(ioblame_attrib::names::user_frame_label);
            stack_prefix(
                intent.stack.iter().map(|&f| frame_name(sym, f)).chain(user),
                name,
            )
        });
        let comm = t.role(a.role).map_or("?", |r| r.comm.as_str());
        let comm = clean(comm);
        let line = format!("{frames}{comm}");
        *acc.entry(line).or_default() += w;
    }
    acc.into_iter().map(|(k, w)| format!("{k} {w}")).collect()
}

/// Draws a flame graph of folded stacks. `interactive` keeps inferno's JavaScript (search,
/// zoom) for a standalone file; without it the SVG can be inlined in a page.
pub fn flame_svg(
    lines: &[String],
    title: &str,
    count_name: &str,
    interactive: bool,
) -> std::io::Result<String> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.count_name = count_name.to_string();
    opt.no_javascript = !interactive;
    opt.deterministic = true;
    opt.hash = true;
    opt.image_width = Some(1200);
    opt.colors = inferno::flamegraph::Palette::Basic(inferno::flamegraph::color::BasicPalette::Io);
    let mut out = Vec::new();
    if lines.is_empty() {
        // inferno refuses an empty profile; draw a graph with a single zero-width note.
        inferno::flamegraph::from_lines(&mut opt, ["[no IO] 1"], &mut out)?;
    } else {
        inferno::flamegraph::from_lines(&mut opt, lines.iter().map(|s| s.as_str()), &mut out)?;
    }
    let svg = String::from_utf8(out)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(if interactive {
        svg
    } else {
        without_controls(&svg)
    })
}

/// The texts inferno draws for its script (`Search`, `Reset Zoom`, the details and matched
/// lines): without the script they do nothing, so a graph inlined in a page leaves them out.
fn without_controls(svg: &str) -> String {
    let mut s = svg.to_string();
    for id in ["search", "unzoom", "matched", "details"] {
        let open = format!("<text id=\"{id}\"");
        while let Some(i) = s.find(&open) {
            let Some(len) = s[i..].find("</text>") else {
                break;
            };
            s.replace_range(i..i + len + "</text>".len(), "");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_graphs_have_no_dead_controls() {
        let lines = ["a;b;c 10".to_string(), "a;d 5".to_string()];
        let full = flame_svg(&lines, "t", "bytes", true).unwrap();
        assert!(full.contains(">Search<") && full.contains("Reset Zoom"));
        let inline = flame_svg(&lines, "t", "bytes", false).unwrap();
        for dead in [">Search<", "Reset Zoom", "id=\"details\"", "id=\"matched\""] {
            assert!(!inline.contains(dead), "{dead} in {inline}");
        }
        assert!(
            inline.contains(">t<") && inline.contains("<rect"),
            "{inline}"
        );
        let opt = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        roxmltree::Document::parse_with_options(&inline, opt).expect("still XML");
    }

    #[test]
    fn clean_names() {
        assert_eq!(clean("a;b\nc"), "a:b\\nc");
        assert_eq!(clean(""), "?");
    }
}
