//! The reports of `runner`: the text a run prints, and ([`json`]) the `--json` contract.

pub mod json;

use common::compile::Compiled;
use common::run::{RunReport, SelfTest};
use common::sass::Sass;
use common::step::{Arch, KernelSpec};
use common::timing::Clocks;
use common::Step;

const W: usize = 10;

/// The one envelope of every `--json` output: `{"schema": "workbook-<command>/<n>", "runner":
/// {version, commit}, ...}`. `schema` names the format and its version, raised on any change a
/// script could trip on (a field renamed, removed or retyped); fields are only ever added
/// within one version. The grader's reports follow the same rule (`workbook-grade/1`).
pub fn envelope(command: &str, body: serde_json::Value) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert("schema".into(), format!("workbook-{command}/1").into());
    o.insert("runner".into(), crate::provenance::version_info());
    match body {
        serde_json::Value::Object(b) => {
            for (k, v) in b {
                if k != "runner" && k != "schema" {
                    o.insert(k, v);
                }
            }
        }
        other => {
            o.insert("items".into(), other);
        }
    }
    serde_json::Value::Object(o)
}

pub fn print_list(steps: &[&'static dyn Step]) {
    println!("The ladder (runner step N to run one, runner explain N to read its chapter):");
    for s in steps {
        let i = s.info();
        println!("  {:>2}  {:<28} {}", i.number, i.title, i.idea);
    }
}

pub fn print_mutations(
    ms: &[common::mutation::Mutation],
    twins: &[common::mutation::TwinMutation],
) {
    use common::mutation::{Expect, TwinCatch};
    // The name column as wide as the longest name, so no row shifts.
    let width = ms
        .iter()
        .chain(twins.iter().map(|t| &t.mutation))
        .map(|m| m.name.len())
        .max()
        .unwrap_or(0);
    let row = |m: &common::mutation::Mutation, arch: common::step::Arch, how: &str| {
        let steps: Vec<String> = m
            .steps(&runner::steps::infos(), arch)
            .iter()
            .map(|s| s.to_string())
            .collect();
        let expect = match m.expect {
            Expect::Caught => how,
            Expect::Harmless => "harmless",
        };
        println!(
            "  {:<width$} steps {:<14} {:<9} {}",
            m.name,
            steps.join(","),
            expect,
            m.description
        );
    };
    println!("Seeded bugs of the Blackwell kernels (runner step N --mutate NAME; the CPU simulator, and the emulation on a GPU, catch them):");
    for m in ms {
        row(m, common::step::Arch::Blackwell, "caught");
    }
    println!();
    println!("Seeded bugs of the Hopper twins (static: the twin's static check refuses it; stress: runner step N --mutate NAME --no-static-check --stress SEED shows it):");
    for t in twins {
        row(
            &t.mutation,
            common::step::Arch::Hopper,
            match t.caught {
                TwinCatch::Static => "static",
                TwinCatch::Stress => "stress",
            },
        );
    }
}

/// The report's first lines; `path` is the file that was compiled (the step's own, or the one
/// `--kernel` gave).
pub fn print_header(spec: &KernelSpec, path: &str) {
    let i = spec.info();
    println!(
        "Step {} · {} · {} ({path})",
        i.number,
        i.title,
        spec.arch.name(),
    );
    let idea = match spec.arch {
        Arch::Blackwell => i.idea,
        Arch::Hopper => i.hopper_idea,
    };
    println!("{:<W$}{idea}", "idea");
    println!("{:<W$}{}", "config", spec.params);
}

pub fn print_compile(c: &Compiled, smem_bytes: u32) {
    println!(
        "{:<W$}{} in {:.0} ms (NVRTC {}): {}; {} B dynamic shared memory",
        "compile",
        c.target.describe(),
        c.compile_ms,
        c.nvrtc_version,
        c.resources.describe(),
        smem_bytes
    );
}

pub fn print_sass(s: &Sass, expect: &[&str], full_histogram: bool) {
    let key: Vec<String> = expect
        .iter()
        .map(|p| format!("{p} {}", s.count(p)))
        .collect();
    let key = if expect.is_empty() {
        "none expected of this build".to_string()
    } else {
        key.join(", ")
    };
    println!(
        "{:<W$}{} instructions; step's key instructions: {key}; local memory (LDL/STL): {}",
        "SASS",
        s.total(),
        s.local_memory_ops()
    );
    let missing = missing_instructions(s, expect);
    if !missing.is_empty() {
        println!(
            "{:<W$}MISSING expected instructions: {}",
            "",
            missing.join(", ")
        );
    }
    if full_histogram {
        let mut v: Vec<(&String, &usize)> = s.histogram.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("{:<W$}histogram (count opcode):", "");
        for (op, n) in v {
            println!("{:<W$}{n:>6}  {op}", "");
        }
    }
}

/// The step's key instructions (`expect`, opcode prefixes) its build lacks.
pub fn missing_instructions(s: &Sass, expect: &[&str]) -> Vec<String> {
    expect
        .iter()
        .filter(|p| s.count(p) == 0)
        .map(|p| p.to_string())
        .collect()
}

pub fn print_run(spec: &KernelSpec, r: &RunReport) {
    print_header(spec, &r.kernel_path);
    let g = &r.gpu;
    println!(
        "{:<W$}{} ({}, {} SMs, {} MHz max, driver {})",
        "GPU",
        g.name,
        g.sm(),
        g.sm_count,
        g.max_clock_mhz,
        g.driver_version
    );
    if r.emulated {
        println!("{:<W$}tcgen05 emulated on sm_90: this proves the kernel's logic; emulated timings mean nothing and are not shown", "mode");
    } else if let Some(seed) = r.stress_seed {
        println!(
            "{:<W$}native {}, stress build (seed {seed}; hot points {}): seeded delays at the wrappers' named points; verified, not timed",
            "mode",
            r.target.describe(),
            common::stress::hot_point_names(seed).join(", ")
        );
    } else {
        println!("{:<W$}native {}", "mode", r.target.describe());
    }
    println!(
        "{:<W$}{} {} {} seed {}",
        "problem", r.shape, r.dtype, r.dist, r.seed
    );
    print_compile(&r.compile, r.smem_bytes);
    println!(
        "{:<W$}grid {}x{}x{}, {} threads per CTA, cluster {}x{}x{}",
        "launch", r.grid.0, r.grid.1, r.grid.2, r.block, r.cluster.0, r.cluster.1, r.cluster.2
    );
    println!("{:<W$}{}", "verify", r.verification.summary());
    if let Some(t) = &r.timing {
        let peak = match (t.pct_of_peak, t.peak_tflops) {
            (Some(p), Some(pk)) => format!("{p:.1}% of peak ({pk:.0} TFLOP/s)"),
            _ => "peak unknown for this GPU".to_string(),
        };
        println!(
            "{:<W$}median {:.1} us (min {:.1}, IQR {:.1}, {} primed rounds{}) = {:.1} TFLOP/s, {peak}",
            "time",
            t.kernel.median_us,
            t.kernel.min_us,
            t.kernel.iqr_us(),
            t.kernel.runs,
            if t.l2_flushed { ", L2 flushed" } else { "" },
            t.tflops
        );
        println!(
            "{:<W$}{:.1}% of cuBLAS in the same rounds (cuBLAS median {:.1} us, IQR {:.1} = {:.1} TFLOP/s)",
            "",
            t.pct_of_cublas,
            t.cublas.median_us,
            t.cublas.iqr_us(),
            t.cublas_tflops
        );
        println!(
            "{:<W$}kernel {}; cuBLAS {}",
            "clocks",
            clocks(t.kernel_clocks.as_ref()),
            clocks(t.cublas_clocks.as_ref())
        );
        if let Some(e) = &t.device.nvml_error {
            println!("{:<W$}no NVML readings: {e}", "");
        }
    }
}

/// One contender's NVML readings in a line: "SM 1755 MHz (1740-1980), 690 W, sw_power_cap".
pub fn clocks(c: Option<&Clocks>) -> String {
    let Some(c) = c else {
        return "not read".to_string();
    };
    let mut s = format!(
        "SM {:.0} MHz ({}-{}, {} readings)",
        c.sm_mhz_median, c.sm_mhz_min, c.sm_mhz_max, c.readings
    );
    if let Some(w) = c.power_w_median {
        s.push_str(&format!(", {w:.0} W"));
    }
    if !c.clock_event_reasons.is_empty() {
        s.push_str(&format!(", held by {}", c.clock_event_reasons.join("+")));
    }
    s
}

pub fn print_selftest(t: &SelfTest) {
    let g = &t.gpu;
    println!(
        "selftest: cuBLAS on {} ({}, {} SMs, driver {})",
        g.name,
        g.sm(),
        g.sm_count,
        g.driver_version
    );
    println!("{:<W$}{} {}", "problem", t.shape, t.dtype);
    println!("{:<W$}{}", "verify", t.verification.summary());
    let peak = t
        .peak_tflops
        .map(|p| {
            format!(
                ", {:.1}% of peak ({p:.0} TFLOP/s)",
                100.0 * t.cublas_tflops / p
            )
        })
        .unwrap_or_default();
    println!(
        "{:<W$}cuBLAS median {:.1} us (min {:.1}, IQR {:.1}, {} primed rounds, L2 flushed) = {:.1} TFLOP/s{peak}",
        "time",
        t.cublas.median_us,
        t.cublas.min_us,
        t.cublas.iqr_us(),
        t.cublas.runs,
        t.cublas_tflops
    );
    println!("{:<W$}{}", "clocks", clocks(t.clocks.as_ref()));
}

/// `runner step N --time-emulation`: the two emulation builds' times and what the rules cost.
pub fn print_emulation_cost(spec: &KernelSpec, c: &common::run::EmulationCost) {
    print_header(spec, &c.kernel_path);
    println!(
        "{:<W$}{} ({}), emulated; {} {}, emulation seed {}, grid {}x{}x{}",
        "GPU",
        c.gpu.name,
        c.gpu.sm(),
        c.shape,
        c.dtype,
        c.emu_seed,
        c.grid.0,
        c.grid.1,
        c.grid.2
    );
    println!(
        "{:<W$}wall time of {} launches each (launch and wait, the bookkeeping's reset included), alternating",
        "timing",
        c.rules_on.launches_ms.len()
    );
    for (what, t) in [("rules off", &c.rules_off), ("rules on", &c.rules_on)] {
        println!(
            "{:<W$}median {:>9.2} ms, min {:>9.2} ms; {}",
            what,
            t.median_ms,
            t.min_ms,
            t.verification.summary()
        );
    }
    println!(
        "{:<W$}{:+.1}% for the async proxy, bulk groups, tcgen05.ld poison and cta_group rules",
        "cost", c.cost_pct
    );
}

/// Lines of the kernel's `printf` output shown in the terminal; `--json` carries all of it.
const PRINTF_LINES_SHOWN: usize = 40;

/// The kernel's `printf` output, as a GPU run prints it after the launch: its first lines,
/// indented, with control characters shown as `?`, and how much more there was.
fn print_device_printf(calls: &[String], dropped: u64) {
    if calls.is_empty() && dropped == 0 {
        return;
    }
    let text: String = calls.concat();
    let lines: Vec<&str> = text.lines().collect();
    println!(
        "{:<W$}{} call{}, {} line{} (the kernel's own output):",
        "printf",
        calls.len(),
        if calls.len() == 1 { "" } else { "s" },
        lines.len(),
        if lines.len() == 1 { "" } else { "s" }
    );
    for l in lines.iter().take(PRINTF_LINES_SHOWN) {
        let shown: String = l
            .chars()
            .take(200)
            .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
            .collect();
        println!("{:<W$}  | {shown}", "");
    }
    if lines.len() > PRINTF_LINES_SHOWN {
        println!(
            "{:<W$}  ... {} more line(s) (--json has them all)",
            "",
            lines.len() - PRINTF_LINES_SHOWN
        );
    }
    if dropped > 0 {
        println!(
            "{:<W$}  the oldest {dropped} call(s) were dropped: the 1 MiB printf buffer was full, as on a GPU",
            ""
        );
    }
}

/// A run on the CPU simulator: what ran, how it was scheduled, what it executed, and the
/// verification or the simulator's finding.
pub fn print_sim(spec: &KernelSpec, r: &common::simulate::SimReport) {
    print_header(spec, &r.kernel_path);
    let s = &r.sim;
    println!(
        "{:<W$}{}: proves the kernel's logic and ordering on this schedule; no timings (a GPU gives those)",
        "mode", s.backend
    );
    println!(
        "{:<W$}{} {} {} seed {}",
        "problem", r.shape, r.dtype, r.dist, r.seed
    );
    if let Some(c) = &r.compile {
        print_compile(c, r.smem_bytes);
    }
    println!(
        "{:<W$}grid {}x{}x{}, {} threads per CTA, cluster {}x{}x{}",
        "launch", r.grid.0, r.grid.1, r.grid.2, r.block, r.cluster.0, r.cluster.1, r.cluster.2
    );
    let schedules = if s.schedules > 1 {
        format!(
            "{} schedules from seed {} (policies cycled from {})",
            s.schedules, s.schedule_seed, s.policy
        )
    } else {
        format!("seed {}, policy {}", s.schedule_seed, s.policy)
    };
    if r.failure.is_some() {
        println!("{:<W$}{schedules}; {:.2} s", "schedule", s.wall_s);
    } else {
        println!(
            "{:<W$}{schedules}; {} instructions executed, {} barrier phases, {} cluster{}, {:.2} s",
            "schedule",
            s.instructions,
            s.barrier_phases,
            s.clusters,
            if s.clusters == 1 { "" } else { "s" },
            s.wall_s
        );
    }
    print_device_printf(&r.printf, r.printf_dropped);
    if let Some(f) = &r.failure {
        println!(
            "{:<W$}FAIL  the simulator stopped the kernel ({}), schedule seed {} policy {}:",
            "verify", f.kind, f.schedule_seed, f.policy
        );
        for l in f.message.lines() {
            println!("{:<W$}  {l}", "");
        }
    } else if let Some(v) = &r.verification {
        println!("{:<W$}{}", "verify", v.summary());
    }
    if let Some(flags) = &r.replay {
        println!(
            "{:<W$}the same command with {flags} (and without --explore) replays this schedule",
            "replay"
        );
    }
}
