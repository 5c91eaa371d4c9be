//! The machine's state: threads and their registers, CTAs with their shared and tensor memory and
//! barriers, the queued asynchronous operations, and the rules' bookkeeping. The interpreter
//! (`exec.rs`) drives it; the ordering rules (`rules.rs`) and the deadlock report (`deadlock.rs`)
//! read it. The few methods here place an error or a trace event (which CTA, warp and line)
//! and name a warp's role from what it executed.

use crate::decode::{Instr, Kernel, Program};
use crate::error::SimError;
use crate::glue::{self, MapId, Tmem};
use crate::launch::{Launch, Options};
use crate::mem::Device;
use crate::report::RunReport;
use crate::rule_state::{CtaRules, Global, ThreadRules};
use crate::sched::Rng;
use std::collections::{HashMap, VecDeque};

/// Why a thread does not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// At a warp-collective instruction, until every lane of its mask is there.
    Collective,
    /// At `bar.sync` barrier `id` of its CTA.
    Bar(u32),
    /// `mbarrier.try_wait.parity` on the barrier at `off` of CTA `cta` (cluster index).
    Mbar {
        cta: u32,
        off: u32,
        parity: u32,
    },
    ClusterWait,
    /// `cp.async.bulk.wait_group[.read] n`
    BulkWait(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    Run,
    Block(Why),
    Done,
}

pub(crate) struct Thread {
    pub regs: Vec<u64>,
    pub pc: u32,
    pub st: St,
    pub cta: u32,
    pub tid: [u32; 3],
    pub warp: u32,
    pub lane: u32,
    pub local: Vec<u8>,
    /// Collective rendezvous: the membermask this lane waits with.
    pub coll_mask: u32,
    pub cluster_arrived: Option<u64>,
    pub rules: ThreadRules,
    /// TMA stores issued since the last commit_group, then the committed groups, oldest first.
    pub bulk_open: Vec<u32>,
    pub bulk_groups: VecDeque<Vec<u32>>,
    /// PCT priority.
    pub prio: u64,
    /// The carry flag CC.CF of the extended-precision instructions (`add.cc`, `addc`...).
    pub cc: bool,
    /// Executions (guard true) of each opcode (`Kernel::opcodes`) by this thread: folded into
    /// the warp-level counts when its cluster ends.
    pub executed: Vec<u32>,
    /// The current function's frame: its base in `local` and its index in `Kernel::funcs`;
    /// and the calls that led here (`calls.rs`).
    pub frame: u32,
    pub func: u32,
    pub calls: Vec<crate::calls::CallFrame>,
}

/// One mbarrier (PTX ISA "mbarrier"): its phase, pending arrivals and transaction count.
#[derive(Debug, Clone)]
pub(crate) struct Mbar {
    pub count: u32,
    pub pending: u32,
    pub tx: i64,
    /// Phases completed so far: the current phase's index.
    pub phase: u64,
    pub waiters: Vec<u32>,
    /// (kind, cluster rank, warp, ptx line, source line, phase) of the last arrival.
    pub last: Option<(&'static str, u32, u32, u32, u32, u64)>,
    pub expected_tx_total: i64,
    /// The phase the last tcgen05.commit from another CTA arrived in.
    pub remote_commit: Option<u64>,
    /// Source (file, line) of the `mbarrier.init` (the kernel's line where it was inlined).
    pub init_at: (u32, u32),
    /// The initialising thread and when (for the fence.mbarrier_init rule).
    pub init_by: u32,
    pub init_seq: u64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct BarState {
    pub arrived: u32,
    pub expected: u32,
    /// The count was given (`bar.sync id, n`): threads that exit do not lower it, unlike
    /// `bar.sync id`'s implicit count of every thread of the CTA.
    pub explicit: bool,
    pub waiters: Vec<u32>,
}

pub(crate) struct Cta {
    pub rank: u32,
    pub ctaid: [u32; 3],
    pub smem: Vec<u8>,
    pub mbars: HashMap<u32, Mbar>,
    pub bars: Vec<BarState>,
    pub tmem: Tmem,
    pub live: u32,
    pub rules: CtaRules,
    /// Which shared-memory bytes something wrote in this launch (`poison.rs`).
    pub init: crate::poison::Written,
    /// Which tensor-memory cells something wrote in this launch (`poison.rs`).
    pub tinit: crate::poison::TmemWritten,
}

/// A queued tcgen05 operation of one thread (they complete in issue order).
#[derive(Debug, Clone)]
pub(crate) enum TcJob {
    Mma {
        cta: u32,
        cg2: bool,
        kind: crate::units::mma_kinds::MmaKind,
        idesc: u32,
        a: u64,
        b: u64,
        d: u32,
        acc: bool,
        seq: u64,
        line: (u32, u32),
    },
    Commit {
        targets: Vec<(u32, u32)>,
        line: (u32, u32),
        warp: u32,
        /// Its `observe::Event::Issue` id.
        id: u64,
    },
    /// `tcgen05.cp` from the CTA's shared memory to its tensor memory.
    Cp {
        cta: u32,
        /// The peer CTA that also receives the copy (`cta_group::2`).
        peer: Option<u32>,
        taddr: u32,
        desc: u64,
        shape: crate::units::tmem_cp::CpShape,
        line: (u32, u32),
    },
    /// `tcgen05.shift.down` of the CTA's tensor memory (and its peer's with `cta_group::2`).
    Shift {
        cta: u32,
        cg2: bool,
        taddr: u32,
        line: (u32, u32),
    },
}

#[derive(Debug, Clone)]
pub(crate) struct TmaJob {
    pub thread: u32,
    pub map: MapId,
    pub coords: [i32; 5],
    /// (cta, shared offset) destinations and the barrier each completes on.
    pub dst: Vec<(u32, u32)>,
    pub mbar: Vec<(u32, u32)>,
    pub bytes: u32,
    pub rec: Vec<u32>,
    pub line: (u32, u32),
    /// Its `observe::Event::Issue` id.
    pub id: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct StoreJob {
    pub id: u32,
    pub thread: u32,
    pub map: MapId,
    pub coords: [i32; 5],
    pub cta: u32,
    pub src: u32,
    pub line: (u32, u32),
}

pub(crate) struct Machine<'a> {
    pub k: &'a Kernel,
    pub prog: &'a Program,
    pub dev: &'a mut Device,
    pub l: &'a Launch,
    pub o: &'a Options,
    pub params: Vec<u8>,
    pub maps: ParamMaps,
    pub globals: Vec<u64>,
    pub dyn_off: u32,
    pub smem_bytes: u32,
    pub cl_size: u32,
    pub nthreads: u32,
    pub nwarps: u32,
    pub threads: Vec<Thread>,
    pub ctas: Vec<Cta>,
    pub runnable: Vec<u32>,
    pub rpos: Vec<u32>,
    pub tcq: Vec<VecDeque<TcJob>>,
    pub tc_active: Vec<u32>,
    pub tma: Vec<TmaJob>,
    pub stores: Vec<StoreJob>,
    pub store_done: Vec<bool>,
    pub cluster_phase: u64,
    pub cluster_arrivals: u32,
    pub cluster_waiters: Vec<u32>,
    pub cluster_id: [u32; 3],
    pub rng: Rng,
    pub steps: u64,
    /// Instructions executed with a true guard (`RunReport::instructions`).
    pub instructions: u64,
    /// The technique instructions' attribution, while a cluster runs (`attrib.rs`).
    pub(crate) attrib: crate::attrib::State,
    /// The step count at which the budget and deadline are next checked (`budget.rs`).
    pub next_check: u64,
    pub seq: u64,
    pub report: RunReport,
    /// Executed-instruction counts per (warp in CTA, opcode key).
    pub counts: Vec<u64>,
    /// Warp-level executions per opcode (see `fold_warp_counts`), all clusters so far.
    pub warp_counts: Vec<u64>,
    pub pct_changes: Vec<u64>,
    pub trace: Vec<String>,
    /// Events dropped from the front of `trace` to keep it within bounds: the last events are
    /// the ones that explain a failure.
    pub trace_dropped: u64,
    pub rg: Global,
    /// Non-bulk `cp.async` jobs and ordering records (`exec_async_copy.rs`).
    pub cpa: crate::exec::async_copy::CpaState,
    /// Cluster launch control: cancelled clusters, responses in flight (`exec/clc.rs`).
    pub clc: crate::exec::clc::ClcState,
    /// What watches execution (`observe.rs`): the happens-before checker.
    pub observers: Vec<Box<dyn crate::observe::Observer>>,
    /// Resident clusters other than the active one (`cluster.rs`); `cur` is the active one's
    /// slot, whose fields live in the ones above (`threads`, `ctas`, ...).
    pub slots: Vec<crate::cluster::Cluster>,
    pub cur: usize,
    pub next_cluster: u32,
    pub ncl_total: u32,
    pub resident_max: usize,
    /// The last step that wrote memory, completed an operation, blocked or ended a thread.
    pub progress: u64,
    /// The first read of shared memory nothing wrote (`poison.rs`): reported when its
    /// cluster finishes, unless another finding (a race with the write) stops the run first.
    pub uninit: std::cell::RefCell<Option<SimError>>,
    /// Races on global memory between clusters (`xrace.rs`).
    pub xr: crate::xrace::XRace,
    /// The proving mode's choices (`prove.rs`), replacing the seeded ones.
    pub prove: Option<crate::prove::Chooser>,
    /// Lockstep rounds run so far (`lockstep.rs`), and per warp (its first thread) the group
    /// that executed `activemask` at a pc in a round: (pc, round, mask).
    pub round: u64,
    pub activemask: std::collections::HashMap<u32, (u32, u64, u32)>,
}

impl Machine<'_> {
    pub fn src_line(&self, ins: &Instr) -> u32 {
        if ins.loc.caller_line != 0 {
            ins.loc.caller_line
        } else {
            ins.loc.line
        }
    }

    pub fn fault(&self, t: u32, detail: impl Into<String>) -> SimError {
        let th = &self.threads[t as usize];
        let ins = self.k.code.get(th.pc as usize);
        SimError::Fault {
            cta: self.cta_linear(th.cta),
            warp: th.warp,
            lane: th.lane,
            ptx_line: ins.map_or(0, |i| i.ptx_line),
            source_line: ins.map_or(0, |i| self.src_line(i)),
            detail: detail.into(),
        }
    }

    pub fn rule(&self, t: u32, rule: &'static str, detail: impl Into<String>) -> SimError {
        let th = &self.threads[t as usize];
        let ins = self.k.code.get(th.pc as usize);
        SimError::Rule {
            rule,
            cta: self.cta_linear(th.cta),
            warp: th.warp,
            ptx_line: ins.map_or(0, |i| i.ptx_line),
            source_line: ins.map_or(0, |i| self.src_line(i)),
            detail: detail.into(),
        }
    }

    pub fn rule_at(
        &self,
        line: (u32, u32),
        cta: u32,
        warp: u32,
        rule: &'static str,
        detail: impl Into<String>,
    ) -> SimError {
        SimError::Rule {
            rule,
            cta: self.cta_linear(cta),
            warp,
            ptx_line: line.0,
            source_line: line.1,
            detail: detail.into(),
        }
    }

    /// Linear index of cluster CTA `c` in the grid (blockIdx.x + y * gridDim.x + ...).
    pub fn cta_linear(&self, c: u32) -> u32 {
        match self.ctas.get(c as usize) {
            Some(cta) => {
                let g = self.l.grid;
                cta.ctaid[0] + g[0] * (cta.ctaid[1] + g[1] * cta.ctaid[2])
            }
            None => c,
        }
    }

    /// Record an event of the trace (`Options::trace`): who (thread `t`, if any) and what.
    pub fn ev(&mut self, t: Option<u32>, what: String) {
        const MAX_EVENTS: usize = 200_000;
        if self.trace.len() >= MAX_EVENTS {
            // Drop the oldest quarter at once (amortised), keeping the latest events.
            self.trace.drain(..MAX_EVENTS / 4);
            self.trace_dropped += (MAX_EVENTS / 4) as u64;
        }
        let who = match t {
            Some(t) => {
                let th = &self.threads[t as usize];
                format!("CTA {} warp {}", self.cta_linear(th.cta), th.warp)
            }
            None => "async".to_string(),
        };
        let step = self.steps;
        self.trace.push(format!("{step:>10} {who}: {what}"));
    }

    pub fn line_of(&self, t: u32) -> (u32, u32) {
        let th = &self.threads[t as usize];
        match self.k.code.get(th.pc as usize) {
            Some(i) => (i.ptx_line, self.src_line(i)),
            None => (0, 0),
        }
    }

    /// The role of warp index `w`, from what it executed so far (the run's report and the
    /// deadlock report name warps by it).
    pub fn role(&self, w: u32) -> String {
        let n = self.k.opcodes.len();
        let mut r = Vec::new();
        let has = |pred: &dyn Fn(&str) -> bool| {
            self.k.opcodes.iter().enumerate().any(|(i, o)| {
                pred(o) && self.counts.get(w as usize * n + i).copied().unwrap_or(0) > 0
            })
        };
        if has(&|o| o.starts_with("cp.async.bulk.tensor") && o.contains(".shared::cluster.global"))
        {
            r.push("producer");
        }
        if has(&|o| o.starts_with("tcgen05.mma")) {
            r.push("mma");
        }
        if has(&|o| {
            o.starts_with("tcgen05.ld")
                || (o.starts_with("cp.async.bulk.tensor") && o.contains(".global.shared::cta"))
        }) {
            r.push("epilogue");
        }
        if r.is_empty() {
            "no TMA or tcgen05 work issued yet".to_string()
        } else {
            r.join(", ")
        }
    }

    /// TMA loads, TMA stores and tcgen05 queues not yet retired.
    pub fn pending_events(&self) -> usize {
        let clc = self
            .slots
            .get(self.cur)
            .map_or(0, |s| self.clc.pending(s.linear));
        self.tma.len() + self.stores.len() + self.tc_active.len() + self.cpa.jobs.len() + clc
    }
}

/// Where each tensor-map parameter starts in the parameter buffer, and its description.
pub(crate) type ParamMaps = Vec<(u32, glue::MapDesc)>;
