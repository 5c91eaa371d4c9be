//! Stress runs of the Hopper twins (`runner step N --arch sm_90a --stress SEED`): the twin is
//! built with [`DEFINE`] and [`SEED_DEFINE`], and the wrappers of `steps/include` (common.cuh's
//! "Stress builds", hopper.cuh) sleep for a pseudo-random while at the named [`POINTS`]. A stock
//! twin must still verify under every seed; a latent ordering bug (a race the usual timing hides,
//! such as the twin mutations caught by [`TwinCatch::Stress`]) should give a wrong result on some.
//! Two classes the delays alone catch only by luck are caught on every seed by the twin check that
//! every stress build carries ([`CHECK_DEFINE`]): a ring slot released to the producer while a
//! wgmma group still reads it, and a staging buffer refilled before its bulk store has read it.
//! The kernels are not edited: only the wrappers they call.
//!
//! [`cases`] is the plan of the twins' stress pass (`runner check twins --stress`, which
//! `gpu/stress.sh` runs): the stock twins at their default shape and, persistent ones, with a
//! capped grid; and every twin mutation caught by stress, on each seed. (The pass adds the
//! statically caught twin mutations, which must be refused, and plain runs for the record.)

use crate::gpu::CudaResultExt;
use crate::mutation::{Expect, TwinCatch, TWIN_MUTATIONS};
use crate::problem::Shape;
use crate::step::{Arch, StepInfo};
use anyhow::{bail, Result};
use serde::Serialize;

/// The compiler definition that turns the delays on...
pub const DEFINE: &str = "WB_STRESS";
/// ...and the one that seeds them.
pub const SEED_DEFINE: &str = "WB_STRESS_SEED";

/// The points at which a stress build may sleep, as `wb::stress::Point` names them, and the
/// wrappers that hold them.
pub const POINTS: &[(&str, &str)] = &[
    ("AFTER_WGMMA_COMMIT", "hp::wgmma_commit_group"),
    ("AFTER_WGMMA_WAIT", "hp::wgmma_wait_group"),
    (
        "BEFORE_ARRIVE",
        "wb::mbarrier_arrive, _expect_tx, _cluster, _cluster_relaxed",
    ),
    ("AFTER_WAIT", "wb::mbarrier_wait, wb::mbarrier_wait_cluster"),
    (
        "BEFORE_TMA_STORE",
        "wb::tma_store_2d, hp::tma_store_2d_hint",
    ),
    (
        "BEFORE_TMA_LOAD",
        "wb::tma_load_2d, _multicast, hp::tma_load_2d_hint, _multicast_hint",
    ),
    (
        "AFTER_BARRIER",
        "wb::cta_sync, wb::cluster_sync, hp::named_barrier_sync",
    ),
];

/// The seeds the GPU check runs every stress case with, chosen for their hot points
/// ([`hot_points`]): together they make every point hot, and seed 11 makes only the TMA load and
/// store points hot, so the store warp is slow against consumers that are not (a test holds both).
/// Seed 3 makes the thread barriers hot, seed 6 every point but those.
pub const CHECK_SEEDS: &[u64] = &[3, 6, 11];

/// The shape a persistent twin's stress case runs with beside the default: small K, so a
/// consumer's main loop is short against the store warp's stores, and a grid capped to
/// [`PERSISTENT_CLUSTERS`] clusters, so each loops over many tiles.
pub const PERSISTENT_SHAPE: Shape = Shape {
    m: 2048,
    n: 2048,
    k: 512,
};
pub const PERSISTENT_CLUSTERS: u32 = 2;

/// The compiler definition that checks [`hot_points`] against the device's own computation.
pub const HOT_DEFINE: &str = "WB_STRESS_HOT";

/// The compiler definition of the twin check (common.cuh's "Twin check builds"), which every
/// stress build has: the wrappers keep a shadow of the wgmma groups' reads and of the staging
/// buffers' bulk reads and trap, naming the rule, at the first hand-off no wait orders
/// (release-before-wgmma-done, staging-rewrite-before-read). Its verdict follows the order of
/// waits and arrivals, not the timing, so it is the same under every seed.
pub const CHECK_DEFINE: &str = "WB_TWIN_CHECK";

/// splitmix64's finaliser, as `wb::stress::mix`.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hot points of a stress build with `seed` (bit p: [`POINTS`]`[p]`), as the device computes
/// them (`wb::stress::hot_points`; a stress build asserts that the two agree): point p is hot when
/// two bits of the seed's hash are both 0, so each with probability 1/4, and at least one is.
pub fn hot_points(seed: u64) -> u32 {
    let h = mix(seed.wrapping_add(0x9E37_79B9_7F4A_7C15));
    let n = POINTS.len() as u32;
    let hot = (0..n)
        .filter(|p| (h >> (2 * p)) & 3 == 0)
        .fold(0, |m, p| m | (1 << p));
    if hot != 0 {
        hot
    } else {
        1 << ((h >> 32) % u64::from(n))
    }
}

/// The names of `seed`'s hot points, for reports.
pub fn hot_point_names(seed: u64) -> Vec<&'static str> {
    let hot = hot_points(seed);
    POINTS
        .iter()
        .enumerate()
        .filter(|(i, _)| (hot >> i) & 1 == 1)
        .map(|(_, (name, _))| *name)
        .collect()
}

/// The compiler definitions of a stress build with `seed`.
pub fn defines(seed: u64) -> Vec<(String, String)> {
    vec![
        (DEFINE.to_string(), "1".to_string()),
        // An unsigned 64-bit literal: any seed the command line takes compiles.
        (SEED_DEFINE.to_string(), format!("{seed}ull")),
        (HOT_DEFINE.to_string(), format!("{}u", hot_points(seed))),
        (CHECK_DEFINE.to_string(), "1".to_string()),
    ]
}

/// A stress build applies to the Hopper twins only: the Blackwell kernels run under the tcgen05
/// emulation, whose own schedule perturbation (`--emu-seed`) does this job.
pub fn check_arch(arch: Arch) -> Result<()> {
    if arch != Arch::Hopper {
        bail!("--stress applies to the Hopper twins (--arch sm_90a), which run natively; the Blackwell kernel's emulation perturbs its schedule with --emu-seed instead");
    }
    Ok(())
}

/// The twin check's record of its first failure (common.cuh's `wb::check::Fault`), in
/// host-mapped memory: the device writes it just before it traps, and the host reads it after the
/// launch failed, when the context can no longer be read.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    /// 0: no failure; else a `wb::check::Rule`.
    pub rule: u32,
    pub cta: u32,
    pub warp: u32,
    /// The rule's details, in the device's order (see [`Fault::describe`]).
    pub detail: [u32; 7],
    /// The kernel's expression for the barrier, NUL-terminated.
    pub bar: [u8; 48],
}

/// The rules of the twin check, as the device numbers them (`wb::check::Rule`) and the GPU check
/// and the mutations' `caught_by` name them.
pub const CHECK_RULES: &[(u32, &str)] = &[
    (1, "release-before-wgmma-done"),
    (2, "staging-rewrite-before-read"),
    (3, "staging-rewrite-before-read"),
    (HANG_RULE, "wait-bound-exceeded"),
];

/// The rule a hang diagnosis build traps with (`wb::check::WAIT_BOUND_EXCEEDED`): an mbarrier
/// wait outlived its bound.
pub const HANG_RULE: u32 = 4;

/// The compiler definition of a hang diagnosis build (common.cuh's "Hang diagnosis builds"),
/// which needs the twin check's ([`CHECK_DEFINE`]) records...
pub const HANG_DEFINE: &str = "WB_HANG_DIAG";
/// ...and the one that bounds every mbarrier wait, in ns.
pub const HANG_BOUND_DEFINE: &str = "WB_HANG_DIAG_NS";

/// The bound of a wait in the hang diagnosis build the runner re-runs a hung twin with: far
/// above any wait of a working kernel (microseconds), far below the runner's timeouts.
pub const HANG_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// The compiler definitions of a hang diagnosis build whose waits are bounded by `bound`.
pub fn hang_defines(bound: std::time::Duration) -> Vec<(String, String)> {
    vec![
        (CHECK_DEFINE.to_string(), "1".to_string()),
        (HANG_DEFINE.to_string(), "1".to_string()),
        (
            HANG_BOUND_DEFINE.to_string(),
            format!("{}ull", bound.as_nanos().max(1)),
        ),
    ]
}

/// The waiting warps a hang report names at most (`wb::check::WAITS`).
pub const WAITS: usize = 32;

/// One warp whose mbarrier wait outlived the bound of a hang diagnosis build
/// (`wb::check::Wait`, which the device writes into host-mapped memory before it traps).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// 1 once the device has written the whole record.
    pub done: u32,
    pub cta: u32,
    pub warp: u32,
    /// Its CTA's rank in the cluster.
    pub rank: u32,
    /// The trace phase the warp entered last, + 1 (0: none): it names the warp's role.
    pub phase: u32,
    /// That phase's argument (a k-block).
    pub phase_arg: u32,
    /// The persistent loop's tile, + 1 (0: none).
    pub tile: u32,
    /// The barrier's shared-memory offset.
    pub bar: u32,
    /// The parity awaited.
    pub parity: u32,
    /// Arrivals that complete one phase (mbarrier.init's count; 0: a barrier the check does
    /// not know).
    pub count: u32,
    /// Arrivals on the barrier so far, over all its phases (the check's shadow count).
    pub arrivals: u32,
    /// How many waiting warps had claimed a record when this one did, itself included.
    pub claimed: u32,
    /// How long it had waited when it recorded, in µs.
    pub waited_us: u32,
    /// The kernel's expression for the barrier, NUL-terminated.
    pub name: [u8; 44],
}

impl Default for Wait {
    fn default() -> Wait {
        Wait {
            done: 0,
            cta: 0,
            warp: 0,
            rank: 0,
            phase: 0,
            phase_arg: 0,
            tile: 0,
            bar: 0,
            parity: 0,
            count: 0,
            arrivals: 0,
            claimed: 0,
            waited_us: 0,
            name: [0; 44],
        }
    }
}

/// What the host maps: the twin check's record, then the hang diagnosis build's table of waits
/// (`wb_hang_waits`).
#[repr(C)]
struct Area {
    fault: Fault,
    waits: [Wait; WAITS],
}

/// The role the trace phase a warp entered last gives it, in the kernels' words, and what it
/// waits for.
fn role(phase: Option<crate::trace::Phase>, warp: u32) -> String {
    use crate::trace::Phase;
    match phase {
        Some(Phase::SlotWait) => "the producer, waiting for a free ring slot".into(),
        Some(Phase::DataWait) => "a consumer, waiting for a k-block to land".into(),
        Some(Phase::AccWait) if warp < 4 => {
            "the store warp, waiting for a consumer's rows in `out`".into()
        }
        Some(Phase::OutEmptyWait) => {
            "a consumer, waiting for the store warp to have read `out`".into()
        }
        Some(Phase::TurnWait) => "a ping-pong consumer, waiting for its turn".into(),
        Some(Phase::Tail) => "the producer, at its tail".into(),
        Some(Phase::Setup | Phase::Idle) | None => "a warp whose role had not begun".into(),
        Some(p) => format!("a warp in phase {}", p.device_name()),
    }
}

impl Wait {
    /// The barrier's name in the kernel, or its offset.
    pub fn barrier(&self) -> String {
        let end = self
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.name.len());
        let name = String::from_utf8_lossy(&self.name[..end]);
        if name.is_empty() {
            format!("the mbarrier at smem +0x{:x}", self.bar)
        } else {
            format!("{name} (smem +0x{:x})", self.bar)
        }
    }

    /// What arrived on the barrier, from the shadow count and the parity awaited: the phase it
    /// waits for is the barrier's current one, whose parity is the one awaited (a wait for the
    /// other parity would have succeeded), so whole phases of `count` arrivals account for the
    /// rest; when they do not add up, every arrival of the current phase is in and it waits for
    /// TMA bytes.
    pub fn arrived(&self) -> String {
        let (count, all) = (self.count, self.arrivals);
        if count == 0 {
            return "the check does not know this barrier: no count of what arrived".into();
        }
        let whole = all / count;
        if whole % 2 == self.parity % 2 {
            format!(
                "{} of its {count} arrivals are in ({all} on this barrier in all, {whole} phases complete): {} missing",
                all % count,
                count - all % count
            )
        } else {
            format!(
                "all {count} of its arrivals are in ({all} in all, {} phases complete), yet the phase has not completed: it waits for transaction bytes (TMA loads counted by an expect_tx that never landed)",
                whole.saturating_sub(1)
            )
        }
    }

    /// One line of a hang report.
    pub fn describe(&self) -> String {
        let phase = (self.phase > 0)
            .then(|| u8::try_from(self.phase - 1).ok())
            .flatten()
            .and_then(crate::trace::Phase::from_id);
        let mut at = Vec::new();
        if matches!(
            phase,
            Some(crate::trace::Phase::SlotWait | crate::trace::Phase::DataWait)
        ) {
            at.push(format!("k-block {}", self.phase_arg));
        }
        if self.tile > 0 {
            at.push(format!("tile {}", self.tile - 1));
        }
        let at = if at.is_empty() {
            String::new()
        } else {
            format!(" ({})", at.join(", "))
        };
        format!(
            "CTA {} (cluster rank {}) warp {}, {}{at}: waits on {} for parity {} ({:.1} s and counting); {}",
            self.cta,
            self.rank,
            self.warp,
            role(phase, self.warp),
            self.barrier(),
            self.parity,
            f64::from(self.waited_us) / 1e6,
            self.arrived()
        )
    }
}

/// A hang diagnosis build's report: the trap's record and every wait recorded, the same wait
/// (role, barrier, parity, what arrived) of many CTAs told once with how many.
pub fn hang_report(
    fault: &Fault,
    waits: &[Wait],
    claimed: u32,
    bound: std::time::Duration,
) -> Vec<String> {
    let mut lines = vec![format!(
        "twin hang: {}{} warp(s) waited longer than {:.1} s on an mbarrier (a hang diagnosis build, every wait bounded); warp {} of CTA {} trapped on {} after twice that:",
        if claimed as usize >= WAITS { "at least " } else { "" },
        claimed,
        bound.as_secs_f64(),
        fault.warp,
        fault.cta,
        {
            let end = fault.bar.iter().position(|&b| b == 0).unwrap_or(fault.bar.len());
            let n = String::from_utf8_lossy(&fault.bar[..end]).into_owned();
            if n.is_empty() { "an mbarrier".to_string() } else { n }
        }
    )];
    // Group the waits that differ only in their CTA and warp.
    let mut groups: Vec<(String, Vec<&Wait>)> = Vec::new();
    for w in waits {
        let key = format!(
            "{}|{}|{}|{}|{}",
            w.phase,
            w.bar,
            w.parity,
            w.arrivals % w.count.max(1),
            w.warp % 4 == w.warp
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(w),
            None => groups.push((key, vec![w])),
        }
    }
    for (_, ws) in &groups {
        let more = if ws.len() > 1 {
            format!(" [and {} more warp(s) alike]", ws.len() - 1)
        } else {
            String::new()
        };
        lines.push(format!("  waiting: {}{more}", ws[0].describe()));
    }
    if claimed as usize >= WAITS {
        lines.push(format!(
            "  (the report holds {WAITS} records: more warps may wait than it names)"
        ));
    }
    lines
}

impl Default for Fault {
    fn default() -> Fault {
        Fault {
            rule: 0,
            cta: 0,
            warp: 0,
            detail: [0; 7],
            bar: [0; 48],
        }
    }
}

impl Fault {
    /// The rule's name, e.g. `release-before-wgmma-done`.
    pub fn rule_name(&self) -> &'static str {
        CHECK_RULES
            .iter()
            .find(|(n, _)| *n == self.rule)
            .map(|(_, name)| *name)
            .unwrap_or("unknown-rule")
    }

    /// The failure in words: `twin check RULE: ...`, naming the CTA, the warp, the barrier and
    /// the shared memory.
    pub fn describe(&self) -> String {
        let end = self
            .bar
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.bar.len());
        let bar = String::from_utf8_lossy(&self.bar[..end]);
        let bar = if bar.is_empty() {
            "an mbarrier".into()
        } else {
            bar
        };
        let [a, b, c, d, e, f, g] = self.detail;
        let (cta, warp, rule) = (self.cta, self.warp, self.rule_name());
        let what = match self.rule {
            1 => format!(
                "warp {warp} of CTA {cta} arrives on {bar} (smem +0x{a:x}, CTA rank {b}), after which a TMA load refills smem +0x{c:x}, while its wgmma group {d} still reads smem [+0x{:x}, +0x{:x}) (groups {e} to {f} are not yet retired by a wgmma.wait_group): the slot goes back to the producer before the tensor core has read it",
                (g >> 16) << 4,
                (g & 0xFFFF) << 4
            ),
            2 => format!(
                "warp {warp} of CTA {cta} arrives on {bar} (smem +0x{a:x}) and so fills the TMA store source smem +0x{b:x} again, but {c} of its {d} bulk reads are not known to it as retired: no wait orders this fill after the cp.async.bulk.wait_group.read that covers them"
            ),
            3 => format!(
                "warp {warp} of CTA {cta} waited on {bar} and issues a TMA store from smem +0x{a:x}, but {b} arrival(s) filled that buffer again without its wait acquiring them: the buffer was rewritten before this store read it"
            ),
            HANG_RULE => format!(
                "warp {warp} of CTA {cta} waited on {bar} (smem +0x{a:x}) for parity {b} longer than the hang diagnosis build's bound"
            ),
            _ => format!("warp {warp} of CTA {cta}: rule {} (unknown to this runner)", self.rule),
        };
        format!("twin check {rule}: {what}")
    }
}

/// The host side of the twin check of a stress build: the mapped record the kernel's
/// `wb_check_fault` points to, and in a hang diagnosis build the table of waits its
/// `wb_hang_waits` points to, in the same mapped allocation.
pub struct CheckRecord {
    host: *mut Area,
    dev: cudarc::driver::sys::CUdeviceptr,
    /// The wait bound of a hang diagnosis build; None: not one.
    hang_bound: Option<std::time::Duration>,
}

impl CheckRecord {
    /// Allocate the record, empty, and point the module's `wb_check_fault` at it (and, in a
    /// hang diagnosis build with waits bounded by `hang_bound`, its `wb_hang_waits`).
    pub fn install(
        gpu: &crate::gpu::Gpu,
        module: &std::sync::Arc<cudarc::driver::CudaModule>,
        hang_bound: Option<std::time::Duration>,
    ) -> Result<CheckRecord> {
        use cudarc::driver::sys;
        let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: out-parameters of the driver; `Drop` frees `host` with cuMemFreeHost.
        unsafe {
            crate::gpu::check(
                sys::cuMemHostAlloc(
                    &mut host,
                    std::mem::size_of::<Area>(),
                    0x02, /* DEVICEMAP */
                ),
                "cuMemHostAlloc",
            )?;
        }
        // One value owns the allocation from here on (its `Drop` frees it, also on the errors
        // below). Not `CheckRecord { dev, ..record }`: the pointer is `Copy`, so that would leave
        // a second owner whose drop at the end of this function freed the memory the kernel then
        // writes and `fault` reads.
        let mut record = CheckRecord {
            host: host.cast(),
            dev: 0,
            hang_bound,
        };
        // SAFETY: `host` was mapped just above.
        unsafe {
            crate::gpu::check(
                sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0),
                "cuMemHostGetDevicePointer",
            )?;
            record.host.write_volatile(Area {
                fault: Fault::default(),
                waits: [Wait::default(); WAITS],
            });
        }
        record.dev = dev;
        let s = &gpu.stream;
        let mut view = module.get_global("wb_check_fault", s).map_err(|e| {
            anyhow::anyhow!(
                "the kernel has no wb_check_fault: was it built with -D{CHECK_DEFINE}=1? ({e:?})"
            )
        })?;
        s.memcpy_htod(&record.dev.to_le_bytes(), &mut view)
            .cuda("copy to the GPU")?;
        if hang_bound.is_some() {
            let waits = record.dev + std::mem::offset_of!(Area, waits) as u64;
            let mut view = module.get_global("wb_hang_waits", s).map_err(|e| {
                anyhow::anyhow!(
                    "the kernel has no wb_hang_waits: was it built with -D{HANG_DEFINE}=1? ({e:?})"
                )
            })?;
            s.memcpy_htod(&waits.to_le_bytes(), &mut view)
                .cuda("copy to the GPU")?;
        }
        s.synchronize().cuda("wait for the GPU")?;
        Ok(record)
    }

    /// The failure the kernel recorded before trapping, if any; readable after the context died.
    pub fn fault(&self) -> Option<Fault> {
        // SAFETY: pinned host memory of one Area; `addr_of!` reads the field without a
        // reference to memory the device writes.
        let f = unsafe { std::ptr::addr_of!((*self.host).fault).read_volatile() };
        (f.rule != 0).then_some(f)
    }

    /// The waits a hang diagnosis build recorded (complete records only), and how many warps
    /// had claimed one by the last of them.
    pub fn waits(&self) -> (Vec<Wait>, u32) {
        // SAFETY: as in `fault`; a record still being written reads `done` 0 and is left out.
        let t = unsafe { std::ptr::addr_of!((*self.host).waits).read_volatile() };
        let waits: Vec<Wait> = t.iter().filter(|w| w.done == 1).copied().collect();
        let claimed = waits.iter().map(|w| w.claimed).max().unwrap_or(0);
        (waits, claimed)
    }

    /// The recorded failure in words: a rule's one line, or a hang diagnosis build's report.
    pub fn report(&self) -> Option<String> {
        let f = self.fault()?;
        match (f.rule, self.hang_bound) {
            (HANG_RULE, Some(bound)) => {
                let (waits, claimed) = self.waits();
                Some(hang_report(&f, &waits, claimed, bound).join("\n"))
            }
            _ => Some(f.describe()),
        }
    }
}

impl Drop for CheckRecord {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc in `install`, freed once.
        unsafe {
            cudarc::driver::sys::cuMemFreeHost(self.host.cast());
        }
    }
}

/// One run of the stress pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StressCase {
    pub step: u32,
    pub shape: Shape,
    /// Persistent twins: the capped grid (`--clusters`).
    pub clusters: Option<u32>,
    pub seed: u64,
    /// A twin mutation (`--mutate`), run with the static checks off; None: the stock twin.
    pub mutation: Option<&'static str>,
    /// What must happen: a stock twin and a harmless edit verify under every seed; a bug is
    /// caught on every seed (the twin check's trap, naming the mutation's `caught_by` rule, or
    /// where that is empty also a failed verification or a hang the runner's timeout reports).
    pub expect: Expect,
}

impl StressCase {
    /// A name for tables and file names: `t5-2048x2048x512-c2-s3[-mutation]`.
    pub fn name(&self) -> String {
        let mut s = format!("t{}-{}", self.step, self.shape);
        if let Some(c) = self.clusters {
            s.push_str(&format!("-c{c}"));
        }
        s.push_str(&format!("-s{}", self.seed));
        if let Some(m) = self.mutation {
            s.push('-');
            s.push_str(m);
        }
        s
    }
}

/// The stress pass over the twins of `steps`, in order. For each seed, every stock twin at the
/// default shape and, if it loops over tiles, at [`PERSISTENT_SHAPE`] with
/// [`PERSISTENT_CLUSTERS`] clusters; then every stress-caught twin mutation on each of its steps,
/// at the same shapes: the twin check catches them whatever the timing, so on every seed and
/// shape.
///
/// Run each case in a process of its own, as `runner check twins --stress` does: a seeded bug
/// may hang, and the runner ends a hung kernel's process (exit code 124, `common::timing`).
/// The shapes (and cluster caps) the stress pass runs `info`'s twin at: the default shape and,
/// if the twin loops over tiles, [`PERSISTENT_SHAPE`], where each cluster takes many tiles (a
/// persistent grid capped at [`PERSISTENT_CLUSTERS`]).
pub fn shapes(info: &StepInfo) -> Vec<(Shape, Option<u32>)> {
    let mut v = vec![(Shape::DEFAULT, None)];
    let schedule = info.hopper.launch.schedule();
    if schedule.loops() {
        let cap = schedule.fills_the_gpu().then_some(PERSISTENT_CLUSTERS);
        v.push((PERSISTENT_SHAPE, cap));
    }
    v
}

pub fn cases(steps: &[&StepInfo], seeds: &[u64]) -> Vec<StressCase> {
    let mut out = Vec::new();
    for &info in steps {
        let step = info.number;
        for &seed in seeds {
            for (shape, clusters) in shapes(info) {
                out.push(StressCase {
                    step,
                    shape,
                    clusters,
                    seed,
                    mutation: None,
                    expect: Expect::Harmless,
                });
            }
        }
    }
    for t in TWIN_MUTATIONS
        .iter()
        .filter(|t| t.caught == TwinCatch::Stress)
    {
        for &info in steps {
            let step = info.number;
            if !t.applies_to(info) {
                continue;
            }
            for (shape, clusters) in shapes(info) {
                for &seed in seeds {
                    out.push(StressCase {
                        step,
                        shape,
                        clusters,
                        seed,
                        mutation: Some(t.mutation.name),
                        expect: t.mutation.expect,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twin_mutations_caught_at_run_time_name_a_rule_of_the_twin_check() {
        for t in TWIN_MUTATIONS
            .iter()
            .filter(|t| t.caught == TwinCatch::Stress)
        {
            let m = &t.mutation;
            if !m.caught_by.is_empty() {
                assert!(
                    CHECK_RULES.iter().any(|(_, rule)| *rule == m.caught_by),
                    "{}: the twin check has no rule {}",
                    m.name,
                    m.caught_by
                );
            }
        }
    }

    fn point(name: &str) -> u32 {
        let i = POINTS.iter().position(|(n, _)| *n == name);
        1 << i.expect("a point of POINTS")
    }

    #[test]
    fn the_check_seeds_make_every_point_hot_and_one_a_slow_store_warp() {
        let all = CHECK_SEEDS.iter().fold(0, |m, &s| m | hot_points(s));
        assert_eq!(
            all,
            (1 << POINTS.len()) - 1,
            "every point hot under some seed"
        );
        // The consumers pass these every k-block: a seed that leaves them cold and makes the TMA
        // store hot slows the store warp against them (twin-out-empty-same-tile-only).
        let consumer = [
            "AFTER_WGMMA_COMMIT",
            "AFTER_WGMMA_WAIT",
            "AFTER_WAIT",
            "BEFORE_ARRIVE",
        ]
        .iter()
        .fold(0, |m, n| m | point(n));
        assert!(CHECK_SEEDS.iter().any(|&s| {
            hot_points(s) & point("BEFORE_TMA_STORE") != 0 && hot_points(s) & consumer == 0
        }));
        assert_eq!(
            hot_point_names(11),
            vec!["BEFORE_TMA_STORE", "BEFORE_TMA_LOAD"]
        );
        // Never no hot point.
        assert!((0..1000).all(|s| hot_points(s) != 0));
    }

    #[test]
    fn a_recorded_failure_names_its_rule_barrier_and_shared_memory() {
        let mut bar = [0u8; 48];
        bar[..20].copy_from_slice(b"&smem.load_empty[s]\0");
        let f = Fault {
            rule: 1,
            cta: 7,
            warp: 5,
            detail: [
                0x38000,
                1,
                0x10000,
                9,
                8,
                9,
                (0x10000 >> 4) << 16 | (0x12000 >> 4),
            ],
            bar,
        };
        let d = f.describe();
        assert!(d.starts_with("twin check release-before-wgmma-done: warp 5 of CTA 7 arrives on &smem.load_empty[s] (smem +0x38000, CTA rank 1)"), "{d}");
        assert!(d.contains("refills smem +0x10000"), "{d}");
        assert!(
            d.contains("wgmma group 9 still reads smem [+0x10000, +0x12000)"),
            "{d}"
        );
        let g = Fault {
            rule: 2,
            ..Fault::default()
        };
        assert!(g.describe().starts_with(
            "twin check staging-rewrite-before-read: warp 0 of CTA 0 arrives on an mbarrier"
        ));
        assert_eq!(
            Fault { rule: 3, ..g }.rule_name(),
            "staging-rewrite-before-read"
        );
        // The layout the device writes: 10 words and the name.
        assert_eq!(std::mem::size_of::<Fault>(), 10 * 4 + 48);
    }

    fn wait(cta: u32, warp: u32, phase: crate::trace::Phase, name: &str) -> Wait {
        let mut w = Wait {
            done: 1,
            cta,
            warp,
            phase: u32::from(phase.id()) + 1,
            ..Wait::default()
        };
        w.name[..name.len()].copy_from_slice(name.as_bytes());
        w
    }

    #[test]
    fn a_hang_report_names_the_roles_barriers_parities_and_what_arrived() {
        use crate::trace::Phase;
        // The wrong parity of gpu/hang/step6_wrong_empty_parity.toml: the producer waits on a
        // fresh load_empty for parity 0 at its first k-block; nothing has arrived.
        let producer = Wait {
            bar: 0x38040,
            parity: 0,
            count: 16,
            arrivals: 0,
            phase_arg: 0,
            tile: 3,
            waited_us: 1_000_250,
            ..wait(6, 0, Phase::SlotWait, "&smem.load_empty[slot]")
        };
        let d = producer.describe();
        assert!(
            d.starts_with("CTA 6 (cluster rank 0) warp 0, the producer, waiting for a free ring slot (k-block 0, tile 2): waits on &smem.load_empty[slot] (smem +0x38040) for parity 0 (1.0 s and counting); 0 of its 16 arrivals are in"),
            "{d}"
        );
        assert!(d.ends_with("16 missing"), "{d}");
        // A consumer waiting on a k-block whose expect_tx arrival is in but whose bytes never
        // came: 5 arrivals of 1 per phase, parity 0 awaited, so phase 5 (odd) cannot be the one
        // awaited: phase 4's arrival is in and its bytes are missing.
        let consumer = Wait {
            bar: 0x38000,
            parity: 0,
            count: 1,
            arrivals: 5,
            phase_arg: 4,
            ..wait(6, 4, Phase::DataWait, "&smem.load_full[slot]")
        };
        let d = consumer.describe();
        assert!(
            d.contains("a consumer, waiting for a k-block to land (k-block 4)"),
            "{d}"
        );
        assert!(
            d.contains("all 1 of its arrivals are in (5 in all, 4 phases complete)")
                && d.contains("transaction bytes"),
            "{d}"
        );
        // The missing arrive of gpu/hang/step6_no_out_empty_arrive.toml: consumer 1 waits for
        // the store warp's out_empty arrival.
        let out = Wait {
            bar: 0x38090,
            parity: 0,
            count: 1,
            arrivals: 0,
            ..wait(1, 8, Phase::OutEmptyWait, "&smem.out_empty[other]")
        };
        assert!(out
            .describe()
            .contains("a consumer, waiting for the store warp to have read `out`"));
        let store = wait(1, 1, Phase::AccWait, "&smem.out_full[c]");
        assert!(store
            .describe()
            .contains("the store warp, waiting for a consumer's rows"));
        // A barrier the check does not know, and a warp with no phase.
        let unknown = Wait {
            bar: 0x100,
            done: 1,
            ..Wait::default()
        };
        let d = unknown.describe();
        assert!(d.contains("a warp whose role had not begun"), "{d}");
        assert!(d.contains("the mbarrier at smem +0x100"), "{d}");
        assert!(d.contains("no count of what arrived"), "{d}");
        // The report: the trap's record, then the waits, alike ones told once with a count.
        let mut fault = Fault {
            rule: HANG_RULE,
            cta: 6,
            warp: 0,
            detail: [0x38040, 0, 0, 0, 0, 0, 0],
            ..Fault::default()
        };
        fault.bar[..22].copy_from_slice(b"&smem.load_empty[slot]");
        let consumer2 = Wait {
            cta: 7,
            warp: 5,
            ..consumer
        };
        let lines = hang_report(
            &fault,
            &[producer, consumer, consumer2, out],
            40,
            HANG_BOUND,
        );
        assert!(
            lines[0].starts_with(
                "twin hang: at least 40 warp(s) waited longer than 1.0 s on an mbarrier"
            ) && lines[0].contains("warp 0 of CTA 6 trapped on &smem.load_empty[slot]"),
            "{lines:?}"
        );
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[1].starts_with("  waiting: CTA 6 (cluster rank 0) warp 0, the producer"));
        assert!(
            lines[2].ends_with("[and 1 more warp(s) alike]"),
            "{lines:?}"
        );
        assert!(
            lines[4].contains("more warps may wait than it names"),
            "{lines:?}"
        );
        assert_eq!(hang_report(&fault, &[out], 1, HANG_BOUND).len(), 2);
        assert!(fault
            .describe()
            .starts_with("twin check wait-bound-exceeded: warp 0 of CTA 6 waited on &smem.load_empty[slot] (smem +0x38040) for parity 0"));
        // The layout the device writes (its static_assert holds the same numbers).
        assert_eq!(std::mem::size_of::<Wait>(), 96);
        assert_eq!(
            std::mem::offset_of!(Area, waits),
            std::mem::size_of::<Fault>()
        );
        let d = hang_defines(HANG_BOUND);
        assert_eq!(d[0], (CHECK_DEFINE.to_string(), "1".to_string()));
        assert_eq!(
            d[2],
            (HANG_BOUND_DEFINE.to_string(), "1000000000ull".to_string())
        );
    }

    #[test]
    fn defines_seed_the_build_and_only_twins_take_them() {
        let d = defines(7);
        assert_eq!(d[0], ("WB_STRESS".to_string(), "1".to_string()));
        assert_eq!(d[1], ("WB_STRESS_SEED".to_string(), "7ull".to_string()));
        assert_eq!(
            d[2],
            ("WB_STRESS_HOT".to_string(), format!("{}u", hot_points(7)))
        );
        // Every stress build carries the twin check.
        assert_eq!(d[3], ("WB_TWIN_CHECK".to_string(), "1".to_string()));
        assert!(check_arch(Arch::Hopper).is_ok());
        assert!(check_arch(Arch::Blackwell)
            .unwrap_err()
            .to_string()
            .contains("--emu-seed"));
    }
}
