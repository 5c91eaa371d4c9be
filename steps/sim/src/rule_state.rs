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

/// An MMA's read of shared memory or write of tensor memory, until ordered.
#[derive(Debug, Clone)]
pub(crate) struct Use {
    pub cta: u32,
    pub lo: u32,
    pub hi: u32,
    pub issuer: u32,
    pub warp: u32,
    pub seq: u64,
    pub done: bool,
    /// Where the commits covering it arrived (every commit of the issuing thread covers all
    /// its earlier MMAs): (cta, barrier offset, phase). None: no commit has arrived yet.
    pub release: Option<Vec<(u32, u32, u64)>>,
}

pub(crate) struct CtaRules {
    pub gran: Vec<Gran>,
    pub tma: Vec<TmaRec>,
    pub cta_group: Option<(bool, &'static str)>,
}

impl CtaRules {
    pub fn new(smem_bytes: u32) -> CtaRules {
        CtaRules {
            gran: vec![Gran::default(); smem_bytes.div_ceil(G) as usize],
            tma: Vec::new(),
            cta_group: None,
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

/// Machine-wide rule state (MMA operand and accumulator uses, store coverage).
#[derive(Default)]
pub(crate) struct Global {
    pub operands: Vec<Use>,
    pub accum: Vec<Use>,
    pub readers: Vec<Reader>,
    pub store_covered: Vec<bool>,
    pub store_cta: Vec<(u32, u32, (u32, u32))>,
}
