//! Folders the user names for output (`--out DIR`, `--write FILE`): the runner never loses a
//! file it did not write.
//!
//! A folder the runner creates, or finds empty, becomes its own: it leaves [`MARKER`] there, and a
//! later command may overwrite what it wrote (a regrade, a rerun of the selftest). Any other
//! existing folder is the user's: a command either refuses it ([`OutDir::claim_own`]) or writes
//! only names that do not exist yet ([`OutDir::claim`]). Nothing is written before the command
//! has checked everything else it can check (the GPU, the inputs): see [`OutDir::create`].
//! (`runner book --out` keeps its own marker, as mdbook empties its folder.)

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Left in every folder the runner made its own: the permission to overwrite its files later.
pub const MARKER: &str = ".runner-output";

/// An output folder, checked but not yet written to.
#[derive(Debug, Clone)]
pub struct OutDir {
    path: PathBuf,
    /// The folder is new, empty or marked: the runner may overwrite in it.
    own: bool,
    /// The flag that named it, for messages (`--out`).
    flag: &'static str,
}

impl OutDir {
    /// Check `dir` for a command that may write into a folder of the user's, as long as every
    /// name it writes there is new ([`OutDir::fresh`]). Writes nothing.
    pub fn claim(dir: &Path, flag: &'static str) -> Result<OutDir> {
        let shown = dir.display();
        let own = match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(e).with_context(|| format!("cannot read {flag} {shown}")),
            Ok(m) if !m.is_dir() => {
                bail!("{flag} {shown} is not a folder: give a folder (a new one is created)")
            }
            Ok(_) if is_checkout(dir) => bail!(
                "{flag} {shown} is the workbook checkout: give a folder of its own (e.g. {flag} grades), so that its files stay apart from the repository's"
            ),
            Ok(_) => {
                let own = dir.join(MARKER).is_file()
                    || std::fs::read_dir(dir)
                        .with_context(|| format!("cannot read {flag} {shown}"))?
                        .next()
                        .is_none();
                // A folder of the checkout's own (steps/, rubrics/, book/src): new names there
                // would sit among the sources, and show in `git status`.
                if !own && inside_checkout(dir) {
                    bail!(
                        "{flag} {shown} is a folder of the workbook checkout holding its files: give a folder of its own (e.g. {flag} grades), so that its files stay apart from the repository's"
                    );
                }
                own
            }
        };
        Ok(OutDir {
            path: dir.to_path_buf(),
            own,
            flag,
        })
    }

    /// Check `dir` for a command that writes a tree of its own there (and replaces it on a
    /// rerun): a folder of the user's that holds files is refused. Writes nothing.
    pub fn claim_own(dir: &Path, flag: &'static str, what: &str) -> Result<OutDir> {
        let d = Self::claim(dir, flag)?;
        if !d.own {
            bail!(
                "{flag} {} holds files that no runner command wrote there ({what}, replacing them on a rerun): give a new or empty folder",
                dir.display()
            );
        }
        Ok(d)
    }

    /// A folder the runner chose itself (under `target/` or its cache), never the user's.
    pub fn runners(dir: &Path, flag: &'static str) -> OutDir {
        OutDir {
            path: dir.to_path_buf(),
            own: true,
            flag,
        }
    }

    /// [`OutDir::claim_own`] and [`OutDir::create`] at once: where a command has checked its
    /// GPU and is about to write.
    pub fn make_own(dir: &Path, flag: &'static str, what: &str) -> Result<()> {
        Self::claim_own(dir, flag, what)?.create()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Check that `rel` (a file or a folder inside) may be written: always in a folder of the
    /// runner's, only if it does not exist in a folder of the user's. Returns its path.
    pub fn fresh(&self, rel: impl AsRef<Path>) -> Result<PathBuf> {
        let p = self.path.join(rel.as_ref());
        if !self.own && std::fs::symlink_metadata(&p).is_ok() {
            bail!(
                "{} exists, and {} {} holds files that no runner command wrote there: the runner writes only new names in it (move it aside, or give a new or empty folder)",
                p.display(),
                self.flag,
                self.path.display()
            );
        }
        Ok(p)
    }

    /// Create the folder (and its marker, where it is the runner's own).
    pub fn create(&self) -> Result<()> {
        std::fs::create_dir_all(&self.path)
            .with_context(|| format!("cannot create {}", self.path.display()))?;
        if self.own {
            let m = self.path.join(MARKER);
            if !m.is_file() {
                std::fs::write(
                    &m,
                    "Written by the workbook's runner: a later runner command may overwrite the files it wrote in this folder.\n",
                )
                .with_context(|| format!("cannot write {}", m.display()))?;
            }
        }
        Ok(())
    }
}

/// Whether `dir` is the root of the workbook checkout the runner uses.
fn is_checkout(dir: &Path) -> bool {
    let (Some(root), Ok(dir)) = (common::project::root(), dir.canonicalize()) else {
        return false;
    };
    root.canonicalize().is_ok_and(|r| r == dir)
}

/// Whether `dir` lies inside the workbook checkout the runner uses (its root included).
fn inside_checkout(dir: &Path) -> bool {
    let (Some(root), Ok(dir)) = (common::project::root(), dir.canonicalize()) else {
        return false;
    };
    root.canonicalize().is_ok_and(|r| dir.starts_with(r))
}

/// Check that `--write FILE` may write `file`: a new file always; an existing one only with
/// `force`, and never a file git tracks (a kernel of the workbook, say).
pub fn check_new_file(file: &Path, force: bool) -> Result<()> {
    let shown = file.display();
    match std::fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {shown}")),
        Ok(m) if m.is_dir() => bail!("{shown} is a folder: give a file name"),
        Ok(_) => {}
    }
    if git_tracks(file) {
        bail!("{shown} is a file of the repository (git tracks it): write to a new file, e.g. my_kernel.cu");
    }
    if !force {
        bail!("{shown} exists: give a new file name, or --force to overwrite it");
    }
    Ok(())
}

/// Whether `file` is tracked by the git repository it lies in (false without git, or outside
/// any repository).
fn git_tracks(file: &Path) -> bool {
    let Ok(abs) = file.canonicalize() else {
        return false;
    };
    let (Some(dir), Some(name)) = (abs.parent(), abs.file_name()) else {
        return false;
    };
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["ls-files", "--error-unmatch", "--"])
        .arg(name)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `--trace STEM`: an existing folder (the files go inside it), or a file stem in an existing
/// folder (`DIR/t` writes `DIR/t-step3-...`). The runner creates no folder the user did not
/// name as an output folder, and writes nothing beside a device, a FIFO or a socket (`--trace
/// /dev/full` would write `/dev/full-step3-sim.txt`): refused at once, before anything runs.
pub fn check_trace_stem(stem: &Path) -> Result<()> {
    if stem.as_os_str().is_empty() {
        bail!("--trace needs a folder or a file stem (an empty path was given)");
    }
    if let Ok(meta) = std::fs::metadata(stem) {
        if meta.is_dir() {
            return Ok(());
        }
        if !meta.is_file() {
            bail!(
                "--trace {}: it is {}; give an existing folder, or a file stem inside one",
                stem.display(),
                common::compile::file_kind(&meta)
            );
        }
    }
    let parent = match stem.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        bail!(
            "--trace {}: the folder {} does not exist (give an existing folder, or a file stem inside one; the runner creates no folder for a trace)",
            stem.display(),
            parent.display()
        );
    }
    if parent.starts_with("/dev") || parent.starts_with("/proc") || parent.starts_with("/sys") {
        bail!(
            "--trace {}: {} holds devices and kernel files, not traces: give a folder of your own",
            stem.display(),
            parent.display()
        );
    }
    Ok(())
}

/// Where a command writes without `--out`: `target/NAME` in the checkout (a build folder git
/// ignores), never the current folder; outside any checkout, the user's cache (as the
/// toolkit's), else the temp folder.
pub fn default_out(name: &str) -> PathBuf {
    if let Some(root) = common::project::root() {
        return root.join("target").join(name);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("blackwell-workbook").join(name))
        .unwrap_or_else(|| std::env::temp_dir().join(format!("workbook-{name}")))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_default_output_folder_is_the_checkouts_build_folder_never_the_current_one() {
        // `runner check sim` and `grade --selftest` without --out (N-finding: check-results/
        // appeared in whatever folder the command ran from).
        let d = super::default_out("check-results");
        assert!(d.is_absolute(), "{}", d.display());
        assert!(d.ends_with("target/check-results"), "{}", d.display());
        assert_ne!(d.parent(), std::env::current_dir().ok().as_deref());
    }

    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("outdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_folder_of_the_users_is_refused_or_written_only_with_new_names() {
        let d = temp("claim");
        // New: the runner's own, created with its marker.
        let o = OutDir::claim_own(&d, "--out", "its reports").unwrap();
        assert!(o.own && !d.exists(), "checking writes nothing");
        o.create().unwrap();
        assert!(d.join(MARKER).is_file());
        std::fs::write(d.join("grade.json"), "{}").unwrap();
        // Marked: still its own, so a rerun may overwrite.
        let o = OutDir::claim_own(&d, "--out", "its reports").unwrap();
        o.fresh("grade.json").unwrap();
        // The user's: refused by claim_own, new names only under claim.
        std::fs::remove_file(d.join(MARKER)).unwrap();
        let e = OutDir::claim_own(&d, "--out", "its reports")
            .unwrap_err()
            .to_string();
        assert!(e.contains("new or empty folder"), "{e}");
        let o = OutDir::claim(&d, "--out").unwrap();
        assert!(!o.own);
        let e = o.fresh("grade.json").unwrap_err().to_string();
        assert!(e.contains("only new names"), "{e}");
        o.fresh("results.json").unwrap();
        o.create().unwrap();
        assert!(
            !d.join(MARKER).exists(),
            "a folder of the user's is never marked"
        );
        // A file is not a folder.
        let e = OutDir::claim(&d.join("grade.json"), "--out")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a folder"), "{e}");
        // Empty: the runner's.
        let empty = d.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(OutDir::claim(&empty, "--out").unwrap().own);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn write_refuses_an_existing_file_without_force_and_a_tracked_file_always() {
        let d = temp("write");
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("notes.cu");
        check_new_file(&f, false).unwrap();
        std::fs::write(&f, "my notes").unwrap();
        let e = check_new_file(&f, false).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        check_new_file(&f, true).unwrap();
        let e = check_new_file(&d, true).unwrap_err().to_string();
        assert!(e.contains("is a folder"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
        // The runner's Cargo.toml is tracked (in a git checkout): refused even with --force.
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        if manifest.join("../.git").exists() {
            let e = check_new_file(&manifest.join("Cargo.toml"), true)
                .unwrap_err()
                .to_string();
            assert!(e.contains("git tracks it"), "{e}");
        }
    }
}
