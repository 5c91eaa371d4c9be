//! Figures drawn from code: the mbarrier phase timeline (from the phase model), the
//! tensor-memory layout, the 128-byte swizzle with its shared-memory descriptor (from the host
//! twins of the kernels' encoders), and the 2-CTA data flow (from step 3's configuration). They
//! live in `assets/` as SVG files; a test regenerates each and fails if the file differs, and
//! `WORKBOOK_WRITE_FIGURES=1 cargo test -p runner figures` writes them.

use anyhow::Result;
use common::model::budget::BudgetInput;
use common::model::descriptors::{decode_smem_desc, make_smem_desc_sw128, sw128_offset};
use common::model::phases::{
    simulate, BarrierKind, Counter, EmptyWait, FullWait, Outcome, Ring, Simulation, StuckOn, Timing,
};

/// A figure: its file under `assets/` and the code that draws it.
pub struct Figure {
    pub file: &'static str,
    pub draw: fn() -> Result<String>,
}

pub const FIGURES: &[Figure] = &[
    Figure {
        file: "mbarrier-phases.svg",
        draw: phase_timeline,
    },
    Figure {
        file: "tmem-layout.svg",
        draw: tmem_layout,
    },
    Figure {
        file: "smem-descriptor.svg",
        draw: swizzle_and_descriptor,
    },
    Figure {
        file: "step3-pair.svg",
        draw: pair_data_flow,
    },
    Figure {
        file: "roofline.svg",
        draw: super::roofline::figure,
    },
    Figure {
        file: "final-kernel.svg",
        draw: final_kernel,
    },
    Figure {
        file: "step0-timeline.svg",
        draw: step0_timeline,
    },
];

/// Step 0's timeline, drawn from the committed simulator trace of step 0 (`step0_figure`).
fn step0_timeline() -> Result<String> {
    use anyhow::Context;
    let path = common::toolkit::project_root().join(super::step0_figure::TRACE);
    let json = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (written by `{}`)",
            path.display(),
            super::step0_figure::REGENERATE
        )
    })?;
    super::step0_figure::draw(&json)
}

/// A minimal SVG writer: absolute coordinates, escaped text.
struct Svg {
    w: u32,
    h: u32,
    body: String,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Svg {
    fn new(w: u32, h: u32, title: &str) -> Svg {
        let mut body = format!("  <title>{}</title>\n", esc(title));
        body.push_str(&format!(
            "  <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n"
        ));
        Svg { w, h, body }
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: &str) {
        self.body.push_str(&format!(
            "  <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" stroke=\"{stroke}\"/>\n"
        ));
    }

    fn text(&mut self, x: f64, y: f64, size: u32, anchor: &str, s: &str) {
        self.body.push_str(&format!(
            "  <text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\">{}</text>\n",
            esc(s)
        ));
    }

    fn bold(&mut self, x: f64, y: f64, size: u32, s: &str) {
        self.body.push_str(&format!(
            "  <text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" font-weight=\"bold\">{}</text>\n",
            esc(s)
        ));
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, dash: bool) {
        self.body.push_str(&format!(
            "  <line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"{}/>\n",
            if dash { " stroke-dasharray=\"3,2\"" } else { "" }
        ));
    }

    fn arrow(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        self.body.push_str(&format!(
            "  <line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>\n"
        ));
    }

    fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n  <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#444\"/></marker></defs>\n{}</svg>\n",
            self.body,
            w = self.w,
            h = self.h
        )
    }
}

/// One colour per ring slot.
const SLOT: [&str; 4] = ["#7fb3e6", "#f2b36b", "#9fd39a", "#c9a3e6"];

fn slot_color(slot: u32) -> &'static str {
    SLOT[slot as usize % SLOT.len()]
}

/// A step's ring as the simulator runs it for the figure: eight k-blocks, one tile.
fn timeline_ring(step: u32, empty_wait: EmptyWait, timing: Timing) -> Result<Ring> {
    let m = common::model::phases::model(runner::steps::get(step)?);
    Ok(Ring {
        stages: m.stages,
        k_blocks: 8,
        tiles: 1,
        roles: m.roles,
        empty_wait,
        full_wait: FullWait::Correct,
        counter: Counter::AcrossTiles,
        timing,
    })
}

/// Draw one run: activity lanes, then each slot's two barriers with their phases and the waits
/// on them. Returns the height used.
fn draw_run(svg: &mut Svg, top: f64, title: &str, ring: &Ring, sim: &Simulation) -> f64 {
    let left = 150.0;
    let width = f64::from(svg.w) - left - 20.0;
    // A hang is drawn on for a while past its last event, to show the waits that never end.
    let stuck = match &sim.outcome {
        Outcome::Hang(stuck) => stuck.as_slice(),
        _ => &[],
    };
    let scale_end = if stuck.is_empty() {
        sim.trace.end
    } else {
        sim.trace.end + sim.trace.end / 4
    };
    let x = |t: u64| left + width * t as f64 / scale_end.max(1) as f64;
    let row_h = 20.0;
    svg.bold(10.0, top + 14.0, 13, title);
    let mut y = top + 26.0;
    // Activity: TMA loads (issue → landing), one sub-row per slot, and the tensor core.
    let sub = 11.0;
    svg.text(10.0, y + 2.0 * sub + 4.0, 11, "start", "TMA loads");
    for l in &sim.trace.loads {
        let end = l.landed.unwrap_or(scale_end);
        let y0 = y + f64::from(l.slot) * sub;
        svg.rect(
            x(l.issued),
            y0 + 1.0,
            x(end) - x(l.issued),
            sub - 2.0,
            slot_color(l.slot),
            "#555",
        );
        svg.text(
            x(end) - 2.0,
            y0 + sub - 2.5,
            8,
            "end",
            &format!("k{}", l.k_block),
        );
    }
    y += f64::from(ring.stages) * sub + 2.0;
    svg.text(10.0, y + 14.0, 11, "start", "tensor core");
    for m in &sim.trace.mmas {
        svg.rect(
            x(m.start),
            y + 3.0,
            x(m.end) - x(m.start),
            row_h - 6.0,
            slot_color(m.slot),
            "#555",
        );
        svg.text(
            x(m.start) + 3.0,
            y + 14.0,
            9,
            "start",
            &format!("k{}", m.k_block),
        );
    }
    y += row_h + 6.0;
    // The barriers: a band per phase, the waits on it as dots where they returned.
    for slot in 0..ring.stages {
        for barrier in [BarrierKind::LoadFull, BarrierKind::LoadEmpty] {
            svg.text(10.0, y + 14.0, 11, "start", &format!("{barrier}[{slot}]"));
            let mut marks: Vec<(u64, u32)> = sim
                .trace
                .phases
                .iter()
                .filter(|p| p.barrier == barrier && p.slot == slot)
                .map(|p| (p.at, p.completed))
                .collect();
            marks.insert(0, (0, 0));
            let stuck_here = stuck.iter().any(|s| {
                matches!(s.waits_for, StuckOn::Barrier { barrier: b, slot: sl, .. } if b == barrier && sl == slot)
            });
            for (n, &(from, phase)) in marks.iter().enumerate() {
                let last = n + 1 == marks.len();
                let to = marks.get(n + 1).map_or(scale_end, |m| m.0);
                let fill = if phase % 2 == 0 { "#f4f4f4" } else { "#e2e2e2" };
                let w = x(to) - x(from);
                svg.rect(x(from), y + 2.0, w, row_h - 4.0, fill, "#bbb");
                if last && stuck_here {
                    continue;
                }
                if w > 130.0 {
                    svg.text(
                        (x(from) + x(to)) / 2.0,
                        y + 14.0,
                        9,
                        "middle",
                        &format!("phase {phase} (parity {})", phase % 2),
                    );
                } else if w > 70.0 {
                    svg.text(
                        x(from) + 3.0,
                        y + 14.0,
                        9,
                        "start",
                        &format!("phase {phase}"),
                    );
                }
            }
            let mid = y + row_h / 2.0;
            for w in sim
                .trace
                .waits
                .iter()
                .filter(|w| w.barrier == barrier && w.slot == slot)
            {
                let color = if w.to > w.from { "#c0392b" } else { "#27ae60" };
                if w.to > w.from {
                    svg.line(x(w.from), mid, x(w.to), mid, color, true);
                }
                svg.body.push_str(&format!(
                    "  <circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"3\" fill=\"{color}\"/>\n",
                    x(w.to)
                ));
                svg.text(
                    x(w.to) - 4.0,
                    y + row_h - 4.0,
                    8,
                    "end",
                    &format!("p{}", w.parity),
                );
            }
            for s in stuck {
                if let StuckOn::Barrier {
                    barrier: b,
                    slot: sl,
                    parity,
                    ..
                } = s.waits_for
                {
                    if b == barrier && sl == slot {
                        svg.line(x(s.since), mid, x(scale_end), mid, "#c0392b", true);
                        svg.text(
                            x(scale_end) - 4.0,
                            y + row_h - 5.0,
                            9,
                            "end",
                            &format!("{} waits for parity {parity}: never", s.actor),
                        );
                    }
                }
            }
            y += row_h;
        }
        y += 3.0;
    }
    if let Outcome::Race(r) = &sim.outcome {
        let at = x(sim.trace.end);
        svg.line(at, top + 20.0, at, y, "#c0392b", false);
        svg.text(at + 4.0, top + 30.0, 10, "start", &format!("race: {r}"));
    }
    y - top
}

/// The mbarrier phase timeline: the kernels' protocol, then the wrong parity where it hangs.
fn phase_timeline() -> Result<String> {
    let ok_ring = timeline_ring(1, EmptyWait::Correct, Timing::MMA_BOUND)?;
    let bad_ring = timeline_ring(0, EmptyWait::WrongParity, Timing::LOAD_BOUND)?;
    let ok = simulate(&ok_ring);
    let bad = simulate(&bad_ring);
    let mut svg = Svg::new(
        900,
        10,
        "mbarrier phases of the TMA → MMA ring, from the phase model",
    );
    let h1 = draw_run(
        &mut svg,
        6.0,
        "Step 1's waits, MMAs slower than loads: each wait returns once the phase it names completes",
        &ok_ring,
        &ok,
    );
    let h2 = draw_run(
        &mut svg,
        h1 + 16.0,
        "Step 0 with wrong-parity, loads slower than MMAs: the wait for k-block 4 names a phase that never comes",
        &bad_ring,
        &bad,
    );
    let foot = h1 + h2 + 30.0;
    svg.text(
        10.0,
        foot,
        11,
        "start",
        "Bands: a barrier's phases (phase n is current until it completes). Dots: a wait returning, labelled with the parity it named;",
    );
    svg.text(
        10.0,
        foot + 15.0,
        11,
        "start",
        "green: at once, red: after waiting (dashed). Colours: ring slots. Times in the simulator's ticks; each panel has its own scale.",
    );
    svg.h = (foot + 26.0) as u32;
    Ok(svg.finish())
}

/// Tensor memory: 128 lanes × 512 columns per SM, the warps' lane quarters, step 5's two
/// accumulator slots, and how an address names a cell.
fn tmem_layout() -> Result<String> {
    let i = BudgetInput::from_step(runner::steps::get(5)?);
    let cols = i.acc_cols();
    let (lanes, columns) = (128u32, 512u32);
    let mut svg = Svg::new(
        860,
        450,
        "Tensor memory: lanes × columns, lane quarters, address = lane << 16 | column",
    );
    let (left, top) = (150.0, 60.0);
    let (cw, lh) = (1.2, 2.0); // pixels per column, per lane
    svg.bold(10.0, 22.0, 14, "Tensor memory of one SM: 128 lanes × 512 columns of 32-bit cells (256 KiB), shared by the CTAs on the SM");
    svg.text(10.0, 40.0, 11, "start", &format!(
        "Step 5 allocates all {columns} columns: two accumulator slots of {cols} columns, one f32 column per output column, one lane per output row."
    ));
    for slot in 0..i.acc_stages {
        let x0 = left + f64::from(slot * cols) * cw;
        svg.rect(
            x0,
            top,
            f64::from(cols) * cw,
            f64::from(lanes) * lh,
            SLOT[slot as usize],
            "#444",
        );
        svg.text(
            x0 + f64::from(cols) * cw / 2.0,
            top + f64::from(lanes) * lh + 16.0,
            11,
            "middle",
            &format!(
                "accumulator slot {slot}: columns {}–{}",
                slot * cols,
                (slot + 1) * cols - 1
            ),
        );
    }
    for q in 0..4u32 {
        let y = top + f64::from(q * 32) * lh;
        svg.line(
            left - 8.0,
            y,
            left + f64::from(columns) * cw,
            y,
            "#333",
            q > 0,
        );
        svg.text(
            left - 12.0,
            y + 36.0,
            11,
            "end",
            &format!("lanes {}–{}", q * 32, q * 32 + 31),
        );
        svg.text(
            left - 12.0,
            y + 50.0,
            10,
            "end",
            &format!("warps {q}, {} (w mod 4 = {q})", q + 4),
        );
    }
    // One cell, its address, and who reads it.
    let (lane, col) = (37u32, 5u32);
    let addr = (lane << 16) | col;
    let (cx, cy) = (left + f64::from(col) * cw, top + f64::from(lane) * lh);
    svg.rect(cx - 2.0, cy - 2.0, 6.0, 6.0, "#c0392b", "#c0392b");
    svg.arrow(cx + 140.0, cy + 70.0, cx + 6.0, cy + 4.0, "#444");
    svg.text(
        cx + 145.0,
        cy + 74.0,
        11,
        "start",
        &format!("lane {lane}, column {col}: address 0x{addr:08X} = {lane} << 16 | {col}"),
    );
    svg.text(
        cx + 145.0,
        cy + 89.0,
        11,
        "start",
        &format!(
            "row {lane} of the tile; read by warp {} (or {}), thread {} with tcgen05.ld.32x32b",
            lane / 32,
            lane / 32 + 4,
            lane % 32
        ),
    );
    let by = top + f64::from(lanes) * lh + 40.0;
    svg.bold(10.0, by, 12, "A tensor-memory address (32 bits)");
    svg.rect(left, by + 8.0, 300.0, 26.0, "#e8f0f8", "#2a5d8f");
    svg.rect(left + 300.0, by + 8.0, 300.0, 26.0, "#f8efe0", "#9a5b12");
    svg.text(left + 150.0, by + 25.0, 11, "middle", "bits 31–16: lane");
    svg.text(left + 450.0, by + 25.0, 11, "middle", "bits 15–0: column");
    svg.text(10.0, by + 52.0, 11, "start",
        "tcgen05.alloc writes the base address (lane 0, first column) to shared memory; a CTA allocates a power of two of columns, 32 to 512.");
    svg.text(10.0, by + 67.0, 11, "start",
        "A warp may only reach the lane quarter of its rank in its warpgroup: an epilogue needs at least one warpgroup (four warps).");
    Ok(svg.finish())
}

/// The 128-byte swizzle of one 8-row group, the tile's groups at SBO intervals, the +32 B K step,
/// and the descriptor's fields, all from the host twins of the kernels' encoders.
fn swizzle_and_descriptor() -> Result<String> {
    let i = BudgetInput::from_step(runner::steps::get(0)?);
    let row_bytes = i.tile_k * i.elem_bytes; // 128: one k-block row
    let chunk_elems = 16 / i.elem_bytes; // 8 elements per 16-byte chunk
    let mma_k = 16u32; // K of one tcgen05.mma kind::f16
    let k_step_bytes = mma_k * i.elem_bytes;
    let mut svg = Svg::new(
        900,
        470,
        "128-byte swizzle, SBO and the +32 B K step of the shared-memory descriptor",
    );
    svg.bold(
        10.0,
        22.0,
        14,
        "One 8-row group of a K-major tile in the 128-byte swizzle (1024 B)",
    );
    svg.text(10.0, 40.0, 11, "start", &format!(
        "Row r holds {} elements ({row_bytes} B) of K; the 16-byte chunk q of row r is stored at chunk q XOR (r mod 8).",
        i.tile_k
    ));
    svg.text(
        10.0,
        55.0,
        11,
        "start",
        &format!(
        "Colour: the K slice of one MMA ({mma_k} elements = {k_step_bytes} B) a chunk belongs to."
    ),
    );
    let (left, top, cw, rh) = (90.0, 80.0, 64.0, 24.0);
    svg.text(left - 8.0, top - 4.0, 10, "end", "bytes");
    let slice_color = ["#7fb3e6", "#f2b36b", "#9fd39a", "#c9a3e6"];
    for p in 0..8u32 {
        svg.text(
            left + f64::from(p) * cw + cw / 2.0,
            top - 4.0,
            10,
            "middle",
            &format!("{}–{}", p * 16, p * 16 + 15),
        );
    }
    for r in 0..8u32 {
        svg.text(
            left - 8.0,
            top + f64::from(r) * rh + 16.0,
            11,
            "end",
            &format!("row {r}"),
        );
        for q in 0..8u32 {
            // Where logical chunk q of row r lands, by the host twin of the TMA/MMA layout.
            let off = sw128_offset(r, q * chunk_elems);
            let p = (off % row_bytes) / 16;
            let k_slice = q * 16 / k_step_bytes;
            let x0 = left + f64::from(p) * cw;
            let y0 = top + f64::from(r) * rh;
            svg.rect(x0, y0, cw, rh, slice_color[k_slice as usize % 4], "#555");
            svg.text(
                x0 + cw / 2.0,
                y0 + 16.0,
                10,
                "middle",
                &format!(
                    "K {}–{}",
                    q * chunk_elems,
                    q * chunk_elems + chunk_elems - 1
                ),
            );
        }
    }
    let legend_y = top + 8.0 * rh + 20.0;
    for k in 0..4u32 {
        svg.rect(
            left + f64::from(k) * 160.0,
            legend_y - 10.0,
            12.0,
            12.0,
            slice_color[k as usize],
            "#555",
        );
        svg.text(
            left + f64::from(k) * 160.0 + 16.0,
            legend_y,
            11,
            "start",
            &format!("MMA k = {k}: start + {} B", k * k_step_bytes),
        );
    }
    // The tile as 8-row groups, SBO apart.
    let gx = left + 8.0 * cw + 40.0;
    let groups = i.tile_m / 8;
    svg.bold(
        gx,
        top - 4.0,
        12,
        &format!("A tile: {} rows = {groups} groups", i.tile_m),
    );
    let sbo = 8 * row_bytes;
    for g in 0..4u32 {
        let y = top + f64::from(g) * 36.0;
        svg.rect(gx, y + 4.0, 120.0, 28.0, "#eeeeee", "#555");
        svg.text(
            gx + 60.0,
            y + 22.0,
            10,
            "middle",
            &format!("rows {}–{}", g * 8, g * 8 + 7),
        );
        svg.text(
            gx + 128.0,
            y + 22.0,
            10,
            "start",
            &format!("+{} B", g * sbo),
        );
    }
    svg.text(gx + 60.0, top + 4.0 * 36.0 + 16.0, 12, "middle", "⋮");
    svg.text(
        gx,
        top + 4.0 * 36.0 + 34.0,
        11,
        "start",
        &format!("SBO = {sbo} B: one group to the next"),
    );
    // The descriptor of the A tile at a 1024-aligned address, for each K step.
    let base = 0x400u32;
    let dy = legend_y + 34.0;
    svg.bold(10.0, dy, 13, &format!(
        "The shared-memory descriptor (64 bits), as make_smem_desc_sw128(start, SBO = {sbo}) packs it"
    ));
    let d0 = decode_smem_desc(make_smem_desc_sw128(base, sbo));
    let fields: [(&str, &str, String); 7] = [
        (
            "0–13",
            "start >> 4",
            format!("0x{:X}", d0.start_address >> 4),
        ),
        ("16–29", "LBO >> 4", format!("{} (unused)", d0.lbo >> 4)),
        ("32–45", "SBO >> 4", format!("{}", d0.sbo >> 4)),
        ("46–48", "version", format!("{:03b}", d0.version)),
        ("49–51", "base offset", format!("{}", d0.base_offset)),
        ("52", "LBO mode", format!("{}", d0.lbo_mode)),
        ("61–63", "swizzle", format!("{} = 128 B", d0.swizzle)),
    ];
    let fw = 122.0;
    for (n, (bits, name, value)) in fields.iter().enumerate() {
        let x0 = 10.0 + n as f64 * fw;
        svg.rect(x0, dy + 10.0, fw, 48.0, "#f4f8fc", "#2a5d8f");
        svg.text(
            x0 + fw / 2.0,
            dy + 24.0,
            10,
            "middle",
            &format!("bits {bits}"),
        );
        svg.text(x0 + fw / 2.0, dy + 38.0, 11, "middle", name);
        svg.text(x0 + fw / 2.0, dy + 52.0, 11, "middle", value);
    }
    let ky = dy + 80.0;
    svg.text(10.0, ky, 11, "start", &format!(
        "Stepping K: the MMA for k = 0…3 takes the same descriptor with {k_step_bytes}·k bytes added to the start; the hardware applies the XOR to the addresses it forms,"
    ));
    svg.text(10.0, ky + 15.0, 11, "start", "which is why the tile must start on a 1024-byte boundary (base offset 0). Descriptors of the A tile at 0x400:");
    for k in 0..4u32 {
        let d = make_smem_desc_sw128(base + k * k_step_bytes, sbo);
        svg.text(
            30.0 + f64::from(k) * 215.0,
            ky + 36.0,
            11,
            "start",
            &format!("k = {k}: 0x{d:016X}"),
        );
    }
    Ok(svg.finish())
}

/// Step 3's pair: each CTA's A stays local, B's two halves are shared, each accumulator lands in
/// its own CTA's tensor memory.
fn pair_data_flow() -> Result<String> {
    let i = BudgetInput::from_step(runner::steps::get(3)?);
    let (tm, tn, n) = (i.tile_m, i.tile_n, i.acc_cols());
    let m = i.cluster * tm;
    let mut svg = Svg::new(
        860,
        420,
        "Step 3: a 2-CTA cluster sharing one cta_group::2 MMA",
    );
    svg.bold(10.0, 22.0, 14, &format!(
        "Step 3: one cluster of {} CTAs computes a {m} × {n} tile with one cta_group::2 MMA (M = {m}, N = {n})",
        i.cluster
    ));
    let ctas = [
        (20.0, "CTA rank 0 (leader)", "#f4f8fc", "#2a5d8f"),
        (440.0, "CTA rank 1 (peer)", "#f4fcf4", "#3f7a2f"),
    ];
    for (r, (x0, name, fill, stroke)) in ctas.iter().enumerate() {
        let r = r as u32;
        svg.rect(*x0, 40.0, 400.0, 300.0, fill, stroke);
        svg.bold(x0 + 10.0, 58.0, 12, name);
        // Shared memory: this CTA's rows of A, its half of B.
        svg.rect(x0 + 15.0, 70.0, 170.0, 48.0, "#7fb3e6", "#2a5d8f");
        svg.text(
            x0 + 100.0,
            90.0,
            11,
            "middle",
            &format!("A rows {}–{}", r * tm, r * tm + tm - 1),
        );
        svg.text(x0 + 100.0, 106.0, 10, "middle", "its own, stays local");
        svg.rect(x0 + 215.0, 70.0, 170.0, 48.0, "#f2b36b", "#9a5b12");
        svg.text(
            x0 + 300.0,
            90.0,
            11,
            "middle",
            &format!("B rows {}–{} of N", r * tn, r * tn + tn - 1),
        );
        svg.text(x0 + 300.0, 106.0, 10, "middle", "half of B, shared");
        // The tensor core of this SM: its A, both halves of B.
        svg.rect(x0 + 60.0, 165.0, 280.0, 40.0, "#eeeeee", "#555");
        svg.text(
            x0 + 200.0,
            182.0,
            11,
            "middle",
            &format!(
                "tensor core: rows {}–{} × all {n} columns",
                r * tm,
                r * tm + tm - 1
            ),
        );
        svg.text(
            x0 + 200.0,
            197.0,
            10,
            "middle",
            &format!("= A ({tm} rows) × [B half 0; B half 1]ᵀ"),
        );
        svg.arrow(x0 + 100.0, 118.0, x0 + 120.0, 165.0, "#2a5d8f");
        svg.arrow(x0 + 300.0, 118.0, x0 + 280.0, 165.0, "#9a5b12");
        // Tensor memory: this CTA's rows of the accumulator.
        svg.rect(x0 + 60.0, 250.0, 280.0, 40.0, "#c9a3e6", "#6b3f8f");
        svg.text(
            x0 + 200.0,
            267.0,
            11,
            "middle",
            &format!("TMEM: C rows {}–{} × {n} columns", r * tm, r * tm + tm - 1),
        );
        svg.text(
            x0 + 200.0,
            282.0,
            10,
            "middle",
            &format!("{tm} lanes × {n} f32 columns of this SM"),
        );
        svg.arrow(x0 + 200.0, 205.0, x0 + 200.0, 250.0, "#6b3f8f");
        svg.text(x0 + 205.0, 232.0, 10, "start", "D lands here");
        svg.text(
            x0 + 15.0,
            320.0,
            10,
            "start",
            if r == 0 {
                "load_full: armed with both CTAs' bytes; MMA warp issues the pair's MMAs"
            } else {
                "issues its own TMA loads; they complete the leader's load_full"
            },
        );
    }
    // B halves cross between the SMs; A does not.
    svg.arrow(20.0 + 300.0, 118.0, 440.0 + 120.0, 165.0, "#9a5b12");
    svg.arrow(440.0 + 300.0, 118.0, 20.0 + 280.0, 165.0, "#9a5b12");
    svg.text(
        430.0,
        134.0,
        10,
        "middle",
        "each SM also reads the peer's B half",
    );
    svg.text(10.0, 362.0, 11, "start",
        "Per SM and k-block: its own A rows and half of B are loaded. A never crosses; B's halves are read by both SMs;");
    svg.text(
        10.0,
        377.0,
        11,
        "start",
        "each accumulator stays in its own CTA's tensor memory.",
    );
    svg.text(10.0, 395.0, 11, "start",
        "The leader's commits are multicast (mask 0b11) to load_empty and acc_full in both CTAs. Both CTAs lay out shared memory");
    svg.text(
        10.0,
        410.0,
        11,
        "start",
        "identically, so the leader's local descriptors name the peer's tiles too.",
    );
    Ok(svg.finish())
}

/// The map of the final kernel (step 6's Blackwell kernel): the warp roles of one CTA of the pair,
/// its shared-memory ring and staging tiles, the tensor-memory slots and the barriers between
/// them, each labelled with the step that adds it. Sizes come from step 6's configuration.
fn final_kernel() -> Result<String> {
    let spec = common::step::KernelSpec::new(runner::steps::get(6)?, common::step::Arch::Blackwell);
    let param = |name: &str| {
        spec.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| anyhow::anyhow!("step 6 has no {name}"))
    };
    let (stages, tile_n, epi_n) = (
        param("stages")?,
        param("tile_n")?,
        param("epilogue_tile_n")?,
    );
    let i = BudgetInput::from_step(runner::steps::get(6)?);
    let (mma_n, cluster) = (i.acc_cols(), i.cluster);
    // The kernel's ACC_STAGES: two accumulator slots, as many as fit the 512 columns.
    let acc_slots = 512 / mma_n;
    let mut svg = Svg::new(
        900,
        470,
        "The final kernel: step 6's roles, barriers and tensor memory",
    );
    svg.bold(
        10.0,
        22.0,
        14,
        "The final kernel (step 6, Blackwell): one CTA of a 2-CTA cluster, and which step adds what",
    );
    // The persistent loop and the tile order around everything.
    svg.rect(10.0, 34.0, 880.0, 420.0, "#fbfbfb", "#888");
    svg.text(
        20.0,
        52.0,
        11,
        "start",
        &format!(
            "[step 4] persistent: one cluster of {cluster} CTAs per SM pair loops over tiles · [step 6] in a snake order over bands of tiles"
        ),
    );
    // Warpgroup 0: producer and MMA warps.
    svg.rect(25.0, 66.0, 250.0, 170.0, "#f4f8fc", "#2a5d8f");
    svg.bold(35.0, 84.0, 12, "warpgroup 0");
    svg.rect(40.0, 94.0, 220.0, 40.0, "#7fb3e6", "#2a5d8f");
    svg.text(150.0, 110.0, 11, "middle", "warp 0: producer (TMA loads)");
    svg.text(150.0, 125.0, 10, "middle", "[step 1] its own warp");
    svg.rect(40.0, 142.0, 220.0, 52.0, "#f2b36b", "#9a5b12");
    svg.text(150.0, 158.0, 11, "middle", "warp 1: MMA issuer");
    svg.text(
        150.0,
        172.0,
        10,
        "middle",
        "[step 1] its own warp · [step 3] leader only,",
    );
    svg.text(
        150.0,
        186.0,
        10,
        "middle",
        &format!("cta_group::2, M = {} across the pair", 2 * i.tile_m),
    );
    svg.text(150.0, 220.0, 10, "middle", "warps 2–3: no role (idle)");
    // Warpgroup 1: the epilogue.
    svg.rect(25.0, 250.0, 250.0, 100.0, "#f4fcf4", "#3f7a2f");
    svg.bold(35.0, 268.0, 12, "warpgroup 1 [step 5]");
    svg.text(35.0, 288.0, 11, "start", "warps 4–7: epilogue only");
    svg.text(
        35.0,
        304.0,
        10,
        "start",
        "each warp reads its lane quarter of TMEM,",
    );
    svg.text(
        35.0,
        318.0,
        10,
        "start",
        &format!("{epi_n} columns at a time, into a staging tile"),
    );
    svg.text(
        35.0,
        336.0,
        10,
        "start",
        "[step 2] staged, then one TMA store",
    );
    // Shared memory: the ring and the staging tiles.
    svg.rect(330.0, 66.0, 270.0, 170.0, "#fffaf0", "#9a5b12");
    svg.bold(340.0, 84.0, 12, "shared memory");
    for s in 0..stages {
        let x = 345.0 + f64::from(s) * 62.0;
        svg.rect(x, 96.0, 56.0, 56.0, SLOT[(s % 4) as usize], "#555");
        svg.text(x + 28.0, 118.0, 10, "middle", &format!("slot {s}"));
        svg.text(x + 28.0, 132.0, 9, "middle", "A + half B");
    }
    svg.text(
        465.0,
        168.0,
        10,
        "middle",
        &format!("[step 0] a ring of {stages} k-blocks (B: {tile_n} rows,"),
    );
    svg.text(
        465.0,
        181.0,
        10,
        "middle",
        "[step 3] the other half lives in the peer CTA)",
    );
    svg.rect(345.0, 192.0, 240.0, 34.0, "#dddddd", "#555");
    svg.text(
        465.0,
        213.0,
        10,
        "middle",
        "[step 2] staging tiles of C, two per warp",
    );
    // Tensor memory.
    svg.rect(330.0, 250.0, 270.0, 100.0, "#f8f0fc", "#6a3d8f");
    svg.bold(340.0, 268.0, 12, "tensor memory: 128 lanes × 512 columns");
    for s in 0..acc_slots {
        let x = 345.0 + f64::from(s) * 122.0;
        svg.rect(x, 278.0, 116.0, 40.0, "#c9a3e6", "#6a3d8f");
        svg.text(
            x + 58.0,
            296.0,
            10,
            "middle",
            &format!("accumulator slot {s}"),
        );
        svg.text(
            x + 58.0,
            310.0,
            9,
            "middle",
            &format!("{mma_n} f32 columns"),
        );
    }
    svg.text(
        465.0,
        338.0,
        10,
        "middle",
        "[step 0] one slot · [step 5] two, filled and drained in turn",
    );
    // Barriers.
    svg.rect(650.0, 66.0, 230.0, 284.0, "#ffffff", "#555");
    svg.bold(660.0, 84.0, 12, "mbarriers (waiter ← arriver)");
    let rows = [
        (
            "load_full[s]",
            "MMA ← TMA bytes [0]; the leader's counts both CTAs [3]",
        ),
        (
            "load_empty[s]",
            "producer ← tcgen05.commit [0], multicast to the pair [3]",
        ),
        ("acc_full[a]", "epilogue ← tcgen05.commit [0], per slot [5]"),
        ("acc_empty[a]", "MMA ← each epilogue warp, both CTAs [5]"),
    ];
    for (j, (name, what)) in rows.iter().enumerate() {
        let y = 110.0 + 60.0 * j as f64;
        svg.bold(660.0, y, 11, name);
        let (a, b) = what
            .split_once("; ")
            .or_else(|| what.split_once(", "))
            .unwrap_or((what, ""));
        svg.text(660.0, y + 16.0, 10, "start", a);
        svg.text(660.0, y + 30.0, 10, "start", b);
    }
    // Data and signal flow.
    svg.arrow(260.0, 114.0, 343.0, 114.0, "#2a5d8f");
    svg.arrow(343.0, 140.0, 260.0, 168.0, "#9a5b12");
    svg.arrow(200.0, 194.0, 400.0, 278.0, "#9a5b12");
    svg.arrow(400.0, 318.0, 275.0, 300.0, "#3f7a2f");
    svg.arrow(275.0, 336.0, 345.0, 214.0, "#3f7a2f");
    // Legend.
    svg.text(
        20.0,
        384.0,
        11,
        "start",
        "Arrows: TMA fills a slot → the MMA warp multiplies it into a tensor-memory slot → the epilogue reads the slot, stages it, stores it.",
    );
    svg.text(
        20.0,
        402.0,
        11,
        "start",
        "[N]: the step that adds the piece. Step 0 has one warp for loads and MMAs, one accumulator slot, and stores C from registers.",
    );
    svg.text(
        20.0,
        420.0,
        11,
        "start",
        &format!(
            "Drawn from step 6's configuration: {stages} stages, B tile {tile_n} rows per CTA (MMA N = {mma_n}), epilogue sub-tiles of {epi_n} columns, {acc_slots} accumulator slots."
        ),
    );
    svg.text(
        20.0,
        438.0,
        11,
        "start",
        "The peer CTA (rank 1) is the same, except that its warp 1 issues nothing: the leader's MMA writes both CTAs' tensor memory.",
    );
    Ok(svg.finish())
}

/// Every figure, freshly drawn: `(file, svg)`.
pub fn all() -> Result<Vec<(&'static str, String)>> {
    FIGURES.iter().map(|f| Ok((f.file, (f.draw)()?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::toolkit::project_root;

    #[test]
    fn figures_match_their_generators() {
        let write = std::env::var_os("WORKBOOK_WRITE_FIGURES").is_some();
        for (file, svg) in all().unwrap() {
            let path = project_root().join("assets").join(file);
            if write {
                std::fs::write(&path, &svg).unwrap();
                continue;
            }
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == svg,
                "assets/{file} is not what its code draws: run WORKBOOK_WRITE_FIGURES=1 cargo test -p runner figures"
            );
        }
    }

    #[test]
    fn figures_are_well_formed_and_say_what_they_show() {
        for (file, svg) in all().unwrap() {
            assert!(
                svg.starts_with("<svg xmlns=") && svg.ends_with("</svg>\n"),
                "{file}"
            );
            assert_eq!(
                svg.matches("<text").count(),
                svg.matches("</text>").count(),
                "{file}"
            );
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{file}");
        }
        let tmem = tmem_layout().unwrap();
        assert!(
            tmem.contains("0x00250005 = 37 &lt;&lt; 16 | 5"),
            "the address is computed"
        );
        let desc = swizzle_and_descriptor().unwrap();
        assert!(desc.contains("SBO = 1024 B"), "from step 0's tile");
        // Row 1 swaps chunk 0 and 1: the first K chunk of row 1 sits at bytes 16-31.
        assert!(
            desc.contains("0x4000404000010040"),
            "the k = 0 descriptor of the twin's test"
        );
        let pair = pair_data_flow().unwrap();
        assert!(pair.contains("A rows 128–255") && pair.contains("B rows 128–255 of N"));
        assert!(pair.contains("TMEM: C rows 0–127 × 256 columns"));
        let phases = phase_timeline().unwrap();
        assert!(
            phases.contains("the warp waits for parity 1: never"),
            "the hang is drawn"
        );
    }
}
