//! What a submitted kernel may contain, checked on its text before anything compiles it.
//!
//! NVRTC opens any file a kernel names in an `#include`: a grader that compiled submissions as
//! they come would print `/etc/passwd`, or its own secret, in a compile error. So a submission may
//! include only the workbook's own headers, by their plain names, before any other line of code;
//! and every way the C preprocessor offers to reach a file some other way is refused: computed
//! includes (`#include MACRO`), angle brackets, paths, `__has_include`, `#line`, pragmas other
//! than loop unrolling, `_Pragma`, token pasting (which could assemble those names), digraphs
//! and trigraphs that spell `#`, and line splices between `#` and `include`.
//!
//! The scan follows the translation phases the preprocessor does (splices, then comments and
//! literals, then directives) and errs on the side of refusing: every `#` token must either
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

/// Identifiers refused wherever they appear outside comments and literals.
const FORBIDDEN_IDENTIFIERS: &[(&str, &str)] = &[
    ("__has_include", "__has_include probes the file system"),
    (
        "__has_include_next",
        "__has_include_next probes the file system",
    ),
    ("__has_embed", "__has_embed probes the file system"),
    ("_Pragma", "_Pragma issues pragmas the grader cannot check"),
    (
        "__pragma",
        "__pragma issues pragmas the grader cannot check",
    ),
];

/// Directives a submission may use besides `#include` and `#pragma`.
const PLAIN_DIRECTIVES: &[&str] = &[
    "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "error", "warning",
];

/// Pragmas a submission may use.
const PRAGMAS: &[&str] = &["unroll", "nounroll", "once"];

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
    Number,
    /// `<`: an angle-bracket header name starts with it.
    Less,
    Punct,
    Newline,
}

struct Lexer {
    s: Vec<Ch>,
    i: usize,
    /// Set by a newline anywhere (also inside a block comment), cleared by any token.
    at_line_start: bool,
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
                    return self.err(line, "raw string literals are not allowed in submissions");
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
                Ok(Tok::Punct)
            }
        }
    }

    fn string(&mut self, prefix: String, line: usize) -> Result<Tok, Violation> {
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
    };
    // Includes come first: once code or another directive has run, a macro could change what
    // the workbook's headers (and the toolkit headers they pull in) do.
    let mut includes_allowed = true;
    while let Some((tok, line, at_start)) = lx.next()? {
        match tok {
            Tok::Newline => continue,
            Tok::Ident(name) => {
                if let Some((_, why)) = FORBIDDEN_IDENTIFIERS.iter().find(|(n, _)| *n == name) {
                    return lx.err(line, format!("{name} is not allowed: {why}"));
                }
                includes_allowed = false;
            }
            Tok::Paste => {
                return lx.err(
                    line,
                    "token pasting (##) is not allowed in submissions: it can assemble names the grader refuses",
                )
            }
            Tok::Hash if at_start => {
                directive(&mut lx, line, &headers, &mut includes_allowed)?;
            }
            Tok::Hash => {
                return lx.err(
                    line,
                    "a # that does not start a line: only directives (and # inside #define) may use it",
                )
            }
            Tok::Str { .. } | Tok::Char | Tok::Number | Tok::Less | Tok::Punct => {
                includes_allowed = false;
            }
        }
    }
    Ok(())
}

fn directive(
    lx: &mut Lexer,
    line: usize,
    headers: &[&str],
    includes_allowed: &mut bool,
) -> Result<(), Violation> {
    let toks = rest_of_line(lx)?;
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
            Tok::Ident(n) => {
                if let Some((_, why)) = FORBIDDEN_IDENTIFIERS.iter().find(|(f, _)| f == n) {
                    return lx.err(*l, format!("{n} is not allowed: {why}"));
                }
            }
            Tok::Paste => {
                return lx.err(
                    *l,
                    "token pasting (##) is not allowed in submissions: it can assemble names the grader refuses",
                )
            }
            Tok::Hash if name != "define" => {
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
        "pragma" => {
            *includes_allowed = false;
            match toks.get(1) {
                Some((Tok::Ident(p), _)) if PRAGMAS.contains(&p.as_str()) => Ok(()),
                _ => lx.err(
                    line,
                    format!("only #pragma {} are allowed", PRAGMAS.join(", ")),
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

/// Names a Blackwell submission may not mention: with them a kernel can tell the emulation
/// (the `sm_90a` build with `WB_EMULATE_TCGEN05`, where an H100/H200 grades it) from the native
/// `sm_100a` build, and be the stock kernel under one and something else under the other.
fn arch_conditional(name: &str) -> Option<&'static str> {
    if name.starts_with("__CUDA_ARCH") {
        Some("names the architecture being compiled for (__CUDA_ARCH__, __CUDA_ARCH_FEAT_*, __CUDA_ARCH_SPECIFIC__, ...)")
    } else if name.starts_with("WB_EMU") || name.to_ascii_lowercase().contains("emu") {
        Some("names the tcgen05 emulation")
    } else {
        None
    }
}

/// For Blackwell rubrics: refuse a submission that can tell which build it is compiled into.
/// Runs after [`check`] (which refuses the token pasting that could assemble such a name).
pub fn check_arch_neutral(text: &str) -> Result<(), Violation> {
    let mut lx = Lexer {
        s: splice(text),
        i: 0,
        at_line_start: true,
    };
    while let Some((tok, line, _)) = lx.next()? {
        if let Tok::Ident(name) = tok {
            if let Some(why) = arch_conditional(&name) {
                return lx.err(
                    line,
                    format!(
                        "{name} is not allowed in a Blackwell submission: it {why}, so the kernel graded under emulation could differ from the one that runs natively"
                    ),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn blackwell_submissions_cannot_tell_the_emulation_from_the_native_build() {
        for bad in [
            "#ifdef WB_EMULATE_TCGEN05\nint x;\n#endif\n",
            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000\n#endif\n",
            "#ifdef __CUDA_ARCH_FEAT_SM100_ALL\n#endif\n",
            "#if __CUDA_ARCH_SPECIFIC__\n#endif\n",
            "int e = WB_EMU_ERR_QUEUE_FULL;\n",
            "namespace x = wb::emu_hook;\n",
        ] {
            let v = super::check_arch_neutral(bad).unwrap_err();
            assert!(
                v.message.contains("not allowed in a Blackwell"),
                "{bad}: {v}"
            );
        }
        // Comments and strings do not count; the stock kernels pass.
        super::check_arch_neutral("// WB_EMULATE_TCGEN05\nconst char* s = \"__CUDA_ARCH__\";\n")
            .unwrap();
        for step in 0..=6 {
            let text = runner::steps::get(step).unwrap().info().blackwell.text;
            super::check_arch_neutral(text).unwrap();
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
            (
                "#if __has_include(\"/etc/passwd\")\n#endif\n",
                "__has_include",
            ),
            ("int a = __has_include(\"x\");\n", "__has_include"),
            ("#line 1 \"/etc/passwd\"\n", "#line"),
            ("# 12 \"/etc/passwd\"\n", "line markers"),
            ("#pragma include_alias(\"a\", \"/etc/passwd\")\n", "#pragma"),
            ("#pragma push_macro(\"X\")\n", "#pragma"),
            ("_Pragma(\"once\")\n", "_Pragma"),
            ("#include_next \"common.cuh\"\n", "#include_next"),
            ("#embed \"/etc/passwd\"\n", "#embed"),
            ("#import \"/etc/passwd\"\n", "#import"),
            ("#ident \"x\"\n", "#ident"),
            ("#define CAT(a, b) a##b\n", "pasting"),
            ("#define CAT(a, b) a%:%:b\n", "pasting"),
            ("const char* s = R\"(x)\";\n", "raw string"),
            ("int \\u0023 = 1;\n", "backslash"),
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
        assert!(refused("const char* s = \"abc\n")
            .message
            .contains("unterminated"));
        assert!(refused("/* never closed\n")
            .message
            .contains("unterminated"));
    }
}
