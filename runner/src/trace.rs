//! `runner step N --trace`: a recorded launch's warp-role timelines (common::trace) written as a
//! Chrome trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open, and as an
//! SVG picture drawn with plotters: one row per warp, one colour per phase, a legend and a µs axis.
//! The book shows a committed pair as a figure (`{{#trace-figure N ARCH}}`, see `book.rs`).

use crate::results::{CtaClock, TraceHead};
use anyhow::{anyhow, Context, Result};
use common::step::Arch;
use common::trace::{Phase, Timeline};
use plotters::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What the files say about the recorded launch (the results type of a trace's `otherData`).
pub use crate::results::TraceMeta as Meta;

impl Meta {
    pub fn num_ctas(&self) -> u32 {
        self.grid.0 * self.grid.1 * self.grid.2
    }
    /// What the times mean, in one sentence (the JSON's `timing`, the picture's subtitle).
    pub fn timing_note(&self) -> &'static str {
        if self.emulated {
            "ORDER ONLY: the Blackwell kernel ran under the tcgen05 emulation on sm_90, which models tcgen05 in software; the durations mean nothing, only the order of events"
        } else {
            "measured: %globaltimer ns, refined per CTA with %clock64; the recorded launch followed warm-up launches, with L2 flushed"
        }
    }
    fn process_name(&self, cta: u32, smid: u32) -> String {
        if self.cluster > 1 {
            format!(
                "CTA {cta} (cluster {}, rank {}) on SM {smid}",
                cta / self.cluster,
                cta % self.cluster
            )
        } else {
            format!("CTA {cta} on SM {smid}")
        }
    }
    fn thread_name(&self, warp: u32, role: &str) -> String {
        if self.block > 128 {
            format!("warp {warp} (warpgroup {}): {role}", warp / 4)
        } else {
            format!("warp {warp}: {role}")
        }
    }
}

/// Round ns to the µs Chrome traces count in, keeping ns precision.
fn us(ns: f64) -> f64 {
    ns.round() / 1e3
}

/// The Chrome trace-event format (JSON object form): a process per CTA, a thread per warp named
/// with its role, a complete ("X") event per phase with its k-block, an instant ("i") event per
/// tile a persistent loop starts, and the launch's facts (and what the times mean) in `otherData`.
pub fn chrome_json(t: &Timeline, m: &Meta) -> Value {
    let mut events = Vec::new();
    for c in &t.ctas {
        let pid = c.cta;
        events.push(
            json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
            "args": {"name": m.process_name(c.cta, c.smid)}}),
        );
        events.push(
            json!({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
            "args": {"sort_index": c.cta}}),
        );
        if m.emulated {
            events.push(
                json!({"name": "process_labels", "ph": "M", "pid": pid, "tid": 0,
                "args": {"labels": "tcgen05 emulated: order only"}}),
            );
        }
        for w in &c.warps {
            let tid = w.warp;
            events.push(
                json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                "args": {"name": m.thread_name(w.warp, &w.role)}}),
            );
            events.push(
                json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                "args": {"sort_index": w.warp}}),
            );
            for s in &w.spans {
                let args = match s.phase.arg_name() {
                    Some(k) => json!({ k: s.arg }),
                    None => json!({}),
                };
                events.push(json!({"name": s.phase.label(),
                    "cat": if s.phase.is_wait() { "wait" } else { "work" },
                    "ph": "X", "ts": us(s.start_ns), "dur": us(s.end_ns - s.start_ns),
                    "pid": pid, "tid": tid, "args": args}));
            }
            for tile in &w.tiles {
                events.push(json!({"name": format!("tile {}", tile.tile), "cat": "tile",
                    "ph": "i", "s": "t", "ts": us(tile.start_ns), "pid": pid, "tid": tid,
                    "args": {"tile": tile.tile, "until_us": us(tile.end_ns),
                        "clock": tile.clock, "timer_us": us(tile.timer_ns)}}));
            }
        }
    }
    let clocks: Vec<CtaClock> = t
        .ctas
        .iter()
        .map(|c| CtaClock {
            cta: c.cta,
            sm: c.smid,
            clock_map: c.clock_map,
            clock_mhz: (c.clock_mhz * 10.0).round() / 10.0,
        })
        .collect();
    let cut_short: Vec<String> = t
        .ctas
        .iter()
        .flat_map(|c| {
            c.warps
                .iter()
                .filter(|w| w.cut_short)
                .map(move |w| format!("CTA {} warp {}", c.cta, w.warp))
        })
        .collect();
    let other = TraceHead {
        meta: m.clone(),
        kind: "trace".into(),
        timing: m.timing_note().into(),
        clocks,
        cut_short,
        end_us: us(t.end_ns),
        commit_note: None,
    };
    json!({"traceEvents": events, "displayTimeUnit": "ns", "otherData": other})
}

/// A phase's colour: waits pale, work saturated, each role its own hue (producer orange, MMA
/// blue, epilogue green).
pub fn colour(p: Phase) -> RGBColor {
    match p {
        Phase::Setup => RGBColor(150, 150, 150),
        Phase::Idle => RGBColor(238, 238, 238),
        Phase::SlotWait => RGBColor(253, 208, 162),
        Phase::Load => RGBColor(230, 85, 13),
        Phase::DataWait => RGBColor(198, 219, 239),
        Phase::Mma => RGBColor(33, 113, 181),
        Phase::MmaWait => RGBColor(107, 174, 214),
        Phase::AccEmptyWait => RGBColor(218, 218, 235),
        Phase::TurnWait => RGBColor(158, 154, 200),
        Phase::OutEmptyWait => RGBColor(188, 189, 220),
        Phase::AccWait => RGBColor(199, 233, 192),
        Phase::Epilogue => RGBColor(35, 139, 69),
        Phase::Tail => RGBColor(204, 153, 102),
        Phase::Teardown => RGBColor(90, 90, 90),
        Phase::Exit => RGBColor(0, 0, 0),
    }
}

/// A run of pixels of one row drawn in one phase's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub x0: usize,
    pub x1: usize,
    pub phase: Phase,
}

/// One row of the picture at `pixels` columns over [0, `end_ns`): each column takes the phase
/// that covers most of it (a persistent kernel has thousands of phases, far more than pixels),
/// and equal neighbours merge. Columns nothing covers stay empty.
pub fn raster(spans: &[(Phase, f64, f64)], end_ns: f64, pixels: usize) -> Vec<Run> {
    if pixels == 0 || end_ns <= 0.0 {
        return Vec::new();
    }
    let per = end_ns / pixels as f64;
    let mut cover = vec![[0f64; Phase::ALL.len()]; pixels];
    for &(phase, s, e) in spans {
        let (s, e) = (s.max(0.0), e.min(end_ns));
        if e < s {
            continue;
        }
        let first = ((s / per) as usize).min(pixels - 1);
        if e == s {
            // A zero-length phase still shows where nothing longer covers its column.
            cover[first][phase.id() as usize] += per * 1e-6;
            continue;
        }
        let last = ((e / per).ceil() as usize).clamp(first + 1, pixels) - 1;
        for (x, c) in cover.iter_mut().enumerate().take(last + 1).skip(first) {
            let (lo, hi) = (x as f64 * per, (x + 1) as f64 * per);
            c[phase.id() as usize] += (e.min(hi) - s.max(lo)).max(0.0);
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for (x, c) in cover.iter().enumerate() {
        let best = c
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .and_then(|(i, _)| Phase::from_id(i as u8));
        let Some(phase) = best else { continue };
        match runs.last_mut() {
            Some(r) if r.phase == phase && r.x1 == x => r.x1 = x + 1,
            _ => runs.push(Run {
                x0: x,
                x1: x + 1,
                phase,
            }),
        }
    }
    runs
}

const WIDTH: u32 = 1200;
const LABEL_W: u32 = 300;
const ROW_H: u32 = 16;
const CTA_GAP: u32 = 8;
const HEADER_H: u32 = 64;
const AXIS_H: u32 = 44;
const LEGEND_ROW_H: u32 = 20;
const LEGEND_PER_ROW: usize = 4;
const PLOT_RIGHT_MARGIN: u32 = 20;

fn draw_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the trace: {e:?}")
}

/// The SVG timeline: a title naming the kernel, GPU and launch, a subtitle saying what the times
/// mean (in red under emulation), one row per recorded warp grouped by CTA, the tiles of a
/// persistent loop as a band under each row, a legend of the phases present, an axis in µs.
pub fn svg(t: &Timeline, m: &Meta) -> Result<String> {
    let rows: usize = t.ctas.iter().map(|c| c.warps.len()).sum();
    let present: Vec<Phase> = Phase::ALL
        .iter()
        .copied()
        .filter(|p| {
            t.ctas
                .iter()
                .flat_map(|c| c.warps.iter())
                .any(|w| w.spans.iter().any(|s| s.phase == *p))
        })
        .collect();
    let has_tiles = t
        .ctas
        .iter()
        .flat_map(|c| c.warps.iter())
        .any(|w| !w.tiles.is_empty());
    let legend_items = present.len() + usize::from(has_tiles);
    let body_h = rows as u32 * ROW_H + t.ctas.len().saturating_sub(1) as u32 * CTA_GAP;
    let legend_h = legend_items.div_ceil(LEGEND_PER_ROW) as u32 * LEGEND_ROW_H + 12;
    let height = HEADER_H + body_h + AXIS_H + legend_h;
    let end_us = (t.end_ns / 1e3).max(1e-3);

    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let title = format!(
            "Step {} · {} ({}) · {} · {} {} · commit {}, {}",
            m.step,
            m.arch.name(),
            m.arch.sm(),
            m.gpu,
            m.shape,
            m.dtype,
            m.commit,
            m.date
        );
        root.draw(&Text::new(title, (12, 8), ("sans-serif", 17).into_font()))
            .map_err(draw_err)?;
        let ctas: Vec<String> = t.ctas.iter().map(|c| c.cta.to_string()).collect();
        let mut sub = format!(
            "CTAs {} of {}, {} records",
            ctas.join(", "),
            m.num_ctas(),
            m.records
        );
        if m.dropped > 0 {
            sub.push_str(&format!(
                " ({} calls did not fit and were dropped)",
                m.dropped
            ));
        }
        root.draw(&Text::new(sub, (12, 30), ("sans-serif", 13).into_font()))
            .map_err(draw_err)?;
        let note_style = if m.emulated {
            ("sans-serif", 13).into_font().color(&RED)
        } else {
            ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90))
        };
        root.draw(&Text::new(
            m.timing_note().to_string(),
            (12, 46),
            note_style,
        ))
        .map_err(draw_err)?;

        // The axis: a chart over the rows' area, its x in µs.
        let plot_x0 = LABEL_W as i32;
        let plot_x1 = (WIDTH - PLOT_RIGHT_MARGIN) as i32;
        let area = root.clone().shrink(
            (plot_x0 as u32, HEADER_H),
            ((plot_x1 - plot_x0) as u32, body_h + AXIS_H),
        );
        let mut chart = ChartBuilder::on(&area)
            .x_label_area_size(AXIS_H)
            .build_cartesian_2d(0f64..end_us, 0f64..1f64)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_desc(if m.emulated {
                "µs since the first record (emulated: the order only)"
            } else {
                "µs since the first record"
            })
            .x_label_formatter(&|x| format!("{x:.0}"))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(draw_err)?;

        let pixels = (plot_x1 - plot_x0).max(1) as usize;
        let px = |ns: f64| plot_x0 + ((ns / t.end_ns.max(1.0)) * pixels as f64).round() as i32;
        let mut y = HEADER_H as i32;
        for (ci, c) in t.ctas.iter().enumerate() {
            if ci > 0 {
                y += CTA_GAP as i32;
            }
            for w in &c.warps {
                let label = format!("CTA {} · {}", c.cta, m.thread_name(w.warp, &w.role));
                root.draw(&Text::new(
                    label,
                    (8, y + 2),
                    ("sans-serif", 11).into_font(),
                ))
                .map_err(draw_err)?;
                let spans: Vec<(Phase, f64, f64)> = w
                    .spans
                    .iter()
                    .map(|s| (s.phase, s.start_ns, s.end_ns))
                    .collect();
                let band = if w.tiles.is_empty() { 0 } else { 4 };
                for r in raster(&spans, t.end_ns, pixels) {
                    root.draw(&Rectangle::new(
                        [
                            (plot_x0 + r.x0 as i32, y + 1),
                            (plot_x0 + r.x1 as i32, y + ROW_H as i32 - 1 - band),
                        ],
                        colour(r.phase).filled(),
                    ))
                    .map_err(draw_err)?;
                }
                for (i, tile) in w.tiles.iter().enumerate() {
                    let (x0, x1) = (
                        px(tile.start_ns),
                        px(tile.end_ns).max(px(tile.start_ns) + 1),
                    );
                    let shade = if i % 2 == 0 {
                        RGBColor(60, 60, 60)
                    } else {
                        RGBColor(170, 170, 170)
                    };
                    root.draw(&Rectangle::new(
                        [
                            (x0, y + ROW_H as i32 - 1 - band),
                            (x1, y + ROW_H as i32 - 1),
                        ],
                        shade.filled(),
                    ))
                    .map_err(draw_err)?;
                }
                y += ROW_H as i32;
            }
        }

        // The legend.
        let mut items: Vec<(String, RGBColor)> = present
            .iter()
            .map(|p| (p.label().to_string(), colour(*p)))
            .collect();
        if has_tiles {
            items.push((
                "tiles of the persistent loop (band)".into(),
                RGBColor(60, 60, 60),
            ));
        }
        let legend_y = (HEADER_H + body_h + AXIS_H + 6) as i32;
        let col_w = (WIDTH as i32 - 24) / LEGEND_PER_ROW as i32;
        for (i, (label, c)) in items.into_iter().enumerate() {
            let x = 12 + (i % LEGEND_PER_ROW) as i32 * col_w;
            let yy = legend_y + (i / LEGEND_PER_ROW) as i32 * LEGEND_ROW_H as i32;
            root.draw(&Rectangle::new(
                [(x, yy + 2), (x + 22, yy + 14)],
                c.filled(),
            ))
            .map_err(draw_err)?;
            root.draw(&Rectangle::new(
                [(x, yy + 2), (x + 22, yy + 14)],
                BLACK.stroke_width(1),
            ))
            .map_err(draw_err)?;
            root.draw(&Text::new(
                label,
                (x + 28, yy + 2),
                ("sans-serif", 12).into_font(),
            ))
            .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

/// The files for `stem`: `<stem>-step<N>-<arch>.json` and `.svg`; a stem that is a folder gets
/// `trace-step<N>-<arch>.*` inside it.
pub fn paths(stem: &Path, step: u32, arch: Arch) -> (PathBuf, PathBuf) {
    let (dir, base) = if stem.is_dir() {
        (stem.to_path_buf(), "trace".to_string())
    } else {
        (
            stem.parent().map(Path::to_path_buf).unwrap_or_default(),
            stem.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into()),
        )
    };
    let name = format!("{base}-step{step}-{}", arch.sm());
    (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.svg")),
    )
}

/// Write the JSON and the SVG; returns their paths.
pub fn write(stem: &Path, t: &Timeline, m: &Meta) -> Result<(PathBuf, PathBuf)> {
    let (json_path, svg_path) = paths(stem, m.step, m.arch);
    // The folder exists: `outdir::check_trace_stem` refused the run otherwise.
    let json = serde_json::to_string(&chrome_json(t, m))?;
    std::fs::write(&json_path, json)
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    std::fs::write(&svg_path, svg(t, m)?)
        .with_context(|| format!("cannot write {}", svg_path.display()))?;
    Ok((json_path, svg_path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::trace::{decode, timeline, Layout, Record, KIND_ENTER, KIND_TILE, RECORD_BYTES};
    use common::{Dtype, Shape};

    /// A synthetic recording: a producer and an MMA warp of one CTA over two tiles, an epilogue
    /// warp, and an idle warp, 1 GHz, times in ns.
    fn synthetic() -> Timeline {
        let layout = Layout {
            ctas: 1,
            warps_per_cta: 4,
            per_warp: 32,
        };
        let r = |warp: u16, kind: u8, phase: Phase, arg: u32, ns: u64| Record {
            globaltimer: 1_763_000_000_000_000_000 + ns,
            clock: ns,
            arg,
            smid: 3,
            cta: 0,
            warp,
            phase: phase.id(),
            kind,
        };
        let e = |w, p, a, ns| r(w, KIND_ENTER, p, a, ns);
        let tile = |w, t, ns| r(w, KIND_TILE, Phase::Setup, t, ns);
        use Phase::*;
        let warps: Vec<Vec<Record>> = vec![
            vec![
                e(0, Setup, 0, 0),
                e(0, Idle, 0, 2_000),
                tile(0, 0, 2_100),
                e(0, SlotWait, 0, 2_100),
                e(0, Load, 0, 2_200),
                e(0, SlotWait, 1, 3_000),
                e(0, Load, 1, 9_000),
                tile(0, 66, 9_500),
                e(0, SlotWait, 0, 9_500),
                e(0, Load, 0, 12_000),
                e(0, Tail, 0, 13_000),
                e(0, Teardown, 0, 30_000),
                e(0, Exit, 0, 31_000),
            ],
            vec![
                e(1, Setup, 0, 0),
                e(1, Idle, 0, 2_000),
                tile(1, 0, 2_100),
                e(1, AccEmptyWait, 0, 2_100),
                e(1, DataWait, 0, 2_150),
                e(1, Mma, 0, 5_000),
                e(1, DataWait, 1, 5_300),
                e(1, Mma, 1, 10_000),
                e(1, Teardown, 0, 29_000),
                e(1, Exit, 0, 31_000),
            ],
            vec![
                e(2, Setup, 0, 0),
                e(2, Idle, 0, 2_000),
                e(2, AccWait, 0, 2_050),
                e(2, Epilogue, 0, 11_000),
                e(2, Teardown, 0, 28_000),
                e(2, Exit, 0, 31_000),
            ],
            vec![
                e(3, Setup, 0, 0),
                e(3, Idle, 0, 2_000),
                e(3, Exit, 0, 31_000),
            ],
        ];
        let mut bytes = vec![0u8; layout.bytes()];
        for (w, records) in warps.iter().enumerate() {
            for (i, rec) in records.iter().enumerate() {
                let at = (w * layout.per_warp as usize + i) * RECORD_BYTES;
                bytes[at..at + RECORD_BYTES].copy_from_slice(&rec.encode());
            }
        }
        timeline(&decode(&bytes, layout, 0).unwrap(), Arch::Blackwell, 1000.0)
    }

    fn meta(emulated: bool) -> Meta {
        Meta {
            step: 4,
            arch: Arch::Blackwell,
            kernel: "steps/step4_persistent/src/kernel.cu".into(),
            gpu: "Test GPU".into(),
            driver: "1.0".into(),
            date: "2026-01-02".into(),
            commit: "abc1234".into(),
            shape: Shape {
                m: 512,
                n: 1024,
                k: 512,
            },
            dtype: Dtype::F16,
            params: "stages=4".into(),
            emulated,
            grid: (8, 1, 1),
            cluster: 2,
            block: 128,
            layout: Layout {
                ctas: 1,
                warps_per_cta: 4,
                per_warp: 32,
            },
            records: 31,
            dropped: 2,
        }
    }

    #[test]
    fn the_chrome_trace_names_ctas_warps_and_phases() {
        let t = synthetic();
        let v = chrome_json(&t, &meta(false));
        let events = v["traceEvents"].as_array().unwrap();
        let named =
            |name: &str| -> Vec<&Value> { events.iter().filter(|e| e["name"] == name).collect() };
        assert_eq!(
            named("process_name")[0]["args"]["name"],
            "CTA 0 (cluster 0, rank 0) on SM 3"
        );
        let threads: Vec<&str> = named("thread_name")
            .iter()
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            threads,
            vec![
                "warp 0: producer",
                "warp 1: MMA",
                "warp 2: epilogue",
                "warp 3: idle"
            ]
        );
        // The producer's second wait: 3 us to 9 us, about k-block 1, a wait.
        let waits = named("wait for a free slot");
        let w = waits.iter().find(|e| e["args"]["k_block"] == 1).unwrap();
        assert_eq!(
            (w["ph"].as_str(), w["cat"].as_str()),
            (Some("X"), Some("wait"))
        );
        assert_eq!(
            (w["ts"].as_f64(), w["dur"].as_f64()),
            (Some(3.0), Some(6.0))
        );
        assert_eq!((w["pid"].as_u64(), w["tid"].as_u64()), (Some(0), Some(0)));
        let tiles = named("tile 66");
        assert_eq!(tiles.len(), 1);
        assert_eq!(tiles[0]["ph"], "i");
        assert_eq!(tiles[0]["args"]["until_us"], 13.0);
        // The raw readings of its start: the SM's cycles and the timer, for per-tile clocks.
        assert_eq!(tiles[0]["args"]["clock"], 9_500);
        assert_eq!(tiles[0]["args"]["timer_us"], 9.5);
        let o = &v["otherData"];
        assert_eq!(o["kind"], "trace");
        assert_eq!(o["gpu"], "Test GPU");
        assert_eq!(o["commit"], "abc1234");
        assert_eq!(o["dropped"], 2);
        assert_eq!(o["end_us"], 31.0);
        assert!(o["timing"].as_str().unwrap().starts_with("measured"));
        // Every complete event has a non-negative duration.
        assert!(events
            .iter()
            .filter(|e| e["ph"] == "X")
            .all(|e| e["dur"].as_f64().unwrap() >= 0.0));
    }

    #[test]
    fn emulated_traces_say_only_the_order_counts() {
        let t = synthetic();
        let v = chrome_json(&t, &meta(true));
        assert!(v["otherData"]["timing"]
            .as_str()
            .unwrap()
            .starts_with("ORDER ONLY"));
        assert!(v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "process_labels"));
        let s = svg(&t, &meta(true)).unwrap();
        assert!(s.contains("ORDER ONLY"), "the picture says so too");
        assert!(s.contains("emulated: the order only"));
    }

    #[test]
    fn the_svg_has_a_row_per_warp_a_legend_and_an_axis() {
        let t = synthetic();
        let s = svg(&t, &meta(false)).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..60.min(s.len())]);
        for label in [
            "CTA 0 · warp 0: producer",
            "CTA 0 · warp 3: idle",
            "wait for a free slot",
            "issue MMAs",
            "tiles of the persistent loop (band)",
            "µs since the first record",
            "Step 4 · Blackwell kernel (sm_100a) · Test GPU · 512x1024x512 f16 · commit abc1234, 2026-01-02",
            "2 calls did not fit and were dropped",
        ] {
            assert!(s.contains(label), "missing {label:?}");
        }
        // Phases absent from the trace stay out of the legend.
        assert!(!s.contains("wait for the other consumer"));
        // The producer's colours are in the picture.
        let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        assert!(s.to_uppercase().contains(&hex(colour(Phase::Load))));
    }

    #[test]
    fn rows_take_each_column_s_dominant_phase() {
        use Phase::*;
        // 10 columns of 10 ns: a long wait, a burst of tiny loads inside column 5, then MMAs.
        let mut spans = vec![(SlotWait, 0.0, 50.0)];
        for i in 0..5 {
            spans.push((Load, 50.0 + i as f64, 50.5 + i as f64));
            spans.push((SlotWait, 50.5 + i as f64, 51.0 + i as f64));
        }
        spans.push((SlotWait, 55.0, 58.0));
        spans.push((Mma, 58.0, 100.0));
        let runs = raster(&spans, 100.0, 10);
        assert_eq!(
            runs,
            vec![
                Run {
                    x0: 0,
                    x1: 6,
                    phase: SlotWait
                },
                Run {
                    x0: 6,
                    x1: 10,
                    phase: Mma
                },
            ]
        );
        // A zero-length phase alone in its column still shows; empty columns stay empty.
        let runs = raster(&[(Teardown, 35.0, 35.0), (Mma, 70.0, 80.0)], 100.0, 10);
        assert_eq!(
            runs,
            vec![
                Run {
                    x0: 3,
                    x1: 4,
                    phase: Teardown
                },
                Run {
                    x0: 7,
                    x1: 8,
                    phase: Mma
                },
            ]
        );
        assert!(raster(&spans, 0.0, 10).is_empty());
    }

    #[test]
    fn files_are_named_after_the_stem_step_and_arch() {
        let (j, s) = paths(Path::new("out/trace"), 3, Arch::Hopper);
        assert_eq!(j, Path::new("out/trace-step3-sm_90a.json"));
        assert_eq!(s, Path::new("out/trace-step3-sm_90a.svg"));
        let dir = std::env::temp_dir().join(format!("wb-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (j, _) = paths(&dir, 0, Arch::Blackwell);
        assert_eq!(j, dir.join("trace-step0-sm_100a.json"));
        // The folder of a stem must exist: the runner creates no folder it was not asked for.
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let (j, s) = write(&dir.join("sub").join("t"), &synthetic(), &meta(false)).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
        assert_eq!(v["otherData"]["step"], 4);
        assert!(std::fs::read_to_string(&s).unwrap().starts_with("<svg"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
