//! The ladder: every step crate, in order. The runner and the cross-crate tests both list the
//! steps through it, so the tests need not build the runner binary to find them.
//!
//! A new step is its crate (a `pub static INFO: StepInfo` declaring its kernels and their facts),
//! one line in [`STEPS`] (plus the crate in this crate's and the workspace's `Cargo.toml`), and
//! its chapter.

use anyhow::{bail, Result};
use common::{Step, StepInfo};

/// The steps, in order: each crate's declared [`StepInfo`].
pub static STEPS: &[&StepInfo] = &[
    &step0_naive::INFO,
    &step1_warp_specialization::INFO,
    &step2_tiled_epilogue::INFO,
    &step3_collective_mma::INFO,
    &step4_persistent::INFO,
    &step5_epilogue_warpgroup::INFO,
    &step6_grid_tiling::INFO,
];

pub fn all() -> Vec<&'static dyn Step> {
    STEPS.iter().map(|&s| s as &'static dyn Step).collect()
}

pub fn get(n: u32) -> Result<&'static dyn Step> {
    match STEPS.iter().find(|s| s.number == n) {
        Some(&s) => Ok(s),
        None => bail!(
            "there is no step {n}; steps available: {}",
            STEPS
                .iter()
                .map(|s| s.number.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
