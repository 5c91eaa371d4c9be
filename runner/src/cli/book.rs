//! `runner book`: build the HTML book, and serve it (with the reader's kernel and last trace).
//!
//! mdbook empties its output folder before it writes ("remove stale output"), so `--out` is
//! guarded: a folder is only ever emptied if an earlier `runner book` left its marker there, and
//! the repository, `book/` and any folder holding a book's sources are refused outright.

use anyhow::{bail, Context, Result};
use common::toolkit::project_root;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Left in every folder `runner book` builds into: the permission to empty it next time.
pub const MARKER: &str = ".runner-book";

#[derive(clap::Args)]
pub struct Args {
    /// Output folder (default: book/build). It must be new, empty, or an earlier `runner book`
    /// output (which holds a .runner-book marker): the build empties it first.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Serve the built book (on 127.0.0.1 unless --bind says otherwise).
    #[arg(long)]
    serve: bool,
    /// With --serve: the port; 0 picks a free one (the address served is printed).
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// With --serve: the address to listen on, e.g. 0.0.0.0 to serve a lab's network.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// With --serve: your edited kernel (a .cu file, or a .toml of edits, as `runner step N
    /// --kernel` takes it), compiled to PTX and run by step --step's widget in the page.
    #[arg(long, value_name = "FILE", requires_all = ["serve", "step"])]
    kernel: Option<PathBuf>,
    /// With --kernel: the step whose launch and chapter the kernel belongs to.
    #[arg(long, value_name = "N", requires = "kernel")]
    step: Option<u32>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if !a.serve {
        for (given, flag) in [
            (a.port != 3000, "--port"),
            (a.bind != std::net::IpAddr::from([127, 0, 0, 1]), "--bind"),
        ] {
            if given {
                eprintln!("warning: {flag} applies to --serve, which is not given: ignored");
            }
        }
    }
    // The reader's kernel (its path and compiled PTX) is served to whoever reaches the address:
    // only this machine.
    if a.kernel.is_some() && !a.bind.is_loopback() {
        bail!(
            "--kernel serves your kernel's path and its PTX, so only on a loopback address (--bind {} is not one); serve a lab's network without --kernel",
            a.bind
        );
    }
    if let Some(out) = &a.out {
        check_out_dir(out, &project_root())?;
    }
    // The reader's kernel is checked and compiled before the book is built: a typo fails fast.
    let kernel = match (a.kernel, a.step) {
        (Some(path), Some(step)) => Some(crate::book::serve::ReaderKernel::new(step, path)?),
        _ => None,
    };
    let lock = build_lock()?;
    let dir = crate::book::build(a.out)?;
    std::fs::write(
        dir.join(MARKER),
        "Built by `runner book`: a later `runner book --out` may empty this folder.\n",
    )
    .with_context(|| format!("cannot write {}", dir.join(MARKER).display()))?;
    drop(lock);
    println!("book built: {}", dir.join("index.html").display());
    if a.serve {
        crate::book::serve::serve(&dir, a.bind, a.port, kernel)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One `runner book` builds at a time in a checkout: mdbook empties its output folder first, so
/// a second build at once deleted the first one's files under it ("Unable to remove stale HTML
/// output"). The lock is `target/runner-book.lock` (ignored by git); without a checkout's book
/// there is nothing to lock (the build then says so).
fn build_lock() -> Result<Option<std::fs::File>> {
    let root = project_root();
    if !root.join("book/book.toml").is_file() {
        return Ok(None);
    }
    let dir = root.join("target");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("runner-book.lock");
    let f = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(Some(f))
}

/// Refuse an output folder the build would wrongly empty: the project, its `book/`, any folder
/// holding `book/src` or `src/SUMMARY.md` (someone's book), any folder that holds the project,
/// and any non-empty folder without [`MARKER`].
pub fn check_out_dir(out: &Path, project: &Path) -> Result<()> {
    let shown = out.display();
    // Inside the sources, the HTML would be copied into every later build of the book.
    let sources = project
        .join("book")
        .join("src")
        .canonicalize()
        .unwrap_or_else(|_| project.join("book").join("src"));
    if let Some(existing) = out
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && a.exists())
        .and_then(|a| a.canonicalize().ok())
    {
        if existing.starts_with(&sources) {
            bail!("--out {shown} lies inside the book's sources (book/src): every later build would copy it into the book; give a folder outside book/src");
        }
    }
    let meta = match std::fs::metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {shown}")),
    };
    if !meta.is_dir() {
        bail!("--out {shown} is not a folder");
    }
    let dir = out
        .canonicalize()
        .with_context(|| format!("cannot read {shown}"))?;
    let project = project.canonicalize().unwrap_or_else(|_| project.into());
    if project.starts_with(&dir) || dir == project.join("book") {
        bail!("--out {shown} holds the workbook's own files, which the build would delete: give a new folder, e.g. --out /tmp/workbook-book");
    }
    if dir.join("book").join("src").is_dir() || dir.join("src").join("SUMMARY.md").is_file() {
        bail!(
            "--out {shown} holds a book's sources, which the build would delete: give a new folder"
        );
    }
    let mut entries = std::fs::read_dir(&dir).with_context(|| format!("cannot read {shown}"))?;
    if entries.next().is_some() && !dir.join(MARKER).is_file() {
        bail!("--out {shown} is not empty and no earlier `runner book` built into it; the build would delete what it holds: give a new or empty folder");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("runner-book-out-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_readers_kernel_is_served_on_loopback_only() {
        let args = |bind: [u8; 4]| Args {
            out: None,
            serve: true,
            port: 0,
            bind: std::net::IpAddr::from(bind),
            kernel: Some(PathBuf::from("no-such-kernel.cu")),
            step: Some(3),
        };
        let e = run(args([0, 0, 0, 0])).unwrap_err().to_string();
        assert!(e.contains("only on a loopback address"), "{e}");
        // On loopback the refusal is not this one (here: the missing file).
        let e = run(args([127, 0, 0, 1])).unwrap_err().to_string();
        assert!(!e.contains("loopback"), "{e}");
    }

    #[test]
    fn out_dir_guard_refuses_folders_it_did_not_create() {
        let project = project_root();
        let d = scratch("guard");
        // A new folder and an empty one are fine.
        check_out_dir(&d.join("new"), &project).unwrap();
        for inside in ["book/src/html", "book/src"] {
            let e = check_out_dir(&project.join(inside), &project)
                .unwrap_err()
                .to_string();
            assert!(e.contains("inside the book's sources"), "{inside}: {e}");
        }
        check_out_dir(&d, &project).unwrap();
        // A folder holding someone's files is not.
        std::fs::write(d.join("thesis.tex"), "x").unwrap();
        let e = check_out_dir(&d, &project).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        // ... until an earlier build's marker says it is the book's.
        std::fs::write(d.join(MARKER), "").unwrap();
        check_out_dir(&d, &project).unwrap();
        // Sources of a book are refused even with the marker.
        std::fs::create_dir_all(d.join("book/src")).unwrap();
        let e = check_out_dir(&d, &project).unwrap_err().to_string();
        assert!(e.contains("book's sources"), "{e}");
        // The project, its book/ and a folder above the project are always refused.
        for p in [project.clone(), project.join("book")] {
            let e = check_out_dir(&p, &project).unwrap_err().to_string();
            assert!(e.contains("workbook's own files"), "{p:?}: {e}");
        }
        if let Some(parent) = project.parent() {
            assert!(check_out_dir(parent, &project).is_err());
        }
        // A file is not a folder.
        let e = check_out_dir(&d.join("thesis.tex"), &project)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a folder"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
