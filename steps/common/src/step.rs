//! What a step crate provides: its two kernels (the Blackwell kernel, the step's subject, and
//! its Hopper twin), their tuning parameters, and the facts the host needs to launch them.
//! Everything else (compiling, launching, verifying, timing) is shared.
//!
//! Kernel contract, the same for every step and both architectures:
//! `extern "C" __global__ void gemm_kernel(const __grid_constant__ TmaDesc tmap_a,
//!     const __grid_constant__ TmaDesc tmap_b, <T* C | const __grid_constant__ TmaDesc tmap_c>,
//!     int M, int N, int K)` compiled with `-DWB_DTYPE=<__half|__nv_bfloat16> -DWB_IS_BF16=<0|1>`
//! and `-DWB_<PARAM>=<value>` for each tuning parameter, plus the launch the host plans for
//! it as `-DWB_LAUNCH_<FACT>=<value>` ([`KernelShape::launch_defines`]), which every kernel
//! `static_assert`s against its own constants: a host and a kernel that disagree on the block
//! size, the cluster, the TMA boxes or the shared memory fail to compile, on any machine.

pub use crate::arch::Arch;
use crate::compile::KernelSource;
use crate::gpu::{GpuInfo, LaunchDims};
use crate::problem::{Dtype, Shape};
use serde::Serialize;
use std::fmt;

/// One kernel source of a step, with the facts about it that the host, the budget, the checks
/// and the seeded bugs read: declared here, by the step, rather than guessed from its thread
/// count, its number or its text.
#[derive(Debug, Clone, Copy)]
pub struct KernelFile {
    pub text: &'static str,
    /// Its default tuning parameters, each passed as `-DWB_<NAME>=<value>`.
    pub params: &'static [(&'static str, u32)],
    /// SASS opcodes (prefixes) its build must contain.
    pub sass_expect: &'static [&'static str],
    /// How it is launched: block, cluster, schedule.
    pub launch: Launch,
    /// Who stores C, and whether that overlaps the next tile's main loop.
    pub epilogue: Epilogue,
    /// How far ahead of the MMAs its producer may load.
    pub lookahead: Lookahead,
}

/// How a kernel's clusters cover the tiles of C (`WB_LAUNCH_SCHEDULE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// One cluster per tile: the grid is the tiles, and each cluster computes one.
    OnePerTile,
    /// As many clusters as fit on the GPU at once (`--clusters` caps them), each looping over
    /// the tiles in an order fixed by the kernel.
    Persistent,
    /// One cluster per tile is launched; a running cluster cancels a cluster that has not
    /// started yet (`clusterlaunchcontrol.try_cancel`) and computes its tile instead, so the
    /// clusters that run loop over tiles while the hardware decides which run.
    ClusterLaunchControl,
}

impl Schedule {
    /// A CTA may compute more than one tile: its barriers' phases and its k-block counter run
    /// on across tiles.
    pub fn loops(self) -> bool {
        !matches!(self, Schedule::OnePerTile)
    }
    /// The grid is as many clusters as fit at once, not one per tile.
    pub fn fills_the_gpu(self) -> bool {
        matches!(self, Schedule::Persistent)
    }
    /// The value of `WB_LAUNCH_SCHEDULE`.
    pub fn code(self) -> u32 {
        match self {
            Schedule::OnePerTile => 0,
            Schedule::Persistent => 1,
            Schedule::ClusterLaunchControl => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Schedule::OnePerTile => "one cluster per tile",
            Schedule::Persistent => "persistent",
            Schedule::ClusterLaunchControl => "cluster launch control",
        }
    }
}

/// Who stores a kernel's C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Epilogue {
    /// The warps holding the accumulator store C from registers through a pointer, after the
    /// main loop (`epilogue_tile_n` absent).
    Registers,
    /// The warps holding the accumulator stage C in shared memory and store it with TMA, after
    /// the main loop; on Hopper each consumer warpgroup in buffers of its own, ordered by named
    /// barriers.
    Staged,
    /// A dedicated epilogue warpgroup drains one of two tensor-memory accumulators while the
    /// MMAs fill the other (Blackwell).
    Warpgroup,
    /// The consumers hand their rows of C to a dedicated store warp through a shared `out` tile
    /// (`out_full` / `out_empty`) and go back to their wgmma (Hopper).
    StoreWarp,
}

impl Epilogue {
    /// The epilogue of tile i overlaps the main loop of tile i + 1.
    pub fn overlaps_mainloop(self) -> bool {
        matches!(self, Epilogue::Warpgroup | Epilogue::StoreWarp)
    }
    /// C leaves through TMA stores (a tensor map), not a pointer.
    pub fn tma_store(self) -> bool {
        !matches!(self, Epilogue::Registers)
    }
    /// Accumulators the kernel keeps: two when a dedicated epilogue drains one.
    pub fn acc_stages(self) -> u32 {
        match self {
            Epilogue::Warpgroup => 2,
            _ => 1,
        }
    }
}

/// How many k-blocks a kernel's producer may load ahead of the MMAs that read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lookahead {
    /// The whole ring: `STAGES` k-blocks.
    Ring,
    /// `STAGES - n`: step 0's single warp prefetches `STAGES - 2` before its first MMA; a Hopper
    /// consumer releases a slot only after the next k-block's wgmma group was issued
    /// (`wgmma_wait_group<1>`), which keeps one slot back.
    RingLess(u32),
}

impl Lookahead {
    pub fn k_blocks(self, stages: u32) -> u32 {
        match self {
            Lookahead::Ring => stages,
            Lookahead::RingLess(n) => stages.saturating_sub(n),
        }
    }
}

/// A kernel's launch, as its step crate states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    Blackwell(BlackwellLaunch),
    Hopper(HopperLaunch),
}

impl Launch {
    pub fn arch(&self) -> Arch {
        match self {
            Launch::Blackwell(_) => Arch::Blackwell,
            Launch::Hopper(_) => Arch::Hopper,
        }
    }
    pub fn schedule(&self) -> Schedule {
        match self {
            Launch::Blackwell(l) => l.schedule,
            Launch::Hopper(l) => l.schedule,
        }
    }
    pub fn cluster(&self) -> u32 {
        match self {
            Launch::Blackwell(l) => l.cluster,
            Launch::Hopper(l) => l.cluster,
        }
    }
}

/// The static facts of a step: a step crate declares one, `pub static INFO`, and the ladder
/// (`steps/ladder`) lists it. Nothing else about a step is written anywhere but its chapter.
#[derive(Debug)]
pub struct StepInfo {
    pub number: u32,
    /// Crate folder relative to the repository root, e.g. `steps/step0_naive`.
    pub crate_dir: &'static str,
    pub title: &'static str,
    /// The step's one idea, in a sentence.
    pub idea: &'static str,
    /// The same idea as the Hopper twin carries it out.
    pub hopper_idea: &'static str,
    pub blackwell: KernelFile,
    pub hopper: KernelFile,
    pub host: &'static str,
    /// The book chapter, relative to the repository root.
    pub chapter: &'static str,
}

impl StepInfo {
    /// The launch-relevant facts of the kernel for `arch` with parameters `p`.
    pub fn kernel_shape(&self, arch: Arch, p: &Params) -> KernelShape {
        match self.kernel(arch).launch {
            Launch::Blackwell(l) => KernelShape::blackwell(p, l),
            Launch::Hopper(l) => KernelShape::hopper(p, l),
        }
    }
    pub fn kernel(&self, arch: Arch) -> &KernelFile {
        match arch {
            Arch::Blackwell => &self.blackwell,
            Arch::Hopper => &self.hopper,
        }
    }
    pub fn kernel_path(&self, arch: Arch) -> String {
        format!("{}/src/{}", self.crate_dir, arch.file())
    }
    pub fn host_path(&self) -> String {
        format!("{}/src/lib.rs", self.crate_dir)
    }
    /// The kernel as it is now: the checkout's file (so an edit counts without a rebuild), or
    /// the copy built into the runner when it runs outside any checkout. A checkout file that
    /// cannot be read becomes an `#error` naming it, so its compile fails and says why.
    pub fn kernel_source(&self, arch: Arch) -> KernelSource {
        let path = self.kernel_path(arch);
        let text = crate::project::read(&path, self.kernel(arch).text).unwrap_or_else(|e| {
            format!("#error \"cannot read {path} in the workbook checkout: {e}\"\n")
        });
        KernelSource { path, text }
    }
}

/// A kernel's tuning parameters in a fixed order; each reaches it as `-DWB_<NAME>=<value>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Params(Vec<(&'static str, u32)>);

impl Params {
    pub fn new(list: &[(&'static str, u32)]) -> Params {
        Params(list.to_vec())
    }
    /// The value of a parameter the step declares. The names are the step crate's own
    /// constants, so a missing one is a bug in that crate (its tests plan every default).
    pub fn get(&self, name: &str) -> u32 {
        match self.0.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => *v,
            None => panic!("the step reads a parameter it does not declare: {name}"),
        }
    }
    pub fn get_or(&self, name: &str, default: u32) -> u32 {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(default, |(_, v)| *v)
    }
    /// Override one parameter; only names the kernel declares are accepted.
    pub fn set(&mut self, name: &str, value: u32) -> Result<(), String> {
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some((_, v)) => {
                *v = value;
                Ok(())
            }
            None => Err(format!(
                "unknown parameter {name:?}; this kernel has {}",
                self.names().join(", ")
            )),
        }
    }
    /// Apply `NAME=VALUE` overrides (the runner's `--param`).
    pub fn apply(&mut self, overrides: &[String]) -> Result<(), String> {
        for o in overrides {
            let (name, value) = o
                .split_once('=')
                .ok_or_else(|| format!("--param takes NAME=VALUE (got {o:?})"))?;
            let value: u32 = value
                .trim()
                .parse()
                .map_err(|_| format!("--param {name}: {value:?} is not a whole number"))?;
            self.set(name.trim(), value)?;
        }
        Ok(())
    }
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u32)> + '_ {
        self.0.iter().copied()
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

/// How the kernel receives C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OutputArg {
    /// A plain `T*`.
    Pointer,
    /// A tensor map with this box (rows, cols), for TMA stores.
    TensorMap { box_rows: u32, box_cols: u32 },
}

/// One launch of a kernel for one shape.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Plan {
    pub dims: LaunchDims,
    /// TMA boxes (rows, cols) for A and B.
    pub a_box: (u32, u32),
    pub b_box: (u32, u32),
    pub output: OutputArg,
}

/// What the host must know about a kernel to launch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KernelShape {
    /// Rows and columns of C one cluster computes per tile: M and N must be multiples.
    pub cluster_tile: (u32, u32),
    /// K per k-block: K must be a multiple.
    pub tile_k: u32,
    /// CTAs per cluster, side by side along x.
    pub cluster: u32,
    pub threads: u32,
    /// How the clusters cover the tiles.
    pub schedule: Schedule,
    /// TMA boxes (rows, cols) each CTA loads per k-block.
    pub a_box: (u32, u32),
    pub b_box: (u32, u32),
    pub output: OutputArg,
    /// Dynamic shared memory per CTA.
    pub smem_bytes: u32,
}

/// How a Blackwell kernel is launched: what its step crate states, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlackwellLaunch {
    /// CTAs per cluster, side by side along x.
    pub cluster: u32,
    /// Threads per CTA.
    pub threads: u32,
    /// How the clusters cover the tiles.
    pub schedule: Schedule,
}

/// How a Hopper twin is launched: what its step crate states, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopperLaunch {
    /// CTAs per cluster, along M, sharing B.
    pub cluster: u32,
    /// Consumer warpgroups; with more than one, a producer warpgroup comes first.
    pub consumers: u32,
    /// How the clusters cover the tiles.
    pub schedule: Schedule,
}

impl KernelShape {
    /// The Blackwell kernels (`kernel.cu`): per CTA, `tile_m` rows of C (the tensor-memory lanes)
    /// and `tile_n` rows of B; the MMA's N is `cluster * tile_n`, so a cluster covers
    /// `cluster * tile_m` x `cluster * tile_n`. `epilogue_tile_n` = 0: C stored from registers
    /// through a pointer; otherwise the width of the sub-tiles each of 4 epilogue warps stages
    /// (two 32-row buffers each) and stores with TMA.
    pub fn blackwell(p: &Params, launch: BlackwellLaunch) -> KernelShape {
        let BlackwellLaunch {
            cluster,
            threads,
            schedule,
        } = launch;
        let (tile_m, tile_n, tile_k) = (p.get("tile_m"), p.get("tile_n"), p.get("tile_k"));
        let epilogue_tile_n = p.get_or("epilogue_tile_n", 0);
        let staging = 4 * 2 * 32 * epilogue_tile_n * 2;
        KernelShape {
            cluster_tile: (cluster * tile_m, cluster * tile_n),
            tile_k,
            cluster,
            threads,
            schedule,
            a_box: (tile_m, tile_k),
            b_box: (tile_n, tile_k),
            output: tma_output(32, epilogue_tile_n),
            smem_bytes: ring_smem_bytes(p.get("stages"), tile_m, tile_n, tile_k, staging),
        }
    }

    /// The Hopper twins (`kernel_sm90.cu`): a CTA computes `tile_m` x `tile_n` of C at a time,
    /// holding whole `tile_m`-row A and `tile_n`-row B tiles in each ring stage. Clusters lie
    /// along M and share B: each CTA loads `tile_n / cluster` of B's rows and multicasts them,
    /// so a cluster covers `cluster * tile_m` x `tile_n`. `epilogue_tile_n` = 0: C stored from
    /// registers; otherwise C leaves through shared memory in 64-row sub-tiles that wide, stored
    /// with TMA: in steps 2 to 4 each of `consumers` warpgroups stages them in two buffers of its
    /// own; in steps 5 and 6 the consumers take turns writing one `out` buffer, one consumer's
    /// 64 x `tile_n` rows, that the store warp stores from — at their `tile_n` = 256 and
    /// `epilogue_tile_n` = 64 the same byte size (32 KB), which is what is counted here:
    /// `consumers * 2 * 64 * epilogue_tile_n` 16-bit elements.
    pub fn hopper(p: &Params, launch: HopperLaunch) -> KernelShape {
        let HopperLaunch {
            cluster,
            consumers,
            schedule,
        } = launch;
        let (tile_m, tile_n, tile_k) = (p.get("tile_m"), p.get("tile_n"), p.get("tile_k"));
        let epilogue_tile_n = p.get_or("epilogue_tile_n", 0);
        let staging = consumers * 2 * 64 * epilogue_tile_n * 2;
        // Step 0's single warpgroup is producer and consumer; later steps add a producer one.
        let producer_warpgroups = u32::from(consumers > 1);
        KernelShape {
            cluster_tile: (cluster * tile_m, tile_n),
            tile_k,
            cluster,
            threads: 128 * (consumers + producer_warpgroups),
            schedule,
            a_box: (tile_m, tile_k),
            b_box: (tile_n / cluster, tile_k),
            output: tma_output(64, epilogue_tile_n),
            smem_bytes: ring_smem_bytes(p.get("stages"), tile_m, tile_n, tile_k, staging),
        }
    }

    /// The launch as compiler definitions, `WB_LAUNCH_<FACT>`: each kernel `static_assert`s
    /// every one of them against the constants it was written for (the static-assert message
    /// starts with the definition's name), so a plan that does not fit its kernel is a compile
    /// error. A pointer output has C boxes of 0 x 0.
    pub fn launch_defines(&self) -> Vec<(String, String)> {
        let (c_rows, c_cols) = match self.output {
            OutputArg::Pointer => (0, 0),
            OutputArg::TensorMap { box_rows, box_cols } => (box_rows, box_cols),
        };
        [
            ("THREADS", self.threads),
            ("CLUSTER", self.cluster),
            (
                "PERSISTENT",
                u32::from(self.schedule == Schedule::Persistent),
            ),
            ("SCHEDULE", self.schedule.code()),
            ("SMEM_BYTES", self.smem_bytes),
            ("TILE_M", self.cluster_tile.0),
            ("TILE_N", self.cluster_tile.1),
            ("A_BOX_ROWS", self.a_box.0),
            ("B_BOX_ROWS", self.b_box.0),
            ("C_BOX_ROWS", c_rows),
            ("C_BOX_COLS", c_cols),
        ]
        .into_iter()
        .map(|(k, v)| (format!("WB_LAUNCH_{k}"), v.to_string()))
        .collect()
    }

    /// M, N and K must be multiples of what one cluster covers; `what` names the kernel in
    /// the message, e.g. "step 0's Hopper twin".
    pub fn check_shape(&self, s: Shape, what: &str) -> Result<(), String> {
        check_tiled(
            s,
            self.cluster_tile.0,
            self.cluster_tile.1,
            self.tile_k,
            what,
        )
    }

    /// Tiles of C (one per cluster) for `s`.
    pub fn num_tiles(&self, s: Shape) -> u32 {
        (s.m as u32 / self.cluster_tile.0) * (s.n as u32 / self.cluster_tile.1)
    }

    /// The grid rule, the only one: the CTAs along x and y for `s`. One cluster per tile (the
    /// CTAs of a cluster side by side along x, then the column tiles; the row tiles along y),
    /// also under cluster launch control, which cancels launched clusters rather than launching
    /// fewer; a persistent kernel gets `max_clusters` clusters along x (as many as fit on the
    /// GPU at once), but no more than there are tiles. In `u64`, so a caller can refuse a shape
    /// whose grid exceeds CUDA's limits before anything is launched.
    pub fn grid(&self, s: Shape, max_clusters: u32) -> (u64, u64) {
        let tiles_m = s.m as u64 / u64::from(self.cluster_tile.0);
        let tiles_n = s.n as u64 / u64::from(self.cluster_tile.1);
        let cluster = u64::from(self.cluster);
        if self.schedule.fills_the_gpu() {
            let clusters = (tiles_m * tiles_n).min(u64::from(max_clusters)).max(1);
            (clusters * cluster, 1)
        } else {
            (tiles_n * cluster, tiles_m)
        }
    }

    /// The launch for `s` ([`KernelShape::grid`]); `s` must be one [`KernelShape::check_shape`]
    /// accepts and whose grid fits CUDA's limits (`runner step` refuses larger ones first).
    pub fn plan(&self, s: Shape, max_clusters: u32) -> Plan {
        let (x, y) = self.grid(s, max_clusters);
        let grid = (
            u32::try_from(x).unwrap_or(u32::MAX),
            u32::try_from(y).unwrap_or(u32::MAX),
            1,
        );
        Plan {
            dims: LaunchDims {
                grid,
                block: self.threads,
                cluster: (self.cluster, 1, 1),
                smem_bytes: self.smem_bytes,
            },
            a_box: self.a_box,
            b_box: self.b_box,
            output: self.output,
        }
    }

    /// Clusters that fit at once when the GPU cannot be asked: one CTA per SM.
    pub fn default_max_clusters(&self, gpu: Option<&GpuInfo>) -> u32 {
        gpu.map_or(DEFAULT_SM_COUNT, |g| g.sm_count) / self.cluster
    }
}

fn tma_output(box_rows: u32, epilogue_tile_n: u32) -> OutputArg {
    if epilogue_tile_n == 0 {
        OutputArg::Pointer
    } else {
        OutputArg::TensorMap {
            box_rows,
            box_cols: epilogue_tile_n,
        }
    }
}

/// A step, as the harness and the runner name one. Its one implementation is [`StepInfo`]: a
/// step is its declared data, so a call through `&dyn Step` has one place to go.
pub trait Step: Sync {
    fn info(&self) -> &StepInfo;
    /// The default tuning parameters of the step's kernel for `arch`.
    fn params(&self, arch: Arch) -> Params {
        Params::new(self.info().kernel(arch).params)
    }
    /// The kernel's launch-relevant facts for parameters `p`.
    fn kernel(&self, arch: Arch, p: &Params) -> KernelShape {
        self.info().kernel_shape(arch, p)
    }
}

impl Step for StepInfo {
    fn info(&self) -> &StepInfo {
        self
    }
}

/// One kernel to compile and run: a step, which of its kernels, and its parameters.
#[derive(Clone)]
pub struct KernelSpec {
    pub step: &'static dyn Step,
    pub arch: Arch,
    pub params: Params,
}

impl fmt::Debug for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} {} ({})",
            self.step.info().number,
            self.arch,
            self.params
        )
    }
}

impl KernelSpec {
    /// The step's kernel for `arch` with its default parameters.
    pub fn new(step: &'static dyn Step, arch: Arch) -> KernelSpec {
        KernelSpec {
            step,
            arch,
            params: step.params(arch),
        }
    }
    pub fn info(&self) -> &'static StepInfo {
        self.step.info()
    }
    /// The declared facts of this kernel (launch, epilogue, lookahead).
    pub fn facts(&self) -> &'static KernelFile {
        self.info().kernel(self.arch)
    }
    pub fn shape(&self) -> KernelShape {
        self.step.kernel(self.arch, &self.params)
    }
    /// `Err` names the violated constraint, e.g. "M must be a positive multiple of 128 for
    /// step 0's Blackwell kernel (got 100)".
    pub fn check_shape(&self, shape: Shape) -> Result<(), String> {
        let what = format!("step {}'s {}", self.info().number, self.arch.name());
        self.shape().check_shape(shape, &what)
    }
    /// The kernel's own source (a user's `--kernel FILE` replaces it).
    pub fn source(&self) -> KernelSource {
        self.info().kernel_source(self.arch)
    }
    pub fn sass_expect(&self) -> &'static [&'static str] {
        self.info().kernel(self.arch).sass_expect
    }
    /// Compiler definitions for `dtype`.
    pub fn defines(&self, dtype: Dtype) -> Vec<(String, String)> {
        let mut d = vec![
            ("WB_DTYPE".to_string(), dtype.cuda_type().to_string()),
            (
                "WB_IS_BF16".to_string(),
                u32::from(dtype == Dtype::Bf16).to_string(),
            ),
        ];
        d.extend(
            self.params
                .iter()
                .map(|(k, v)| (format!("WB_{}", k.to_ascii_uppercase()), v.to_string())),
        );
        d.extend(self.shape().launch_defines());
        d
    }
}

/// `Err("M must be a positive multiple of 128 for <what> (got 100)")` unless `value` is a
/// positive multiple.
pub fn require_multiple(
    dim: &str,
    value: usize,
    multiple: usize,
    what: &str,
) -> Result<(), String> {
    if multiple == 0 {
        // Only a `--param` of 0 gets here: "a multiple of 0" would read as a bug of the runner.
        return Err(format!(
            "{what} has a tile of 0 along {dim} (a --param set to 0?): its tile sizes must be at least 1"
        ));
    }
    if value == 0 || !value.is_multiple_of(multiple) {
        Err(format!(
            "{dim} must be a positive multiple of {multiple} for {what} (got {value})"
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
    what: &str,
) -> Result<(), String> {
    require_multiple("M", shape.m, tile_m as usize, what)?;
    require_multiple("N", shape.n, tile_n as usize, what)?;
    require_multiple("K", shape.k, tile_k as usize, what)
}

/// Dynamic shared memory of a kernel whose `SharedStorage` starts with a `stages`-deep ring of
/// 16-bit A (`a_rows` x `tile_k`) and B (`b_rows` x `tile_k`) tiles, then `extra` bytes of
/// 1024-aligned buffers, then the barriers: one 1024-byte block for the barriers and the
/// tensor-memory address (the struct rounds up to its 1024-byte alignment), plus 1024 bytes of
/// slack for aligning the dynamic shared-memory base by hand. Kernels trap if it is too small.
pub fn ring_smem_bytes(stages: u32, a_rows: u32, b_rows: u32, tile_k: u32, extra: u32) -> u32 {
    stages * (a_rows + b_rows) * tile_k * 2 + extra + 1024 + 1024
}

/// Shared memory a CTA may opt into on sm_90 and sm_100 (227 KiB), for checks without a GPU.
pub const MAX_SMEM_PER_CTA: u32 = 232448;

/// SMs assumed when planning without a GPU: a B200's 148.
pub const DEFAULT_SM_COUNT: u32 = 148;

#[cfg(test)]
mod tests {
    use super::*;

    const S: Shape = Shape {
        m: 4096,
        n: 8192,
        k: 4096,
    };

    fn launch(cluster: u32, threads: u32, persistent: bool) -> BlackwellLaunch {
        BlackwellLaunch {
            cluster,
            threads,
            schedule: if persistent {
                Schedule::Persistent
            } else {
                Schedule::OnePerTile
            },
        }
    }

    fn blackwell_params(tile_n: u32, epilogue_tile_n: u32) -> Params {
        Params::new(&[
            ("tile_m", 128),
            ("tile_n", tile_n),
            ("tile_k", 64),
            ("stages", 4),
            ("epilogue_tile_n", epilogue_tile_n),
        ])
    }

    #[test]
    fn blackwell_plans_follow_the_kernel_shape() {
        let one = KernelShape::blackwell(&blackwell_params(256, 0), launch(1, 128, false));
        let p = one.plan(S, 148);
        assert_eq!(p.dims.grid, (32, 32, 1));
        assert_eq!(p.output, OutputArg::Pointer);
        assert_eq!(p.dims.smem_bytes, 198656);
        let pair = KernelShape::blackwell(&blackwell_params(128, 64), launch(2, 128, false));
        let p = pair.plan(S, 74);
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
        let persistent = KernelShape::blackwell(&blackwell_params(128, 64), launch(2, 256, true));
        assert_eq!(persistent.plan(S, 74).dims.grid, (148, 1, 1));
        let d = persistent.launch_defines();
        let get = |k: &str| d.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("WB_LAUNCH_THREADS"), Some("256"));
        assert_eq!(get("WB_LAUNCH_CLUSTER"), Some("2"));
        assert_eq!(get("WB_LAUNCH_PERSISTENT"), Some("1"));
        assert_eq!(get("WB_LAUNCH_SCHEDULE"), Some("1"));
        assert_eq!(get("WB_LAUNCH_TILE_N"), Some("256"));
        assert_eq!(get("WB_LAUNCH_C_BOX_ROWS"), Some("32"));
        let smem = persistent.smem_bytes.to_string();
        assert_eq!(get("WB_LAUNCH_SMEM_BYTES"), Some(smem.as_str()));
        let d = one.launch_defines();
        assert_eq!(
            d.iter().find(|(n, _)| n == "WB_LAUNCH_C_BOX_COLS"),
            Some(&("WB_LAUNCH_C_BOX_COLS".to_string(), "0".to_string())),
            "C through a pointer"
        );
        assert_eq!(persistent.default_max_clusters(None), 74);
        let few = Shape {
            m: 512,
            n: 1024,
            k: 64,
        };
        assert_eq!(persistent.num_tiles(few), 8);
        assert_eq!(persistent.plan(few, 74).dims.grid, (16, 1, 1));
        assert_eq!(persistent.plan(few, 3).dims.grid, (6, 1, 1));
        assert!(pair
            .check_shape(
                Shape {
                    m: 128,
                    n: 256,
                    k: 64
                },
                "step 3"
            )
            .unwrap_err()
            .starts_with("M must be a positive multiple of 256"));
    }

    #[test]
    fn one_grid_rule_for_every_schedule() {
        let p = blackwell_params(128, 64);
        let shape_of = |schedule| {
            KernelShape::blackwell(
                &p,
                BlackwellLaunch {
                    cluster: 2,
                    threads: 256,
                    schedule,
                },
            )
        };
        let (per_tile, persistent, clc) = (
            shape_of(Schedule::OnePerTile),
            shape_of(Schedule::Persistent),
            shape_of(Schedule::ClusterLaunchControl),
        );
        // 16 row tiles x 32 column tiles of 256 x 256.
        assert_eq!(per_tile.grid(S, 74), (64, 16));
        assert_eq!(persistent.grid(S, 74), (148, 1));
        // Cluster launch control launches a cluster per tile and cancels, rather than launching
        // fewer.
        assert_eq!(clc.grid(S, 74), per_tile.grid(S, 74));
        assert_eq!(clc.plan(S, 74).dims.grid, (64, 16, 1));
        assert!(clc.schedule.loops() && !clc.schedule.fills_the_gpu());
        let defines = clc.launch_defines();
        assert!(defines.contains(&("WB_LAUNCH_SCHEDULE".to_string(), "2".to_string())));
        assert!(defines.contains(&("WB_LAUNCH_PERSISTENT".to_string(), "0".to_string())));
        // In 64 bits: a shape whose grid CUDA cannot launch is measured, not wrapped.
        let huge = Shape {
            m: 1 << 30,
            n: 1 << 30,
            k: 64,
        };
        assert_eq!(per_tile.grid(huge, 74), (1 << 23, 1 << 22));
    }

    #[test]
    fn hopper_plans_share_b_across_the_cluster() {
        let p = Params::new(&[
            ("tile_m", 128),
            ("tile_n", 256),
            ("tile_k", 64),
            ("stages", 4),
            ("epilogue_tile_n", 64),
        ]);
        let pair = KernelShape::hopper(
            &p,
            HopperLaunch {
                cluster: 2,
                consumers: 2,
                schedule: Schedule::OnePerTile,
            },
        );
        assert_eq!(pair.cluster_tile, (256, 256));
        assert_eq!(pair.threads, 384, "a producer and two consumer warpgroups");
        assert_eq!(pair.a_box, (128, 64));
        assert_eq!(pair.b_box, (128, 64), "each CTA loads half of B's 256 rows");
        assert_eq!(
            pair.smem_bytes,
            4 * (128 + 256) * 128 + 2 * 2 * 64 * 128 + 2048,
            "the whole B tile sits in each CTA's ring"
        );
        assert!(pair.smem_bytes <= 232448, "fits an H100's 227 KiB");
        assert_eq!(pair.plan(S, 66).dims.grid, (64, 16, 1));
        let basic = Params::new(&[
            ("tile_m", 128),
            ("tile_n", 128),
            ("tile_k", 64),
            ("stages", 4),
        ]);
        let one = KernelShape::hopper(
            &basic,
            HopperLaunch {
                cluster: 1,
                consumers: 1,
                schedule: Schedule::OnePerTile,
            },
        );
        assert_eq!(one.threads, 128, "step 0: one warpgroup does everything");
        assert_eq!(one.output, OutputArg::Pointer);
        assert_eq!(one.plan(S, 132).dims.grid, (64, 32, 1));
    }

    #[test]
    fn params_are_overridden_by_name_only() {
        let mut p = Params::new(&[("tile_m", 128), ("stages", 4)]);
        p.apply(&["stages=5".to_string()]).unwrap();
        assert_eq!(p.get("stages"), 5);
        assert_eq!(p.to_string(), "tile_m=128 stages=5");
        assert!(p
            .apply(&["stage=3".to_string()])
            .unwrap_err()
            .contains("unknown parameter \"stage\"; this kernel has tile_m, stages"));
        assert!(p.apply(&["stages".to_string()]).is_err());
        assert!(p.apply(&["stages=-1".to_string()]).is_err());
        assert_eq!(p.get_or("epilogue_tile_n", 0), 0);
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
        assert!(check_tiled(ok, 128, 256, 64, "step 1").is_ok());
        let bad = Shape {
            m: 256,
            n: 500,
            k: 128,
        };
        assert!(check_tiled(bad, 128, 256, 64, "step 1")
            .unwrap_err()
            .starts_with("N must be"));
    }

    #[test]
    fn shape_errors_name_the_constraint() {
        assert!(require_multiple("M", 256, 128, "step 0").is_ok());
        let e = require_multiple("M", 100, 128, "step 0's Blackwell kernel").unwrap_err();
        assert_eq!(
            e,
            "M must be a positive multiple of 128 for step 0's Blackwell kernel (got 100)"
        );
        assert!(require_multiple("K", 0, 64, "step 0").is_err());
    }
}
