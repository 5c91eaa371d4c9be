//! The simulator backend: a step's Blackwell kernel run on the CPU by the `sim` crate, from the
//! sm_100a PTX NVRTC produces for it (the PTX ptxas turns into a B200's SASS; no GPU, no
//! emulation header, nothing a kernel could tell apart from a B200 by its preprocessor).
//!
//! Everything but the execution is the GPU run's own: the kernel's defines
//! ([`KernelSpec::defines`]), its static checks, its launch ([`KernelShape::plan`]), its tensor
//! maps ([`TensorMap2d`], the description [`crate::gpu::tensor_map_2d`] encodes), its inputs
//! ([`Problem::generate`]), a NaN-poisoned C and [`verify`] against the fp64 reference
//! ([`cpu_reference`]). A simulator error (a broken ordering rule, a deadlock, an instruction it
//! does not model, a fault) is part of the report, not an error of the harness: the kernel
//! failed.

use crate::compile::{compile_ptx, Compiled, KernelSource, Target};
use crate::gpu::TensorMap2d;
use crate::problem::{Dist, Dtype, Problem, Shape};
use crate::step::{Arch, KernelShape, KernelSpec, OutputArg, Params, MAX_SMEM_PER_CTA};
use crate::verify::{cpu_reference, verify, Verification};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use sim::units::tensormap::{
    TensorMapDesc, TmaDtype, TmaInterleave, TmaL2Promotion, TmaOobFill, TmaSwizzle,
};
pub use sim::Policy;
mod prove;
pub use prove::{
    prove_shape, ProveOptions, ProveReport, PROVE_MAX_WORK, PROVE_SECONDS, PROVE_STATES,
};
use sim::{Device, Launch, Param, Program};
use std::time::Instant;

/// What ran, in the words every report uses.
pub const BACKEND: &str = "simulated (CPU, sm_100a PTX)";

/// The default problem of a kernel that launches one cluster per tile: small enough to take a
/// fraction of a second on one core, with K of eight k-blocks so the four-stage ring is refilled
/// twice (a parity or refill bug needs the ring to wrap to show).
pub const DEFAULT_SHAPE: Shape = Shape {
    m: 256,
    n: 256,
    k: 512,
};

/// The default problem of a persistent kernel: six tiles of 256 x 256 over
/// [`DEFAULT_CLUSTERS`] clusters, so each cluster loops over three tiles and reuses its ring and
/// its first accumulator slot (steps 5 and 6 have two), and K of eight k-blocks.
pub const DEFAULT_PERSISTENT_SHAPE: Shape = Shape {
    m: 768,
    n: 512,
    k: 512,
};

/// Clusters a persistent kernel gets on the simulator unless told otherwise: few, so each runs
/// several tiles (a GPU would run as many as fit).
pub const DEFAULT_CLUSTERS: u32 = 2;

/// How the simulator schedules a run.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The scheduler's seed: the same seed replays the same interleaving.
    pub seed: u64,
    pub policy: Policy,
    /// Schedules to run: 1 runs (`seed`, `policy`); more explore (`sim::explore`: seeds from
    /// `seed` on, cycling through its policies) and stop at the first failure.
    pub schedules: u32,
    /// Record the order of events (TMA issue and landing, MMA issue and completion, commit
    /// arrivals, barrier phases, stores).
    pub trace: bool,
    /// Run the proving mode's witness instead of the seeded schedule (`sim::Options::replay`).
    pub replay: Option<sim::prove::Witness>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 1,
            policy: Policy::Random,
            schedules: 1,
            trace: false,
            replay: None,
        }
    }
}

/// How a simulated kernel failed short of a result to verify.
#[derive(Debug, Clone, Serialize)]
pub struct SimFailure {
    /// "rule", "deadlock", "unsupported", "fault", "step-limit", "launch" or "parse".
    pub kind: &'static str,
    /// The ordering rule broken, spelled as the GPU emulation spells it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The simulator's whole message (a deadlock's names every blocked warp).
    pub message: String,
    /// The schedule that replays it.
    pub schedule_seed: u64,
    pub policy: String,
}

/// What the simulator did.
#[derive(Debug, Clone, Serialize)]
pub struct SimStats {
    /// [`BACKEND`].
    pub backend: &'static str,
    /// The first schedule's seed and policy (`schedules` > 1: the first of those explored).
    pub schedule_seed: u64,
    pub policy: String,
    pub schedules: u32,
    /// Instructions executed (all threads) in the last schedule run.
    pub instructions: u64,
    /// Executed count per opcode, as written in the PTX (the last schedule run).
    pub per_opcode: Vec<(String, u64)>,
    pub barrier_phases: u64,
    pub clusters: u64,
    /// Wall time of the simulation (all schedules; compile and reference excluded), in seconds.
    pub wall_s: f64,
}

/// One simulated run: the same facts as a GPU run's report where they apply.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub step: u32,
    pub arch: Arch,
    pub kernel_path: String,
    pub target: Target,
    pub simulated: bool,
    pub shape: Shape,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    pub params: Params,
    /// The native sm_100a build the static checks made (absent with them off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<Compiled>,
    pub smem_bytes: u32,
    pub grid: (u32, u32, u32),
    pub cluster: (u32, u32, u32),
    pub block: u32,
    /// Absent when the simulator stopped the kernel before it finished.
    pub verification: Option<Verification>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<SimFailure>,
    /// The `runner step` flags that replay the failing schedule, when one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
    pub sim: SimStats,
    /// What the kernel's `printf` calls wrote, one entry per call, in the order they ran, kept
    /// as a GPU's printf FIFO keeps it (the newest 1 MiB); also when the run stopped part-way.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub printf: Vec<String>,
    /// `printf` calls whose output the bounded buffer dropped (the oldest go first).
    #[serde(skip_serializing_if = "is_zero")]
    pub printf_dropped: u64,
    /// The order of events (`SimOptions::trace`), one per line.
    #[serde(skip)]
    pub trace: Vec<String>,
    /// The first cluster's event trace as Chrome trace-event JSON (`SimOptions::trace` with
    /// one schedule; `sim::trace_events` documents it).
    #[serde(skip)]
    pub events: Option<String>,
}

impl SimReport {
    /// Finished and verified.
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.verification.as_ref().is_some_and(|v| v.passed)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The default problem and cluster cap for `k` on the simulator.
pub fn default_shape(k: &KernelShape) -> Shape {
    if k.schedule.loops() {
        DEFAULT_PERSISTENT_SHAPE
    } else {
        DEFAULT_SHAPE
    }
}

/// The simulator's description of [`TensorMap2d::new`]'s map over the matrix at `base`.
pub fn tensor_map_desc(
    base: u64,
    dtype: Dtype,
    rows: usize,
    cols: usize,
    box_rows: u32,
    box_cols: u32,
) -> Result<TensorMapDesc> {
    let m = TensorMap2d::new(rows, cols, box_rows, box_cols)?;
    let swizzle = match m.swizzle_bytes {
        128 => TmaSwizzle::B128,
        other => bail!("no {other}-byte swizzle in the workbook's tensor maps"),
    };
    TensorMapDesc::encode_tiled(
        match dtype {
            Dtype::F16 => TmaDtype::F16,
            Dtype::Bf16 => TmaDtype::Bf16,
        },
        2,
        base,
        &m.global_dim,
        &[m.row_stride],
        &m.box_dim,
        &m.element_strides,
        TmaInterleave::None,
        swizzle,
        TmaL2Promotion::B256,
        TmaOobFill::None,
    )
    .map_err(|e| anyhow!("tensor map: {e}"))
}

/// What one simulated run takes besides the kernel and the schedule.
#[derive(Debug, Clone)]
pub struct SimProblem {
    /// None: [`default_shape`].
    pub shape: Option<Shape>,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    /// Persistent kernels: clusters launched (None: [`DEFAULT_CLUSTERS`]).
    pub clusters: Option<u32>,
    /// Run the static checks (the sm_100a PTX rules and the native compile) first, as a GPU run
    /// does.
    pub static_check: bool,
    pub cpu_samples: usize,
}

/// The launch of one kernel on one problem, ready to run under any schedule.
struct Prepared {
    device: Device,
    launch: Launch,
    problem: Problem,
    c_addr: u64,
}

fn prepare(
    source: &KernelSource,
    shape: Shape,
    p: &SimProblem,
    plan: &crate::step::Plan,
) -> Result<Prepared> {
    let problem = Problem::generate(shape, p.dtype, p.dist, p.seed);
    let l = sim_launch(source, &problem, plan)?;
    Ok(Prepared {
        device: l.device,
        launch: l.launch,
        problem,
        c_addr: l.c,
    })
}

/// One launch of a step's `gemm_kernel` on `problem`, as the GPU harness makes it: A, B and a
/// NaN-poisoned C in a fresh simulated device, their tensor maps, the plan's grid, cluster and
/// shared memory. The grader's simulator runs use it too.
pub struct SimLaunch {
    pub device: Device,
    pub launch: Launch,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

pub fn sim_launch(
    source: &KernelSource,
    problem: &Problem,
    plan: &crate::step::Plan,
) -> Result<SimLaunch> {
    let shape = problem.shape;
    let mut device = Device::new();
    let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let a = device.alloc(problem.a.len() as u64 * 2);
    let b = device.alloc(problem.b.len() as u64 * 2);
    let c = device.alloc((shape.m * shape.n) as u64 * 2);
    device.write(a, &bytes(&problem.a));
    device.write(b, &bytes(&problem.b));
    // C poisoned with NaN: an element the kernel never writes fails verification.
    device.write(c, &vec![0xFF; shape.m * shape.n * 2]);
    let d = problem.dtype;
    let tmap_a = tensor_map_desc(a, d, shape.m, shape.k, plan.a_box.0, plan.a_box.1)
        .context("tensor map for A")?;
    let tmap_b = tensor_map_desc(b, d, shape.n, shape.k, plan.b_box.0, plan.b_box.1)
        .context("tensor map for B")?;
    let out = match plan.output {
        OutputArg::Pointer => Param::U64(c),
        OutputArg::TensorMap { box_rows, box_cols } => Param::TensorMap(
            tensor_map_desc(c, d, shape.m, shape.n, box_rows, box_cols)
                .context("tensor map for C")?,
        ),
    };
    let dims = &plan.dims;
    let launch = Launch {
        kernel: "gemm_kernel".into(),
        grid: [dims.grid.0, dims.grid.1, dims.grid.2],
        block: [dims.block, 1, 1],
        cluster: [dims.cluster.0, dims.cluster.1, dims.cluster.2],
        dynamic_smem: dims.smem_bytes,
        params: vec![
            Param::TensorMap(tmap_a),
            Param::TensorMap(tmap_b),
            out,
            Param::U32(shape.m as u32),
            Param::U32(shape.n as u32),
            Param::U32(shape.k as u32),
        ],
        // Hang reports name a barrier after the expression the kernel's `mbarrier_init` gave
        // it (`smem.load_full[2]`), read from the source that was compiled.
        barrier_names: Vec::new(),
        sources: vec![(source.path.clone(), source.text.clone())],
    };
    Ok(SimLaunch {
        device,
        launch,
        a,
        b,
        c,
    })
}

/// `len` 16-bit elements at `addr` (C, or an input to check it is unchanged).
pub fn read_u16(dev: &Device, addr: u64, len: usize) -> Vec<u16> {
    let mut bytes = vec![0u8; len * 2];
    dev.read(addr, &mut bytes);
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// C as 16-bit elements.
fn read_c(dev: &Device, addr: u64, shape: Shape) -> Vec<u16> {
    read_u16(dev, addr, shape.m * shape.n)
}

/// A simulator error as a report's failure, with the schedule that replays it.
pub fn failure_of(e: &sim::SimError, seed: u64, policy: Policy) -> SimFailure {
    use sim::SimError as E;
    let (kind, rule) = match e {
        E::Rule { rule, .. } => ("rule", Some(rule.to_string())),
        E::Deadlock { .. } => ("deadlock", None),
        E::Unsupported { .. } => ("unsupported", None),
        E::Fault { .. } => ("fault", None),
        E::StepLimit { .. } => ("step-limit", None),
        E::Deadline { .. } => ("deadline", None),
        E::Launch(_) => ("launch", None),
        E::Parse { .. } => ("parse", None),
        E::Assert(_) => ("assert", None),
    };
    // The simulator's own text names its API (`Options::max_steps`); a user meets the budget
    // as the rubric's `[limits] sim_steps` or not at all.
    let message = match e {
        E::StepLimit { steps } => format!(
            "the run exceeded its budget of {steps} steps (an instruction each, an MMA or a copy by its size): a spin loop that never ends, or far more work than the shape needs"
        ),
        _ => e.to_string(),
    };
    SimFailure {
        kind,
        rule,
        message,
        schedule_seed: seed,
        policy: policy.name(),
    }
}

/// A Blackwell kernel built for the simulator: its static checks passed (when asked), its
/// sm_100a PTX compiled and decoded once, ready to run on any problem of its dtype.
pub struct SimKernel {
    spec: KernelSpec,
    source: KernelSource,
    dtype: Dtype,
    compile: Option<Compiled>,
    program: Program,
}

impl SimKernel {
    /// Compile `source` (the step's kernel, a user's, or a seeded bug's) for sm_100a with the
    /// spec's defines for `dtype`, after the static checks a GPU run makes (`static_check`).
    pub fn build(
        spec: &KernelSpec,
        source: &KernelSource,
        dtype: Dtype,
        static_check: bool,
    ) -> Result<SimKernel> {
        if spec.arch != Arch::Blackwell {
            bail!(
                "the simulator runs Blackwell kernels (tcgen05, sm_100a); the Hopper twin's wgmma is not modelled: run it on an H100/H200"
            );
        }
        let k = spec.shape();
        if k.smem_bytes > MAX_SMEM_PER_CTA {
            bail!(
                "step {} needs {} bytes of shared memory per CTA; sm_100 allows at most {MAX_SMEM_PER_CTA}",
                spec.info().number,
                k.smem_bytes
            );
        }
        let defines = spec.defines(dtype);
        let compile = if static_check {
            Some(crate::static_check::check_blackwell(source, &defines)?)
        } else {
            None
        };
        let ptx = compile_ptx(source, Target::Sm100a, &defines)?;
        let program = Program::parse(&ptx)
            .map_err(|e| anyhow!("the simulator cannot read {}'s PTX: {e}", source.path))?;
        if program.kernel("gemm_kernel").is_none() {
            bail!(
                "{} defines no kernel `extern \"C\" __global__ void gemm_kernel(...)`: there is nothing to run",
                source.path
            );
        }
        Ok(SimKernel {
            spec: spec.clone(),
            source: source.clone(),
            dtype,
            compile,
            program,
        })
    }

    /// Run it on `p`'s problem under `o`'s schedules and verify C against the fp64 reference.
    /// `Err` is the harness's (a bad shape); how the kernel fared, simulator errors included,
    /// is in the report.
    pub fn run(&self, p: &SimProblem, o: &SimOptions) -> Result<SimReport> {
        let (spec, source) = (&self.spec, &self.source);
        if p.dtype != self.dtype {
            bail!(
                "the kernel was built for {}, the problem is {}",
                self.dtype,
                p.dtype
            );
        }
        let k = spec.shape();
        let shape = p.shape.unwrap_or_else(|| default_shape(&k));
        spec.check_shape(shape).map_err(|e| anyhow!(e))?;
        let clc = k.schedule == crate::step::Schedule::ClusterLaunchControl;
        if p.clusters.is_some() && !k.schedule.fills_the_gpu() && !clc {
            bail!(
                "--clusters caps the grid of a persistent kernel; step {} launches one cluster per tile",
                spec.info().number
            );
        }
        if o.schedules == 0 {
            bail!("the simulator needs at least one schedule to run");
        }
        let compile = self.compile.clone();
        let plan = k.plan(shape, p.clusters.unwrap_or(DEFAULT_CLUSTERS));
        let prep = prepare(source, shape, p, &plan)?;
        let reference = cpu_reference(&prep.problem);
        let check = |dev: &Device| {
            verify(
                &prep.problem,
                &read_c(dev, prep.c_addr, shape),
                &reference,
                p.cpu_samples,
            )
        };
        // One schedule traced: also the ring player's event trace (`sim::trace_events`).
        let events = (o.trace && o.schedules == 1).then(sim::trace_events::sink);
        let base = sim::Options {
            seed: o.seed,
            policy: o.policy,
            trace: o.trace,
            replay: o.replay.clone(),
            // Under cluster launch control every tile's cluster is launched, and `clusters` caps
            // how many are resident at once (the SMs they fit on), so running clusters find
            // launches to cancel.
            sms: if clc {
                p.clusters.unwrap_or(DEFAULT_CLUSTERS) * k.cluster
            } else {
                sim::Options::default().sms
            },
            events: events.clone(),
            ..sim::Options::default()
        };
        let start = Instant::now();
        // The single schedule's stop, for the event trace's last event.
        let mut sim_error: Option<sim::SimError> = None;
        // The run's report (when it finished; else its trace up to the stop), its verification,
        // the simulator's finding, and the schedule that failed (for the replay line).
        let (run, verification, failure, failed) = if o.schedules == 1 {
            let mut dev = prep.device.clone();
            match sim::run_traced(&self.program, &mut dev, &prep.launch, &base) {
                Ok(r) => {
                    let v = check(&dev);
                    let failed = (!v.passed).then_some((o.seed, o.policy));
                    (r, Some(v), None, failed)
                }
                Err(s) => {
                    sim_error = Some(s.error.clone());
                    (
                        sim::RunReport {
                            trace: s.trace,
                            printf: s.printf,
                            ..sim::RunReport::default()
                        },
                        None,
                        Some(failure_of(&s.error, o.seed, o.policy)),
                        Some((o.seed, o.policy)),
                    )
                }
            }
        } else {
            // Each schedule's C is verified; the first that fails (or breaks a rule) stops it.
            let mut last: Option<Verification> = None;
            let mut judge = |dev: &Device| {
                let v = check(dev);
                let ok = v.passed;
                let summary = v.summary();
                last = Some(v);
                if ok {
                    Ok(())
                } else {
                    Err(format!("wrong result: {summary}"))
                }
            };
            let r = sim::explore(
                &self.program,
                &prep.device,
                &prep.launch,
                &base,
                o.schedules,
                &mut judge,
            );
            match r {
                Ok(r) => (r, last, None, None),
                // A simulator error stops the kernel; a wrong result keeps its verification.
                Err(f) => {
                    let found = f.cause.as_ref().map(|e| failure_of(e, f.seed, f.policy));
                    let v = if found.is_some() { None } else { last };
                    (
                        // The failing schedule's events, up to its stop or its end.
                        sim::RunReport {
                            trace: f.trace,
                            ..sim::RunReport::default()
                        },
                        v,
                        found,
                        Some((f.seed, f.policy)),
                    )
                }
            }
        };
        let wall_s = start.elapsed().as_secs_f64();
        let events = events.map(|sink| {
            let verdict = match (&failure, &verification) {
                (Some(f), _) => f.kind,
                (None, Some(v)) if v.passed => "PASS",
                _ => "FAIL",
            };
            let other = format!(
                r#""step":{},"kernel":{},"seed":{},"policy":{},"verdict":"{verdict}""#,
                spec.info().number,
                serde_json::Value::from(source.path.as_str()),
                o.seed,
                serde_json::Value::from(o.policy.name())
            );
            let stop = sim_error.as_ref();
            sim::trace_events::finish(&sink, stop, &other)
        });
        let first_policy = if o.schedules == 1 {
            o.policy
        } else {
            sim::EXPLORE_POLICIES[0]
        };
        // A replayed witness has no seed or policy: say what ran instead.
        let (policy_name, mut failure) = (
            match &o.replay {
                Some(_) => "replay of a proving-mode witness".to_string(),
                None => first_policy.name(),
            },
            failure,
        );
        if let (Some(f), Some(_)) = (&mut failure, &o.replay) {
            f.policy = policy_name.clone();
        }
        Ok(SimReport {
            step: spec.info().number,
            arch: spec.arch,
            kernel_path: source.path.clone(),
            target: Target::Sm100a,
            simulated: true,
            shape,
            dtype: p.dtype,
            dist: p.dist,
            seed: p.seed,
            params: spec.params.clone(),
            compile,
            smem_bytes: plan.dims.smem_bytes,
            grid: plan.dims.grid,
            cluster: plan.dims.cluster,
            block: plan.dims.block,
            verification,
            failure,
            replay: match &o.replay {
                Some(w) => failed.map(|_| format!("--replay {w}")),
                None => failed.map(|(seed, policy)| {
                    format!("--sim-seed {seed} --sim-policy {}", policy.name())
                }),
            },
            sim: SimStats {
                backend: BACKEND,
                schedule_seed: o.seed,
                policy: policy_name,
                schedules: o.schedules,
                instructions: run.instructions,
                per_opcode: run.per_opcode,
                barrier_phases: run.barrier_phases,
                clusters: run.clusters,
                wall_s,
            },
            printf: run.printf,
            printf_dropped: run.printf_dropped,
            trace: run.trace,
            events,
        })
    }
}

/// [`SimKernel::build`] then [`SimKernel::run`]: one kernel, one problem.
pub fn simulate(
    spec: &KernelSpec,
    source: &KernelSource,
    p: &SimProblem,
    o: &SimOptions,
) -> Result<SimReport> {
    SimKernel::build(spec, source, p.dtype, p.static_check)?.run(p, o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulators_map_is_the_gpus_map() {
        let m = TensorMap2d::new(512, 256, 128, 64).unwrap();
        let d = tensor_map_desc(0x1000, Dtype::Bf16, 512, 256, 128, 64).unwrap();
        assert_eq!(d.dims[..2], m.global_dim);
        assert_eq!(d.strides[0], m.row_stride);
        assert_eq!(d.box_dims[..2], m.box_dim);
        assert_eq!(d.swizzle, TmaSwizzle::B128);
        assert_eq!(d.dtype, TmaDtype::Bf16);
        assert!(tensor_map_desc(0, Dtype::F16, 64, 100, 64, 64).is_err());
    }
}
