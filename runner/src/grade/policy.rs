//! What a submitted kernel may contain, checked on its text before anything compiles it.
//!
//! Two screens. [`check`], for every submission: NUL bytes; `#include` only of the workbook's
//! own headers, in quotes, by name, before any other code (so no macro of the submission changes
//! what those headers do); no `#line`, line markers or unknown directives; no digraph or trigraph
//! spelling of `#`, no `#` in mid-line. What reaching a file is concerned, it is not the
//! boundary: the grading children are confined by Landlock, so an include, `__has_include` or a
//! pragma that names any other file finds nothing (`runner/tests/confinement.rs` grades such
//! attacks with the screen off). Checks that only stood in for the confinement are gone:
//! `__has_include`, pragmas, `_Pragma` and token pasting are accepted.
//!
//! [`check_arch_neutral`], for Blackwell rubrics: a kernel graded under the tcgen05 emulation
//! must not be able to tell that build from the native one. It refuses every name that differs
//! between the two builds, derived from the workbook's headers and the build's own `-D`
//! options (see [`BuildNames`]), the architecture macros and `NV_IF_TARGET` family, and the
//! preprocessor operators that could assemble or read such a name.
//!
//! Both follow the translation phases the preprocessor does (splices, then comments and
//! literals, then directives), match whole tokens, never parts of names, and tolerate what the
//! preprocessor tolerates in groups it skips (an apostrophe in `#if 0`). Every `#` token must
//! start a directive that is checked here or sit inside a `#define`, and a line counts as a new
//! line after every newline, even one inside a comment.

use std::fmt;

/// The headers a submission may include: the workbook's own, which NVRTC gets from memory.
pub fn allowed_headers() -> Vec<&'static str> {
    common::compile::HEADERS.iter().map(|(n, _)| *n).collect()
}

/// Why a submission was refused, with the line (1-based, physical) it was found on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Directives a submission may use besides `#include`.
const PLAIN_DIRECTIVES: &[&str] = &[
    "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "error", "warning",
    "pragma",
];

/// A character of the source after line splicing, with the physical line it came from.
#[derive(Clone, Copy)]
struct Ch {
    c: char,
    line: usize,
}

/// Phase 2: remove backslash-newline (also with blanks between the two, as compilers accept
/// with a warning); keep the physical line of every remaining character.
fn splice(text: &str) -> Vec<Ch> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0b' | '\x0c' | '\r') {
                j += 1;
            }
            if j < chars.len() && chars[j] == '\n' {
                line += 1;
                i = j + 1;
                continue;
            }
        }
        out.push(Ch { c, line });
        if c == '\n' {
            line += 1;
        }
        i += 1;
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// `#` or `%:`.
    Hash,
    /// `##` or `%:%:`.
    Paste,
    Ident(String),
    /// A string literal's contents (escapes kept as written), with its prefix.
    Str {
        prefix: String,
        body: String,
    },
    Char,
    /// A raw string literal (`R"delim(...)delim"`, any prefix): nothing in it is checked.
    RawStr,
    Number,
    /// `<`: an angle-bracket header name starts with it.
    Less,
    /// Any other punctuator, by its first character.
    Punct(char),
    /// A quote with no closing quote on its line, and the rest of that line: the preprocessor
    /// tolerates it in a group it skips (`#if 0 ... don't ... #endif`), and the compiler refuses
    /// it anywhere else, so nothing in it reaches a build.
    Unmatched,
    Newline,
}

struct Lexer {
    s: Vec<Ch>,
    i: usize,
    /// Set by a newline anywhere (also inside a block comment), cleared by any token.
    at_line_start: bool,
    /// The text of the last number token (a conditional's literal: `#if 0`).
    last_number: String,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}
fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

impl Lexer {
    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).map(|c| c.c)
    }
    fn line(&self) -> usize {
        self.s
            .get(self.i)
            .or_else(|| self.s.last())
            .map_or(1, |c| c.line)
    }
    fn err<T>(&self, line: usize, message: impl Into<String>) -> Result<T, Violation> {
        Err(Violation {
            line,
            message: message.into(),
        })
    }

    /// The next token with the line it starts on, skipping blanks and comments; `None` at the end.
    fn next(&mut self) -> Result<Option<(Tok, usize, bool)>, Violation> {
        loop {
            let Some(c) = self.peek(0) else {
                return Ok(None);
            };
            let line = self.line();
            match c {
                '\n' => {
                    self.i += 1;
                    let start = self.at_line_start;
                    self.at_line_start = true;
                    return Ok(Some((Tok::Newline, line, start)));
                }
                ' ' | '\t' | '\r' | '\x0b' | '\x0c' => self.i += 1,
                '/' if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '/' if self.peek(1) == Some('*') => {
                    self.i += 2;
                    loop {
                        match self.peek(0) {
                            None => return self.err(line, "unterminated /* comment"),
                            Some('*') if self.peek(1) == Some('/') => {
                                self.i += 2;
                                break;
                            }
                            Some('\n') => {
                                self.at_line_start = true;
                                self.i += 1;
                            }
                            Some(_) => self.i += 1,
                        }
                    }
                }
                _ => {
                    let start = self.at_line_start;
                    let tok = self.token(c, line)?;
                    self.at_line_start = false;
                    return Ok(Some((tok, line, start)));
                }
            }
        }
    }

    fn token(&mut self, c: char, line: usize) -> Result<Tok, Violation> {
        if c == '?' && self.peek(1) == Some('?') {
            if let Some(t) = self.peek(2) {
                if "=/'()!<>-".contains(t) {
                    return self.err(line, format!("trigraph ??{t} is not allowed"));
                }
            }
        }
        if c == '#' || (c == '%' && self.peek(1) == Some(':')) {
            self.i += if c == '#' { 1 } else { 2 };
            let paste = if self.peek(0) == Some('#') {
                self.i += 1;
                true
            } else if self.peek(0) == Some('%') && self.peek(1) == Some(':') {
                self.i += 2;
                true
            } else {
                false
            };
            return Ok(if paste { Tok::Paste } else { Tok::Hash });
        }
        if is_ident_start(c) {
            let mut name = String::new();
            while let Some(c) = self.peek(0).filter(|&c| is_ident_char(c)) {
                name.push(c);
                self.i += 1;
            }
            if self.peek(0) == Some('"') {
                if matches!(name.as_str(), "R" | "u8R" | "uR" | "UR" | "LR") {
                    return self.raw_string(line);
                }
                if matches!(name.as_str(), "u8" | "u" | "U" | "L") {
                    return self.string(name, line);
                }
            }
            if self.peek(0) == Some('\'') && matches!(name.as_str(), "u8" | "u" | "U" | "L") {
                return self.char_literal(line);
            }
            return Ok(Tok::Ident(name));
        }
        if c.is_ascii_digit() || (c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit())) {
            // A pp-number: digits, letters, '.', digit separators and signed exponents.
            let start = self.i;
            self.i += 1;
            while let Some(c) = self.peek(0) {
                let signed_exponent =
                    matches!(c, 'e' | 'E' | 'p' | 'P') && matches!(self.peek(1), Some('+' | '-'));
                let separator = c == '\'' && self.peek(1).is_some_and(is_ident_char);
                if signed_exponent || separator {
                    self.i += 2;
                } else if is_ident_char(c) || c == '.' {
                    self.i += 1;
                } else {
                    break;
                }
            }
            self.last_number = self.s[start..self.i].iter().map(|c| c.c).collect();
            return Ok(Tok::Number);
        }
        match c {
            '"' => self.string(String::new(), line),
            '\'' => self.char_literal(line),
            '\\' => self.err(
                line,
                "a backslash outside a literal (a universal character name or a broken line splice)",
            ),
            '<' => {
                self.i += 1;
                Ok(Tok::Less)
            }
            c if !c.is_ascii() => {
                self.err(line, format!("non-ASCII character {c:?} outside comments and literals"))
            }
            _ => {
                self.i += 1;
                Ok(Tok::Punct(c))
            }
        }
    }

    /// A raw string literal from its opening quote: `"delim(`, then anything up to `)delim"`.
    /// Line splices are undone inside a raw string; this scan runs on spliced text, so it can
    /// only find the end earlier than the compiler does (and then checks more as code), never
    /// later.
    fn raw_string(&mut self, line: usize) -> Result<Tok, Violation> {
        self.i += 1; // the opening quote
        let mut delim = String::new();
        loop {
            match self.peek(0) {
                Some('(') => {
                    self.i += 1;
                    break;
                }
                Some(c)
                    if delim.len() < 16 && !matches!(c, ' ' | ')' | '\\' | '\t' | '\n' | '"') =>
                {
                    delim.push(c);
                    self.i += 1;
                }
                _ => {
                    return self.err(
                        line,
                        "malformed raw string literal (R\"delimiter( ... )delimiter\")",
                    )
                }
            }
        }
        let end: Vec<char> = format!("){delim}\"").chars().collect();
        while self.i < self.s.len() {
            if (0..end.len()).all(|k| self.peek(k) == Some(end[k])) {
                self.i += end.len();
                return Ok(Tok::RawStr);
            }
            if self.peek(0) == Some('\n') {
                // A line inside the literal is no line of code: no directive starts on it.
                self.at_line_start = false;
            }
            self.i += 1;
        }
        self.err(line, "unterminated raw string literal")
    }

    /// Whether a literal opened at `self.i` (its quote) closes on its line.
    fn closes_on_line(&self, quote: char) -> bool {
        let mut k = 1;
        loop {
            match self.peek(k) {
                None | Some('\n') => return false,
                Some('\\') => k += 2,
                Some(c) if c == quote => return true,
                Some(_) => k += 1,
            }
        }
    }

    /// A quote that does not close on its line: the rest of the line is one [`Tok::Unmatched`]
    /// token, as the preprocessor reads it in a skipped group. Where compilers could read that
    /// rest otherwise (a `/*` left open there, or a raw string starting there, either of which
    /// would hide the following lines from one reading but not the other), the source is refused.
    fn unmatched(&mut self, line: usize) -> Result<Tok, Violation> {
        let start = self.i;
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.i += 1;
        }
        let rest: String = self.s[start + 1..self.i].iter().map(|c| c.c).collect();
        let open_comment = rest
            .rfind("/*")
            .is_some_and(|o| !rest[o + 2..].contains("*/"));
        if open_comment || rest.contains("R\"") {
            return self.err(
                line,
                "a quote that never closes on its line, followed by /* or a raw string: compilers differ on what the following lines are, so the grader cannot check them (close the quote, or write the comment otherwise)",
            );
        }
        Ok(Tok::Unmatched)
    }

    fn string(&mut self, prefix: String, line: usize) -> Result<Tok, Violation> {
        if !self.closes_on_line('"') {
            return self.unmatched(line);
        }
        self.i += 1; // the opening quote
        let mut body = String::new();
        loop {
            match self.peek(0) {
                None | Some('\n') => return self.err(line, "unterminated string literal"),
                Some('"') => {
                    self.i += 1;
                    return Ok(Tok::Str { prefix, body });
                }
                Some('\\') => {
                    body.push('\\');
                    self.i += 1;
                    match self.peek(0) {
                        None | Some('\n') => return self.err(line, "unterminated string literal"),
                        Some(e) => {
                            body.push(e);
                            self.i += 1;
                        }
                    }
                }
                Some(c) => {
                    body.push(c);
                    self.i += 1;
                }
            }
        }
    }

    fn char_literal(&mut self, line: usize) -> Result<Tok, Violation> {
        if !self.closes_on_line('\'') {
            return self.unmatched(line);
        }
        self.i += 1;
        loop {
            match self.peek(0) {
                None | Some('\n') => return self.err(line, "unterminated character literal"),
                Some('\'') => {
                    self.i += 1;
                    return Ok(Tok::Char);
                }
                Some('\\') => self.i += 2,
                Some(_) => self.i += 1,
            }
        }
    }
}

/// The rest of a directive's logical line.
fn rest_of_line(lx: &mut Lexer) -> Result<Vec<(Tok, usize)>, Violation> {
    let mut toks = Vec::new();
    while let Some((t, line, _)) = lx.next()? {
        if t == Tok::Newline {
            break;
        }
        toks.push((t, line));
    }
    Ok(toks)
}

/// Check a submission's text. `Ok` means nothing in it can make the compiler open a file other
/// than the workbook's headers.
pub fn check(text: &str) -> Result<(), Violation> {
    if text.contains('\0') {
        return Err(Violation {
            line: text[..text.find('\0').unwrap_or(0)].lines().count().max(1),
            message: "NUL byte in the source".into(),
        });
    }
    let headers = allowed_headers();
    let mut lx = Lexer {
        s: splice(text),
        i: 0,
        at_line_start: true,
        last_number: String::new(),
    };
    // Includes come first: once code or another directive has run, a macro could change what
    // the workbook's headers (and the toolkit headers they pull in) do.
    let mut includes_allowed = true;
    // The conditional groups open at this point, as the preprocessor tracks them: a group whose
    // condition is the literal 0 (or whose earlier branch was the literal 1) is skipped, and in
    // a skipped group only the conditional directives count (for the nesting); any other text,
    // a `#` anywhere in it included, never reaches a build. A condition that is not a literal
    // is assumed to hold (every branch of it is checked).
    let mut groups: Vec<Group> = Vec::new();
    while let Some((tok, line, at_start)) = lx.next()? {
        let skipping = groups.iter().any(|g| g.skipping);
        if skipping {
            if tok == Tok::Hash && at_start {
                let toks = rest_of_line(&mut lx)?;
                if let Some((Tok::Ident(d), _)) = toks.first() {
                    conditional(&mut groups, d, &toks[1..], true, &lx.last_number)
                        .map_err(|m| Violation { line, message: m })?;
                }
            }
            continue;
        }
        match tok {
            Tok::Newline => continue,
            Tok::Ident(_) => includes_allowed = false,
            Tok::Paste => {
                return lx.err(
                    line,
                    "## outside a #define: token pasting works only in a macro's definition",
                )
            }
            Tok::Hash if at_start => {
                let toks = rest_of_line(&mut lx)?;
                directive(&mut lx, line, toks.clone(), &headers, &mut includes_allowed)?;
                if let Some((Tok::Ident(d), _)) = toks.first() {
                    conditional(&mut groups, d, &toks[1..], false, &lx.last_number)
                        .map_err(|m| Violation { line, message: m })?;
                }
            }
            Tok::Hash => return lx.err(
                line,
                "a # that does not start a line: only directives (and # inside #define) may use it",
            ),
            Tok::Str { .. }
            | Tok::Char
            | Tok::RawStr
            | Tok::Number
            | Tok::Less
            | Tok::Punct(_)
            | Tok::Unmatched => {
                includes_allowed = false;
            }
        }
    }
    Ok(())
}

/// One open conditional group (`#if` ... `#endif`).
struct Group {
    /// The current branch is skipped.
    skipping: bool,
    /// An earlier branch (or this one) may have been taken: every later branch may be live too
    /// unless one was the literal 1 (`decided`).
    decided: bool,
    /// Inside a skipped group: the whole group is skipped, whatever its branches say.
    outer_skipped: bool,
}

/// A condition's value when it is one decimal integer literal (`number`: its text): `0` is
/// false, any other true; `None` for anything else (assumed to hold).
fn literal_condition(rest: &[(Tok, usize)], number: &str) -> Option<bool> {
    match rest {
        [(Tok::Number, _)] if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) => {
            Some(number.bytes().any(|b| b != b'0'))
        }
        _ => None,
    }
}

/// Track conditional directive `d` (its operands `rest`) in `groups`; `in_skipped`: it sits
/// in a skipped group. An `#else`, `#elif` or `#endif` with no open group is refused (the
/// compiler refuses it too).
fn conditional(
    groups: &mut Vec<Group>,
    d: &str,
    rest: &[(Tok, usize)],
    in_skipped: bool,
    number: &str,
) -> Result<(), String> {
    let value = |rest: &[(Tok, usize)]| literal_condition(rest, number);
    match d {
        "if" | "ifdef" | "ifndef" => {
            let v = if d == "if" { value(rest) } else { None };
            groups.push(Group {
                skipping: in_skipped || v == Some(false),
                decided: v == Some(true),
                outer_skipped: in_skipped,
            });
        }
        "elif" | "else" | "endif" => {
            let Some(g) = groups.last_mut() else {
                return Err(format!("#{d} without a matching #if"));
            };
            match d {
                "endif" => {
                    groups.pop();
                }
                _ if g.outer_skipped => {}
                "else" => g.skipping = g.decided,
                _ => {
                    let v = value(rest);
                    g.skipping = g.decided || v == Some(false);
                    g.decided |= v == Some(true);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn directive(
    lx: &mut Lexer,
    line: usize,
    toks: Vec<(Tok, usize)>,
    headers: &[&str],
    includes_allowed: &mut bool,
) -> Result<(), Violation> {
    let Some((first, _)) = toks.first() else {
        return Ok(()); // the null directive
    };
    let name = match first {
        Tok::Ident(n) => n.as_str(),
        Tok::Number => return lx.err(line, "line markers (# NUMBER \"file\") are not allowed"),
        _ => {
            return lx.err(
                line,
                "a # followed by something that is not a directive name",
            )
        }
    };
    for (t, l) in &toks[1..] {
        match t {
            Tok::Hash | Tok::Paste if name != "define" => {
                return lx.err(*l, "# inside a directive other than #define")
            }
            _ => {}
        }
    }
    match name {
        "include" => {
            if !*includes_allowed {
                return lx.err(
                    line,
                    "#include must come before any code or other directive (only comments may precede the includes)",
                );
            }
            match &toks[1..] {
                [(Tok::Str { prefix, body }, _)] if prefix.is_empty() => {
                    if headers.contains(&body.as_str()) {
                        Ok(())
                    } else {
                        lx.err(
                            line,
                            format!(
                                "#include \"{body}\" is not allowed: a submission may include only the workbook's headers ({})",
                                headers.join(", ")
                            ),
                        )
                    }
                }
                [(Tok::Less, _), ..] => lx.err(
                    line,
                    format!(
                        "#include <...> is not allowed: a submission may include only the workbook's headers, in quotes ({})",
                        headers.join(", ")
                    ),
                ),
                [] => lx.err(line, "#include without a header name"),
                _ => lx.err(
                    line,
                    "#include must name one of the workbook's headers in quotes, with nothing else on the line (no macros)",
                ),
            }
        }
        n if PLAIN_DIRECTIVES.contains(&n) => {
            *includes_allowed = false;
            Ok(())
        }
        "line" => lx.err(
            line,
            "#line is not allowed: it renames the file the compiler reads",
        ),
        other => lx.err(line, format!("#{other} is not allowed in submissions")),
    }
}

/// Which build a region of the workbook's headers is compiled into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// Both builds.
    Common,
    /// The emulated build only (`#if defined(WB_EMULATE_TCGEN05)`, `tcgen05_emu.cuh`).
    Emulated,
    /// The native build only (the `#else` of such a group).
    Native,
    /// A group whose condition depends on the build in a way not read here: either.
    Either,
}

/// The names that differ between the emulated and the native build of a Blackwell kernel,
/// derived from the headers built into this runner and the targets' `-D` options (so they follow
/// any edit of the headers, never a hand list).
#[derive(Debug, Default)]
pub struct BuildNames {
    /// Refused anywhere: macros defined by one build's code or options, and names (namespaces,
    /// functions, variables, types) that one build declares and the other does not.
    pub anywhere: std::collections::BTreeSet<String>,
    /// Refused in conditional directives (`#if`, `#ifdef`, `defined(...)`): every macro whose
    /// definition differs between the builds, also a function's name that one build makes a
    /// macro (`mbarrier_init`), and every macro whose definition uses one of them.
    pub conditional: std::collections::BTreeSet<String>,
}

/// The macros one target's build is given and the other's is not.
fn target_macros() -> Vec<&'static str> {
    let (emu, native) = (
        common::Target::Sm90aEmulated.macros(),
        common::Target::Sm100a.macros(),
    );
    let mut v: Vec<&str> = emu
        .iter()
        .filter(|m| !native.contains(m))
        .copied()
        .collect();
    v.extend(native.iter().filter(|m| !emu.contains(m)));
    v
}

/// The region a conditional directive's group is in, given the region around it.
fn group_region(
    directive: &str,
    toks: &[(Tok, usize)],
    outer: Region,
    emu_macros: &[&str],
) -> Region {
    let idents: Vec<&str> = toks
        .iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    let depends = idents
        .iter()
        .any(|n| emu_macros.contains(n) || n.starts_with("__CUDA_ARCH_"));
    if !depends {
        return outer;
    }
    let bang = toks.iter().any(|(t, _)| *t == Tok::Punct('!'));
    let plain = idents.len() <= 2
        && idents
            .iter()
            .all(|n| *n == "defined" || emu_macros.contains(n));
    let inner = match (directive, plain, bang) {
        ("ifdef", true, false) | ("if", true, false) => Region::Emulated,
        ("ifndef", true, false) | ("if", true, true) => Region::Native,
        _ => Region::Either,
    };
    match outer {
        Region::Common => inner,
        o if o == inner => o,
        _ => Region::Either,
    }
}

/// The opposite branch (`#else`).
fn flip(r: Region) -> Region {
    match r {
        Region::Emulated => Region::Native,
        Region::Native => Region::Emulated,
        other => other,
    }
}

/// What one header defines and declares, each with its region.
#[derive(Default)]
struct HeaderScan {
    /// `#define`d names, with their region and the identifiers of their definition.
    macros: Vec<(String, Region, Vec<String>)>,
    /// Namespace-scope declarations: (enclosing namespaces, name, region, is a namespace).
    decls: Vec<(Vec<String>, String, Region, bool)>,
    /// Headers it includes, with the region of the `#include`.
    includes: Vec<(String, Region)>,
}

/// Words that are never a declared name (keywords and CUDA's declaration specifiers).
const NOT_NAMES: &[&str] = &[
    "const",
    "constexpr",
    "static",
    "inline",
    "extern",
    "volatile",
    "unsigned",
    "signed",
    "int",
    "long",
    "short",
    "char",
    "float",
    "double",
    "bool",
    "void",
    "auto",
    "template",
    "typename",
    "return",
    "operator",
    "sizeof",
    "alignof",
    "alignas",
    "decltype",
    "noexcept",
    "struct",
    "class",
    "union",
    "enum",
    "namespace",
    "using",
    "typedef",
    "public",
    "private",
    "protected",
];

/// Scan one header's text, starting in region `base`.
fn scan_header(text: &str, base: Region, emu_macros: &[&str]) -> HeaderScan {
    let mut out = HeaderScan::default();
    let mut lx = Lexer {
        s: splice(text),
        i: 0,
        at_line_start: true,
        last_number: String::new(),
    };
    // The conditional groups: (region of the group around, region of this branch).
    let mut groups: Vec<(Region, Region)> = Vec::new();
    let region = |g: &Vec<(Region, Region)>| g.last().map_or(base, |x| x.1);
    // Braces: Some(namespace name) or None (any other brace).
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut parens = 0usize;
    // The statement so far at namespace scope: its identifiers, and whether a `(`, `=` or `[`
    // ended its declarator.
    let mut stmt: Vec<String> = Vec::new();
    let mut declared = false;
    let mut pending_ns: Option<String> = None;
    let mut after_keyword: Option<String> = None;
    let mut prev_scope = false;
    while let Ok(Some((tok, _line, at_start))) = lx.next() {
        if tok == Tok::Hash && at_start {
            let Ok(toks) = rest_of_line(&mut lx) else {
                break;
            };
            let name = match toks.first() {
                Some((Tok::Ident(n), _)) => n.clone(),
                _ => continue,
            };
            let rest = &toks[1..];
            match name.as_str() {
                "if" | "ifdef" | "ifndef" => {
                    let outer = region(&groups);
                    groups.push((outer, group_region(&name, rest, outer, emu_macros)));
                }
                "elif" => {
                    if let Some(g) = groups.last_mut() {
                        let r = group_region("if", rest, g.0, emu_macros);
                        g.1 = if g.1 == g.0 && r == g.0 {
                            g.0
                        } else {
                            Region::Either
                        };
                    }
                }
                "else" => {
                    if let Some(g) = groups.last_mut() {
                        g.1 = if g.1 == g.0 { g.0 } else { flip(g.1) };
                    }
                }
                "endif" => {
                    groups.pop();
                }
                "define" => {
                    if let Some((Tok::Ident(m), _)) = rest.first() {
                        let body = rest[1..]
                            .iter()
                            .filter_map(|(t, _)| match t {
                                Tok::Ident(n) => Some(n.clone()),
                                _ => None,
                            })
                            .collect();
                        out.macros.push((m.clone(), region(&groups), body));
                    }
                }
                "include" => {
                    if let Some((Tok::Str { body, .. }, _)) = rest.first() {
                        out.includes.push((body.clone(), region(&groups)));
                    }
                }
                _ => {}
            }
            continue;
        }
        let r = region(&groups);
        let at_ns_scope = parens == 0 && braces.iter().all(Option::is_some);
        let ns_path: Vec<String> = braces
            .iter()
            .flatten()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect();
        match &tok {
            Tok::Ident(n) => {
                if at_ns_scope {
                    if let Some(k) = after_keyword.take() {
                        if !prev_scope {
                            if k == "namespace" {
                                pending_ns = Some(n.clone());
                            }
                            out.decls
                                .push((ns_path.clone(), n.clone(), r, k == "namespace"));
                        }
                    } else if matches!(
                        n.as_str(),
                        "namespace" | "struct" | "class" | "union" | "enum"
                    ) {
                        after_keyword = Some(n.clone());
                    } else if !declared {
                        stmt.push(if prev_scope { String::new() } else { n.clone() });
                    }
                }
                prev_scope = false;
            }
            Tok::Punct(c) => {
                prev_scope = *c == ':' && lx.peek(0) == Some(':');
                if *c == ':' && prev_scope {
                    lx.i += 1;
                }
                match c {
                    '(' | '=' | '[' | ';' | ',' | '{' if at_ns_scope && !declared => {
                        if let Some(name) = stmt
                            .iter()
                            .rev()
                            .find(|n| !n.is_empty() && !NOT_NAMES.contains(&n.as_str()))
                        {
                            if !(name.starts_with("__")
                                || stmt.last().is_some_and(String::is_empty))
                            {
                                out.decls.push((ns_path.clone(), name.clone(), r, false));
                            }
                        }
                        declared = *c != ',';
                        stmt.clear();
                    }
                    _ => {}
                }
                match c {
                    '(' => parens += 1,
                    ')' => parens = parens.saturating_sub(1),
                    '{' => {
                        braces.push(pending_ns.take());
                        after_keyword = None;
                        stmt.clear();
                        declared = false;
                    }
                    '}' => {
                        braces.pop();
                        stmt.clear();
                        declared = false;
                    }
                    ';' if parens == 0 => {
                        stmt.clear();
                        declared = false;
                        after_keyword = None;
                    }
                    _ => {}
                }
            }
            // `extern "C" {`: a linkage block, which opens no scope for names.
            Tok::Str { .. } if at_ns_scope && stmt.last().is_some_and(|n| n == "extern") => {
                pending_ns = Some(String::new());
                prev_scope = false;
            }
            _ => prev_scope = false,
        }
    }
    out
}

impl BuildNames {
    /// Derived once from the headers built into this runner.
    pub fn get() -> &'static BuildNames {
        static NAMES: std::sync::OnceLock<BuildNames> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| BuildNames::derive(common::compile::HEADERS))
    }

    /// The names of `headers` (name, text) that differ between the builds.
    pub fn derive(headers: &[(&str, &str)]) -> BuildNames {
        use std::collections::{BTreeMap, BTreeSet};
        let emu = target_macros();
        // Which region each header is included from (a header included only under the
        // emulation is the emulation's throughout).
        let first: Vec<HeaderScan> = headers
            .iter()
            .map(|(_, t)| scan_header(t, Region::Common, &emu))
            .collect();
        let mut base: BTreeMap<&str, Region> = BTreeMap::new();
        for scan in &first {
            for (inc, r) in &scan.includes {
                if let Some((n, _)) = headers.iter().find(|(n, _)| n == inc) {
                    let e = base.entry(n).or_insert(*r);
                    if *e != *r {
                        *e = Region::Common;
                    }
                }
            }
        }
        let scans: Vec<HeaderScan> = headers
            .iter()
            .map(|(n, t)| {
                let b = base.get(n).copied().unwrap_or(Region::Common);
                scan_header(t, b, &emu)
            })
            .collect();
        // Names declared, by the regions declaring them.
        let mut decl_regions: BTreeMap<&str, BTreeSet<u8>> = BTreeMap::new();
        let code = |r: Region| r as u8;
        let in_both = |set: &BTreeSet<u8>| {
            set.contains(&code(Region::Common))
                || (set.contains(&code(Region::Emulated)) && set.contains(&code(Region::Native)))
        };
        for s in &scans {
            for (_, name, r, _) in &s.decls {
                decl_regions.entry(name).or_default().insert(code(*r));
            }
        }
        // Namespaces only one build opens: their contents are reached only through their names.
        let one_build_ns: BTreeSet<&str> = scans
            .iter()
            .flat_map(|s| s.decls.iter())
            .filter(|(_, n, _, ns)| *ns && !in_both(&decl_regions[n.as_str()]))
            .map(|(_, n, _, _)| n.as_str())
            .collect();
        let mut names = BuildNames::default();
        for s in &scans {
            for (path, name, _, _) in &s.decls {
                if path.iter().any(|p| one_build_ns.contains(p.as_str())) {
                    continue;
                }
                if !in_both(&decl_regions[name.as_str()]) {
                    names.anywhere.insert(name.clone());
                }
            }
        }
        // Macros: the build's options, and every macro defined in a region of one build.
        for m in &emu {
            names.anywhere.insert(m.to_string());
        }
        for s in &scans {
            for (m, r, _) in &s.macros {
                if *r == Region::Common {
                    continue;
                }
                let declared_in_both = decl_regions.get(m.as_str()).is_some_and(in_both);
                if declared_in_both {
                    names.conditional.insert(m.clone());
                } else {
                    names.anywhere.insert(m.clone());
                }
            }
        }
        // Macros whose definitions use such a macro, transitively: their values differ too.
        let mut changed = true;
        while changed {
            changed = false;
            for s in &scans {
                for (m, _, body) in &s.macros {
                    let uses = body
                        .iter()
                        .any(|b| names.anywhere.contains(b) || names.conditional.contains(b));
                    if uses && !names.anywhere.contains(m) && names.conditional.insert(m.clone()) {
                        changed = true;
                    }
                }
            }
        }
        let anywhere = names.anywhere.clone();
        names.conditional.extend(anywhere);
        names
    }
}

/// Why `name` is refused anywhere in a Blackwell submission, if it is.
fn arch_name(name: &str, names: &BuildNames) -> Option<&'static str> {
    const NV_TARGET: &[&str] = &[
        "NV_IF_TARGET",
        "NV_IF_ELSE_TARGET",
        "NV_DISPATCH_TARGET",
        "NV_IS_HOST",
        "NV_IS_DEVICE",
        "NV_ANY_TARGET",
        "NV_NO_TARGET",
    ];
    const NV_FAMILIES: &[&str] = &[
        "NV_PROVIDES_SM_",
        "NV_IS_EXACTLY_SM_",
        "NV_HAS_FEATURE_",
        "_NV_",
        "__NV_",
    ];
    if name.starts_with("__CUDA_ARCH_") {
        Some("names the architecture being compiled for (__CUDA_ARCH__, __CUDA_ARCH_FEAT_*, __CUDA_ARCH_SPECIFIC__, __CUDA_ARCH_FAMILY_SPECIFIC__, ...)")
    } else if name.starts_with("__nvvm_reflect") {
        Some("asks the compiler which architecture it compiles for")
    } else if NV_TARGET.contains(&name) || NV_FAMILIES.iter().any(|f| name.starts_with(f)) {
        Some("selects code by target architecture (the NV_IF_TARGET family of <nv/target>)")
    } else if names.anywhere.contains(name) {
        Some("is defined or declared by one of the two builds only (the tcgen05 emulation's headers and options, or the native build's)")
    } else {
        None
    }
}

/// Directives whose condition the preprocessor evaluates.
const CONDITIONALS: &[&str] = &["if", "elif", "ifdef", "ifndef", "elifdef", "elifndef"];

/// Operators that probe what the build provides.
const PROBES: &[&str] = &[
    "__has_include",
    "__has_include_next",
    "__has_embed",
    "__has_builtin",
];

/// For Blackwell rubrics: refuse a submission that can tell which build it is compiled into
/// (graded under emulation, run natively on a B200). Refused: every name of [`arch_name`]
/// anywhere; in a conditional directive, every name of [`BuildNames::conditional`] and every
/// macro of the submission whose definition uses one; `__has_include` and its kin; and the
/// operators that could assemble or read such a name where the screen does not see it: token
/// pasting (`##`) and stringizing (`#` in a `#define`).
pub fn check_arch_neutral(text: &str) -> Result<(), Violation> {
    check_arch_neutral_with(text, BuildNames::get())
}

fn check_arch_neutral_with(text: &str, names: &BuildNames) -> Result<(), Violation> {
    let mut lx = Lexer {
        s: splice(text),
        i: 0,
        at_line_start: true,
        last_number: String::new(),
    };
    let refuse = |line: usize, what: String| -> Result<(), Violation> {
        Err(Violation {
            line,
            message: format!(
                "{what}, so the kernel graded under emulation could differ from the one that runs natively on a B200"
            ),
        })
    };
    // First pass: every token, directives' included.
    while let Some((tok, l, _)) = lx.next()? {
        match &tok {
            Tok::Ident(n) => {
                if let Some(why) = arch_name(n, names) {
                    return refuse(
                        l,
                        format!("{n} is not allowed in a Blackwell submission: it {why}"),
                    );
                }
                if PROBES.contains(&n.as_str()) {
                    return refuse(
                        l,
                        format!("{n} is not allowed in a Blackwell submission: it probes what the build provides"),
                    );
                }
            }
            Tok::Paste => {
                return refuse(
                    l,
                    "token pasting (##) is not allowed in a Blackwell submission: it can assemble a name that tells the builds apart where the screen does not see it".into(),
                );
            }
            _ => {}
        }
    }
    let mut tainted: std::collections::BTreeSet<String> = names.conditional.clone();
    // Second pass: directives, with the submission's own macros.
    let mut lx = Lexer {
        s: splice(text),
        i: 0,
        at_line_start: true,
        last_number: String::new(),
    };
    // The groups a literal `#if 0` skips never reach a build, as in `check`: there only the
    // conditionals count (for the nesting), so a stringizing #define in them is harmless.
    let mut groups: Vec<Group> = Vec::new();
    while let Some((tok, line, at_start)) = lx.next()? {
        if !(tok == Tok::Hash && at_start) {
            continue;
        }
        let toks = rest_of_line(&mut lx)?;
        let Some((Tok::Ident(d), _)) = toks.first() else {
            continue;
        };
        let rest = &toks[1..];
        let skipping = groups.iter().any(|g| g.skipping);
        conditional(&mut groups, d, rest, skipping, &lx.last_number)
            .map_err(|m| Violation { line, message: m })?;
        if skipping {
            continue;
        }
        if d == "define" {
            if let Some((Tok::Ident(m), _)) = rest.first() {
                if let Some((_, l)) = rest[1..].iter().find(|(t, _)| *t == Tok::Hash) {
                    return refuse(*l, "stringizing (# in a #define) is not allowed in a Blackwell submission: it can turn a macro's expansion, which differs between the builds, into a value".into());
                }
                if rest[1..]
                    .iter()
                    .any(|(t, _)| matches!(t, Tok::Ident(n) if tainted.contains(n)))
                {
                    tainted.insert(m.clone());
                }
            }
        } else if CONDITIONALS.contains(&d.as_str()) {
            if let Some((Tok::Ident(n), l)) = rest
                .iter()
                .find(|(t, _)| matches!(t, Tok::Ident(n) if tainted.contains(n)))
            {
                return refuse(*l, format!("#{d} on {n} is not allowed in a Blackwell submission: {n} is a macro whose definition differs between the emulated and the native build (or uses one that does)"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stringizing_define_in_a_skipped_group_passes_the_arch_screen_and_outside_it_does_not() {
        let names = super::BuildNames::get();
        let skipped = "#if 0\n#define SHOW(a) #a\n#endif\n__global__ void k() {}\n";
        assert!(super::check_arch_neutral_with(skipped, names).is_ok());
        let live = "#if 1\n#define SHOW(a) #a\n#endif\n__global__ void k() {}\n";
        let e = super::check_arch_neutral_with(live, names).unwrap_err();
        assert!(e.message.contains("stringizing"), "{}", e.message);
        let else_branch = "#if 0\n#else\n#define SHOW(a) #a\n#endif\n";
        assert!(super::check_arch_neutral_with(else_branch, names).is_err());
    }

    #[test]
    fn blackwell_submissions_cannot_tell_the_emulation_from_the_native_build() {
        for (bad, needle) in [
            (
                "#ifdef WB_EMULATE_TCGEN05\nint x;\n#endif\n",
                "WB_EMULATE_TCGEN05",
            ),
            (
                "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000\n#endif\n",
                "__CUDA_ARCH__",
            ),
            (
                "#ifdef __CUDA_ARCH_FEAT_SM100_ALL\n#endif\n",
                "__CUDA_ARCH_FEAT_SM100_ALL",
            ),
            (
                "#if __CUDA_ARCH_SPECIFIC__\n#endif\n",
                "__CUDA_ARCH_SPECIFIC__",
            ),
            (
                "#if __CUDA_ARCH_FAMILY_SPECIFIC__ == 1000\n#endif\n",
                "__CUDA_ARCH_FAMILY_SPECIFIC__",
            ),
            ("int e = WB_EMU_ERR_QUEUE_FULL;\n", "WB_EMU_ERR_QUEUE_FULL"),
            ("namespace x = wb::emu_hook;\n", "emu_hook"),
            ("auto s = bw::emu::cta_linear();\n", "emu"),
            (
                "__device__ void f() { (void)wb_emu_state; }\n",
                "wb_emu_state",
            ),
            (
                "NV_IF_TARGET(NV_PROVIDES_SM_100, (x = 1;))\n",
                "NV_IF_TARGET",
            ),
            (
                "NV_IF_ELSE_TARGET(NV_IS_EXACTLY_SM_90, (a();), (b();))\n",
                "NV_IF_ELSE_TARGET",
            ),
            (
                "NV_DISPATCH_TARGET(NV_PROVIDES_SM_100, (a();))\n",
                "NV_DISPATCH_TARGET",
            ),
            (
                "int v = __nvvm_reflect(\"__CUDA_ARCH\");\n",
                "__nvvm_reflect",
            ),
            // A function one build makes a macro, tested by the preprocessor.
            (
                "#ifdef mbarrier_init\n#define NATIVE 0\n#endif\n",
                "mbarrier_init",
            ),
            ("#if !defined(mbarrier_init)\n#endif\n", "mbarrier_init"),
            ("#if 0\n#elif defined(WB_EMU_HOOK)\n#endif\n", "WB_EMU_HOOK"),
            ("#ifndef WB_EMU_STRICT\n#endif\n", "WB_EMU_STRICT"),
            // Through a macro of the submission's own.
            (
                "#define IS_EMU defined(mbarrier_init)\n#if IS_EMU\n#endif\n",
                "IS_EMU",
            ),
            (
                "#define A mbarrier_init\n#define B A\n#ifdef B\n#endif\n",
                "B",
            ),
            // Probes and the operators that build names the screen cannot see.
            (
                "#if __has_include(\"tcgen05_emu.cuh\")\n#endif\n",
                "__has_include",
            ),
            (
                "#define CAT(a, b) a##b\nint x = CAT(__CUDA_, ARCH__);\n",
                "##",
            ),
            (
                "#define S(x) #x\n#define XS(x) S(x)\nconst char* s = XS(mbarrier_init(a, b));\n",
                "stringizing",
            ),
            // Splices and comments hide nothing.
            (
                "#if defined(WB_EMU\\\nLATE_TCGEN05)\n#endif\n",
                "WB_EMULATE_TCGEN05",
            ),
            (
                "#if /* x */ defined /* y */ (WB_EMULATE_TCGEN05)\n#endif\n",
                "WB_EMULATE_TCGEN05",
            ),
        ] {
            let v = super::check_arch_neutral(bad).expect_err(bad);
            assert!(v.message.contains("Blackwell"), "{bad}: {v}");
            assert!(v.message.contains(needle), "{bad}: {v}");
        }
        // Comments, strings and names that merely contain a refused word do not count; the
        // stock kernels pass.
        for good in [
            "// WB_EMULATE_TCGEN05\nconst char* s = \"__CUDA_ARCH__\";\n",
            "__device__ int tmemUsed = 0; int emulated_ms, menu, my_emu_count, __CUDA_ARCHIVE_x;\n",
            "#if 0\n// don't\n#endif\nconst char* r = R\"(#ifdef WB_EMULATE_TCGEN05)\";\n",
            "__device__ void g() { mbarrier_init(nullptr, 1); }\n#define INIT(b) mbarrier_init(b, 1)\n",
        ] {
            super::check_arch_neutral(good).unwrap_or_else(|v| panic!("{good}: {v}"));
        }
        for step in 0..=6 {
            let text = runner::steps::get(step).unwrap().info().blackwell.text;
            super::check_arch_neutral(text).unwrap_or_else(|v| panic!("step {step}: {v}"));
        }
    }

    #[test]
    fn the_build_names_are_derived_from_the_headers() {
        let n = super::BuildNames::get();
        // The emulation's options, macros, namespaces and globals; a function it makes a macro.
        for name in [
            "WB_EMULATE_TCGEN05",
            "WB_EMU_ERR_QUEUE_FULL",
            "emu",
            "emu_hook",
            "wb_emu_state",
            "WB_EMU_HOOK",
        ] {
            assert!(n.anywhere.contains(name), "{name}: {n:?}");
        }
        assert!(n.conditional.contains("mbarrier_init"), "{n:?}");
        // The API both builds declare is no build's own.
        for name in [
            "tmem_alloc",
            "mbarrier_init",
            "bw",
            "wb",
            "u32",
            "smem_u32",
            "cta_linear",
            "state",
        ] {
            assert!(!n.anywhere.contains(name), "{name}");
        }
        // A header edit changes the list: a macro added under the emulation is refused, and one
        // added for both builds is not.
        let edited: Vec<(&str, String)> = common::compile::HEADERS
            .iter()
            .map(|(name, text)| {
                let t = if *name == "tcgen05_emu.cuh" {
                    format!("{text}\n#define WB_NEW_EMU_ONLY 1\n")
                } else if *name == "common.cuh" {
                    format!("{text}\n#define WB_NEW_BOTH 1\n")
                } else {
                    text.to_string()
                };
                (*name, t)
            })
            .collect();
        let refs: Vec<(&str, &str)> = edited.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let d = super::BuildNames::derive(&refs);
        assert!(d.anywhere.contains("WB_NEW_EMU_ONLY"));
        assert!(!d.anywhere.contains("WB_NEW_BOTH") && !d.conditional.contains("WB_NEW_BOTH"));
    }

    /// A skipped group is skipped as the preprocessor skips it: any `#` in it (mid-line, `##`,
    /// an unknown directive) and an unterminated quote, with the nesting of #if/#elif/#else/
    /// #endif tracked; the live branches are still checked.
    #[test]
    fn skipped_groups_tolerate_any_hash_and_live_ones_do_not() {
        for src in [
            "#if 0\n  a # b; 'unterminated\n#endif\n",
            "#if 0\n#if 1\nx ## y # z\n#else\n#frobnicate\n#endif\n#line 3 \"f\"\n#endif\nint a;\n",
            "#if 1\nint a;\n#else\n  a # b;\n#endif\n",
            "#if 0\n#elif 0\n a # b\n#else\nint a;\n#endif\n",
            "#if 1\n#elif 1\n # x\n#else\n # y\n#endif\n",
            "#ifdef FOO\nint a;\n#elif 0\n # here\n#endif\n",
        ] {
            check(src).unwrap_or_else(|v| panic!("{src:?}: {v}"));
        }
        for (src, line) in [
            // After the skipped group, a live # is checked again.
            ("#if 0\n a # b\n#endif\n a # b\n", 4),
            // The live branch of an #if 0 ... #else.
            ("#if 0\n#else\n a # b\n#endif\n", 3),
            // A condition that is not a literal: both branches are checked.
            ("#if FOO\n a # b\n#endif\n", 2),
            ("#if 0\n#elif FOO\n a # b\n#endif\n", 3),
            // Nested: the inner #endif does not end the outer skip, the outer does.
            ("#if 0\n#if 1\n#endif\n # ok\n#endif\n # no\n", 6),
            // An #include in the live #else of an #if 0 is checked.
            ("#if 0\n#else\n#include \"/etc/passwd\"\n#endif\n", 3),
            ("#endif\n", 1),
        ] {
            let v = check(src).expect_err(src);
            assert_eq!(v.line, line, "{src:?}: {v}");
        }
    }

    #[test]
    fn honest_sources_pass_the_screen() {
        for src in [
            // An apostrophe in a skipped group, as NVRTC accepts it.
            "#include \"hopper.cuh\"\n#if 0\nWe don't use this yet.\n#endif\nint x;\n",
            "#include \"hopper.cuh\"\n#if 0\nit's \"quoted\n#endif\n",
            "#error don't\n",
            // Comments of every form, a splice inside a // comment, a quote inside a comment.
            "// it's fine \\\n still the comment's\n/* it's\n fine */ int a; /**/ int b; //* x\n",
            // Raw strings, also with a delimiter and lines inside.
            "const char* r = R\"(a \" b )\";\nconst char* q = R\"xy(\n#include \"/etc/passwd\"\n)\" )xy\";\nconst char* u = u8R\"(x)\";\n",
            // Digit separators, char literals with prefixes, escaped quotes.
            "constexpr long n = 1'000'000; char c = '\\''; wchar_t w = L'x'; auto u = u8'a'; int h = 0x1'F;\n",
            // Identifiers containing a refused word, and the operators the confinement made safe.
            "int tmemUsed, my_has_include, pragma_count, line_no, define_x;\n#define CAT(a, b) a##b\n#define STR(x) #x\n#pragma nv_diag_suppress 177\n_Pragma(\"unroll\") int z;\n#if __has_include(\"common.cuh\")\n#endif\n",
        ] {
            check(src).unwrap_or_else(|v| panic!("{src:?}: {v}"));
        }
    }

    use super::*;

    fn refused(src: &str) -> Violation {
        check(src).expect_err(&format!("must be refused:\n{src}"))
    }

    #[test]
    fn the_stock_kernels_pass() {
        for step in runner::steps::all() {
            for arch in common::step::Arch::ALL {
                let text = step.info().kernel(arch).text;
                check(text).unwrap_or_else(|v| panic!("step {} {arch}: {v}", step.info().number));
            }
        }
    }

    #[test]
    fn ordinary_kernel_code_passes() {
        let src = "// a kernel\n/* block\n comment */\n#include \"hopper.cuh\"\n#include \"common.cuh\"  // ok\n#define TILE 128\n#define STR(x) #x\n#if defined(WB_IS_BF16) && WB_IS_BF16\n#endif\n#pragma unroll 4\nconstexpr int a = 1'000'000; const char* s = \"# not a directive \\\" still\"; char q = '#';\nfloat f = 1.5e+3f; int h = 0x1F;\n";
        check(src).unwrap();
    }

    #[test]
    fn system_and_path_includes_are_refused() {
        let cases = [
            "#include \"/etc/passwd\"\n",
            "#include \"../../secret.txt\"\n",
            "#include \"sub/common.cuh\"\n",
            "#include <stdio.h>\n",
            "#include <cuda_fp16.h>\n",
            "#include \"cuda_fp16.h\"\n",
            "  #  include \"/etc/passwd\"\n",
            "#include \"common.cuh\" \"/etc/passwd\"\n",
            "#include u8\"common.cuh\"\n",
        ];
        for c in cases {
            let v = refused(c);
            assert!(v.message.contains("include"), "{c}: {v}");
            assert_eq!(v.line, 1);
        }
        assert!(refused("#include \"/etc/passwd\"\n")
            .message
            .contains("common.cuh"));
    }

    #[test]
    fn includes_through_macros_are_refused() {
        let v = refused("#define F \"/etc/passwd\"\n#include F\n");
        assert_eq!(v.line, 2);
        let v = refused("#include \"hopper.cuh\"\n#define X 1\n#include \"common.cuh\"\n");
        assert!(v.message.contains("before any code"), "{v}");
        let v = refused("#define __CUDA_FP16_H__\n#include \"hopper.cuh\"\n");
        assert!(v.message.contains("before any code"), "{v}");
        let v = refused("#if 1\n#include \"hopper.cuh\"\n#endif\n");
        assert!(v.message.contains("before any code"), "{v}");
    }

    #[test]
    fn spellings_of_include_are_refused() {
        // Digraph, line splices (also with trailing blanks), comments between # and include.
        for src in [
            "%:include \"/etc/passwd\"\n",
            "#\\\ninclude \"/etc/passwd\"\n",
            "#inc\\\nlude \"/etc/passwd\"\n",
            "#\\  \ninclude \"/etc/passwd\"\n",
            "#/**/include \"/etc/passwd\"\n",
            "/* a\n */ #include \"/etc/passwd\"\n",
            "#include \"/etc/pa\\\nsswd\"\n",
            "??=include \"/etc/passwd\"\n",
        ] {
            let v = refused(src);
            assert!(v.line <= 2, "{src}: {v}");
        }
    }

    #[test]
    fn a_hash_after_a_multiline_comment_is_checked_as_a_directive() {
        // The standard makes the comment one space, so this # is not at a line start and the
        // compiler would refuse it; the grader refuses it either way.
        let v = refused("int x; /* a\n */ #include \"/etc/passwd\"\n");
        assert_eq!(v.line, 2, "{v}");
        refused("int x; # include \"common.cuh\"\n");
    }

    #[test]
    fn probing_and_renaming_directives_are_refused() {
        for (src, needle) in [
            ("#line 1 \"/etc/passwd\"\n", "#line"),
            ("# 12 \"/etc/passwd\"\n", "line markers"),
            ("#include_next \"common.cuh\"\n", "#include_next"),
            ("#embed \"/etc/passwd\"\n", "#embed"),
            ("#import \"/etc/passwd\"\n", "#import"),
            ("#ident \"x\"\n", "#ident"),
            ("int \\u0023 = 1;\n", "backslash"),
            ("int a ## b;\n", "outside a #define"),
            ("#if 1 ## 2\n#endif\n", "other than #define"),
            (
                "const char* s = R\"x(never closed\n",
                "unterminated raw string",
            ),
            // A quote left open before /* or a raw string: compilers read the next lines
            // differently, so they are not taken on trust.
            (
                "#if 0\ndon't /* open\n#endif\n#include \"/etc/passwd\"\n*/\n",
                "compilers differ",
            ),
            ("#if 0\ndon't R\"(\n#endif\n)\"\n", "compilers differ"),
            ("#\n#define A 1\n#if A\n#endif\n#error ok\n#foo\n", "#foo"),
        ] {
            let v = refused(src);
            assert!(v.message.contains(needle), "{src:?}: {v}");
        }
    }

    #[test]
    fn literals_and_comments_hide_nothing() {
        // A quote inside a comment, a # in a string and a digit separator do not derail the scan.
        let v = refused(
            "// it's\nint a = 1'0;\nconst char* s = \"#include\";\n#include \"/etc/passwd\"\n",
        );
        assert_eq!(v.line, 4);
        let v = refused("char c = '\\'';\n#line 3\n");
        assert_eq!(v.line, 2);
        // An apostrophe in a skipped group ends nothing but its line.
        let v = refused("#if 0\ndon't\n#endif\n#include \"/etc/passwd\"\n");
        assert_eq!(v.line, 4);
        assert!(refused("/* never closed\n")
            .message
            .contains("unterminated"));
    }
}
