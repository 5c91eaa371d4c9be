//! The ordering rules, named as the GPU emulation (`tcgen05_emu.cuh`, `common::emulation`) names
//! them, checked from what is ordered rather than from what happened to be timed:
//!
//! - `operand-loaded`: an MMA reads shared memory that a TMA load wrote only if the issuing
//!   thread has waited on the barrier phase that load completed on.
//! - `no-refill-in-flight`: a TMA load may overwrite an MMA operand only after the refilling
//!   thread waited on the barrier phase the MMA's `tcgen05.commit` arrived on.
//! - `ld-in-flight` / `ld-after-commit-wait`: `tcgen05.ld` of accumulator columns only after the
//!   commit covering the MMAs that wrote them arrived, and the reader waited on that phase.
//! - `fence-after-sync`: `tcgen05.mma/ld/st/dealloc` after a thread synchronisation only with
//!   `tcgen05.fence::after_thread_sync` in between.
//! - `wait-ld-before-handoff`, `fence-before-handoff`: after `tcgen05.ld`, a hand-off (arrive,
//!   barrier) only after `tcgen05.wait::ld` and `tcgen05.fence::before_thread_sync`.
//! - `wait-ld-before-use` (simulator only): a register `tcgen05.ld` wrote is read before
//!   `tcgen05.wait::ld`.
//! - `proxy-fence-before-store`: a TMA store reads shared memory whose generic-proxy writes were
//!   not followed by `fence.proxy.async` in the writing thread.
//! - `wait-read-before-reuse`: shared memory a TMA store reads is rewritten before a
//!   `cp.async.bulk.wait_group.read` covering that store.
//! - `wait-read-before-exit`, `wait-for-peer-commits`: the CTA frees its tensor memory (is about to
//!   exit) while a TMA store may still read its shared memory, or a peer's `tcgen05.commit` may
//!   still arrive on its barriers.
//! - `one-cta-group`: every tcgen05 instruction of a CTA uses the same `.cta_group`.

use crate::decode::{Instr, Op, Opd};
use crate::error::SimError;
use crate::machine::{Machine, TcJob};
use crate::rule_state::{Reader, TmaRec, Use, G, TMEM_COLUMNS};

fn observed(m: &Machine, t: u32, key: (u32, u32)) -> u64 {
    m.threads[t as usize]
        .rules
        .observed
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, v)| *v)
}

/// Thread `t` saw phase `completed - 1` of barrier (cta, off) complete.
pub fn observe(m: &mut Machine, t: u32, cta: u32, off: u32, completed: u64) {
    let obs = &mut m.threads[t as usize].rules.observed;
    match obs.iter_mut().find(|(k, _)| *k == (cta, off)) {
        Some((_, v)) => *v = (*v).max(completed),
        None => obs.push(((cta, off), completed)),
    }
}

fn grans(lo: u32, hi: u32) -> std::ops::Range<usize> {
    (lo / G) as usize..hi.div_ceil(G) as usize
}

pub fn generic_smem_write(
    m: &mut Machine,
    t: u32,
    cta: u32,
    off: u32,
    n: u32,
) -> Result<(), SimError> {
    m.seq += 1;
    let seq = m.seq;
    for g in grans(off, off + n) {
        let gr = m.ctas[cta as usize].rules.gran[g];
        if gr.store != 0 {
            let id = gr.store - 1;
            if !m.rg.store_covered[id as usize] {
                let (_, warp, line) = m.rg.store_cta[id as usize];
                return Err(m.rule(
                    t,
                    "wait-read-before-reuse",
                    format!(
                        "a write to shared-memory offset {:#x} while an earlier TMA store of warp {warp} (PTX line {}) from the same buffer is not covered by a cp.async.bulk.wait_group.read: the buffer was rewritten while the TMA engine may still have been reading it (PTX ISA \"cp.async.bulk.wait_group\"); before writing a staging buffer again, wait with .read until its store's group is complete, or stage in more buffers",
                        g as u32 * G,
                        line.0
                    ),
                ));
            }
            m.ctas[cta as usize].rules.gran[g].store = 0;
        }
        let gr = &mut m.ctas[cta as usize].rules.gran[g];
        gr.gen_seq = seq;
        gr.gen_writer = t;
        // The bytes are no longer what a TMA load wrote.
        gr.tma = 0;
    }
    Ok(())
}

/// A TMA load into (cta, off..off+bytes) is issued by `t`: returns its record index.
pub fn tma_load_issue(
    m: &mut Machine,
    t: u32,
    cta: u32,
    off: u32,
    bytes: u32,
) -> Result<u32, SimError> {
    let (lo, hi) = (off, off + bytes);
    // no-refill-in-flight: every MMA that read these bytes must be ordered before this load.
    // Granule by granule, the latest MMA of each issuer (rule_state::Use): linear in the bytes.
    let grs = grans(lo, hi.min(m.smem_bytes));
    for g in grs {
        while let Some(&u) = m.ctas[cta as usize].rules.operands[g].last() {
            if ordered(m, t, &u) {
                m.ctas[cta as usize].rules.operands[g].pop();
                continue;
            }
            let why = if !released(m, &u) {
                "whose tcgen05.commit has not arrived"
            } else {
                "whose tcgen05.commit arrived in a barrier phase this thread has not waited for"
            };
            return Err(m.rule(
                t,
                "no-refill-in-flight",
                format!(
                    "a TMA load into shared-memory offset {off:#x} of CTA rank {cta} overwrites an operand (from {:#x}) of an MMA that warp {} issued and {why}: the producer must wait on the slot's load_empty phase (the commit) before refilling it",
                    u.lo, u.warp
                ),
            ));
        }
    }
    let c = &mut m.ctas[cta as usize].rules;
    let id = c.tma.len() as u32;
    c.tma.push(TmaRec {
        landed: false,
        mbar: (0, 0),
        phase: 0,
        off,
    });
    for g in grans(lo, hi) {
        c.gran[g].tma = id + 1;
    }
    Ok(id)
}

/// The TMA load `rec` into `cta` landed; its bytes count towards `phase` of barrier (bc, bo).
pub fn tma_landed(m: &mut Machine, cta: u32, rec: u32, bc: u32, bo: u32, phase: u64) {
    let r = &mut m.ctas[cta as usize].rules.tma[rec as usize];
    r.landed = true;
    r.mbar = (bc, bo);
    r.phase = phase;
}

#[allow(clippy::too_many_arguments)]
pub fn mma_issue(
    m: &mut Machine,
    t: u32,
    cta: u32,
    cg2: bool,
    idesc: u32,
    a: u64,
    b: u64,
    d: u32,
    seq: u64,
) -> Result<(), SimError> {
    let id = crate::units::descriptors::decode_idesc(idesc);
    let ctas: Vec<u32> = if cg2 { vec![cta, cta + 1] } else { vec![cta] };
    // Commits numbered `after` and later cover this MMA.
    let after = m.rg.commits.get(&t).map_or(0, |l| l.issued);
    let _ = seq;
    let warp = m.threads[t as usize].warp;
    // The bytes the MMA reads, from the unit's decoding of the descriptors (one definition).
    let reads = crate::glue::mma_reads(idesc, a, b, ctas.len() as u32)
        .map_err(|e| m.fault(t, crate::glue::unit_message("tcgen05.mma", &e)))?;
    let _ = b;
    for &c in &ctas {
        {
            for &(lo, hi) in &reads {
                if hi > m.smem_bytes {
                    return Err(m.fault(t, format!("tcgen05.mma reads shared-memory bytes {lo:#x}..{hi:#x}, past the CTA's {:#x} bytes: check the descriptors' start address and SBO", m.smem_bytes)));
                }
                for g in grans(lo, hi) {
                    let gr = m.ctas[c as usize].rules.gran[g];
                    let why = if gr.tma == 0 && gr.gen_seq != 0 {
                        // Written by ordinary stores: legal when a fence.proxy.async in the
                        // writing thread and a synchronisation order the writes before the MMA
                        // (PTX ISA "Proxies", "membar/fence": fence.proxy.async). The
                        // happens-before checker decides that (proxy-fence-before-async,
                        // data-race), not this TMA-only bookkeeping.
                        None
                    } else if gr.tma == 0 {
                        Some("no TMA load and no store has written it".to_string())
                    } else {
                        let r = &m.ctas[c as usize].rules.tma[gr.tma as usize - 1];
                        if !r.landed || observed(m, t, r.mbar) <= r.phase {
                            Some(format!("the TMA load into {:#x} that wrote it has not been seen complete by this warp (no wait on its barrier since it was issued)", r.off))
                        } else {
                            None
                        }
                    };
                    if let Some(why) = why {
                        let rank = m.ctas[c as usize].rank;
                        let at = g as u32 * G;
                        let name = crate::glue::mma_operand_at(idesc, a, b, ctas.len() as u32, at);
                        return Err(m.rule(
                            t,
                            "operand-loaded",
                            format!("tcgen05.mma reads operand {name} bytes {at:#x}..{:#x} of CTA rank {rank}, but {why}: an MMA may read its operands only after waiting on the barrier its TMA loads complete on (then tcgen05.fence::after_thread_sync). Check the load_full wait, and the descriptor's start address and SBO", at + G),
                        ));
                    }
                }
                let u = Use {
                    issuer: t,
                    warp,
                    after,
                    lo,
                };
                for g in grans(lo, hi) {
                    record(&mut m.ctas[c as usize].rules.operands[g], u);
                }
            }
        }
        // The accumulator columns: older, ordered writes of the same columns are superseded.
        let col = d & 0xFFFF;
        let ncols = crate::glue::mma_d_columns(idesc, a, b, ctas.len() as u32).unwrap_or(id.n);
        let (lo, hi) = (col, col + ncols);
        // release-before-overwrite: every warp that read these columns handed them back, and
        // this thread waited for that hand-over.
        let mut keep = Vec::new();
        for r in std::mem::take(&mut m.rg.readers) {
            if r.cta != c || r.hi <= lo || r.lo >= hi {
                keep.push(r);
                continue;
            }
            let ok = r
                .handed
                .is_some_and(|(hc, ho, hp)| observed(m, t, (hc, ho)) > hp);
            // A reader that read these columns before any MMA had written them read before its
            // wait (skip-acc-wait, a wait on the wrong parity): that read is the defect, whether
            // or not it then handed the columns over. In a persistent kernel the epilogue's
            // hand-over of tile 0 (phase 0 of acc_empty) is one the MMA warp must not wait for
            // before tile 0's MMAs, so blaming the MMA warp (release-before-overwrite) would
            // name a correct MMA warp. tcgen05.mma -> tcgen05.ld is ordered only by the commit's
            // mbarrier phase and the reader's wait on it (PTX ISA "tcgen05 Memory Consistency
            // Model", "Pipelined tcgen05 Instructions").
            if let (false, Some(line)) = (ok, r.early) {
                m.rg.readers = keep;
                let rank = m.ctas[c as usize].rank;
                return Err(m.rule_at(
                    line,
                    r.cta,
                    r.warp,
                    "ld-after-commit-wait",
                    format!("warp {} read accumulator columns {}..{} of CTA rank {rank} (tcgen05.ld) before waiting for the accumulator: no MMA had written them yet, and the MMA that warp {warp} issues now overwrites them. The epilogue read the accumulator before its wait; wait on the barrier the final tcgen05.commit arrives on, then tcgen05.fence::after_thread_sync, before tcgen05.ld", r.warp, r.lo, r.hi - 1),
                ));
            }
            if !ok {
                let rank = m.ctas[c as usize].rank;
                let why = match r.handed {
                    None => format!("warp {} (lane quarter {}) has read them and not handed them over (tcgen05.wait::ld, tcgen05.fence::before_thread_sync, arrive, and the MMA warp waiting for that arrival)", r.warp, r.warp % 4),
                    Some((hc, ho, hp)) => format!("warp {} read them and handed them over in phase {hp} of {}, but the MMA warp has not waited for that phase", r.warp, crate::deadlock::barrier_words(m, hc, ho)),
                };
                m.rg.readers = keep;
                return Err(m.rule(
                    t,
                    "release-before-overwrite",
                    format!("tcgen05.mma overwrites columns {lo}.. of CTA rank {rank} while {why}: the accumulator was released too early or not at all"),
                ));
            }
        }
        m.rg.readers = keep;
        let u = Use {
            issuer: t,
            warp,
            after,
            lo,
        };
        for col in lo as usize..(hi as usize).min(TMEM_COLUMNS) {
            // Older writes of the column whose commit arrived are superseded.
            let mut list = std::mem::take(&mut m.ctas[c as usize].rules.accum[col]);
            list.retain(|o| !released(m, o));
            record(&mut list, u);
            m.ctas[c as usize].rules.accum[col] = list;
        }
    }
    Ok(())
}

/// `t` issued a `tcgen05.commit`: it covers every MMA `t` issued before it.
pub fn commit_issued(m: &mut Machine, t: u32) {
    m.rg.commits.entry(t).or_default().issued += 1;
}

/// `t`'s next commit arrived at `arrived` (cta, offset, phase): the MMAs it covers are released
/// there. Commits of one thread arrive in issue order (its tcgen05 queue retires in order).
pub fn commit_arrived(m: &mut Machine, t: u32, arrived: &[(u32, u32, u64)]) {
    let log = m.rg.commits.entry(t).or_default();
    let n = log.arrived.len() as u64;
    for &(c, o, p) in arrived {
        log.by_barrier.entry((c, o)).or_default().push((n, p));
    }
    log.arrived.push(arrived.to_vec());
}

/// Whether a commit covering `u` has arrived.
fn released(m: &Machine, u: &Use) -> bool {
    m.rg.commits
        .get(&u.issuer)
        .is_some_and(|l| l.released(u.after))
}

/// Whether thread `t` has seen a barrier phase that a commit covering `u` arrived on: the MMA is
/// ordered before what `t` does next.
fn ordered(m: &Machine, t: u32, u: &Use) -> bool {
    let Some(log) = m.rg.commits.get(&u.issuer) else {
        return false;
    };
    if !log.released(u.after) {
        return false;
    }
    m.threads[t as usize]
        .rules
        .observed
        .iter()
        .any(|&(key, seen)| log.first_on(key, u.after).is_some_and(|p| seen > p))
}

/// Record `u` in one granule's or column's list: it replaces its issuer's earlier MMA there.
fn record(list: &mut Vec<Use>, u: Use) {
    match list.iter_mut().find(|o| o.issuer == u.issuer) {
        Some(o) => *o = u,
        None => list.push(u),
    }
}

pub fn check_tmem_read(m: &mut Machine, t: u32, taddr: u32, n: u32) -> Result<(), SimError> {
    let cta = m.threads[t as usize].cta;
    let col = taddr & 0xFFFF;
    let (lo, hi) = (col, col + n);
    let warp = m.threads[t as usize].warp;
    let accum = &m.ctas[cta as usize].rules.accum;
    let written = (lo as usize..(hi as usize).min(TMEM_COLUMNS)).any(|c| !accum[c].is_empty());
    let early = if written { None } else { Some(m.line_of(t)) };
    match m
        .rg
        .readers
        .iter_mut()
        .find(|r| r.cta == cta && r.warp == warp && r.lo == lo && r.hi == hi)
    {
        Some(r) => {
            r.handed = None;
            r.early = early;
        }
        None => m.rg.readers.push(Reader {
            cta,
            warp,
            lo,
            hi,
            handed: None,
            early,
        }),
    }
    for col in lo as usize..(hi as usize).min(TMEM_COLUMNS) {
        for i in 0..m.ctas[cta as usize].rules.accum[col].len() {
            let u = m.ctas[cta as usize].rules.accum[col][i];
            // A commit covering them arrived: whether the reader is ordered after it (its own
            // wait, or another warp's wait handed on through bar.sync and
            // tcgen05.fence::after_thread_sync) is the happens-before checker's to decide
            // (`check::hb`, reported as `ld-after-commit-wait`).
            if !released(m, &u) {
                return Err(m.rule(
                    t,
                    "ld-in-flight",
                    format!("tcgen05.ld of columns {lo}..{} while MMA(s) issued by warp {} writing them have not completed (their tcgen05.commit has not arrived); tcgen05.mma -> tcgen05.ld is not a pipelined pair: wait on the commit's barrier first (PTX ISA \"Pipelined tcgen05 Instructions\")", hi - 1, u.warp),
                ));
            }
        }
    }
    Ok(())
}

pub fn cta_group(m: &mut Machine, t: u32, cg2: bool, op: &'static str) -> Result<(), SimError> {
    let cta = m.threads[t as usize].cta as usize;
    match m.ctas[cta].rules.cta_group {
        None => {
            m.ctas[cta].rules.cta_group = Some((cg2, op));
            Ok(())
        }
        Some((g, first)) if g != cg2 => Err(m.rule(
            t,
            "one-cta-group",
            format!(
                "{op} uses cta_group::{}, but this CTA's first tcgen05 instruction, {first}, used cta_group::{}: all tcgen05 instructions of a kernel (alloc, relinquish_alloc_permit, mma, commit, dealloc) must use the same .cta_group (PTX ISA \"tcgen05\", Issue Granularity; ptxas refuses such a kernel for sm_100a)",
                if cg2 { 2 } else { 1 },
                if g { 2 } else { 1 }
            ),
        )),
        Some(_) => Ok(()),
    }
}

pub fn on_tcgen05(m: &mut Machine, t: u32, op: &str) -> Result<(), SimError> {
    if let Some(sync) = m.threads[t as usize].rules.synced {
        return Err(m.rule(
            t,
            "fence-after-sync",
            format!("{op} issued after {sync} with no tcgen05.fence::after_thread_sync in between, so it is not ordered after that synchronisation (PTX ISA, tcgen05 memory consistency model: \"Specialized Inter-thread Synchronization\", \"Canonical synchronization patterns\")"),
        ));
    }
    Ok(())
}

pub fn on_handoff(m: &mut Machine, t: u32, what: &str) -> Result<(), SimError> {
    let r = &m.threads[t as usize].rules;
    if r.ld_unwaited {
        return Err(m.rule(
            t,
            "wait-ld-before-handoff",
            format!("{what} while a tcgen05.ld of this thread was not yet waited for: the tensor memory it reads is handed to other threads (an MMA may overwrite it) before the load completed; tcgen05.wait::ld, then tcgen05.fence::before_thread_sync, must come first (PTX ISA \"Canonical synchronization patterns\": non-pipelined instructions, different thread)"),
        ));
    }
    // A tcgen05.ld that tcgen05.wait::ld completed still needs tcgen05.fence::before_thread_sync
    // before a hand-off. PTX ISA 9.0, "tcgen05.wait": "tcgen05.wait::ld causes the executing
    // thread to block until all prior tcgen05.ld operations issued by the executing thread have
    // completed" (the executing thread only). "Asynchronous Operations": .ld is asynchronous,
    // "not inherently ordered with respect to other tcgen05 operations in the same thread";
    // .wait::* is synchronous, ordered with the thread's tcgen05 operations, not with execution
    // ordering instructions. "Specialized Inter-thread Synchronization": the two fences
    // "compose with execution ordering instructions ... to establish an ordering between the
    // tcgen05 operations across threads", and "An asynchronous tcgen05 operation prior to a
    // tcgen05.fence::before_thread_sync is ordered before all subsequent tcgen05 and the
    // execution ordering operations": the only sentence that orders the load before the
    // barrier. "tcgen05.fence": it is also the code-motion fence ("prior tcgen05 instructions
    // ... cannot be hoisted across"). "Canonical synchronization patterns", "Non-pipelined
    // instructions, different thread": tcgen05.ld; tcgen05.wait::ld;
    // tcgen05.fence::before_thread_sync; mbarrier.arrive. The ISA names the one case where the
    // fence is implied (tcgen05.commit, "Non-pipelined instructions, same thread"); wait::ld is
    // not one. So the rule stands for a waited load too (decided in
    // assets/results/sim-coverage-2026-11-28.md, "Blackwell kernels written elsewhere").
    if r.ld_unfenced {
        return Err(m.rule(
            t,
            "fence-before-handoff",
            format!("{what} after a tcgen05.ld with no tcgen05.fence::before_thread_sync in between, so the load is not ordered before the hand-over: tcgen05.wait::ld completes it for this thread only, and \"an asynchronous tcgen05 operation prior to a tcgen05.fence::before_thread_sync is ordered before all subsequent tcgen05 and the execution ordering operations\" is the ISA's only ordering of it before a barrier (PTX ISA \"Specialized Inter-thread Synchronization\"; \"Canonical synchronization patterns\": tcgen05.ld; tcgen05.wait::ld; tcgen05.fence::before_thread_sync; arrive)"),
        ));
    }
    Ok(())
}

/// Reading a register a pending tcgen05.ld writes.
pub fn check_ld_regs(m: &mut Machine, t: u32, ins: &Instr) -> Result<(), SimError> {
    let regs = &m.threads[t as usize].rules.ld_regs;
    let srcs: &[Opd] = match ins.op {
        Op::St { .. }
        | Op::Mbar(..)
        | Op::BarSync { .. }
        | Op::TcSt { .. }
        | Op::Atom { red: true, .. } => &ins.args,
        Op::TcLd { .. } | Op::TcWaitLd => return Ok(()),
        _ => ins.args.get(1..).unwrap_or(&[]),
    };
    fn hit(o: &Opd, regs: &[u32]) -> Option<u32> {
        match o {
            Opd::Reg(r) | Opd::NotReg(r) => regs.contains(r).then_some(*r),
            Opd::Addr(crate::decode::Base::Reg(r), _) => regs.contains(r).then_some(*r),
            Opd::Vec(v) => v.iter().find_map(|x| hit(x, regs)),
            _ => None,
        }
    }
    if let Some(r) = srcs.iter().find_map(|o| hit(o, regs)) {
        if m.threads[t as usize].rules.ld_used.is_none() {
            let name = m.k.reg_names[r as usize].clone();
            let line =
                m.k.code
                    .get(m.threads[t as usize].pc as usize)
                    .map_or((0, 0), |i| (i.ptx_line, m.src_line(i)));
            m.threads[t as usize].rules.ld_used = Some((name, line));
        }
    }
    Ok(())
}

/// A register of a tcgen05.ld read before its wait (recorded by [`check_ld_regs`]): reported
/// now, at the wait or the thread's exit, unless a hand-off with the load unwaited came first.
pub fn ld_used_before_wait(m: &mut Machine, t: u32) -> Result<(), SimError> {
    let Some((name, line)) = m.threads[t as usize].rules.ld_used.take() else {
        return Ok(());
    };
    let (cta, warp) = (m.threads[t as usize].cta, m.threads[t as usize].warp);
    Err(m.rule_at(
        line,
        cta,
        warp,
        "wait-ld-before-use",
        format!("register {name}, a destination of a tcgen05.ld, is read before tcgen05.wait::ld: tcgen05.ld is asynchronous, its registers hold the accumulator only after the wait (PTX ISA \"tcgen05.wait\")"),
    ))
}

pub fn on_wait_ld(_m: &mut Machine, _lanes: &[u32]) {}

/// Thread `t` arrived on barrier (cta, off) in `phase`: the accumulator columns its warp read
/// are handed over there.
pub fn on_arrive(m: &mut Machine, t: u32, cta: u32, off: u32, phase: u64) {
    let (c, w) = (m.threads[t as usize].cta, m.threads[t as usize].warp);
    for r in m.rg.readers.iter_mut() {
        if r.cta == c && r.warp == w && r.handed.is_none() {
            r.handed = Some((cta, off, phase));
        }
    }
}

pub fn tma_store_issue(
    m: &mut Machine,
    t: u32,
    cta: u32,
    off: u32,
    bytes: u32,
    id: u32,
) -> Result<(), SimError> {
    for g in grans(off, off + bytes) {
        let gr = m.ctas[cta as usize].rules.gran[g];
        if gr.gen_seq != 0 && m.threads[gr.gen_writer as usize].rules.proxy_fence_seq < gr.gen_seq {
            return Err(m.rule(
                t,
                "proxy-fence-before-store",
                format!("a TMA store (cp.async.bulk.tensor shared::cta -> global) reads shared-memory offset {:#x}, but the thread that wrote it (warp {}, lane {}) executed no fence.proxy.async.shared::cta after the write: the ordinary (generic-proxy) writes of the staging tile are not ordered before the TMA engine's (async-proxy) reads, which may see stale data (PTX ISA \"Proxies\"); write the tile, then fence.proxy.async.shared::cta, then __syncwarp, then the store", g as u32 * G, m.threads[gr.gen_writer as usize].warp, m.threads[gr.gen_writer as usize].lane),
            ));
        }
    }
    while m.rg.store_covered.len() <= id as usize {
        m.rg.store_covered.push(false);
        m.rg.store_cta.push((0, 0, (0, 0)));
    }
    let line = m.line_of(t);
    m.rg.store_cta[id as usize] = (cta, m.threads[t as usize].warp, line);
    for g in grans(off, off + bytes) {
        m.ctas[cta as usize].rules.gran[g].store = id + 1;
    }
    Ok(())
}

/// `t` finished a `cp.async.bulk.wait_group[.read]`: the stores of the groups it popped are
/// covered.
pub fn on_bulk_wait(m: &mut Machine, popped: &[Vec<u32>]) {
    for g in popped {
        for &id in g {
            if let Some(c) = m.rg.store_covered.get_mut(id as usize) {
                *c = true;
            }
        }
    }
}

fn uncovered_store(m: &Machine, cta: u32) -> Option<(u32, u32, (u32, u32))> {
    m.rg.store_cta
        .iter()
        .enumerate()
        .find(|(i, s)| {
            s.0 == cta && !m.rg.store_covered[*i] && m.rg.store_cta.len() > *i && s.2 .0 != 0
        })
        .map(|(_, s)| *s)
}

fn pending_peer_commit(m: &Machine, cta: u32) -> Option<u32> {
    for &q in &m.tc_active {
        if m.threads[q as usize].cta == cta {
            continue;
        }
        for j in &m.tcq[q as usize] {
            if let TcJob::Commit { targets, .. } = j {
                if let Some(&(_, off)) = targets.iter().find(|(c, _)| *c == cta) {
                    return Some(off);
                }
            }
        }
    }
    None
}

pub fn on_dealloc(m: &mut Machine, t: u32) -> Result<(), SimError> {
    let cta = m.threads[t as usize].cta;
    if let Some((_, warp, line)) = uncovered_store(m, cta) {
        return Err(m.rule(
            t,
            "wait-read-before-exit",
            format!("tcgen05.dealloc (the CTA is about to exit) while a TMA store of warp {warp} (PTX line {}) is not covered by cp.async.bulk.wait_group.read: the CTA's shared memory may be reused while the store still reads it; end the epilogue with cp.async.bulk.wait_group.read 0 (wb::tma_store_wait_read<0>)", line.0),
        ));
    }
    // Commits from other CTAs that arrived here must have been seen by a thread of this CTA.
    let mut unseen = None;
    for (&off, b) in &m.ctas[cta as usize].mbars {
        if let Some(p) = b.remote_commit {
            let seen = m
                .threads
                .iter()
                .enumerate()
                .any(|(i, th)| th.cta == cta && observed(m, i as u32, (cta, off)) > p);
            if !seen {
                unseen = Some((off, p));
            }
        }
    }
    if let Some((off, p)) = unseen {
        let bar = crate::deadlock::barrier_words(m, cta, off);
        return Err(m.rule(
            t,
            "wait-for-peer-commits",
            format!("tcgen05.dealloc (the CTA is about to exit) while a tcgen05.commit from another CTA arrived on {bar} in phase {p}, and no thread of this CTA waited for that phase: an arrival that lands after the CTA exited writes into shared memory that is no longer its own; the producer must wait for the last load_empty phases (a producer tail, CUTLASS's load_tail)"),
        ));
    }
    if let Some(off) = pending_peer_commit(m, cta) {
        let bar = crate::deadlock::barrier_words(m, cta, off);
        return Err(m.rule(
            t,
            "wait-for-peer-commits",
            format!("tcgen05.dealloc (the CTA is about to exit) while a tcgen05.commit from another CTA has still to arrive on {bar}: an arrival that lands after the CTA exited writes into shared memory that is no longer its own; the producer must wait for the last load_empty phases (a producer tail, CUTLASS's load_tail)"),
        ));
    }
    Ok(())
}

pub fn on_exit(m: &mut Machine, t: u32) -> Result<(), SimError> {
    ld_used_before_wait(m, t)
}

pub fn on_cta_exit(m: &mut Machine, cta: u32) -> Result<(), SimError> {
    let leaked = m.ctas[cta as usize].tmem.leaked();
    if !leaked.is_empty() {
        return Err(SimError::Fault {
            cta: m.cta_linear(cta),
            warp: 0,
            lane: 0,
            ptx_line: 0,
            source_line: 0,
            detail: format!("the CTA exited with tensor memory still allocated (columns {leaked:?}): every tcgen05.alloc needs its tcgen05.dealloc before exit"),
        });
    }
    if let Some((_, warp, line)) = uncovered_store(m, cta) {
        return Err(m.rule_at(line, cta, warp, "wait-read-before-exit", "the CTA exited while its TMA store is not covered by cp.async.bulk.wait_group.read: the CTA's shared memory may be reused while the store still reads it; end the epilogue with cp.async.bulk.wait_group.read 0".to_string()));
    }
    if let Some(off) = pending_peer_commit(m, cta) {
        let bar = crate::deadlock::barrier_words(m, cta, off);
        return Err(m.rule_at((0, 0), cta, 0, "wait-for-peer-commits", format!("the CTA exited while a tcgen05.commit from another CTA has still to arrive on its barrier {bar}: the producer must wait for the last load_empty phases (a producer tail)")));
    }
    Ok(())
}

/// A barrier of CTA `cta` is used (arrive, complete_tx, commit) from another CTA (`who`: its
/// cta, warp, PTX line, source line): its initialisation must have been made visible to the
/// cluster with `fence.mbarrier_init.release.cluster` by the initialising thread (then a
/// cluster barrier), or the remote operation may see an uninitialised barrier.
pub fn remote_barrier_use(
    m: &mut Machine,
    cta: u32,
    off: u32,
    what: &str,
    who: (u32, u32, u32, u32),
) -> Result<(), SimError> {
    let Some(b) = m.ctas[cta as usize].mbars.get(&off) else {
        return Ok(());
    };
    let (by, at) = (b.init_by, b.init_seq);
    if m.threads[by as usize].rules.mbar_init_fence_seq < at {
        let bar = crate::deadlock::barrier_words(m, cta, off);
        return Err(m.rule_at(
            (who.2, who.3),
            who.0,
            who.1,
            "fence-mbarrier-init",
            format!("{what} from another CTA reaches {bar}, whose initialising thread (warp {}) executed no fence.mbarrier_init.release.cluster after mbarrier.init: the initialisation is not ordered before operations from other CTAs of the cluster (PTX ISA \"membar/fence\": fence.mbarrier_init); initialise, fence.mbarrier_init, then a cluster barrier", m.threads[by as usize].warp),
        ));
    }
    Ok(())
}
