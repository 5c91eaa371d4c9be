//! How long a chapter's prose is: its words and its sentences, as a reader meets them. Code
//! blocks, tables, headings, HTML lines and generated markers (`{{#...}}`) are not prose. A step
//! chapter holds about 1,500 to 2,500 words of prose and no sentence longer than
//! [`MAX_SENTENCE_WORDS`]; the tests below hold every step chapter to that.

/// The most words of prose in a step chapter.
pub const MAX_CHAPTER_WORDS: usize = 2500;
/// The most words in one sentence of a step chapter (a marker counts as one word).
pub const MAX_SENTENCE_WORDS: usize = 40;

/// The prose paragraphs of `md`, with the line each starts on; a list item is a paragraph of
/// its own, and each marker is replaced by one placeholder word.
fn paragraphs(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    let mut code = false;
    let mut flush = |cur: &mut String, start: usize| {
        if !cur.trim().is_empty() {
            out.push((start, std::mem::take(cur)));
        }
        cur.clear();
    };
    for (i, line) in md.lines().enumerate() {
        let s = line.trim();
        if s.starts_with("```") {
            code = !code;
            flush(&mut cur, start);
            continue;
        }
        if code {
            continue;
        }
        if s.is_empty() || s.starts_with('|') || s.starts_with('#') || s.starts_with('<') {
            flush(&mut cur, start);
            continue;
        }
        let item = s.starts_with("- ")
            || s.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if item {
            flush(&mut cur, start);
        }
        if cur.is_empty() {
            start = i + 1;
        }
        cur.push(' ');
        cur.push_str(s.trim_start_matches('>').trim());
    }
    flush(&mut cur, start);
    out.into_iter()
        .map(|(n, p)| (n, without_markers(&p)))
        .collect()
}

/// `{{#name args}}` replaced by one word.
fn without_markers(p: &str) -> String {
    let mut out = String::new();
    let mut rest = p;
    while let Some(i) = rest.find("{{#") {
        out.push_str(&rest[..i]);
        match rest[i..].find("}}") {
            Some(j) => {
                out.push_str("MARKER");
                rest = &rest[i + j + 2..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A word: a run between spaces holding a letter or a digit (so "—" and "→" are not words).
fn words(s: &str) -> usize {
    s.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// Words of prose in `md`, markers not counted.
pub fn prose_words(md: &str) -> usize {
    paragraphs(md)
        .iter()
        .map(|(_, p)| words(&p.replace("MARKER", "")))
        .sum()
}

/// The sentences of `md` longer than `limit` words, each as `line: words: sentence`.
pub fn long_sentences(md: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (line, p) in paragraphs(md) {
        let mut cur = String::new();
        let chars: Vec<char> = p.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            cur.push(c);
            let end = matches!(c, '.' | '?' | '!') && chars.get(i + 1).is_none_or(|n| *n == ' ');
            if end || i + 1 == chars.len() {
                let n = words(&cur);
                if n > limit {
                    out.push(format!("{line}: {n} words: {}", cur.trim()));
                }
                cur.clear();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_leaves_out_code_tables_headings_and_markers() {
        let md = "# Title words here\n\nOne two three.\n\n```cpp\nint a = 1;\n```\n\n| a | b |\n|---|---|\n\n{{#bench step 1}}\n\n- Four five {{#claim 1 0 4096x8192x4096 f16 faster}} six.\n<details>\n";
        assert_eq!(prose_words(md), 6);
        let long = format!(
            "{}.\n\nShort one. {} end.\n",
            "w ".repeat(41).trim(),
            "x ".repeat(10)
        );
        let found = long_sentences(&long, 40);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("1: 41 words"), "{found:?}");
        // A list item ends its sentence even without a full stop.
        let items = format!("- {}\n- {}\n", "a ".repeat(30), "b ".repeat(30));
        assert!(long_sentences(&items, 40).is_empty());
    }

    #[test]
    fn every_step_chapter_is_short_and_so_are_its_sentences() {
        let root = common::toolkit::project_root();
        for n in 0..=6 {
            let path = root.join(format!("book/src/step{n}.md"));
            let md = std::fs::read_to_string(&path).unwrap();
            let w = prose_words(&md);
            assert!(
                w <= MAX_CHAPTER_WORDS,
                "book/src/step{n}.md has {w} words of prose, more than {MAX_CHAPTER_WORDS}: move apparatus out or cut"
            );
            let long = long_sentences(&md, MAX_SENTENCE_WORDS);
            assert!(
                long.is_empty(),
                "book/src/step{n}.md has sentences over {MAX_SENTENCE_WORDS} words:\n{}",
                long.join("\n")
            );
        }
    }
}
