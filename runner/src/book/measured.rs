//! The book's measured numbers of the Hopper twins, generated from `assets/results/*.json`:
//! `{{#bench}}` (every step against cuBLAS), `{{#bench step N}}` (one step, with the step before
//! it), `{{#bench-plot}}` (the bench's SVG) and `{{#twins-summary}}` (what the twin check
//! verified). Nothing here is typed by hand: a new bench run changes the chapters.

use super::claims;
use crate::results::{
    self, oldest_first, BenchCase, BenchReport, Expected, Results, SelftestSummary,
};
use anyhow::{bail, Result};
use common::verdict::Verdict;

/// The committed bench files, oldest first by the date each records.
fn benches(files: &[(String, Results)]) -> Vec<(String, &BenchReport)> {
    oldest_first(files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    })
    .into_iter()
    .map(|(name, b, _)| (name, b))
    .collect()
}

fn selftests(files: &[(String, Results)]) -> Vec<(String, &SelftestSummary)> {
    files
        .iter()
        .filter_map(|(n, r)| match r {
            Results::Selftest(s) => Some((n.clone(), s)),
            _ => None,
        })
        .collect()
}

fn provenance(name: &str, v: &BenchReport) -> String {
    let rounds = match &v.adaptive {
        Some(a) => format!(
            "adaptive rounds (at least {}, then more until every 95 % interval of a paired ratio is within ±{:.1} % of its median, or {:.0} s of rounds per shape and dtype; the rounds each case took are in its row)",
            a.min_rounds,
            100.0 * a.target_half_width,
            a.time_cap_s
        ),
        None => format!("medians of {} timed launches", v.iters),
    };
    format!(
        "*Measured by `runner bench` on {}, {}, {}, commit `{}`: {} kernels, {rounds}, {}, L2 flushed before each. Clocks before the run (SM, max SM, memory, max memory, °C, W): {}; the SM clock during each case is its median of NVML's readings, with the reasons NVML gave for a clock below the maximum. `assets/results/{name}`*\n\n",
        v.gpu.name,
        match &v.driver {
            Some(d) => format!("driver {d}"),
            None => format!("CUDA driver API {}", v.gpu.driver_version),
        },
        v.date,
        v.commit,
        v.arch.sm(),
        // Files written since the one timing protocol carry its description.
        if v.protocol.is_some() {
            "in primed rounds with cuBLAS, in rotated order"
        } else {
            "alternating with cuBLAS"
        },
        v.clocks_before.as_deref().unwrap_or("not read")
    )
}

/// "1335 MHz, 695 W, sw_power_cap+sw_thermal_slowdown, time cap": the conditions a case ran in.
pub fn conditions(c: &BenchCase) -> String {
    let mut parts = Vec::new();
    if let Some(k) = &c.clocks {
        parts.push(format!("{:.0} MHz", k.sm_mhz_median));
        if let Some(w) = k.power_w_median {
            parts.push(format!("{w:.0} W"));
        }
        if !k.clock_event_reasons.is_empty() {
            parts.push(k.clock_event_reasons.join("+"));
        }
    }
    if c.confidence.cap_hit == Some(true) {
        parts.push("**time cap first**".into());
    }
    if parts.is_empty() {
        "not read".into()
    } else {
        parts.join(", ")
    }
}

/// The share of cuBLAS as the point and interval of the paired ratio where the run recorded it
/// ("66.6 % [66.4–66.8]"), else the ratio of the medians ("85.3 %").
fn share(c: &BenchCase) -> Option<String> {
    match &c.confidence.ratio_to_cublas {
        Some(r) => Some(format!(
            "{:.1} % [{:.1}–{:.1}]",
            100.0 * r.median,
            100.0 * r.ci95[0],
            100.0 * r.ci95[1]
        )),
        None => c.pct_of_cublas.map(|p| format!("{p:.1} %")),
    }
}

/// The share of cuBLAS over every committed bench that timed the case: "66.7–85.3 % (2
/// benches)", or "-" for a case only one bench timed.
fn share_between(rec: &claims::Record, c: &BenchCase) -> String {
    let pts: Vec<f64> = rec
        .runs
        .iter()
        .filter_map(|(n, r)| claims::evidence(n, r, c.shape, c.dtype, &c.kernel, "cublas"))
        .map(|e| e.point)
        .collect();
    if pts.len() < 2 {
        return "one bench".into();
    }
    let lo = pts.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = pts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.1}–{:.1} % ({:.1} points, {} benches)",
        100.0 * lo,
        100.0 * hi,
        100.0 * (hi - lo),
        pts.len()
    )
}

fn tflops(c: Option<&BenchCase>) -> Option<f64> {
    c.and_then(|c| c.tflops)
}

/// How far a bench's cuBLAS may sit from the cuBLAS of a selftest on the same GPU model and day
/// before the bench's tables say so: 5 % of the selftest's TFLOP/s. Repeated selftests on one
/// H200 agree within about 2 % (350–357 µs at 4096×8192×4096, f16), so a larger gap is the
/// harness or the machine's state, not noise, and every "% of cuBLAS" beside it inherits it.
pub const CUBLAS_AGREEMENT: f64 = 0.05;

/// A (shape, dtype) where a bench's cuBLAS and a same-day selftest's differ by more than
/// [`CUBLAS_AGREEMENT`].
#[derive(Debug, PartialEq)]
pub struct CublasGap {
    pub shape: String,
    pub dtype: String,
    pub bench_tflops: f64,
    pub selftest_tflops: f64,
    pub selftest_file: String,
}

/// Every disagreement between `bench`'s cuBLAS and the cuBLAS of the `selftests` taken on the
/// same GPU model on the same date, for the shapes and dtypes both timed.
pub fn cublas_gaps(
    bench: &BenchReport,
    selftests: &[(String, &SelftestSummary)],
) -> Vec<CublasGap> {
    let mut gaps = Vec::new();
    for (file, st) in selftests {
        if st.head.gpu != bench.gpu.name || st.head.date != bench.date {
            continue;
        }
        for c in &st.cases {
            let ours = bench
                .cases
                .iter()
                .find(|b| {
                    b.shape.to_string() == c.shape && b.dtype == c.dtype && b.kernel == "cublas"
                })
                .and_then(|b| b.tflops);
            let Some(ours) = ours else { continue };
            let theirs = c.cublas_tflops;
            if (ours - theirs).abs() > CUBLAS_AGREEMENT * theirs {
                gaps.push(CublasGap {
                    shape: c.shape.clone(),
                    dtype: c.dtype.to_string(),
                    bench_tflops: ours,
                    selftest_tflops: theirs,
                    selftest_file: file.clone(),
                });
            }
        }
    }
    gaps
}

/// The warning a bench table carries when its cuBLAS disagrees with a same-day selftest.
fn cublas_caveat(bench: &BenchReport, files: &[(String, Results)]) -> String {
    let gaps = cublas_gaps(bench, &selftests(files));
    if gaps.is_empty() {
        return String::new();
    }
    let each: Vec<String> = gaps
        .iter()
        .map(|g| {
            format!(
                "{} {}: {:.0} against {:.0} TFLOP/s ({:+.1} %, `assets/results/{}`)",
                g.shape,
                g.dtype,
                g.bench_tflops,
                g.selftest_tflops,
                100.0 * (g.bench_tflops / g.selftest_tflops - 1.0),
                g.selftest_file
            )
        })
        .collect();
    format!(
        "\n**Caution (generated check):** this bench's cuBLAS differs by more than {:.0} % from the cuBLAS of a selftest on the same GPU model and day — {}. Its \"% of cuBLAS\" divides by the bench's own cuBLAS, so where that cuBLAS is slow the percentages overstate the twins.\n",
        100.0 * CUBLAS_AGREEMENT,
        each.join("; ")
    )
}

/// `{{#bench}}`: every step and cuBLAS, per shape and dtype; `{{#bench step N}}`: step N
/// against cuBLAS, the peak and step N - 1.
pub fn bench(spec: &str) -> Result<String> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    // `kernel NAME`: a contender (`5-pingpong`), compared with the step its name starts with.
    let (step, kernel): (Option<u32>, Option<(String, Option<u32>)>) = match words.as_slice() {
        [] => (None, None),
        ["step", n] => (Some(n.parse()?), None),
        ["kernel", name] => {
            let base = name.split('-').next().and_then(|d| d.parse::<u32>().ok());
            (None, Some((name.to_string(), base)))
        }
        _ => bail!("bench wants nothing, `step N` or `kernel NAME`"),
    };
    let files = results::committed()?;
    let rec = claims::bench_record(&files);
    let Some((name, v)) = rec.latest() else {
        return Ok("\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into());
    };
    let name = name.to_string();
    let mut md = provenance(&name, v);
    // (kernel, the kernel it is compared with): a contender with its step, a step with the one
    // before it.
    let one = match (kernel, step) {
        (Some((kernel, base)), _) => Some((kernel, base.map(|b| format!("step {b}")))),
        (None, Some(n)) => Some((
            format!("step {n}"),
            n.checked_sub(1).map(|p| format!("step {p}")),
        )),
        (None, None) => None,
    };
    let Some((kernel, before)) = one else {
        let mut steps: Vec<u32> = v.cases.iter().filter_map(|c| c.step).collect();
        steps.sort_unstable();
        steps.dedup();
        md.push_str("| shape | dtype | cuBLAS |");
        for n in &steps {
            md.push_str(&format!(" step {n} |"));
        }
        md.push_str(" rounds | SM clock, power, held by |\n|---|---|---|");
        md.push_str(&"---|".repeat(steps.len() + 2));
        md.push('\n');
        for (shape, dtype) in v.shapes_and_dtypes() {
            let blas = v.find(shape, dtype, "cublas");
            md.push_str(&format!(
                "| {shape} | {dtype} | {} |",
                tflops(blas).map_or("-".into(), |b| format!("{b:.0}"))
            ));
            for n in &steps {
                let c = v.find(shape, dtype, &format!("step {n}"));
                md.push_str(&match (tflops(c), c.and_then(share)) {
                    (Some(t), Some(p)) => format!(" {t:.0} ({p}) |"),
                    _ => format!(
                        " {} |",
                        c.and_then(|c| c.skipped.as_ref())
                            .map_or("-", |_| "not timed")
                    ),
                });
            }
            md.push_str(&format!(
                " {} | {} |\n",
                blas.and_then(|c| c.stats.as_ref())
                    .map_or("-".into(), |s| s.runs.to_string()),
                blas.map_or("-".into(), conditions)
            ));
        }
        md.push_str(&format!(
            "\nTFLOP/s, with the share of cuBLAS's time in brackets: where the bench recorded paired rounds, the median of the per-round ratios and its 95 % bootstrap interval (one run's noise, not the spread between runs: [the run-to-run spread](verification.md#run-to-run) is printed per case). The rounds, the SM clock median, the power and the reasons the clock was held are cuBLAS's of that shape and dtype; every kernel ran in the same rounds. Calls between kernels follow the rule in {}.\n",
            "[Running the workbook](running.md#the-rule-for-faster-and-slower)"
        ));
        md.push_str(&cublas_caveat(v, &files));
        return Ok(md);
    };
    let title = kernel
        .strip_prefix("step ")
        .map_or_else(|| format!("`{kernel}`"), |n| format!("step {n}"));
    md.push_str(&format!(
        "| shape | dtype | {title}: TFLOP/s | % of cuBLAS, this run [95 %] | % of cuBLAS between benches | rounds | SM clock, power, held by |{}\n|---|---|---|---|---|---|---|{}\n",
        before.as_ref().map_or(String::new(), |b| format!(" vs {b} |")),
        if before.is_some() { "---|" } else { "" }
    ));
    let mut any = false;
    for (shape, dtype) in v.shapes_and_dtypes() {
        let c = v.find(shape, dtype, &kernel);
        let (Some(t), Some(c)) = (tflops(c), c) else {
            continue;
        };
        any = true;
        let vs = before.as_ref().map_or(String::new(), |b| {
            rec.compare(shape, dtype, &kernel, b).map_or_else(
                || " - |".to_string(),
                |cmp| format!(" {:+.1} %, {} |", cmp.gain_pct, cmp.call.words()),
            )
        });
        md.push_str(&format!(
            "| {shape} | {dtype} | {t:.1} | {} | {} | {} | {} |{vs}\n",
            share(c).unwrap_or_else(|| "-".into()),
            share_between(&rec, c),
            c.stats.as_ref().map_or("-".into(), |s| s.runs.to_string()),
            conditions(c),
        ));
    }
    if any {
        md.push_str(&format!(
            "\n*% of cuBLAS: the median of the paired per-round ratios (cuBLAS's time over this kernel's) with its 95 % bootstrap interval, from this run's rounds; beside it the range of that share over every committed bench, which is the spread a reader re-running the bench should expect. {}*\n",
            if before.is_some() {
                "The last column: how much faster than the kernel before it in this run (the paired median), and the call by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower), over every committed bench."
            } else {
                ""
            }
        ));
    }
    if !any && step.is_none() {
        bail!("{name} holds no timed `{kernel}`");
    }
    md.push_str(&cublas_caveat(v, &files));
    Ok(md)
}

/// `{{#bench-plot}}`: the latest bench's SVG, with where it comes from.
pub fn bench_plot(_spec: &str) -> Result<String> {
    let files = results::committed()?;
    let Some((name, v)) = benches(&files).pop() else {
        return Ok("\n*No `runner bench` plot recorded yet in `assets/results/`.*\n".into());
    };
    let svg = name.trim_end_matches(".json").to_string() + ".svg";
    Ok(format!(
        "![TFLOP/s of every step's {} against cuBLAS](assets/results/{svg})\n\n*{} on {}, {}, commit `{}` (`assets/results/{svg}`): solid lines are the steps, dashed lines cuBLAS in the same run, grey the dense peak at the maximum clock.*\n",
        v.arch.name(),
        "`runner bench`",
        v.gpu.name,
        v.date,
        v.commit
    ))
}

/// `{{#twins-summary}}`: per step, how many of the twin check's cases verified, over which
/// shapes, distributions and capped grids.
pub fn twins_summary(_spec: &str) -> Result<String> {
    let files = results::committed()?;
    let twins = oldest_first(&files, |r| match r {
        Results::Twins(t) => Some(t),
        _ => None,
    });
    let Some((name, v, _)) = twins.last() else {
        return Ok("\n*No twin check recorded yet in `assets/results/`.*\n".into());
    };
    let h = &v.head;
    let mut md = format!(
        "*`runner check twins` on {}, driver {}, {}, commit `{}`: `assets/results/{name}`*\n\n| step | verified | shapes | distributions | capped grids |\n|---|---|---|---|---|\n",
        h.gpu, h.driver, h.date, h.commit
    );
    let mut steps: Vec<u32> = v.cases.iter().map(|c| c.step).collect();
    steps.sort_unstable();
    steps.dedup();
    for n in steps {
        let mine: Vec<_> = v.cases.iter().filter(|c| c.step == n).collect();
        let uniq = |f: &dyn Fn(&&crate::results::TwinCase) -> String| {
            let mut v: Vec<String> = mine.iter().map(f).collect();
            v.sort();
            v.dedup();
            v
        };
        md.push_str(&format!(
            "| {n} | {} of {} | {} | {} | {} |\n",
            mine.iter()
                .filter(|c| c.outcome == Verdict::Verified)
                .count(),
            mine.len(),
            uniq(&|c| c.shape.clone()).len(),
            uniq(&|c| c.dist.to_string()).join(", "),
            mine.iter().filter(|c| c.clusters.is_some()).count()
        ));
    }
    Ok(md)
}

/// `{{#emulation-caught}}`: how the latest emulation check caught each seeded bug, per step:
/// the outcome and, for a fault, the rule named in the runner's message.
pub fn emulation_caught(_spec: &str) -> Result<String> {
    let files = results::committed()?;
    let Some(v) = files.iter().rev().find_map(|(n, r)| match r {
        Results::Emulation(e) => Some((n, e)),
        _ => None,
    }) else {
        return Ok("\n*No emulation check recorded yet in `assets/results/`.*\n".into());
    };
    let (name, v) = v;
    let h = &v.head;
    let mut md = format!(
        "*`runner check emulation` on {}, driver {}, {}, commit `{}`, emulation seeds {:?}: `assets/results/{name}`*\n\n| seeded bug | expected | step | runs as expected | outcome (rule) |\n|---|---|---|---|---|\n",
        h.gpu, h.driver, h.date, h.commit, v.emu_seeds
    );
    let mut muts: Vec<&str> = Vec::new();
    for m in v.cases.iter().filter_map(|c| c.mutation.as_deref()) {
        if !muts.contains(&m) {
            muts.push(m);
        }
    }
    for m in muts {
        let mine: Vec<_> = v
            .cases
            .iter()
            .filter(|c| c.mutation.as_deref() == Some(m))
            .collect();
        let mut steps: Vec<u32> = mine.iter().map(|c| c.step).collect();
        steps.sort_unstable();
        steps.dedup();
        for n in steps {
            let runs: Vec<_> = mine.iter().filter(|c| c.step == n).collect();
            let mut how: Vec<String> = runs
                .iter()
                .map(|c| match c.detail.split_once("rule ") {
                    Some((_, r)) => format!("{} ({})", c.outcome, r.split(':').next().unwrap_or(r)),
                    None => c.outcome.to_string(),
                })
                .collect();
            how.sort();
            how.dedup();
            let met = runs.iter().filter(|c| c.met_expectation).count();
            md.push_str(&format!(
                "| `{m}` | {} | {n} | {met} of {}{} | {} |\n",
                match runs[0].expected {
                    Expected::Pass => "pass",
                    Expected::Fail => "fail",
                },
                runs.len(),
                if met == runs.len() { "" } else { " **✗**" },
                how.join(", ")
            ));
        }
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures;
    use crate::results::{Provenance, SelftestCase};
    use common::{Dtype, Shape};

    // These render the committed results files, so a format change that breaks the book's
    // generated tables fails here rather than in a reader's browser.

    #[test]
    fn the_bench_tables_name_every_step_and_the_previous_one() {
        // A bench is committed (the results test holds every kind to be): no vacuous pass.
        let all = bench("").unwrap();
        assert!(all.contains("| shape | dtype | cuBLAS |"), "{all}");
        assert!(all.contains("step 0") && all.contains("step 6"), "{all}");
        assert!(all.contains("commit `"), "provenance: {all}");
        let five = bench("step 5").unwrap();
        assert!(five.contains("vs step 4"), "{five}");
        assert!(five.contains("% of cuBLAS"), "{five}");
        let zero = bench("step 0").unwrap();
        assert!(
            !zero.contains("vs step"),
            "step 0 has no previous step: {zero}"
        );
        assert!(bench("steps 5").is_err());
        let plot = bench_plot("").unwrap();
        assert!(
            plot.contains("](assets/results/bench-") && plot.contains(".svg)"),
            "{plot}"
        );
    }

    #[test]
    fn a_bench_cublas_far_from_the_same_days_selftest_is_flagged() {
        let shape = Shape {
            m: 4096,
            n: 8192,
            k: 4096,
        };
        let mut bench = fixtures::report(vec![
            fixtures::case(shape, Dtype::F16, None, 682.0),
            fixtures::case(shape, Dtype::Bf16, None, 790.0),
        ]);
        bench.gpu.name = "NVIDIA H200".into();
        bench.date = "2026-11-22".into();
        let selftest = |date: &str, gpu: &str| SelftestSummary {
            head: Provenance {
                gpu: gpu.into(),
                driver: "d".into(),
                date: date.into(),
                commit: "c".into(),
            },
            cases: [(Dtype::F16, 769.0), (Dtype::Bf16, 796.0)]
                .map(|(dtype, cublas_tflops)| SelftestCase {
                    shape: "4096x8192x4096".into(),
                    dtype,
                    cublas_median_us: 1.0,
                    cublas_tflops,
                    peak_tflops: None,
                    verified: true,
                    rel_error_norm: 0.0,
                })
                .to_vec(),
        };
        let same = selftest("2026-11-22", "NVIDIA H200");
        let gaps = cublas_gaps(&bench, &[("st.json".to_string(), &same)]);
        // f16 is 11 % slow and flagged; bf16 is within 1 % and not.
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(
            (gaps[0].shape.as_str(), gaps[0].dtype.as_str()),
            ("4096x8192x4096", "f16")
        );
        // Another day or another GPU is not the same machine state: no comparison.
        let other_day = selftest("2026-11-23", "NVIDIA H200");
        assert!(cublas_gaps(&bench, &[("st.json".to_string(), &other_day)]).is_empty());
        let other_gpu = selftest("2026-11-22", "NVIDIA H100 80GB HBM3");
        assert!(cublas_gaps(&bench, &[("st.json".to_string(), &other_gpu)]).is_empty());
    }

    #[test]
    fn the_committed_bench_says_whether_its_cublas_agrees_with_the_selftest() {
        let files = results::committed().unwrap();
        let (_, v) = benches(&files).pop().expect("a bench is committed");
        let flagged = !cublas_gaps(v, &selftests(&files)).is_empty();
        for spec in ["", "step 0", "step 4"] {
            let md = bench(spec).unwrap();
            assert_eq!(
                md.contains("**Caution (generated check):**"),
                flagged,
                "{spec}: {md}"
            );
        }
    }

    #[test]
    fn the_check_summaries_count_cases() {
        let t = twins_summary("").unwrap();
        assert!(t.contains("| 6 |") && t.contains(" of "), "{t}");
        let e = emulation_caught("").unwrap();
        assert!(e.contains("| `wrong-parity` |"), "{e}");
        assert!(e.contains(" of 5"), "five emulation seeds: {e}");
    }
}
