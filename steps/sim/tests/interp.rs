//! Instruction families on tiny hand-written kernels, with values from the PTX ISA's
//! definitions: integer and conversion semantics, warp collectives, CTA barriers, mbarrier
//! phases, hang reports, the step limit and traps.

use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

fn launch(kernel: &str, threads: u32, out: u64) -> Launch {
    Launch {
        kernel: kernel.into(),
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 1024,
        params: vec![Param::U64(out)],
        barrier_names: vec![(0, "smem.full".into())],
        sources: vec![],
    }
}

fn run_words(body: &str, threads: u32, words: usize) -> Result<Vec<u32>, SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<8>;\n\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmul.wide.u32 %rd3, %r1, 64;\n\tadd.s64 %rd4, %rd2, %rd3;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx)?;
    let mut dev = Device::new();
    let out = dev.alloc(64 * threads as u64);
    for policy in sim::EXPLORE_POLICIES {
        let o = Options {
            policy,
            max_steps: 100_000,
            ..Options::default()
        };
        run(&p, &mut dev, &launch("k", threads, out), &o)?;
    }
    let mut b = vec![0u8; words * 4];
    dev.read(out, &mut b);
    Ok(b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[test]
fn integer_and_conversion_semantics() {
    let body = "
	mov.u32 %r2, -7;
	shr.s32 %r3, %r2, 1;
	st.global.u32 [%rd4], %r3;
	shr.u32 %r4, %r2, 1;
	st.global.u32 [%rd4+4], %r4;
	div.s32 %r5, %r2, 2;
	st.global.u32 [%rd4+8], %r5;
	rem.s32 %r6, %r2, 2;
	st.global.u32 [%rd4+12], %r6;
	min.s32 %r7, %r2, 3;
	st.global.u32 [%rd4+16], %r7;
	mov.u32 %r8, 0xFFFFFFFF;
	mul.wide.u32 %rd5, %r8, 2;
	st.global.u64 [%rd4+20], %rd5;
	setp.lt.s32 %p1, %r2, 0;
	selp.u32 %r9, 11, 22, %p1;
	st.global.u32 [%rd4+28], %r9;
	setp.lt.u32 %p2, %r2, 0;
	selp.u32 %r10, 11, 22, %p2;
	st.global.u32 [%rd4+32], %r10;
	mov.b32 %r11, 0f3FC00000;
	cvt.rn.f16.f32 %rs1, %r11;
	mov.b32 %r12, 0fBF800000;
	cvt.rn.bf16.f32 %rs2, %r12;
	mov.b32 %r13, {%rs1, %rs2};
	st.global.u32 [%rd4+36], %r13;
	cvt.s64.s32 %rd6, %r2;
	st.global.u64 [%rd4+40], %rd6;
	not.b32 %r14, %r2;
	xor.b32 %r15, %r14, 0xF0;
	st.global.u32 [%rd4+48], %r15;
	shl.b32 %r16, %r2, 33;
	st.global.u32 [%rd4+52], %r16;";
    let w = run_words(body, 1, 14).unwrap();
    assert_eq!(w[0], (-4i32) as u32, "shr.s32 rounds toward -inf");
    assert_eq!(w[1], 0x7FFF_FFFC, "shr.u32 is logical");
    assert_eq!(w[2], (-3i32) as u32, "div.s32 truncates");
    assert_eq!(w[3], (-1i32) as u32, "rem.s32 takes the dividend's sign");
    assert_eq!(w[4], (-7i32) as u32);
    assert_eq!(
        (w[5] as u64) | ((w[6] as u64) << 32),
        0x1_FFFF_FFFE,
        "mul.wide.u32"
    );
    assert_eq!(w[7], 11, "setp.lt.s32: -7 < 0");
    assert_eq!(w[8], 22, "setp.lt.u32: 0xFFFFFFF9 is not < 0");
    assert_eq!(
        w[9], 0xBF80_3E00,
        "mov.b32 {{lo, hi}}: f16 1.5 low, bf16 -1.0 high"
    );
    assert_eq!(
        (w[10] as u64) | ((w[11] as u64) << 32),
        (-7i64) as u64,
        "cvt.s64.s32 sign-extends"
    );
    assert_eq!(w[12], 6 ^ 0xF0);
    assert_eq!(w[13], 0, "shl by 33 or more clears a b32");
}

#[test]
fn warp_collectives_and_cta_barriers() {
    // elect.sync picks lane 0 of each warp; every thread stores its tid to shared memory, waits
    // at bar.sync, then reads its neighbour's.
    let body = "
	{
	.reg .pred q;
	elect.sync %r2|q, 0xffffffff;
	selp.u32 %r3, 1, 0, q;
	}
	st.global.u32 [%rd4], %r2;
	st.global.u32 [%rd4+4], %r3;
	mov.u32 %r4, smem_raw;
	shl.b32 %r5, %r1, 2;
	add.s32 %r6, %r4, %r5;
	st.shared.u32 [%r6], %r1;
	bar.sync 0;
	xor.b32 %r7, %r1, 1;
	shl.b32 %r8, %r7, 2;
	add.s32 %r9, %r4, %r8;
	ld.shared.u32 %r10, [%r9];
	st.global.u32 [%rd4+8], %r10;
	setp.eq.s32 %p1, %r1, 33;
	vote.sync.ballot.b32 %r11, %p1, 0xffffffff;
	st.global.u32 [%rd4+12], %r11;
	bar.warp.sync -1;";
    let w = run_words(body, 64, 16 * 64).unwrap();
    for t in 0..64usize {
        let row = &w[t * 16..t * 16 + 4];
        assert_eq!(row[0], 0, "thread {t}: elected lane");
        assert_eq!(row[1], (t % 32 == 0) as u32, "thread {t}: is elected");
        assert_eq!(
            row[2],
            (t ^ 1) as u32,
            "thread {t}: neighbour after bar.sync"
        );
        assert_eq!(
            row[3],
            if t >= 32 { 1 << 1 } else { 0 },
            "thread {t}: ballot"
        );
    }
}

#[test]
fn a_fresh_barrier_has_completed_the_phase_before_phase_0() {
    // PTX ISA mbarrier: try_wait.parity with the parity of the phase before the current one
    // returns true at once, so a parity-1 wait on a fresh barrier passes.
    let body = "
	mov.u32 %r2, smem_raw;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r2], 1;
	selp.u32 %r3, 1, 0, w;
	}
	st.global.u32 [%rd4], %r3;
	mbarrier.arrive.shared::cta.b64 %rd7, [%r2];
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r2], 0;
	selp.u32 %r4, 1, 0, w;
	}
	st.global.u32 [%rd4+4], %r4;";
    let w = run_words(body, 1, 2).unwrap();
    assert_eq!(w, [1, 1]);
}

#[test]
fn a_hang_is_reported_at_once_with_the_barrier_and_its_state() {
    let body = "
	mov.u32 %r2, smem_raw;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 2;
	bar.sync 0;
	setp.eq.s32 %p2, %r1, 5;
	@%p2 mbarrier.arrive.shared::cta.b64 %rd7, [%r2];
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r2], 0;
	selp.u32 %r3, 1, 0, w;
	}
	setp.eq.s32 %p3, %r3, 0;
	@%p3 bra $L_wait;";
    let t0 = std::time::Instant::now();
    let e = run_words(body, 32, 1).unwrap_err();
    assert!(t0.elapsed().as_secs_f64() < 1.0, "reported within a second");
    let text = e.to_string();
    assert!(matches!(e, SimError::Deadlock { .. }), "{text}");
    assert!(text.contains("smem.full"), "the barrier's name: {text}");
    assert!(
        text.contains("with 1 of its 2 arrivals; 1 missing"),
        "{text}"
    );
    assert!(
        text.contains("last arrival: mbarrier.arrive by warp 0"),
        "{text}"
    );
    assert!(text.contains("parity 0"), "{text}");
}

#[test]
fn a_spin_loop_stops_at_the_step_limit_and_trap_is_a_fault() {
    let e = run_words("\t$L_spin:\n\tbra $L_spin;", 1, 1).unwrap_err();
    assert!(matches!(e, SimError::StepLimit { .. }), "{e}");
    let e = run_words("\ttrap;", 1, 1).unwrap_err();
    assert!(e.to_string().contains("trap"), "{e}");
}

#[test]
fn the_same_seed_replays_the_same_schedule() {
    let p = Program::parse(
        &std::fs::read_to_string(format!(
            "{}/tests/ptx/step0.f16.ptx",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    // Only the schedule matters here: zero inputs, no verification.
    let go = |seed: u64| {
        let mut dev = Device::new();
        let a = dev.alloc(128 * 128 * 2);
        let b = dev.alloc(256 * 128 * 2);
        let c = dev.alloc(128 * 256 * 2);
        let map = |base: u64, rows: u32| {
            sim::units::tensormap::TensorMapDesc::encode_tiled(
                sim::units::tensormap::TmaDtype::F16,
                2,
                base,
                &[128, rows as u64],
                &[256],
                &[64, rows],
                &[1, 1],
                sim::units::tensormap::TmaInterleave::None,
                sim::units::tensormap::TmaSwizzle::B128,
                sim::units::tensormap::TmaL2Promotion::None,
                sim::units::tensormap::TmaOobFill::None,
            )
            .unwrap()
        };
        let l = Launch {
            kernel: "gemm_kernel".into(),
            grid: [1, 1, 1],
            block: [128, 1, 1],
            cluster: [1, 1, 1],
            dynamic_smem: 4 * (128 + 256) * 64 * 2 + 2048,
            params: vec![
                Param::TensorMap(map(a, 128)),
                Param::TensorMap(map(b, 256)),
                Param::U64(c),
                Param::U32(128),
                Param::U32(256),
                Param::U32(128),
            ],
            ..Launch::default()
        };
        let o = Options {
            seed,
            policy: Policy::Random,
            trace: true,
            ..Options::default()
        };
        let r = run(&p, &mut dev, &l, &o).unwrap();
        (
            (
                r.instructions,
                r.retired_early,
                r.retired_late,
                r.barrier_phases,
            ),
            r.trace,
        )
    };
    let (a, b) = (go(5), go(5));
    assert_eq!(
        a, b,
        "same seed, same schedule and the same trace of events"
    );
    assert!(a
        .1
        .iter()
        .any(|e| e.contains("tcgen05.commit") && e.contains("arrived")));
    assert!(a
        .1
        .iter()
        .any(|e| e.contains("TMA load") && e.contains("landed")));
    assert_ne!(a.1, go(6).1, "another seed, another interleaving");
}
