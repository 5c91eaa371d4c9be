//! Cluster launch control (`exec/clc.rs`, PTX ISA "clusterlaunchcontrol.try_cancel" and
//! "clusterlaunchcontrol.query_cancel") on small hand-written kernels: a work loop where one
//! thread per CTA counts its own tile, then asks for a not-yet-started CTA's tile until a request
//! fails. The correct loop is the harmless control (every tile counted exactly once, under every
//! policy); each planted bug must stop the run with its rule on the first schedule.

use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const TILES: u32 = 8;

/// The loop with `edit` applied: (`what`, `with`) text replacements of the correct kernel.
fn kernel(edits: &[(&str, &str)]) -> String {
    let mut k = "
.version 9.0
.target sm_100a
.address_size 64
.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .pred %p<8>;
\t.reg .b32 %r<32>;
\t.reg .b64 %rd<16>;
\t.reg .b128 %q<4>;
\t.shared .align 16 .b8 resp[16];
\t.shared .align 8 .b64 bar;
\tld.param.u64 %rd1, [k_param_0];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r1, %tid.x;
\tsetp.ne.u32 %p1, %r1, 0;
\t@%p1 bra DONE;
\tmov.u32 %r2, resp;
\tmov.u32 %r3, bar;
\tmbarrier.init.shared.b64 [%r3], 1;
\tmov.u32 %r4, %ctaid.x;
\tmov.u32 %r5, 0;
LOOP:
\tmul.wide.u32 %rd3, %r4, 4;
\tadd.s64 %rd4, %rd2, %rd3;
\tatom.global.add.u32 %r6, [%rd4], 1;
\tmbarrier.arrive.expect_tx.shared.b64 %rd5, [%r3], 16;
\tclusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r2], [%r3];
WAIT:
\tmbarrier.try_wait.parity.shared.b64 %p2, [%r3], %r5;
\t@!%p2 bra WAIT;
\txor.b32 %r5, %r5, 1;
\tld.shared.v2.b64 {%rd6, %rd7}, [%r2];
\tmov.b128 %q1, {%rd6, %rd7};
\tclusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q1;
\t@!%p3 bra DONE;
\tclusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r4, %q1;
\tbra LOOP;
DONE:
\tret;
}
"
    .to_string();
    for (what, with) in edits {
        assert!(k.contains(what), "the kernel has {what:?}");
        k = k.replacen(what, with, 1);
    }
    k
}

/// Runs `ptx` over TILES one-CTA clusters on a GPU of 2 SMs (so running CTAs find launches to
/// cancel); the count of each tile, or the error.
fn run_under(ptx: &str, policy: Policy) -> Result<Vec<u32>, SimError> {
    let p = Program::parse(ptx)?;
    let mut dev = Device::new();
    let out = dev.alloc(4 * u64::from(TILES));
    let l = Launch {
        kernel: "k".into(),
        grid: [TILES, 1, 1],
        block: [32, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 0,
        params: vec![Param::U64(out)],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        policy,
        sms: 2,
        max_steps: 1_000_000,
        ..Options::default()
    };
    run(&p, &mut dev, &l, &o)?;
    let mut bytes = vec![0u8; 4 * TILES as usize];
    assert!(dev.read(out, &mut bytes));
    Ok(bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

const POLICIES: [Policy; 4] = [
    Policy::Random,
    Policy::Pct { depth: 3 },
    Policy::AsyncEarly,
    Policy::AsyncLate,
];

/// The policies under which a response can still be in flight when the next instruction runs.
const IN_FLIGHT: [Policy; 3] = [Policy::Random, Policy::Pct { depth: 3 }, Policy::AsyncLate];

fn rule_of(r: Result<Vec<u32>, SimError>) -> String {
    match r {
        Err(SimError::Rule { rule, .. }) => rule.to_string(),
        Err(e) => format!("not a rule: {e}"),
        Ok(counts) => format!("passed with counts {counts:?}"),
    }
}

#[test]
fn the_correct_loop_counts_every_tile_once_under_every_policy() {
    for policy in POLICIES {
        let counts = run_under(&kernel(&[]), policy).unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        assert_eq!(counts, vec![1; TILES as usize], "{policy:?}");
    }
}

/// Each planted bug, the rule that must name it on the first schedule of every policy.
fn planted(edits: &[(&str, &str)], rule: &str) {
    planted_under(edits, rule, &POLICIES);
}

/// [`planted`] under `policies` only; under the others the bug must still stop the run on a rule.
fn planted_under(edits: &[(&str, &str)], rule: &str, policies: &[Policy]) {
    for policy in POLICIES.iter().filter(|p| !policies.contains(p)) {
        let got = rule_of(run_under(&kernel(edits), *policy));
        assert!(!got.starts_with("passed"), "{policy:?}: {got}");
    }
    for &policy in policies {
        assert_eq!(
            rule_of(run_under(&kernel(edits), policy)),
            rule,
            "{policy:?}"
        );
    }
}

#[test]
fn a_response_read_without_its_wait_is_read_before_complete() {
    planted(
        &[("\t@!%p2 bra WAIT;\n", ""), ("mbarrier.try_wait", "// ")],
        "clc-read-before-complete",
    );
}

#[test]
fn a_second_request_into_a_buffer_still_being_written_is_in_flight() {
    // The request is issued twice before the wait.
    let twice = "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r2], [%r3];\n";
    // Under async-early a response lands as its request issues: nothing is ever in flight,
    // and the second response's id, never decoded, is caught by another rule.
    planted_under(
        &[(twice, &format!("{twice}\t{twice}"))],
        "clc-request-in-flight",
        &IN_FLIGHT,
    );
}

#[test]
fn asking_again_after_a_failure_is_undefined() {
    // On failure, one more request instead of leaving.
    planted(
        &[("\t@!%p3 bra DONE;\n", "\t@!%p3 bra LOOP;\n")],
        "clc-after-failure",
    );
}

#[test]
fn decoding_the_ctaid_of_a_failed_response_is_undefined() {
    // The ctaid is decoded before the is_canceled test: on the last (failed) response it is read.
    planted(
        &[(
            "\tclusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q1;\n\t@!%p3 bra DONE;\n\tclusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r4, %q1;\n",
            "\tclusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r4, %q1;\n\tclusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p3, %q1;\n\t@!%p3 bra DONE;\n",
        )],
        "clc-ctaid-of-failed",
    );
}

#[test]
fn decoding_one_response_twice_uses_its_id_twice() {
    let decode = "\tclusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r4, %q1;\n";
    planted(
        &[(decode, &format!("{decode}{decode}"))],
        "clc-id-used-twice",
    );
}

#[test]
fn stopping_after_a_successful_response_drops_its_tile() {
    // Leaves whatever the response says: the cancelled CTA's tile is computed by nobody.
    planted(
        &[("\t@!%p3 bra DONE;\n", "\tbra DONE;\n")],
        "clc-canceled-id-dropped",
    );
}

#[test]
fn exiting_with_a_request_in_flight_is_undefined() {
    // The first request is issued and the CTA leaves at once.
    planted_under(
        &[("WAIT:\n", "\tbra DONE;\nWAIT:\n")],
        "clc-exit-in-flight",
        &IN_FLIGHT,
    );
}

#[test]
fn a_dropped_id_is_reported_at_the_request_that_cancelled_it() {
    // The rule fires when the cluster ends, where no instruction executes: the report names the
    // try_cancel whose successful response nobody decoded (its PTX line; this kernel has no
    // .loc, so no source line), not "PTX line 0".
    let ptx = kernel(&[("\t@!%p3 bra DONE;\n", "\tbra DONE;\n")]);
    let want = 1 + ptx
        .lines()
        .position(|l| l.contains("clusterlaunchcontrol.try_cancel"))
        .expect("the kernel issues a request") as u32;
    for policy in POLICIES {
        match run_under(&ptx, policy) {
            Err(SimError::Rule {
                rule,
                cta,
                warp,
                ptx_line,
                source_line,
                ..
            }) => {
                assert_eq!(rule, "clc-canceled-id-dropped", "{policy:?}");
                assert_eq!((ptx_line, source_line, warp), (want, 0, 0), "{policy:?}");
                assert!(cta < TILES, "{policy:?}: CTA {cta}");
            }
            other => panic!("{policy:?}: {}", rule_of(other)),
        }
    }
}
