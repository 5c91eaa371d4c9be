//! Textual edits of a stock kernel, anchored on its lines: how the cheat suite
//! (`tests/cheats/cheats.toml`) and the exercise solutions (`exercises/solutions.toml`) are
//! written, so that each stays a few lines against the kernel it changes.

use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One edit: `before`/`after` insert `text` (or the named `snippet`) around the anchor line,
/// `replace` swaps the anchor line for it. The anchor must match exactly one line, or `nth`
/// picks one (1-based) of several.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub before: Option<String>,
    pub after: Option<String>,
    pub replace: Option<String>,
    pub nth: Option<usize>,
    pub text: Option<String>,
    pub snippet: Option<String>,
}

/// `base` with `edits` applied in order; `what` names the edited kernel in errors.
pub fn apply(
    what: &str,
    base: &str,
    edits: &[Edit],
    snippets: &BTreeMap<String, String>,
) -> Result<String> {
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    for e in edits {
        let body = match (&e.text, &e.snippet) {
            (Some(t), None) => t.clone(),
            (None, Some(s)) => snippets
                .get(s)
                .cloned()
                .ok_or_else(|| anyhow!("{what}: no snippet {s:?}"))?,
            _ => bail!("{what}: an edit takes text or snippet"),
        };
        let (anchor, mode) = match (&e.before, &e.after, &e.replace) {
            (Some(a), None, None) => (a, 0),
            (None, Some(a), None) => (a, 1),
            (None, None, Some(a)) => (a, 2),
            _ => bail!("{what}: an edit takes one of before, after, replace"),
        };
        let hits: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(anchor.as_str()))
            .map(|(i, _)| i)
            .collect();
        let at = match (e.nth, hits.len()) {
            (None, 1) => hits[0],
            (Some(n), len) if n >= 1 && n <= len => hits[n - 1],
            (_, len) => bail!(
                "{what}: the anchor {anchor:?} matches {len} lines of the stock kernel{}",
                e.nth.map_or(", not one".to_string(), |n| format!(
                    ", so there is no {n}th"
                ))
            ),
        };
        let new: Vec<String> = body
            .trim_matches('\n')
            .lines()
            .map(str::to_string)
            .collect();
        let range = match mode {
            0 => at..at,
            1 => at + 1..at + 1,
            _ => at..at + 1,
        };
        lines.splice(range, new);
    }
    Ok(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(kind: &str, anchor: &str, text: &str, nth: Option<usize>) -> Edit {
        let a = Some(anchor.to_string());
        Edit {
            before: (kind == "before").then(|| a.clone()).flatten(),
            after: (kind == "after").then(|| a.clone()).flatten(),
            replace: (kind == "replace").then(|| a.clone()).flatten(),
            nth,
            text: Some(text.into()),
            snippet: None,
        }
    }

    #[test]
    fn edits_insert_and_replace_at_their_anchor() {
        let base = "a\nb\nc\nb\n";
        let none = BTreeMap::new();
        let out = apply("k", base, &[edit("before", "a", "0", None)], &none).unwrap();
        assert_eq!(out, "0\na\nb\nc\nb\n");
        let out = apply("k", base, &[edit("after", "c", "\nx\ny\n", None)], &none).unwrap();
        assert_eq!(out, "a\nb\nc\nx\ny\nb\n");
        let out = apply("k", base, &[edit("replace", "b", "B", Some(2))], &none).unwrap();
        assert_eq!(out, "a\nb\nc\nB\n");
        let e = apply("k", base, &[edit("replace", "b", "B", None)], &none).unwrap_err();
        assert!(e.to_string().contains("matches 2 lines"), "{e}");
        assert!(apply("k", base, &[edit("replace", "z", "Z", None)], &none).is_err());
        assert!(apply("k", base, &[edit("replace", "b", "B", Some(3))], &none).is_err());
    }
}
