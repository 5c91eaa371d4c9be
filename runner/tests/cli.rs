//! The runner as a user meets it: every command, and the error paths (one line, non-zero exit,
//! never a panic).

use std::path::PathBuf;
use std::process::{Command, Output};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("runner runs")
}

fn runner_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("runner runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stderr without the `note:` lines the runner prints on the way (a first run installs the
/// toolkit and says so, whichever test that happens in).
fn stderr_without_notes(o: &Output) -> String {
    stderr(o)
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A user error: exit code 2, one `error:` line, no panic or backtrace.
fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr_without_notes(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// A usage error clap reports (a value its parser refused): exit 2, one `error:` line naming the
/// value, then only clap's pointer to `--help` (never its tip to write `-- -1`), no panic.
fn assert_usage_error(o: &Output, needle: &str) {
    let err = stderr_without_notes(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "one error line: {err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(
        !err.contains("tip:") && !err.contains("unexpected argument"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// A `step` that went well: exit 0 where every kernel ran and verified; exit 3 where a kernel
/// was only built (no GPU that runs it: "compiled for ... only", `"ran": false`), never 0 then.
fn assert_step_ok(o: &Output) {
    let out = stdout(o);
    let built_only = out.contains(" only") || out.contains("\"ran\": false");
    assert_eq!(
        o.status.code(),
        Some(if built_only { 3 } else { 0 }),
        "{out}{}",
        stderr(o)
    );
}

/// A scratch folder of one test, removed when the test ends (passing or failing): the tests
/// leave nothing in the temp folder.
struct Tmp(PathBuf);

impl std::ops::Deref for Tmp {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Tmp {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("runner-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

#[test]
fn list_shows_the_ladder() {
    let o = runner(&["list"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("Basic pipelined kernel"), "{out}");
    let o = runner(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "workbook-list/1");
    assert_eq!(v["steps"][0]["number"], 0);
    assert_eq!(v["steps"][0]["crate"], "steps/step0_naive");
}

#[test]
fn step_0_reports_its_sm100a_build_or_runs() {
    let o = runner(&["step", "0"]);
    assert_step_ok(&o);
    let out = stdout(&o);
    assert!(out.contains("Step 0"), "{out}");
    // Without a usable GPU (CI): the compile report; on a GPU: a verified run.
    assert!(out.contains("UTCHMMA") || out.contains("verify"), "{out}");
    if out.contains("compiled for sm_100a only") {
        assert!(out.contains("registers"), "{out}");
        assert!(out.contains("local memory (LDL/STL): 0"), "{out}");
    }
}

#[test]
fn step_emulate_without_a_gpu_reports_the_emulation_build() {
    let o = runner(&["step", "4", "--emulate"]);
    let out = stdout(&o);
    if out.contains("compiled for sm_90a (the emulation build) only") {
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(out.contains("UTMALDG"), "TMA stays native: {out}");
        assert!(!out.contains("UTCHMMA"), "no tcgen05 on sm_90: {out}");
    } else {
        // On an H100/H200 it runs; elsewhere (a B200) --emulate is refused.
        assert!(out.contains("verify") || !o.status.success(), "{out}");
    }
}

#[test]
fn step_json_is_machine_readable() {
    // One kernel: one run, in the same {"runs": [...]} object.
    let o = runner(&["step", "0", "--arch", "sm_100a", "--json"]);
    assert_step_ok(&o);
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(all["runs"].as_array().map(Vec::len), Some(1), "{all}");
    let v = &all["runs"][0];
    assert_eq!(v["step"], 0);
    assert_eq!(v["arch"], "sm_100a");
    assert_eq!(v["kernel"], "blackwell");
    if v["ran"] == false {
        assert!(v["sass"]["histogram"]["UTCHMMA"].as_u64().unwrap() > 0);
        assert!(v["compile"]["resources"]["registers"].as_u64().unwrap() > 0);
        assert!(v["reason"].as_str().unwrap().contains("GPU"));
    }
    // Without a GPU both kernels are reported: {"runs": [twin, Blackwell]}.
    let o = runner(&["step", "2", "--json"]);
    assert_step_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    if let Some(runs) = v["runs"].as_array() {
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0]["arch"], "sm_90a");
        assert_eq!(runs[1]["arch"], "sm_100a");
        if runs[0]["ran"] == false {
            assert!(
                runs[0]["sass"]["histogram"]["HGMMA.64x256x16.F32"]
                    .as_u64()
                    .unwrap()
                    > 0
            );
            assert!(runs[0]["sass"]["histogram"]["UTMASTG.2D"].as_u64().unwrap() > 0);
        }
        // Without a GPU the Blackwell kernel runs on the CPU simulator; elsewhere its build or
        // its run is reported.
        if runs[1]["simulated"] == true {
            assert_eq!(runs[1]["verification"]["passed"], true, "{}", runs[1]);
            assert!(runs[1]["sim"]["instructions"].as_u64().unwrap() > 0);
        } else if runs[1]["ran"] == false {
            assert!(runs[1]["sass"]["histogram"]["UTCHMMA"].as_u64().unwrap() > 0);
        }
    }
}

#[test]
fn step_reports_registers_of_the_real_build_never_a_vacuous_zero() {
    // Both builds of step 4: without a GPU from ptxas' report; on a GPU from the loaded
    // function too (cuFuncGetAttribute), whatever the compile log held.
    let o = runner(&["step", "4", "--json"]);
    assert_step_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    let runs = v["runs"].as_array().expect("both builds");
    for run in runs {
        let r = &run["compile"]["resources"];
        let regs = r["registers"].as_u64().unwrap_or(0);
        assert!(regs > 0 && regs <= 255, "{run}");
        // Built only, or simulated on the CPU (its static check's native build): ptxas' report.
        if run["ran"] == false || run["simulated"] == true {
            assert_eq!(r["source"], "ptxas_log", "{r}");
        } else {
            assert!(r["loaded"]["registers"].as_u64().unwrap_or(0) > 0, "{r}");
        }
    }
    let o = runner(&["step", "4"]);
    assert_step_ok(&o);
    let out = stdout(&o);
    let compile_lines: Vec<&str> = out.lines().filter(|l| l.starts_with("compile")).collect();
    assert_eq!(compile_lines.len(), 2, "{out}");
    for l in compile_lines {
        assert!(
            !l.contains(": 0 registers") && !l.contains("unknown"),
            "{l}"
        );
    }
}

#[test]
fn bad_shapes_name_the_constraint() {
    let o = runner(&["step", "0", "--m", "100"]);
    assert_one_line_error(
        &o,
        "M must be a positive multiple of 128 for step 0's Hopper twin (got 100)",
    );
    let o = runner(&[
        "step", "0", "--arch", "sm_100a", "--n", "300", "--dtype", "bf16",
    ]);
    assert_one_line_error(
        &o,
        "N must be a positive multiple of 256 for step 0's Blackwell kernel",
    );
    let o = runner(&["step", "3", "--arch", "sm_90a", "--m", "128"]);
    assert_one_line_error(
        &o,
        "M must be a positive multiple of 256 for step 3's Hopper twin",
    );
    let o = runner(&["step", "0", "--k", "0"]);
    assert_one_line_error(&o, "K must be a positive multiple of 64");
}

#[test]
fn unknown_step_and_bad_values_are_errors() {
    assert_one_line_error(&runner(&["step", "42"]), "there is no step 42");
    assert_one_line_error(&runner(&["explain", "42"]), "there is no step 42");
    assert_one_line_error(
        &runner(&["step", "0", "--mutate", "bogus"]),
        "known: wrong-sbo, skip-acc-wait, skip-acc-commit",
    );
    let o = runner(&["step", "0", "--dtype", "f32"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown dtype"), "{}", stderr(&o));
}

#[test]
fn a_kernel_that_fails_to_compile_shows_the_log_with_line_numbers() {
    let d = tmp("broken");
    let path = d.join("broken.cu");
    std::fs::write(&path, "#include \"blackwell.cuh\"\nextern \"C\" __global__ void gemm_kernel() {\n  this is not C++;\n}\n").unwrap();
    let o = runner(&["step", "0", "--kernel", path.to_str().unwrap()]);
    let err = stderr_without_notes(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("broken.cu(3): error"), "{err}");
    assert!(err.contains("    3 |   this is not C++;"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn a_kernel_that_breaks_a_static_rule_is_refused_with_its_source_line() {
    // Every Blackwell build gets common::static_check: on a GPU before it runs, without one
    // instead of the build report.
    let kernel = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../steps/step4_persistent/src/kernel.cu"),
    )
    .expect("step 4's kernel");
    let mma_line = kernel
        .lines()
        .position(|l| l.contains("bw::mma_f16_2cta("))
        .expect("an MMA line")
        + 1;
    let o = runner(&[
        "step",
        "4",
        "--arch",
        "sm_100a",
        "--mutate",
        "alloc-cta-group-1",
    ]);
    let err = stderr_without_notes(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: steps/step4_persistent/src/kernel.cu breaks 1 rule"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "one-cta-group: steps/step4_persistent/src/kernel.cu:{mma_line}: `bw::mma_f16_2cta("
        )),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_seeded_bug_still_compiles_for_sm100a() {
    let o = runner(&["step", "0", "--mutate", "skip-acc-wait"]);
    assert!(stderr(&o).contains("seeded bug"), "{}", stderr(&o));
    if stdout(&o).contains("simulated (CPU, sm_100a PTX)") {
        // Without a GPU the simulator runs it, and catches it: exit 2 (a broken rule, in the
        // exit story of `runner --help`), by a named rule.
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stdout(&o).contains("rule "), "{}", stdout(&o));
    } else {
        assert_step_ok(&o);
    }
}

#[test]
fn a_toolkit_override_that_is_wrong_says_so() {
    let o = runner_env(&["step", "0"], &[("WORKBOOK_CUDA", "/nonexistent/cuda")]);
    assert_one_line_error(
        &o,
        "WORKBOOK_CUDA=/nonexistent/cuda holds no include/cuda_fp16.h",
    );
}

#[test]
fn missing_nvrtc_that_cannot_be_installed_says_how_to_install() {
    if std::path::Path::new("/usr/local/cuda/include/cuda_fp16.h").exists()
        || std::env::var_os("CUDA_PATH").is_some()
    {
        return; // a system toolkit would be found first: nothing to simulate here
    }
    // The cache inside the test's folder: its install lock sits beside it, and goes with it.
    let scratch = tmp("no-cuda");
    let empty = scratch.join("cache");
    std::fs::create_dir_all(&empty).unwrap();
    let o = runner_env(
        &["step", "0"],
        &[
            ("WORKBOOK_CUDA_CACHE", empty.to_str().unwrap()),
            ("WORKBOOK_PYTHON", "/nonexistent/python3"),
            ("WORKBOOK_NO_SITE_PYTHON", "1"),
        ],
    );
    assert_one_line_error(&o, "install python3 with pip, or a CUDA toolkit");
    let o = runner_env(
        &["step", "0"],
        &[
            ("WORKBOOK_CUDA_CACHE", empty.to_str().unwrap()),
            ("WORKBOOK_NO_INSTALL", "1"),
            ("WORKBOOK_NO_SITE_PYTHON", "1"),
        ],
    );
    assert_one_line_error(&o, "pip install --target");
}

#[test]
fn inspect_ptx_prints_the_sm100a_ptx_and_seeds_a_bug_into_it() {
    let o = runner(&["inspect", "3", "--ptx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stock = stdout(&o);
    assert!(stock.contains(".target sm_100a"), "{stock}");
    assert!(stock.contains("tcgen05.mma.cta_group::2"), "{stock}");
    // alloc-cta-group-1 turns the 2-CTA allocation into the 1-CTA form.
    let o = runner(&["inspect", "3", "--ptx", "--mutate", "alloc-cta-group-1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let seeded = stdout(&o);
    assert!(seeded.contains("tcgen05.alloc.cta_group::1"), "{seeded}");
    assert!(!stock.contains("tcgen05.alloc.cta_group::1"), "{stock}");
    assert_one_line_error(
        &runner(&[
            "inspect",
            "3",
            "--ptx",
            "--mutate",
            "twin-no-out-empty-wait",
        ]),
        "edits the Hopper twin; add --arch sm_90a",
    );
    assert_one_line_error(
        &runner(&["inspect", "0", "--ptx", "--mutate", "early-acc-release"]),
        "does not apply to step 0",
    );
}

#[test]
fn clusters_are_refused_where_no_grid_is_persistent() {
    // The persistent steps are named from what the steps declare, not from a list in the message.
    assert_one_line_error(
        &runner(&["step", "2", "--clusters", "2"]),
        "--clusters caps the grid of the persistent steps (4, 5, 6, 7); step 2 launches one cluster per tile",
    );
}

#[test]
fn inspect_kernel_compiles_a_file_with_the_steps_launch() {
    // A copy of step 3's kernel with one line changed: inspect shows the file's PTX, not the
    // step's own.
    let dir = std::env::temp_dir().join(format!("wb-inspect-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stock = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../steps/step3_collective_mma/src/kernel.cu"),
    )
    .unwrap();
    let file = dir.join("mine.cu");
    std::fs::write(&file, stock.replace("tmem_alloc_2cta(", "tmem_alloc(")).unwrap();
    let f = file.to_str().unwrap();
    let o = runner(&["inspect", "3", "--ptx", "--kernel", f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("tcgen05.alloc.cta_group::1"));
    let twin = dir.join("twin.cu");
    std::fs::write(&twin, "#include \"hopper.cuh\"\n").unwrap();
    assert_one_line_error(
        &runner(&["inspect", "3", "--kernel", twin.to_str().unwrap()]),
        "includes hopper.cuh: it is a Hopper twin; add --arch sm_90a",
    );
    assert_one_line_error(
        &runner(&[
            "inspect",
            "3",
            "--kernel",
            dir.join("none.cu").to_str().unwrap(),
        ]),
        "cannot read",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inspect_prints_resources_and_a_histogram() {
    let o = runner(&["inspect", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("histogram"), "{out}");
    assert!(out.contains("UTCHMMA"), "{out}");
    let o = runner(&["inspect", "0", "--emulate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("tcgen05 emulated"));
    let o = runner(&["inspect", "1", "--arch", "sm_90a", "--param", "stages=3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Hopper twin") && out.contains("stages=3"),
        "{out}"
    );
    assert!(out.contains("HGMMA") && out.contains("USETMAXREG"), "{out}");
    assert_one_line_error(
        &runner(&["inspect", "0", "--arch", "sm_90a", "--emulate"]),
        "--emulate builds the Blackwell kernel",
    );
    assert_one_line_error(
        &runner(&["inspect", "0", "--param", "stage=3"]),
        "unknown parameter \"stage\"",
    );
}

#[test]
fn diff_shows_changes_or_identity() {
    let o = runner(&["diff", "0", "0", "--color", "never"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("identical"), "{}", stdout(&o));
    let steps = runner::steps::all();
    if let (Some(a), Some(b)) = (steps.first(), steps.get(1)) {
        let (a, b) = (a.info().number.to_string(), b.info().number.to_string());
        let o = runner(&["diff", &a, &b, "--color", "never"]);
        let out = stdout(&o);
        assert!(
            out.contains("--- ") && out.contains("+++ ") && out.contains("@@"),
            "{out}"
        );
        let o = runner(&["diff", &a, &b, "--color", "always"]);
        assert!(stdout(&o).contains("\x1b[32m+"));
    }
}

#[test]
fn explain_inlines_the_code_and_results() {
    let o = runner(&["explain", "0", "--markdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(!md.contains("{{#include"), "includes must be expanded");
    assert!(!md.contains("{{#results"), "results must be expanded");
    assert!(md.contains("gemm_kernel"), "the kernel is included");
    for step in runner::steps::all().iter().skip(1) {
        let n = step.info().number.to_string();
        let o = runner(&["explain", &n, "--markdown"]);
        assert!(o.status.success(), "step {n}: {}", stderr(&o));
        let md = stdout(&o);
        assert!(!md.contains("{{#"), "step {n}: every marker expanded");
        assert!(
            md.contains("```diff"),
            "step {n}: the chapter shows its diff"
        );
        assert!(
            md.contains("## Exercises"),
            "step {n}: the chapter has exercises"
        );
    }
    let o = runner(&["explain", "0"]);
    assert!(o.status.success());
    assert!(!stdout(&o).is_empty());
}

#[test]
fn the_book_builds() {
    let out = tmp("book");
    let o = runner(&["book", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("Blackwell"));
    let ch0 = std::fs::read_to_string(out.join("step0.html")).unwrap();
    assert!(
        ch0.contains("gemm_kernel"),
        "the kernel source is included in chapter 0"
    );
    assert!(!ch0.contains("{{#results"), "results tables are generated");
}

#[test]
fn trace_writes_a_perfetto_json_and_an_svg_or_says_it_needs_a_gpu() {
    let dir = tmp("trace");
    let stem = dir.join("t");
    let o = runner(&[
        "step",
        "0",
        "--arch",
        "sm_90a",
        "--m",
        "256",
        "--n",
        "256",
        "--k",
        "512",
        "--trace",
        stem.to_str().unwrap(),
    ]);
    if o.status.success() {
        // An H100/H200: the twin ran traced; its files name the kernel and the GPU.
        let json = dir.join("t-step0-sm_90a.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["otherData"]["kind"], "trace");
        assert_eq!(v["otherData"]["step"], 0);
        assert!(v["traceEvents"].as_array().unwrap().len() > 10);
        let svg = std::fs::read_to_string(dir.join("t-step0-sm_90a.svg")).unwrap();
        assert!(svg.contains("warp 0"), "one row per warp");
        assert!(stdout(&o).contains("verified, not timed"), "{}", stdout(&o));
    } else {
        let err = stderr_without_notes(&o);
        assert!(
            err.contains("--trace records a launch and needs a GPU")
                || err.contains("the Hopper twins run on sm_90 GPUs"),
            "{err}"
        );
        assert_one_line_error(&o, "");
        assert!(!dir.join("t-step0-sm_90a.json").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn selftest_without_a_gpu_is_a_clear_error() {
    let o = runner(&["selftest"]);
    if o.status.success() {
        return; // a GPU is present
    }
    assert_one_line_error(&o, "selftest needs a GPU");
}

/// Every line of a plain paragraph is as full as the width allows: the next line's first word
/// would not have fit. (A break copied from the source's line wrapping fails this.)
fn assert_reflowed(out: &str, width: usize) {
    let mut checked = 0;
    for para in out.split("\n\n") {
        // A block quote is reflowed inside its "> " prefix: check its text at the width left.
        let quoted = para.lines().all(|l| l.starts_with("> ") || l == ">");
        let (lines, width): (Vec<&str>, usize) = if quoted {
            let inner = para
                .lines()
                .filter(|l| *l != ">")
                .map(|l| &l[2..])
                .collect();
            (inner, width - 2)
        } else {
            (para.lines().collect(), width)
        };
        let prose = lines.len() > 1
            && lines.iter().all(|l| {
                l.chars()
                    .next()
                    .is_some_and(|c| !c.is_whitespace() && c != '•')
                    && !l.contains("  ")
                    && !l.contains(['─', '═'])
                    && !l.starts_with("[figure")
            });
        if !prose {
            continue;
        }
        for pair in lines.windows(2) {
            let next_word = pair[1].split(' ').next().unwrap_or("");
            assert!(
                pair[0].chars().count() + 1 + next_word.chars().count() > width,
                "a break before the width: {:?} / {:?}",
                pair[0],
                pair[1]
            );
        }
        checked += 1;
    }
    assert!(checked > 5, "some paragraphs to check:\n{out}");
}

#[test]
fn explain_reads_well_in_a_pipe_and_with_no_color() {
    for (env, n) in [
        (vec![("COLUMNS", "72")], "0"),
        (vec![("COLUMNS", "72"), ("NO_COLOR", "1")], "3"),
    ] {
        let o = runner_env(&["explain", n], &env);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(!out.contains('\x1b'), "no escape codes off a terminal");
        let prose_too_wide = out
            .lines()
            .filter(|l| !l.starts_with("    ")) // code stays verbatim
            .find(|l| l.chars().count() > 72);
        assert_eq!(prose_too_wide, None);
        assert_reflowed(&out, 72);
        assert!(!out.contains("{{#"), "every marker expanded");
    }
    let out = stdout(&runner_env(&["explain", "0"], &[("COLUMNS", "100")]));
    assert!(
        out.contains("[figure: Step 0 timeline — assets/step0-timeline.svg]"),
        "figures are caption + path"
    );
    assert!(
        out.contains("assets/mbarrier-phases.svg]"),
        "generated figures too"
    );
    assert!(
        out.contains("Budget of step 0: arithmetic"),
        "the budget box is there"
    );
    assert!(
        out.contains("A wrong parity is usually a race"),
        "the phases section is there"
    );
    if out.contains("--full shows the whole table") {
        let full = stdout(&runner_env(
            &["explain", "0", "--full"],
            &[("COLUMNS", "100")],
        ));
        assert!(!full.contains("--full shows the whole table"));
        assert!(full.lines().count() > out.lines().count());
    }
}

#[test]
fn a_reader_that_stops_reading_is_no_error() {
    let exe = env!("CARGO_BIN_EXE_runner");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("'{exe}' explain 0 | head -n 2"))
        .output()
        .expect("sh runs");
    assert!(o.status.success());
    assert_eq!(stdout(&o).lines().count(), 2);
    assert!(!stderr(&o).contains("error"), "{}", stderr(&o));
}

#[test]
fn budget_prints_the_box_and_checks_its_input() {
    let o = runner(&["budget", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("not a measurement"), "{out}");
    for gpu in ["B200", "H100 SXM", "H200 SXM"] {
        assert!(out.contains(gpu), "{out}");
    }
    assert!(out.contains("FLOP per byte loaded"));
    let o = runner(&["budget", "0", "--gpu", "h100", "--latency-ns", "500"]);
    let out = stdout(&o);
    assert!(out.contains("H100 SXM") && !out.contains("B200 —"), "{out}");
    assert!(out.contains("a load latency of 500 ns"), "{out}");
    assert_one_line_error(
        &runner(&["budget", "0", "--gpu", "mi300"]),
        "unknown GPU \"mi300\"",
    );
    for bad in ["0", "-1", "1e300", "1e-300", "nan", "0x10"] {
        let o = runner(&["budget", "0", "--latency-ns", bad]);
        assert_usage_error(&o, "is not a latency: give a number of nanoseconds from 1");
        // The value as typed, never a 300-digit expansion of it.
        assert!(stderr(&o).len() < 300, "{}", stderr(&o));
    }
    assert_one_line_error(
        &runner(&["budget", "3", "--m", "128"]),
        "M must be a positive multiple of 256",
    );
    assert_one_line_error(&runner(&["budget", "9"]), "there is no step 9");
}

#[test]
fn glossary_lists_terms_with_their_chapter() {
    let out = stdout(&runner(&["glossary"]));
    assert!(
        out.contains("TMEM") && out.contains("chapter 0 (runner explain 0)"),
        "{out}"
    );
    assert!(
        out.contains("cta_group") && out.contains("chapter 3"),
        "{out}"
    );
    let one = stdout(&runner(&["glossary", "sbo"]));
    assert!(one.starts_with("• SBO:"), "{one}");
    assert_one_line_error(&runner(&["glossary", "no-such-term"]), "no term matches");
}

#[test]
fn the_seeded_parity_bugs_are_listed_with_their_expectations() {
    let out = stdout(&runner(&["mutations"]));
    let line = |name: &str| {
        out.lines()
            .find(|l| l.contains(name))
            .unwrap_or("")
            .to_string()
    };
    assert!(line("wrong-parity").contains("caught"), "{out}");
    assert!(line("no-first-round-guard").contains("harmless"), "{out}");
}

fn rubric_path(name: &str) -> String {
    format!("{}/../rubrics/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn grade_user_errors_are_one_line() {
    assert_one_line_error(&runner(&["grade"]), "--rubric TOML is required");
    let d = tmp("grade-errors");
    let k = d.join("k.cu");
    std::fs::write(&k, "#include \"hopper.cuh\"\n").unwrap();
    let k = k.to_str().unwrap();
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", "/nonexistent/r.toml"]),
        "cannot read the rubric",
    );
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\nstep = 0\narch = \"sm_90a\"\n[[tests]]\nname = \"t\"\nkind = \"correctness\"\nshape = [100, 128, 64]\npoints = 1\nseed = 1\n",
    )
    .unwrap();
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", bad.to_str().unwrap()]),
        "M must be a positive multiple of 128",
    );
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["grade", k, "--rubric", &rubric_path("step0-hopper.toml")])
        .env_remove("WORKBOOK_GRADE_SECRET")
        .output()
        .unwrap();
    assert_one_line_error(&o, "the rubric has hidden tests");
    let secret = d.join("secret.txt");
    std::fs::write(&secret, "short").unwrap();
    assert_one_line_error(
        &runner(&[
            "grade",
            k,
            "--rubric",
            &rubric_path("step0-hopper.toml"),
            "--secret-file",
            secret.to_str().unwrap(),
        ]),
        "at least 16 bytes",
    );
    assert_one_line_error(
        &runner(&[
            "grade",
            "--batch",
            d.to_str().unwrap(),
            "--rubric",
            &rubric_path("step0-hopper.toml"),
            "--out",
            d.join("o").to_str().unwrap(),
            "--shard",
            "4/4",
        ]),
        "--shard takes I/N",
    );
    assert_one_line_error(
        &runner(&[
            "grade",
            "merge",
            d.to_str().unwrap(),
            "--out",
            d.join("m").to_str().unwrap(),
        ]),
        "holds no grade.json",
    );
}

#[test]
fn grade_refuses_an_endless_file_by_name_and_limit() {
    let d = tmp("grade-endless");
    let k = d.join("k.cu");
    std::fs::write(&k, "#include \"hopper.cuh\"\n").unwrap();
    let k = k.to_str().unwrap();
    let rubric = rubric_path("step0-hopper.toml");
    let zero = "/dev/zero";
    let started = std::time::Instant::now();
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", zero, "--compile-only"]),
        "the rubric /dev/zero is larger than 1 MiB",
    );
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", &rubric, "--metadata", zero]),
        "Gradescope's metadata /dev/zero is larger than 1 MiB",
    );
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", &rubric, "--secret-file", zero]),
        "the secret file /dev/zero is larger than 64 KiB",
    );
    assert_one_line_error(
        &runner(&["grade", k, "--rubric", &rubric, "--replay", zero]),
        "the grade report /dev/zero is larger than 64 MiB",
    );
    // A 2 GB rubric (sparse: no disk) and a shard whose grade.json is 2 GB: refused, not read.
    let big = |p: &std::path::Path| {
        std::fs::File::create(p).unwrap().set_len(2 << 30).unwrap();
    };
    let big_rubric = d.join("big.toml");
    big(&big_rubric);
    assert_one_line_error(
        &runner(&[
            "grade",
            k,
            "--rubric",
            big_rubric.to_str().unwrap(),
            "--compile-only",
        ]),
        "big.toml is larger than 1 MiB",
    );
    let shard = d.join("shard");
    std::fs::create_dir_all(&shard).unwrap();
    big(&shard.join("grade.json"));
    assert_one_line_error(
        &runner(&[
            "grade",
            "merge",
            shard.to_str().unwrap(),
            "--out",
            d.join("m").to_str().unwrap(),
        ]),
        "grade.json is larger than 64 MiB",
    );
    assert!(
        started.elapsed().as_secs() < 60,
        "refused up front, not read: {:?}",
        started.elapsed()
    );
}

#[test]
fn a_grade_that_does_not_compile_shows_the_compilers_errors() {
    let d = tmp("grade-broken");
    let k = d.join("broken.cu");
    std::fs::write(&k, "#include \"hopper.cuh\"\n__global__ void f() {\n").unwrap();
    let o = runner(&[
        "grade",
        k.to_str().unwrap(),
        "--rubric",
        &rubric_path("step3-hopper.toml"),
        "--compile-only",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let compile = out
        .lines()
        .position(|l| l.trim_start().starts_with("compile   failed"))
        .unwrap_or_else(|| panic!("{out}"));
    // NVRTC's own words, indented under the compile line, before the tests' rows.
    let next = out.lines().nth(compile + 1).unwrap_or_default();
    assert!(
        next.starts_with("            ") && next.contains("failed to compile"),
        "{out}"
    );
    assert!(
        out.contains("At end of source: error: expected a \"}\""),
        "{out}"
    );
}

#[test]
fn grade_names_what_it_does_not_grade_and_refuses_what_cannot_be() {
    let d = tmp("grade-names-what");
    let rubric = rubric_path("step3-hopper.toml");
    let sub = d.join("sub");
    std::fs::create_dir_all(&sub).unwrap(); // no .cu file: rejected at once, on any machine
    let sub = sub.to_str().unwrap();
    for empty in ["", "  "] {
        assert_one_line_error(
            &runner(&[
                "grade",
                sub,
                "--rubric",
                &rubric,
                "--compile-only",
                "--student",
                empty,
            ]),
            "--student is empty",
        );
    }
    assert_usage_error(
        &runner(&[
            "grade",
            sub,
            "--rubric",
            &rubric,
            "--public-only",
            "--compile-only",
        ]),
        "--compile-only",
    );
    // --json carries the runner's object, as every --json does, beside the grader's fields.
    let o = runner(&[
        "grade",
        sub,
        "--rubric",
        &rubric,
        "--compile-only",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "workbook-grade/1");
    assert_eq!(v["runner"]["version"], v["grader_version"], "{v}");
    assert_eq!(v["runner"]["commit"], v["grader_commit"], "{v}");
    assert!(v["runner"]["version"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    // A hidden folder of a class is named, not dropped silently.
    let class = d.join("class");
    for s in ["alice", ".hidden"] {
        std::fs::create_dir_all(class.join(s)).unwrap();
    }
    let o = runner(&[
        "grade",
        "--batch",
        class.to_str().unwrap(),
        "--rubric",
        &rubric,
        "--compile-only",
        "--out",
        d.join("out").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: skipped hidden folder")
            && stderr(&o).contains(".hidden (not a student)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn exercises_have_runnable_checks() {
    let o = runner(&["exercise", "--list"]);
    assert!(o.status.success());
    assert!(stdout(&o).lines().count() >= 14, "{}", stdout(&o));
    let o = runner(&["exercise", "3.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("85.3 FLOP/B") && stdout(&o).contains("128.0 FLOP/B"),
        "{}",
        stdout(&o)
    );
    // 6.2's host check passes anywhere; its timed counterpart on the Hopper twin runs only on an
    // H100/H200. Without any GPU the timing alone is skipped, and said so: exit 3 (ran in
    // part), as on another GPU.
    let o = runner(&["exercise", "6.2", "--predict", "slower"]);
    let out = stdout(&o);
    assert!(
        out.contains("grid_tile_width = 8 touches the fewest (18)"),
        "{out}"
    );
    assert!(out.contains("you predicted: slower"), "{out}");
    match o.status.code() {
        Some(0) => assert!(out.contains("the GPU measured"), "{out}"),
        Some(3) => assert!(
            out.contains("not timed here") && out.contains("was skipped here (no GPU)")
                || out.contains("ran only in part"),
            "{out}"
        ),
        other => panic!("exit {other:?}: {out}{}", stderr(&o)),
    }
    // Without a GPU the edited kernel still compiles for sm_100a; with one it runs.
    let o = runner(&["exercise", "2.2"]);
    let out = stdout(&o);
    assert!(
        out.contains("compiled for sm_100a; not run here")
            || out.contains("fails verification as expected"),
        "{out}{}",
        stderr(&o)
    );
    assert_one_line_error(&runner(&["exercise", "9.9"]), "there is no exercise 9.9");
    let d = tmp("exercise-write");
    let f = d.join("sol.cu");
    let o = runner(&["exercise", "2.1", "--write", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&f)
        .unwrap()
        .contains("exercise 2.1"));
    // An existing file is refused without --force, before anything else.
    assert_one_line_error(
        &runner(&["exercise", "3.1", "--write", f.to_str().unwrap()]),
        "--force",
    );
    assert_one_line_error(
        &runner(&["exercise", "3.1", "--write", f.to_str().unwrap(), "--force"]),
        "changes no kernel",
    );
    std::fs::write(&f, "my notes").unwrap();
    assert_one_line_error(
        &runner(&["exercise", "2.1", "--write", f.to_str().unwrap()]),
        "exists: give a new file name, or --force",
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "my notes");
    let o = runner(&["exercise", "2.1", "--write", f.to_str().unwrap(), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&f)
        .unwrap()
        .contains("exercise 2.1"));
    // A file git tracks (the stock kernel) is refused even with --force.
    let stock = format!(
        "{}/../steps/step2_tiled_epilogue/src/kernel.cu",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::path::Path::new(&format!("{}/../.git", env!("CARGO_MANIFEST_DIR"))).exists() {
        let before = std::fs::read(&stock).unwrap();
        assert_one_line_error(
            &runner(&["exercise", "2.1", "--write", &stock, "--force"]),
            "git tracks it",
        );
        assert_eq!(std::fs::read(&stock).unwrap(), before);
    }
}

#[test]
fn the_grading_selftest_without_a_gpu_is_a_clear_error() {
    let d = tmp("grade-selftest");
    let o = runner(&["grade", "--selftest", "--out", d.to_str().unwrap()]);
    if o.status.success() {
        return; // a GPU is present
    }
    let err = stderr_without_notes(&o);
    assert!(
        err.lines()
            .any(|l| l.starts_with("error: ") && l.contains("cannot be used for grading")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The selftest has no --compile-only to suggest, and one "error:" is enough.
    assert!(
        !err.contains("--compile-only") && err.matches("error:").count() == 1,
        "{err}"
    );
    // The GPU is checked before anything is written.
    let left: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Every file of `dir` (recursively) with its content.
fn tree(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(tree(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn grade_selftest_never_replaces_or_deletes_a_users_files() {
    // A course folder: the instructor's class and rubrics (the selftest's own names).
    let d = tmp("selftest-course");
    std::fs::create_dir_all(d.join("class/alice")).unwrap();
    std::fs::write(d.join("class/alice/kernel.cu"), "alice's work").unwrap();
    std::fs::create_dir_all(d.join("rubrics")).unwrap();
    std::fs::write(d.join("rubrics/step0-hopper.toml"), "name = 'mine'").unwrap();
    let before = tree(&d);
    let o = runner(&["grade", "--selftest", "--out", d.to_str().unwrap()]);
    assert_one_line_error(&o, "only new names");
    assert_eq!(tree(&d), before, "the folder is untouched");
    // A folder of the user's holding other names only: checked, then the GPU, then written.
    let e = tmp("selftest-logs");
    std::fs::write(e.join("stdout.txt"), "a log").unwrap();
    let o = runner(&["grade", "--selftest", "--out", e.to_str().unwrap()]);
    if !o.status.success() {
        assert_one_line_error(&o, "cannot be used for grading");
        assert_eq!(tree(&e).len(), 1, "nothing written without a GPU");
    }
}

#[test]
fn grade_out_writes_only_new_names_in_a_users_folder() {
    let d = tmp("grade-out-user");
    let rubric = rubric_path("step3-hopper.toml");
    let sub = d.join("sub");
    std::fs::create_dir_all(&sub).unwrap(); // no .cu file: rejected at once, on any machine
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("grade.json"), "my own notes").unwrap();
    let args = |out: &std::path::Path| -> Vec<String> {
        [
            "grade",
            sub.to_str().unwrap(),
            "--rubric",
            &rubric,
            "--compile-only",
            "--out",
            out.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |a: Vec<String>| runner(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_one_line_error(&run(args(&out)), "grade.json exists");
    assert_eq!(
        std::fs::read(out.join("grade.json")).unwrap(),
        b"my own notes"
    );
    // Another name in it: written, and the folder stays the user's (no marker).
    std::fs::rename(out.join("grade.json"), out.join("notes.txt")).unwrap();
    let o = run(args(&out));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("grade.json").is_file() && out.join("notes.txt").is_file());
    assert!(!out.join(".runner-output").exists());
    // A new folder is the runner's: a regrade replaces its own report.
    let own = d.join("own");
    for _ in 0..2 {
        let o = run(args(&own));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(own.join(".runner-output").is_file());
}

#[test]
fn grade_out_never_replaces_another_students_grade() {
    let d = tmp("grade-out-student");
    let rubric = rubric_path("step3-hopper.toml");
    // No .cu file: each is rejected at once, on any machine, with its own report.
    for s in ["a", "b"] {
        std::fs::create_dir_all(d.join(s)).unwrap();
    }
    let out = d.join("out");
    let grade = |sub: &str, student: Option<&str>| {
        let mut a = vec![
            "grade".to_string(),
            d.join(sub).to_str().unwrap().to_string(),
            "--rubric".into(),
            rubric.clone(),
            "--compile-only".into(),
            "--out".into(),
            out.to_str().unwrap().to_string(),
        ];
        if let Some(s) = student {
            a.extend(["--student".to_string(), s.to_string()]);
        }
        runner(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let held = || -> String {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("grade.json")).unwrap()).unwrap();
        v["student"].as_str().unwrap().to_string()
    };
    let o = grade("a", None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(held(), "a");
    let before = std::fs::read(out.join("grade.json")).unwrap();
    // Another student into the same folder: refused, and a's report is intact.
    assert_one_line_error(
        &grade("b", Some("bob")),
        "holds \"a\"'s grade, not \"bob\"'s",
    );
    assert_eq!(std::fs::read(out.join("grade.json")).unwrap(), before);
    // The same student again: a regrade replaces its own report.
    let o = grade("b", Some("a"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(held(), "a");
    // Two students into one new folder at once: one is graded, the other refused.
    std::fs::remove_dir_all(&out).unwrap();
    let exe = env!("CARGO_BIN_EXE_runner");
    let spawn = |sub: &str| {
        Command::new(exe)
            .args([
                "grade",
                d.join(sub).to_str().unwrap(),
                "--rubric",
                &rubric,
                "--compile-only",
                "--out",
                out.to_str().unwrap(),
            ])
            .output()
    };
    let (oa, ob) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("a").unwrap());
        let b = s.spawn(|| spawn("b").unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    let ok = [&oa, &ob].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{}{}", stderr(&oa), stderr(&ob));
    let refused = if oa.status.success() { &ob } else { &oa };
    assert_one_line_error(refused, "'s grade, not ");
    let winner = if oa.status.success() { "a" } else { "b" };
    assert_eq!(held(), winner);
}

#[test]
fn a_batch_keeps_every_student_whose_names_look_alike() {
    let d = tmp("grade-names");
    let class = d.join("class");
    let names = ["王伟", "李娜", "éve", "ève", "carol smith", "carol_smith"];
    for n in names {
        // No .cu file: each is rejected at once (no compile), with its own report.
        std::fs::create_dir_all(class.join(n)).unwrap();
    }
    let out = d.join("out");
    let o = runner(&[
        "grade",
        "--batch",
        class.to_str().unwrap(),
        "--rubric",
        &rubric_path("step3-hopper.toml"),
        "--compile-only",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut graded = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path().join("grade.json");
        if p.is_file() {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            graded.push(v["student"].as_str().unwrap().to_string());
        }
    }
    graded.sort();
    let mut want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    want.sort();
    assert_eq!(graded, want, "one report per student");
    let merged = d.join("merged");
    let o = runner(&[
        "grade",
        "merge",
        out.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("merged 6 students"), "{}", stdout(&o));
    // A report lost after the batch: merge refuses, naming the student.
    std::fs::remove_dir_all(out.join("王伟")).unwrap();
    let again = d.join("merged2");
    assert_one_line_error(
        &runner(&[
            "grade",
            "merge",
            out.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ]),
        "lists 6 students in summary.csv but holds 5 grade.json (missing: 王伟)",
    );
    // Merging into a folder of the user's never replaces its summary.
    std::fs::remove_file(merged.join(".runner-output")).unwrap();
    let before = tree(&merged);
    assert_one_line_error(
        &runner(&[
            "grade",
            "merge",
            out.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
        ]),
        "only new names",
    );
    assert_eq!(tree(&merged), before);
}

#[test]
fn result_folders_of_check_and_bench_refuse_a_users_folder() {
    let d = tmp("check-out-user");
    std::fs::write(d.join("thesis.tex"), "years of work").unwrap();
    for args in [
        &["check", "twins", "--quick", "--out"][..],
        &["bench", "--out"][..],
        &["exercise", "--timings", "--out"][..],
    ] {
        let mut a = args.to_vec();
        a.push(d.to_str().unwrap());
        let o = runner(&a);
        assert_ne!(o.status.code(), Some(0), "{a:?}");
        assert_eq!(
            tree(&d),
            vec![(d.join("thesis.tex"), b"years of work".to_vec())],
            "{a:?}"
        );
    }
}

#[test]
fn bench_without_a_gpu_is_a_clear_error() {
    // No GPU visible, also on a GPU machine (the bench would otherwise run for minutes).
    let o = runner_env(&["bench"], &[("CUDA_VISIBLE_DEVICES", "")]);
    assert_one_line_error(&o, "runner bench needs a GPU");
    let o = runner(&["bench", "--shapes", "12x3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is not a shape MxNxK"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_reader_that_stops_early_ends_every_printing_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    // The pipe's read end is closed before the runner starts, so its first write to stdout meets
    // a closed pipe every time (no race with the reader).
    let commands: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["step", "0"],
        &["step", "0", "--json"],
        &["inspect", "0"],
        &["inspect", "0", "--json"],
        &["inspect", "0", "--sass"],
        &["diff", "0", "1"],
        &["explain", "0"],
        &["budget", "0"],
        &["budget", "0", "--json"],
        &["glossary"],
        &["glossary", "--json"],
        &["mutations"],
        &["mutations", "--json"],
        &["exercise", "--list"],
        &["exercise", "0.2"],
        &["exercise", "3.1", "--json"],
        &["explain", "introduction"],
        &["workshop", "check"],
        &["workshop", "check", "--json"],
        &["--help"],
        &["step", "--help"],
        &["--version"],
    ];
    // `grade merge` prints the class's summary table (from the committed H200 batch).
    let merged = tmp("pipe-merge");
    let batch = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../assets/results/grade-h200-2026-11-22/batch")
        .display()
        .to_string();
    let merge: &[&str] = &["grade", "merge", "--out", merged.to_str().unwrap(), &batch];
    for args in commands.iter().copied().chain([merge]) {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_runner"))
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        // Ended by SIGPIPE, as `cat` is; exit code 101 would be a panic.
        assert!(
            o.status.signal() == Some(13) || matches!(o.status.code(), Some(0..=2)),
            "{args:?}: {:?} {err}",
            o.status
        );
    }
    std::fs::remove_dir_all(&merged).unwrap();
}

#[test]
fn book_out_refuses_a_folder_holding_files() {
    let d = tmp("book-out");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("keep.txt"), "mine").unwrap();
    std::fs::write(d.join("sub/data.csv"), "1,2").unwrap();
    let o = runner(&["book", "--out", d.to_str().unwrap()]);
    assert_one_line_error(&o, "not empty");
    assert_eq!(std::fs::read_to_string(d.join("keep.txt")).unwrap(), "mine");
    assert!(d.join("sub/data.csv").is_file());
    // The book's own sources are never an output folder.
    let book = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../book");
    let o = runner(&["book", "--out", book.to_str().unwrap()]);
    assert_one_line_error(&o, "workbook's own files");
    assert!(book.join("src/SUMMARY.md").is_file());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_checkout_it_runs_in_is_what_compiles_not_the_build_machines() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // A checkout whose step 0 kernel was edited: the edit is what compiles, without a rebuild.
    let d = tmp("checkout");
    std::fs::create_dir_all(d.join("book")).unwrap();
    std::fs::create_dir_all(d.join("steps/step0_naive/src")).unwrap();
    std::fs::copy(repo.join("book/book.toml"), d.join("book/book.toml")).unwrap();
    let include = d.join("steps/include");
    std::fs::create_dir_all(&include).unwrap();
    // Every header, whatever its name: a kernel's includes reach them all.
    for h in std::fs::read_dir(repo.join("steps/include")).unwrap() {
        let h = h.unwrap().path();
        if h.extension().is_some_and(|e| e == "cuh") {
            std::fs::copy(&h, include.join(h.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        d.join("steps/step0_naive/src/kernel.cu"),
        "#error \"edited in the lab checkout\"\n",
    )
    .unwrap();
    let o = runner_env(&["inspect", "0"], &[("WORKBOOK_ROOT", d.to_str().unwrap())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("edited in the lab checkout"),
        "{}",
        stderr(&o)
    );
    // A runner copied outside any checkout says it uses its built-in sources, and works.
    let elsewhere = tmp("no-checkout");
    let bin = elsewhere.join("runner");
    std::fs::copy(env!("CARGO_BIN_EXE_runner"), &bin).unwrap();
    let o = Command::new(&bin)
        .args(["inspect", "0"])
        .current_dir(std::env::temp_dir())
        .env_remove("WORKBOOK_ROOT")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("built into this runner"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn exercise_checks_can_be_trusted() {
    let d = tmp("exercise-trust");
    let empty = d.join("empty.cu");
    std::fs::write(&empty, "").unwrap();
    let broken = d.join("broken.cu");
    std::fs::write(&broken, "int main(){").unwrap();
    // A kernel file without gemm_kernel is nothing to check: it fails, for step and exercise.
    let o = runner(&["step", "0", "--kernel", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "defines no kernel");
    let o = runner(&["exercise", "0.1", "--kernel", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("the check fails"), "{}", stdout(&o));
    // A compile error shows the compiler's whole log, naming the participant's file.
    let o = runner(&["exercise", "0.1", "--kernel", broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!("{}(1): error", broken.display())),
        "{out}"
    );
    assert!(out.contains("errors detected"), "{out}");
    // Without --kernel it says it checks the solution; a check that could not run on a GPU
    // exits 3, not 0.
    let o = runner(&["exercise", "0.1"]);
    assert!(
        stdout(&o).contains("checking the solution"),
        "{}",
        stdout(&o)
    );
    if stdout(&o).contains("not run here") {
        assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
        assert!(stdout(&o).contains("ran only in part"), "{}", stdout(&o));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn reports_name_the_file_that_was_compiled() {
    let d = tmp("report-names");
    let mine = d.join("mine.cu");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../steps/step0_naive/src/kernel.cu"),
        &mine,
    )
    .unwrap();
    let o = runner(&["step", "0", "--kernel", mine.to_str().unwrap()]);
    if stdout(&o).contains("compiled for sm_100a only") {
        let first = stdout(&o).lines().next().unwrap_or("").to_string();
        assert!(first.contains("mine.cu"), "{first}");
    }
    // The emulation build has no tcgen05 SASS by design: no false alarm.
    let o = runner(&["inspect", "3", "--emulate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("MISSING"), "{}", stdout(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The `--json` contract scripts rely on (report/json.rs): checked field by field.
fn assert_run_schema(run: &serde_json::Value) {
    let ctx = run.to_string();
    assert!(run["step"].is_u64(), "{ctx}");
    assert!(
        matches!(run["arch"].as_str(), Some("sm_100a" | "sm_90a")),
        "{ctx}"
    );
    assert!(
        matches!(run["kernel"].as_str(), Some("blackwell" | "hopper")),
        "{ctx}"
    );
    assert!(
        matches!(run["target"].as_str(), Some("sm_100a" | "sm_90a")),
        "{ctx}"
    );
    assert!(run["emulated"].is_boolean(), "{ctx}");
    assert!(run["kernel_path"].is_string(), "{ctx}");
    let params = run["params"].as_object().expect("params is an object");
    assert!(
        !params.is_empty() && params.values().all(|v| v.is_u64()),
        "{ctx}"
    );
    assert!(
        matches!(run["dtype"].as_str(), Some("f16" | "bf16")),
        "{ctx}"
    );
    assert!(
        matches!(
            run["compile"]["target"].as_str(),
            Some("sm_100a" | "sm_90a")
        ),
        "{ctx}"
    );
    assert!(run["compile"]["resources"]["registers"].is_u64(), "{ctx}");
}

fn check_envelope(v: &serde_json::Value) {
    assert_eq!(v["schema"], "workbook-runs/1", "{v}");
    assert!(v["runner"]["version"].is_string(), "{v}");
    assert!(v["runner"]["commit"].is_string(), "{v}");
    assert!(v["runs"].is_array(), "{v}");
}

// The schema tests are three, each a few commands: as one they ran for over a minute silently.
#[test]
fn json_output_of_step_follows_its_schema() {
    for args in [
        &["step", "0", "--json"][..],
        &["step", "3", "--arch", "sm_90a", "--json"],
    ] {
        let o = runner(args);
        assert_step_ok(&o);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        check_envelope(&v);
        for run in v["runs"].as_array().unwrap() {
            assert_run_schema(run);
            for k in ["m", "n", "k"] {
                assert!(run["shape"][k].is_u64(), "{run}");
            }
            assert!(
                run["ran"].is_boolean() || run["verification"].is_object(),
                "{run}"
            );
        }
    }
}

#[test]
fn json_output_of_inspect_follows_its_schema() {
    let o = runner(&["inspect", "1", "--arch", "sm_90a", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    check_envelope(&v);
    assert_run_schema(&v["runs"][0]);
    assert_eq!(v["runs"][0]["arch"], "sm_90a");
    let o = runner(&["inspect", "0", "--emulate", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"][0]["emulated"], true, "{v}");
    assert_eq!(v["runs"][0]["target"], "sm_90a", "{v}");
}

#[test]
fn json_output_of_list_and_workshop_check_follows_its_schema() {
    // list: labelled tiles.
    let o = runner(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "workbook-list/1", "{v}");
    for step in v["steps"].as_array().unwrap() {
        for sm in ["sm_100a", "sm_90a"] {
            let t = &step["tiles"][sm];
            assert!(t["cluster_m"].is_u64() && t["tile_k"].is_u64(), "{t}");
            assert!(t["persistent"].is_boolean(), "{t}");
        }
    }
    // workshop check: one object, every check with a known status.
    let o = runner(&["workshop", "check", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "workbook-workshop-check/1", "{v}");
    assert!(v["ready"].is_boolean(), "{v}");
    assert!(v["runner"]["commit"].is_string(), "{v}");
    for c in v["checks"].as_array().unwrap() {
        assert!(c["check"].is_string() && c["detail"].is_string(), "{c}");
        assert!(
            matches!(
                c["status"].as_str(),
                Some("ok" | "warn" | "fail" | "skip" | "note")
            ),
            "{c}"
        );
    }
    assert_eq!(
        o.status.code(),
        Some(if v["ready"] == true { 0 } else { 1 })
    );
}

#[test]
fn explain_reaches_every_chapter() {
    for (topic, needle) in [
        ("introduction", "#"),
        ("emulation", "emulation"),
        ("instructor", "offline lab"),
        ("intro", "#"),
        ("speed-of-light", "the budget says"),
        ("verification", "layers of verification"),
        ("running", "runner phases --step N"),
        ("barriers", "parity"),
        ("prerequisites", "TMA"),
        ("simulator", "simulator"),
    ] {
        let o = runner(&["explain", topic, "--markdown"]);
        assert!(o.status.success(), "{topic}: {}", stderr(&o));
        assert!(stdout(&o).contains(needle), "{topic}");
    }
    assert_one_line_error(&runner(&["explain", "nothing"]), "there is no chapter");
}

#[test]
fn explain_on_a_terminal_is_rendered_by_termimad_and_paged() {
    // A pseudo-terminal from util-linux `script`; PAGER=cat stands in for less.
    let exe = env!("CARGO_BIN_EXE_runner");
    let o = Command::new("script")
        .args(["-qec", &format!("'{exe}' explain 0"), "/dev/null"])
        .env("PAGER", "cat")
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .output()
        .expect("util-linux `script` runs (it gives the test a terminal)");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // termimad draws tables with box characters; the plain renderer does not; NO_COLOR holds.
    assert!(out.contains('│'), "{out}");
    assert!(!out.contains("\x1b[1m"), "{out}");
    assert!(out.contains("Step 0"), "{out}");
}

#[test]
fn book_serve_on_port_0_prints_the_real_port_and_its_404_page() {
    use std::io::{BufRead, Read, Write};
    let d = tmp("book-serve");
    let out = d.join("site");
    let mut child = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            "book",
            "--out",
            out.to_str().unwrap(),
            "--serve",
            "--port",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let serving = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("serving"))
        .unwrap_or_default();
    let addr = serving
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_default()
        .to_string();
    let response = std::net::TcpStream::connect(&addr).map(|mut s| {
        s.write_all(b"GET /no-such-page.html HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(!addr.ends_with(":0"), "{serving}");
    let response = response.unwrap_or_else(|e| panic!("{serving}: {e}"));
    assert!(
        response.starts_with("HTTP/1.0 404") || response.starts_with("HTTP/1.1 404"),
        "{response}"
    );
    assert!(response.contains("Page not found"), "{response}");
    assert!(out.join(".runner-book").is_file());
    assert!(std::fs::read_dir(&out).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("searchindex")));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn exercise_json_and_kernel_size_are_bounded_and_machine_readable() {
    let o = runner(&["exercise", "3.1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["exercise"], "3.1");
    assert_eq!(v["result"], "pass");
    assert!(v["runner"]["commit"].is_string());
    for c in v["checks"].as_array().unwrap() {
        assert!(
            matches!(
                c["status"].as_str(),
                Some("ok" | "fail" | "part" | "note" | "run")
            ),
            "{c}"
        );
    }
    // A kernel file without end is refused, not read until memory runs out.
    assert_one_line_error(
        &runner(&["step", "0", "--kernel", "/dev/zero"]),
        "not a kernel source",
    );
}

#[test]
fn the_gpu_checks_refuse_bad_input_and_a_machine_without_an_h100() {
    let o = runner(&["check", "emulation", "--quick", "--mutations", "nope"]);
    assert_one_line_error(&o, "unknown mutation \"nope\"");
    let o = runner(&["check", "twins", "--jobs", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The stress pass is the twins' (the emulation perturbs its schedule with --emu-seeds), and
    // it runs its own problems.
    assert_one_line_error(
        &runner(&["check", "emulation", "--quick", "--stress"]),
        "--stress applies to the Hopper twins",
    );
    assert_one_line_error(
        &runner(&["check", "twins", "--stress", "--dtypes", "bf16"]),
        "the stress pass runs its own",
    );
    // Without a GPU a `runner step` child only reports its builds and exits 0: the check must
    // stop before, not record those as verified. (Where nvidia-smi runs there may be a GPU, and
    // this would be the whole quick check: the GPU script runs that.)
    if Command::new("nvidia-smi").output().is_err() {
        let out = tmp("check");
        let o = runner(&["check", "twins", "--quick", "--out", out.to_str().unwrap()]);
        assert_one_line_error(&o, "runner check");
        assert!(!out.join("twins.json").exists());
        let o = runner(&[
            "check",
            "twins",
            "--stress",
            "--quick",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_one_line_error(&o, "runner check");
        assert!(!out.join("stress.json").exists());
        // Nor does --timings write a file of exercises that were compiled and not timed.
        let o = runner(&["exercise", "--timings", "--out", out.to_str().unwrap()]);
        assert_one_line_error(&o, "runner exercise --timings needs a GPU");
        assert!(std::fs::read_dir(&*out).map_or(true, |mut d| d.next().is_none()));
    }
    let help = stdout(&runner(&["--help"]));
    for code in [
        "0    success",
        "1    failed",
        "2    error",
        "3    ran only in part",
        "124  hang",
    ] {
        assert!(help.contains(code), "{code} in runner --help");
    }
}

#[test]
fn stress_runs_take_the_twin_and_emulation_timing_the_blackwell_kernel() {
    assert_one_line_error(
        &runner(&["step", "5", "--arch", "sm_100a", "--stress", "1"]),
        "--stress applies to the Hopper twin",
    );
    assert_one_line_error(
        &runner(&["step", "5", "--emulate", "--stress", "1"]),
        "one run takes one of them",
    );
    assert_one_line_error(
        &runner(&["step", "5", "--arch", "sm_90a", "--time-emulation"]),
        "--time-emulation applies to the Blackwell kernel",
    );
    assert_one_line_error(
        &runner(&["step", "2", "--mutate", "twin-no-out-empty-wait"]),
        "does not apply to step 2",
    );
    assert_one_line_error(
        &runner(&[
            "step",
            "5",
            "--arch",
            "sm_100a",
            "--mutate",
            "twin-no-out-empty-wait",
        ]),
        "applies to the Hopper twin",
    );
    let o = runner(&["step", "5", "--time-emulation", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give at least 1"), "{}", stderr(&o));
}

#[test]
fn a_hang_diagnosis_build_is_the_twin_s_and_the_bench_s_intervals_are_checked() {
    assert_one_line_error(
        &runner(&["step", "6", "--arch", "sm_100a", "--hang-diagnosis"]),
        "--hang-diagnosis applies to the Hopper twin",
    );
    assert_one_line_error(
        &runner(&["step", "6", "--emulate", "--hang-diagnosis"]),
        "one run takes one of them",
    );
    let o = runner(&["bench", "--ci-target", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a percentage above 0"),
        "{}",
        stderr(&o)
    );
    let o = runner(&["bench", "--time-cap", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give at least 1"), "{}", stderr(&o));
    // Without a GPU the diagnosis build of a planted hang (the twin implied) is compiled and
    // reported: it passes the twin's static checks, with its waits bounded.
    let o = runner(&[
        "step",
        "6",
        "--kernel",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../gpu/hang/step6_wrong_empty_parity.toml"
        ),
        "--hang-diagnosis",
    ]);
    if stdout(&o).contains("no GPU to run on") {
        // Built, not run: exit 3 (the exit-status contract of `runner --help`).
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("compiled for sm_90a only"),
            "{}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("Hopper twin"), "{}", stdout(&o));
    }
}

#[test]
fn a_twin_mutation_and_a_stress_build_are_the_twin_s_and_the_static_ones_are_refused() {
    // Without a GPU the stressed, mutated twin is compiled and reported: a twin mutation implies
    // the twin, and the build is the stress build (it sleeps).
    let o = runner(&[
        "step",
        "5",
        "--stress",
        "2",
        "--mutate",
        "twin-out-empty-same-tile-only",
        "--json",
    ]);
    assert_step_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["runs"][0]["arch"], "sm_90a", "{v}");
    let histogram = v["runs"][0]["sass"]["histogram"].to_string();
    assert!(histogram.contains("NANOSLEEP"), "{histogram}");
    // A twin bug a static rule sees is refused before anything runs, naming the rule.
    let o = runner(&["step", "4", "--mutate", "twin-wgmma-wait-shallow"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("wgmma-wait-before-use"),
        "{}",
        stderr(&o)
    );
    let list: serde_json::Value =
        serde_json::from_slice(&runner(&["mutations", "--json"]).stdout).unwrap();
    assert_eq!(list["schema"], "workbook-mutations/1", "{list}");
    let twin = list["mutations"]
        .as_array()
        .and_then(|a| a.iter().find(|m| m["name"] == "twin-no-out-empty-wait"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(twin["arch"], "sm_90a", "{twin}");
    assert_eq!(twin["caught"], "stress", "{twin}");
}

/// `runner` with the grading secret removed from its environment (a student's machine).
fn runner_without_secret(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env_remove("WORKBOOK_GRADE_SECRET")
        .env("TMPDIR", dir)
        .output()
        .expect("runner runs")
}

#[test]
fn the_grader_checks_the_submission_before_the_secret_and_the_gpu() {
    let d = tmp("grade-order");
    let rubric = rubric_path("step0-hopper.toml");
    let twin = format!(
        "{}/../steps/step0_naive/src/kernel_sm90.cu",
        env!("CARGO_MANIFEST_DIR")
    );
    let two = d.join("two");
    let empty = d.join("empty");
    let screened = d.join("screened.cu");
    std::fs::create_dir_all(&two).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::copy(&twin, two.join("a.cu")).unwrap();
    std::fs::copy(&twin, two.join("b.cu")).unwrap();
    std::fs::write(&screened, "#include <fstream>\n").unwrap();
    // No secret and no GPU here: each submission's own problem is what the grader reports.
    for (sub, why) in [
        (&two, "holds 2 .cu files (a.cu, b.cu)"),
        (&empty, "holds no .cu file"),
        (&screened, "refused before compiling"),
    ] {
        let o = runner_without_secret(&["grade", sub.to_str().unwrap(), "--rubric", &rubric], &d);
        let (out, err) = (stdout(&o), stderr_without_notes(&o));
        assert!(o.status.success(), "{}: {err}", sub.display());
        let compile = out
            .lines()
            .find(|l| l.trim_start().starts_with("compile"))
            .unwrap_or("");
        assert!(
            compile.contains("rejected") && compile.contains(why),
            "{out}"
        );
        // Only what the screen refused is flagged; a wrong folder is a mistake, not a cheat.
        let flagged = out
            .lines()
            .any(|l| l.contains("flags") && l.contains("forbidden-source"));
        assert_eq!(flagged, why == "refused before compiling", "{out}");
        assert!(!err.contains("secret") && !err.contains("GPU"), "{err}");
    }
    // The same refusal reaches a script and Gradescope.
    let o = runner_without_secret(
        &[
            "grade",
            empty.to_str().unwrap(),
            "--rubric",
            &rubric,
            "--json",
            "--out",
            d.join("out").to_str().unwrap(),
        ],
        &d,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["compile"]["status"], "rejected", "{v}");
    assert!(d.join("out/grade.json").is_file());
    // A class folder that is not there is named as such, before the secret.
    assert_one_line_error(
        &runner_without_secret(
            &[
                "grade",
                "--batch",
                d.join("missing").to_str().unwrap(),
                "--rubric",
                &rubric,
                "--out",
                d.join("o").to_str().unwrap(),
            ],
            &d,
        ),
        "cannot read the class folder",
    );
    // Without a GPU, grading names the mode that needs none (with one, it grades).
    let o = runner_without_secret(&["grade", &twin, "--rubric", &rubric, "--public-only"], &d);
    if !o.status.success() {
        assert_one_line_error(
            &o,
            "(--compile-only checks and compiles submissions without a GPU)",
        );
    }
    // A gradable submission still needs the secret for hidden tests.
    assert_one_line_error(
        &runner_without_secret(&["grade", &twin, "--rubric", &rubric], &d),
        "the rubric has hidden tests",
    );
}

#[test]
fn a_rubric_toml_error_shows_its_line_and_caret() {
    let d = tmp("rubric-toml");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "garbage = [\n").unwrap();
    let k = d.join("k.cu");
    std::fs::write(&k, "#include \"hopper.cuh\"\n").unwrap();
    let o = runner(&[
        "grade",
        k.to_str().unwrap(),
        "--rubric",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr_without_notes(&o);
    let lines: Vec<&str> = err.lines().collect();
    // Where and what on the first line; TOML's source line and caret under it, as drawn.
    assert!(lines[0].starts_with("error: rubric "), "{err}");
    assert!(
        lines[0].contains("line 1, column 12") && lines[0].contains("unclosed array"),
        "{err}"
    );
    let source = lines.iter().position(|l| l.trim() == "1 | garbage = [");
    let source = source.unwrap_or_else(|| panic!("no source line: {err}"));
    let caret = lines.get(source + 1).copied().unwrap_or("");
    assert_eq!(
        caret.find('^'),
        lines[source].find('[').map(|c| c + 1),
        "{err}"
    );
}

#[test]
fn grade_selftest_without_out_writes_nothing_into_the_current_folder() {
    let cwd = tmp("selftest-cwd");
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["grade", "--selftest"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(err.contains("target/grade-selftest"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn runs_and_grading_leave_nothing_in_the_temp_folder() {
    let d = tmp("leftovers");
    let t = d.join("tmp");
    std::fs::create_dir_all(&t).unwrap();
    let twin = format!(
        "{}/../steps/step0_naive/src/kernel_sm90.cu",
        env!("CARGO_MANIFEST_DIR")
    );
    let rubric = rubric_path("step0-hopper.toml");
    let runs: [&[&str]; 5] = [
        &["grade", &twin, "--rubric", &rubric, "--public-only"],
        &["grade", &twin, "--rubric", &rubric, "--compile-only"],
        &["step", "0", "--arch", "sm_90a"],
        &["exercise", "0.2", "--kernel", &twin],
        &["inspect", "1"],
    ];
    for args in runs {
        let o = runner_env(args, &[("TMPDIR", t.to_str().unwrap())]);
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        let left: Vec<_> = std::fs::read_dir(&t)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert!(left.is_empty(), "runner {args:?} left {left:?}");
    }
}

#[test]
fn budget_and_glossary_have_json() {
    let o = runner(&["budget", "3", "--json", "--gpu", "h100,b200", "--m", "8192"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["step"], 3);
    assert_eq!(v["shape"]["m"], 8192);
    assert!(v["runner"]["commit"].is_string());
    let gpus: Vec<&str> = v["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(gpus, ["h100", "b200"]);
    assert!(v["gpus"][0]["mainloop_ns"].as_f64().unwrap() > 0.0);
    assert!(v["tiles"]["flop_per_kblock"].as_f64().unwrap() > 0.0);
    assert_one_line_error(
        &runner(&["budget", "3", "--json", "--m", "100"]),
        "multiple of",
    );

    let o = runner(&["glossary", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let terms = v["terms"].as_array().unwrap();
    assert!(terms.len() > 10);
    assert!(terms
        .iter()
        .all(|t| t["term"].is_string() && t["line"].is_string()));
    let o = runner(&["glossary", "tmem", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["terms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["term"] == "TMEM"),
        "{v}"
    );
    assert_one_line_error(&runner(&["glossary", "zzzz", "--json"]), "no term matches");
}

#[test]
fn every_gpu_command_takes_device_and_ignored_flags_are_named() {
    // --device N on every command that opens a GPU (exercise 3.1 opens none and passes).
    let o = runner(&["exercise", "3.1", "--device", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for cmd in [
        &["step", "--help"][..],
        &["bench", "--help"],
        &["selftest", "--help"],
        &["exercise", "--help"],
        &["workshop", "check", "--help"],
    ] {
        let help = stdout(&runner(cmd));
        assert!(help.contains("--device <N>"), "{cmd:?}: {help}");
    }
    // Nothing runs under the emulation here, so a seed for it changes nothing.
    let o = runner(&["step", "0", "--arch", "sm_90a", "--emu-seed", "5"]);
    assert!(
        stderr(&o).contains("warning: --emu-seed applies to runs under the tcgen05 emulation"),
        "{}",
        stderr(&o)
    );
    let o = runner(&["step", "0", "--timeout", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give at least 1"), "{}", stderr(&o));
    // bench's shapes meet the same bounds as step's, before the GPU is looked for.
    assert_one_line_error(
        &runner(&["bench", "--shapes", "4096x4096x4096,2147483648x128x64"]),
        "must be below 2^31",
    );
    assert_one_line_error(
        &runner(&["bench", "--shapes", "131072x1048576x64"]),
        "GB of GPU memory",
    );
    // selftest multiplies gaussian inputs natively: no emulation default, no --dist to ignore.
    let help = stdout(&runner(&["selftest", "--help"]));
    assert!(
        !help.contains("emulation") && !help.contains("--dist"),
        "{help}"
    );
    let help = stdout(&runner(&["grade", "merge", "--help"]));
    assert!(help.contains("The output folders to join"), "{help}");
}

#[test]
fn kernel_files_and_flags_say_what_is_wrong() {
    let d = tmp("latin");
    let k = d.join("latin.cu");
    std::fs::write(&k, b"// fine\n// caf\xe9\n").unwrap();
    assert_one_line_error(
        &runner(&["step", "0", "--kernel", k.to_str().unwrap()]),
        "is not UTF-8 text (line 2, byte 15 of the file)",
    );
    // A Blackwell kernel given as a Hopper twin: ptxas's refusal, then what to do.
    let blackwell = format!(
        "{}/../steps/step0_naive/src/kernel.cu",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = runner(&["step", "0", "--kernel", &blackwell, "--arch", "sm_90a"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr_without_notes(&o);
    assert!(
        err.lines().last().unwrap_or("").starts_with("hint: ") && err.contains("--arch sm_100a"),
        "{err}"
    );
    // --help lists every distribution the parser takes.
    let help = stdout(&runner(&["step", "--help"]));
    for dist in [
        "gaussian",
        "uniform",
        "int",
        "all-ones",
        "wide-range",
        "exact-int",
    ] {
        assert!(help.contains(dist), "{dist}: {help}");
    }
}

#[test]
fn phases_prints_the_timeline_the_barriers_figure_draws() {
    let o = runner(&[
        "phases",
        "--step",
        "1",
        "--bug",
        "wrong-parity",
        "--timing",
        "slow-mmas",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("phase model: step 1, 4 stages, 8 k-blocks, wait lines: wrong-parity"),
        "{out}"
    );
    assert!(
        out.contains("load_empty[") && out.contains("\n=> "),
        "{out}"
    );
    assert!(!out.contains("```"), "plain text for the terminal: {out}");
    let ok = stdout(&runner(&["phases", "--step", "1"]));
    assert!(
        ok.contains("wait lines: none") && ok.contains("=> completes"),
        "{ok}"
    );
    assert_one_line_error(&runner(&["phases", "--step", "9"]), "no step 9");
    assert_one_line_error(
        &runner(&["phases", "--step", "1", "--k-blocks", "99"]),
        "1 to 64",
    );
}

#[test]
fn exercise_predict_is_a_choice_of_three() {
    let o = runner(&["exercise", "1.2", "--predict", "quicker"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("faster"), "{}", stderr(&o));
}

// ---- A second newcomer walkthrough: inputs the first one did not try ----

#[test]
fn negative_values_meet_the_values_own_check_not_clap_s_tip() {
    for args in [
        &["step", "0", "--seed", "-1"][..],
        &["step", "-1"],
        &["step", "0", "--iters", "-1"],
        &["step", "0", "--sim-seed", "-5"],
        &["step", "0", "--explore", "-1"],
        &["step", "4", "--clusters", "-3"],
        &["step", "0", "--time-emulation", "-1"],
        &["step", "0", "--emu-seed", "-1"],
        &["budget", "-1"],
        &["phases", "--step", "-1"],
        &["phases", "--step", "0", "--k-blocks", "-1"],
        &["diff", "0", "-1"],
        &["book", "--serve", "--port", "-1"],
        &["selftest", "--iters", "-1"],
    ] {
        let o = runner(args);
        assert_usage_error(&o, "-");
        assert!(stderr(&o).contains("'-"), "{args:?}: {}", stderr(&o));
    }
    assert_one_line_error(&runner(&["exercise", "-1.1"]), "there is no exercise -1.1");
}

#[test]
fn a_nul_byte_in_a_kernel_is_placed_not_echoed() {
    let d = tmp("nul");
    let f = d.join("nul.cu");
    std::fs::write(
        &f,
        "extern \"C\" __global__ void gemm_kernel() {}\n\0 SECRET-TOKEN=hunter2\n",
    )
    .unwrap();
    let o = runner(&[
        "step",
        "0",
        "--arch",
        "sm_100a",
        "--kernel",
        f.to_str().unwrap(),
    ]);
    assert_one_line_error(&o, "holds a NUL byte (line 2, byte 45 of the file)");
    assert!(!stderr(&o).contains("SECRET-TOKEN"), "{}", stderr(&o));
}

#[test]
fn check_sim_checks_its_out_before_running_a_case() {
    let d = tmp("checksim");
    let file = d.join("afile");
    std::fs::write(&file, "mine").unwrap();
    let t = std::time::Instant::now();
    let o = runner(&["check", "sim", "--quick", "--out", file.to_str().unwrap()]);
    assert_one_line_error(&o, "is not a folder");
    let users = d.join("users");
    std::fs::create_dir(&users).unwrap();
    std::fs::write(users.join("notes.txt"), "mine").unwrap();
    let o = runner(&["check", "sim", "--quick", "--out", users.to_str().unwrap()]);
    assert_one_line_error(&o, "holds files that no runner command wrote there");
    assert!(
        t.elapsed().as_secs() < 30,
        "refused before the cases ran ({:?})",
        t.elapsed()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(&users).unwrap().count(), 1);
}

#[test]
fn out_in_a_folder_of_the_checkout_is_refused() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let d = tmp("incheckout");
    let k = d.join("k.cu");
    std::fs::write(&k, "extern \"C\" __global__ void gemm_kernel() {}\n").unwrap();
    for sub in ["steps", "rubrics", "steps/step0_naive/src"] {
        let out = root.join(sub);
        let o = runner(&[
            "grade",
            k.to_str().unwrap(),
            "--rubric",
            &rubric_path("step3-hopper.toml"),
            "--compile-only",
            "--out",
            out.to_str().unwrap(),
        ]);
        let leaked = out.join("grade.json");
        if leaked.exists() {
            let _ = std::fs::remove_file(&leaked);
            panic!("grade wrote {} among the sources", leaked.display());
        }
        assert_one_line_error(&o, "is a folder of the workbook checkout");
    }
}

#[test]
fn outside_a_checkout_without_home_the_toolkit_goes_nowhere_unasked() {
    // A runner copied out of its checkout, started with no HOME: the toolkit's default folder
    // would be a `.cache` in the current folder. It says so instead.
    let d = tmp("nohome");
    let exe = d.join("runner");
    std::fs::copy(env!("CARGO_BIN_EXE_runner"), &exe).unwrap();
    let cwd = d.join("work");
    std::fs::create_dir(&cwd).unwrap();
    let o = Command::new(&exe)
        .args(["step", "0", "--arch", "sm_100a"])
        .current_dir(&cwd)
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("WORKBOOK_CUDA_CACHE")
        .env_remove("WORKBOOK_ROOT")
        .env_remove("WORKBOOK_CUDA")
        .env("WORKBOOK_NO_SITE_PYTHON", "1")
        .env("WORKBOOK_NO_INSTALL", "1")
        .output()
        .unwrap();
    assert!(
        std::fs::read_dir(&cwd).unwrap().next().is_none(),
        "nothing written in the current folder: {}",
        stderr(&o)
    );
    // A machine with a system toolkit runs; one without says where the toolkit cannot go.
    if o.status.code() == Some(2) {
        assert_one_line_error(&o, "neither HOME nor XDG_CACHE_HOME is an absolute path");
    }
}

#[test]
fn an_empty_or_file_workbook_cuda_cache_is_named() {
    let d = tmp("cudacache");
    let file = d.join("afile");
    std::fs::write(&file, "mine").unwrap();
    for (value, says) in [
        ("", "WORKBOOK_CUDA_CACHE is set but empty"),
        (file.to_str().unwrap(), "is not a folder"),
    ] {
        let o = runner_env(
            &["step", "0", "--arch", "sm_100a"],
            &[
                ("WORKBOOK_CUDA_CACHE", value),
                ("WORKBOOK_NO_SITE_PYTHON", "1"),
                ("WORKBOOK_NO_INSTALL", "1"),
            ],
        );
        // A machine with a toolkit elsewhere (WORKBOOK_CUDA, /usr/local/cuda) needs no install.
        if o.status.code() == Some(2) {
            assert_one_line_error(&o, says);
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

#[test]
fn exercise_twin_is_used_or_said_unused_and_must_be_a_twin() {
    let d = tmp("twin");
    let blackwell = d.join("mine.cu");
    std::fs::write(
        &blackwell,
        std::fs::read_to_string(format!(
            "{}/../steps/step2_tiled_epilogue/src/kernel.cu",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    // 2.1 times an edited twin: a Blackwell kernel is refused before anything runs.
    assert_one_line_error(
        &runner(&["exercise", "2.1", "--twin", blackwell.to_str().unwrap()]),
        "is not a Hopper twin (it does not include hopper.cuh)",
    );
    // 1.2 times parameter changes only: the file is not used, and a warning says so.
    let o = runner(&[
        "exercise",
        "1.2",
        "--json",
        "--twin",
        blackwell.to_str().unwrap(),
    ]);
    assert!(
        stderr(&o).contains("--twin") && stderr(&o).contains("is not used"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn exercise_list_json_is_one_envelope_and_list_takes_no_kernel() {
    let o = runner(&["exercise", "--list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["schema"], "workbook-exercises/1");
    assert!(v["runner"]["version"].is_string());
    let items = v["exercises"].as_array().unwrap();
    assert!(items
        .iter()
        .any(|e| e["id"] == "0.1" && e["timed_on_twin"] == true));
    assert!(items
        .iter()
        .any(|e| e["id"] == "3.1" && e["timed_on_twin"] == false));
    let d = tmp("listjson");
    let k = d.join("k.cu");
    std::fs::write(&k, "x").unwrap();
    assert_usage_error(
        &runner(&["exercise", "--list", "--kernel", k.to_str().unwrap()]),
        "cannot be used with",
    );
    let w = d.join("w.cu");
    assert_usage_error(
        &runner(&["exercise", "0.1", "--write", w.to_str().unwrap(), "--json"]),
        "cannot be used with",
    );
    assert!(!w.exists());
}

#[test]
fn check_cupti_without_a_gpu_is_one_line() {
    let o = runner(&["check", "cupti"]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    if all.contains("no CUDA driver") {
        assert_one_line_error(
            &o,
            "runner check cupti counts executed instructions on a GPU",
        );
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
}

#[test]
fn inspect_refuses_an_empty_kernel_and_lists_steps_plainly() {
    let d = tmp("inspectempty");
    let k = d.join("empty.cu");
    std::fs::write(&k, "").unwrap();
    assert_one_line_error(
        &runner(&["inspect", "0", "--kernel", k.to_str().unwrap()]),
        "defines no kernel",
    );
    assert_one_line_error(
        &runner(&["inspect", "0", "--mutate", "alloc-cta-group-1"]),
        "(it applies to steps 3, 4, 5, 6, 7)",
    );
}

#[test]
fn a_param_of_zero_is_named_not_a_multiple_of_zero() {
    let o = runner(&["step", "0", "--arch", "sm_90a", "--param", "tile_n=0"]);
    assert_one_line_error(&o, "has a tile of 0 along N");
    assert!(!stderr(&o).contains("multiple of 0"), "{}", stderr(&o));
}

#[test]
fn an_edit_file_of_another_step_is_refused_naming_both() {
    let toml = format!(
        "{}/../exercises/hopper/step4_snake_sm90.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    assert_one_line_error(
        &runner(&["step", "0", "--kernel", &toml]),
        "edits step 4's Hopper twin, not step 0's: give it to step 4",
    );
    assert_one_line_error(
        &runner(&["inspect", "0", "--kernel", &toml]),
        "edits step 4's Hopper twin, not step 0's",
    );
    assert_one_line_error(
        &runner(&["exercise", "4.1", "--kernel", &toml]),
        "edits step 4's Hopper twin; this checks its Blackwell kernel",
    );
}

#[test]
fn a_gpu_sized_problem_is_refused_by_the_simulator_up_front() {
    // 65536³ held A, B and C in memory three times over until the kernel killed the runner.
    for dims in [["65536", "65536", "65536"], ["8192", "8192", "8192"]] {
        let t = std::time::Instant::now();
        let o = runner(&[
            "step", "0", "--sim", "--m", dims[0], "--n", dims[1], "--k", dims[2],
        ]);
        assert_one_line_error(&o, "is too large for the CPU simulator");
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }
}

#[test]
fn two_books_built_at_once_both_succeed() {
    // mdbook empties its folder first: a second build at once deleted files under the first
    // ("Unable to remove stale HTML output"), one try in three or so. Three pairs here.
    let d = tmp("twobooks");
    let out = d.join("book");
    for _ in 0..3 {
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_runner"))
                .args(["book", "--out", out.to_str().unwrap()])
                .output()
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(spawn);
            let b = s.spawn(spawn);
            (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
        });
        for o in [a, b] {
            assert!(o.status.success(), "{}", stderr(&o));
        }
        assert!(out.join("index.html").is_file());
    }
}

#[test]
fn budget_holds_a_shape_to_the_bounds_step_does() {
    assert_one_line_error(
        &runner(&["budget", "0", "--m", "2147483648"]),
        "must be below 2^31",
    );
    assert!(runner(&["budget", "0", "--m", "8192"]).status.success());
}

#[test]
fn an_edit_file_without_edits_is_refused() {
    let d = tmp("noedit");
    let f = d.join("noedit.toml");
    std::fs::write(&f, "step = 0\narch = \"blackwell\"\nedit = []\n").unwrap();
    assert_one_line_error(
        &runner(&[
            "step",
            "0",
            "--arch",
            "sm_100a",
            "--kernel",
            f.to_str().unwrap(),
        ]),
        "holds no [[edit]]",
    );
}

#[test]
fn an_interrupted_exercise_s_scratch_is_swept_by_the_next() {
    // What a Ctrl-C leaves: the scratch of a process that no longer exists.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let tmp = std::env::temp_dir();
    let file = tmp.join(format!("workbook-exercise-{dead}-0.3.cu"));
    let dir = tmp.join(format!("workbook-exercise-{dead}-7"));
    std::fs::write(&file, "left behind").unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    // A live process's scratch stays (this test's own pid).
    let live = tmp.join(format!("workbook-exercise-{}-0.3.cu", std::process::id()));
    std::fs::write(&live, "in use").unwrap();
    let o = runner(&["exercise", "3.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let swept = !file.exists() && !dir.exists();
    let kept = live.exists();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&live);
    assert!(swept, "the dead run's scratch was removed");
    assert!(kept, "a live run's scratch was kept");
}

#[test]
fn a_twin_given_as_kernel_is_pointed_at_twin_only_where_twin_is_used() {
    let twin = |step: &str| {
        format!(
            "{}/../steps/{step}/src/kernel_sm90.cu",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let o = runner(&["exercise", "2.1", "--kernel", &twin("step2_tiled_epilogue")]);
    assert_one_line_error(&o, "give an edited twin with --twin FILE");
    let o = runner(&[
        "exercise",
        "1.2",
        "--kernel",
        &twin("step1_warp_specialization"),
    ]);
    assert_one_line_error(&o, "is a Hopper twin (it includes hopper.cuh)");
    assert!(!stderr(&o).contains("--twin"), "{}", stderr(&o));
}
