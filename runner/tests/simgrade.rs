//! A Blackwell rubric graded on the PTX simulator, end to end through `runner grade`, with no
//! GPU: the stock step-3 kernel earns every point the simulator can award (its tests verified,
//! its executed requirements met, the speed test skipped); a kernel whose multicast commit sits
//! behind `if (M < 0)` passes its tests and loses the requirement, named; step 0's kernel, right
//! but without the 2-CTA MMA, loses both requirements. The children are confined by Landlock
//! where the kernel has it (the report says which), as in any grading.
//!
//! A kernel that spins ends as over its instruction budget (`timeout`), not as a hung grader.
//!
//! CPU time: four gradings of one f16 build each (NVRTC's compiles dominate), about 7 s of CPU
//! in all (10 s of wall time, one test at a time, on the 2-core machine of 2026-11-26).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runner-simgrade-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// step3-blackwell.toml with f16 tests only (one build to compile), a hidden test of its own
/// (so the hidden phase runs), and its requirements and speed test as shipped; `step` replaces
/// its step.
fn rubric(dir: &Path, step: u32) -> PathBuf {
    let text = std::fs::read_to_string(root().join("rubrics/step3-blackwell.toml")).unwrap();
    let text = text
        .replacen("\nstep = 3\n", &format!("\nstep = {step}\n"), 1)
        .replacen("dtype = \"bf16\"\n", "", 1);
    assert!(!text.contains("dtype = "), "one build: {text}");
    let path = dir.join(format!("step{step}-blackwell-f16.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Grade `kernel` (its text) under `rubric` with a secret; the report as JSON.
fn grade(dir: &Path, name: &str, kernel: &str, rubric: &Path) -> Value {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("kernel.cu"), kernel).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the simgrade test's secret: long enough\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("grade")
        .arg(&sub)
        .arg("--rubric")
        .arg(rubric)
        .arg("--secret-file")
        .arg(&secret)
        .args(["--json", "--allow-unconfined"])
        // No GPU is needed: none may be used.
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("a JSON report")
}

fn row<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {r:#}"))
}

fn step3() -> String {
    std::fs::read_to_string(root().join("steps/step3_collective_mma/src/kernel.cu")).unwrap()
}

/// The tests a student sees pass; the speed test is skipped (no B200), counting neither way.
fn tests_pass(r: &Value) {
    assert_eq!(r["compile"]["status"], "ok", "{r:#}");
    for t in ["public-gaussian-f16", "hidden-uniform-bf16"] {
        assert_eq!(row(r, t)["status"], "passed", "{t}: {r:#}");
    }
    let speed = row(r, "speed-f16");
    assert_eq!(speed["status"], "skipped");
    assert_eq!(speed["max_score"], 0.0);
    assert!(speed["detail"].as_str().unwrap().contains("needs a B200"));
    // No GPU was opened, and the report says what graded.
    assert!(r["gpu"]["name"].as_str().unwrap().contains("simulated"));
    assert!(r["compile"]["message"]
        .as_str()
        .unwrap()
        .contains("graded on the PTX simulator"));
    // Each test's schedule seed is recorded (hidden ones from the secret), so a failure replays.
    assert_ne!(row(r, "hidden-uniform-bf16")["seeds"]["schedule"], 0);
}

#[test]
fn the_stock_step3_kernel_earns_every_point_the_simulator_can_award() {
    let d = tmp("stock");
    let r = grade(&d, "stock", &step3(), &rubric(&d, 3));
    tests_pass(&r);
    for q in ["2cta-mma", "2cta-commit-multicast"] {
        let q = row(&r, q);
        assert_eq!(q["status"], "passed", "{q:#}");
        assert_eq!(q["score"], q["points"]);
        assert!(
            q["detail"]
                .as_str()
                .unwrap()
                .contains("in every cluster of every graded launch; the PTX simulator, in the graded launches of the tests"),
            "{q:#}"
        );
    }
    assert_eq!(r["score"], r["max_score"], "{r:#}");
    assert_eq!(r["max_score"], 70.0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_multicast_behind_if_m_negative_passes_its_tests_and_earns_no_multicast_points() {
    let d = tmp("dead");
    let stock = step3();
    let anchor = "      bw::mma_commit_2cta_multicast(&smem.load_empty[slot], 0b11);  // frees the slot in both CTAs";
    assert_eq!(stock.matches(anchor).count(), 1);
    // The commit reaches each CTA's barrier in turn, without multicast; the multicast is in the
    // PTX, behind a condition that never holds.
    let helper = r#"
__device__ __forceinline__ void cheat_commit_each_cta(u64* bar) {
  for (u32 cta = 0; cta < 2; ++cta) {
    if (wb::elect_one()) {
      asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                   ::"r"(wb::map_to_cta(wb::smem_u32(bar), cta))
                   : "memory");
    }
    __syncwarp();
  }
}
"#;
    let kernel_anchor = "extern \"C\" __global__ void __launch_bounds__(NUM_THREADS, 1)";
    let cheat = stock
        .replacen(kernel_anchor, &format!("{helper}{kernel_anchor}"), 1)
        .replacen(
            anchor,
            "      if (M < 0) bw::mma_commit_2cta_multicast(&smem.load_empty[slot], 0b11);\n      else cheat_commit_each_cta(&smem.load_empty[slot]);",
            1,
        );
    let r = grade(&d, "dead-multicast", &cheat, &rubric(&d, 3));
    tests_pass(&r);
    assert_eq!(row(&r, "2cta-mma")["status"], "passed");
    let q = row(&r, "2cta-commit-multicast");
    assert_eq!(q["status"], "failed", "{q:#}");
    assert_eq!(q["score"], 0.0);
    assert_eq!(q["flags"][0]["name"], "technique-not-executed");
    // Executed once per cluster tile (the accumulator's commit, covering no MMA of its own),
    // where every k-block of every cluster needs one.
    // The unit named is the first one processed, which the schedule picks: any cluster, any tile.
    let detail = q["detail"].as_str().unwrap();
    assert!(
        detail.contains(" executed 0 tcgen05.commit.cta_group::2.multicast that did the technique's work for cluster tile (0, ")
            && detail.contains("), k-block 0 in the launch of"),
        "{detail}"
    );
    assert_eq!(
        (r["score"].as_f64(), r["max_score"].as_f64()),
        (Some(60.0), Some(70.0))
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn step0s_kernel_is_right_and_loses_exactly_the_2cta_points() {
    let d = tmp("step0");
    let kernel = std::fs::read_to_string(root().join("steps/step0_naive/src/kernel.cu")).unwrap();
    let r = grade(&d, "step0", &kernel, &rubric(&d, 0));
    tests_pass(&r);
    for q in ["2cta-mma", "2cta-commit-multicast"] {
        let q = row(&r, q);
        assert_eq!(q["status"], "failed", "{q:#}");
        assert_eq!(q["flags"][0]["name"], "technique-not-executed");
        assert!(
            q["detail"].as_str().unwrap().contains(&format!(
                "executed 0 {} that did the technique's work",
                if q["name"] == "2cta-mma" {
                    "tcgen05.mma.cta_group::2"
                } else {
                    "tcgen05.commit.cta_group::2.multicast"
                }
            )),
            "{q:#}"
        );
    }
    assert_eq!(
        (r["score"].as_f64(), r["max_score"].as_f64()),
        (Some(40.0), Some(70.0))
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_kernel_that_spins_ends_over_its_budget_not_as_a_hung_grader() {
    let d = tmp("spin");
    let kernel = step3().replacen(
        "  const int num_k_blocks = K / TILE_K;",
        "  const int num_k_blocks = K / TILE_K;\n  { volatile int spin = 0; while (M > 0) spin = spin + 1; }",
        1,
    );
    let path = rubric(&d, 3);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("[limits]\n", "[limits]\nsim_steps = 2000000\n", 1),
    )
    .unwrap();
    let start = std::time::Instant::now();
    let r = grade(&d, "spin", &kernel, &path);
    for t in ["public-gaussian-f16", "hidden-uniform-bf16"] {
        let t = row(&r, t);
        assert_eq!(t["status"], "failed", "{t:#}");
        assert_eq!(t["flags"][0]["name"], "timeout");
        assert!(
            t["detail"]
                .as_str()
                .unwrap()
                .contains("exceeded its budget of 2000000 simulated steps"),
            "{t:#}"
        );
    }
    assert_eq!(r["score"], 0.0);
    assert!(start.elapsed().as_secs() < 120, "{:?}", start.elapsed());
    let _ = std::fs::remove_dir_all(&d);
}
