//! Markdown for the terminal (`runner explain`, `runner budget`, `runner glossary`). On a
//! terminal, [`show`] renders with termimad and pages long chapters; to pipes and files it prints
//! the plain rendering below, whose paragraphs
//! reflowed to the width (the source's line breaks are not the reader's), code kept verbatim,
//! tables laid out in columns and folded when long, figures shown as their caption and path. ANSI
//! styling only when stdout is a terminal and `NO_COLOR` is unset; otherwise plain text.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use std::io::IsTerminal;
use textwrap::core::display_width;

/// Greedy filling, the way a reader expects a reflowed paragraph to look, and breaks only at
/// spaces (`k-block` and `32-bit` stay whole).
fn wrap_options<'a>(width: usize) -> textwrap::Options<'a> {
    textwrap::Options::new(width)
        .wrap_algorithm(textwrap::WrapAlgorithm::FirstFit)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
}

/// Tables with more body rows than this are folded unless `full`.
pub const FOLD_ROWS: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Columns to fill.
    pub width: usize,
    /// ANSI colours and weights.
    pub color: bool,
    /// Print long tables whole.
    pub full: bool,
}

impl Style {
    /// What stdout can take: its width if it is a terminal (else `COLUMNS`, else 80), colour only
    /// on a terminal and never with `NO_COLOR` set (<https://no-color.org>).
    pub fn for_stdout(full: bool) -> Style {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let width = terminal_size::terminal_size()
            .filter(|_| tty)
            .map(|(w, _)| usize::from(w.0))
            .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
            .unwrap_or(80)
            .clamp(40, 120);
        Style {
            width,
            color: tty && !no_color,
            full,
        }
    }
}

const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const CYAN: &str = "\x1b[36m";
const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

enum Block {
    Quote,
    List {
        next: Option<u64>,
    },
    /// A list item, indented by the width of its bullet and a space.
    Item(usize),
}

struct Table {
    align: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    cell: String,
    row: Vec<String>,
}

struct Renderer<'s> {
    style: &'s Style,
    out: String,
    inline: String,
    /// Open inline styles, re-applied after a reset inside them.
    styles: Vec<&'static str>,
    blocks: Vec<Block>,
    /// The bullet of the list item whose first paragraph is pending.
    bullet: Option<String>,
    code: Option<(String, String)>,
    table: Option<Table>,
    heading: Option<HeadingLevel>,
    image: Option<String>,
    link: Option<String>,
}

impl Renderer<'_> {
    fn paint(&self, code: &'static str, text: &str) -> String {
        if self.style.color {
            format!("{code}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    fn push_style(&mut self, code: &'static str) {
        if self.style.color {
            self.styles.push(code);
            self.inline.push_str(code);
        }
    }

    fn pop_style(&mut self) {
        if self.style.color && self.styles.pop().is_some() {
            self.inline.push_str(RESET);
            let rest: String = self.styles.concat();
            self.inline.push_str(&rest);
        }
    }

    fn text(&mut self, t: &str) {
        if let Some(table) = &mut self.table {
            table.cell.push_str(t);
        } else if let Some(alt) = &mut self.image {
            alt.push_str(t);
        } else if let Some((_, body)) = &mut self.code {
            body.push_str(t);
        } else {
            self.inline.push_str(t);
        }
    }

    /// The prefix of the lines of the current block: quote bars and list indents.
    fn indent(&self) -> (String, String) {
        let mut first = String::new();
        let mut rest = String::new();
        for b in &self.blocks {
            match b {
                Block::Quote => {
                    let bar = if self.style.color { "│ " } else { "> " };
                    first.push_str(bar);
                    rest.push_str(bar);
                }
                Block::Item(w) => {
                    first.push_str(&" ".repeat(*w));
                    rest.push_str(&" ".repeat(*w));
                }
                Block::List { .. } => {}
            }
        }
        // The innermost item's bullet hangs in its own indent.
        if let Some(b) = &self.bullet {
            let pad = first.len().saturating_sub(display_width(b) + 1);
            first.truncate(pad);
            first.push_str(b);
            first.push(' ');
        }
        (first, rest)
    }

    fn blank_line(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            if !self.out.ends_with('\n') {
                self.out.push('\n');
            }
            let (_, rest) = self.indent();
            let bar = rest.trim_end();
            self.out.push_str(bar);
            self.out.push('\n');
        }
    }

    fn flush_paragraph(&mut self) {
        let text = std::mem::take(&mut self.inline);
        self.styles.clear();
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let (first, rest) = self.indent();
        self.bullet = None;
        let opts = wrap_options(self.style.width)
            .initial_indent(&first)
            .subsequent_indent(&rest);
        for line in textwrap::wrap(text, opts) {
            self.out.push_str(line.trim_end());
            self.out.push('\n');
        }
    }

    fn heading(&mut self, level: HeadingLevel) {
        let text = std::mem::take(&mut self.inline);
        let text = text.trim();
        self.blank_line();
        let w = display_width(text).min(self.style.width);
        match level {
            HeadingLevel::H1 => {
                self.out
                    .push_str(&format!("{}\n", self.paint(BOLD, &text.to_uppercase())));
                self.out.push_str(&format!("{}\n", "═".repeat(w)));
            }
            HeadingLevel::H2 => {
                self.out.push_str(&format!("{}\n", self.paint(BOLD, text)));
                self.out.push_str(&format!("{}\n", "─".repeat(w)));
            }
            _ => self
                .out
                .push_str(&format!("{}\n", self.paint(UNDERLINE, text))),
        }
        self.out.push('\n');
    }

    fn code_block(&mut self, lang: &str, body: &str) {
        self.blank_line();
        let (_, rest) = self.indent();
        for line in body.trim_end_matches('\n').lines() {
            let painted = if !self.style.color {
                line.to_string()
            } else if lang == "diff" && line.starts_with('+') && !line.starts_with("+++") {
                self.paint(GREEN, line)
            } else if lang == "diff" && line.starts_with('-') && !line.starts_with("---") {
                self.paint(RED, line)
            } else {
                self.paint(DIM, line)
            };
            self.out.push_str(&format!("{rest}    {painted}"));
            self.out.push('\n');
        }
        self.out.push('\n');
    }

    fn figure(&mut self, alt: &str, path: &str) {
        self.flush_paragraph();
        let (first, rest) = self.indent();
        let text = format!("[figure: {} — {}]", alt.trim(), path);
        let opts = wrap_options(self.style.width)
            .initial_indent(&first)
            .subsequent_indent(&rest);
        for line in textwrap::wrap(&text, opts) {
            let painted = self.paint(ITALIC, line.trim_end());
            self.out.push_str(&painted);
            self.out.push('\n');
        }
        self.out.push('\n');
    }

    fn table(&mut self, t: Table) {
        let Some((header, body)) = t.rows.split_first() else {
            return;
        };
        let folded = !self.style.full && body.len() > FOLD_ROWS;
        let shown: Vec<&Vec<String>> = if folded {
            body.iter().take(FOLD_ROWS - 2).collect()
        } else {
            body.iter().collect()
        };
        let cols = header.len().max(1);
        let gap = 2;
        let (first, _) = self.indent();
        let avail = self
            .style
            .width
            .saturating_sub(display_width(&first) + gap * (cols - 1))
            .max(cols * 3);
        let cell_width = |r: &Vec<String>, c: usize| r.get(c).map_or(0, |s| display_width(s));
        let natural: Vec<usize> = (0..cols)
            .map(|c| {
                std::iter::once(header)
                    .chain(shown.iter().copied())
                    .map(|r| cell_width(r, c))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let widths = fit(&natural, avail);
        self.blank_line();
        let emit = |row: &Vec<String>, bold: bool, out: &mut String| {
            let wrapped: Vec<Vec<String>> = (0..cols)
                .map(|c| {
                    let s = row.get(c).map(String::as_str).unwrap_or("");
                    textwrap::wrap(s, wrap_options(widths[c].max(1)))
                        .into_iter()
                        .map(|l| l.into_owned())
                        .collect()
                })
                .collect();
            let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
            for line in 0..height {
                let mut text = first.clone();
                for c in 0..cols {
                    let cell = wrapped[c].get(line).map(String::as_str).unwrap_or("");
                    let pad = widths[c].saturating_sub(display_width(cell));
                    let right = matches!(t.align.get(c), Some(Alignment::Right));
                    let cell = if bold {
                        self.paint(BOLD, cell)
                    } else {
                        cell.to_string()
                    };
                    if right {
                        text.push_str(&" ".repeat(pad));
                        text.push_str(&cell);
                    } else {
                        text.push_str(&cell);
                        if c + 1 < cols {
                            text.push_str(&" ".repeat(pad));
                        }
                    }
                    if c + 1 < cols {
                        text.push_str(&" ".repeat(gap));
                    }
                }
                out.push_str(text.trim_end());
                out.push('\n');
            }
        };
        let mut out = String::new();
        emit(header, true, &mut out);
        out.push_str(&first);
        out.push_str(&"─".repeat(widths.iter().sum::<usize>() + gap * (cols - 1)));
        out.push('\n');
        for r in &shown {
            emit(r, false, &mut out);
        }
        if folded {
            let note = format!(
                "… {} more rows (--full shows the whole table)",
                body.len() - shown.len()
            );
            out.push_str(&format!("{first}{}\n", self.paint(DIM, &note)));
        }
        self.out.push_str(&out);
        self.out.push('\n');
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { level, .. } => self.heading = Some(level),
                Tag::BlockQuote(_) => {
                    self.blank_line();
                    self.blocks.push(Block::Quote);
                }
                Tag::CodeBlock(kind) => {
                    self.flush_paragraph();
                    let lang = match kind {
                        CodeBlockKind::Fenced(l) => l.to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    self.code = Some((lang, String::new()));
                }
                Tag::List(start) => {
                    self.flush_paragraph();
                    if self.blocks.iter().all(|b| !matches!(b, Block::Item(_))) {
                        self.blank_line();
                    }
                    self.blocks.push(Block::List { next: start });
                }
                Tag::Item => {
                    self.flush_paragraph();
                    let bullet = match self.blocks.last_mut() {
                        Some(Block::List { next: Some(n) }) => {
                            let b = format!("{n}.");
                            *n += 1;
                            b
                        }
                        _ => "•".to_string(),
                    };
                    self.blocks.push(Block::Item(display_width(&bullet) + 1));
                    self.bullet = Some(bullet);
                }
                Tag::Table(align) => {
                    self.flush_paragraph();
                    self.table = Some(Table {
                        align,
                        rows: Vec::new(),
                        cell: String::new(),
                        row: Vec::new(),
                    });
                }
                Tag::TableHead | Tag::TableRow | Tag::TableCell => {}
                Tag::Emphasis => self.push_style(ITALIC),
                Tag::Strong => self.push_style(BOLD),
                Tag::Strikethrough => {}
                Tag::Link { dest_url, .. } => self.link = Some(dest_url.to_string()),
                Tag::Image { dest_url, .. } => {
                    self.image = Some(String::new());
                    self.link = Some(dest_url.to_string());
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => {
                    self.flush_paragraph();
                    self.blank_line();
                }
                TagEnd::Heading(_) => {
                    let level = self.heading.take().unwrap_or(HeadingLevel::H3);
                    self.heading(level);
                }
                TagEnd::BlockQuote(_) => {
                    self.flush_paragraph();
                    self.blocks.pop();
                    self.blank_line();
                }
                TagEnd::CodeBlock => {
                    if let Some((lang, body)) = self.code.take() {
                        self.code_block(&lang, &body);
                    }
                }
                TagEnd::List(_) => {
                    self.flush_paragraph();
                    self.blocks.pop();
                    if self.blocks.iter().all(|b| !matches!(b, Block::Item(_))) {
                        self.blank_line();
                    }
                }
                TagEnd::Item => {
                    self.flush_paragraph();
                    self.blocks.pop();
                    self.bullet = None;
                }
                TagEnd::TableCell => {
                    if let Some(t) = &mut self.table {
                        let cell = std::mem::take(&mut t.cell);
                        t.row.push(cell.trim().to_string());
                    }
                }
                TagEnd::TableHead | TagEnd::TableRow => {
                    if let Some(t) = &mut self.table {
                        let row = std::mem::take(&mut t.row);
                        t.rows.push(row);
                    }
                }
                TagEnd::Table => {
                    if let Some(t) = self.table.take() {
                        self.table(t);
                    }
                }
                TagEnd::Emphasis | TagEnd::Strong => self.pop_style(),
                TagEnd::Link => {
                    if let Some(url) = self.link.take() {
                        if url.starts_with("http") {
                            self.text(&format!(" ({url})"));
                        }
                    }
                }
                TagEnd::Image => {
                    let alt = self.image.take().unwrap_or_default();
                    let path = self.link.take().unwrap_or_default();
                    self.figure(&alt, &path);
                }
                _ => {}
            },
            Event::Text(t) => self.text(&t),
            Event::Code(c) => {
                if self.table.is_some() || self.image.is_some() {
                    self.text(&c);
                } else if self.style.color {
                    let painted = self.paint(CYAN, &c);
                    self.inline.push_str(&painted);
                    let rest: String = self.styles.concat();
                    self.inline.push_str(&rest);
                } else {
                    self.inline.push('`');
                    self.inline.push_str(&c);
                    self.inline.push('`');
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => {
                self.flush_paragraph();
            }
            Event::Rule => {
                self.flush_paragraph();
                self.blank_line();
                let rule = "─".repeat(self.style.width.min(40));
                self.out.push_str(&format!("{rule}\n\n"));
            }
            // Raw HTML has no terminal rendering; the markers never produce it for the terminal.
            Event::Html(_) | Event::InlineHtml(_) => {}
            Event::FootnoteReference(_) | Event::TaskListMarker(_) => {}
            _ => {}
        }
    }
}

/// Column widths that fit `avail`: natural widths when they fit, else the widest column gives
/// way, one column at a time, down to 3 (a table of many columns still fits a narrow terminal:
/// the bench tables have ten).
fn fit(natural: &[usize], avail: usize) -> Vec<usize> {
    const MIN: usize = 3;
    let mut w = natural.to_vec();
    while w.iter().sum::<usize>() > avail {
        let Some(i) = (0..w.len()).max_by_key(|&i| (w[i], usize::MAX - i)) else {
            break;
        };
        if w[i] <= MIN {
            break;
        }
        w[i] -= 1;
    }
    w
}

/// Render markdown for the terminal.
pub fn render(md: &str, style: &Style) -> String {
    let mut opts = pulldown_cmark::Options::empty();
    opts.insert(pulldown_cmark::Options::ENABLE_TABLES);
    let mut r = Renderer {
        style,
        out: String::new(),
        inline: String::new(),
        styles: Vec::new(),
        blocks: Vec::new(),
        bullet: None,
        code: None,
        table: None,
        heading: None,
        image: None,
        link: None,
    };
    for ev in Parser::new_ext(md, opts) {
        r.event(ev);
    }
    r.flush_paragraph();
    let mut out = r.out.trim_end().to_string();
    out.push('\n');
    out
}

/// Show markdown on stdout the way the reader takes it. On a terminal: rendered by termimad
/// (tables, code blocks, wrapping; no colour with `NO_COLOR`), through `$PAGER` (else `less`,
/// with `LESS=FRX` as git sets it) when longer than the screen. To a pipe or a file: the plain
/// rendering of [`render`], reflowed to `COLUMNS` (else 80), for `grep` and `less` alike.
pub fn show(md: &str, full: bool) -> std::io::Result<()> {
    let style = Style::for_stdout(full);
    if !std::io::stdout().is_terminal() {
        return print(&render(md, &style));
    }
    let skin = if style.color {
        termimad::MadSkin::default()
    } else {
        termimad::MadSkin::no_style()
    };
    let text = skin.text(&for_termimad(md), Some(style.width)).to_string();
    page(&text)
}

/// What termimad's markdown does not take, rewritten: a figure becomes its caption and file, a
/// link its text and address; code blocks are left alone.
fn for_termimad(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut in_code = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            out.push_str(line);
        } else {
            out.push_str(&rewrite_links(line));
        }
        out.push('\n');
    }
    out
}

/// `![caption](file)` -> `*Figure: caption* (file)`; `[text](url)` -> `text (url)`.
fn rewrite_links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        let image = open > 0 && rest.as_bytes()[open - 1] == b'!';
        let text = &rest[open + 1..mid];
        let target = &rest[mid + 2..close];
        out.push_str(&rest[..if image { open - 1 } else { open }]);
        if image {
            out.push_str(&format!("*Figure: {text}* ({target})"));
        } else {
            out.push_str(&format!("{text} ({target})"));
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Print `text`, through a pager when it is longer than the terminal; without a pager that
/// can start (`$PAGER`, else `less`, not on the PATH), print it directly. Quitting the pager
/// before the end is no error.
fn page(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let rows = terminal_size::terminal_size().map_or(24, |(_, h)| usize::from(h.0));
    if text.lines().count() < rows {
        return print(text);
    }
    let path = std::env::var_os("PATH");
    let Some(pager) = resolve_pager(std::env::var("PAGER").ok().as_deref(), path.as_deref()) else {
        return print(text);
    };
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &pager]).stdin(std::process::Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        // Quit if one screen, keep colours, leave the text on screen: git's default.
        cmd.env("LESS", "FRX");
    }
    let Ok(mut child) = cmd.spawn() else {
        return print(text);
    };
    if let Some(mut stdin) = child.stdin.take() {
        // The reader may quit the pager before the end: the write then fails (EPIPE) instead
        // of ending the runner with SIGPIPE, and that is no error.
        // SAFETY: SIGPIPE's action is set and restored on this thread, around one write.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let _ = stdin.write_all(text.as_bytes());
        drop(stdin);
        // SAFETY: as above; SIG_DFL is what main set.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match child.wait()?.code() {
        // The shell found no such command after all: the text was never shown.
        Some(126 | 127) => print(text),
        _ => Ok(()),
    }
}

/// The pager command to run: `$PAGER` (else `less`), if its program is a file on the `PATH`
/// (or a path to one); leading `NAME=value` words are the shell's, not the program.
fn resolve_pager(pager: Option<&str>, path: Option<&std::ffi::OsStr>) -> Option<String> {
    let pager = pager
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("less");
    let program = pager.split_whitespace().find(|w| !w.contains('='))?;
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        path.is_some_and(|p| std::env::split_paths(p).any(|d| d.join(program).is_file()))
    };
    found.then(|| pager.to_string())
}

/// Print to stdout; a reader that stops reading (`| head`) ends the output quietly.
pub fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Style = Style {
        width: 60,
        color: false,
        full: false,
    };

    #[test]
    fn a_pager_that_is_not_there_is_not_used() {
        let sh = std::path::Path::new("/bin/sh");
        let bin = std::ffi::OsStr::new("/bin:/usr/bin");
        assert_eq!(
            resolve_pager(Some("sh -c cat"), Some(bin)).as_deref(),
            Some("sh -c cat")
        );
        assert_eq!(resolve_pager(Some("nonexistent-pager"), Some(bin)), None);
        assert_eq!(resolve_pager(Some("/no/such/pager -R"), Some(bin)), None);
        if sh.is_file() {
            assert_eq!(
                resolve_pager(Some("X=1 /bin/sh"), None).as_deref(),
                Some("X=1 /bin/sh")
            );
        }
        // No PAGER and no less on the PATH (a minimal container): print directly.
        let empty = std::env::temp_dir();
        assert_eq!(resolve_pager(None, Some(empty.as_os_str())), None);
        assert_eq!(resolve_pager(Some("  "), None), None);
    }

    #[test]
    fn paragraphs_are_reflowed_not_broken_where_the_source_was() {
        let md = "A sentence that the source\nwrapped at an odd place, and goes on for a while longer than sixty columns.\n\nSecond.\n";
        let out = render(md, &PLAIN);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "A sentence that the source wrapped at an odd place, and goes"
        );
        assert!(lines.iter().all(|l| display_width(l) <= 60), "{out}");
        assert!(out.contains("\n\nSecond.\n"), "{out}");
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn code_stays_verbatim_and_inline_code_keeps_its_ticks() {
        let md = "Call `runner step 0` now.\n\n```cpp\nint x = 1;   // a very long line that must not be wrapped whatever the width of the terminal is\n```\n";
        let out = render(md, &PLAIN);
        assert!(out.contains("Call `runner step 0` now."));
        assert!(out.contains("    int x = 1;   // a very long line that must not be wrapped whatever the width of the terminal is\n"));
    }

    #[test]
    fn figures_become_caption_and_path() {
        let out = render(
            "Text.\n\n![Step 0 timeline](assets/step0-timeline.svg)\n",
            &PLAIN,
        );
        assert!(
            out.contains("[figure: Step 0 timeline — assets/step0-timeline.svg]"),
            "{out}"
        );
    }

    #[test]
    fn long_tables_fold_unless_full() {
        let mut md = String::from("| a | b |\n|---|---|\n");
        for i in 0..30 {
            md.push_str(&format!("| {i} | x |\n"));
        }
        let out = render(&md, &PLAIN);
        assert!(out.contains("… 20 more rows"), "{out}");
        assert!(!out.contains("\n29  x"));
        let full = render(
            &md,
            &Style {
                full: true,
                ..PLAIN
            },
        );
        assert!(full.contains("\n29  x"), "{full}");
        assert!(!full.contains("more rows"));
    }

    #[test]
    fn wide_tables_wrap_their_cells_to_the_width() {
        let md = "| quantity | value |\n|---|---|\n| a rather long label that goes on | a value that is also quite long, long enough to wrap |\n";
        let out = render(md, &Style { width: 50, ..PLAIN });
        assert!(out.lines().all(|l| display_width(l) <= 50), "{out}");
        assert!(out.contains("quantity"));
        assert!(out.contains("long enough"));
    }

    #[test]
    fn lists_hang_and_quotes_are_marked() {
        let md = "- first item, long enough that it has to wrap onto a second line in sixty columns\n- second\n\n> quoted\n\n1. numbered, and long enough again to need a second line at sixty columns\n";
        let out = render(md, &PLAIN);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("• first item"), "{out}");
        assert!(
            lines[1].starts_with("  ") && !lines[1].starts_with("   "),
            "{out}"
        );
        let n = lines
            .iter()
            .position(|l| l.starts_with("1. numbered"))
            .expect("numbered");
        assert!(
            lines[n + 1].starts_with("   ") && !lines[n + 1].starts_with("    "),
            "{out}"
        );
        assert!(out.contains("> quoted"), "{out}");
    }

    #[test]
    fn colour_only_when_asked() {
        let md = "# Title\n\nSome **bold** and `code`.\n";
        let plain = render(md, &PLAIN);
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(plain.starts_with("TITLE\n═════\n"), "{plain}");
        let color = render(
            md,
            &Style {
                color: true,
                ..PLAIN
            },
        );
        assert!(color.contains("\x1b[1mbold\x1b[0m"), "{color:?}");
        assert!(color.contains("\x1b[36mcode\x1b[0m"), "{color:?}");
    }

    #[test]
    fn column_fitting_respects_the_space() {
        assert_eq!(fit(&[10, 20], 40), vec![10, 20]);
        let w = fit(&[30, 60], 50);
        assert!(w.iter().sum::<usize>() <= 50, "{w:?}");
        assert!(w.iter().all(|&x| x >= 8));
    }
}

#[cfg(test)]
mod termimad_tests {
    use super::*;

    #[test]
    fn figures_and_links_become_text_termimad_can_show() {
        let md = "See ![The ring](assets/ring.svg) and [PTX](https://docs.nvidia.com/ptx).\n```\n[a](b)\n```\n";
        let out = for_termimad(md);
        assert!(
            out.contains("*Figure: The ring* (assets/ring.svg)"),
            "{out}"
        );
        assert!(out.contains("PTX (https://docs.nvidia.com/ptx)."), "{out}");
        assert!(out.contains("\n[a](b)\n"), "code is left alone: {out}");
        let skin = termimad::MadSkin::no_style();
        let text = skin
            .text("| a | b |\n|---|---|\n| 1 | 2 |\n", Some(40))
            .to_string();
        assert!(
            text.contains('1') && text.contains('2') && !text.contains('\x1b'),
            "{text}"
        );
    }
}
