//! Decoding parsed statements into instructions the interpreter runs: every operand resolved to
//! a register index, an immediate, a special register or a state-space address once per module;
//! every opcode and modifier set checked against what the simulator models, so an instruction it
//! does not model is an error at decode time, never a silent skip.

use crate::error::SimError;
use crate::parse::{self, Function, Item, Module, Stmt};
use std::collections::HashMap;

#[path = "decode_forms.rs"]
mod forms;
pub use forms::FormOp;
#[path = "decode_clc.rs"]
mod clc;
pub use clc::ClcOp;

/// A PTX fundamental type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    B8,
    B16,
    B32,
    B64,
    B128,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    F32,
    F64,
    Pred,
}

impl Ty {
    pub fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "b128" => Ty::B128,
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "f16" => Ty::F16,
            "f16x2" => Ty::F16x2,
            "bf16" => Ty::Bf16,
            "bf16x2" => Ty::Bf16x2,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }
    pub fn bytes(self) -> u32 {
        match self {
            Ty::B8 | Ty::U8 | Ty::S8 | Ty::Pred => 1,
            Ty::B16 | Ty::U16 | Ty::S16 | Ty::F16 | Ty::Bf16 => 2,
            Ty::B32 | Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16x2 | Ty::Bf16x2 => 4,
            Ty::B64 | Ty::U64 | Ty::S64 | Ty::F64 => 8,
            Ty::B128 => 16,
        }
    }
    pub fn bits(self) -> u32 {
        self.bytes() * 8
    }
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    pub fn float(self) -> bool {
        matches!(self, Ty::F16 | Ty::Bf16 | Ty::F32 | Ty::F64)
    }
}

/// A special register (PTX ISA "Special Registers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sreg {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    ClusterId(u8),
    NclusterId(u8),
    ClusterCtaid(u8),
    ClusterNctaid(u8),
    ClusterCtarank,
    ClusterNctarank,
    IsExplicitCluster,
    LaneId,
    WarpId,
    NwarpId,
    SmId,
    NsmId,
    GridId,
    DynamicSmemSize,
    TotalSmemSize,
    Clock,
    Clock64,
    GlobalTimer,
    LanemaskEq,
    LanemaskLt,
    LanemaskLe,
    LanemaskGt,
    LanemaskGe,
}

fn parse_sreg(s: &str) -> Option<Sreg> {
    let (name, dim) = match s.rsplit_once('.') {
        Some((n, d @ ("x" | "y" | "z"))) => (n, Some(d.as_bytes()[0] - b'x')),
        _ => (s, None),
    };
    Some(match (name, dim) {
        ("%tid", Some(d)) => Sreg::Tid(d),
        ("%ntid", Some(d)) => Sreg::Ntid(d),
        ("%ctaid", Some(d)) => Sreg::Ctaid(d),
        ("%nctaid", Some(d)) => Sreg::Nctaid(d),
        ("%clusterid", Some(d)) => Sreg::ClusterId(d),
        ("%nclusterid", Some(d)) => Sreg::NclusterId(d),
        ("%cluster_ctaid", Some(d)) => Sreg::ClusterCtaid(d),
        ("%cluster_nctaid", Some(d)) => Sreg::ClusterNctaid(d),
        ("%cluster_ctarank", None) => Sreg::ClusterCtarank,
        ("%cluster_nctarank", None) => Sreg::ClusterNctarank,
        ("%is_explicit_cluster", None) => Sreg::IsExplicitCluster,
        ("%laneid", None) => Sreg::LaneId,
        ("%warpid", None) => Sreg::WarpId,
        ("%nwarpid", None) => Sreg::NwarpId,
        ("%smid", None) => Sreg::SmId,
        ("%nsmid", None) => Sreg::NsmId,
        ("%gridid", None) => Sreg::GridId,
        ("%dynamic_smem_size", None) => Sreg::DynamicSmemSize,
        ("%total_smem_size", None) => Sreg::TotalSmemSize,
        ("%clock", None) => Sreg::Clock,
        ("%clock64", None) => Sreg::Clock64,
        ("%globaltimer", None) => Sreg::GlobalTimer,
        ("%lanemask_eq", None) => Sreg::LanemaskEq,
        ("%lanemask_lt", None) => Sreg::LanemaskLt,
        ("%lanemask_le", None) => Sreg::LanemaskLe,
        ("%lanemask_gt", None) => Sreg::LanemaskGt,
        ("%lanemask_ge", None) => Sreg::LanemaskGe,
        _ => return None,
    })
}

/// The address of a variable in its state space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sym {
    /// Byte offset in the kernel's parameter buffer.
    Param(u32),
    /// Offset of a module `.shared` variable in the static shared-memory layout; the dynamic
    /// (extern) array is `SharedDynamic`.
    Shared(u32),
    SharedDynamic,
    /// Offset in the thread's local frame.
    Local(u32),
    /// Index into [`Program::globals`].
    Global(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    None,
    Reg(u32),
    Sym(Sym),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Opd {
    Reg(u32),
    Imm(u64),
    Sreg(Sreg),
    /// `[base + off]`
    Addr(Base, i64),
    /// `{a, b, ...}`
    Vec(Vec<Opd>),
    /// A branch target: the instruction index.
    Label(u32),
    /// `_`
    Sink,
    /// `!%p` as an operand.
    NotReg(u32),
    /// A variable's address as a value (`mov.u64 %rd1, smem_raw`).
    Sym(Sym),
    /// `[tmap, {c0, c1}]` of `cp.async.bulk.tensor`: the map's address and the coordinates.
    Tensor(Box<Opd>, Vec<Opd>),
    /// `a|b`: the two destinations of `setp` / `elect.sync`.
    Pair(Box<Opd>, Box<Opd>),
}

/// State spaces of `ld`/`st`/`cvta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    Generic,
    Global,
    Shared,
    SharedCluster,
    Local,
    Param,
    Const,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bin {
    Add,
    Sub,
    MulLo,
    MulHi,
    MulWide,
    Mul, // float
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Un {
    Neg,
    Not,
    Abs,
    Popc,
    Clz,
    Brev,
    Cnot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Lo,
    Ls,
    Hi,
    Hs,
    // Unordered float comparisons
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

/// Rounding of `cvt` (and float arithmetic, where given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rnd {
    None,
    Rn,
    Rz,
    Rm,
    Rp,
    Rni,
    Rzi,
    Rmi,
    Rpi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// `fence.proxy.async[.shared::cta]` (and `.global`, `.shared::cluster`).
    ProxyAsync,
    /// `fence.mbarrier_init.release.cluster`
    MbarrierInit,
    /// `fence.acq_rel.*`, `fence.sc.*`, `membar.*`
    Memory,
    /// `fence.proxy.tensormap...` and other proxy fences the rules do not use.
    OtherProxy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MbarOp {
    Init,
    /// `arrive` (count 1, or the optional count operand); `expect_tx` adds its bytes first.
    Arrive {
        expect_tx: bool,
        remote: bool,
    },
    ArriveDrop,
    ExpectTx,
    CompleteTx,
    TryWait,
    TestWait,
    /// `.parity` variants of try_wait / test_wait.
    TryWaitParity,
    TestWaitParity,
    Inval,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    All,
    Any,
    Uni,
    Ballot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shfl {
    Up,
    Down,
    Bfly,
    Idx,
}

/// Decoded opcodes. Types and modifiers the interpreter needs are fields.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Cluster launch control and its `.b128` response register (`decode_clc.rs`).
    Clc(ClcOp),
    Mov(Ty),
    Ld {
        space: Space,
        ty: Ty,
        vec: u8,
    },
    St {
        space: Space,
        ty: Ty,
        vec: u8,
    },
    Cvta {
        to: bool,
        space: Space,
        ty: Ty,
    },
    Bin(Bin, Ty),
    Mad {
        wide: bool,
        hi: bool,
        ty: Ty,
    },
    Fma(Ty),
    Un(Un, Ty),
    Setp {
        cmp: Cmp,
        ty: Ty,
        bop: Option<BoolOp>,
    },
    Selp(Ty),
    Cvt {
        dst: Ty,
        src: Ty,
        rnd: Rnd,
        sat: bool,
    },
    Bfe(Ty),
    Bfi(Ty),
    Prmt,
    /// `shf.{l,r}.{wrap,clamp}.b32`
    Shf {
        left: bool,
        clamp: bool,
    },
    Bra,
    Ret,
    Exit,
    Trap,
    /// `bar.sync` / `barrier.sync[.aligned]` / `bar.arrive` / `barrier.arrive`
    BarSync {
        arrive_only: bool,
    },
    BarWarpSync,
    ElectSync,
    ShflSync(Shfl),
    VoteSync(Vote),
    Activemask,
    Mbar(MbarOp, Space),
    Fence(Fence),
    /// `barrier.cluster.arrive` (`wait = false`) or `.wait`
    ClusterBarrier {
        wait: bool,
    },
    /// `mapa.shared::cluster.u32` (`generic = false`) or `mapa.u64`
    Mapa {
        generic: bool,
    },
    Nanosleep,
    PrefetchTensormap,
    /// `cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes[.multicast::cluster][.cta_group::2]`
    TmaLoad {
        dims: u8,
        multicast: bool,
        cta_group2: bool,
    },
    /// `cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group`
    TmaStore {
        dims: u8,
    },
    BulkCommit,
    BulkWait {
        read: bool,
    },
    TcAlloc {
        cg2: bool,
    },
    TcDealloc {
        cg2: bool,
    },
    TcRelinquish {
        cg2: bool,
    },
    TcMma {
        cg2: bool,
        /// `.kind::f16`, `::tf32`, `::f8f6f4` or `::i8` (`units/mma_kinds.rs`).
        kind: crate::units::mma_kinds::MmaKind,
    },
    TcCommit {
        cg2: bool,
        multicast: bool,
    },
    /// `tcgen05.ld.sync.aligned.32x32b.xN.b32`
    TcLd {
        n: u8,
    },
    /// `tcgen05.st.sync.aligned.32x32b.xN.b32`
    TcSt {
        n: u8,
    },
    /// `tcgen05.cp.cta_group::{1,2}.{shape}{.multicast} [taddr], s-desc`: asynchronous, in the
    /// issuing thread's tcgen05 queue like an MMA.
    TcCp {
        shape: crate::units::tmem_cp::CpShape,
        cg2: bool,
    },
    /// `tcgen05.shift.cta_group.down [taddr]`: asynchronous, ordered with the issuing
    /// thread's MMAs and tracked by its next commit.
    TcShift {
        cg2: bool,
    },
    TcWaitLd,
    TcWaitSt,
    TcFenceBefore,
    TcFenceAfter,
    /// `mma.sync`, `ldmatrix`, `stmatrix`, non-bulk `cp.async` (see `decode_forms.rs`).
    Form(FormOp),
    /// `atom.{sem}.{scope}.{space}.{op}.{ty}` / `red...` (add, min, max, and, or, xor, exch,
    /// cas, inc, dec), with its memory-ordering semantics and scope as written.
    Atom {
        red: bool,
        space: Space,
        op: AtomOp,
        ty: Ty,
        sem: MemSem,
        scope: MemScope,
        /// `.v2`/`.v4`/`.v8` (1: scalar); see `atom_vec.rs`.
        vec: u8,
    },
    /// Float arithmetic, `cvt`, `set`/`setp` on floats and the integer forms of
    /// [`crate::alu`] (its module comment lists them).
    Alu(crate::alu::Alu),
    /// `redux.sync`, `match.sync`: warp collectives of [`crate::alu`].
    WarpAlu(crate::alu::WarpAlu),
    /// `call[.uni] (rets), target, (args)`: `rets` and `args` are the caller's `.param`
    /// variables, as (offset in the caller's frame, bytes); see `calls.rs`.
    Call {
        target: CallTarget,
        rets: Vec<(u32, u32)>,
        args: Vec<(u32, u32)>,
    },
}

/// What a `call` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallTarget {
    /// A `.func` of the module: index into [`Kernel::funcs`].
    Func(u32),
    /// CUDA's `printf`, which NVVM lowers to `vprintf(format, args)`.
    Vprintf,
    /// CUDA's `assert` failing: `__assertfail(message, file, line, function, char_size)`.
    AssertFail,
}

/// The memory-ordering semantics of an atomic (PTX ISA "Memory Consistency Model"): `.relaxed`
/// when none is written (an `atom` without `.sem` is relaxed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemSem {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
}

/// The scope of an atomic: `.gpu` when none is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemScope {
    Cta,
    Cluster,
    Gpu,
    Sys,
}

/// The `.sem` and `.scope` qualifiers of a memory operation, `has` telling whether its opcode
/// carries a qualifier (PTX ISA "Memory Consistency Model", "atom", "ld", "st"): `.relaxed` when
/// no semantics is written, `default_scope` when no scope is (`.gpu` for `atom`/`red`).
pub(crate) fn sem_scope(has: &dyn Fn(&str) -> bool, default_scope: MemScope) -> (MemSem, MemScope) {
    let sem = if has("acq_rel") {
        MemSem::AcqRel
    } else if has("acquire") {
        MemSem::Acquire
    } else if has("release") {
        MemSem::Release
    } else {
        MemSem::Relaxed
    };
    let scope = if has("cta") {
        MemScope::Cta
    } else if has("cluster") {
        MemScope::Cluster
    } else if has("sys") {
        MemScope::Sys
    } else if has("gpu") {
        MemScope::Gpu
    } else {
        default_scope
    };
    (sem, scope)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exch,
    Cas,
    Inc,
    Dec,
}

/// One decoded instruction.
#[derive(Debug, Clone)]
pub struct Instr {
    pub op: Op,
    pub guard: Option<(u32, bool)>,
    pub args: Vec<Opd>,
    pub ptx_line: u32,
    /// `.loc` in force.
    pub loc: parse::Loc,
    /// Index into [`Kernel::opcodes`]: the opcode with its modifiers, for counting.
    pub key: u32,
}

/// A function of a kernel's code: the entry (index 0) or a `.func` it calls, directly or not.
#[derive(Debug, Clone)]
pub struct FuncInfo {
    pub name: String,
    /// First instruction in [`Kernel::code`].
    pub pc: u32,
    /// Its registers: `reg_base..reg_base + nregs` of the thread's register file (saved and
    /// restored around a call, so a recursive activation has its own).
    pub reg_base: u32,
    pub nregs: u32,
    /// Bytes of its local frame: parameters, return values, `.local` and call-site `.param`
    /// variables.
    pub frame_bytes: u32,
    /// (offset in its frame, bytes) of each parameter and return value.
    pub params: Vec<(u32, u32)>,
    pub rets: Vec<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub struct ParamInfo {
    pub name: String,
    pub offset: u32,
    pub bytes: u32,
}

/// A decoded `.entry`.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<ParamInfo>,
    pub param_bytes: u32,
    pub nregs: u32,
    pub reg_names: Vec<String>,
    pub code: Vec<Instr>,
    /// Bytes of the entry's local frame (`funcs[0].frame_bytes`).
    pub local_bytes: u32,
    /// Distinct opcode strings (with modifiers) of `code`.
    pub opcodes: Vec<String>,
    /// The entry (index 0) and every `.func` it may call, laid out one after another in `code`.
    pub funcs: Vec<FuncInfo>,
}

/// A module-level `.global`/`.const` variable.
#[derive(Debug, Clone)]
pub struct GlobalVar {
    pub name: String,
    pub bytes: u64,
    pub align: u64,
    pub init: Vec<u8>,
    /// (byte offset in `init`, index in `Program::globals`): elements that hold the address of
    /// another global variable, written when the variables are placed.
    pub addresses: Vec<(u64, u32)>,
}

/// A decoded module.
#[derive(Debug, Clone)]
pub struct Program {
    pub kernels: Vec<Kernel>,
    pub globals: Vec<GlobalVar>,
    /// Bytes of static `.shared` variables, laid out before the dynamic array.
    pub static_shared_bytes: u32,
    /// Alignment the dynamic shared array asks for.
    pub dynamic_shared_align: u32,
    pub files: HashMap<u32, String>,
}

impl Program {
    /// Parse and decode a PTX module.
    pub fn parse(ptx: &str) -> Result<Program, SimError> {
        let m = parse::parse_module(ptx)?;
        decode_module(&m)
    }
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

pub(crate) struct ModuleSyms {
    shared: HashMap<String, Sym>,
    globals: HashMap<String, u32>,
    /// `.shared` variables declared inside function bodies: (function index, item index) to
    /// offset in the static layout; their names are scoped to their block.
    body_shared: HashMap<(usize, usize), u32>,
    files: HashMap<u32, String>,
}

fn decode_module(m: &Module) -> Result<Program, SimError> {
    let mut shared = HashMap::new();
    let mut static_bytes = 0u64;
    let mut dyn_align = 16u64;
    let mut globals = Vec::new();
    let mut gmap = HashMap::new();
    let mut global_bytes = 0u64;
    for v in &m.vars {
        match v.space.as_str() {
            "shared" => {
                if v.is_extern {
                    dyn_align = dyn_align.max(v.align);
                    shared.insert(v.name.clone(), Sym::SharedDynamic);
                } else {
                    static_bytes = static_bytes.next_multiple_of(v.align.max(1));
                    shared.insert(v.name.clone(), Sym::Shared(static_bytes as u32));
                    static_bytes += v.bytes;
                }
            }
            _ => {
                // The simulated device allocates every module variable when a launch starts: a
                // size beyond the stated limit is refused here, before anything runs.
                global_bytes = global_bytes.saturating_add(v.bytes);
                if global_bytes > crate::budget::MAX_GLOBAL_BYTES {
                    return Err(SimError::Unsupported {
                        opcode: format!(
                            "module variables of more than {} MiB in all ({} is {} bytes): the simulator holds at most {} MiB of __device__ variables",
                            crate::budget::MAX_GLOBAL_BYTES >> 20,
                            v.name,
                            v.bytes,
                            crate::budget::MAX_GLOBAL_BYTES >> 20
                        ),
                        ptx_line: 0,
                    });
                }
                gmap.insert(v.name.clone(), globals.len() as u32);
                globals.push(GlobalVar {
                    name: v.name.clone(),
                    bytes: v.bytes,
                    align: v.align,
                    init: v.init.clone(),
                    addresses: Vec::new(),
                });
            }
        }
    }
    // A CTA of sm_100 has 227 KiB of shared memory: more static shared memory cannot launch (and
    // would not fit the u32 the launch adds it up in).
    if static_bytes > 232_448 {
        return Err(SimError::Unsupported {
            opcode: format!(
                "{static_bytes} bytes of static shared memory (a CTA of sm_100 has at most 232448)"
            ),
            ptx_line: 0,
        });
    }
    // Initialisers holding another variable's address, by index once every variable is known.
    for v in &m.vars {
        let Some(&gi) = gmap.get(&v.name) else {
            continue;
        };
        for (off, name) in &v.addresses {
            let target = *gmap.get(name).ok_or_else(|| SimError::Unsupported {
                opcode: format!(
                    "the initialiser of {} names {name}, which is not a global variable",
                    v.name
                ),
                ptx_line: 0,
            })?;
            globals[gi as usize].addresses.push((*off, target));
        }
    }
    // `.shared` variables declared in a function body (NVVM writes every `__shared__` of a
    // kernel there, "demoted" from module scope) are static shared memory like the module's:
    // one place each in the CTA's layout, visible by name only in their block (PTX ISA, "Shared
    // State Space" allows `.shared` declarations at function scope).
    let mut body_shared = HashMap::new();
    for (fi, f) in m.functions.iter().enumerate() {
        for (ii, it) in f.body.iter().enumerate() {
            if let Item::Var {
                space,
                bytes,
                align,
                ..
            } = it
            {
                if space == "shared" {
                    static_bytes = static_bytes.next_multiple_of((*align).max(1));
                    body_shared.insert((fi, ii), static_bytes as u32);
                    static_bytes += bytes;
                }
            }
        }
    }
    let syms = ModuleSyms {
        shared,
        globals: gmap,
        body_shared,
        files: m.files.clone(),
    };
    let mut kernels = Vec::new();
    for (fi, f) in m.functions.iter().enumerate() {
        if f.is_entry {
            kernels.push(crate::link::link_kernel(m, fi, &syms)?);
        }
    }
    Ok(Program {
        kernels,
        globals,
        static_shared_bytes: static_bytes as u32,
        dynamic_shared_align: dyn_align as u32,
        files: m.files.clone(),
    })
}

pub(crate) struct Scope {
    regs: Vec<HashMap<String, u32>>,
    /// Variables declared in the body, innermost block last: `.local` and `.param` ones are
    /// (`Sym::Local` offset in the frame, bytes); `.shared` ones `Sym::Shared`.
    locals: Vec<HashMap<String, (Sym, u64)>>,
    params: HashMap<String, u32>,
}

impl Scope {
    pub(crate) fn reg(&self, name: &str) -> Option<u32> {
        self.regs.iter().rev().find_map(|m| m.get(name).copied())
    }
    pub(crate) fn local(&self, name: &str) -> Option<(Sym, u64)> {
        self.locals.iter().rev().find_map(|m| m.get(name).copied())
    }
}

/// Where a function goes in its kernel's code, and how a call reaches it.
pub(crate) struct Placement<'a> {
    pub index: usize,
    pub pc_base: u32,
    /// Every function of the kernel by name: (index in `Kernel::funcs`, its parameters and
    /// return values as (frame offset, bytes)).
    pub funcs: &'a FuncTable,
}

/// Every function of a kernel by name: (index in `Kernel::funcs`, its parameters and return
/// values as (frame offset, bytes)).
pub(crate) type FuncTable = HashMap<String, (u32, Vec<(u32, u32)>, Vec<(u32, u32)>)>;

/// A kernel's code under construction: the functions of one kernel share it.
#[derive(Default)]
pub(crate) struct Build {
    pub code: Vec<Instr>,
    pub reg_names: Vec<String>,
    pub opcodes: Vec<String>,
    pub opkeys: HashMap<String, u32>,
}

/// The frame layout of a function's parameters and return values (a `.func`'s live in its
/// local frame; an entry's are the kernel parameters): (rets, params, bytes).
pub(crate) type Formals = (Vec<(u32, u32)>, Vec<(u32, u32)>, u32);

pub(crate) fn formals(f: &Function) -> Formals {
    let mut off = 0u32;
    let mut place = |p: &parse::ParamDecl| {
        off = off.next_multiple_of(p.align.max(1));
        let o = off;
        off += p.bytes;
        (o, p.bytes)
    };
    let rets = f.rets.iter().map(&mut place).collect();
    let params = f.params.iter().map(&mut place).collect();
    (rets, params, off)
}

/// The labels of a body by block: PTX scopes a label, like a variable, to the `{ }` block that
/// declares it and the blocks nested in it (PTX ISA, "Statements" and "Scope": a block opens a
/// scope, and the same name may be declared in several blocks). Returns, for each block in
/// order of its `{` (block 0 is the body), the labels visible in it as (name, pc): its own
/// and, unless shadowed, its enclosing blocks'.
fn scoped_labels(f: &Function, pc_base: u32) -> Result<Vec<HashMap<String, u32>>, SimError> {
    let mut own: Vec<HashMap<String, u32>> = vec![HashMap::new()];
    let mut parent = vec![0usize];
    let mut stack = vec![0usize];
    let mut n = pc_base;
    for it in &f.body {
        match it {
            Item::Open => {
                parent.push(*stack.last().unwrap_or(&0));
                own.push(HashMap::new());
                stack.push(own.len() - 1);
            }
            Item::Close => {
                stack.pop();
            }
            Item::Label(l) => {
                let b = *stack.last().unwrap_or(&0);
                if own[b].insert(l.clone(), n).is_some() {
                    return Err(SimError::Parse {
                        ptx_line: 0,
                        detail: format!(
                            "label {l} is defined twice in the same block of {}: a branch to it would be ambiguous",
                            f.name
                        ),
                    });
                }
            }
            Item::Stmt(_) => n += 1,
            _ => {}
        }
    }
    // Blocks open in order, so a block's parent is complete before it.
    let mut visible: Vec<HashMap<String, u32>> = Vec::with_capacity(own.len());
    for b in 0..own.len() {
        let mut v = if b == 0 {
            HashMap::new()
        } else {
            visible[parent[b]].clone()
        };
        v.extend(own[b].drain());
        visible.push(v);
    }
    Ok(visible)
}

/// Decode function `f` (index `at.index` of the module) into `out`, its first instruction at
/// `at.pc_base`: returns its [`FuncInfo`].
pub(crate) fn decode_function(
    f: &Function,
    syms: &ModuleSyms,
    at: &Placement<'_>,
    out: &mut Build,
) -> Result<(FuncInfo, Vec<ParamInfo>, u32), SimError> {
    let mut params = Vec::new();
    let mut off = 0u32;
    let mut pmap = HashMap::new();
    let mut root_locals = HashMap::new();
    let (frets, fparams, formal_bytes) = formals(f);
    if f.is_entry {
        for p in &f.params {
            off = off.next_multiple_of(p.align.max(1));
            pmap.insert(p.name.clone(), off);
            params.push(ParamInfo {
                name: p.name.clone(),
                offset: off,
                bytes: p.bytes,
            });
            off += p.bytes;
        }
    } else {
        // A `.func`'s parameters and return values are in its frame (PTX ISA, "Kernel and
        // Function Directives: .func": a function's `.param` variables are its caller's
        // arguments, read with ld.param and written with st.param).
        for (p, &(o, b)) in f
            .params
            .iter()
            .zip(&fparams)
            .chain(f.rets.iter().zip(&frets))
        {
            root_locals.insert(p.name.clone(), (Sym::Local(o), b as u64));
        }
    }
    let mut scope = Scope {
        regs: vec![HashMap::new()],
        locals: vec![root_locals],
        params: pmap,
    };
    let reg_base = out.reg_names.len() as u32;
    // An entry's parameters are the kernel's (not in its frame); a `.func`'s come first in it.
    let mut local_bytes = if f.is_entry { 0 } else { formal_bytes as u64 };
    let labels = scoped_labels(f, at.pc_base)?;
    let mut blocks = vec![0usize];
    let mut next_block = 0usize;
    let src = |s: &Stmt| source_of(s, &syms.files);
    for (ii, it) in f.body.iter().enumerate() {
        match it {
            Item::Open => {
                next_block += 1;
                blocks.push(next_block);
                scope.regs.push(HashMap::new());
                scope.locals.push(HashMap::new());
            }
            Item::Close => {
                blocks.pop();
                scope.regs.pop();
                scope.locals.pop();
            }
            Item::Label(_) => {}
            Item::Reg {
                ty,
                name,
                count,
                line: _,
            } => {
                let top = scope.regs.last_mut().expect("scope stack is never empty");
                // A `.b128` register takes two 64-bit slots: its low half, then its high half.
                let wide = ty == "b128";
                match count {
                    Some(c) => {
                        for i in 0..*c {
                            let full = format!("{name}{i}");
                            top.insert(full.clone(), out.reg_names.len() as u32);
                            out.reg_names.push(full.clone());
                            if wide {
                                out.reg_names.push(format!("{full}.hi"));
                            }
                        }
                    }
                    None => {
                        top.insert(name.clone(), out.reg_names.len() as u32);
                        out.reg_names.push(name.clone());
                        if wide {
                            out.reg_names.push(format!("{name}.hi"));
                        }
                    }
                }
            }
            Item::Var {
                space,
                name,
                bytes,
                align,
                line,
            } => {
                let sym = match space.as_str() {
                    "local" | "param" => {
                        local_bytes = local_bytes.next_multiple_of((*align).max(1));
                        let o = Sym::Local(local_bytes as u32);
                        local_bytes += bytes;
                        o
                    }
                    _ => match syms.body_shared.get(&(at.index, ii)) {
                        Some(&o) => Sym::Shared(o),
                        None => {
                            return Err(SimError::Unsupported {
                                opcode: format!(
                                    "a `.{space}` variable declared inside a function ({name})"
                                ),
                                ptx_line: *line,
                            })
                        }
                    },
                };
                let top = scope.locals.last_mut().expect("scope stack is never empty");
                top.insert(name.clone(), (sym, *bytes));
            }
            Item::Stmt(s) => {
                let key = match out.opkeys.get(&s.opcode) {
                    Some(k) => *k,
                    None => {
                        let k = out.opcodes.len() as u32;
                        out.opcodes.push(s.opcode.clone());
                        out.opkeys.insert(s.opcode.clone(), k);
                        k
                    }
                };
                let visible = &labels[*blocks.last().unwrap_or(&0)];
                let ins = crate::link::decode_in_function(s, &scope, syms, visible, at, f, key)
                    .map_err(|e| with_source(e, src(s)))?;
                out.code.push(ins);
            }
        }
    }
    let info = FuncInfo {
        name: f.name.clone(),
        pc: at.pc_base,
        reg_base,
        nregs: out.reg_names.len() as u32 - reg_base,
        frame_bytes: local_bytes.min(u32::MAX as u64) as u32,
        params: fparams,
        rets: frets,
    };
    Ok((info, params, off))
}

/// The source position of statement `s` from its `.loc` (and `.file`), as a learner reads it:
/// the kernel's own line, and the inlined function's line when it differs.
pub(crate) fn source_of(s: &Stmt, files: &HashMap<u32, String>) -> Option<String> {
    if s.loc.line == 0 {
        return None;
    }
    let name = |f: u32| {
        files
            .get(&f)
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
            .unwrap_or_else(|| format!("file {f}"))
    };
    Some(if s.loc.caller_line != 0 {
        format!(
            "source {}:{} (inlined from {}:{})",
            name(s.loc.caller_file),
            s.loc.caller_line,
            name(s.loc.file),
            s.loc.line
        )
    } else {
        format!("source {}:{}", name(s.loc.file), s.loc.line)
    })
}

/// A decode error of a statement, with the statement's source position added to what the
/// simulator does not model: every refusal names the PTX line and, where `.loc` says, the
/// source line.
fn with_source(e: SimError, src: Option<String>) -> SimError {
    match (e, src) {
        (SimError::Unsupported { opcode, ptx_line }, Some(src)) => SimError::Unsupported {
            opcode: format!("{opcode} ({src})"),
            ptx_line,
        },
        (SimError::Parse { ptx_line, detail }, Some(src)) => SimError::Parse {
            ptx_line,
            detail: format!("{detail} ({src})"),
        },
        (e, _) => e,
    }
}

fn unsupported(s: &Stmt) -> SimError {
    SimError::Unsupported {
        opcode: s.opcode.clone(),
        ptx_line: s.line,
    }
}

fn operand(
    text: &str,
    s: &Stmt,
    scope: &Scope,
    syms: &ModuleSyms,
    labels: &HashMap<String, u32>,
) -> Result<Opd, SimError> {
    let t = text.trim();
    let bad = |d: &str| SimError::Parse {
        ptx_line: s.line,
        detail: format!("operand `{t}` of {}: {d}", s.opcode),
    };
    if t == "_" {
        return Ok(Opd::Sink);
    }
    if let Some(inner) = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        let parts = split_top(inner);
        let v = parts
            .iter()
            .map(|p| operand(p, s, scope, syms, labels))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Opd::Vec(v));
    }
    if let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let parts = split_top(inner);
        if parts.len() == 2 && parts[1].trim_start().starts_with('{') {
            let map = address(parts[0].trim(), s, scope, syms, &bad)?;
            let coords = match operand(&parts[1], s, scope, syms, labels)? {
                Opd::Vec(v) => v,
                _ => return Err(bad("tensor coordinates")),
            };
            return Ok(Opd::Tensor(Box::new(map), coords));
        }
        if parts.len() != 1 {
            return Err(bad("an address with several parts"));
        }
        return address(inner.trim(), s, scope, syms, &bad);
    }
    if let Some((a, b)) = t.split_once('|') {
        let a = operand(a, s, scope, syms, labels)?;
        let b = operand(b, s, scope, syms, labels)?;
        return Ok(Opd::Pair(Box::new(a), Box::new(b)));
    }
    if let Some(r) = t.strip_prefix('!') {
        return match scope.reg(r.trim()) {
            Some(i) => Ok(Opd::NotReg(i)),
            None => Err(bad("unknown predicate")),
        };
    }
    if let Some(i) = scope.reg(t) {
        return Ok(Opd::Reg(i));
    }
    if t.starts_with('%') {
        return parse_sreg(t)
            .map(Opd::Sreg)
            .ok_or_else(|| SimError::Unsupported {
                opcode: format!("special register {t} (in {})", s.opcode),
                ptx_line: s.line,
            });
    }
    if let Some(v) = parse_float_literal(t).or_else(|| parse::parse_int(t)) {
        return Ok(Opd::Imm(v));
    }
    if let Some(&pc) = labels.get(t) {
        return Ok(Opd::Label(pc));
    }
    if let Some(sym) = symbol(t, scope, syms) {
        return Ok(Opd::Sym(sym));
    }
    Err(bad("not a register, literal, label or variable"))
}

fn parse_float_literal(t: &str) -> Option<u64> {
    if t.contains('.') && !t.starts_with('%') && !t.starts_with('$') {
        let f: f64 = t.parse().ok()?;
        return Some(f.to_bits());
    }
    None
}

fn symbol(t: &str, scope: &Scope, syms: &ModuleSyms) -> Option<Sym> {
    if let Some(&o) = scope.params.get(t) {
        return Some(Sym::Param(o));
    }
    if let Some((l, _)) = scope.local(t) {
        return Some(l);
    }
    if let Some(&sh) = syms.shared.get(t) {
        return Some(sh);
    }
    syms.globals.get(t).map(|&g| Sym::Global(g))
}

/// `%rd1+16`, `name`, `name+8`, `%r3`, `123`.
fn address(
    t: &str,
    s: &Stmt,
    scope: &Scope,
    syms: &ModuleSyms,
    bad: &dyn Fn(&str) -> SimError,
) -> Result<Opd, SimError> {
    let (b, off) = match t.find(['+', '-']) {
        Some(p) if p > 0 => {
            let off = parse::parse_int(&t[p..].replace('+', "")).ok_or_else(|| bad("offset"))?;
            (&t[..p], off as i64)
        }
        _ => (t, 0),
    };
    let b = b.trim();
    if let Some(r) = scope.reg(b) {
        return Ok(Opd::Addr(Base::Reg(r), off));
    }
    if let Some(v) = parse::parse_int(b) {
        return Ok(Opd::Addr(Base::None, v as i64 + off));
    }
    if let Some(sym) = symbol(b, scope, syms) {
        return Ok(Opd::Addr(Base::Sym(sym), off));
    }
    let _ = s;
    Err(bad("unknown address base"))
}

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' | '[' => {
                depth += 1;
                cur.push(c)
            }
            '}' | ']' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn space_of(mods: &[&str]) -> Space {
    for m in mods {
        match *m {
            "global" => return Space::Global,
            "shared" | "shared::cta" => return Space::Shared,
            "shared::cluster" => return Space::SharedCluster,
            "local" => return Space::Local,
            "param" | "param::entry" | "param::func" => return Space::Param,
            "const" => return Space::Const,
            _ => {}
        }
    }
    Space::Generic
}

fn last_ty(mods: &[&str]) -> Option<Ty> {
    mods.iter().rev().find_map(|m| Ty::parse(m))
}

fn vec_of(mods: &[&str]) -> u8 {
    for m in mods {
        match *m {
            "v2" => return 2,
            "v4" => return 4,
            "v8" => return 8,
            _ => {}
        }
    }
    1
}

/// Modifiers that only order or hint memory accesses; the interpreter executes one access at a
/// time in a sequentially consistent order, so they change nothing it computes.
const MEMORY_HINTS: &[&str] = &[
    "volatile",
    "relaxed",
    "acquire",
    "release",
    "weak",
    "cta",
    "cluster",
    "gpu",
    "sys",
    "nc",
    "ca",
    "cg",
    "cs",
    "lu",
    "cv",
    "wb",
    "wt",
    "L1::evict_last",
    "L1::evict_first",
    "L1::evict_normal",
    "L1::no_allocate",
    "L2::evict_last",
    "L2::evict_first",
    "L2::64B",
    "L2::128B",
    "L2::256B",
    "mmio",
];

fn check_mods(s: &Stmt, mods: &[&str], allowed: &[&str]) -> Result<(), SimError> {
    for m in mods {
        if Ty::parse(m).is_some() || allowed.contains(m) {
            continue;
        }
        return Err(unsupported(s));
    }
    Ok(())
}

fn decode_op(s: &Stmt) -> Result<Op, SimError> {
    let parts: Vec<&str> = s.opcode.split('.').collect();
    // `shared::cta` etc. contain no dots, so splitting on '.' keeps them whole.
    let base = parts[0];
    let mods = &parts[1..];
    let ty = last_ty(mods);
    let need_ty = || ty.ok_or_else(|| unsupported(s));
    let has = |m: &str| mods.contains(&m);
    if let Some(r) = crate::alu::decode(base, mods) {
        return r.map(Op::Alu).map_err(|()| unsupported(s));
    }
    if let Some(r) = crate::alu::decode_warp(base, mods) {
        return r.map(Op::WarpAlu).map_err(|()| unsupported(s));
    }
    if let Some(r) = clc::decode(s, base, mods) {
        return r;
    }
    let op = match base {
        "mov" => {
            check_mods(s, mods, &[])?;
            Op::Mov(need_ty()?)
        }
        "ld" | "st" => {
            let mut allowed: Vec<&str> = MEMORY_HINTS.to_vec();
            allowed.extend([
                "global",
                "shared",
                "shared::cta",
                "shared::cluster",
                "local",
                "param",
                "param::entry",
                "const",
                "v2",
                "v4",
                "v8",
                "L2::cache_hint",
                "L1::evict_unchanged",
            ]);
            check_mods(s, mods, &allowed)?;
            let space = space_of(mods);
            let t = need_ty()?;
            forms::check_wide(s, space, t, vec_of(mods))?;
            if base == "ld" {
                Op::Ld {
                    space,
                    ty: t,
                    vec: vec_of(mods),
                }
            } else {
                Op::St {
                    space,
                    ty: t,
                    vec: vec_of(mods),
                }
            }
        }
        "cvta" => {
            check_mods(
                s,
                mods,
                &[
                    "to",
                    "shared",
                    "shared::cta",
                    "shared::cluster",
                    "global",
                    "local",
                    "param",
                    "param::entry",
                    "const",
                ],
            )?;
            Op::Cvta {
                to: has("to"),
                space: space_of(mods),
                ty: need_ty()?,
            }
        }
        "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor" | "shl"
        | "shr" => {
            check_mods(
                s,
                mods,
                &[
                    "lo", "hi", "wide", "rn", "rz", "rm", "rp", "ftz", "approx", "full", "sat",
                    "cc",
                ],
            )?;
            // bin() rounds float results to nearest and never saturates: directed rounding
            // and `.sat` of float arithmetic are refused rather than computed differently.
            let directed = has("rz") || has("rm") || has("rp");
            if has("cc") || has("sat") || (directed && ty.is_some_and(Ty::float)) {
                return Err(unsupported(s));
            }
            let t = need_ty()?;
            let b = match base {
                "add" => Bin::Add,
                "sub" => Bin::Sub,
                "mul" if t.float() => Bin::Mul,
                "mul" if has("wide") => Bin::MulWide,
                "mul" if has("hi") => Bin::MulHi,
                "mul" => Bin::MulLo,
                "div" => Bin::Div,
                "rem" => Bin::Rem,
                "min" => Bin::Min,
                "max" => Bin::Max,
                "and" => Bin::And,
                "or" => Bin::Or,
                "xor" => Bin::Xor,
                "shl" => Bin::Shl,
                _ => Bin::Shr,
            };
            Op::Bin(b, t)
        }
        "mad" => {
            check_mods(s, mods, &["lo", "hi", "wide", "rn"])?;
            let t = need_ty()?;
            if t.float() {
                Op::Fma(t)
            } else {
                Op::Mad {
                    wide: has("wide"),
                    hi: has("hi"),
                    ty: t,
                }
            }
        }
        "fma" => {
            check_mods(s, mods, &["rn", "ftz"])?;
            Op::Fma(need_ty()?)
        }
        "neg" | "not" | "abs" | "popc" | "clz" | "brev" | "cnot" => {
            check_mods(s, mods, &["ftz"])?;
            let u = match base {
                "neg" => Un::Neg,
                "not" => Un::Not,
                "abs" => Un::Abs,
                "popc" => Un::Popc,
                "clz" => Un::Clz,
                "brev" => Un::Brev,
                _ => Un::Cnot,
            };
            Op::Un(u, need_ty()?)
        }
        "setp" => {
            let cmp = match mods.first().copied() {
                Some("eq") => Cmp::Eq,
                Some("ne") => Cmp::Ne,
                Some("lt") => Cmp::Lt,
                Some("le") => Cmp::Le,
                Some("gt") => Cmp::Gt,
                Some("ge") => Cmp::Ge,
                Some("lo") => Cmp::Lo,
                Some("ls") => Cmp::Ls,
                Some("hi") => Cmp::Hi,
                Some("hs") => Cmp::Hs,
                Some("equ") => Cmp::Equ,
                Some("neu") => Cmp::Neu,
                Some("ltu") => Cmp::Ltu,
                Some("leu") => Cmp::Leu,
                Some("gtu") => Cmp::Gtu,
                Some("geu") => Cmp::Geu,
                Some("num") => Cmp::Num,
                Some("nan") => Cmp::Nan,
                _ => return Err(unsupported(s)),
            };
            let bop = if has("and") {
                Some(BoolOp::And)
            } else if has("or") {
                Some(BoolOp::Or)
            } else if has("xor") {
                Some(BoolOp::Xor)
            } else {
                None
            };
            check_mods(s, &mods[1..], &["and", "or", "xor", "ftz"])?;
            Op::Setp {
                cmp,
                ty: need_ty()?,
                bop,
            }
        }
        "selp" => {
            check_mods(s, mods, &[])?;
            Op::Selp(need_ty()?)
        }
        "cvt" => {
            let tys: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
            if tys.len() != 2 {
                return Err(unsupported(s));
            }
            let mut rnd = Rnd::None;
            for m in mods {
                rnd = match *m {
                    "rn" => Rnd::Rn,
                    "rz" => Rnd::Rz,
                    "rm" => Rnd::Rm,
                    "rp" => Rnd::Rp,
                    "rni" => Rnd::Rni,
                    "rzi" => Rnd::Rzi,
                    "rmi" => Rnd::Rmi,
                    "rpi" => Rnd::Rpi,
                    _ => rnd,
                };
            }
            check_mods(
                s,
                mods,
                &[
                    "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "sat", "ftz",
                ],
            )?;
            Op::Cvt {
                dst: tys[0],
                src: tys[1],
                rnd,
                sat: has("sat"),
            }
        }
        "bfe" => Op::Bfe(need_ty()?),
        "bfi" => Op::Bfi(need_ty()?),
        "prmt" => {
            if mods.len() != 1 {
                return Err(unsupported(s));
            }
            Op::Prmt
        }
        "shf" => {
            check_mods(s, mods, &["l", "r", "wrap", "clamp"])?;
            Op::Shf {
                left: has("l"),
                clamp: has("clamp"),
            }
        }
        "bra" => {
            check_mods(s, mods, &["uni"])?;
            Op::Bra
        }
        "ret" => Op::Ret,
        "exit" => Op::Exit,
        "trap" => Op::Trap,
        "bar" | "barrier" => {
            if mods.first() == Some(&"cluster") {
                check_mods(
                    s,
                    &mods[1..],
                    &["arrive", "wait", "release", "acquire", "relaxed", "aligned"],
                )?;
                if has("arrive") {
                    Op::ClusterBarrier { wait: false }
                } else if has("wait") {
                    Op::ClusterBarrier { wait: true }
                } else {
                    return Err(unsupported(s));
                }
            } else if mods.first() == Some(&"warp") {
                check_mods(s, &mods[1..], &["sync"])?;
                Op::BarWarpSync
            } else {
                check_mods(s, mods, &["sync", "arrive", "aligned", "cta"])?;
                if has("sync") {
                    Op::BarSync { arrive_only: false }
                } else if has("arrive") {
                    Op::BarSync { arrive_only: true }
                } else {
                    return Err(unsupported(s));
                }
            }
        }
        "elect" => {
            check_mods(s, mods, &["sync"])?;
            Op::ElectSync
        }
        "shfl" => {
            check_mods(s, mods, &["sync", "up", "down", "bfly", "idx"])?;
            let m = if has("up") {
                Shfl::Up
            } else if has("down") {
                Shfl::Down
            } else if has("bfly") {
                Shfl::Bfly
            } else {
                Shfl::Idx
            };
            Op::ShflSync(m)
        }
        "vote" => {
            check_mods(s, mods, &["sync", "all", "any", "uni", "ballot"])?;
            let v = if has("all") {
                Vote::All
            } else if has("any") {
                Vote::Any
            } else if has("uni") {
                Vote::Uni
            } else {
                Vote::Ballot
            };
            Op::VoteSync(v)
        }
        "activemask" => Op::Activemask,
        "mbarrier" => {
            let mut allowed: Vec<&str> = vec![
                "init",
                "arrive",
                "expect_tx",
                "complete_tx",
                "try_wait",
                "test_wait",
                "parity",
                "shared",
                "shared::cta",
                "shared::cluster",
                "noComplete",
                "inval",
                "arrive_drop",
            ];
            allowed.extend(MEMORY_HINTS);
            check_mods(s, mods, &allowed)?;
            let space = space_of(mods);
            let kind = match mods.first().copied() {
                Some("init") => MbarOp::Init,
                Some("inval") => MbarOp::Inval,
                Some("arrive") if has("noComplete") => return Err(unsupported(s)),
                Some("arrive") => MbarOp::Arrive {
                    expect_tx: has("expect_tx"),
                    remote: space == Space::SharedCluster,
                },
                Some("arrive_drop") => MbarOp::ArriveDrop,
                Some("expect_tx") => MbarOp::ExpectTx,
                Some("complete_tx") => MbarOp::CompleteTx,
                Some("try_wait") if has("parity") => MbarOp::TryWaitParity,
                Some("try_wait") => MbarOp::TryWait,
                Some("test_wait") if has("parity") => MbarOp::TestWaitParity,
                Some("test_wait") => MbarOp::TestWait,
                _ => return Err(unsupported(s)),
            };
            Op::Mbar(kind, space)
        }
        "fence" | "membar" => {
            let f = if base == "membar" {
                Op::Fence(Fence::Memory)
            } else if mods.first() == Some(&"proxy") {
                match mods.get(1).copied() {
                    Some("async") => {
                        check_mods(s, &mods[2..], &["shared::cta", "shared::cluster", "global"])?;
                        Op::Fence(Fence::ProxyAsync)
                    }
                    Some(_) => Op::Fence(Fence::OtherProxy),
                    None => return Err(unsupported(s)),
                }
            } else if mods.first() == Some(&"mbarrier_init") {
                Op::Fence(Fence::MbarrierInit)
            } else {
                check_mods(
                    s,
                    mods,
                    &[
                        "sc", "acq_rel", "acquire", "release", "cta", "cluster", "gpu", "sys",
                    ],
                )?;
                Op::Fence(Fence::Memory)
            };
            return Ok(f);
        }
        "mapa" => {
            check_mods(s, mods, &["shared::cluster"])?;
            Op::Mapa {
                generic: !has("shared::cluster"),
            }
        }
        "nanosleep" => Op::Nanosleep,
        "prefetch" if has("tensormap") => Op::PrefetchTensormap,
        "cp" => decode_cp(s, mods)?,
        "mma" => forms::decode_mma(s, mods)?,
        "ldmatrix" | "stmatrix" => forms::decode_ldst_matrix(s, base, mods)?,
        "tcgen05" => decode_tcgen05(s, mods)?,
        "atom" | "red" => {
            let mut allowed: Vec<&str> = MEMORY_HINTS.to_vec();
            allowed.extend([
                "global",
                "shared",
                "shared::cta",
                "shared::cluster",
                "add",
                "min",
                "max",
                "and",
                "or",
                "xor",
                "exch",
                "cas",
                "inc",
                "dec",
                "noftz",
                "acq_rel",
                "v2",
                "v4",
                "v8",
            ]);
            check_mods(s, mods, &allowed)?;
            let (sem, scope) = sem_scope(&has, MemScope::Gpu);
            let op = if has("add") {
                AtomOp::Add
            } else if has("min") {
                AtomOp::Min
            } else if has("max") {
                AtomOp::Max
            } else if has("and") {
                AtomOp::And
            } else if has("or") {
                AtomOp::Or
            } else if has("xor") {
                AtomOp::Xor
            } else if has("exch") {
                AtomOp::Exch
            } else if has("cas") {
                AtomOp::Cas
            } else if has("inc") {
                AtomOp::Inc
            } else if has("dec") {
                AtomOp::Dec
            } else {
                return Err(unsupported(s));
            };
            let vec = vec_of(mods);
            if vec > 1 && !crate::atom_vec::legal(op, need_ty()?, vec, space_of(mods), has("noftz"))
            {
                return Err(unsupported(s));
            }
            Op::Atom {
                red: base == "red",
                space: space_of(mods),
                op,
                ty: need_ty()?,
                sem,
                scope,
                vec,
            }
        }
        _ => return Err(unsupported(s)),
    };
    Ok(op)
}

fn decode_cp(s: &Stmt, mods: &[&str]) -> Result<Op, SimError> {
    // cp.async.bulk.{tensor.Nd...|commit_group|wait_group[.read]}
    if mods.first() == Some(&"async") && mods.get(1) != Some(&"bulk") {
        return forms::decode_cp_async(s, &mods[1..]);
    }
    if mods.len() < 2 || mods[0] != "async" || mods[1] != "bulk" {
        return Err(unsupported(s));
    }
    let rest = &mods[2..];
    match rest.first().copied() {
        Some("commit_group") if rest.len() == 1 => Ok(Op::BulkCommit),
        Some("wait_group") => {
            check_mods(s, &rest[1..], &["read"])?;
            Ok(Op::BulkWait {
                read: rest.contains(&"read"),
            })
        }
        Some("tensor") => {
            let dims = rest
                .get(1)
                .and_then(|d| d.strip_suffix('d'))
                .and_then(|d| d.parse::<u8>().ok())
                .filter(|d| (1..=5).contains(d))
                .ok_or_else(|| unsupported(s))?;
            let r = &rest[2..];
            let has = |m: &str| r.contains(&m);
            if r.first() == Some(&"global") {
                // store: .global.shared::cta.bulk_group (optionally .tile)
                check_mods(s, r, &["global", "shared::cta", "bulk_group", "tile"])?;
                if !has("bulk_group") {
                    return Err(unsupported(s));
                }
                Ok(Op::TmaStore { dims })
            } else {
                check_mods(
                    s,
                    r,
                    &[
                        "shared::cluster",
                        "shared::cta",
                        "global",
                        "mbarrier::complete_tx::bytes",
                        "multicast::cluster",
                        "cta_group::1",
                        "cta_group::2",
                        "tile",
                    ],
                )?;
                if !has("mbarrier::complete_tx::bytes") {
                    return Err(unsupported(s));
                }
                Ok(Op::TmaLoad {
                    dims,
                    multicast: has("multicast::cluster"),
                    cta_group2: has("cta_group::2"),
                })
            }
        }
        _ => Err(unsupported(s)),
    }
}

fn decode_tcgen05(s: &Stmt, mods: &[&str]) -> Result<Op, SimError> {
    let has = |m: &str| mods.contains(&m);
    let cg2 = has("cta_group::2");
    let first = mods.first().copied().unwrap_or("");
    let op = match first {
        "alloc" => {
            check_mods(
                s,
                &mods[1..],
                &[
                    "cta_group::1",
                    "cta_group::2",
                    "sync",
                    "aligned",
                    "shared::cta",
                ],
            )?;
            Op::TcAlloc { cg2 }
        }
        "dealloc" => {
            check_mods(
                s,
                &mods[1..],
                &["cta_group::1", "cta_group::2", "sync", "aligned"],
            )?;
            Op::TcDealloc { cg2 }
        }
        "relinquish_alloc_permit" => {
            check_mods(
                s,
                &mods[1..],
                &["cta_group::1", "cta_group::2", "sync", "aligned"],
            )?;
            Op::TcRelinquish { cg2 }
        }
        "mma" => {
            // PTX ISA "tcgen05.mma": the dense forms of the kinds `units/mma_kinds.rs` models,
            // A in shared memory or in tensor memory (`units/mma_ts.rs`); `.ws`, `.sp`, block
            // scaling and the collector and shift qualifiers are refused here.
            check_mods(
                s,
                &mods[1..],
                &[
                    "cta_group::1",
                    "cta_group::2",
                    "kind::f16",
                    "kind::tf32",
                    "kind::f8f6f4",
                    "kind::i8",
                ],
            )?;
            let kinds: Vec<_> = mods
                .iter()
                .filter_map(|m| crate::units::mma_kinds::MmaKind::parse(m))
                .collect();
            let [kind] = kinds[..] else {
                return Err(unsupported(s));
            };
            Op::TcMma { cg2, kind }
        }
        "commit" => {
            check_mods(
                s,
                &mods[1..],
                &[
                    "cta_group::1",
                    "cta_group::2",
                    "mbarrier::arrive::one",
                    "shared::cluster",
                    "shared::cta",
                    "multicast::cluster",
                ],
            )?;
            Op::TcCommit {
                cg2,
                multicast: has("multicast::cluster"),
            }
        }
        "ld" | "st" if !has("32x32b") || has("pack::16b") || has("unpack::16b") => {
            forms::decode_tcgen05_ldst(s, first == "st", mods)?
        }
        "ld" | "st" => {
            // tcgen05.ld.sync.aligned.32x32b.xN.b32
            let n = mods
                .iter()
                .find_map(|m| m.strip_prefix('x').and_then(|v| v.parse::<u8>().ok()))
                .ok_or_else(|| unsupported(s))?;
            check_mods(
                s,
                &mods[1..],
                &["sync", "aligned", "32x32b", &format!("x{n}")],
            )?;
            if !has("32x32b") || !n.is_power_of_two() || n > 128 {
                return Err(unsupported(s));
            }
            if first == "ld" {
                Op::TcLd { n }
            } else {
                Op::TcSt { n }
            }
        }
        "cp" => forms::decode_tcgen05_cp(s, mods)?,
        "shift" => {
            check_mods(s, &mods[1..], &["cta_group::1", "cta_group::2", "down"])?;
            if !has("down") {
                return Err(unsupported(s));
            }
            Op::TcShift { cg2 }
        }
        "wait::ld" => {
            check_mods(s, &mods[1..], &["sync", "aligned"])?;
            Op::TcWaitLd
        }
        "wait::st" => {
            check_mods(s, &mods[1..], &["sync", "aligned"])?;
            Op::TcWaitSt
        }
        "fence::before_thread_sync" if mods.len() == 1 => Op::TcFenceBefore,
        "fence::after_thread_sync" if mods.len() == 1 => Op::TcFenceAfter,
        _ => return Err(unsupported(s)),
    };
    Ok(op)
}

/// How many operands each instruction takes (fewest, most), so the interpreter can index them
/// without checks: a malformed (or hostile) kernel is refused at decode time, never a panic.
fn arity(op: &Op) -> (usize, usize) {
    match op {
        Op::Mov(_) | Op::Cvta { .. } | Op::Un(..) => (2, 2),
        Op::Ld { .. } | Op::St { .. } => (2, 3),
        Op::Form(f) => forms::arity(f),
        Op::Clc(_) => (2, 2),
        Op::Bin(..) => (3, 3),
        Op::Mad { .. } | Op::Fma(_) | Op::Selp(_) | Op::Prmt | Op::Shf { .. } | Op::Bfe(_) => {
            (4, 4)
        }
        Op::Bfi(_) => (5, 5),
        Op::Setp { bop: None, .. } => (3, 3),
        Op::Setp { bop: Some(_), .. } => (4, 4),
        Op::Cvt {
            dst: Ty::F16x2 | Ty::Bf16x2,
            ..
        } => (3, 3),
        Op::Cvt { .. } => (2, 2),
        Op::Bra => (1, 1),
        Op::Ret | Op::Exit | Op::Trap | Op::Fence(_) | Op::BulkCommit => (0, 0),
        Op::TcWaitLd | Op::TcWaitSt | Op::TcFenceBefore | Op::TcFenceAfter => (0, 0),
        Op::BarSync { .. } => (1, 2),
        Op::BarWarpSync => (1, 1),
        Op::ElectSync => (2, 2),
        Op::ShflSync(_) => (5, 5),
        Op::VoteSync(_) => (3, 3),
        Op::Activemask => (1, 1),
        Op::Mbar(MbarOp::Init, _) => (2, 2),
        Op::Mbar(MbarOp::Inval, _) => (1, 1),
        Op::Mbar(
            MbarOp::Arrive {
                expect_tx: true, ..
            },
            _,
        ) => (3, 3),
        Op::Mbar(MbarOp::Arrive { .. } | MbarOp::ArriveDrop, _) => (2, 3),
        Op::Mbar(MbarOp::ExpectTx | MbarOp::CompleteTx, _) => (2, 2),
        Op::Mbar(_, _) => (3, 4),
        Op::ClusterBarrier { .. } => (0, 0),
        Op::Mapa { .. } => (3, 3),
        Op::Nanosleep | Op::PrefetchTensormap => (1, 1),
        Op::TmaLoad {
            multicast: true, ..
        } => (4, 4),
        Op::TmaLoad { .. } => (3, 3),
        Op::TmaStore { .. } => (2, 2),
        Op::BulkWait { .. } => (1, 1),
        Op::TcAlloc { .. } | Op::TcDealloc { .. } => (2, 2),
        Op::TcRelinquish { .. } => (0, 0),
        Op::TcMma { .. } => (5, 5),
        Op::TcCommit {
            multicast: true, ..
        } => (2, 2),
        Op::TcCommit { .. } => (1, 1),
        Op::TcShift { .. } => (1, 1),
        Op::TcCp { .. } => (2, 2),
        Op::TcLd { .. } | Op::TcSt { .. } => (2, 2),
        Op::Atom { red: true, .. } => (2, 2),
        Op::Atom {
            op: AtomOp::Cas, ..
        } => (4, 4),
        Op::Atom { .. } => (3, 3),
        Op::Alu(x) => x.arity(),
        Op::WarpAlu(_) => (3, 3),
        // Its operands are in the op (the caller's `.param` variables).
        Op::Call { .. } => (0, 0),
    }
}

fn check_operands(s: &Stmt, op: &Op, args: &[Opd]) -> Result<(), SimError> {
    let bad = |d: String| SimError::Parse {
        ptx_line: s.line,
        detail: format!("{}: {d}", s.opcode),
    };
    let (lo, hi) = arity(op);
    if args.len() < lo || args.len() > hi {
        return Err(bad(format!(
            "{} operands, expected {}",
            args.len(),
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            }
        )));
    }
    // Vector operands: non-empty, of plain registers or immediates, as long as the
    // instruction's vector width says.
    for a in args {
        if let Opd::Vec(v) = a {
            if v.is_empty()
                || v.iter()
                    .any(|x| !matches!(x, Opd::Reg(_) | Opd::Imm(_) | Opd::Sink))
            {
                return Err(bad("a vector operand must list registers".into()));
            }
            let want = match op {
                Op::Ld { vec, .. } | Op::St { vec, .. } => Some(*vec as usize),
                Op::TcLd { n } | Op::TcSt { n } => Some(*n as usize),
                Op::Atom { vec, .. } if *vec > 1 => Some(*vec as usize),
                Op::Form(_) => Some(v.len()),
                // mov.b128 {lo, hi}; get_first_ctaid.v4 {x, y, z, _}.
                Op::Clc(ClcOp::Pack) => Some(2),
                Op::Clc(ClcOp::FirstCtaid { dim: None }) => Some(4),
                Op::Mov(t) => (v.len() > 1 && t.bits() % v.len() as u32 == 0).then_some(v.len()),
                _ => None,
            };
            if want != Some(v.len()) {
                return Err(bad(format!(
                    "a vector operand of {} registers here",
                    v.len()
                )));
            }
        }
    }
    match op {
        Op::Form(f) => forms::check_operands(s, f, args)?,
        Op::Ld { .. } | Op::St { .. } => forms::check_ld_st_operands(s, args)?,
        _ => {}
    }
    let ty_ok = match op {
        Op::Bin(_, t)
        | Op::Un(_, t)
        | Op::Mad { ty: t, .. }
        | Op::Setp { ty: t, .. }
        | Op::Selp(t)
        | Op::Bfe(t)
        | Op::Bfi(t)
        | Op::Ld { ty: t, .. }
        | Op::St { ty: t, .. }
        | Op::Atom { ty: t, .. }
        | Op::Mov(t) => *t != Ty::B128,
        Op::Cvt { dst, src, .. } => *dst != Ty::B128 && *src != Ty::B128,
        _ => true,
    };
    if !ty_ok {
        return Err(SimError::Unsupported {
            opcode: s.opcode.clone(),
            ptx_line: s.line,
        });
    }
    Ok(())
}

pub(crate) fn decode_stmt(
    s: &Stmt,
    scope: &Scope,
    syms: &ModuleSyms,
    labels: &HashMap<String, u32>,
    key: u32,
) -> Result<Instr, SimError> {
    let op = decode_op(s)?;
    let guard = match &s.guard {
        Some((p, neg)) => Some((
            scope.reg(p).ok_or_else(|| SimError::Parse {
                ptx_line: s.line,
                detail: format!("guard `{p}` is not a declared predicate"),
            })?,
            *neg,
        )),
        None => None,
    };
    let args = s
        .operands
        .iter()
        .map(|o| operand(o, s, scope, syms, labels))
        .collect::<Result<Vec<_>, _>>()?;
    check_operands(s, &op, &args)?;
    if let Err(why) = crate::forms::modelled(&op, &args) {
        return Err(SimError::Unsupported {
            opcode: format!("{} ({why})", s.opcode),
            ptx_line: s.line,
        });
    }
    Ok(Instr {
        op,
        guard,
        args,
        ptx_line: s.line,
        loc: s.loc,
        key,
    })
}

/// Every distinct opcode (with modifiers) of a module's kernels: the inventory.
pub fn opcode_inventory(ptx: &str) -> Result<Vec<String>, SimError> {
    let m = parse::parse_module(ptx)?;
    let mut out = Vec::new();
    for f in &m.functions {
        for it in &f.body {
            if let Item::Stmt(s) = it {
                if !out.contains(&s.opcode) {
                    out.push(s.opcode.clone());
                }
            }
        }
    }
    out.sort();
    Ok(out)
}
