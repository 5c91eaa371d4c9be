//! SVG plots of `runner bench` results (plotters): the climb of TFLOP/s step by step with each
//! case's cuBLAS line, and, after `--sweep`, TFLOP/s against the size of square problems.

use crate::results::{BenchReport, DEFAULT_SHAPES};
use anyhow::{anyhow, Result};
use common::problem::{Dtype, Shape};
use plotters::prelude::*;
use std::path::Path;

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e:?}")
}

fn tflops_of(r: &BenchReport, shape: Shape, dtype: Dtype, kernel: &str) -> Option<f64> {
    r.find(shape, dtype, kernel).and_then(|c| c.tflops)
}

/// The series the ladder plot draws: the default shapes if they were measured, else all shapes.
fn ladder_series(r: &BenchReport) -> Vec<(Shape, Dtype)> {
    let all = r.shapes_and_dtypes();
    let default: Vec<(Shape, Dtype)> = all
        .iter()
        .copied()
        .filter(|(s, _)| DEFAULT_SHAPES.contains(s))
        .collect();
    if default.is_empty() {
        all
    } else {
        default
    }
}

/// TFLOP/s of every step (solid, with markers) and cuBLAS (dashed, same colour) per shape and
/// dtype; the dense peak at the maximum clock as a grey line. Writes `path`; with several
/// square shapes, also `<path stem>-sweep.svg`.
pub fn ladder(r: &BenchReport, path: &Path) -> Result<()> {
    let series = ladder_series(r);
    let steps: Vec<u32> = {
        let mut v: Vec<u32> = r.cases.iter().filter_map(|c| c.step).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let max_y = r
        .cases
        .iter()
        .filter_map(|c| c.tflops)
        .fold(r.peak_tflops.unwrap_or(0.0), f64::max)
        * 1.1;
    let (x0, x1) = (
        steps.first().copied().unwrap_or(0) as f64 - 0.3,
        steps.last().copied().unwrap_or(0) as f64 + 0.3,
    );
    {
        let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // The rounds each case took: adaptive runs take more than their minimum (`iters`).
        let rounds: Vec<usize> = r
            .cases
            .iter()
            .filter_map(|c| c.stats.as_ref().map(|s| s.runs))
            .collect();
        let (lo, hi) = (
            rounds.iter().copied().min().unwrap_or(r.iters),
            rounds.iter().copied().max().unwrap_or(r.iters),
        );
        let title = format!(
            "{}s on {} ({}), {} — L2 flushed, medians of {}",
            r.arch.name(),
            r.gpu.name,
            r.commit,
            r.date,
            if lo == hi {
                format!("{lo} rounds")
            } else {
                format!("{lo}–{hi} rounds")
            }
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, 0f64..max_y)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("TFLOP/s")
            .x_labels(steps.len().max(2))
            .x_label_formatter(&|x| format!("{}", x.round() as i64))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(err)?;
        if let Some(peak) = r.peak_tflops {
            chart
                .draw_series(LineSeries::new(
                    [(x0, peak), (x1, peak)],
                    ShapeStyle::from(&RGBColor(150, 150, 150)).stroke_width(1),
                ))
                .map_err(err)?
                .label(format!("dense peak at max clock ({peak:.0})"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RGBColor(150, 150, 150)));
        }
        for (i, &(shape, dtype)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = steps
                .iter()
                .filter_map(|&s| {
                    tflops_of(r, shape, dtype, &format!("step {s}")).map(|t| (s as f64, t))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{shape} {dtype}"))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(err)?;
            if let Some(b) = tflops_of(r, shape, dtype, "cublas") {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x0, b), (x1, b)],
                        6,
                        4,
                        color.stroke_width(1),
                    ))
                    .map_err(err)?
                    .label(format!("cuBLAS {shape} {dtype} ({b:.0})"))
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 20, y)], color.stroke_width(1))
                    });
            }
        }
        finish(&mut chart, &root)?;
    }
    sweep(r, path)
}

/// With several square shapes: TFLOP/s against size, one line per kernel, for the first dtype.
fn sweep(r: &BenchReport, ladder_path: &Path) -> Result<()> {
    let mut sizes: Vec<usize> = r
        .cases
        .iter()
        .filter(|c| c.shape.m == c.shape.n && c.shape.n == c.shape.k)
        .map(|c| c.shape.m)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let Some(dtype) = r.cases.first().map(|c| c.dtype) else {
        return Ok(());
    };
    if sizes.len() < 3 {
        return Ok(());
    }
    let mut kernels: Vec<String> = Vec::new();
    for c in &r.cases {
        if !kernels.contains(&c.kernel) {
            kernels.push(c.kernel.clone());
        }
    }
    let stem = ladder_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = ladder_path.with_file_name(format!("{stem}-sweep.svg"));
    let max_y = r.cases.iter().filter_map(|c| c.tflops).fold(0.0, f64::max) * 1.1;
    let (x0, x1) = (
        *sizes.first().unwrap_or(&0) as f64 * 0.9,
        *sizes.last().unwrap_or(&0) as f64 * 1.05,
    );
    let root = SVGBackend::new(&path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "square M = N = K, {dtype}, {}s on {} ({}), {}",
                r.arch.name(),
                r.gpu.name,
                r.commit,
                r.date
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0f64..max_y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("M = N = K")
        .y_desc("TFLOP/s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    for (i, k) in kernels.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|&s| {
                tflops_of(r, Shape { m: s, n: s, k: s }, dtype, k).map(|t| (s as f64, t))
            })
            .collect();
        let style = if k == "cublas" {
            color.stroke_width(3)
        } else {
            color.stroke_width(2)
        };
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(err)?
            .label(k.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    }
    finish(&mut chart, &root)
}

/// Both plots' legend (lower right, on a translucent white box) and the file written.
fn finish<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::report;
    use crate::results::BenchCase;

    fn case(shape: Shape, kernel: &str, step: Option<u32>, tflops: f64) -> BenchCase {
        BenchCase {
            kernel: kernel.into(),
            ..crate::results::fixtures::case(shape, Dtype::F16, step, tflops)
        }
    }

    #[test]
    fn the_ladder_plot_has_a_line_per_case_and_the_cublas_reference() {
        // Synthetic numbers: this checks the drawing, not a measurement.
        let s = DEFAULT_SHAPES[0];
        let mut cases = vec![case(s, "cublas", None, 700.0)];
        for n in 0..3u32 {
            cases.push(case(
                s,
                &format!("step {n}"),
                Some(n),
                400.0 + 100.0 * n as f64,
            ));
        }
        for size in [1024, 2048, 4096] {
            let sq = Shape {
                m: size,
                n: size,
                k: size,
            };
            cases.push(case(sq, "cublas", None, 500.0));
            cases.push(case(sq, "step 2", Some(2), 450.0));
        }
        let r = BenchReport {
            peak_tflops: Some(1070.0),
            ..report(cases)
        };
        let dir = std::env::temp_dir().join(format!("wb-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ladder.svg");
        ladder(&r, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(
            svg.contains("4096x8192x4096 f16"),
            "a legend entry per case"
        );
        assert!(svg.contains("cuBLAS 4096x8192x4096 f16 (700)"));
        assert!(svg.contains("dense peak at max clock (1070)"));
        assert!(
            !svg.contains("1024x1024x1024 f16"),
            "sweep shapes stay off the ladder"
        );
        let sweep = std::fs::read_to_string(dir.join("ladder-sweep.svg")).unwrap();
        assert!(sweep.contains("M = N = K"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
