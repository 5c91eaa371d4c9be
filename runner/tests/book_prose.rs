//! The book's prose stays readable: sentences of at most about 30 words (issue 21, item 7). A
//! sentence over [`LONG`] words is flagged, in every chapter: none may hold one.
//!
//! What counts as prose: paragraphs and list items of `book/src/*.md`, outside code fences,
//! tables, headings, HTML and the workbook's `{{#markers}}`. Inline code counts as one word, a
//! link as its text. A sentence ends at `.`, `?` or `!` followed by a space; `:` and `;` end one
//! too when a capital, a backtick or a quote follows, because they join clauses that stand alone.
//!
//! And the step chapters stay short (issue 31, item 8): at most [`MAX_STEP_WORDS`] words of prose
//! each, counted the same way (markers not at all).

use std::path::PathBuf;

/// Words over which a sentence is flagged: the item asks for "about 30", and 40 leaves room for
/// a sentence that names a few identifiers or numbers without flagging it.
const LONG: usize = 40;

/// The most words of prose in a step chapter: the item asks for about 1,500 to 2,500.
const MAX_STEP_WORDS: usize = 2500;

fn chapters() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../book/src");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("book/src")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

/// The prose paragraphs of a chapter, each joined into one line.
fn paragraphs(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut fence = false;
    let flush = |cur: &mut Vec<String>, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(cur.join(" "));
            cur.clear();
        }
    };
    for line in md.lines() {
        let mut s = line.trim();
        if s.starts_with("```") {
            fence = !fence;
            flush(&mut cur, &mut out);
            continue;
        }
        if fence {
            continue;
        }
        if s.is_empty()
            || s.starts_with('|')
            || s.starts_with('#')
            || s.starts_with("{{#")
            || s.starts_with('<')
            || s.starts_with("![")
        {
            flush(&mut cur, &mut out);
            continue;
        }
        s = s.trim_start_matches('>').trim_start();
        // A list item starts a paragraph of its own.
        let item = s
            .strip_prefix("- ")
            .or_else(|| s.strip_prefix("* "))
            .or_else(|| {
                let (d, rest) = s.split_once(". ")?;
                d.parse::<u32>().ok().map(|_| rest)
            });
        if let Some(rest) = item {
            flush(&mut cur, &mut out);
            s = rest;
        }
        cur.push(s.to_string());
    }
    flush(&mut cur, &mut out);
    out
}

/// `text` with inline code as one word `X`, links as their text and markers as one word.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '`' {
            if let Some(end) = rest[1..].find('`') {
                out.push('X');
                rest = &rest[end + 2..];
                continue;
            }
        }
        if rest.starts_with("](") {
            if let Some(end) = rest.find(')') {
                out.push(']');
                rest = &rest[end + 1..];
                continue;
            }
        }
        if rest.starts_with("{{#") {
            if let Some(end) = rest.find("}}") {
                out.push('N');
                rest = &rest[end + 2..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The sentences of a paragraph.
fn sentences(p: &str) -> Vec<String> {
    let words: Vec<&str> = p.split_whitespace().collect();
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        cur.push(w);
        let next = words.get(i + 1).and_then(|n| n.chars().next());
        let ends = w.ends_with('.') || w.ends_with('?') || w.ends_with('!');
        let joins = (w.ends_with(':') || w.ends_with(';'))
            && next.is_some_and(|c| c.is_uppercase() || c == 'X' || c == '"' || c == '*');
        // "e.g." and "i.e." end no sentence.
        let abbrev = w.ends_with("e.g.") || w.ends_with("i.e.") || w.ends_with("vs.");
        if (ends && !abbrev) || joins {
            out.push(cur.join(" "));
            cur.clear();
        }
    }
    if !cur.is_empty() {
        out.push(cur.join(" "));
    }
    out
}

fn long_sentences(md: &str) -> Vec<String> {
    paragraphs(md)
        .iter()
        .flat_map(|p| sentences(&plain(p)))
        .filter(|s| s.split_whitespace().count() > LONG)
        .collect()
}

#[test]
fn the_check_splits_sentences_and_skips_code_and_tables() {
    let md = "One two three. Four five: Six seven.\n\n```text\nnot prose at all\n```\n| a | b |\n\
              - an item with `some code here` and [a link](https://x.y/z).\n";
    let ps = paragraphs(md);
    assert_eq!(ps.len(), 2, "{ps:?}");
    assert_eq!(
        sentences(&plain(&ps[0])),
        ["One two three.", "Four five:", "Six seven."]
    );
    assert_eq!(plain(&ps[1]), "an item with X and [a link].");
    let long = format!("{}.", vec!["word"; LONG + 1].join(" "));
    assert_eq!(long_sentences(&long).len(), 1);
    assert!(long_sentences(&format!("{}.", vec!["word"; LONG].join(" "))).is_empty());
}

#[test]
fn sentences_stay_short() {
    let mut long = Vec::new();
    for path in chapters() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let md = std::fs::read_to_string(&path).expect("chapter");
        long.extend(
            long_sentences(&md)
                .into_iter()
                .map(|s| format!("{name}: {s}")),
        );
    }
    assert!(
        long.is_empty(),
        "{} sentences over {LONG} words: shorten them:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// Words of prose in a chapter: inline code one word, a link its text, a marker none.
fn prose_words(md: &str) -> usize {
    paragraphs(md)
        .iter()
        .map(|p| {
            plain(p)
                .split_whitespace()
                .filter(|w| *w != "N" && w.chars().any(char::is_alphanumeric))
                .count()
        })
        .sum()
}

#[test]
fn the_word_count_leaves_out_code_tables_headings_and_markers() {
    let md = "# Title words here\n\nOne two `three four`.\n\n```cpp\nint a = 1;\n```\n\n| a | b |\n\
              |---|---|\n\n{{#bench step 1}}\n\n- Four five {{#claim 1 0 4096x8192x4096 f16 faster}} — six.\n";
    assert_eq!(prose_words(md), 6);
}

#[test]
fn step_chapters_stay_short() {
    let mut over = Vec::new();
    for path in chapters() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if !(name.starts_with("step") && name.ends_with(".md")) {
            continue;
        }
        let words = prose_words(&std::fs::read_to_string(&path).expect("chapter"));
        if words > MAX_STEP_WORDS {
            over.push(format!("{name}: {words} words"));
        }
    }
    assert!(
        over.is_empty(),
        "step chapters over {MAX_STEP_WORDS} words of prose (move apparatus out, or cut):\n{}",
        over.join("\n")
    );
}
