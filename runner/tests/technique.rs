//! Technique requirements without a GPU (`--compile-only`): the stock kernels have every
//! instruction their rubrics count, yet earn nothing for it (only an executed count, measured on
//! a GPU, earns a requirement's points: compiled only, each is skipped); a kernel that is correct
//! but lacks the instruction (step 0's) loses exactly those points, with it named; a requirement
//! written wrong stops the grader with one clear line.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runner-technique-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Grade `kernel` (a path under steps/) with `rubric`, compile only; the report as JSON.
/// The scratch folder is named after the rubric too: tests run in parallel, and two of them
/// grade a submission called `stock` (one folder would let one test copy its kernel over the
/// other's).
fn grade(kernel: &str, rubric: &std::path::Path, name: &str) -> Value {
    let stem = rubric.file_stem().unwrap().to_string_lossy();
    let d = tmp(&format!("{stem}-{name}"));
    let sub = d.join(format!("{name}.cu"));
    std::fs::copy(root().join(kernel), &sub).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("grade")
        .arg(&sub)
        .arg("--rubric")
        .arg(rubric)
        .args(["--compile-only", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&d);
    serde_json::from_slice(&o.stdout).expect("a JSON report")
}

fn requirements(r: &Value) -> Vec<&Value> {
    r["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "technique")
        .collect()
}

fn rubric_file(name: &str) -> PathBuf {
    root().join("rubrics").join(name)
}

/// The stock kernel has every instruction its rubric counts, and earns none of their points
/// compiled only: each requirement is skipped (its executed count needs the measured launch on a
/// GPU), and so are the trace facts (`trace`: their names, worth no points), which need the
/// traced launch: the score is 0 of 0, every point skipped.
fn meets_all(kernel: &str, rubric: &str, trace: &[&str]) {
    let r = grade(kernel, &rubric_file(rubric), "stock");
    assert_eq!(r["compile"]["status"], "ok", "{r:#}");
    let reqs = requirements(&r);
    assert!(!reqs.is_empty(), "{rubric} has no requirements");
    for q in &reqs {
        assert_eq!(q["status"], "skipped", "{kernel}: {q:#}");
        assert_eq!(
            (q["score"].as_f64(), q["max_score"].as_f64()),
            (Some(0.0), Some(0.0))
        );
        assert!(q["flags"].as_array().unwrap().is_empty());
        let detail = q["detail"].as_str().unwrap();
        if trace.contains(&q["name"].as_str().unwrap()) {
            assert_eq!(q["points"], 0.0, "a trace fact is worth nothing: {q:#}");
            assert!(
                detail.contains(
                    "not checked: compiled only (a pre-screen: no GPU was used), and a trace fact needs one traced launch on a Hopper GPU"
                ),
                "{q:#}"
            );
        } else {
            assert!(
                detail.starts_with("not measured: compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on "),
                "{q:#}"
            );
        }
    }
    assert_eq!(r["score"], 0.0, "{r:#}");
    assert_eq!(r["max_score"], 0.0);
    // Skipped points: every test's and every requirement's.
    let all: f64 = r["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["points"].as_f64().unwrap())
        .sum();
    assert_eq!(r["skipped_points"].as_f64(), Some(all));
    assert!(r["flags"].as_array().unwrap().is_empty(), "{r:#}");
}

#[test]
fn the_stock_step3_twin_has_its_instructions_but_compiled_only_earns_nothing() {
    meets_all(
        "steps/step3_collective_mma/src/kernel_sm90.cu",
        "step3-hopper.toml",
        &["producer-loads-only"],
    );
}

#[test]
fn the_stock_step5_twin_has_its_instructions_but_compiled_only_earns_nothing() {
    meets_all(
        "steps/step5_epilogue_warpgroup/src/kernel_sm90.cu",
        "step5-hopper.toml",
        &["store-warp"],
    );
}

/// Compiled only, the text report says no technique was measured, and why.
#[test]
fn compiled_only_the_text_report_says_no_technique_was_measured() {
    let d = tmp("text");
    let sub = d.join("stock.cu");
    std::fs::copy(
        root().join("steps/step3_collective_mma/src/kernel_sm90.cu"),
        &sub,
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("grade")
        .arg(&sub)
        .arg("--rubric")
        .arg(rubric_file("step3-hopper.toml"))
        .arg("--compile-only")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.lines().next().unwrap_or("").ends_with(
            "0.0 / 0.0 points (compiled only: no test ran and no technique was measured, which needs a GPU; 140.0 points skipped)"
        ),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("producer-loads-only"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("skipped") && line.contains("loads-by-producer-only"),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_stock_step3_blackwell_kernel_has_its_instructions_but_compiled_only_earns_nothing() {
    meets_all(
        "steps/step3_collective_mma/src/kernel.cu",
        "step3-blackwell.toml",
        &[],
    );
}

fn step0_rubric(name: &str) -> String {
    let text = std::fs::read_to_string(rubric_file(name)).unwrap();
    assert!(text.contains("\nstep = 3\n"), "{name} names step 3");
    text.replacen("\nstep = 3\n", "\nstep = 0\n", 1)
}

#[test]
fn step0s_hopper_twin_lacks_only_the_multicast() {
    // The step-3 rubric's requirements under step 0's own launch plan (the kernel checks its
    // launch at compile time): step 0's twin has the fp32 wgmma but no multicast load.
    let d = tmp("rubric");
    let rubric = d.join("step3-hopper-as-step0.toml");
    std::fs::write(&rubric, step0_rubric("step3-hopper.toml")).unwrap();
    let r = grade("steps/step0_naive/src/kernel_sm90.cu", &rubric, "step0");
    assert_eq!(r["compile"]["status"], "ok", "{r:#}");
    let reqs = requirements(&r);
    let by_name = |n: &str| *reqs.iter().find(|q| q["name"] == n).unwrap();
    let multicast = by_name("tma-multicast");
    assert_eq!(multicast["status"], "failed");
    assert!(multicast["detail"]
        .as_str()
        .unwrap()
        .starts_with("missing UTMALDG.MULTICAST"));
    // In the binary, but only its executed count would earn its points: skipped.
    assert_eq!(by_name("wgmma-fp32")["status"], "skipped");
    // The trace fact needs the GPU: skipped, counting neither way.
    assert_eq!(by_name("producer-loads-only")["status"], "skipped");
    assert_eq!(
        (r["score"].as_f64(), r["max_score"].as_f64()),
        (Some(0.0), Some(20.0))
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_requirement_written_wrong_is_one_clear_error() {
    let d = tmp("bad");
    let sub = d.join("k.cu");
    std::fs::write(&sub, "extern \"C\" __global__ void gemm_kernel() {}\n").unwrap();
    let text = std::fs::read_to_string(rubric_file("step3-hopper.toml")).unwrap();
    for (from, to, says) in [
        (
            "executed = \"UTMALDG.MULTICAST\"",
            "executed = \"UTMALDG..MULTICAST\"",
            "requirements[0] (\"tma-multicast\"): \"UTMALDG..MULTICAST\": write an upper-case SASS opcode",
        ),
        // Lower case is a PTX class, which the simulator counts on Blackwell rubrics only.
        (
            "executed = \"UTMALDG.MULTICAST\"",
            "executed = \"utmaldg.multicast\"",
            "requirements[0] (\"tma-multicast\"): utmaldg.multicast is a PTX instruction class, which the simulator counts on a Blackwell (sm_100a) kernel",
        ),
        (
            "executed = \"HGMMA.F32\"",
            "executed = \"HGMMA.F32\"\nat_least = 5\nat_most = 2",
            "requirements[1] (\"wgmma-fp32\"): at_least (5) is above at_most (2)",
        ),
        (
            "executed = \"HGMMA.F32\"",
            "instruction = \"HGMMA.F32\"",
            "unknown field `instruction`",
        ),
        (
            "per = \"cta-k-block\"      # each CTA",
            "per = \"warp\"      # each CTA",
            "requirements[0] (\"tma-multicast\"): per \"warp\": one of launch, cta-k-block",
        ),
        (
            "points = 0\ntrace",
            "points = 10\ntrace",
            "requirements[2] (\"producer-loads-only\"): a trace fact is read from records the kernel writes itself",
        ),
        // Traces are recorded on Hopper: the same rubric for the Blackwell kernel is refused.
        (
            "arch = \"sm_90a\"",
            "arch = \"sm_100a\"",
            "requirements[2] (\"producer-loads-only\"): trace facts are checked on Hopper (sm_90a) rubrics only",
        ),
    ] {
        assert!(text.contains(from));
        let rubric = d.join("r.toml");
        std::fs::write(&rubric, text.replacen(from, to, 1)).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_runner"))
            .arg("grade")
            .arg(&sub)
            .arg("--rubric")
            .arg(&rubric)
            .arg("--compile-only")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        // One `error:` line says where and what; a TOML syntax error adds TOML's source line
        // and caret below it (no other `error:` line).
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: rubric ") && first.contains(says), "{err}");
        assert_eq!(err.matches("error:").count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A Blackwell kernel graded under the tcgen05 emulation on Hopper runs its sm_90a build, which
/// has no tcgen05 by design: the requirements are checked on the native sm_100a build the
/// compile child also makes. The compile child alone, as the grader starts it (a GPU picks the
/// emulated target, so the job is written here).
#[test]
fn under_the_emulation_the_native_sm100a_build_is_the_one_disassembled() {
    let tk = common::toolkit::find_or_install().expect("a toolkit");
    let nvdisasm = tk.nvdisasm().expect("nvdisasm");
    let toolkit_root = tk.include_dir.parent().unwrap().to_path_buf();
    let d = tmp("emulated");
    let source =
        std::fs::read_to_string(root().join("steps/step3_collective_mma/src/kernel.cu")).unwrap();
    let job = serde_json::json!({
        "phase": "compile", "step": 3, "arch": "sm_100a", "params": [],
        "target": "Sm90aEmulated", "source_name": "kernel.cu", "source": source,
        "dtypes": ["bf16"], "tests": [], "launch_seconds": 30, "log_bytes": 16384,
        "disassemble": true,
    });
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.args(["grade-worker", "--phase", "compile"])
        .current_dir(&d)
        .env_clear()
        .env("WORKBOOK_CUDA", &toolkit_root)
        .env("WORKBOOK_NO_INSTALL", "1")
        .env("WORKBOOK_GRADE_NVDISASM", &nvdisasm)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Confined as the grader would (nvdisasm runs inside the confinement), where the kernel
    // has Landlock: the documented version query, as the grader makes it.
    // SAFETY: no ruleset, size 0, the VERSION flag.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1 as libc::c_uint,
        )
    };
    if abi <= 0 {
        c.arg("--unconfined");
    }
    let mut child = c.spawn().unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        &serde_json::to_vec(&job).unwrap(),
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value =
        serde_json::from_slice(&std::fs::read(d.join("compile.json")).unwrap()).unwrap();
    let entries = report.as_array().unwrap();
    assert_eq!(entries.len(), 2, "{report:#}");
    assert_eq!(entries[0]["dtype"], "bf16 (native sm_100a)");
    let native = &entries[0]["sass"]["Ok"];
    assert!(
        native["UTCHMMA.2CTA"].as_u64().unwrap_or(0) > 0,
        "{:#}",
        entries[0]["sass"]
    );
    // The emulated build, which runs the tests, is not the one checked.
    assert_eq!(entries[1]["dtype"], "bf16");
    assert!(entries[1]["sass"].is_null(), "{:#}", entries[1]);
    let _ = std::fs::remove_dir_all(&d);
}
