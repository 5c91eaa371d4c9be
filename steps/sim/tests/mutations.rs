//! The seeded bugs (`common::mutation::MUTATIONS`) on the simulator: each must be caught (a
//! named rule, an explained deadlock, a fault or a wrong result, under one of four schedules)
//! and the harmless one must pass. Their PTX is `runner inspect N --ptx --mutate NAME` (f16):
//! committed as differences from the stock kernels for step 3 (and step 6 for the bugs only
//! persistent kernels have, and for `skip-acc-wait`, whose persistent form `acc_read_early.rs`
//! names); with `SIM_MUTANT_PTX` set, every `mut-NAME.stepN.ptx` in that folder (steps 0, 3
//! and 6).

mod gemm;

use gemm::{facts, mutant, Dtype, Problem};
use sim::{explore, Options, Program};

/// (mutation, expected catch: "" any, "harmless" must pass, else a text the error contains).
const EXPECT: &[(&str, &str)] = &[
    ("wrong-sbo", ""),
    ("skip-acc-wait", ""),
    ("skip-acc-commit", ""),
    ("no-fence-after-wait", ""),
    ("wrong-parity", ""),
    ("no-wait-ld", "rule wait-ld-before-handoff"),
    ("early-acc-release", ""),
    ("skip-load-full-wait", ""),
    ("tma-wrong-cta-barrier", ""),
    ("wrong-acc-parity", ""),
    ("no-producer-tail", ""),
    ("no-first-round-guard", "harmless"),
    ("no-proxy-fence", "rule proxy-fence-before-store"),
    ("single-staging-buffer", "rule wait-read-before-reuse"),
    ("wait-ld-after-use", "rule wait-ld-before-use"),
    ("alloc-cta-group-1", "rule one-cta-group"),
    ("acc-empty-extra-arrival", "of its 9 arrivals; 1 missing"),
    ("expect-tx-too-many", "transaction bytes are missing"),
];

fn shape(step: u32) -> (u32, u32, u32, u32) {
    match step {
        // K of 8 k-blocks: the 4-stage ring is refilled; persistent kernels take every tile
        // of the grid in one cluster, so the accumulator stages are reused.
        0..=2 => (256, 256, 512, 148),
        3 => (256, 512, 512, 148),
        _ => (512, 512, 512, 1),
    }
}

#[test]
fn every_seeded_bug_is_caught() {
    let mut failures = Vec::new();
    let mut lines = Vec::new();
    for (name, want) in EXPECT {
        for step in 0..=6 {
            let path = format!("{name} step {step}");
            let Some(ptx) = mutant(name, step) else {
                continue;
            };
            let f = facts(step);
            let (m, n, k, mc) = shape(step);
            let prog = Program::parse(&ptx).unwrap_or_else(|e| panic!("{path}: {e}"));
            let mut p = Problem::new(m, n, k, Dtype::F16, 11);
            let l = p.launch(&f, mc).unwrap();
            let dev = std::mem::take(&mut p.dev);
            let mut verify = |d: &sim::Device| {
                let (bad, _, first) = p.verify(d);
                if bad == 0 {
                    Ok(())
                } else {
                    Err(format!("wrong result: {bad} elements, first {first:?}"))
                }
            };
            let t0 = std::time::Instant::now();
            let r = explore(&prog, &dev, &l, &Options::default(), 4, &mut verify);
            let secs = t0.elapsed().as_secs_f64();
            let outcome = match &r {
                Ok(_) => "passed".to_string(),
                Err(e) => e.to_string(),
            };
            lines.push(format!("{name} step {step} ({secs:.2} s): {outcome}"));
            let ok = match (*want, &r) {
                ("harmless", r) => r.is_ok(),
                (_, Ok(_)) => false,
                ("", Err(_)) => true,
                (w, Err(e)) => e.error.contains(w),
            };
            // Hang reports name the barrier after the kernel's own expression for it.
            let ok = ok
                && (*name != "expect-tx-too-many"
                    || r.as_ref()
                        .is_err_and(|e| e.error.contains("smem.load_full[")));
            if !ok {
                failures.push(format!(
                    "{name} step {step}: wanted {want:?}, got {outcome}"
                ));
            }
        }
    }
    for l in &lines {
        eprintln!("{l}");
    }
    // Every seeded bug ran at least once.
    for (name, _) in EXPECT {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{name} step"))),
            "no PTX for seeded bug {name}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bugs only the simulator's rules name, made by editing the stock PTX here: each must be
/// caught by its rule.
#[test]
fn ptx_edits_are_caught_by_their_rule() {
    let step3 = gemm::fixture("step3.f16");
    let cases: &[(&str, String)] = &[
        (
            "rule fence-mbarrier-init",
            step3.replace("fence.mbarrier_init.release.cluster;", ""),
        ),
        (
            "rule fence-before-handoff",
            step3.replace("tcgen05.fence::before_thread_sync;", ""),
        ),
    ];
    for (want, ptx) in cases {
        assert_ne!(ptx, &step3, "the edit for {want} changed nothing");
        let prog = Program::parse(ptx).unwrap();
        let mut p = Problem::new(256, 512, 512, Dtype::F16, 3);
        let l = p.launch(&facts(3), 148).unwrap();
        let dev = std::mem::take(&mut p.dev);
        let r = explore(&prog, &dev, &l, &Options::default(), 4, &mut |_| Ok(()));
        match r {
            Err(e) => assert!(e.error.contains(want), "wanted {want}, got {e}"),
            Ok(_) => panic!("{want}: not caught"),
        }
    }
}
