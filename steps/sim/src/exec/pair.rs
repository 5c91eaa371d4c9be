//! The CTA pair's collective allocation instructions: `tcgen05.alloc`, `tcgen05.dealloc` and
//! `tcgen05.relinquish_alloc_permit` with `.cta_group::2`.
//!
//! PTX ISA 9.0, "Tensor Memory Allocation and Management Instructions" (`tcgen05.alloc`,
//! `tcgen05.dealloc`, `tcgen05.relinquish_alloc_permit`): "When .cta_group::2 is specified, one
//! warp from each of the peer CTAs must collectively perform the allocation and
//! de-allocation", and its second example runs alloc, dealloc and relinquish_alloc_permit
//! `.cta_group::2` "by current warp and the warp in the peer-CTA". The CTA pair is the two
//! CTAs whose `%cluster_ctarank` differ in the last bit only ("Issue Granularity", "CTA Pair").
//!
//! So the instruction is one operation of two warps: a warp that issued it waits (as at any
//! `.sync` collective) until the peer CTA's warp issued the same instruction, and then both
//! complete at once. The allocation is then in both CTAs' tensor memory before either warp
//! goes on: the leader's `tcgen05.mma.cta_group::2`, which writes the peer's columns too, is
//! ordered after the peer's half of the allocation through the leader's own program order
//! (alloc is a synchronous tcgen05 instruction, ordered with the thread's later tcgen05
//! operations: "Memory Consistency Model for 5th generation of TensorCore operations",
//! "Asynchronous Operations"). If only one CTA of the pair issues it, it never completes: the
//! run ends in a deadlock that names the missing peer.

use crate::decode::{Instr, Op};
use crate::error::SimError;
use crate::machine::{Machine, St, Why};
use crate::observe::Event;

/// A warp of this CTA that issued a `.cta_group::2` allocation instruction and waits for the
/// peer CTA's warp: the instruction's index and the warp's lanes.
#[derive(Debug, Clone)]
pub(crate) struct PairWait {
    pub pc: u32,
    pub lanes: Vec<u32>,
}

/// `tcgen05.alloc/dealloc/relinquish_alloc_permit.cta_group::2`.
pub(crate) fn is_pair_op(op: &Op) -> bool {
    matches!(
        op,
        Op::TcAlloc { cg2: true } | Op::TcDealloc { cg2: true } | Op::TcRelinquish { cg2: true }
    )
}

fn same_kind(a: &Op, b: &Op) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn name(op: &Op) -> &'static str {
    match op {
        Op::TcAlloc { .. } => "tcgen05.alloc.cta_group::2",
        Op::TcDealloc { .. } => "tcgen05.dealloc.cta_group::2",
        _ => "tcgen05.relinquish_alloc_permit.cta_group::2",
    }
}

impl Machine<'_> {
    /// Every lane of a warp reached a `.cta_group::2` allocation instruction: wait for the
    /// peer CTA's warp, or complete both halves if it is already waiting.
    pub(super) fn pair_collective(&mut self, lanes: Vec<u32>, ins: &Instr) -> Result<(), SimError> {
        let t0 = lanes[0];
        let cta = self.threads[t0 as usize].cta;
        let peer = cta ^ 1;
        if peer >= self.cl_size {
            return Err(self.fault(
                t0,
                format!(
                    "{} in a CTA with no peer CTA in its cluster: the instruction is performed by one warp of each CTA of the pair (cluster ranks differing in the last bit), so the cluster needs an even size (PTX ISA \"tcgen05.alloc\", \"CTA Pair\")",
                    name(&ins.op)
                ),
            ));
        }
        let k = self.k;
        let found = self.ctas[peer as usize]
            .rules
            .pair
            .iter()
            .position(|w| same_kind(&k.code[w.pc as usize].op, &ins.op));
        let Some(i) = found else {
            let pc = self.threads[t0 as usize].pc;
            self.ctas[cta as usize]
                .rules
                .pair
                .push(PairWait { pc, lanes });
            return Ok(());
        };
        let w = self.ctas[peer as usize].rules.pair.remove(i);
        let pins = &k.code[w.pc as usize];
        // The peer's half first (it was issued first), then this warp's; each takes effect
        // once both warps issued it.
        let tmem = !matches!(ins.op, Op::TcRelinquish { .. });
        self.emit(Event::TcPair {
            a: &w.lanes,
            b: &lanes,
            tmem,
            done: false,
        })?;
        self.exec_collective(&w.lanes, pins)?;
        self.exec_collective(&lanes, ins)?;
        self.emit(Event::TcPair {
            a: &w.lanes,
            b: &lanes,
            tmem,
            done: true,
        })?;
        for &x in &w.lanes {
            self.threads[x as usize].pc += 1;
            self.count(x, pins);
            self.make_runnable(x);
        }
        for &x in &lanes {
            self.threads[x as usize].pc += 1;
            self.count(x, ins);
            self.make_runnable(x);
        }
        Ok(())
    }
}

/// For the deadlock report: thread `t` waits at a `.cta_group::2` allocation instruction that
/// its whole warp issued, for the peer CTA's warp.
pub(crate) fn waiting_words(m: &Machine, t: u32) -> Option<String> {
    let th = &m.threads[t as usize];
    if th.st != St::Block(Why::Collective) {
        return None;
    }
    let op = &m.k.code.get(th.pc as usize)?.op;
    if !is_pair_op(op) {
        return None;
    }
    let cta = &m.ctas[th.cta as usize];
    if !cta.rules.pair.iter().any(|w| w.lanes.contains(&t)) {
        return None;
    }
    Some(format!(
        "waits at {} for a warp of the peer CTA (cluster rank {}) to issue it too: one warp of each CTA of the pair performs it together (PTX ISA \"tcgen05.alloc\": .cta_group::2), and the peer's never came",
        name(op),
        cta.rank ^ 1
    ))
}
