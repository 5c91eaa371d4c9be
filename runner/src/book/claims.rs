//! Claims about our own measurements, made by construction: every "faster", "slower" or "the
//! same" the book says about two of its kernels is generated here from the committed bench (and
//! heatmap), with the one rule "Running the workbook" states (`{{#noise-rule}}`):
//!
//! - where the bench entry carries a bootstrap interval of the ratio (`vs_previous`), the
//!   interval's verdict decides;
//! - otherwise the difference of the medians counts only beyond the spread: the wider of the two
//!   kernels' interquartile ranges, relative to its median. Inside it, the two are "the same
//!   within noise".
//!
//! Markers: `{{#claim A B SHAPE DTYPE CALL}}` (a sentence part that fails the build when the data
//! does not say CALL), `{{#heatmap-claim ...}}` (the same against the heatmap), `{{#vs-previous N}}` (step N against step N − 1 at every bench shape),
//! `{{#heatmap-gains N}}` (the heatmap's shapes where step N's idea pays, or costs, beyond the
//! noise) and `{{#noise-rule}}`. `unbacked` finds prose that compares our kernels without them.

use crate::results::{self, oldest_first, BenchCase, BenchReport, Results};
use anyhow::{anyhow, bail, Context, Result};
use common::{Dtype, Shape};
use serde_json::Value;

/// The rule, as the book states it.
pub const RULE: &str = "A difference between two kernels counts as \"faster\" or \"slower\" only beyond the measured spread. Where the bench records a 95 % bootstrap interval of the ratio between two kernels, the interval decides: an interval that contains 1 reads \"the same within noise\". Otherwise the spread is the interquartile range of the timed launches, relative to the median, and of two kernels the wider one counts: a difference of the medians inside it reads \"the same within noise\".";

/// What the data says about kernel A against kernel B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Faster,
    Same,
    Slower,
}

impl Call {
    fn parse(s: &str) -> Result<Call> {
        match s {
            "faster" => Ok(Call::Faster),
            "same" | "same within noise" => Ok(Call::Same),
            "slower" => Ok(Call::Slower),
            _ => bail!("a call is faster, same or slower, not {s:?}"),
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Call::Faster => "faster",
            Call::Same => "the same within noise",
            Call::Slower => "slower",
        }
    }
}

/// How the call was made.
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// The wider interquartile range of the two, relative to its median.
    Spread(f64),
    /// The bench's 95 % bootstrap interval of the ratio, and the rounds it drew from.
    Interval { lo: f64, hi: f64, rounds: u64 },
}

/// Kernel A against kernel B at one shape and dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub shape: Shape,
    pub dtype: Dtype,
    pub a: String,
    pub b: String,
    pub a_us: f64,
    pub b_us: f64,
    /// How much faster A is than B, in per cent of A's time (`b / a − 1`): +5 means B takes 5 %
    /// longer.
    pub gain_pct: f64,
    pub basis: Basis,
    pub call: Call,
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

/// The raw JSON entry of `kernel` at (`shape`, `dtype`): where the fields the typed report does
/// not know (the bench's intervals) are read.
fn raw_case<'a>(raw: &'a Value, shape: Shape, dtype: Dtype, kernel: &str) -> Option<&'a Value> {
    raw.get("cases")?.as_array()?.iter().find(|c| {
        let s = &c["shape"];
        s["m"].as_u64() == Some(shape.m as u64)
            && s["n"].as_u64() == Some(shape.n as u64)
            && s["k"].as_u64() == Some(shape.k as u64)
            && c["dtype"].as_str() == Some(&dtype.to_string())
            && c["kernel"].as_str() == Some(kernel)
    })
}

/// A ratio block of the bench (`{"median", "ci95": [lo, hi], "rounds", "verdict"}`).
struct Ratio {
    lo: f64,
    hi: f64,
    rounds: u64,
    verdict: Option<Call>,
}

fn ratio(v: &Value) -> Option<Ratio> {
    let ci = v.get("ci95")?.as_array()?;
    Some(Ratio {
        lo: ci.first()?.as_f64()?,
        hi: ci.get(1)?.as_f64()?,
        rounds: v.get("rounds").and_then(Value::as_u64).unwrap_or(0),
        verdict: v
            .get("verdict")
            .and_then(Value::as_str)
            .and_then(|s| Call::parse(s).ok()),
    })
}

/// `kernel`'s 95 % interval of its ratio to cuBLAS, where the bench records one.
pub fn cublas_interval(
    raw: Option<&Value>,
    shape: Shape,
    dtype: Dtype,
    kernel: &str,
) -> Option<(f64, f64)> {
    let r = ratio(raw_case(raw?, shape, dtype, kernel)?.get("ratio_to_cublas")?)?;
    Some((r.lo, r.hi))
}

/// Kernel `a` against kernel `b` (bench names: `step 3`, `cublas`, `5-pingpong`).
pub fn compare(
    report: &BenchReport,
    raw: Option<&Value>,
    shape: Shape,
    dtype: Dtype,
    a: &str,
    b: &str,
) -> Option<Comparison> {
    let (ca, cb) = (report.find(shape, dtype, a)?, report.find(shape, dtype, b)?);
    let (a_us, b_us) = (median(ca)?, median(cb)?);
    let gain_pct = 100.0 * (b_us / a_us - 1.0);
    // The bench's own interval, where it compared exactly these two: every kernel against
    // cuBLAS (`ratio_to_cublas`), and each against the one before it (`vs_previous`).
    let case = raw.and_then(|raw| raw_case(raw, shape, dtype, a));
    let interval = if b == "cublas" {
        case.and_then(|c| ratio(c.get("ratio_to_cublas")?))
    } else {
        case.and_then(|c| c.get("vs_previous"))
            .filter(|v| v.get("contender").and_then(Value::as_str) == Some(b))
            .and_then(|v| ratio(v.get("ratio")?))
    };
    let (basis, call) = match interval {
        Some(Ratio {
            lo,
            hi,
            rounds,
            verdict: Some(call),
        }) => (Basis::Interval { lo, hi, rounds }, call),
        _ => {
            let s = spread(ca)?.max(spread(cb)?);
            let call = if gain_pct.abs() <= 100.0 * s {
                Call::Same
            } else if gain_pct > 0.0 {
                Call::Faster
            } else {
                Call::Slower
            };
            (Basis::Spread(s), call)
        }
    };
    Some(Comparison {
        shape,
        dtype,
        a: a.to_string(),
        b: b.to_string(),
        a_us,
        b_us,
        gain_pct,
        basis,
        call,
    })
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

/// A number the reader can check against the table: the two medians, the gain and the basis.
pub fn evidence(c: &Comparison) -> String {
    let basis = match &c.basis {
        Basis::Spread(s) => format!("spread {:.1} %", 100.0 * s),
        Basis::Interval { lo, hi, rounds } => {
            format!("95 % interval of the ratio {lo:.3}–{hi:.3}, {rounds} rounds")
        }
    };
    format!(
        "{:.1} → {:.1} µs, {:+.1} %; {basis}",
        c.b_us, c.a_us, c.gain_pct
    )
}

/// "faster than step 2's (… µs, +x %; spread y %)".
pub fn phrase(c: &Comparison) -> String {
    let than = match c.call {
        Call::Same => format!("as {}", possessive(&c.b)),
        _ => format!("than {}", possessive(&c.b)),
    };
    format!("{} {than} ({})", c.call.words(), evidence(c))
}

/// The latest committed bench, with its raw JSON.
fn latest_bench(files: &[(String, Results)]) -> Option<(String, &BenchReport)> {
    oldest_first(files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    })
    .pop()
    .map(|(n, b, _)| (n, b))
}

fn latest_heatmap(files: &[(String, Results)]) -> Option<(String, &BenchReport)> {
    oldest_first(files, |r| match r {
        Results::Heatmap(b) => Some(b),
        _ => None,
    })
    .pop()
    .map(|(n, b, _)| (n, b))
}

/// A committed results file's JSON, for the fields the typed reports do not read.
pub fn raw(name: &str) -> Option<Value> {
    let text = std::fs::read_to_string(results::dir().join(name)).ok()?;
    serde_json::from_str(&text).ok()
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

/// `{{#claim A B SHAPE DTYPE CALL}}` against the given bench: the phrase, or an error when the
/// bench does not say CALL. This is how prose that contradicts its table fails the build.
pub fn claim_in(report: &BenchReport, raw: Option<&Value>, spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let [a, b, shape, dtype, call] = w.as_slice() else {
        bail!("claim wants A B SHAPE DTYPE faster|same|slower");
    };
    let (a, b) = (kernel_name(a), kernel_name(b));
    let (shape, dtype, said) = (parse_shape(shape)?, parse_dtype(dtype)?, Call::parse(call)?);
    let c = compare(report, raw, shape, dtype, &a, &b)
        .ok_or_else(|| anyhow!("the bench has no timed {a} and {b} at {shape} {dtype}"))?;
    if c.call != said {
        bail!(
            "the text says {a} is {} {b} at {shape} {dtype}, the committed bench says {} ({})",
            said.words(),
            c.call.words(),
            evidence(&c)
        );
    }
    Ok(phrase(&c))
}

/// `{{#claim ...}}` against the committed bench.
pub fn claim(spec: &str) -> Result<String> {
    let files = results::committed()?;
    let (name, report) =
        latest_bench(&files).ok_or_else(|| anyhow!("no committed bench to claim from"))?;
    claim_in(report, raw(&name).as_ref(), spec)
}

/// `{{#heatmap-claim A B SHAPE DTYPE CALL}}`: a claim checked against the committed heatmap.
pub fn heatmap_claim(spec: &str) -> Result<String> {
    let files = results::committed()?;
    let (name, report) =
        latest_heatmap(&files).ok_or_else(|| anyhow!("no committed heatmap to claim from"))?;
    claim_in(report, raw(&name).as_ref(), spec)
}

/// "4096 × 8192 × 4096 f16".
fn shape_words(s: Shape, d: Dtype) -> String {
    format!("{} × {} × {} {d}", s.m, s.n, s.k)
}

/// Step `n` against step `n − 1` at every shape and dtype of `report`, in one paragraph.
pub fn vs_previous_in(report: &BenchReport, raw: Option<&Value>, name: &str, n: u32) -> String {
    let Some(prev) = n.checked_sub(1) else {
        return String::new();
    };
    let (a, b) = (format!("step {n}"), format!("step {prev}"));
    let rows: Vec<Comparison> = report
        .shapes_and_dtypes()
        .into_iter()
        .filter_map(|(s, d)| compare(report, raw, s, d, &a, &b))
        .collect();
    if rows.is_empty() {
        return format!("*The committed bench (`assets/results/{name}`) has no timed {a} and {b} to compare.*\n");
    }
    let mut by_call = String::new();
    for call in [Call::Faster, Call::Same, Call::Slower] {
        let at: Vec<String> = rows
            .iter()
            .filter(|c| c.call == call)
            .map(|c| format!("{} ({})", shape_words(c.shape, c.dtype), evidence(c)))
            .collect();
        if !at.is_empty() {
            by_call.push_str(&format!(
                " {} at {}.",
                match call {
                    Call::Faster => "Faster",
                    Call::Same => "The same within noise",
                    Call::Slower => "Slower",
                },
                at.join("; ")
            ));
        }
    }
    format!(
        "**Step {n}'s twin against step {prev}'s** (generated from `assets/results/{name}` by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower)):{by_call}\n"
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
    let Some((name, report)) = latest_bench(&files) else {
        return Ok("\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into());
    };
    Ok(vs_previous_in(report, raw(&name).as_ref(), &name, n))
}

/// The heatmap's verdicts on step `n` against step `n − 1`: the shapes where the call is
/// "faster" or "slower" in at least one dtype, as a table, and how many shapes were the same.
pub fn heatmap_gains_in(report: &BenchReport, raw: Option<&Value>, name: &str, n: u32) -> String {
    let Some(prev) = n.checked_sub(1) else {
        return String::new();
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
            .map(|&d| compare(report, raw, s, d, &a, &b))
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
        "*From the heatmap `assets/results/{name}` ({}, {}, commit `{}`), by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower).*",
        report.gpu.name, report.date, report.commit
    );
    let mut md = String::new();
    if rows.is_empty() {
        md.push_str(&format!(
            "Step {n}'s twin is the same as step {prev}'s within noise at every shape of the heatmap.\n\n"
        ));
    } else {
        md.push_str(&format!(
            "| shape | step {n} vs step {prev}, f16 | bf16 |\n|---|---|---|\n{rows}\n"
        ));
        if !same.is_empty() {
            md.push_str(&format!(
                "The same within noise in both dtypes at the other {} shapes ({}).\n\n",
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
    let Some((name, report)) = latest_heatmap(&files) else {
        return Ok("\n*No heatmap recorded yet in `assets/results/`.*\n".into());
    };
    Ok(heatmap_gains_in(report, raw(&name).as_ref(), &name, n))
}

/// `{{#headline-call N}}`: step N against step N − 1 over the bench's cases, in a few words
/// ("the same within noise in all 4 bench cases", "faster in 2 of the 4 bench cases and the
/// same within noise in 2").
pub fn headline_call_in(report: &BenchReport, raw: Option<&Value>, n: u32) -> Result<String> {
    let prev = n
        .checked_sub(1)
        .ok_or_else(|| anyhow!("step 0 has no step before it"))?;
    let (a, b) = (format!("step {n}"), format!("step {prev}"));
    let calls: Vec<Call> = report
        .shapes_and_dtypes()
        .into_iter()
        .filter_map(|(s, d)| compare(report, raw, s, d, &a, &b).map(|c| c.call))
        .collect();
    if calls.is_empty() {
        // A step added after the bench ran: nothing to call yet.
        return Ok(format!("not yet measured against {b}"));
    }
    let total = calls.len();
    let parts: Vec<String> = [Call::Faster, Call::Same, Call::Slower]
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

/// `{{#headline-call N}}` against the committed bench.
pub fn headline_call(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("headline-call wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let files = results::committed()?;
    let (name, report) =
        latest_bench(&files).ok_or_else(|| anyhow!("no committed bench to call from"))?;
    headline_call_in(report, raw(&name).as_ref(), n)
}

/// `{{#noise-rule}}`.
pub fn noise_rule(_spec: &str) -> Result<String> {
    Ok(RULE.to_string())
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
    if s.to_lowercase().contains("within noise") {
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

    #[test]
    fn a_difference_inside_the_wider_spread_is_the_same() {
        // 429 → 426 µs (+0.6 %) with a 48 µs (11 %) spread: the same.
        let r = two((428.9, 23.7), (426.3, 47.5));
        let c = compare(&r, None, S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::Same);
        assert!((c.gain_pct - 0.61).abs() < 0.01, "{c:?}");
        // The wider of the two spreads counts, not the narrower.
        assert!(matches!(c.basis, Basis::Spread(s) if (s - 47.5 / 426.3).abs() < 1e-9));
        // 2508 → 1982 µs with 2 % spreads: faster; the other way round: slower.
        let r = two((2507.7, 34.0), (1981.6, 40.0));
        assert_eq!(
            compare(&r, None, S, Dtype::F16, "step 3", "step 2")
                .unwrap()
                .call,
            Call::Faster
        );
        let r = two((1981.6, 40.0), (2507.7, 34.0));
        assert_eq!(
            compare(&r, None, S, Dtype::F16, "step 3", "step 2")
                .unwrap()
                .call,
            Call::Slower
        );
    }

    #[test]
    fn the_bench_interval_decides_where_there_is_one() {
        // The medians differ by 0.6 % inside an 11 % spread, but the bench's interval says
        // faster: the interval wins.
        let r = two((428.9, 23.7), (426.3, 47.5));
        let raw = serde_json::json!({"cases": [{
            "shape": {"m": 4096, "n": 8192, "k": 4096}, "dtype": "f16", "kernel": "step 3",
            "vs_previous": {"contender": "step 2",
                "ratio": {"median": 1.006, "ci95": [1.002, 1.010], "rounds": 30, "verdict": "faster"}},
            "ratio_to_cublas": {"median": 0.93, "ci95": [0.91, 0.95], "rounds": 30,
                "verdict": "slower"}
        }]});
        let c = compare(&r, Some(&raw), S, Dtype::F16, "step 3", "step 2").unwrap();
        assert_eq!(c.call, Call::Faster);
        assert!(evidence(&c).contains("95 % interval of the ratio 1.002–1.010, 30 rounds"));
        assert_eq!(
            cublas_interval(Some(&raw), S, Dtype::F16, "step 3"),
            Some((0.91, 0.95))
        );
        // An interval against another contender is not this comparison's.
        let c = compare(&r, Some(&raw), S, Dtype::F16, "step 3", "cublas");
        assert!(c.is_none(), "no cuBLAS case in this report");
    }

    #[test]
    fn the_interval_to_cublas_decides_a_claim_against_cublas() {
        // 417.5 → 416.8 µs is inside a 4.6 % spread, but the paired ratios' interval lies
        // wholly below 1: slower, from the interval.
        let r = fixtures::report(vec![
            timed(S, Dtype::F16, None, 417.5, 19.2),
            timed(S, Dtype::F16, Some(5), 416.8, 16.8),
        ]);
        assert_eq!(
            compare(&r, None, S, Dtype::F16, "step 5", "cublas")
                .unwrap()
                .call,
            Call::Same
        );
        let raw = serde_json::json!({"cases": [{
            "shape": {"m": 4096, "n": 8192, "k": 4096}, "dtype": "f16", "kernel": "step 5",
            "ratio_to_cublas": {"median": 0.9985, "ci95": [0.9971, 0.9999], "rounds": 110,
                "verdict": "slower"}
        }]});
        let c = compare(&r, Some(&raw), S, Dtype::F16, "step 5", "cublas").unwrap();
        assert_eq!(c.call, Call::Slower);
        assert!(
            matches!(c.basis, Basis::Interval { rounds: 110, .. }),
            "{c:?}"
        );
    }

    #[test]
    fn a_claim_that_contradicts_the_table_fails() {
        // The planted contradiction: the text says step 3 is faster; its table says the same.
        let r = two((428.9, 23.7), (426.3, 47.5));
        let err = claim_in(&r, None, "3 2 4096x8192x4096 f16 faster").unwrap_err();
        assert!(
            format!("{err:#}").contains("the committed bench says the same within noise"),
            "{err:#}"
        );
        let ok = claim_in(&r, None, "3 2 4096x8192x4096 f16 same").unwrap();
        assert_eq!(
            ok,
            "the same within noise as step 2's (428.9 → 426.3 µs, +0.6 %; spread 11.1 %)"
        );
        assert!(claim_in(&r, None, "3 2 4096x8192x4096 f16 quicker").is_err());
        assert!(claim_in(&r, None, "3 2 4096x8192 f16 same").is_err());
        assert!(claim_in(&r, None, "3 1 4096x8192x4096 f16 same").is_err());
    }

    #[test]
    fn the_headline_call_counts_the_bench_cases() {
        let r = two((428.9, 23.7), (426.3, 47.5));
        assert_eq!(
            headline_call_in(&r, None, 3).unwrap(),
            "the same within noise in the one bench case"
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
            headline_call_in(&r, None, 3).unwrap(),
            "faster in 1 of the 2 bench cases and the same within noise in 1"
        );
        assert!(headline_call_in(&r, None, 0).is_err());
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
