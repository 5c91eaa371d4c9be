//! cuBLAS: the reference product (f32 output) and the speed to compare against (same dtype).

use crate::gpu::Gpu;
use crate::problem::{Dtype, Shape};
use crate::toolkit;
use anyhow::{anyhow, bail, Context, Result};
use cudarc::cublas::sys as cb;
use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::CUdeviceptr;
use std::path::PathBuf;

/// Make cuBLAS loadable: cudarc opens it by name, so load it by path from the toolkit, the python
/// `nvidia` packages or the pinned wheel's folder when it is not on the loader's path. A GPU
/// machine with a driver and none of these gets the pinned wheel installed, as NVRTC is.
pub fn ensure_loadable() -> Result<()> {
    // SAFETY: probes whether the library can be opened.
    if unsafe { cb::is_culib_present() } {
        return Ok(());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(tk) = toolkit::find().ok().flatten() {
        if let Some(d) = tk.nvrtc_lib.parent() {
            dirs.push(d.to_path_buf());
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    // pip's nvidia-cublas (CUDA 13 wheels use nvidia/cu13/lib, CUDA 12 ones nvidia/cublas/lib).
    for site in toolkit::python_site_nvidia() {
        dirs.push(site.join("nvidia/cu13/lib"));
        dirs.push(site.join("nvidia/cublas/lib"));
    }
    dirs.extend(toolkit::cublas_lib_dirs());
    const LIBS: [&str; 2] = ["libcublasLt.so.", "libcublas.so."];
    toolkit::preload_named(&dirs, &LIBS);
    // SAFETY: as above.
    if unsafe { cb::is_culib_present() } {
        return Ok(());
    }
    let installed = || toolkit::preload_named(&toolkit::cublas_lib_dirs(), &LIBS);
    toolkit::install_cublas(installed).context(
        "cuBLAS (libcublas.so) is not in the toolkit, /usr/local/cuda or python's nvidia packages",
    )?;
    // SAFETY: as above.
    if installed() || unsafe { cb::is_culib_present() } {
        Ok(())
    } else {
        bail!(
            "installed {} into {}, but cannot load libcublas.so from it",
            toolkit::PYPI_CUBLAS,
            toolkit::cublas_dir().display()
        )
    }
}

pub struct Blas {
    handle: CudaBlas,
}

fn cuda_type(d: Dtype) -> cb::cudaDataType {
    match d {
        Dtype::F16 => cb::cudaDataType::CUDA_R_16F,
        Dtype::Bf16 => cb::cudaDataType::CUDA_R_16BF,
    }
}

impl Blas {
    pub fn new(gpu: &Gpu) -> Result<Blas> {
        ensure_loadable()?;
        let handle =
            CudaBlas::new(gpu.stream.clone()).map_err(|e| anyhow!("cuBLAS init: {e:?}"))?;
        Ok(Blas { handle })
    }

    /// Row-major C = A * B^T. cuBLAS is column-major, so compute C^T = B * A^T: the row-major
    /// N x K buffer of B read column-major is B^T (K x N), transposed back by op T; the row-major
    /// A is A^T column-major. f32 accumulation (CUBLAS_COMPUTE_32F, no TF32 shortcuts apply
    /// to 16-bit inputs); `c_f32` chooses an f32 output (the reference) or `dtype` (timing).
    pub fn gemm(
        &self,
        shape: Shape,
        dtype: Dtype,
        a: CUdeviceptr,
        b: CUdeviceptr,
        c: CUdeviceptr,
        c_f32: bool,
    ) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let c_type = if c_f32 {
            cb::cudaDataType::CUDA_R_32F
        } else {
            cuda_type(dtype)
        };
        // SAFETY: pointers are device buffers of the sizes the shape implies; scalars are f32 as
        // CUBLAS_COMPUTE_32F requires.
        let status = unsafe {
            cb::cublasGemmEx(
                *self.handle.handle(),
                cb::cublasOperation_t::CUBLAS_OP_T,
                cb::cublasOperation_t::CUBLAS_OP_N,
                shape.n as i32,
                shape.m as i32,
                shape.k as i32,
                (&alpha as *const f32).cast(),
                b as *const std::ffi::c_void,
                cuda_type(dtype),
                shape.k as i32,
                a as *const std::ffi::c_void,
                cuda_type(dtype),
                shape.k as i32,
                (&beta as *const f32).cast(),
                c as *mut std::ffi::c_void,
                c_type,
                shape.n as i32,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        if status != cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            bail!("cublasGemmEx failed: {status:?}");
        }
        Ok(())
    }
}

/// Untimed tensor-core work on scratch data that no kernel under test is given: it brings an idle
/// GPU back to its working clocks right before timed launches (see `timing::time_rounds`, which
/// says what an idle H200 does to a timing): 48 products of 69 GFLOP, some 5 ms at the
/// ~700 TFLOP/s cuBLAS reaches on an H200 (`assets/results/bench-h200-*.json`).
pub struct Warmup {
    a: cudarc::driver::CudaSlice<u16>,
    b: cudarc::driver::CudaSlice<u16>,
    c: cudarc::driver::CudaSlice<u16>,
}

impl Warmup {
    /// One product: 4096 x 4096 x 2048, 69 GFLOP.
    const SHAPE: Shape = Shape {
        m: 4096,
        n: 4096,
        k: 2048,
    };
    /// Products per warm-up: enough for the ~2 ms of steady work the clocks need to climb.
    const PRODUCTS: usize = 48;

    pub fn new(gpu: &Gpu) -> Result<Warmup> {
        let s = Self::SHAPE;
        // Random values, as in a real product (a product of zeros runs faster on the H200, so it
        // may not load the GPU the same way), from a fixed LCG.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut fill = |n: usize| -> Vec<u16> {
            (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    Dtype::F16.from_f32(((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
                })
                .collect()
        };
        let upload = |v: Vec<u16>| {
            gpu.stream
                .clone_htod(&v)
                .map_err(|e| anyhow!("warm-up buffers: {e:?}"))
        };
        let a = upload(fill(s.m * s.k))?;
        let b = upload(fill(s.n * s.k))?;
        let c = gpu
            .stream
            .alloc_zeros::<u16>(s.m * s.n)
            .map_err(|e| anyhow!("warm-up buffers: {e:?}"))?;
        Ok(Warmup { a, b, c })
    }

    /// Enqueue the products on the GPU's stream (no wait).
    pub fn run(&self, gpu: &Gpu, blas: &Blas) -> Result<()> {
        let ptr = |s: &cudarc::driver::CudaSlice<u16>| crate::gpu::dptr(s, gpu);
        for _ in 0..Self::PRODUCTS {
            blas.gemm(
                Self::SHAPE,
                Dtype::F16,
                ptr(&self.a),
                ptr(&self.b),
                ptr(&self.c),
                false,
            )?;
        }
        Ok(())
    }
}
