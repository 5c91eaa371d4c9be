//! Pre-tcgen05 and wide memory forms on hand-written kernels, against values computed here on
//! the CPU from the PTX ISA's definitions (small integers, so every f32 result is exact):
//! 256-bit `ld`/`st` (PTX ISA 8.8 "ld", "st"), `mma.sync` m16n8k{8,16} (9.7.14.5.14, fragments
//! of 9.7.14.5.8-9.7.14.5.10), `ldmatrix`/`stmatrix` (9.7.14.5.15-16) and non-bulk `cp.async`
//! with its groups (9.7.9.25.3). Each kernel runs under every schedule policy.

use sim::units::numeric::{f16_to_f32, f32_to_bf16, f32_to_f16, FloatRound};
use sim::{run, Device, Launch, Options, Param, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// Runs `body` in one CTA of `threads` threads. Parameters `%rd1..%rdN` are global pointers to
/// copies of `inputs` (in order) followed by one zeroed output buffer of `out_bytes` (its
/// pointer is the last). `%r1` = `%tid.x`, `%r2` = the shared address of `smem_raw`. Returns
/// the output after each policy (they must agree).
fn run_kernel(
    body: &str,
    threads: u32,
    inputs: &[Vec<u8>],
    out_bytes: usize,
) -> Result<Vec<u8>, SimError> {
    let n = inputs.len() + 1;
    let params: Vec<String> = (0..n)
        .map(|i| format!("\t.param .u64 k_param_{i}"))
        .collect();
    let mut loads = String::new();
    for i in 0..n {
        loads += &format!(
            "\tld.param.u64 %rd{0}, [k_param_{i}];\n\tcvta.to.global.u64 %rd{0}, %rd{0};\n",
            i + 1
        );
    }
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n{}\n)\n{{\n\t.reg .pred %p<16>;\n\t.reg .b32 %r<128>;\n\t.reg .f32 %f<64>;\n\t.reg .b64 %rd<64>;\n{loads}\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, smem_raw;\n{body}\n\tret;\n}}\n",
        params.join(",\n")
    );
    let p = Program::parse(&ptx)?;
    let mut seen: Option<Vec<u8>> = None;
    for policy in sim::EXPLORE_POLICIES {
        let mut dev = Device::new();
        let mut ps = Vec::new();
        for inp in inputs {
            let a = dev.alloc(inp.len() as u64);
            dev.write(a, inp);
            ps.push(Param::U64(a));
        }
        let out = dev.alloc(out_bytes as u64);
        dev.write(out, &vec![0u8; out_bytes]);
        ps.push(Param::U64(out));
        let l = Launch {
            kernel: "k".into(),
            grid: [1, 1, 1],
            block: [threads, 1, 1],
            cluster: [1, 1, 1],
            dynamic_smem: 8192,
            params: ps,
            barrier_names: vec![],
            sources: vec![],
        };
        let o = Options {
            policy,
            max_steps: 1_000_000,
            ..Options::default()
        };
        run(&p, &mut dev, &l, &o)?;
        let mut b = vec![0u8; out_bytes];
        dev.read(out, &mut b);
        if let Some(s) = &seen {
            assert_eq!(s, &b, "policy {} gave another result", policy.name());
        }
        seen = Some(b);
    }
    Ok(seen.expect("at least one policy"))
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes_of(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn halves(h: &[u16]) -> Vec<u8> {
    h.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn v8_and_v4_b64_global_loads_and_stores_with_cache_hints() {
    let input: Vec<u32> = (0..64).map(|i| i * 3 + 1).collect();
    // Thread t: 32 bytes at in + 32t through the 256-bit forms, out at out + 32t reversed
    // word order through a v8 store; then a v4.b64 copy to out + 1024 + 32t, and a cache-hinted
    // b32 store of its first word at out + 2048 + 4t.
    let body = "
	mul.wide.u32 %rd10, %r1, 32;
	add.s64 %rd11, %rd1, %rd10;
	add.s64 %rd12, %rd2, %rd10;
	ld.global.nc.L1::no_allocate.v8.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd11];
	st.global.v8.f32 [%rd12], {%f8, %f7, %f6, %f5, %f4, %f3, %f2, %f1};
	ld.global.L2::256B.v4.b64 {%rd20, %rd21, %rd22, %rd23}, [%rd11];
	st.global.v4.b64 [%rd12+1024], {%rd20, %rd21, %rd22, %rd23};
	ld.global.v8.b32 {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17}, [%rd11];
	mov.b64 %rd30, 0;
	mul.wide.u32 %rd31, %r1, 4;
	add.s64 %rd32, %rd2, %rd31;
	st.global.L2::cache_hint.b32 [%rd32+2048], %r10, %rd30;";
    let out = words(&run_kernel(body, 8, &[bytes_of(&input)], 2048 + 32).unwrap());
    for t in 0..8 {
        for i in 0..8 {
            assert_eq!(
                out[t * 8 + i],
                input[t * 8 + 7 - i],
                "v8 reversed, thread {t}"
            );
            assert_eq!(
                out[256 + t * 8 + i],
                input[t * 8 + i],
                "v4.b64 copy, thread {t}"
            );
        }
        assert_eq!(out[512 + t], input[t * 8], "cache-hinted store, thread {t}");
    }
}

fn decode_error(body: &str) -> SimError {
    let ptx = format!(
        "{HEAD}.visible .entry k()\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<32>;\n\t.reg .b16 %rs<16>;\n\t.reg .f32 %f<32>;\n\t.reg .b64 %rd<32>;\n{body}\n\tret;\n}}\n"
    );
    Program::parse(&ptx).expect_err(body)
}

#[test]
fn decode_refuses_illegal_wide_and_matrix_forms() {
    // 256-bit accesses exist for .global only, as .v8 of 32-bit or .v4 of 64-bit elements.
    for bad in [
        "\tld.shared.v8.b32 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%r9];",
        "\tld.v8.b32 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd9];",
        "\tld.global.v8.b16 {%rs1, %rs2, %rs3, %rs4, %rs5, %rs6, %rs7, %rs8}, [%rd9];",
        "\tst.shared.v4.b64 [%r9], {%rd1, %rd2, %rd3, %rd4};",
        // .bf16 with f16 accumulators, tf32 at k16, f16 at k4, a layout other than row.col.
        "\tmma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {%r1, %r2}, {%r3, %r4, %r5, %r6}, {%r7, %r8}, {%r9, %r10};",
        "\tmma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
        "\tmma.sync.aligned.m16n8k4.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1}, {%r2}, {%f5, %f6, %f7, %f8};",
        "\tmma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
        // ldmatrix .x3 does not exist; .b8 needs the sm_100 m16n16 shape, not modelled.
        "\tldmatrix.sync.aligned.m8n8.x3.shared.b16 {%r1, %r2, %r3}, [%r9];",
        "\tldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r1, %r2}, [%r9];",
        // cp.async.cg copies 16 bytes only.
        "\tcp.async.cg.shared.global [%r1], [%rd1], 8;",
    ] {
        let e = decode_error(bad);
        assert!(matches!(e, SimError::Unsupported { .. }), "{bad}: {e}");
    }
    // Operand shape errors: the fragment register counts.
    let e = decode_error("\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2}, {%r5, %r6}, {%f5, %f6, %f7, %f8};");
    assert!(matches!(e, SimError::Parse { .. }), "{e}");
    let e = decode_error("\tst.global.b32 [%rd1], %r1, %rd2;");
    assert!(matches!(e, SimError::Parse { .. }), "{e}");
}

/// A (16 x K), B (K x 8), C (16 x 8): small integers.
fn a_val(i: usize, k: usize) -> f32 {
    ((i * 3 + k * 5) % 7) as f32 - 3.0
}
fn b_val(k: usize, n: usize) -> f32 {
    ((k * 2 + n * 7) % 5) as f32 - 2.0
}
fn c_val(i: usize, n: usize) -> f32 {
    ((i + n * 3) % 9) as f32 - 4.0
}
fn reference(k: usize) -> Vec<f32> {
    let mut d = vec![0f32; 128];
    for i in 0..16 {
        for n in 0..8 {
            d[i * 8 + n] = c_val(i, n) + (0..k).map(|kk| a_val(i, kk) * b_val(kk, n)).sum::<f32>();
        }
    }
    d
}

/// The prologue of the 16-bit MMA kernels: A (16 x 16, row-major, 512 bytes) then B^T (8 x 16,
/// [n][k], 256 bytes) copied from `%rd1` into shared memory with cp.async (48 chunks of 16
/// bytes: lane l copies chunk l, and lanes 0-15 chunk l + 32 too, by the other cache level),
/// then the fragments of A and B through ldmatrix into `%r20..%r23` and `%r24, %r25`. `wait`
/// is the wait instruction (a planted bug drops it).
fn mma16_prologue(wait: &str) -> String {
    format!(
        "
	mul.wide.u32 %rd5, %r1, 16;
	add.s64 %rd6, %rd1, %rd5;
	shl.b32 %r3, %r1, 4;
	add.s32 %r4, %r2, %r3;
	cp.async.cg.shared.global [%r4], [%rd6], 16;
	setp.lt.u32 %p1, %r1, 16;
	@%p1 cp.async.ca.shared.global.L2::128B [%r4+512], [%rd6+512], 16;
	cp.async.commit_group;
	{wait}
	bar.sync 0;
	and.b32 %r5, %r1, 15;
	shl.b32 %r6, %r5, 5;
	shr.u32 %r7, %r1, 4;
	shl.b32 %r8, %r7, 4;
	add.s32 %r9, %r6, %r8;
	add.s32 %r10, %r2, %r9;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r20, %r21, %r22, %r23}}, [%r10];
	and.b32 %r11, %r1, 7;
	shl.b32 %r12, %r11, 5;
	shr.u32 %r13, %r1, 3;
	and.b32 %r13, %r13, 1;
	shl.b32 %r14, %r13, 4;
	add.s32 %r15, %r12, %r14;
	add.s32 %r15, %r15, 512;
	add.s32 %r16, %r2, %r15;
	ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{%r24, %r25}}, [%r16];
	shr.u32 %r30, %r1, 2;
	and.b32 %r31, %r1, 3;
	shl.b32 %r32, %r30, 3;
	shl.b32 %r33, %r31, 1;
	add.s32 %r34, %r32, %r33;
	add.s32 %r35, %r34, 64;"
    )
}

fn ab_input(enc: impl Fn(f32) -> u16) -> Vec<u8> {
    let mut h = Vec::new();
    for i in 0..16 {
        for k in 0..16 {
            h.push(enc(a_val(i, k)));
        }
    }
    for n in 0..8 {
        for k in 0..16 {
            h.push(enc(b_val(k, n)));
        }
    }
    halves(&h)
}

fn c_input_f32() -> Vec<u8> {
    let c: Vec<u32> = (0..128).map(|e| c_val(e / 8, e % 8).to_bits()).collect();
    bytes_of(&c)
}

/// `%r34`/`%r35` = element index of (g, 2t) and (g + 8, 2t): the C/D fragment of f32 form.
const F32_CD: &str = "
	mul.wide.u32 %rd7, %r34, 4;
	add.s64 %rd8, %rd2, %rd7;
	mul.wide.u32 %rd9, %r35, 4;
	add.s64 %rd10, %rd2, %rd9;
	ld.global.v2.f32 {%f5, %f6}, [%rd8];
	ld.global.v2.f32 {%f7, %f8}, [%rd10];
	add.s64 %rd11, %rd3, %rd7;
	add.s64 %rd12, %rd3, %rd9;";

#[test]
fn mma_sync_m16n8k16_f16_and_bf16_with_ldmatrix_fragments_and_cp_async() {
    for (bf16, name) in [(false, "f16"), (true, "bf16")] {
        let enc = |x: f32| {
            if bf16 {
                f32_to_bf16(x, FloatRound::Rn)
            } else {
                f32_to_f16(x, FloatRound::Rn)
            }
        };
        let body = format!(
            "{}{F32_CD}
	mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32 {{%f1, %f2, %f3, %f4}}, {{%r20, %r21, %r22, %r23}}, {{%r24, %r25}}, {{%f5, %f6, %f7, %f8}};
	st.global.v2.f32 [%rd11], {{%f1, %f2}};
	st.global.v2.f32 [%rd12], {{%f3, %f4}};",
            mma16_prologue("cp.async.wait_group 0;")
        );
        let out = words(&run_kernel(&body, 32, &[ab_input(enc), c_input_f32()], 512).unwrap());
        let want = reference(16);
        for e in 0..128 {
            assert_eq!(
                f32::from_bits(out[e]),
                want[e],
                "{name} D[{}][{}]",
                e / 8,
                e % 8
            );
        }
    }
}

#[test]
fn mma_sync_m16n8k16_with_f16_accumulators() {
    let enc = |x: f32| f32_to_f16(x, FloatRound::Rn);
    let c: Vec<u16> = (0..128).map(|e| enc(c_val(e / 8, e % 8))).collect();
    let body = format!(
        "{}
	mul.wide.u32 %rd7, %r34, 2;
	add.s64 %rd8, %rd2, %rd7;
	mul.wide.u32 %rd9, %r35, 2;
	add.s64 %rd10, %rd2, %rd9;
	ld.global.b32 %r40, [%rd8];
	ld.global.b32 %r41, [%rd10];
	mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {{%r42, %r43}}, {{%r20, %r21, %r22, %r23}}, {{%r24, %r25}}, {{%r40, %r41}};
	add.s64 %rd11, %rd3, %rd7;
	add.s64 %rd12, %rd3, %rd9;
	st.global.b32 [%rd11], %r42;
	st.global.b32 [%rd12], %r43;",
        mma16_prologue("cp.async.wait_all;")
    );
    let out = run_kernel(&body, 32, &[ab_input(enc), halves(&c)], 256).unwrap();
    let want = reference(16);
    for e in 0..128 {
        let h = u16::from_le_bytes([out[2 * e], out[2 * e + 1]]);
        assert_eq!(f16_to_f32(h), want[e], "D[{}][{}]", e / 8, e % 8);
    }
}

#[test]
fn mma_sync_m16n8k8_f16_uses_the_first_half_of_the_k16_fragments() {
    // A's x2 ldmatrix of columns 0-7 and B's first matrix are the k8 fragments (a0..a3 rows
    // g and g + 8, b0..b1 rows 2t and 2t + 1): D = C + A[:, :8] * B[:8, :].
    let enc = |x: f32| f32_to_f16(x, FloatRound::Rn);
    let body = format!(
        "{}{F32_CD}
	mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {{%f1, %f2, %f3, %f4}}, {{%r20, %r21}}, {{%r24}}, {{%f5, %f6, %f7, %f8}};
	st.global.v2.f32 [%rd11], {{%f1, %f2}};
	st.global.v2.f32 [%rd12], {{%f3, %f4}};",
        mma16_prologue("cp.async.wait_group 0;")
    );
    let out = words(&run_kernel(&body, 32, &[ab_input(enc), c_input_f32()], 512).unwrap());
    let want = reference(8);
    for e in 0..128 {
        assert_eq!(f32::from_bits(out[e]), want[e], "D[{}][{}]", e / 8, e % 8);
    }
}

#[test]
fn mma_sync_m16n8k8_tf32() {
    // A 16 x 8 and B^T 8 x 8 of f32 in global memory, loaded straight into the tf32 fragments
    // (PTX ISA "Matrix Fragments for mma.m16n8k8", .tf32: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
    // a3 (g + 8, t + 4); b0 (k = t, n = g), b1 (k = t + 4, n = g)).
    let mut inp = Vec::new();
    for i in 0..16 {
        for k in 0..8 {
            inp.push(a_val(i, k).to_bits());
        }
    }
    for n in 0..8 {
        for k in 0..8 {
            inp.push(b_val(k, n).to_bits());
        }
    }
    let body = format!(
        "
	shr.u32 %r30, %r1, 2;
	and.b32 %r31, %r1, 3;
	shl.b32 %r40, %r30, 3;
	add.s32 %r40, %r40, %r31;
	mul.wide.u32 %rd20, %r40, 4;
	add.s64 %rd21, %rd1, %rd20;
	ld.global.b32 %r20, [%rd21];
	ld.global.b32 %r21, [%rd21+256];
	ld.global.b32 %r22, [%rd21+16];
	ld.global.b32 %r23, [%rd21+272];
	ld.global.b32 %r24, [%rd21+512];
	ld.global.b32 %r25, [%rd21+528];
	shl.b32 %r32, %r30, 3;
	shl.b32 %r33, %r31, 1;
	add.s32 %r34, %r32, %r33;
	add.s32 %r35, %r34, 64;{F32_CD}
	mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{%f1, %f2, %f3, %f4}}, {{%r20, %r21, %r22, %r23}}, {{%r24, %r25}}, {{%f5, %f6, %f7, %f8}};
	st.global.v2.f32 [%rd11], {{%f1, %f2}};
	st.global.v2.f32 [%rd12], {{%f3, %f4}};"
    );
    let out = words(&run_kernel(&body, 32, &[bytes_of(&inp), c_input_f32()], 512).unwrap());
    let want = reference(8);
    for e in 0..128 {
        assert_eq!(f32::from_bits(out[e]), want[e], "D[{}][{}]", e / 8, e % 8);
    }
}

#[test]
fn a_read_of_cp_async_data_before_its_wait_is_a_rule_and_after_it_is_correct() {
    // Planted bug: no wait before the ldmatrix reads what cp.async writes. The harmless control
    // is every passing MMA test above (the same kernel with the wait).
    let enc = |x: f32| f32_to_f16(x, FloatRound::Rn);
    let body = format!(
        "{}
	st.global.b32 [%rd3], %r20;",
        mma16_prologue("")
    );
    let e = run_kernel(&body, 32, &[ab_input(enc), c_input_f32()], 64).unwrap_err();
    assert!(
        matches!(
            &e,
            SimError::Rule {
                rule: "cp-async-wait-before-read",
                ..
            }
        ),
        "{e}"
    );
    // wait_group 1 with two groups committed leaves the newer one unordered: reading its
    // bytes is the same rule; reading the older group's bytes is fine.
    let two_groups = |read_off: u32| {
        format!(
            "
	cp.async.ca.shared.global [%r2], [%rd1], 4;
	cp.async.commit_group;
	cp.async.ca.shared.global [%r2+16], [%rd1+16], 16;
	cp.async.commit_group;
	cp.async.wait_group 1;
	ld.shared.b32 %r5, [%r2+{read_off}];
	st.global.b32 [%rd2], %r5;
	cp.async.wait_all;"
        )
    };
    let input: Vec<u32> = (0..8).map(|i| 100 + i).collect();
    let out = words(&run_kernel(&two_groups(0), 1, &[bytes_of(&input)], 4).unwrap());
    assert_eq!(out[0], 100);
    let e = run_kernel(&two_groups(20), 1, &[bytes_of(&input)], 4).unwrap_err();
    assert!(
        matches!(
            &e,
            SimError::Rule {
                rule: "cp-async-wait-before-read",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn cp_async_zero_fill_src_size_and_ignore_src() {
    let input: Vec<u32> = (0..8).map(|i| 0x1111_1111 * (i + 1)).collect();
    // Bytes 24..32 are read below but no copy writes them: zeroed first, so the read is
    // of initialised memory.
    let body = "
	mov.u32 %r20, 0;
	st.shared.v2.b32 [%r2+24], {%r20, %r20};
	mov.u32 %r6, 5;
	cp.async.ca.shared.global [%r2], [%rd1], 16, %r6;
	setp.eq.u32 %p2, %r1, 0;
	cp.async.ca.shared.global [%r2+16], [%rd1+16], 8, %p2;
	cp.async.ca.shared.global [%r2+32], [%rd1+16], 8, !%p2;
	cp.async.wait_all;
	ld.shared.v4.b32 {%r10, %r11, %r12, %r13}, [%r2];
	ld.shared.v4.b32 {%r14, %r15, %r16, %r17}, [%r2+16];
	ld.shared.v2.b32 {%r18, %r19}, [%r2+32];
	st.global.v4.b32 [%rd2], {%r10, %r11, %r12, %r13};
	st.global.v4.b32 [%rd2+16], {%r14, %r15, %r16, %r17};
	st.global.v2.b32 [%rd2+32], {%r18, %r19};";
    let out = words(&run_kernel(body, 1, &[bytes_of(&input)], 40).unwrap());
    // src-size 5: the first 5 bytes copied, 11 zero; ignore-src true: 8 zero bytes; false: copied.
    assert_eq!(out[0], input[0]);
    assert_eq!(out[1], input[1] & 0xFF);
    assert_eq!(&out[2..4], &[0, 0]);
    assert_eq!(&out[4..6], &[0, 0]);
    assert_eq!(&out[8..10], &input[4..6]);
}

#[test]
fn cp_async_mbarrier_arrive_orders_the_copies_for_a_waiting_consumer() {
    // Warp 0 copies and arrives through cp.async.mbarrier.arrive.noinc (the barrier counts 32
    // such arrivals); warp 1 waits on the barrier's phase and reads. Without .noinc the same
    // barrier would need 32 more arrivals: a deadlock.
    let input: Vec<u32> = (0..32).map(|i| 7 * i + 3).collect();
    let body = |noinc: &str| {
        format!(
            "
	setp.eq.u32 %p1, %r1, 0;
	@%p1 mbarrier.init.shared.b64 [%r2+1024], 32;
	bar.sync 0;
	setp.lt.u32 %p2, %r1, 32;
	@!%p2 bra $L_consumer;
	shl.b32 %r3, %r1, 2;
	add.s32 %r4, %r2, %r3;
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd1, %rd5;
	cp.async.ca.shared.global [%r4], [%rd6], 4;
	cp.async.mbarrier.arrive{noinc}.shared.b64 [%r2+1024];
	bra $L_done;
$L_consumer:
	mov.u32 %r9, 0;
$L_wait:
	mbarrier.try_wait.parity.shared.b64 %p3, [%r2+1024], %r9;
	@!%p3 bra $L_wait;
	sub.u32 %r5, %r1, 32;
	shl.b32 %r6, %r5, 2;
	add.s32 %r7, %r2, %r6;
	ld.shared.b32 %r8, [%r7];
	mul.wide.u32 %rd7, %r5, 4;
	add.s64 %rd8, %rd2, %rd7;
	st.global.b32 [%rd8], %r8;
$L_done:"
        )
    };
    let out = words(&run_kernel(&body(".noinc"), 64, &[bytes_of(&input)], 128).unwrap());
    assert_eq!(out, input);
    let e = run_kernel(&body(""), 64, &[bytes_of(&input)], 128).unwrap_err();
    assert!(matches!(e, SimError::Deadlock { .. }), "{e}");
}

#[test]
fn stmatrix_stores_fragments_plain_and_transposed() {
    // Lane l holds in register j the pair (1000 j + 2 l, 1000 j + 2 l + 1). PTX ISA "stmatrix":
    // row r of matrix j goes to lane 8j + r's address; lane l's register j holds row l / 4,
    // columns 2 (l % 4), +1 (transposed: column l / 4 of rows 2 (l % 4), +1).
    for (trans, suffix) in [(false, ""), (true, ".trans")] {
        let body = format!(
            "
	shl.b32 %r3, %r1, 1;
	add.s32 %r4, %r3, 1;
	shl.b32 %r4, %r4, 16;
	or.b32 %r10, %r3, %r4;
	add.s32 %r11, %r10, 0x03E803E8;
	add.s32 %r12, %r10, 0x07D007D0;
	add.s32 %r13, %r10, 0x0BB80BB8;
	shl.b32 %r5, %r1, 4;
	add.s32 %r6, %r2, %r5;
	stmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 [%r6], {{%r10, %r11, %r12, %r13}};
	bar.sync 0;
	ld.shared.v4.b32 {{%r20, %r21, %r22, %r23}}, [%r6];
	mul.wide.u32 %rd5, %r1, 16;
	add.s64 %rd6, %rd1, %rd5;
	st.global.v4.b32 [%rd6], {{%r20, %r21, %r22, %r23}};"
        );
        let out = run_kernel(&body, 32, &[], 512).unwrap();
        for j in 0..4usize {
            for r in 0..8usize {
                for c in 0..8usize {
                    let at = (8 * j + r) * 16 + 2 * c;
                    let got = u16::from_le_bytes([out[at], out[at + 1]]) as usize;
                    let (lane, half) = if trans {
                        (4 * c + r / 2, r % 2)
                    } else {
                        (4 * r + c / 2, c % 2)
                    };
                    assert_eq!(
                        got,
                        1000 * j + 2 * lane + half,
                        "trans {trans} matrix {j} ({r}, {c})"
                    );
                }
            }
        }
    }
}

/// (lane, column) of register `i` of thread `t` for the 16-lane tcgen05.ld/st shapes, written
/// from the PTX ISA figures "Matrix fragments for shape .16x64b/.16x128b/.16x256b/.16x32bx2".
fn tmem16_cell(shape: &str, t: usize, i: usize, split: usize) -> (usize, usize) {
    match shape {
        // Threads pair up on a lane's two columns; odd threads take the lane 8 below.
        "16x64b" => (t / 4 + if t % 2 == 1 { 8 } else { 0 }, (t / 2) % 2 + 2 * i),
        // Four threads a lane, one column each; odd registers 8 lanes below.
        "16x128b" => (t / 4 + 8 * (i % 2), t % 4 + 4 * (i / 2)),
        // Four threads a lane, two columns each; registers 2, 3 eight lanes below.
        "16x256b" => (t / 4 + 8 * ((i / 2) % 2), 2 * (t % 4) + i % 2 + 8 * (i / 4)),
        // Threads 0-15 lanes 0-15; 16-31 the same lanes at the split column.
        _ => (t % 16, i + if t >= 16 { split } else { 0 }),
    }
}

#[test]
fn tcgen05_ld_st_16_lane_shapes_map_lanes_and_columns_as_the_isa_figures() {
    for (shape, regs, split) in [
        ("16x64b", 2usize, 0usize),
        ("16x128b", 4, 0),
        ("16x256b", 8, 0),
        ("16x32bx2", 2, 4),
    ] {
        let num = match shape {
            "16x128b" => regs / 2,
            "16x256b" => regs / 4,
            _ => regs,
        };
        let list_n = |base: usize, regs: usize| {
            (0..regs)
                .map(|i| format!("%r{}", base + i))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let list = |base: usize| list_n(base, regs);
        let imm = if shape == "16x32bx2" {
            format!(", {split}")
        } else {
            String::new()
        };
        let mut body = String::from(
            "
	setp.lt.u32 %p1, %r1, 32;
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	mul.lo.u32 %r4, %r1, 100;",
        );
        for i in 0..regs {
            body += &format!("\n\tadd.s32 %r{}, %r4, {i};", 10 + i);
        }
        body += &format!(
            "
	mov.u32 %r9, 0;
	tcgen05.st.sync.aligned.32x32b.x16.b32 [%r3], {{%r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9, %r9}};
	tcgen05.wait::st.sync.aligned;
	tcgen05.st.sync.aligned.{shape}.x{num}.b32 [%r3]{imm}, {{{}}};
	tcgen05.wait::st.sync.aligned;
	tcgen05.ld.sync.aligned.32x32b.x16.b32 {{{}}}, [%r3];
	tcgen05.ld.sync.aligned.{shape}.x{num}.b32 {{{}}}, [%r3]{imm};
	tcgen05.wait::ld.sync.aligned;
	mul.wide.u32 %rd5, %r1, 64;
	add.s64 %rd6, %rd1, %rd5;",
            list(10),
            list_n(30, 16),
            list(50)
        );
        for c in 0..16 {
            body += &format!("\n\tst.global.u32 [%rd6+{}], %r{};", 4 * c, 30 + c);
        }
        for i in 0..regs {
            body += &format!("\n\tst.global.u32 [%rd6+{}], %r{};", 2048 + 4 * i, 50 + i);
        }
        body += "
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;";
        let w = words(&run_kernel(&body, 32, &[], 4096).unwrap());
        for t in 0..32 {
            for i in 0..regs {
                let (lane, col) = tmem16_cell(shape, t, i, split);
                assert_eq!(
                    w[lane * 16 + col],
                    (100 * t + i) as u32,
                    "{shape}: st of thread {t} register {i}"
                );
                assert_eq!(
                    w[512 + t * 16 + i],
                    (100 * t + i) as u32,
                    "{shape}: ld of thread {t} register {i}"
                );
            }
        }
    }
    // .x64 of .16x256b would be 256 registers; ld unpacks nothing and st packs nothing.
    for bad in [
        "\ttcgen05.ld.sync.aligned.16x64b.x1.unpack::16b.b32 {%r1}, [%r2];",
        "\ttcgen05.st.sync.aligned.32x32b.x1.pack::16b.b32 [%r2], {%r1};",
        "\ttcgen05.ld.sync.aligned.16x256b.x64.b32 {%r1}, [%r2];",
    ] {
        let e = decode_error(bad);
        assert!(matches!(e, SimError::Unsupported { .. }), "{bad}: {e}");
    }
}

#[test]
fn tcgen05_ld_pack_16b_and_st_unpack_16b_join_and_split_the_low_halves() {
    // Thread t stores word 1000 t + 17 c + 0x10000 c into column c (x8), then loads with
    // .pack::16b: .32x32b.x4 register j = lo16(col 2j) | lo16(col 2j + 1) << 16, and
    // .16x64b.x2 over lanes 0-15 (thread t, register i: lane t/4 + 8 (t % 2), logical column
    // (t/2) % 2 + 2 i, cells 2 x that and the next). Then .32x32b.x2.unpack::16b of 0xBBBBAAAA + t
    // at column 16: the halves in the low bits of columns 16 and 17, 0x7FC0 above them.
    let body = "
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	mul.lo.u32 %r4, %r1, 1000;
	add.s32 %r10, %r4, 0;
	add.s32 %r11, %r4, 65553;
	add.s32 %r12, %r4, 131106;
	add.s32 %r13, %r4, 196659;
	add.s32 %r14, %r4, 262212;
	add.s32 %r15, %r4, 327765;
	add.s32 %r16, %r4, 393318;
	add.s32 %r17, %r4, 458871;
	tcgen05.st.sync.aligned.32x32b.x8.b32 [%r3], {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17};
	add.s32 %r20, %r1, -1145328982;
	add.s32 %r21, %r1, 286331153;
	add.s32 %r22, %r3, 16;
	tcgen05.st.sync.aligned.32x32b.x2.unpack::16b.b32 [%r22], {%r20, %r21};
	tcgen05.wait::st.sync.aligned;
	tcgen05.ld.sync.aligned.32x32b.x4.pack::16b.b32 {%r30, %r31, %r32, %r33}, [%r3];
	tcgen05.ld.sync.aligned.16x64b.x2.pack::16b.b32 {%r34, %r35}, [%r3];
	tcgen05.ld.sync.aligned.32x32b.x4.b32 {%r36, %r37, %r38, %r39}, [%r22];
	tcgen05.wait::ld.sync.aligned;
	mul.wide.u32 %rd5, %r1, 64;
	add.s64 %rd6, %rd1, %rd5;
	st.global.v4.u32 [%rd6], {%r30, %r31, %r32, %r33};
	st.global.v2.u32 [%rd6+16], {%r34, %r35};
	st.global.v4.u32 [%rd6+32], {%r36, %r37, %r38, %r39};
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;";
    let w = words(&run_kernel(body, 32, &[], 32 * 64).unwrap());
    let cell = |lane: u32, c: u32| 1000 * lane + 17 * c + 0x10000 * c;
    let lo = |x: u32| x & 0xFFFF;
    for t in 0..32u32 {
        let row = &w[(16 * t) as usize..(16 * t + 16) as usize];
        for j in 0..4 {
            assert_eq!(
                row[j as usize],
                lo(cell(t, 2 * j)) | (lo(cell(t, 2 * j + 1)) << 16),
                "32x32b pack, thread {t} register {j}"
            );
        }
        for i in 0..2 {
            let lane = t / 4 + 8 * (t % 2);
            let c = 2 * ((t / 2) % 2 + 2 * i);
            assert_eq!(
                row[4 + i as usize],
                lo(cell(lane, c)) | (lo(cell(lane, c + 1)) << 16),
                "16x64b pack, thread {t} register {i}"
            );
        }
        let (a, b) = (0xBBBB_AAAAu32.wrapping_add(t), 0x1111_1111u32 + t);
        assert_eq!(
            &row[8..12],
            &[
                0x7FC0_0000 | lo(a),
                0x7FC0_0000 | (a >> 16),
                0x7FC0_0000 | lo(b),
                0x7FC0_0000 | (b >> 16)
            ],
            "unpack, thread {t}"
        );
    }
}

#[test]
fn tcgen05_cp_decodes_every_shape_and_refuses_decompression_and_wrong_multicast() {
    for good in [
        "\ttcgen05.cp.cta_group::1.128x256b [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::2.128x128b [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.4x256b [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.64x128b.warpx2::02_13 [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::2.64x128b.warpx2::01_23 [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%r1], %rd1;",
    ] {
        let ptx = format!(
            "{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n{good}\n\tret;\n}}\n"
        );
        assert!(Program::parse(&ptx).is_ok(), "{good}");
    }
    for bad in [
        "\ttcgen05.cp.cta_group::1.128x128b.b8x16.b6x16_p32 [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::2.128x256b.b8x16.b4x16_p64 [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.64x128b [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.32x128b.warpx2::02_13 [%r1], %rd1;",
        "\ttcgen05.cp.cta_group::1.128x256b.warpx4 [%r1], %rd1;",
        "\ttcgen05.cp.128x256b [%r1], %rd1;",
    ] {
        let e = decode_error(bad);
        assert!(matches!(e, SimError::Unsupported { .. }), "{bad}: {e}");
        if bad.contains("b8x16") {
            assert!(e.to_string().contains("decompressing"), "{e}");
        }
    }
}

/// Runs `body` in a cluster of two CTAs of 128 threads; `%rd1` is a zeroed output buffer of
/// `out_bytes`, `%r1` = `%tid.x`, `%r2` = the shared address of `smem_raw`, `%r5` =
/// `%cluster_ctarank`. Every schedule policy must give the same output.
fn run_pair_kernel(body: &str, out_bytes: usize) -> Result<Vec<u8>, SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{{\n\t.reg .pred %p<16>;\n\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<128>;\n\t.reg .b64 %rd<64>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd1, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, smem_raw;\n\tmov.u32 %r5, %cluster_ctarank;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx)?;
    let mut seen: Option<Vec<u8>> = None;
    for policy in sim::EXPLORE_POLICIES {
        let mut dev = Device::new();
        let out = dev.alloc(out_bytes as u64);
        dev.write(out, &vec![0u8; out_bytes]);
        let l = Launch {
            kernel: "k".into(),
            grid: [2, 1, 1],
            block: [128, 1, 1],
            cluster: [2, 1, 1],
            dynamic_smem: 4096,
            params: vec![Param::U64(out)],
            barrier_names: vec![],
            sources: vec![],
        };
        let o = Options {
            policy,
            max_steps: 1_000_000,
            ..Options::default()
        };
        run(&p, &mut dev, &l, &o)?;
        let mut b = vec![0u8; out_bytes];
        dev.read(out, &mut b);
        if let Some(s) = &seen {
            assert_eq!(s, &b, "policy {} gave another result", policy.name());
        }
        seen = Some(b);
    }
    Ok(seen.expect("at least one policy"))
}

#[test]
fn tcgen05_cp_cta_group_2_fills_both_ctas_from_their_own_shared_memory() {
    // Each CTA writes a 128 x 16-byte K-major matrix without swizzle at smem + 1024 (row r at
    // + 16 r: 8-row core matrices, SBO 128), word w of row r = 100000 rank + 10 r + w. Thread
    // 0 of the odd CTA issues the pair's copy (PTX ISA Table 46: any one thread of the pair)
    // and commits to both CTAs' barriers; each warp then reads its 32 lanes.
    let body = "
	mul.lo.u32 %r6, %r5, 100000;
	mad.lo.u32 %r6, %r1, 10, %r6;
	add.s32 %r7, %r6, 1;
	add.s32 %r8, %r6, 2;
	add.s32 %r9, %r6, 3;
	shl.b32 %r10, %r1, 4;
	add.s32 %r10, %r10, %r2;
	st.shared.v4.u32 [%r10+1024], {%r6, %r7, %r8, %r9};
	fence.proxy.async.shared::cta;
	setp.eq.u32 %p1, %r1, 0;
	setp.lt.u32 %p2, %r1, 32;
	@%p1 mbarrier.init.shared::cta.b64 [%r2+8], 1;
	@%p1 fence.mbarrier_init.release.cluster;
	@%p2 tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r2], 32;
	@%p2 tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
	tcgen05.fence::before_thread_sync;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	setp.eq.u32 %p3, %r5, 1;
	and.pred %p4, %p1, %p3;
	add.s32 %r14, %r2, 1024;
	shr.u32 %r14, %r14, 4;
	cvt.u64.u32 %rd11, %r14;
	or.b64 %rd10, %rd11, 70403103981568;
	mov.u16 %rs1, 3;
	@%p4 tcgen05.cp.cta_group::2.128x128b [%r3], %rd10;
	@%p4 tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r2+8], %rs1;
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r2+8], 0;
	@!%p5 bra WAIT;
	tcgen05.fence::after_thread_sync;
	shr.u32 %r11, %r1, 5;
	shl.b32 %r11, %r11, 21;
	add.s32 %r12, %r3, %r11;
	tcgen05.ld.sync.aligned.32x32b.x4.b32 {%r20, %r21, %r22, %r23}, [%r12];
	tcgen05.wait::ld.sync.aligned;
	mad.lo.u32 %r13, %r5, 128, %r1;
	mul.wide.u32 %rd5, %r13, 16;
	add.s64 %rd6, %rd1, %rd5;
	st.global.v4.u32 [%rd6], {%r20, %r21, %r22, %r23};
	tcgen05.fence::before_thread_sync;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	tcgen05.fence::after_thread_sync;
	@%p2 tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r3, 32;";
    // The descriptor: the start address (smem_raw + 1024) or LBO 16, SBO 128, fixed 0b001 at
    // bit 46, no swizzle.
    assert_eq!(
        sim::units::descriptors::encode_smem_desc(
            0,
            16,
            128,
            sim::units::descriptors::Swizzle::None,
            0
        ),
        70403103981568
    );
    let w = words(&run_pair_kernel(body, 2 * 128 * 16).unwrap());
    for rank in 0..2u32 {
        for lane in 0..128u32 {
            for c in 0..4u32 {
                assert_eq!(
                    w[((rank * 128 + lane) * 4 + c) as usize],
                    100000 * rank + 10 * lane + c,
                    "CTA {rank} lane {lane} column {c}"
                );
            }
        }
    }
}
