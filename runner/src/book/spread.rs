//! The spread between committed benches, generated: `{{#run-spread}}` (every comparison the
//! book calls, per bench, with its within-run interval beside the spread between runs, and the
//! call of the rule) and `{{#bench-conditions SHAPE}}` (what each bench recorded about the GPU
//! while it timed one shape: rounds, time cap, clocks, power, temperature, throttle reasons, and
//! the shares and spreads of the first steps), the evidence for review finding S11.

use super::claims::{self, Record};
use super::measured::conditions;
use super::rule::Within;
use crate::results::{self, BenchCase};
use anyhow::{Context, Result};
use common::Shape;

/// "H100 80GB HBM3, 2026-11-26".
fn label(gpu: &str, date: &str) -> String {
    format!("{}, {date}", gpu.trim_start_matches("NVIDIA "))
}

/// Every pair the book calls (each step against cuBLAS, each kernel against the one before it)
/// over the committed benches.
pub fn run_spread_in(rec: &Record) -> String {
    let Some((_, latest)) = rec.latest() else {
        return "\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into();
    };
    let mut md = String::from("| shape | dtype | kernel | against |");
    for (_, r) in &rec.runs {
        md.push_str(&format!(" {} |", label(&r.gpu.name, &r.date)));
    }
    md.push_str(" spread between benches | call |\n|---|---|---|---|");
    md.push_str(&"---|".repeat(rec.runs.len() + 2));
    md.push('\n');
    let mut rows = 0;
    for c in latest.cases.iter().filter(|c| c.stats.is_some()) {
        for b in partners(c) {
            let Some(cmp) = rec.compare(c.shape, c.dtype, &c.kernel, &b) else {
                continue;
            };
            rows += 1;
            md.push_str(&format!(
                "| {} | {} | {} | {b} |",
                c.shape, c.dtype, c.kernel
            ));
            for (name, _) in &rec.runs {
                let cell = match cmp.evidence.iter().find(|e| &e.file == name) {
                    Some(e) => match e.within {
                        Within::Interval { lo, hi, .. } => {
                            format!("{:.3} [{lo:.3}–{hi:.3}]", e.point)
                        }
                        Within::Spread(_) => format!("{:.3}", e.point),
                    },
                    None => "-".into(),
                };
                md.push_str(&format!(" {cell} |"));
            }
            md.push_str(&format!(
                " {} | {} |\n",
                cmp.decision
                    .spread()
                    .map_or("one bench".into(), |s| format!("{:.1} points", 100.0 * s)),
                cmp.call.words()
            ));
        }
    }
    if rows == 0 {
        return "\n*The committed benches time no pair to compare.*\n".into();
    }
    md.push_str(&format!(
        "\n*Each cell: the other kernel's time over this one's (above 1: this one is faster). With brackets, the median of the paired per-round ratios and its 95 % bootstrap interval, which measures that run's noise; without, the ratio of the medians of a bench written before paired rounds. The spread between benches is the highest minus the lowest of them, in points of the ratio. The call is the rule's in [Running the workbook](running.md#the-rule-for-faster-and-slower), threshold {:.1} %. Benches: {}.*\n",
        100.0 * rec.threshold,
        rec.names()
    ));
    md
}

/// cuBLAS and the kernel before it.
fn partners(c: &BenchCase) -> Vec<String> {
    let mut v = Vec::new();
    if c.kernel == "cublas" {
        return v;
    }
    if c.step.is_some() {
        v.push("cublas".to_string());
    }
    if let Some(p) = &c.confidence.vs_previous {
        v.push(p.contender.clone());
    } else if let Some(n) = c.step.and_then(|n| n.checked_sub(1)) {
        v.push(format!("step {n}"));
    }
    v
}

/// `{{#run-spread}}`.
pub fn run_spread(_spec: &str) -> Result<String> {
    let files = results::committed()?;
    Ok(run_spread_in(&claims::bench_record(&files)))
}

/// What each bench recorded at `shape`: per dtype, the conditions of its rounds, and per kernel
/// up to `steps` its share of cuBLAS and its interquartile range over its median.
pub fn conditions_in(rec: &Record, shape: Shape, steps: u32) -> String {
    let mut md = String::from("| bench | dtype | rounds | SM clock median (min–max) | power | max °C | held by | time cap first |");
    for n in 0..=steps {
        md.push_str(&format!(" step {n}: % of cuBLAS, IQR |"));
    }
    md.push_str("\n|---|---|---|---|---|---|---|---|");
    md.push_str(&"---|".repeat(steps as usize + 1));
    md.push('\n');
    for (name, r) in &rec.runs {
        for (s, d) in r.shapes_and_dtypes() {
            if s != shape {
                continue;
            }
            let Some(blas) = r.find(s, d, "cublas") else {
                continue;
            };
            let k = blas.clocks.as_ref();
            md.push_str(&format!(
                "| `{name}` | {d} | {} | {} | {} | {} | {} | {} |",
                blas.stats
                    .as_ref()
                    .map_or("-".into(), |x| x.runs.to_string()),
                k.map_or("not read".into(), |k| format!(
                    "{:.0} ({}–{}) MHz",
                    k.sm_mhz_median, k.sm_mhz_min, k.sm_mhz_max
                )),
                k.and_then(|k| k.power_w_median)
                    .map_or("-".into(), |w| format!("{w:.0} W")),
                k.and_then(|k| k.temperature_c_max)
                    .map_or("-".into(), |t| t.to_string()),
                k.map_or("-".into(), |k| {
                    if k.clock_event_reasons.is_empty() {
                        "nothing".into()
                    } else {
                        k.clock_event_reasons.join("+")
                    }
                }),
                match blas.confidence.cap_hit {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "fixed rounds",
                }
            ));
            for n in 0..=steps {
                let c = r.find(s, d, &format!("step {n}"));
                let pct = c.and_then(|c| {
                    claims::evidence(name, r, s, d, &c.kernel, "cublas").map(|e| e.point)
                });
                md.push_str(&match (pct, c.and_then(claims::spread)) {
                    (Some(p), Some(q)) => format!(" {:.1} %, {:.1} % |", 100.0 * p, 100.0 * q),
                    _ => " - |".into(),
                });
            }
            md.push('\n');
        }
    }
    md.push_str(&format!(
        "\n*Generated from the committed benches at {shape}: the rounds, clock, power, temperature and reasons are cuBLAS's readings (every kernel ran in the same rounds); {}. The share of cuBLAS is the paired median where the bench recorded paired rounds, else the ratio of medians; IQR is the interquartile range of the kernel's timed launches over its median.*\n",
        conditions_note(rec, shape)
    ));
    md
}

/// The conditions of one case as the bench tables print them, for the note.
fn conditions_note(rec: &Record, shape: Shape) -> String {
    rec.runs
        .iter()
        .filter_map(|(name, r)| {
            let c = r
                .cases
                .iter()
                .find(|c| c.shape == shape && c.kernel == "cublas")?;
            Some(format!("`{name}` at {}: {}", c.dtype, conditions(c)))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `{{#bench-conditions MxNxK [STEPS]}}`.
pub fn bench_conditions(spec: &str) -> Result<String> {
    let w: Vec<&str> = spec.split_whitespace().collect();
    let (shape, steps) = match w.as_slice() {
        [s] => (*s, 3),
        [s, n] => (
            *s,
            n.parse::<u32>()
                .with_context(|| format!("bench-conditions: {n:?} is not a step number"))?,
        ),
        _ => anyhow::bail!("bench-conditions wants MxNxK and optionally the last step"),
    };
    let dims: Vec<usize> = shape
        .split('x')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("bench-conditions: a shape is MxNxK, not {shape:?}"))?;
    let [m, n, k] = dims.as_slice() else {
        anyhow::bail!("bench-conditions: a shape is MxNxK, not {shape:?}");
    };
    let files = results::committed()?;
    Ok(conditions_in(
        &claims::bench_record(&files),
        Shape {
            m: *m,
            n: *n,
            k: *k,
        },
        steps,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_benches_print_their_spread_and_conditions() {
        let md = run_spread("").unwrap();
        assert!(md.contains("| step 3 | step 2 |"), "{md}");
        assert!(md.contains("spread between benches"), "{md}");
        let c = bench_conditions("8192x8192x8192 2").unwrap();
        assert!(c.contains("step 2: % of cuBLAS, IQR"), "{c}");
        assert!(c.contains("bench-h100-2026-11-26.json"), "{c}");
        assert!(bench_conditions("8192x8192").is_err());
        assert!(bench_conditions("8192x8192x8192 x").is_err());
    }
}
