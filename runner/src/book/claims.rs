//! Claims about our own measurements, made by construction: every "faster", "slower" or "the
//! same" the book says about two of its kernels is generated here from the committed benches
//! (and the heatmap), by the one rule of [`super::rule`], which "Running the workbook" states
//! (`{{#noise-rule}}`): a verdict needs the paired interval to clear 1 in two independent
//! committed runs, by at least the practical threshold; anything else is the same within
//! run-to-run variation, printed with the spread between runs.
//!
//! Markers: `{{#claim A B SHAPE DTYPE CALL}}` (a sentence part that fails the build when the
//! committed benches do not say CALL), `{{#heatmap-claim ...}}` (the same against the heatmap,
//! one run), `{{#vs-previous N}}` (step N against step N − 1 at every bench shape),
//! `{{#heatmap-gains N}}` (the heatmap's shapes where step N's idea pays, or costs),
//! `{{#headline-call N}}`, `{{#noise-rule}}` and `{{#run-spread}}` (every case's spread between
//! the committed benches beside its interval). `unbacked` finds prose that compares our kernels
//! without them.

pub use super::rule::Call;
use super::rule::{self, Decision, Evidence, Within};
use crate::results::{self, oldest_first, BenchCase, BenchReport, Results};
use anyhow::{anyhow, bail, Context, Result};
use common::{Dtype, Shape};

/// The rule, as the book states it (the threshold and the runs are generated beside it).
pub const RULE: &str = "Our kernels are called \"faster\" or \"slower\" than one another only when the effect repeats. The 95 % bootstrap interval of the paired per-round ratio must lie wholly on one side of 1 in at least two independent committed benches: on another day or another GPU. The effect must be at least the practical threshold in each, and no committed bench may have measured it the other way. A difference that cleared in one bench that no other bench could test reads \"faster in one run, not yet repeated\". Anything else reads \"the same within run-to-run variation\", with the spread of the point estimates between benches shown.";

/// A set of committed runs of the same protocol (the benches of record, or one heatmap), and the
/// practical threshold the rule applies to them.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// File name (under `assets/results/`) and report, oldest first.
    pub runs: Vec<(String, &'a BenchReport)>,
    pub threshold: f64,
    /// The median run-to-run spread the threshold comes from, and how many pairs it is over.
    pub median_spread: Option<(f64, usize)>,
}

impl<'a> Record<'a> {
    /// `runs` with the threshold measured from their own spread between days on one GPU model.
    pub fn new(runs: Vec<(String, &'a BenchReport)>) -> Record<'a> {
        let spreads = same_gpu_spreads(&runs);
        let (threshold, median) = rule::threshold(&spreads);
        Record {
            runs,
            threshold,
            median_spread: median.map(|m| (m, spreads.len())),
        }
    }

    /// One run judged with the threshold `of` measured.
    pub fn single(name: &str, report: &'a BenchReport, of: &Record) -> Record<'a> {
        Record {
            runs: vec![(name.to_string(), report)],
            threshold: of.threshold,
            median_spread: of.median_spread,
        }
    }

    /// The newest run.
    pub fn latest(&self) -> Option<(&str, &'a BenchReport)> {
        self.runs.last().map(|(n, r)| (n.as_str(), *r))
    }

    /// Kernel `a` against kernel `b` over every run that timed both.
    pub fn compare(&self, shape: Shape, dtype: Dtype, a: &str, b: &str) -> Option<Comparison> {
        let ev: Vec<Evidence> = self
            .runs
            .iter()
            .filter_map(|(name, r)| evidence(name, r, shape, dtype, a, b))
            .collect();
        let (latest_name, latest) = self
            .runs
            .iter()
            .rev()
            .find(|(name, _)| ev.iter().any(|e| &e.file == name))?;
        let (ca, cb) = (latest.find(shape, dtype, a)?, latest.find(shape, dtype, b)?);
        let last = ev.iter().rfind(|e| &e.file == latest_name)?.clone();
        let decision = rule::decide(&ev, self.threshold);
        Some(Comparison {
            shape,
            dtype,
            a: a.to_string(),
            b: b.to_string(),
            a_us: median(ca)?,
            b_us: median(cb)?,
            gain_pct: 100.0 * (last.point - 1.0),
            call: decision.call,
            last,
            decision,
            evidence: ev,
        })
    }

    /// "`bench-h100-2026-11-25.json` and `bench-h100-2026-11-26.json` (NVIDIA H100 80GB HBM3)".
    pub fn names(&self) -> String {
        let files: Vec<String> = self
            .runs
            .iter()
            .map(|(n, r)| format!("`assets/results/{n}` ({}, {})", r.gpu.name, r.date))
            .collect();
        files.join(", ")
    }
}

/// For every pair a run measured (each kernel against cuBLAS and against the kernel before it),
/// the highest minus the lowest point estimate over runs on one GPU model on different days.
fn same_gpu_spreads(runs: &[(String, &BenchReport)]) -> Vec<f64> {
    let mut out = Vec::new();
    let mut gpus: Vec<&str> = runs.iter().map(|(_, r)| r.gpu.name.as_str()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for gpu in gpus {
        let mine: Vec<&(String, &BenchReport)> =
            runs.iter().filter(|(_, r)| r.gpu.name == gpu).collect();
        let Some((_, first)) = mine.last() else {
            continue;
        };
        for c in &first.cases {
            for b in partners(c) {
                let mut by_day: Vec<(&str, f64)> = mine
                    .iter()
                    .filter_map(|(n, r)| {
                        let e = evidence(n, r, c.shape, c.dtype, &c.kernel, &b)?;
                        Some((r.date.as_str(), e.point))
                    })
                    .collect();
                by_day.sort_by(|x, y| x.0.cmp(y.0));
                by_day.dedup_by(|x, y| x.0 == y.0);
                if by_day.len() >= 2 {
                    let lo = by_day.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                    let hi = by_day.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
                    out.push(hi - lo);
                }
            }
        }
    }
    out
}

/// The kernels a case is compared with: cuBLAS, and the one before it.
fn partners(c: &BenchCase) -> Vec<String> {
    let mut v = Vec::new();
    if c.kernel == "cublas" || c.stats.is_none() {
        return v;
    }
    v.push("cublas".to_string());
    if let Some(p) = &c.confidence.vs_previous {
        v.push(p.contender.clone());
    } else if let Some(n) = c.step.and_then(|n| n.checked_sub(1)) {
        v.push(format!("step {n}"));
    }
    v
}

/// One run's evidence about `a` against `b`: the paired ratio it recorded for exactly this pair,
/// else the ratio of the medians with the wider interquartile range.
pub fn evidence(
    file: &str,
    r: &BenchReport,
    shape: Shape,
    dtype: Dtype,
    a: &str,
    b: &str,
) -> Option<Evidence> {
    let (ca, cb) = (r.find(shape, dtype, a)?, r.find(shape, dtype, b)?);
    let (a_us, b_us) = (median(ca)?, median(cb)?);
    let paired = if b == "cublas" {
        ca.confidence.ratio_to_cublas.as_ref()
    } else {
        ca.confidence
            .vs_previous
            .as_ref()
            .filter(|v| v.contender == b)
            .map(|v| &v.ratio)
    };
    let (point, within) = match paired {
        Some(p) => (
            p.median,
            Within::Interval {
                lo: p.ci95[0],
                hi: p.ci95[1],
                rounds: p.rounds,
            },
        ),
        None => (b_us / a_us, Within::Spread(spread(ca)?.max(spread(cb)?))),
    };
    Some(Evidence {
        file: file.to_string(),
        gpu: r.gpu.name.clone(),
        date: r.date.clone(),
        commit: r.commit.clone(),
        point,
        within,
        cap_hit: ca.confidence.cap_hit == Some(true),
    })
}

/// Kernel A against kernel B at one shape and dtype, over the runs of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub shape: Shape,
    pub dtype: Dtype,
    pub a: String,
    pub b: String,
    /// The medians of the newest run that timed both.
    pub a_us: f64,
    pub b_us: f64,
    /// How much faster A is than B in the newest run, in per cent: the paired median's
    /// `100 (ratio − 1)` where the run recorded one, else the medians' (`b / a − 1`).
    pub gain_pct: f64,
    pub call: Call,
    /// The newest run's evidence.
    pub last: Evidence,
    pub decision: Decision,
    /// Every run's.
    pub evidence: Vec<Evidence>,
}

/// A case's interquartile range over its median.
pub fn spread(c: &BenchCase) -> Option<f64> {
    let s = c.stats.as_ref()?;
    (s.median_us > 0.0 && s.q3_us >= s.q1_us && s.q3_us > 0.0)
        .then(|| (s.q3_us - s.q1_us) / s.median_us)
}

fn median(c: &BenchCase) -> Option<f64> {
    c.stats.as_ref().map(|s| s.median_us).filter(|m| *m > 0.0)
}

/// "step 3's" / "cuBLAS's" / "`5-pingpong`'s".
fn possessive(kernel: &str) -> String {
    if kernel == "cublas" {
        "cuBLAS's".into()
    } else if kernel.starts_with("step ") {
        format!("{kernel}'s")
    } else {
        format!("`{kernel}`'s")
    }
}

/// One run's evidence in words: "paired 1.059 [1.057–1.060], 100 rounds" or "medians 1.052,
/// spread 4.1 %".
fn within_words(e: &Evidence) -> String {
    match e.within {
        Within::Interval { lo, hi, rounds } => format!(
            "paired {:.3} [{lo:.3}–{hi:.3}], {rounds} rounds{}",
            e.point,
            if e.cap_hit { ", time cap" } else { "" }
        ),
        Within::Spread(s) => format!(
            "medians {:.3}, spread {:.1} %, no paired rounds",
            e.point,
            100.0 * s
        ),
    }
}

/// A number the reader can check against the tables: the newest run's medians and paired ratio,
/// and the runs the call rests on.
pub fn evidence_words(c: &Comparison) -> String {
    let d = &c.decision;
    let runs = if d.runs >= 2 {
        format!("{} benches: {:.3}–{:.3}", d.runs, d.low, d.high)
    } else {
        "one bench".to_string()
    };
    format!(
        "{:.1} → {:.1} µs, {:+.1} %; {}; {runs}",
        c.b_us,
        c.a_us,
        c.gain_pct,
        within_words(&c.last)
    )
}

/// "faster than step 2's (…)", "faster than step 2's in one run, not yet repeated (…)".
pub fn phrase(c: &Comparison) -> String {
    let (ev, b) = (evidence_words(c), possessive(&c.b));
    match c.call {
        Call::Same => format!("{} as {b} ({ev})", c.call.words()),
        Call::Faster | Call::Slower => format!("{} than {b} ({ev})", c.call.words()),
        Call::FasterOnce => format!("faster than {b} in one run, not yet repeated ({ev})"),
        Call::SlowerOnce => format!("slower than {b} in one run, not yet repeated ({ev})"),
    }
}

/// The committed benches, oldest first, with the threshold measured from them.
pub fn bench_record(files: &[(String, Results)]) -> Record<'_> {
    Record::new(
        oldest_first(files, |r| match r {
            Results::Bench(b) => Some(b),
            _ => None,
        })
        .into_iter()
        .map(|(n, b, _)| (n, b))
        .collect(),
    )
}

/// The latest committed heatmap, one run, judged with the benches' threshold.
fn heatmap_record(files: &[(String, Results)]) -> Option<Record<'_>> {
    let benches = bench_record(files);
    let (n, h, _) = oldest_first(files, |r| match r {
        Results::Heatmap(b) => Some(b),
        _ => None,
    })
    .pop()?;
    Some(Record::single(&n, h, &benches))
}

/// `3` → `step 3`; `cublas` and contenders as they are.
fn kernel_name(w: &str) -> String {
    if w.chars().all(|c| c.is_ascii_digit()) {
        format!("step {w}")
    } else {
        w.to_string()
    }
}

fn parse_dtype(s: &str) -> Result<Dtype> {
    s.parse::<Dtype>()
        .map_err(|e| anyhow!("{e:#}"))
        .with_context(|| format!("unknown dtype {s:?}"))
}

fn parse_shape(s: &str) -> Result<Shape> {
    let v: Vec<usize> = s
        .split('x')
        .map(|d| d.parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("a shape is MxNxK, not {s:?}"))?;
    match v.as_slice() {
        [m, n, k] => Ok(Shape {
            m: *m,
            n: *n,
            k: *k,
        }),
        _ => bail!("a shape is MxNxK, not {s:?}"),
    }
}

/// `{{#claim A B SHAPE DTYPE CALL}}` against the given runs: the phrase, or an error when the
/// rule does not say CALL. This is how prose that contradicts the results fails the build.
pub fn claim_in(record: &Record, spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let [a, b, shape, dtype, call] = w.as_slice() else {
        bail!("claim wants A B SHAPE DTYPE faster|same|slower|faster-once|slower-once");
    };
    let (a, b) = (kernel_name(a), kernel_name(b));
    let (shape, dtype) = (parse_shape(shape)?, parse_dtype(dtype)?);
    let said = Call::parse(call).ok_or_else(|| {
        anyhow!("a call is faster, same, slower, faster-once or slower-once, not {call:?}")
    })?;
    let c = record
        .compare(shape, dtype, &a, &b)
        .ok_or_else(|| anyhow!("no committed run timed {a} and {b} at {shape} {dtype}"))?;
    if c.call != said {
        bail!(
            "the text says {a} is {} {b} at {shape} {dtype}, the committed runs say {} ({}); write `{}` in the marker, and the sentence around it to match",
            said.words(),
            c.call.words(),
            evidence_words(&c),
            c.call.tag()
        );
    }
    Ok(phrase(&c))
}

/// `{{#claim ...}}` against the committed benches.
pub fn claim(spec: &str) -> Result<String> {
    let files = results::committed()?;
    let record = bench_record(&files);
    if record.runs.is_empty() {
        bail!("no committed bench to claim from");
    }
    claim_in(&record, spec)
}

/// `{{#heatmap-claim A B SHAPE DTYPE CALL}}`: a claim checked against the committed heatmap.
pub fn heatmap_claim(spec: &str) -> Result<String> {
    let files = results::committed()?;
    let record =
        heatmap_record(&files).ok_or_else(|| anyhow!("no committed heatmap to claim from"))?;
    claim_in(&record, spec)
}

/// "4096 × 8192 × 4096 f16".
fn shape_words(s: Shape, d: Dtype) -> String {
    format!("{} × {} × {} {d}", s.m, s.n, s.k)
}

const RULE_LINK: &str = "[Running the workbook](running.md#the-rule-for-faster-and-slower)";

/// Step `n` against step `n − 1` at every shape and dtype of the newest run, in one paragraph.
pub fn vs_previous_in(record: &Record, n: u32) -> String {
    let Some(prev) = n.checked_sub(1) else {
        return String::new();
    };
    let Some((_, latest)) = record.latest() else {
        return "\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into();
    };
    let (a, b) = (format!("step {n}"), format!("step {prev}"));
    let rows: Vec<Comparison> = latest
        .shapes_and_dtypes()
        .into_iter()
        .filter_map(|(s, d)| record.compare(s, d, &a, &b))
        .collect();
    if rows.is_empty() {
        return format!(
            "*The committed benches ({}) have no timed {a} and {b} to compare.*\n",
            record.names()
        );
    }
    let mut by_call = String::new();
    for call in [
        Call::Faster,
        Call::FasterOnce,
        Call::Same,
        Call::SlowerOnce,
        Call::Slower,
    ] {
        let at: Vec<String> = rows
            .iter()
            .filter(|c| c.call == call)
            .map(|c| format!("{} ({})", shape_words(c.shape, c.dtype), evidence_words(c)))
            .collect();
        if !at.is_empty() {
            let w = call.words();
            let mut cap = w[..1].to_uppercase();
            cap.push_str(&w[1..]);
            by_call.push_str(&format!(" {cap} at {}.", at.join("; ")));
        }
    }
    format!(
        "**Step {n}'s twin against step {prev}'s** (generated from {} by the rule in {RULE_LINK}, threshold {:.1} %):{by_call}\n",
        record.names(),
        100.0 * record.threshold
    )
}

/// `{{#vs-previous N}}`.
pub fn vs_previous(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("vs-previous wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let files = results::committed()?;
    Ok(vs_previous_in(&bench_record(&files), n))
}

/// The heatmap's calls on step `n` against step `n − 1`: the shapes where the call is not "the
/// same" in at least one dtype, as a table, and how many shapes were the same.
pub fn heatmap_gains_in(record: &Record, n: u32) -> String {
    let Some(prev) = n.checked_sub(1) else {
        return String::new();
    };
    let Some((name, report)) = record.latest() else {
        return "\n*No heatmap recorded yet in `assets/results/`.*\n".into();
    };
    let (a, b) = (format!("step {n}"), format!("step {prev}"));
    let mut shapes: Vec<Shape> = Vec::new();
    for (s, _) in report.shapes_and_dtypes() {
        if !shapes.contains(&s) {
            shapes.push(s);
        }
    }
    let mut rows = String::new();
    let mut same = Vec::new();
    for s in shapes {
        let cells: Vec<Option<Comparison>> = [Dtype::F16, Dtype::Bf16]
            .iter()
            .map(|&d| record.compare(s, d, &a, &b))
            .collect();
        if cells.iter().flatten().all(|c| c.call == Call::Same) {
            same.push(format!("{} × {} × {}", s.m, s.n, s.k));
            continue;
        }
        let cell = |c: &Option<Comparison>| match c {
            Some(c) => format!("{:+.1} % ({})", c.gain_pct, c.call.words()),
            None => "not timed".into(),
        };
        rows.push_str(&format!(
            "| {} × {} × {} | {} | {} |\n",
            s.m,
            s.n,
            s.k,
            cell(&cells[0]),
            cell(&cells[1])
        ));
    }
    let provenance = format!(
        "*From the heatmap `assets/results/{name}` ({}, {}, commit `{}`), one run: by the rule in {RULE_LINK}, a difference beyond the threshold ({:.1} %) and the wider spread of the two kernels is only \"in one run, not yet repeated\".*",
        report.gpu.name,
        report.date,
        report.commit,
        100.0 * record.threshold
    );
    let mut md = String::new();
    if rows.is_empty() {
        md.push_str(&format!(
            "Step {n}'s twin is the same as step {prev}'s within run-to-run variation at every shape of the heatmap.\n\n"
        ));
    } else {
        md.push_str(&format!(
            "| shape | step {n} vs step {prev}, f16 | bf16 |\n|---|---|---|\n{rows}\n"
        ));
        if !same.is_empty() {
            md.push_str(&format!(
                "The same within run-to-run variation in both dtypes at the other {} shapes ({}).\n\n",
                same.len(),
                same.join(", ")
            ));
        }
    }
    md.push_str(&provenance);
    md.push('\n');
    md
}

/// `{{#heatmap-gains N}}`.
pub fn heatmap_gains(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("heatmap-gains wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let files = results::committed()?;
    let Some(record) = heatmap_record(&files) else {
        return Ok("\n*No heatmap recorded yet in `assets/results/`.*\n".into());
    };
    Ok(heatmap_gains_in(&record, n))
}

/// `{{#headline-call N}}`: step N against step N − 1 over the newest bench's cases, in a few
/// words ("the same within run-to-run variation in all 4 bench cases", "faster in 2 of the 4
/// bench cases and the same within run-to-run variation in 2").
pub fn headline_call_in(record: &Record, n: u32) -> Result<String> {
    let prev = n
        .checked_sub(1)
        .ok_or_else(|| anyhow!("step 0 has no step before it"))?;
    let (a, b) = (format!("step {n}"), format!("step {prev}"));
    let calls: Vec<Call> = record
        .latest()
        .map(|(_, r)| r.shapes_and_dtypes())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(s, d)| record.compare(s, d, &a, &b).map(|c| c.call))
        .collect();
    if calls.is_empty() {
        // A step added after the bench ran: nothing to call yet.
        return Ok(format!("not yet measured against {b}"));
    }
    let total = calls.len();
    let parts: Vec<String> = [
        Call::Faster,
        Call::FasterOnce,
        Call::Same,
        Call::SlowerOnce,
        Call::Slower,
    ]
    .into_iter()
    .filter_map(|call| {
        let k = calls.iter().filter(|c| **c == call).count();
        (k > 0).then_some((call, k))
    })
    .enumerate()
    .map(|(i, (call, k))| {
        if k == total && total == 1 {
            format!("{} in the one bench case", call.words())
        } else if k == total {
            format!("{} in all {total} bench cases", call.words())
        } else if i == 0 {
            format!("{} in {k} of the {total} bench cases", call.words())
        } else {
            format!("{} in {k}", call.words())
        }
    })
    .collect();
    Ok(match parts.as_slice() {
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {}", rest.join(" and ")),
        [] => unreachable!("calls is not empty"),
    })
}

/// `{{#headline-call N}}` against the committed benches.
pub fn headline_call(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("headline-call wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let files = results::committed()?;
    let record = bench_record(&files);
    if record.runs.is_empty() {
        bail!("no committed bench to call from");
    }
    headline_call_in(&record, n)
}

/// `{{#noise-rule}}`.
pub fn noise_rule(_spec: &str) -> Result<String> {
    let files = results::committed()?;
    Ok(rule_words(&bench_record(&files)))
}

/// The rule with its threshold and the runs it is applied to.
pub fn rule_words(record: &Record) -> String {
    let measured = match record.median_spread {
        Some((m, n)) => format!(
            "the larger of {:.0} % and the median spread between committed benches on one GPU model ({:.1} points of the ratio, over {n} pairs)",
            100.0 * rule::FLOOR,
            100.0 * m
        ),
        None => format!(
            "{:.0} %, since no two committed benches share a GPU model yet",
            100.0 * rule::FLOOR
        ),
    };
    let mut gpus: Vec<&str> = record
        .runs
        .iter()
        .map(|(_, r)| r.gpu.name.as_str())
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    format!(
        "{RULE} The practical threshold is {:.1} %: {measured}. The committed benches are {} on {}.",
        100.0 * record.threshold,
        record.names(),
        gpus.join(" and ")
    )
}

/// Words that compare two kernels' speed.
const COMPARATIVES: &[&str] = &[
    "faster",
    "slower",
    "gain",
    "gains",
    "gained",
    "lift",
    "lifts",
    "loses",
    "lose",
    "beats",
    "pays",
    "speedup",
    "speeds up",
    "slows",
];

/// Words that make a sentence about our own kernels' measurements.
const OURS: &[&str] = &["twin", "twin's", "twins", "our kernel", "ours"];

/// Sentences of a chapter's markdown (before expansion) that compare our kernels' speed in
/// words typed by hand: they mention a twin or our kernels, a comparative, and either a number
/// of the bench (a percentage, µs, TFLOP/s) or a bench shape — and no generated claim. Code
/// blocks, markers and sentences that say the comparison is not measured are left alone. Each
/// finding is `line: sentence`.
pub fn unbacked(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    // Paragraphs, with the line each starts on.
    let mut para = String::new();
    let mut start = 0;
    let flush = |para: &mut String, start: usize, out: &mut Vec<String>| {
        for sentence in sentences(para) {
            if is_unbacked(&sentence) {
                out.push(format!("{start}: {}", sentence.trim()));
            }
        }
        para.clear();
    };
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            flush(&mut para, start, &mut out);
            continue;
        }
        if in_code {
            continue;
        }
        if line.trim().is_empty() || line.trim_start().starts_with('|') {
            flush(&mut para, start, &mut out);
            continue;
        }
        if para.is_empty() {
            start = i + 1;
        }
        para.push(' ');
        para.push_str(line.trim().trim_start_matches('>').trim());
    }
    flush(&mut para, start, &mut out);
    out
}

/// A paragraph cut at sentence ends ('. ', '? ', '! ', ': '); markers stay whole.
fn sentences(p: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let chars: Vec<char> = p.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        if c == '{' && chars.get(i + 1) == Some(&'{') {
            depth += 1;
        }
        if c == '}' && i > 0 && chars[i - 1] == '}' {
            depth = depth.saturating_sub(1);
        }
        let end = matches!(c, '.' | '?' | '!') && chars.get(i + 1).is_none_or(|n| *n == ' ');
        if end && depth == 0 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

fn has_word(s: &str, w: &str) -> bool {
    let lower = s.to_lowercase();
    lower.match_indices(w).any(|(i, _)| {
        let before = lower[..i].chars().next_back();
        let after = lower[i + w.len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

/// "step 3", "steps 3", "Step 3's".
fn mentions_a_step(s: &str) -> bool {
    let lower = s.to_lowercase();
    lower.match_indices("step").any(|(i, w)| {
        let rest = lower[i + w.len()..].trim_start_matches('s').trim_start();
        rest.chars().next().is_some_and(|c| c.is_ascii_digit())
    })
}

/// The sentence without link targets: `[text](page.md#the-rule-for-faster-and-slower)` keeps
/// its text only, so a URL's words are not read as a claim.
fn strip_links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("](") {
        out.push_str(&rest[..=i]);
        match rest[i + 2..].find(')') {
            Some(j) => rest = &rest[i + 2 + j + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_unbacked(s: &str) -> bool {
    let s = strip_links(s);
    let s = s.as_str();
    if [
        "{{#claim",
        "{{#heatmap-claim",
        "{{#headline-call",
        "{{#vs-previous",
        "{{#heatmap-gains",
        "{{#motivation",
    ]
    .iter()
    .any(|m| s.contains(m))
    {
        return false;
    }
    if !OURS.iter().any(|w| has_word(s, w)) && !mentions_a_step(s) {
        return false;
    }
    // A verdict in the rule's own words is always a claim about a measurement.
    let lower = s.to_lowercase();
    if lower.contains("within noise") || lower.contains("run-to-run variation") {
        return true;
    }
    if !OURS.iter().any(|w| has_word(s, w)) || !COMPARATIVES.iter().any(|w| has_word(s, w)) {
        return false;
    }
    // A number of the bench typed by hand: a percentage, a time, a rate, or a bench shape.
    s.contains(" %")
        || s.contains("% ")
        || s.contains("µs")
        || s.contains("TFLOP/s")
        || s.contains("8192³")
        || s.contains("4096 × 8192 × 4096")
        || s.contains("4096x8192x4096")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures;
    use crate::results::VsPrevious;
    use common::confidence::{Ratio, Verdict};
    use common::timing::Stats;

    fn timed(shape: Shape, dtype: Dtype, step: Option<u32>, median: f64, iqr: f64) -> BenchCase {
        let mut c = fixtures::case(shape, dtype, step, 1.0);
        c.stats = Some(Stats {
            median_us: median,
            min_us: median - iqr,
            max_us: median + iqr,
            q1_us: median - iqr / 2.0,
            q3_us: median + iqr / 2.0,
            runs: 30,
        });
        c
    }

    const S: Shape = Shape {
        m: 4096,
        n: 8192,
        k: 4096,
    };

    fn two(prev: (f64, f64), now: (f64, f64)) -> BenchReport {
        fixtures::report(vec![
            timed(S, Dtype::F16, Some(2), prev.0, prev.1),
            timed(S, Dtype::F16, Some(3), now.0, now.1),
        ])
    }

    /// Step 3 against step 2 with a paired interval, on `gpu` on `date`.
    fn paired(gpu: &str, date: &str, prev: f64, now: f64, ci: [f64; 2]) -> BenchReport {
        let mut r = two((prev, 10.0), (now, 10.0));
        r.gpu.name = gpu.into();
        r.date = date.into();
        r.cases[1].confidence.vs_previous = Some(VsPrevious {
            contender: "step 2".into(),
            ratio: Ratio {
                median: (ci[0] + ci[1]) / 2.0,
                ci95: ci,
                rounds: 100,
                verdict: Verdict::from_interval(ci[0], ci[1]),
            },
        });
        r
    }

    fn one(r: &BenchReport) -> Record<'_> {
        Record::new(vec![("bench-x.json".into(), r)])
    }

    #[test]
    fn one_run_without_intervals_clears_only_beyond_the_wider_spread_and_only_once() {
        // 429 → 426 µs (+0.6 %) with a 48 µs (11 %) spread: the same.
        let r = two((428.9, 23.7), (426.3, 47.5));
        let c = one(&r).compare(S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::Same);
        assert!((c.gain_pct - 0.61).abs() < 0.01, "{c:?}");
        // The wider of the two spreads counts, not the narrower.
        assert!(matches!(c.last.within, Within::Spread(s) if (s - 47.5 / 426.3).abs() < 1e-9));
        // 2508 → 1982 µs with 2 % spreads: faster, but in one run only; the other way round:
        // slower in one run.
        let r = two((2507.7, 34.0), (1981.6, 40.0));
        let c = one(&r).compare(S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::FasterOnce);
        let r = two((1981.6, 40.0), (2507.7, 34.0));
        let c = one(&r).compare(S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::SlowerOnce);
    }

    #[test]
    fn two_benches_on_other_days_or_gpus_make_a_verdict_and_a_small_effect_never_does() {
        let a = paired("H100", "2026-11-26", 470.0, 444.0, [1.057, 1.060]);
        let b = paired("H200", "2026-11-28", 430.0, 410.0, [1.046, 1.050]);
        let both = Record::new(vec![("a.json".into(), &a), ("b.json".into(), &b)]);
        let c = both.compare(S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::Faster, "{c:?}");
        assert_eq!(c.decision.runs, 2);
        // The paired median of the newest run is the point, not the ratio of its medians.
        assert!((c.gain_pct - 4.8).abs() < 1e-9, "{c:?}");
        let words = evidence_words(&c);
        assert!(
            words.contains("paired 1.048 [1.046–1.050], 100 rounds"),
            "{words}"
        );
        assert!(words.contains("2 benches: 1.048–1.058"), "{words}");
        // Exercise 6.2's 400.1 over 400.0 µs, hair-thin, twice: the same.
        let a = paired("H100", "2026-11-26", 400.1, 400.0, [1.0002, 1.0003]);
        let b = paired("H200", "2026-11-28", 400.2, 400.0, [1.0004, 1.0006]);
        let both = Record::new(vec![("a.json".into(), &a), ("b.json".into(), &b)]);
        assert_eq!(
            both.compare(S, Dtype::F16, "step 3", "step 2")
                .unwrap()
                .call,
            Call::Same
        );
        // +0.4 % clearing in both runs: still below the threshold, the same.
        let a = paired("H100", "2026-11-26", 401.6, 400.0, [1.003, 1.005]);
        let b = paired("H100", "2026-11-27", 401.6, 400.0, [1.003, 1.005]);
        let both = Record::new(vec![("a.json".into(), &a), ("b.json".into(), &b)]);
        assert_eq!(
            both.compare(S, Dtype::F16, "step 3", "step 2")
                .unwrap()
                .call,
            Call::Same
        );
        assert!(claim_in(&both, "3 2 4096x8192x4096 f16 faster").is_err());
        assert!(claim_in(&both, "3 2 4096x8192x4096 f16 same").is_ok());
    }

    #[test]
    fn the_threshold_is_measured_from_one_gpus_spread_between_days() {
        // Two H100 days 3 points apart on the only pair: the threshold is 3 %, so a +2 % that
        // clears on both days is the same.
        let a = paired("H100", "2026-11-26", 408.0, 400.0, [1.019, 1.021]);
        let b = paired("H100", "2026-11-27", 420.0, 400.0, [1.049, 1.051]);
        let r = Record::new(vec![("a.json".into(), &a), ("b.json".into(), &b)]);
        assert!((r.threshold - 0.03).abs() < 1e-9, "{}", r.threshold);
        assert_eq!(r.median_spread.map(|m| m.1), Some(1));
        assert_eq!(
            r.compare(S, Dtype::F16, "step 3", "step 2").unwrap().call,
            Call::Same
        );
        // Another GPU does not count toward the spread (a machine is not noise): the floor.
        let c = paired("H200", "2026-11-27", 420.0, 400.0, [1.049, 1.051]);
        let r = Record::new(vec![("a.json".into(), &a), ("c.json".into(), &c)]);
        assert_eq!((r.threshold, r.median_spread), (rule::FLOOR, None));
        assert!(rule_words(&r).contains("no two committed benches share a GPU model"));
    }

    #[test]
    fn a_claim_that_contradicts_the_rule_fails() {
        // The planted contradiction: the text says step 3 is faster; the one run says the same.
        let r = two((428.9, 23.7), (426.3, 47.5));
        let err = claim_in(&one(&r), "3 2 4096x8192x4096 f16 faster").unwrap_err();
        assert!(
            format!("{err:#}")
                .contains("the committed runs say the same within run-to-run variation"),
            "{err:#}"
        );
        let ok = claim_in(&one(&r), "3 2 4096x8192x4096 f16 same").unwrap();
        assert_eq!(
            ok,
            "the same within run-to-run variation as step 2's (428.9 → 426.3 µs, +0.6 %; medians 1.006, spread 11.1 %, no paired rounds; one bench)"
        );
        // One run that clears is "faster-once", never "faster".
        let r = paired("H100", "2026-11-26", 470.0, 444.0, [1.057, 1.060]);
        assert!(claim_in(&one(&r), "3 2 4096x8192x4096 f16 faster").is_err());
        assert!(claim_in(&one(&r), "3 2 4096x8192x4096 f16 faster-once").is_ok());
        assert!(claim_in(&one(&r), "3 2 4096x8192x4096 f16 quicker").is_err());
        assert!(claim_in(&one(&r), "3 2 4096x8192 f16 same").is_err());
        assert!(claim_in(&one(&r), "3 1 4096x8192x4096 f16 same").is_err());
    }

    #[test]
    fn the_headline_call_counts_the_bench_cases() {
        let r = two((428.9, 23.7), (426.3, 47.5));
        assert_eq!(
            headline_call_in(&one(&r), 3).unwrap(),
            "the same within run-to-run variation in the one bench case"
        );
        let mut r = two((428.9, 23.7), (426.3, 47.5));
        let big = Shape {
            m: 8192,
            n: 8192,
            k: 8192,
        };
        r.cases.push(timed(big, Dtype::F16, Some(2), 2507.7, 34.0));
        r.cases.push(timed(big, Dtype::F16, Some(3), 1981.6, 40.0));
        assert_eq!(
            headline_call_in(&one(&r), 3).unwrap(),
            "faster in one run, not yet repeated in 1 of the 2 bench cases and the same within run-to-run variation in 1"
        );
        assert!(headline_call_in(&one(&r), 0).is_err());
    }

    #[test]
    fn hand_typed_comparisons_of_our_kernels_are_found() {
        // Review finding R1's sentence, typed against an older bench: found.
        let planted = "Some text.\n\nAt 8192³ the gain is small in f16 and in bf16 the twin\nis *slower* than step 0's (the last column). Why, we have not measured.\n";
        let found = unbacked(planted);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("3: At 8192³"), "{found:?}");
        // The same claim through a marker, a published figure, and code are not findings.
        let fine = "At 8192³ f16 step 1's twin is {{#claim 1 0 8192x8192x8192 f16 faster}}.\n\ngau-nernst's v4 gains 29 % over v3.\n\n```text\nthe twin is 5 % faster\n```\n";
        assert!(unbacked(fine).is_empty(), "{:?}", unbacked(fine));
        // A verdict in the rule's words about a step, typed by hand: found, even without a
        // number. The rule itself, about no kernel, is not.
        let verdict = "At the headline shapes step 4 and step 3 are the same within noise.\n";
        assert_eq!(unbacked(verdict).len(), 1, "{:?}", unbacked(verdict));
        let rule = "A difference inside the spread reads the same within noise.\n";
        assert!(unbacked(rule).is_empty());
        // A link's target is not prose.
        let link = "The twin at 4096 × 8192 × 4096, by [the rule](running.md#the-rule-for-faster-and-slower).\n";
        assert!(unbacked(link).is_empty(), "{:?}", unbacked(link));
    }

    #[test]
    fn every_chapter_compares_our_kernels_only_through_checked_claims() {
        // The book's own prose: no hand-typed comparison of our kernels, and every generated
        // claim holds against the committed results (a claim that does not fails to render).
        let dir = common::toolkit::project_root().join("book/src");
        let mut chapters = 0;
        let mut findings = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            chapters += 1;
            let rel = format!("book/src/{}", path.file_name().unwrap().to_string_lossy());
            let md = std::fs::read_to_string(&path).unwrap();
            findings.extend(unbacked(&md).into_iter().map(|f| format!("{rel}:{f}")));
            if md.contains("{{#claim") || md.contains("{{#heatmap-claim") {
                if let Err(e) = super::super::other_chapter_markdown(&rel) {
                    findings.push(format!("{rel}: {e:#}"));
                }
            }
        }
        assert!(
            findings.is_empty(),
            "prose that compares our kernels in words no result backs (use {{{{#claim}}}}, {{{{#heatmap-claim}}}}, {{{{#headline-call}}}} or {{{{#vs-previous}}}}), or a claim the results contradict:\n{}",
            findings.join("\n")
        );
        assert!(chapters > 10, "the chapters are at {}", dir.display());
    }

    #[test]
    fn the_committed_bench_and_heatmap_render() {
        for n in 1..runner::steps::all().len() as u32 {
            let v = vs_previous(&n.to_string()).unwrap();
            assert!(
                v.contains(&format!("Step {n}'s twin against step {}'s", n - 1)),
                "{v}"
            );
            let h = heatmap_gains(&n.to_string()).unwrap();
            assert!(h.contains("heatmap"), "{h}");
        }
        assert!(vs_previous("0").unwrap().is_empty());
        assert!(vs_previous("x").is_err());
    }
}
