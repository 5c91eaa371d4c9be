//! The budget box: `runner budget N` and the book's `{{#budget N}}` / `{{#budget-value N KEY
//! [GPU]}}` markers, rendered from `common::model::budget`. Numbers are formatted here and nowhere else, so
//! the chapters quote the arithmetic instead of typing it.

use anyhow::{bail, Result};
use common::model::budget::{budget, Assumptions, Budget, BudgetInput, GpuSpec, B200, GPUS};
use common::step::{Arch, KernelSpec};
use common::Shape;

pub fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{} MiB", trim(b / (1024.0 * 1024.0), 1))
    } else if b >= 1024.0 {
        format!("{} KiB", trim(b / 1024.0, 1))
    } else {
        format!("{b:.0} B")
    }
}

pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{} ms", trim(ns / 1e6, 2))
    } else if ns >= 1e3 {
        format!("{} µs", trim(ns / 1e3, 1))
    } else {
        format!("{ns:.0} ns")
    }
}

pub fn fmt_flop(f: f64) -> String {
    if f >= 1e9 {
        format!("{} GFLOP", trim(f / 1e9, 2))
    } else {
        format!("{} MFLOP", trim(f / 1e6, 2))
    }
}

/// `x` with at most `digits` decimals, trailing zeros dropped.
fn trim(x: f64, digits: usize) -> String {
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The arithmetic for one step of the ladder on one GPU.
pub fn for_step(
    step: u32,
    gpu: &GpuSpec,
    shape: Shape,
    assumptions: Assumptions,
) -> Result<Budget> {
    let s = runner::steps::get(step)?;
    Ok(budget(BudgetInput::from_step(s), gpu, shape, assumptions))
}

/// One formatted value, for `{{#budget-value STEP KEY [GPU]}}` in the prose.
pub fn value(b: &Budget, key: &str) -> Option<String> {
    Some(match key {
        "flop_per_kblock" => fmt_flop(b.flop_per_kblock),
        "bytes_per_kblock" => fmt_bytes(b.bytes_per_kblock),
        "intensity" => trim(b.intensity, 1),
        "smem_bytes" => b.smem_bytes.to_string(),
        "tmem_cols" => b.tmem_cols.to_string(),
        "kblock_ns" => fmt_ns(b.kblock_ns),
        "kblock_cycles" => format!("{:.0}", b.kblock_cycles),
        "clock_mhz" => format!("{:.0}", b.clock_mhz),
        "demand_tbps" => format!("{} TB/s", trim(b.demand_tbps, 1)),
        "demand_vs_hbm" => trim(b.demand_tbps / b.gpu.hbm_tbps, 1),
        "inflight_bytes" => fmt_bytes(b.inflight_bytes),
        "needed_inflight_bytes" => fmt_bytes(b.needed_inflight_bytes),
        "latency_covered_ns" => fmt_ns(b.latency_covered_ns),
        "latency_ns" => fmt_ns(b.assumptions.load_latency_ns),
        "mainloop" => fmt_ns(b.mainloop_ns),
        "epilogue" => fmt_ns(b.epilogue_ns),
        "epilogue_percent" => format!("{:.0}", 100.0 * b.epilogue_ns / b.mainloop_ns),
        "tiles" => b.tiles.to_string(),
        "clusters_at_once" => b.clusters_at_once.to_string(),
        "rounds" => b.rounds.to_string(),
        "last_round_tiles" => b.last_round_tiles.to_string(),
        "problem" => fmt_ns(b.problem_ns),
        "compulsory" => fmt_ns(b.compulsory_ns),
        "sms" => b.gpu.sms.to_string(),
        "peak_tflops" => format!("{} TFLOP/s", trim(b.gpu.dense_f16_tflops, 1)),
        "hbm_tbps" => format!("{} TB/s", trim(b.gpu.hbm_tbps, 2)),
        // FLOP per byte where the HBM roof meets the compute roof.
        "ridge" => format!("{:.0}", b.gpu.dense_f16_tflops / b.gpu.hbm_tbps),
        // FLOP per byte of the whole problem moving A, B and C once.
        "problem_intensity" => format!("{:.0}", b.shape.flops() / b.compulsory_bytes),
        "problem_at_peak" => fmt_ns(b.shape.flops() / (b.gpu.dense_f16_tflops * 1e12) * 1e9),
        _ => return None,
    })
}

/// The keys `value` knows, for error messages.
pub const KEYS: &[&str] = &[
    "flop_per_kblock",
    "bytes_per_kblock",
    "intensity",
    "smem_bytes",
    "tmem_cols",
    "kblock_ns",
    "kblock_cycles",
    "clock_mhz",
    "demand_tbps",
    "demand_vs_hbm",
    "inflight_bytes",
    "needed_inflight_bytes",
    "latency_covered_ns",
    "latency_ns",
    "mainloop",
    "epilogue",
    "epilogue_percent",
    "tiles",
    "clusters_at_once",
    "rounds",
    "last_round_tiles",
    "problem",
    "compulsory",
    "sms",
    "peak_tflops",
    "hbm_tbps",
    "ridge",
    "problem_intensity",
    "problem_at_peak",
];

/// `{{#budget-value STEP KEY [GPU]}}`: one number in the prose, B200 unless a GPU is named.
pub fn value_marker(spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let (Some(step), Some(key)) = (w.first().and_then(|s| s.parse().ok()), w.get(1)) else {
        bail!("budget-value wants STEP KEY [GPU], got {spec:?}");
    };
    let gpu = match w.get(2) {
        Some(k) => gpu_by_key(k)?,
        None => &B200,
    };
    let b = for_step(step, gpu, Shape::DEFAULT, Assumptions::DEFAULT)?;
    match value(&b, key) {
        Some(v) => Ok(v),
        None => bail!(
            "budget-value: unknown key {key:?}; known: {}",
            KEYS.join(", ")
        ),
    }
}

pub fn gpu_by_key(key: &str) -> Result<&'static GpuSpec> {
    match common::model::budget::find_gpu(key) {
        Some(g) => Ok(g),
        None => bail!(
            "unknown GPU {key:?}; known: {}",
            GPUS.iter().map(|g| g.key).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `runner budget N [--gpu G]... [--m --n --k] [--latency-ns NS]`: the box for the terminal.
pub fn command(
    step: u32,
    gpus: &[String],
    shape: (Option<usize>, Option<usize>, Option<usize>),
    latency_ns: Option<f64>,
) -> Result<String> {
    let (chosen, shape, assumptions) = inputs(step, gpus, shape, latency_ns)?;
    markdown(step, &chosen, shape, assumptions)
}

/// `runner budget N --json`: the same arithmetic as numbers (seconds as ns, bytes, FLOP), one
/// object per GPU, for scripts.
pub fn json(
    step: u32,
    gpus: &[String],
    shape: (Option<usize>, Option<usize>, Option<usize>),
    latency_ns: Option<f64>,
) -> Result<serde_json::Value> {
    let (chosen, shape, assumptions) = inputs(step, gpus, shape, latency_ns)?;
    let rows: Vec<Budget> = chosen
        .iter()
        .map(|g| for_step(step, g, shape, assumptions))
        .collect::<Result<_>>()?;
    let Some(first) = rows.first() else {
        bail!("no GPU to compute a budget for");
    };
    let i = first.input;
    Ok(serde_json::json!({
        "step": step,
        "shape": {"m": shape.m, "n": shape.n, "k": shape.k},
        "load_latency_ns": assumptions.load_latency_ns,
        "tiles": {
            "tile_m": i.tile_m, "tile_n": i.tile_n, "tile_k": i.tile_k, "stages": i.stages,
            "cluster": i.cluster, "acc_cols": i.acc_cols(), "lookahead": i.lookahead,
            "acc_stages": i.acc_stages, "epilogue_overlaps": i.epilogue_overlaps,
            "elem_bytes": i.elem_bytes,
            "flop_per_kblock": first.flop_per_kblock, "bytes_per_kblock": first.bytes_per_kblock,
            "flop_per_byte": first.intensity, "smem_bytes": first.smem_bytes,
            "tmem_cols": first.tmem_cols,
        },
        "gpus": rows.iter().map(|b| serde_json::json!({
            "gpu": b.gpu.key, "name": b.gpu.name, "tcgen05": b.gpu.tcgen05, "sms": b.gpu.sms,
            "peak_tflops": b.gpu.dense_f16_tflops, "hbm_tbps": b.gpu.hbm_tbps,
            "kblock_ns": b.kblock_ns, "kblock_cycles": b.kblock_cycles, "clock_mhz": b.clock_mhz,
            "demand_per_sm_gbps": b.demand_per_sm_gbps, "demand_tbps": b.demand_tbps,
            "inflight_bytes": b.inflight_bytes, "needed_inflight_bytes": b.needed_inflight_bytes,
            "latency_covered_ns": b.latency_covered_ns, "k_blocks": b.k_blocks,
            "mainloop_ns": b.mainloop_ns, "epilogue_ns": b.epilogue_ns,
            "c_bytes_per_tile": b.c_bytes_per_tile, "tiles": b.tiles,
            "clusters_at_once": b.clusters_at_once, "rounds": b.rounds,
            "last_round_tiles": b.last_round_tiles, "problem_ns": b.problem_ns,
            "compulsory_bytes": b.compulsory_bytes, "compulsory_ns": b.compulsory_ns,
        })).collect::<Vec<_>>(),
    }))
}

/// The GPUs, shape and assumptions a `runner budget` command line asks for, checked.
fn inputs(
    step: u32,
    gpus: &[String],
    (m, n, k): (Option<usize>, Option<usize>, Option<usize>),
    latency_ns: Option<f64>,
) -> Result<(Vec<&'static GpuSpec>, Shape, Assumptions)> {
    let s = runner::steps::get(step)?;
    let shape = Shape {
        m: m.unwrap_or(Shape::DEFAULT.m),
        n: n.unwrap_or(Shape::DEFAULT.n),
        k: k.unwrap_or(Shape::DEFAULT.k),
    };
    KernelSpec::new(s, Arch::Blackwell)
        .check_shape(shape)
        .map_err(anyhow::Error::msg)?;
    let mut assumptions = Assumptions::DEFAULT;
    if let Some(ns) = latency_ns {
        if !(ns.is_finite() && ns > 0.0) {
            bail!("--latency-ns must be a positive number of nanoseconds (got {ns})");
        }
        assumptions.load_latency_ns = ns;
    }
    let chosen: Vec<&GpuSpec> = if gpus.is_empty() {
        GPUS.iter().collect()
    } else {
        gpus.iter().map(|g| gpu_by_key(g)).collect::<Result<_>>()?
    };
    Ok((chosen, shape, assumptions))
}

/// The budget box of a step as markdown: the tiles' arithmetic, then one column per GPU.
pub fn markdown(
    step: u32,
    gpus: &[&GpuSpec],
    shape: Shape,
    assumptions: Assumptions,
) -> Result<String> {
    let rows: Vec<Budget> = gpus
        .iter()
        .map(|g| for_step(step, g, shape, assumptions))
        .collect::<Result<_>>()?;
    let Some(first) = rows.first() else {
        bail!("no GPU to compute a budget for");
    };
    let i = first.input;
    let mut md = format!(
        "**Budget of step {step}: arithmetic from its configuration and published GPU figures, \
         not a measurement.** Problem {} × {} × {} (M × N × K), 16-bit inputs; per SM, one CTA \
         per SM.\n\n",
        shape.m, shape.n, shape.k
    );
    md.push_str("| the step's tiles | |\n|---|---|\n");
    // Every design issues a load STAGES - 1 k-blocks of MMA before the MMA that reads it
    // (`common::model::budget`); a single warp's prefetch distance is shorter, not its lookahead.
    let lookahead = if i.lookahead < i.stages {
        format!(
            "{} k-blocks ahead of the MMA that reads them (prefetch distance {})",
            i.stages.saturating_sub(1),
            i.lookahead
        )
    } else {
        format!(
            "{} k-blocks ahead of the MMA that reads them",
            i.stages.saturating_sub(1)
        )
    };
    let config_rows = [
        (
            "accumulator per SM × k-block",
            format!("{} × {} × {}", i.tile_m, i.acc_cols(), i.tile_k),
        ),
        ("FLOP per k-block", fmt_flop(first.flop_per_kblock)),
        (
            "A + B bytes per k-block",
            format!(
                "({} + {}) × {} × {} B = {}",
                i.tile_m,
                i.tile_n,
                i.tile_k,
                i.elem_bytes,
                fmt_bytes(first.bytes_per_kblock)
            ),
        ),
        ("FLOP per byte loaded", trim(first.intensity, 1)),
        (
            "ring",
            format!(
                "{} stages = {}; loads {lookahead}",
                i.stages,
                fmt_bytes(f64::from(i.stages) * first.bytes_per_kblock)
            ),
        ),
        (
            "shared memory / tensor memory",
            format!(
                "{} / {} of 512 columns",
                fmt_bytes(f64::from(first.smem_bytes)),
                first.tmem_cols
            ),
        ),
        (
            "epilogue",
            if i.epilogue_overlaps {
                "a dedicated warpgroup, overlapping the next tile's main loop".to_string()
            } else {
                "after the main loop, in the same warps".to_string()
            },
        ),
    ];
    for (k, v) in config_rows {
        md.push_str(&format!("| {k} | {v} |\n"));
    }
    md.push('\n');
    md.push_str("| at the published peak |");
    for b in &rows {
        md.push_str(&format!(
            " {}{} |",
            b.gpu.name,
            if b.gpu.tcgen05 { "" } else { "¹" }
        ));
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(rows.len()));
    md.push('\n');
    type Cell = fn(&Budget) -> String;
    let gpu_rows: [(&str, Cell); 8] = [
        ("one k-block", |b| {
            format!("{} = {:.0} clocks", fmt_ns(b.kblock_ns), b.kblock_cycles)
        }),
        ("A + B traffic, all SMs", |b| {
            format!(
                "{} TB/s = {}× HBM",
                trim(b.demand_tbps, 1),
                trim(b.demand_tbps / b.gpu.hbm_tbps, 1)
            )
        }),
        ("in flight: ring vs latency × demand", |b| {
            format!(
                "{} vs {}",
                fmt_bytes(b.inflight_bytes),
                fmt_bytes(b.needed_inflight_bytes)
            )
        }),
        ("load latency the ring hides", |b| {
            fmt_ns(b.latency_covered_ns)
        }),
        ("main loop of a tile", |b| fmt_ns(b.mainloop_ns)),
        ("epilogue of a tile (C at the SM's HBM share)", |b| {
            format!(
                "{} = {:.0}% of the main loop",
                fmt_ns(b.epilogue_ns),
                100.0 * b.epilogue_ns / b.mainloop_ns
            )
        }),
        ("tiles / clusters at once / rounds", |b| {
            format!(
                "{} / {} / {} (last: {} busy)",
                b.tiles, b.clusters_at_once, b.rounds, b.last_round_tiles
            )
        }),
        ("whole problem at peak vs A, B, C once at HBM speed", |b| {
            format!("{} vs {}", fmt_ns(b.problem_ns), fmt_ns(b.compulsory_ns))
        }),
    ];
    for (label, cell) in gpu_rows {
        md.push_str(&format!("| {label} |"));
        for b in &rows {
            md.push_str(&format!(" {} |", cell(b)));
        }
        md.push('\n');
    }
    md.push_str(&format!(
        "\nAssumed, not published and not measured here: a load latency of {} under load \
         (NVIDIA publishes none).",
        fmt_ns(assumptions.load_latency_ns)
    ));
    if rows.iter().any(|b| !b.gpu.tcgen05) {
        md.push_str(
            " ¹ Hopper has no tcgen05: its column shows what the same tiles would ask of it.",
        );
    }
    // The sources are printed once, under the speed-of-light chapter's table (`{{#budget-sources}}`).
    md.push_str(" The GPU figures' sources: [The speed of light](speed-of-light.md#two-roofs).\n");
    Ok(md)
}

/// `{{#budget-sources}}`: where each GPU figure of the budget comes from, printed once in the
/// book (the speed-of-light chapter); every budget box links there.
pub fn sources_markdown() -> Result<String> {
    let mut md = String::from("Sources of the GPU figures:");
    for g in common::model::budget::GPUS {
        md.push_str(&format!(" {} — {}.", g.name, g.sources.join("; ")));
    }
    md.push('\n');
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_reads_its_own_plan() {
        // The budget's input comes from the Step trait; its shared-memory arithmetic must agree
        // with the host plan that launches the kernel.
        for s in runner::steps::all() {
            let n = s.info().number;
            let b = for_step(n, &B200, Shape::DEFAULT, Assumptions::DEFAULT).unwrap();
            let k = KernelSpec::new(s, Arch::Blackwell).shape();
            let plan = k.plan(Shape::DEFAULT, k.default_max_clusters(None));
            assert_eq!(b.smem_bytes, plan.dims.smem_bytes, "step {n}");
            assert!(
                b.tmem_cols <= 512,
                "step {n}: tensor memory has 512 columns"
            );
            assert_eq!(b.input.cluster, k.cluster);
            assert_eq!(
                b.tiles * k.cluster,
                if k.schedule.fills_the_gpu() {
                    k.num_tiles(Shape::DEFAULT) * k.cluster
                } else {
                    plan.dims.grid.0 * plan.dims.grid.1
                },
                "step {n}: tiles × CTAs per cluster = CTAs of one tile each"
            );
        }
    }

    #[test]
    fn formats_are_short_and_exact() {
        assert_eq!(fmt_bytes(49152.0), "48 KiB");
        assert_eq!(fmt_bytes(139_810.0), "136.5 KiB");
        assert_eq!(fmt_bytes(64.0 * 1024.0 * 1024.0), "64 MiB");
        assert_eq!(fmt_ns(276.0), "276 ns");
        assert_eq!(fmt_ns(17_680.0), "17.7 µs");
        assert_eq!(fmt_flop(4_194_304.0), "4.19 MFLOP");
        assert_eq!(trim(85.333, 1), "85.3");
        assert_eq!(trim(128.0, 1), "128");
    }

    #[test]
    fn the_box_is_labelled_and_sourced() {
        let md = markdown(
            3,
            &GPUS.iter().collect::<Vec<_>>(),
            Shape::DEFAULT,
            Assumptions::DEFAULT,
        )
        .unwrap();
        assert!(md.contains("not a measurement"), "{md}");
        assert!(md.contains("| FLOP per byte loaded | 128 |"), "{md}");
        // The sources are printed once, by `{{#budget-sources}}`; every box links there.
        assert!(md.contains("speed-of-light.md#two-roofs"), "{md}");
        let sources = sources_markdown().unwrap();
        for g in GPUS {
            assert!(md.contains(g.name));
            for s in g.sources {
                assert!(sources.contains(s), "{s}");
            }
        }
        assert!(md.contains("Assumed, not published"));
        assert_eq!(value_marker("2 intensity").unwrap(), "85.3");
        assert_eq!(value_marker("3 intensity h100").unwrap(), "128");
        assert_eq!(value_marker("0 kblock_cycles").unwrap(), "512");
        assert!(value_marker("0 bogus")
            .unwrap_err()
            .to_string()
            .contains("known:"));
        assert!(value_marker("9 intensity").is_err());
        assert!(value_marker("0 intensity mi300").is_err());
        for key in KEYS {
            let b = for_step(0, &B200, Shape::DEFAULT, Assumptions::DEFAULT).unwrap();
            assert!(value(&b, key).is_some(), "{key}");
        }
    }
}
