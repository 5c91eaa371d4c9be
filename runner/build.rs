//! Records the commit the runner is built from, so results written on another machine (whose copy
//! of the repository may carry no or a stale `.git`) name the code that produced them.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        // --no-optional-locks: do not refresh .git/index, whose rewrite would look like a change.
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    let suffix = if dirty { "+changes" } else { "" };
    println!("cargo:rustc-env=WB_BUILD_COMMIT={commit}{suffix}");
    // A new commit or a checkout (HEAD, the branch refs), or an edit to the sources: record the
    // commit again. Not `.git/index`: every `git status` rewrites it, which rebuilt the runner.
    for p in [
        "../.git/HEAD",
        "../.git/refs/heads",
        "../.git/packed-refs",
        "../Cargo.toml",
        "../Cargo.lock",
        "../runner",
        "../steps",
        "../book/src",
        "../rubrics",
        "../exercises",
        "../tests",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
}
