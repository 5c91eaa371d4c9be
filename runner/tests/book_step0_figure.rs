//! Review S25: step 0's timeline figure is drawn from the simulator's own trace of step 0, and
//! stays true to the kernel. The figure (`assets/step0-timeline.svg`) is what
//! `runner/src/book/step0_figure.rs` draws from the committed trace (the `figures` test checks
//! that); this test runs a fresh `runner step 0 --sim --trace` and fails when its structure (the
//! order of warp 0's issues, each slot's states, each refill's wait) differs from the committed
//! trace's, so a kernel or simulator change that alters the timeline makes the committed figure
//! fail here until it is regenerated.

#[allow(dead_code)]
#[path = "../src/book/step0_figure.rs"]
mod step0_figure;

use std::path::PathBuf;
use std::process::Command;

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runner crate sits in the checkout")
        .to_path_buf()
}

#[test]
fn the_committed_step0_trace_matches_a_fresh_one() {
    let committed = std::fs::read_to_string(checkout().join(step0_figure::TRACE))
        .expect("the committed trace of step 0");
    let dir = std::env::temp_dir().join(format!("wb-step0-figure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let stem = dir.join("t");
    // The committed trace's command, with its output moved to the temporary folder.
    let args: Vec<&str> = step0_figure::REGENERATE
        .split_whitespace()
        .skip(1)
        .take_while(|a| *a != "assets/results/trace")
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(&args)
        .arg(&stem)
        .current_dir(checkout())
        .output()
        .expect("runs the runner");
    assert!(
        out.status.success(),
        "{:?} failed:\n{}{}",
        args,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = std::fs::read_to_string(dir.join("t-step0-sim.json")).expect("the fresh trace");
    let _ = std::fs::remove_dir_all(&dir);
    let (want, got) = (
        step0_figure::structure(&committed).expect("the committed trace reads"),
        step0_figure::structure(&fresh).expect("the fresh trace reads"),
    );
    assert_eq!(
        want,
        got,
        "a fresh trace of step 0 differs from {}: regenerate it with `{}` and redraw the figure \
         with WORKBOOK_WRITE_FIGURES=1 cargo test -p runner figures",
        step0_figure::TRACE,
        step0_figure::REGENERATE
    );
    // What the caption says, from the committed trace: each load STAGES − 1 k-blocks ahead.
    assert!(
        want.contains(&"load k4 after the MMAs of k0 completed".to_string()),
        "{want:?}"
    );
    let svg = step0_figure::draw(&committed).expect("the figure draws");
    assert!(svg.contains("3 k-blocks of MMA ahead"), "{svg}");
    let on_disk = std::fs::read_to_string(checkout().join("assets/step0-timeline.svg"))
        .expect("the committed figure");
    assert_eq!(
        on_disk, svg,
        "assets/step0-timeline.svg is not what the committed trace draws"
    );
}
