//! The flush-to-zero forms, sm_100's packed `.f32x2` arithmetic and sm_90's vector atomics,
//! run from `corpus/ftz_atom.ptx` (what NVRTC makes of `corpus/ftz_atom.cu`; `gen.py`
//! regenerates it, `tests/tests/sim_corpus.rs` checks it is current) against a CPU reference.
//! `.ftz` (PTX ISA, "Floating Point Instructions", and each instruction's `.ftz` paragraph):
//! subnormal inputs and results are flushed to sign-preserving zero. Every `.ftz` kernel gets
//! subnormal inputs and inputs whose results are subnormal, and each test also checks that
//! its inputs separate the `.ftz` reference from the IEEE one, so a simulator that ignored
//! `.ftz` fails it (the planted bug); the packed forms without `.ftz` are the control.

// Table-driven checks: rows of (kernel, reference) read clearest.
#![allow(clippy::type_complexity)]

use sim::{run, Device, Launch, Options, Param, Program};
use std::sync::OnceLock;

const N: usize = 64;

fn prog() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| {
        Program::parse(include_str!("corpus/ftz_atom.ptx"))
            .unwrap_or_else(|e| panic!("the corpus PTX does not decode: {e}"))
    })
}

/// Run kernel `k` on 64 threads over word buffers `a b c` and `out` (initialised from `init`).
fn launch(k: &str, a: &[u32], b: &[u32], c: &[u32], init: &[u32]) -> Vec<u32> {
    let mut dev = Device::new();
    let mut buf = |d: &[u32]| {
        let bytes: Vec<u8> = d.iter().flat_map(|x| x.to_le_bytes()).collect();
        let p = dev.alloc(bytes.len().max(16) as u64);
        dev.write(p, &bytes);
        p
    };
    let (pa, pb, pc, po) = (buf(a), buf(b), buf(c), buf(init));
    let l = Launch {
        kernel: k.into(),
        grid: [1, 1, 1],
        block: [N as u32, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 0,
        params: vec![
            Param::U64(pa),
            Param::U64(pb),
            Param::U64(pc),
            Param::U64(po),
        ],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        max_steps: 5_000_000,
        ..Options::default()
    };
    run(prog(), &mut dev, &l, &o).unwrap_or_else(|e| panic!("{k}: {e}"));
    let mut out = vec![0u8; init.len() * 4];
    dev.read(po, &mut out);
    out.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
}

/// `n` f32 inputs: edge values, subnormals of both signs, tiny normals whose products and
/// sums fall below the normal range, then random values of mixed magnitude.
fn sweep(seed: u64, n: usize) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits(0x007F_FFFF),
        -f32::from_bits(0x0040_0000),
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-20,
        -1e-20,
        1.5,
        -2.25,
        1e-19,
        3.0e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.5,
        -0.7,
        2.0,
        1.2e-38,
        -1.1e-38,
    ];
    let mut r = Lcg(seed);
    while v.len() < n {
        let x = match r.next() % 4 {
            0 => f32::from_bits((r.next() % 0x0080_0000) as u32),
            1 => f32::from_bits(0x0080_0000 + (r.next() % 0x0100_0000) as u32),
            2 => (r.next() % 2000) as f32 / 97.0 - 10.0,
            _ => f32::from_bits(0x1F00_0000 + (r.next() % 0x0800_0000) as u32),
        };
        v.push(if r.next().is_multiple_of(2) { x } else { -x });
    }
    v.rotate_left((seed % 7) as usize);
    v
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `.ftz`: a subnormal becomes the zero of its sign.
fn fl(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// Round toward zero from the round-to-nearest `r` of an exact value whose residual
/// `exact - r` has the sign of `res`; `down`: toward minus infinity instead. A finite exact
/// value that rounded to infinity has an infinite residual of the other sign.
fn directed(r: f32, res: f64, down: bool) -> f32 {
    // An infinite exact value (an infinite input) gives an undefined residual: r is exact.
    if !r.is_finite() || res == 0.0 || res.is_nan() {
        if r.is_infinite() && !down && res != 0.0 && !res.is_nan() {
            return f32::MAX.copysign(r);
        }
        return r;
    }
    let step_down = |x: f32| {
        if x == 0.0 {
            -f32::from_bits(1)
        } else if x > 0.0 {
            f32::from_bits(x.to_bits() - 1)
        } else {
            f32::from_bits(x.to_bits() + 1)
        }
    };
    let step_up = |x: f32| -step_down(-x);
    if down {
        if res < 0.0 {
            step_down(r)
        } else {
            r
        }
    } else if r > 0.0 && res < 0.0 {
        step_down(r)
    } else if r < 0.0 && res > 0.0 {
        step_up(r)
    } else {
        r
    }
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Equal as results: the same bits, or both NaN.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn minmax(max: bool, a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return if b.is_nan() { f32::NAN } else { b };
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        let neg = if max {
            a.is_sign_negative() && b.is_sign_negative()
        } else {
            a.is_sign_negative() || b.is_sign_negative()
        };
        return if neg { -a.abs() } else { a.abs() };
    }
    if (a > b) == max {
        a
    } else {
        b
    }
}

type R3 = fn(f32, f32, f32) -> f32;

fn mul_rz(a: f32, b: f32) -> f32 {
    let p = a as f64 * b as f64;
    let r = p as f32;
    directed(r, p - r as f64, false)
}

/// The scalar `.ftz` kernels: (kernel, reference with `.ftz`, the IEEE reference).
fn scalar_rows() -> Vec<(&'static str, R3, R3)> {
    vec![
        ("k_add_ftz", |a, b, _| fl(fl(a) + fl(b)), |a, b, _| a + b),
        (
            "k_mul_rz_ftz",
            |a, b, _| fl(mul_rz(fl(a), fl(b))),
            |a, b, _| mul_rz(a, b),
        ),
        (
            "k_fma_ftz",
            |a, b, c| fl(fl(a).mul_add(fl(b), fl(c))),
            |a, b, c| a.mul_add(b, c),
        ),
        ("k_div_ftz", |a, b, _| fl(fl(a) / fl(b)), |a, b, _| a / b),
        ("k_sqrt_ftz", |a, _, _| fl(fl(a).sqrt()), |a, _, _| a.sqrt()),
        ("k_rcp_ftz", |a, _, _| fl(1.0 / fl(a)), |a, _, _| 1.0 / a),
        (
            "k_min_ftz",
            |a, b, _| minmax(false, fl(a), fl(b)),
            |a, b, _| minmax(false, a, b),
        ),
        (
            "k_max_ftz",
            |a, b, _| minmax(true, fl(a), fl(b)),
            |a, b, _| minmax(true, a, b),
        ),
        (
            "k_sat_ftz",
            |a, _, _| {
                let x = fl(a);
                if x.is_nan() || x <= 0.0 {
                    0.0
                } else {
                    x.min(1.0)
                }
            },
            |a, _, _| {
                if a.is_nan() || a <= 0.0 {
                    if a.is_subnormal() {
                        a
                    } else {
                        0.0
                    }
                } else {
                    a.min(1.0)
                }
            },
        ),
        ("k_abs_ftz", |a, _, _| fl(a).abs(), |a, _, _| a.abs()),
        (
            "k_d2f_ftz",
            |a, b, _| fl((a as f64 * b as f64) as f32),
            |a, b, _| (a as f64 * b as f64) as f32,
        ),
        ("k_floor_ftz", |a, _, _| fl(a).floor(), |a, _, _| a.floor()),
        ("k_trunc_ftz", |a, _, _| fl(a).trunc(), |a, _, _| a.trunc()),
        // slct: c (here a) >= 0 selects the first operand (here b); NaN selects the second.
        (
            "k_slct_ftz",
            |a, b, c| if fl(a) >= 0.0 { b } else { c },
            |a, b, c| if a >= 0.0 { b } else { c },
        ),
        (
            "k_slct",
            |a, b, c| if a >= 0.0 { b } else { c },
            |a, b, c| if a >= 0.0 { b } else { c },
        ),
        (
            "k_slct_s32",
            |a, b, c| if a.to_bits() as i32 >= 0 { b } else { c },
            |a, b, c| if a.to_bits() as i32 >= 0 { b } else { c },
        ),
    ]
}

#[test]
fn every_ftz_form_flushes_subnormal_inputs_and_results() {
    let (a, b, c) = (sweep(3, N), sweep(11, N), sweep(29, N));
    for (k, ftz, ieee) in scalar_rows() {
        let o = launch(k, &bits(&a), &bits(&b), &bits(&c), &[0x7FC0_0001; N]);
        let mut differ = 0;
        for i in 0..N {
            let want = ftz(a[i], b[i], c[i]);
            let got = f32::from_bits(o[i]);
            // cvt.sat: a zero result of a negative or zero input may carry either sign.
            let ok = same(got, want) || (k == "k_sat_ftz" && got == 0.0 && want == 0.0);
            assert!(
                ok,
                "{k}({:e}, {:e}, {:e}): simulator {got:e} ({:#x}), reference {want:e}",
                a[i], b[i], c[i], o[i]
            );
            differ += usize::from(!same(want, ieee(a[i], b[i], c[i])));
        }
        // The inputs separate .ftz from IEEE: ignoring .ftz would fail above (trunc of a
        // subnormal is a zero of its sign either way; the forms without .ftz are controls).
        assert!(
            differ > 0 || k == "k_trunc_ftz" || !k.ends_with("_ftz"),
            "{k}: no input where .ftz changes the result"
        );
    }
}

/// The packed kernels: (kernel, per-lane reference).
fn packed_rows() -> Vec<(&'static str, R3)> {
    vec![
        ("k_fadd2", |a, b, _| a + b),
        ("k_fmul2", |a, b, _| a * b),
        ("k_ffma2", |a, b, c| a.mul_add(b, c)),
        ("k_add_rz_ftz_x2", |a, b, _| {
            let (a, b) = (fl(a), fl(b));
            let r = a + b;
            let (s, e) = two_sum(a as f64, b as f64);
            let res = if s == r as f64 { e } else { s - r as f64 };
            fl(directed(r, res, false))
        }),
        ("k_sub_ftz_x2", |a, b, _| fl(fl(a) - fl(b))),
        ("k_mul_ftz_x2", |a, b, _| fl(fl(a) * fl(b))),
        ("k_fma_rm_ftz_x2", |a, b, c| {
            let (a, b, c) = (fl(a), fl(b), fl(c));
            let r = a.mul_add(b, c);
            // exact a*b (in f64) + c - r, as error-free sums; its sign picks the step.
            let p = a as f64 * b as f64;
            let (s, e) = two_sum(p, c as f64);
            let (s2, e2) = two_sum(s, -(r as f64));
            let res = s2 + (e + e2);
            if r == 0.0 && res == 0.0 {
                // An exact zero sum is -0 when rounding down, unless both terms are +0
                // (IEEE 754, "Exact zero sums").
                let plus = p == 0.0 && c == 0.0 && !p.is_sign_negative() && !c.is_sign_negative();
                return if plus { 0.0 } else { -0.0 };
            }
            fl(directed(r, res, true))
        }),
    ]
}

#[test]
fn packed_f32x2_forms_apply_the_f32_operation_to_each_lane() {
    let (a, b, c) = (sweep(5, 2 * N), sweep(17, 2 * N), sweep(23, 2 * N));
    for (k, f) in packed_rows() {
        let o = launch(
            k,
            &bits(&a),
            &bits(&b),
            &bits(&c),
            &vec![0x7FC0_0001; 2 * N],
        );
        let mut differ = 0;
        for i in 0..2 * N {
            let want = f(a[i], b[i], c[i]);
            let got = f32::from_bits(o[i]);
            assert!(
                same(got, want),
                "{k} lane {} of thread {}: ({:e}, {:e}, {:e}) simulator {got:e}, reference {want:e}",
                i % 2,
                i / 2,
                a[i],
                b[i],
                c[i]
            );
            let unflushed = |x: f32| x.is_subnormal();
            differ += usize::from(unflushed(a[i]) || unflushed(b[i]));
        }
        // The control (no .ftz) keeps subnormal inputs; the inputs hold some in either case.
        assert!(differ > 0, "{k}: no subnormal input");
    }
}

#[test]
fn atomic_add_f32_flushes_on_global_memory_and_keeps_subnormals_in_shared() {
    // PTX ISA atom/red: "atom.add.f32 on global memory flushes subnormal inputs and results to
    // sign-preserving zero; whereas atom.add.f32 on shared memory supports subnormal inputs".
    let a: Vec<u32> = (0..N as u32).map(|i| 1000 + 3 * i).collect();
    let mut init = vec![0u32; N + 2];
    init[N] = 0;
    let o = launch("k_atomicAdd_float_subnormal", &a, &[0; N], &[0; N], &init);
    // Global: every operand flushed, so every thread saw +0 and the word stays +0.
    assert!(o[..N].iter().all(|&x| x == 0), "global olds {:x?}", &o[..N]);
    assert_eq!(o[N], 0, "global final");
    // Shared: subnormal sums are exact (integer addition of the bit patterns here).
    assert_eq!(o[N + 1], a.iter().sum::<u32>(), "shared final");
}

/// Thread olds of one element form a chain of partial sums: sorted, each step is one
/// operand, the last step reaches `fin` (exact dyadic values, so every order sums exactly).
fn chain(init: f64, vals: &[f64], olds: &[f64], fin: f64) -> bool {
    let mut o = olds.to_vec();
    o.sort_by(|x, y| x.total_cmp(y));
    let mut steps: Vec<f64> = o.windows(2).map(|w| w[1] - w[0]).collect();
    steps.push(fin - o[o.len() - 1]);
    let mut v = vals.to_vec();
    v.sort_by(|x, y| x.total_cmp(y));
    steps.sort_by(|x, y| x.total_cmp(y));
    o[0] == init && steps == v
}

#[test]
fn vector_atomics_apply_each_element_atomically_under_contention() {
    // Positive dyadic operands: every order of additions is exact, the olds increase.
    let x: Vec<f32> = (0..N).map(|i| 0.25 * (i % 13 + 1) as f32).collect();
    let y: Vec<f32> = (0..N).map(|i| 0.5 * (i % 7 + 1) as f32).collect();
    let fx = |v: &[f32]| v.iter().map(|&z| z as f64).collect::<Vec<f64>>();
    let sum = |v: &[f32]| v.iter().map(|&z| z as f64).sum::<f64>();
    // float2: O[i] = old.x.
    let o = launch(
        "k_atomicAdd_float2",
        &bits(&x),
        &bits(&y),
        &[0; N],
        &[0; N + 4],
    );
    let olds: Vec<f64> = o[..N].iter().map(|&b| f32::from_bits(b) as f64).collect();
    let f = |k: usize| f32::from_bits(o[N + k]) as f64;
    assert!(chain(0.0, &fx(&x), &olds, f(0)), "float2 x: olds {olds:?}");
    assert_eq!((f(0), f(1)), (sum(&x), sum(&y)), "float2 finals");
    // float4: O[i] = old.y; z and w add the constants 1 and -2.
    let o = launch(
        "k_atomicAdd_float4",
        &bits(&x),
        &bits(&y),
        &[0; N],
        &[0; N + 4],
    );
    let olds: Vec<f64> = o[..N].iter().map(|&b| f32::from_bits(b) as f64).collect();
    let f = |k: usize| f32::from_bits(o[N + k]) as f64;
    assert!(chain(0.0, &fx(&y), &olds, f(1)), "float4 y: olds {olds:?}");
    assert_eq!(
        (f(0), f(1), f(2), f(3)),
        (sum(&x), sum(&y), N as f64, -2.0 * N as f64)
    );
    let o = launch("k_red_float4", &bits(&x), &bits(&y), &[0; N], &[0; N + 4]);
    let f = |k: usize| f32::from_bits(o[N + k]) as f64;
    assert_eq!(
        (f(0), f(1), f(2), f(3)),
        (sum(&x), sum(&y), 0.25 * N as f64, -0.5 * N as f64)
    );

    // v2.f16x2 add: small integers (exact in f16); O[i] = old of the second word.
    let h = |v: u32| -> u32 {
        // f16 bits of a small integer v (0 < v < 2048).
        let e = 31 - v.leading_zeros();
        ((15 + e) << 10) | ((v << (10 - e)) & 0x3FF)
    };
    let hv = |b: u32| -> f64 {
        let e = (b >> 10) & 0x1F;
        (1.0 + (b & 0x3FF) as f64 / 1024.0) * 2f64.powi(e as i32 - 15)
    };
    let av: Vec<u32> = (0..N as u32)
        .map(|i| h(i % 5 + 1) | (h(i % 3 + 2) << 16))
        .collect();
    let bv: Vec<u32> = (0..N as u32).map(|i| h(i % 9 + 1) | (h(4) << 16)).collect();
    let o = launch("k_atom_v2_f16x2_add", &av, &bv, &[0; N], &[0; N + 4]);
    let lo = |w: &[u32]| w.iter().map(|&b| hv(b & 0xFFFF)).collect::<Vec<f64>>();
    let olds: Vec<f64> = o[..N].iter().map(|&b| hv(b & 0xFFFF)).collect();
    let olds: Vec<f64> = olds
        .iter()
        .zip(&o[..N])
        .map(|(&v, &b)| if b & 0xFFFF == 0 { 0.0 } else { v })
        .collect();
    let fin = hv(o[N + 1] & 0xFFFF);
    assert!(chain(0.0, &lo(&bv), &olds, fin), "f16x2: olds {olds:?}");
    let s: f64 = av.iter().map(|&b| hv(b >> 16)).sum();
    assert_eq!(hv(o[N] >> 16), s, "f16x2 word 0, upper half");

    // v4.bf16x2 max (red): each lane of each word ends at the max of its operands.
    let bf = |b: u32| f32::from_bits(b << 16);
    let mut r = Lcg(77);
    let mut bfw = || -> u32 {
        let l = |r: &mut Lcg| ((0x3F00 + r.next() % 0x0200) | ((r.next() % 2) << 15)) as u32;
        l(&mut r) | (l(&mut r) << 16)
    };
    let (a4, b4, c4): (Vec<u32>, Vec<u32>, Vec<u32>) = (
        (0..N).map(|_| bfw()).collect(),
        (0..N).map(|_| bfw()).collect(),
        (0..N).map(|_| bfw()).collect(),
    );
    let init = 0xC700_C700u32; // -32768 in both lanes
    let mut iv = vec![0u32; N + 4];
    iv[N..].fill(init);
    let o = launch("k_red_v4_bf16x2_max", &a4, &b4, &c4, &iv);
    let d4: Vec<u32> = a4.iter().map(|&v| v ^ 0x8000_8000).collect();
    for (w, src) in [&a4, &b4, &c4, &d4].iter().enumerate() {
        for half in [0, 16] {
            let want = src
                .iter()
                .map(|&v| bf((v >> half) & 0xFFFF))
                .fold(bf(init & 0xFFFF), f32::max);
            assert_eq!(bf((o[N + w] >> half) & 0xFFFF), want, "bf16x2 max word {w}");
        }
    }

    // v8.f16 min: element k from A's (k < 4: low, else high) or B's half; olds of element 0
    // and 7 never below the final minimum, never above the initial value.
    let fh = |b: u32| hv(b & 0x7FFF) * if b & 0x8000 != 0 { -1.0 } else { 1.0 };
    let mut iv = vec![0u32; N + 4];
    iv[N..].fill(h(1024) | (h(1024) << 16));
    let o = launch("k_atom_v8_f16_min", &av, &bv, &[0; N], &iv);
    for k in 0..8usize {
        let src = if k & 1 == 1 { &bv } else { &av };
        let want = src
            .iter()
            .map(|&v| fh((v >> (16 * (k >> 2) as u32)) & 0xFFFF))
            .fold(1024.0, f64::min);
        let got = fh((o[N + k / 2] >> (16 * (k % 2))) & 0xFFFF);
        assert_eq!(got, want, "f16 min element {k}");
    }
    let m0 = fh(o[N] & 0xFFFF);
    assert!(o[..N]
        .iter()
        .all(|&w| (m0..=1024.0).contains(&fh(w & 0xFFFF))));
}

#[test]
fn vector_atomic_forms_outside_the_isa_table_are_refused_at_decode() {
    // PTX ISA atom, "with vector type": .f32 only with .add; shared memory not allowed.
    for bad in [
        "atom.global.v2.f32.max {%f1, %f2}, [%rd1], {%f3, %f4};",
        "atom.shared.v2.f32.add {%f1, %f2}, [%rd1], {%f3, %f4};",
        "red.global.v8.f32.add [%rd1], {%f1, %f2, %f3, %f4, %f1, %f2, %f3, %f4};",
        "atom.global.v2.f16x2.add {%r1, %r2}, [%rd1], {%r3, %r4};",
    ] {
        let ptx = format!(
            ".version 9.0\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{{\n\
             .reg .f32 %f<5>;\n.reg .b32 %r<5>;\n.reg .b64 %rd<2>;\n{bad}\nret;\n}}\n"
        );
        let e = Program::parse(&ptx).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|m| m.contains("line 9")),
            "{bad}: {e:?}"
        );
    }
}
