//! `{{#comparables N}}`: what others published for step N's idea, in one table per chapter,
//! marked as not ours. Every figure here was read at its source (named in the row); a figure
//! that could not be found there is not listed. Their GPUs, shapes, types, inputs and baselines
//! differ from ours and from each other, so a row is context for the step's idea, never a target
//! or a claim about this workbook's kernels.

use anyhow::Result;

/// One published measurement.
pub struct Comparable {
    /// The workbook step whose idea it measures.
    pub step: u32,
    /// Who, and which of their versions.
    pub source: &'static str,
    pub gpu: &'static str,
    /// M × N × K.
    pub shape: &'static str,
    /// Data type and input distribution.
    pub data: &'static str,
    /// What it is compared against, and how it was timed where the source says.
    pub baseline: &'static str,
    /// The published figure, with the version before it where the source gives one.
    pub result: &'static str,
}

const PALLAS_GPU: &str = "not named (its benchmark divides by 2250 TFLOP/s, the HGX B200 peak)";
const PALLAS_SHAPE: &str = "4096 × 8192 × 4096";
const PALLAS_DATA: &str = "f16, iid normal";
const PALLAS_BASE: &str = "`jax.dot`, which its table calls cuBLAS";
const CUTE_GPU: &str = "not named (a tcgen05, sm_100 GPU)";
const CUTE_DATA: &str = "f16, integers in [−2, 2)";
const MODAL: &str = "B200 on Modal";
const CUBE_4K: &str = "4096³";
const CUBE_8K: &str = "8192³";
const BF16: &str = "bf16, K-major";
const GAU_POST_BASE: &str = "cuBLAS via PyTorch 2.9.1 + CUDA 13: 1506.74 TFLOP/s";
const GAU_README_BASE: &str =
    "cuBLAS via PyTorch 2.10, CUDA 13.0: 1358.69 TFLOP/s (\"results vary quite a bit across Modal runs\")";
const TILUS_DATA: &str =
    "f16; its plot's data file states no inputs, its `benchmark.py` draws `torch.randn`";
const TILUS_BASE: &str = "cuBLAS 1599.8 TFLOP/s; all figures from Nsight Compute";

/// Every published comparable, by step.
pub const ALL: &[Comparable] = &[
    Comparable {
        step: 0,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 0. basic kernel (already stages the epilogue through shared memory and a TMA store)",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "37.62 % tensor-core utilization; 59.4 % of its baseline",
    },
    Comparable {
        step: 0,
        source: "CuTeDSL notebook *Tour to SOL GEMM* (NVIDIA/cutlass): our step 0's configuration — 128 × 256 × 64 tiles, 4 stages, 128 threads — first without prefetch, then prefetching `ab_stages − 2` (exercise 0.1's question)",
        gpu: CUTE_GPU,
        shape: CUBE_8K,
        data: CUTE_DATA,
        baseline: "none",
        result: "\"about 450\" TFLOP/s without prefetch; \"about 880\" with it",
    },
    Comparable {
        step: 0,
        source: "CuTeDSL notebook *Tour to SOL GEMM*: the prefetching kernel with its epilogue's global stores vectorized, as our step 0's 16-byte stores already are (its 880 kernel stores 2 bytes at a time)",
        gpu: CUTE_GPU,
        shape: CUBE_8K,
        data: CUTE_DATA,
        baseline: "none",
        result: "\"about 1400\" TFLOP/s: the notebook's kernel closest to our step 0",
    },
    Comparable {
        step: 0,
        source: "gau-nernst, *tcgen05 for dummies* (the post), v3: pipelining",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_POST_BASE,
        result: "939.61 TFLOP/s",
    },
    Comparable {
        step: 0,
        source: "gau-nernst, `learn-cuda/02e_matmul_sm100/README.md`, v3: pipelining",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_README_BASE,
        result: "914.42 TFLOP/s",
    },
    Comparable {
        step: 0,
        source: "NVIDIA Tilus tutorial *Matmul (Blackwell)*, V2: pipelining",
        gpu: "B200",
        shape: CUBE_8K,
        data: TILUS_DATA,
        baseline: TILUS_BASE,
        result: "1103.2 TFLOP/s",
    },
    Comparable {
        step: 1,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 1. warp specialization",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "45.47 % utilization, 71.7 % of its baseline (from 37.62 %, 59.4 %)",
    },
    Comparable {
        step: 1,
        source: "gau-nernst, *tcgen05 for dummies* (the post), v4: warp specialization",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_POST_BASE,
        result: "1208.83 TFLOP/s (from 939.61)",
    },
    Comparable {
        step: 1,
        source: "gau-nernst, `learn-cuda/02e_matmul_sm100/README.md`, v4: warp specialization",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_README_BASE,
        result: "1053.61 TFLOP/s (from 914.42)",
    },
    Comparable {
        step: 1,
        source: "NVIDIA Tilus tutorial *Matmul (Blackwell)*, V3: warp specialization",
        gpu: "B200",
        shape: CUBE_8K,
        data: TILUS_DATA,
        baseline: TILUS_BASE,
        result: "1351.1 TFLOP/s (from 1103.2)",
    },
    Comparable {
        step: 1,
        source: "CuTeDSL warp-specialisation note (one of the workbook's source tutorials): the 1-CTA kernel, then the same kernel warp-specialized; the 2-CTA kernel likewise",
        gpu: "B200 (by the note's text)",
        shape: CUBE_8K,
        data: "not stated in the note",
        baseline: "the same kernel before warp specialization",
        result: "1-CTA: 1376.56 TFLOP/s (from 1318.88, +4.4 %); 2-CTA: 1395.39 TFLOP/s, with no speedup observed from specializing it",
    },
    Comparable {
        step: 2,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 2. tiled epilogue (sub-tiles and double-buffers a staging it already had)",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "55.82 % utilization, 88.1 % of its baseline (from 45.47 %, 71.7 %)",
    },
    Comparable {
        step: 3,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 3. collective (2-CTA) MMA",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "59.41 % utilization, 93.7 % of its baseline (from 55.82 %, 88.1 %)",
    },
    Comparable {
        step: 3,
        source: "gau-nernst, *tcgen05 for dummies* (the post), v5: 2-SM MMA",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_POST_BASE,
        result: "1302.29 TFLOP/s (from 1208.83)",
    },
    Comparable {
        step: 3,
        source: "gau-nernst, `learn-cuda/02e_matmul_sm100/README.md`, v5: 2-SM MMA",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_README_BASE,
        result: "1169.65 TFLOP/s (from 1053.61)",
    },
    Comparable {
        step: 3,
        source: "NVIDIA Tilus tutorial *Matmul (Blackwell)*, V6: 2-CTA MMA (its last step, after persistence)",
        gpu: "B200",
        shape: CUBE_8K,
        data: TILUS_DATA,
        baseline: TILUS_BASE,
        result: "1610.2 TFLOP/s (from 1506.3)",
    },
    Comparable {
        step: 4,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 4. persistent kernel",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "61.46 % utilization, 97.0 % of its baseline (from 59.41 %, 93.7 %)",
    },
    Comparable {
        step: 4,
        source: "NVIDIA Tilus tutorial *Matmul (Blackwell)*, V5: persistent kernel",
        gpu: "B200",
        shape: CUBE_8K,
        data: TILUS_DATA,
        baseline: TILUS_BASE,
        result: "1506.3 TFLOP/s (from 1416.4)",
    },
    Comparable {
        step: 5,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 5. dedicated epilogue warpgroup",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: PALLAS_BASE,
        result: "63.38 % utilization, 100.0 % of its baseline (from 61.46 %, 97.0 %)",
    },
    Comparable {
        step: 5,
        source: "gau-nernst, *tcgen05 for dummies* (the post), v6: persistent, 4 dedicated epilogue warps, double-buffered tensor-memory accumulator (our steps 4 and 5 together)",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_POST_BASE,
        result: "1475.93 TFLOP/s, \"98 %\" of cuBLAS (from 1302.29)",
    },
    Comparable {
        step: 5,
        source: "gau-nernst, `learn-cuda/02e_matmul_sm100/README.md`, v6: persistent with static scheduling (the same kernel design as the post's v6)",
        gpu: MODAL,
        shape: CUBE_4K,
        data: BF16,
        baseline: GAU_README_BASE,
        result: "1273.32 TFLOP/s (from 1169.65)",
    },
    Comparable {
        step: 5,
        source: "Triton Gluon tutorial `08-warp-specialization.py`: warp-specialized, persistent, double-buffered accumulator, dedicated epilogue partition, grouped tile order; no 2-CTA MMA",
        gpu: "not named in the matmul table (a capability 10.x Blackwell GPU); the tutorial's first benchmark is labelled \"Results on GB200\"",
        shape: "8192 × 8192 × K",
        data: "f16, `torch.randn`",
        baseline: "cuBLAS (timed with `do_bench`; the kernel with `do_bench_cudagraph`)",
        result: "1448.14 against cuBLAS's 1508.76 TFLOP/s at K = 16384; ahead for K ≤ 4096 (1390.95 against 1299.38 at K = 4096)",
    },
    Comparable {
        step: 6,
        source: "JAX Pallas:MGPU Blackwell matmul guide, 6. grid tiling",
        gpu: PALLAS_GPU,
        shape: PALLAS_SHAPE,
        data: PALLAS_DATA,
        baseline: "`jax.dot`; and the best `cutlass_profiler` kernel, 69.30 % utilization",
        result: "69.44 % utilization, 109.6 % of `jax.dot` (from 63.38 %, 100.0 %)",
    },
    Comparable {
        step: 6,
        source: "NVIDIA Tilus tutorial *Matmul (Blackwell)*, V4: tile rasterization",
        gpu: "B200",
        shape: CUBE_8K,
        data: TILUS_DATA,
        baseline: TILUS_BASE,
        result: "1416.4 TFLOP/s (from 1351.1)",
    },
    Comparable {
        step: 7,
        source: "Modular, *Matrix Multiplication on Blackwell: Part 4 — Breaking SOTA*: persistent kernel scheduled by cluster launch control, with a block swizzle",
        gpu: "B200",
        shape: "4096³ (the series' problem)",
        data: "not stated in the part we checked",
        baseline: "cuBLAS (the post says it exceeds the state of the art)",
        result: "1772 TFLOP/s",
    },
    Comparable {
        step: 7,
        source: "gau-nernst, learn-cuda `02e_matmul_sm100` README: v7a (a persistent grid of 148 blocks) and v7b (128 blocks), static scheduling",
        gpu: MODAL,
        shape: "4096³ and 8192³",
        data: BF16,
        baseline: GAU_README_BASE,
        result: "4096³: 1316.16 TFLOP/s with 128 blocks against 1293.38 with 148; 8192³: 1238.74 against 1283.26 (the grid that balances the last wave at one shape loses at the other)",
    },
];

/// The box of one chapter: a table of the step's comparables under a line that says whose
/// numbers they are.
pub fn markdown(spec: &str) -> Result<String> {
    let step: u32 = spec
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("comparables wants a step number, got {spec:?}"))?;
    runner::steps::get(step)?;
    let rows: Vec<&Comparable> = ALL.iter().filter(|c| c.step == step).collect();
    if rows.is_empty() {
        // A new step, before anyone has looked for published kernels like it.
        return Ok(format!(
            "*No published comparable of step {step} is recorded yet.*\n"
        ));
    }
    let mut md = String::from(
        "> **Not ours.** Published by others, on their GPUs, shapes, types, inputs and baselines, \
         read at the sources named here (\"Further reading\" links them). They show what the \
         step's idea bought elsewhere; we have no B200 and measured none of them.\n\n\
         | source and version | GPU | M × N × K | type, inputs | baseline | published |\n\
         |---|---|---|---|---|---|\n",
    );
    for c in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            c.source, c.gpu, c.shape, c.data, c.baseline, c.result
        ));
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_has_comparables_and_every_chapter_shows_them() {
        for s in runner::steps::all() {
            let info = s.info();
            let md = markdown(&info.number.to_string()).unwrap();
            assert!(md.contains("**Not ours.**"), "{md}");
            assert!(
                md.lines().filter(|l| l.starts_with("| ")).count() >= 2,
                "{md}"
            );
            let chapter =
                std::fs::read_to_string(common::toolkit::project_root().join(info.chapter))
                    .unwrap();
            assert!(
                chapter.contains(&format!("{{{{#comparables {}}}}}", info.number)),
                "{} shows its comparables",
                info.chapter
            );
        }
        assert!(markdown("8").is_err());
        assert!(markdown("x").is_err());
    }

    #[test]
    fn every_row_names_its_gpu_shape_data_and_baseline() {
        for c in ALL {
            for (what, v) in [
                ("source", c.source),
                ("gpu", c.gpu),
                ("shape", c.shape),
                ("data", c.data),
                ("baseline", c.baseline),
                ("result", c.result),
            ] {
                assert!(
                    !v.trim().is_empty() && !v.contains('|'),
                    "{what} of {}",
                    c.source
                );
            }
        }
        // Each source the issue names appears, with its context written the same way each time.
        for s in [
            "JAX Pallas:MGPU Blackwell matmul guide",
            "CuTeDSL notebook *Tour to SOL GEMM*",
            "gau-nernst, *tcgen05 for dummies* (the post)",
            "gau-nernst, `learn-cuda/02e_matmul_sm100/README.md`",
            "NVIDIA Tilus tutorial *Matmul (Blackwell)*",
            "Triton Gluon tutorial",
            "Modular,",
        ] {
            assert!(ALL.iter().any(|c| c.source.starts_with(s)), "{s}");
        }
    }
}
