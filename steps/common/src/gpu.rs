//! The GPU: finding it, describing it, its peak rate, tensor maps and kernel launches.

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::problem::Dtype;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    pub max_clock_mhz: u32,
    pub l2_bytes: u32,
    pub max_smem_per_block: u32,
    pub driver_version: String,
}

impl GpuInfo {
    pub fn sm(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
    /// Dense f16/bf16 tensor-core peak at the maximum clock, if the architecture is known.
    pub fn peak_tflops(&self) -> Option<f64> {
        peak_tflops(self.compute_capability, self.sm_count, self.max_clock_mhz)
    }
}

/// Dense f16/bf16 FLOP per clock per SM of the tensor cores: 4096 for Hopper (sm_90: 1024 FMA
/// per clock per SM across 4 tensor cores), 8192 for Blackwell datacenter parts (sm_100).
pub fn dense_f16_flop_per_clock_per_sm(cc: (i32, i32)) -> Option<f64> {
    match cc {
        (9, 0) => Some(4096.0),
        (10, 0) => Some(8192.0),
        _ => None,
    }
}

/// Peak TFLOP/s = SM count x clock x FLOP/clock/SM.
pub fn peak_tflops(cc: (i32, i32), sm_count: u32, clock_mhz: u32) -> Option<f64> {
    dense_f16_flop_per_clock_per_sm(cc).map(|f| f * sm_count as f64 * clock_mhz as f64 * 1e6 / 1e12)
}

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: GpuInfo,
}

/// Whether a GPU is usable here, and if not, why.
pub enum GpuStatus {
    Present(Box<Gpu>),
    Absent(String),
}

fn attr(ctx: &CudaContext, a: sys::CUdevice_attribute) -> Result<u32> {
    Ok(ctx
        .attribute(a)
        .with_context(|| format!("cannot read {a:?}"))? as u32)
}

/// Whether a CUDA driver can be loaded here at all (cheap: opens no context). A machine
/// without one has no GPU to run on.
pub fn driver_present() -> bool {
    // SAFETY: only probes whether libcuda can be loaded.
    unsafe { sys::is_culib_present() }
}

/// Open device 0 (or `WORKBOOK_DEVICE`), or say why there is none.
pub fn open() -> GpuStatus {
    // SAFETY: only probes whether libcuda can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return GpuStatus::Absent("no CUDA driver (libcuda.so) on this machine".into());
    }
    if let Err(e) = cudarc::driver::result::init() {
        return GpuStatus::Absent(format!("the CUDA driver found no usable GPU ({e:?})"));
    }
    match cudarc::driver::result::device::get_count() {
        Ok(0) | Err(_) => return GpuStatus::Absent("the CUDA driver reports no GPU".into()),
        Ok(_) => {}
    }
    let ordinal = std::env::var("WORKBOOK_DEVICE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    match open_device(ordinal) {
        Ok(g) => GpuStatus::Present(Box::new(g)),
        Err(e) => GpuStatus::Absent(format!("cannot open GPU {ordinal}: {e:#}")),
    }
}

/// A failed CUDA driver call as one readable line: what was being done, then the driver's name
/// for the error and its description (`copy to the GPU: CUDA_ERROR_OUT_OF_MEMORY (out of
/// memory)`), rather than the Debug text of cudarc's error type.
pub trait CudaResultExt<T> {
    fn cuda(self, what: &str) -> Result<T>;
}

impl<T> CudaResultExt<T> for std::result::Result<T, cudarc::driver::DriverError> {
    fn cuda(self, what: &str) -> Result<T> {
        self.map_err(|e| anyhow!("{what}: {}", describe(&e)))
    }
}

/// The driver's name and description of an error, e.g. `CUDA_ERROR_LAUNCH_FAILED (unspecified
/// launch failure)`; its raw code where the driver cannot name it.
pub fn describe(e: &cudarc::driver::DriverError) -> String {
    match (e.error_name(), e.error_string()) {
        (Ok(name), Ok(text)) => format!("{} ({})", name.to_string_lossy(), text.to_string_lossy()),
        _ => format!("{:?}", e.0),
    }
}

fn open_device(ordinal: usize) -> Result<Gpu> {
    let ctx = CudaContext::new(ordinal).cuda("open the CUDA device")?;
    // The harness orders its work on one stream itself; cudarc's per-buffer events would only
    // add synchronisation to the raw launches below.
    // SAFETY: called before any allocation on this context.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().cuda("create a CUDA stream")?;
    let mut driver = 0;
    // SAFETY: plain out-parameter.
    unsafe { sys::cuDriverGetVersion(&mut driver) };
    use sys::CUdevice_attribute::*;
    let info = GpuInfo {
        name: ctx.name().cuda("read the GPU's name")?,
        compute_capability: ctx
            .compute_capability()
            .cuda("read the GPU's compute capability")?,
        sm_count: attr(&ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_clock_mhz: attr(&ctx, CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000,
        l2_bytes: attr(&ctx, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        max_smem_per_block: attr(&ctx, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        driver_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
    };
    Ok(Gpu { ctx, stream, info })
}

/// What a run needs beyond its problem's buffers: the L2 flush buffer (twice the L2), cuBLAS's
/// workspace and handles, the module. 1 GiB is ample on an H100/H200.
pub const RUN_OVERHEAD_BYTES: u64 = 1 << 30;

impl Gpu {
    /// Refuse, before anything is compiled or allocated, a run whose buffers (`bytes`, plus
    /// [`RUN_OVERHEAD_BYTES`]) exceed the memory free on this GPU now: a clear error instead
    /// of an allocation failure halfway through.
    pub fn check_fits(&self, bytes: u64, what: &str) -> Result<()> {
        let (free, total) = self.ctx.mem_get_info().cuda("read the GPU's free memory")?;
        let need = bytes.saturating_add(RUN_OVERHEAD_BYTES);
        if need > free as u64 {
            bail!(
                "{what} needs {:.1} GB of GPU memory ({:.1} GB of buffers and {:.1} GB for the flush buffer and cuBLAS); {} has {:.1} GB free of {:.1} GB: choose a smaller shape",
                need as f64 / 1e9,
                bytes as f64 / 1e9,
                RUN_OVERHEAD_BYTES as f64 / 1e9,
                self.info.name,
                free as f64 / 1e9,
                total as f64 / 1e9
            );
        }
        Ok(())
    }
}

pub fn check(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(anyhow!("{what} failed: {r:?}"))
    }
}

/// The one description of the workbook's 2D tensor maps: a row-major `rows` x `cols` matrix of
/// 16-bit elements, read or written in `box_rows` x `box_cols` boxes with the 128-byte swizzle.
/// [`tensor_map_2d`] encodes it for the driver and the simulator's backend
/// (`crate::simulate`) describes the same map from it, so the two cannot drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorMap2d {
    /// Innermost first, as `cuTensorMapEncodeTiled` takes them: (columns, rows).
    pub global_dim: [u64; 2],
    /// Bytes from one row to the next.
    pub row_stride: u64,
    /// (columns, rows) of a box.
    pub box_dim: [u32; 2],
    pub element_strides: [u32; 2],
    /// Bytes of the swizzle pattern (128: `CU_TENSOR_MAP_SWIZZLE_128B`); no interleave, L2
    /// promotion of 256 bytes, out-of-bounds elements read as zero.
    pub swizzle_bytes: u32,
}

impl TensorMap2d {
    /// The map of a `rows` x `cols` matrix in `box_rows` x `box_cols` boxes, or why TMA cannot
    /// take it.
    pub fn new(rows: usize, cols: usize, box_rows: u32, box_cols: u32) -> Result<TensorMap2d> {
        if box_cols * 2 > 128 {
            bail!(
                "a 128B-swizzled box is at most 128 bytes wide ({box_cols} 16-bit columns asked)"
            );
        }
        if box_rows > 256 || box_cols > 256 {
            bail!("a TMA box is at most 256 elements per dimension");
        }
        if !(cols * 2).is_multiple_of(16) {
            bail!("TMA needs rows that are a multiple of 16 bytes ({cols} columns)");
        }
        Ok(TensorMap2d {
            global_dim: [cols as u64, rows as u64],
            row_stride: (cols * 2) as u64,
            box_dim: [box_cols, box_rows],
            element_strides: [1, 1],
            swizzle_bytes: 128,
        })
    }
}

/// `cuTensorMapEncodeTiled` of [`TensorMap2d::new`]'s map over the matrix at `ptr`.
pub fn tensor_map_2d(
    ptr: sys::CUdeviceptr,
    dtype: Dtype,
    rows: usize,
    cols: usize,
    box_rows: u32,
    box_cols: u32,
) -> Result<sys::CUtensorMap> {
    let m = TensorMap2d::new(rows, cols, box_rows, box_cols)?;
    let data_type = match dtype {
        Dtype::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Dtype::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    };
    let swizzle = match m.swizzle_bytes {
        128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        other => bail!("no {other}-byte swizzle in the workbook's tensor maps"),
    };
    let global_strides = [m.row_stride];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: arrays have rank (2) or rank-1 entries as the API requires; `map` is writable.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type,
            2,
            ptr as *mut std::ffi::c_void,
            m.global_dim.as_ptr(),
            global_strides.as_ptr(),
            m.box_dim.as_ptr(),
            m.element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    check(r, "cuTensorMapEncodeTiled")?;
    // SAFETY: initialised by the successful call above.
    Ok(unsafe { map.assume_init() })
}

/// Grid, block, cluster and shared memory of one launch.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub cluster: (u32, u32, u32),
    pub smem_bytes: u32,
}

impl LaunchDims {
    pub fn num_ctas(&self) -> u32 {
        self.grid.0 * self.grid.1 * self.grid.2
    }
}

/// How many clusters of `dims.cluster` CTAs, each with `dims.block` threads and
/// `dims.smem_bytes` of shared memory, the GPU runs at once (cuOccupancyMaxActiveClusters): the
/// size of a persistent grid. It counts what really fits, not SMs / cluster size.
///
/// # Safety
/// `func` must be a live kernel handle of the current context.
pub unsafe fn max_active_clusters(
    func: sys::CUfunction,
    dims: &LaunchDims,
    stream: &CudaStream,
) -> Result<u32> {
    // SAFETY: a plain C struct (an id and a union of integers); all-zero is a valid value.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = dims.cluster.0;
    attr.value.clusterDim.y = dims.cluster.1;
    attr.value.clusterDim.z = dims.cluster.2;
    let config = sys::CUlaunchConfig {
        gridDimX: dims.cluster.0,
        gridDimY: dims.cluster.1,
        gridDimZ: dims.cluster.2,
        blockDimX: dims.block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: dims.smem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    let mut n: std::ffi::c_int = 0;
    // SAFETY: `config` and `attr` outlive the call; `n` is a plain out-parameter.
    check(
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, func, &config) },
        "cuOccupancyMaxActiveClusters",
    )?;
    if n <= 0 {
        bail!(
            "no cluster of {} CTAs x {} threads with {} B of shared memory fits on this GPU",
            dims.cluster.0,
            dims.block,
            dims.smem_bytes
        );
    }
    Ok(n as u32)
}

/// cuLaunchKernelEx: the one launch path, since only it takes a cluster shape.
///
/// # Safety
/// `params` must point at the kernel's arguments, in order, with the kernel's types.
pub unsafe fn launch(
    func: sys::CUfunction,
    dims: &LaunchDims,
    stream: &CudaStream,
    params: &mut [*mut std::ffi::c_void],
) -> Result<()> {
    let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::new();
    if dims.cluster != (1, 1, 1) {
        let mut a: sys::CUlaunchAttribute = std::mem::zeroed();
        a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        a.value.clusterDim.x = dims.cluster.0;
        a.value.clusterDim.y = dims.cluster.1;
        a.value.clusterDim.z = dims.cluster.2;
        attrs.push(a);
    }
    let config = sys::CUlaunchConfig {
        gridDimX: dims.grid.0,
        gridDimY: dims.grid.1,
        gridDimZ: dims.grid.2,
        blockDimX: dims.block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: dims.smem_bytes,
        hStream: stream.cu_stream(),
        attrs: attrs.as_mut_ptr(),
        numAttrs: attrs.len() as u32,
    };
    check(
        sys::cuLaunchKernelEx(&config, func, params.as_mut_ptr(), std::ptr::null_mut()),
        "kernel launch",
    )
}

/// A device buffer's address, as a kernel argument or a cuBLAS pointer.
pub fn dptr<T>(s: &cudarc::driver::CudaSlice<T>, gpu: &Gpu) -> sys::CUdeviceptr {
    cudarc::driver::DevicePtr::device_ptr(s, &gpu.stream).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_table() {
        // H100 SXM: 132 SMs at 1980 MHz max clock -> 1070 TFLOP/s dense f16 at that clock;
        // at the datasheet's 1830 MHz boost the same formula gives the published 989.
        let h100 = peak_tflops((9, 0), 132, 1980).unwrap();
        assert!((h100 - 1070.5).abs() < 0.5, "{h100}");
        let h100_boost = peak_tflops((9, 0), 132, 1830).unwrap();
        assert!((h100_boost - 989.4).abs() < 0.5, "{h100_boost}");
        // B200: 148 SMs; twice Hopper's rate per SM and clock.
        let b200 = peak_tflops((10, 0), 148, 1965).unwrap();
        assert!((b200 - 2382.3).abs() < 1.0, "{b200}");
        assert_eq!(peak_tflops((8, 0), 108, 1410), None);
        assert_eq!(
            peak_tflops((12, 0), 84, 2500),
            None,
            "consumer Blackwell has no tcgen05"
        );
    }
}
