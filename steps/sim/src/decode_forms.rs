//! Decoding of the pre-tcgen05 warp-matrix and asynchronous-copy forms (`mma.sync`,
//! `ldmatrix`, `stmatrix`, non-bulk `cp.async` and its groups): one [`Op::Form`] variant so the
//! shared decoder and interpreter each gain one arm. Every form is checked against the PTX ISA's
//! syntax here; anything else is refused by name at decode time.

use super::{check_mods, unsupported, Op, Opd};
use crate::error::SimError;
use crate::parse::Stmt;
use crate::units::mma_sync::{MmaAb, MmaShape, MmaSyncForm};

/// The forms this module decodes (wrapped in [`Op::Form`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormOp {
    /// `mma.sync.aligned.{shape}.row.col.{d}.{a}.{b}.{c} d, a, b, c` (PTX ISA 9.7.14.5.14).
    MmaSync(MmaSyncForm),
    /// `ldmatrix.sync.aligned.m8n8.x{num}{.trans}{.shared{::cta}}.b16 r, [p]`.
    Ldmatrix { num: u8, trans: bool },
    /// `stmatrix.sync.aligned.m8n8.x{num}{.trans}{.shared{::cta}}.b16 [p], r`.
    Stmatrix { num: u8, trans: bool },
    /// `cp.async.{ca,cg}.shared{::cta}.global{.L2::cache_hint}{.L2::{64,128,256}B} [dst], [src],
    /// cp-size{, src-size | ignore-src}{, cache-policy}` (PTX ISA 9.7.9.25.3.1).
    CpAsync { cg: bool, hint: bool },
    /// `cp.async.commit_group`
    CpAsyncCommit,
    /// `cp.async.wait_group N` (`all` false) or `cp.async.wait_all`.
    CpAsyncWait { all: bool },
    /// `cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]`.
    CpAsyncArrive { noinc: bool },
    /// `tcgen05.{ld,st}` of a 16-lane shape (`.32x32b` stays `Op::TcLd`/`Op::TcSt`).
    TcLdSt {
        st: bool,
        shape: crate::units::tmem_shapes::TmemShape,
        n: u8,
        /// `.pack::16b` (ld) / `.unpack::16b` (st).
        pack: bool,
    },
}

impl FormOp {
    /// Whether the warp's lanes must meet first (the `.sync.aligned` forms).
    pub fn collective(&self) -> bool {
        matches!(
            self,
            FormOp::MmaSync(_)
                | FormOp::Ldmatrix { .. }
                | FormOp::Stmatrix { .. }
                | FormOp::TcLdSt { .. }
        )
    }
}

/// `mma...`: only the `.sync.aligned` floating-point forms of m16n8k{4,8,16}.
pub(super) fn decode_mma(s: &Stmt, mods: &[&str]) -> Result<Op, SimError> {
    // sync aligned shape row col dtype atype btype ctype
    let [sync, aligned, shape, row, col, d, a, b, c] = mods else {
        return Err(unsupported(s));
    };
    if (*sync, *aligned, *row, *col) != ("sync", "aligned", "row", "col") || a != b {
        return Err(unsupported(s));
    }
    let shape = match *shape {
        "m16n8k4" => MmaShape::M16N8K4,
        "m16n8k8" => MmaShape::M16N8K8,
        "m16n8k16" => MmaShape::M16N8K16,
        _ => return Err(unsupported(s)),
    };
    let ab = match *a {
        "f16" => MmaAb::F16,
        "bf16" => MmaAb::Bf16,
        "tf32" => MmaAb::Tf32,
        _ => return Err(unsupported(s)),
    };
    let f32_of = |t: &str| match t {
        "f32" => Some(true),
        "f16" => Some(false),
        _ => None,
    };
    let (Some(df), Some(cf)) = (f32_of(d), f32_of(c)) else {
        return Err(unsupported(s));
    };
    MmaSyncForm::new(shape, ab, df, cf)
        .map(|f| Op::Form(FormOp::MmaSync(f)))
        .ok_or_else(|| unsupported(s))
}

/// `ldmatrix` / `stmatrix`: the `.m8n8` `.b16` shape (the sm_100 `.m16n16`/`.m8n16` 8-bit and
/// 6/4-bit forms are refused as not modelled).
pub(super) fn decode_ldst_matrix(s: &Stmt, base: &str, mods: &[&str]) -> Result<Op, SimError> {
    check_mods(
        s,
        mods,
        &[
            "sync",
            "aligned",
            "m8n8",
            "x1",
            "x2",
            "x4",
            "trans",
            "shared",
            "shared::cta",
        ],
    )?;
    let has = |m: &str| mods.contains(&m);
    if !has("sync") || !has("aligned") || !has("m8n8") || !has("b16") {
        return Err(unsupported(s));
    }
    let num = match (has("x1"), has("x2"), has("x4")) {
        (true, false, false) => 1,
        (false, true, false) => 2,
        (false, false, true) => 4,
        _ => return Err(unsupported(s)),
    };
    let trans = has("trans");
    Ok(Op::Form(if base == "ldmatrix" {
        FormOp::Ldmatrix { num, trans }
    } else {
        FormOp::Stmatrix { num, trans }
    }))
}

/// `cp.async` without `.bulk` (called with the modifiers after `async`).
pub(super) fn decode_cp_async(s: &Stmt, rest: &[&str]) -> Result<Op, SimError> {
    let has = |m: &str| rest.contains(&m);
    match rest.first().copied() {
        Some("commit_group") if rest.len() == 1 => Ok(Op::Form(FormOp::CpAsyncCommit)),
        Some("wait_group") if rest.len() == 1 => Ok(Op::Form(FormOp::CpAsyncWait { all: false })),
        Some("wait_all") if rest.len() == 1 => Ok(Op::Form(FormOp::CpAsyncWait { all: true })),
        Some("mbarrier") => {
            check_mods(s, &rest[1..], &["arrive", "noinc", "shared", "shared::cta"])?;
            if !has("arrive") || !has("b64") {
                return Err(unsupported(s));
            }
            Ok(Op::Form(FormOp::CpAsyncArrive {
                noinc: has("noinc"),
            }))
        }
        Some(level @ ("ca" | "cg")) => {
            check_mods(
                s,
                &rest[1..],
                &[
                    "shared",
                    "shared::cta",
                    "global",
                    "L2::cache_hint",
                    "L2::64B",
                    "L2::128B",
                    "L2::256B",
                ],
            )?;
            if !has("global") || !(has("shared") || has("shared::cta")) {
                return Err(unsupported(s));
            }
            Ok(Op::Form(FormOp::CpAsync {
                cg: level == "cg",
                hint: has("L2::cache_hint"),
            }))
        }
        _ => Err(unsupported(s)),
    }
}

/// Fewest and most operands.
pub(super) fn arity(f: &FormOp) -> (usize, usize) {
    match f {
        FormOp::MmaSync(_) => (4, 4),
        FormOp::Ldmatrix { .. } | FormOp::Stmatrix { .. } => (2, 2),
        // dst, src, cp-size, then an optional src-size or ignore-src, then the policy.
        FormOp::CpAsync { hint: false, .. } => (3, 4),
        FormOp::CpAsync { hint: true, .. } => (4, 5),
        FormOp::CpAsyncCommit => (0, 0),
        FormOp::CpAsyncWait { all: true } => (0, 0),
        FormOp::CpAsyncWait { all: false } => (1, 1),
        FormOp::CpAsyncArrive { .. } => (1, 1),
        // 16x32bx2 takes the immHalfSplitoff immediate after the address.
        FormOp::TcLdSt { shape, .. } => {
            let k = 2 + usize::from(*shape == crate::units::tmem_shapes::TmemShape::S16x32bx2);
            (k, k)
        }
    }
}

/// Vector operand lengths and operand kinds the interpreter relies on.
pub(super) fn check_operands(s: &Stmt, f: &FormOp, args: &[Opd]) -> Result<(), SimError> {
    let bad = |d: String| SimError::Parse {
        ptx_line: s.line,
        detail: format!("{}: {d}", s.opcode),
    };
    let vec_len = |o: &Opd, want: usize, what: &str| match o {
        Opd::Vec(v) if v.len() == want && v.iter().all(|x| matches!(x, Opd::Reg(_))) => Ok(()),
        _ => Err(bad(format!("{what} must be a vector of {want} registers"))),
    };
    let addr = |o: &Opd, what: &str| match o {
        Opd::Addr(..) => Ok(()),
        _ => Err(bad(format!("{what} must be an address `[...]`"))),
    };
    match f {
        FormOp::MmaSync(m) => {
            let [na, nb, nc, nd] = m.regs();
            vec_len(&args[0], nd, "D")?;
            vec_len(&args[1], na, "A")?;
            vec_len(&args[2], nb, "B")?;
            vec_len(&args[3], nc, "C")?;
        }
        FormOp::Ldmatrix { num, .. } => {
            vec_len(&args[0], *num as usize, "the destination")?;
            addr(&args[1], "the row address")?;
        }
        FormOp::Stmatrix { num, .. } => {
            addr(&args[0], "the row address")?;
            vec_len(&args[1], *num as usize, "the source")?;
        }
        FormOp::CpAsync { cg, hint } => {
            addr(&args[0], "the destination")?;
            addr(&args[1], "the source")?;
            // cp-size is an immediate: 4, 8 or 16 for .ca, 16 for .cg.
            match args[2] {
                Opd::Imm(16) => {}
                Opd::Imm(4 | 8) if !cg => {}
                _ => {
                    return Err(SimError::Unsupported {
                        opcode: format!(
                            "{} with cp-size other than {} (PTX ISA \"cp.async\")",
                            s.opcode,
                            if *cg { "16" } else { "4, 8 or 16" }
                        ),
                        ptx_line: s.line,
                    })
                }
            }
            let extra = args.len() - 3 - usize::from(*hint);
            if extra == 1 && !matches!(args[3], Opd::Reg(_) | Opd::Imm(_) | Opd::NotReg(_)) {
                return Err(bad(
                    "src-size or ignore-src must be a register or literal".into()
                ));
            }
        }
        FormOp::CpAsyncWait { all: false } => {
            if !matches!(args[0], Opd::Imm(_)) {
                return Err(bad("the group count must be an integer literal".into()));
            }
        }
        FormOp::CpAsyncArrive { .. } => addr(&args[0], "the mbarrier")?,
        FormOp::CpAsyncCommit | FormOp::CpAsyncWait { all: true } => {}
        FormOp::TcLdSt { st, shape, n, .. } => {
            // ld: r, [taddr]{, imm}; st: [taddr]{, imm}, r (PTX ISA "tcgen05.ld", "tcgen05.st").
            let want = shape.regs(u32::from(*n)) as usize;
            let (r, t, imm) = if *st {
                (args.len() - 1, 0, 1)
            } else {
                (0, 1, 2)
            };
            vec_len(&args[r], want, "the registers")?;
            if !matches!(args[t], Opd::Reg(_) | Opd::Addr(..)) {
                return Err(bad("the tensor-memory address".into()));
            }
            if args.len() == 3 && !matches!(args[imm], Opd::Imm(_)) {
                return Err(bad("immHalfSplitoff must be an integer literal".into()));
            }
        }
    }
    Ok(())
}

/// The 256-bit vector loads and stores of sm_100 (PTX ISA 8.8, "ld" and "st": `.v8` of 32-bit
/// types and `.v4` of 64-bit types, in the `.global` state space only); narrower vectors as
/// before. Anything else of 256 bits is refused.
pub(super) fn check_wide(
    s: &Stmt,
    space: super::Space,
    ty: super::Ty,
    vec: u8,
) -> Result<(), SimError> {
    let bits = ty.bits() * u32::from(vec);
    let ok = match vec {
        8 => ty.bits() == 32 && !matches!(ty, super::Ty::F16x2 | super::Ty::Bf16x2),
        4 if bits == 256 => true,
        _ => true,
    };
    if !ok || (bits == 256 && space != super::Space::Global) {
        return Err(SimError::Unsupported {
            opcode: format!(
                "{} (PTX ISA: a 256-bit access is .v8 of a 32-bit type or .v4 of a 64-bit type, in the .global state space)",
                s.opcode
            ),
            ptx_line: s.line,
        });
    }
    Ok(())
}

/// `ld`/`st` take a third operand, the 64-bit cache policy, exactly with `.L2::cache_hint`.
pub(super) fn check_ld_st_operands(s: &Stmt, args: &[Opd]) -> Result<(), SimError> {
    let hint = s.opcode.split('.').any(|m| m == "L2::cache_hint");
    if (args.len() == 3) != hint {
        return Err(SimError::Parse {
            ptx_line: s.line,
            detail: format!(
                "{}: {} operands ({})",
                s.opcode,
                args.len(),
                if hint {
                    "`.L2::cache_hint` takes the cache policy as a third"
                } else {
                    "a third operand is the cache policy of `.L2::cache_hint`"
                }
            ),
        });
    }
    Ok(())
}

/// `tcgen05.{ld,st}.sync.aligned.{16x64b,16x128b,16x256b,16x32bx2}.x{n}{.pack::16b}.b32`
/// (PTX ISA 9.7.16.8.3 "tcgen05.ld", 9.7.16.8.4 "tcgen05.st"), and `.32x32b` with
/// `.pack::16b` (ld) or `.unpack::16b` (st); the unpacked `.32x32b` stays `Op::TcLd`/`Op::TcSt`.
pub(super) fn decode_tcgen05_ldst(s: &Stmt, st: bool, mods: &[&str]) -> Result<Op, SimError> {
    use crate::units::tmem_shapes::TmemShape;
    let shape = mods
        .iter()
        .find_map(|m| TmemShape::parse(m))
        .ok_or_else(|| unsupported(s))?;
    let n = mods
        .iter()
        .find_map(|m| m.strip_prefix('x').and_then(|v| v.parse::<u32>().ok()))
        .filter(|n| n.is_power_of_two() && *n <= shape.max_num())
        .ok_or_else(|| unsupported(s))?;
    let xn = format!("x{n}");
    let shape_name = mods
        .iter()
        .find(|m| TmemShape::parse(m).is_some())
        .copied()
        .unwrap_or("");
    // ld packs (.pack::16b), st unpacks (.unpack::16b); not the other way round.
    let pack_mod = if st { "unpack::16b" } else { "pack::16b" };
    check_mods(
        s,
        &mods[1..],
        &["sync", "aligned", shape_name, &xn, pack_mod],
    )?;
    if !mods.contains(&"sync") || !mods.contains(&"aligned") || !mods.contains(&"b32") {
        return Err(unsupported(s));
    }
    let pack = mods.contains(&pack_mod);
    if shape == TmemShape::S32x32b && !pack {
        return Err(unsupported(s));
    }
    Ok(Op::Form(FormOp::TcLdSt {
        st,
        shape,
        n: n as u8,
        pack,
    }))
}

/// `tcgen05.cp.cta_group::{1,2}.{shape}{.multicast} [taddr], s-desc` (PTX ISA 9.7.16.9.2): every
/// shape with the multicast it requires. The decompressing forms (`.b8x16.b6x16_p32`,
/// `.b8x16.b4x16_p64`, 9.7.16.9.1) are refused here by name as not modelled.
pub(super) fn decode_tcgen05_cp(s: &Stmt, mods: &[&str]) -> Result<Op, SimError> {
    use crate::units::tmem_cp::CpShape;
    let rest = &mods[1..];
    if rest
        .iter()
        .any(|m| matches!(*m, "b8x16" | "b6x16_p32" | "b4x16_p64"))
    {
        return Err(SimError::Unsupported {
            opcode: format!(
                "{} (the decompressing tcgen05.cp forms .b8x16.b6x16_p32 / .b8x16.b4x16_p64 are not modelled)",
                s.opcode
            ),
            ptx_line: s.line,
        });
    }
    const SHAPES: [&str; 5] = ["128x256b", "128x128b", "4x256b", "64x128b", "32x128b"];
    const MULTICAST: [&str; 3] = ["warpx2::02_13", "warpx2::01_23", "warpx4"];
    let mut allowed = vec!["cta_group::1", "cta_group::2"];
    allowed.extend(SHAPES);
    allowed.extend(MULTICAST);
    check_mods(s, rest, &allowed)?;
    let groups = rest.iter().filter(|m| m.starts_with("cta_group::")).count();
    let shapes: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|m| SHAPES.contains(m))
        .collect();
    let casts: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|m| MULTICAST.contains(m))
        .collect();
    // The ISA's syntax has exactly one .cta_group and one .shape, and at most one .multicast.
    if groups != 1 || shapes.len() != 1 || casts.len() > 1 || rest.len() != 2 + casts.len() {
        return Err(unsupported(s));
    }
    let shape = CpShape::parse(shapes[0], casts.first().copied()).ok_or_else(|| {
        SimError::Unsupported {
            opcode: format!(
                "{} (PTX ISA \"tcgen05.cp\": .64x128b requires .warpx2::02_13 or .warpx2::01_23, .32x128b requires .warpx4, and the other shapes take no multicast)",
                s.opcode
            ),
            ptx_line: s.line,
        }
    })?;
    Ok(Op::TcCp {
        shape,
        cg2: rest.contains(&"cta_group::2"),
    })
}
