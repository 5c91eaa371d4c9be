//! A host-side model of the mbarrier phases of the TMA → MMA ring, used by the book to show what
//! each parity bug does (chapter 0, "mbarrier phases") and tested against the kernels' own wait
//! lines (`tests/tests/phase_twin.rs`).
//!
//! The barrier follows the PTX ISA's description of an mbarrier object: a phase completes when its
//! pending arrival count and its transaction count both reach zero, and the object then moves to
//! the next phase with the arrival count reloaded. `mbarrier.try_wait.parity P` reports whether
//! "the phase indicated by P" has completed, where P names either the current phase or the one
//! just before it. The model implements that the way the hardware's phase bit does: the wait
//! succeeds when the current (incomplete) phase's parity differs from P. Two consequences the
//! chapter relies on:
//!
//! - a freshly initialised barrier is in phase 0, and a wait with parity 1 returns at once. The
//!   ISA defines no phase before phase 0, so this is hardware practice, not ISA semantics — but
//!   CUTLASS relies on it, starting its producers in phase 1 (`make_producer_start_state` in
//!   `cutlass/pipeline/sm90_pipeline.hpp`), and the model follows the hardware;
//! - a wait whose parity names a phase two or more behind is outside what the ISA defines and
//!   aliases onto a phase of the same parity: the model shows what that aliasing does.
//!
//! The ring itself is a discrete-event simulation: a producer issues TMA loads that land after a
//! fixed latency, an MMA issuer queues MMAs on one in-order tensor core, and commits arrive on the
//! slot's `load_empty` barrier when the MMAs finish. Times are abstract ticks. Every wait that
//! returns too early is caught at the next action it allows (a slot refilled under a k-block that
//! is still needed, an MMA reading a slot that does not hold its k-block); every wait that can never
//! return is reported as a hang once nothing else can happen.

use super::budget::BudgetInput;
use crate::Step;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

/// One mbarrier object, as the PTX ISA describes its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mbarrier {
    expected: u32,
    pending: u32,
    tx: i64,
    completed: u32,
}

/// An arrival on a phase whose expected arrivals have all happened already: the pending count
/// would leave its range, which the PTX ISA leaves undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraArrival;

impl Mbarrier {
    /// `mbarrier.init` with `count` expected arrivals: phase 0, nothing pending but the arrivals.
    pub fn new(count: u32) -> Self {
        Mbarrier {
            expected: count,
            pending: count,
            tx: 0,
            completed: 0,
        }
    }

    /// How many phases have completed; the current phase has this index.
    pub fn completed_phases(&self) -> u32 {
        self.completed
    }

    fn try_complete(&mut self) -> bool {
        if self.pending == 0 && self.tx == 0 {
            self.completed += 1;
            self.pending = self.expected;
            true
        } else {
            false
        }
    }

    /// `mbarrier.arrive.expect_tx`: the expected bytes are added first, then one arrival, so the
    /// phase cannot complete before the bytes land. Returns whether the phase completed.
    pub fn arrive_expect_tx(&mut self, bytes: i64) -> Result<bool, ExtraArrival> {
        self.tx += bytes;
        self.arrive()
    }

    /// `mbarrier.arrive` (and the arrival a `tcgen05.commit` triggers). Returns whether the phase
    /// completed.
    pub fn arrive(&mut self) -> Result<bool, ExtraArrival> {
        if self.pending == 0 {
            return Err(ExtraArrival);
        }
        self.pending -= 1;
        Ok(self.try_complete())
    }

    /// The `complete_tx` of a TMA copy that landed. Returns whether the phase completed.
    pub fn complete_tx(&mut self, bytes: i64) -> bool {
        self.tx -= bytes;
        self.try_complete()
    }

    /// `mbarrier.try_wait.parity`: has the phase with this parity completed? True when the
    /// current, incomplete phase has the other parity.
    pub fn try_wait_parity(&self, parity: u32) -> bool {
        (self.completed & 1) != (parity & 1)
    }
}

/// The producer's wait on `load_empty` before it refills a slot, as the kernels write it
/// (`if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[slot], fill.empty_parity());`,
/// where `fill`, a `wb::Ring<STAGES>` advanced once per k-block, gives `kb >= STAGES` and
/// `((kb / STAGES) - 1) & 1` for the k-blocks so far, `kb`) and as the two seeded bugs rewrite it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyWait {
    /// The kernels' line.
    Correct,
    /// `no-first-round-guard`: the `if (!fill.first_round())` guard (`kb >= STAGES`) is gone.
    NoFirstRoundGuard,
    /// `wrong-parity`: `fill.phase()`, `(kb / STAGES) & 1`, instead of `fill.empty_parity()`,
    /// `((kb / STAGES) - 1) & 1`.
    WrongParity,
}

impl EmptyWait {
    pub const ALL: [EmptyWait; 3] = [
        EmptyWait::Correct,
        EmptyWait::NoFirstRoundGuard,
        EmptyWait::WrongParity,
    ];

    /// The seeded bug's name (`runner step N --mutate NAME`), if this is one.
    pub fn mutation(self) -> Option<&'static str> {
        match self {
            EmptyWait::Correct => None,
            EmptyWait::NoFirstRoundGuard => Some("no-first-round-guard"),
            EmptyWait::WrongParity => Some("wrong-parity"),
        }
    }

    /// The parity waited on before loading the k-block with ring counter `counter`, or `None`
    /// where the kernel skips the wait. C integer arithmetic, as in the kernel: for the first
    /// round `(0 / STAGES) - 1` is -1, and `-1 & 1` is 1.
    pub fn parity(self, counter: u32, stages: u32) -> Option<u32> {
        let round = i64::from(counter / stages);
        let guarded = counter >= stages;
        match self {
            EmptyWait::Correct => guarded.then_some(((round - 1) & 1) as u32),
            EmptyWait::NoFirstRoundGuard => Some(((round - 1) & 1) as u32),
            EmptyWait::WrongParity => guarded.then_some((round & 1) as u32),
        }
    }
}

/// The MMA issuer's wait on `load_full` before it multiplies a slot:
/// `wb::mbarrier_wait(&smem.load_full[slot], drain.phase());`, `(kb / STAGES) & 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullWait {
    Correct,
    /// The producer's parity used on the consumer side: `drain.empty_parity()`,
    /// `((kb / STAGES) - 1) & 1`.
    OffByOne,
}

impl FullWait {
    pub fn parity(self, counter: u32, stages: u32) -> u32 {
        let round = i64::from(counter / stages);
        match self {
            FullWait::Correct => (round & 1) as u32,
            FullWait::OffByOne => ((round - 1) & 1) as u32,
        }
    }
}

/// Which counter gives the slot and the phase: the persistent steps count k-blocks across tiles
/// (`it`); resetting it per tile (`kb`) is the chapter 4 pitfall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    AcrossTiles,
    PerTile,
}

/// Who runs the epilogue, which decides when the ring's warps start the next tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    /// The producer and the MMA warp take part in the epilogue (steps 0–4): both wait for the
    /// tile's last MMA, spend the epilogue time, then start the next tile.
    SameWarps,
    /// A dedicated epilogue warpgroup with two accumulator slots (steps 5–6): the ring's warps run
    /// on; the MMAs of tile `t` wait only for the epilogue of tile `t − 2`.
    Dedicated,
}

/// Who drives the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// Step 0: one warp refills the slot `prefetch` k-blocks ahead, then multiplies.
    OneWarp { prefetch: u32 },
    /// Steps 1–6: a producer warp and an MMA warp.
    Specialized { epilogue: Epilogue },
}

/// Durations in abstract ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Issuing one instruction (a wait that passes, a TMA, an MMA).
    pub issue: u64,
    /// From a TMA load's issue to its bytes landing.
    pub load: u64,
    /// One k-block's MMAs on the tensor core.
    pub mma: u64,
    /// One tile's epilogue.
    pub epilogue: u64,
}

impl Timing {
    /// Loads take much longer than a k-block's MMAs: the tensor core drains the ring and waits.
    pub const LOAD_BOUND: Timing = Timing {
        issue: 1,
        load: 24,
        mma: 3,
        epilogue: 20,
    };
    /// A k-block's MMAs take longer than a load: the ring stays full and the producer waits.
    pub const MMA_BOUND: Timing = Timing {
        issue: 1,
        load: 8,
        mma: 10,
        epilogue: 20,
    };
}

/// One configuration of the ring to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    pub stages: u32,
    /// K-blocks per tile.
    pub k_blocks: u32,
    /// Tiles in a row on the same ring (persistent steps: more than one).
    pub tiles: u32,
    pub roles: Roles,
    pub empty_wait: EmptyWait,
    pub full_wait: FullWait,
    pub counter: Counter,
    pub timing: Timing,
}

/// How the model runs one step's ring: its roles, stages and how many tiles follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    pub roles: Roles,
    pub stages: u32,
    pub tiles: u32,
}

/// The phase simulator's model of a step's ring, from the step's own configuration.
pub fn model(step: &'static dyn Step) -> Model {
    let i = BudgetInput::from_step(step);
    let roles = if i.lookahead < i.stages {
        Roles::OneWarp {
            prefetch: i.lookahead,
        }
    } else {
        Roles::Specialized {
            epilogue: if i.epilogue_overlaps {
                Epilogue::Dedicated
            } else {
                Epilogue::SameWarps
            },
        }
    };
    Model {
        roles,
        stages: i.stages,
        // Two tiles show what the persistent loop carries from one tile to the next.
        tiles: if i.schedule.loops() { 2 } else { 1 },
    }
}

/// The two barriers of a ring slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarrierKind {
    LoadFull,
    LoadEmpty,
}

impl fmt::Display for BarrierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BarrierKind::LoadFull => "load_full",
            BarrierKind::LoadEmpty => "load_empty",
        })
    }
}

/// The warps of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// Step 0's single warp.
    Warp,
    Producer,
    Mma,
    EpilogueWarpgroup,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Actor::Warp => "the warp",
            Actor::Producer => "the producer",
            Actor::Mma => "the MMA warp",
            Actor::EpilogueWarpgroup => "the epilogue warpgroup",
        })
    }
}

/// A wait that returned while the data it guards was not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Race {
    /// A TMA load into a slot whose previous k-block is still needed.
    Overwrite {
        slot: u32,
        k_block: u32,
        previous: u32,
        /// The previous k-block's MMAs were issued (and are running or queued); otherwise they
        /// were not even issued yet.
        previous_issued: bool,
        at: u64,
    },
    /// An MMA issued on a slot that does not hold its k-block.
    StaleRead {
        slot: u32,
        k_block: u32,
        holds: Option<u32>,
        at: u64,
    },
    /// A second arrival in one phase.
    ExtraArrival {
        barrier: BarrierKind,
        slot: u32,
        at: u64,
    },
}

impl Race {
    /// The k-block whose action exposed the race.
    pub fn k_block(&self) -> Option<u32> {
        match self {
            Race::Overwrite { k_block, .. } | Race::StaleRead { k_block, .. } => Some(*k_block),
            Race::ExtraArrival { .. } => None,
        }
    }
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Race::Overwrite {
                slot,
                k_block,
                previous,
                previous_issued,
                ..
            } => write!(
                f,
                "k-block {k_block} is loaded into slot {slot} while k-block {previous} {}",
                if *previous_issued {
                    "is still being multiplied from it"
                } else {
                    "has not even been multiplied yet"
                }
            ),
            Race::StaleRead {
                slot,
                k_block,
                holds,
                ..
            } => match holds {
                Some(h) => write!(
                    f,
                    "the MMAs of k-block {k_block} read slot {slot}, which still holds k-block {h}"
                ),
                None => write!(
                    f,
                    "the MMAs of k-block {k_block} read slot {slot} before any data has landed in it"
                ),
            },
            Race::ExtraArrival { barrier, slot, .. } => write!(
                f,
                "a second arrival on {barrier}[{slot}] in one phase (undefined behaviour)"
            ),
        }
    }
}

/// A warp blocked for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub actor: Actor,
    /// What it waits for.
    pub waits_for: StuckOn,
    /// Since when.
    pub since: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StuckOn {
    Barrier {
        barrier: BarrierKind,
        slot: u32,
        parity: u32,
        /// The k-block the wait stands before.
        k_block: u32,
        completed_phases: u32,
    },
    TileDone {
        tile: u32,
    },
    AccumulatorFree {
        tile: u32,
    },
}

impl fmt::Display for Stuck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.waits_for {
            StuckOn::Barrier {
                barrier,
                slot,
                parity,
                k_block,
                completed_phases,
            } => write!(
                f,
                "{} waits on {barrier}[{slot}] with parity {parity} before k-block {k_block}, but \
                 the barrier has completed {completed_phases} phase{} (its current phase has \
                 parity {}) and nothing left can complete it",
                self.actor,
                if *completed_phases == 1 { "" } else { "s" },
                completed_phases & 1
            ),
            StuckOn::TileDone { tile } => {
                write!(f, "{} waits for the MMAs of tile {tile}", self.actor)
            }
            StuckOn::AccumulatorFree { tile } => write!(
                f,
                "{} waits for the accumulator of tile {tile} to be free",
                self.actor
            ),
        }
    }
}

/// How a simulated run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completes { end: u64 },
    Race(Race),
    Hang(Vec<Stuck>),
}

impl Outcome {
    /// A few words for a table cell.
    pub fn label(&self) -> String {
        match self {
            Outcome::Completes { .. } => "completes".into(),
            Outcome::Race(r) => match r.k_block() {
                Some(k) => format!("race at k-block {k}"),
                None => "race".into(),
            },
            Outcome::Hang(stuck) => match stuck.iter().find_map(|s| match s.waits_for {
                StuckOn::Barrier { k_block, .. } => Some(k_block),
                _ => None,
            }) {
                Some(k) => format!("hang at k-block {k}"),
                None => "hang".into(),
            },
        }
    }

    pub fn is_completes(&self) -> bool {
        matches!(self, Outcome::Completes { .. })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Completes { end } => write!(f, "completes at tick {end}"),
            Outcome::Race(r) => write!(f, "race: {r}"),
            Outcome::Hang(stuck) => {
                // The barrier waits are the cause; warps waiting for a tile are their victims.
                let mut parts: Vec<&Stuck> = stuck.iter().collect();
                parts.sort_by_key(|s| !matches!(s.waits_for, StuckOn::Barrier { .. }));
                let parts: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
                write!(f, "hang: {}", parts.join("; "))
            }
        }
    }
}

/// A wait as it happened: `from` when the warp reached it, `to` when it passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitSpan {
    pub actor: Actor,
    pub barrier: BarrierKind,
    pub slot: u32,
    pub parity: u32,
    pub k_block: u32,
    pub from: u64,
    pub to: u64,
}

/// A TMA load: issued, and landed if it did before the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSpan {
    pub k_block: u32,
    pub slot: u32,
    pub issued: u64,
    pub landed: Option<u64>,
}

/// One k-block's MMAs on the tensor core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaSpan {
    pub k_block: u32,
    pub slot: u32,
    pub start: u64,
    pub end: u64,
}

/// A barrier phase completing: `completed` phases are done after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseMark {
    pub barrier: BarrierKind,
    pub slot: u32,
    pub completed: u32,
    pub at: u64,
}

/// What the run did, for the book's timeline figure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    pub waits: Vec<WaitSpan>,
    pub loads: Vec<LoadSpan>,
    pub mmas: Vec<MmaSpan>,
    pub phases: Vec<PhaseMark>,
    /// When the run stopped: its end, the race, or the last thing that happened before a hang.
    pub end: u64,
}

#[derive(Debug, Clone)]
pub struct Simulation {
    pub outcome: Outcome,
    pub trace: Trace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    WaitEmpty {
        k_block: u32,
        parity: u32,
    },
    Load {
        k_block: u32,
    },
    WaitFull {
        k_block: u32,
        parity: u32,
    },
    Mma {
        k_block: u32,
    },
    /// Take part in tile `tile`'s epilogue: wait for its last MMA, then spend the epilogue time.
    Epilogue {
        tile: u32,
    },
    /// Before tile `tile`'s MMAs: the epilogue of tile `tile - 2` has freed its accumulator.
    WaitAccumulator {
        tile: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    TmaLands { k_block: u32 },
    MmaDone { k_block: u32 },
    EpilogueDone { tile: u32 },
}

struct Warp {
    actor: Actor,
    ops: Vec<Op>,
    pc: usize,
    ready_at: u64,
    /// Blocked on its current op until an event makes it ready.
    blocked: bool,
    /// When the warp reached the wait it stands at (for the trace).
    wait_started: Option<u64>,
}

impl Warp {
    fn done(&self) -> bool {
        self.pc >= self.ops.len()
    }
}

const BYTES: i64 = 1;

struct State<'a> {
    ring: &'a Ring,
    full: Vec<Mbarrier>,
    empty: Vec<Mbarrier>,
    /// The k-block last loaded into each slot (landed or not), and the one that has landed.
    loaded: Vec<Option<u32>>,
    landed: Vec<Option<u32>>,
    mma_issued: Vec<bool>,
    mma_done: Vec<bool>,
    epilogue_done: Vec<bool>,
    tensor_core_free: u64,
    events: BinaryHeap<Reverse<(u64, u64, EventKind)>>,
    seq: u64,
    trace: Trace,
}

impl Ring {
    fn total(&self) -> u32 {
        self.k_blocks * self.tiles
    }

    /// The counter that gives k-block `g`'s slot and phase.
    fn counter(&self, g: u32) -> u32 {
        match self.counter {
            Counter::AcrossTiles => g,
            Counter::PerTile => g % self.k_blocks,
        }
    }

    fn slot(&self, g: u32) -> u32 {
        self.counter(g) % self.stages
    }

    fn produce(&self, g: u32, ops: &mut Vec<Op>) {
        if let Some(parity) = self.empty_wait.parity(self.counter(g), self.stages) {
            ops.push(Op::WaitEmpty { k_block: g, parity });
        }
        ops.push(Op::Load { k_block: g });
    }

    fn consume(&self, g: u32, ops: &mut Vec<Op>) {
        let parity = self.full_wait.parity(self.counter(g), self.stages);
        ops.push(Op::WaitFull { k_block: g, parity });
        ops.push(Op::Mma { k_block: g });
    }

    fn warps(&self) -> Vec<Warp> {
        let warp = |actor, ops| Warp {
            actor,
            ops,
            pc: 0,
            ready_at: 0,
            blocked: false,
            wait_started: None,
        };
        match self.roles {
            Roles::OneWarp { prefetch } => {
                let mut ops = Vec::new();
                for tile in 0..self.tiles {
                    let first = tile * self.k_blocks;
                    let end = first + self.k_blocks;
                    for g in first..(first + prefetch).min(end) {
                        self.produce(g, &mut ops);
                    }
                    for g in first..end {
                        if g + prefetch < end {
                            self.produce(g + prefetch, &mut ops);
                        }
                        self.consume(g, &mut ops);
                    }
                    ops.push(Op::Epilogue { tile });
                }
                vec![warp(Actor::Warp, ops)]
            }
            Roles::Specialized { epilogue } => {
                let (mut producer, mut mma, mut epi) = (Vec::new(), Vec::new(), Vec::new());
                for tile in 0..self.tiles {
                    let first = tile * self.k_blocks;
                    if epilogue == Epilogue::Dedicated && tile >= 2 {
                        mma.push(Op::WaitAccumulator { tile });
                    }
                    for g in first..first + self.k_blocks {
                        self.produce(g, &mut producer);
                        self.consume(g, &mut mma);
                    }
                    match epilogue {
                        Epilogue::SameWarps => {
                            producer.push(Op::Epilogue { tile });
                            mma.push(Op::Epilogue { tile });
                        }
                        Epilogue::Dedicated => epi.push(Op::Epilogue { tile }),
                    }
                }
                let mut warps = vec![warp(Actor::Producer, producer), warp(Actor::Mma, mma)];
                if !epi.is_empty() {
                    warps.push(warp(Actor::EpilogueWarpgroup, epi));
                }
                warps
            }
        }
    }
}

impl State<'_> {
    fn schedule(&mut self, at: u64, kind: EventKind) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, kind)));
    }

    fn mark_phase(&mut self, barrier: BarrierKind, slot: u32, at: u64) {
        let completed = match barrier {
            BarrierKind::LoadFull => self.full[slot as usize].completed_phases(),
            BarrierKind::LoadEmpty => self.empty[slot as usize].completed_phases(),
        };
        self.trace.phases.push(PhaseMark {
            barrier,
            slot,
            completed,
            at,
        });
    }

    fn last_of_tile(&self, tile: u32) -> usize {
        ((tile + 1) * self.ring.k_blocks - 1) as usize
    }

    /// Whether `op` can go ahead now; waits are decided by the barrier alone.
    fn ready(&self, op: Op) -> bool {
        match op {
            Op::WaitEmpty { k_block, parity } => {
                self.empty[self.ring.slot(k_block) as usize].try_wait_parity(parity)
            }
            Op::WaitFull { k_block, parity } => {
                self.full[self.ring.slot(k_block) as usize].try_wait_parity(parity)
            }
            Op::Epilogue { tile } => self.mma_done[self.last_of_tile(tile)],
            Op::WaitAccumulator { tile } => self.epilogue_done[(tile - 2) as usize],
            Op::Load { .. } | Op::Mma { .. } => true,
        }
    }

    /// Perform `op` at time `now`; returns when the warp can issue again.
    fn perform(&mut self, actor: Actor, op: Op, now: u64, since: u64) -> Result<u64, Race> {
        let t = self.ring.timing;
        match op {
            Op::WaitEmpty { k_block, parity } | Op::WaitFull { k_block, parity } => {
                let barrier = if matches!(op, Op::WaitEmpty { .. }) {
                    BarrierKind::LoadEmpty
                } else {
                    BarrierKind::LoadFull
                };
                self.trace.waits.push(WaitSpan {
                    actor,
                    barrier,
                    slot: self.ring.slot(k_block),
                    parity,
                    k_block,
                    from: since,
                    to: now,
                });
                Ok(now + t.issue)
            }
            Op::Load { k_block } => {
                let slot = self.ring.slot(k_block);
                if let Some(previous) = self.loaded[slot as usize] {
                    if !self.mma_done[previous as usize] {
                        return Err(Race::Overwrite {
                            slot,
                            k_block,
                            previous,
                            previous_issued: self.mma_issued[previous as usize],
                            at: now,
                        });
                    }
                }
                self.loaded[slot as usize] = Some(k_block);
                if self.full[slot as usize]
                    .arrive_expect_tx(BYTES)
                    .map_err(|_| Race::ExtraArrival {
                        barrier: BarrierKind::LoadFull,
                        slot,
                        at: now,
                    })?
                {
                    self.mark_phase(BarrierKind::LoadFull, slot, now);
                }
                self.trace.loads.push(LoadSpan {
                    k_block,
                    slot,
                    issued: now,
                    landed: None,
                });
                self.schedule(now + t.load, EventKind::TmaLands { k_block });
                Ok(now + t.issue)
            }
            Op::Mma { k_block } => {
                let slot = self.ring.slot(k_block);
                let holds = self.landed[slot as usize];
                if holds != Some(k_block) {
                    return Err(Race::StaleRead {
                        slot,
                        k_block,
                        holds,
                        at: now,
                    });
                }
                let start = now.max(self.tensor_core_free);
                let end = start + t.mma;
                self.tensor_core_free = end;
                self.mma_issued[k_block as usize] = true;
                self.trace.mmas.push(MmaSpan {
                    k_block,
                    slot,
                    start,
                    end,
                });
                self.schedule(end, EventKind::MmaDone { k_block });
                Ok(now + t.issue)
            }
            Op::Epilogue { tile } => {
                if actor == Actor::EpilogueWarpgroup {
                    self.schedule(now + t.epilogue, EventKind::EpilogueDone { tile });
                }
                Ok(now + t.epilogue)
            }
            Op::WaitAccumulator { .. } => Ok(now + t.issue),
        }
    }

    fn on_event(&mut self, at: u64, kind: EventKind) -> Result<(), Race> {
        match kind {
            EventKind::TmaLands { k_block } => {
                let slot = self.ring.slot(k_block);
                self.landed[slot as usize] = Some(k_block);
                if let Some(l) = self
                    .trace
                    .loads
                    .iter_mut()
                    .rev()
                    .find(|l| l.k_block == k_block)
                {
                    l.landed = Some(at);
                }
                if self.full[slot as usize].complete_tx(BYTES) {
                    self.mark_phase(BarrierKind::LoadFull, slot, at);
                }
            }
            EventKind::MmaDone { k_block } => {
                let slot = self.ring.slot(k_block);
                self.mma_done[k_block as usize] = true;
                // The commit after each k-block's MMAs arrives on the slot's load_empty.
                if self.empty[slot as usize]
                    .arrive()
                    .map_err(|_| Race::ExtraArrival {
                        barrier: BarrierKind::LoadEmpty,
                        slot,
                        at,
                    })?
                {
                    self.mark_phase(BarrierKind::LoadEmpty, slot, at);
                }
            }
            EventKind::EpilogueDone { tile } => self.epilogue_done[tile as usize] = true,
        }
        Ok(())
    }
}

/// Run the ring until every warp is done, a race shows, or nothing can happen any more.
pub fn simulate(ring: &Ring) -> Simulation {
    let total = ring.total() as usize;
    let mut state = State {
        ring,
        full: vec![Mbarrier::new(1); ring.stages as usize],
        empty: vec![Mbarrier::new(1); ring.stages as usize],
        loaded: vec![None; ring.stages as usize],
        landed: vec![None; ring.stages as usize],
        mma_issued: vec![false; total],
        mma_done: vec![false; total],
        epilogue_done: vec![false; ring.tiles as usize],
        tensor_core_free: 0,
        events: BinaryHeap::new(),
        seq: 0,
        trace: Trace::default(),
    };
    let mut warps = ring.warps();
    let mut now = 0;
    let outcome = loop {
        let next_event = state.events.peek().map(|Reverse((t, _, _))| *t);
        let next_warp = warps
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.done() && !w.blocked)
            .min_by_key(|(i, w)| (w.ready_at, *i))
            .map(|(i, w)| (w.ready_at, i));
        // At equal times, what completes (a landing, a commit) is visible to a wait issued then:
        // events go first.
        let event_first = match (next_event, next_warp) {
            (Some(te), Some((tw, _))) => te <= tw,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if event_first {
            let Some(Reverse((at, _, kind))) = state.events.pop() else {
                continue;
            };
            now = now.max(at);
            if let Err(race) = state.on_event(at, kind) {
                break Outcome::Race(race);
            }
            for w in warps.iter_mut().filter(|w| w.blocked) {
                if state.ready(w.ops[w.pc]) {
                    w.blocked = false;
                    w.ready_at = now;
                }
            }
        } else if let Some((at, i)) = next_warp {
            now = now.max(at);
            let w = &mut warps[i];
            let op = w.ops[w.pc];
            if !state.ready(op) {
                w.blocked = true;
                w.wait_started.get_or_insert(now);
                continue;
            }
            let since = w.wait_started.take().unwrap_or(now);
            match state.perform(w.actor, op, now, since) {
                Ok(next) => {
                    w.pc += 1;
                    w.ready_at = next;
                }
                Err(race) => break Outcome::Race(race),
            }
        } else if warps.iter().all(Warp::done) {
            break Outcome::Completes { end: now };
        } else {
            break Outcome::Hang(
                warps
                    .iter()
                    .filter(|w| !w.done())
                    .filter_map(|w| {
                        stuck_on(&state, w.ops[w.pc]).map(|waits_for| Stuck {
                            actor: w.actor,
                            waits_for,
                            since: w.wait_started.unwrap_or(now),
                        })
                    })
                    .collect(),
            );
        }
    };
    let mut trace = state.trace;
    trace.end = now;
    Simulation { outcome, trace }
}

/// What a blocked warp waits for; loads and MMAs never block, so a warp standing before one is
/// not stuck.
fn stuck_on(state: &State, op: Op) -> Option<StuckOn> {
    match op {
        Op::WaitEmpty { k_block, parity } | Op::WaitFull { k_block, parity } => {
            let (barrier, bars) = if matches!(op, Op::WaitEmpty { .. }) {
                (BarrierKind::LoadEmpty, &state.empty)
            } else {
                (BarrierKind::LoadFull, &state.full)
            };
            let slot = state.ring.slot(k_block);
            Some(StuckOn::Barrier {
                barrier,
                slot,
                parity,
                k_block,
                completed_phases: bars[slot as usize].completed_phases(),
            })
        }
        Op::Epilogue { tile } => Some(StuckOn::TileDone { tile }),
        Op::WaitAccumulator { tile } => Some(StuckOn::AccumulatorFree { tile }),
        Op::Load { .. } | Op::Mma { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(roles: Roles, empty_wait: EmptyWait, timing: Timing) -> Ring {
        Ring {
            stages: 4,
            k_blocks: 16,
            tiles: 1,
            roles,
            empty_wait,
            full_wait: FullWait::Correct,
            counter: Counter::AcrossTiles,
            timing,
        }
    }

    const ONE_WARP: Roles = Roles::OneWarp { prefetch: 2 };
    const SPECIALIZED: Roles = Roles::Specialized {
        epilogue: Epilogue::SameWarps,
    };

    #[test]
    fn a_phase_completes_when_arrivals_and_bytes_are_in() {
        let mut b = Mbarrier::new(1);
        assert!(!b.try_wait_parity(0), "phase 0 is incomplete");
        assert!(
            b.try_wait_parity(1),
            "a parity-1 wait on a fresh barrier passes, as on hardware"
        );
        assert_eq!(b.arrive_expect_tx(128), Ok(false), "bytes still missing");
        assert!(!b.try_wait_parity(0));
        assert_eq!(
            b.arrive(),
            Err(ExtraArrival),
            "the only expected arrival is in"
        );
        assert!(b.complete_tx(128), "the last byte completes phase 0");
        assert_eq!(b.completed_phases(), 1);
        assert!(b.try_wait_parity(0) && !b.try_wait_parity(1));
        // Two arrivals expected: the first does not complete the phase.
        let mut two = Mbarrier::new(2);
        assert_eq!(two.arrive(), Ok(false));
        assert_eq!(two.arrive(), Ok(true));
        assert_eq!(two.completed_phases(), 1);
    }

    #[test]
    fn a_parity_two_phases_behind_aliases() {
        // After phases 0 and 1 completed, parity 0 names phase 2, the current one: the wait for
        // "phase 0" (two behind) blocks instead of returning. This is the aliasing the ISA leaves
        // undefined and the wrong-parity bug runs into.
        let mut b = Mbarrier::new(1);
        b.arrive().unwrap();
        b.arrive().unwrap();
        assert_eq!(b.completed_phases(), 2);
        assert!(!b.try_wait_parity(0));
        assert!(b.try_wait_parity(1));
    }

    #[test]
    fn the_wait_formulas_follow_c_arithmetic() {
        let s = 4;
        let correct: Vec<_> = (0..12).map(|k| EmptyWait::Correct.parity(k, s)).collect();
        assert_eq!(&correct[..4], &[None; 4]);
        assert_eq!(&correct[4..8], &[Some(0); 4], "round 1 waits for phase 0");
        assert_eq!(&correct[8..], &[Some(1); 4], "round 2 waits for phase 1");
        // Without the guard the first round waits on parity 1: (0 - 1) & 1.
        assert_eq!(EmptyWait::NoFirstRoundGuard.parity(0, s), Some(1));
        assert_eq!(EmptyWait::NoFirstRoundGuard.parity(5, s), Some(0));
        assert_eq!(EmptyWait::WrongParity.parity(5, s), Some(1));
        assert_eq!(EmptyWait::WrongParity.parity(3, s), None);
        assert_eq!(FullWait::Correct.parity(3, s), 0);
        assert_eq!(FullWait::Correct.parity(4, s), 1);
        assert_eq!(FullWait::OffByOne.parity(0, s), 1);
    }

    #[test]
    fn the_kernels_protocol_completes_in_every_role_and_timing() {
        for roles in [
            ONE_WARP,
            SPECIALIZED,
            Roles::Specialized {
                epilogue: Epilogue::Dedicated,
            },
        ] {
            for timing in [Timing::LOAD_BOUND, Timing::MMA_BOUND] {
                for tiles in [1, 3] {
                    for k_blocks in [1, 3, 8, 13] {
                        let r = Ring {
                            tiles,
                            k_blocks,
                            ..ring(roles, EmptyWait::Correct, timing)
                        };
                        let sim = simulate(&r);
                        assert!(
                            sim.outcome.is_completes(),
                            "{roles:?} {timing:?} {tiles}x{k_blocks}: {}",
                            sim.outcome
                        );
                        assert_eq!(sim.trace.mmas.len() as u32, tiles * k_blocks);
                        // Every MMA read the k-block it was meant to, after it landed.
                        for m in &sim.trace.mmas {
                            let l = sim.trace.loads.iter().find(|l| l.k_block == m.k_block);
                            assert!(l.and_then(|l| l.landed).is_some_and(|t| t <= m.start));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dropping_the_first_round_guard_is_harmless() {
        for roles in [ONE_WARP, SPECIALIZED] {
            for timing in [Timing::LOAD_BOUND, Timing::MMA_BOUND] {
                let with = simulate(&ring(roles, EmptyWait::Correct, timing));
                let without = simulate(&ring(roles, EmptyWait::NoFirstRoundGuard, timing));
                assert!(with.outcome.is_completes(), "{}", with.outcome);
                assert!(without.outcome.is_completes(), "{}", without.outcome);
                // The extra waits pass at once; the MMAs run in the same order.
                let order =
                    |s: &Simulation| s.trace.mmas.iter().map(|m| m.k_block).collect::<Vec<_>>();
                assert_eq!(order(&with), order(&without));
                let extra: Vec<_> = without
                    .trace
                    .waits
                    .iter()
                    .filter(|w| w.barrier == BarrierKind::LoadEmpty && w.k_block < 4)
                    .collect();
                assert_eq!(extra.len(), 4);
                assert!(extra.iter().all(|w| w.parity == 1 && w.from == w.to));
            }
        }
    }

    #[test]
    fn the_wrong_parity_races_or_hangs() {
        // Specialised: the producer reaches k-block 4 long before k-block 0 is multiplied, and
        // the wrong parity names the phase "before phase 0", which passes on hardware: it refills
        // slot 0 at once.
        for timing in [Timing::LOAD_BOUND, Timing::MMA_BOUND] {
            let sim = simulate(&ring(SPECIALIZED, EmptyWait::WrongParity, timing));
            match sim.outcome {
                Outcome::Race(Race::Overwrite {
                    slot: 0,
                    k_block: 4,
                    previous: 0,
                    ..
                }) => {}
                other => panic!("{timing:?}: {other}"),
            }
        }
        // One warp, loads slow: by the time it refills slot 0 for k-block 4, k-block 0's MMAs are
        // done, so load_empty[0] is in phase 1 and a wait on parity 1 never returns: the MMAs
        // that would complete phase 1 need the load the warp is holding back.
        let sim = simulate(&ring(ONE_WARP, EmptyWait::WrongParity, Timing::LOAD_BOUND));
        let Outcome::Hang(stuck) = &sim.outcome else {
            panic!("{}", sim.outcome)
        };
        assert_eq!(
            stuck[0].waits_for,
            StuckOn::Barrier {
                barrier: BarrierKind::LoadEmpty,
                slot: 0,
                parity: 1,
                k_block: 4,
                completed_phases: 1
            }
        );
        assert_eq!(sim.outcome.label(), "hang at k-block 4");
        // One warp, MMAs slow: k-block 0 is still being multiplied, the wait passes: a race.
        let sim = simulate(&ring(ONE_WARP, EmptyWait::WrongParity, Timing::MMA_BOUND));
        assert!(
            matches!(
                sim.outcome,
                Outcome::Race(Race::Overwrite {
                    previous_issued: true,
                    ..
                })
            ),
            "{}",
            sim.outcome
        );
    }

    #[test]
    fn an_off_by_one_on_the_consumer_reads_before_the_data_lands() {
        let r = Ring {
            full_wait: FullWait::OffByOne,
            ..ring(SPECIALIZED, EmptyWait::Correct, Timing::LOAD_BOUND)
        };
        match simulate(&r).outcome {
            Outcome::Race(Race::StaleRead {
                k_block: 0,
                holds: None,
                ..
            }) => {}
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_per_tile_counter_works_only_when_the_rounds_line_up() {
        let per_tile = |k_blocks, epilogue| Ring {
            k_blocks,
            tiles: 2,
            counter: Counter::PerTile,
            ..ring(
                Roles::Specialized { epilogue },
                EmptyWait::Correct,
                Timing::LOAD_BOUND,
            )
        };
        // The epilogue drains the ring between tiles and 8 k-blocks are two whole rounds of 4
        // stages: every slot and parity lines up again, by luck.
        assert!(simulate(&per_tile(8, Epilogue::SameWarps))
            .outcome
            .is_completes());
        // 6 k-blocks: tile 0 completed one phase of slot 2's load_full, so tile 1's wait on
        // parity 0 for it names the phase just completed. Loads slow: tile 1's k-block 8 has
        // landed by the time the MMA warp gets there, completing a second phase of parity 1 —
        // the wait now names a phase that never comes.
        let sim = simulate(&per_tile(6, Epilogue::SameWarps));
        let Outcome::Hang(stuck) = &sim.outcome else {
            panic!("{}", sim.outcome)
        };
        assert!(stuck.iter().any(|s| matches!(
            s.waits_for,
            StuckOn::Barrier {
                barrier: BarrierKind::LoadFull,
                slot: 2,
                ..
            }
        )));
        // A dedicated epilogue lets the producer run into tile 1 while tile 0's MMAs still read
        // the ring; the guard on `kb` skips the waits that would have stopped it.
        let sim = simulate(&per_tile(8, Epilogue::Dedicated));
        assert!(
            matches!(sim.outcome, Outcome::Race(Race::Overwrite { .. })),
            "{}",
            sim.outcome
        );
    }

    #[test]
    fn the_trace_records_every_phase_in_order() {
        let sim = simulate(&ring(SPECIALIZED, EmptyWait::Correct, Timing::MMA_BOUND));
        for kind in [BarrierKind::LoadFull, BarrierKind::LoadEmpty] {
            for slot in 0..4 {
                let marks: Vec<_> = sim
                    .trace
                    .phases
                    .iter()
                    .filter(|p| p.barrier == kind && p.slot == slot)
                    .collect();
                assert_eq!(marks.len(), 4, "16 k-blocks over 4 slots");
                assert!(marks.windows(2).all(|w| w[0].at <= w[1].at));
                assert_eq!(
                    marks.iter().map(|p| p.completed).collect::<Vec<_>>(),
                    vec![1, 2, 3, 4]
                );
            }
        }
        // MMA-bound: the producer's waits on load_empty block.
        assert!(sim
            .trace
            .waits
            .iter()
            .any(|w| w.barrier == BarrierKind::LoadEmpty && w.to > w.from));
    }
}
