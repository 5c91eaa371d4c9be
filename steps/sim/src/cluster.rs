//! Clusters that run at the same time: the per-cluster state ([`Cluster`]), which clusters are
//! resident (a bounded number, as SMs bound them on a GPU), and the one seeded scheduler that
//! interleaves the threads and asynchronous completions of all resident clusters.
//!
//! The interpreter (`exec.rs`) works on one cluster at a time through the `Machine` fields that
//! hold a cluster's threads, CTAs and queues (`threads`, `ctas`, `runnable`, ...): they are the
//! *active* cluster's state. The others wait in `Machine::slots` and are swapped in (moving a
//! handful of `Vec` headers, not their contents) when the scheduler picks one of their threads
//! or completions. A cluster shares nothing a kernel can synchronise on with another one except
//! global memory, which the machine holds once, so this swap is invisible to the kernel.

use crate::error::SimError;
use crate::exec::new_thread;
use crate::glue::Tmem;
use crate::machine::{BarState, Cta, Machine, St, StoreJob, TcJob, Thread, TmaJob};
use crate::rule_state::{CtaRules, Global};
use crate::sched::Policy;
use std::collections::{HashMap, VecDeque};

const NONE: u32 = u32::MAX;
/// The error text of a run the proving mode stopped (not a finding).
pub(crate) const PRUNED: &str = "the proving mode stopped this run: its order was covered";
/// `Machine::cur` when no cluster is swapped in.
pub(crate) const NO_SLOT: usize = usize::MAX;

/// Instructions executed with no memory write, no completion, no exit and no thread blocking,
/// while clusters wait to become resident, before the run is stopped with a "waits on another
/// cluster" report: every resident thread then only polls (a spin on a flag that a cluster
/// that is not resident would set). The stock kernels never go more than a few thousand
/// instructions without one of these.
pub(crate) const SPIN_WINDOW: u64 = 2_000_000;

/// Everything of one cluster that the interpreter changes: what `run_cluster` used to clear.
#[derive(Default)]
pub(crate) struct Cluster {
    /// Cluster index in cluster units (`%clusterid`) and its linear number in the grid.
    pub id: [u32; 3],
    pub linear: u32,
    pub ctas: Vec<Cta>,
    pub threads: Vec<Thread>,
    pub runnable: Vec<u32>,
    pub rpos: Vec<u32>,
    pub tcq: Vec<VecDeque<TcJob>>,
    pub tc_active: Vec<u32>,
    pub tma: Vec<TmaJob>,
    pub stores: Vec<StoreJob>,
    pub store_done: Vec<bool>,
    pub phase: u64,
    pub arrivals: u32,
    pub waiters: Vec<u32>,
    pub rg: Global,
    /// Non-bulk `cp.async` jobs and records (their thread ids are this cluster's).
    pub cpa: crate::exec::async_copy::CpaState,
    /// This cluster's observers (the happens-before checker): their state is indexed by this
    /// cluster's thread and CTA numbers, so each cluster has its own.
    pub observers: Vec<Box<dyn crate::observe::Observer>>,
    /// What this cluster's technique instructions did so far (`attrib.rs`), keyed by its own
    /// thread and CTA numbers.
    pub attrib: crate::attrib::State,
}

/// How many clusters may be resident at once: one CTA per SM (the stock kernels' shared
/// memory leaves room for one), so `sms / cluster size` clusters, at least one.
pub(crate) fn resident_bound(sms: u32, cl_size: u32) -> usize {
    (sms / cl_size.max(1)).max(1) as usize
}

impl Machine<'_> {
    /// Exchange the machine's active-cluster fields with slot `i`'s.
    fn swap_with(&mut self, i: usize) {
        use std::mem::swap;
        let s = &mut self.slots[i];
        swap(&mut self.ctas, &mut s.ctas);
        swap(&mut self.threads, &mut s.threads);
        swap(&mut self.runnable, &mut s.runnable);
        swap(&mut self.rpos, &mut s.rpos);
        swap(&mut self.tcq, &mut s.tcq);
        swap(&mut self.tc_active, &mut s.tc_active);
        swap(&mut self.tma, &mut s.tma);
        swap(&mut self.stores, &mut s.stores);
        swap(&mut self.store_done, &mut s.store_done);
        swap(&mut self.cluster_phase, &mut s.phase);
        swap(&mut self.cluster_arrivals, &mut s.arrivals);
        swap(&mut self.cluster_waiters, &mut s.waiters);
        swap(&mut self.rg, &mut s.rg);
        swap(&mut self.cpa, &mut s.cpa);
        swap(&mut self.observers, &mut s.observers);
        swap(&mut self.attrib, &mut s.attrib);
    }

    /// Make slot `j` the active cluster.
    pub(crate) fn switch_to(&mut self, j: usize) {
        if j == self.cur {
            return;
        }
        if self.cur != NO_SLOT {
            self.swap_with(self.cur);
        }
        self.swap_with(j);
        self.cur = j;
        self.cluster_id = self.slots[j].id;
        self.xr.set_active(self.slots[j].linear);
    }

    /// Runnable threads and pending completions of slot `i`.
    fn load(&self, i: usize) -> (usize, usize) {
        if i == self.cur {
            (self.runnable.len(), self.pending_events())
        } else {
            let s = &self.slots[i];
            (
                s.runnable.len(),
                s.tma.len() + s.stores.len() + s.tc_active.len() + self.clc.pending(s.linear),
            )
        }
    }

    fn runnable_of(&self, i: usize) -> &[u32] {
        if i == self.cur {
            &self.runnable
        } else {
            &self.slots[i].runnable
        }
    }

    fn prio_of(&self, i: usize, t: u32) -> u64 {
        if i == self.cur {
            self.threads[t as usize].prio
        } else {
            self.slots[i].threads[t as usize].prio
        }
    }

    /// Make the next cluster of the grid resident (its CTAs, threads and queues, as the
    /// hardware launches a cluster: all its CTAs at once).
    fn admit(&mut self) -> Result<(), SimError> {
        let l = self.l;
        let cl = l.cluster;
        let ncl = [l.grid[0] / cl[0], l.grid[1] / cl[1], l.grid[2] / cl[2]];
        // A cluster whose launch a try_cancel cancelled never starts (`exec/clc.rs`).
        while self.clc.is_cancelled(self.next_cluster) {
            self.next_cluster += 1;
        }
        if self.next_cluster >= self.ncl_total {
            return Ok(());
        }
        let lin = self.next_cluster;
        self.next_cluster += 1;
        let cid = [
            lin % ncl[0],
            (lin / ncl[0]) % ncl[1],
            lin / (ncl[0] * ncl[1]),
        ];
        let mut c = Cluster {
            id: cid,
            linear: lin,
            observers: vec![Box::new(crate::check::hb::Hb::default())],
            ..Cluster::default()
        };
        crate::trace_events::attach(self.o, lin, &mut c.observers);
        let mut rank = 0;
        for z in 0..cl[2] {
            for y in 0..cl[1] {
                for x in 0..cl[0] {
                    let ctaid = [cid[0] * cl[0] + x, cid[1] * cl[1] + y, cid[2] * cl[2] + z];
                    let mut smem = vec![0u8; self.smem_bytes as usize];
                    crate::poison::poison_region(&mut smem);
                    c.ctas.push(Cta {
                        rank,
                        ctaid,
                        smem,
                        mbars: HashMap::new(),
                        bars: vec![BarState::default(); 16],
                        tmem: Tmem::new(),
                        live: self.nthreads,
                        rules: CtaRules::new(self.smem_bytes),
                        init: crate::poison::Written::new(self.smem_bytes as usize),
                        tinit: crate::poison::TmemWritten::default(),
                    });
                    for i in 0..self.nthreads {
                        c.threads.push(new_thread(self.k, rank, i, l.block));
                    }
                    rank += 1;
                }
            }
        }
        let n = c.threads.len();
        c.rpos = (0..n as u32).collect();
        c.runnable = (0..n as u32).collect();
        c.tcq = vec![VecDeque::new(); n];
        // PCT priorities are per warp: the scheduler runs warps (`lockstep.rs`).
        let mut prio = 0;
        for th in &mut c.threads {
            if th.lane == 0 {
                prio = self.rng.next_u64();
            }
            th.prio = prio;
        }
        if let Policy::Pct { depth } = self.o.policy {
            // Change points spread over an estimate of the cluster's length.
            let est = 2000 * n as u64;
            self.pct_changes = (0..depth)
                .map(|_| self.steps + self.rng.below(est))
                .collect();
        }
        self.xr.admit(lin);
        self.progress = self.steps;
        let (threads, ctas, smem) = (n as u32, c.ctas.len() as u32, self.smem_bytes);
        self.slots.push(c);
        // The observers learn the new cluster's shape while it is the active one.
        self.switch_to(self.slots.len() - 1);
        self.emit(crate::observe::Event::ClusterStart {
            threads,
            ctas,
            smem,
        })
    }

    /// The active cluster finished: count it and drop its state.
    fn retire_cluster(&mut self) {
        self.fold_warp_counts();
        crate::attrib::cluster_done(self);
        self.report.clusters += 1;
        let lin = self.slots[self.cur].linear;
        self.xr.finish(lin);
        self.slots.swap_remove(self.cur);
        self.cur = NO_SLOT;
        self.ctas = Vec::new();
        self.threads = Vec::new();
        self.runnable.clear();
        self.rpos.clear();
        self.tcq.clear();
        self.tc_active.clear();
        self.tma.clear();
        self.stores.clear();
        self.store_done.clear();
        self.cluster_phase = 0;
        self.cluster_arrivals = 0;
        self.cluster_waiters.clear();
        self.rg = Global::default();
        self.cpa = Default::default();
        self.observers = Vec::new();
        self.progress = self.steps;
    }

    /// Run every cluster of the grid: admit clusters while fewer than the bound are resident,
    /// and interleave all resident ones until the last finishes.
    pub(crate) fn run_grid(&mut self) -> Result<(), SimError> {
        let l = self.l;
        self.ncl_total = (0..3).map(|i| l.grid[i] / l.cluster[i]).product();
        self.resident_max = resident_bound(self.o.sms, self.cl_size);
        self.xr = crate::xrace::XRace::new(&self.k.opcodes, self.ncl_total);
        let mut loads: Vec<(usize, usize)> = Vec::new();
        'outer: loop {
            while self.slots.len() < self.resident_max && self.next_cluster < self.ncl_total {
                self.admit()?;
            }
            if self.slots.is_empty() {
                return Ok(());
            }
            loads.clear();
            let (mut nr, mut ne) = (0usize, 0usize);
            for i in 0..self.slots.len() {
                let (r, e) = self.load(i);
                if r == 0 && e == 0 {
                    self.switch_to(i);
                    if self.threads.iter().all(|t| t.st == St::Done) {
                        if let Some(e) = self.uninit.take() {
                            return Err(e);
                        }
                        self.clc_cluster_done()?;
                        self.retire_cluster();
                        continue 'outer;
                    }
                    return Err(SimError::Deadlock {
                        report: crate::deadlock::deadlock_report(self),
                    });
                }
                loads.push((r, e));
                nr += r;
                ne += e;
            }
            if self.prove.is_some() {
                if !self.prove_step()? {
                    // The proving mode's chooser ended the run (an order already covered).
                    return Err(SimError::Launch(PRUNED.into()));
                }
                self.spin_check()?;
                continue;
            }
            let retire = match self.o.policy {
                _ if nr == 0 => true,
                _ if ne == 0 => false,
                Policy::AsyncLate => false,
                Policy::AsyncEarly => true,
                Policy::Random | Policy::Pct { .. } => self.rng.chance(1, 8),
            };
            if retire {
                let mut i = self.rng.below(ne as u64) as usize;
                if matches!(self.o.policy, Policy::AsyncLate) || nr == 0 {
                    self.report.retired_late += 1;
                } else {
                    self.report.retired_early += 1;
                }
                let mut s = 0;
                while i >= loads[s].1 {
                    i -= loads[s].1;
                    s += 1;
                }
                self.switch_to(s);
                self.retire(i)?;
                self.progress = self.steps;
                continue;
            }
            let (s, t) = match self.o.policy {
                Policy::Pct { .. } => {
                    // Highest priority runnable thread (its warp's priority); at a change point
                    // its warp drops to the bottom.
                    let mut best = (NO_SLOT, NONE, 0u64);
                    for s in 0..self.slots.len() {
                        for &x in self.runnable_of(s) {
                            let p = self.prio_of(s, x);
                            if best.0 == NO_SLOT || p > best.2 {
                                best = (s, x, p);
                            }
                        }
                    }
                    self.switch_to(best.0);
                    if let Some(p) = self.pct_changes.iter().position(|&c| c <= self.steps) {
                        self.pct_changes.swap_remove(p);
                        let low = self.rng.below(1000);
                        for x in self.warp_range(best.1) {
                            self.threads[x as usize].prio = low;
                        }
                        self.report.priority_changes += 1;
                    }
                    (best.0, best.1)
                }
                _ => {
                    let mut i = self.rng.below(nr as u64) as usize;
                    let mut s = 0;
                    while i >= loads[s].0 {
                        i -= loads[s].0;
                        s += 1;
                    }
                    self.switch_to(s);
                    (s, self.runnable[i])
                }
            };
            let _ = s;
            let q = match self.o.policy {
                Policy::Pct { .. } => 64,
                _ => 1 + self.rng.below(64) as u32,
            };
            // The chosen thread's warp runs, its lanes in lockstep (`lockstep.rs`).
            self.run_warp(t, q)?;
            self.spin_check()?;
        }
    }

    fn spin_check(&mut self) -> Result<(), SimError> {
        if self.next_cluster < self.ncl_total && self.steps - self.progress > SPIN_WINDOW {
            return Err(SimError::Deadlock {
                report: self.spin_report(),
            });
        }
        Ok(())
    }

    /// Every resident thread has only polled for [`SPIN_WINDOW`] instructions while clusters
    /// wait to become resident: what each resident cluster's threads spin on.
    fn spin_report(&mut self) -> Vec<String> {
        let mut r = vec![format!(
            "waits on another cluster: the {} resident clusters ran {} instructions without writing memory, completing an asynchronous operation or blocking, while {} clusters of the grid wait to become resident (at most {} are resident at once: Options::sms / cluster size). A cluster that spins on a flag another cluster sets needs that cluster resident at the same time; the CUDA programming model does not guarantee it (only a cooperative launch does)",
            self.slots.len(),
            SPIN_WINDOW,
            self.ncl_total - self.next_cluster,
            self.resident_max
        )];
        for s in 0..self.slots.len() {
            self.switch_to(s);
            let mut lines: Vec<(u32, u32)> = self
                .runnable
                .iter()
                .map(|&t| {
                    let (p, src) = self.line_of(t);
                    (src, p)
                })
                .collect();
            lines.sort_unstable();
            lines.dedup();
            let id = self.cluster_id;
            let shown: Vec<String> = lines
                .iter()
                .take(4)
                .map(|(s, p)| format!("source line {s} (PTX line {p})"))
                .collect();
            r.push(format!(
                "cluster {id:?}: {} threads spin at {}",
                self.runnable.len(),
                shown.join(", ")
            ));
        }
        r
    }
}
