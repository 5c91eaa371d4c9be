//! The workbook checkout the runner works in, found at run time (never the build machine's path,
//! so a runner copied to a lab machine works there): `WORKBOOK_ROOT` if set, else the current
//! folder or the nearest folder above it with the workbook's layout, else the checkout the
//! executable sits in (`target/release/runner`). Kernels, headers and chapters are read from it,
//! so edits show without a rebuild; with no checkout, the copies built into the runner are used,
//! and [`embedded_note`] says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `WORKBOOK_ROOT`: the checkout to use, wherever the runner is started.
pub const ROOT_ENV: &str = "WORKBOOK_ROOT";

/// Whether `dir` has the workbook's layout.
pub fn is_checkout(dir: &Path) -> bool {
    dir.join("steps/include/common.cuh").is_file() && dir.join("book/book.toml").is_file()
}

fn find() -> Option<PathBuf> {
    if let Some(root) = std::env::var_os(ROOT_ENV) {
        let root = PathBuf::from(root);
        // A wrong WORKBOOK_ROOT is not silently replaced by another checkout.
        return is_checkout(&root).then(|| std::path::absolute(&root).unwrap_or(root));
    }
    let from_cwd = std::env::current_dir().ok();
    let from_exe = std::env::current_exe().ok();
    [from_cwd, from_exe]
        .into_iter()
        .flatten()
        .find_map(|start| {
            start
                .ancestors()
                .find(|d| is_checkout(d))
                .map(Path::to_path_buf)
        })
}

static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The checkout, if there is one (looked up once per process).
pub fn root() -> Option<&'static Path> {
    ROOT.get_or_init(find).as_deref()
}

/// From now on, use the copies built into the runner and no checkout: the grader's children
/// compile with the headers the grader was built with, and under their confinement they could
/// not read a checkout anyway. False if the checkout was already looked up.
pub fn use_built_in() -> bool {
    ROOT.set(None).is_ok()
}

/// A repository file, e.g. `steps/include/common.cuh`: the checkout's copy if there is one (an
/// unreadable file there is an error, not a silent fallback), else `embedded`.
pub fn read(rel: &str, embedded: &str) -> std::io::Result<String> {
    match root() {
        Some(r) => std::fs::read_to_string(r.join(rel)),
        None => Ok(embedded.to_string()),
    }
}

/// One line for a runner started outside any checkout: what it uses instead.
pub fn embedded_note() -> Option<String> {
    if root().is_some() {
        return None;
    }
    let here = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "the current folder".into());
    Some(format!(
        "note: no workbook checkout in {here} or above it (nor {ROOT_ENV}): using the kernels, headers and chapters built into this runner; edits to files elsewhere do not count"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkout_is_found_from_where_the_tests_run() {
        let r = root().expect("the tests run inside the checkout");
        assert!(is_checkout(r));
        assert!(!is_checkout(&r.join("steps")));
        assert!(embedded_note().is_none());
        let text = read("steps/include/common.cuh", "").unwrap();
        assert!(!text.is_empty());
    }
}
