//! `tcgen05.mma` with A in tensor memory (`[a-tmem]`, PTX ISA 9.7.16.9.1 "tcgen05.mma"; A's
//! placement: 9.7.16.10.5 "Data Path Layout Organization", `units/mma_ts.rs`) on a
//! hand-written kernel: 128 threads copy a K-major B (no swizzle, LBO 128, SBO 256) into shared
//! memory; thread r stores row r of A (32 bf16, two a 32-bit column) into tensor-memory lane r,
//! columns 32..48, with `tcgen05.st`; after `tcgen05.wait::st`, the fence, a barrier and the
//! fence (the ISA's canonical st -> other thread pattern: "Specialized Inter-thread
//! Synchronization"), thread 0 issues two MMAs (M = 128, N = 16, K = 16 each: A at columns 32
//! and 40), commits, and every warp reads D back with `tcgen05.ld`. The reference is a plain
//! f64 sum over the bf16 values the test wrote.
//!
//! Planted bugs: A stored by the other warps with no barrier before the MMA, the barrier
//! without the storing warps' `tcgen05.fence::before_thread_sync`, and A stored again before
//! the wait on the MMA's commit: the MMA's read of A's columns races with the stores
//! (`data-race`), decided by happens-before on every first schedule. The control stores A
//! again after that wait and `tcgen05.fence::after_thread_sync`. An MMA that reads A from
//! columns nothing stored is an `uninitialised-read`.

use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const M: usize = 128;
const N: usize = 16;
const K: usize = 32;
const B_IMAGE: usize = 1024; // two K = 16 slices of 16 rows, 512 bytes each

/// The kernel; `hand_off` is the code between A's stores and the MMA, `early` runs after the
/// commit before the wait on its barrier, `late` after that wait and its fence.
fn kernel(hand_off: &str, early: &str, late: &str) -> String {
    format!(
        ".version 9.0\n.target sm_100a\n.address_size 64\n.extern .shared .align 1024 .b8 smem_raw[];\n\
.visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u64 k_param_1,\n\t.param .u64 k_param_2,\n\t.param .u64 k_param_3,\n\t.param .u32 k_param_4\n)\n{{\n\
\t.reg .pred %p<16>;\n\t.reg .b32 %r<128>;\n\t.reg .b64 %rd<64>;\n\
\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd1, %rd1;\n\
\tld.param.u64 %rd2, [k_param_1];\n\tcvta.to.global.u64 %rd2, %rd2;\n\
\tld.param.u64 %rd3, [k_param_2];\n\tcvta.to.global.u64 %rd3, %rd3;\n\
\tld.param.u64 %rd4, [k_param_3];\n\tld.param.u32 %r40, [k_param_4];\n\
\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, smem_raw;\n\
\tmov.u32 %r30, %r1;\n\
COPY:\n\tsetp.ge.u32 %p6, %r30, {words};\n\t@%p6 bra COPIED;\n\
\tmul.wide.u32 %rd20, %r30, 4;\n\tadd.s64 %rd21, %rd1, %rd20;\n\tld.global.u32 %r31, [%rd21];\n\
\tshl.b32 %r32, %r30, 2;\n\tadd.s32 %r33, %r2, %r32;\n\tst.shared.u32 [%r33+1024], %r31;\n\
\tadd.s32 %r30, %r30, 128;\n\tbra COPY;\n\
COPIED:\n\tfence.proxy.async.shared::cta;\n\
\tsetp.eq.u32 %p1, %r1, 0;\n\tsetp.lt.u32 %p2, %r1, 32;\n\
\t@%p1 mbarrier.init.shared::cta.b64 [%r2+8], 1;\n\t@%p1 fence.mbarrier_init.release.cluster;\n\
\t@%p2 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 64;\n\
\t@%p2 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n\
\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n\
\tld.shared.u32 %r3, [%r2];\n\
\tshr.u32 %r11, %r1, 5;\n\tshl.b32 %r11, %r11, 21;\n\tadd.s32 %r12, %r3, %r11;\n\
\tadd.s32 %r13, %r12, 32;\n\
\tmul.wide.u32 %rd22, %r1, 64;\n\tadd.s64 %rd23, %rd2, %rd22;\n\
\tld.global.v4.u32 {{%r50, %r51, %r52, %r53}}, [%rd23];\n\tld.global.v4.u32 {{%r54, %r55, %r56, %r57}}, [%rd23+16];\n\
\tld.global.v4.u32 {{%r58, %r59, %r60, %r61}}, [%rd23+32];\n\tld.global.v4.u32 {{%r62, %r63, %r64, %r65}}, [%rd23+48];\n\
\ttcgen05.st.sync.aligned.32x32b.x16.b32 [%r13], {{%r50, %r51, %r52, %r53, %r54, %r55, %r56, %r57, %r58, %r59, %r60, %r61, %r62, %r63, %r64, %r65}};\n\
{hand_off}\n\
\tadd.s32 %r15, %r2, 1024;\n\tshr.u32 %r15, %r15, 4;\n\tcvt.u64.u32 %rd13, %r15;\n\tor.b64 %rd12, %rd13, %rd4;\n\
\tadd.s64 %rd15, %rd12, 32;\n\
\tadd.s32 %r16, %r3, 32;\n\tadd.s32 %r17, %r3, 40;\n\
\t@%p1 tcgen05.mma.cta_group::1.kind::f16 [%r3], [%r16], %rd12, %r40, 0;\n\
\t@%p1 tcgen05.mma.cta_group::1.kind::f16 [%r3], [%r17], %rd15, %r40, 1;\n\
\t@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2+8];\n\
{early}\n\
WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r2+8], 0;\n\t@!%p5 bra WAIT;\n\
\ttcgen05.fence::after_thread_sync;\n\
{late}\n\
\ttcgen05.ld.sync.aligned.32x32b.x16.b32 {{%r70, %r71, %r72, %r73, %r74, %r75, %r76, %r77, %r78, %r79, %r80, %r81, %r82, %r83, %r84, %r85}}, [%r12];\n\
\ttcgen05.wait::ld.sync.aligned;\n\
\tadd.s64 %rd24, %rd3, %rd22;\n\
\tst.global.v4.u32 [%rd24], {{%r70, %r71, %r72, %r73}};\n\tst.global.v4.u32 [%rd24+16], {{%r74, %r75, %r76, %r77}};\n\
\tst.global.v4.u32 [%rd24+32], {{%r78, %r79, %r80, %r81}};\n\tst.global.v4.u32 [%rd24+48], {{%r82, %r83, %r84, %r85}};\n\
\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n\
\t@%p2 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 64;\n\tret;\n}}\n",
        words = B_IMAGE / 4,
    )
}

/// Every thread stores its row of A again (the same values), as a next tile's A would.
const RESTORE: &str = "\ttcgen05.st.sync.aligned.32x32b.x16.b32 [%r13], {%r50, %r51, %r52, %r53, %r54, %r55, %r56, %r57, %r58, %r59, %r60, %r61, %r62, %r63, %r64, %r65};\n\ttcgen05.wait::st.sync.aligned;";

/// The ISA's canonical hand-off of the stores to the MMA thread.
const CANONICAL: &str = "\ttcgen05.wait::st.sync.aligned;\n\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;";

/// B's descriptor template: no swizzle, LBO 128, SBO 256, version 1 (start added by the
/// kernel; the second MMA's B starts 512 bytes on: +32 in the 16-byte field).
fn desc_template() -> u64 {
    ((128u64 >> 4) << 16) | ((256u64 >> 4) << 32) | (1u64 << 46)
}

/// kind::f16, F32 D, BF16 A and B, K-major, N = 16, M = 128.
fn idesc() -> u32 {
    (1 << 4) | (1 << 7) | (1 << 10) | (((N as u32) >> 3) << 17) | (((M as u32) >> 4) << 24)
}

/// A bf16 with a short mantissa (exact products and sums in f32), from a counter.
fn bf16_of(x: u32) -> (u16, f64) {
    let v = ((x * 7 + 3) % 17) as f32 * 0.25 - 2.0;
    ((v.to_bits() >> 16) as u16, v as f64)
}

struct Case {
    b_img: Vec<u8>,
    a_rows: Vec<u8>,
    want: Vec<f64>,
}

fn case() -> Case {
    // B: row j, element k (k < 32) at slice k / 16, K-major core matrices of 8 rows.
    let mut b_img = vec![0u8; B_IMAGE];
    let mut b = vec![[0f64; K]; N];
    for (j, row) in b.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            let (bits, val) = bf16_of((j * 31 + k * 5 + 1) as u32);
            let (s, kk) = (k / 16, (k % 16) * 2);
            let o = s * 512 + (j / 8) * 256 + (kk / 16) * 128 + (j % 8) * 16 + kk % 16;
            b_img[o..o + 2].copy_from_slice(&bits.to_le_bytes());
            *v = val;
        }
    }
    // A: row i as thread i stores it, 32 bf16 (element k in bits 16 (k % 2) of word k / 2).
    let mut a_rows = vec![0u8; M * K * 2];
    let mut a = vec![[0f64; K]; M];
    for (i, row) in a.iter_mut().enumerate() {
        for (k, v) in row.iter_mut().enumerate() {
            let (bits, val) = bf16_of((i * 13 + k * 3) as u32);
            let o = (i * K + k) * 2;
            a_rows[o..o + 2].copy_from_slice(&bits.to_le_bytes());
            *v = val;
        }
    }
    let want = (0..M * N)
        .map(|x| {
            let (i, j) = (x / N, x % N);
            (0..K).map(|k| a[i][k] * b[j][k]).sum()
        })
        .collect();
    Case {
        b_img,
        a_rows,
        want,
    }
}

fn launch(hand_off: &str, c: &Case, o: &Options) -> Result<Vec<f32>, SimError> {
    launch_with(hand_off, "", "", c, o)
}

fn launch_with(
    hand_off: &str,
    early: &str,
    late: &str,
    c: &Case,
    o: &Options,
) -> Result<Vec<f32>, SimError> {
    run_ptx(&kernel(hand_off, early, late), c, o)
}

fn run_ptx(ptx: &str, c: &Case, o: &Options) -> Result<Vec<f32>, SimError> {
    let p = Program::parse(ptx)?;
    let mut dev = Device::new();
    let put = |dev: &mut Device, b: &[u8]| {
        let a = dev.alloc(b.len() as u64);
        dev.write(a, b);
        a
    };
    let pb = put(&mut dev, &c.b_img);
    let pa = put(&mut dev, &c.a_rows);
    let po = put(&mut dev, &vec![0xFFu8; M * N * 4]);
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [128, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 4096,
        params: vec![
            Param::U64(pb),
            Param::U64(pa),
            Param::U64(po),
            Param::U64(desc_template()),
            Param::U32(idesc()),
        ],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        max_steps: 2_000_000,
        ..o.clone()
    };
    run(&p, &mut dev, &l, &o)?;
    let mut out = vec![0u8; M * N * 4];
    dev.read(po, &mut out);
    Ok(out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Every first schedule: seeds 1-3 under each policy.
fn schedules() -> Vec<Options> {
    let mut v = Vec::new();
    for seed in 1..=3 {
        for policy in [
            Policy::Random,
            Policy::Pct { depth: 3 },
            Policy::AsyncLate,
            Policy::AsyncEarly,
        ] {
            v.push(Options {
                seed,
                policy,
                ..Options::default()
            });
        }
    }
    v
}

#[test]
fn a_from_tensor_memory_matches_a_reference_on_every_schedule() {
    let c = case();
    for o in schedules() {
        let got = launch(CANONICAL, &c, &o)
            .unwrap_or_else(|e| panic!("seed {} {:?}: {e}", o.seed, o.policy));
        for (x, (g, w)) in got.iter().zip(&c.want).enumerate() {
            assert_eq!(
                *g as f64,
                *w,
                "D[{}][{}] (seed {} {:?})",
                x / N,
                x % N,
                o.seed,
                o.policy
            );
        }
    }
}

/// The planted hand-offs, each with the rule every first schedule must name.
fn planted() -> Vec<(&'static str, &'static str)> {
    vec![
        // No barrier at all: warps 1-3 store their rows of A while thread 0 issues the MMA.
        (
            "no barrier between A's stores and the MMA",
            "\ttcgen05.wait::st.sync.aligned;\n\ttcgen05.fence::before_thread_sync;",
        ),
        // The barrier, but the storing warps do not fence their stores before it.
        (
            "no tcgen05.fence::before_thread_sync after A's stores",
            "\ttcgen05.wait::st.sync.aligned;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;",
        ),
    ]
}

#[test]
fn a_stored_without_its_hand_off_races_with_the_mma_on_every_first_schedule() {
    let c = case();
    let check = |what: &str, r: Result<Vec<f32>, SimError>| {
        let e = r.expect_err(what);
        let SimError::Rule { rule, detail, .. } = &e else {
            panic!("{what}: not a rule: {e}");
        };
        assert_eq!(*rule, "data-race", "{what}: {detail}");
        assert!(
            detail.contains("tensor-memory column") && detail.contains("(mma/cp)"),
            "{what}: {detail}"
        );
    };
    for o in schedules() {
        for (what, hand_off) in planted() {
            check(what, launch(hand_off, &c, &o));
        }
        // A overwritten while the MMA that reads it may still run: the commit's barrier was
        // not waited on (the MMA's read completes with its commit, like its D write).
        check(
            "A overwritten before the commit's wait",
            launch_with(CANONICAL, RESTORE, "", &c, &o),
        );
    }
}

#[test]
fn a_read_from_columns_nothing_stored_is_an_uninitialised_read() {
    // The first MMA reads A at column 48, which no tcgen05.st wrote (A is at 32..48).
    let c = case();
    for o in schedules() {
        let p = kernel(CANONICAL, "", "").replacen(
            "add.s32 %r16, %r3, 32;",
            "add.s32 %r16, %r3, 48;",
            1,
        );
        let e = run_ptx(&p, &c, &o).expect_err("A never stored");
        let SimError::Rule { rule, detail, .. } = &e else {
            panic!("not a rule: {e}");
        };
        assert_eq!(*rule, "uninitialised-read", "{detail}");
        assert!(
            detail.contains("A operand") && detail.contains("column 48"),
            "{detail}"
        );
    }
}

#[test]
fn a_overwritten_after_the_commit_wait_and_fence_is_harmless() {
    let c = case();
    for o in schedules() {
        let got = launch_with(CANONICAL, "", RESTORE, &c, &o)
            .unwrap_or_else(|e| panic!("seed {} {:?}: {e}", o.seed, o.policy));
        assert!(
            got.iter().zip(&c.want).all(|(g, w)| *g as f64 == *w),
            "seed {} {:?}: D differs from the reference",
            o.seed,
            o.policy
        );
    }
}
