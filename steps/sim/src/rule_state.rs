//! The ordering rules' bookkeeping, kept in the machine's state (`machine.rs`) and read and
//! written by the rules (`rules.rs`): which TMA load last wrote each granule of shared memory,
//! which MMA reads or writes what until ordered, which TMA store reads it, and what each thread
//! has seen complete.

/// Shared-memory bookkeeping granule: 16 bytes (the smallest TMA/vector access the kernels make).
pub(crate) const G: u32 = 16;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gran {
    /// TMA load record (index + 1) that last wrote these bytes; 0: none.
    pub tma: u32,
    /// Sequence number of the last generic-proxy write and the thread that made it.
    pub gen_seq: u64,
    pub gen_writer: u32,
    /// TMA store (id + 1) reading these bytes, until a wait_group.read covers it.
    pub store: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct TmaRec {
    pub landed: bool,
    pub mbar: (u32, u32),
    pub phase: u64,
    pub off: u32,
}

/// An MMA's read of shared memory (one granule) or write of tensor memory (one column), until
/// ordered: the latest such MMA of each issuing thread. A later MMA of the same thread dominates
/// an earlier one on the same granule or column: every commit that covers the later one covers
/// the earlier one too (a commit tracks all the thread's earlier asynchronous tcgen05
/// operations, PTX ISA "tcgen05.commit"), so the earlier is ordered whenever the later is, and
/// keeping only the latest keeps the bookkeeping linear in the work.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Use {
    pub issuer: u32,
    pub warp: u32,
    /// Commits the issuer had issued before this MMA: commit number `after` and every later one
    /// cover it ([`CommitLog`]).
    pub after: u64,
    /// Start of the MMA's operand range or column range (for the messages).
    pub lo: u32,
}

/// One thread's `tcgen05.commit`s, in issue order (a thread's tcgen05 queue retires in order).
#[derive(Debug, Clone, Default)]
pub(crate) struct CommitLog {
    pub issued: u64,
    /// Where each commit that arrived arrived: (cta, barrier offset, phase), by commit number.
    pub arrived: Vec<Vec<(u32, u32, u64)>>,
    /// Per barrier, (commit number, phase) of each arrival on it, in order.
    pub by_barrier: std::collections::HashMap<(u32, u32), Vec<(u64, u64)>>,
}

impl CommitLog {
    /// Whether a commit numbered `after` or later has arrived.
    pub fn released(&self, after: u64) -> bool {
        (self.arrived.len() as u64) > after
    }
    /// The first arrival of commit `after` or later on barrier `key`: its phase. Phases grow with
    /// time on one barrier, so this is the easiest of those arrivals to have seen.
    pub fn first_on(&self, key: (u32, u32), after: u64) -> Option<u64> {
        let v = self.by_barrier.get(&key)?;
        let i = v.partition_point(|&(n, _)| n < after);
        v.get(i).map(|&(_, p)| p)
    }
}

pub(crate) struct CtaRules {
    pub gran: Vec<Gran>,
    /// Per granule of shared memory: the MMAs that read it, until ordered ([`Use`]).
    pub operands: Vec<Vec<Use>>,
    /// Per tensor-memory column: the MMAs that write it, until ordered.
    pub accum: Vec<Vec<Use>>,
    pub tma: Vec<TmaRec>,
    pub cta_group: Option<(bool, &'static str)>,
    /// Warps of this CTA waiting at a `.cta_group::2` allocation instruction for the peer
    /// CTA's warp (`exec/pair.rs`).
    pub pair: Vec<crate::exec::pair::PairWait>,
}

impl CtaRules {
    pub fn new(smem_bytes: u32) -> CtaRules {
        CtaRules {
            gran: vec![Gran::default(); smem_bytes.div_ceil(G) as usize],
            operands: vec![Vec::new(); smem_bytes.div_ceil(G) as usize],
            accum: vec![Vec::new(); TMEM_COLUMNS],
            tma: Vec::new(),
            cta_group: None,
            pair: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadRules {
    /// A tcgen05.ld not yet followed by tcgen05.wait::ld; its destination registers.
    pub ld_pending: bool,
    pub ld_regs: Vec<u32>,
    pub ld_unwaited: bool,
    pub ld_unfenced: bool,
    /// The first read of a pending tcgen05.ld's register (its name and (PTX, source) line): the
    /// rule `wait-ld-before-use` is reported at the wait that comes after it (or at exit), so
    /// that a hand-off with the load still unwaited is named first, as the GPU emulation names it.
    pub ld_used: Option<(String, (u32, u32))>,
    /// The last thread synchronisation not yet followed by tcgen05.fence::after_thread_sync.
    pub synced: Option<&'static str>,
    pub proxy_fence_seq: u64,
    pub mbar_init_fence_seq: u64,
    /// Per barrier (cta, offset): how many of its phases this thread has seen complete.
    pub observed: Vec<((u32, u32), u64)>,
}

/// A warp's `tcgen05.ld` of accumulator columns, until the MMA warp may overwrite them.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    pub cta: u32,
    pub warp: u32,
    pub lo: u32,
    pub hi: u32,
    /// The arrive that handed the columns back: (cta, barrier offset, phase).
    pub handed: Option<(u32, u32, u64)>,
    /// The (PTX, source) line of a read made before any MMA had written these columns: the
    /// reader did not wait for the accumulator.
    pub early: Option<(u32, u32)>,
}

/// Tensor-memory columns of one CTA (PTX ISA "Tensor Memory": 512 columns of 128 lanes).
pub(crate) const TMEM_COLUMNS: usize = 512;

/// Machine-wide rule state (commits, readers, store coverage).
#[derive(Default)]
pub(crate) struct Global {
    /// Each issuing thread's commits.
    pub commits: std::collections::HashMap<u32, CommitLog>,
    pub readers: Vec<Reader>,
    pub store_covered: Vec<bool>,
    pub store_cta: Vec<(u32, u32, (u32, u32))>,
}
