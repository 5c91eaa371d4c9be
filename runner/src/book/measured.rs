//! The book's measured numbers of the Hopper twins, generated from `assets/results/*.json`:
//! `{{#bench}}` (every step against cuBLAS), `{{#bench step N}}` (one step, with the step before
//! it), `{{#bench-plot}}` (the bench's SVG) and `{{#twins-summary}}` (what the twin check
//! verified). Nothing here is typed by hand: a new bench run changes the chapters.

use crate::results::{results_files, s};
use anyhow::{bail, Result};
use serde_json::Value;

fn shape_of(c: &Value) -> String {
    format!(
        "{}x{}x{}",
        c["shape"]["m"].as_u64().unwrap_or(0),
        c["shape"]["n"].as_u64().unwrap_or(0),
        c["shape"]["k"].as_u64().unwrap_or(0)
    )
}

/// The bench files, oldest first (their names end with the date).
fn benches() -> Vec<(String, Value)> {
    by_date(
        results_files()
            .into_iter()
            .filter(|(_, v)| v["kind"] == "bench")
            .collect(),
    )
}

/// Latest last by the date each file records, not by its name (`bench-h200-…` sorts after
/// `bench-h100-…` whatever their dates); files of one date keep their name order.
fn by_date(mut files: Vec<(String, Value)>) -> Vec<(String, Value)> {
    files.sort_by_key(|(_, a)| s(a, "date"));
    files
}

fn provenance(name: &str, v: &Value) -> String {
    format!(
        "*Measured by `runner bench` on {}, {}, {}, commit `{}`: {} kernels, medians of {} timed launches {}, L2 flushed before each; clocks before the run (SM, max SM, memory, max memory, °C, W): {}. `assets/results/{name}`*\n\n",
        v["gpu"]["name"].as_str().unwrap_or("?"),
        match v["driver"].as_str() {
            Some(d) => format!("driver {d}"),
            None => format!(
                "CUDA driver API {}",
                v["gpu"]["driver_version"].as_str().unwrap_or("?")
            ),
        },
        s(v, "date"),
        s(v, "commit"),
        v["arch"].as_str().unwrap_or("?"),
        s(v, "iters"),
        // Files written since the one timing protocol carry its description.
        if v["protocol"].is_string() {
            "in primed rounds with cuBLAS, in rotated order"
        } else {
            "alternating with cuBLAS"
        },
        v["clocks_before"].as_str().unwrap_or("not read")
    )
}

/// The (shape, dtype) pairs of a bench file, in its order.
fn cases_of(v: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for c in v["cases"].as_array().into_iter().flatten() {
        let key = (shape_of(c), s(c, "dtype"));
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

fn find<'a>(v: &'a Value, shape: &str, dtype: &str, kernel: &str) -> Option<&'a Value> {
    v["cases"]
        .as_array()?
        .iter()
        .find(|c| shape_of(c) == shape && s(c, "dtype") == dtype && c["kernel"] == kernel)
}

fn tflops(c: Option<&Value>) -> Option<f64> {
    c.and_then(|c| c["tflops"].as_f64())
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
pub fn cublas_gaps(bench: &Value, selftests: &[(String, Value)]) -> Vec<CublasGap> {
    let gpu = bench["gpu"]["name"].as_str();
    let mut gaps = Vec::new();
    for (file, st) in selftests {
        if st["kind"] != "selftest" || st["gpu"].as_str() != gpu || st["date"] != bench["date"] {
            continue;
        }
        for c in st["cases"].as_array().into_iter().flatten() {
            let (shape, dtype) = (s(c, "shape"), s(c, "dtype"));
            let (Some(theirs), Some(ours)) = (
                c["cublas_tflops"].as_f64(),
                tflops(find(bench, &shape, &dtype, "cublas")),
            ) else {
                continue;
            };
            if (ours - theirs).abs() > CUBLAS_AGREEMENT * theirs {
                gaps.push(CublasGap {
                    shape,
                    dtype,
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
fn cublas_caveat(bench: &Value) -> String {
    let selftests: Vec<(String, Value)> = results_files()
        .into_iter()
        .filter(|(_, v)| v["kind"] == "selftest")
        .collect();
    let gaps = cublas_gaps(bench, &selftests);
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
    let files = benches();
    let Some((name, v)) = files.last() else {
        return Ok("\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into());
    };
    let mut md = provenance(name, v);
    if let Some((kernel, base)) = kernel {
        md.push_str(&format!(
            "| shape | dtype | `{kernel}`: TFLOP/s | % of peak | % of cuBLAS |{}\n|---|---|---|---|---|{}\n",
            base.map_or(String::new(), |b| format!(" vs step {b} |")),
            if base.is_some() { "---|" } else { "" }
        ));
        let mut any = false;
        for (shape, dtype) in cases_of(v) {
            let c = find(v, &shape, &dtype, &kernel);
            let Some(t) = tflops(c) else { continue };
            any = true;
            let vs = base.map_or(String::new(), |b| {
                tflops(find(v, &shape, &dtype, &format!("step {b}")))
                    .map_or(" - |".to_string(), |p| {
                        format!(" {:+.1}% |", 100.0 * (t / p - 1.0))
                    })
            });
            md.push_str(&format!(
                "| {shape} | {dtype} | {t:.1} | {:.1}% | {:.1}% |{vs}\n",
                c.and_then(|c| c["pct_of_peak"].as_f64())
                    .unwrap_or(f64::NAN),
                c.and_then(|c| c["pct_of_cublas"].as_f64())
                    .unwrap_or(f64::NAN),
            ));
        }
        if !any {
            bail!("{name} holds no timed `{kernel}`");
        }
        md.push_str(&cublas_caveat(v));
        return Ok(md);
    }
    match step {
        None => {
            let steps: Vec<u64> = {
                let mut s: Vec<u64> = v["cases"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["step"].as_u64())
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            };
            md.push_str("| shape | dtype | cuBLAS |");
            for n in &steps {
                md.push_str(&format!(" step {n} |"));
            }
            md.push_str("\n|---|---|---|");
            md.push_str(&"---|".repeat(steps.len()));
            md.push('\n');
            for (shape, dtype) in cases_of(v) {
                let blas = tflops(find(v, &shape, &dtype, "cublas"));
                md.push_str(&format!(
                    "| {shape} | {dtype} | {} |",
                    blas.map_or("-".into(), |b| format!("{b:.0}"))
                ));
                for n in &steps {
                    let c = find(v, &shape, &dtype, &format!("step {n}"));
                    md.push_str(
                        &match (tflops(c), c.and_then(|c| c["pct_of_cublas"].as_f64())) {
                            (Some(t), Some(p)) => format!(" {t:.0} ({p:.0}%) |"),
                            _ => format!(
                                " {} |",
                                c.and_then(|c| c["skipped"].as_str())
                                    .map_or("-", |_| "not timed")
                            ),
                        },
                    );
                }
                md.push('\n');
            }
            md.push_str(
                "\nTFLOP/s, with the share of cuBLAS's TFLOP/s in the same run in brackets.\n",
            );
            md.push_str(&cublas_caveat(v));
        }
        Some(n) => {
            md.push_str(&format!(
                "| shape | dtype | step {n}: TFLOP/s | % of peak | % of cuBLAS |{}\n|---|---|---|---|---|{}\n",
                if n > 0 { format!(" vs step {} |", n - 1) } else { String::new() },
                if n > 0 { "---|" } else { "" }
            ));
            for (shape, dtype) in cases_of(v) {
                let c = find(v, &shape, &dtype, &format!("step {n}"));
                let Some(t) = tflops(c) else { continue };
                let prev = if n > 0 {
                    tflops(find(v, &shape, &dtype, &format!("step {}", n - 1)))
                        .map_or(" - |".to_string(), |p| {
                            format!(" {:+.1}% |", 100.0 * (t / p - 1.0))
                        })
                } else {
                    String::new()
                };
                md.push_str(&format!(
                    "| {shape} | {dtype} | {t:.1} | {:.1}% | {:.1}% |{prev}\n",
                    c.and_then(|c| c["pct_of_peak"].as_f64())
                        .unwrap_or(f64::NAN),
                    c.and_then(|c| c["pct_of_cublas"].as_f64())
                        .unwrap_or(f64::NAN),
                ));
            }
            md.push_str(&cublas_caveat(v));
        }
    }
    Ok(md)
}

/// `{{#bench-plot}}`: the latest bench's SVG, with where it comes from.
pub fn bench_plot(_spec: &str) -> Result<String> {
    let files = benches();
    let Some((name, v)) = files.last() else {
        return Ok("\n*No `runner bench` plot recorded yet in `assets/results/`.*\n".into());
    };
    let svg = name.trim_end_matches(".json").to_string() + ".svg";
    Ok(format!(
        "![TFLOP/s of every step's {} against cuBLAS](assets/results/{svg})\n\n*{} on {}, {}, commit `{}` (`assets/results/{svg}`): solid lines are the steps, dashed lines cuBLAS in the same run, grey the dense peak at the maximum clock.*\n",
        v["arch"].as_str().unwrap_or("kernel"),
        "`runner bench`",
        v["gpu"]["name"].as_str().unwrap_or("?"),
        s(v, "date"),
        s(v, "commit")
    ))
}

/// `{{#twins-summary}}`: per step, how many of the twin check's cases verified, over which
/// shapes, distributions and capped grids.
pub fn twins_summary(_spec: &str) -> Result<String> {
    let files: Vec<(String, Value)> = by_date(
        results_files()
            .into_iter()
            .filter(|(_, v)| v["kind"] == "twins")
            .collect(),
    );
    let Some((name, v)) = files.last() else {
        return Ok("\n*No twin check recorded yet in `assets/results/`.*\n".into());
    };
    let cases: Vec<&Value> = v["cases"].as_array().into_iter().flatten().collect();
    let mut md = format!(
        "*`scripts/gpu-check-twins.sh` on {}, driver {}, {}, commit `{}`: `assets/results/{name}`*\n\n| step | verified | shapes | distributions | capped grids |\n|---|---|---|---|---|\n",
        s(v, "gpu"),
        s(v, "driver"),
        s(v, "date"),
        s(v, "commit")
    );
    let mut steps: Vec<u64> = cases.iter().filter_map(|c| c["step"].as_u64()).collect();
    steps.sort_unstable();
    steps.dedup();
    for n in steps {
        let mine: Vec<&&Value> = cases
            .iter()
            .filter(|c| c["step"].as_u64() == Some(n))
            .collect();
        let uniq = |key: &str| {
            let mut v: Vec<String> = mine.iter().map(|c| s(c, key)).collect();
            v.sort();
            v.dedup();
            v
        };
        let capped = mine.iter().filter(|c| c["clusters"].is_u64()).count();
        md.push_str(&format!(
            "| {n} | {} of {} | {} | {} | {} |\n",
            mine.iter().filter(|c| c["outcome"] == "pass").count(),
            mine.len(),
            uniq("shape").len(),
            uniq("dist").join(", "),
            capped
        ));
    }
    Ok(md)
}

/// `{{#emulation-caught}}`: how the latest emulation check caught each seeded bug, per step:
/// the outcome and, for a fault, the rule named in the runner's message.
pub fn emulation_caught(_spec: &str) -> Result<String> {
    let files: Vec<(String, Value)> = results_files()
        .into_iter()
        .filter(|(_, v)| v["kind"] == "emulation")
        .collect();
    let Some((name, v)) = files.last() else {
        return Ok("\n*No emulation check recorded yet in `assets/results/`.*\n".into());
    };
    let mut md = format!(
        "*`scripts/gpu-check.sh` on {}, driver {}, {}, commit `{}`, emulation seeds {}: `assets/results/{name}`*\n\n| seeded bug | expected | step | runs as expected | outcome (rule) |\n|---|---|---|---|---|\n",
        s(v, "gpu"),
        s(v, "driver"),
        s(v, "date"),
        s(v, "commit"),
        v["emu_seeds"]
    );
    let cases: Vec<&Value> = v["cases"].as_array().into_iter().flatten().collect();
    let mut muts: Vec<String> = Vec::new();
    for c in &cases {
        if let Some(m) = c["mutation"].as_str() {
            if !muts.iter().any(|x| x == m) {
                muts.push(m.to_string());
            }
        }
    }
    for m in muts {
        let mine: Vec<&&Value> = cases
            .iter()
            .filter(|c| c["mutation"] == m.as_str())
            .collect();
        let mut steps: Vec<u64> = mine.iter().filter_map(|c| c["step"].as_u64()).collect();
        steps.sort_unstable();
        steps.dedup();
        for n in steps {
            let runs: Vec<&&&Value> = mine
                .iter()
                .filter(|c| c["step"].as_u64() == Some(n))
                .collect();
            let mut how: Vec<String> = runs
                .iter()
                .map(|c| {
                    let detail = c["detail"].as_str().unwrap_or("");
                    match detail.split_once("rule ") {
                        Some((_, r)) => {
                            format!("{} ({})", s(c, "outcome"), r.split(':').next().unwrap_or(r))
                        }
                        None => s(c, "outcome"),
                    }
                })
                .collect();
            how.sort();
            how.dedup();
            let met = runs
                .iter()
                .filter(|c| c["met_expectation"].as_bool() == Some(true))
                .count();
            md.push_str(&format!(
                "| `{m}` | {} | {n} | {met} of {}{} | {} |\n",
                s(runs[0], "expected"),
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

    // These render the committed results files, so a format change that breaks the book's
    // generated tables fails here rather than in a reader's browser.

    #[test]
    fn the_bench_tables_name_every_step_and_the_previous_one() {
        let all = bench("").unwrap();
        if all.contains("No `runner bench` results") {
            return;
        }
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
        let bench = serde_json::json!({"kind": "bench", "date": "2026-11-22",
            "gpu": {"name": "NVIDIA H200"}, "cases": [
            {"shape": {"m": 4096, "n": 8192, "k": 4096}, "dtype": "f16", "kernel": "cublas", "tflops": 682.0},
            {"shape": {"m": 4096, "n": 8192, "k": 4096}, "dtype": "bf16", "kernel": "cublas", "tflops": 790.0}]});
        let selftest = |date: &str, gpu: &str| {
            serde_json::json!({"kind": "selftest", "date": date, "gpu": gpu, "cases": [
                {"shape": "4096x8192x4096", "dtype": "f16", "cublas_tflops": 769.0},
                {"shape": "4096x8192x4096", "dtype": "bf16", "cublas_tflops": 796.0}]})
        };
        let same = vec![("st.json".to_string(), selftest("2026-11-22", "NVIDIA H200"))];
        let gaps = cublas_gaps(&bench, &same);
        // f16 is 11 % slow and flagged; bf16 is within 1 % and not.
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(
            (gaps[0].shape.as_str(), gaps[0].dtype.as_str()),
            ("4096x8192x4096", "f16")
        );
        // Another day or another GPU is not the same machine state: no comparison.
        let other_day = vec![("st.json".to_string(), selftest("2026-11-23", "NVIDIA H200"))];
        assert!(cublas_gaps(&bench, &other_day).is_empty());
        let other_gpu = vec![(
            "st.json".to_string(),
            selftest("2026-11-22", "NVIDIA H100 80GB HBM3"),
        )];
        assert!(cublas_gaps(&bench, &other_gpu).is_empty());
    }

    #[test]
    fn the_committed_bench_says_whether_its_cublas_agrees_with_the_selftest() {
        let Some((_, v)) = benches().pop() else {
            return;
        };
        let selftests: Vec<(String, Value)> = results_files()
            .into_iter()
            .filter(|(_, v)| v["kind"] == "selftest")
            .collect();
        let flagged = !cublas_gaps(&v, &selftests).is_empty();
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
        if !t.contains("No twin check") {
            assert!(t.contains("| 6 |") && t.contains(" of "), "{t}");
        }
        let e = emulation_caught("").unwrap();
        if !e.contains("No emulation check") {
            assert!(e.contains("| `wrong-parity` |"), "{e}");
            assert!(e.contains(" of 5"), "five emulation seeds: {e}");
        }
    }
}
