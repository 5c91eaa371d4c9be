//! The budget box of each chapter (`runner budget N`, `{{#budget N}}`): arithmetic from a step's
//! configuration and a GPU's published figures — FLOP and bytes per k-block, its time at peak,
//! the operand bandwidth it demands, the bytes the ring keeps in flight against latency × demand,
//! the epilogue against the main loop, and how the tiles fill the GPU. None of it is measured.
//!
//! The input is a small struct of its own ([`BudgetInput`]), filled from a step's declared data
//! by one function per kernel ([`BudgetInput::from_step`], [`BudgetInput::from_twin`]), so a
//! change to that data touches only them.

use crate::problem::Shape;
use crate::step::{Arch, KernelSpec, Schedule, Step};

/// What the arithmetic needs to know about a step's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetInput {
    /// Rows of A (and C) per CTA: the lanes of its accumulator.
    pub tile_m: u32,
    /// Rows of B each CTA loads; the accumulator is `cluster * tile_n` columns wide.
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    /// CTAs per cluster sharing one MMA (1, or 2 for `cta_group::2`).
    pub cluster: u32,
    /// 0: C stored from registers; else the width of the staged TMA-store sub-tiles.
    pub epilogue_tile_n: u32,
    pub threads: u32,
    pub schedule: Schedule,
    /// K-blocks the producer may have in flight ahead of the MMAs.
    pub lookahead: u32,
    /// Accumulator slots in tensor memory (2 when a dedicated epilogue drains one while the MMAs
    /// fill the other).
    pub acc_stages: u32,
    /// A dedicated epilogue warpgroup runs while the next tile's MMAs are issued.
    pub epilogue_overlaps: bool,
    /// Bytes per element of A, B and C (f16/bf16).
    pub elem_bytes: u32,
    /// Dynamic shared memory per CTA, as the host's plan (`KernelShape::smem_bytes`) sizes it:
    /// the ring, any staging of C, the barriers.
    pub smem_bytes: u32,
}

impl BudgetInput {
    /// The one place that reads a step's Blackwell kernel: its parameters, its `KernelShape` and
    /// the facts its crate declares (lookahead, epilogue).
    pub fn from_step(step: &'static dyn Step) -> BudgetInput {
        let spec = KernelSpec::new(step, Arch::Blackwell);
        let (p, k, facts) = (&spec.params, spec.shape(), spec.facts());
        let stages = p.get("stages");
        BudgetInput {
            tile_m: p.get("tile_m"),
            tile_n: p.get("tile_n"),
            tile_k: k.tile_k,
            stages,
            cluster: k.cluster,
            epilogue_tile_n: p.get_or("epilogue_tile_n", 0),
            threads: k.threads,
            schedule: k.schedule,
            lookahead: facts.lookahead.k_blocks(stages),
            acc_stages: facts.epilogue.acc_stages(),
            epilogue_overlaps: facts.epilogue.overlaps_mainloop(),
            elem_bytes: 2,
            smem_bytes: k.smem_bytes,
        }
    }

    /// The same arithmetic for a Hopper twin with parameters `spec.params` (its defaults, or
    /// the ones a bench recorded), so a measured twin can be set beside its own budget. A twin's
    /// CTA computes `tile_m` x `tile_n` of C; its cluster lies along M and shares B by
    /// multicast, so each CTA loads `tile_n / cluster` of B's rows per k-block: that share is
    /// this struct's `tile_n`, and `acc_cols()` (cluster x that share) is the twin's `tile_n`.
    /// The lookahead and whether the epilogue overlaps the next tile (a store warp) are the
    /// twin's declared facts.
    pub fn from_twin(spec: &KernelSpec) -> BudgetInput {
        let (p, k, facts) = (&spec.params, spec.shape(), spec.facts());
        let stages = p.get("stages");
        BudgetInput {
            tile_m: p.get("tile_m"),
            tile_n: k.b_box.0,
            tile_k: k.tile_k,
            stages,
            cluster: k.cluster,
            epilogue_tile_n: p.get_or("epilogue_tile_n", 0),
            threads: k.threads,
            schedule: k.schedule,
            lookahead: facts.lookahead.k_blocks(stages),
            acc_stages: facts.epilogue.acc_stages(),
            epilogue_overlaps: facts.epilogue.overlaps_mainloop(),
            elem_bytes: 2,
            smem_bytes: k.smem_bytes,
        }
    }

    /// Columns of the accumulator each CTA holds (the MMA's N).
    pub fn acc_cols(&self) -> u32 {
        self.cluster * self.tile_n
    }
}

/// A GPU's published figures, each with where it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuSpec {
    /// Short name for the command line (`--gpu b200`).
    pub key: &'static str,
    pub name: &'static str,
    pub sms: u32,
    /// Dense f16/bf16 tensor-core peak with f32 accumulation, TFLOP/s.
    pub dense_f16_tflops: f64,
    /// Dense f16 FLOP per SM per clock; with the peak it fixes the clock the peak assumes.
    pub flop_per_clock_per_sm: f64,
    /// HBM bandwidth, TB/s.
    pub hbm_tbps: f64,
    /// Whether the figures are of a GPU with tcgen05 (the Hopper columns show what the same tiles
    /// would ask of a Hopper GPU; these kernels run there only under emulation).
    pub tcgen05: bool,
    /// Where each figure comes from, in the order above.
    pub sources: &'static [&'static str],
}

/// NVIDIA B200 (HGX, 1000 W).
// Sources: NVIDIA's HGX B200 specifications give 4.5 PFLOPS FP16/BF16 with 2:4 sparsity (2.25
// dense) and 8 TB/s of HBM3e per GPU; 2250 TFLOP/s is also the f16 peak the JAX Pallas Blackwell
// guide's benchmark divides by (jax `tests/pallas/mgpu_examples_test.py`). NVIDIA's datasheets do
// not list the SM count: 148 is what B200s report (gau-nernst's tcgen05 ladder launches one CTA
// per SM, 148). NVIDIA publishes neither the clock nor the per-SM rate: 8192 dense f16 FLOP per SM
// per clock (twice Hopper's 4096) is the power of two that puts the published peak at a plausible
// clock (1856 MHz) — an inference, labelled as one.
pub const B200: GpuSpec = GpuSpec {
    key: "b200",
    name: "B200",
    sms: 148,
    dense_f16_tflops: 2250.0,
    flop_per_clock_per_sm: 8192.0,
    hbm_tbps: 8.0,
    tcgen05: true,
    sources: &[
        "148 SMs: as B200s report (not in NVIDIA's datasheet)",
        "2250 TFLOP/s dense f16: NVIDIA HGX B200 specifications (4.5 PFLOPS with sparsity), the peak the Pallas guide's benchmark uses",
        "8192 FLOP/clock/SM: inferred, not published (2× Hopper; puts the peak at 1856 MHz)",
        "8 TB/s HBM3e: NVIDIA HGX B200 specifications",
    ],
};

/// NVIDIA H100 SXM5.
// Sources: NVIDIA H100 Tensor Core GPU Architecture whitepaper — 132 SMs, 989.4 dense FP16/BF16
// tensor TFLOP/s with FP32 accumulation, which is 132 SMs × 4096 FLOP/clock × 1830 MHz; NVIDIA
// H100 datasheet: 3.35 TB/s HBM3.
pub const H100_SXM: GpuSpec = GpuSpec {
    key: "h100",
    name: "H100 SXM",
    sms: 132,
    dense_f16_tflops: 989.4,
    flop_per_clock_per_sm: 4096.0,
    hbm_tbps: 3.35,
    tcgen05: false,
    sources: &[
        "132 SMs: NVIDIA H100 architecture whitepaper",
        "989.4 TFLOP/s dense f16: the same whitepaper",
        "4096 FLOP/clock/SM: the whitepaper's peak at 1830 MHz",
        "3.35 TB/s HBM3: NVIDIA H100 datasheet",
    ],
};

/// NVIDIA H200 SXM: the H100's GH100 with HBM3e.
// Sources: NVIDIA H200 datasheet — FP16 tensor 1979 TFLOP/s with sparsity (989.4 dense, as H100),
// 4.8 TB/s HBM3e; the same GH100 die and SM count as H100 SXM.
pub const H200_SXM: GpuSpec = GpuSpec {
    key: "h200",
    name: "H200 SXM",
    sms: 132,
    dense_f16_tflops: 989.4,
    flop_per_clock_per_sm: 4096.0,
    hbm_tbps: 4.8,
    tcgen05: false,
    sources: &[
        "132 SMs: the H100's GH100 die",
        "989.4 TFLOP/s dense f16: NVIDIA H200 datasheet (1979 with sparsity)",
        "4096 FLOP/clock/SM: as H100",
        "4.8 TB/s HBM3e: NVIDIA H200 datasheet",
    ],
};

pub const GPUS: &[GpuSpec] = &[B200, H100_SXM, H200_SXM];

pub fn find_gpu(key: &str) -> Option<&'static GpuSpec> {
    GPUS.iter().find(|g| g.key.eq_ignore_ascii_case(key))
}

/// What the arithmetic assumes that no datasheet gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Assumptions {
    /// Time from a TMA load's issue to its bytes landing in shared memory, under load, in ns.
    pub load_latency_ns: f64,
}

impl Assumptions {
    /// NVIDIA publishes no memory latency. Microbenchmark studies of Hopper (arXiv 2402.13499)
    /// and Blackwell (arXiv 2512.02189) report idle global-memory latencies of several hundred
    /// nanoseconds, and latency grows under load; 800 ns is a round figure in that range, to be
    /// changed with `runner budget N --latency-ns`.
    pub const DEFAULT: Assumptions = Assumptions {
        load_latency_ns: 800.0,
    };
}

/// The arithmetic for one step on one GPU and one problem shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub input: BudgetInput,
    pub gpu: GpuSpec,
    pub shape: Shape,
    pub assumptions: Assumptions,
    /// FLOP of one k-block on one SM.
    pub flop_per_kblock: f64,
    /// Bytes of A and B one SM loads into shared memory per k-block.
    pub bytes_per_kblock: f64,
    /// FLOP per byte of that traffic.
    pub intensity: f64,
    /// Dynamic shared memory of the step's layout.
    pub smem_bytes: u32,
    pub tmem_cols: u32,
    /// One k-block at the SM's share of the peak.
    pub kblock_ns: f64,
    pub kblock_cycles: f64,
    /// The clock the published peak implies.
    pub clock_mhz: f64,
    /// Operand bytes per second one SM needs at peak, and all SMs together.
    pub demand_per_sm_gbps: f64,
    pub demand_tbps: f64,
    /// Bytes the ring can have in flight (STAGES - 1 k-blocks, in every design) and what
    /// latency × demand needs.
    pub inflight_bytes: f64,
    pub needed_inflight_bytes: f64,
    /// Load latency the ring covers at peak: STAGES - 1 k-blocks of MMA.
    pub latency_covered_ns: f64,
    pub k_blocks: u32,
    /// One tile's main loop at peak.
    pub mainloop_ns: f64,
    /// Bytes of C one CTA stores per tile, and the time at the SM's share of HBM bandwidth.
    pub c_bytes_per_tile: f64,
    pub epilogue_ns: f64,
    /// Output tiles of the cluster, clusters resident at once, rounds and the last round's fill.
    pub tiles: u32,
    pub clusters_at_once: u32,
    pub rounds: u32,
    pub last_round_tiles: u32,
    /// The whole problem at peak, and the compulsory HBM traffic (A, B, C once) at HBM bandwidth.
    pub problem_ns: f64,
    pub compulsory_bytes: f64,
    pub compulsory_ns: f64,
}

pub fn budget(input: BudgetInput, gpu: &GpuSpec, shape: Shape, assumptions: Assumptions) -> Budget {
    let i = input;
    let e = f64::from(i.elem_bytes);
    let flop_per_kblock = 2.0 * f64::from(i.tile_m) * f64::from(i.acc_cols()) * f64::from(i.tile_k);
    let bytes_per_kblock = f64::from(i.tile_m + i.tile_n) * f64::from(i.tile_k) * e;
    let sm_flops = gpu.dense_f16_tflops * 1e12 / f64::from(gpu.sms);
    let kblock_ns = flop_per_kblock / sm_flops * 1e9;
    let demand_per_sm = bytes_per_kblock / kblock_ns; // bytes per ns = GB/s

    // Loads in flight ahead of the MMAs: STAGES - 1 k-blocks, whatever the prefetch distance.
    // In step 0 the single warp refills k-block kb + (STAGES - 2) once the MMAs of kb - 2 have
    // completed, and a specialised producer refills a slot once its MMAs have completed: either
    // way load j is issued when MMA(j - STAGES) completes, STAGES - 1 k-blocks of MMA before
    // MMA(j) starts. The slot the MMAs read cannot be loading, so the whole ring never is.
    let lookahead_kblocks = i.stages.saturating_sub(1);
    let inflight_bytes = f64::from(lookahead_kblocks) * bytes_per_kblock;
    let k_blocks = (shape.k as u32).div_ceil(i.tile_k);
    let c_bytes_per_tile = f64::from(i.tile_m) * f64::from(i.acc_cols()) * e;
    let hbm_per_sm = gpu.hbm_tbps * 1e12 / f64::from(gpu.sms); // bytes per second
    let tiles = (shape.m as u32).div_ceil(i.cluster * i.tile_m)
        * (shape.n as u32).div_ceil(i.cluster * i.tile_n);
    // One CTA per SM: the ring fills most of shared memory.
    let slots = gpu.sms / i.cluster;
    // A looping schedule never has more clusters at once than tiles.
    let clusters_at_once = if i.schedule.loops() {
        tiles.min(slots).max(1)
    } else {
        slots
    };
    let rounds = tiles.div_ceil(clusters_at_once);
    let mainloop_ns = f64::from(k_blocks) * kblock_ns;
    let epilogue_ns = c_bytes_per_tile / hbm_per_sm * 1e9;
    let tile_ns = if i.epilogue_overlaps {
        mainloop_ns.max(epilogue_ns)
    } else {
        mainloop_ns + epilogue_ns
    };
    let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
    let compulsory_bytes = (m * k + n * k + m * n) * e;
    Budget {
        input,
        gpu: *gpu,
        shape,
        assumptions,
        flop_per_kblock,
        bytes_per_kblock,
        intensity: flop_per_kblock / bytes_per_kblock,
        smem_bytes: i.smem_bytes,
        tmem_cols: i.acc_cols() * i.acc_stages,
        kblock_ns,
        kblock_cycles: flop_per_kblock / gpu.flop_per_clock_per_sm,
        clock_mhz: sm_flops / gpu.flop_per_clock_per_sm / 1e6,
        demand_per_sm_gbps: demand_per_sm,
        demand_tbps: demand_per_sm * f64::from(gpu.sms) / 1000.0,
        inflight_bytes,
        needed_inflight_bytes: demand_per_sm * assumptions.load_latency_ns,
        latency_covered_ns: f64::from(lookahead_kblocks) * kblock_ns,
        k_blocks,
        mainloop_ns,
        c_bytes_per_tile,
        epilogue_ns,
        tiles,
        clusters_at_once,
        rounds,
        last_round_tiles: tiles - (rounds - 1) * clusters_at_once,
        problem_ns: f64::from(rounds) * tile_ns,
        compulsory_bytes,
        compulsory_ns: compulsory_bytes / (gpu.hbm_tbps * 1e12) * 1e9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Step 0's configuration, written out so the arithmetic is checked by hand below.
    const STEP0: BudgetInput = BudgetInput {
        tile_m: 128,
        tile_n: 256,
        tile_k: 64,
        stages: 4,
        cluster: 1,
        epilogue_tile_n: 0,
        threads: 128,
        schedule: Schedule::OnePerTile,
        lookahead: 2,
        acc_stages: 1,
        epilogue_overlaps: false,
        elem_bytes: 2,
        // The plan's formula, worked by hand in the test below.
        smem_bytes: 4 * (128 + 256) * 64 * 2 + 1024 + 1024,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn one_kblock_of_step0_by_hand() {
        let b = budget(STEP0, &B200, Shape::DEFAULT, Assumptions::DEFAULT);
        // 2 × 128 × 256 × 64 FLOP on (128 + 256) × 64 × 2 bytes.
        assert_eq!(b.flop_per_kblock, 4_194_304.0);
        assert_eq!(b.bytes_per_kblock, 49_152.0);
        assert!(close(b.intensity, 256.0 / 3.0));
        // 4194304 FLOP at 2250e12 / 148 FLOP/s per SM.
        assert!(close(b.kblock_ns, 4_194_304.0 / (2250e12 / 148.0) * 1e9));
        assert_eq!(b.kblock_cycles, 512.0);
        assert!((b.clock_mhz - 1855.7).abs() < 0.1, "{}", b.clock_mhz);
        assert!(close(
            b.demand_tbps,
            49_152.0 / b.kblock_ns * 148.0 / 1000.0
        ));
        // Three k-blocks ahead (STAGES - 1, though the loop prefetches 2): 144 KiB in flight;
        // 800 ns × demand needed.
        assert_eq!(b.inflight_bytes, 147_456.0);
        assert!(close(b.latency_covered_ns, 3.0 * b.kblock_ns));
        assert!(close(
            b.needed_inflight_bytes,
            800.0 * 49_152.0 / b.kblock_ns
        ));
        assert_eq!(b.smem_bytes, 198_656, "the host's plan for step 0");
        assert_eq!(b.tmem_cols, 256);
        // 4096 / 64 k-blocks; 4096/128 × 8192/256 = 1024 tiles, 148 at a time: 7 rounds.
        assert_eq!(b.k_blocks, 64);
        assert_eq!((b.tiles, b.clusters_at_once, b.rounds), (1024, 148, 7));
        assert_eq!(b.last_round_tiles, 1024 - 6 * 148);
        // 64 KiB of C per tile at 8e12 / 148 bytes per second.
        assert_eq!(b.c_bytes_per_tile, 65_536.0);
        assert!(close(b.epilogue_ns, 65_536.0 / (8e12 / 148.0) * 1e9));
        assert!(close(
            b.problem_ns,
            7.0 * (64.0 * b.kblock_ns + b.epilogue_ns)
        ));
        assert_eq!(
            b.compulsory_bytes,
            (4096.0 * 4096.0 + 8192.0 * 4096.0 + 4096.0 * 8192.0) * 2.0
        );
    }

    #[test]
    fn the_pair_shares_b_and_gains_half_again_in_intensity() {
        // Step 3: tile_n halves to 128 per CTA, the accumulator stays 256 wide.
        let pair = BudgetInput {
            tile_n: 128,
            cluster: 2,
            epilogue_tile_n: 64,
            lookahead: 4,
            ..STEP0
        };
        let one = budget(STEP0, &B200, Shape::DEFAULT, Assumptions::DEFAULT);
        let two = budget(pair, &B200, Shape::DEFAULT, Assumptions::DEFAULT);
        assert_eq!(one.flop_per_kblock, two.flop_per_kblock);
        assert_eq!(two.bytes_per_kblock, 32_768.0);
        assert!(close(two.intensity / one.intensity, 1.5));
        assert!(close(two.demand_tbps / one.demand_tbps, 2.0 / 3.0));
        // 16 × 32 cluster tiles, 74 clusters at once.
        assert_eq!((two.tiles, two.clusters_at_once, two.rounds), (512, 74, 7));
    }

    #[test]
    fn persistence_keeps_the_rounds_and_an_overlapped_epilogue_hides() {
        let pair = BudgetInput {
            tile_n: 128,
            cluster: 2,
            epilogue_tile_n: 64,
            lookahead: 4,
            ..STEP0
        };
        let launched = budget(pair, &B200, Shape::DEFAULT, Assumptions::DEFAULT);
        let persistent = budget(
            BudgetInput {
                schedule: Schedule::Persistent,
                ..pair
            },
            &B200,
            Shape::DEFAULT,
            Assumptions::DEFAULT,
        );
        // Round-robin over 74 clusters takes as many rounds as waves of 74 launched clusters.
        assert_eq!(launched.rounds, persistent.rounds);
        assert_eq!(launched.problem_ns, persistent.problem_ns);
        let overlapped = budget(
            BudgetInput {
                schedule: Schedule::Persistent,
                epilogue_overlaps: true,
                acc_stages: 2,
                threads: 256,
                ..pair
            },
            &B200,
            Shape::DEFAULT,
            Assumptions::DEFAULT,
        );
        assert!(close(overlapped.problem_ns, 7.0 * overlapped.mainloop_ns));
        assert_eq!(overlapped.tmem_cols, 512, "two 256-column accumulators");
        // A small problem: fewer tiles than clusters, one round.
        let small = budget(
            BudgetInput {
                schedule: Schedule::Persistent,
                ..pair
            },
            &B200,
            Shape {
                m: 512,
                n: 512,
                k: 512,
            },
            Assumptions::DEFAULT,
        );
        assert_eq!(
            (small.tiles, small.clusters_at_once, small.rounds),
            (4, 4, 1)
        );
    }

    #[test]
    fn hopper_figures_are_the_whitepapers() {
        let b = budget(STEP0, &H100_SXM, Shape::DEFAULT, Assumptions::DEFAULT);
        assert!((b.clock_mhz - 1830.0).abs() < 0.5, "{}", b.clock_mhz);
        assert_eq!(b.kblock_cycles, 1024.0);
        assert_eq!(b.clusters_at_once, 132);
        assert!(find_gpu("H200").is_some_and(|g| g.hbm_tbps == 4.8));
        assert!(find_gpu("mi300").is_none());
        for g in GPUS {
            assert_eq!(g.sources.len(), 4, "{}: a source per figure", g.name);
        }
    }
}
