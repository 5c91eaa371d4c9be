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
    format!(
        "*Measured by `runner bench` on {}, {}, {}, commit `{}`: {} kernels, medians of {} timed launches {}, L2 flushed before each; clocks before the run (SM, max SM, memory, max memory, °C, W): {}. `assets/results/{name}`*\n\n",
        v.gpu.name,
        match &v.driver {
            Some(d) => format!("driver {d}"),
            None => format!("CUDA driver API {}", v.gpu.driver_version),
        },
        v.date,
        v.commit,
        v.arch.sm(),
        v.iters,
        // Files written since the one timing protocol carry its description.
        if v.protocol.is_some() {
            "in primed rounds with cuBLAS, in rotated order"
        } else {
            "alternating with cuBLAS"
        },
        v.clocks_before.as_deref().unwrap_or("not read")
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
    let Some((name, v)) = benches(&files).pop() else {
        return Ok("\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into());
    };
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
        md.push_str("\n|---|---|---|");
        md.push_str(&"---|".repeat(steps.len()));
        md.push('\n');
        for (shape, dtype) in v.shapes_and_dtypes() {
            let blas = tflops(v.find(shape, dtype, "cublas"));
            let blas_spread = v
                .find(shape, dtype, "cublas")
                .and_then(claims::spread)
                .map_or(String::new(), |s| format!(" ±{:.0}%", 50.0 * s));
            md.push_str(&format!(
                "| {shape} | {dtype} | {}{blas_spread} |",
                blas.map_or("-".into(), |b| format!("{b:.0}"))
            ));
            for n in &steps {
                let c = v.find(shape, dtype, &format!("step {n}"));
                md.push_str(&match (tflops(c), c.and_then(|c| c.pct_of_cublas)) {
                    (Some(t), Some(p)) => format!(
                        " {t:.0} ({p:.0}%){} |",
                        c.and_then(claims::spread)
                            .map_or(String::new(), |s| format!(" ±{:.0}%", 50.0 * s))
                    ),
                    _ => format!(
                        " {} |",
                        c.and_then(|c| c.skipped.as_ref())
                            .map_or("-", |_| "not timed")
                    ),
                });
            }
            md.push('\n');
        }
        md.push_str("\nTFLOP/s, with the share of cuBLAS's TFLOP/s in the same run in brackets and ± half the spread (the interquartile range of the timed launches over their median). By the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower), two cells whose difference is inside the wider spread are the same within noise.\n");
        md.push_str(&cublas_caveat(v, &files));
        return Ok(md);
    };
    let title = kernel
        .strip_prefix("step ")
        .map_or_else(|| format!("`{kernel}`"), |n| format!("step {n}"));
    let raw = claims::raw(&name);
    md.push_str(&format!(
        "| shape | dtype | {title}: TFLOP/s | spread | % of peak | % of cuBLAS |{}\n|---|---|---|---|---|---|{}\n",
        before.as_ref().map_or(String::new(), |b| format!(" vs {b} |")),
        if before.is_some() { "---|" } else { "" }
    ));
    let mut any = false;
    for (shape, dtype) in v.shapes_and_dtypes() {
        let c = v.find(shape, dtype, &kernel);
        let Some(t) = tflops(c) else { continue };
        any = true;
        let vs = before.as_ref().map_or(String::new(), |b| {
            claims::compare(v, raw.as_ref(), shape, dtype, &kernel, b).map_or_else(
                || " - |".to_string(),
                |cmp| format!(" {:+.1}%, {} |", cmp.gain_pct, cmp.call.words()),
            )
        });
        let interval = claims::cublas_interval(raw.as_ref(), shape, dtype, &kernel)
            .map_or(String::new(), |(lo, hi)| {
                format!(" [{:.1}–{:.1}]", 100.0 * lo, 100.0 * hi)
            });
        md.push_str(&format!(
            "| {shape} | {dtype} | {t:.1} | {} | {:.1}% | {:.1}%{interval} |{vs}\n",
            c.and_then(claims::spread)
                .map_or("-".to_string(), |s| format!("{:.1}%", 100.0 * s)),
            c.and_then(|c| c.pct_of_peak).unwrap_or(f64::NAN),
            c.and_then(|c| c.pct_of_cublas).unwrap_or(f64::NAN),
        ));
    }
    if any {
        md.push_str(&format!(
            "\n*Spread: the interquartile range of the timed launches over their median. {}{}*\n",
            if before.is_some() {
                "The last column: how much faster than the kernel before it (its time over this one's), and the call by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower). "
            } else {
                ""
            },
            "Where the bench records a 95 % interval of the ratio to cuBLAS, it follows the % of cuBLAS in brackets."
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

/// `{{#verified N}}`: step N's one-line verification summary from the latest emulation check
/// (runs verified, seeded bugs caught), with where the details are.
pub fn verified(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("verified wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let files = results::committed()?;
    let latest = oldest_first(&files, |r| match r {
        Results::Emulation(e) => Some(e),
        _ => None,
    })
    .pop();
    let Some((name, e, _)) = latest else {
        return Ok(format!(
            "**Verified:** no emulation check of step {n} is recorded yet (`runner check emulation` on a Hopper GPU).\n"
        ));
    };
    let mine: Vec<_> = e.cases.iter().filter(|c| c.step == n).collect();
    if mine.is_empty() {
        // A step added after the latest check ran: not yet verified on a GPU.
        return Ok(format!(
            "**Verified:** not yet: `assets/results/{name}`, the latest emulation check, ran before step {n} existed (`runner check emulation` on a Hopper GPU).\n"
        ));
    }
    let (runs, bugs): (Vec<_>, Vec<_>) = mine.iter().partition(|c| c.expected == Expected::Pass);
    let met =
        |v: &[&&crate::results::EmulationCase]| v.iter().filter(|c| c.met_expectation).count();
    let h = &e.head;
    Ok(format!(
        "**Verified** under the tcgen05 emulation on an {} ({}, commit `{}`; not on a B200): {} of {} runs verified, {} of {} seeded-bug runs caught. [How the kernels are checked](verification.md) says what that proves; [the emulation records](emulation-records.md#step-{n}) list every run (`assets/results/{name}`).\n",
        h.gpu,
        h.date,
        h.commit,
        met(&runs),
        runs.len(),
        met(&bugs),
        bugs.len()
    ))
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
        let v = verified("3").unwrap();
        assert!(v.contains("not on a B200") && v.contains(" of "), "{v}");
        assert!(verified("42").is_err());
        let e = emulation_caught("").unwrap();
        assert!(e.contains("| `wrong-parity` |"), "{e}");
        assert!(e.contains(" of 5"), "five emulation seeds: {e}");
    }
}
