//! A hand-written parser for the subset of PTX that NVRTC emits for the workbook's kernels.
//!
//! Crates checked before writing it (2026-11-26), by parsing the stock kernels' PTX
//! (`tests/ptx/`, NVRTC 13.0) with each in a scratch project:
//! - `ptx-90-parser` 0.4.4 (generated from the PTX 9.0 grammar, tcgen05 included; 0.5.0 is
//!   deprecated in favour of a successor): fails on every kernel at the body's `{` after the
//!   `.maxntid` / `.minnctapersm` performance directives NVRTC writes.
//! - `singe-ptx` 0.1.0-alpha.7 (PTX 9.1 syntax tables): fails on every kernel, at the entry's
//!   `.param .align 64 .b8 name[128]` list or at `.loc ... inlined_at` lines.
//! - `ptx-parser` 0.1.6 (2023, PTX 7.x): no `::` state spaces, no tcgen05.
//!
//! None reads what NVRTC produces today, so this module reads what the kernels use: statements,
//! scoped register declarations (inline `asm` blocks open `{ .reg .pred p; ... }` scopes),
//! labels, guards, `.loc` line information (with the `inlined_at` chain resolved to the
//! kernel's own line) and the state-space variables. Decoding the statements into instructions
//! is [`crate::decode`].

use crate::error::SimError;
use std::collections::HashMap;

/// One statement of a function body, before decoding.
#[derive(Debug, Clone)]
pub struct Stmt {
    pub line: u32,
    /// `.loc` in force.
    pub loc: Loc,
    /// `@%p` / `@!%p`: the predicate's register name and whether it is negated.
    pub guard: Option<(String, bool)>,
    pub opcode: String,
    pub operands: Vec<String>,
}

/// A label or a statement, in order; `Open`/`Close` are `{`/`}` scopes inside a body.
#[derive(Debug, Clone)]
pub enum Item {
    Label(String),
    Stmt(Stmt),
    /// `.reg .TYPE name` or `.reg .TYPE name<N>`.
    Reg {
        ty: String,
        name: String,
        count: Option<u32>,
        line: u32,
    },
    /// `.local`, `.shared` or `.param` variable inside a body (a `.param` one is a call's
    /// argument or return value): space without the dot, name, bytes, alignment.
    Var {
        space: String,
        name: String,
        bytes: u64,
        align: u64,
        line: u32,
    },
    Open,
    Close,
}

/// A kernel parameter: `.param .align 64 .b8 name[128]` or `.param .u32 name`.
#[derive(Debug, Clone)]
pub struct ParamDecl {
    pub name: String,
    pub bytes: u32,
    pub align: u32,
}

/// A function (`.entry` or `.func`) as parsed.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub is_entry: bool,
    pub params: Vec<ParamDecl>,
    /// A `.func`'s return parameters: `.func (.param .b32 func_retval0) name (...)`.
    pub rets: Vec<ParamDecl>,
    pub body: Vec<Item>,
    pub line: u32,
}

/// A module-level variable in `.shared`, `.global` or `.const`.
#[derive(Debug, Clone)]
pub struct ModuleVar {
    pub space: String,
    pub name: String,
    /// 0 for `.extern .shared ... name[]` (the dynamic shared memory).
    pub bytes: u64,
    pub align: u64,
    pub is_extern: bool,
    /// Initial bytes (`= {...}` or `= v`), little-endian; empty: zero.
    pub init: Vec<u8>,
    /// Elements of `init` that hold another variable's address (`generic($str)`, as NVRTC
    /// writes a `const char*` initialised with a string): (byte offset, variable name).
    pub addresses: Vec<(u64, String)>,
}

#[derive(Debug, Clone, Default)]
pub struct Module {
    pub functions: Vec<Function>,
    pub vars: Vec<ModuleVar>,
    /// `.file N "path"`.
    pub files: HashMap<u32, String>,
}

/// Remove `//` and `/* */` comments, keeping line breaks (so line numbers stay right) and string
/// literals (file names).
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c as char);
            if c == b'"' {
                in_str = false;
            }
            i += 1;
        } else if c == b'"' {
            in_str = true;
            out.push('"');
            i += 1;
        } else if c == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else {
            // PTX is ASCII; other bytes can only be inside comments or strings.
            out.push(c as char);
            i += 1;
        }
    }
    out
}

/// Does `t` start with directive (or keyword) `d` as a whole word? `.loc` is not the start of
/// `.local`, nor `.func` of `.function_name`: a directive is a dot and an identifier (PTX ISA,
/// "Directive Statements"), so the next character must not continue the identifier.
pub fn starts_with_word(t: &str, d: &str) -> bool {
    t.starts_with(d)
        && !t[d.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Is `d` one of the whitespace-separated words of `t`?
fn has_word(t: &str, d: &str) -> bool {
    t.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .any(|w| w == d)
}

/// Directives that take a line without a terminating `;`.
const LINE_DIRECTIVES: &[&str] = &[
    ".loc",
    ".file",
    ".version",
    ".target",
    ".address_size",
    ".maxntid",
    ".reqntid",
    ".minnctapersm",
    ".maxnreg",
    ".explicitcluster",
    ".reqnctapercluster",
    ".maxclusterrank",
    ".noreturn",
    ".blocksareclusters",
];

/// A raw piece of the module: text up to `;`, `{` or `}`, a line directive, or a brace.
#[derive(Debug)]
enum Raw {
    Text(String, u32),
    Line(String, u32),
    Open(u32),
    Close(u32),
}

fn split_raw(text: &str) -> Vec<Raw> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut buf_line = 0u32;
    let mut depth_paren = 0i32;
    let mut in_init = false; // inside `= { ... }` of a variable initialiser
    for (n, line) in text.lines().enumerate() {
        let lno = n as u32 + 1;
        let t = line.trim();
        if buf.trim().is_empty() && LINE_DIRECTIVES.iter().any(|d| starts_with_word(t, d)) {
            out.push(Raw::Line(t.trim_end_matches(';').to_string(), lno));
            continue;
        }
        // A label alone on its line is a piece of its own.
        if buf.trim().is_empty()
            && t.len() > 1
            && t.ends_with(':')
            && !t.ends_with("::")
            && t[..t.len() - 1]
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '%')
        {
            out.push(Raw::Text(t.to_string(), lno));
            continue;
        }
        for c in line.chars() {
            match c {
                '(' => {
                    depth_paren += 1;
                    buf.push(c);
                }
                ')' => {
                    depth_paren -= 1;
                    buf.push(c);
                }
                ';' if depth_paren == 0 => {
                    if !buf.trim().is_empty() {
                        out.push(Raw::Text(std::mem::take(&mut buf), buf_line));
                    }
                    buf.clear();
                    in_init = false;
                }
                '{' if depth_paren == 0 => {
                    let b = buf.trim_end();
                    if b.ends_with('=') || in_init {
                        in_init = true;
                        buf.push(c);
                    } else if b.ends_with(',')
                        || b.ends_with('[')
                        || b.chars()
                            .last()
                            .is_some_and(|l| l.is_ascii_alphanumeric() || l == '_' || l == '%')
                            && looks_like_operand_list(b)
                    {
                        // a vector operand `{%r1, %r2}` inside an instruction
                        buf.push(c);
                    } else {
                        if !buf.trim().is_empty() {
                            out.push(Raw::Text(std::mem::take(&mut buf), buf_line));
                        }
                        buf.clear();
                        out.push(Raw::Open(lno));
                    }
                }
                '}' if depth_paren == 0 => {
                    if in_init || brace_balance(&buf) > 0 {
                        buf.push(c);
                    } else {
                        if !buf.trim().is_empty() {
                            out.push(Raw::Text(std::mem::take(&mut buf), buf_line));
                        }
                        buf.clear();
                        out.push(Raw::Close(lno));
                    }
                }
                _ => {
                    if buf.trim().is_empty() && !c.is_whitespace() {
                        buf.clear();
                        buf_line = lno;
                    }
                    buf.push(c);
                }
            }
        }
        buf.push('\n');
    }
    if !buf.trim().is_empty() {
        out.push(Raw::Text(buf, buf_line));
    }
    out
}

/// Open `{` minus `}` in `s`.
fn brace_balance(s: &str) -> i32 {
    s.chars().fold(0, |n, c| match c {
        '{' => n + 1,
        '}' => n - 1,
        _ => n,
    })
}

/// Is `b` (text before a `{`) an instruction whose operand list has begun? An instruction is an
/// opcode then whitespace then operands; a `{` right after the opcode is a vector operand too
/// (`ld.shared.v4.u32 {%r1, ...}, [addr]`), while a `{` after a directive or a `)` opens a block.
fn looks_like_operand_list(b: &str) -> bool {
    let t = b.trim_start();
    if t.starts_with('.') || t.is_empty() {
        return false;
    }
    t.split_whitespace().count() >= 1 && !t.ends_with(')')
}

/// Split an operand list at top-level commas.
fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' | '[' | '(' => {
                depth += 1;
                cur.push(c);
            }
            '}' | ']' | ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn parse_err(line: u32, detail: impl Into<String>) -> SimError {
    SimError::Parse {
        ptx_line: line,
        detail: detail.into(),
    }
}

/// `.align N` and the element type and `name[N]` / `name` of a variable declaration's words.
fn parse_var_words(words: &[&str], line: u32) -> Result<(String, u64, u64, bool), SimError> {
    let mut align = 1u64;
    let mut elem = 1u64;
    let mut name_part = None;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w == ".align" {
            align = words
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| parse_err(line, "`.align` without a number"))?;
            i += 2;
            continue;
        }
        if let Some(t) = w.strip_prefix('.') {
            if let Some(sz) = type_size(t) {
                elem = sz as u64;
                align = align.max(1);
            }
            i += 1;
            continue;
        }
        name_part = Some(words[i..].join(""));
        break;
    }
    let np = name_part.ok_or_else(|| parse_err(line, "a declaration without a name"))?;
    let np = np.split('=').next().unwrap_or("").trim().to_string();
    if let Some(open) = np.find('[') {
        let name = np[..open].to_string();
        let inner = np[open + 1..].trim_end_matches(']').trim();
        if inner.is_empty() {
            return Ok((name, 0, align, true));
        }
        let n: u64 = inner
            .parse()
            .map_err(|_| parse_err(line, format!("array size `{inner}`")))?;
        Ok((name, n * elem, align.max(1), false))
    } else {
        Ok((np, elem, align.max(elem), false))
    }
}

/// Bytes of a PTX fundamental type name (without the dot).
pub fn type_size(t: &str) -> Option<u32> {
    Some(match t {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

/// A function header's return parameters and parameters: `.func (.param .b32 r) name (.param
/// ...)` has both lists; a list written before the name is the return list.
fn parse_params(header: &str, line: u32) -> Result<(Vec<ParamDecl>, Vec<ParamDecl>), SimError> {
    let mut groups = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in header.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            ')' => {
                depth -= 1;
                if depth == 0 {
                    groups.push((start, i));
                }
            }
            _ => {}
        }
    }
    // The name follows the return list: a list followed by an identifier is the return list.
    let named_after = |end: usize| {
        header[end + 1..]
            .trim_start()
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$')
    };
    let (rets, params) = match groups.as_slice() {
        [] => (None, None),
        [g] if named_after(g.1) => (Some(*g), None),
        [g] => (None, Some(*g)),
        [r, .., p] => (Some(*r), Some(*p)),
    };
    let list = |g: Option<(usize, usize)>| match g {
        Some((o, c)) => param_list(&header[o + 1..c], line),
        None => Ok(Vec::new()),
    };
    Ok((list(rets)?, list(params)?))
}

fn param_list(inner: &str, line: u32) -> Result<Vec<ParamDecl>, SimError> {
    let mut out = Vec::new();
    for p in split_operands(inner) {
        let words: Vec<&str> = p.split_whitespace().filter(|w| *w != ".param").collect();
        if words.is_empty() {
            continue;
        }
        let filtered: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| *w != ".ptr" && !w.starts_with(".global") && !w.starts_with(".shared"))
            .collect();
        // `.ptr .align 1` mentions an align for the pointee; drop `.align N` after `.ptr`.
        let (name, bytes, align, _) = parse_var_words(&filtered, line)?;
        out.push(ParamDecl {
            name,
            bytes: bytes as u32,
            align: align as u32,
        });
    }
    Ok(out)
}

/// Parse a module into functions and variables.
pub fn parse_module(text: &str) -> Result<Module, SimError> {
    let clean = strip_comments(text);
    let raws = split_raw(&clean);
    let mut m = Module::default();
    let mut i = 0;
    let mut loc = Loc::default();
    while i < raws.len() {
        match &raws[i] {
            Raw::Line(t, l) => {
                if let Some(rest) = t
                    .strip_prefix(".file")
                    .filter(|_| starts_with_word(t, ".file"))
                {
                    let mut it = rest.trim().splitn(2, char::is_whitespace);
                    let n: u32 = it
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| parse_err(*l, "`.file` without a number"))?;
                    let path = it.next().unwrap_or("").trim();
                    let path = path.split('"').nth(1).unwrap_or(path).to_string();
                    m.files.insert(n, path);
                } else if starts_with_word(t, ".loc") {
                    loc = parse_loc(t, *l)?;
                }
                i += 1;
            }
            Raw::Open(l) => return Err(parse_err(*l, "a `{` outside a function")),
            Raw::Close(l) => return Err(parse_err(*l, "an unmatched `}`")),
            Raw::Text(t, l) => {
                let t = t.trim();
                let is_fn = has_word(t, ".entry") || has_word(t, ".func");
                if is_fn {
                    let is_entry = has_word(t, ".entry");
                    let header = t.to_string();
                    let name = function_name(&header, *l)?;
                    let (rets, params) = parse_params(&header, *l)?;
                    // Skip line directives between the header and the body.
                    let mut j = i + 1;
                    while let Some(Raw::Line(lt, ll)) = raws.get(j) {
                        if starts_with_word(lt, ".loc") {
                            loc = parse_loc(lt, *ll)?;
                        }
                        j += 1;
                    }
                    match raws.get(j) {
                        Some(Raw::Open(_)) => {
                            let (body, next) = parse_body(&raws, j + 1, &mut loc)?;
                            m.functions.push(Function {
                                name,
                                is_entry,
                                params,
                                rets,
                                body,
                                line: *l,
                            });
                            i = next;
                        }
                        _ => {
                            // A prototype (`.extern .func ...;`): nothing to run.
                            i = j;
                        }
                    }
                } else if starts_with_word(t, ".section") {
                    // Debug sections: skip the braced block.
                    let mut j = i + 1;
                    let mut depth = 0;
                    while j < raws.len() {
                        match raws[j] {
                            Raw::Open(_) => depth += 1,
                            Raw::Close(_) => {
                                depth -= 1;
                                if depth == 0 {
                                    j += 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    i = j;
                } else {
                    let words: Vec<&str> = t.split_whitespace().collect();
                    let is_extern = words.first() == Some(&".extern");
                    let words: Vec<&str> = words
                        .into_iter()
                        .filter(|w| !matches!(*w, ".extern" | ".visible" | ".weak" | ".common"))
                        .collect();
                    match words.first().copied() {
                        Some(sp @ (".shared" | ".global" | ".const")) => {
                            let (name, bytes, align, unsized_) = parse_var_words(&words[1..], *l)?;
                            let (init, addresses) = match t.split_once('=') {
                                Some((_, v)) => parse_init(v, &words[1..], *l)?,
                                None => (Vec::new(), Vec::new()),
                            };
                            m.vars.push(ModuleVar {
                                space: sp.trim_start_matches('.').to_string(),
                                name,
                                bytes,
                                align,
                                is_extern: is_extern || unsized_,
                                init,
                                addresses,
                            });
                        }
                        _ => {
                            return Err(SimError::Unsupported {
                                opcode: format!("module-level `{}`", t.lines().next().unwrap_or(t)),
                                ptx_line: *l,
                            })
                        }
                    }
                    i += 1;
                }
            }
        }
    }
    Ok(m)
}

/// `= {1, 2, 3}` or `= 5` for a variable of the element type named in `words`; a 64-bit
/// element may be `generic(name)`, the address of variable `name` (placed at load time).
type Init = (Vec<u8>, Vec<(u64, String)>);

fn parse_init(v: &str, words: &[&str], line: u32) -> Result<Init, SimError> {
    let elem = words
        .iter()
        .find_map(|w| w.strip_prefix('.').and_then(type_size))
        .unwrap_or(1) as usize;
    let mut out = Vec::new();
    let mut addresses = Vec::new();
    for item in v
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split(',')
    {
        let s = item.trim();
        if s.is_empty() {
            continue;
        }
        let symbol = s
            .strip_prefix("generic(")
            .and_then(|r| r.strip_suffix(')'))
            .map(str::trim)
            .filter(|n| elem == 8 && !n.is_empty() && !n.contains(['+', '-', ' ']));
        if let Some(name) = symbol {
            addresses.push((out.len() as u64, name.to_string()));
            out.extend_from_slice(&[0u8; 8]);
            continue;
        }
        let val = parse_int(s).ok_or_else(|| parse_err(line, format!("initialiser `{s}`")))?;
        out.extend_from_slice(&val.to_le_bytes()[..elem.min(8)]);
    }
    Ok((out, addresses))
}

fn function_name(header: &str, line: u32) -> Result<String, SimError> {
    // The name is the word right before the parameter list (or the last word).
    let before = match header.rfind('(') {
        Some(p)
            if header[..p]
                .trim_end()
                .ends_with(|c: char| c.is_alphanumeric() || c == '_') =>
        {
            &header[..p]
        }
        _ => header,
    };
    let before = before.trim_end();
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == ')')
        .next()
        .unwrap_or("");
    if word.is_empty() || word.starts_with('.') {
        return Err(parse_err(line, "a function without a name"));
    }
    Ok(word.to_string())
}

/// A `.loc` line (not `.local`, which shares its first four letters).
/// `.loc file line col[, function_name ..., inlined_at f l c]`: (file, line, and the
/// `inlined_at` file and line, 0 where absent).
fn parse_loc(t: &str, l: u32) -> Result<Loc, SimError> {
    let words: Vec<&str> = t[4..]
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .collect();
    let f = words.first().and_then(|v| v.parse().ok());
    let n = words.get(1).and_then(|v| v.parse().ok());
    let at = words.iter().position(|w| *w == "inlined_at");
    let (cf, cl) = match at {
        Some(i) => (
            words.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(0),
            words.get(i + 2).and_then(|v| v.parse().ok()).unwrap_or(0),
        ),
        None => (0, 0),
    };
    match (f, n) {
        (Some(f), Some(n)) => Ok(Loc {
            file: f,
            line: n,
            caller_file: cf,
            caller_line: cl,
        }),
        _ => Err(parse_err(l, "`.loc` needs a file and a line")),
    }
}

/// Source position of an instruction from `.loc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Loc {
    pub file: u32,
    pub line: u32,
    /// Where the function this line belongs to was inlined (0: not inlined).
    pub caller_file: u32,
    pub caller_line: u32,
}

/// Resolve a `.loc`'s `inlined_at` to the outermost caller: NVVM names only the immediate
/// caller (`inlined_at 2 719`), whose own `.loc` line, seen earlier in the body, names its
/// caller in turn. The outermost is the kernel's own line.
fn resolve_caller(loc: &mut Loc, callers: &mut HashMap<(u32, u32), (u32, u32)>) {
    if loc.caller_line == 0 {
        return;
    }
    let mut at = (loc.caller_file, loc.caller_line);
    for _ in 0..16 {
        match callers.get(&at) {
            Some(&up) if up != at => at = up,
            _ => break,
        }
    }
    callers.insert((loc.file, loc.line), at);
    loc.caller_file = at.0;
    loc.caller_line = at.1;
}

fn parse_body(raws: &[Raw], mut i: usize, loc: &mut Loc) -> Result<(Vec<Item>, usize), SimError> {
    let mut items = Vec::new();
    let mut depth = 1;
    let mut callers: HashMap<(u32, u32), (u32, u32)> = HashMap::new();
    while i < raws.len() {
        match &raws[i] {
            Raw::Line(t, l) => {
                if starts_with_word(t, ".loc") {
                    *loc = parse_loc(t, *l)?;
                    resolve_caller(loc, &mut callers);
                }
            }
            Raw::Open(_) => {
                depth += 1;
                items.push(Item::Open);
            }
            Raw::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    return Ok((items, i + 1));
                }
                items.push(Item::Close);
            }
            Raw::Text(t, l) => {
                let mut rest = t.trim();
                let mut line = *l;
                // Labels: `name:` (not `::`), possibly several, before the statement.
                loop {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '%'))
                        .unwrap_or(rest.len());
                    if end > 0 && rest[end..].starts_with(':') && !rest[end..].starts_with("::") {
                        items.push(Item::Label(rest[..end].to_string()));
                        let consumed = &rest[..end + 1];
                        line += consumed.matches('\n').count() as u32;
                        rest = rest[end + 1..].trim_start_matches([' ', '\t', '\r']);
                        while let Some(r) = rest.strip_prefix('\n') {
                            line += 1;
                            rest = r.trim_start_matches([' ', '\t', '\r']);
                        }
                    } else {
                        break;
                    }
                }
                let rest = rest.trim();
                if rest.is_empty() {
                    i += 1;
                    continue;
                }
                items.extend(parse_stmt(rest, line, *loc)?);
            }
        }
        i += 1;
    }
    Err(parse_err(0, "a function body without its closing `}`"))
}

fn parse_stmt(t: &str, line: u32, loc: Loc) -> Result<Vec<Item>, SimError> {
    let mut t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    // `.reg.b32 f;` (no space before the type), as cuda_fp16.h's inline assembly writes it.
    if let Some(r) = t.strip_prefix(".reg.") {
        t = format!(".reg .{r}");
    }
    if let Some(rest) = t
        .strip_prefix(".reg")
        .filter(|_| starts_with_word(&t, ".reg"))
    {
        // `.reg .b32 %r<10>` or `.reg .pred p, q`
        let mut words = rest.split_whitespace();
        let ty = words
            .next()
            .ok_or_else(|| parse_err(line, "`.reg` without a type"))?
            .trim_start_matches('.')
            .to_string();
        let names: String = words.collect::<Vec<_>>().join("");
        let mut out = Vec::new();
        for n in names.split(',') {
            let n = n.trim();
            if let Some(open) = n.find('<') {
                let count: u32 = n[open + 1..]
                    .trim_end_matches('>')
                    .parse()
                    .map_err(|_| parse_err(line, format!("register range `{n}`")))?;
                out.push(Item::Reg {
                    ty: ty.clone(),
                    name: n[..open].to_string(),
                    count: Some(count),
                    line,
                });
            } else if !n.is_empty() {
                out.push(Item::Reg {
                    ty: ty.clone(),
                    name: n.to_string(),
                    count: None,
                    line,
                });
            }
        }
        return Ok(out);
    }
    // A `.param` inside a body declares a call's argument or return value (PTX ISA, "Parameter
    // State Space": `.param` variables in a function body are the call sites' parameters).
    for sp in [".local", ".shared", ".param"] {
        if let Some(rest) = t.strip_prefix(sp).filter(|_| starts_with_word(&t, sp)) {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (name, bytes, align, _) = parse_var_words(&words, line)?;
            return Ok(vec![Item::Var {
                space: sp[1..].to_string(),
                name,
                bytes,
                align,
                line,
            }]);
        }
    }
    if starts_with_word(&t, ".pragma") {
        return Ok(Vec::new());
    }
    let (guard, t) = match t.strip_prefix('@') {
        Some(g) => {
            let (p, rest) = g
                .split_once(' ')
                .ok_or_else(|| parse_err(line, "a guard without an instruction"))?;
            let (neg, p) = match p.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, p),
            };
            (Some((p.to_string(), neg)), rest.trim().to_string())
        }
        None => (None, t),
    };
    let (opcode, ops) = match t.split_once(' ') {
        Some((o, r)) => (o.to_string(), split_operands(r)),
        None => (t.clone(), Vec::new()),
    };
    Ok(vec![Item::Stmt(Stmt {
        line,
        loc,
        guard,
        opcode,
        operands: ops,
    })])
}

/// An integer literal: decimal, `0x` hex, octal-free, optional `U` suffix, optional sign.
pub fn parse_int(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches('U');
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if let Some(h) = s.strip_prefix("0f").or_else(|| s.strip_prefix("0F")) {
        if h.len() != 8 {
            return None;
        }
        u32::from_str_radix(h, 16).ok()? as u64
    } else if let Some(h) = s.strip_prefix("0d").or_else(|| s.strip_prefix("0D")) {
        if h.len() != 16 {
            return None;
        }
        u64::from_str_radix(h, 16).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = r#"
//
// Generated by NVIDIA NVVM Compiler
.version 9.0
.target sm_100a
.address_size 64

	// .globl	k
.extern .shared .align 1024 .b8 smem_raw[];

.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 .ptr .align 1 k_param_1,
	.param .u32 k_param_2
)
.maxntid 128, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<4>;

	.loc	1 50 3
	ld.param.u32 	%r1, [k_param_2];
	// begin inline asm
	{
	.reg .pred p;
	setp.ne.b32 p, %r1, 0;
	}
	// end inline asm
$L__BB0_2:
	@!%p1 bra 	$L__BB0_2;
	st.shared.v2.u32 	[%r2+8], {%r3, %r4};
	ret;
}
	.file	1 "/tmp/kernel.cu"
"#;

    #[test]
    fn parses_a_tiny_module() {
        let m = parse_module(TINY).unwrap();
        assert_eq!(m.functions.len(), 1);
        let f = &m.functions[0];
        assert_eq!(f.name, "k");
        assert!(f.is_entry);
        assert_eq!(f.params.len(), 3);
        assert_eq!((f.params[0].bytes, f.params[0].align), (128, 64));
        assert_eq!(f.params[1].bytes, 8);
        assert_eq!(f.params[2].bytes, 4);
        assert_eq!(m.vars.len(), 1);
        assert!(m.vars[0].is_extern);
        assert_eq!(m.files.get(&1).map(String::as_str), Some("/tmp/kernel.cu"));
        let stmts: Vec<&Stmt> = f
            .body
            .iter()
            .filter_map(|i| match i {
                Item::Stmt(s) => Some(s),
                _ => None,
            })
            .collect();
        let ops: Vec<&str> = stmts.iter().map(|s| s.opcode.as_str()).collect();
        assert_eq!(
            ops,
            [
                "ld.param.u32",
                "setp.ne.b32",
                "bra",
                "st.shared.v2.u32",
                "ret"
            ]
        );
        assert_eq!((stmts[0].loc.file, stmts[0].loc.line), (1, 50));
        assert_eq!(stmts[2].guard, Some(("%p1".to_string(), true)));
        assert_eq!(stmts[3].operands, ["[%r2+8]", "{%r3, %r4}"]);
        assert!(f
            .body
            .iter()
            .any(|i| matches!(i, Item::Label(l) if l == "$L__BB0_2")));
        assert_eq!(f.body.iter().filter(|i| matches!(i, Item::Open)).count(), 1);
    }

    #[test]
    fn literals() {
        assert_eq!(parse_int("0f3F800000"), Some(0x3F80_0000));
        assert_eq!(parse_int("-1"), Some(u64::MAX));
        assert_eq!(parse_int("0x10"), Some(16));
        assert_eq!(parse_int("7U"), Some(7));
        assert_eq!(parse_int("abc"), None);
    }
}
