//! The seeded bugs and the stress pass over the ladder's steps, by what each step declares
//! (`common::step::KernelFile`'s launch and epilogue): every bug edits every kernel it claims, and
//! every class of the twin check has a planted bug on every twin it concerns. GPU-free, no
//! compiles.

use common::mutation::{find_twin, Expect, TwinCatch, TWIN_MUTATIONS};
use common::stress::{self, cases, PERSISTENT_CLUSTERS, PERSISTENT_SHAPE};
use common::{Epilogue, Shape, StepInfo};

fn twin(n: u32) -> &'static str {
    ladder::get(n)
        .expect("a step of the ladder")
        .info()
        .hopper
        .text
}

#[test]
fn twin_mutations_caught_at_run_time_edit_every_twin_they_name() {
    for t in TWIN_MUTATIONS
        .iter()
        .filter(|t| t.caught == TwinCatch::Stress)
    {
        let m = &t.mutation;
        // That `caught_by` names a rule of the twin check is `stress`'s test (stress
        // imports this module, not the other way round).
        for step in ladder::STEPS.iter().filter(|s| t.applies_to(s)) {
            let (twin, n) = (step.hopper.text, step.number);
            let edited = m
                .apply(twin)
                .unwrap_or_else(|e| panic!("{} on twin {n}: {e:#}", m.name));
            assert_ne!(edited, twin, "{} on twin {n}", m.name);
        }
    }
    // Both classes of the twin check have a planted bug on every twin they concern, and each
    // class more than one spelling of it.
    let all: Vec<&StepInfo> = ladder::STEPS.to_vec();
    let store_warp: Vec<&StepInfo> = ladder::STEPS
        .iter()
        .copied()
        .filter(|s| s.hopper.epilogue == Epilogue::StoreWarp)
        .collect();
    assert!(!store_warp.is_empty());
    for (rule, twins) in [
        ("release-before-wgmma-done", &all),
        ("staging-rewrite-before-read", &store_warp),
    ] {
        let planted: Vec<_> = TWIN_MUTATIONS
            .iter()
            .filter(|t| t.mutation.caught_by == rule)
            .collect();
        assert!(planted.len() >= 2, "{rule}: {} planted bugs", planted.len());
        for step in twins {
            assert!(
                planted.iter().any(|t| t.applies_to(step)),
                "{rule}: no planted bug on twin {}",
                step.number
            );
        }
    }
}

#[test]
fn the_run_time_bugs_edit_what_they_claim() {
    // Step 6's consumer loop, stock and with each bug: the release of the previous slot must
    // come after a wait that leaves at most one group (this k-block's) pending.
    let stock = twin(6);
    let deeper = find_twin("twin-release-before-wgmma-done")
        .unwrap()
        .mutation
        .apply(stock)
        .unwrap();
    assert!(deeper.contains("hp::wgmma_wait_group<2>();"));
    let early = find_twin("twin-release-before-wgmma-wait")
        .unwrap()
        .mutation
        .apply(stock)
        .unwrap();
    let release = early
        .find("load_empty[release.index()], r); hp::wgmma_wait_group<1>();")
        .expect("the wait moves behind the release");
    assert_eq!(
        early
            .matches("hp::wgmma_wait_group<1>();  // waited for only after")
            .count(),
        1,
        "only the main loop's release moves"
    );
    let commented = early
        .find("// [mutation twin-release-before-wgmma-wait] hp::wgmma_wait_group<1>();")
        .expect("the wait before the release is gone");
    assert!(commented < release);
    let freed = find_twin("twin-out-empty-before-read-retired")
        .unwrap()
        .mutation
        .apply(stock)
        .unwrap();
    assert!(freed.contains("wb::tma_store_wait_read<1>();  // the stores have read `out`"));
}

#[test]
fn the_pass_covers_every_stock_twin_and_stress_mutation_on_every_seed() {
    let (two, five) = (ladder::STEPS[2], ladder::STEPS[5]);
    assert!(!two.hopper.launch.schedule().loops() && five.hopper.launch.schedule().loops());
    let steps = [two, five];
    let c = cases(&steps, &[1, 2]);
    let stock: Vec<_> = c.iter().filter(|c| c.mutation.is_none()).collect();
    // Step 2 at the default shape, step 5 at both: per seed.
    assert_eq!(stock.len(), 2 * 3);
    assert!(stock.iter().all(|c| c.expect == Expect::Harmless));
    assert!(stock
        .iter()
        .any(|c| c.step == 5 && c.clusters == Some(PERSISTENT_CLUSTERS)));
    let m: Vec<_> = c.iter().filter(|c| c.mutation.is_some()).collect();
    assert!(m.iter().all(|c| c.expect == Expect::Caught));
    for t in TWIN_MUTATIONS {
        let n = m
            .iter()
            .filter(|c| c.mutation == Some(t.mutation.name))
            .count();
        let want = match t.caught {
            TwinCatch::Static => 0,
            // Two seeds at each of the step's shapes: one for step 2, two for step 5.
            TwinCatch::Stress => steps
                .iter()
                .filter(|s| t.applies_to(s))
                .map(|s| 2 * stress::shapes(s).len())
                .sum(),
        };
        assert_eq!(n, want, "{}", t.mutation.name);
    }
    // A persistent twin's mutation runs at both shapes: the default one and many short tiles.
    for shape in [Shape::DEFAULT, PERSISTENT_SHAPE] {
        assert!(m.iter().any(|c| c.step == 5 && c.shape == shape));
    }
    assert!(m
        .iter()
        .any(|c| c.name() == "t5-2048x2048x512-c2-s1-twin-no-out-empty-wait"));
}
