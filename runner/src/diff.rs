//! `runner diff A B`: a unified diff of two steps' kernels (and host code), blind to
//! indentation so that a step which wraps earlier code in a loop shows only what it adds.

use common::step::Arch;
use common::StepInfo;
use similar::{capture_diff_slices_by_key, group_diff_ops, Algorithm, DiffTag};

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// A line as the diff compares it: indentation and runs of spaces do not count, so re-indenting
/// a loop body (as steps 4-6 do when they wrap step 3's code in a tile loop) is not a change.
fn normalized(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A unified diff that ignores whitespace: lines are matched by [`normalized`], context and
/// added lines are printed as they stand in `b`, removed lines as they stood in `a`.
fn unified_ignoring_whitespace(a_path: &str, a: &str, b_path: &str, b: &str) -> String {
    let old: Vec<&str> = a.lines().collect();
    let new: Vec<&str> = b.lines().collect();
    let ops = capture_diff_slices_by_key(Algorithm::Myers, &old, &new, |l| normalized(l));
    let hunks = group_diff_ops(ops, 3);
    if hunks.is_empty() {
        return String::new();
    }
    let mut text = format!("--- {a_path}\n+++ {b_path}\n");
    for hunk in hunks {
        let (Some(first), Some(last)) = (hunk.first(), hunk.last()) else {
            continue;
        };
        let (o0, n0) = (first.old_range().start, first.new_range().start);
        let (o1, n1) = (last.old_range().end, last.new_range().end);
        text.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            o0 + 1,
            o1 - o0,
            n0 + 1,
            n1 - n0
        ));
        for op in &hunk {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            if tag == DiffTag::Equal {
                for line in &new[new_range] {
                    text.push_str(&format!(" {line}\n"));
                }
                continue;
            }
            for line in &old[old_range] {
                text.push_str(&format!("-{line}\n"));
            }
            for line in &new[new_range] {
                text.push_str(&format!("+{line}\n"));
            }
        }
    }
    text
}

fn one(a_path: &str, a: &str, b_path: &str, b: &str, colored: bool) -> String {
    let text = unified_ignoring_whitespace(a_path, a, b_path, b);
    if text.is_empty() {
        return format!("{a_path} and {b_path} are identical (whitespace aside)\n");
    }
    if !colored {
        return text;
    }
    text.lines()
        .map(|l| {
            let color = if l.starts_with("+++") || l.starts_with("---") {
                BOLD
            } else if l.starts_with('+') {
                GREEN
            } else if l.starts_with('-') {
                RED
            } else if l.starts_with("@@") {
                CYAN
            } else {
                ""
            };
            if color.is_empty() {
                format!("{l}\n")
            } else {
                format!("{color}{l}{RESET}\n")
            }
        })
        .collect()
}

/// Step `b`'s `arch` kernel against step `a`'s (and the host code with `host`).
pub fn steps(a: &StepInfo, b: &StepInfo, arch: Arch, host: bool, colored: bool) -> String {
    let mut out = one(
        &a.kernel_path(arch),
        a.kernel(arch).text,
        &b.kernel_path(arch),
        b.kernel(arch).text,
        colored,
    );
    if host {
        out.push_str(&one(
            &a.host_path(),
            a.host,
            &b.host_path(),
            b.host,
            colored,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reindenting_is_not_a_change_but_new_lines_are() {
        let a = "int f() {\n  x();\n  y();\n}\n";
        let b = "int f() {\n  for (;;) {\n    x();\n    y();\n  }\n}\n";
        let d = one("a.cu", a, "b.cu", b, false);
        let changed: Vec<&str> = d
            .lines()
            .filter(|l| (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("+++"))
            .filter(|l| !l.starts_with("---"))
            .collect();
        // Two added lines (which of the two identical closing braces counts as new is the
        // matcher's choice), nothing removed.
        assert_eq!(changed.len(), 2, "{d}");
        assert_eq!(changed[0], "+  for (;;) {", "{d}");
        assert!(changed.iter().all(|l| l.starts_with('+')), "{d}");
        // Context lines show the new indentation.
        assert!(d.contains("\n     x();\n"), "{d}");
        assert!(
            d.starts_with("--- a.cu\n+++ b.cu\n@@ -1,4 +1,6 @@\n"),
            "{d}"
        );
    }

    #[test]
    fn identical_up_to_whitespace_says_so() {
        let d = one("a", "x;\n", "b", "  x;\n", false);
        assert!(d.contains("identical"), "{d}");
    }

    #[test]
    fn a_changed_line_shows_both_versions() {
        let d = one("a", "p;\nq;\nr;\n", "b", "p;\nQ;\nr;\n", false);
        assert!(d.contains("\n-q;\n+Q;\n"), "{d}");
    }
}
