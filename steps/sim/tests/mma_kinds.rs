//! `tcgen05.mma` of the kinds beyond `kind::f16` (PTX ISA 9.7.16.9.1 "tcgen05.mma"; the
//! instruction descriptor of 9.7.16.4.2; the element formats of "Alternate Floating Point Data
//! Formats" and the 8-bit containers of `.kind::f8f6f4`; `units/mma_kinds.rs`) on a
//! hand-written kernel: 128 threads copy K-major operand tiles (no swizzle, 8-row core
//! matrices, LBO 128, SBO 256) into shared memory, preload D with `tcgen05.st`, thread 0 issues
//! two MMAs of 32 bytes of K each (M = 128, N = 16) accumulating onto D, and every warp reads
//! its lane quarter back with `tcgen05.ld`. The reference decodes each element from a table of
//! hand-written (code, value) pairs, not from the simulator's decoder.

use sim::{run, Device, Launch, Options, Param, Program, SimError};

const M: usize = 128;
const N: usize = 16;
const A0: usize = 0; // offsets in the image, which the kernel copies to smem + 1024
const B0: usize = 2 * 4096;
const IMAGE: usize = B0 + 2 * 512;

fn kernel(kind: &str) -> String {
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
\t@%p2 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;\n\
\t@%p2 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n\
\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n\
\tld.shared.u32 %r3, [%r2];\n\
\tshr.u32 %r11, %r1, 5;\n\tshl.b32 %r11, %r11, 21;\n\tadd.s32 %r12, %r3, %r11;\n\
\tmul.wide.u32 %rd22, %r1, 64;\n\tadd.s64 %rd23, %rd2, %rd22;\n\
\tld.global.v4.u32 {{%r50, %r51, %r52, %r53}}, [%rd23];\n\tld.global.v4.u32 {{%r54, %r55, %r56, %r57}}, [%rd23+16];\n\
\tld.global.v4.u32 {{%r58, %r59, %r60, %r61}}, [%rd23+32];\n\tld.global.v4.u32 {{%r62, %r63, %r64, %r65}}, [%rd23+48];\n\
\ttcgen05.st.sync.aligned.32x32b.x16.b32 [%r12], {{%r50, %r51, %r52, %r53, %r54, %r55, %r56, %r57, %r58, %r59, %r60, %r61, %r62, %r63, %r64, %r65}};\n\
\ttcgen05.wait::st.sync.aligned;\n\
\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n\
\tadd.s32 %r14, %r2, {a0};\n\tshr.u32 %r14, %r14, 4;\n\tcvt.u64.u32 %rd11, %r14;\n\tor.b64 %rd10, %rd11, %rd4;\n\
\tadd.s32 %r15, %r2, {b0};\n\tshr.u32 %r15, %r15, 4;\n\tcvt.u64.u32 %rd13, %r15;\n\tor.b64 %rd12, %rd13, %rd4;\n\
\tadd.s64 %rd14, %rd10, 256;\n\tadd.s64 %rd15, %rd12, 32;\n\
\t@%p1 tcgen05.mma.cta_group::1.{kind} [%r3], %rd10, %rd12, %r40, %p1;\n\
\t@%p1 tcgen05.mma.cta_group::1.{kind} [%r3], %rd14, %rd15, %r40, %p1;\n\
\t@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2+8];\n\
WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r2+8], 0;\n\t@!%p5 bra WAIT;\n\
\ttcgen05.fence::after_thread_sync;\n\
\ttcgen05.ld.sync.aligned.32x32b.x16.b32 {{%r70, %r71, %r72, %r73, %r74, %r75, %r76, %r77, %r78, %r79, %r80, %r81, %r82, %r83, %r84, %r85}}, [%r12];\n\
\ttcgen05.wait::ld.sync.aligned;\n\
\tadd.s64 %rd24, %rd3, %rd22;\n\
\tst.global.v4.u32 [%rd24], {{%r70, %r71, %r72, %r73}};\n\tst.global.v4.u32 [%rd24+16], {{%r74, %r75, %r76, %r77}};\n\
\tst.global.v4.u32 [%rd24+32], {{%r78, %r79, %r80, %r81}};\n\tst.global.v4.u32 [%rd24+48], {{%r82, %r83, %r84, %r85}};\n\
\ttcgen05.fence::before_thread_sync;\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n\
\t@%p2 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;\n\tret;\n}}\n",
        words = IMAGE / 4,
        a0 = 1024 + A0,
        b0 = 1024 + B0,
    )
}

/// The descriptor template: no swizzle, LBO 128, SBO 256, version 1 (start added by the kernel;
/// the second MMA's A and B start 4096 and 512 bytes on: +256 and +32 in the 16-byte field).
fn desc_template() -> u64 {
    ((128u64 >> 4) << 16) | ((256u64 >> 4) << 32) | (1u64 << 46)
}

/// Instruction descriptor: D format, A/B formats, negate bits, saturate, N = 16, M = 128.
fn idesc(d_fmt: u32, a: u32, b: u32, neg_a: bool, neg_b: bool, sat: bool) -> u32 {
    (u32::from(sat) << 3)
        | (d_fmt << 4)
        | (a << 7)
        | (b << 10)
        | (u32::from(neg_a) << 13)
        | (u32::from(neg_b) << 14)
        | (((N as u32) >> 3) << 17)
        | (((M as u32) >> 4) << 24)
}

/// Byte offset of element (row, k) of a K-major slice of `eb`-byte elements.
fn at(row: usize, k: usize, eb: usize) -> usize {
    let kb = k * eb;
    (row / 8) * 256 + (kb / 16) * 128 + (row % 8) * 16 + kb % 16
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 17
    }
}

/// One operand format for the test: element bytes, and (code, value) pairs written by hand
/// from the format's definition.
struct Fmt {
    eb: usize,
    codes: Vec<(u32, f64)>,
    /// Bits of the container the format ignores (padding, tf32's low mantissa bits): the test
    /// fills them with noise.
    noise: u32,
}

fn fmt(name: &str) -> Fmt {
    let c = |v: &[(u32, f64)]| v.to_vec();
    match name {
        // tf32: f32 bit patterns of values with a 10-bit mantissa; the low 13 bits are noise.
        "tf32" => Fmt {
            eb: 4,
            codes: c(&[
                (0x3F80_0000, 1.0),
                (0xBFC0_0000, -1.5),
                (0x4049_0000, 3.140625),
                (0x3DCC_C000, 0.0999755859375),
                (0xC2F6_E000, -123.4375),
                (0x0000_0000, 0.0),
            ]),
            noise: 0x1FFF,
        },
        // e4m3: S.EEEE.MMM, bias 7; 448 the largest, 0x01 = 2^-9 the smallest subnormal.
        "e4m3" => Fmt {
            eb: 1,
            codes: c(&[
                (0x38, 1.0),
                (0x3C, 1.5),
                (0xC4, -3.0),
                (0x30, 0.5),
                (0x7E, 448.0),
                (0x01, 1.0 / 512.0),
                (0x80, -0.0),
            ]),
            noise: 0,
        },
        // e5m2: S.EEEEE.MM, bias 15.
        "e5m2" => Fmt {
            eb: 1,
            codes: c(&[
                (0x3C, 1.0),
                (0x40, 2.0),
                (0xBE, -1.5),
                (0x34, 0.25),
                (0x01, 1.0 / 65536.0),
                (0x7B, 57344.0),
            ]),
            noise: 0,
        },
        // e2m3 in the low 6 bits: S.EE.MMM, bias 1.
        "e2m3" => Fmt {
            eb: 1,
            codes: c(&[
                (0x08, 1.0),
                (0x1F, 7.5),
                (0x21, -0.125),
                (0x12, 2.5),
                (0x00, 0.0),
            ]),
            noise: 0xC0,
        },
        // e3m2 in the low 6 bits: S.EEE.MM, bias 3.
        "e3m2" => Fmt {
            eb: 1,
            codes: c(&[
                (0x0C, 1.0),
                (0x1F, 28.0),
                (0x21, -0.0625),
                (0x12, 3.0),
                (0x2C, -1.0),
            ]),
            noise: 0xC0,
        },
        // e2m1 in bits 2-5: S.EE.M, bias 1.
        "e2m1" => Fmt {
            eb: 1,
            codes: c(&[
                (0x1 << 2, 0.5),
                (0x2 << 2, 1.0),
                (0x3 << 2, 1.5),
                (0x5 << 2, 3.0),
                (0x7 << 2, 6.0),
                (0xC << 2, -2.0),
                (0xE << 2, -4.0),
            ]),
            noise: 0xC3,
        },
        "s8" => Fmt {
            eb: 1,
            codes: (0..256u32).map(|v| (v, v as u8 as i8 as f64)).collect(),
            noise: 0,
        },
        "u8" => Fmt {
            eb: 1,
            codes: (0..256u32).map(|v| (v, v as f64)).collect(),
            noise: 0,
        },
        _ => panic!("no format {name}"),
    }
}

/// Fills one operand (rows x 2 slices of K elements) into `img` at `base`; returns the values.
fn fill(img: &mut [u8], base: usize, rows: usize, f: &Fmt, r: &mut Lcg) -> Vec<Vec<f64>> {
    let k = 32 / f.eb;
    let mut vals = vec![vec![0.0; 2 * k]; rows];
    for s in 0..2 {
        let slice = base + s * rows * 32;
        for (row, v) in vals.iter_mut().enumerate() {
            for kk in 0..k {
                let (code, val) = f.codes[r.next() as usize % f.codes.len()];
                let word = code | (r.next() as u32 & f.noise);
                let o = slice + at(row, kk, f.eb);
                img[o..o + f.eb].copy_from_slice(&word.to_le_bytes()[..f.eb]);
                v[s * k + kk] = val;
            }
        }
    }
    vals
}

fn launch(kind: &str, id: u32, img: &[u8], init: &[u32]) -> Result<Vec<u32>, SimError> {
    let p = Program::parse(&kernel(kind))?;
    let mut dev = Device::new();
    let put = |dev: &mut Device, b: &[u8]| {
        let a = dev.alloc(b.len() as u64);
        dev.write(a, b);
        a
    };
    let pi = put(&mut dev, img);
    let init_b: Vec<u8> = init.iter().flat_map(|x| x.to_le_bytes()).collect();
    let pd = put(&mut dev, &init_b);
    let po = put(&mut dev, &vec![0u8; M * N * 4]);
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [128, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 16384,
        params: vec![
            Param::U64(pi),
            Param::U64(pd),
            Param::U64(po),
            Param::U64(desc_template()),
            Param::U32(id),
        ],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        max_steps: 2_000_000,
        ..Options::default()
    };
    run(&p, &mut dev, &l, &o)?;
    let mut out = vec![0u8; M * N * 4];
    dev.read(po, &mut out);
    Ok(out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A float kind: D = init + A . B over both slices, within the f32 accumulation bound.
fn float_case(kind: &str, a: &str, b: &str, codes: (u32, u32), neg: (bool, bool), seed: u64) {
    let (fa, fb) = (fmt(a), fmt(b));
    let mut r = Lcg(seed);
    let mut img = vec![0u8; IMAGE];
    let av = fill(&mut img, A0, M, &fa, &mut r);
    let bv = fill(&mut img, B0, N, &fb, &mut r);
    let init: Vec<f32> = (0..M * N).map(|i| (i % 7) as f32 * 0.5 - 1.0).collect();
    let initw: Vec<u32> = init.iter().map(|x| x.to_bits()).collect();
    let id = idesc(1, codes.0, codes.1, neg.0, neg.1, false);
    let got = launch(kind, id, &img, &initw).unwrap_or_else(|e| panic!("{kind} {a}x{b}: {e}"));
    let sign = if neg.0 != neg.1 { -1.0 } else { 1.0 };
    for i in 0..M {
        for j in 0..N {
            let prods: Vec<f64> = av[i].iter().zip(&bv[j]).map(|(x, y)| x * y).collect();
            let want = init[i * N + j] as f64 + sign * prods.iter().sum::<f64>();
            let mag = init[i * N + j].abs() as f64 + prods.iter().map(|p| p.abs()).sum::<f64>();
            let g = f32::from_bits(got[i * N + j]) as f64;
            assert!(
                (g - want).abs() <= mag * 64.0 * f32::EPSILON as f64,
                "{kind} {a}x{b} D[{i}][{j}]: simulator {g}, reference {want}"
            );
        }
    }
}

#[test]
fn kind_tf32_ignores_the_low_13_bits_and_negates() {
    float_case("kind::tf32", "tf32", "tf32", (2, 2), (true, false), 1);
}

#[test]
fn kind_f8f6f4_decodes_every_format_from_its_container() {
    float_case("kind::f8f6f4", "e4m3", "e5m2", (0, 1), (false, false), 2);
    float_case("kind::f8f6f4", "e2m3", "e3m2", (3, 4), (false, true), 3);
    float_case("kind::f8f6f4", "e2m1", "e4m3", (5, 0), (false, false), 4);
    float_case("kind::f8f6f4", "e5m2", "e2m1", (1, 5), (true, true), 5);
}

#[test]
fn kind_i8_accumulates_exactly_and_wraps_or_saturates() {
    for (a, b, codes, sat) in [
        ("s8", "u8", (1, 0), false),
        ("s8", "s8", (1, 1), true),
        ("u8", "u8", (0, 0), false),
    ] {
        let (fa, fb) = (fmt(a), fmt(b));
        let mut r = Lcg(9);
        let mut img = vec![0u8; IMAGE];
        let av = fill(&mut img, A0, M, &fa, &mut r);
        let bv = fill(&mut img, B0, N, &fb, &mut r);
        // D near both s32 limits, so the sums cross them.
        let init: Vec<i32> = (0..M * N)
            .map(|i| match i % 3 {
                0 => i32::MAX - 1000,
                1 => i32::MIN + 1000,
                _ => i as i32,
            })
            .collect();
        let initw: Vec<u32> = init.iter().map(|&x| x as u32).collect();
        let id = idesc(2, codes.0, codes.1, false, false, sat);
        let got = launch("kind::i8", id, &img, &initw).unwrap_or_else(|e| panic!("i8: {e}"));
        let (mut wrapped, mut clamped) = (0, 0);
        for i in 0..M {
            for j in 0..N {
                // Each MMA (32 elements of K) is one D = D + A.B, saturated or wrapped.
                let (mut want, mut exact) = (init[i * N + j], init[i * N + j] as i64);
                for s in 0..2 {
                    let dot: i64 = (32 * s..32 * s + 32)
                        .map(|k| (av[i][k] * bv[j][k]) as i64)
                        .sum();
                    let sum = want as i64 + dot;
                    want = if sat {
                        sum.clamp(i32::MIN as i64, i32::MAX as i64) as i32
                    } else {
                        sum as i32
                    };
                    exact += dot;
                }
                clamped += usize::from(sat && want as i64 != exact);
                wrapped += usize::from(!sat && want as i64 != exact);
                assert_eq!(
                    got[i * N + j] as i32,
                    want,
                    "i8 {a}x{b} sat={sat} D[{i}][{j}]"
                );
            }
        }
        // The data crosses the limits, so wrap and saturate give different answers here.
        assert!(
            wrapped + clamped > 0,
            "{a}x{b}: no sum crossed an s32 limit"
        );
    }
}

#[test]
fn a_descriptor_of_another_kind_stops_at_the_mma_and_unmodelled_forms_at_decode() {
    // kind::i8 with an F32 D (bits 4-5 = 1): the ISA's kind::i8 has S32 = 2.
    let img = vec![0u8; IMAGE];
    let e = launch(
        "kind::i8",
        idesc(1, 1, 1, false, false, false),
        &img,
        &[0; M * N],
    )
    .expect_err("an F32 D on kind::i8");
    assert!(e.to_string().contains("S32 = 2"), "{e}");
    // kind::tf32 with an f16 A format.
    let e = launch(
        "kind::tf32",
        idesc(1, 0, 2, false, false, false),
        &img,
        &[0; M * N],
    )
    .expect_err("an F16 A on kind::tf32");
    assert!(e.to_string().contains("TF32 = 2"), "{e}");
    // Forms not modelled are refused when the module is decoded, naming the line.
    for form in [
        "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale",
        "tcgen05.mma.ws.cta_group::1.kind::tf32",
        "tcgen05.mma.sp.cta_group::1.kind::i8",
    ] {
        let ptx = kernel("kind::tf32").replacen("tcgen05.mma.cta_group::1.kind::tf32", form, 1);
        let line = ptx
            .lines()
            .position(|l| l.contains(form))
            .map(|i| i + 1)
            .unwrap_or(0);
        let e = Program::parse(&ptx).expect_err(form).to_string();
        assert!(
            e.contains(&format!("line {line}")),
            "{form}: {e} (expected PTX line {line})"
        );
    }
}
