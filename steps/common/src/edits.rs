//! Textual edits of a stock kernel, anchored on its lines: the one way the workbook writes "a
//! stock kernel plus a small change". The seeded bugs (the `mutation` module), the cheat suite
//! (`tests/cheats/cheats.toml`), the exercise solutions (`exercises/solutions.toml`) and the
//! bench contenders that vary a step's kernel (`exercises/hopper/*.toml`) are all lists of
//! [`Edit`]s applied by [`apply`], so each stays a few lines against the kernel it changes and
//! follows that kernel's fixes.

use crate::arch::Arch;
use crate::compile::KernelSource;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One edit, at the lines that contain its anchor (and every string of `containing`).
///
/// - `before` / `after` insert `text` (or the named `snippet`) around the anchor line;
/// - `replace` swaps the anchor line for it; with `through`, the lines from the anchor through
///   the next line containing `through` (an empty `text` deletes them);
/// - `replace` with `from` and `to` substitutes inside the line instead, and `replace` with
///   `comment_out` turns the line into a comment tagged `// [<comment_out>]`.
///
/// The anchor must match exactly one line, or `nth` picks one (1-based) of several, or `every`
/// edits all of them (at least one).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub before: Option<String>,
    pub after: Option<String>,
    pub replace: Option<String>,
    /// Further strings the anchor line must contain.
    #[serde(default)]
    pub containing: Vec<String>,
    pub through: Option<String>,
    pub nth: Option<usize>,
    #[serde(default)]
    pub every: bool,
    pub text: Option<String>,
    pub snippet: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub comment_out: Option<String>,
}

/// A file of edits of one step's stock kernel (`exercises/hopper/step4_snake_sm90.toml`): what
/// `runner step N --kernel FILE.toml` and the bench contenders read.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditFile {
    /// The step whose kernel it edits...
    pub step: u32,
    /// ...and which of its two: "blackwell" or "hopper".
    pub arch: String,
    #[serde(default)]
    pub snippets: BTreeMap<String, String>,
    pub edit: Vec<Edit>,
}

/// A kernel written as edits of a stock one (`path`, a `.toml` [`EditFile`] with text
/// `toml_text`): the stock kernel as it is now, which `stock(step, arch)` gives (the ladder's:
/// the checkout's file, so a fix to it counts without a rebuild), with the edits applied.
/// Compiler messages name both files.
pub fn edited_kernel(
    path: &str,
    toml_text: &str,
    stock: impl FnOnce(u32, Arch) -> Result<KernelSource>,
) -> Result<KernelSource> {
    let file: EditFile = toml::from_str(toml_text).with_context(|| path.to_string())?;
    if file.edit.is_empty() {
        // It would run the stock kernel under the file's name.
        bail!(
            "{path} holds no [[edit]]: it does not change step {}'s kernel",
            file.step
        );
    }
    let arch = file.arch().with_context(|| path.to_string())?;
    let base = stock(file.step, arch)?;
    let text = apply(path, &base.text, &file.edit, &file.snippets)?;
    Ok(KernelSource {
        path: format!("{}+{path}", base.path),
        text,
    })
}

impl EditFile {
    pub fn arch(&self) -> Result<Arch> {
        match self.arch.as_str() {
            "blackwell" => Ok(Arch::Blackwell),
            "hopper" => Ok(Arch::Hopper),
            other => bail!("arch must be \"blackwell\" or \"hopper\" (got {other:?})"),
        }
    }
}

/// What an edit does to the lines it selects.
enum Action {
    Insert {
        after: bool,
        body: String,
    },
    Replace {
        through: Option<String>,
        body: String,
    },
    Substitute {
        from: String,
        to: String,
    },
    CommentOut {
        tag: String,
    },
}

impl Edit {
    fn anchor(&self, what: &str) -> Result<&str> {
        match (&self.before, &self.after, &self.replace) {
            (Some(a), None, None) | (None, Some(a), None) | (None, None, Some(a)) => Ok(a),
            _ => bail!("{what}: an edit takes one of before, after, replace"),
        }
    }

    fn action(&self, what: &str, snippets: &BTreeMap<String, String>) -> Result<Action> {
        let body = match (&self.text, &self.snippet) {
            (Some(t), None) => Some(t.clone()),
            (None, Some(s)) => Some(
                snippets
                    .get(s)
                    .cloned()
                    .ok_or_else(|| anyhow!("{what}: no snippet {s:?}"))?,
            ),
            (None, None) => None,
            _ => bail!("{what}: an edit takes text or snippet, not both"),
        };
        let swap = (&self.from, &self.to, &self.comment_out);
        if self.through.is_some() && self.replace.is_none() {
            bail!("{what}: through goes with replace");
        }
        match (self.replace.is_some(), body, swap) {
            (false, Some(body), (None, None, None)) => Ok(Action::Insert {
                after: self.after.is_some(),
                body,
            }),
            (true, Some(body), (None, None, None)) => Ok(Action::Replace {
                through: self.through.clone(),
                body,
            }),
            (true, None, (Some(from), Some(to), None)) if self.through.is_none() => {
                Ok(Action::Substitute {
                    from: from.clone(),
                    to: to.clone(),
                })
            }
            (true, None, (None, None, Some(tag))) if self.through.is_none() => {
                Ok(Action::CommentOut { tag: tag.clone() })
            }
            _ => bail!(
                "{what}: an edit inserts or replaces text (or a snippet), or replaces from with \
                 to, or comments its line out: one of them"
            ),
        }
    }
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
        let anchor = e.anchor(what)?;
        let action = e.action(what, snippets)?;
        let matches = |l: &str| l.contains(anchor) && e.containing.iter().all(|c| l.contains(c));
        let hits: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| matches(l))
            .map(|(i, _)| i)
            .collect();
        let described = if e.containing.is_empty() {
            format!("{anchor:?}")
        } else {
            format!("{anchor:?} with {:?}", e.containing)
        };
        let chosen: Vec<usize> = match (e.every, e.nth, hits.len()) {
            (true, None, n) if n > 0 => hits,
            (false, None, 1) => hits,
            (false, Some(n), len) if n >= 1 && n <= len => vec![hits[n - 1]],
            (_, _, len) => bail!(
                "{what}: the anchor {described} matches {len} lines of the stock kernel{}",
                match (e.every, e.nth) {
                    (true, Some(_)) => ", and every goes without nth".to_string(),
                    (true, None) => String::new(),
                    (false, None) => ", not one".to_string(),
                    (false, Some(n)) => format!(", so there is no {n}th"),
                }
            ),
        };
        // From the last hit back, so earlier indices stay valid while lines are spliced in.
        for &at in chosen.iter().rev() {
            match &action {
                Action::Substitute { from, to } => {
                    if !lines[at].contains(from.as_str()) {
                        bail!("{what}: the line of anchor {described} does not contain {from:?}");
                    }
                    lines[at] = lines[at].replace(from.as_str(), to);
                }
                Action::CommentOut { tag } => {
                    lines[at] = format!("// [{tag}] {}", lines[at].trim_start());
                }
                Action::Insert { after, body } => {
                    let at = at + usize::from(*after);
                    lines.splice(at..at, body_lines(body));
                }
                Action::Replace { through, body } => {
                    let end = match through {
                        None => at,
                        Some(t) => {
                            match lines[at + 1..].iter().position(|l| l.contains(t.as_str())) {
                                Some(i) => at + 1 + i,
                                None => bail!(
                                    "{what}: no line after the anchor {described} contains {t:?}"
                                ),
                            }
                        }
                    };
                    lines.splice(at..=end, body_lines(body));
                }
            }
        }
    }
    Ok(lines.join("\n") + "\n")
}

fn body_lines(body: &str) -> Vec<String> {
    body.trim_matches('\n')
        .lines()
        .map(str::to_string)
        .collect()
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
            ..Edit::default()
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

    #[test]
    fn a_range_is_replaced_through_its_end_anchor() {
        let base = "a\n{\n  x;\n  y;\n}\nz\n";
        let none = BTreeMap::new();
        let mut e = edit("replace", "{", "[]", None);
        e.through = Some("}".into());
        assert_eq!(
            apply("k", base, std::slice::from_ref(&e), &none).unwrap(),
            "a\n[]\nz\n"
        );
        e.text = Some(String::new());
        assert_eq!(
            apply("k", base, std::slice::from_ref(&e), &none).unwrap(),
            "a\nz\n"
        );
        e.through = Some("w".into());
        let err = apply("k", base, &[e], &none).unwrap_err().to_string();
        assert!(err.contains("no line after the anchor"), "{err}");
    }

    #[test]
    fn every_line_can_be_substituted_or_commented_out() {
        let base = "f(a, 1);\nf(b, 1);\ng(a, 1);\n";
        let none = BTreeMap::new();
        let sub = Edit {
            replace: Some("f(".into()),
            containing: vec![", 1".into()],
            every: true,
            from: Some("1".into()),
            to: Some("2".into()),
            ..Edit::default()
        };
        assert_eq!(
            apply("k", base, std::slice::from_ref(&sub), &none).unwrap(),
            "f(a, 2);\nf(b, 2);\ng(a, 1);\n"
        );
        let out = Edit {
            replace: Some("(a".into()),
            every: true,
            comment_out: Some("bug".into()),
            ..Edit::default()
        };
        assert_eq!(
            apply("k", base, &[out], &none).unwrap(),
            "// [bug] f(a, 1);\nf(b, 1);\n// [bug] g(a, 1);\n"
        );
        let nothing = Edit {
            replace: Some("h(".into()),
            ..sub.clone()
        };
        assert!(apply("k", base, &[nothing], &none)
            .unwrap_err()
            .to_string()
            .contains("matches 0 lines"));
        let both = Edit {
            text: Some("x".into()),
            ..sub
        };
        assert!(apply("k", base, &[both], &none).is_err(), "text or from/to");
    }
}
