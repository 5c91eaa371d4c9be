//! What a run reports: executed instructions per opcode and per warp role, schedule statistics,
//! and, when no thread can progress, who waits on what.

use crate::exec::{Machine, St, Why};

/// What a simulated launch executed.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Instructions executed (guards true), all threads.
    pub instructions: u64,
    /// Executed count per opcode with its modifiers, as written in the PTX.
    pub per_opcode: Vec<(String, u64)>,
    /// Warp-level executed count per opcode: per warp of every CTA, the most times any one of
    /// its lanes executed the opcode with a true guard, summed. Never more than the warps
    /// executed; exact for an instruction one elected lane issues, or all lanes together. An
    /// instruction whose guard is false counts nowhere (it did none of its work).
    pub per_opcode_warps: Vec<(String, u64)>,
    /// Executed count per (warp index in its CTA, opcode), summed over CTAs.
    pub per_warp: Vec<(u32, String, u64)>,
    /// Each warp index's role, from what it issued: "producer", "mma", "epilogue" (joined by
    /// '+'), or "other".
    pub roles: Vec<(u32, String)>,
    /// mbarrier phases completed.
    pub barrier_phases: u64,
    /// Asynchronous operations (TMA loads and stores, tcgen05.mma and commits) issued/retired.
    pub async_issued: u64,
    pub async_retired: u64,
    /// Retired while a thread could have run instead (early) or only once none could (late).
    pub retired_early: u64,
    pub retired_late: u64,
    /// PCT priority changes made.
    pub priority_changes: u64,
    pub clusters: u64,
    /// Events in order (with `Options::trace`).
    pub trace: Vec<String>,
}

impl RunReport {
    /// Executed count per (role, opcode), summed over the warps of each role.
    pub fn per_role(&self) -> Vec<(String, String, u64)> {
        let mut out: Vec<(String, String, u64)> = Vec::new();
        for (w, op, n) in &self.per_warp {
            let role = self
                .roles
                .iter()
                .find(|(x, _)| x == w)
                .map_or("other", |(_, r)| r.as_str());
            match out.iter_mut().find(|(r, o, _)| r == role && o == op) {
                Some(e) => e.2 += n,
                None => out.push((role.to_string(), op.clone(), *n)),
            }
        }
        out.sort();
        out
    }

    /// Executed count of every opcode starting with `prefix`.
    pub fn executed(&self, prefix: &str) -> u64 {
        self.per_opcode
            .iter()
            .filter(|(o, _)| o.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

/// The role of warp index `w`, from what it executed so far.
pub(crate) fn role(m: &Machine, w: u32) -> String {
    let n = m.k.opcodes.len();
    let mut r = Vec::new();
    let has = |pred: &dyn Fn(&str) -> bool| {
        m.k.opcodes
            .iter()
            .enumerate()
            .any(|(i, o)| pred(o) && m.counts.get(w as usize * n + i).copied().unwrap_or(0) > 0)
    };
    if has(&|o| o.starts_with("cp.async.bulk.tensor") && o.contains(".shared::cluster.global")) {
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

/// The expression the kernel passed to its `mbarrier_init(...)` call on source line `line` of
/// `text` (`&smem.load_full[s]` -> `smem.load_full[s]`).
fn init_expression(text: &str, line: u32) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)? as usize)?;
    let start = l.find("mbarrier_init(")? + "mbarrier_init(".len();
    let mut depth = 0i32;
    let mut end = None;
    for (i, c) in l[start..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' if depth > 0 => depth -= 1,
            ',' | ')' if depth == 0 => {
                end = Some(start + i);
                break;
            }
            _ => {}
        }
    }
    let e = l[start..end?].trim().trim_start_matches('&').trim();
    (!e.is_empty()).then(|| e.to_string())
}

/// A barrier's name: from the launch's table, else from the source line of its
/// `mbarrier.init` (the n-th barrier that line initialised gets index n: `smem.load_full[2]`).
fn barrier_name(m: &Machine, cta: u32, off: u32) -> Option<String> {
    let rel = off.wrapping_sub(m.dyn_off);
    if let Some((_, name)) = m.l.barrier_names.iter().find(|(o, _)| *o == rel) {
        return Some(name.clone());
    }
    let b = m.ctas[cta as usize].mbars.get(&off)?;
    let path = m.prog.files.get(&b.init_at.0)?;
    let (_, text) =
        m.l.sources
            .iter()
            .find(|(suffix, _)| path.ends_with(suffix.as_str()))?;
    let expr = init_expression(text, b.init_at.1)?;
    match (expr.find('['), expr.rfind(']')) {
        (Some(open), Some(close)) if close > open => {
            let mut same: Vec<u32> = m.ctas[cta as usize]
                .mbars
                .iter()
                .filter(|(_, o)| o.init_at == b.init_at)
                .map(|(k, _)| *k)
                .collect();
            same.sort_unstable();
            let ordinal = same.iter().position(|&k| k == off)?;
            Some(format!(
                "{}[{ordinal}]{}",
                &expr[..open],
                &expr[close + 1..]
            ))
        }
        _ => Some(expr),
    }
}

fn barrier_words(m: &Machine, cta: u32, off: u32) -> String {
    let rank = m.ctas[cta as usize].rank;
    match barrier_name(m, cta, off) {
        Some(name) => format!("{name} of CTA rank {rank} (shared-memory offset {off:#x})"),
        None => format!("the barrier at shared-memory offset {off:#x} of CTA rank {rank}"),
    }
}

/// One line per blocked warp and what it waits for.
pub(crate) fn deadlock_report(m: &Machine) -> Vec<String> {
    let mut lines = Vec::new();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for th in &m.threads {
        let St::Block(why) = th.st else { continue };
        if seen.contains(&(th.cta, th.warp)) {
            continue;
        }
        seen.push((th.cta, th.warp));
        let lanes = m
            .threads
            .iter()
            .filter(|o| o.cta == th.cta && o.warp == th.warp && o.st == th.st)
            .count();
        let ins = m.k.code.get(th.pc as usize);
        let at = ins.map_or(String::new(), |i| {
            format!(
                " at PTX line {} (source line {})",
                i.ptx_line,
                m.src_line(i)
            )
        });
        let who = format!(
            "CTA {} (cluster rank {}), warp {} ({}), {lanes} lane(s){at}",
            m.cta_linear(th.cta),
            m.ctas[th.cta as usize].rank,
            th.warp,
            role(m, th.warp)
        );
        let what = match why {
            Why::Mbar { cta, off, parity } => {
                let Some(b) = m.ctas[cta as usize].mbars.get(&off) else {
                    lines.push(format!("{who} waits on shared-memory offset {off:#x}, whose mbarrier was invalidated"));
                    continue;
                };
                let got = b.count - b.pending;
                let state = if b.pending > 0 && b.tx > 0 {
                    format!("it is in phase {}, with {got} of its {} arrivals; {} missing, and {} transaction bytes are missing (announced by arrive.expect_tx, not yet delivered)", b.phase, b.count, b.pending, b.tx)
                } else if b.pending > 0 {
                    format!("it is in phase {}, with {got} of its {} arrivals; {} missing", b.phase, b.count, b.pending)
                } else {
                    format!("it is still in phase {}: all {} arrivals came, so transaction bytes are missing ({} bytes announced by arrive.expect_tx were never delivered by TMA loads that complete on it)", b.phase, b.count, b.tx)
                };
                let last = match b.last {
                    None => "no arrival on it yet".to_string(),
                    Some((kind, rank, w, pl, sl, ph)) => format!(
                        "last arrival: {kind} by warp {w} of cluster rank {rank} in phase {ph} (PTX line {pl}, source line {sl})"
                    ),
                };
                format!(
                    "waits on {} for its phase of parity {parity}: {state}; {last}",
                    barrier_words(m, cta, off)
                )
            }
            Why::Bar(id) => {
                let b = &m.ctas[th.cta as usize].bars[id as usize];
                format!(
                    "waits at CTA barrier {id} (bar.sync): {} of {} threads arrived",
                    b.arrived, b.expected
                )
            }
            Why::ClusterWait => format!(
                "waits at the cluster barrier (barrier.cluster.wait): {} threads arrived in this phase",
                m.cluster_arrivals
            ),
            Why::BulkWait(n) => format!(
                "waits in cp.async.bulk.wait_group {n} for its TMA stores"
            ),
            Why::Collective => format!(
                "waits at a warp-collective instruction for lanes {:#010x}",
                th.coll_mask
            ),
        };
        lines.push(format!("{who} {what}"));
    }
    if m.pending_events() > 0 {
        lines.push(format!(
            "{} asynchronous operation(s) still pending, none of which can wake a waiting thread",
            m.pending_events()
        ));
    }
    lines
}
