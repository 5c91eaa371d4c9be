//! The book: chapters expanded for the terminal (`runner explain`, rendered by `terminal`), the
//! HTML book built with mdbook as a library (`runner book`), and the workbook's own markers, which
//! generate every number and table a chapter shows: `{{#results KIND}}` from
//! `assets/results/*.json`, `{{#diff A B}}`, `{{#grid-order ...}}`, `{{#grid-footprint STEP GPU}}`,
//! `{{#budget N}}` / `{{#budget-value N KEY [GPU]}}`, `{{#phase-outcomes ring|per-tile}}`,
//! `{{#phase-timeline STEP BUG TIMING}}`, `{{#comparables N}}`,
//! `{{#trace-figure N ARCH}}`, `{{#glossary}}`, and from `roofline` and `exercise_timing`:
//! `{{#speed-of-light}}`, `{{#measured-vs-model N}}`, `{{#trace-shares N}}`,
//! `{{#exercise-timing N.M}}`, `{{#published-gain N}}`, `{{#twin-gain N}}`, and from `claims`
//! every comparison of our kernels' speed: `{{#claim A B SHAPE DTYPE CALL}}`,
//! `{{#heatmap-claim ...}}`, `{{#headline-call N}}`, `{{#vs-previous N}}`, `{{#heatmap-gains N}}`,
//! `{{#noise-rule}}`; `{{#motivation N}}` (a step's gain where its idea should pay, from the
//! targeted bench in `assets/results/motivation/`) and `{{#occupancy 0}}` (exercise 0.1's
//! profile).

pub mod budget;
pub mod claims;
pub mod comparables;
pub mod exercise_timing;
pub mod figures;
pub mod glossary;
pub mod measured;
pub mod motivation;
pub mod occupancy;
pub mod phase_tables;
pub mod plot;
pub mod progress;
pub mod ptx_cache;
pub mod roofline;
pub mod rule;
pub mod serve;
pub mod spread;
pub mod step0_figure;
pub mod terminal;
pub mod verified;
pub mod widgets;

use crate::results::{self, EmulationCase, Expected, Provenance, TraceFile};
use anyhow::{anyhow, bail, Context, Result};
use common::model::tiling::{visit_order, MinorDim};
use common::step::{Arch, KernelSpec};
use common::toolkit::project_root;
use common::StepInfo;
use mdbook_preprocessor::book::Book;
use mdbook_preprocessor::{Preprocessor, PreprocessorContext};
use std::path::{Path, PathBuf};

/// The book's chapters that are not a step's (a step's is its `StepInfo::chapter`), by the
/// names `runner explain` takes, in the order of `book/src/SUMMARY.md`: the one list of them.
pub const CHAPTERS: &[(&str, &str)] = &[
    ("introduction", "book/src/introduction.md"),
    ("prerequisites", "book/src/prerequisites.md"),
    ("barriers", "book/src/barriers.md"),
    ("speed-of-light", "book/src/speed-of-light.md"),
    ("verification", "book/src/verification.md"),
    ("simulator", "book/src/simulator.md"),
    ("emulation", "book/src/emulation.md"),
    ("emulation-records", "book/src/emulation-records.md"),
    ("instructor", "book/src/instructor.md"),
    ("running", "book/src/running.md"),
    ("further-reading", "book/src/further-reading.md"),
    ("changelog", "book/src/changelog.md"),
];

/// Chapters and results embedded in the binary, used when the repository is not at hand.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "book/src/introduction.md",
        include_str!("../../../book/src/introduction.md"),
    ),
    (
        "book/src/emulation.md",
        include_str!("../../../book/src/emulation.md"),
    ),
    (
        "book/src/step0.md",
        include_str!("../../../book/src/step0.md"),
    ),
    (
        "book/src/step1.md",
        include_str!("../../../book/src/step1.md"),
    ),
    (
        "book/src/step2.md",
        include_str!("../../../book/src/step2.md"),
    ),
    (
        "book/src/step3.md",
        include_str!("../../../book/src/step3.md"),
    ),
    (
        "book/src/step4.md",
        include_str!("../../../book/src/step4.md"),
    ),
    (
        "book/src/step5.md",
        include_str!("../../../book/src/step5.md"),
    ),
    (
        "book/src/step6.md",
        include_str!("../../../book/src/step6.md"),
    ),
    (
        "book/src/prerequisites.md",
        include_str!("../../../book/src/prerequisites.md"),
    ),
    (
        "book/src/running.md",
        include_str!("../../../book/src/running.md"),
    ),
    (
        "book/src/speed-of-light.md",
        include_str!("../../../book/src/speed-of-light.md"),
    ),
    (
        "book/src/barriers.md",
        include_str!("../../../book/src/barriers.md"),
    ),
    (
        "book/src/verification.md",
        include_str!("../../../book/src/verification.md"),
    ),
    (
        "book/src/instructor.md",
        include_str!("../../../book/src/instructor.md"),
    ),
    (
        "book/src/further-reading.md",
        include_str!("../../../book/src/further-reading.md"),
    ),
    (
        "steps/include/common.cuh",
        include_str!("../../../steps/include/common.cuh"),
    ),
    (
        "steps/include/blackwell.cuh",
        include_str!("../../../steps/include/blackwell.cuh"),
    ),
    (
        "steps/include/tcgen05_emu.cuh",
        include_str!("../../../steps/include/tcgen05_emu.cuh"),
    ),
    (
        "steps/include/pipeline.cuh",
        include_str!("../../../steps/include/pipeline.cuh"),
    ),
];

/// A repository file: from disk when the checkout is there (so edits show), else embedded.
fn read_repo_file(rel: &str) -> Result<String> {
    let on_disk = project_root().join(rel);
    if let Ok(s) = std::fs::read_to_string(&on_disk) {
        return Ok(s);
    }
    if let Some((_, s)) = EMBEDDED.iter().find(|(p, _)| *p == rel) {
        return Ok(s.to_string());
    }
    for s in runner::steps::all() {
        let i = s.info();
        for arch in Arch::ALL {
            if rel == i.kernel_path(arch) {
                return Ok(i.kernel(arch).text.to_string());
            }
        }
        if rel == i.host_path() {
            return Ok(i.host.to_string());
        }
    }
    bail!("cannot read {rel}")
}

/// Normalise `a/b/../c` without touching the file system.
fn normalise(p: &Path) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.to_str().unwrap_or_default().split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// The part of `text` an mdbook include selects: all, `start:end` lines (1-based, inclusive,
/// either side optional), or an `ANCHOR: name` region.
fn select(text: &str, selector: Option<&str>) -> Result<String> {
    let Some(sel) = selector else {
        return Ok(text.to_string());
    };
    let lines: Vec<&str> = text.lines().collect();
    let keep = |l: &&&str| !l.contains("ANCHOR:") && !l.contains("ANCHOR_END:");
    if sel
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == ':')
    {
        let (a, b) = sel.split_once(':').unwrap_or((sel, sel));
        let start = a.parse::<usize>().unwrap_or(1).max(1);
        let end = b.parse::<usize>().unwrap_or(lines.len()).min(lines.len());
        return Ok(lines[start - 1..end]
            .iter()
            .filter(keep)
            .map(|l| format!("{l}\n"))
            .collect());
    }
    // An anchor ends its line, or an HTML comment in a markdown file (`<!-- ANCHOR: x -->`).
    let is = |l: &str, tag: &str| {
        l.trim_end()
            .trim_end_matches("-->")
            .trim_end()
            .ends_with(&format!("{tag}: {sel}"))
    };
    let begin = lines.iter().position(|l| is(l, "ANCHOR"));
    let end = lines.iter().position(|l| is(l, "ANCHOR_END"));
    match (begin, end) {
        (Some(b), Some(e)) if b < e => Ok(lines[b + 1..e]
            .iter()
            .filter(keep)
            .map(|l| format!("{l}\n"))
            .collect()),
        _ => bail!("no anchor {sel:?}"),
    }
}

/// Expand `{{#include path[:selector]}}` (paths relative to `base`, a repo-relative folder).
fn expand_includes(md: &str, base: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = md;
    while let Some(i) = rest.find("{{#include ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "{{#include ".len()..];
        let j = after
            .find("}}")
            .ok_or_else(|| anyhow!("unterminated {{{{#include"))?;
        let arg = after[..j].trim();
        let (path, selector) = match arg.split_once(':') {
            Some((p, s)) => (p, Some(s)),
            None => (arg, None),
        };
        let rel = normalise(&Path::new(base).join(path));
        let text = read_repo_file(&rel).with_context(|| format!("include {arg}"))?;
        out.push_str(&select(&text, selector).with_context(|| format!("include {arg}"))?);
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Markdown tables for the results files of one kind (`emulation`, `emulation-summary`,
/// `selftest`), optionally only the cases of one step (`emulation 0`).
pub fn results_table(spec: &str) -> Result<String> {
    let mut words = spec.split_whitespace();
    let kind = words.next().unwrap_or_default();
    let step: Option<u32> = words.next().and_then(|w| w.parse().ok());
    let mut out = String::new();
    let heading = |h: &Provenance, name: &str| {
        format!(
            "\n*{}, driver {}, {}, commit `{}`: `assets/results/{name}`*\n\n",
            h.gpu, h.driver, h.date, h.commit
        )
    };
    for (name, file) in results::committed()? {
        match (kind, &file) {
            ("emulation-summary", results::Results::Emulation(e)) => {
                out.push_str(&heading(&e.head, &name));
                out.push_str("| step | verified runs passed | seeded bugs caught | all as expected |\n|---|---|---|---|\n");
                // One row per step: `dedup` only drops consecutive repeats, and the cases are
                // ordered by seed and shape, not by step.
                let mut steps: Vec<u32> = e.cases.iter().map(|c| c.step).collect();
                steps.sort_unstable();
                steps.dedup();
                for n in steps {
                    let mine: Vec<&EmulationCase> =
                        e.cases.iter().filter(|c| c.step == n).collect();
                    let (runs, bugs): (Vec<&EmulationCase>, Vec<&EmulationCase>) =
                        mine.iter().partition(|c| c.expected == Expected::Pass);
                    let met = |v: &[&EmulationCase]| v.iter().filter(|c| c.met_expectation).count();
                    out.push_str(&format!(
                        "| {n} | {} of {} | {} of {} | {} |\n",
                        met(&runs),
                        runs.len(),
                        met(&bugs),
                        bugs.len(),
                        if mine.iter().all(|c| c.met_expectation) {
                            "yes"
                        } else {
                            "**no**"
                        }
                    ));
                }
            }
            ("emulation", results::Results::Emulation(e)) => {
                out.push_str(&heading(&e.head, &name));
                out.push_str("| step | shape | dtype | run | seeded bug | expected | outcome | rel. error |\n|---|---|---|---|---|---|---|---|\n");
                for c in e.cases.iter().filter(|c| step.is_none_or(|n| c.step == n)) {
                    // The data seed, the emulation seed and the grid cap tell the runs apart.
                    let run = format!(
                        "seed {}, emu. {}{}",
                        c.seed,
                        c.emu_seed.map_or("-".to_string(), |e| e.to_string()),
                        c.clusters
                            .map(|n| format!(", {n} clusters"))
                            .unwrap_or_default()
                    );
                    out.push_str(&format!(
                        "| {} | {} | {} | {run} | {} | {} | {}{} | {} |\n",
                        c.step,
                        c.shape,
                        c.dtype,
                        c.mutation.as_deref().unwrap_or("-"),
                        if c.expected == Expected::Pass {
                            "pass"
                        } else {
                            "fail"
                        },
                        c.outcome,
                        if c.met_expectation { "" } else { " ⚠" },
                        c.rel_error_norm
                            .map_or_else(|| "-".into(), |e| format!("{e:.2e}"))
                    ));
                }
            }
            ("selftest", results::Results::Selftest(st)) => {
                out.push_str(&heading(&st.head, &name));
                out.push_str("| shape | dtype | cuBLAS median (µs) | cuBLAS TFLOP/s | % of peak | verified |\n|---|---|---|---|---|---|\n");
                for c in &st.cases {
                    out.push_str(&format!(
                        "| {} | {} | {:.1} | {:.1} | {} | {} |\n",
                        c.shape,
                        c.dtype,
                        c.cublas_median_us,
                        c.cublas_tflops,
                        c.peak_tflops.map_or_else(
                            || "-".into(),
                            |p| format!("{:.1}%", 100.0 * c.cublas_tflops / p)
                        ),
                        c.verified
                    ));
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out = format!("\n*No `{kind}` results recorded yet in `assets/results/`.*\n");
    }
    Ok(out)
}

/// The kernel diff from step `a` to step `b` as a fenced `diff` block (`{{#diff A B}}`, or
/// `{{#diff A B sm_90a}}` for the Hopper twins).
fn diff_block(spec: &str) -> Result<String> {
    let arch = if spec.split_whitespace().any(|w| w == "sm_90a") {
        Arch::Hopper
    } else {
        Arch::Blackwell
    };
    let nums: Vec<u32> = spec
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (Some(&a), Some(&b)) = (nums.first(), nums.get(1)) else {
        bail!("diff wants two step numbers");
    };
    let (sa, sb) = (runner::steps::get(a)?, runner::steps::get(b)?);
    Ok(format!(
        "```diff\n{}```\n",
        crate::diff::steps(sa.info(), sb.info(), arch, false, false)
    ))
}

/// Replace every `{{#NAME ARGS}}` marker with `render(ARGS)`; a marker that cannot be rendered
/// is an error naming it, so a broken marker never reaches a reader.
fn expand_marker(md: &str, name: &str, render: impl Fn(&str) -> Result<String>) -> Result<String> {
    let open = format!("{{{{#{name} ");
    let bare = format!("{{{{#{name}}}}}");
    let md = md.replace(&bare, &format!("{open}}}}}"));
    let mut out = String::new();
    let mut rest = md.as_str();
    while let Some(i) = rest.find(&open) {
        out.push_str(&rest[..i]);
        let after = &rest[i + open.len()..];
        let Some(j) = after.find("}}") else {
            bail!("unterminated {{{{#{name} marker");
        };
        let args = after[..j].trim();
        out.push_str(&render(args).with_context(|| format!("{{{{#{name} {args}}}}}"))?);
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A measured warp-role timeline (`{{#trace-figure N sm_90a}}`): the committed
/// `assets/results/trace-stepN-ARCH.svg` of `runner step N --arch ARCH --trace`, captioned from
/// its JSON's metadata (GPU, shape, date, commit), or, until one is committed, a note saying how
/// to record it.
fn trace_figure(spec: &str) -> Result<String> {
    trace_figure_in(&project_root().join("assets/results"), spec)
}

fn trace_figure_in(dir: &Path, spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let (Some(n), Some(sm), None) = (
        w.first().and_then(|s| s.parse::<u32>().ok()),
        w.get(1),
        w.get(2),
    ) else {
        bail!("trace-figure wants STEP sm_90a|sm_100a");
    };
    let arch = Arch::ALL
        .into_iter()
        .find(|a| a.sm() == *sm)
        .ok_or_else(|| anyhow!("trace-figure: unknown architecture {sm:?} (sm_90a or sm_100a)"))?;
    runner::steps::get(n)?;
    let stem = format!("trace-step{n}-{sm}");
    let cmd = format!("runner step {n} --arch {sm} --trace assets/results/trace");
    let (json, svg) = (
        dir.join(format!("{stem}.json")),
        dir.join(format!("{stem}.svg")),
    );
    if !json.is_file() || !svg.is_file() {
        return Ok(format!(
            "\n*Measured timeline of step {n}'s {}: not recorded yet. On an H100 or H200, `{cmd}` writes `assets/results/{stem}.svg` and `.json`, and the figure appears here.*\n",
            arch.name()
        ));
    }
    let text = std::fs::read_to_string(&json)
        .with_context(|| format!("cannot read {}", json.display()))?;
    let head = TraceFile::parse(&text)
        .with_context(|| format!("{} is not a trace", json.display()))?
        .other;
    // What the trace does not cover: a reader must know before reading its shares.
    let mut limits = format!(" It covers the first {:.0} µs of the launch.", head.end_us);
    if !head.cut_short.is_empty() || head.meta.dropped > 0 {
        limits.push_str(&format!(
            " Cut short: {} filled its record region ({} records dropped), so its row and its shares stop early.",
            if head.cut_short.is_empty() {
                "a warp".to_string()
            } else {
                head.cut_short.join(", ")
            },
            head.meta.dropped
        ));
    }
    if let Some(note) = &head.commit_note {
        limits.push_str(&format!(" Commit: {note}."));
    }
    let o = head.meta;
    if o.step != n || o.arch != arch {
        bail!(
            "{} is not the trace of step {n}'s {} (its otherData says step {}, arch {})",
            json.display(),
            arch.name(),
            o.step,
            o.arch.name()
        );
    }
    let total = o.grid.0 * o.grid.1 * o.grid.2;
    let caption = format!(
        "Measured: step {n}'s {} on {} (driver {}), {} {}, CTAs 0–{} of {total}, {}, commit {}",
        arch.name(),
        o.gpu,
        o.driver,
        o.shape,
        o.dtype,
        o.layout.ctas.saturating_sub(1),
        o.date,
        o.commit
    );
    let order_only = if o.emulated {
        " Emulated: only the order of events means something, not the durations."
    } else {
        ""
    };
    Ok(format!(
        "\n![{caption}](assets/results/{stem}.svg)\n\n*{caption}, recorded with `{cmd}`.{limits}{order_only} The JSON beside it opens in ui.perfetto.dev.*\n"
    ))
}

/// Step 6's visiting order (`{{#grid-order TILES_M TILES_N WIDTH MINOR}}`, MINOR `m` or `n`),
/// computed by the host twin of the kernel's `tile_coords`: an SVG for the HTML book, a text
/// grid for the terminal.
fn grid_order(spec: &str, html: bool) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let num = |i: usize| {
        w.get(i)
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&v| v > 0)
    };
    let minor = match w.get(3).map(|s| s.to_ascii_lowercase()) {
        Some(m) if m == "m" => MinorDim::M,
        Some(n) if n == "n" => MinorDim::N,
        _ => bail!("grid-order wants TILES_M TILES_N WIDTH m|n"),
    };
    let (Some(tm), Some(tn), Some(width)) = (num(0), num(1), num(2)) else {
        bail!("grid-order wants TILES_M TILES_N WIDTH m|n");
    };
    let order = visit_order(tm, tn, width, minor);
    let total = (tm * tn) as f64;
    if !html {
        let mut out = String::from("```text\n");
        for row in &order {
            out.push_str(&row.iter().map(|t| format!("{t:>4}")).collect::<String>());
            out.push('\n');
        }
        out.push_str("```\n");
        return Ok(out);
    }
    let cell = 34;
    let (wd, ht) = (tn * cell + 20, tm * cell + 20);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {wd} {ht}\" style=\"width: 100%; max-width: {wd}px\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    // Tiles shaded by visiting time, then the path through their centres in visiting order.
    let mut centres = vec![(0usize, 0usize); tm * tn];
    for (m, row) in order.iter().enumerate() {
        for (n, &t) in row.iter().enumerate() {
            let (x, y) = (10 + n * cell, 10 + m * cell);
            centres[t] = (x + cell / 2, y + cell / 2);
            let shade = 235.0 - 135.0 * t as f64 / total;
            svg.push_str(&format!(
                "<rect x=\"{x}\" y=\"{y}\" width=\"{cell}\" height=\"{cell}\" fill=\"rgb({shade:.0},{shade:.0},255)\" stroke=\"#fff\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{t}</text>",
                x + cell / 2,
                y + cell / 2 + 4
            ));
        }
    }
    let path: Vec<String> = centres.iter().map(|(x, y)| format!("{x},{y}")).collect();
    svg.push_str(&format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#c33\" stroke-width=\"1.5\" opacity=\"0.6\"/></svg>\n",
        path.join(" ")
    ));
    Ok(svg)
}

/// The tiles step 6's snake and step 5's row-major order have in flight at once on `gpu`, and the
/// operand blocks they touch (`{{#grid-footprint STEP GPU}}`), from the step's own configuration.
fn grid_footprint(spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let (Some(step), Some(gpu)) = (w.first().and_then(|s| s.parse().ok()), w.get(1)) else {
        bail!("grid-footprint wants STEP GPU");
    };
    let spec = KernelSpec::new(runner::steps::get(step)?, Arch::Blackwell);
    let param = |name: &str| {
        spec.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v as usize)
            .with_context(|| format!("step {step} has no {name}"))
    };
    let (width, minor) = (param("grid_tile_width")?, param("grid_minor_dim")?);
    let minor = if minor == 0 { MinorDim::M } else { MinorDim::N };
    let gpu = budget::gpu_by_key(gpu)?;
    let b = budget::for_step(
        step,
        gpu,
        common::Shape::DEFAULT,
        common::model::budget::Assumptions::DEFAULT,
    )?;
    let k = spec.shape();
    let tiles_m = common::Shape::DEFAULT.m / k.cluster_tile.0 as usize;
    let tiles_n = common::Shape::DEFAULT.n / k.cluster_tile.1 as usize;
    let count = b.clusters_at_once as usize;
    let touched = |order: &dyn Fn(usize, usize) -> usize| {
        let (mut rows, mut cols) = (vec![false; tiles_m], vec![false; tiles_n]);
        for (m, row) in rows.iter_mut().enumerate() {
            for (n, col) in cols.iter_mut().enumerate() {
                if order(m, n) < count {
                    *row = true;
                    *col = true;
                }
            }
        }
        let a = rows.iter().filter(|x| **x).count();
        let bb = cols.iter().filter(|x| **x).count();
        (a, bb)
    };
    let snake = visit_order(tiles_m, tiles_n, width, minor);
    let (ra, rb) = touched(&|m, n| m * tiles_n + n);
    let (sa, sb) = touched(&|m, n| snake[m][n]);
    Ok(format!(
        "| order ({tiles_m} × {tiles_n} tiles, first {count} in flight on a {}) | row-blocks of A | column-blocks of B | operand blocks |\n|---|---|---|---|\n| row-major | {ra} | {rb} | {} |\n| snake, bands of {width} along {} | {sa} | {sb} | {} |\n",
        gpu.name,
        ra + rb,
        if minor == MinorDim::N { "N" } else { "M" },
        sa + sb
    ))
}

/// A marker's renderer: its arguments (the text after its name), and whether the book is HTML.
type Render = fn(&str, bool) -> Result<String>;

/// The workbook's own markers, `{{#NAME ARGS}}`, in the order they are expanded: results tables,
/// claims, diffs, the budget box and its values, the phase model's tables, the glossary, the
/// measured figures, and step 6's visiting order (an SVG when HTML, else text). A new marker is
/// a line here and its renderer.
const MARKERS: &[(&str, Render)] = &[
    ("results", |s, _| results_table(s)),
    ("claim", |s, _| claims::claim(s)),
    ("heatmap-claim", |s, _| claims::heatmap_claim(s)),
    ("headline-call", |s, _| claims::headline_call(s)),
    ("vs-previous", |s, _| claims::vs_previous(s)),
    ("heatmap-gains", |s, _| claims::heatmap_gains(s)),
    ("motivation", |s, _| motivation::marker(s)),
    ("occupancy", |s, _| occupancy::marker(s)),
    ("noise-rule", |s, _| claims::noise_rule(s)),
    ("run-spread", |s, _| spread::run_spread(s)),
    ("bench-conditions", |s, _| spread::bench_conditions(s)),
    ("diff", |s, _| diff_block(s)),
    ("budget-value", |s, _| budget::value_marker(s)),
    ("budget-sources", |_, _| budget::sources_markdown()),
    ("budget", |s, _| budget_box(s)),
    ("phase-outcomes", |s, _| phase_tables::outcomes(s)),
    ("phase-timeline", |s, _| phase_tables::timeline(s)),
    ("comparables", |s, _| comparables::markdown(s)),
    ("glossary", |_, _| glossary::markdown(None)),
    ("grid-footprint", |s, _| grid_footprint(s)),
    ("trace-figure", |s, _| trace_figure(s)),
    ("sim-widget", widgets::marker),
    ("bench-plot", |s, _| measured::bench_plot(s)),
    ("twins-summary", |s, _| measured::twins_summary(s)),
    ("verified", |s, _| verified::marker(s)),
    ("emulation-caught", |s, _| measured::emulation_caught(s)),
    ("bench", |s, _| measured::bench(s)),
    ("speed-of-light", |s, _| roofline::speed_of_light(s)),
    ("measured-vs-model", |s, _| roofline::measured_vs_model(s)),
    ("trace-shares", |s, _| roofline::trace_shares(s)),
    ("published-gain", |s, _| roofline::published_gain(s)),
    ("twin-gain", |s, _| roofline::twin_gain(s)),
    ("exercise-timing", |s, _| exercise_timing::marker(s)),
    ("progress", progress::marker),
    ("grid-order", grid_order),
];

/// `{{#budget N}}`: step N's budget box, for every GPU of the budget's table.
fn budget_box(s: &str) -> Result<String> {
    let n: u32 = s
        .parse()
        .with_context(|| format!("budget wants a step number, got {s:?}"))?;
    budget::markdown(
        n,
        &common::model::budget::GPUS.iter().collect::<Vec<_>>(),
        common::Shape::DEFAULT,
        common::model::budget::Assumptions::DEFAULT,
    )
}

/// Expand every marker of [`MARKERS`] in `md`.
pub(crate) fn expand_markers(md: &str, html: bool) -> Result<String> {
    MARKERS
        .iter()
        .try_fold(md.to_string(), |md, (name, render)| {
            expand_marker(&md, name, |s| render(s, html))
        })
}

/// A step's chapter with its includes and results expanded.
pub fn chapter_markdown(step: &StepInfo) -> Result<String> {
    let md = read_repo_file(step.chapter)?;
    let base = Path::new(step.chapter)
        .parent()
        .and_then(|p| p.to_str())
        .unwrap_or("");
    expand_markers(&expand_includes(&md, base)?, false)
}

/// A chapter that is not a step's (`book/src/introduction.md`, ...), expanded as the steps' are.
pub fn other_chapter_markdown(rel: &str) -> Result<String> {
    let md = read_repo_file(rel)?;
    expand_markers(&expand_includes(&md, "book/src")?, false)
}

struct Results;

impl Preprocessor for Results {
    fn name(&self) -> &str {
        "workbook-results"
    }
    fn run(
        &self,
        _ctx: &PreprocessorContext,
        mut book: Book,
    ) -> mdbook_preprocessor::errors::Result<Book> {
        let mut failed = None;
        book.for_each_chapter_mut(|ch| {
            // A chapter may compare our kernels' speed only through the generated claims: the
            // check reads the chapter as written, before any include.
            if let Some(src) = &ch.source_path {
                let rel = format!("book/src/{}", src.display());
                if let Ok(raw) = read_repo_file(&rel) {
                    let found = claims::unbacked(&raw);
                    if !found.is_empty() {
                        failed.get_or_insert(format!(
                            "{}: compares our kernels in words no result backs (write them with {{{{#claim}}}}, {{{{#heatmap-claim}}}}, {{{{#headline-call}}}} or {{{{#vs-previous}}}}):\n{}",
                            ch.name,
                            found.join("\n")
                        ));
                    }
                }
            }
            match expand_markers(&ch.content, true) {
                Ok(md) => ch.content = md,
                Err(e) => {
                    failed.get_or_insert(format!("{}: {e:#}", ch.name));
                }
            }
        });
        match failed {
            Some(e) => Err(mdbook_preprocessor::errors::Error::msg(e)),
            None => Ok(book),
        }
    }
}

/// Build the HTML book; returns the output folder.
pub fn build(out: Option<PathBuf>) -> Result<PathBuf> {
    let root = project_root().join("book");
    if !root.join("book.toml").is_file() {
        bail!(
            "no book at {}: `runner book` needs the repository checkout",
            root.display()
        );
    }
    let mut md =
        mdbook_driver::MDBook::load(&root).map_err(|e| anyhow!("cannot load the book: {e:#}"))?;
    if let Some(out) = &out {
        md.config.build.build_dir = std::path::absolute(out)?;
    }
    md.with_preprocessor(Results);
    md.build()
        .map_err(|e| anyhow!("cannot build the book: {e:#}"))?;
    let dir = md.build_dir_for("html");
    // Figures live in the repository's assets/, outside the book's src/: copy them in.
    let assets = dir.join("assets");
    std::fs::create_dir_all(&assets)?;
    for entry in std::fs::read_dir(project_root().join("assets"))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "svg" || e == "png") {
            if let Some(name) = p.file_name() {
                std::fs::copy(&p, assets.join(name))?;
            }
        }
    }
    // Measured figures (trace timelines) committed under assets/results/.
    if let Ok(entries) = std::fs::read_dir(project_root().join("assets/results")) {
        let results = assets.join("results");
        std::fs::create_dir_all(&results)?;
        for entry in entries {
            let p = entry?.path();
            if let (Some(name), true) = (p.file_name(), p.extension().is_some_and(|e| e == "svg")) {
                std::fs::copy(&p, results.join(name))?;
            }
        }
    }
    // Figures drawn from code are drawn afresh, so the book shows what the code draws today
    // (a test keeps the copies in assets/ equal to it).
    for (file, svg) in figures::all()? {
        std::fs::write(assets.join(file), svg)
            .with_context(|| format!("cannot write {}", assets.join(file).display()))?;
    }
    // The simulator in the page: WebAssembly, the widgets, every kernel's PTX.
    widgets::build(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_lines_and_anchors() {
        let t = "a\n// ANCHOR: x\nb\nc\n// ANCHOR_END: x\nd\n";
        assert_eq!(select(t, None).unwrap(), t);
        assert_eq!(select(t, Some("x")).unwrap(), "b\nc\n");
        assert_eq!(select(t, Some("1:1")).unwrap(), "a\n");
        assert_eq!(select(t, Some("5:")).unwrap(), "d\n");
        assert!(select(t, Some("nope")).is_err());
        let md = "x\n<!-- ANCHOR: y -->\nkept\n<!-- ANCHOR_END: y -->\n";
        assert_eq!(select(md, Some("y")).unwrap(), "kept\n");
    }

    #[test]
    fn grid_order_renders_the_host_twin() {
        let text = grid_order("3 4 2 n", false).unwrap();
        assert!(text.contains("   0   1  10  11"), "{text}");
        let svg = grid_order("3 4 2 n", true).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
        assert!(grid_order("3 4 2 x", true).is_err());
    }

    #[test]
    fn markers_expand_or_fail_loudly() {
        let md = expand_markers("a {{#budget-value 0 kblock_cycles}} b", false).unwrap();
        assert_eq!(md, "a 512 b");
        let err = expand_markers("x {{#budget-value 0 nope}}", false).unwrap_err();
        assert!(
            format!("{err:#}").contains("{{#budget-value 0 nope}}"),
            "{err:#}"
        );
        assert!(expand_markers("{{#diff 0 42}}", false).is_err());
        assert!(expand_markers("{{#results selftest", false).is_err());
        let g = expand_markers("{{#glossary}}", false).unwrap();
        assert!(g.contains("**TMEM**"));
    }

    #[test]
    fn the_snake_keeps_fewer_operand_blocks_in_flight() {
        let t = grid_footprint("6 b200").unwrap();
        let row = |name: &str| -> Vec<usize> {
            let line = t
                .lines()
                .find(|l| l.starts_with(&format!("| {name}")))
                .unwrap();
            line.split('|')
                .filter_map(|c| c.trim().parse().ok())
                .collect()
        };
        let (rm, sn) = (row("row-major"), row("snake"));
        // First 74 tiles of 16 x 32: rows 0-2 of A and all 32 columns of B in row-major order;
        // ten rows of A and one band of 8 columns of B in the snake.
        assert_eq!(rm, vec![3, 32, 35], "{t}");
        assert_eq!(sn, vec![10, 8, 18], "{t}");
    }

    #[test]
    fn trace_figures_show_a_committed_trace_or_say_how_to_record_one() {
        let dir = std::env::temp_dir().join(format!("wb-trace-figure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let none = trace_figure_in(&dir, "4 sm_90a").unwrap();
        assert!(none.contains("not recorded yet"), "{none}");
        assert!(
            none.contains("`runner step 4 --arch sm_90a --trace assets/results/trace`"),
            "{none}"
        );
        let meta = serde_json::json!({"traceEvents": [], "otherData": {
            "kind": "trace", "step": 4, "arch": "hopper", "gpu": "NVIDIA H100 80GB HBM3",
            "driver": "580.1", "date": "2026-11-30", "commit": "1234abc", "dtype": "f16",
            "shape": {"m": 4096, "n": 8192, "k": 4096}, "emulated": false,
            "grid": [132, 1, 1], "layout": {"ctas": 4, "warps_per_cta": 12, "per_warp": 9},
            "kernel": "k.cu", "params": "", "cluster": 2, "block": 384, "records": 9,
            "dropped": 0, "timing": "measured", "clocks": [], "cut_short": [], "end_us": 1.0}});
        std::fs::write(dir.join("trace-step4-sm_90a.json"), meta.to_string()).unwrap();
        std::fs::write(dir.join("trace-step4-sm_90a.svg"), "<svg/>").unwrap();
        let fig = trace_figure_in(&dir, "4 sm_90a").unwrap();
        assert!(
            fig.contains("(assets/results/trace-step4-sm_90a.svg)"),
            "{fig}"
        );
        assert!(
            fig.contains("Measured: step 4's Hopper twin on NVIDIA H100 80GB HBM3 (driver 580.1), 4096x8192x4096 f16, CTAs 0–3 of 132, 2026-11-30, commit 1234abc"),
            "{fig}"
        );
        assert!(!fig.contains("Emulated"));
        assert!(
            fig.contains("covers the first 1 µs") && !fig.contains("Cut short"),
            "{fig}"
        );
        // A trace whose warp ran out of room says so in its caption.
        let cut = meta
            .to_string()
            .replace("\"cut_short\":[]", "\"cut_short\":[\"CTA 0 warp 0\"]");
        assert!(cut.contains("CTA 0 warp 0"), "{cut}");
        std::fs::write(dir.join("trace-step4-sm_90a.json"), cut).unwrap();
        let fig = trace_figure_in(&dir, "4 sm_90a").unwrap();
        assert!(
            fig.contains("Cut short: CTA 0 warp 0 filled its record region"),
            "{fig}"
        );
        // A file that is another step's trace is refused, as are malformed markers.
        std::fs::copy(
            dir.join("trace-step4-sm_90a.json"),
            dir.join("trace-step5-sm_90a.json"),
        )
        .unwrap();
        std::fs::copy(
            dir.join("trace-step4-sm_90a.svg"),
            dir.join("trace-step5-sm_90a.svg"),
        )
        .unwrap();
        assert!(trace_figure_in(&dir, "5 sm_90a").is_err());
        assert!(trace_figure_in(&dir, "4 sm_80").is_err());
        assert!(trace_figure_in(&dir, "4").is_err());
        assert!(trace_figure_in(&dir, "42 sm_90a").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The rows of every markdown table in `md`, each as its cells, one `Vec` per table.
    fn tables(md: &str) -> Vec<Vec<Vec<String>>> {
        let mut out: Vec<Vec<Vec<String>>> = Vec::new();
        let mut in_table = false;
        for line in md.lines() {
            let l = line.trim();
            if !l.starts_with('|') {
                in_table = false;
                continue;
            }
            if !in_table {
                out.push(Vec::new());
                in_table = true;
                continue; // the header
            }
            if l.starts_with("|---") {
                continue;
            }
            let cells = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            if let Some(t) = out.last_mut() {
                t.push(cells);
            }
        }
        out
    }

    /// Fails if two rows of one table share the cells at `key`.
    fn assert_unique_rows(what: &str, md: &str, key: &[usize]) {
        for rows in tables(md) {
            let mut seen = std::collections::HashSet::new();
            for r in &rows {
                let k: Vec<&str> = key
                    .iter()
                    .map(|&i| r.get(i).map_or("", |c| c.as_str()))
                    .collect();
                assert!(
                    seen.insert(k.clone()),
                    "{what}: row {k:?} appears twice:\n{md}"
                );
            }
        }
    }

    #[test]
    fn generated_tables_have_one_row_per_key() {
        // The helper itself must catch a repeat (the emulation summary once listed every step
        // eleven times).
        let repeated = "| step | n |\n|---|---|\n| 0 | 1 |\n| 1 | 1 |\n| 0 | 1 |\n";
        assert!(std::panic::catch_unwind(|| assert_unique_rows("plant", repeated, &[0])).is_err());

        let summary = results_table("emulation-summary").unwrap();
        assert_unique_rows("emulation summary", &summary, &[0]);
        if !summary.contains("No `emulation-summary`") {
            for rows in tables(&summary) {
                // One row per step the committed run covered (a step newer than the run has
                // none yet).
                assert!(
                    !rows.is_empty() && rows.len() <= runner::steps::all().len(),
                    "one row per step:\n{summary}"
                );
            }
        }
        assert_unique_rows("selftest", &results_table("selftest").unwrap(), &[0, 1]);
        for n in 0..runner::steps::all().len() {
            assert_unique_rows(
                "emulation",
                &results_table(&format!("emulation {n}")).unwrap(),
                &[0, 1, 2, 3, 4],
            );
            let one = measured::bench(&format!("step {n}")).unwrap();
            assert_unique_rows("bench step", &one, &[0, 1]);
        }
        assert_unique_rows("bench", &measured::bench("").unwrap(), &[0, 1]);
        assert_unique_rows("twins", &measured::twins_summary("").unwrap(), &[0]);
        assert_unique_rows("caught", &measured::emulation_caught("").unwrap(), &[0, 2]);
    }

    #[test]
    fn the_chapter_list_is_the_books_summary() {
        // Every page of SUMMARY.md is a step's chapter, the glossary (generated), or in CHAPTERS,
        // and the other way round: `runner explain` reaches every page the book has.
        let summary = read_repo_file("book/src/SUMMARY.md").unwrap();
        let pages: Vec<String> = summary
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
            .map(|p| format!("book/src/{p}"))
            .collect();
        let mut known: Vec<String> = runner::steps::all()
            .iter()
            .map(|s| s.info().chapter.to_string())
            .chain(CHAPTERS.iter().map(|(_, p)| p.to_string()))
            .collect();
        known.push("book/src/glossary.md".into());
        for p in &pages {
            assert!(
                known.contains(p),
                "{p} is in SUMMARY.md but not in book::CHAPTERS"
            );
        }
        for p in &known {
            assert!(pages.contains(p), "{p} is not in SUMMARY.md");
        }
    }

    #[test]
    fn each_chapter_opens_with_its_one_idea_in_three_lines() {
        let mut chapters: Vec<String> = runner::steps::all()
            .iter()
            .map(|s| s.info().chapter.to_string())
            .collect();
        for c in [
            "barriers",
            "prerequisites",
            "emulation",
            "speed-of-light",
            "running",
            "verification",
        ] {
            chapters.push(format!("book/src/{c}.md"));
        }
        for c in chapters {
            let md = read_repo_file(&c).unwrap();
            let lines: Vec<&str> = md.lines().collect();
            let start = lines
                .iter()
                .take(10)
                .position(|l| l.starts_with("> **The one idea.**"))
                .unwrap_or_else(|| panic!("{c} opens with its one idea"));
            let len = lines[start..]
                .iter()
                .take_while(|l| l.starts_with('>'))
                .count();
            assert_eq!(len, 3, "{c}: the one-idea box has three lines");
        }
    }

    #[test]
    fn normalises_relative_paths() {
        assert_eq!(
            normalise(Path::new("book/src/../../steps/a.cu")),
            "steps/a.cu"
        );
    }
}
