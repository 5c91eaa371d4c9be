//! CUPTI's SASS metrics: how many times each instruction of a kernel executed, counted by the
//! GPU itself (CUPTI patches the kernel's code at its launch to count). The grader's proof that
//! a technique ran: an instruction behind `if (M < 0)` is in the binary and executes zero times.
//!
//! CUPTI is loaded at run time (as cudarc loads the driver): from the toolkit
//! (`extras/CUPTI/lib64`, `lib64`), python's `nvidia` packages, or the pinned PyPI wheel
//! ([`crate::toolkit::PYPI_CUPTI`]), installed once like cuBLAS. The structures below are those
//! of `cupti_sass_metrics.h`, `cupti_target.h`, `cupti_profiler_target.h` and
//! `cupti_pcsampling.h` of CUPTI 13.0; each call passes its structure's `structSize` as the
//! header's `..._STRUCT_SIZE` macro computes it (the offset of the last field plus its size),
//! which is how CUPTI tells the versions of a structure apart.

use crate::toolkit;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};

/// The metrics the grader reads per instruction: warp-level executions, thread-level
/// executions (active threads), and thread-level executions whose predicate was true.
pub const METRICS: [&str; 3] = [
    INST_EXECUTED,
    THREAD_INST_EXECUTED,
    THREAD_INST_EXECUTED_PRED_ON,
];
pub const INST_EXECUTED: &str = "smsp__sass_inst_executed";
pub const THREAD_INST_EXECUTED: &str = "smsp__sass_thread_inst_executed";
pub const THREAD_INST_EXECUTED_PRED_ON: &str = "smsp__sass_thread_inst_executed_pred_on";

/// CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU: one value per instruction for the whole GPU.
const GRANULARITY_GPU: u8 = 0;
/// CUPTI_SUCCESS.
const SUCCESS: c_int = 0;

/// `..._STRUCT_SIZE` of a CUPTI structure: the offset of its last field plus that field's size.
macro_rules! struct_size {
    ($t:ty, $field:ident, $ft:ty) => {
        offset_of!($t, $field) + size_of::<$ft>()
    };
}

// ---- the structures, field for field as the headers declare them ---------------------------

/// `CUpti_Profiler_Initialize_Params` (cupti_profiler_target.h).
#[repr(C)]
struct ProfilerInitialize {
    struct_size: usize,
    priv_: *mut c_void,
}

/// `CUpti_Device_GetChipName_Params` (cupti_target.h).
#[repr(C)]
struct GetChipName {
    struct_size: usize,
    priv_: *mut c_void,
    device_index: usize,
    chip_name: *const c_char,
}

/// `CUpti_SassMetrics_MetricDetails`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MetricDetails {
    metric_id: u64,
    metric_name: *const c_char,
    metric_description: *const c_char,
}

/// `CUpti_SassMetrics_GetProperties_Params`.
#[repr(C)]
struct GetProperties {
    struct_size: usize,
    priv_: *mut c_void,
    chip_name: *const c_char,
    metric_name: *const c_char,
    metric: MetricDetails,
}

/// `CUpti_SassMetrics_Config`.
#[repr(C)]
#[derive(Clone, Copy)]
struct MetricConfig {
    metric_id: u64,
    output_granularity: u8,
}

/// `CUpti_SassMetricsSetConfig_Params`.
#[repr(C)]
struct SetConfig {
    struct_size: usize,
    priv_: *mut c_void,
    num_of_metric_config: usize,
    configs: *mut MetricConfig,
    device_index: u32,
}

/// `CUpti_SassMetricsUnsetConfig_Params`.
#[repr(C)]
struct UnsetConfig {
    struct_size: usize,
    priv_: *mut c_void,
    device_index: u32,
}

/// `CUpti_SassMetricsEnable_Params`.
#[repr(C)]
struct Enable {
    struct_size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    enable_lazy_patching: u8,
}

/// `CUpti_SassMetricsDisable_Params`.
#[repr(C)]
struct Disable {
    struct_size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num_of_dropped_records: usize,
}

/// `CUpti_SassMetricsGetDataProperties_Params`.
#[repr(C)]
struct GetDataProperties {
    struct_size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num_of_patched_instruction_records: usize,
    num_of_instances: usize,
}

/// `CUpti_SassMetrics_InstanceValue`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InstanceValue {
    metric_id: u64,
    value: u64,
}

/// `CUpti_SassMetrics_Data`: one patched instruction.
#[repr(C)]
struct Data {
    struct_size: usize,
    priv_: *mut c_void,
    cubin_crc: u32,
    function_index: u32,
    function_name: *const c_char,
    pc_offset: u32,
    instance_values: *mut InstanceValue,
}

/// `CUpti_SassMetricsFlushData_Params`.
#[repr(C)]
struct FlushData {
    struct_size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num_of_patched_instruction_records: usize,
    num_of_instances: usize,
    metrics_data: *mut Data,
}

/// `CUpti_GetCubinCrcParams` (cupti_pcsampling.h).
#[repr(C)]
struct GetCubinCrc {
    size: usize,
    cubin_size: usize,
    cubin: *const c_void,
    cubin_crc: u64,
}

/// The `structSize` each call passes, as the header's macros compute it.
pub mod sizes {
    use super::*;
    pub const PROFILER_INITIALIZE: usize = struct_size!(ProfilerInitialize, priv_, *mut c_void);
    pub const GET_CHIP_NAME: usize = struct_size!(GetChipName, chip_name, *const c_char);
    pub const GET_PROPERTIES: usize = struct_size!(GetProperties, metric, MetricDetails);
    pub const SET_CONFIG: usize = struct_size!(SetConfig, device_index, u32);
    pub const UNSET_CONFIG: usize = struct_size!(UnsetConfig, device_index, u32);
    pub const ENABLE: usize = struct_size!(Enable, enable_lazy_patching, u8);
    pub const DISABLE: usize = struct_size!(Disable, num_of_dropped_records, usize);
    pub const GET_DATA_PROPERTIES: usize = struct_size!(GetDataProperties, num_of_instances, usize);
    /// The header's FlushData macro ends at `numOfInstances`, before `pMetricsData`.
    pub const FLUSH_DATA: usize = struct_size!(FlushData, num_of_instances, usize);
    /// Samples set a record's `structSize` to the record's full size.
    pub const DATA: usize = size_of::<Data>();
    pub const GET_CUBIN_CRC: usize = struct_size!(GetCubinCrc, cubin_crc, u64);
    pub const METRIC_CONFIG: usize = size_of::<MetricConfig>();
    pub const INSTANCE_VALUE: usize = size_of::<InstanceValue>();
}

type Call<P> = unsafe extern "C" fn(*mut P) -> c_int;

/// The CUPTI library, loaded.
pub struct Cupti {
    /// Never unloaded: CUPTI stays hooked into the driver for the process's life, and unloading
    /// it under those hooks crashes the process at exit.
    lib: std::mem::ManuallyDrop<libloading::Library>,
    pub path: PathBuf,
    /// `cuptiGetVersion`: the CUPTI API version (130001 for CUDA 13.0's).
    pub api_version: u32,
    /// The chip's name, once [`Cupti::initialize`] ran (`GH100`).
    pub chip: Option<String>,
}

/// One instruction's counts, summed over the GPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PcRecord {
    /// The CRC CUPTI computed for the cubin the instruction is in.
    pub cubin_crc: u32,
    pub function_index: u32,
    pub function: String,
    /// Byte offset of the instruction in its function (nvdisasm's `/*0040*/`).
    pub pc_offset: u32,
    /// Metric name -> value (summed over the instances).
    pub values: BTreeMap<String, u64>,
}

/// What one enable/disable range measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    pub chip: String,
    pub api_version: u32,
    /// Metric name -> CUPTI's id for it.
    pub metric_ids: BTreeMap<String, u64>,
    pub instances: usize,
    pub dropped_records: usize,
    pub records: Vec<PcRecord>,
    /// Values whose metric id is none of ours (a layout mistake shows here first).
    pub unknown_values: usize,
}

/// Where a CUPTI library may be, most specific first: `WORKBOOK_CUPTI` (a file), the toolkit's
/// and `/usr/local/cuda`'s `extras/CUPTI/lib64` and `lib64`, python's `nvidia` packages, the
/// pinned wheel's folders.
pub fn candidates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(tk) = toolkit::find().ok().flatten() {
        if let Some(root) = tk.include_dir.parent() {
            dirs.push(root.join("extras/CUPTI/lib64"));
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/extras/CUPTI/lib64".into());
    dirs.push("/usr/local/cuda/lib64".into());
    for site in toolkit::python_site_nvidia() {
        dirs.push(site.join("nvidia/cu13/lib"));
        dirs.push(site.join("nvidia/cuda_cupti/lib"));
    }
    dirs.extend(toolkit::cupti_lib_dirs());
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(f) = std::env::var_os("WORKBOOK_CUPTI") {
        files.push(PathBuf::from(f));
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut hits: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n == "libcupti.so" || n.starts_with("libcupti.so."))
            })
            .collect();
        hits.sort();
        // The versioned name last-sorted is the newest; any one will do.
        files.extend(hits.into_iter().rev());
    }
    files
}

/// The path of a CUPTI library that loads and is new enough for SASS metrics, or why none is.
pub fn find() -> Result<PathBuf> {
    let mut tried = Vec::new();
    for p in candidates() {
        match Cupti::open(&p) {
            Ok(c) => return Ok(c.path),
            Err(e) => tried.push(format!("{}: {e:#}", p.display())),
        }
    }
    if tried.is_empty() {
        bail!("no CUPTI library (libcupti.so) in the toolkit, /usr/local/cuda or python's nvidia packages")
    }
    bail!("no usable CUPTI library: {}", tried.join("; "))
}

/// [`find`], else install the pinned wheel (the grader does this before any child starts: a
/// confined child can neither search nor install).
pub fn find_or_install() -> Result<PathBuf> {
    if let Ok(p) = find() {
        return Ok(p);
    }
    let usable = || {
        toolkit::cupti_lib_dirs()
            .iter()
            .any(|d| Cupti::open(&d.join("libcupti.so.13")).is_ok())
    };
    toolkit::install_cupti(usable).context("CUPTI is needed to count executed instructions")?;
    find()
}

/// SASS metrics came with CUPTI 12.6 (API version 24).
const MIN_API_VERSION: u32 = 24;

impl Cupti {
    /// Load the library at `path` and read its API version.
    pub fn open(path: &Path) -> Result<Cupti> {
        // CUPTI's profiler opens its `libnvperf_*` neighbours by name, which a child with a
        // cleared environment could not find: loaded first by path, they are found by name.
        if let Some(dir) = path.parent() {
            for lib in ["libnvperf_target.so", "libnvperf_host.so"] {
                toolkit::preload_named(&[dir.to_path_buf()], &[lib]);
            }
        }
        // SAFETY: loading CUPTI runs its initialisers, which only register with the driver.
        let lib = unsafe { libloading::Library::new(path) }
            .with_context(|| format!("cannot load {}", path.display()))?;
        let mut c = Cupti {
            lib: std::mem::ManuallyDrop::new(lib),
            path: path.to_path_buf(),
            api_version: 0,
            chip: None,
        };
        // SAFETY: `cuptiGetVersion(uint32_t*)` (cupti_version.h).
        let get: libloading::Symbol<unsafe extern "C" fn(*mut u32) -> c_int> =
            unsafe { c.lib.get(b"cuptiGetVersion\0") }.context("no cuptiGetVersion")?;
        let mut v = 0u32;
        // SAFETY: a valid out pointer.
        let r = unsafe { get(&mut v) };
        if r != SUCCESS {
            bail!("cuptiGetVersion failed ({r})");
        }
        c.api_version = v;
        if v < MIN_API_VERSION {
            bail!("CUPTI API version {v} has no SASS metrics (CUDA 12.6 or newer is needed)");
        }
        // Present in every CUPTI with SASS metrics: a missing one is the wrong library.
        for s in ["cuptiSassMetricsSetConfig", "cuptiSassMetricsFlushData"] {
            let name = CString::new(s).map_err(|e| anyhow!("{e}"))?;
            // SAFETY: only the symbol's presence is checked.
            unsafe { c.lib.get::<*const c_void>(name.as_bytes_with_nul()) }
                .with_context(|| format!("{} has no {s}", path.display()))?;
        }
        Ok(c)
    }

    /// CUPTI's name for a result code (`CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`).
    fn result_string(&self, r: c_int) -> String {
        // SAFETY: `cuptiGetResultString(CUptiResult, const char**)` (cupti_result.h).
        let Ok(f) = (unsafe {
            self.lib
                .get::<unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int>(
                    b"cuptiGetResultString\0",
                )
        }) else {
            return format!("CUPTI error {r}");
        };
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: a valid out pointer; CUPTI returns a static string.
        if unsafe { f(r, &mut s) } != SUCCESS || s.is_null() {
            return format!("CUPTI error {r}");
        }
        // SAFETY: non-null, NUL-terminated, static.
        let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        format!("{text} ({r})")
    }

    /// Call `name(params)`, an error naming the call and CUPTI's result if it fails.
    fn call<P>(&self, name: &str, params: &mut P) -> Result<()> {
        let sym = CString::new(name).map_err(|e| anyhow!("{e}"))?;
        // SAFETY: every call here has the signature `CUptiResult f(P*)` with P its params
        // structure as the header declares it.
        let f: libloading::Symbol<Call<P>> = unsafe { self.lib.get(sym.as_bytes_with_nul()) }
            .with_context(|| format!("{} has no {name}", self.path.display()))?;
        // SAFETY: `params` is a valid, initialised structure of the call's type.
        let r = unsafe { f(params) };
        if r != SUCCESS {
            bail!("{name} failed: {}", self.result_string(r));
        }
        Ok(())
    }

    /// The CRC CUPTI gives the cubin `cubin` (its records name their cubin by it).
    pub fn cubin_crc(&self, cubin: &[u8]) -> Result<u64> {
        let mut p = GetCubinCrc {
            size: sizes::GET_CUBIN_CRC,
            cubin_size: cubin.len(),
            cubin: cubin.as_ptr().cast(),
            cubin_crc: 0,
        };
        self.call("cuptiGetCubinCrc", &mut p)?;
        Ok(p.cubin_crc)
    }

    /// Initialise CUPTI's profiler and read device `device`'s chip name: early, before the
    /// process launches any kernel (cuBLAS's included).
    pub fn initialize(&mut self, device: u32) -> Result<()> {
        if self.chip.is_some() {
            return Ok(());
        }
        let mut init = ProfilerInitialize {
            struct_size: sizes::PROFILER_INITIALIZE,
            priv_: std::ptr::null_mut(),
        };
        self.call("cuptiProfilerInitialize", &mut init)?;
        let mut chip = GetChipName {
            struct_size: sizes::GET_CHIP_NAME,
            priv_: std::ptr::null_mut(),
            device_index: device as usize,
            chip_name: std::ptr::null(),
        };
        self.call("cuptiDeviceGetChipName", &mut chip)?;
        if chip.chip_name.is_null() {
            bail!("cuptiDeviceGetChipName gave no name");
        }
        // SAFETY: non-null, NUL-terminated, owned by CUPTI for the process's life.
        let name = unsafe { CStr::from_ptr(chip.chip_name) }
            .to_string_lossy()
            .into_owned();
        self.chip = Some(name);
        Ok(())
    }

    /// Start counting on device `device` (its context `ctx`, current on this thread), after
    /// [`Cupti::initialize`]: every kernel launched from now until [`Session::finish`] is
    /// patched at its first launch.
    pub fn start(&self, ctx: *mut c_void, device: u32) -> Result<Session<'_>> {
        self.start_with(ctx, device, &METRICS, true)
    }

    /// [`Cupti::start`] with the metrics and the patching mode chosen: `runner check cupti`
    /// tries each, to tell which part of the grader's configuration a machine's CUPTI refuses.
    /// `lazy`: patch each function at its first launch in the range (else every function of
    /// every loaded module at once).
    pub fn start_with(
        &self,
        ctx: *mut c_void,
        device: u32,
        metrics: &[&str],
        lazy: bool,
    ) -> Result<Session<'_>> {
        let chip_name = self
            .chip
            .clone()
            .ok_or_else(|| anyhow!("internal: CUPTI's profiler was not initialised"))?;
        let chip_c = CString::new(chip_name.clone()).map_err(|e| anyhow!("{e}"))?;
        let mut metric_ids = BTreeMap::new();
        let mut configs = Vec::new();
        for &m in metrics {
            let name = CString::new(m).map_err(|e| anyhow!("{e}"))?;
            let mut p = GetProperties {
                struct_size: sizes::GET_PROPERTIES,
                priv_: std::ptr::null_mut(),
                chip_name: chip_c.as_ptr(),
                metric_name: name.as_ptr(),
                metric: MetricDetails {
                    metric_id: 0,
                    metric_name: std::ptr::null(),
                    metric_description: std::ptr::null(),
                },
            };
            self.call("cuptiSassMetricsGetProperties", &mut p)
                .with_context(|| format!("metric {m} on {chip_name}"))?;
            metric_ids.insert(m.to_string(), p.metric.metric_id);
            configs.push(MetricConfig {
                metric_id: p.metric.metric_id,
                output_granularity: GRANULARITY_GPU,
            });
        }
        let mut set = SetConfig {
            struct_size: sizes::SET_CONFIG,
            priv_: std::ptr::null_mut(),
            num_of_metric_config: configs.len(),
            configs: configs.as_mut_ptr(),
            device_index: device,
        };
        self.call("cuptiSassMetricsSetConfig", &mut set)?;
        let mut enable = Enable {
            struct_size: sizes::ENABLE,
            priv_: std::ptr::null_mut(),
            ctx,
            enable_lazy_patching: u8::from(lazy),
        };
        if let Err(e) = self.call("cuptiSassMetricsEnable", &mut enable) {
            let mut unset = UnsetConfig {
                struct_size: sizes::UNSET_CONFIG,
                priv_: std::ptr::null_mut(),
                device_index: device,
            };
            let _ = self.call("cuptiSassMetricsUnsetConfig", &mut unset);
            return Err(e);
        }
        Ok(Session {
            cupti: self,
            ctx,
            device,
            chip: chip_name,
            metric_ids,
            open: true,
        })
    }
}

/// An enable/disable range of SASS metrics collection.
pub struct Session<'a> {
    cupti: &'a Cupti,
    ctx: *mut c_void,
    device: u32,
    chip: String,
    metric_ids: BTreeMap<String, u64>,
    open: bool,
}

impl Session<'_> {
    /// Metric name -> CUPTI's id for it, as configured.
    pub fn metric_ids(&self) -> &BTreeMap<String, u64> {
        &self.metric_ids
    }

    /// Read every record (after the measured launches completed), then end the range.
    pub fn finish(mut self) -> Result<Measurement> {
        let read = self.read();
        let closed = self.close();
        let mut m = read?;
        m.dropped_records = closed?;
        Ok(m)
    }

    fn read(&self) -> Result<Measurement> {
        let mut props = GetDataProperties {
            struct_size: sizes::GET_DATA_PROPERTIES,
            priv_: std::ptr::null_mut(),
            ctx: self.ctx,
            num_of_patched_instruction_records: 0,
            num_of_instances: 0,
        };
        self.cupti
            .call("cuptiSassMetricsGetDataProperties", &mut props)?;
        let (n, instances) = (
            props.num_of_patched_instruction_records,
            props.num_of_instances,
        );
        let mut m = Measurement {
            chip: self.chip.clone(),
            api_version: self.cupti.api_version,
            metric_ids: self.metric_ids.clone(),
            instances,
            dropped_records: 0,
            records: Vec::new(),
            unknown_values: 0,
        };
        if n == 0 {
            return Ok(m);
        }
        if n > 1 << 24 || instances == 0 || instances > 1 << 16 {
            bail!("cuptiSassMetricsGetDataProperties gave {n} records of {instances} instances: not a plausible measurement");
        }
        // Room for every metric's instances in each record, zeroed: whether CUPTI writes one
        // record per instruction with all metrics, or one per instruction and metric, each
        // value names its metric, and an unwritten slot keeps metric id 0.
        let per_record = instances * self.metric_ids.len().max(1);
        let mut values = vec![InstanceValue::default(); n * per_record];
        let mut data: Vec<Data> = (0..n)
            .map(|i| Data {
                struct_size: sizes::DATA,
                priv_: std::ptr::null_mut(),
                cubin_crc: 0,
                function_index: 0,
                function_name: std::ptr::null(),
                pc_offset: 0,
                // SAFETY: within `values` (n * per_record elements).
                instance_values: unsafe { values.as_mut_ptr().add(i * per_record) },
            })
            .collect();
        let mut flush = FlushData {
            struct_size: sizes::FLUSH_DATA,
            priv_: std::ptr::null_mut(),
            ctx: self.ctx,
            num_of_patched_instruction_records: n,
            num_of_instances: instances,
            metrics_data: data.as_mut_ptr(),
        };
        self.cupti.call("cuptiSassMetricsFlushData", &mut flush)?;
        let names: BTreeMap<u64, &str> = self
            .metric_ids
            .iter()
            .map(|(k, v)| (*v, k.as_str()))
            .collect();
        for (i, d) in data.iter().enumerate() {
            let function = if d.function_name.is_null() {
                String::new()
            } else {
                // SAFETY: non-null and NUL-terminated, owned by CUPTI.
                unsafe { CStr::from_ptr(d.function_name) }
                    .to_string_lossy()
                    .into_owned()
            };
            let mut vals = BTreeMap::new();
            for v in &values[i * per_record..(i + 1) * per_record] {
                match names.get(&v.metric_id) {
                    Some(name) => *vals.entry(name.to_string()).or_insert(0) += v.value,
                    None if v.metric_id == 0 && v.value == 0 => {}
                    None => m.unknown_values += 1,
                }
            }
            m.records.push(PcRecord {
                cubin_crc: d.cubin_crc,
                function_index: d.function_index,
                function,
                pc_offset: d.pc_offset,
                values: vals,
            });
        }
        Ok(m)
    }

    /// Disable collection and unset the configuration: the records dropped.
    fn close(&mut self) -> Result<usize> {
        if !self.open {
            return Ok(0);
        }
        self.open = false;
        let mut disable = Disable {
            struct_size: sizes::DISABLE,
            priv_: std::ptr::null_mut(),
            ctx: self.ctx,
            num_of_dropped_records: 0,
        };
        let d = self.cupti.call("cuptiSassMetricsDisable", &mut disable);
        let mut unset = UnsetConfig {
            struct_size: sizes::UNSET_CONFIG,
            priv_: std::ptr::null_mut(),
            device_index: self.device,
        };
        let u = self.cupti.call("cuptiSassMetricsUnsetConfig", &mut unset);
        d?;
        u?;
        Ok(disable.num_of_dropped_records)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_are_the_headers() {
        // The values the CUDA 13.0 headers' macros give on x86-64 (a C program compiled against
        // cupti_sass_metrics.h, cupti_target.h, cupti_profiler_target.h and cupti_pcsampling.h
        // printed them).
        assert_eq!(sizes::PROFILER_INITIALIZE, 16);
        assert_eq!(sizes::GET_CHIP_NAME, 32);
        assert_eq!(sizes::GET_PROPERTIES, 56);
        assert_eq!(sizes::METRIC_CONFIG, 16);
        assert_eq!(sizes::SET_CONFIG, 36);
        assert_eq!(sizes::UNSET_CONFIG, 20);
        assert_eq!(sizes::ENABLE, 25);
        assert_eq!(sizes::DISABLE, 32);
        assert_eq!(sizes::GET_DATA_PROPERTIES, 40);
        assert_eq!(sizes::INSTANCE_VALUE, 16);
        assert_eq!(sizes::DATA, 48);
        assert_eq!(offset_of!(Data, pc_offset), 32);
        assert_eq!(offset_of!(Data, instance_values), 40);
        assert_eq!(sizes::FLUSH_DATA, 40);
        assert_eq!(offset_of!(FlushData, metrics_data), 40);
        assert_eq!(sizes::GET_CUBIN_CRC, 32);
    }

    #[test]
    fn a_file_that_is_not_cupti_is_refused_with_its_reason() {
        let e = Cupti::open(Path::new("/nonexistent/libcupti.so.13"))
            .err()
            .expect("no library there");
        assert!(format!("{e:#}").contains("cannot load"), "{e:#}");
    }
}
