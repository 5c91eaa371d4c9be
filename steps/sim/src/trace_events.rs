//! The simulator's event trace for people: what the ring of one cluster did over simulated
//! time, as Chrome trace-event JSON (the format Perfetto and `chrome://tracing` open, and the
//! one the book's ring player reads). The runner writes it (`runner step N --sim --trace`), the
//! book's WebAssembly build returns it: both from this one module.
//!
//! It is an [`Observer`] of the first cluster of the grid (cluster 0, every CTA of it) that
//! writes into a shared [`Sink`] (`Options::events`); it never fails a run and changes no
//! schedule. Time (`ts`, `dur`) is the scheduler's step count (`RunReport::steps`), not
//! seconds: the simulator models order, not speed.
//!
//! # Schema (version 1)
//! The file is `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`.
//! `pid` is 1 + the CTA's rank in the cluster; `tid` is the warp index for warp lanes,
//! `1000 + i` for ring slot `i`. Events (`ph`, `cat`, `name`, `args`):
//! - `M` metadata: `process_name` ("CTA rank r"), `thread_name` ("warp w: producer",
//!   "slot i"), `thread_sort_index`.
//! - `X`, cat `wait`: a warp blocked on an mbarrier wait, `ts` the first try, `dur` until it
//!   passed; name `wait NAME`, args `{barrier, phase}` (the phase it saw complete).
//! - `i`, cat `issue`: a warp issued work: `TMA load -> NAME`, `tcgen05.mma`, `tcgen05.commit`,
//!   `tcgen05.ld`, `tcgen05.st`, `TMA store`, `tcgen05.alloc`, `tcgen05.dealloc`; args
//!   `{barrier?, cols?: [lo, hi]}`. An asynchronous operation's later arrival (a TMA load's
//!   complete_tx, a commit's arrive) is `i` cat `arrive` on the issuing warp's lane.
//! - `X`, cat `slot`: a ring slot's state, one of `empty`, `loading` (a TMA load in flight to
//!   its full barrier), `full` (the full barrier's phase completed), `reading` (a consumer's
//!   wait on it passed, until its empty barrier completes); args `{slot, state, barrier}`.
//!   A slot is a barrier TMA loads complete on; its empty partner is the barrier of the same
//!   name with `full` replaced by `empty` (`load_full[2]` / `load_empty[2]`).
//! - `C`, cat `mbarrier`, name the barrier: args `{phase, pending, tx}` after each change
//!   (phase: phases completed; pending: arrivals still expected; tx: transaction bytes still
//!   expected).
//! - `C`, cat `tmem`, name `tmem columns`: args `{allocated}`, columns of tensor memory the CTA
//!   holds.
//! - `i`, cat `stop`, `s: "g"`: where the run stopped (a rule, a deadlock, a fault), args
//!   `{kind, rule?, message, ptx_line?, source_line?}` (written by [`finish`]).
//!
//! `otherData` holds `format: "workbook-sim-events"`, `version: 1`, `time_unit: "simulator
//! steps"`, `dropped` (events over the bound, kept from the start) and what the caller adds.

use crate::error::SimError;
use crate::machine::Machine;
use crate::observe::{Agent, AsyncKind, Event, Observer};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// Events kept at most (the earliest; a stop is always kept).
pub const MAX_EVENTS: usize = 400_000;

/// Where the observer writes: shared with the caller, who reads it after the run.
pub type Sink = Arc<Mutex<EventLog>>;

/// A fresh sink for `Options::events`.
pub fn sink() -> Sink {
    Arc::new(Mutex::new(EventLog::default()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Empty,
    Loading,
    Full,
    Reading,
}

impl SlotState {
    fn name(self) -> &'static str {
        match self {
            SlotState::Empty => "empty",
            SlotState::Loading => "loading",
            SlotState::Full => "full",
            SlotState::Reading => "reading",
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// (cta, offset) of its full barrier.
    full: (u32, u32),
    index: usize,
    state: Option<(SlotState, u64)>,
}

/// The trace being written: rendered events plus the state that spans events.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Vec<String>,
    dropped: u64,
    last_ts: u64,
    /// CTAs of the traced cluster.
    ctas: u32,
    started: bool,
    /// (cta, warp) -> the one thread whose events stand for the warp.
    rep: HashMap<(u32, u32), u32>,
    /// (cta, warp) -> roles seen (producer, mma, epilogue bits).
    roles: HashMap<(u32, u32), u8>,
    /// thread -> (barrier, first try) of a wait not yet passed.
    waiting: HashMap<u32, ((u32, u32), u64)>,
    /// Asynchronous operation id -> (cta, warp, kind) of its issuer.
    issued: HashMap<u64, (u32, u32, AsyncKind)>,
    /// Tcgen05 operations that wrote tensor memory (MMAs, cp): the rest are commits.
    wrote_tmem: HashMap<u64, ()>,
    names: HashMap<(u32, u32), String>,
    /// Barriers whose state may have changed since the last snapshot, and the last snapshots.
    dirty: Vec<(u32, u32)>,
    snap: HashMap<(u32, u32), (u64, u32, i64)>,
    slots: Vec<Slot>,
    tmem_cols: HashMap<u32, u32>,
    tmem_dirty: Option<u32>,
    warps: Vec<(u32, u32)>,
}

const PRODUCER: u8 = 1;
const MMA: u8 = 2;
const EPILOGUE: u8 = 4;

/// JSON string literal of `s`.
fn q(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl EventLog {
    fn push(&mut self, e: String) {
        if self.events.len() >= MAX_EVENTS {
            self.dropped += 1;
        } else {
            self.events.push(e);
        }
    }

    fn name(&self, bar: (u32, u32)) -> String {
        self.names
            .get(&bar)
            .cloned()
            .unwrap_or_else(|| format!("mbarrier@{:#x}", bar.1))
    }

    fn instant(&mut self, cat: &str, cta: u32, tid: u32, name: &str, args: &str) {
        let ts = self.last_ts;
        self.push(format!(
            r#"{{"ph":"i","s":"t","cat":"{cat}","name":{},"ts":{ts},"pid":{},"tid":{tid},"args":{{{args}}}}}"#,
            q(name),
            cta + 1
        ));
    }

    fn slot_to(&mut self, i: usize, to: SlotState) {
        let now = self.last_ts;
        let (full, index, prev) = {
            let s = &self.slots[i];
            (s.full, s.index, s.state)
        };
        if let Some((st, since)) = prev {
            if st == to {
                return;
            }
            let bar = q(&self.name(full));
            self.push(format!(
                r#"{{"ph":"X","cat":"slot","name":"{}","ts":{since},"dur":{},"pid":{},"tid":{},"args":{{"slot":{index},"state":"{}","barrier":{bar}}}}}"#,
                st.name(),
                now - since,
                full.0 + 1,
                1000 + index,
                st.name()
            ));
        }
        self.slots[i].state = Some((to, now));
    }

    fn slot_of_full(&self, bar: (u32, u32)) -> Option<usize> {
        self.slots.iter().position(|s| s.full == bar)
    }

    fn slot_of_empty(&self, bar: (u32, u32)) -> Option<usize> {
        let name = self.names.get(&bar)?;
        if !name.contains("empty") {
            return None;
        }
        let partner = name.replacen("empty", "full", 1);
        self.slots
            .iter()
            .position(|s| s.full.0 == bar.0 && self.names.get(&s.full) == Some(&partner))
    }

    /// The barriers marked dirty, as counter events where they changed.
    fn snapshot(&mut self, m: &Machine) {
        let dirty = std::mem::take(&mut self.dirty);
        for bar in dirty {
            let Some(b) = m.ctas.get(bar.0 as usize).and_then(|c| c.mbars.get(&bar.1)) else {
                continue;
            };
            let s = (b.phase, b.pending, b.tx);
            if self.snap.get(&bar) == Some(&s) {
                continue;
            }
            self.snap.insert(bar, s);
            self.names.entry(bar).or_insert_with(|| {
                crate::deadlock::barrier_name(m, bar.0, bar.1)
                    .unwrap_or_else(|| format!("mbarrier@{:#x}", bar.1))
            });
            let name = q(&self.name(bar));
            let ts = self.last_ts;
            self.push(format!(
                r#"{{"ph":"C","cat":"mbarrier","name":{name},"ts":{ts},"pid":{},"args":{{"phase":{},"pending":{},"tx":{}}}}}"#,
                bar.0 + 1,
                s.0,
                s.1,
                s.2
            ));
        }
    }

    fn tmem_count(&mut self, m: &Machine, cta: u32) {
        let Some(c) = m.ctas.get(cta as usize) else {
            return;
        };
        // Columns are allocated in powers of two of at least 32 (PTX ISA "tcgen05.alloc").
        let n = (0..512u32)
            .step_by(32)
            .filter(|&col| c.tmem.is_allocated(col, 32))
            .count() as u32
            * 32;
        if self.tmem_cols.get(&cta) != Some(&n) {
            self.tmem_cols.insert(cta, n);
            let ts = self.last_ts;
            self.push(format!(
                r#"{{"ph":"C","cat":"tmem","name":"tmem columns","ts":{ts},"pid":{},"args":{{"allocated":{n}}}}}"#,
                cta + 1
            ));
        }
    }

    /// The (cta, warp) a thread's event stands for, if it is its warp's representative.
    fn warp_of(&mut self, m: &Machine, t: u32) -> Option<(u32, u32)> {
        let th = m.threads.get(t as usize)?;
        let key = (th.cta, th.warp);
        let rep = *self.rep.entry(key).or_insert_with(|| {
            self.warps.push(key);
            t
        });
        (rep == t).then_some(key)
    }

    fn role(&mut self, key: (u32, u32), r: u8) {
        *self.roles.entry(key).or_insert(0) |= r;
    }

    fn on(&mut self, m: &Machine, ev: &Event) {
        self.last_ts = m.steps;
        if !self.dirty.is_empty() {
            self.snapshot(m);
        }
        if let Some(c) = self.tmem_dirty.take() {
            self.tmem_count(m, c);
        }
        match *ev {
            Event::ClusterStart { ctas, .. } => {
                self.ctas = ctas;
                self.started = true;
            }
            Event::MbarInit { cta, off, .. } => self.dirty.push((cta, off)),
            Event::MbarArrive {
                agent, cta, off, ..
            } => {
                self.dirty.push((cta, off));
                if let Agent::Async(id) = agent {
                    if let Some(&(c, w, kind)) = self.issued.get(&id) {
                        let what = match kind {
                            AsyncKind::TmaLoad => "TMA load lands",
                            AsyncKind::Tcgen05 => "commit arrives",
                            _ => "async arrive",
                        };
                        let bar = self.name((cta, off));
                        let args = format!(r#""barrier":{}"#, q(&bar));
                        self.instant("arrive", c, w, &format!("{what} on {bar}"), &args);
                    }
                }
            }
            Event::MbarPhase { cta, off, .. } => {
                let bar = (cta, off);
                self.dirty.push(bar);
                self.snapshot(m);
                if let Some(i) = self.slot_of_full(bar) {
                    self.slot_to(i, SlotState::Full);
                } else if let Some(i) = self.slot_of_empty(bar) {
                    self.slot_to(i, SlotState::Empty);
                }
            }
            Event::MbarUse {
                agent: Agent::Thread(t),
                cta,
                off,
                what,
                ..
            } => {
                if what == "an mbarrier wait" {
                    let ts = self.last_ts;
                    self.waiting.entry(t).or_insert(((cta, off), ts));
                } else {
                    // An arrive or expect_tx: the state changes after the event.
                    self.dirty.push((cta, off));
                }
            }
            Event::MbarObserve {
                by,
                cta,
                off,
                phase,
                ..
            } => {
                let started = self.waiting.remove(&by);
                let bar = (cta, off);
                if let Some(i) = self.slot_of_full(bar) {
                    if matches!(self.slots[i].state, Some((SlotState::Full, _))) {
                        self.slot_to(i, SlotState::Reading);
                    }
                }
                if let (Some(key), Some((_, since))) = (self.warp_of(m, by), started) {
                    let name = self.name(bar);
                    let now = self.last_ts;
                    self.push(format!(
                        r#"{{"ph":"X","cat":"wait","name":{},"ts":{since},"dur":{},"pid":{},"tid":{},"args":{{"barrier":{},"phase":{phase}}}}}"#,
                        q(&format!("wait {name}")),
                        now - since,
                        key.0 + 1,
                        key.1,
                        q(&name)
                    ));
                }
            }
            Event::Issue {
                id,
                kind,
                by,
                barrier,
            } => {
                let Some(th) = m.threads.get(by as usize) else {
                    return;
                };
                let (cta, warp) = (th.cta, th.warp);
                self.issued.insert(id, (cta, warp, kind));
                match kind {
                    AsyncKind::TmaLoad => {
                        self.role((cta, warp), PRODUCER);
                        let bar = barrier.unwrap_or((cta, 0));
                        if let std::collections::hash_map::Entry::Vacant(e) = self.names.entry(bar)
                        {
                            if let Some(n) = crate::deadlock::barrier_name(m, bar.0, bar.1) {
                                e.insert(n);
                            }
                        }
                        let i = match self.slot_of_full(bar) {
                            Some(i) => i,
                            None => {
                                let index = self.slots.len();
                                self.slots.push(Slot {
                                    full: bar,
                                    index,
                                    state: None,
                                });
                                index
                            }
                        };
                        self.slot_to(i, SlotState::Loading);
                        let name = self.name(bar);
                        let args = format!(r#""barrier":{}"#, q(&name));
                        self.instant("issue", cta, warp, &format!("TMA load -> {name}"), &args);
                    }
                    AsyncKind::Tcgen05 => {
                        // A commit, cp or shift is named by its opcode; an MMA by the columns
                        // it writes (its `Tmem` event, next).
                        let op = opcode(m, by);
                        if !op.starts_with("tcgen05.mma") && self.warp_of(m, by).is_some() {
                            if op.starts_with("tcgen05.commit") {
                                self.role((cta, warp), MMA);
                            }
                            let short = op.split('.').take(2).collect::<Vec<_>>().join(".");
                            self.instant("issue", cta, warp, &short, "");
                        }
                    }
                    AsyncKind::TmaStore => {
                        self.role((cta, warp), EPILOGUE);
                        if self.warp_of(m, by).is_some() {
                            self.instant("issue", cta, warp, "TMA store", "");
                        }
                    }
                    _ => {}
                }
            }
            Event::Tmem {
                agent,
                cta,
                lo,
                hi,
                access: _,
                ..
            } => match agent {
                Agent::Async(id) => {
                    if let Some(&(c, w, AsyncKind::Tcgen05)) = self.issued.get(&id) {
                        if self.wrote_tmem.insert(id, ()).is_none() && c == cta {
                            self.role((c, w), MMA);
                            let args = format!(r#""cols":[{lo},{hi}]"#);
                            self.instant("issue", c, w, "tcgen05.mma", &args);
                        }
                    }
                }
                Agent::Thread(t) => {
                    let Some(th) = m.threads.get(t as usize) else {
                        return;
                    };
                    let (tc, tw) = (th.cta, th.warp);
                    // Alloc and dealloc change the count after their event: counted next.
                    self.tmem_dirty = Some(cta);
                    let op = opcode(m, t);
                    let what = op.split('.').take(2).collect::<Vec<_>>().join(".");
                    if what == "tcgen05.ld" {
                        self.role((tc, tw), EPILOGUE);
                    }
                    if self.warp_of(m, t).is_some() {
                        let args = format!(r#""cols":[{lo},{hi}]"#);
                        self.instant("issue", tc, tw, &what, &args);
                    }
                }
            },
            _ => {}
        }
    }

    /// Close the open slot and wait spans at the last time seen, add the stop (if any) and
    /// the lane names, and render the whole file with `other` (`"key":value` pairs, JSON) in
    /// `otherData`.
    pub fn render(&mut self, stop: Option<&SimError>, other: &str) -> String {
        for i in 0..self.slots.len() {
            let now = self.last_ts;
            if let Some((st, since)) = self.slots[i].state {
                let (full, index) = (self.slots[i].full, self.slots[i].index);
                let bar = q(&self.name(full));
                self.push(format!(
                    r#"{{"ph":"X","cat":"slot","name":"{}","ts":{since},"dur":{},"pid":{},"tid":{},"args":{{"slot":{index},"state":"{}","barrier":{bar}}}}}"#,
                    st.name(),
                    now - since,
                    full.0 + 1,
                    1000 + index,
                    st.name()
                ));
                self.slots[i].state = None;
            }
        }
        type Wait = (u32, ((u32, u32), u64));
        let waiting: Vec<Wait> = self.waiting.drain().collect();
        // Waits still blocked at the end (a deadlock's waiters): open until the stop.
        let mut seen = std::collections::HashSet::new();
        for (t, (bar, since)) in waiting {
            let Some(key) = self.rep.iter().find(|(_, &r)| r == t).map(|(k, _)| *k) else {
                continue;
            };
            if !seen.insert(key) {
                continue;
            }
            let name = self.name(bar);
            let now = self.last_ts;
            self.events.push(format!(
                r#"{{"ph":"X","cat":"wait","name":{},"ts":{since},"dur":{},"pid":{},"tid":{},"args":{{"barrier":{},"phase":-1,"blocked":true}}}}"#,
                q(&format!("wait {name} (still blocked)")),
                now - since,
                key.0 + 1,
                key.1,
                q(&name)
            ));
        }
        if let Some(e) = stop {
            self.events.push(stop_event(e, self.last_ts));
        }
        let mut meta = Vec::new();
        for cta in 0..self.ctas.max(1) {
            meta.push(format!(
                r#"{{"ph":"M","name":"process_name","pid":{},"args":{{"name":"CTA rank {cta}"}}}}"#,
                cta + 1
            ));
        }
        let mut warps = self.warps.clone();
        warps.sort_unstable();
        for (cta, w) in warps {
            let r = self.roles.get(&(cta, w)).copied().unwrap_or(0);
            let mut names = Vec::new();
            for (bit, n) in [(PRODUCER, "producer"), (MMA, "mma"), (EPILOGUE, "epilogue")] {
                if r & bit != 0 {
                    names.push(n);
                }
            }
            let role = if names.is_empty() {
                "other".to_string()
            } else {
                names.join(", ")
            };
            meta.push(format!(
                r#"{{"ph":"M","name":"thread_name","pid":{},"tid":{w},"args":{{"name":{},"role":{}}}}}"#,
                cta + 1,
                q(&format!("warp {w}: {role}")),
                q(&role)
            ));
            meta.push(format!(
                r#"{{"ph":"M","name":"thread_sort_index","pid":{},"tid":{w},"args":{{"sort_index":{w}}}}}"#,
                cta + 1
            ));
        }
        for s in &self.slots {
            meta.push(format!(
                r#"{{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}}"#,
                s.full.0 + 1,
                1000 + s.index,
                q(&format!("slot {} ({})", s.index, self.name(s.full)))
            ));
        }
        let mut out =
            String::with_capacity(self.events.iter().map(|e| e.len() + 2).sum::<usize>() + 512);
        out.push_str("{\"traceEvents\":[\n");
        let all: Vec<&String> = meta.iter().chain(self.events.iter()).collect();
        for (i, e) in all.iter().enumerate() {
            out.push_str(e);
            out.push_str(if i + 1 < all.len() { ",\n" } else { "\n" });
        }
        let _ = write!(
            out,
            r#"],"displayTimeUnit":"ns","otherData":{{"format":"workbook-sim-events","version":1,"time_unit":"simulator steps","end":{},"dropped":{}{}{}}}}}"#,
            self.last_ts,
            self.dropped,
            if other.is_empty() { "" } else { "," },
            other
        );
        out.push('\n');
        out
    }
}

/// The opcode thread `t` is executing, as written in the PTX.
fn opcode<'m>(m: &'m Machine, t: u32) -> &'m str {
    m.threads
        .get(t as usize)
        .and_then(|th| m.k.code.get(th.pc as usize))
        .and_then(|i| m.k.opcodes.get(i.key as usize))
        .map_or("", |s| s.as_str())
}

/// The stop's event: kind, rule, message and source line of `e`.
fn stop_event(e: &SimError, ts: u64) -> String {
    let (kind, rule, lines) = match e {
        SimError::Rule {
            rule,
            ptx_line,
            source_line,
            ..
        } => ("rule", Some(*rule), Some((*ptx_line, *source_line))),
        SimError::Deadlock { .. } => ("deadlock", None, None),
        SimError::Fault {
            ptx_line,
            source_line,
            ..
        } => ("fault", None, Some((*ptx_line, *source_line))),
        SimError::Unsupported { ptx_line, .. } => ("unsupported", None, Some((*ptx_line, 0))),
        SimError::StepLimit { .. } => ("step-limit", None, None),
        SimError::Deadline { .. } => ("deadline", None, None),
        SimError::Launch(_) => ("launch", None, None),
        SimError::Parse { ptx_line, .. } => ("parse", None, Some((*ptx_line, 0))),
        SimError::Assert(a) => ("assert", None, Some((a.ptx_line, a.source_line))),
    };
    let mut args = format!(r#""kind":"{kind}","message":{}"#, q(&e.to_string()));
    if let Some(r) = rule {
        let _ = write!(args, r#","rule":{}"#, q(r));
    }
    if let Some((p, s)) = lines {
        let _ = write!(args, r#","ptx_line":{p},"source_line":{s}"#);
    }
    let name = match rule {
        Some(r) => format!("stopped: rule {r}"),
        None => format!("stopped: {kind}"),
    };
    format!(
        r#"{{"ph":"i","s":"g","cat":"stop","name":{},"ts":{ts},"pid":1,"tid":0,"args":{{{args}}}}}"#,
        q(&name)
    )
}

/// Render the sink's trace (see [`EventLog::render`]).
pub fn finish(sink: &Sink, stop: Option<&SimError>, other: &str) -> String {
    match sink.lock() {
        Ok(mut log) => log.render(stop, other),
        Err(p) => p.into_inner().render(stop, other),
    }
}

/// The observer: a handle on the sink.
struct Tracer(Sink);

impl Observer for Tracer {
    fn event(&mut self, m: &Machine, ev: &Event) -> Result<(), SimError> {
        if let Ok(mut log) = self.0.lock() {
            log.on(m, ev);
        }
        Ok(())
    }
}

/// The hook of cluster admission: trace the grid's first cluster when the run asks for it.
pub(crate) fn attach(o: &crate::Options, linear: u32, observers: &mut Vec<Box<dyn Observer>>) {
    if let (Some(s), 0) = (&o.events, linear) {
        observers.push(Box::new(Tracer(s.clone())));
    }
}
