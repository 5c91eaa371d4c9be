//! Exercises that measure: the Hopper counterpart of every exercise whose chapter says "on a B200
//! this should be slower". The Blackwell kernels only run under emulation on an H100/H200, where
//! times mean nothing; the Hopper twins hold the same idea (a prefetch distance, a ring depth, a
//! staging buffer, a band width) and run natively. So `runner exercise N.M` also times variants
//! of step N's twin against the stock twin, in the same rounds of the one protocol
//! (`common::timing::time_rounds`, through `bench::bench_shape`), after the student has recorded a
//! prediction (`--predict faster|slower|same`, or a prompt), and prints "you predicted …, the GPU
//! measured …".
//!
//! What counts as "the same" is not a typed constant. Each variant is paired with the stock twin
//! round by round (the bench's `vs_previous`), and the 95 % bootstrap interval of that ratio, from
//! the rounds of this same run, decides: an interval that holds 1 is "the same" (the book's rule).
//! The spread the committed bench measured for the stock twin (its interquartile range over its
//! median, in the latest `assets/results/bench-*.json`) is the fallback where no interval could
//! be formed, and what a run needs before it times anything.
//!
//! Edits of a twin (a single staging buffer) are written as edits of the stock twin in
//! `exercises/twin-solutions.toml`, in the format of `exercises/solutions.toml` (`crate::edits`);
//! `--twin FILE` times the student's own edited twin instead. The JSON of every run carries the
//! measurement; `runner exercise --timings` collects them into
//! `assets/results/exercises-*.json`, which `{{#exercise-timing N.M}}` quotes in the chapter.

use crate::results::{ExerciseMeasured, ExerciseSpread, ExerciseStock, ExerciseVariant, Results};
use anyhow::{anyhow, bail, Context, Result};
use common::compile::KernelSource;
use common::edits;
use common::problem::{Dtype, Shape};
use common::step::{Arch, KernelSpec};
use serde::Deserialize;

const TWIN_SOLUTIONS: &str = include_str!("../../../exercises/twin-solutions.toml");

/// One variant of the twin, timed against the stock twin.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    /// How the report names it ("prefetch 1 (stages=3)").
    pub label: &'static str,
    /// `--param` overrides of the twin's parameters.
    pub params: &'static [&'static str],
    /// Whether its source is edited: the student's `--twin FILE`, else the committed edit of
    /// `exercises/twin-solutions.toml` with the exercise's id.
    pub edited: bool,
}

/// The timed counterpart of one exercise.
#[derive(Debug, Clone, Copy)]
pub struct Measure {
    pub id: &'static str,
    pub step: u32,
    /// What the stock twin is, in the report ("prefetch 2 (stages=4)").
    pub stock: &'static str,
    pub variants: &'static [Variant],
    /// What the student predicts, in one phrase: "the variants, against the stock twin".
    pub question: &'static str,
}

pub const MEASURES: &[Measure] = &[
    // Exercise 0.1 asks for PREFETCH = STAGES - 1. On the twin that edit deadlocks: warp 0 refills
    // the slot of k-block kb - 1 before its own warpgroup has released it (the release comes
    // later in the same iteration), so the timed counterpart varies the prefetch distance through
    // the ring depth instead (PREFETCH = STAGES - 2).
    Measure {
        id: "0.1",
        step: 0,
        stock: "prefetch 2 k-blocks (stages=4)",
        variants: &[
            Variant {
                label: "prefetch 1 k-block (stages=3)",
                params: &["stages=3"],
                edited: false,
            },
            Variant {
                label: "prefetch 3 k-blocks (stages=5)",
                params: &["stages=5"],
                edited: false,
            },
        ],
        question: "a shorter or a longer prefetch distance, against 2 k-blocks",
    },
    Measure {
        id: "1.2",
        step: 1,
        stock: "4 stages",
        variants: &[Variant {
            label: "2 stages",
            params: &["stages=2"],
            edited: false,
        }],
        question: "a 2-stage ring, against 4 stages",
    },
    Measure {
        id: "2.1",
        step: 2,
        stock: "two staging buffers per consumer warpgroup",
        variants: &[Variant {
            label: "one staging buffer",
            params: &[],
            edited: true,
        }],
        question: "one staging buffer, against two",
    },
    Measure {
        id: "6.2",
        step: 6,
        stock: "bands 8 tiles wide",
        variants: &[
            Variant {
                label: "width 1",
                params: &["grid_tile_width=1"],
                edited: false,
            },
            Variant {
                label: "width 4",
                params: &["grid_tile_width=4"],
                edited: false,
            },
            Variant {
                label: "width 16",
                params: &["grid_tile_width=16"],
                edited: false,
            },
        ],
        question: "bands 1, 4 or 16 tiles wide, against 8",
    },
];

/// The problem the exercises time: the book's default shape in f16, which the committed bench
/// also times (so its spread applies).
pub const SHAPE: Shape = Shape::DEFAULT;
pub const DTYPE: Dtype = Dtype::F16;

pub fn find(id: &str) -> Option<&'static Measure> {
    MEASURES.iter().find(|m| m.id == id)
}

/// A student's prediction, and what the GPU measured: a variant against the stock twin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Verdict {
    Faster,
    Slower,
    Same,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
        }
    }

    fn parse(s: &str) -> Option<Verdict> {
        match s.trim().to_ascii_lowercase().as_str() {
            "faster" | "f" => Some(Verdict::Faster),
            "slower" | "s" => Some(Verdict::Slower),
            "same" | "=" => Some(Verdict::Same),
            _ => None,
        }
    }
}

/// A variant's median against the stock twin's: slower or faster when the relative difference
/// is larger than `spread` (the bench's relative interquartile range), else the same.
pub fn classify(stock_us: f64, variant_us: f64, spread: f64) -> Verdict {
    let d = variant_us / stock_us - 1.0;
    if d > spread {
        Verdict::Slower
    } else if d < -spread {
        Verdict::Faster
    } else {
        Verdict::Same
    }
}

/// A variant's verdict from its paired ratio to the stock twin (the stock's time over the
/// variant's, per round): faster where the whole 95 % interval is above 1.
pub fn from_interval(r: &common::confidence::Ratio) -> Verdict {
    match r.verdict {
        common::confidence::Verdict::Faster => Verdict::Faster,
        common::confidence::Verdict::Slower => Verdict::Slower,
        common::confidence::Verdict::Same => Verdict::Same,
    }
}

/// The spread below which two medians are "the same", and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// (q3 - q1) / median of the stock twin in the committed bench.
    pub relative: f64,
    pub source: String,
}

/// The committed bench's spread for step `step`'s twin at `shape` and `dtype`: the latest file
/// of kind `bench` (by its date) that timed it.
pub fn spread(step: u32, shape: Shape, dtype: Dtype) -> Result<Spread> {
    spread_in(&crate::results::committed()?, step, shape, dtype)
}

fn spread_in(files: &[(String, Results)], step: u32, shape: Shape, dtype: Dtype) -> Result<Spread> {
    let benches = crate::results::oldest_first(files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    });
    for (name, bench, _) in benches.iter().rev() {
        let Some(st) = bench
            .find(shape, dtype, &format!("step {step}"))
            .and_then(|c| c.stats.as_ref())
        else {
            continue;
        };
        // Files written before the quartiles were recorded read them as 0: no spread there.
        let (q1, q3, med) = (st.q1_us, st.q3_us, st.median_us);
        if q1 == 0.0 && q3 == 0.0 {
            continue;
        }
        if med > 0.0 && q3 >= q1 {
            return Ok(Spread {
                relative: (q3 - q1) / med,
                source: format!(
                    "the interquartile range of step {step}'s twin at {shape} {dtype} in assets/results/{name}"
                ),
            });
        }
    }
    bail!("no committed bench (assets/results/bench-*.json) timed step {step}'s twin at {shape} {dtype} with quartiles: the threshold between faster, slower and the same comes from it")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TwinSolution {
    id: String,
    edit: Vec<edits::Edit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TwinSolutionFile {
    #[serde(default)]
    snippets: std::collections::BTreeMap<String, String>,
    solution: Vec<TwinSolution>,
}

/// The committed edit of step `step`'s twin for exercise `id`.
pub fn twin_solution(id: &str, step: u32) -> Result<String> {
    let file: TwinSolutionFile =
        toml::from_str(TWIN_SOLUTIONS).context("exercises/twin-solutions.toml")?;
    let sol =
        file.solution.iter().find(|s| s.id == id).ok_or_else(|| {
            anyhow!("exercises/twin-solutions.toml has no edit for exercise {id}")
        })?;
    let base = runner::steps::get(step)?.info().kernel(Arch::Hopper).text;
    edits::apply(
        &format!("twin solution {id}"),
        base,
        &sol.edit,
        &file.snippets,
    )
}

/// One kernel to time: a name for the report, its spec and source.
struct Build {
    name: String,
    spec: KernelSpec,
    source: KernelSource,
}

/// The stock twin and every variant; `twin` is the student's edited twin (`--twin FILE`, read by
/// the caller), else the committed edit where a variant is edited.
fn kernels(m: &Measure, twin: Option<&KernelSource>) -> Result<Vec<Build>> {
    let step = runner::steps::get(m.step)?;
    let stock = KernelSpec::new(step, Arch::Hopper);
    let edited = match twin {
        Some(src) => Some(src.clone()),
        None if m.variants.iter().any(|v| v.edited) => Some(KernelSource {
            path: format!("twin-solution-{}.cu", m.id),
            text: twin_solution(m.id, m.step)?,
        }),
        None => None,
    };
    // Named as the bench names the step's own kernel, so that every variant (a contender of
    // step N) is paired with it round by round (`vs_previous`): the verdict's interval comes
    // from the same rounds as the times.
    let mut out = vec![Build {
        name: format!("step {}", m.step),
        source: stock.source(),
        spec: stock.clone(),
    }];
    for v in m.variants {
        let mut spec = stock.clone();
        let params: Vec<String> = v.params.iter().map(|p| p.to_string()).collect();
        spec.params
            .apply(&params)
            .map_err(|e| anyhow!("exercise {}: {e}", m.id))?;
        let source = match (&edited, v.edited) {
            (Some(src), true) => src.clone(),
            _ => spec.source(),
        };
        out.push(Build {
            name: v.label.to_string(),
            spec,
            source,
        });
    }
    Ok(out)
}

/// What the timed part of an exercise printed and found.
pub struct Report {
    /// (mark, text) lines as `exercise` prints them: ok, FAIL, part, note, run.
    pub lines: Vec<(&'static str, String)>,
    pub failed: bool,
    /// Compiled, not timed (no H100/H200 here).
    pub partial: bool,
    /// The measurement, for `--json` and `runner exercise --timings`.
    pub json: Option<ExerciseMeasured>,
}

/// Ask for a prediction on a terminal, when none was given.
pub fn prompt(m: &Measure) -> Option<Verdict> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return None;
    }
    print!(
        "Before the GPU answers: {}, faster, slower or the same? [faster/slower/same] ",
        m.question
    );
    std::io::stdout().flush().ok()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Verdict::parse(&line)
}

/// Compile every variant for sm_90a, then, on an H100/H200, time them against the stock twin.
pub fn run(m: &Measure, twin: Option<&KernelSource>, predicted: Option<Verdict>) -> Result<Report> {
    let mut r = Report {
        lines: Vec::new(),
        failed: false,
        partial: false,
        json: None,
    };
    let ks = kernels(m, twin)?;
    r.lines.push((
        "run",
        format!(
            "the Hopper counterpart: step {}'s twin, {} — timed against {} at {SHAPE} {DTYPE}",
            m.step,
            m.variants
                .iter()
                .map(|v| v.label)
                .collect::<Vec<_>>()
                .join(", "),
            m.stock
        ),
    ));
    match predicted {
        Some(p) => r
            .lines
            .push(("note", format!("you predicted: {}", p.word()))),
        None => r.lines.push((
            "note",
            "no prediction recorded: pass --predict faster|slower|same before you look".into(),
        )),
    }
    for k in &ks {
        if let Err(e) =
            common::compile::compile(&k.source, common::Target::Sm90a, &k.spec.defines(DTYPE))
        {
            r.lines.push((
                "FAIL",
                format!("{} does not compile for sm_90a: {e:#}", k.name),
            ));
            r.failed = true;
        }
    }
    if r.failed {
        return Ok(r);
    }
    let spread = match spread(m.step, SHAPE, DTYPE) {
        Ok(sp) => sp,
        Err(e) => {
            r.partial = true;
            r.lines.push(("part", format!("not timed: {e:#}")));
            return Ok(r);
        }
    };
    let gpu = match common::gpu::open() {
        common::gpu::GpuStatus::Present(g) => g,
        common::gpu::GpuStatus::Absent(why) => {
            r.partial = true;
            r.lines.push((
                "part",
                format!("the twin variants compile for sm_90a; not timed here ({why}): run it on an H100/H200"),
            ));
            return Ok(r);
        }
    };
    if gpu.info.compute_capability != (9, 0) {
        r.partial = true;
        r.lines.push((
            "part",
            format!(
                "the twin variants compile; they are timed natively on an H100/H200 only, and {} is {}",
                gpu.info.name,
                gpu.info.sm()
            ),
        ));
        return Ok(r);
    }
    let cases = time(&gpu, &ks)?;
    let blas = cases.iter().find(|c| c.kernel == "cublas");
    let stock = cases.iter().find(|c| c.kernel == ks[0].name);
    let Some(stock_us) = stock.and_then(|c| c.stats.as_ref()).map(|s| s.median_us) else {
        let why = stock
            .and_then(|c| c.skipped.clone())
            .unwrap_or_else(|| "not timed".into());
        r.lines
            .push(("FAIL", format!("the stock twin was not timed: {why}")));
        r.failed = true;
        return Ok(r);
    };
    let mut variants = Vec::new();
    let mut agree = 0;
    for k in &ks[1..] {
        let c = cases.iter().find(|c| c.kernel == k.name);
        let Some(st) = c.and_then(|c| c.stats.as_ref()) else {
            let why = c
                .and_then(|c| c.skipped.clone())
                .unwrap_or_else(|| "not timed".into());
            r.lines.push(("FAIL", format!("{}: {why}", k.name)));
            r.failed = true;
            continue;
        };
        // The paired interval of this run decides where there is one (the book's rule); the
        // committed bench's spread otherwise.
        let vs_stock = c
            .and_then(|c| c.confidence.vs_previous.as_ref())
            .filter(|v| v.contender == ks[0].name)
            .map(|v| v.ratio.clone());
        let verdict = match &vs_stock {
            Some(ratio) => from_interval(ratio),
            None => classify(stock_us, st.median_us, spread.relative),
        };
        agree += usize::from(Some(verdict) == predicted);
        let rel = 100.0 * (st.median_us / stock_us - 1.0);
        let basis = match &vs_stock {
            Some(x) => format!(
                "; the stock twin's time over this one's, round by round: {} ({} rounds)",
                x.describe(),
                x.rounds
            ),
            None => String::new(),
        };
        r.lines.push((
            "ok",
            format!(
                "{}: median {:.1} µs (quartiles {:.1}–{:.1}) against {stock_us:.1} µs: {rel:+.1} %{basis}, the GPU measured {}",
                k.name,
                st.median_us,
                st.q1_us,
                st.q3_us,
                verdict.word()
            ),
        ));
        variants.push(ExerciseVariant {
            label: k.name.clone(),
            params: k
                .spec
                .params
                .iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
            median_us: st.median_us,
            q1_us: st.q1_us,
            q3_us: st.q3_us,
            relative_pct: rel,
            verdict: verdict.word().to_string(),
            vs_stock,
        });
    }
    r.lines.push((
        "note",
        if variants.iter().all(|v| v.vs_stock.is_some()) {
            "\"same\" means that the 95 % interval of the paired ratio, from the rounds of this run, contains 1".to_string()
        } else {
            format!(
                "\"same\" means within ±{:.1} %: {}",
                100.0 * spread.relative,
                spread.source
            )
        },
    ));
    let measured: Vec<String> = variants
        .iter()
        .map(|v| format!("{} {}", v.label, v.verdict))
        .collect();
    r.lines.push((
        "note",
        match predicted {
            Some(p) => format!(
                "you predicted {}, the GPU measured: {} ({agree} of {} as predicted)",
                p.word(),
                measured.join("; "),
                variants.len()
            ),
            None => format!("the GPU measured: {}", measured.join("; ")),
        },
    ));
    let stock_stats = stock.and_then(|c| c.stats.as_ref());
    r.json = Some(ExerciseMeasured {
        exercise: m.id.to_string(),
        step: m.step,
        gpu: gpu.info.name.clone(),
        driver_version: gpu.info.driver_version.clone(),
        date: crate::provenance::today(),
        commit: crate::provenance::commit(),
        shape: SHAPE,
        dtype: DTYPE,
        protocol: crate::bench::PROTOCOL.to_string(),
        stock: ExerciseStock {
            label: m.stock.to_string(),
            median_us: stock_us,
            q1_us: stock_stats.map(|s| s.q1_us),
            q3_us: stock_stats.map(|s| s.q3_us),
            clocks: stock.and_then(|c| c.clocks.clone()),
        },
        cublas_median_us: blas.and_then(|c| c.stats.as_ref()).map(|s| s.median_us),
        spread: ExerciseSpread {
            relative: spread.relative,
            source: spread.source,
        },
        prediction: predicted.map(|p| p.word().to_string()),
        variants,
    });
    Ok(r)
}

/// The most time an exercise spends in timed rounds.
const ROUNDS_CAP: std::time::Duration = std::time::Duration::from_secs(12);

/// Time the kernels with cuBLAS in the rounds of the one protocol (what `runner bench` does).
fn time(gpu: &common::gpu::Gpu, ks: &[Build]) -> Result<Vec<crate::results::BenchCase>> {
    use common::run::{open_nvml, LoadedKernel};
    let blas = common::cublas::Blas::new(gpu)?;
    let flush = common::run::L2Flush::new(gpu)?;
    let warm = common::cublas::Warmup::new(gpu)?;
    let (nvml, _) = open_nvml(gpu);
    let mut entries = Vec::new();
    for (i, k) in ks.iter().enumerate() {
        let kernel = LoadedKernel::load(gpu, &k.spec, common::Target::Sm90a, &k.source, DTYPE)
            .with_context(|| k.name.clone())?;
        // The stock twin is the step's kernel (compared with nothing but cuBLAS); each variant
        // is a contender of it, compared with it in the same rounds.
        let step = (i == 0).then(|| k.spec.step.info().number);
        entries.push(crate::bench::Entry::new(
            k.name.clone(),
            step,
            k.spec.clone(),
            kernel,
        ));
    }
    let opts = crate::bench::BenchOptions {
        steps: Vec::new(),
        contenders: Vec::new(),
        shapes: vec![SHAPE],
        dtypes: vec![DTYPE],
        // As the committed bench: at least 30 timed rounds after 5 untimed ones, then more
        // until every variant's interval against the stock twin is within ±0.5 % or
        // ROUNDS_CAP has passed.
        iters: 30,
        warmup: 5,
        seed: 2024,
        out: std::path::PathBuf::new(),
        timeout: std::time::Duration::from_secs(30),
        heatmap: false,
        adaptive: Some(crate::bench::Adaptive {
            target: 0.005,
            cap: ROUNDS_CAP,
        }),
    };
    let ctx = crate::bench::Ctx {
        gpu,
        blas: &blas,
        flush: &flush,
        warm: &warm,
        nvml: nvml.as_ref(),
    };
    crate::bench::bench_shape(
        &ctx,
        &entries,
        SHAPE,
        DTYPE,
        &opts,
        &indicatif::ProgressBar::hidden(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_inside_the_spread_is_the_same() {
        assert_eq!(classify(100.0, 101.5, 0.02), Verdict::Same);
        assert_eq!(classify(100.0, 98.5, 0.02), Verdict::Same);
        assert_eq!(classify(100.0, 103.0, 0.02), Verdict::Slower);
        assert_eq!(classify(100.0, 97.0, 0.02), Verdict::Faster);
        assert_eq!(Verdict::parse(" Slower\n"), Some(Verdict::Slower));
        assert_eq!(Verdict::parse("maybe"), None);
    }

    #[test]
    fn the_spread_comes_from_the_latest_bench_that_timed_the_step() {
        let bench = |date: &str, q1: f64, q3: f64| {
            let mut case = crate::results::fixtures::case(SHAPE, DTYPE, Some(1), 100.0);
            case.stats = Some(common::timing::Stats {
                median_us: 500.0,
                min_us: 490.0,
                max_us: 510.0,
                q1_us: q1,
                q3_us: q3,
                runs: 30,
            });
            let mut report = crate::results::fixtures::report(vec![case]);
            report.date = date.to_string();
            Results::Bench(report)
        };
        let files = vec![
            (
                "bench-a.json".to_string(),
                bench("2026-11-20", 490.0, 510.0),
            ),
            (
                "bench-b.json".to_string(),
                bench("2026-11-25", 495.0, 505.0),
            ),
        ];
        let sp = spread_in(&files, 1, SHAPE, DTYPE).unwrap();
        assert!((sp.relative - 0.02).abs() < 1e-12, "{sp:?}");
        assert!(sp.source.contains("bench-b.json"), "{sp:?}");
        assert!(spread_in(&files, 2, SHAPE, DTYPE).is_err());
        assert!(spread_in(&files, 1, SHAPE, Dtype::Bf16).is_err());
        // The committed bench holds every measured step's twin at the exercises' shape.
        for m in MEASURES {
            let sp = spread(m.step, SHAPE, DTYPE).unwrap();
            assert!(sp.relative > 0.0 && sp.relative < 0.2, "{}: {sp:?}", m.id);
        }
    }

    #[test]
    fn every_variant_plans_and_every_edit_applies_and_compiles() {
        for m in MEASURES {
            let ks = kernels(m, None).unwrap();
            assert_eq!(ks.len(), m.variants.len() + 1, "{}", m.id);
            for (k, v) in ks[1..].iter().zip(m.variants) {
                assert!(
                    k.spec.params != ks[0].spec.params || v.edited,
                    "{}: {} changes nothing",
                    m.id,
                    k.name
                );
                if v.edited {
                    assert_ne!(k.source.text, ks[0].source.text, "{}: the edit", m.id);
                }
                k.spec
                    .check_shape(SHAPE)
                    .unwrap_or_else(|e| panic!("{}: {e}", m.id));
                common::compile::compile(&k.source, common::Target::Sm90a, &k.spec.defines(DTYPE))
                    .unwrap_or_else(|e| panic!("{} {}: {e:#}", m.id, k.name));
            }
        }
    }
}
