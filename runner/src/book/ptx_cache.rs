//! The book's widget PTX, cached between builds of the book.
//!
//! Every `runner book` puts in the page the sm_100a PTX of every step's kernel and of each of
//! its seeded bugs: over a hundred NVRTC runs, two thirds of a build's CPU time. NVRTC is
//! deterministic in its inputs, so a build keeps each PTX under `target/book-ptx/`, named by the
//! SHA-256 of everything the compile reads: the NVRTC library and its version, the toolkit's
//! include folder, the target and its macros, the `-D` definitions, the kernel's path and text,
//! and the text of every workbook header as the compile would read it (the checkout's, edits
//! included). Any change to one of them is another name, so a stale PTX is never found; a
//! failed compile is not kept (its error is reported afresh each build).
//!
//! The cache is best effort: a file that cannot be read or written means a compile, never an
//! error. Files not used for a day are removed, so the folder holds about one book's worth.

use anyhow::{anyhow, Result};
use common::compile::{compile_ptx, nvrtc_version, KernelSource, Target, HEADERS};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Entries unused for this long are removed (once per process, at the first lookup).
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// `compile_ptx(source, target, defines)`, from the cache where an identical compile was kept.
pub fn ptx(source: &KernelSource, target: Target, defines: &[(String, String)]) -> Result<String> {
    let Some(dir) = dir() else {
        return compile_ptx(source, target, defines);
    };
    let key = key(source, target, defines)?;
    cached(&dir, &key, || compile_ptx(source, target, defines))
}

/// `target/book-ptx` of the checkout (or of `CARGO_TARGET_DIR`); none outside a checkout.
fn dir() -> Option<PathBuf> {
    let root = common::project::root()?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join("book-ptx");
    static PRUNED: std::sync::Once = std::sync::Once::new();
    PRUNED.call_once(|| prune(&dir, SystemTime::now()));
    Some(dir)
}

/// The name of a compile: the SHA-256 of every input it reads, each length-prefixed.
fn key(source: &KernelSource, target: Target, defines: &[(String, String)]) -> Result<String> {
    let tk = common::toolkit::get()?;
    let (major, minor) = nvrtc_version()?;
    let mut parts: Vec<String> = vec![
        "workbook book-ptx 1".into(),
        format!("nvrtc {major}.{minor}"),
        tk.nvrtc_lib.display().to_string(),
        tk.include_dir.display().to_string(),
        target.arch().into(),
    ];
    parts.extend(target.macros().iter().map(|m| m.to_string()));
    for (k, v) in defines {
        parts.push(format!("-D{k}={v}"));
    }
    parts.push(source.path.clone());
    parts.push(source.text.clone());
    for (name, embedded) in HEADERS {
        let rel = format!("steps/include/{name}");
        let text = common::project::read(&rel, embedded)
            .map_err(|e| anyhow!("cannot read {rel} in the workbook checkout: {e}"))?;
        parts.push(rel);
        parts.push(text);
    }
    Ok(digest(&parts))
}

fn digest(parts: &[String]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The PTX kept in `dir` under `key`, or `compile`'s, then kept (written whole, then renamed,
/// so a build at the same time never reads half a file).
fn cached(dir: &Path, key: &str, compile: impl FnOnce() -> Result<String>) -> Result<String> {
    let file = dir.join(format!("{key}.ptx"));
    if let Ok(ptx) = std::fs::read_to_string(&file) {
        // Used now: the pruning keeps what builds use.
        if let Ok(f) = std::fs::File::options().append(true).open(&file) {
            let _ = f.set_modified(SystemTime::now());
        }
        return Ok(ptx);
    }
    let ptx = compile()?;
    if std::fs::create_dir_all(dir).is_ok() {
        let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &ptx).is_ok() && std::fs::rename(&tmp, &file).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(ptx)
}

/// Remove the entries of `dir` (and leftover temporary files) last used before `now - KEEP`.
fn prune(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > KEEP));
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("book-ptx-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_lookup_is_served_without_compiling_and_a_failure_is_not_kept() {
        let d = scratch("hit");
        let runs = std::cell::Cell::new(0);
        let compile = |text: &str| {
            runs.set(runs.get() + 1);
            Ok(text.to_string())
        };
        assert_eq!(cached(&d, "k1", || compile("ptx one")).unwrap(), "ptx one");
        assert_eq!(cached(&d, "k1", || compile("other")).unwrap(), "ptx one");
        assert_eq!(cached(&d, "k2", || compile("ptx two")).unwrap(), "ptx two");
        assert_eq!(runs.get(), 2, "the second lookup of k1 compiled again");
        let err = cached(&d, "k3", || Err(anyhow!("step 3 does not compile")));
        assert!(err.is_err());
        assert!(!d.join("k3.ptx").exists(), "a failed compile was kept");
        assert_eq!(cached(&d, "k3", || compile("fixed")).unwrap(), "fixed");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".ptx")), "{names:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn every_input_changes_the_name_and_equal_inputs_keep_it() {
        let base: Vec<String> = ["nvrtc 13.0", "sm_100a", "-DDTYPE=f16", "k.cu", "int x;"]
            .map(String::from)
            .to_vec();
        let same = digest(&base);
        assert_eq!(same, digest(&base.clone()));
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i].push(' ');
            assert_ne!(digest(&changed), same, "input {i} did not change the name");
        }
        // Length prefixes: moving text from one input to the next is another name.
        let mut moved = base.clone();
        moved[3] = "k.cuint".into();
        moved[4] = " x;".into();
        assert_ne!(digest(&moved), same);
    }

    #[test]
    fn pruning_removes_what_was_not_used_for_a_day_and_keeps_the_rest() {
        let d = scratch("prune");
        std::fs::create_dir_all(&d).unwrap();
        let now = SystemTime::now();
        for (name, age) in [
            ("old.ptx", 2 * 24 * 3600),
            ("new.ptx", 60),
            (".x.1.tmp", 3 * 24 * 3600),
        ] {
            let f = std::fs::File::create(d.join(name)).unwrap();
            f.set_modified(now - Duration::from_secs(age)).unwrap();
        }
        prune(&d, now);
        let mut left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["new.ptx"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
