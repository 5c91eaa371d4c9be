//! What a step crate provides: its kernel, its tuning parameters, the shapes it accepts and its
//! launch plan. Everything else (compiling, launching, verifying, timing) is shared.
//!
//! Kernel contract, the same for every step:
//! `extern "C" __global__ void gemm_kernel(const __grid_constant__ TmaDesc tmap_a,
//!     const __grid_constant__ TmaDesc tmap_b, <T* C | const __grid_constant__ TmaDesc tmap_c>,
//!     int M, int N, int K)` compiled with `-DWB_DTYPE=<__half|__nv_bfloat16> -DWB_IS_BF16=<0|1>`
//! and `-DWB_<PARAM>=<value>` for each tuning parameter.

use crate::compile::KernelSource;
use crate::gpu::{GpuInfo, LaunchDims};
use crate::problem::{Dtype, Shape};

/// The static facts of a step.
#[derive(Debug)]
pub struct StepInfo {
    pub number: u32,
    /// Crate folder relative to the repository root, e.g. `steps/step0_naive`.
    pub crate_dir: &'static str,
    pub title: &'static str,
    /// The step's one idea, in a sentence.
    pub idea: &'static str,
    pub kernel: &'static str,
    pub host: &'static str,
    /// The book chapter, relative to the repository root.
    pub chapter: &'static str,
    /// SASS opcodes (prefixes) the sm_100a build must contain.
    pub sass_expect: &'static [&'static str],
}

impl StepInfo {
    pub fn kernel_path(&self) -> String {
        format!("{}/src/kernel.cu", self.crate_dir)
    }
    pub fn host_path(&self) -> String {
        format!("{}/src/lib.rs", self.crate_dir)
    }
    pub fn kernel_source(&self) -> KernelSource {
        KernelSource {
            path: self.kernel_path(),
            text: self.kernel.to_string(),
        }
    }
}

/// How the kernel receives C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputArg {
    /// A plain `T*`.
    Pointer,
    /// A tensor map with this box (rows, cols), for TMA stores.
    TensorMap { box_rows: u32, box_cols: u32 },
}

/// One launch of the step's kernel for one shape.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub dims: LaunchDims,
    /// TMA boxes (rows, cols) for A and B.
    pub a_box: (u32, u32),
    pub b_box: (u32, u32),
    pub output: OutputArg,
}

/// What the host must know about a step's kernel to launch it: its tiles, its ring, how it
/// stores C, how CTAs group and whether it is persistent. `plan` and `check_shape` follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelShape {
    pub tile_m: u32,
    /// Rows of B each CTA loads (the MMA's N is `cluster * tile_n`).
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    /// 0: the epilogue stores C from registers through a pointer; otherwise the width of the
    /// sub-tiles it stages per warp (two 32-row buffers each) and stores with TMA.
    pub epilogue_tile_n: u32,
    /// CTAs per cluster sharing one MMA: 1, or 2 for cta_group::2.
    pub cluster: u32,
    pub threads: u32,
    /// One cluster per pair of SMs looping over tiles, instead of one cluster per tile.
    pub persistent: bool,
}

impl KernelShape {
    /// M, N and K must be multiples of what one cluster covers.
    pub fn check_shape(&self, s: Shape, step: u32) -> Result<(), String> {
        check_tiled(
            s,
            self.cluster * self.tile_m,
            self.cluster * self.tile_n,
            self.tile_k,
            step,
        )
    }

    pub fn plan(&self, s: Shape, gpu: Option<&GpuInfo>) -> Plan {
        let staging = 4 * 2 * 32 * self.epilogue_tile_n * 2;
        let tiles_m = s.m as u32 / (self.cluster * self.tile_m);
        let tiles_n = s.n as u32 / (self.cluster * self.tile_n);
        let grid = if self.persistent {
            (persistent_ctas(tiles_m * tiles_n, gpu, self.cluster), 1, 1)
        } else {
            // x: the CTAs of a cluster side by side, then the column tiles; y: the row tiles.
            (tiles_n * self.cluster, tiles_m, 1)
        };
        Plan {
            dims: LaunchDims {
                grid,
                block: self.threads,
                cluster: (self.cluster, 1, 1),
                smem_bytes: ring_smem_bytes(
                    self.stages,
                    self.tile_m,
                    self.tile_n,
                    self.tile_k,
                    staging,
                ),
            },
            a_box: (self.tile_m, self.tile_k),
            b_box: (self.tile_n, self.tile_k),
            output: if self.epilogue_tile_n == 0 {
                OutputArg::Pointer
            } else {
                OutputArg::TensorMap {
                    box_rows: 32,
                    box_cols: self.epilogue_tile_n,
                }
            },
        }
    }
}

pub trait Step: Sync {
    fn info(&self) -> &'static StepInfo;
    /// Tuning parameters in a fixed order, e.g. `[("tile_m", 128), ...]`; each becomes
    /// `-DWB_TILE_M=128` for the kernel and a line of `runner step`'s report.
    fn params(&self) -> Vec<(&'static str, u32)>;
    /// The kernel's launch-relevant facts for the current parameters.
    fn kernel(&self) -> KernelShape;

    /// `Err` names the violated constraint, e.g. "M must be a multiple of 128 for step 0".
    fn check_shape(&self, shape: Shape) -> Result<(), String> {
        self.kernel().check_shape(shape, self.info().number)
    }
    /// The launch for `shape`; `gpu` is absent when planning without a device.
    fn plan(&self, shape: Shape, gpu: Option<&GpuInfo>) -> Plan {
        self.kernel().plan(shape, gpu)
    }

    /// Compiler definitions for `dtype`.
    fn defines(&self, dtype: Dtype) -> Vec<(String, String)> {
        let mut d = vec![
            ("WB_DTYPE".to_string(), dtype.cuda_type().to_string()),
            (
                "WB_IS_BF16".to_string(),
                u32::from(dtype == Dtype::Bf16).to_string(),
            ),
        ];
        d.extend(
            self.params()
                .into_iter()
                .map(|(k, v)| (format!("WB_{}", k.to_ascii_uppercase()), v.to_string())),
        );
        d
    }
}

/// `Err("M must be a multiple of 128 for step 0")` unless `value` is a positive multiple.
pub fn require_multiple(dim: &str, value: usize, multiple: usize, step: u32) -> Result<(), String> {
    if value == 0 || !value.is_multiple_of(multiple) {
        Err(format!(
            "{dim} must be a positive multiple of {multiple} for step {step} (got {value})"
        ))
    } else {
        Ok(())
    }
}

/// The shapes a tiled kernel accepts: M, N and K positive multiples of its tile.
pub fn check_tiled(
    shape: Shape,
    tile_m: u32,
    tile_n: u32,
    tile_k: u32,
    step: u32,
) -> Result<(), String> {
    require_multiple("M", shape.m, tile_m as usize, step)?;
    require_multiple("N", shape.n, tile_n as usize, step)?;
    require_multiple("K", shape.k, tile_k as usize, step)
}

/// Dynamic shared memory of a kernel whose `SharedStorage` starts with a `stages`-deep ring of
/// 16-bit A (`a_rows` x `tile_k`) and B (`b_rows` x `tile_k`) tiles, then `extra` bytes of
/// 1024-aligned buffers, then the barriers: one 1024-byte block for the barriers and the
/// tensor-memory address (the struct rounds up to its 1024-byte alignment), plus 1024 bytes of
/// slack for aligning the dynamic shared-memory base by hand. Kernels trap if it is too small.
pub fn ring_smem_bytes(stages: u32, a_rows: u32, b_rows: u32, tile_k: u32, extra: u32) -> u32 {
    stages * (a_rows + b_rows) * tile_k * 2 + extra + 1024 + 1024
}

/// SMs assumed when planning without a GPU: a B200's 148.
pub const DEFAULT_SM_COUNT: u32 = 148;

/// CTAs of a persistent launch: as many clusters of `cluster` CTAs as fit on the GPU at once
/// (one CTA per SM), but no more clusters than there are tiles.
pub fn persistent_ctas(num_tiles: u32, gpu: Option<&GpuInfo>, cluster: u32) -> u32 {
    let sms = gpu.map_or(DEFAULT_SM_COUNT, |g| g.sm_count);
    num_tiles.min(sms / cluster).max(1) * cluster
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_kernel_shape() {
        let s = Shape {
            m: 4096,
            n: 8192,
            k: 4096,
        };
        let one = KernelShape {
            tile_m: 128,
            tile_n: 256,
            tile_k: 64,
            stages: 4,
            epilogue_tile_n: 0,
            cluster: 1,
            threads: 128,
            persistent: false,
        };
        let p = one.plan(s, None);
        assert_eq!(p.dims.grid, (32, 32, 1));
        assert_eq!(p.output, OutputArg::Pointer);
        assert_eq!(p.dims.smem_bytes, 198656);
        let pair = KernelShape {
            tile_n: 128,
            epilogue_tile_n: 64,
            cluster: 2,
            ..one
        };
        let p = pair.plan(s, None);
        assert_eq!(
            p.dims.grid,
            (64, 16, 1),
            "32 column pairs x 2 CTAs, 16 row pairs"
        );
        assert_eq!(p.dims.cluster, (2, 1, 1));
        assert_eq!(p.b_box, (128, 64));
        assert_eq!(
            p.output,
            OutputArg::TensorMap {
                box_rows: 32,
                box_cols: 64
            }
        );
        assert_eq!(p.dims.smem_bytes, 4 * 32768 + 32768 + 2048);
        let persistent = KernelShape {
            persistent: true,
            ..pair
        };
        assert_eq!(persistent.plan(s, None).dims.grid, (148, 1, 1));
        assert!(pair
            .check_shape(
                Shape {
                    m: 128,
                    n: 256,
                    k: 64
                },
                3
            )
            .unwrap_err()
            .starts_with("M must be a positive multiple of 256"));
    }

    #[test]
    fn persistent_grids_fill_the_gpu_or_the_tiles() {
        assert_eq!(persistent_ctas(512, None, 2), 148);
        assert_eq!(persistent_ctas(10, None, 2), 20);
        assert_eq!(persistent_ctas(0, None, 2), 2);
    }

    #[test]
    fn ring_smem_for_the_step0_tiles() {
        // 4 stages of 128x64 + 256x64 f16 = 192 KiB, plus the barrier block and the slack.
        assert_eq!(ring_smem_bytes(4, 128, 256, 64, 0), 196608 + 2048);
        let ok = Shape {
            m: 256,
            n: 512,
            k: 128,
        };
        assert!(check_tiled(ok, 128, 256, 64, 1).is_ok());
        let bad = Shape {
            m: 256,
            n: 500,
            k: 128,
        };
        assert!(check_tiled(bad, 128, 256, 64, 1)
            .unwrap_err()
            .starts_with("N must be"));
    }

    #[test]
    fn shape_errors_name_the_constraint() {
        assert!(require_multiple("M", 256, 128, 0).is_ok());
        let e = require_multiple("M", 100, 128, 0).unwrap_err();
        assert_eq!(
            e,
            "M must be a positive multiple of 128 for step 0 (got 100)"
        );
        assert!(require_multiple("K", 0, 64, 0).is_err());
    }
}
