//! A CPU simulator of the sm_100a PTX that NVRTC produces for the workbook's Blackwell kernels.
//!
//! The core (parser, interpreter, scheduler, barriers, ordering rules) is std-only so that it
//! builds for `wasm32-unknown-unknown`; the data semantics of TMA, tensor memory and the MMA
//! live in [`units`].
//!
//! # Using it
//! ```text
//! let prog = Program::parse(&ptx)?;                     // decode once
//! let mut dev = Device::new();
//! let a = dev.alloc(bytes); dev.write(a, &host_a);      // global memory
//! let launch = Launch { kernel: "gemm_kernel".into(), grid, block, cluster, dynamic_smem,
//!                       params: vec![Param::TensorMap(map_a), ..., Param::U64(c), Param::U32(m)],
//!                       ..Launch::default() };
//! let report = run(&prog, &mut dev, &launch, &Options::default())?;
//! dev.read(c, &mut host_c);
//! ```
//! A run ends in [`SimError`]: an instruction not modelled (`Unsupported`, at decode time), a
//! named ordering rule broken (`Rule`, spelled as the GPU emulation spells it), a deadlock with
//! who waits on what (`Deadlock`), a fault, or the step limit. [`explore`] runs several seeds and
//! policies and returns the first failure with the seed and policy that replay it.
//!
//! # Model
//! Every thread is its own interpreter over the pre-decoded instruction array; warps rendezvous
//! at warp-collective instructions (every lane of the mask arrives before any proceeds), so no
//! SIMT stack is needed. All CTAs of a cluster are resident together, and several clusters run
//! at the same time: at most `Options::sms / cluster size` (one CTA per SM, 148 SMs by
//! default), the next cluster of the grid becoming resident when one finishes, as on the GPU.
//! One seeded scheduler picks which thread of which resident cluster runs and for how long,
//! and when each asynchronous operation (TMA load or store, tcgen05.mma, tcgen05.commit)
//! completes. A thread whose `mbarrier.try_wait` would fail blocks until the phase completes.
//!
//! # What concurrent clusters show
//! Clusters share nothing a kernel can synchronise on but global memory (no barrier, mbarrier
//! or distributed shared memory spans two clusters). Running them at the same time, under one
//! scheduler, shows what one cluster after another could not:
//! - a race on global memory between clusters (rule `cross-cluster-race`, naming both accesses
//!   and their source lines): two clusters writing the same C elements (an overlapping tile
//!   index, a split-K without `red`/`atom`), or one reading what another writes, with no
//!   gpu-scope release/acquire (or atomic) between them. It is decided from what orders the
//!   accesses, not from the order they happened to run in (`xrace.rs`);
//! - a lost update through a non-atomic read-modify-write, or a dynamic tile scheduler's split
//!   of tiles between clusters: the clusters' instructions interleave;
//! - a wait on another cluster: a flag or grid-wide barrier set by another cluster passes when
//!   both are resident; when the setter can never be resident while the waiters spin (more
//!   clusters than `Options::sms` holds), the run stops with a "waits on another cluster"
//!   report instead of running to the step limit.
//!
//! What it still does not show: a race between CTAs of one cluster on global memory (the
//! happens-before checker's), and weak-memory outcomes (each access is seen by all at once).
//!
//! # Uninitialised memory
//! Shared memory starts each launch as 0xFF bytes, and a read of bytes nothing wrote in the
//! launch (a load, an MMA operand, a TMA store's or tcgen05.cp's source) is rule
//! `uninitialised-read` (`poison.rs`), as is a `tcgen05.ld` of tensor memory no MMA, st or cp
//! wrote, and an MMA that accumulates into such columns. Shared-memory addresses are
//! `rank << 24 | offset`, the hardware's layout (`dsmem.rs`); one whose rank is outside the
//! cluster, whose offset is beyond the CTA's shared memory, or a `.shared::cta` access to
//! another rank is rule `cluster-address-undefined`.
//!
//! # Proving mode
//! [`prove::explore_all`] runs every distinct order of the synchronisation events (which
//! thread reaches its next barrier operation first, when each asynchronous operation
//! completes), with dynamic partial-order reduction and sleep sets, bounded by states, runs
//! and the caller's clock. Its verdict is clean, incomplete (with what was covered) or an
//! error with a [`prove::Witness`] that [`prove::replay`] runs again.
//!
//! # Ordering rules
//! Checked from what orders what (a wait observed, a fence executed, a commit arrived), not
//! from what happened to be timed, and named as the GPU emulation names them (see
//! `rules.rs`): `operand-loaded`, `no-refill-in-flight`, `ld-in-flight`,
//! `ld-after-commit-wait`, `release-before-overwrite`, `fence-after-sync`,
//! `wait-ld-before-handoff`, `fence-before-handoff`, `alloc-handoff`, `proxy-fence-before-store`,
//! `wait-read-before-reuse`, `wait-read-before-exit`, `wait-for-peer-commits`,
//! `one-cta-group`; and `wait-ld-before-use` (a `tcgen05.ld` register read before
//! `tcgen05.wait::ld`), which only the simulator checks. Beside them: `cross-cluster-race`,
//! `uninitialised-read` and `cluster-address-undefined` (above).
//!
//! # Functions, local memory, printf and assert
//! A kernel's code is its entry then every `.func` it calls (`link.rs`); `call`/`ret` keep a
//! per-thread call stack, each activation with its own registers and its own frame in the
//! thread's local memory (`.local` arrays, `__local_depot`/`%SP`/`%SPL`, call-site `.param`
//! variables), reachable by `ld.local`/`st.local` and by generic addresses (`cvta.local`). A
//! thread's local memory is bounded at 512 KiB (CUDA's limit: a larger entry frame is a launch
//! error, a deeper call a fault) and calls nest at most 1024 deep (`link::MAX_CALL_DEPTH`).
//! Device `printf` (NVVM's `vprintf`) is formatted as the host C library does and kept in
//! [`RunReport::printf`] (and [`Stopped::printf`]), bounded like the GPU's 1 MiB FIFO: the
//! oldest output goes first, counted in `printf_dropped`. A failing `assert` (`__assertfail`)
//! ends the run with [`SimError::Assert`]. Labels and declarations are scoped to their `{ }`
//! block (an inlined `asm` loop jumps to its own copy of its label); an undefined or ambiguous
//! branch target is a decode error.
//!
//! # Not modelled (an error naming the instruction, never a silent skip)
//! Every form is refused when the module is decoded (`forms.rs`), naming the instruction, its
//! PTX line and its source line: indirect calls (through a register or a `.callprototype`),
//! calls of external functions other than `vprintf` and `__assertfail` (device `malloc`,
//! `free`, ...), call arguments not in `.param` variables, textures and surfaces, the
//! decompressing `tcgen05.cp` forms (`.b8x16.b6x16_p32`, `.b8x16.b4x16_p64`), `tcgen05.mma`
//! other than dense non-`.ws` `kind::f16` with A and B in shared memory (every such shape,
//! either major-ness, any swizzle mode and base offset the ISA allows; the unit refuses
//! negation, F16 accumulators, mixed F16/BF16, and descriptor encodings the ISA leaves
//! undefined), `cp.async.bulk` without a tensor map, `mma.sync` other than the
//! floating-point m16n8k{4,8,16} forms, `ldmatrix` and `stmatrix` other than `.m8n8.b16`.
//! `wgmma` is refused as what it is, an sm_90a instruction (no sm_100a kernel holds it).
//! Timing is not modelled at all: `%clock`, `%clock64` and
//! `%globaltimer` count executed instructions.

pub mod alu;
mod atom_vec;
pub mod attrib;
pub mod budget;
mod calls;
mod check;
mod cluster;
mod deadlock;
pub mod decode;
pub mod dsmem;
pub mod error;
mod exec;
mod forms;
mod glue;
mod launch;
mod link;
mod lockstep;
mod machine;
pub mod mem;
mod observe;
pub mod parse;
mod poison;
pub mod printf;
pub mod prove;
mod report;
mod rule_state;
mod rules;
pub mod sched;
pub mod trace_events;
mod trace_words;
pub mod units;
mod xrace;

pub use decode::Program;
pub use error::{Assertion, SimError};
pub use launch::{Launch, Options, Param};
pub use mem::Device;
pub use report::RunReport;
pub use sched::Policy;

fn check_launch(p: &Program, l: &Launch) -> Result<(), SimError> {
    let bad = |s: String| Err(SimError::Launch(s));
    if l.grid.contains(&0) || l.block.contains(&0) || l.cluster.contains(&0) {
        return bad("grid, block and cluster dimensions must be at least 1".into());
    }
    let threads: u64 = l.block.iter().map(|&d| d as u64).product();
    if threads > 1024 {
        return bad(format!("{threads} threads per CTA: at most 1024"));
    }
    for i in 0..3 {
        if !l.grid[i].is_multiple_of(l.cluster[i]) {
            return bad(format!(
                "grid dimension {i} ({}) is not a multiple of the cluster's ({})",
                l.grid[i], l.cluster[i]
            ));
        }
    }
    let cl: u32 = l.cluster.iter().product();
    if cl > 16 {
        return bad(format!("{cl} CTAs per cluster: at most 16"));
    }
    let smem = exec::SMEM_RESERVED as u64 + p.static_shared_bytes as u64 + l.dynamic_smem as u64;
    if smem > 232_448 + exec::SMEM_RESERVED as u64 {
        return bad(format!(
            "{} bytes of dynamic shared memory: a CTA of sm_100 has at most 232448 (227 KiB)",
            l.dynamic_smem
        ));
    }
    Ok(())
}

/// Run one launch to completion on `dev`.
pub fn run(p: &Program, dev: &mut Device, l: &Launch, o: &Options) -> Result<RunReport, SimError> {
    run_traced(p, dev, l, o).map_err(|s| s.error)
}

/// A run the simulator stopped (a broken rule, a deadlock, a fault...), with the events it
/// recorded up to the stop (`Options::trace`; empty without it): what led to a failure is what
/// a learner most needs to read.
#[derive(Debug, Clone)]
pub struct Stopped {
    pub error: SimError,
    pub trace: Vec<String>,
    /// Device printf output before the stop (as [`RunReport::printf`]), e.g. what a kernel
    /// printed before its `assert` failed.
    pub printf: Vec<String>,
}

/// [`run`], keeping the trace of a run that stopped.
pub fn run_traced(
    p: &Program,
    dev: &mut Device,
    l: &Launch,
    o: &Options,
) -> Result<RunReport, Stopped> {
    run_with(p, dev, l, o, None).0
}

/// [`run_traced`] with the proving mode's chooser in place of the seeded choices; gives the
/// chooser back with the choices it made.
pub(crate) fn run_with(
    p: &Program,
    dev: &mut Device,
    l: &Launch,
    o: &Options,
    chooser: Option<prove::Chooser>,
) -> (Result<RunReport, Stopped>, Option<prove::Chooser>) {
    let mut chooser = chooser;
    let r = run_inner(p, dev, l, o, &mut chooser);
    (r, chooser)
}

fn run_inner(
    p: &Program,
    dev: &mut Device,
    l: &Launch,
    o: &Options,
    chooser_slot: &mut Option<prove::Chooser>,
) -> Result<RunReport, Stopped> {
    let chooser = chooser_slot
        .take()
        .or_else(|| o.replay.as_ref().map(prove::Chooser::replaying));
    let no_trace = |error| Stopped {
        error,
        trace: Vec::new(),
        printf: Vec::new(),
    };
    check_launch(p, l).map_err(no_trace)?;
    let k = p
        .kernel(&l.kernel)
        .ok_or_else(|| SimError::Launch(format!("the PTX has no kernel named {}", l.kernel)))
        .map_err(no_trace)?;
    if k.local_bytes > link::LOCAL_BYTES_LIMIT {
        return Err(no_trace(SimError::Launch(format!(
            "kernel {} needs {} bytes of local memory per thread: a thread may have at most {} (512 KiB)",
            k.name,
            k.local_bytes,
            link::LOCAL_BYTES_LIMIT
        ))));
    }
    let (params, maps) = exec::build_params(k, l).map_err(no_trace)?;
    let globals = exec::globals_addrs(p, dev);
    let dyn_off = (exec::SMEM_RESERVED + p.static_shared_bytes)
        .next_multiple_of(p.dynamic_shared_align.max(16));
    let smem_bytes = dyn_off + l.dynamic_smem;
    let nthreads = l.block.iter().product::<u32>();
    let nwarps = nthreads.div_ceil(32);
    let mut m = machine::Machine {
        k,
        prog: p,
        dev,
        l,
        o,
        params,
        maps,
        globals,
        dyn_off,
        smem_bytes,
        cl_size: l.cluster.iter().product(),
        nthreads,
        nwarps,
        threads: Vec::new(),
        ctas: Vec::new(),
        runnable: Vec::new(),
        rpos: Vec::new(),
        tcq: Vec::new(),
        tc_active: Vec::new(),
        tma: Vec::new(),
        stores: Vec::new(),
        store_done: Vec::new(),
        cluster_phase: 0,
        cluster_arrivals: 0,
        cluster_waiters: Vec::new(),
        cluster_id: [0; 3],
        rng: sched::Rng::new(o.seed),
        steps: 0,
        instructions: 0,
        next_check: 0,
        seq: 0,
        report: RunReport::default(),
        counts: vec![0; nwarps as usize * k.opcodes.len()],
        warp_counts: vec![0; k.opcodes.len()],
        pct_changes: Vec::new(),
        trace: Vec::new(),
        trace_dropped: 0,
        rg: rule_state::Global::default(),
        cpa: Default::default(),
        clc: Default::default(),
        observers: Vec::new(),
        attrib: Default::default(),
        slots: Vec::new(),
        cur: cluster::NO_SLOT,
        next_cluster: 0,
        ncl_total: 0,
        resident_max: 1,
        progress: 0,
        uninit: Default::default(),
        xr: xrace::XRace::default(),
        prove: chooser,
        round: 0,
        activemask: Default::default(),
    };
    if let Err(error) = m.run_grid() {
        let mut trace = take_trace(&mut m);
        if o.trace {
            // The stop itself, last: the deadlock report's lines each on its own.
            let text = error.to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("");
            trace.push(format!("{:>10} stopped: {first}", m.steps));
            trace.extend(lines.map(|l| format!("{:>10} {}", "", l.trim_start())));
        }
        *chooser_slot = m.prove.take();
        let printf = std::mem::take(&mut m.report.printf);
        return Err(Stopped {
            error,
            trace,
            printf,
        });
    }
    *chooser_slot = m.prove.take();
    let _ = m.prog;
    let mut r = std::mem::take(&mut m.report);
    r.instructions = m.instructions;
    r.steps = m.steps;
    let n = k.opcodes.len();
    for (i, op) in k.opcodes.iter().enumerate() {
        let total: u64 = (0..nwarps as usize).map(|w| m.counts[w * n + i]).sum();
        if total > 0 {
            r.per_opcode.push((op.clone(), total));
        }
        for w in 0..nwarps {
            let c = m.counts[w as usize * n + i];
            if c > 0 {
                r.per_warp.push((w, op.clone(), c));
            }
        }
    }
    r.per_opcode.sort();
    r.per_opcode_warps = k
        .opcodes
        .iter()
        .zip(&m.warp_counts)
        .filter(|(_, &c)| c > 0)
        .map(|(op, &c)| (op.clone(), c))
        .collect();
    r.per_opcode_warps.sort();
    r.roles = (0..nwarps).map(|w| (w, m.role(w))).collect();
    r.trace = take_trace(&mut m);
    Ok(r)
}

/// The recorded events, led by a line saying how many earlier ones were dropped, if any.
fn take_trace(m: &mut machine::Machine<'_>) -> Vec<String> {
    let mut t = std::mem::take(&mut m.trace);
    if m.trace_dropped > 0 {
        t.insert(
            0,
            format!(
                "{:>10} ({} earlier events dropped: the trace keeps the latest {})",
                "",
                m.trace_dropped,
                t.len()
            ),
        );
    }
    t
}

/// A failing run of [`explore`], with what replays it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub policy: Policy,
    /// The failure in words (a simulator error's `Display`, or what `verify` said).
    pub error: String,
    /// The simulator's error, when the run failed (None: `verify` refused its result).
    pub cause: Option<SimError>,
    /// The failing run's events up to its stop or its end (`Options::trace`; else empty).
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (schedule: seed {}, policy {})",
            self.error,
            self.seed,
            self.policy.name()
        )
    }
}

/// The policies `explore` cycles through: both extremes of async timing, random, and PCT.
pub const EXPLORE_POLICIES: [Policy; 4] = [
    Policy::AsyncLate,
    Policy::AsyncEarly,
    Policy::Random,
    Policy::Pct { depth: 3 },
];

/// Run `n` schedules (seeds `base.seed..`, cycling through [`EXPLORE_POLICIES`]) on copies of
/// `dev`; `verify` checks each finished run's memory. Returns the last run's report, or the
/// first failure with the seed and policy that replay it.
pub fn explore(
    p: &Program,
    dev: &Device,
    l: &Launch,
    base: &Options,
    n: u32,
    verify: &mut dyn FnMut(&Device) -> Result<(), String>,
) -> Result<RunReport, Failure> {
    let mut last = RunReport::default();
    for i in 0..n {
        let policy = EXPLORE_POLICIES[i as usize % EXPLORE_POLICIES.len()];
        let seed = base.seed.wrapping_add(i as u64);
        let o = Options {
            seed,
            policy,
            ..base.clone()
        };
        let mut d = dev.clone();
        last = run_traced(p, &mut d, l, &o).map_err(|s| Failure {
            seed,
            policy,
            error: s.error.to_string(),
            cause: Some(s.error),
            trace: s.trace,
        })?;
        verify(&d).map_err(|error| Failure {
            seed,
            policy,
            error,
            cause: None,
            trace: std::mem::take(&mut last.trace),
        })?;
    }
    Ok(last)
}
