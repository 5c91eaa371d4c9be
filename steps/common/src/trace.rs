//! Warp-role timelines (`runner step N --trace`), host side of `wb::Trace` in common.cuh.
//!
//! A kernel built with [`DEFINE`] writes one 32-byte [`Record`] per trace call: lane 0 of each
//! warp of the first [`Layout::ctas`] CTAs, into the warp's own region of a buffer the host
//! allocates ([`TraceBuffer`]) and points the kernel's `wb_trace_*` globals at. Each call says
//! "this warp now enters phase P" (or "starts tile T"), so consecutive calls of a warp bound its
//! phases. [`decode`] checks and collects the records; [`timeline`] turns them into spans on one
//! time axis, mapping each SM's `%clock64` onto the GPU-wide `%globaltimer`. Everything but
//! [`TraceBuffer`] is pure and tested on synthetic records; the runner writes the Perfetto JSON
//! and the SVG (`runner/src/trace.rs`).

use crate::gpu::CudaResultExt;
use crate::gpu::Gpu;
use crate::step::Arch;
use anyhow::{anyhow, bail, Result};
use cudarc::driver::{CudaModule, CudaSlice, DevicePtr};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The compiler definition that turns the trace calls on.
pub const DEFINE: (&str, &str) = ("WB_TRACE", "1");
/// sizeof(wb::TraceRecord).
pub const RECORD_BYTES: usize = 32;
/// `wb::TRACE_KIND_ENTER`, `wb::TRACE_KIND_TILE`.
pub const KIND_ENTER: u8 = 1;
pub const KIND_TILE: u8 = 2;
/// The most records a trace buffer holds (512 MiB); regions shrink to fit, and what does not fit
/// is counted as dropped.
pub const MAX_RECORDS: u64 = 16 << 20;

/// What a warp is doing: mirror of `wb::TracePhase` (same order, so `id` is the device value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Setup,
    Idle,
    SlotWait,
    Load,
    DataWait,
    Mma,
    MmaWait,
    AccEmptyWait,
    TurnWait,
    OutEmptyWait,
    AccWait,
    Epilogue,
    Tail,
    Teardown,
    Exit,
}

impl Phase {
    pub const ALL: [Phase; 15] = [
        Phase::Setup,
        Phase::Idle,
        Phase::SlotWait,
        Phase::Load,
        Phase::DataWait,
        Phase::Mma,
        Phase::MmaWait,
        Phase::AccEmptyWait,
        Phase::TurnWait,
        Phase::OutEmptyWait,
        Phase::AccWait,
        Phase::Epilogue,
        Phase::Tail,
        Phase::Teardown,
        Phase::Exit,
    ];

    pub fn id(self) -> u8 {
        self as u8
    }
    pub fn from_id(id: u8) -> Option<Phase> {
        Phase::ALL.get(id as usize).copied()
    }
    /// The enumerator in common.cuh.
    pub fn device_name(self) -> &'static str {
        match self {
            Phase::Setup => "TRACE_SETUP",
            Phase::Idle => "TRACE_IDLE",
            Phase::SlotWait => "TRACE_SLOT_WAIT",
            Phase::Load => "TRACE_LOAD",
            Phase::DataWait => "TRACE_DATA_WAIT",
            Phase::Mma => "TRACE_MMA",
            Phase::MmaWait => "TRACE_MMA_WAIT",
            Phase::AccEmptyWait => "TRACE_ACC_EMPTY_WAIT",
            Phase::TurnWait => "TRACE_TURN_WAIT",
            Phase::OutEmptyWait => "TRACE_OUT_EMPTY_WAIT",
            Phase::AccWait => "TRACE_ACC_WAIT",
            Phase::Epilogue => "TRACE_EPILOGUE",
            Phase::Tail => "TRACE_TAIL",
            Phase::Teardown => "TRACE_TEARDOWN",
            Phase::Exit => "TRACE_EXIT",
        }
    }
    /// What a reader sees in the timeline.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Setup => "set-up",
            Phase::Idle => "idle",
            Phase::SlotWait => "wait for a free slot",
            Phase::Load => "issue loads",
            Phase::DataWait => "wait for data",
            Phase::Mma => "issue MMAs",
            Phase::MmaWait => "wait for MMAs",
            Phase::AccEmptyWait => "wait for a free accumulator",
            Phase::TurnWait => "wait for the other consumer",
            Phase::OutEmptyWait => "wait for a free output tile",
            Phase::AccWait => "wait for the accumulator",
            Phase::Epilogue => "epilogue",
            Phase::Tail => "producer tail",
            Phase::Teardown => "teardown",
            Phase::Exit => "exit",
        }
    }
    /// Whether the warp spends the phase blocked on a barrier or an asynchronous unit.
    pub fn is_wait(self) -> bool {
        matches!(
            self,
            Phase::SlotWait
                | Phase::DataWait
                | Phase::MmaWait
                | Phase::AccEmptyWait
                | Phase::TurnWait
                | Phase::OutEmptyWait
                | Phase::AccWait
                | Phase::Tail
        )
    }
    /// What the kernel passes as the argument of the phase, if anything.
    pub fn arg_name(self) -> Option<&'static str> {
        match self {
            Phase::SlotWait | Phase::Load | Phase::DataWait | Phase::Mma | Phase::MmaWait => {
                Some("k_block")
            }
            _ => None,
        }
    }
}

/// One trace call: mirror of `wb::TraceRecord`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Record {
    pub globaltimer: u64,
    pub clock: u64,
    pub arg: u32,
    pub smid: u32,
    pub cta: u32,
    pub warp: u16,
    pub phase: u8,
    pub kind: u8,
}

impl Record {
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Record {
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        Record {
            globaltimer: u64_at(0),
            clock: u64_at(8),
            arg: u32_at(16),
            smid: u32_at(20),
            cta: u32_at(24),
            warp: u16::from_le_bytes([b[28], b[29]]),
            phase: b[30],
            kind: b[31],
        }
    }
    /// The bytes the device writes (for synthetic records in tests and tools).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..8].copy_from_slice(&self.globaltimer.to_le_bytes());
        b[8..16].copy_from_slice(&self.clock.to_le_bytes());
        b[16..20].copy_from_slice(&self.arg.to_le_bytes());
        b[20..24].copy_from_slice(&self.smid.to_le_bytes());
        b[24..28].copy_from_slice(&self.cta.to_le_bytes());
        b[28..30].copy_from_slice(&self.warp.to_le_bytes());
        b[30] = self.phase;
        b[31] = self.kind;
        b
    }
}

/// How the trace buffer is cut: `ctas` x `warps_per_cta` regions of `per_warp` records, region
/// `cta * warps_per_cta + warp` belonging to that warp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub ctas: u32,
    pub warps_per_cta: u32,
    pub per_warp: u32,
}

impl Layout {
    /// A layout for a launch of `num_ctas` CTAs of `threads` threads recording the first
    /// `ctas` CTAs, each warp of which makes at most `tiles` passes over `k_blocks` k-blocks:
    /// at most 6 calls per k-block (a warp that both loads and multiplies: slot wait, load, data
    /// wait, MMA and, on Hopper, the wgmma wait; the step 0 twin's trace on an H200 overflowed
    /// 4), 8 per tile (tile,
    /// accumulator waits, epilogue) and 8 more (set-up to exit). Capped at [`MAX_RECORDS`].
    pub fn new(num_ctas: u32, threads: u32, ctas: u32, tiles: u32, k_blocks: u32) -> Layout {
        let ctas = ctas.clamp(1, num_ctas.max(1));
        let warps_per_cta = threads.div_ceil(32).max(1);
        let wanted = u64::from(tiles.max(1)) * (6 * u64::from(k_blocks) + 8) + 8;
        let regions = u64::from(ctas) * u64::from(warps_per_cta);
        let per_warp = wanted.min(MAX_RECORDS / regions).max(1) as u32;
        Layout {
            ctas,
            warps_per_cta,
            per_warp,
        }
    }
    pub fn records(&self) -> usize {
        self.ctas as usize * self.warps_per_cta as usize * self.per_warp as usize
    }
    pub fn bytes(&self) -> usize {
        self.records() * RECORD_BYTES
    }
}

/// What one launch recorded: every warp's records in the order it wrote them.
#[derive(Debug, Clone)]
pub struct Recording {
    pub layout: Layout,
    /// (cta, warp, records), for every recorded warp, in region order.
    pub warps: Vec<(u32, u32, Vec<Record>)>,
    /// Trace calls that found their warp's region full.
    pub dropped: u64,
}

impl Recording {
    pub fn records(&self) -> usize {
        self.warps.iter().map(|(_, _, r)| r.len()).sum()
    }
}

/// Check and collect the records of a trace buffer: each region holds its warp's records from
/// the start, then unwritten (zero) slots; a record names the CTA and warp of its region, a
/// known kind and phase. A mismatch means the kernel and the host disagree on the layout.
pub fn decode(bytes: &[u8], layout: Layout, dropped: u64) -> Result<Recording> {
    if bytes.len() != layout.bytes() {
        bail!(
            "trace buffer of {} bytes, but the layout needs {}",
            bytes.len(),
            layout.bytes()
        );
    }
    let mut warps = Vec::new();
    let per_warp = layout.per_warp as usize;
    for cta in 0..layout.ctas {
        for warp in 0..layout.warps_per_cta {
            let region = (cta * layout.warps_per_cta + warp) as usize;
            let mut records = Vec::new();
            let mut ended = false;
            for slot in 0..per_warp {
                let at = (region * per_warp + slot) * RECORD_BYTES;
                let raw: &[u8; RECORD_BYTES] = bytes[at..at + RECORD_BYTES]
                    .try_into()
                    .map_err(|_| anyhow!("short trace record"))?;
                let r = Record::decode(raw);
                if r.kind == 0 {
                    ended = true;
                    continue;
                }
                let what = format!("trace record {slot} of CTA {cta}, warp {warp}");
                if ended {
                    bail!("{what} follows an unwritten slot: the region was not written in order");
                }
                if r.cta != cta || u32::from(r.warp) != warp {
                    bail!(
                        "{what} says CTA {}, warp {}: the kernel and the host disagree on the trace layout",
                        r.cta,
                        r.warp
                    );
                }
                if r.kind != KIND_ENTER && r.kind != KIND_TILE {
                    bail!("{what} has an unknown kind {}", r.kind);
                }
                if r.kind == KIND_ENTER && Phase::from_id(r.phase).is_none() {
                    bail!("{what} has an unknown phase {}", r.phase);
                }
                records.push(r);
            }
            if !records.is_empty() {
                warps.push((cta, warp, records));
            }
        }
    }
    Ok(Recording {
        layout,
        warps,
        dropped,
    })
}

/// One phase of one warp, in ns since the first record of the recording.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Span {
    pub phase: Phase,
    pub arg: u32,
    pub start_ns: f64,
    pub end_ns: f64,
}

/// The tile a persistent loop works on, from its `start_tile` to the next (or to the warp's
/// producer tail, teardown or exit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TileSpan {
    pub tile: u32,
    pub start_ns: f64,
    pub end_ns: f64,
    /// The raw readings of the tile's start record: `%clock64` (this SM's cycles) and
    /// `%globaltimer` in ns after the recording's first. Between two tiles of a warp they give
    /// the cycles the tile took and the SM clock it ran at (the fitted map above is one line per
    /// CTA, so it cannot show the clock changing within the launch).
    pub clock: u64,
    pub timer_ns: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WarpTimeline {
    pub warp: u32,
    /// What the warp did, from the phases it entered: "producer", "MMA", "epilogue",
    /// "consumer" (a Hopper warp that multiplies and stores), joined by " + ", or "idle".
    pub role: String,
    pub spans: Vec<Span>,
    pub tiles: Vec<TileSpan>,
    /// The warp's last record is not its exit: its last phase is cut at that record.
    pub cut_short: bool,
}

/// How a CTA's `%clock64` readings were mapped to ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMap {
    /// Least squares of `%globaltimer` against `%clock64` over the CTA's records.
    Fitted,
    /// Too short a `%globaltimer` range to fit: the GPU's maximum clock.
    MaxClock,
}

#[derive(Debug, Clone, Serialize)]
pub struct CtaTimeline {
    pub cta: u32,
    pub smid: u32,
    pub clock_map: ClockMap,
    /// The SM clock the mapping implies.
    pub clock_mhz: f64,
    pub warps: Vec<WarpTimeline>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub ctas: Vec<CtaTimeline>,
    /// The last moment recorded, ns after the first.
    pub end_ns: f64,
}

/// A `%globaltimer` range shorter than this (ns) is not fitted: a coarse timer (it may tick in
/// µs steps) would give a wild slope.
pub const MIN_FIT_RANGE_NS: u64 = 20_000;

/// How one CTA's `%clock64` readings map to ns after `origin` (a `%globaltimer` value).
#[derive(Debug, Clone, Copy)]
struct ClockFit {
    /// ns after the origin at clock `c0 + mean`.
    at_mean: f64,
    c0: u64,
    mean: f64,
    ns_per_cycle: f64,
    how: ClockMap,
}

impl ClockFit {
    /// Least squares when the timer range allows, else the slope of `fallback_mhz` through the
    /// means. Every difference is taken in integers first: `%globaltimer` may count from the
    /// epoch (~1.7e18 ns), where an f64 resolves only 256 ns.
    fn new(records: &[&Record], origin: u64, fallback_mhz: f64) -> ClockFit {
        let n = records.len().max(1) as f64;
        let (g_min, g_max) = records.iter().fold((u64::MAX, 0), |(lo, hi), r| {
            (lo.min(r.globaltimer), hi.max(r.globaltimer))
        });
        let c0 = records.iter().map(|r| r.clock).min().unwrap_or(0);
        let xs: Vec<f64> = records.iter().map(|r| (r.clock - c0) as f64).collect();
        let ys: Vec<f64> = records
            .iter()
            .map(|r| (i128::from(r.globaltimer) - i128::from(origin)) as f64)
            .collect();
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let fit = g_max.saturating_sub(g_min) >= MIN_FIT_RANGE_NS && sxx > 0.0 && sxy > 0.0;
        let (ns_per_cycle, how) = if fit {
            (sxy / sxx, ClockMap::Fitted)
        } else {
            (1e3 / fallback_mhz.max(1.0), ClockMap::MaxClock)
        };
        ClockFit {
            at_mean: my,
            c0,
            mean: mx,
            ns_per_cycle,
            how,
        }
    }
    fn ns(&self, clock: u64) -> f64 {
        let x = (i128::from(clock) - i128::from(self.c0)) as f64;
        self.at_mean + self.ns_per_cycle * (x - self.mean)
    }
}

/// A warp's role from the phases it entered.
pub fn role(phases: &[Phase], arch: Arch) -> String {
    let has = |p: Phase| phases.contains(&p);
    let mut parts = Vec::new();
    if has(Phase::Load) {
        parts.push("producer");
    }
    match (has(Phase::Mma), has(Phase::Epilogue)) {
        (true, true) if arch == Arch::Hopper => parts.push("consumer"),
        (true, true) => parts.extend(["MMA", "epilogue"]),
        (true, false) => parts.push("MMA"),
        (false, true) => parts.push("epilogue"),
        (false, false) => {}
    }
    if parts.is_empty() {
        "idle".into()
    } else {
        parts.join(" + ")
    }
}

/// Spans on one axis: ns since the earliest record. Each CTA's `%clock64` readings are mapped
/// onto `%globaltimer` ([`ClockMap`]); `max_clock_mhz` is the fallback slope.
pub fn timeline(rec: &Recording, arch: Arch, max_clock_mhz: f64) -> Timeline {
    let origin = rec
        .warps
        .iter()
        .flat_map(|(_, _, r)| r.iter().map(|r| r.globaltimer))
        .min()
        .unwrap_or(0);
    let mut ctas: Vec<CtaTimeline> = Vec::new();
    for cta in 0..rec.layout.ctas {
        let warps: Vec<&(u32, u32, Vec<Record>)> =
            rec.warps.iter().filter(|(c, _, _)| *c == cta).collect();
        let all: Vec<&Record> = warps.iter().flat_map(|(_, _, r)| r.iter()).collect();
        if all.is_empty() {
            continue;
        }
        let fit = ClockFit::new(&all, origin, max_clock_mhz);
        let at = |r: &Record| fit.ns(r.clock);
        let mut out = Vec::new();
        for (_, warp, records) in &warps {
            let mut spans: Vec<Span> = Vec::new();
            let mut tiles: Vec<TileSpan> = Vec::new();
            let mut open: Option<Span> = None;
            let mut open_tile: Option<TileSpan> = None;
            let mut exited = false;
            for r in records {
                let t = at(r);
                if r.kind == KIND_TILE {
                    if let Some(mut s) = open_tile.take() {
                        s.end_ns = t;
                        tiles.push(s);
                    }
                    open_tile = Some(TileSpan {
                        tile: r.arg,
                        start_ns: t,
                        end_ns: t,
                        clock: r.clock,
                        timer_ns: (i128::from(r.globaltimer) - i128::from(origin)) as f64,
                    });
                    continue;
                }
                let Some(phase) = Phase::from_id(r.phase) else {
                    continue;
                };
                if let Some(mut s) = open.take() {
                    s.end_ns = t;
                    spans.push(s);
                }
                // The tiles end where the loop does: tail, teardown or exit.
                if matches!(phase, Phase::Tail | Phase::Teardown | Phase::Exit) {
                    if let Some(mut s) = open_tile.take() {
                        s.end_ns = t;
                        tiles.push(s);
                    }
                }
                if phase == Phase::Exit {
                    exited = true;
                    break;
                }
                open = Some(Span {
                    phase,
                    arg: r.arg,
                    start_ns: t,
                    end_ns: t,
                });
            }
            let last = records.last().map_or(0.0, at);
            if let Some(mut s) = open {
                s.end_ns = last;
                spans.push(s);
            }
            if let Some(mut s) = open_tile {
                s.end_ns = last;
                tiles.push(s);
            }
            let phases: Vec<Phase> = spans.iter().map(|s| s.phase).collect();
            out.push(WarpTimeline {
                warp: *warp,
                role: role(&phases, arch),
                spans,
                tiles,
                cut_short: !exited,
            });
        }
        ctas.push(CtaTimeline {
            cta,
            smid: all[0].smid,
            clock_map: fit.how,
            clock_mhz: 1e3 / fit.ns_per_cycle,
            warps: out,
        });
    }
    // Shift to the earliest moment of any CTA.
    let t0 = ctas
        .iter()
        .flat_map(|c| c.warps.iter())
        .flat_map(|w| {
            w.spans
                .iter()
                .map(|s| s.start_ns)
                .chain(w.tiles.iter().map(|t| t.start_ns))
        })
        .fold(f64::INFINITY, f64::min);
    let t0 = if t0.is_finite() { t0 } else { 0.0 };
    let mut end_ns: f64 = 0.0;
    for w in ctas.iter_mut().flat_map(|c| c.warps.iter_mut()) {
        for s in &mut w.spans {
            s.start_ns -= t0;
            s.end_ns -= t0;
            end_ns = end_ns.max(s.end_ns);
        }
        for s in &mut w.tiles {
            s.start_ns -= t0;
            s.end_ns -= t0;
            end_ns = end_ns.max(s.end_ns);
        }
    }
    Timeline { ctas, end_ns }
}

/// The trace buffer of one launch on the GPU.
pub struct TraceBuffer {
    buf: CudaSlice<u8>,
    pub layout: Layout,
}

impl TraceBuffer {
    pub fn new(gpu: &Gpu, layout: Layout) -> Result<TraceBuffer> {
        let buf = gpu.stream.alloc_zeros::<u8>(layout.bytes()).map_err(|e| {
            anyhow!(
                "cannot allocate the trace buffer ({} MiB): {e:?}",
                layout.bytes() >> 20
            )
        })?;
        Ok(TraceBuffer { buf, layout })
    }

    /// Point the module's `wb_trace_*` globals at this buffer and clear it: every record
    /// slot unwritten, nothing dropped. Call before each launch whose records are wanted.
    pub fn install(&mut self, gpu: &Gpu, module: &Arc<CudaModule>) -> Result<()> {
        let s = &gpu.stream;
        s.memset_zeros(&mut self.buf).cuda("clear GPU memory")?;
        let (ptr, _guard) = self.buf.device_ptr(s);
        let values: [(&str, Vec<u8>); 4] = [
            ("wb_trace_records", ptr.to_le_bytes().to_vec()),
            (
                "wb_trace_per_warp",
                self.layout.per_warp.to_le_bytes().to_vec(),
            ),
            ("wb_trace_ctas", self.layout.ctas.to_le_bytes().to_vec()),
            ("wb_trace_dropped", 0u64.to_le_bytes().to_vec()),
        ];
        for (name, bytes) in values {
            let mut view = module.get_global(name, s).map_err(|e| {
                anyhow!("the kernel has no {name}: was it compiled with -DWB_TRACE=1? ({e:?})")
            })?;
            s.memcpy_htod(&bytes, &mut view).cuda("copy to the GPU")?;
        }
        s.synchronize().cuda("wait for the GPU")?;
        Ok(())
    }

    /// The records of the last launch.
    pub fn read(&self, gpu: &Gpu, module: &Arc<CudaModule>) -> Result<Recording> {
        let s = &gpu.stream;
        let bytes = s.clone_dtoh(&self.buf).cuda("copy from the GPU")?;
        let view = module
            .get_global("wb_trace_dropped", s)
            .map_err(|e| anyhow!("the kernel has no wb_trace_dropped ({e:?})"))?;
        let d = s.clone_dtoh(&view).cuda("copy from the GPU")?;
        let dropped = u64::from_le_bytes(
            d.get(..8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| anyhow!("wb_trace_dropped is not 8 bytes"))?,
        );
        decode(&bytes, self.layout, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `%globaltimer` that counts from the Unix epoch, as on some drivers.
    const EPOCH_NS: u64 = 1_763_000_000_000_000_000;

    fn rec(cta: u32, warp: u16, kind: u8, phase: Phase, arg: u32, ns: u64) -> Record {
        // A 2 GHz SM clock starting at 1000 cycles.
        Record {
            globaltimer: EPOCH_NS + ns,
            clock: 1000 + 2 * ns,
            arg,
            smid: 7 + cta,
            cta,
            warp,
            phase: phase.id(),
            kind,
        }
    }
    fn enter(cta: u32, warp: u16, phase: Phase, arg: u32, ns: u64) -> Record {
        rec(cta, warp, KIND_ENTER, phase, arg, ns)
    }
    fn tile(cta: u32, warp: u16, t: u32, ns: u64) -> Record {
        rec(cta, warp, KIND_TILE, Phase::Setup, t, ns)
    }

    fn buffer(layout: Layout, regions: &[(u32, u32, Vec<Record>)]) -> Vec<u8> {
        let mut b = vec![0u8; layout.bytes()];
        for (cta, warp, records) in regions {
            let region = (cta * layout.warps_per_cta + warp) as usize;
            for (i, r) in records.iter().enumerate() {
                let at = (region * layout.per_warp as usize + i) * RECORD_BYTES;
                b[at..at + RECORD_BYTES].copy_from_slice(&r.encode());
            }
        }
        b
    }

    #[test]
    fn records_round_trip_through_the_device_layout() {
        let r = Record {
            globaltimer: 0x0102_0304_0506_0708,
            clock: 0x1112_1314_1516_1718,
            arg: 0x2122_2324,
            smid: 131,
            cta: 3,
            warp: 11,
            phase: Phase::Epilogue.id(),
            kind: KIND_ENTER,
        };
        let b = r.encode();
        // The device writes uint4 {t.lo, t.hi, c.lo, c.hi}, {arg, smid, cta, warp | phase << 16
        // | kind << 24}: check one word as the device composes it.
        let last = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        assert_eq!(last, 11 | (11 << 16) | (1 << 24));
        assert_eq!(Record::decode(&b), r);
    }

    #[test]
    fn phases_have_distinct_ids_names_and_labels() {
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(p.id() as usize, i);
            assert_eq!(Phase::from_id(i as u8), Some(*p));
        }
        assert_eq!(Phase::from_id(15), None);
        let mut labels: Vec<&str> = Phase::ALL.iter().map(|p| p.label()).collect();
        labels.dedup();
        assert_eq!(labels.len(), 15);
        assert!(Phase::SlotWait.is_wait() && !Phase::Load.is_wait());
    }

    #[test]
    fn layouts_cover_the_passes_and_stay_capped() {
        let l = Layout::new(132, 384, 4, 8, 64);
        assert_eq!((l.ctas, l.warps_per_cta), (4, 12));
        assert_eq!(l.per_warp, 8 * (6 * 64 + 8) + 8);
        assert_eq!(l.bytes(), 4 * 12 * l.per_warp as usize * 32);
        // Fewer CTAs than asked; never zero.
        assert_eq!(Layout::new(2, 128, 4, 1, 1).ctas, 2);
        assert_eq!(Layout::new(2, 128, 0, 1, 1).ctas, 1);
        let huge = Layout::new(1000, 1024, 1000, 1 << 20, 1 << 20);
        assert!(huge.records() as u64 <= MAX_RECORDS);
    }

    #[test]
    fn decode_checks_the_layout() {
        let layout = Layout {
            ctas: 2,
            warps_per_cta: 2,
            per_warp: 4,
        };
        let good = vec![
            (
                0,
                1,
                vec![
                    enter(0, 1, Phase::Setup, 0, 0),
                    enter(0, 1, Phase::Exit, 0, 9),
                ],
            ),
            (1, 0, vec![enter(1, 0, Phase::Setup, 0, 0)]),
        ];
        let r = decode(&buffer(layout, &good), layout, 3).unwrap();
        assert_eq!(r.warps.len(), 2);
        assert_eq!(r.records(), 3);
        assert_eq!(r.dropped, 3);
        assert_eq!((r.warps[0].0, r.warps[0].1), (0, 1));

        let misplaced = vec![(0, 0, vec![enter(1, 0, Phase::Setup, 0, 0)])];
        let e = decode(&buffer(layout, &misplaced), layout, 0).unwrap_err();
        assert!(
            e.to_string().contains("disagree on the trace layout"),
            "{e}"
        );

        let mut gap = buffer(layout, &[(0, 0, vec![enter(0, 0, Phase::Setup, 0, 0)])]);
        gap[2 * RECORD_BYTES..3 * RECORD_BYTES]
            .copy_from_slice(&enter(0, 0, Phase::Idle, 0, 5).encode());
        assert!(decode(&gap, layout, 0)
            .unwrap_err()
            .to_string()
            .contains("unwritten slot"));

        let bad_phase = Record {
            phase: 99,
            ..enter(0, 0, Phase::Setup, 0, 0)
        };
        assert!(decode(&buffer(layout, &[(0, 0, vec![bad_phase])]), layout, 0).is_err());
        assert!(decode(&[0u8; 5], layout, 0).is_err());
    }

    fn recording(warps: Vec<(u32, u32, Vec<Record>)>) -> Recording {
        let layout = Layout {
            ctas: 2,
            warps_per_cta: 4,
            per_warp: 128,
        };
        decode(&buffer(layout, &warps), layout, 0).unwrap()
    }

    #[test]
    fn consecutive_calls_bound_phases_and_tiles() {
        // A producer over two tiles of two k-blocks, then its tail; times in ns from 0.
        let producer = vec![
            enter(0, 0, Phase::Setup, 0, 0),
            enter(0, 0, Phase::Idle, 0, 100),
            tile(0, 0, 5, 110),
            enter(0, 0, Phase::SlotWait, 0, 120),
            enter(0, 0, Phase::Load, 0, 130),
            enter(0, 0, Phase::SlotWait, 1, 150),
            enter(0, 0, Phase::Load, 1, 400),
            tile(0, 0, 9, 420),
            enter(0, 0, Phase::SlotWait, 0, 430),
            enter(0, 0, Phase::Load, 0, 440),
            enter(0, 0, Phase::Tail, 0, 500),
            enter(0, 0, Phase::Teardown, 0, 900),
            enter(0, 0, Phase::Exit, 0, 950),
        ];
        // 950 ns is too short to fit: the fallback clock is the SM's 2 GHz.
        let t = timeline(&recording(vec![(0, 0, producer)]), Arch::Blackwell, 2000.0);
        assert_eq!(t.ctas.len(), 1);
        let w = &t.ctas[0].warps[0];
        assert_eq!(w.role, "producer");
        assert!(!w.cut_short);
        let got: Vec<(Phase, u32, f64, f64)> = w
            .spans
            .iter()
            .map(|s| (s.phase, s.arg, s.start_ns.round(), s.end_ns.round()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Phase::Setup, 0, 0.0, 100.0),
                (Phase::Idle, 0, 100.0, 120.0),
                (Phase::SlotWait, 0, 120.0, 130.0),
                (Phase::Load, 0, 130.0, 150.0),
                (Phase::SlotWait, 1, 150.0, 400.0),
                (Phase::Load, 1, 400.0, 430.0),
                (Phase::SlotWait, 0, 430.0, 440.0),
                (Phase::Load, 0, 440.0, 500.0),
                (Phase::Tail, 0, 500.0, 900.0),
                (Phase::Teardown, 0, 900.0, 950.0),
            ]
        );
        let tiles: Vec<(u32, f64, f64)> = w
            .tiles
            .iter()
            .map(|s| (s.tile, s.start_ns.round(), s.end_ns.round()))
            .collect();
        assert_eq!(tiles, vec![(5, 110.0, 420.0), (9, 420.0, 500.0)]);
        // The start records' raw readings: 2 cycles a ns from 1000, the timer from the origin.
        let raw: Vec<(u64, f64)> = w.tiles.iter().map(|s| (s.clock, s.timer_ns)).collect();
        assert_eq!(raw, vec![(1220, 110.0), (1840, 420.0)]);
        assert_eq!(t.end_ns.round(), 950.0);
    }

    #[test]
    fn a_warp_without_exit_is_cut_at_its_last_record() {
        let w = vec![
            enter(0, 2, Phase::Setup, 0, 0),
            enter(0, 2, Phase::AccWait, 0, 50),
            enter(0, 2, Phase::Epilogue, 0, 80),
        ];
        let t = timeline(&recording(vec![(0, 2, w)]), Arch::Blackwell, 2000.0);
        let w = &t.ctas[0].warps[0];
        assert!(w.cut_short);
        assert_eq!(w.role, "epilogue");
        let last = w.spans.last().unwrap();
        assert_eq!(
            (last.phase, last.start_ns, last.end_ns),
            (Phase::Epilogue, 80.0, 80.0)
        );
    }

    #[test]
    fn clocks_map_onto_the_global_timer_per_cta() {
        // CTA 0 runs 100 us at 2 GHz; CTA 1 starts 1 us later on an SM whose clock reads
        // differently (1.5 GHz, another origin), with a timer that ticks only every 1 us.
        let mut a = Vec::new();
        let mut b = Vec::new();
        for i in 0..=100u64 {
            let ns = i * 1000 + 3;
            a.push(Record {
                globaltimer: EPOCH_NS + ns,
                clock: 2 * ns,
                ..enter(0, 0, Phase::Load, i as u32, 0)
            });
            let ns_b = 1000 + i * 1000 + 400;
            b.push(Record {
                globaltimer: EPOCH_NS + ns_b / 1000 * 1000,
                clock: 9_000_000 + ns_b * 3 / 2,
                ..enter(1, 0, Phase::Load, i as u32, 0)
            });
        }
        let t = timeline(&recording(vec![(0, 0, a), (1, 0, b)]), Arch::Hopper, 1000.0);
        assert_eq!(t.ctas[0].clock_map, ClockMap::Fitted);
        assert!(
            (t.ctas[0].clock_mhz - 2000.0).abs() < 1.0,
            "{}",
            t.ctas[0].clock_mhz
        );
        assert!(
            (t.ctas[1].clock_mhz - 1500.0).abs() < 15.0,
            "{}",
            t.ctas[1].clock_mhz
        );
        // CTA 0 starts at 0; CTA 1's first record (1.4 us in) lands within the timer's tick.
        assert_eq!(t.ctas[0].warps[0].spans[0].start_ns, 0.0);
        let b0 = t.ctas[1].warps[0].spans[0].start_ns;
        assert!((b0 - 1397.0).abs() < 600.0, "{b0}");
        // Fine-grained order within a CTA survives the coarse timer: spans are 1 us apart.
        let s = &t.ctas[1].warps[0].spans;
        assert!(((s[1].start_ns - s[0].start_ns) - 1000.0).abs() < 15.0);
    }

    #[test]
    fn a_short_range_falls_back_to_the_maximum_clock() {
        let w = vec![
            Record {
                globaltimer: EPOCH_NS,
                clock: 0,
                ..enter(0, 0, Phase::Setup, 0, 0)
            },
            Record {
                globaltimer: EPOCH_NS,
                clock: 500,
                ..enter(0, 0, Phase::Exit, 0, 0)
            },
        ];
        let t = timeline(&recording(vec![(0, 0, w)]), Arch::Blackwell, 1000.0);
        assert_eq!(t.ctas[0].clock_map, ClockMap::MaxClock);
        // 500 cycles at 1 GHz.
        assert_eq!(t.ctas[0].warps[0].spans[0].end_ns, 500.0);
        assert_eq!(t.ctas[0].clock_mhz, 1000.0);
    }

    #[test]
    fn roles_follow_the_phases_a_warp_entered() {
        use Phase::*;
        assert_eq!(role(&[Setup, Idle, Teardown], Arch::Blackwell), "idle");
        assert_eq!(
            role(&[SlotWait, Load, AccWait, Epilogue], Arch::Blackwell),
            "producer + epilogue"
        );
        assert_eq!(
            role(&[DataWait, Mma, Epilogue], Arch::Blackwell),
            "MMA + epilogue"
        );
        assert_eq!(role(&[DataWait, Mma, Epilogue], Arch::Hopper), "consumer");
        assert_eq!(
            role(&[Load, Mma, Epilogue], Arch::Hopper),
            "producer + consumer"
        );
        assert_eq!(role(&[AccEmptyWait, Mma], Arch::Blackwell), "MMA");
    }
}
