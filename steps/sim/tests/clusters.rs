//! Clusters that run at the same time, on tiny hand-written kernels: races on global memory
//! between clusters, a cluster that waits on another one (resident or not), and reads of shared
//! memory nothing wrote in the launch. Each class has a planted bug and a harmless control.

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// A kernel `k(u64 out)` of `body`, with `%rd2` the global `out`, `%r1` = %tid.x and `%r2` =
/// %ctaid.x, `%r3` = %nctaid.x - 1 (the last CTA).
fn kernel(body: &str) -> String {
    format!(
        "{HEAD}.shared .align 16 .b8 buf[64];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<8>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %nctaid.x;\n\tsub.s32 %r3, %r3, 1;\n{body}\n\tret;\n}}\n"
    )
}

fn go(
    body: &str,
    ctas: u32,
    threads: u32,
    o: &Options,
) -> (Result<sim::RunReport, SimError>, Device, u64) {
    let p = Program::parse(&kernel(body)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(256);
    let l = Launch {
        kernel: "k".into(),
        grid: [ctas, 1, 1],
        block: [threads, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 0,
        params: vec![Param::U64(out)],
        barrier_names: vec![],
        sources: vec![],
    };
    let r = run(&p, &mut dev, &l, o);
    (r, dev, out)
}

fn opts(seed: u64, policy: Policy) -> Options {
    Options {
        seed,
        policy,
        max_steps: 20_000_000,
        ..Options::default()
    }
}

fn word(dev: &Device, at: u64) -> u32 {
    let mut b = [0u8; 4];
    dev.read(at, &mut b);
    u32::from_le_bytes(b)
}

/// Thread 0 of every CTA stores to `out[0]` (planted), or to `out[ctaid]` (control).
#[test]
fn two_clusters_writing_the_same_bytes_race() {
    let planted = "
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $L_end;
	st.global.u32 [%rd2], %r2;
$L_end:";
    for policy in sim::EXPLORE_POLICIES {
        let (r, _, _) = go(planted, 2, 32, &opts(3, policy));
        let e = r.unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(
                e,
                SimError::Rule {
                    rule: "cross-cluster-race",
                    ..
                }
            ),
            "{text}"
        );
        // Both writers, each with its line.
        assert!(text.contains("CTA 0") && text.contains("CTA 1"), "{text}");
        assert_eq!(text.matches("(PTX line 21)").count(), 2, "{text}");
    }
    let control = "
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $L_end;
	mul.wide.u32 %rd3, %r2, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r2;
$L_end:";
    for policy in sim::EXPLORE_POLICIES {
        let (r, dev, out) = go(control, 4, 32, &opts(3, policy));
        r.unwrap();
        assert_eq!(word(&dev, out + 12), 3);
    }
}

/// The last CTA writes data then a flag; CTA 0 waits for the flag and reads the data. With
/// `st.release.gpu` / `ld.acquire.gpu` the read is ordered after the write (and CTA 0 sees
/// 42); without them (the planted bug reads the data without waiting on the flag), it is a
/// race whatever the order (an acquire that happens to read the flag set would order it).
#[test]
fn a_release_and_acquire_order_clusters_and_a_read_without_them_races() {
    let control = "
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $L_end;
	setp.eq.u32 %p2, %r2, %r3;
	@!%p2 bra $L_wait;
	mov.u32 %r4, 42;
	st.global.u32 [%rd2+16], %r4;
	mov.u32 %r5, 1;
	st.release.gpu.global.u32 [%rd2], %r5;
	bra $L_end;
$L_wait:
	setp.ne.u32 %p3, %r2, 0;
	@%p3 bra $L_end;
$L_spin:
	ld.acquire.gpu.global.u32 %r6, [%rd2];
	setp.eq.u32 %p4, %r6, 0;
	@%p4 bra $L_spin;
	ld.global.u32 %r7, [%rd2+16];
	st.global.u32 [%rd2+32], %r7;
$L_end:";
    for (i, policy) in sim::EXPLORE_POLICIES.iter().enumerate() {
        let (r, dev, out) = go(control, 3, 32, &opts(10 + i as u64, *policy));
        r.unwrap();
        assert_eq!(word(&dev, out + 32), 42);
    }
    // The same without the wait: the read of the data is unordered with its write.
    let planted = control
        .replace("\tld.acquire.gpu.global.u32 %r6, [%rd2];\n", "")
        .replace("@%p4 bra $L_spin;", "");
    let mut races = 0;
    for (i, policy) in sim::EXPLORE_POLICIES.iter().enumerate() {
        let (r, _, _) = go(&planted, 3, 32, &opts(10 + i as u64, *policy));
        match r {
            Err(SimError::Rule {
                rule: "cross-cluster-race",
                ..
            }) => races += 1,
            other => panic!("expected a race, got {other:?}"),
        }
    }
    assert_eq!(races, 4);
}

/// CTA 0 spins on a flag the last CTA sets. With every cluster resident (the default, 148
/// SMs) the kernel finishes; with one SM the last cluster can never become resident while CTA
/// 0 spins: a "waits on another cluster" report, not the step limit.
#[test]
fn a_wait_on_another_cluster_finishes_when_both_are_resident_and_is_reported_when_not() {
    let body = "
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $L_end;
	setp.eq.u32 %p2, %r2, %r3;
	@!%p2 bra $L_wait;
	mov.u32 %r5, 1;
	st.release.gpu.global.u32 [%rd2], %r5;
	bra $L_end;
$L_wait:
	setp.ne.u32 %p3, %r2, 0;
	@%p3 bra $L_end;
$L_spin:
	ld.acquire.gpu.global.u32 %r6, [%rd2];
	setp.eq.u32 %p4, %r6, 0;
	@%p4 bra $L_spin;
	st.global.u32 [%rd2+8], %r6;
$L_end:";
    for (i, policy) in sim::EXPLORE_POLICIES.iter().enumerate() {
        let (r, dev, out) = go(body, 4, 32, &opts(20 + i as u64, *policy));
        r.unwrap();
        assert_eq!(word(&dev, out + 8), 1);
    }
    let one_sm = Options {
        sms: 1,
        ..opts(20, Policy::Random)
    };
    let (r, _, _) = go(body, 4, 32, &one_sm);
    let e = r.unwrap_err();
    assert!(matches!(e, SimError::Deadlock { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("waits on another cluster"), "{text}");
    assert!(text.contains("3 clusters of the grid wait"), "{text}");
    // Waiting on an earlier cluster passes even one cluster at a time.
    let earlier = body
        .replace("setp.eq.u32 %p2, %r2, %r3;", "setp.eq.u32 %p2, %r2, 0;")
        .replace("setp.ne.u32 %p3, %r2, 0;", "setp.ne.u32 %p3, %r2, %r3;");
    let (r, dev, out) = go(&earlier, 4, 32, &one_sm);
    r.unwrap();
    assert_eq!(word(&dev, out + 8), 1);
}

/// A load of shared memory nothing wrote in the launch (planted) is `uninitialised-read`; the
/// same after each thread stored its word and a `bar.sync` (control) is not.
#[test]
fn a_read_of_unwritten_shared_memory_is_reported() {
    let control = "
	mov.u32 %r4, buf;
	shl.b32 %r5, %r1, 2;
	add.s32 %r6, %r4, %r5;
	st.shared.u32 [%r6], %r1;
	bar.sync 0;
	xor.b32 %r7, %r5, 4;
	add.s32 %r8, %r4, %r7;
	ld.shared.u32 %r9, [%r8];
	setp.ne.u32 %p1, %r1, 1;
	@%p1 bra $L_end;
	st.global.u32 [%rd2], %r9;
$L_end:";
    for policy in sim::EXPLORE_POLICIES {
        let (r, dev, out) = go(control, 1, 16, &opts(5, policy));
        r.unwrap();
        assert_eq!(word(&dev, out), 0, "thread 1 reads thread 0's word");
    }
    // Only even threads store: the odd neighbour's word of thread 0 (and others) is unwritten.
    let planted = control.replace(
        "\tst.shared.u32 [%r6], %r1;",
        "\tand.b32 %r10, %r1, 1;\n\tsetp.eq.u32 %p2, %r10, 0;\n\t@%p2 st.shared.u32 [%r6], %r1;",
    );
    let (r, _, _) = go(&planted, 1, 16, &opts(5, Policy::Random));
    let e = r.unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(
            e,
            SimError::Rule {
                rule: "uninitialised-read",
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("ld.shared.u32") && text.contains("PTX line"),
        "{text}"
    );
}

fn go_cluster(body: &str) -> (Result<sim::RunReport, SimError>, Device, u64) {
    let p = Program::parse(&kernel(body)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(256);
    let l = Launch {
        kernel: "k".into(),
        grid: [2, 1, 1],
        block: [32, 1, 1],
        cluster: [2, 1, 1],
        dynamic_smem: 0,
        params: vec![Param::U64(out)],
        barrier_names: vec![],
        sources: vec![],
    };
    let r = run(&p, &mut dev, &l, &opts(7, Policy::Random));
    (r, dev, out)
}

/// Rank 1 reads rank 0's `buf[1]` through `mapa` plus an offset inside the variable, or
/// through its own address of `buf[1]` with bit 24 cleared (the leader trick of CUTLASS's
/// `Sm100MmaPeerBitMask`: addresses are `rank << 24 | offset`, `dsmem.rs`); both are controls.
/// Planted: a mapa result moved by 16 MiB to a rank beyond the cluster of two, a shared::cta
/// load through rank 0's address, and an offset beyond the CTA's shared memory are
/// `cluster-address-undefined`.
#[test]
fn shared_cluster_addresses_follow_mapa_and_rank_arithmetic_is_reported() {
    let template = "
	mov.u32 %r4, %cluster_ctarank;
	mov.u32 %r5, buf;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra $L_sync;
	setp.ne.u32 %p2, %r4, 0;
	@%p2 bra $L_sync;
	mov.u32 %r6, 77;
	st.shared.u32 [%r5+4], %r6;
$L_sync:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	setp.ne.u32 %p3, %r4, 1;
	@%p3 bra $L_done;
	@%p1 bra $L_done;
ADDRESS
	ld.shared::cluster.u32 %r8, [%r7];
	st.global.u32 [%rd2], %r8;
$L_done:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;";
    for control in [
        "\tmapa.shared::cluster.u32 %r9, %r5, 0;\n\tadd.s32 %r7, %r9, 4;",
        // The leader trick: clear the rank bit of rank 1's own address.
        "\tadd.s32 %r9, %r5, 4;\n\tand.b32 %r7, %r9, -16777217;",
        // A mapa result of rank 1 moved down by 16 MiB: rank 0's, as on the GPU.
        "\tmapa.shared::cluster.u32 %r9, %r5, 1;\n\tsub.s32 %r10, %r9, 16777216;\n\tadd.s32 %r7, %r10, 4;",
    ] {
        let (r, dev, out) = go_cluster(&template.replace("ADDRESS", control));
        r.unwrap_or_else(|e| panic!("{control}: {e}"));
        assert_eq!(word(&dev, out), 77, "{control}");
    }
    for planted in [
        // A mapa result of rank 1 moved up by 16 MiB: rank 2 of a cluster of two.
        "\tmapa.shared::cluster.u32 %r9, %r5, 1;\n\tadd.s32 %r10, %r9, 16777216;\n\tadd.s32 %r7, %r10, 4;",
        // Rank 0's address read through shared::cta by rank 1.
        "\tmapa.shared::cluster.u32 %r9, %r5, 0;\n\tadd.s32 %r7, %r9, 4;\n\tld.shared.u32 %r8, [%r7];",
        // An offset past the CTA's shared memory, inside its rank's 16 MiB.
        "\tmapa.shared::cluster.u32 %r9, %r5, 0;\n\tadd.s32 %r7, %r9, 8388608;",
    ] {
        let (r, _, _) = go_cluster(&template.replace("ADDRESS", planted));
        let e = r.unwrap_err();
        assert!(
            matches!(e, SimError::Rule { rule: "cluster-address-undefined", .. }),
            "{planted}: {e}"
        );
    }
}

/// Step 2 stages C in shared memory and TMA-stores it. Without one of its eight staging
/// stores (planted: the last `st.shared.v4.u32`), the first TMA store reads 16 bytes a row
/// nothing wrote: `uninitialised-read` at the store; the stock kernel (control) verifies.
#[test]
fn a_tma_store_of_staging_bytes_never_written_is_reported() {
    let stock = fixture("step2.f16");
    let last = stock
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("st.shared.v4.u32"))
        .expect("step 2 writes its staging buffer")
        .to_string();
    let planted = stock.replacen(&format!("{last}\n"), "", 1);
    assert_ne!(planted, stock);
    for (ptx, bug) in [(&stock, false), (&planted, true)] {
        let prog = Program::parse(ptx).unwrap();
        let mut p = Problem::new(128, 256, 128, Dtype::F16, 4);
        let l = p.launch(&facts(2), 148).unwrap();
        let mut dev = std::mem::take(&mut p.dev);
        let r = run(&prog, &mut dev, &l, &opts(4, Policy::Random));
        if bug {
            let e = r.unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(
                    e,
                    SimError::Rule {
                        rule: "uninitialised-read",
                        ..
                    }
                ),
                "{text}"
            );
            assert!(text.contains("TMA store"), "{text}");
        } else {
            r.unwrap();
            assert_eq!(p.verify(&dev).0, 0);
        }
    }
}

/// Step 1's first MMA of a tile starts the accumulator (`enable_input_d` false). Planted: it
/// accumulates, into tensor-memory columns nothing wrote: `uninitialised-read` at the MMA;
/// the stock kernel (control) verifies, its tcgen05.ld reads only what the MMAs wrote.
#[test]
fn an_mma_accumulating_into_unwritten_tensor_memory_is_reported() {
    let stock = fixture("step1.f16");
    let planted = stock.replacen(
        "selp.u32 \t%r56, 1, 0, %p10;",
        "selp.u32 \t%r56, 1, 1, %p10;",
        1,
    );
    assert_ne!(planted, stock, "the accumulate flag of the first MMA");
    for (ptx, bug) in [(&stock, false), (&planted, true)] {
        let prog = Program::parse(ptx).unwrap();
        let mut p = Problem::new(128, 256, 128, Dtype::F16, 5);
        let l = p.launch(&facts(1), 148).unwrap();
        let mut dev = std::mem::take(&mut p.dev);
        let r = run(&prog, &mut dev, &l, &opts(5, Policy::Random));
        if bug {
            let e = r.unwrap_err();
            let text = e.to_string();
            assert!(
                matches!(
                    e,
                    SimError::Rule {
                        rule: "uninitialised-read",
                        ..
                    }
                ),
                "{text}"
            );
            assert!(text.contains("tcgen05.mma accumulates"), "{text}");
        } else {
            r.unwrap();
            assert_eq!(p.verify(&dev).0, 0);
        }
    }
}

/// `/work/ext/own/dsmem_leader.cu` (NVRTC output in `tests/ptx/own/`): rank 1 stores into and
/// arrives on the leader's (rank 0's) shared memory through its own shared::cta address with
/// bit 24 cleared (CUTLASS's `Sm100MmaPeerBitMask`), the control through `mapa`. Both verify
/// (`out[l] == 201`) under every policy: the simulator's addresses carry the rank at bit 24
/// as the hardware's do (`dsmem.rs`).
#[test]
fn the_leader_trick_of_2_cta_kernels_reaches_the_leader() {
    for file in ["dsmem_leader", "dsmem_leader_mapa"] {
        let path = format!("{}/tests/ptx/own/{file}.ptx", env!("CARGO_MANIFEST_DIR"));
        let ptx = std::fs::read_to_string(&path).unwrap();
        let p = Program::parse(&ptx).unwrap();
        for policy in sim::EXPLORE_POLICIES {
            let mut dev = Device::new();
            let out = dev.alloc(128);
            dev.write(out, &[0xAD; 128]);
            let l = Launch {
                kernel: "dsmem_leader".into(),
                grid: [2, 1, 1],
                block: [32, 1, 1],
                cluster: [2, 1, 1],
                dynamic_smem: 0,
                params: vec![Param::U64(out)],
                barrier_names: vec![],
                sources: vec![],
            };
            run(&p, &mut dev, &l, &opts(3, policy))
                .unwrap_or_else(|e| panic!("{file} {}: {e}", policy.name()));
            let mut b = [0u8; 128];
            dev.read(out, &mut b);
            for w in b.chunks(4) {
                assert_eq!(u32::from_le_bytes([w[0], w[1], w[2], w[3]]), 201, "{file}");
            }
        }
    }
}
