//! Attribution of the technique instructions a launch executed (`tcgen05.mma`,
//! `tcgen05.commit`) to the unit of work they did: the cluster that issued them, the CTA rank,
//! the TMA loads that wrote an MMA's operands (their tensor and coordinates: the grader turns
//! these into a tile and a k-block with its own tile facts), and for a commit its CTA mask, the
//! MMAs it covers, where it arrived and whether that arrival was used.
//!
//! Why from these facts: a count of executed opcodes says nothing about *what* an instruction
//! did. A multicast commit that arrives on a barrier no one waits for, or names one CTA, or is
//! issued by one cluster for the others, is executed and does none of the technique's work. What
//! the grader may trust is what the simulator saw happen:
//!
//! - an MMA's unit is the data it multiplied: the TMA load that last wrote the first bytes of
//!   its A operand and of its B operand (`rules::tma_load_issue` records which load wrote each
//!   16-byte granule). An MMA whose operand no TMA load wrote is attributed to no unit;
//! - a commit covers the MMAs its thread issued since its previous commit (PTX ISA
//!   "tcgen05.commit": it tracks the completion of all prior asynchronous tcgen05 operations of
//!   the executing thread; the earlier ones are covered by the earlier commit already);
//! - a commit's arrival is *used* when a thread of the CTA it arrived in observed that barrier
//!   phase complete (a wait that saw it, `rules::observe`) and that thread refills shared memory
//!   with TMA loads or reads the accumulator (`tcgen05.ld`) in the launch: the producer or the
//!   epilogue. An arrival on a barrier no such thread waits on signals nothing.

use crate::machine::Machine;
use std::collections::HashMap;

/// Where the bytes an MMA read came from: the TMA load that wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmaOrigin {
    /// The global address of the tensor the load read (the tensor map's base).
    pub tensor: u64,
    /// The load's box coordinates, dimension 0 (innermost) first.
    pub coords: Vec<i32>,
}

/// One executed `tcgen05.mma`.
#[derive(Debug, Clone)]
pub struct MmaRecord {
    /// The opcode as the PTX writes it.
    pub op: String,
    /// Cluster rank of the issuing CTA.
    pub rank: u32,
    pub a: Option<TmaOrigin>,
    pub b: Option<TmaOrigin>,
}

/// One executed `tcgen05.commit`.
#[derive(Debug, Clone)]
pub struct CommitRecord {
    pub op: String,
    pub rank: u32,
    /// The `.multicast::cluster` CTA mask (None: not multicast).
    pub mask: Option<u16>,
    /// Indices (in the cluster's `mmas`) of the MMAs it covers.
    pub covers: Vec<u32>,
    /// Where it arrived: (CTA rank, barrier offset, phase); empty until it did.
    pub arrivals: Vec<(u32, u32, u64)>,
    /// Whether it arrived at all (a commit still in flight at the end never did).
    pub arrived: bool,
    /// Whether every arrival was used: observed complete by a thread of that CTA that refills
    /// with TMA or reads the accumulator.
    pub used: bool,
}

/// What one cluster's technique instructions did.
#[derive(Debug, Clone, Default)]
pub struct ClusterAttribution {
    pub cluster: [u32; 3],
    pub mmas: Vec<MmaRecord>,
    pub commits: Vec<CommitRecord>,
}

/// The bookkeeping while a cluster runs.
#[derive(Default)]
pub(crate) struct State {
    pub cur: ClusterAttribution,
    /// (CTA, TMA record) -> where the load read.
    origins: HashMap<(u32, u32), TmaOrigin>,
    /// Per thread: MMAs issued since its last commit.
    uncommitted: HashMap<u32, Vec<u32>>,
    /// Per thread: its commits not yet arrived, in issue order.
    in_flight: HashMap<u32, std::collections::VecDeque<u32>>,
}

/// A TMA load (record `rec` of CTA `cta`) read `coords` of the tensor at `tensor`.
pub(crate) fn tma_load(m: &mut Machine, cta: u32, rec: u32, tensor: u64, coords: &[i32]) {
    m.attrib.origins.insert(
        (cta, rec),
        TmaOrigin {
            tensor,
            coords: coords.to_vec(),
        },
    );
}

fn origin_at(m: &Machine, cta: u32, off: u32) -> Option<TmaOrigin> {
    let g = (off / crate::rule_state::G) as usize;
    let gr = m.ctas.get(cta as usize)?.rules.gran.get(g)?;
    if gr.tma == 0 {
        return None;
    }
    m.attrib.origins.get(&(cta, gr.tma - 1)).cloned()
}

/// `t` of CTA `cta` issued the MMA `ins` with shared-memory descriptors `a` and `b`.
pub(crate) fn mma(m: &mut Machine, t: u32, cta: u32, key: u32, a: u64, b: u64) {
    let sa = crate::units::descriptors::decode_smem_desc(a).start_address;
    let sb = crate::units::descriptors::decode_smem_desc(b).start_address;
    // A in tensor memory (`units::mma_ts`) has no TMA origin.
    let a_smem = crate::units::mma_ts::tmem_a(a).is_none();
    let rec = MmaRecord {
        op: m.k.opcodes[key as usize].clone(),
        rank: m.ctas[cta as usize].rank,
        a: if a_smem { origin_at(m, cta, sa) } else { None },
        b: origin_at(m, cta, sb),
    };
    let i = m.attrib.cur.mmas.len() as u32;
    m.attrib.cur.mmas.push(rec);
    m.attrib.uncommitted.entry(t).or_default().push(i);
}

/// `t` of CTA `cta` issued a commit (`mask`: its multicast mask).
pub(crate) fn commit(m: &mut Machine, t: u32, cta: u32, key: u32, mask: Option<u16>) {
    let covers = m.attrib.uncommitted.remove(&t).unwrap_or_default();
    let rec = CommitRecord {
        op: m.k.opcodes[key as usize].clone(),
        rank: m.ctas[cta as usize].rank,
        mask,
        covers,
        arrivals: Vec::new(),
        arrived: false,
        used: false,
    };
    let i = m.attrib.cur.commits.len() as u32;
    m.attrib.cur.commits.push(rec);
    m.attrib.in_flight.entry(t).or_default().push_back(i);
}

/// `t`'s oldest commit in flight arrived at `arrived` (CTA index, offset, phase).
pub(crate) fn commit_arrived(m: &mut Machine, t: u32, arrived: &[(u32, u32, u64)]) {
    let Some(i) = m.attrib.in_flight.get_mut(&t).and_then(|q| q.pop_front()) else {
        return;
    };
    let ranks: Vec<(u32, u32, u64)> = arrived
        .iter()
        .map(|&(c, o, p)| (m.ctas[c as usize].rank, o, p))
        .collect();
    let r = &mut m.attrib.cur.commits[i as usize];
    r.arrivals = ranks;
    r.arrived = true;
}

/// The cluster finished: decide which arrivals were used, and hand the record to the report.
pub(crate) fn cluster_done(m: &mut Machine) {
    let k = m.k;
    // Opcode keys of a refill (a TMA load into shared memory) and of an accumulator read.
    let user_keys: Vec<usize> = k
        .opcodes
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            (o.starts_with("cp.async.bulk.tensor") && o.contains(".shared::cluster.global"))
                || o.starts_with("tcgen05.ld")
        })
        .map(|(i, _)| i)
        .collect();
    // Per (CTA index, barrier offset): the most phases a producer or epilogue thread saw.
    let mut seen: HashMap<(u32, u32), u64> = HashMap::new();
    for th in &m.threads {
        if !user_keys.iter().any(|&i| th.executed[i] > 0) {
            continue;
        }
        for &((c, off), n) in &th.rules.observed {
            if c != th.cta {
                continue;
            }
            let e = seen.entry((c, off)).or_default();
            *e = (*e).max(n);
        }
    }
    let rank_to_cta: HashMap<u32, u32> = m
        .ctas
        .iter()
        .enumerate()
        .map(|(i, c)| (c.rank, i as u32))
        .collect();
    let mut cur = std::mem::take(&mut m.attrib.cur);
    for c in &mut cur.commits {
        c.used = c.arrived
            && !c.arrivals.is_empty()
            && c.arrivals.iter().all(|&(rank, off, ph)| {
                rank_to_cta
                    .get(&rank)
                    .and_then(|cta| seen.get(&(*cta, off)))
                    .is_some_and(|&n| n > ph)
            });
    }
    cur.cluster = m.cluster_id;
    m.report.attribution.push(cur);
    m.attrib = State::default();
}
