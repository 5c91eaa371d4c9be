//! `{{#exercise-timing N.M}}`: a chapter quotes what the committed run of its measuring
//! exercise (`crate::bench::measure`, gathered by `runner exercise --timings`) measured on the
//! Hopper twin.

use super::rule::{decide, Call, Evidence, Within};
use crate::bench::measure;
use crate::results::{ExerciseMeasured, Results};
use anyhow::{anyhow, Result};

/// `{{#exercise-timing N.M}}`: what the committed run of the measuring exercises
/// (`assets/results/exercises-*.json`, written by `runner exercise --timings`) measured for exercise N.M, or
/// how to measure it until one is committed.
pub fn marker(spec: &str) -> Result<String> {
    timing_in(&crate::results::committed()?, spec.trim())
}

fn timing_in(files: &[(String, Results)], id: &str) -> Result<String> {
    let m = measure::find(id).ok_or_else(|| anyhow!("exercise {id} has no timed counterpart"))?;
    let mut runs: Vec<(&String, &ExerciseMeasured)> = files
        .iter()
        .filter_map(|(name, r)| match r {
            Results::ExerciseTimings(t) => Some((name, t)),
            _ => None,
        })
        .flat_map(|(name, t)| {
            t.runs
                .iter()
                .filter_map(move |r| Some((name, r.measured.as_ref()?)))
        })
        .filter(|(_, v)| v.exercise == id)
        .collect();
    runs.sort_by(|a, b| a.1.date.cmp(&b.1.date));
    let Some((name, v)) = runs.last() else {
        return Ok(format!(
            "*Not timed yet: on an H100 or H200, `runner exercise {id} --predict …` times {} against {} on step {}'s twin.*\n",
            m.variants.iter().map(|v| v.label).collect::<Vec<_>>().join(", "),
            m.stock,
            m.step
        ));
    };
    // The call follows the book's rule. A run that paired every variant with the stock twin
    // round by round carries its own 95 % intervals, and they decide: the threshold comes from
    // the same run as the times. An older run is judged by the stock twin's spread in the
    // committed bench (the run recorded the spread of whatever bench was committed then).
    let paired = !v.variants.is_empty() && v.variants.iter().all(|x| x.vs_stock.is_some());
    let bench = crate::results::oldest_first(files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    })
    .pop();
    let now = if paired {
        None
    } else {
        bench.as_ref().and_then(|(bname, b, _)| {
            let c = b.find(measure::SHAPE, measure::DTYPE, &format!("step {}", v.step))?;
            Some((bname.clone(), super::claims::spread(c)?))
        })
    };
    let spread = now.as_ref().map_or(v.spread.relative, |(_, s)| *s);
    // The rule of `super::rule` over every committed run of this exercise: the variant of the
    // same label in each, its paired interval where the run recorded one, else its difference
    // of medians against the spread the run used.
    let record = super::claims::bench_record(files);
    let evidence = |label: &str| -> Vec<Evidence> {
        runs.iter()
            .filter_map(|(file, r)| {
                let x = r.variants.iter().find(|x| x.label == label)?;
                let (point, within) = match &x.vs_stock {
                    Some(q) => (
                        q.median,
                        Within::Interval {
                            lo: q.ci95[0],
                            hi: q.ci95[1],
                            rounds: q.rounds,
                        },
                    ),
                    None => (
                        1.0 / (1.0 + x.relative_pct / 100.0),
                        Within::Spread(if r.date == v.date {
                            spread
                        } else {
                            r.spread.relative
                        }),
                    ),
                };
                Some(Evidence {
                    file: file.to_string(),
                    gpu: r.gpu.clone(),
                    date: r.date.clone(),
                    commit: r.commit.clone(),
                    point,
                    within,
                    cap_hit: false,
                })
            })
            .collect()
    };
    let decision =
        |x: &crate::results::ExerciseVariant| decide(&evidence(&x.label), record.threshold);
    let call = |x: &crate::results::ExerciseVariant| decision(x).call.words();
    let mut recorded_differs = Vec::new();
    let each: Vec<String> = v
        .variants
        .iter()
        .map(|x| {
            let c = call(x);
            let was = match x.verdict.as_str() {
                "same" => Call::Same.words(),
                "faster" => Call::FasterOnce.words(),
                "slower" => Call::SlowerOnce.words(),
                other => other,
            };
            if now.is_some() && was != c {
                recorded_differs.push(format!("{} {}", x.label, x.verdict));
            }
            let interval = match &x.vs_stock {
                Some(r) => format!(
                    ", interval {:.3}–{:.3} of the stock's time over its own",
                    r.ci95[0], r.ci95[1]
                ),
                None => String::new(),
            };
            let d = decision(x);
            let runs = match d.spread() {
                Some(sp) => format!(
                    "; {} runs, {:.3}–{:.3}, {:.1} points apart",
                    d.runs,
                    d.low,
                    d.high,
                    100.0 * sp
                ),
                None => String::new(),
            };
            format!(
                "{} {:.1} µs ({:+.1} %{interval}{runs}): {c}",
                x.label, x.median_us, x.relative_pct
            )
        })
        .collect();
    let tree = if v.commit.ends_with("+changes") {
        format!(
            "at `{}`, a working tree with uncommitted changes, so the exact source that ran is not recorded",
            v.commit
        )
    } else {
        format!("commit `{}`", v.commit)
    };
    let rounds = v
        .variants
        .iter()
        .filter_map(|x| x.vs_stock.as_ref())
        .map(|r| r.rounds)
        .min();
    let rule = match &now {
        None if paired => format!(
            "The intervals are 95 % bootstrap intervals of the paired ratio, from the {} or more rounds of this run. Each call is the rule's in [Running the workbook](running.md#the-rule-for-faster-and-slower), over every committed run of this exercise, threshold {:.1} %.",
            rounds.unwrap_or(0),
            100.0 * record.threshold
        ),
        Some((bname, s)) => format!(
            "The calls use ±{:.1} %, the stock twin's spread in the committed bench (`assets/results/{bname}`), by the rule in [Running the workbook](running.md#the-rule-for-faster-and-slower).{}",
            100.0 * s,
            if recorded_differs.is_empty() {
                String::new()
            } else {
                format!(
                    " The run itself judged against ±{:.1} % ({}) and said: {}.",
                    100.0 * v.spread.relative,
                    v.spread.source,
                    recorded_differs.join("; ")
                )
            }
        ),
        None => format!(
            "\"The same\" is within ±{:.1} %: {}.",
            100.0 * v.spread.relative,
            v.spread.source
        ),
    };
    Ok(format!(
        "*Measured on the twin ({}, {}, {tree}; {} f16, `assets/results/{name}`): {} {:.1} µs; {}. {rule}*\n",
        v.gpu,
        v.date,
        measure::SHAPE,
        v.stock.label,
        v.stock.median_us,
        each.join("; "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ExerciseSpread, ExerciseStock, ExerciseVariant};

    #[test]
    fn the_chapter_line_quotes_a_committed_run_or_says_how_to_make_one() {
        let none = timing_in(&[], "1.2").unwrap();
        assert!(
            none.contains("Not timed yet") && none.contains("2 stages"),
            "{none}"
        );
        let run = Results::ExerciseTimings(crate::results::ExerciseTimings {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            date: "2026-11-26".into(),
            commit: "abc1234".into(),
            runs: vec![crate::results::ExerciseRun {
                runner: crate::results::RunnerVersion {
                    version: "0".into(),
                    commit: "abc1234".into(),
                },
                exercise: "1.2".into(),
                step: 1,
                title: "t".into(),
                kernel: None,
                checks: Vec::new(),
                measured: Some(ExerciseMeasured {
                    exercise: "1.2".into(),
                    step: 1,
                    gpu: "NVIDIA H100 80GB HBM3".into(),
                    driver_version: "13.0".into(),
                    date: "2026-11-26".into(),
                    commit: "abc1234".into(),
                    shape: measure::SHAPE,
                    dtype: measure::DTYPE,
                    protocol: "p".into(),
                    stock: ExerciseStock {
                        label: "4 stages".into(),
                        median_us: 470.0,
                        q1_us: None,
                        q3_us: None,
                        clocks: None,
                    },
                    cublas_median_us: None,
                    spread: ExerciseSpread {
                        relative: 0.02,
                        source: "s".into(),
                    },
                    prediction: None,
                    variants: vec![ExerciseVariant {
                        label: "2 stages".into(),
                        params: Vec::new(),
                        median_us: 520.0,
                        q1_us: 510.0,
                        q3_us: 530.0,
                        relative_pct: 10.6,
                        verdict: "slower".into(),
                        vs_stock: None,
                    }],
                }),
                result: "pass".into(),
                summary: "s".into(),
            }],
        });
        let files = vec![("exercises-h100-2026-11-26.json".to_string(), run)];
        let line = timing_in(&files, "1.2").unwrap();
        assert!(
            line.contains("4 stages 470.0 µs; 2 stages 520.0 µs (+10.6 %): slower"),
            "{line}"
        );
        assert!(line.contains("±2.0 %") && line.contains("exercises-h100-2026-11-26.json"));
        assert!(line.contains("commit `abc1234`"), "{line}");
        assert!(timing_in(&files, "4.1").is_err());

        // With a committed bench, its spread decides: 12 % makes the +10.6 % the same, and the
        // line says what the run itself said.
        let mut stock =
            crate::results::fixtures::case(measure::SHAPE, measure::DTYPE, Some(1), 1.0);
        stock.stats = Some(common::timing::Stats {
            median_us: 500.0,
            min_us: 460.0,
            max_us: 540.0,
            q1_us: 470.0,
            q3_us: 530.0,
            runs: 30,
        });
        let mut files = files;
        files.push((
            "bench-h100-2026-11-26.json".to_string(),
            Results::Bench(crate::results::fixtures::report(vec![stock])),
        ));
        let line = timing_in(&files, "1.2").unwrap();
        // +10.6 % inside a 12 % spread: the same (the run itself had judged it against 2 %).
        assert!(
            line.contains("(+10.6 %): the same within run-to-run variation"),
            "{line}"
        );
        assert!(line.contains("±12.0 %, the stock twin's spread in the committed bench (`assets/results/bench-h100-2026-11-26.json`)"), "{line}");
        assert!(
            line.contains("The run itself judged against ±2.0 % (s) and said: 2 stages slower."),
            "{line}"
        );

        // A run that paired the variant with the stock twin decides by its own interval, not
        // by any bench's spread: 0.93-0.95 (the stock's time over the variant's) is slower.
        let Results::ExerciseTimings(mut t) = files[0].1.clone() else {
            unreachable!("the fixture is an exercise-timings file")
        };
        let m = t.runs[0].measured.as_mut().unwrap();
        m.variants[0].vs_stock = Some(common::confidence::Ratio {
            median: 0.94,
            ci95: [0.93, 0.95],
            rounds: 812,
            verdict: common::confidence::Verdict::Slower,
        });
        files[0].1 = Results::ExerciseTimings(t);
        let line = timing_in(&files, "1.2").unwrap();
        assert!(
            line.contains(
                "(+10.6 %, interval 0.930–0.950 of the stock's time over its own): slower in one run, not yet repeated"
            ),
            "{line}"
        );
        assert!(
            line.contains("from the 812 or more rounds of this run"),
            "{line}"
        );
        assert!(!line.contains("±12.0 %"), "{line}");
    }
}
