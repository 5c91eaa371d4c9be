//! The ladder: every step crate, in order. The runner and the cross-crate tests both list the
//! steps through it, so the tests need not build the runner binary to find them.

use anyhow::{bail, Result};
use common::Step;

static STEP0: step0_naive::Step0 = step0_naive::Step0;

static STEP1: step1_warp_specialization::Step1 = step1_warp_specialization::Step1;

static STEP2: step2_tiled_epilogue::Step2 = step2_tiled_epilogue::Step2;

static STEP3: step3_collective_mma::Step3 = step3_collective_mma::Step3;

static STEP4: step4_persistent::Step4 = step4_persistent::Step4;

static STEP5: step5_epilogue_warpgroup::Step5 = step5_epilogue_warpgroup::Step5;

static STEP6: step6_grid_tiling::Step6 = step6_grid_tiling::Step6;

pub fn all() -> Vec<&'static dyn Step> {
    vec![&STEP0, &STEP1, &STEP2, &STEP3, &STEP4, &STEP5, &STEP6]
}

pub fn get(n: u32) -> Result<&'static dyn Step> {
    let steps = all();
    match steps.iter().find(|s| s.info().number == n) {
        Some(s) => Ok(*s),
        None => bail!(
            "there is no step {n}; steps available: {}",
            steps
                .iter()
                .map(|s| s.info().number.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
