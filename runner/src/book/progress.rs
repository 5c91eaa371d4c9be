//! `{{#progress}}` and `{{#progress N}}`: the ladder's progress, one point per step, as the
//! share of cuBLAS's TFLOP/s in the committed bench at the default shape (f16 and bf16), with
//! each step's spread as a bar. In a step's chapter its point is marked "you are here" and the
//! later steps are drawn faint. An inline SVG in the HTML book, text in the terminal.

use crate::results::{self, oldest_first, BenchReport, Results};
use anyhow::{bail, Result};
use common::{Dtype, Shape};

/// One step's point: % of cuBLAS, and the range its interquartile range spans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub step: u32,
    pub pct: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The points of `dtype` at `shape`: the step's median share of cuBLAS, and the shares its
/// first and third quartiles would give against cuBLAS's median.
pub fn points(r: &BenchReport, shape: Shape, dtype: Dtype) -> Vec<Point> {
    let blas = r
        .find(shape, dtype, "cublas")
        .and_then(|c| c.stats.as_ref())
        .map(|s| s.median_us);
    let Some(blas) = blas else {
        return Vec::new();
    };
    let mut steps: Vec<u32> = r.cases.iter().filter_map(|c| c.step).collect();
    steps.sort_unstable();
    steps.dedup();
    steps
        .into_iter()
        .filter_map(|n| {
            let s = r.find(shape, dtype, &format!("step {n}"))?.stats.as_ref()?;
            (s.median_us > 0.0 && s.q1_us > 0.0).then(|| Point {
                step: n,
                pct: 100.0 * blas / s.median_us,
                lo: 100.0 * blas / s.q3_us.max(s.median_us),
                hi: 100.0 * blas / s.q1_us.min(s.median_us),
            })
        })
        .collect()
}

fn latest() -> Result<Option<(String, BenchReport)>> {
    let files = results::committed()?;
    Ok(oldest_first(&files, |r| match r {
        Results::Bench(b) => Some(b),
        _ => None,
    })
    .pop()
    .map(|(n, b, _)| (n, b.clone())))
}

/// The marker: `here` is the chapter's step, if any.
pub fn marker(spec: &str, html: bool) -> Result<String> {
    let here: Option<u32> =
        match spec.trim() {
            "" => None,
            s => Some(s.parse().map_err(|_| {
                anyhow::anyhow!("progress wants nothing or a step number, got {s:?}")
            })?),
        };
    if let Some(n) = here {
        runner::steps::get(n)?;
    }
    let Some((name, r)) = latest()? else {
        return Ok("\n*No `runner bench` results recorded yet in `assets/results/`.*\n".into());
    };
    let shape = Shape::DEFAULT;
    let series: Vec<(Dtype, Vec<Point>)> = [Dtype::F16, Dtype::Bf16]
        .into_iter()
        .map(|d| (d, points(&r, shape, d)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        bail!("{name} has no steps timed at {shape}");
    }
    let caption = format!(
        "*Progress of the Hopper twins: each step's median TFLOP/s as a share of cuBLAS's in the same run, {} × {} × {}, on an {} ({}, commit `{}`, `assets/results/{name}`); bars: the step's interquartile range. No Blackwell kernel was timed: these are the twins.{}*\n",
        shape.m,
        shape.n,
        shape.k,
        r.gpu.name,
        r.date,
        r.commit,
        here.map_or(String::new(), |n| {
            // Only the drawn plot fades the later steps, and the last step has none.
            let last = series
                .iter()
                .flat_map(|(_, p)| p.iter().map(|p| p.step))
                .max()
                .unwrap_or(0);
            if html && n < last {
                format!(" You are here: step {n}; later steps are faint.")
            } else {
                format!(" You are here: step {n}.")
            }
        })
    );
    if !html {
        let mut out = String::from("```text\n");
        for (d, pts) in &series {
            out.push_str(&format!("{d}\n"));
            for p in pts {
                let bar = "#".repeat((p.pct / 5.0).round() as usize);
                let mark = if Some(p.step) == here {
                    "  <- you are here"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "  step {} {:>5.1}% ({:.0}–{:.0}) {bar}{mark}\n",
                    p.step, p.pct, p.lo, p.hi
                ));
            }
        }
        out.push_str("```\n\n");
        out.push_str(&caption);
        return Ok(out);
    }
    Ok(format!("{}\n{caption}", svg(&series, here)))
}

/// The plot: x the step, y the % of cuBLAS (40–110), one series per dtype.
fn svg(series: &[(Dtype, Vec<Point>)], here: Option<u32>) -> String {
    let (w, h) = (560.0, 260.0);
    let (x0, x1, y0, y1) = (50.0, 540.0, 20.0, 220.0);
    let (lo, hi) = (40.0, 110.0);
    let steps = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.step))
        .max()
        .unwrap_or(0)
        .max(1);
    let x = |n: u32| x0 + (x1 - x0) * f64::from(n) / f64::from(steps);
    let y = |p: f64| y1 - (y1 - y0) * (p.clamp(lo, hi) - lo) / (hi - lo);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" style=\"width: 100%; max-width: {w}px\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    for pct in [40.0, 60.0, 80.0, 100.0] {
        s.push_str(&format!(
            "<line x1=\"{x0}\" y1=\"{yy:.1}\" x2=\"{x1}\" y2=\"{yy:.1}\" stroke=\"{}\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{pct:.0}%</text>",
            if pct == 100.0 { "#888" } else { "#e4e4e4" },
            x0 - 6.0,
            y(pct) + 4.0,
            yy = y(pct)
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{:.1}\" fill=\"#666\">cuBLAS in the same run</text>",
        x0 + 130.0,
        y(100.0) - 4.0
    ));
    for n in 0..=steps {
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">step {n}</text>",
            x(n),
            y1 + 18.0
        ));
    }
    let colours = ["#2a5d8f", "#c2571a"];
    for (i, (d, pts)) in series.iter().enumerate() {
        let c = colours[i % 2];
        let faint = |n: u32| here.is_some_and(|h| n > h);
        for pair in pts.windows(2) {
            s.push_str(&format!(
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" stroke-width=\"1.5\"{}/>",
                x(pair[0].step),
                y(pair[0].pct),
                x(pair[1].step),
                y(pair[1].pct),
                if faint(pair[1].step) {
                    " stroke-dasharray=\"4,3\" opacity=\"0.35\""
                } else {
                    ""
                }
            ));
        }
        for p in pts {
            let op = if faint(p.step) { 0.35 } else { 1.0 };
            let dx = if i == 0 { -3.0 } else { 3.0 };
            s.push_str(&format!(
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" opacity=\"{op}\"/><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{c}\" opacity=\"{op}\"/>",
                x(p.step) + dx,
                y(p.lo),
                x(p.step) + dx,
                y(p.hi),
                x(p.step) + dx,
                y(p.pct)
            ));
        }
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">● {d}</text>",
            x0 + 10.0 + 60.0 * i as f64,
            y0 + 12.0
        ));
    }
    if let Some(n) = here {
        // The label (about 70 units wide) stays inside the plot: at the right edge it ends at
        // the highlight's right side, at the left edge it starts at its left side.
        let (lx, anchor) = if x(n) + 40.0 > w {
            (x(n) + 18.0, "end")
        } else if x(n) - 40.0 < 0.0 {
            (x(n) - 18.0, "start")
        } else {
            (x(n), "middle")
        };
        s.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{y0}\" width=\"36\" height=\"{}\" fill=\"#ffd54f\" opacity=\"0.25\"/><text x=\"{lx:.1}\" y=\"{}\" text-anchor=\"{anchor}\" font-weight=\"bold\">you are here</text>",
            x(n) - 18.0,
            y1 - y0,
            y1 + 34.0
        ));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures;
    use common::timing::Stats;

    #[test]
    fn a_point_is_the_share_of_cublas_with_its_quartiles() {
        let shape = Shape::DEFAULT;
        let timed = |step: Option<u32>, median: f64, q1: f64, q3: f64| {
            let mut c = fixtures::case(shape, Dtype::F16, step, 1.0);
            c.stats = Some(Stats {
                median_us: median,
                min_us: q1,
                max_us: q3,
                q1_us: q1,
                q3_us: q3,
                runs: 30,
            });
            c
        };
        let r = fixtures::report(vec![
            timed(None, 400.0, 390.0, 410.0),
            timed(Some(0), 800.0, 780.0, 820.0),
            timed(Some(1), 500.0, 400.0, 625.0),
        ]);
        let p = points(&r, shape, Dtype::F16);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].step, p[0].pct), (0, 50.0));
        assert_eq!((p[1].lo, p[1].pct, p[1].hi), (64.0, 80.0, 100.0));
        assert!(points(&r, shape, Dtype::Bf16).is_empty());
    }

    #[test]
    fn the_committed_bench_plots_with_a_you_are_here() {
        let all = marker("", true).unwrap();
        assert!(all.starts_with("<svg") && !all.contains("you are here"));
        let three = marker("3", true).unwrap();
        assert!(three.contains("you are here") && three.contains("You are here: step 3"));
        let text = marker("3", false).unwrap();
        assert!(text.contains("<- you are here"), "{text}");
        assert!(marker("x", true).is_err());
        assert!(marker("42", true).is_err());
    }

    /// The last step's label stays inside the plot (560 wide) and its caption promises no faint
    /// later steps; nor does the terminal's, which draws nothing faint.
    #[test]
    fn the_last_step_is_marked_inside_the_plot_and_nothing_is_called_faint() {
        let last = (runner::steps::all().len() - 1).to_string();
        let six = marker(&last, true).unwrap();
        let label = six
            .split("<text ")
            .find(|t| t.contains(">you are here<"))
            .unwrap();
        assert!(label.contains("text-anchor=\"end\""), "{label}");
        let x: f64 = label
            .split("x=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(x <= 560.0, "{label}");
        assert!(six.contains(&format!("You are here: step {last}.")) && !six.contains("faint"));
        assert!(marker("3", true).unwrap().contains("later steps are faint"));
        assert!(!marker("3", false).unwrap().contains("faint"));
    }
}
