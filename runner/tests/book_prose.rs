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

/// The most pages, and words of prose in them, a reader meets before step 0 (issue 40, item 6).
const MAX_PAGES_BEFORE_STEP0: usize = 2;
const MAX_WORDS_BEFORE_STEP0: usize = 1200;

/// The chapter files of `SUMMARY.md`, in its order.
fn summary_pages() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../book/src");
    let summary = std::fs::read_to_string(dir.join("SUMMARY.md")).expect("SUMMARY.md");
    summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_path_to_step_0_is_short() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../book/src");
    let pages = summary_pages();
    let before: Vec<&String> = pages.iter().take_while(|p| *p != "step0.md").collect();
    assert!(
        before.len() < pages.len(),
        "step0.md is in SUMMARY.md: {pages:?}"
    );
    let words: Vec<(String, usize)> = before
        .iter()
        .map(|p| {
            let md = std::fs::read_to_string(dir.join(p)).expect("chapter");
            (p.to_string(), prose_words(&md))
        })
        .collect();
    let total: usize = words.iter().map(|(_, w)| w).sum();
    assert!(
        before.len() <= MAX_PAGES_BEFORE_STEP0 && total <= MAX_WORDS_BEFORE_STEP0,
        "before step 0: {} pages and {total} words of prose (at most {MAX_PAGES_BEFORE_STEP0} \
         and {MAX_WORDS_BEFORE_STEP0}): {words:?}",
        before.len()
    );
}

/// Issue 40, item 2: no number typed into prose. A number in a chapter's prose (paragraphs and
/// list items; not code, tables, headings or markers) must be one of:
/// - a reference: a step, chapter, exercise, section or item number ("steps 3–6", "exercise 0.1");
/// - part of a name (`B200`, `sm_100a`, `tcgen05`, `f16`, "128-byte", "2-CTA"): a token with a letter;
/// - a power of two or a number up to 10: sizes and counts the ISA and the kernels' configuration
///   state (lanes, columns, bytes, elements, stages), which the code and its tests check;
/// - in a sentence that cites its source: a link, a backticked file path, or a PTX ISA section;
/// - one of [`ALLOWED`], each with its reason.
///
/// Everything else, a measured time, a percentage, a TFLOP/s, comes from a `{{#marker}}` over
/// committed data, or goes.
const ALLOWED: &[(&str, &str, &str)] = &[
    // (chapter, number, why it may be typed)
    ("*", "1.89", "the Rust version the workspace's `rust-version` states (book_refs checks it)"),
    ("*", "0b001", "the PTX ISA's fixed descriptor version field"),
    ("*", "255", "the most registers a thread may have (CUDA Programming Guide)"),
    ("*", "95", "the confidence level of the book's intervals: a parameter of the rule, not a measurement"),
    ("step2.md", "232,448", "the opt-in shared-memory limit of a CTA, CUDA Programming Guide (named in the sentence)"),
    ("step2.md", "227", "the same limit in KiB"),
    ("step3.md", "1.5", "step 3's intensity over step 2's, {{#budget-value 3 intensity}} over {{#budget-value 2 intensity}}, held by common::model::budget's test the_pair_shares_b_and_gains_half_again_in_intensity"),
];

/// Words after which a number is a reference, not a quantity.
const REFERENCE_WORDS: &[&str] = &[
    "step",
    "steps",
    "chapter",
    "chapters",
    "exercise",
    "exercises",
    "item",
    "items",
    "section",
    "sections",
    "issue",
    "phase",
    "phases",
    "round",
    "rank",
    "warp",
    "warps",
    "slot",
    "k-block",
    "stage",
    "column",
    "lane",
    "lanes",
    "group",
    "exit",
    "exits",
    "status",
];

/// Joiners inside a list of references ("steps 0, 1 and 3", "steps 0 to 4").
const JOINERS: &[&str] = &["and", "or", "to", "through", "–", "-", "/"];

fn is_number(tok: &str) -> bool {
    let t = tok.trim_matches(|c: char| !c.is_alphanumeric());
    t.chars().any(|c| c.is_ascii_digit()) && !t.chars().any(|c| c.is_alphabetic())
}

fn number_value(tok: &str) -> Option<f64> {
    tok.trim_matches(|c: char| !c.is_ascii_digit())
        .replace(',', "")
        .parse::<f64>()
        .ok()
}

fn sentence_cites(raw: &str) -> bool {
    raw.contains("](")
        || raw.contains('§')
        || raw.split('`').skip(1).step_by(2).any(|code| {
            code.contains('/')
                || code.contains("::")
                || [
                    ".md", ".json", ".txt", ".tsv", ".svg", ".cu", ".cuh", ".rs", ".toml",
                ]
                .iter()
                .any(|e| code.ends_with(e))
        })
}

/// The arguments of the sentence's markers: a number a marker is given is the marker's.
fn marker_args(raw: &str) -> Vec<String> {
    raw.split("{{#")
        .skip(1)
        .filter_map(|m| m.split("}}").next())
        .flat_map(|m| {
            m.split(|c: char| c.is_whitespace() || c == 'x')
                .map(str::to_string)
        })
        .collect()
}

/// The typed numbers of one sentence (its raw markdown) that nothing backs.
fn unbacked_numbers(chapter: &str, raw: &str) -> Vec<String> {
    if sentence_cites(raw) {
        return Vec::new();
    }
    let args = marker_args(raw);
    let text = plain(raw);
    // Ranges and lists split into their numbers: "3–6" and "0/1" are two.
    let spaced = text.replace(['–', '/', '×', '(', ')', '='], " $0 ");
    let toks: Vec<&str> = spaced.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, tok) in toks.iter().enumerate() {
        if !is_number(tok) {
            continue;
        }
        let bare = tok.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != ',');
        let bare = bare.trim_end_matches(['.', ',']);
        if args.iter().any(|a| a == bare.trim_end_matches('³')) {
            continue;
        }
        if ALLOWED
            .iter()
            .any(|(c, n, _)| (*c == "*" || *c == chapter) && *n == bare)
        {
            continue;
        }
        if let Some(v) = number_value(bare) {
            let int = v.fract() == 0.0 && !bare.contains('.');
            if int && (v <= 10.0 || (v as u64).is_power_of_two()) {
                continue;
            }
        }
        // Walk back over numbers and joiners to the word that says what they count.
        let mut j = i;
        let mut reference = false;
        while j > 0 {
            j -= 1;
            let w = toks[j]
                .trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '–')
                .to_lowercase();
            let w = w.trim_end_matches("'s").to_string();
            if is_number(toks[j]) || JOINERS.contains(&w.as_str()) || w.is_empty() {
                continue;
            }
            reference = REFERENCE_WORDS.contains(&w.as_str());
            break;
        }
        if !reference {
            out.push(bare.to_string());
        }
    }
    out
}

fn typed_numbers(chapter: &str, md: &str) -> Vec<String> {
    paragraphs(md)
        .iter()
        // A paragraph about an outside source, linked in it, cites its figures in every sentence.
        .filter(|p| !p.contains("](http"))
        .flat_map(|p| sentences(p))
        .flat_map(|s| {
            unbacked_numbers(chapter, &s)
                .into_iter()
                .map(move |n| format!("{chapter}: {n}  in: {s}"))
        })
        .collect()
}

#[test]
fn the_number_check_tells_a_typed_figure_from_a_backed_one() {
    // Typed measurements are caught.
    assert_eq!(typed_numbers("x", "Step 1 runs at 574 TFLOP/s.").len(), 1);
    assert_eq!(
        typed_numbers("x", "The spread is up to 12 % of its median.").len(),
        1
    );
    // References, names, sizes and cited figures are not.
    for ok in [
        "Steps 3–6 and exercise 0.1 use it.",
        "A B200 runs `sm_100a` code with tcgen05 and f16 inputs.",
        "One k-block of A is 128 × 64 (16 KiB) with 4 stages.",
        "It measured 1400 TFLOP/s ([the notebook](https://example.com)).",
        "The record says 284 of 284 (`assets/results/sim-agree-h200-2026-11-28/README.md`).",
        "One k-block takes {{#budget-value 0 kblock_ns}} at peak.",
        "At 1280³ f16 it is {{#heatmap-claim 1 0 1280x1280x1280 f16 slower}}.",
        "- [A guide](https://example.com): 37.62 % utilization. It reached 69.44 %.",
        "Lanes follow `warp % 4`: warp 5 reads lanes 32–63.",
    ] {
        assert!(
            typed_numbers("x", ok).is_empty(),
            "{ok}: {:?}",
            typed_numbers("x", ok)
        );
    }
}

#[test]
fn no_number_is_typed_into_prose() {
    let mut found = Vec::new();
    for path in chapters() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        // The changelog is history, told with the numbers of its day; further reading is a list
        // of outside sources, each entry linked at its head, its figures theirs.
        if name == "changelog.md" || name == "SUMMARY.md" || name == "further-reading.md" {
            continue;
        }
        let md = std::fs::read_to_string(&path).expect("chapter");
        found.extend(typed_numbers(&name, &md));
    }
    assert!(
        found.is_empty(),
        "{} typed numbers no marker or citation backs (generate them with a marker over \
         committed data, cite their source, or drop them):\n{}",
        found.len(),
        found.join("\n")
    );
}
