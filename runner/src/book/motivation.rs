//! `{{#motivation N}}`: each step's measured motivation on Hopper. For every step the shapes
//! where its idea should pay beyond the noise (chosen from the heatmap, and why), and what a
//! targeted bench measured there: step N's twin against step N − 1's, paired round by round in
//! the same run (`vs_previous`, a bootstrap 95 % interval of the ratio). The bench is
//! `gpu/book6.sh`'s, committed under `assets/results/motivation/` (apart from the bench of
//! record, which every other table reads). The shapes were picked from the heatmap after it was
//! measured, so the paragraph says so: the targeted bench replicates the heatmap's largest gain
//! in a separate run, it does not test a prediction (review S16). The headline shapes' call is
//! the chapter's own sentence under the bench table, not repeated here (review S24).

use super::claims::{self, Comparison};
use crate::results::{self, BenchReport, Results};
use anyhow::{Context, Result};
use common::{Dtype, Shape};
use serde_json::Value;
use std::path::Path;

/// The folder under `assets/results/` that holds the targeted benches.
pub const FOLDER: &str = "motivation";

/// Where one step's idea should pay, and why.
pub struct Target {
    pub step: u32,
    pub shapes: &'static [Shape],
    /// One or two sentences: what about these shapes makes the idea pay.
    pub why: &'static str,
}

const fn s(m: usize, n: usize, k: usize) -> Shape {
    Shape { m, n, k }
}

/// The shapes `gpu/book6.sh` benches, per step (a test checks that the script times them all).
pub const TARGETS: [Target; 6] = [
    Target {
        step: 1,
        shapes: &[s(4096, 4096, 16384)],
        why: "A producer warpgroup of its own keeps the ring full while two consumer warpgroups multiply, so the idea should pay most where the main loop is long: K = 16384, 256 k-blocks a tile.",
    },
    Target {
        step: 2,
        shapes: &[s(4096, 8192, 256)],
        why: "Staged TMA stores shorten the epilogue, and the epilogue weighs most where the main loop is short: at K = 256 a tile has four k-blocks.",
    },
    Target {
        step: 3,
        shapes: &[s(1024, 16384, 4096)],
        why: "Multicast halves the L2-to-SM traffic of B. That pays only where that traffic limits: few rows of A and a wide B, so that each CTA pair streams a lot of B for little A.",
    },
    Target {
        step: 4,
        shapes: &[s(4096, 8192, 256), s(4096, 8192, 1024)],
        why: "Persistence removes a cost paid once per tile (launch, set-up, a ring that starts empty) and overlaps one tile's stores with the next tile's loads. That pays where tiles are many and short: 1024 tiles, about 8 waves, of 4 or 16 k-blocks.",
    },
    Target {
        step: 5,
        shapes: &[s(4096, 8192, 256)],
        why: "The store warp takes a wait off the consumers once per tile, so it should pay where tiles are short: 4 k-blocks a tile.",
    },
    Target {
        step: 6,
        shapes: &[s(1024, 16384, 4096)],
        why: "The snake can only help where the row-major order streams more of an operand through L2 than L2 keeps: a wide B, where the clusters in flight span all 16384 columns.",
    },
];

pub fn target(step: u32) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.step == step)
}

fn shape_words(s: Shape) -> String {
    format!("{} × {} × {}", s.m, s.n, s.k)
}

/// The newest targeted bench in `dir` (by its date, then its name), with its raw JSON; `None`
/// where the folder is missing or holds none.
pub fn latest_in(dir: &Path) -> Result<Option<(String, BenchReport, Value)>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut paths: Vec<_> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut best: Option<(String, BenchReport, Value)> = None;
    for p in paths {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        let Some(Results::Bench(report)) =
            results::parse(&text).with_context(|| format!("{}", p.display()))?
        else {
            continue;
        };
        let raw: Value = serde_json::from_str(&text).with_context(|| format!("{}", p.display()))?;
        let name = p
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if best.as_ref().is_none_or(|(_, b, _)| b.date <= report.date) {
            best = Some((name, report, raw));
        }
    }
    Ok(best)
}

/// The generated paragraph for step `n`: the targeted bench `bench` (its file name, report and
/// raw JSON) where there is one.
pub fn paragraph(n: u32, bench: Option<(&str, &BenchReport, &Value)>) -> Result<String> {
    let t = target(n).with_context(|| format!("step {n} has no motivation (steps 1 to 6 do)"))?;
    let shapes: Vec<String> = t.shapes.iter().map(|&s| shape_words(s)).collect();
    let (a, b) = (format!("step {n}"), format!("step {}", n - 1));
    let mut md = format!(
        "**Where step {n}'s idea should pay, re-measured.** {} The shape{} picked for it from the heatmap, after the heatmap was measured: {} (f16).",
        t.why,
        if shapes.len() == 1 { "" } else { "s" },
        shapes.join(" and ")
    );
    let Some((name, report, raw)) = bench else {
        md.push_str(&format!(
            " *Not yet measured there: `gpu/book6.sh` times step {n}'s twin against step {}'s at {} in the same rounds, and its results go to `assets/results/{FOLDER}/`.*\n",
            n - 1,
            if shapes.len() == 1 { "this shape" } else { "these shapes" }
        ));
        return Ok(md);
    };
    let _ = raw;
    // One run, judged with the committed benches' threshold.
    let files = results::committed().unwrap_or_default();
    let benches = claims::bench_record(&files);
    let record = claims::Record::single(name, report, &benches);
    let found: Vec<(Shape, Option<Comparison>)> = t
        .shapes
        .iter()
        .map(|&s| (s, record.compare(s, Dtype::F16, &a, &b)))
        .collect();
    md.push_str(&format!(
        " Measured there against step {}'s twin in the same rounds (`assets/results/{FOLDER}/{name}`: {}, {}, commit `{}`, by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower)):",
        n - 1,
        report.gpu.name,
        report.date,
        report.commit
    ));
    let each: Vec<String> = found
        .iter()
        .map(|(s, c)| match c {
            Some(c) => format!(" at {} the twin is {}", shape_words(*s), claims::phrase(c)),
            None => format!(" at {} the bench timed no pair", shape_words(*s)),
        })
        .collect();
    md.push_str(&each.join(";"));
    md.push('.');
    let timed: Vec<&Comparison> = found.iter().filter_map(|(_, c)| c.as_ref()).collect();
    let faster: Vec<&&Comparison> = timed.iter().filter(|c| c.call.sign() > 0).collect();
    if let Some(best) = faster
        .iter()
        .max_by(|x, y| x.gain_pct.total_cmp(&y.gain_pct))
    {
        md.push_str(&format!(
            " So the heatmap's largest gain for this idea, re-measured in a separate run (a replication, not a tested prediction): {:+.1} % at {}, {}.",
            best.gain_pct,
            shape_words(best.shape),
            best.call.words()
        ));
    } else if let Some(best) = timed
        .iter()
        .max_by(|x, y| x.gain_pct.total_cmp(&y.gain_pct))
    {
        md.push_str(&format!(
            " So on Hopper the idea does not pay even at the heatmap's largest gain, re-measured in a separate run: at best the twin is {} ({:+.1} % at {}).",
            best.call.words(),
            best.gain_pct,
            shape_words(best.shape)
        ));
    }
    md.push('\n');
    Ok(md)
}

/// `{{#motivation N}}` from the committed files.
pub fn marker(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .with_context(|| format!("motivation wants a step number, got {spec:?}"))?;
    let bench = latest_in(&results::dir().join(FOLDER))?;
    paragraph(
        n,
        bench.as_ref().map(|(name, r, raw)| (name.as_str(), r, raw)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures;
    use common::confidence::{Ratio, Verdict};
    use common::timing::Stats;

    /// Step `step` at `shape`, `median` µs, and its interval against the step before it.
    fn case(
        shape: Shape,
        step: u32,
        median: f64,
        ci: Option<[f64; 2]>,
    ) -> crate::results::BenchCase {
        let mut c = fixtures::case(shape, Dtype::F16, Some(step), 1.0);
        c.stats = Some(Stats {
            median_us: median,
            min_us: median * 0.9,
            max_us: median * 1.1,
            q1_us: median * 0.98,
            q3_us: median * 1.02,
            runs: 900,
        });
        c.confidence.vs_previous = ci.map(|ci| crate::results::VsPrevious {
            contender: format!("step {}", step - 1),
            ratio: Ratio {
                median: (ci[0] + ci[1]) / 2.0,
                ci95: ci,
                rounds: 900,
                verdict: Verdict::from_interval(ci[0], ci[1]),
            },
        });
        c
    }

    /// A targeted bench where step 2 pays (its pair faster), step 3 is the same within noise
    /// and step 6 is slower, each at its own target shape.
    fn fixture() -> (BenchReport, Value) {
        let t = |n: u32| target(n).unwrap().shapes[0];
        let mut cases = Vec::new();
        for (n, prev, now, ci) in [
            (2, 60.0, 35.0, [1.70, 1.72]),
            (3, 200.0, 199.8, [0.998, 1.003]),
            (6, 150.0, 156.0, [0.958, 0.964]),
        ] {
            cases.push(case(t(n), n - 1, prev, None));
            cases.push(case(t(n), n, now, Some(ci)));
        }
        let mut report = fixtures::report(cases);
        report.date = "2026-11-27".into();
        report.commit = "abc1234".into();
        let raw = serde_json::to_value(Results::Bench(report.clone())).unwrap();
        (report, raw)
    }

    #[test]
    fn each_call_gets_its_sentence() {
        let (report, raw) = fixture();
        let bench = Some(("bench-h100-2026-11-27.json", &report, &raw));
        let faster = paragraph(2, bench).unwrap();
        assert!(
            faster.contains("at 4096 × 8192 × 256 the twin is faster than step 1's in one run, not yet repeated (60.0 → 35.0 µs, +71.0 %; paired 1.710 [1.700–1.720], 900 rounds; one bench)"),
            "{faster}"
        );
        assert!(
            faster.contains(
                "So the heatmap's largest gain for this idea, re-measured in a separate run (a replication, not a tested prediction): +71.0 % at 4096 × 8192 × 256, faster in one run, not yet repeated."
            ),
            "{faster}"
        );
        assert!(
            faster.contains("picked for it from the heatmap, after the heatmap was measured"),
            "{faster}"
        );
        // The headline call is the chapter's sentence under the bench table, not repeated here.
        assert!(!faster.contains("bench of record finds"), "{faster}");
        assert!(
            faster.contains("assets/results/motivation/bench-h100-2026-11-27.json"),
            "{faster}"
        );

        let same = paragraph(3, bench).unwrap();
        assert!(
            same.contains(
                "the twin is the same within run-to-run variation as step 2's (200.0 → 199.8 µs, +0.0 %"
            ),
            "{same}"
        );
        assert!(
            same.contains("So on Hopper the idea does not pay even at the heatmap's largest gain, re-measured in a separate run: at best the twin is the same within run-to-run variation (+0.0 % at 1024 × 16384 × 4096)."),
            "{same}"
        );

        let slower = paragraph(6, bench).unwrap();
        assert!(
            slower.contains("the twin is slower than step 5's in one run, not yet repeated (150.0 → 156.0 µs, -3.9 %"),
            "{slower}"
        );
        assert!(
            slower.contains("at best the twin is slower in one run, not yet repeated (-3.9 % at 1024 × 16384 × 4096)"),
            "{slower}"
        );

        // A step whose shapes the bench did not time says so, and claims nothing.
        let none = paragraph(4, bench).unwrap();
        assert!(none.contains("the bench timed no pair"), "{none}");
        assert!(!none.contains("So "), "{none}");
    }

    #[test]
    fn without_a_targeted_bench_the_chapter_says_not_yet_measured() {
        let md = paragraph(5, None).unwrap();
        assert!(
            md.contains("*Not yet measured there: `gpu/book6.sh`"),
            "{md}"
        );
        assert!(md.contains("4096 × 8192 × 256"), "{md}");
        assert!(paragraph(0, None).is_err());
        // Every step's chapter renders from the committed files, measured or not.
        for n in 1..=6 {
            marker(&n.to_string()).unwrap();
        }
    }

    #[test]
    fn the_gpu_script_times_every_target_shape_and_every_step() {
        let script = include_str!("../../../gpu/book6.sh");
        let line = script
            .lines()
            .find(|l| l.starts_with("SHAPES="))
            .expect("gpu/book6.sh sets SHAPES");
        for t in &TARGETS {
            for s in t.shapes {
                let name = format!("{}x{}x{}", s.m, s.n, s.k);
                assert!(
                    line.contains(&name),
                    "gpu/book6.sh does not time {name} (step {})",
                    t.step
                );
            }
        }
        assert!(script.contains("--steps 0,1,2,3,4,5,6") && script.contains("--dtypes f16"));
    }

    #[test]
    fn a_folder_without_benches_is_none() {
        let dir = std::env::temp_dir().join(format!("wb-motivation-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(latest_in(&dir).unwrap().is_none());
        let (report, _) = fixture();
        Results::Bench(report)
            .write(&dir.join("bench-h100-2026-11-27.json"))
            .unwrap();
        let (name, r, _) = latest_in(&dir).unwrap().unwrap();
        assert_eq!(
            (name.as_str(), r.commit.as_str()),
            ("bench-h100-2026-11-27.json", "abc1234")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(latest_in(&dir).unwrap().is_none());
    }
}
