//! The host side of the sm_90 stand-in for cluster launch control (`steps/include/clc_emu.cuh`):
//! the per-launch global array its atomics decide on, and the words of its faults. A kernel that
//! does not use cluster launch control has no `wb_emu_clc`, and nothing is installed.

use crate::gpu::CudaResultExt;
use anyhow::Result;
use cudarc::driver::{CudaModule, CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// Words of `wb_emu_clc` for a grid of `num_ctas` CTAs: the cursor, one claim per cluster (at
/// most one per CTA), 32 words per CTA (each warp's last decoded id, the failure seen), then the
/// residency words: the cap on started clusters, the count started and not done, and per cluster
/// the warps that observed a failed response.
pub fn words(num_ctas: usize) -> usize {
    1 + 33 * num_ctas + 2 + num_ctas
}

/// The clusters the stand-in lets run at once (clc_emu.cuh, "residency"): the simulator's bound
/// ([`crate::simulate::DEFAULT_CLUSTERS`] clusters resident), so that, as there, running clusters
/// find launches to cancel and a kernel's multi-tile path runs at the checks' small shapes.
pub const RESIDENT_CLUSTERS: u32 = crate::simulate::DEFAULT_CLUSTERS;
// 0 would start every cluster at once (no cap).
const _: () = assert!(RESIDENT_CLUSTERS > 0);

/// `wb_emu_clc`'s contents before each launch: zero, but for the residency cap, `resident`
/// clusters at once (at least 1; `runner step --clusters N` sets it, as it sets the simulator's).
pub fn initial(num_ctas: usize, resident: u32) -> Vec<u32> {
    let mut w = vec![0; words(num_ctas)];
    w[1 + 33 * num_ctas] = resident.max(1);
    w
}

/// Point the module's `wb_emu_clc` at `clc`, if the kernel has one.
pub fn install(s: &Arc<CudaStream>, module: &Arc<CudaModule>, clc: &CudaSlice<u32>) -> Result<()> {
    let Ok(mut view) = module.get_global("wb_emu_clc", s) else {
        return Ok(());
    };
    let (ptr, _g) = clc.device_ptr(s);
    s.memcpy_htod(&ptr.to_le_bytes(), &mut view)
        .cuda("copy to the GPU")?;
    Ok(())
}

/// The words of fault codes 40 to 43 (clc_emu.cuh's WB_EMU_ERR_CLC_*), `d0` their first detail.
pub fn describe(code: u32, d0: u64) -> String {
    match code {
        40 => format!("rule clc-read-before-complete: a clusterlaunchcontrol.try_cancel response was decoded before its bytes landed (it still held the emulation's poison, word {d0:#x}): read the response only after a wait on the mbarrier its request completes on (PTX ISA \"clusterlaunchcontrol.try_cancel\": only the mbarrier orders the asynchronous write)"),
        41 => format!("rule clc-id-used-twice: a warp decoded the id of cancelled cluster {d0} a second time: it read a response it had already consumed (a stale buffer), so that cluster's tile is computed twice and another one not at all; each successful response carries an id no other response carries (PTX ISA \"clusterlaunchcontrol.try_cancel\")"),
        42 => "rule clc-after-failure: clusterlaunchcontrol.try_cancel issued after this CTA observed a failed response, which the PTX ISA leaves undefined (\"clusterlaunchcontrol.try_cancel\"): stop asking after the first failure".to_string(),
        43 => format!("rule clc-ctaid-of-failed: clusterlaunchcontrol.query_cancel.get_first_ctaid of a failed response (word {d0:#x}), which the PTX ISA leaves undefined (\"clusterlaunchcontrol.query_cancel\"): decode the ctaid only when is_canceled is true"),
        c => format!("unknown cluster launch control fault code {c}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_residency_cap_sits_after_the_per_cta_words() {
        // clc_emu.cuh's resident_words(): wb_emu_clc + 1 + 33 * CTAs; then the running count
        // and one failure count per cluster (at most one cluster per CTA).
        for n in [1usize, 2, 6, 148] {
            let w = initial(n, RESIDENT_CLUSTERS);
            assert_eq!(w.len(), 1 + 33 * n + 2 + n);
            assert_eq!(w[1 + 33 * n], RESIDENT_CLUSTERS);
            assert_eq!(w.iter().filter(|&&x| x != 0).count(), 1);
        }
    }
}
