//! When no thread can progress: who waits on what, in the kernel's own words (each blocked
//! warp, its role from what it executed, the barrier by the name the kernel gave it, and what
//! that barrier still misses).

use crate::machine::{Machine, St, Why};

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
pub(crate) fn barrier_name(m: &Machine, cta: u32, off: u32) -> Option<String> {
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

pub(crate) fn barrier_words(m: &Machine, cta: u32, off: u32) -> String {
    let rank = m.ctas[cta as usize].rank;
    match barrier_name(m, cta, off) {
        Some(name) => format!("{name} of CTA rank {rank} (shared-memory offset {off:#x})"),
        None => format!("the barrier at shared-memory offset {off:#x} of CTA rank {rank}"),
    }
}

/// The lanes of a group as ranges ("0-3, 7").
fn lane_list(mut lanes: Vec<u32>) -> String {
    lanes.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lanes.len() {
        let mut j = i;
        while j + 1 < lanes.len() && lanes[j + 1] == lanes[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            lanes[i].to_string()
        } else {
            format!("{}-{}", lanes[i], lanes[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// One line per group of blocked lanes (a warp's lanes at one place waiting on one thing: lanes
/// of one warp at different places are different lines) and what it waits for; then the root
/// waiter (see [`root_waiter`]).
pub(crate) fn deadlock_report(m: &Machine) -> Vec<String> {
    let mut lines = Vec::new();
    let mut seen: Vec<(u32, u32, u32, St)> = Vec::new();
    let mut groups: Vec<(usize, u32, Why)> = Vec::new();
    for (ti, th) in m.threads.iter().enumerate() {
        let St::Block(why) = th.st else { continue };
        let key = (th.cta, th.warp, th.pc, th.st);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let lanes: Vec<u32> = m
            .threads
            .iter()
            .filter(|o| o.cta == th.cta && o.warp == th.warp && o.st == th.st && o.pc == th.pc)
            .map(|o| o.lane)
            .collect();
        let ins = m.k.code.get(th.pc as usize);
        let at = ins.map_or(String::new(), |i| {
            format!(
                " at PTX line {} (source line {})",
                i.ptx_line,
                m.src_line(i)
            )
        });
        let who = format!(
            "CTA {} (cluster rank {}), warp {} ({}), lane(s) {}{at}",
            m.cta_linear(th.cta),
            m.ctas[th.cta as usize].rank,
            th.warp,
            m.role(th.warp),
            lane_list(lanes)
        );
        let what = match why {
            Why::Mbar { cta, off, parity } => {
                let Some(b) = m.ctas[cta as usize].mbars.get(&off) else {
                    let at = crate::trace_words::barrier_place(m, cta, off);
                    lines.push(format!("{who} waits on {at}, whose mbarrier was invalidated"));
                    continue;
                };
                let got = b.count - b.pending;
                let state = if b.tx < 0 {
                    format!("it is in phase {}, with {got} of its {} arrivals; {} missing, and {} transaction bytes arrived before an arrive.expect_tx announced them (complete_tx before expect_tx: the tx-count went below zero, so the phase cannot complete with the bytes the expect_tx will add)", b.phase, b.count, b.pending, -b.tx)
                } else if b.pending > 0 && b.tx > 0 {
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
            Why::Collective if crate::exec::pair::waiting_words(m, ti as u32).is_some() => {
                crate::exec::pair::waiting_words(m, ti as u32).unwrap_or_default()
            }
            Why::Collective => format!(
                "waits at a warp-collective instruction for lanes {:#010x}",
                th.coll_mask
            ),
        };
        groups.push((lines.len(), ti as u32, why));
        lines.push(format!("{who} {what}"));
    }
    if let Some(i) = root_waiter(m, &groups) {
        let (line, _, _) = groups[i];
        let text = lines[line].clone();
        lines.push(format!(
            "root waiter (its barrier misses arrivals no other blocked thread will make): {text}"
        ));
    }
    if m.pending_events() > 0 {
        lines.push(format!(
            "{} asynchronous operation(s) still pending, none of which can wake a waiting thread",
            m.pending_events()
        ));
    }
    lines
}

/// The root waiter among the blocked groups (line, a thread, why): the first whose missing
/// arrivals come from no other blocked thread. For an mbarrier: its phase misses only
/// transaction bytes (a TMA load that was never issued, or bytes that came before their
/// expect_tx), or the warp that last arrived on it is not blocked (it exited or went past its
/// arrive: nothing blocked will arrive again), or nothing ever arrived. Every other mbarrier
/// waiter waits for a warp that is itself blocked (downstream of the root). A bar.sync or
/// cluster-barrier waiter is a root when no thread of its CTA (cluster) is blocked elsewhere.
fn root_waiter(m: &Machine, groups: &[(usize, u32, Why)]) -> Option<usize> {
    let blocked = |cta_rank: u32, warp: u32| {
        m.threads.iter().any(|o| {
            matches!(o.st, St::Block(_))
                && m.ctas[o.cta as usize].rank == cta_rank
                && o.warp == warp
        })
    };
    let mbar_root = groups.iter().position(|&(_, _, why)| {
        let Why::Mbar { cta, off, .. } = why else {
            return false;
        };
        let Some(b) = m.ctas[cta as usize].mbars.get(&off) else {
            return true;
        };
        if b.tx < 0 || (b.pending == 0 && b.tx != 0) {
            return true;
        }
        match b.last {
            None => true,
            Some((_, rank, w, ..)) => !blocked(rank, w),
        }
    });
    mbar_root.or_else(|| {
        groups.iter().position(|&(_, t, why)| {
            let th = &m.threads[t as usize];
            match why {
                Why::Bar(_) => !m
                    .threads
                    .iter()
                    .any(|o| o.cta == th.cta && matches!(o.st, St::Block(w) if w != why)),
                Why::ClusterWait => !m
                    .threads
                    .iter()
                    .any(|o| matches!(o.st, St::Block(w) if w != Why::ClusterWait)),
                _ => false,
            }
        })
    })
}
