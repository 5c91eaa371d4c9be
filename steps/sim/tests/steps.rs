//! Every stock Blackwell kernel's sm_100a PTX, simulated and verified against an fp64
//! reference.

mod gemm;

use gemm::{facts, fixture, simulate_gemm, Dtype};
use sim::Policy;

#[allow(clippy::too_many_arguments)]
fn check(
    step: u32,
    dtype: Dtype,
    m: u32,
    n: u32,
    k: u32,
    seed: u64,
    policy: Policy,
    max_clusters: u32,
) {
    let name = format!(
        "step{step}.{}",
        if dtype == Dtype::F16 { "f16" } else { "bf16" }
    );
    let f = facts(step);
    let out = simulate_gemm(
        &fixture(&name),
        &f,
        m,
        n,
        k,
        dtype,
        seed,
        policy,
        max_clusters,
    )
    .unwrap_or_else(|e| panic!("{name} {m}x{n}x{k} seed {seed} {}: {e}", policy.name()));
    assert_eq!(
        out.bad, 0,
        "{name} {m}x{n}x{k}: {} wrong elements, first {:?}, max error {}",
        out.bad, out.first_bad, out.max_err
    );
    assert!(out.report.executed("tcgen05.mma") > 0, "no MMA executed");
}

#[test]
fn step0_f16_verifies() {
    check(0, Dtype::F16, 256, 256, 128, 1, Policy::Random, 148);
}

#[test]
fn step1_f16_verifies() {
    check(1, Dtype::F16, 256, 256, 256, 2, Policy::Random, 148);
}

#[test]
fn step2_f16_verifies() {
    check(2, Dtype::F16, 256, 256, 128, 3, Policy::Random, 148);
}

#[test]
fn step3_f16_verifies() {
    check(3, Dtype::F16, 256, 512, 128, 4, Policy::Random, 148);
}

#[test]
fn step4_f16_verifies_with_several_tiles_per_cluster() {
    check(4, Dtype::F16, 512, 512, 128, 5, Policy::Random, 2);
}

#[test]
fn step5_f16_verifies_with_several_tiles_per_cluster() {
    check(5, Dtype::F16, 512, 512, 128, 6, Policy::Random, 2);
}

#[test]
fn step6_f16_verifies_with_several_tiles_per_cluster() {
    check(6, Dtype::F16, 512, 512, 128, 7, Policy::Random, 2);
}

#[test]
fn bf16_kernels_verify() {
    check(0, Dtype::Bf16, 256, 256, 128, 8, Policy::Random, 148);
    check(3, Dtype::Bf16, 256, 512, 192, 9, Policy::Random, 148);
    check(6, Dtype::Bf16, 512, 512, 128, 10, Policy::Random, 1);
}

/// Every stock kernel under every exploration policy (both extremes of asynchronous timing,
/// random, PCT), with refills of the ring (K = 8 k-blocks) and, for the persistent kernels,
/// every tile of the grid in one cluster so the accumulator stages are reused.
#[test]
fn every_stock_kernel_verifies_under_every_policy() {
    for step in 0..=6 {
        let (m, n, mc) = match step {
            0..=2 => (256, 256, 148),
            3 => (256, 512, 148),
            _ => (512, 512, 1),
        };
        for (i, policy) in sim::EXPLORE_POLICIES.iter().enumerate() {
            check(step, Dtype::F16, m, n, 512, 100 + i as u64, *policy, mc);
        }
    }
}

/// Shapes whose K is not a multiple of the ring (5 k-blocks), and persistent grids whose
/// clusters take several tiles each, unevenly where the tiles do not divide.
#[test]
fn odd_shapes_and_uneven_persistent_grids_verify() {
    check(1, Dtype::F16, 384, 512, 320, 21, Policy::Random, 148);
    check(
        2,
        Dtype::F16,
        128,
        512,
        320,
        22,
        Policy::Pct { depth: 3 },
        148,
    );
    check(3, Dtype::F16, 512, 256, 320, 23, Policy::AsyncLate, 148);
    check(4, Dtype::F16, 768, 512, 192, 24, Policy::Random, 4);
    check(5, Dtype::F16, 768, 512, 192, 25, Policy::AsyncEarly, 4);
    check(6, Dtype::F16, 1024, 768, 320, 26, Policy::Random, 5);
}

/// With `SIM_STOCK_PTX` set (a folder of `stepN.{f16,bf16}.ptx` from `runner inspect N --ptx`),
/// every stock kernel there, both dtypes, verifies; the role split of what executed is
/// plausible (the MMA issued by one warp role, TMA loads by the producer).
#[test]
fn stock_ptx_from_a_folder_verifies() {
    let Ok(dir) = std::env::var("SIM_STOCK_PTX") else {
        return;
    };
    for step in 0..=6 {
        for (dt, dtype) in [("f16", Dtype::F16), ("bf16", Dtype::Bf16)] {
            let Ok(ptx) = std::fs::read_to_string(format!("{dir}/step{step}.{dt}.ptx")) else {
                continue;
            };
            let (m, n, mc) = match step {
                0..=2 => (256, 256, 148),
                3 => (256, 512, 148),
                _ => (512, 512, 1),
            };
            let out = simulate_gemm(&ptx, &facts(step), m, n, 320, dtype, 31, Policy::Random, mc)
                .unwrap_or_else(|e| panic!("step {step} {dt}: {e}"));
            assert_eq!(out.bad, 0, "step {step} {dt}: {:?}", out.first_bad);
            let roles = out.report.per_role();
            assert!(roles
                .iter()
                .any(|(r, o, _)| r.contains("mma") && o.starts_with("tcgen05.mma")));
            eprintln!(
                "step {step} {dt}: verified, {} instructions",
                out.report.instructions
            );
        }
    }
}
