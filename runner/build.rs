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
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    let suffix = if dirty { "+changes" } else { "" };
    println!("cargo:rustc-env=WB_BUILD_COMMIT={commit}{suffix}");
    // A new commit, a checkout or staged edits: rebuild so the recorded commit follows.
    for p in ["../.git/HEAD", "../.git/index", "../.git/refs/heads"] {
        println!("cargo:rerun-if-changed={p}");
    }
}
