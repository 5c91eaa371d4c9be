//! The proving mode ([`explore_all`]): every distinct order of the synchronisation events of a
//! launch, enumerated depth first with sleep sets (Godefroid, "Partial-Order Methods for the
//! Verification of Concurrent Systems", 1996), bounded by states and by a caller's clock.
//!
//! **Transitions.** A thread's transition runs it to and through its next synchronisation
//! instruction (an mbarrier operation, `bar.sync`, the cluster barrier, a warp collective, a
//! TMA or tcgen05 issue, a bulk-group operation, a strong global access, its exit); the
//! instructions before it touch only registers and data memory, whose orders the ordering rules
//! and the race checks decide without trying them. An asynchronous completion (a TMA load
//! landing, a TMA store done, the next tcgen05 operation of a thread's queue) is a transition
//! too. A thread at an `mbarrier.try_wait` of a phase not yet complete, or at a cluster barrier
//! wait not yet released, is not enabled: waiting before the arrival or after it ends the same.
//!
//! **Reduction.** Each transition names the synchronisation objects it touches and how:
//! reading (a wait that passes), commuting (arrivals and transaction counts of one barrier,
//! lanes arriving at a collective, exits) or writing (an init, an atomic, a queue). Two
//! transitions of different threads are independent when no object is touched by both unless
//! both read or both commute; sleep sets then skip every order that only swaps independent
//! neighbours. Lanes, warps and the two CTAs of a pair are still interleaved where they touch a
//! common barrier, except the lanes of a warp at one `mbarrier.try_wait`: a converged warp
//! issues one try_wait, so they take it as one transition (named by the lowest lane).
//!
//! **Verdicts.** Clean (every order was run), incomplete (a bound was hit: what was covered
//! is reported), or an error with a witness: the list of choices, which [`replay`] runs again
//! (`Witness`'s text form is what a runner passes on).

use crate::decode::{MbarOp, Op, Space};
use crate::error::SimError;
use crate::launch::{Launch, Options};
use crate::machine::{Machine, St};
use crate::mem::{Device, SHARED_WINDOW, WINDOW_BYTES};
use crate::report::RunReport;
use crate::Program;

/// One transition, named so that the same one is recognised in every run (cluster numbers
/// are the clusters' linear numbers in the grid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tr {
    /// Thread `t` of cluster `cl` runs to and through its next synchronisation instruction.
    Thread { cl: u32, t: u32 },
    /// A TMA load of thread `t` into shared offset `dst` lands.
    Load { cl: u32, t: u32, dst: u32 },
    /// TMA store `id` completes.
    Store { cl: u32, id: u32 },
    /// The next tcgen05 operation of thread `t`'s queue completes.
    Tc { cl: u32, t: u32 },
}

impl std::fmt::Display for Tr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Tr::Thread { cl, t } => write!(f, "t{cl}.{t}"),
            Tr::Load { cl, t, dst } => write!(f, "l{cl}.{t}.{dst}"),
            Tr::Store { cl, id } => write!(f, "s{cl}.{id}"),
            Tr::Tc { cl, t } => write!(f, "c{cl}.{t}"),
        }
    }
}

impl std::str::FromStr for Tr {
    type Err = String;
    fn from_str(s: &str) -> Result<Tr, String> {
        let bad = || format!("`{s}` is not a choice (t, l, s or c followed by dotted numbers)");
        let mut c = s.chars();
        let kind = c.next().ok_or_else(bad)?;
        let n: Vec<u32> = c
            .as_str()
            .split('.')
            .map(|x| x.parse::<u32>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        Ok(match (kind, n.as_slice()) {
            ('t', [cl, t]) => Tr::Thread { cl: *cl, t: *t },
            ('l', [cl, t, dst]) => Tr::Load {
                cl: *cl,
                t: *t,
                dst: *dst,
            },
            ('s', [cl, id]) => Tr::Store { cl: *cl, id: *id },
            ('c', [cl, t]) => Tr::Tc { cl: *cl, t: *t },
            _ => return Err(bad()),
        })
    }
}

/// A schedule the proving mode found: its choices, in order. Its text form is the choices
/// joined by commas; after the last one, the first enabled transition is taken each time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Witness(pub Vec<Tr>);

impl std::fmt::Display for Witness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(|t| t.to_string()).collect();
        write!(f, "{}", v.join(","))
    }
}

impl std::str::FromStr for Witness {
    type Err = String;
    fn from_str(s: &str) -> Result<Witness, String> {
        if s.trim().is_empty() {
            return Ok(Witness(Vec::new()));
        }
        s.split(',')
            .map(|x| x.trim().parse())
            .collect::<Result<_, _>>()
            .map(Witness)
    }
}

/// A synchronisation object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Obj {
    Mbar(u32, u32, u32),
    /// A CTA barrier (`u32::MAX`: all sixteen, as an exit touches them).
    Bar(u32, u32, u32),
    ClusterBar(u32),
    Queue(u32, u32),
    Bulk(u32, u32),
    Warp(u32, u32, u32),
    /// The tensor-memory allocator of a CTA, used by a warp: the lanes of one warp take part
    /// in one allocation, so only different warps' uses conflict.
    Tmem(u32, u32, u32),
    Global(u64),
    /// Everything of a cluster (`u32::MAX`: of every cluster).
    Cluster(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Read,
    Commute,
    Write,
}

/// A transition's footprint: up to four objects (more collapse into their whole cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fp {
    n: u8,
    items: [(Obj, Mode); 4],
}

impl Default for Fp {
    fn default() -> Fp {
        Fp {
            n: 0,
            items: [(Obj::Global(0), Mode::Read); 4],
        }
    }
}

impl Fp {
    pub(crate) fn of(v: &[(Obj, Mode)]) -> Fp {
        let mut f = Fp::default();
        for &x in v {
            f.push(x);
        }
        f
    }

    fn push(&mut self, x: (Obj, Mode)) {
        if (self.n as usize) < self.items.len() {
            self.items[self.n as usize] = x;
            self.n += 1;
        } else {
            // Too many objects to name: everything of the cluster, written.
            let cl = match self.items[0].0 {
                Obj::Mbar(c, ..)
                | Obj::Bar(c, ..)
                | Obj::ClusterBar(c)
                | Obj::Queue(c, _)
                | Obj::Bulk(c, _)
                | Obj::Warp(c, ..)
                | Obj::Tmem(c, ..)
                | Obj::Cluster(c) => c,
                Obj::Global(_) => u32::MAX,
            };
            *self = Fp::default();
            self.items[0] = (Obj::Cluster(cl), Mode::Write);
            self.n = 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = &(Obj, Mode)> {
        self.items[..self.n as usize].iter()
    }
}

fn cluster_of(o: Obj) -> Option<u32> {
    match o {
        Obj::Mbar(c, ..)
        | Obj::Bar(c, ..)
        | Obj::ClusterBar(c)
        | Obj::Queue(c, _)
        | Obj::Bulk(c, _)
        | Obj::Warp(c, ..)
        | Obj::Tmem(c, ..)
        | Obj::Cluster(c) => Some(c),
        Obj::Global(_) => None,
    }
}

fn same(a: Obj, b: Obj) -> bool {
    match (a, b) {
        (Obj::Tmem(c1, k1, w1), Obj::Tmem(c2, k2, w2)) => c1 == c2 && k1 == k2 && w1 != w2,
        (Obj::Cluster(c), o) | (o, Obj::Cluster(c)) => {
            c == u32::MAX || cluster_of(o).is_none_or(|x| x == c)
        }
        (Obj::Bar(c1, k1, i), Obj::Bar(c2, k2, j)) => {
            c1 == c2 && k1 == k2 && (i == j || i == u32::MAX || j == u32::MAX)
        }
        _ => a == b,
    }
}

fn dependent(a: &Fp, b: &Fp) -> bool {
    a.iter().any(|&(oa, ma)| {
        b.iter().any(|&(ob, mb)| {
            same(oa, ob)
                && !(ma == Mode::Read && mb == Mode::Read)
                && !(ma == Mode::Commute && mb == Mode::Commute)
        })
    })
}

/// One choice point of the depth-first search.
#[derive(Debug, Clone)]
struct Node {
    enabled: Vec<Tr>,
    /// The sleep set on entry.
    sleep: Vec<(Tr, Fp)>,
    /// Choices explored from here, the current one last, and their footprints (the last one's
    /// is filled in when a run first takes it).
    done: Vec<Tr>,
    done_fp: Vec<Fp>,
    /// Choices that must be explored from here (dynamic partial-order reduction): a later
    /// transition that is dependent with this node's choice and of another agent.
    backtrack: Vec<Tr>,
    /// Threads at a wait that could not pass here.
    stuck: Vec<Tr>,
}

type Agent = (u8, u32, u32, u32);

/// The latest two transitions on the path that touched an object in a mode, of two different
/// agents (the latest, then the latest of any other agent): the latest dependent transition of
/// another agent is one of them.
#[derive(Debug, Clone, Copy)]
struct Last([Option<(usize, Agent)>; 2]);

/// The key an object is indexed by, and the agent its use counts for: the tensor-memory
/// allocator is used by a warp (its lanes take part in one allocation).
fn key_of(o: Obj, a: Agent) -> (Obj, Agent) {
    match o {
        Obj::Tmem(c, k, w) => (Obj::Tmem(c, k, 0), (9, c, k, w)),
        _ => (o, a),
    }
}

/// Who makes a transition: a thread, or one asynchronous operation (a queue, a load, a store).
fn agent(t: Tr) -> (u8, u32, u32, u32) {
    match t {
        Tr::Thread { cl, t } => (0, cl, t, 0),
        Tr::Tc { cl, t } => (1, cl, t, 0),
        Tr::Load { cl, t, dst } => (2, cl, t, dst),
        Tr::Store { cl, id } => (3, cl, id, 0),
    }
}

/// The proving mode's side of the scheduler.
#[derive(Debug, Clone, Default)]
pub struct Chooser {
    /// Choices to take first (the path to the node being explored).
    prefix: Vec<Tr>,
    nodes: Vec<Node>,
    depth: usize,
    /// The run ended in a state whose every enabled transition sleeps: an order already seen.
    pub(crate) pruned: bool,
    /// Replaying a witness: no search state is kept.
    replay: bool,
    /// The choices this run made, and their footprints.
    pub(crate) path: Vec<Tr>,
    path_fp: Vec<Fp>,
    /// Per object and mode, the latest uses on the path (see [`Last`]).
    last: std::collections::HashMap<(Obj, Mode), Last>,
    /// Path indices whose footprint names a whole cluster.
    wild: Vec<usize>,
    pub(crate) transitions: u64,
    new_states: u64,
    /// The prefix could not be followed (the kernel depends on something not replayed).
    pub(crate) diverged: bool,
}

/// Whether `c` is the thread transition that issued the asynchronous operation `e` (its
/// footprint `fp`): the issue enables the completion, which can never come before it.
fn issued_by(e: Tr, fp: &Fp, c: Tr) -> bool {
    let Tr::Thread { cl, t } = c else {
        return false;
    };
    match e {
        Tr::Tc { cl: a, t: x } | Tr::Load { cl: a, t: x, .. } => a == cl && x == t,
        Tr::Store { cl: a, .. } => a == cl && fp.iter().any(|&(o, _)| o == Obj::Bulk(cl, t)),
        Tr::Thread { .. } => false,
    }
}

/// The thread transition that issues the asynchronous operation `e` (footprint `fp`).
fn issuer(e: Tr, fp: &Fp) -> Option<Tr> {
    match e {
        Tr::Tc { cl, t } | Tr::Load { cl, t, .. } => Some(Tr::Thread { cl, t }),
        Tr::Store { cl, .. } => fp.iter().find_map(|&(o, _)| match o {
            Obj::Bulk(c, t) if c == cl => Some(Tr::Thread { cl, t }),
            _ => None,
        }),
        Tr::Thread { .. } => None,
    }
}

impl Chooser {
    /// A chooser that follows `w`, then takes the first enabled transition each time.
    pub(crate) fn replaying(w: &Witness) -> Chooser {
        Chooser {
            prefix: w.0.clone(),
            replay: true,
            ..Chooser::default()
        }
    }

    /// The latest transition on the path, of another agent, that is dependent with `e`.
    fn latest_dependent(&self, e: Tr, fp: &Fp) -> Option<usize> {
        let me = agent(e);
        if fp.iter().any(|&(o, _)| matches!(o, Obj::Cluster(_))) {
            return (0..self.path.len())
                .rev()
                .find(|&k| agent(self.path[k]) != me && dependent(&self.path_fp[k], fp));
        }
        let mut best: Option<usize> = None;
        for &(o, m) in fp.iter() {
            let (key, a) = key_of(o, me);
            for other in [Mode::Read, Mode::Commute, Mode::Write] {
                if (m == Mode::Read && other == Mode::Read)
                    || (m == Mode::Commute && other == Mode::Commute)
                {
                    continue;
                }
                if let Some(l) = self.last.get(&(key, other)) {
                    let pick = match l.0[0] {
                        Some((k, b)) if b != a => Some(k),
                        _ => l.0[1].map(|(k, _)| k),
                    };
                    if let Some(k) = pick {
                        // An agent's own earlier transitions are in program order with it.
                        if agent(self.path[k]) != me {
                            best = best.max(Some(k));
                        }
                    }
                }
            }
        }
        for &k in &self.wild {
            if agent(self.path[k]) != me && dependent(&self.path_fp[k], fp) {
                best = best.max(Some(k));
            }
        }
        best
    }

    /// Record the choice `e` (footprint `fp`) at the current depth, after adding it to the
    /// backtrack set of the latest earlier choice of another agent it depends on (Flanagan and
    /// Godefroid, POPL 2005; the latest dependent choice stands in for the one not ordered
    /// before it, which can add choices, never lose one).
    fn record(&mut self, e: Tr, fp: Fp) {
        if !self.replay {
            let me = agent(e);
            if let Some(k) = self.latest_dependent(e, &fp) {
                let issued = issued_by(e, &fp, self.path[k]);
                if let Some(n) = self.nodes.get_mut(k) {
                    if n.enabled.contains(&e) {
                        if !n.backtrack.contains(&e) {
                            n.backtrack.push(e);
                        }
                    } else if n.stuck.contains(&e) || issued {
                        // e waited for what this choice completed (the latest transition on
                        // its object), or this choice issued it: its enabler, no race.
                    } else if let Some(i) = issuer(e, &fp).filter(|i| n.enabled.contains(i)) {
                        // An asynchronous operation issued after this choice: the race is
                        // with its issuing thread, which may run first.
                        if !n.backtrack.contains(&i) {
                            n.backtrack.push(i);
                        }
                    } else {
                        for t in &n.enabled {
                            if !n.backtrack.contains(t) {
                                n.backtrack.push(*t);
                            }
                        }
                    }
                }
            }
            let i = self.path.len();
            for &(o, m) in fp.iter() {
                if matches!(o, Obj::Cluster(_)) {
                    self.wild.push(i);
                    continue;
                }
                let (key, a) = key_of(o, me);
                let l = self.last.entry((key, m)).or_insert(Last([None, None]));
                match l.0[0] {
                    Some((_, b)) if b == a => l.0[0] = Some((i, a)),
                    _ => {
                        l.0[1] = l.0[0];
                        l.0[0] = Some((i, a));
                    }
                }
            }
        }
        self.path.push(e);
        self.path_fp.push(fp);
    }

    /// Pick one of `enabled` (never empty); None: stop this run (pruned or diverged).
    pub(crate) fn pick(&mut self, enabled: Vec<(Tr, Fp)>, stuck: Vec<Tr>) -> Option<Tr> {
        let d = self.depth;
        self.depth += 1;
        self.transitions += 1;
        let first = enabled[0].0;
        if let Some(&want) = self.prefix.get(d) {
            if !enabled.iter().any(|(t, _)| *t == want) {
                self.diverged = true;
                return None;
            }
            if !self.replay && d == self.nodes.len() {
                // Only when the stack was cut shorter than the prefix (never in the search).
                self.diverged = true;
                return None;
            }
            let fp = enabled
                .iter()
                .find(|(t, _)| *t == want)
                .map(|(_, f)| *f)
                .unwrap_or_default();
            if let Some(n) = self.nodes.get_mut(d) {
                if n.done_fp.len() < n.done.len() {
                    n.done_fp.push(fp);
                }
            }
            self.record(want, fp);
            return Some(want);
        }
        if self.replay {
            self.path.push(first);
            return Some(first);
        }
        // A new node: its sleep set from the parent's.
        let sleep = match d.checked_sub(1).and_then(|p| self.nodes.get(p)) {
            None => Vec::new(),
            Some(parent) => {
                let chosen = *parent.done.last().expect("a parent has a choice");
                let cfp = self.path_fp.get(d - 1).copied().unwrap_or_default();
                let mut s: Vec<(Tr, Fp)> = Vec::new();
                let k = parent.done.len() - 1;
                let earlier = parent.done[..k]
                    .iter()
                    .copied()
                    .zip(parent.done_fp[..k].iter().copied());
                for (u, f) in parent.sleep.iter().copied().chain(earlier) {
                    let same_thread = matches!((u, chosen), (Tr::Thread { cl: a, t: x }, Tr::Thread { cl: b, t: y }) if a == b && x == y);
                    if !same_thread && !dependent(&f, &cfp) && !s.iter().any(|(v, _)| *v == u) {
                        s.push((u, f));
                    }
                }
                s
            }
        };
        self.new_states += 1;
        let pick = enabled
            .iter()
            .find(|(t, _)| !sleep.iter().any(|(u, _)| u == t))
            .map(|(t, f)| (*t, *f));
        let Some((pick, fp)) = pick else {
            self.pruned = true;
            return None;
        };
        self.nodes.push(Node {
            enabled: enabled.into_iter().map(|(t, _)| t).collect(),
            sleep,
            done: vec![pick],
            done_fp: vec![fp],
            backtrack: vec![pick],
            stuck,
        });
        self.record(pick, fp);
        Some(pick)
    }

    /// Move to the next unexplored node; false when none is left.
    fn backtrack(&mut self) -> bool {
        while let Some(n) = self.nodes.last_mut() {
            let next = n
                .backtrack
                .iter()
                .find(|t| !n.done.contains(t) && !n.sleep.iter().any(|(u, _)| u == *t))
                .copied();
            if let Some(t) = next {
                n.done.push(t);
                let d = self.nodes.len() - 1;
                self.prefix = self.path[..d].to_vec();
                self.prefix.push(t);
                return true;
            }
            self.nodes.pop();
        }
        false
    }

    fn start_run(&mut self) {
        self.depth = 0;
        self.pruned = false;
        self.diverged = false;
        self.path.clear();
        self.path_fp.clear();
        self.last.clear();
        self.wild.clear();
    }
}

/// Bounds of [`explore_all`].
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Choice points (states) created at most.
    pub max_states: u64,
    /// Runs (executions from the start) at most.
    pub max_runs: u64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_states: 2_000_000,
            max_runs: 100_000,
        }
    }
}

/// What the proving mode concluded.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Every order of the synchronisation events was run; none failed.
    Clean,
    /// A bound was hit (or a run could not be replayed): `why`, and what was covered.
    Incomplete { why: String },
    /// A run failed; `witness` replays it ([`replay`]).
    Error {
        error: String,
        cause: Option<SimError>,
        witness: Witness,
    },
}

/// [`explore_all`]'s result: the verdict and what it covered.
#[derive(Debug, Clone)]
pub struct Proof {
    pub verdict: Verdict,
    /// Executions from the start (each replays a prefix, then explores).
    pub runs: u64,
    /// Distinct states (choice points) explored.
    pub states: u64,
    /// Transitions executed over all runs.
    pub transitions: u64,
    /// Runs cut short because every enabled transition slept (an order already covered).
    pub pruned: u64,
    /// The deepest run, in transitions.
    pub max_depth: usize,
}

impl std::fmt::Display for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = match &self.verdict {
            Verdict::Clean => "clean: every order of the synchronisation events ran".to_string(),
            Verdict::Incomplete { why } => format!("incomplete: {why}"),
            Verdict::Error { error, witness, .. } => {
                format!("error: {error} (witness schedule: {witness})")
            }
        };
        write!(
            f,
            "{v}; {} runs, {} states, {} transitions, {} pruned by sleep sets, deepest run {} transitions",
            self.runs, self.states, self.transitions, self.pruned, self.max_depth
        )
    }
}

/// Why a kernel that issues `clusterlaunchcontrol.try_cancel` is not explored: its responses
/// land, and succeed or fail, outside the transitions the exploration branches on.
pub const CLC_NOT_EXPLORED: &str = "the proving mode does not model clusterlaunchcontrol: when a try_cancel response lands, and whether it cancels a cluster or fails, are not transitions it branches on, so it cannot prove a kernel that uses it; run it under the schedule policies instead (--explore N)";

/// Run every distinct order of the synchronisation events of the launch on copies of `dev`
/// (`verify` checks each finished run's memory), until all ran, a bound is hit, or
/// `out_of_time()` says so (checked between runs; the library has no clock of its own, so
/// that it builds for wasm32-unknown-unknown).
pub fn explore_all(
    p: &Program,
    dev: &Device,
    l: &Launch,
    o: &Options,
    bounds: Bounds,
    verify: &mut dyn FnMut(&Device) -> Result<(), String>,
    out_of_time: &mut dyn FnMut() -> bool,
) -> Proof {
    let mut ch = Chooser::default();
    if p.uses_cluster_launch_control() {
        return Proof {
            verdict: Verdict::Incomplete {
                why: CLC_NOT_EXPLORED.into(),
            },
            runs: 0,
            states: 0,
            transitions: 0,
            pruned: 0,
            max_depth: 0,
        };
    }
    let mut proof = Proof {
        verdict: Verdict::Clean,
        runs: 0,
        states: 0,
        transitions: 0,
        pruned: 0,
        max_depth: 0,
    };
    loop {
        ch.start_run();
        let mut d = dev.clone();
        let (r, back) = crate::run_with(p, &mut d, l, o, Some(ch));
        ch = back.unwrap_or_default();
        proof.runs += 1;
        proof.max_depth = proof.max_depth.max(ch.path.len());
        if ch.diverged {
            proof.verdict = Verdict::Incomplete {
                why: "a run did not follow its recorded prefix (the kernel's choices depend on something outside the schedule)".into(),
            };
            break;
        }
        if ch.pruned {
            proof.pruned += 1;
        } else {
            let failure = match r {
                Err(s) => Some((s.error.to_string(), Some(s.error))),
                Ok(_) => verify(&d).err().map(|e| (e, None)),
            };
            if let Some((error, cause)) = failure {
                proof.verdict = Verdict::Error {
                    error,
                    cause,
                    witness: Witness(ch.path.clone()),
                };
                break;
            }
        }
        if !ch.backtrack() {
            break;
        }
        if ch.new_states >= bounds.max_states || proof.runs >= bounds.max_runs || out_of_time() {
            proof.verdict = Verdict::Incomplete {
                why: format!(
                    "a bound was hit ({} states of at most {}, {} runs of at most {}, or the time) with {} choice points still open on the current path",
                    ch.new_states,
                    bounds.max_states,
                    proof.runs,
                    bounds.max_runs,
                    ch.nodes.len()
                ),
            };
            break;
        }
    }
    proof.states = ch.new_states;
    proof.transitions = ch.transitions;
    proof
}

/// Run the launch along `witness` (then the first enabled transition each time): the failing
/// run [`explore_all`] found, again.
pub fn replay(
    p: &Program,
    dev: &mut Device,
    l: &Launch,
    o: &Options,
    witness: &Witness,
) -> Result<RunReport, crate::Stopped> {
    crate::run_with(p, dev, l, o, Some(Chooser::replaying(witness))).0
}

// -------------------------------------------------------------------------------------------
// The machine's side: enabled transitions, their footprints, and taking one.
// -------------------------------------------------------------------------------------------

impl Machine<'_> {
    /// The synchronisation footprint of thread `t`'s next instruction, and whether it can run
    /// now; None: not a synchronisation instruction.
    fn sync_fp(&self, t: u32) -> Option<(Fp, bool)> {
        let th = &self.threads[t as usize];
        let ins = self.k.code.get(th.pc as usize)?;
        if let Some((p, neg)) = ins.guard {
            if (th.regs[p as usize] != 0) == neg {
                return None;
            }
        }
        let cl = self.slots[self.cur].linear;
        let (cta, warp) = (th.cta, th.warp);
        let a = &ins.args;
        let one = |o: Obj, m: Mode| Some((Fp::of(&[(o, m)]), true));
        match &ins.op {
            Op::Mbar(kind, space) => {
                let i = match kind {
                    MbarOp::Init | MbarOp::Inval | MbarOp::ExpectTx | MbarOp::CompleteTx => 0,
                    _ => 1,
                };
                let (v, _) = self.addr_of(t, a.get(i)?);
                let v = if *space == Space::Generic {
                    if !(SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&v) {
                        return Some((Fp::default(), true));
                    }
                    v - SHARED_WINDOW
                } else {
                    v
                };
                let Ok((c, off)) = self.shared_loc(t, v, 8) else {
                    // It faults when it runs.
                    return Some((Fp::default(), true));
                };
                let o = Obj::Mbar(cl, c, off);
                match kind {
                    MbarOp::Init | MbarOp::Inval => one(o, Mode::Write),
                    MbarOp::TryWait | MbarOp::TryWaitParity => {
                        let Some(b) = self.ctas[c as usize].mbars.get(&off) else {
                            return Some((Fp::default(), true));
                        };
                        let parity = (self.rv(t, a.get(2)?) & 1) as u32;
                        let passes = (b.phase & 1) as u32 != parity;
                        Some((Fp::of(&[(o, Mode::Read)]), passes))
                    }
                    MbarOp::TestWait | MbarOp::TestWaitParity => one(o, Mode::Read),
                    _ => one(o, Mode::Commute),
                }
            }
            Op::BarSync { .. } => {
                let id = self.rv(t, a.first()?) as u32;
                one(Obj::Bar(cl, cta, id), Mode::Commute)
            }
            Op::ClusterBarrier { wait } => {
                if *wait {
                    // The cluster barrier's phase only grows, so a wait that passes passes in
                    // any order with the arrivals and exits after it: it touches nothing. One
                    // that cannot pass yet waits for its enabler.
                    let passes = matches!(th.cluster_arrived, Some(p) if p < self.cluster_phase);
                    Some((Fp::default(), passes))
                } else {
                    one(Obj::ClusterBar(cl), Mode::Commute)
                }
            }
            Op::TmaLoad { .. }
            | Op::TcMma { .. }
            | Op::TcCommit { .. }
            | Op::TcCp { .. }
            | Op::TcShift { .. } => one(Obj::Queue(cl, t), Mode::Commute),
            // Appending to a queue commutes with completing its front; a wait reads it.
            Op::TmaStore { .. } | Op::BulkCommit => one(Obj::Bulk(cl, t), Mode::Commute),
            // Stores only complete, so a wait that passes passes in any order with them (it
            // touches nothing); one that cannot pass yet waits for its enabler.
            Op::BulkWait { .. } => {
                let n = self.rv(t, a.first()?) as u32;
                Some((Fp::default(), self.bulk_wait_done(t, n)))
            }
            Op::TcAlloc { .. } | Op::TcDealloc { .. } | Op::TcRelinquish { .. } => Some((
                Fp::of(&[
                    (Obj::Warp(cl, cta, warp), Mode::Commute),
                    (Obj::Tmem(cl, cta, warp), Mode::Write),
                ]),
                true,
            )),
            Op::ElectSync
            | Op::ShflSync(_)
            | Op::VoteSync(_)
            | Op::BarWarpSync
            | Op::TcLd { .. }
            | Op::TcSt { .. }
            | Op::TcWaitLd
            | Op::TcWaitSt => one(Obj::Warp(cl, cta, warp), Mode::Commute),
            Op::Ret | Op::Exit => Some((
                Fp::of(&[
                    (Obj::Bar(cl, cta, u32::MAX), Mode::Commute),
                    (Obj::ClusterBar(cl), Mode::Commute),
                    (Obj::Warp(cl, cta, warp), Mode::Commute),
                ]),
                true,
            )),
            Op::Atom { space, .. } | Op::Ld { space, .. } | Op::St { space, .. }
                if self.xr.strong(ins.key) && matches!(space, Space::Global | Space::Generic) =>
            {
                let i = usize::from(matches!(
                    &ins.op,
                    Op::Atom { red: false, .. } | Op::Ld { .. }
                ));
                let (addr, _) = self.addr_of(t, a.get(i)?);
                let m = if matches!(ins.op, Op::Ld { .. }) {
                    Mode::Read
                } else {
                    Mode::Write
                };
                one(Obj::Global(addr & !3), m)
            }
            _ => None,
        }
    }

    /// Run thread `t` up to its next synchronisation instruction (not through it).
    fn run_ahead(&mut self, t: u32) -> Result<(), SimError> {
        while self.threads[t as usize].st == St::Run && self.sync_fp(t).is_none() {
            if self
                .k
                .code
                .get(self.threads[t as usize].pc as usize)
                .is_none()
            {
                // Past the end: the exit runs as the next transition.
                return self.run_thread(t, 1);
            }
            self.run_thread(t, 1)?;
        }
        Ok(())
    }

    /// One step of the proving mode: every resident cluster's threads brought to their next
    /// synchronisation instruction, then one enabled transition chosen and taken. Ok(false):
    /// the chooser stopped the run.
    pub(crate) fn prove_step(&mut self) -> Result<bool, SimError> {
        let mut enabled: Vec<(Tr, Fp)> = Vec::new();
        let mut stuck: Option<(usize, u32)> = None;
        let mut stuck_trs: Vec<Tr> = Vec::new();
        for s in 0..self.slots.len() {
            self.switch_to(s);
            let cl = self.slots[s].linear;
            let mut i = 0;
            while i < self.runnable.len() {
                let t = self.runnable[i];
                self.run_ahead(t)?;
                if self.threads[t as usize].st == St::Run {
                    match self.sync_fp(t) {
                        Some((fp, true)) => enabled.push((Tr::Thread { cl, t }, fp)),
                        Some((_, false)) => {
                            stuck = stuck.or(Some((s, t)));
                            stuck_trs.push(Tr::Thread { cl, t });
                        }
                        None => enabled.push((Tr::Thread { cl, t }, Fp::default())),
                    }
                }
                // run_ahead may have removed t from the runnable set (blocked or exited).
                if self.runnable.get(i) == Some(&t) {
                    i += 1;
                }
            }
            // A converged warp issues one try_wait for its lanes (`lockstep.rs`): the lanes at
            // one try_wait are one transition, named by the lowest of them.
            enabled.retain(|&(tr, _)| match tr {
                Tr::Thread { cl: c, t } if c == cl => self.wait_group(t)[0] == t,
                _ => true,
            });
            for j in &self.tma {
                let mut fp = Fp::default();
                for &(c, o) in &j.mbar {
                    fp.push((Obj::Mbar(cl, c, o), Mode::Commute));
                }
                enabled.push((
                    Tr::Load {
                        cl,
                        t: j.thread,
                        dst: j.dst.first().map_or(0, |d| d.1),
                    },
                    fp,
                ));
            }
            for st in &self.stores {
                enabled.push((
                    Tr::Store { cl, id: st.id },
                    Fp::of(&[(Obj::Bulk(cl, st.thread), Mode::Commute)]),
                ));
            }
            for &t in &self.tc_active {
                let mut fp = Fp::of(&[(Obj::Queue(cl, t), Mode::Commute)]);
                if let Some(crate::machine::TcJob::Commit { targets, .. }) =
                    self.tcq[t as usize].front()
                {
                    for &(c, o) in targets {
                        fp.push((Obj::Mbar(cl, c, o), Mode::Commute));
                    }
                }
                enabled.push((Tr::Tc { cl, t }, fp));
            }
        }
        if enabled.is_empty() {
            // Only waits that cannot pass: let one block (the deadlock check then sees it).
            if let Some((s, t)) = stuck {
                self.switch_to(s);
                self.run_thread(t, 1)?;
            }
            return Ok(true);
        }
        let Some(pick) = self.prove.as_mut().and_then(|c| c.pick(enabled, stuck_trs)) else {
            return Ok(false);
        };
        self.take(pick)?;
        Ok(true)
    }

    /// The lanes that take thread `t`'s next step with it: where `t` is at an
    /// `mbarrier.try_wait`, every runnable lane of its warp at the same instruction with the
    /// same footprint and outcome (a converged warp's one try_wait), in lane order; else `t`.
    fn wait_group(&self, t: u32) -> Vec<u32> {
        let th = &self.threads[t as usize];
        let at_wait = matches!(
            self.k.code.get(th.pc as usize).map(|i| &i.op),
            Some(Op::Mbar(MbarOp::TryWait | MbarOp::TryWaitParity, _))
        );
        if !at_wait {
            return vec![t];
        }
        let (pc, me) = (th.pc, self.sync_fp(t));
        self.warp_range(t)
            .filter(|&x| {
                let o = &self.threads[x as usize];
                x == t || (o.st == St::Run && o.pc == pc && self.sync_fp(x) == me)
            })
            .collect()
    }

    fn slot_of(&self, cl: u32) -> Option<usize> {
        self.slots.iter().position(|s| s.linear == cl)
    }

    fn take(&mut self, tr: Tr) -> Result<(), SimError> {
        let cl = match tr {
            Tr::Thread { cl, .. }
            | Tr::Load { cl, .. }
            | Tr::Store { cl, .. }
            | Tr::Tc { cl, .. } => cl,
        };
        let Some(s) = self.slot_of(cl) else {
            return Ok(());
        };
        self.switch_to(s);
        match tr {
            Tr::Thread { t, .. } => {
                for x in self.wait_group(t) {
                    self.run_thread(x, 1)?;
                }
                Ok(())
            }
            Tr::Load { t, dst, .. } => {
                let i = self
                    .tma
                    .iter()
                    .position(|j| j.thread == t && j.dst.first().map_or(0, |d| d.1) == dst);
                match i {
                    Some(i) => self.retire(i),
                    None => Ok(()),
                }
            }
            Tr::Store { id, .. } => match self.stores.iter().position(|x| x.id == id) {
                Some(i) => self.retire(self.tma.len() + i),
                None => Ok(()),
            },
            Tr::Tc { t, .. } => match self.tc_active.iter().position(|&x| x == t) {
                Some(i) => self.retire(self.tma.len() + self.stores.len() + i),
                None => Ok(()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn witnesses_read_as_they_print() {
        let w = Witness(vec![
            Tr::Thread { cl: 0, t: 5 },
            Tr::Load {
                cl: 1,
                t: 2,
                dst: 4096,
            },
            Tr::Store { cl: 0, id: 3 },
            Tr::Tc { cl: 0, t: 32 },
        ]);
        assert_eq!(w.to_string().parse::<Witness>(), Ok(w));
        assert!("x1.2".parse::<Witness>().is_err());
    }

    #[test]
    fn commuting_and_reading_pairs_are_independent() {
        let m = Obj::Mbar(0, 0, 8);
        assert!(!dependent(
            &Fp::of(&[(m, Mode::Commute)]),
            &Fp::of(&[(m, Mode::Commute)])
        ));
        assert!(!dependent(
            &Fp::of(&[(m, Mode::Read)]),
            &Fp::of(&[(m, Mode::Read)])
        ));
        assert!(dependent(
            &Fp::of(&[(m, Mode::Read)]),
            &Fp::of(&[(m, Mode::Commute)])
        ));
        assert!(dependent(
            &Fp::of(&[(Obj::Bar(0, 1, u32::MAX), Mode::Write)]),
            &Fp::of(&[(Obj::Bar(0, 1, 3), Mode::Commute)])
        ));
    }
}
