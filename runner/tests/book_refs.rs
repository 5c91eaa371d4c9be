//! The book cannot drift from the code: every backticked reference in `book/src/*.md` and in the
//! kernels' comments (`steps/**/*.cu`, `steps/include/*.cuh`) that names something of this
//! repository must resolve against the tree:
//!
//! - a file path under one of the repository's top-level folders must exist;
//! - a Rust path that starts with one of the workspace's crates (`common::step::Plan`,
//!   `step0_naive::BLACKWELL`, `LoadedKernel::plan` after its module is named) must name modules
//!   that exist and items declared in them;
//! - an identifier (`persistent_ctas`, `tile_coords`, `Config`) must occur in the code outside
//!   the book.
//!
//! Names that belong to other projects (CUTLASS, JAX, Triton, …) are listed in `FOREIGN` with
//! where they come from, so a new one is a decision, not an accident. Rust paths in kernel
//! comments are checked whether backticked or not: a comment like "(from step0_naive::Config)"
//! outlived the struct it named.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("runner/ has a parent")
        .to_path_buf()
}

/// Identifiers and paths the book quotes from other projects, with their origin.
const FOREIGN: &[(&str, &str)] = &[
    (
        "make_producer_start_state",
        "CUTLASS, cutlass/pipeline/sm90_pipeline.hpp",
    ),
    (
        "cutlass_profiler",
        "CUTLASS's profiler, used by the Pallas guide",
    ),
    ("tests/pallas/mgpu_examples_test.py", "the jax repository"),
    ("do_bench", "Triton's triton.testing"),
    ("do_bench_cudagraph", "Triton's triton.testing"),
    ("torch.randn", "PyTorch"),
    ("ab_stages", "the CuTeDSL notebook's parameter"),
    ("setmaxnreg", "PTX"),
    (
        "phaseParity",
        "the PTX ISA's operand name in mbarrier.test_wait/try_wait",
    ),
    (
        "waitComplete",
        "the PTX ISA's operand name in mbarrier.test_wait/try_wait",
    ),
    (
        "UCGABAR_ARV",
        "SASS of barrier.cluster.arrive (nvdisasm output)",
    ),
    (
        "UCGABAR_WAIT",
        "SASS of barrier.cluster.wait (nvdisasm output)",
    ),
    ("run_autograder", "Gradescope's autograder entry script"),
    (
        "KernelTmaWarpSpecializedPingpong",
        "CUTLASS, include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_pingpong.hpp",
    ),
    (
        "__cluster_dims__",
        "CUDA C++'s kernel attribute for a compile-time cluster shape",
    ),
];

/// Top-level entries of this repository: a path starting with one of them is ours.
fn own_roots() -> HashSet<String> {
    let mut out = HashSet::new();
    for e in std::fs::read_dir(root())
        .expect("repository root")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name != "target" && !name.starts_with('.') {
            out.insert(name);
        }
    }
    out.insert(".ci".into());
    out
}

/// Every file under `dir` (relative to the root), skipping build output and VCS folders.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "target" || name == ".git" || name == "build" || name == ".cuda" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The repository as the checks see it.
struct Tree {
    root: PathBuf,
    /// Whole-word identifiers of the code (not the book).
    words: HashSet<String>,
    /// Crate name → its `src` folder.
    crates: Vec<(String, PathBuf)>,
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

impl Tree {
    fn load() -> Tree {
        let root = root();
        let mut files = Vec::new();
        walk(&root, &mut files);
        let mut words = HashSet::new();
        for f in &files {
            let rel = f.strip_prefix(&root).unwrap_or(f);
            // This file plants stale names on purpose; they must not count as code.
            if rel.starts_with("book")
                || rel.starts_with("assets")
                || rel == Path::new("runner/tests/book_refs.rs")
            {
                continue;
            }
            let code = matches!(
                f.extension().and_then(|e| e.to_str()),
                Some("rs" | "cu" | "cuh" | "toml" | "sh" | "py")
            );
            if !code {
                continue;
            }
            if let Ok(t) = std::fs::read_to_string(f) {
                words.extend(identifiers(&t).map(str::to_string));
            }
        }
        let mut crates = vec![
            ("common".to_string(), root.join("steps/common/src")),
            ("runner".to_string(), root.join("runner/src")),
        ];
        for e in std::fs::read_dir(root.join("steps"))
            .expect("steps/")
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("step") && e.path().join("src").is_dir() {
                crates.push((name, e.path().join("src")));
            }
        }
        Tree {
            root,
            words,
            crates,
        }
    }

    fn crate_dir(&self, name: &str) -> Option<&PathBuf> {
        self.crates.iter().find(|(n, _)| n == name).map(|(_, d)| d)
    }

    /// Does `file` declare `name` (a function, type, constant, module, variant or re-export)?
    fn declares(file: &str, name: &str) -> bool {
        let kw = [
            "fn ", "struct ", "enum ", "const ", "static ", "trait ", "type ", "mod ",
        ];
        file.lines().any(|l| {
            let t = l.trim_start();
            let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
            let t = t.strip_prefix("pub ").unwrap_or(t);
            let t = t.strip_prefix("unsafe ").unwrap_or(t);
            let t = t.strip_prefix("async ").unwrap_or(t);
            let item = kw.iter().any(|k| {
                t.strip_prefix(k).is_some_and(|rest| {
                    rest.starts_with(name)
                        && !rest[name.len()..]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
            });
            // An enum variant or a struct field: `Name,` `Name {` `Name(` `name:` at line start.
            let member = t.starts_with(name)
                && matches!(
                    t[name.len()..].chars().next(),
                    Some(',' | '{' | '(' | ':' | ' ')
                )
                && !t.starts_with("//");
            let reexport = t.starts_with("use ") && identifiers(t).any(|w| w == name);
            item || member || reexport
        })
    }

    /// Resolve `krate::a::b::Item::member`: modules must exist as files, the first non-module
    /// segment must be declared in the last module, later ones somewhere in the crate.
    fn resolve_rust_path(&self, path: &str) -> Result<(), String> {
        let path = path.trim_end_matches("()");
        let segs: Vec<&str> = path.split("::").collect();
        let Some(dir) = self.crate_dir(segs[0]) else {
            return Err(format!("{} is not a crate of this workspace", segs[0]));
        };
        let mut dir = dir.clone();
        // runner's items live in both its library (lib.rs) and its binary (main.rs).
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.is_file())
            .collect();
        let mut module_text: String = roots
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect::<Vec<_>>()
            .join("\n");
        let mut i = 1;
        while i < segs.len() {
            let s = segs[i];
            let as_file = dir.join(format!("{s}.rs"));
            let as_dir = dir.join(s).join("mod.rs");
            let next = if as_file.is_file() {
                Some(as_file)
            } else if as_dir.is_file() {
                Some(as_dir)
            } else {
                None
            };
            match next {
                Some(f) => {
                    module_text = std::fs::read_to_string(&f).map_err(|e| e.to_string())?;
                    dir = dir.join(s);
                    i += 1;
                }
                None => break,
            }
        }
        if i == segs.len() {
            return Ok(()); // a module
        }
        if !Tree::declares(&module_text, segs[i]) {
            return Err(format!(
                "`{}` declares no `{}`",
                segs[..i].join("::"),
                segs[i]
            ));
        }
        // Members of the item (a method, variant or associated constant): declared in the crate.
        let crate_dir = self.crate_dir(segs[0]).cloned().unwrap_or_default();
        let mut files = Vec::new();
        walk(&crate_dir, &mut files);
        let texts: Vec<String> = files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "rs"))
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect();
        for s in &segs[i + 1..] {
            if !texts.iter().any(|t| Tree::declares(t, s)) {
                return Err(format!("no `{s}` is declared in crate `{}`", segs[0]));
            }
        }
        Ok(())
    }

    /// A `Type::member` path without its crate (`LoadedKernel::plan`): both must be declared in
    /// some crate of the workspace.
    fn resolve_type_path(&self, path: &str) -> Result<(), String> {
        let path = path.trim_end_matches("()");
        let segs: Vec<&str> = path.split("::").collect();
        let mut texts = Vec::new();
        for (_, d) in &self.crates {
            let mut files = Vec::new();
            walk(d, &mut files);
            texts.extend(
                files
                    .iter()
                    .filter(|f| f.extension().is_some_and(|e| e == "rs"))
                    .filter_map(|f| std::fs::read_to_string(f).ok()),
            );
        }
        for s in &segs {
            if !texts.iter().any(|t| Tree::declares(t, s)) {
                return Err(format!("no `{s}` is declared in the workspace"));
            }
        }
        Ok(())
    }

    fn resolve_file(&self, path: &str) -> Result<(), String> {
        // Patterns such as `steps/stepN_*` or `trace-stepN-ARCH.svg`: `*` and a run of capitals
        // (a placeholder) match anything within one path component.
        let mut candidates = vec![self.root.clone()];
        for comp in path.trim_end_matches('/').split('/') {
            let mut pattern = String::new();
            for c in comp.chars() {
                let wild = c == '*' || c.is_ascii_uppercase();
                if !(wild && pattern.ends_with('*')) {
                    pattern.push(if wild { '*' } else { c });
                }
            }
            let mut next = Vec::new();
            for c in &candidates {
                for e in std::fs::read_dir(c).into_iter().flatten().flatten() {
                    if glob(&pattern, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            }
            candidates = next;
        }
        if candidates.is_empty() {
            Err(format!("no file or folder {path}"))
        } else {
            Ok(())
        }
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, rest)) => {
            name.starts_with(pre)
                && (0..=name.len() - pre.len()).any(|i| {
                    name.is_char_boundary(pre.len() + i) && glob(rest, &name[pre.len() + i..])
                })
        }
    }
}

/// The backticked spans of markdown text outside fenced code blocks and `{{#…}}` markers.
fn backticked(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find('`') {
            let after = &rest[i + 1..];
            let Some(j) = after.find('`') else { break };
            out.push((n + 1, after[..j].to_string()));
            rest = &after[j + 1..];
        }
    }
    out
}

/// What kind of reference a span is, if it is one the checks resolve.
#[derive(Debug, PartialEq)]
enum Ref {
    File(String),
    RustPath(String),
    TypePath(String),
    Ident(String),
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn classify(span: &str, own: &HashSet<String>, crates: &[&str]) -> Option<Ref> {
    let s = span.trim();
    if s.contains(' ') || s.is_empty() {
        return None;
    }
    if s.contains('/') {
        let first = s.split('/').next().unwrap_or("");
        let looks_like_path = s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/_-.*".contains(c));
        return (own.contains(first) && looks_like_path).then(|| Ref::File(s.to_string()));
    }
    let bare = s.trim_end_matches("()");
    // `tma_store_wait_read<N>`: the template argument is not part of the name.
    let bare = bare.split('<').next().unwrap_or(bare);
    if bare.contains("::") {
        let segs: Vec<&str> = bare.split("::").collect();
        if !segs.iter().all(|p| is_ident(p)) {
            return None;
        }
        if crates.contains(&segs[0]) {
            return Some(Ref::RustPath(bare.to_string()));
        }
        // `LoadedKernel::plan`: a type of ours and its member.
        if segs[0]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
            && segs.len() == 2
        {
            return Some(Ref::TypePath(bare.to_string()));
        }
        return None;
    }
    if !is_ident(bare) {
        return None;
    }
    let has_lower = bare.chars().any(|c| c.is_ascii_lowercase());
    let has_upper = bare.chars().any(|c| c.is_ascii_uppercase());
    // Names with an underscore, CamelCase and SCREAMING_CASE are code; a plain lowercase word
    // (`it`, `kb`) is too easily English to check.
    (bare.contains('_') || (has_upper && has_lower) || (has_upper && bare.len() > 1))
        .then(|| Ref::Ident(bare.to_string()))
}

/// Every unresolved reference in `text` (markdown when `md`, else a kernel's source, whose
/// comments are checked), as "line: reference: why".
fn stale(tree: &Tree, text: &str, md: bool) -> Vec<String> {
    let own = own_roots();
    let crate_names: Vec<&str> = tree.crates.iter().map(|(n, _)| n.as_str()).collect();
    let foreign: HashSet<&str> = FOREIGN.iter().map(|(n, _)| *n).collect();
    let spans: Vec<(usize, String)> = if md {
        backticked(text)
    } else {
        // Kernel comments: backticked spans, and any `crate::path` written without backticks.
        let mut v = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let Some(i) = line.find("//") else { continue };
            let comment = &line[i + 2..];
            for (_, s) in backticked(comment) {
                v.push((n + 1, s));
            }
            for w in comment.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
                if w.contains("::") && crate_names.contains(&w.split("::").next().unwrap_or("")) {
                    v.push((n + 1, w.trim_end_matches(':').to_string()));
                }
            }
        }
        v
    };
    let mut out = Vec::new();
    for (line, span) in spans {
        if span.contains("{{") || foreign.contains(span.trim()) {
            continue;
        }
        let Some(r) = classify(&span, &own, &crate_names) else {
            continue;
        };
        let res = match &r {
            Ref::File(p) => tree.resolve_file(p),
            Ref::RustPath(p) => tree.resolve_rust_path(p),
            Ref::TypePath(p) => tree.resolve_type_path(p),
            Ref::Ident(w) => {
                if tree.words.contains(w) || foreign.contains(w.as_str()) {
                    Ok(())
                } else {
                    Err(format!("`{w}` occurs nowhere in the code"))
                }
            }
        };
        if let Err(why) = res {
            out.push(format!("{line}: `{span}`: {why}"));
        }
    }
    out
}

fn book_chapters() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("book/src"))
        .expect("book/src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    v.sort();
    v
}

fn kernels() -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(&root().join("steps"), &mut files);
    files.retain(|p| p.extension().is_some_and(|e| e == "cu" || e == "cuh"));
    files.sort();
    files
}

#[test]
fn every_reference_in_the_book_and_the_kernel_comments_resolves() {
    let tree = Tree::load();
    let mut all = Vec::new();
    for f in book_chapters() {
        let text = std::fs::read_to_string(&f).unwrap();
        for s in stale(&tree, &text, true) {
            all.push(format!(
                "{}:{s}",
                f.strip_prefix(&tree.root).unwrap().display()
            ));
        }
    }
    for f in kernels() {
        let text = std::fs::read_to_string(&f).unwrap();
        for s in stale(&tree, &text, false) {
            all.push(format!(
                "{}:{s}",
                f.strip_prefix(&tree.root).unwrap().display()
            ));
        }
    }
    assert!(
        all.is_empty(),
        "stale references (fix the text, or list a name of another project in FOREIGN):\n{}",
        all.join("\n")
    );
}

#[test]
fn the_check_catches_stale_references() {
    let tree = Tree::load();
    // The references the review found stale, planted again: each must be reported.
    let planted = "Tuning lives in `step0_naive::Config`; see `common::step::persistent_ctas` and \
                   change `persistent_ctas`; the plan is `Kernel::plan`; the file is \
                   `steps/step0_naive/src/kernel_sm100.cu`.";
    let found = stale(&tree, planted, true);
    assert_eq!(found.len(), 5, "{found:#?}");
    // A kernel comment naming a removed struct without backticks.
    let kernel = "// The host sets TILE_M (from step0_naive::Config) and the element type.\n";
    assert_eq!(stale(&tree, kernel, false).len(), 1);
    // And what exists resolves.
    let fine =
        "`step0_naive::BLACKWELL`, `common::model::tiling::tile_coords`, `LoadedKernel::plan`, \
                `common::model::phases`, `tile_coords`, `steps/step0_naive/src/kernel.cu`, \
                `steps/stepN_*`, `assets/results/trace-stepN-ARCH.svg`, `load_full`.";
    assert!(
        stale(&tree, fine, true).is_empty(),
        "{:#?}",
        stale(&tree, fine, true)
    );
}

/// Every relative link and image of the built HTML book points at a file of the build, and every
/// `#anchor` at an id of its page.
#[test]
fn the_built_book_has_no_broken_links() {
    let out = std::env::temp_dir().join(format!("wb-book-links-{}", std::process::id()));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["book", "--out", out.to_str().expect("utf-8 temp dir")])
        .output()
        .expect("runner runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pages: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .collect();
    let ids = |html: &str| -> HashSet<String> {
        html.split("id=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .map(str::to_string)
            .collect()
    };
    let mut broken = Vec::new();
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        for attr in ["href=\"", "src=\""] {
            for link in html.split(attr).skip(1).filter_map(|s| s.split('"').next()) {
                if link.contains("://")
                    || link.starts_with("mailto:")
                    || link.starts_with("javascript:")
                {
                    continue;
                }
                let link = link.replace("&amp;", "&");
                let (path, frag) = link.split_once('#').unwrap_or((&link, ""));
                let target = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(path)
                };
                if !target.exists() {
                    broken.push(format!("{}: {link}", page.display()));
                } else if !frag.is_empty()
                    && target.extension().is_some_and(|e| e == "html")
                    && !ids(&std::fs::read_to_string(&target).unwrap()).contains(frag)
                {
                    broken.push(format!("{}: {link} (no such anchor)", page.display()));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(pages.len() > 10, "the book has its pages");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
