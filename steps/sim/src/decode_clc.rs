//! Decoding of cluster launch control (PTX ISA 8.6+, sm_100: "clusterlaunchcontrol.try_cancel",
//! 9.7.13.17 in PTX ISA 9.0, and "clusterlaunchcontrol.query_cancel", 9.7.13.18) and of the one
//! `.b128` register form its response needs, `mov.b128 d, {lo, hi}`: one [`Op::Clc`] variant, so
//! the shared decoder and interpreter each gain one arm (`exec/clc.rs` runs them). A `.b128`
//! register takes two consecutive 64-bit slots of the register file (`decode.rs`).

use super::{check_mods, unsupported, Op};
use crate::error::SimError;
use crate::parse::Stmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClcOp {
    /// `clusterlaunchcontrol.try_cancel.async{.shared::cta}.mbarrier::complete_tx::bytes
    /// {.multicast::cluster::all}.b128 [addr], [mbar]`
    TryCancel { multicast: bool },
    /// `clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, response`
    IsCanceled,
    /// `clusterlaunchcontrol.query_cancel.get_first_ctaid{::x,::y,::z}.b32.b128 r, response`
    /// (`dim` 0-2), or the `.v4` form into `{x, y, z, _}` (`dim` None).
    FirstCtaid { dim: Option<u8> },
    /// `mov.b128 d, {lo, hi}`: two 64-bit halves into a `.b128` register.
    Pack,
}

/// `Some` for the opcodes this module owns.
pub(super) fn decode(s: &Stmt, base: &str, mods: &[&str]) -> Option<Result<Op, SimError>> {
    match base {
        "mov" if mods == ["b128"] => Some(Ok(Op::Clc(ClcOp::Pack))),
        "clusterlaunchcontrol" => Some(decode_clc(s, mods)),
        _ => None,
    }
}

fn decode_clc(s: &Stmt, mods: &[&str]) -> Result<Op, SimError> {
    match mods.first() {
        Some(&"try_cancel") => {
            check_mods(
                s,
                mods,
                &[
                    "try_cancel",
                    "async",
                    "shared::cta",
                    "mbarrier::complete_tx::bytes",
                    "multicast::cluster::all",
                    "b128",
                ],
            )?;
            if !mods.contains(&"async") || !mods.contains(&"mbarrier::complete_tx::bytes") {
                return Err(unsupported(s));
            }
            Ok(Op::Clc(ClcOp::TryCancel {
                multicast: mods.contains(&"multicast::cluster::all"),
            }))
        }
        Some(&"query_cancel") => match mods.get(1..) {
            Some(["is_canceled", "pred", "b128"]) => Ok(Op::Clc(ClcOp::IsCanceled)),
            Some(["get_first_ctaid", "v4", "b32", "b128"]) => {
                Ok(Op::Clc(ClcOp::FirstCtaid { dim: None }))
            }
            Some([d, "b32", "b128"]) => {
                let dim = match *d {
                    "get_first_ctaid::x" => 0,
                    "get_first_ctaid::y" => 1,
                    "get_first_ctaid::z" => 2,
                    _ => return Err(unsupported(s)),
                };
                Ok(Op::Clc(ClcOp::FirstCtaid { dim: Some(dim) }))
            }
            _ => Err(unsupported(s)),
        },
        _ => Err(unsupported(s)),
    }
}

impl super::Program {
    /// Whether any kernel of the module issues `clusterlaunchcontrol.try_cancel`. The proving
    /// mode (`prove.rs`) explores the orders of synchronisation events, but a response's landing
    /// and its two outcomes (a cancelled cluster or a failure) are not transitions it branches
    /// on, so it refuses such a kernel rather than call a partial exploration a proof.
    pub fn uses_cluster_launch_control(&self) -> bool {
        self.kernels.iter().any(|k| {
            k.code
                .iter()
                .any(|i| matches!(i.op, Op::Clc(ClcOp::TryCancel { .. })))
        })
    }
}
