//! `runner bench --heatmap`: every step's % of cuBLAS over a grid of shapes beyond the square
//! headline ones (skinny M, small K, large K, sizes that are no power of two), so a regression at
//! one shape shows instead of hiding behind the headline. The timing is the bench's (one
//! protocol, `common::timing`); this module picks the shapes and draws the SVG: one panel per
//! dtype, a row per step, a column per shape, each cell coloured by % of cuBLAS and labelled
//! with it; a shape a step does not accept is a grey cell with the reason as its tooltip.

use crate::results::{BenchCase, BenchReport};
use anyhow::{Context, Result};
use common::problem::{Dtype, Shape};
use std::fmt::Write as _;
use std::path::Path;

const fn shape(m: usize, n: usize, k: usize) -> Shape {
    Shape { m, n, k }
}

/// The default grid (M x N x K): every size a multiple of 256 (M, N) and 64 (K), so the
/// kernels' tiles divide it; a kernel whose tile does not is shown as not accepting the shape.
pub const HEATMAP_SHAPES: [Shape; 12] = [
    // The headline shape and a square reference.
    shape(4096, 8192, 4096),
    shape(2048, 2048, 2048),
    // Skinny M: few row tiles, the grid cannot fill the GPU.
    shape(256, 8192, 4096),
    shape(512, 8192, 4096),
    shape(1024, 16384, 4096),
    // Small K: short main loops, the epilogue and the launch dominate.
    shape(4096, 8192, 256),
    shape(4096, 8192, 1024),
    // Large K: long main loops, few tiles.
    shape(2048, 2048, 16384),
    shape(4096, 4096, 16384),
    // No power of two: partial waves, odd tile counts.
    shape(3328, 5376, 2880),
    shape(1280, 1280, 1280),
    shape(6912, 4352, 3136),
];

const CELL_W: usize = 92;
const CELL_H: usize = 26;
const LABEL_W: usize = 120;
const HEADER_H: usize = 44;
const PANEL_GAP: usize = 34;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The colour of a cell: red at 50 % of cuBLAS or less, yellow at 100 %, green at 120 % or more,
/// interpolated linearly between.
pub fn colour(pct: f64) -> String {
    let lerp = |a: f64, b: f64, t: f64| a + (b - a) * t.clamp(0.0, 1.0);
    let (red, yellow, green) = (
        (215.0, 48.0, 39.0),
        (254.0, 224.0, 110.0),
        (26.0, 152.0, 80.0),
    );
    let (from, to, t) = if pct <= 100.0 {
        (red, yellow, (pct - 50.0) / 50.0)
    } else {
        (yellow, green, (pct - 100.0) / 20.0)
    };
    format!(
        "#{:02x}{:02x}{:02x}",
        lerp(from.0, to.0, t).round() as u8,
        lerp(from.1, to.1, t).round() as u8,
        lerp(from.2, to.2, t).round() as u8
    )
}

/// The distinct values of `f` over the cases, in order of first appearance.
fn distinct<T: PartialEq + Copy>(
    cases: &[BenchCase],
    f: impl Fn(&BenchCase) -> Option<T>,
) -> Vec<T> {
    let mut v = Vec::new();
    for x in cases.iter().filter_map(f) {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

/// The heatmap of a bench report as SVG text.
pub fn svg(r: &BenchReport) -> String {
    let shapes: Vec<Shape> = distinct(&r.cases, |c| Some(c.shape));
    let dtypes: Vec<Dtype> = distinct(&r.cases, |c| Some(c.dtype));
    let mut steps: Vec<u32> = distinct(&r.cases, |c| c.step);
    steps.sort_unstable();
    // A row per step plus the cuBLAS row (its TFLOP/s, for scale).
    let rows = steps.len() + 1;
    let panel_h = HEADER_H + rows * CELL_H;
    // Wide enough for the two header lines however few the shapes.
    let width = (LABEL_W + shapes.len() * CELL_W + 20).max(900);
    let height = 60 + dtypes.len() * (panel_h + PANEL_GAP);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="{width}" height="{height}" fill="white"/><text x="10" y="20" font-size="14" font-weight="bold">% of cuBLAS by shape (M x N x K): {}, {}, commit {}</text><text x="10" y="38" fill="#555">{} primed rotated rounds per shape, L2 flushed; red 50 %, yellow 100 %, green 120 %; grey: shape not accepted or not verified (hover for why)</text>"##,
        esc(&r.gpu.name),
        esc(&r.date),
        esc(&r.commit),
        r.iters
    );
    for (p, &dtype) in dtypes.iter().enumerate() {
        let y0 = 60 + p * (panel_h + PANEL_GAP);
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}" font-size="13" font-weight="bold">{dtype}</text>"#,
            y0 + 14
        );
        for (j, sh) in shapes.iter().enumerate() {
            let x = LABEL_W + j * CELL_W + CELL_W / 2;
            let _ = writeln!(
                s,
                r#"<text x="{x}" y="{}" text-anchor="middle">{}x{}</text><text x="{x}" y="{}" text-anchor="middle">x{}</text>"#,
                y0 + 24,
                sh.m,
                sh.n,
                y0 + 38,
                sh.k
            );
        }
        let find = |sh: Shape, step: Option<u32>| {
            r.cases
                .iter()
                .find(|c| c.shape == sh && c.dtype == dtype && c.step == step)
        };
        for (i, step) in std::iter::once(None)
            .chain(steps.iter().map(|&n| Some(n)))
            .enumerate()
        {
            let y = y0 + HEADER_H + i * CELL_H;
            let label = step.map_or("cuBLAS TFLOP/s".to_string(), |n| format!("step {n}"));
            let _ = writeln!(
                s,
                r#"<text x="10" y="{}">{label}</text>"#,
                y + CELL_H / 2 + 4
            );
            for (j, &sh) in shapes.iter().enumerate() {
                let x = LABEL_W + j * CELL_W;
                let case = find(sh, step);
                let (fill, text, title) = match (step, case) {
                    (None, Some(c)) => (
                        "#f0f0f0".to_string(),
                        c.tflops.map_or("-".into(), |t| format!("{t:.0}")),
                        format!("cuBLAS at {sh} {dtype}"),
                    ),
                    (Some(n), Some(c)) => match (c.pct_of_cublas, &c.skipped) {
                        (Some(pct), None) => (
                            colour(pct),
                            format!("{pct:.1}"),
                            format!(
                                "step {n} at {sh} {dtype}: {pct:.1} % of cuBLAS, {:.0} TFLOP/s",
                                c.tflops.unwrap_or(f64::NAN)
                            ),
                        ),
                        (_, why) => (
                            "#bdbdbd".to_string(),
                            "–".to_string(),
                            format!(
                                "step {n} at {sh} {dtype}: {}",
                                why.as_deref().unwrap_or("not timed")
                            ),
                        ),
                    },
                    (_, None) => (
                        "#bdbdbd".to_string(),
                        "–".to_string(),
                        format!("not measured at {sh} {dtype}"),
                    ),
                };
                let _ = writeln!(
                    s,
                    r#"<g class="cell"><title>{}</title><rect x="{x}" y="{y}" width="{}" height="{}" fill="{fill}" stroke="white"/><text x="{}" y="{}" text-anchor="middle">{}</text></g>"#,
                    esc(&title),
                    CELL_W,
                    CELL_H,
                    x + CELL_W / 2,
                    y + CELL_H / 2 + 4,
                    esc(&text)
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

/// Write the heatmap of `r` to `path`.
pub fn write(r: &BenchReport, path: &Path) -> Result<()> {
    std::fs::write(path, svg(r)).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::step::Arch;

    use crate::results::fixtures::report;

    fn case(shape: Shape, dtype: Dtype, step: Option<u32>, tflops: f64, pct: f64) -> BenchCase {
        BenchCase {
            pct_of_cublas: Some(pct),
            ..crate::results::fixtures::case(shape, dtype, step, tflops)
        }
    }

    #[test]
    fn colours_run_red_yellow_green() {
        assert_eq!(colour(10.0), "#d73027");
        assert_eq!(colour(50.0), "#d73027");
        assert_eq!(colour(100.0), "#fee06e");
        assert_eq!(colour(120.0), "#1a9850");
        assert_eq!(colour(300.0), "#1a9850");
        assert_ne!(colour(75.0), colour(90.0));
    }

    #[test]
    fn the_heatmap_has_a_cell_per_step_shape_and_dtype() {
        // Synthetic numbers: this checks the drawing, not a measurement.
        let (a, b) = (HEATMAP_SHAPES[0], HEATMAP_SHAPES[2]);
        let mut cases = Vec::new();
        for d in [Dtype::F16, Dtype::Bf16] {
            for sh in [a, b] {
                cases.push(case(sh, d, None, 700.0, 100.0));
                cases.push(case(sh, d, Some(0), 450.0, 64.3));
                cases.push(case(sh, d, Some(4), 680.0, 97.1));
            }
        }
        // Step 4 does not accept shape b in bf16: a grey cell with the reason.
        let skipped = cases
            .iter_mut()
            .find(|c| c.shape == b && c.dtype == Dtype::Bf16 && c.step == Some(4))
            .unwrap();
        skipped.skipped = Some("M must be a multiple of <256> & more".into());
        skipped.pct_of_cublas = None;
        let s = svg(&report(cases));
        assert!(s.starts_with("<svg ") && s.ends_with("</svg>\n"));
        // (cuBLAS + 2 steps) x 2 shapes x 2 dtypes.
        assert_eq!(s.matches(r#"<g class="cell">"#).count(), 12);
        assert_eq!(s.matches("<g").count(), s.matches("</g>").count());
        for label in [
            "f16",
            "bf16",
            "step 0",
            "step 4",
            "4096x8192",
            "256x8192",
            "x4096",
        ] {
            assert!(s.contains(label), "{label}");
        }
        assert_eq!(s.matches(">97.1<").count(), 3);
        assert_eq!(s.matches(">64.3<").count(), 4);
        assert!(s.contains(&colour(97.1)) && s.contains(&colour(64.3)));
        // Text from the report is escaped.
        assert!(s.contains("multiple of &lt;256&gt; &amp; more"));
        assert!(s.contains("Test &lt;GPU&gt;"));
        assert!(!s.contains("<GPU>"));
    }

    #[test]
    fn every_kernel_accepts_the_default_grid() {
        // So the heatmap on an H100/H200 (twins) or a B200 (Blackwell kernels) is all measured
        // cells, no grey ones, unless a kernel fails verification.
        let mut rejected = Vec::new();
        for step in runner::steps::all() {
            for arch in [Arch::Hopper, Arch::Blackwell] {
                let spec = common::step::KernelSpec::new(step, arch);
                for s in HEATMAP_SHAPES {
                    if let Err(e) = spec.check_shape(s) {
                        rejected.push(e);
                    }
                }
            }
        }
        assert!(rejected.is_empty(), "{rejected:#?}");
    }

    #[test]
    fn the_default_grid_goes_beyond_the_square() {
        assert!(HEATMAP_SHAPES.iter().any(|s| s.m <= 512));
        assert!(HEATMAP_SHAPES.iter().any(|s| s.k <= 256));
        assert!(HEATMAP_SHAPES.iter().any(|s| s.k >= 16384));
        assert!(HEATMAP_SHAPES
            .iter()
            .any(|s| !s.m.is_power_of_two() && !s.n.is_power_of_two()));
        for s in HEATMAP_SHAPES {
            assert!(s.m % 256 == 0 && s.n % 256 == 0 && s.k % 64 == 0, "{s}");
        }
    }
}
