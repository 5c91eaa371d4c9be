//! Issue 37 item 7, in the persistent kernels: an epilogue that reads the accumulator before its
//! wait (`skip-acc-wait`, or `wrong-acc-parity`, whose wait on a fresh acc_full returns at once)
//! is named `ld-after-commit-wait` on the first schedule, as the GPU emulation names it
//! (`tcgen05_emu.cuh`, fault 32), even when the epilogue has handed the columns over (arrived on
//! acc_empty) before the first MMA overwrites them. The MMA warp of tile 0 rightly does not wait
//! for that hand-over, so `release-before-overwrite` would blame a correct MMA warp. Controls: the
//! stock kernel verifies on the same schedules, and an MMA warp without its acc_empty wait (the
//! epilogue read after its wait, the release is missing) is still `release-before-overwrite`.
//! `tests/ptx/mut/skip-acc-wait.step6.diff` deletes the acc_full wait loop (kernel.cu line 210 of
//! the fixture's source) from the committed step 6 PTX, the edit `runner inspect 6 --ptx --mutate
//! skip-acc-wait` makes to the current source.

mod gemm;

use gemm::{facts, fixture, mutant, Dtype, Problem};
use sim::{run, Options, Policy, Program, SimError};

const SCHEDULES: [(u64, Policy); 6] = [
    (1, Policy::Random),
    (2, Policy::Random),
    (3, Policy::Random),
    (1, Policy::Pct { depth: 3 }),
    (1, Policy::AsyncLate),
    (1, Policy::AsyncEarly),
];

/// The rule `ptx` (step 6, one cluster looping over the tiles) stops on under each schedule, or
/// "verified". At the seeded-bug test's shape (`mutations.rs`): 512x512x512, four tiles in one cluster.
fn outcomes(ptx: &str) -> Vec<String> {
    let prog = Program::parse(ptx).expect("the PTX parses");
    SCHEDULES
        .iter()
        .map(|&(seed, policy)| {
            let mut p = Problem::new(512, 512, 512, Dtype::F16, 7);
            let l = p.launch(&facts(6), 1).expect("a legal shape");
            let o = Options {
                seed,
                policy,
                ..Options::default()
            };
            let what = match run(&prog, &mut p.dev, &l, &o) {
                Ok(_) if p.verify(&p.dev).0 == 0 => "verified".to_string(),
                Ok(_) => "wrong result".to_string(),
                Err(SimError::Rule { rule, .. }) => rule.to_string(),
                Err(e) => format!("not a rule: {e}"),
            };
            format!("seed {seed} {policy:?}: {what}")
        })
        .collect()
}

fn all_are(got: &[String], want: &str) {
    for g in got {
        assert!(g.ends_with(&format!(": {want}")), "wanted {want}: {got:#?}");
    }
}

#[test]
fn a_persistent_epilogue_reading_before_its_wait_is_ld_after_commit_wait() {
    let parity = mutant("wrong-acc-parity", 6).expect("a committed diff");
    all_are(&outcomes(&parity), "ld-after-commit-wait");
    let skip = mutant("skip-acc-wait", 6).expect("a committed diff");
    all_are(&outcomes(&skip), "ld-after-commit-wait");
}

/// Step 6's MMA warp without its acc_empty wait (kernel.cu line 181 of the fixture's source: the
/// wait loop deleted, exercise 4.2's edit): it overwrites an accumulator its epilogue read after a
/// correct wait and has not yet released.
fn without_acc_empty_wait(stock: &str) -> String {
    let from = stock
        .find("$L__BB0_28:\n")
        .expect("the acc_empty wait loop");
    let back = "\t@%p11 bra \t$L__BB0_28;\n";
    let to = stock.find(back).expect("its back branch") + back.len();
    assert!(
        stock[from..to].contains("mbarrier.try_wait.parity.acquire.cluster"),
        "the loop waits"
    );
    format!("{}{}", &stock[..from], &stock[to..])
}

#[test]
fn the_controls_verify_or_keep_their_own_rule() {
    let stock = fixture("step6.f16");
    all_are(&outcomes(&stock), "verified");
    // The release is what is missing: the rule stays release-before-overwrite.
    all_are(
        &outcomes(&without_acc_empty_wait(&stock)),
        "release-before-overwrite",
    );
}
