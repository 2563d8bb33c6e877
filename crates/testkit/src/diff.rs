//! What differs between a golden file and the output: a unified line diff when both are
//! text, the first differing byte otherwise.

use std::fmt::Write as _;

/// Unchanged lines shown around each change.
const CONTEXT: usize = 3;
/// Largest table (lines of the file times lines of the output, once their common head and
/// tail are set aside) for a shortest diff; past it the differing middle is shown as
/// removed, then added.
const MAX_CELLS: usize = 4_000_000;
/// Diff lines shown at most; the rest are counted.
const MAX_SHOWN: usize = 200;

/// Describes how `actual` differs from `expected` (which it does).
pub(crate) fn describe(expected: &[u8], actual: &[u8]) -> String {
    match (std::str::from_utf8(expected), std::str::from_utf8(actual)) {
        (Ok(e), Ok(a)) => text_diff(e, a),
        _ => bytes_diff(expected, actual),
    }
}

/// One step of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The next line of both.
    Same,
    /// The next line of the file, not in the output.
    Del,
    /// The next line of the output, not in the file.
    Add,
}

/// A shortest edit script turning `e` into `a` (longest common subsequence), or a plain
/// one when the lines left after the common head and tail are too many.
fn edit_script(e: &[&str], a: &[&str]) -> Vec<Op> {
    let head = e.iter().zip(a).take_while(|(x, y)| x == y).count();
    let tail = e[head..]
        .iter()
        .rev()
        .zip(a[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (em, am) = (&e[head..e.len() - tail], &a[head..a.len() - tail]);
    let mut ops = vec![Op::Same; head];
    let (n, m) = (em.len(), am.len());
    if n.saturating_mul(m) <= MAX_CELLS {
        // lcs[i * (m + 1) + j]: length of the longest common subsequence of em[i..], am[j..].
        let w = m + 1;
        let mut lcs = vec![0u32; (n + 1) * w];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i * w + j] = if em[i] == am[j] {
                    lcs[(i + 1) * w + j + 1] + 1
                } else {
                    lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && em[i] == am[j] {
                ops.push(Op::Same);
                i += 1;
                j += 1;
            } else if j == m || (i < n && lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
                ops.push(Op::Del);
                i += 1;
            } else {
                ops.push(Op::Add);
                j += 1;
            }
        }
    } else {
        ops.extend(std::iter::repeat_n(Op::Del, n));
        ops.extend(std::iter::repeat_n(Op::Add, m));
    }
    ops.extend(std::iter::repeat_n(Op::Same, tail));
    ops
}

/// A line as shown after its `-`, `+` or ` ` mark.
fn show(out: &mut Vec<String>, mark: char, line: &str) {
    match line.strip_suffix('\n') {
        Some(l) => out.push(format!("{mark}{l}")),
        None => {
            out.push(format!("{mark}{line}"));
            out.push("\\ No newline at end of file".to_string());
        }
    }
}

/// A unified diff (file `-`, output `+`) with [`CONTEXT`] lines around each change.
fn text_diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split_inclusive('\n').collect();
    let a: Vec<&str> = actual.split_inclusive('\n').collect();
    let ops = edit_script(&e, &a);
    // Position in the file and in the output before each op.
    let mut at = Vec::with_capacity(ops.len() + 1);
    let (mut i, mut j) = (0usize, 0usize);
    for op in &ops {
        at.push((i, j));
        match op {
            Op::Same => (i, j) = (i + 1, j + 1),
            Op::Del => i += 1,
            Op::Add => j += 1,
        }
    }
    at.push((i, j));
    let changes: Vec<usize> = (0..ops.len()).filter(|&k| ops[k] != Op::Same).collect();
    let mut lines = vec!["--- golden file".to_string(), "+++ output".to_string()];
    let mut k = 0;
    while k < changes.len() {
        // One hunk: changes whose unchanged gaps are short enough to show whole.
        let mut last = k;
        while last + 1 < changes.len() && changes[last + 1] - changes[last] <= 2 * CONTEXT + 1 {
            last += 1;
        }
        let from = changes[k].saturating_sub(CONTEXT);
        let to = (changes[last] + 1 + CONTEXT).min(ops.len());
        let ((e0, a0), (e1, a1)) = (at[from], at[to]);
        // Unified diff numbers lines from 1; an empty range names the line before it.
        let start = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
        lines.push(format!(
            "@@ -{},{} +{},{} @@",
            start(e0, e1 - e0),
            e1 - e0,
            start(a0, a1 - a0),
            a1 - a0
        ));
        for (op, &(i, j)) in ops[from..to].iter().zip(&at[from..to]) {
            match op {
                Op::Same => show(&mut lines, ' ', e[i]),
                Op::Del => show(&mut lines, '-', e[i]),
                Op::Add => show(&mut lines, '+', a[j]),
            }
        }
        k = last + 1;
    }
    let mut out = String::new();
    for l in lines.iter().take(MAX_SHOWN) {
        out.push_str(l);
        out.push('\n');
    }
    if lines.len() > MAX_SHOWN {
        let _ = writeln!(out, "... {} more lines of diff", lines.len() - MAX_SHOWN);
    }
    out
}

/// Up to 16 bytes from `at` in hex, or a note that the data ends before.
fn hex_row(b: &[u8], at: usize) -> String {
    if at >= b.len() {
        return "(ends here)".to_string();
    }
    let mut s = String::new();
    for x in &b[at..(at + 16).min(b.len())] {
        let _ = write!(s, "{x:02x} ");
    }
    s.pop();
    s
}

/// Sizes and the first differing byte, with the 16-byte rows of both from there.
fn bytes_diff(expected: &[u8], actual: &[u8]) -> String {
    let first = expected
        .iter()
        .zip(actual)
        .position(|(x, y)| x != y)
        .unwrap_or(expected.len().min(actual.len()));
    format!(
        "binary contents differ: the golden file has {} bytes, the output {}; first \
         difference at byte {first}:\n  golden file: {}\n  output:      {}\n",
        expected.len(),
        actual.len(),
        hex_row(expected, first),
        hex_row(actual, first)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(e: &str, a: &str) -> String {
        describe(e.as_bytes(), a.as_bytes())
    }

    #[test]
    fn one_changed_line_with_context() {
        let e = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let a = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            diff(e, a),
            "--- golden file\n+++ output\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn far_apart_changes_make_two_hunks_near_ones_one() {
        let e: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let two = e.replace("\n2\n", "\nB\n").replace("\n18\n", "\nR\n");
        let d = diff(&e, &two);
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,5 @@\n 1\n-2\n+B\n 3\n"), "{d}");
        assert!(d.contains("@@ -15,6 +15,6 @@\n"), "{d}");
        let one = e.replace("\n2\n", "\nB\n").replace("\n9\n", "\nN\n");
        assert_eq!(diff(&e, &one).matches("@@ -").count(), 1);
    }

    #[test]
    fn insertions_deletions_and_the_last_newline() {
        assert_eq!(
            diff("a\nb\n", "a\nx\nb\n"),
            "--- golden file\n+++ output\n@@ -1,2 +1,3 @@\n a\n+x\n b\n"
        );
        assert_eq!(
            diff("a\nb\nc\n", "a\nc\n"),
            "--- golden file\n+++ output\n@@ -1,3 +1,2 @@\n a\n-b\n c\n"
        );
        assert_eq!(
            diff("a\n", "a"),
            "--- golden file\n+++ output\n@@ -1,1 +1,1 @@\n-a\n+a\n\\ No newline at end of file\n"
        );
        assert_eq!(
            diff("", "new\n"),
            "--- golden file\n+++ output\n@@ -0,0 +1,1 @@\n+new\n"
        );
    }

    #[test]
    fn a_shortest_script() {
        // "b" and "d" kept; a longest common subsequence, not a replacement of everything.
        let ops = edit_script(&["a", "b", "c", "d"], &["b", "x", "d", "e"]);
        use Op::*;
        assert_eq!(ops, [Del, Same, Del, Add, Same, Add]);
    }

    #[test]
    fn long_diffs_are_cut() {
        let e: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let a: String = (0..1000).map(|i| format!("x{i}\n")).collect();
        let d = diff(&e, &a);
        assert_eq!(d.lines().count(), MAX_SHOWN + 1);
        // 2 header lines, one hunk header, 1000 removed, 1000 added.
        assert!(d.ends_with(&format!("... {} more lines of diff\n", 2003 - MAX_SHOWN)));
    }

    #[test]
    fn binary_data_shows_the_first_differing_byte() {
        let e: Vec<u8> = (0x80..0xa8).collect();
        let mut a = e.clone();
        a[20] = 0xff;
        assert_eq!(
            describe(&[0xff, 0xfe, 1], &[0xff, 0xfe, 2, 3]),
            "binary contents differ: the golden file has 3 bytes, the output 4; first \
             difference at byte 2:\n  golden file: 01\n  output:      02 03\n"
        );
        let d = describe(&[0x80; 4], &[0x80; 2]);
        assert!(d.contains("first difference at byte 2:"), "{d}");
        assert!(d.contains("output:      (ends here)"), "{d}");
        let d = describe(&e, &a);
        assert!(d.contains("golden file: 94 95 96"), "{d}");
        assert!(d.contains("output:      ff 95 96"), "{d}");
    }
}
