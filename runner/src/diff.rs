//! `runner diff A B`: a unified diff of two steps' kernels (and host code).

use common::step::Arch;
use common::StepInfo;
use similar::TextDiff;

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

fn one(a_path: &str, a: &str, b_path: &str, b: &str, colored: bool) -> String {
    let diff = TextDiff::from_lines(a, b);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(a_path, b_path)
        .to_string();
    if text.is_empty() {
        return format!("{a_path} and {b_path} are identical\n");
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
