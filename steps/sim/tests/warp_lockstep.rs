//! Warps run in lockstep (`src/lockstep.rs`): the lanes of a converged warp polling one
//! mbarrier with `bra.uni` see one barrier state, as the one try_wait a converged warp issues
//! on hardware does; a wait for the wrong parity still deadlocks with its report.

use sim::prove::{explore_all, Bounds, Verdict};
use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";
const ROUNDS: u32 = 4;

/// Warp 0 (32 lanes) polls barrier `full` twice per round: parity 0 (an odd phase count: the
/// round's first arrival) then parity 1 (its second); lane 0 acknowledges each on barrier
/// `ack`. Thread 32 (warp 1) arrives on `full`, waits for the acknowledgement, arrives again,
/// waits again: two phases of `full` per round, so a lane that sampled `full` after lane 0's
/// acknowledgement and the second arrival would see its parity flipped back. After the loop the
/// poller confirms the last phase with parity `final_parity` (1: it completed; 0: a wait for a
/// phase that never comes).
fn kernel(final_parity: u32) -> String {
    format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];
.visible .entry k(
	.param .u64 k_param_0
)
{{
	.reg .pred %p<16>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<16>;
	ld.param.u64 %rd1, [k_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	mov.u32 %r20, smem_raw;
	add.s32 %r21, %r20, 8;
	setp.ne.s32 %p1, %r1, 0;
	@%p1 bra INITED;
	mbarrier.init.shared::cta.b64 [%r20], 1;
	mbarrier.init.shared::cta.b64 [%r21], 1;
INITED:
	bar.sync 0;
	setp.ge.u32 %p2, %r1, 32;
	@%p2 bra ARRIVER;
	setp.eq.s32 %p4, %r1, 0;
	mov.u32 %r5, 0;
ROUND:
WAIT0:
	mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r20], 0;
	@!%p3 bra.uni WAIT0;
	@%p4 mbarrier.arrive.shared::cta.b64 %rd7, [%r21];
WAIT1:
	mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r20], 1;
	@!%p3 bra.uni WAIT1;
	@%p4 mbarrier.arrive.shared::cta.b64 %rd7, [%r21];
	add.s32 %r5, %r5, 1;
	setp.lt.u32 %p5, %r5, {ROUNDS};
	@%p5 bra.uni ROUND;
CONFIRM:
	mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r20], {final_parity};
	@!%p3 bra.uni CONFIRM;
	st.global.u32 [%rd4], %r5;
	bra.uni DONE;
ARRIVER:
	setp.ne.s32 %p6, %r1, 32;
	@%p6 bra DONE;
	mov.u32 %r6, 0;
AROUND:
	mbarrier.arrive.shared::cta.b64 %rd8, [%r20];
AWAIT0:
	mbarrier.try_wait.parity.shared::cta.b64 %p7, [%r21], 0;
	@!%p7 bra AWAIT0;
	mbarrier.arrive.shared::cta.b64 %rd8, [%r20];
AWAIT1:
	mbarrier.try_wait.parity.shared::cta.b64 %p7, [%r21], 1;
	@!%p7 bra AWAIT1;
	add.s32 %r6, %r6, 1;
	setp.lt.u32 %p8, %r6, {ROUNDS};
	@%p8 bra AROUND;
	st.global.u32 [%rd4], %r6;
DONE:
	ret;
}}
"
    )
}

fn launch(out: u64) -> Launch {
    Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [64, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 1024,
        params: vec![Param::U64(out)],
        barrier_names: vec![(0, "full".into()), (8, "ack".into())],
        sources: vec![],
    }
}

fn run_one(final_parity: u32, seed: u64, policy: Policy) -> Result<Vec<u32>, SimError> {
    let p = Program::parse(&kernel(final_parity))?;
    let mut dev = Device::new();
    let out = dev.alloc(4 * 64);
    let o = Options {
        seed,
        policy,
        max_steps: 1_000_000,
        ..Options::default()
    };
    run(&p, &mut dev, &launch(out), &o)?;
    let mut b = vec![0u8; 4 * 33];
    dev.read(out, &mut b);
    Ok(b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[test]
fn converged_lanes_see_one_barrier_state() {
    for policy in sim::EXPLORE_POLICIES {
        for seed in 1..=8 {
            let w = run_one(1, seed, policy)
                .unwrap_or_else(|e| panic!("seed {seed} {}: {e}", policy.name()));
            // Every poller lane and the arriver went through all rounds.
            assert!(w.iter().all(|&x| x == ROUNDS), "{w:?}");
        }
    }
}

#[test]
fn a_wait_for_the_wrong_parity_still_deadlocks() {
    for policy in sim::EXPLORE_POLICIES {
        for seed in 1..=8 {
            let e = run_one(0, seed, policy).expect_err("the wrong-parity wait never passes");
            let text = e.to_string();
            assert!(matches!(e, SimError::Deadlock { .. }), "{text}");
            assert!(
                text.contains("full"),
                "the report names the barrier: {text}"
            );
        }
    }
}

#[test]
fn the_proving_mode_takes_a_converged_try_wait_as_one_transition() {
    for (parity, clean) in [(1, true), (0, false)] {
        let p = Program::parse(&kernel(parity)).unwrap();
        let mut dev = Device::new();
        let out = dev.alloc(4 * 64);
        let proof = explore_all(
            &p,
            &dev,
            &launch(out),
            &Options::default(),
            Bounds {
                max_states: 200_000,
                max_runs: 20_000,
            },
            &mut |_| Ok(()),
            &mut || false,
        );
        match (&proof.verdict, clean) {
            (Verdict::Clean, true) => {}
            (
                Verdict::Error {
                    cause: Some(SimError::Deadlock { .. }),
                    ..
                },
                false,
            ) => {}
            _ => panic!("final parity {parity}: {proof}"),
        }
    }
}
