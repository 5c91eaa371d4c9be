//! The speed of light, and each step's model beside its measurement, generated from the budget
//! model (`common::model::budget`, whose GPU table cites a source for every figure) and the
//! committed bench (`assets/results/bench-*.json`):
//! - `{{#speed-of-light}}`: per step, the FLOP per byte of its tile schedule, the L2 -> SM
//!   bandwidth it asks for at the published peak, and the budget's time, for the Blackwell kernel
//!   on a B200 and the twin on an H100;
//! - `{{#measured-vs-model N}}`: "the budget says X µs, the twin measured Y µs (Z %)";
//! - `{{#trace-shares N}}`: where each role of the twin's committed trace spends its time;
//! - the roofline figure (`assets/roofline.svg`, drawn here, listed in `figures`).

use crate::book::budget::{fmt_ns, for_step};
use crate::results::{BenchCase, BenchReport, Results, TraceHead};
use anyhow::{anyhow, bail, Context, Result};
use common::model::budget::{budget, Assumptions, Budget, BudgetInput, GpuSpec, B200, H100_SXM};
use common::step::{Arch, KernelSpec};
use common::{Dtype, Shape};
use serde::Deserialize;

/// The budget of step `step`'s Hopper twin on `gpu`, with `overrides` (`name=value`) of its
/// parameters (what a bench recorded) over its defaults.
pub fn twin_budget(step: u32, gpu: &GpuSpec, shape: Shape, overrides: &[String]) -> Result<Budget> {
    let mut spec = KernelSpec::new(runner::steps::get(step)?, Arch::Hopper);
    spec.params
        .apply(overrides)
        .map_err(|e| anyhow!("step {step}'s twin: {e}"))?;
    Ok(budget(
        BudgetInput::from_twin(&spec),
        gpu,
        shape,
        Assumptions::DEFAULT,
    ))
}

/// The published figures of the GPU a results file names (`NVIDIA H100 80GB HBM3`), if the
/// budget's table has them: the SXM parts only (a PCIe or NVL part has other clocks and power).
pub fn spec_of(name: &str) -> Option<&'static GpuSpec> {
    let n = name.to_ascii_uppercase();
    if n.contains("PCIE") || n.contains("NVL") {
        return None;
    }
    common::model::budget::GPUS
        .iter()
        .find(|g| n.contains(g.key.to_ascii_uppercase().as_str()))
}

/// The latest bench (by its date), if one is committed.
fn latest_bench() -> Result<Option<(String, BenchReport)>> {
    let files = crate::results::committed()?;
    let benches = crate::results::oldest_first(&files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    });
    Ok(benches
        .last()
        .map(|(name, b, _)| (name.clone(), (*b).clone())))
}

/// A bench case's parameters as `name=value` overrides.
fn params_of(c: &BenchCase) -> Vec<String> {
    c.params
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// One measured twin beside its budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Versus {
    pub shape: Shape,
    pub dtype: String,
    pub budget_us: f64,
    pub measured_us: f64,
    /// The SM clock's median during the twin's timed launches, if NVML read it.
    pub sm_mhz: Option<f64>,
}

impl Versus {
    /// The share of the budget's speed the twin reached.
    pub fn percent(&self) -> f64 {
        100.0 * self.budget_us / self.measured_us
    }
}

/// Every case of step `step`'s twin in `bench` (one dtype: f16 where timed), with its budget on
/// `gpu`.
pub fn versus(bench: &BenchReport, step: u32, gpu: &GpuSpec) -> Result<Vec<Versus>> {
    let mut out = Vec::new();
    for c in &bench.cases {
        if c.step != Some(step) || c.dtype != Dtype::F16 {
            continue;
        }
        let Some(med) = c.stats.as_ref().map(|st| st.median_us) else {
            continue;
        };
        let b = twin_budget(step, gpu, c.shape, &params_of(c))?;
        out.push(Versus {
            shape: c.shape,
            dtype: c.dtype.to_string(),
            budget_us: b.problem_ns / 1e3,
            measured_us: med,
            sm_mhz: c.clocks.as_ref().map(|k| k.sm_mhz_median),
        });
    }
    Ok(out)
}

/// `{{#measured-vs-model N}}`: the budget's time for step N's twin against the bench's median.
pub fn measured_vs_model(spec: &str) -> Result<String> {
    let step: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("measured-vs-model wants a step number, got {spec:?}"))?;
    runner::steps::get(step)?;
    let Some((name, bench)) = latest_bench()? else {
        return Ok(format!("*Model against measurement: no bench committed yet; `runner bench` on an H100 or H200 records step {step}'s twin.*\n"));
    };
    let gpu_name = bench.gpu.name.as_str();
    if bench.arch != Arch::Hopper {
        bail!(
            "{name} timed {} kernels: this line is about the Hopper twins",
            bench.arch
        );
    }
    let Some(gpu) = spec_of(gpu_name) else {
        return Ok(format!("*Model against measurement: {name} ran on {gpu_name}, whose published figures the budget's table lacks.*\n"));
    };
    let rows = versus(&bench, step, gpu)?;
    if rows.is_empty() {
        // A step added after the latest bench: not yet measured.
        return Ok(format!("*Model against measurement: step {step}'s twin is not yet measured (`assets/results/{name}` has no f16 time of it; `runner bench` on an H100 or H200 records one).*\n"));
    }
    let each: Vec<String> = rows
        .iter()
        .map(|v| {
            format!(
                "at {} {} the budget says {}, the twin measured {} ({:.0} %{})",
                v.shape,
                v.dtype,
                fmt_ns(v.budget_us * 1e3),
                fmt_ns(v.measured_us * 1e3),
                v.percent(),
                v.sm_mhz
                    .map(|m| format!(", SM clock {m:.0} MHz"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Ok(format!(
        "> **Model against measurement (generated).** On the {} ({:.0} MHz assumed by its {} TFLOP/s peak), {}. The percentage is the budget's time over the measured one: how close the twin came to the budget's speed. *Budget: `runner budget` arithmetic with the twin's own tiles; measured: `assets/results/{name}`, {}, commit `{}`.*\n",
        gpu.name,
        gpu.dense_f16_tflops * 1e12 / f64::from(gpu.sms) / gpu.flop_per_clock_per_sm / 1e6,
        gpu.dense_f16_tflops,
        each.join("; "),
        bench.date,
        bench.commit
    ))
}

/// `{{#speed-of-light}}`: per step, what its tiles ask of the GPU at the published peak.
pub fn speed_of_light(_spec: &str) -> Result<String> {
    let shape = Shape::DEFAULT;
    let bench = latest_bench()?;
    let measured_gpu = bench.as_ref().and_then(|(_, b)| spec_of(&b.gpu.name));
    let twin_gpu = measured_gpu.unwrap_or(&H100_SXM);
    let mut md = format!(
        "| step | B200 kernel: FLOP/B | L2 → SM at peak | budget | {} twin: FLOP/B | L2 → SM at peak | budget | twin measured |\n|---|---|---|---|---|---|---|---|\n",
        twin_gpu.name
    );
    for st in runner::steps::all() {
        let n = st.info().number;
        let b = for_step(n, &B200, shape, Assumptions::DEFAULT)?;
        let t = twin_budget(n, twin_gpu, shape, &[])?;
        let measured = bench
            .as_ref()
            .and_then(|(_, v)| {
                versus(v, n, twin_gpu)
                    .ok()?
                    .into_iter()
                    .find(|x| x.shape == shape)
            })
            .map_or("-".to_string(), |x| {
                format!("{} ({:.0} %)", fmt_ns(x.measured_us * 1e3), x.percent())
            });
        md.push_str(&format!(
            "| {n} | {:.1} | {:.1} TB/s = {:.1}× HBM | {} | {:.1} | {:.1} TB/s = {:.1}× HBM | {} | {measured} |\n",
            b.intensity,
            b.demand_tbps,
            b.demand_tbps / b.gpu.hbm_tbps,
            fmt_ns(b.problem_ns),
            t.intensity,
            t.demand_tbps,
            t.demand_tbps / t.gpu.hbm_tbps,
            fmt_ns(t.problem_ns),
        ));
    }
    let whole = for_step(0, &B200, shape, Assumptions::DEFAULT)?;
    md.push_str(&format!(
        "\n*{shape} f16. FLOP/B: FLOP per byte of A and B one SM loads per k-block (its tile schedule). L2 → SM: those bytes per second, all SMs together, if the tensor cores ran at the published peak. Budget: the whole problem at peak, round by round (`runner budget N`). Twin measured: the median of the committed bench{}, and the budget's time over it. The whole problem moves A, B and C once in {} at HBM speed on a B200, against {} of tensor-core work at peak: it is compute-bound by far ({:.0} FLOP per compulsory byte), so every byte above that is re-read from L2.*\n",
        bench.as_ref().map(|(name, _)| format!(" (`assets/results/{name}`)")).unwrap_or_default(),
        fmt_ns(whole.compulsory_ns),
        fmt_ns(shape.flops() / (B200.dense_f16_tflops * 1e12) * 1e9),
        shape.flops() / whole.compulsory_bytes
    ));
    Ok(md)
}

/// `{{#trace-shares N}}`: per role of step N's twin in its committed trace, the share of the
/// recorded time each activity took (the traced CTAs, from set-up to exit).
pub fn trace_shares(spec: &str) -> Result<String> {
    let step: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("trace-shares wants a step number, got {spec:?}"))?;
    runner::steps::get(step)?;
    let file = format!("trace-step{step}-sm_90a.json");
    let path = common::toolkit::project_root()
        .join("assets/results")
        .join(&file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(format!("*No trace of step {step}'s twin committed yet: `runner step {step} --arch sm_90a --trace assets/results/trace` records one.*\n"));
    };
    let t: TraceEvents =
        serde_json::from_str(&text).with_context(|| format!("{file} is not a trace"))?;
    // The twin's store warp (steps 5 on) waits on `out_full` under the accumulator's mark.
    let kernel = runner::steps::get(step)?.info().kernel(Arch::Hopper).text;
    shares_table(&t, &file, kernel.contains("mbarrier_wait(&smem.out_full"))
}

/// An activity's words in the shares table, for the role that took it (review S27). The names
/// come from the kernels' `trace.enter` marks, which every role shares, and a few mislead for one
/// role: the producer warpgroup's spare warps have no role and sit at the teardown barrier from
/// set-up to exit, and a twin's store warp marks its wait on `out_full` (a consumer's output tile)
/// with the accumulator's mark, though on Hopper the accumulator never leaves the consumers.
fn activity_words(role: &str, act: &str, store_waits_out_full: bool) -> String {
    match (role, act) {
        ("idle", "teardown") => "parked at the teardown barrier (no role)".into(),
        ("idle", "idle") => "parked (no role)".into(),
        ("epilogue", "wait for the accumulator") if store_waits_out_full => {
            "wait for a full output tile (`out_full`)".into()
        }
        _ => act.into(),
    }
}

/// A trace file with the Perfetto events this table sums (the book's other readers need only
/// its `otherData`: [`crate::results::TraceFile`]).
#[derive(Deserialize)]
struct TraceEvents {
    #[serde(rename = "otherData")]
    other: TraceHead,
    #[serde(rename = "traceEvents")]
    events: Vec<TraceEvent>,
}

/// One Perfetto event: `M` names a thread (`args.name`), `X` is an activity of `dur` µs.
#[derive(Deserialize)]
struct TraceEvent {
    ph: String,
    name: String,
    pid: u64,
    tid: u64,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    args: Option<ThreadName>,
}

#[derive(Deserialize)]
struct ThreadName {
    #[serde(default)]
    name: Option<String>,
}

fn shares_table(t: &TraceEvents, file: &str, store_waits_out_full: bool) -> Result<String> {
    let events = &t.events;
    // Thread names say "warp 3 (warpgroup 0): producer": the role is after the colon.
    let mut role_of = std::collections::BTreeMap::new();
    for e in events {
        if e.ph == "M" && e.name == "thread_name" {
            let name = e
                .args
                .as_ref()
                .and_then(|a| a.name.as_deref())
                .unwrap_or("");
            let role = name.rsplit_once(": ").map_or(name, |(_, r)| r).to_string();
            role_of.insert((e.pid, e.tid), role);
        }
    }
    // Role -> activity -> total µs, in order of first appearance.
    let mut roles: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for e in events {
        if e.ph != "X" {
            continue;
        }
        let (Some(role), Some(dur)) = (role_of.get(&(e.pid, e.tid)), e.dur) else {
            continue;
        };
        let act = e.name.as_str();
        let i = match roles.iter().position(|(r, _)| r == role) {
            Some(i) => i,
            None => {
                roles.push((role.clone(), Vec::new()));
                roles.len() - 1
            }
        };
        let acts = &mut roles[i].1;
        match acts.iter_mut().find(|(a, _)| a == act) {
            Some((_, t)) => *t += dur,
            None => acts.push((act.to_string(), dur)),
        }
    }
    if roles.is_empty() {
        bail!("{file} holds no timed events");
    }
    let o = &t.other.meta;
    let mut md =
        String::from("| role | where its time went (share of the traced time) |\n|---|---|\n");
    for (role, acts) in &roles {
        let total: f64 = acts.iter().map(|(_, t)| t).sum();
        let mut acts = acts.clone();
        acts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let cells: Vec<String> = acts
            .iter()
            .filter(|(_, t)| *t >= 0.01 * total)
            .map(|(a, t)| {
                format!(
                    "{} {:.0} %",
                    activity_words(role, a, store_waits_out_full),
                    100.0 * t / total
                )
            })
            .collect();
        md.push_str(&format!("| {role} | {} |\n", cells.join(", ")));
    }
    md.push_str(&format!(
        "\n*Summed over the traced warps of each role in `assets/results/{file}` ({}, {}, commit {}): activities under 1 % left out. The traced CTAs are the first ones, so the first wave's cold start weighs in.*\n",
        o.gpu,
        o.date,
        o.commit
    ));
    Ok(md)
}

// ---- the roofline figure ----------------------------------------------------------------------

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `assets/roofline.svg`: attainable TFLOP/s against FLOP per byte (log-log) for the B200 and
/// the H100, their roofs from the budget's cited table, each step's tile schedule marked where
/// HBM alone would cap it, and the whole problem's compulsory intensity; beside it, the L2 -> SM
/// bandwidth each step asks for at peak against HBM.
pub fn figure() -> Result<String> {
    let shape = Shape::DEFAULT;
    let gpus: [(&GpuSpec, &str, bool); 2] =
        [(&B200, "#1f5fa8", false), (&H100_SXM, "#c0561b", true)];
    let (w, h) = (900.0, 440.0);
    let mut body = String::new();
    // Every label on a white halo, drawn after the lines: a line that passes under a label
    // (the whole problem's dashed one under a roof's) never crosses its letters.
    let mut text = |x: f64, y: f64, size: u32, anchor: &str, fill: &str, t: &str| {
        body.push_str(&format!(
            "  <text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" fill=\"{fill}\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>\n",
            esc(t)
        ));
    };
    // Left panel: the roofline.
    let (x0, x1, y0, y1) = (70.0, 470.0, 360.0, 50.0);
    let (imin, imax, fmin, fmax) = (16.0f64, 4096.0f64, 50.0f64, 4000.0f64);
    let px = |i: f64| x0 + (x1 - x0) * (i.ln() - imin.ln()) / (imax.ln() - imin.ln());
    let py = |f: f64| y0 - (y0 - y1) * (f.ln() - fmin.ln()) / (fmax.ln() - fmin.ln());
    text(
        270.0,
        24.0,
        14,
        "middle",
        "#000",
        "Roofline: attainable TFLOP/s against FLOP per byte",
    );
    let mut lines = String::new();
    for i in [16.0, 64.0, 256.0, 1024.0, 4096.0] {
        lines.push_str(&format!(
            "  <line x1=\"{0:.1}\" y1=\"{y0}\" x2=\"{0:.1}\" y2=\"{y1}\" stroke=\"#eee\"/>\n",
            px(i)
        ));
        text(px(i), y0 + 16.0, 11, "middle", "#444", &format!("{i:.0}"));
    }
    for f in [100.0, 300.0, 1000.0, 3000.0] {
        lines.push_str(&format!(
            "  <line x1=\"{x0}\" y1=\"{0:.1}\" x2=\"{x1}\" y2=\"{0:.1}\" stroke=\"#eee\"/>\n",
            py(f)
        ));
        text(x0 - 6.0, py(f) + 4.0, 11, "end", "#444", &format!("{f:.0}"));
    }
    text(
        (x0 + x1) / 2.0,
        y0 + 34.0,
        12,
        "middle",
        "#000",
        "FLOP per byte (log)",
    );
    // The axis title is rotated: it is written after the labels (`rotated`, below).
    let rotated = format!(
        "  <text x=\"22.0\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#000\" transform=\"rotate(-90 22.0 {:.1})\">TFLOP/s</text>\n",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
    let mut marks = String::new();
    let whole = for_step(0, &B200, shape, Assumptions::DEFAULT)?;
    let problem_intensity = shape.flops() / whole.compulsory_bytes;
    for (k, (g, color, twin)) in gpus.iter().enumerate() {
        let ridge = g.dense_f16_tflops / g.hbm_tbps;
        marks.push_str(&format!(
            "  <polyline points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>\n",
            px(imin), py(g.hbm_tbps * imin), px(ridge), py(g.dense_f16_tflops), px(imax), py(g.dense_f16_tflops)
        ));
        text(
            x1,
            py(g.dense_f16_tflops) - 6.0,
            11,
            "end",
            color,
            &format!(
                "{}: {} TFLOP/s, {} TB/s HBM",
                g.name, g.dense_f16_tflops, g.hbm_tbps
            ),
        );
        // Each step's tile schedule, where HBM alone would cap it; steps sharing an intensity
        // share a mark.
        let mut groups: Vec<(f64, Vec<u32>)> = Vec::new();
        for st in runner::steps::all() {
            let n = st.info().number;
            let b = if *twin {
                twin_budget(n, g, shape, &[])?
            } else {
                for_step(n, g, shape, Assumptions::DEFAULT)?
            };
            match groups
                .iter_mut()
                .find(|(i, _)| (i - b.intensity).abs() < 1e-9)
            {
                Some((_, v)) => v.push(n),
                None => groups.push((b.intensity, vec![n])),
            }
        }
        for (i, steps) in &groups {
            let (x, y) = (px(*i), py((g.hbm_tbps * i).min(g.dense_f16_tflops)));
            marks.push_str(&format!(
                "  <circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{color}\"/>\n"
            ));
            let label = match (steps.first(), steps.last()) {
                (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
                (Some(a), _) => format!("{a}"),
                _ => String::new(),
            };
            // The B200's labels sit left of their dots, above its line, clear of the H100's roof
            // label; the twins' sit right of theirs, below the H100's line.
            let (lx, ly, anchor) = if k == 0 {
                (x - 8.0, y - 4.0, "end")
            } else {
                (x + 6.0, y + 14.0, "start")
            };
            text(
                lx,
                ly,
                10,
                anchor,
                color,
                &format!("{} {label}: {i:.0}", if *twin { "twin" } else { "step" }),
            );
        }
    }
    // The H200 is the H100's die with faster HBM: only its memory roof differs.
    let h200 = &common::model::budget::H200_SXM;
    let ridge = h200.dense_f16_tflops / h200.hbm_tbps;
    marks.push_str(&format!(
        "  <polyline points=\"{:.1},{:.1} {:.1},{:.1}\" fill=\"none\" stroke=\"#c0561b\" stroke-dasharray=\"6,3\"/>\n",
        px(imin),
        py(h200.hbm_tbps * imin),
        px(ridge),
        py(h200.dense_f16_tflops)
    ));
    text(
        px(imin) + 4.0,
        py(h200.hbm_tbps * imin) - 6.0,
        10,
        "start",
        "#c0561b",
        &format!("{} (dashed): {} TB/s HBM", h200.name, h200.hbm_tbps),
    );
    let xp = px(problem_intensity);
    // Up to the lowest roof: it marks the intensity, and the roofs' labels, which sit just above
    // their lines and span this x, stay clear of it.
    let roof = py(gpus
        .iter()
        .map(|(g, _, _)| g.dense_f16_tflops)
        .fold(fmax, f64::min));
    marks.push_str(&format!(
        "  <line x1=\"{xp:.1}\" y1=\"{y0}\" x2=\"{xp:.1}\" y2=\"{roof:.1}\" stroke=\"#555\" stroke-dasharray=\"4,3\"/>\n"
    ));
    text(
        xp - 4.0,
        y0 - 8.0,
        10,
        "end",
        "#333",
        &format!("whole problem, A B C once: {problem_intensity:.0}"),
    );
    // Right panel: L2 -> SM demand per step at peak, against each GPU's HBM bandwidth.
    let (bx0, bx1, by0, by1) = (560.0, 880.0, 360.0, 50.0);
    text(
        720.0,
        24.0,
        14,
        "middle",
        "#000",
        "L2 → SM bandwidth each step asks for at peak",
    );
    let mut demand: Vec<(u32, f64, f64)> = Vec::new();
    for st in runner::steps::all() {
        let n = st.info().number;
        demand.push((
            n,
            for_step(n, &B200, shape, Assumptions::DEFAULT)?.demand_tbps,
            twin_budget(n, &H100_SXM, shape, &[])?.demand_tbps,
        ));
    }
    let top = demand
        .iter()
        .map(|d| d.1.max(d.2))
        .fold(B200.hbm_tbps, f64::max)
        * 1.1;
    let by = |t: f64| by0 - (by0 - by1) * t / top;
    let slot = (bx1 - bx0) / demand.len() as f64;
    let mut bars = String::new();
    for (j, (n, b, t)) in demand.iter().enumerate() {
        let x = bx0 + slot * j as f64;
        for (k, (v, color)) in [(*b, gpus[0].1), (*t, gpus[1].1)].iter().enumerate() {
            let bw = slot * 0.38;
            let xx = x + slot * 0.1 + bw * k as f64;
            bars.push_str(&format!(
                "  <rect x=\"{xx:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{color}\"/>\n",
                by(*v),
                by0 - by(*v)
            ));
        }
        text(
            x + slot / 2.0,
            by0 + 16.0,
            11,
            "middle",
            "#444",
            &format!("{n}"),
        );
    }
    for (g, color, _) in &gpus {
        bars.push_str(&format!(
            "  <line x1=\"{bx0}\" y1=\"{0:.1}\" x2=\"{bx1}\" y2=\"{0:.1}\" stroke=\"{color}\" stroke-dasharray=\"5,3\"/>\n",
            by(g.hbm_tbps)
        ));
        // A white box behind the reference line's label keeps it readable over the bars (about
        // 5.6 px a character at 10 px).
        let label = format!("{} HBM {} TB/s", g.name, g.hbm_tbps);
        let lw = 5.6 * label.chars().count() as f64 + 6.0;
        bars.push_str(&format!(
            "  <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{lw:.1}\" height=\"13\" fill=\"#ffffff\" opacity=\"0.9\"/>\n  <text x=\"{bx1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\" fill=\"{color}\">{}</text>\n",
            bx1 - lw + 3.0,
            by(g.hbm_tbps) - 15.0,
            by(g.hbm_tbps) - 5.0,
            esc(&label)
        ));
    }
    let mut t = 0.0;
    while t <= top {
        text(
            bx0 - 6.0,
            by(t) + 4.0,
            11,
            "end",
            "#444",
            &format!("{t:.0}"),
        );
        t += 10.0;
    }
    text(
        (bx0 + bx1) / 2.0,
        by0 + 34.0,
        12,
        "middle",
        "#000",
        "step (B200 kernel | H100 twin)",
    );
    text(bx0 - 34.0, (by0 + by1) / 2.0, 12, "middle", "#000", "TB/s");
    text(
        450.0,
        h - 26.0,
        11,
        "middle",
        "#444",
        &format!(
            "{shape} f16. Figures: NVIDIA's B200 and H100 specifications (common::model::budget)."
        ),
    );
    text(
        450.0,
        h - 10.0,
        11,
        "middle",
        "#444",
        "Dots: a step's tile schedule if every operand byte came from HBM.",
    );
    Ok(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n  <title>Roofline of the B200 and the H100 with each step's tile schedule, and the L2 to SM bandwidth each step asks for</title>\n  <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n{lines}{marks}{bars}{body}{rotated}</svg>\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_problem_line_stops_at_the_lowest_roof_under_haloed_labels() {
        let svg = figure().unwrap();
        let line = svg
            .lines()
            .find(|l| l.starts_with("  <line") && l.contains("stroke-dasharray=\"4,3\""))
            .unwrap();
        let y2: f64 = line
            .split("y2=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        // The H100's roof (989.4 TFLOP/s) sits at y 148.8, below both roofs' labels.
        assert!((y2 - 148.8).abs() < 0.1, "{line}");
        let labels: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains("TFLOP/s, ") || l.contains("whole problem"))
            .collect();
        assert_eq!(labels.len(), 3, "{labels:?}");
        assert!(labels.iter().all(|l| l.contains("paint-order=\"stroke\"")));
    }

    #[test]
    fn a_twin_budget_reads_the_twins_own_tiles() {
        // Step 0's twin: 128 x 128 per CTA, no cluster: 2*128*128*64 FLOP on (128+128)*64*2 B.
        let b = twin_budget(0, &H100_SXM, Shape::DEFAULT, &[]).unwrap();
        assert!((b.intensity - 64.0).abs() < 1e-9, "{}", b.intensity);
        // Step 3's twin: a pair along M shares B, each CTA loads 128 of B's 256 rows.
        let b = twin_budget(3, &H100_SXM, Shape::DEFAULT, &[]).unwrap();
        assert!((b.intensity - 128.0).abs() < 1e-9, "{}", b.intensity);
        assert_eq!((b.tiles, b.clusters_at_once), (16 * 32, 66));
        // A bench's parameters override the defaults.
        let small = twin_budget(0, &H100_SXM, Shape::DEFAULT, &["tile_n=256".into()]).unwrap();
        assert!((small.intensity - 256.0 / 3.0).abs() < 1e-9);
        // The twins with a store warp overlap the epilogue; step 4's does not.
        let four = twin_budget(4, &H100_SXM, Shape::DEFAULT, &[]).unwrap();
        let five = twin_budget(5, &H100_SXM, Shape::DEFAULT, &[]).unwrap();
        assert!(!four.input.epilogue_overlaps && five.input.epilogue_overlaps);
        assert!(five.problem_ns < four.problem_ns);
    }

    #[test]
    fn gpu_names_map_to_their_published_figures() {
        assert_eq!(
            spec_of("NVIDIA H100 80GB HBM3").map(|g| g.key),
            Some("h100")
        );
        assert_eq!(spec_of("NVIDIA H200").map(|g| g.key), Some("h200"));
        assert_eq!(spec_of("NVIDIA B200").map(|g| g.key), Some("b200"));
        assert!(spec_of("NVIDIA H100 PCIe").is_none());
        assert!(spec_of("NVIDIA A100").is_none());
    }

    #[test]
    fn the_measured_line_divides_the_budget_by_the_bench() {
        use crate::results::fixtures::{case, report};
        let mut f16 = case(Shape::DEFAULT, Dtype::F16, Some(2), 100.0);
        f16.params = Some(
            [
                ("tile_m", 128),
                ("tile_n", 256),
                ("tile_k", 64),
                ("stages", 4),
                ("epilogue_tile_n", 64),
            ]
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect(),
        );
        let stats = |median_us: f64| common::timing::Stats {
            median_us,
            min_us: median_us,
            max_us: median_us,
            q1_us: median_us,
            q3_us: median_us,
            runs: 1,
        };
        f16.stats = Some(stats(433.0));
        f16.clocks = Some(common::timing::Clocks {
            readings: 1,
            sm_mhz_median: 1515.0,
            sm_mhz_min: 1515,
            sm_mhz_max: 1515,
            power_w_median: None,
            temperature_c_max: None,
            clock_event_reasons: Vec::new(),
        });
        let mut bf16 = case(Shape::DEFAULT, Dtype::Bf16, Some(2), 100.0);
        bf16.stats = Some(stats(999.0));
        let bench = report(vec![f16, bf16]);
        let v = versus(&bench, 2, &H100_SXM).unwrap();
        assert_eq!(v.len(), 1, "f16 only");
        let b = twin_budget(2, &H100_SXM, Shape::DEFAULT, &[]).unwrap();
        assert!((v[0].budget_us - b.problem_ns / 1e3).abs() < 1e-9);
        assert!((v[0].percent() - 100.0 * b.problem_ns / 1e3 / 433.0).abs() < 1e-9);
        assert_eq!(v[0].sm_mhz, Some(1515.0));
        // The committed bench renders for every step, or says none is there.
        for n in 0..runner::steps::all().len() as u32 {
            let line = measured_vs_model(&n.to_string()).unwrap();
            assert!(
                line.contains("the budget says") || line.contains("no bench committed"),
                "{line}"
            );
        }
        assert!(measured_vs_model("x").is_err());
        assert!(measured_vs_model("42").is_err());
    }

    #[test]
    fn the_trace_shares_sum_per_role() {
        // A committed trace's head, with events made up to sum.
        let text =
            std::fs::read_to_string(crate::results::dir().join("trace-step0-sm_90a.json")).unwrap();
        let other = crate::results::TraceFile::parse(&text).unwrap().other;
        let events = serde_json::json!([
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "warp 0 (warpgroup 0): producer"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 4, "args": {"name": "warp 4 (warpgroup 1): consumer"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 5, "args": {"name": "warp 5 (warpgroup 1): consumer"}},
            {"ph": "X", "name": "issue loads", "pid": 0, "tid": 0, "dur": 1.0},
            {"ph": "X", "name": "wait for a free slot", "pid": 0, "tid": 0, "dur": 3.0},
            {"ph": "X", "name": "issue MMAs", "pid": 0, "tid": 4, "dur": 6.0},
            {"ph": "X", "name": "wait for data", "pid": 0, "tid": 5, "dur": 2.0},
            {"ph": "X", "name": "issue MMAs", "pid": 0, "tid": 5, "dur": 2.0}]);
        let v = TraceEvents {
            other,
            events: serde_json::from_value(events).unwrap(),
        };
        let t = shares_table(&v, "t.json", false).unwrap();
        assert!(
            t.contains("| producer | wait for a free slot 75 %, issue loads 25 % |"),
            "{t}"
        );
        assert!(
            t.contains("| consumer | issue MMAs 80 %, wait for data 20 % |"),
            "{t}"
        );
        for n in 0..runner::steps::all().len() {
            trace_shares(&n.to_string()).unwrap();
        }
        // Review S27: roles' words. The spare warps are parked, not tearing down; a twin's store
        // warp waits for an output tile, and only where its kernel waits on `out_full`.
        assert_eq!(
            activity_words("idle", "teardown", false),
            "parked at the teardown barrier (no role)"
        );
        assert_eq!(
            activity_words("epilogue", "wait for the accumulator", true),
            "wait for a full output tile (`out_full`)"
        );
        assert_eq!(
            activity_words("epilogue", "wait for the accumulator", false),
            "wait for the accumulator"
        );
        assert_eq!(
            activity_words("consumer", "wait for the accumulator", true),
            "wait for the accumulator"
        );
        let step5 = trace_shares("5").unwrap();
        assert!(
            step5.contains("| epilogue | wait for a full output tile"),
            "{step5}"
        );
        let step3 = trace_shares("3").unwrap();
        assert!(
            step3.contains("| idle | parked at the teardown barrier (no role)"),
            "{step3}"
        );
    }

    #[test]
    fn the_speed_of_light_table_has_a_row_per_step() {
        let md = speed_of_light("").unwrap();
        let rows = md
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| step"))
            .count();
        assert_eq!(rows, runner::steps::all().len(), "{md}");
        assert!(md.contains("| 3 | 128.0 |"), "{md}");
    }
}

// ---- the introduction's map of the ladder -----------------------------------------------------

/// Tensor-core utilization Pallas:MGPU's guide published for its version of step `step` (the
/// first number of its row in `comparables::ALL`).
fn pallas_utilization(step: u32) -> Option<f64> {
    let row = crate::book::comparables::ALL
        .iter()
        .find(|c| c.step == step && c.source.contains("Pallas:MGPU"))?;
    row.result.split(" %").next()?.trim().parse().ok()
}

/// `{{#published-gain N}}`: what step N's idea gained in Pallas:MGPU's Blackwell guide, the one
/// published ladder with a version of every step (its utilization, from the comparables table).
pub fn published_gain(spec: &str) -> Result<String> {
    let step: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("published-gain wants a step number, got {spec:?}"))?;
    runner::steps::get(step)?;
    let Some(now) = pallas_utilization(step) else {
        // Pallas:MGPU's guide has seven versions; a step beyond them has none to quote.
        return Ok("no version in Pallas:MGPU's ladder".to_string());
    };
    Ok(match step.checked_sub(1).and_then(pallas_utilization) {
        Some(before) => format!(
            "{:+.0} % ({before:.1} → {now:.1} % util.)",
            100.0 * (now / before - 1.0)
        ),
        None => format!("{now:.1} % util."),
    })
}

/// A twin's CTA tile of C, from its step crate's `HOPPER` configuration.
fn twin_tile(step: u32) -> Result<(u32, u32)> {
    let spec = KernelSpec::new(runner::steps::get(step)?, Arch::Hopper);
    Ok((
        spec.params.get_or("tile_m", 0),
        spec.params.get_or("tile_n", 0),
    ))
}

/// What a twin-gain cell must add when step N's twin also changes its CTA tile over step
/// N − 1's: the gain then mixes the chapter's idea with the tile (review S13, step 1's twin
/// doubles its tile), and the cell says so instead of crediting the idea with all of it.
fn tile_change(step: u32) -> Result<String> {
    let Some(prev) = step.checked_sub(1) else {
        return Ok(String::new());
    };
    let (now, before) = (twin_tile(step)?, twin_tile(prev)?);
    Ok(if now == before {
        String::new()
    } else {
        format!(
            "; the twin's tile also grows, {} × {} → {} × {}, and no bench separates the two",
            before.0, before.1, now.0, now.1
        )
    })
}

/// `{{#twin-gain N}}`: step N's twin against step N - 1's in the committed bench, at the default
/// shape in f16 (step 0: its share of cuBLAS in the same run).
pub fn twin_gain(spec: &str) -> Result<String> {
    let step: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("twin-gain wants a step number, got {spec:?}"))?;
    runner::steps::get(step)?;
    let Some((bench_name, bench)) = latest_bench()? else {
        return Ok("not timed yet".into());
    };
    let find = |n: u32| {
        bench
            .cases
            .iter()
            .find(|c| c.step == Some(n) && c.dtype == Dtype::F16 && c.shape == Shape::DEFAULT)
    };
    let tf = |n: u32| find(n).and_then(|c| c.tflops);
    let Some(now) = tf(step) else {
        return Ok("not timed".into());
    };
    Ok(match step.checked_sub(1).and_then(tf) {
        Some(before) => {
            let files = crate::results::committed()?;
            let record = super::claims::bench_record(&files);
            let _ = &bench_name;
            let call = record
                .compare(
                    Shape::DEFAULT,
                    Dtype::F16,
                    &format!("step {step}"),
                    &format!("step {}", step - 1),
                )
                .map_or(String::new(), |c| format!(": {}", c.call.words()));
            format!(
                "{:+.0} % ({before:.0} → {now:.0} TFLOP/s){call}{}",
                100.0 * (now / before - 1.0),
                tile_change(step)?
            )
        }
        None => format!(
            "{now:.0} TFLOP/s ({:.0} % of cuBLAS)",
            find(step).and_then(|c| c.pct_of_cublas).unwrap_or(f64::NAN)
        ),
    })
}

#[cfg(test)]
mod map_tests {
    use super::*;

    #[test]
    fn every_step_has_a_published_and_a_measured_gain() {
        for n in 0..runner::steps::all().len() as u32 {
            let p = published_gain(&n.to_string()).unwrap();
            // Pallas:MGPU's guide has seven versions (steps 0-6); a later step has none.
            let quoted = if pallas_utilization(n).is_some() {
                "util."
            } else {
                "no version"
            };
            assert!(p.contains(quoted), "{p}");
            let t = twin_gain(&n.to_string()).unwrap();
            assert!(!t.contains("NaN"), "{t}");
        }
        // Pallas's ladder: 37.62 % utilization at its step 0, 45.47 % at step 1.
        assert_eq!(pallas_utilization(0), Some(37.62));
        assert_eq!(published_gain("1").unwrap(), "+21 % (37.6 → 45.5 % util.)");
        assert!(published_gain("x").is_err());
        assert!(twin_gain("9").is_err());
        // Step 1's twin doubles step 0's tile: its cell says so; step 2's keeps the tile.
        assert_eq!(twin_tile(0).unwrap(), (128, 128));
        assert!(
            tile_change(1)
                .unwrap()
                .contains("128 × 128 → 128 × 256, and no bench separates"),
            "{}",
            tile_change(1).unwrap()
        );
        assert_eq!(tile_change(2).unwrap(), "");
        assert_eq!(tile_change(0).unwrap(), "");
    }
}
