//! The instruction-coverage corpus: `corpus/math.cu` holds one tiny kernel per CUDA math
//! function or intrinsic; `corpus/math.ptx` is what NVRTC makes of it for sm_100a (regenerate
//! with `corpus/gen.py`; `tests/tests/sim_corpus.rs` checks it is current). Every kernel runs on
//! the simulator over a sweep of inputs with the edge values (zeros of both signs, subnormals,
//! infinities, NaN, large and negative values) and each result is compared with a CPU reference
//! within the bound the CUDA C++ Programming Guide's "Mathematical Functions" appendix states
//! for it (its tables for single and double precision functions and for intrinsics); "0 ulp"
//! there means correctly rounded, measured here as at most 0.5 ulp from the exact value.

// Table-driven checks: rows of (kernel, reference) and per-thread indexing read clearest.
#![allow(clippy::type_complexity, clippy::needless_range_loop)]

use sim::{run, Device, Launch, Options, Param, Program};
use std::sync::OnceLock;

const N: usize = 64;

fn prog() -> &'static Program {
    static P: OnceLock<Program> = OnceLock::new();
    P.get_or_init(|| {
        Program::parse(include_str!("corpus/math.ptx"))
            .unwrap_or_else(|e| panic!("the corpus PTX does not decode: {e}"))
    })
}

/// Run kernel `k` on 64 threads with input words `a b c` (4 or 8 bytes each) and `out` words
/// of output (initialised from `init`).
fn launch(k: &str, a: &[u8], b: &[u8], c: &[u8], init: &[u8]) -> Vec<u8> {
    let mut dev = Device::new();
    let mut buf = |d: &[u8]| {
        let p = dev.alloc(d.len().max(8) as u64);
        dev.write(p, d);
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
        max_steps: 20_000_000,
        ..Options::default()
    };
    run(prog(), &mut dev, &l, &o).unwrap_or_else(|e| panic!("{k}: {e}"));
    let mut out = vec![0u8; init.len()];
    dev.read(po, &mut out);
    out
}

fn bytes32(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn words32(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A deterministic generator of test values.
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

/// 64 f32 inputs: the edge values, then random ones over a wide range of magnitudes.
fn sweep32(seed: u64) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        f32::from_bits(0x007F_FFFF),
        f32::MIN_POSITIVE,
        1.0,
        -1.0,
        0.5,
        2.0,
        std::f32::consts::PI,
        -std::f32::consts::PI,
        10.0,
        -10.0,
        88.5,
        -87.0,
        100.0,
        1e10,
        -1e10,
        3.0e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-3,
        0.1,
        0.7,
        1.5,
        2.5,
        -2.5,
        3.5,
        1e-40,
        65504.0,
        -7e4,
    ];
    let mut r = Lcg(seed);
    while v.len() < N {
        let m = 1.0 + (r.next() % 1_000_000) as f32 / 1_000_000.0;
        let e = (r.next() % 41) as i32 - 20;
        let s = if r.next().is_multiple_of(3) {
            -1.0
        } else {
            1.0
        };
        v.push(s * m * 2f32.powi(e));
    }
    v
}

/// |r - exact| in units of the last place of `exact` in f32 (infinities and NaN: 0 if they
/// match, else the distance in representable values).
fn ulp_err32(r: f32, exact: f64) -> f64 {
    if exact.is_nan() || r.is_nan() {
        return if exact.is_nan() && r.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let e32 = exact as f32;
    if e32.is_infinite() || r.is_infinite() {
        let ord = |x: f32| {
            let b = x.to_bits() as i64;
            if b & 0x8000_0000 != 0 {
                -(b & 0x7FFF_FFFF)
            } else {
                b
            }
        };
        return (ord(r) - ord(e32)).abs() as f64;
    }
    let ex = if exact == 0.0 {
        -126
    } else {
        (exact.abs().log2().floor() as i32).max(-126)
    };
    (r as f64 - exact).abs() / 2f64.powi(ex - 23)
}

/// Where a bound from the Guide applies.
#[derive(Clone, Copy)]
enum Bound {
    /// Maximum ulp error over the whole range ("0 ulp": correctly rounded, 0.5 measured).
    Ulp(f64),
    /// `__expf`: 2 + floor(|1.173 x|) ulp.
    Expf,
    /// `__logf`, `__sinf`, `__cosf`: absolute error 2^-21.41 for x in [lo, hi]; outside it
    /// the Guide gives `ulp` (None: "larger otherwise", not checked there).
    AbsIn(f64, f64, Option<f64>),
    /// `__fdividef`/`fdividef`: 2 ulp for 2^-126 <= |y| <= 2^126; 0 (NaN for infinite x) for
    /// 2^126 < |y| < 2^128; not stated elsewhere.
    Fdiv,
}

struct Stat {
    name: &'static str,
    cases: usize,
    max: f64,
}

fn report(stats: &[Stat]) {
    for s in stats {
        eprintln!(
            "{:28} {:3} cases, max error {:.3} ulp",
            s.name, s.cases, s.max
        );
    }
}

type F3 = fn(f64, f64, f64) -> f64;

#[test]
fn f32_functions_and_intrinsics_within_the_guides_bounds() {
    let (xs, ys, zs) = (sweep32(1), sweep32(2), sweep32(3));
    let (a, b, c) = (
        bytes32(&xs.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
        bytes32(&ys.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
        bytes32(&zs.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
    );
    let cases: &[(&'static str, F3, Bound)] = &[
        // Guide, "Single-Precision Floating-Point Functions" table (default -prec-div and
        // -prec-sqrt, no -ftz).
        ("k_sqrtf", |x, _, _| x.sqrt(), Bound::Ulp(0.5)),
        ("k_rsqrtf", |x, _, _| 1.0 / x.sqrt(), Bound::Ulp(2.0)),
        ("k_expf", |x, _, _| x.exp(), Bound::Ulp(2.0)),
        ("k_exp2f", |x, _, _| x.exp2(), Bound::Ulp(2.0)),
        ("k_logf", |x, _, _| x.ln(), Bound::Ulp(1.0)),
        ("k_log2f", |x, _, _| x.log2(), Bound::Ulp(1.0)),
        ("k_sinf", |x, _, _| x.sin(), Bound::Ulp(2.0)),
        ("k_cosf", |x, _, _| x.cos(), Bound::Ulp(2.0)),
        ("k_tanhf", |x, _, _| x.tanh(), Bound::Ulp(2.0)),
        ("k_powf", |x, y, _| x.powf(y), Bound::Ulp(4.0)),
        ("k_fmaf", |x, y, z| x.mul_add(y, z), Bound::Ulp(0.5)),
        ("k_div", |x, y, _| x / y, Bound::Ulp(0.5)),
        ("k_fdividef", |x, y, _| x / y, Bound::Ulp(2.0)),
        ("k_erff", |x, _, _| libm::erf(x), Bound::Ulp(2.0)),
        ("k_atan2f", |x, y, _| x.atan2(y), Bound::Ulp(3.0)),
        ("k_fminf", |x, y, _| x.min(y), Bound::Ulp(0.5)),
        ("k_fmaxf", |x, y, _| x.max(y), Bound::Ulp(0.5)),
        ("k_rintf", |x, _, _| x.round_ties_even(), Bound::Ulp(0.5)),
        ("k_floorf", |x, _, _| x.floor(), Bound::Ulp(0.5)),
        ("k_ceilf", |x, _, _| x.ceil(), Bound::Ulp(0.5)),
        ("k_truncf", |x, _, _| x.trunc(), Bound::Ulp(0.5)),
        ("k_roundf", |x, _, _| x.round(), Bound::Ulp(0.5)),
        ("k_copysignf", |x, y, _| x.copysign(y), Bound::Ulp(0.5)),
        ("k_fabsf", |x, _, _| x.abs(), Bound::Ulp(0.5)),
        // Guide, "Intrinsic Functions" table (single precision).
        ("k___fsqrt_rn", |x, _, _| x.sqrt(), Bound::Ulp(0.5)),
        ("k___expf", |x, _, _| x.exp(), Bound::Expf),
        (
            "k___logf",
            |x, _, _| x.ln(),
            Bound::AbsIn(0.5, 2.0, Some(3.0)),
        ),
        (
            "k___sinf",
            |x, _, _| x.sin(),
            Bound::AbsIn(-std::f64::consts::PI, std::f64::consts::PI, None),
        ),
        (
            "k___cosf",
            |x, _, _| x.cos(),
            Bound::AbsIn(-std::f64::consts::PI, std::f64::consts::PI, None),
        ),
        ("k___fdividef", |x, y, _| x / y, Bound::Fdiv),
        ("k___frcp_rn", |x, _, _| 1.0 / x, Bound::Ulp(0.5)),
        (
            "k___saturatef",
            |x, _, _| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) },
            Bound::Ulp(0.5),
        ),
        (
            "k___fmul_sat_ftz",
            |x, y, _| {
                let p = ((x * y) as f32) as f64;
                if p.is_nan() {
                    0.0
                } else {
                    p.clamp(0.0, 1.0)
                }
            },
            Bound::Ulp(0.5),
        ),
    ];
    let mut stats = Vec::new();
    for &(k, f, bound) in cases {
        let out = words32(&launch(k, &a, &b, &c, &vec![0u8; 4 * N]));
        let mut st = Stat {
            name: k,
            cases: 0,
            max: 0.0,
        };
        for i in 0..N {
            let (x, y, z) = (xs[i] as f64, ys[i] as f64, zs[i] as f64);
            let r = f32::from_bits(out[i]);
            let exact = f(x, y, z);
            let err = ulp_err32(r, exact);
            let ok = match bound {
                Bound::Ulp(u) => err <= u + 1e-9,
                Bound::Expf => err == 0.0 || err <= 2.0 + (1.173 * x).abs().floor(),
                Bound::AbsIn(lo, hi, outside) => {
                    if (lo..=hi).contains(&x) {
                        (r as f64 - exact).abs() <= 2f64.powf(-21.41)
                    } else if let Some(u) = outside {
                        err <= u
                    } else {
                        continue;
                    }
                }
                Bound::Fdiv => {
                    let m = y.abs();
                    if (2f64.powi(-126)..=2f64.powi(126)).contains(&m) {
                        err <= 2.0
                    } else if m > 2f64.powi(126) && m < 2f64.powi(128) {
                        if x.is_infinite() {
                            r.is_nan()
                        } else {
                            r == 0.0
                        }
                    } else {
                        continue;
                    }
                }
            };
            assert!(
                ok,
                "{k}({x:e}, {y:e}, {z:e}) = {r:e} ({:#010x}), exact {exact:e}: {err} ulp",
                out[i]
            );
            st.cases += 1;
            if err.is_finite() {
                st.max = st.max.max(err);
            }
        }
        stats.push(st);
    }
    report(&stats);
}

// ------------------------------------------------------------------------------------------
// Directed rounding: exact CPU references. An exact result is held as `s + tail`, `s` the
// nearest f64 and `r` the sign of the tail (error-free transformations), then rounded.
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Debug)]
enum Rd {
    N,
    Z,
    Down,
    Up,
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The sign of the exact sum of `terms` (a nonoverlapping expansion is grown term by term;
/// its sign is that of its largest nonzero component).
fn exact_sign(terms: &[f64]) -> i8 {
    let mut e: Vec<f64> = Vec::new();
    for &t in terms {
        let mut q = t;
        let mut next = Vec::new();
        for &c in &e {
            let (s, err) = two_sum(q, c);
            if err != 0.0 {
                next.push(err);
            }
            q = s;
        }
        if q != 0.0 {
            next.push(q);
        }
        e = next;
    }
    match e.last() {
        Some(v) if *v > 0.0 => 1,
        Some(v) if *v < 0.0 => -1,
        _ => 0,
    }
}

fn next_f32(x: f32, up: bool) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x == 0.0 {
        let t = f32::from_bits(1);
        return if up { t } else { -t };
    }
    let b = x.to_bits();
    f32::from_bits(if (x > 0.0) == up { b + 1 } else { b - 1 })
}

fn next_f64(x: f64, up: bool) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x == 0.0 {
        let t = f64::from_bits(1);
        return if up { t } else { -t };
    }
    let b = x.to_bits();
    f64::from_bits(if (x > 0.0) == up { b + 1 } else { b - 1 })
}

/// Round the exact value `s + tail` (`r`: the tail's sign) to f32 in `m`.
fn round32(s: f64, r: i8, m: Rd) -> f32 {
    let n = s as f32;
    if s.is_nan() || s.is_infinite() {
        return n;
    }
    // Where the exact value lies relative to n.
    let c = if (n as f64) > s {
        -1
    } else if (n as f64) < s {
        1
    } else {
        r
    };
    let down = if c < 0 { next_f32(n, false) } else { n };
    let up = if c > 0 { next_f32(n, true) } else { n };
    match m {
        // The nearest (ties to even) from f64 is exact unless s is an f32 midpoint.
        Rd::N => {
            if c != 0 && (down as f64 - s).abs() == (up as f64 - s).abs() {
                if r > 0 {
                    up
                } else if r < 0 {
                    down
                } else {
                    n
                }
            } else {
                n
            }
        }
        Rd::Down => down,
        Rd::Up => up,
        Rd::Z => {
            if s > 0.0 || (s == 0.0 && r > 0) {
                down
            } else {
                up
            }
        }
    }
}

/// Round the exact value `s + tail` (s is already the nearest f64) to f64 in `m`.
fn round64(s: f64, r: i8, m: Rd) -> f64 {
    if s.is_infinite() && r == 2 {
        // Overflow of finite operands (IEEE 754 7.4): the largest finite value when the
        // rounding direction is toward zero from the infinity's side.
        let trunc = match m {
            Rd::N => false,
            Rd::Z => true,
            Rd::Down => s > 0.0,
            Rd::Up => s < 0.0,
        };
        return if trunc { f64::MAX.copysign(s) } else { s };
    }
    if r == 0 || s.is_nan() {
        return s;
    }
    let (down, up) = if r < 0 {
        (next_f64(s, false), s)
    } else {
        (s, next_f64(s, true))
    };
    match m {
        Rd::N => s,
        Rd::Down => down,
        Rd::Up => up,
        Rd::Z => {
            if s > 0.0 || (s == 0.0 && r > 0) {
                down
            } else {
                up
            }
        }
    }
}

/// The exact results (nearest f64, tail sign) of the basic operations on f64 operands.
fn x_add(a: f64, b: f64) -> (f64, i8) {
    let (s, e) = two_sum(a, b);
    if !s.is_finite() {
        return (
            s,
            2 * (s.is_infinite() && a.is_finite() && b.is_finite()) as i8,
        );
    }
    (s, exact_sign(&[e]))
}
fn x_mul(a: f64, b: f64) -> (f64, i8) {
    let s = a * b;
    if s.is_infinite() && a.is_finite() && b.is_finite() {
        return (s, 2);
    }
    if !s.is_finite() || s == 0.0 {
        return (
            s,
            exact_sign(&[a.signum() * b.signum() * ((a != 0.0 && b != 0.0) as u8 as f64)])
                * (s == 0.0) as i8,
        );
    }
    (s, exact_sign(&[a.mul_add(b, -s)]))
}
fn x_div(a: f64, b: f64) -> (f64, i8) {
    let q = a / b;
    if q.is_infinite() && a.is_finite() && b.is_finite() && b != 0.0 {
        return (q, 2);
    }
    if !q.is_finite() || b.is_infinite() || q == 0.0 {
        return (
            q,
            if q == 0.0 && a != 0.0 && b.is_finite() {
                (a.signum() * b.signum()) as i8
            } else {
                0
            },
        );
    }
    // a - q b exactly; its sign relative to b's is the tail's.
    let rem = (-q).mul_add(b, a);
    (q, exact_sign(&[rem]) * b.signum() as i8)
}
fn x_sqrt(a: f64) -> (f64, i8) {
    let s = a.sqrt();
    if !s.is_finite() || s == 0.0 {
        return (s, 0);
    }
    (s, exact_sign(&[(-s).mul_add(s, a)]))
}
fn x_fma(a: f64, b: f64, c: f64) -> (f64, i8) {
    let s = a.mul_add(b, c);
    if !s.is_finite() {
        return (
            s,
            2 * (s.is_infinite() && a.is_finite() && b.is_finite() && c.is_finite()) as i8,
        );
    }
    let p = a * b;
    let pe = a.mul_add(b, -p);
    (s, exact_sign(&[p, pe, c, -s]))
}

/// An f32 sweep's values as u32 words.
fn f32_words(seed: u64) -> Vec<u32> {
    sweep32(seed).iter().map(|v| v.to_bits()).collect()
}

/// Run a 32-bit kernel on the three word vectors; 64 output words.
fn run32(k: &str, a: &[u32], b: &[u32], c: &[u32]) -> Vec<u32> {
    words32(&launch(
        k,
        &bytes32(a),
        &bytes32(b),
        &bytes32(c),
        &vec![0u8; 4 * N],
    ))
}

fn bytes64(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn words64(b: &[u8]) -> Vec<u64> {
    b.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}
fn run64(k: &str, a: &[u64], b: &[u64], c: &[u64]) -> Vec<u64> {
    words64(&launch(
        k,
        &bytes64(a),
        &bytes64(b),
        &bytes64(c),
        &vec![0u8; 8 * N],
    ))
}

/// One corpus row of the report: function, cases checked, bound, largest error seen.
struct Row {
    name: &'static str,
    cases: usize,
    bound: &'static str,
    max: f64,
}

fn table(rows: &[Row]) {
    for r in rows {
        eprintln!(
            "| {:28} | {:3} | {:34} | {:.3} |",
            r.name, r.cases, r.bound, r.max
        );
    }
}

/// Compare a 32-bit kernel with an exact reference (bound 0: bit-identical, any NaN matching
/// any NaN when `nan_any`).
fn exact32(
    rows: &mut Vec<Row>,
    k: &'static str,
    bound: &'static str,
    (a, b, c): (&[u32], &[u32], &[u32]),
    f: impl Fn(u32, u32, u32) -> u32,
    same: impl Fn(u32, u32) -> bool,
) {
    let out = run32(k, a, b, c);
    for i in 0..N {
        let want = f(a[i], b[i], c[i]);
        assert!(
            same(out[i], want),
            "{k}({:#010x}, {:#010x}, {:#010x}) = {:#010x}, want {want:#010x}",
            a[i],
            b[i],
            c[i],
            out[i]
        );
    }
    rows.push(Row {
        name: k,
        cases: N,
        bound,
        max: 0.0,
    });
}

fn bits_eq(x: u32, y: u32) -> bool {
    x == y
}
fn f32_same(x: u32, y: u32) -> bool {
    x == y || (f32::from_bits(x).is_nan() && f32::from_bits(y).is_nan())
}

#[test]
fn f32_directed_rounding_intrinsics_are_exact() {
    let (xs, ys, zs) = (f32_words(1), f32_words(2), f32_words(3));
    let f = |w: u32| f32::from_bits(w) as f64;
    let mut rows = Vec::new();
    // Guide, "Intrinsic Functions": the IEEE-rounded intrinsics are exact in their mode ("0 ulp"
    // in the stated rounding direction): compared bit for bit with the exact rounding.
    type Op = fn(f64, f64, f64) -> (f64, i8);
    let ops: &[(&'static str, Op, Rd)] = &[
        ("k___fadd_rz", |x, y, _| x_add(x, y), Rd::Z),
        ("k___fadd_ru", |x, y, _| x_add(x, y), Rd::Up),
        ("k___fadd_rd", |x, y, _| x_add(x, y), Rd::Down),
        ("k___fmul_rz", |x, y, _| x_mul(x, y), Rd::Z),
        ("k___fmul_ru", |x, y, _| x_mul(x, y), Rd::Up),
        ("k___fmul_rd", |x, y, _| x_mul(x, y), Rd::Down),
        ("k___fdiv_rz", |x, y, _| x_div(x, y), Rd::Z),
        ("k___fdiv_ru", |x, y, _| x_div(x, y), Rd::Up),
        ("k___fdiv_rd", |x, y, _| x_div(x, y), Rd::Down),
        ("k___fsqrt_rz", |x, _, _| x_sqrt(x), Rd::Z),
        ("k___fsqrt_ru", |x, _, _| x_sqrt(x), Rd::Up),
        ("k___fsqrt_rd", |x, _, _| x_sqrt(x), Rd::Down),
        ("k___frcp_rz", |x, _, _| x_div(1.0, x), Rd::Z),
        ("k___frcp_ru", |x, _, _| x_div(1.0, x), Rd::Up),
        ("k___frcp_rd", |x, _, _| x_div(1.0, x), Rd::Down),
        ("k___fmaf_rz", x_fma, Rd::Z),
        ("k___fmaf_ru", x_fma, Rd::Up),
        ("k___fmaf_rd", x_fma, Rd::Down),
    ];
    for &(k, op, m) in ops {
        exact32(
            &mut rows,
            k,
            "0 ulp (IEEE directed)",
            (&xs, &ys, &zs),
            |x, y, z| {
                let (x, y, z) = (f(x), f(y), f(z));
                let (s, r) = op(x, y, z);
                // IEEE 754 6.3: an exact zero sum is -0 when rounding down unless both
                // addends are +0 (the f64 nearest has the other modes' sign already).
                let addends = match &k[4..8] {
                    "fadd" => Some((x, y)),
                    "fmaf" => Some((x * y, z)),
                    _ => None,
                };
                let s = match addends {
                    Some((p, q)) if s == 0.0 && r == 0 && m == Rd::Down => {
                        if p == 0.0 && q == 0.0 && p.is_sign_positive() && q.is_sign_positive() {
                            0.0
                        } else {
                            -0.0
                        }
                    }
                    _ => s,
                };
                round32(s, r, m).to_bits()
            },
            f32_same,
        );
    }
    table(&rows);
}

/// 64 u32 inputs: edge values, then random words.
fn sweep_u32(seed: u64) -> Vec<u32> {
    let mut v = vec![
        0,
        1,
        2,
        3,
        31,
        32,
        33,
        0x7F,
        0x80,
        0xFF,
        0x7FFF,
        0x8000,
        0xFFFF,
        0x00FF_FFFF,
        0x0080_0000,
        0xFF80_0000,
        0x7FFF_FFFF,
        0x8000_0000,
        0x8000_0001,
        0xFFFF_FFFF,
        0xFFFF_FFFE,
        0x1234_5678,
        0x8080_8080,
        0x7F7F_7F7F,
        0x0101_0101,
        0xFEFE_FEFE,
        0x8000_7FFF,
        0x7FFF_8000,
        0xDEAD_BEEF,
        0x0000_3210,
        0x0000_7654,
        0x0000_ba98,
    ];
    let mut r = Lcg(seed);
    while v.len() < N {
        v.push(r.next() as u32);
    }
    v
}

/// f16 and bf16 values as bits, through the half crate.
fn h2f(b: u32) -> f64 {
    half::f16::from_bits(b as u16).to_f64()
}
fn b2f(b: u32) -> f64 {
    half::bf16::from_bits(b as u16).to_f64()
}

/// Round `s + tail` to a 16-bit format (`near`: its round-to-nearest-even from f64; `val`: a
/// code's value) in `m`.
fn round16(near: fn(f64) -> u16, val: fn(u32) -> f64, s: f64, r: i8, m: Rd) -> u32 {
    let n = near(s) as u32;
    if s.is_nan() || s.is_infinite() {
        return n;
    }
    let step = |b: u32, up: bool| -> u32 {
        let v = val(b);
        if v == 0.0 {
            return if up { 1 } else { 0x8001 };
        }
        if (v > 0.0) == up {
            b + 1
        } else {
            b - 1
        }
    };
    let nv = val(n);
    let c = if nv > s {
        -1
    } else if nv < s {
        1
    } else {
        r
    };
    let down = if c < 0 { step(n, false) } else { n };
    let up = if c > 0 { step(n, true) } else { n };
    match m {
        Rd::N => {
            if c != 0 && (val(down) - s).abs() == (val(up) - s).abs() && r != 0 {
                if r > 0 {
                    up
                } else {
                    down
                }
            } else {
                n
            }
        }
        Rd::Down => down,
        Rd::Up => up,
        Rd::Z => {
            if s > 0.0 || (s == 0.0 && r > 0) {
                down
            } else {
                up
            }
        }
    }
}
fn to_h(s: f64, r: i8, m: Rd) -> u32 {
    round16(|v| half::f16::from_f64(v).to_bits(), h2f, s, r, m)
}
fn to_b(s: f64, r: i8, m: Rd) -> u32 {
    round16(|v| half::bf16::from_f64(v).to_bits(), b2f, s, r, m)
}

/// 64 words of two 16-bit float lanes each: edge values, then random finite ones.
fn sweep16(seed: u64, bf: bool) -> Vec<u32> {
    let edge: Vec<u32> = if bf {
        vec![
            0, 0x8000, 1, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x3F00, 0x4000, 0x7F7F, 0xFF7F, 0x7F80,
            0xFF80, 0x7FC0, 0x3EAB, 0x4049,
        ]
    } else {
        vec![
            0, 0x8000, 1, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x3800, 0x4000, 0x7BFF, 0xFBFF, 0x7C00,
            0xFC00, 0x7E00, 0x3555, 0x4248,
        ]
    };
    let mut r = Lcg(seed);
    let mut one = |i: usize| -> u32 {
        if i < edge.len() {
            edge[i]
        } else if bf {
            let e = 112 + (r.next() % 32) as u32;
            ((r.next() as u32 & 1) << 15) | (e << 7) | (r.next() as u32 & 0x7F)
        } else {
            let e = 5 + (r.next() % 22) as u32;
            ((r.next() as u32 & 1) << 15) | (e << 10) | (r.next() as u32 & 0x3FF)
        }
    };
    let lo: Vec<u32> = (0..N).map(&mut one).collect();
    let hi: Vec<u32> = (0..N).map(|i| one((i * 7 + 3) % N)).collect();
    lo.iter().zip(&hi).map(|(l, h)| l | (h << 16)).collect()
}

fn nan16(b: u32, bf: bool) -> bool {
    if bf {
        b2f(b).is_nan()
    } else {
        h2f(b).is_nan()
    }
}

/// Equal 16-bit lanes (NaN matches any NaN: the GPU writes its canonical NaN).
fn same16(lanes: u32, bf: bool) -> impl Fn(u32, u32) -> bool {
    move |x, y| {
        (0..lanes).all(|l| {
            let (a, b) = ((x >> (16 * l)) & 0xFFFF, (y >> (16 * l)) & 0xFFFF);
            a == b || (nan16(a, bf) && nan16(b, bf))
        }) && (lanes == 2 || x >> 16 == y >> 16)
    }
}

/// Apply a per-lane 16-bit function to both halves.
fn lanes2(x: u32, y: u32, z: u32, f: impl Fn(u32, u32, u32) -> u32) -> u32 {
    let h = |v: u32, i: u32| (v >> (16 * i)) & 0xFFFF;
    f(h(x, 0), h(y, 0), h(z, 0)) | (f(h(x, 1), h(y, 1), h(z, 1)) << 16)
}

/// IEEE maxNum/minNum as the ISA's max/min (a NaN operand is ignored; both NaN give NaN;
/// -0 is below +0).
fn fminmax(max: bool, nan: bool, a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return if nan || (a.is_nan() && b.is_nan()) {
            f64::NAN
        } else if a.is_nan() {
            b
        } else {
            a
        };
    }
    if a == b {
        return if (a.is_sign_negative() && b.is_sign_negative()) != max
            && (a.is_sign_negative() || b.is_sign_negative())
        {
            if max && !(a.is_sign_negative() && b.is_sign_negative()) {
                a.abs()
            } else {
                -a.abs()
            }
        } else if max {
            if a.is_sign_negative() && b.is_sign_negative() {
                a
            } else {
                a.abs()
            }
        } else if a.is_sign_negative() || b.is_sign_negative() {
            -a.abs()
        } else {
            a
        };
    }
    if (a > b) == max {
        a
    } else {
        b
    }
}

#[test]
fn integer_intrinsics_are_exact() {
    let (x, y, z) = (sweep_u32(11), sweep_u32(12), sweep_u32(13));
    let mut rows = Vec::new();
    let i = |v: u32| v as i32;
    let b = |v: u32, k: u32| (v >> (8 * k)) & 0xFF;
    let sb = |v: u32, k: u32| ((v >> (8 * k)) as u8) as i8 as i32;
    let h = |v: u32, k: u32| (v >> (16 * k)) & 0xFFFF;
    let sh = |v: u32, k: u32| ((v >> (16 * k)) as u16) as i16 as i32;
    // Guide, "Integer Intrinsics" (and the SIMD intrinsics of the CUDA Math API): exact.
    type I3 = fn(u32, u32, u32) -> u32;
    let cases: Vec<(&'static str, I3)> = vec![
        ("k___popc", |x, _, _| x.count_ones()),
        ("k___clz", |x, _, _| x.leading_zeros()),
        ("k___brev", |x, _, _| x.reverse_bits()),
        (
            "k___ffs",
            |x, _, _| if x == 0 { 0 } else { x.trailing_zeros() + 1 },
        ),
        ("k___byte_perm", |x, y, s| {
            let all = (x as u64) | ((y as u64) << 32);
            (0..4).fold(0, |acc, n| {
                let sel = (s >> (4 * n)) & 7;
                acc | ((((all >> (8 * sel)) & 0xFF) as u32) << (8 * n))
            })
        }),
        ("k___funnelshift_l", |lo, hi, s| {
            ((((hi as u64) << 32 | lo as u64) << (s & 31)) >> 32) as u32
        }),
        ("k___funnelshift_r", |lo, hi, s| {
            (((hi as u64) << 32 | lo as u64) >> (s & 31)) as u32
        }),
        ("k___funnelshift_lc", |lo, hi, s| {
            ((((hi as u64) << 32 | lo as u64) << s.min(32)) >> 32) as u32
        }),
        ("k___mul24", |x, y, _| {
            let e = |v: u32| ((v << 8) as i32) >> 8;
            e(x).wrapping_mul(e(y)) as u32
        }),
        ("k___umul24", |x, y, _| {
            (x & 0xFF_FFFF).wrapping_mul(y & 0xFF_FFFF)
        }),
        ("k___umulhi", |x, y, _| ((x as u64 * y as u64) >> 32) as u32),
        ("k___mulhi", |x, y, _| {
            ((x as i32 as i64 * y as i32 as i64) >> 32) as u32
        }),
        ("k___sad", |x, y, z| {
            ((x as i32 as i64 - y as i32 as i64).unsigned_abs() as u32).wrapping_add(z)
        }),
        ("k___usad", |x, y, z| x.abs_diff(y).wrapping_add(z)),
        ("k___dp4a", |x, y, z| {
            (0..4).fold(z as i32, |a, k| {
                a.wrapping_add(
                    (((x >> (8 * k)) as u8) as i8 as i32) * (((y >> (8 * k)) as u8) as i8 as i32),
                )
            }) as u32
        }),
        ("k___dp4a_u", |x, y, z| {
            (0..4).fold(z, |a, k| {
                a.wrapping_add(((x >> (8 * k)) & 0xFF) * ((y >> (8 * k)) & 0xFF))
            })
        }),
        ("k___dp2a_lo", |x, y, z| {
            (0..2).fold(z as i32, |a, k| {
                a.wrapping_add(
                    (((x >> (16 * k)) as u16) as i16 as i32)
                        * (((y >> (8 * k)) as u8) as i8 as i32),
                )
            }) as u32
        }),
        ("k___dp2a_hi", |x, y, z| {
            (0..2).fold(z, |a, k| {
                a.wrapping_add(((x >> (16 * k)) & 0xFFFF) * ((y >> (8 * (k + 2))) & 0xFF))
            })
        }),
        ("k_imin", |x, y, _| (x as i32).min(y as i32) as u32),
        ("k_umax", |x, y, _| x.max(y)),
        ("k_iabs", |x, _, _| (x as i32).wrapping_abs() as u32),
        // div.s32: the one overflowing quotient, INT_MIN / -1, wraps (PTX ISA div).
        ("k_idiv", |x, y, _| {
            if y == 0 {
                0
            } else {
                (x as i32).wrapping_div((y | 1) as i32) as u32
            }
        }),
        ("k_urem", |x, y, _| if y == 0 { 0 } else { x % y }),
        ("k___vadd2", |x, y, _| {
            lanes2(x, y, 0, |a, b, _| a.wrapping_add(b) & 0xFFFF)
        }),
        ("k___vsub4", |x, y, _| {
            (0..4).fold(0, |a, k| {
                a | ((((x >> (8 * k)) & 0xFF).wrapping_sub((y >> (8 * k)) & 0xFF) & 0xFF)
                    << (8 * k))
            })
        }),
        ("k___vabsdiffu4", |x, y, _| {
            (0..4).fold(0, |a, k| {
                a | (((x >> (8 * k)) & 0xFF).abs_diff((y >> (8 * k)) & 0xFF) << (8 * k))
            })
        }),
        ("k___vmaxs2", |x, y, _| {
            lanes2(x, y, 0, |a, b, _| {
                ((a as u16 as i16).max(b as u16 as i16) as u16) as u32
            })
        }),
        ("k___vminu4", |x, y, _| {
            (0..4).fold(0, |a, k| {
                a | (((x >> (8 * k)) & 0xFF).min((y >> (8 * k)) & 0xFF) << (8 * k))
            })
        }),
        ("k___vcmpeq2", |x, y, _| {
            lanes2(x, y, 0, |a, b, _| if a == b { 0xFFFF } else { 0 })
        }),
        ("k___vcmpltu4", |x, y, _| {
            (0..4).fold(0, |a, k| {
                a | (if (x >> (8 * k)) & 0xFF < (y >> (8 * k)) & 0xFF {
                    0xFF
                } else {
                    0
                } << (8 * k))
            })
        }),
        ("k___vsads2", |x, y, _| {
            (0..2)
                .map(|k| {
                    ((((x >> (16 * k)) as u16 as i16) as i32)
                        - (((y >> (16 * k)) as u16 as i16) as i32))
                        .unsigned_abs()
                })
                .sum()
        }),
        ("k___vavgu4", |x, y, _| {
            (0..4).fold(0, |a, k| {
                a | (((((x >> (8 * k)) & 0xFF) + ((y >> (8 * k)) & 0xFF) + 1) >> 1) << (8 * k))
            })
        }),
        ("k___vimax_s32_relu", |x, y, _| {
            (x as i32).max(y as i32).max(0) as u32
        }),
        ("k___vimin3_s32", |x, y, z| {
            (x as i32).min(y as i32).min(z as i32) as u32
        }),
        ("k___vimax3_u32", |x, y, z| x.max(y).max(z)),
        ("k___viaddmax_s32", |x, y, z| {
            (x as i32).wrapping_add(y as i32).max(z as i32) as u32
        }),
        ("k___vimax_s16x2_relu", |x, y, _| {
            lanes2(x, y, 0, |a, b, _| {
                ((a as u16 as i16).max(b as u16 as i16).max(0)) as u32
            })
        }),
        ("k___vibmax_s32", |x, y, _| {
            let (a, b) = (x as i32, y as i32);
            (a.max(b) as u32) ^ (((a >= b) as u32) << 31)
        }),
    ];
    let _ = (i, b, sb, h, sh);
    for (k, f) in cases {
        exact32(&mut rows, k, "0 (exact)", (&x, &y, &z), f, bits_eq);
    }
    table(&rows);
}

/// fp8 code `c` (E4M3 or E5M2) as a value.
fn fp8(c: u32, e4m3: bool) -> f64 {
    let (eb, mb, bias) = if e4m3 { (4, 3, 7) } else { (5, 2, 15) };
    let s = if c & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((c >> mb) & ((1 << eb) - 1)) as i32;
    let m = (c & ((1 << mb) - 1)) as f64;
    if e4m3 && e == 15 && m == 7.0 {
        return f64::NAN;
    }
    if !e4m3 && e == 31 {
        return if m == 0.0 {
            s * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if e == 0 {
        s * m * 2f64.powi(1 - bias - mb)
    } else {
        s * (1.0 + m / (1 << mb) as f64) * 2f64.powi(e - bias)
    }
}

/// Nearest-even fp8 code of `v` (PTX ISA cvt ... .e4m3x2/.e5m2x2: `.satfinite` clamps to the
/// largest finite value and NaN gives NaN; E5M2 without it overflows to infinity).
fn to_fp8(v: f64, e4m3: bool, satfinite: bool) -> u32 {
    if v.is_nan() {
        return 0x7F;
    }
    let neg = v.is_sign_negative();
    let max = if e4m3 { 448.0 } else { 57344.0 };
    let a = v.abs();
    let code = if a >= max && satfinite {
        if e4m3 {
            0x7E
        } else {
            0x7B
        }
    } else if !e4m3 && a >= 61440.0 {
        0x7C
    } else {
        // The nearest finite code; ties to the even code.
        let mut best = 0u32;
        for c in 0..0x7Fu32 {
            let cv = fp8(c, e4m3);
            if !cv.is_finite() {
                continue;
            }
            let (d, bd) = ((cv - a).abs(), (fp8(best, e4m3) - a).abs());
            if d < bd || (d == bd && c % 2 == 0) {
                best = c;
            }
        }
        best
    };
    code | if neg { 0x80 } else { 0 }
}

#[test]
fn half_bf16_fp8_and_conversions_are_exact() {
    let mut rows = Vec::new();
    // f16 / bf16 arithmetic: the CUDA Math API's half intrinsics round to nearest even (the
    // Guide lists no ulp error for them: they are IEEE operations, 0 ulp).
    let (hx, hy, hz) = (sweep16(21, false), sweep16(22, false), sweep16(23, false));
    let (bx, by, bz) = (sweep16(24, true), sweep16(25, true), sweep16(26, true));
    type H = fn(u32, u32, u32) -> u32;
    let hn = |s: (f64, i8)| to_h(s.0, s.1, Rd::N);
    let bn = |s: (f64, i8)| to_b(s.0, s.1, Rd::N);
    let sat = |v: u32| {
        let f = h2f(v);
        if f.is_nan() || f <= 0.0 {
            0
        } else if f >= 1.0 {
            0x3C00
        } else {
            v
        }
    };
    let half_cases: Vec<(&'static str, u32, H)> = vec![
        ("k___hadd", 1, |x, y, _| to_h(h2f(x) + h2f(y), 0, Rd::N)),
        ("k___hsub", 1, |x, y, _| to_h(h2f(x) - h2f(y), 0, Rd::N)),
        ("k___hmul", 1, |x, y, _| to_h(h2f(x) * h2f(y), 0, Rd::N)),
        ("k___hdiv", 1, |x, y, _| {
            let (q, r) = x_div(h2f(x), h2f(y));
            to_h(q, r, Rd::N)
        }),
        ("k___hfma", 1, |x, y, z| {
            let (s, r) = x_fma(h2f(x), h2f(y), h2f(z));
            to_h(s, r, Rd::N)
        }),
        ("k___hmax", 1, |x, y, _| {
            to_h(fminmax(true, false, h2f(x), h2f(y)), 0, Rd::N)
        }),
        ("k___hmin_nan", 1, |x, y, _| {
            to_h(fminmax(false, true, h2f(x), h2f(y)), 0, Rd::N)
        }),
        ("k___hlt", 1, |x, y, _| (h2f(x) < h2f(y)) as u32),
    ];
    let _ = (hn, bn);
    for (k, lanes, f) in half_cases {
        exact32(
            &mut rows,
            k,
            "0 ulp (round to nearest even)",
            (&hx, &hy, &hz),
            move |x, y, z| f(x & 0xFFFF, y & 0xFFFF, z & 0xFFFF),
            move |o, w| {
                if k == "k___hlt" {
                    o == w
                } else {
                    same16(lanes, false)(o, w)
                }
            },
        );
    }
    let half2: Vec<(&'static str, H)> = vec![
        ("k___hadd2", |x, y, _| to_h(h2f(x) + h2f(y), 0, Rd::N)),
        ("k___hsub2", |x, y, _| to_h(h2f(x) - h2f(y), 0, Rd::N)),
        ("k___hmul2", |x, y, _| to_h(h2f(x) * h2f(y), 0, Rd::N)),
        ("k___hfma2", |x, y, z| {
            let (s, r) = x_fma(h2f(x), h2f(y), h2f(z));
            to_h(s, r, Rd::N)
        }),
        ("k___hmax2", |x, y, _| {
            to_h(fminmax(true, false, h2f(x), h2f(y)), 0, Rd::N)
        }),
        ("k___hmin2_nan", |x, y, _| {
            to_h(fminmax(false, true, h2f(x), h2f(y)), 0, Rd::N)
        }),
        ("k___habs2", |x, _, _| x & 0x7FFF),
        ("k___hneg2", |x, _, _| x ^ 0x8000),
        (
            "k___heq2",
            |x, y, _| if h2f(x) == h2f(y) { 0x3C00 } else { 0 },
        ),
        ("k___hadd2_sat", |x, y, _| {
            let v = to_h(h2f(x) + h2f(y), 0, Rd::N);
            let f = h2f(v);
            if f.is_nan() || f <= 0.0 {
                0
            } else if f >= 1.0 {
                0x3C00
            } else {
                v
            }
        }),
    ];
    let _ = sat;
    for (k, f) in half2 {
        exact32(
            &mut rows,
            k,
            "0 ulp (round to nearest even)",
            (&hx, &hy, &hz),
            move |x, y, z| lanes2(x, y, z, f),
            same16(2, false),
        );
    }
    let bf: Vec<(&'static str, u32, H)> = vec![
        ("k___hadd_bf16", 1, |x, y, _| {
            to_b(b2f(x) + b2f(y), 0, Rd::N)
        }),
        ("k___hfma_bf16", 1, |x, y, z| {
            let (s, r) = x_fma(b2f(x), b2f(y), b2f(z));
            to_b(s, r, Rd::N)
        }),
        ("k___hmax_bf16", 1, |x, y, _| {
            to_b(fminmax(true, false, b2f(x), b2f(y)), 0, Rd::N)
        }),
        ("k___hmul2_bf16", 2, |x, y, _| {
            to_b(b2f(x) * b2f(y), 0, Rd::N)
        }),
        ("k___hadd2_bf16", 2, |x, y, _| {
            to_b(b2f(x) + b2f(y), 0, Rd::N)
        }),
        ("k___hfma2_bf16", 2, |x, y, z| {
            let (s, r) = x_fma(b2f(x), b2f(y), b2f(z));
            to_b(s, r, Rd::N)
        }),
    ];
    for (k, lanes, f) in bf {
        exact32(
            &mut rows,
            k,
            "0 ulp (round to nearest even)",
            (&bx, &by, &bz),
            move |x, y, z| {
                if lanes == 2 {
                    lanes2(x, y, z, f)
                } else {
                    f(x & 0xFFFF, y & 0xFFFF, z & 0xFFFF)
                }
            },
            same16(lanes, true),
        );
    }
    // hexp2: ex2.approx.f16 (PTX ISA: maximum relative error 2^-9.9, under 1 f16 ulp; the
    // Guide states no bound for it): within 1 ulp of the exact value.
    {
        let out = run32("k_hexp2", &hx, &hy, &hz);
        let mut max: f64 = 0.0;
        for i in 0..N {
            let (x, o) = (h2f(hx[i] & 0xFFFF), h2f(out[i] & 0xFFFF));
            let e = x.exp2();
            let want = h2f(to_h(e, 0, Rd::N));
            if e.is_nan() || want.is_infinite() || want == 0.0 {
                assert!(
                    o == want || (o.is_nan() && e.is_nan()) || (want == 0.0 && o.abs() < 1e-7),
                    "hexp2({x}) = {o}, want {want}"
                );
                continue;
            }
            let ulp = 2f64.powi((e.abs().log2().floor() as i32).max(-14) - 10);
            let err = (o - e).abs() / ulp;
            assert!(err <= 1.0, "hexp2({x}) = {o}, exact {e}: {err} ulp");
            max = max.max(err);
        }
        rows.push(Row {
            name: "k_hexp2",
            cases: N,
            bound: "1 ulp (ex2.approx.f16)",
            max,
        });
    }

    // Conversions: exact (IEEE rounding in the stated direction; float->int saturates and
    // NaN gives 0: PTX ISA cvt, "Floating Point to Integer").
    let (fx, fy, fz) = (f32_words(31), f32_words(32), f32_words(33));
    let f = |w: u32| f32::from_bits(w) as f64;
    let to_int = |v: f64, m: Rd, lo: f64, hi: f64| -> f64 {
        if v.is_nan() {
            return 0.0;
        }
        let r = match m {
            Rd::N => v.round_ties_even(),
            Rd::Z => v.trunc(),
            Rd::Down => v.floor(),
            Rd::Up => v.ceil(),
        };
        r.clamp(lo, hi)
    };
    type C = fn(u32, u32) -> u32;
    let fconv: Vec<(&'static str, C)> = vec![
        ("k___float2int_rn", |x, _| to_i(x, Rd::N)),
        ("k___float2int_rz", |x, _| to_i(x, Rd::Z)),
        ("k___float2int_rd", |x, _| to_i(x, Rd::Down)),
        ("k___float2int_ru", |x, _| to_i(x, Rd::Up)),
        ("k___float2uint_rn", |x, _| to_u(x, Rd::N)),
        ("k___float2uint_rz", |x, _| to_u(x, Rd::Z)),
        ("k___float2uint_rd", |x, _| to_u(x, Rd::Down)),
        ("k___float2uint_ru", |x, _| to_u(x, Rd::Up)),
        ("k___float2half_rn", |x, _| {
            to_h(f32::from_bits(x) as f64, 0, Rd::N)
        }),
        ("k___float2half_rz", |x, _| {
            to_h(f32::from_bits(x) as f64, 0, Rd::Z)
        }),
        ("k___float2half_rd", |x, _| {
            to_h(f32::from_bits(x) as f64, 0, Rd::Down)
        }),
        ("k___float2half_ru", |x, _| {
            to_h(f32::from_bits(x) as f64, 0, Rd::Up)
        }),
        ("k___float2bfloat16", |x, _| {
            to_b(f32::from_bits(x) as f64, 0, Rd::N)
        }),
        ("k___float2bfloat16_rz", |x, _| {
            to_b(f32::from_bits(x) as f64, 0, Rd::Z)
        }),
        ("k___float2bfloat16_rd", |x, _| {
            to_b(f32::from_bits(x) as f64, 0, Rd::Down)
        }),
        ("k___float2bfloat16_ru", |x, _| {
            to_b(f32::from_bits(x) as f64, 0, Rd::Up)
        }),
        ("k___floats2half2_rn", |x, y| {
            to_h(f32::from_bits(x) as f64, 0, Rd::N)
                | (to_h(f32::from_bits(y) as f64, 0, Rd::N) << 16)
        }),
        ("k___floats2bfloat162_rn", |x, y| {
            to_b(f32::from_bits(x) as f64, 0, Rd::N)
                | (to_b(f32::from_bits(y) as f64, 0, Rd::N) << 16)
        }),
        ("k_fp8_e4m3_sat", |x, _| {
            to_fp8(f32::from_bits(x) as f64, true, true)
        }),
        ("k_fp8_e5m2_sat", |x, _| {
            to_fp8(f32::from_bits(x) as f64, false, true)
        }),
        ("k_fp8_e5m2_nosat", |x, _| {
            to_fp8(f32::from_bits(x) as f64, false, false)
        }),
        ("k_fp8x2_e4m3", |x, y| {
            to_fp8(f32::from_bits(x) as f64, true, true)
                | (to_fp8(f32::from_bits(y) as f64, true, true) << 8)
        }),
    ];
    fn to_i(x: u32, m: Rd) -> u32 {
        let v = f32::from_bits(x) as f64;
        if v.is_nan() {
            return 0;
        }
        let r = match m {
            Rd::N => v.round_ties_even(),
            Rd::Z => v.trunc(),
            Rd::Down => v.floor(),
            Rd::Up => v.ceil(),
        };
        r.clamp(i32::MIN as f64, i32::MAX as f64) as i32 as u32
    }
    fn to_u(x: u32, m: Rd) -> u32 {
        let v = f32::from_bits(x) as f64;
        if v.is_nan() {
            return 0;
        }
        let r = match m {
            Rd::N => v.round_ties_even(),
            Rd::Z => v.trunc(),
            Rd::Down => v.floor(),
            Rd::Up => v.ceil(),
        };
        r.clamp(0.0, u32::MAX as f64) as u32
    }
    let _ = (to_int, f);
    for (k, c) in fconv {
        let fp8_nan = k.starts_with("k_fp8");
        exact32(
            &mut rows,
            k,
            "0 (exact conversion)",
            (&fx, &fy, &fz),
            move |x, y, _| c(x, y),
            move |o, w| {
                if fp8_nan {
                    (0..2).all(|b| {
                        let (p, q) = ((o >> (8 * b)) & 0xFF, (w >> (8 * b)) & 0xFF);
                        p == q
                            || (fp8(p, k.contains("e4m3")).is_nan()
                                && fp8(q, k.contains("e4m3")).is_nan())
                    })
                } else if k.contains("half") || k.contains("bfloat16") {
                    same16(2, k.contains("bfloat"))(o, w)
                } else {
                    o == w
                }
            },
        );
    }
    let ix = sweep_u32(34);
    let iconv: Vec<(&'static str, fn(u32) -> u32)> = vec![
        ("k___int2float_rn", |x| {
            round32(x as i32 as f64, 0, Rd::N).to_bits()
        }),
        ("k___int2float_rz", |x| {
            round32(x as i32 as f64, 0, Rd::Z).to_bits()
        }),
        ("k___int2float_rd", |x| {
            round32(x as i32 as f64, 0, Rd::Down).to_bits()
        }),
        ("k___int2float_ru", |x| {
            round32(x as i32 as f64, 0, Rd::Up).to_bits()
        }),
        ("k___uint2float_rn", |x| {
            round32(x as f64, 0, Rd::N).to_bits()
        }),
        ("k___uint2float_rz", |x| {
            round32(x as f64, 0, Rd::Z).to_bits()
        }),
        ("k___uint2float_rd", |x| {
            round32(x as f64, 0, Rd::Down).to_bits()
        }),
        ("k___uint2float_ru", |x| {
            round32(x as f64, 0, Rd::Up).to_bits()
        }),
    ];
    for (k, c) in iconv {
        exact32(
            &mut rows,
            k,
            "0 (exact conversion)",
            (&ix, &ix, &ix),
            move |x, _, _| c(x),
            bits_eq,
        );
    }
    // Widening: exact, NaN for NaN.
    let widen: Vec<(&'static str, fn(u32) -> u32, bool)> = vec![
        (
            "k___half2float",
            |x| (h2f(x & 0xFFFF) as f32).to_bits(),
            false,
        ),
        (
            "k___bfloat162float",
            |x| (b2f(x & 0xFFFF) as f32).to_bits(),
            true,
        ),
    ];
    for (k, c, bfw) in widen {
        let src = if bfw { &bx } else { &hx };
        exact32(
            &mut rows,
            k,
            "0 (exact conversion)",
            (src, src, src),
            move |x, _, _| c(x),
            f32_same,
        );
    }
    // fp8 to half: exact (every fp8 value is an f16 value).
    let codes: Vec<u32> = (0..N as u32)
        .map(|i| (i * 4 + (i >> 4)) & 0xFF | (((i * 37 + 11) & 0xFF) << 8))
        .collect();
    let fp8w: Vec<(&'static str, fn(u32) -> u32, bool)> = vec![
        (
            "k_fp8_e4m3_to_half",
            |x| to_h(fp8(x & 0xFF, true), 0, Rd::N),
            false,
        ),
        (
            "k_fp8_e5m2_to_half",
            |x| to_h(fp8(x & 0xFF, false), 0, Rd::N),
            false,
        ),
        (
            "k_fp8x2_e4m3_to_half2",
            |x| {
                to_h(fp8(x & 0xFF, true), 0, Rd::N)
                    | (to_h(fp8((x >> 8) & 0xFF, true), 0, Rd::N) << 16)
            },
            true,
        ),
        (
            "k_half2_to_fp8x2_e5m2",
            |x| to_fp8(h2f(x & 0xFFFF), false, true) | (to_fp8(h2f(x >> 16), false, true) << 8),
            false,
        ),
    ];
    for (k, c, two) in fp8w {
        let src = if k == "k_half2_to_fp8x2_e5m2" {
            &hx
        } else {
            &codes
        };
        exact32(
            &mut rows,
            k,
            "0 (exact conversion)",
            (src, src, src),
            move |x, _, _| c(x),
            move |o, w| {
                if k == "k_half2_to_fp8x2_e5m2" {
                    (0..2).all(|b| {
                        let (p, q) = ((o >> (8 * b)) & 0xFF, (w >> (8 * b)) & 0xFF);
                        p == q || (fp8(p, false).is_nan() && fp8(q, false).is_nan())
                    })
                } else {
                    same16(if two { 2 } else { 1 }, false)(o, w)
                }
            },
        );
    }
    table(&rows);
}

#[test]
fn warp_intrinsics_match_their_definitions() {
    let (x, y) = (sweep_u32(41), sweep_u32(42));
    let mut rows = Vec::new();
    // CUDA C++ Programming Guide, "Warp Shuffle Functions", "Warp Vote Functions", "Warp
    // Reduce Functions", "Warp Match Functions": exact. Lane l of warp w is thread 32 w + l.
    let warp = |i: usize| (i / 32) * 32;
    let lanes_where = |i: usize, p: &dyn Fn(usize) -> bool| -> u32 {
        (0..32)
            .filter(|&l| p(warp(i) + l))
            .fold(0, |m, l| m | (1 << l))
    };
    let shfl = |i: usize, src: usize| x[warp(i) + src];
    let mut check = |k: &'static str, want: &dyn Fn(usize) -> u32| {
        let out = run32(k, &x, &y, &y);
        for i in 0..N {
            assert_eq!(
                out[i],
                want(i),
                "{k}: thread {i}: {:#010x} != {:#010x}",
                out[i],
                want(i)
            );
        }
        rows.push(Row {
            name: k,
            cases: N,
            bound: "0 (exact)",
            max: 0.0,
        });
    };
    check("k___shfl_sync", &|i| shfl(i, (y[i] & 31) as usize));
    check("k___shfl_sync_w8", &|i| {
        let l = i % 32;
        shfl(i, (l / 8) * 8 + (y[i] & 31) as usize % 8)
    });
    let up = |i: usize, d: usize, w: usize| {
        let l = i % 32;
        if l % w >= d {
            shfl(i, l - d)
        } else {
            x[i]
        }
    };
    let down = |i: usize, d: usize, w: usize| {
        let l = i % 32;
        if l % w + d < w {
            shfl(i, l + d)
        } else {
            x[i]
        }
    };
    let xor = |i: usize, m: usize, w: usize| {
        let l = i % 32;
        // A source lane in a later segment returns the caller's own value.
        if (l ^ m) < (l / w + 1) * w {
            shfl(i, l ^ m)
        } else {
            x[i]
        }
    };
    check("k___shfl_up_sync", &|i| up(i, 3, 32));
    check("k___shfl_up_sync_w16", &|i| up(i, 5, 16));
    check("k___shfl_down_sync", &|i| down(i, 7, 32));
    check("k___shfl_down_sync_w8", &|i| down(i, 3, 8));
    check("k___shfl_xor_sync", &|i| xor(i, 5, 32));
    check("k___shfl_xor_sync_w4", &|i| xor(i, 1, 4));
    let odd = |j: usize| x[j] & 1 == 1;
    check("k___ballot_sync", &|i| lanes_where(i, &odd));
    check("k___all_sync", &|i| {
        (lanes_where(i, &odd) == u32::MAX) as u32
    });
    check("k___any_sync", &|i| (lanes_where(i, &odd) != 0) as u32);
    check("k___uni_sync", &|i| {
        let m = lanes_where(i, &odd);
        (m == 0 || m == u32::MAX) as u32
    });
    // __activemask in a branch taken by the odd-x lanes: the Guide guarantees only that the
    // calling lane is in it (which lanes are converged is the scheduler's); the simulator
    // answers the warp's lanes that have not exited (exec.rs `Op::Activemask`).
    {
        let out = run32("k___activemask", &x, &y, &y);
        for i in 0..N {
            if odd(i) {
                assert!(
                    out[i] & (1 << (i % 32)) != 0,
                    "k___activemask: thread {i}: {:#x}",
                    out[i]
                );
            } else {
                assert_eq!(out[i], 7, "k___activemask: thread {i}");
            }
        }
    }
    let red = |i: usize, f: &dyn Fn(u32, u32) -> u32| {
        (1..32).fold(x[warp(i)], |a, l| f(a, x[warp(i) + l]))
    };
    check("k___reduce_add_sync", &|i| {
        red(i, &|a, b| a.wrapping_add(b))
    });
    check("k___reduce_min_sync", &|i| {
        red(i, &|a, b| (a as i32).min(b as i32) as u32)
    });
    check("k___reduce_max_sync", &|i| red(i, &|a, b| a.max(b)));
    check("k___reduce_and_sync", &|i| red(i, &|a, b| a & b));
    check("k___reduce_or_sync", &|i| red(i, &|a, b| a | b));
    check("k___reduce_xor_sync", &|i| red(i, &|a, b| a ^ b));
    check("k___match_any_sync", &|i| {
        lanes_where(i, &|j| x[j] & 3 == x[i] & 3)
    });
    check("k___match_all_sync", &|i| {
        let all = lanes_where(i, &|j| y[j] & 1 == y[i] & 1) == u32::MAX;
        // m ^ pred: the full mask and 1, or 0 and 0.
        if all {
            u32::MAX ^ 1
        } else {
            0
        }
    });
    check("k_lanemask_lt", &|i| (1u32 << (i % 32)) - 1);

    // Partial masks in divergent code: only the named lanes take part.
    check("k___shfl_sync_partial", &|i| {
        if i % 2 == 1 {
            shfl(i, (y[i] & 15) as usize * 2 + 1)
        } else {
            x[i].wrapping_add(1)
        }
    });
    check("k___ballot_sync_div", &|i| {
        if i % 32 < 20 {
            lanes_where(i, &|j| j % 32 < 20 && odd(j))
        } else {
            9
        }
    });
    check("k___match_any_sync_div", &|i| {
        if i % 2 == 1 {
            lanes_where(i, &|j| j % 2 == 1 && x[j] & 3 == x[i] & 3)
        } else if i % 32 < 16 {
            lanes_where(i, &|j| j % 2 == 0 && j % 32 < 16 && x[j] & 1 == x[i] & 1)
        } else {
            5
        }
    });
    check("k___match_all_sync_div", &|i| {
        if (i % 32) % 3 != 0 {
            return 11;
        }
        let m = lanes_where(i, &|j| (j % 32) % 3 == 0);
        let same = lanes_where(i, &|j| (j % 32) % 3 == 0 && y[j] & 1 == y[i] & 1) == m;
        if same {
            m ^ (1 << 31)
        } else {
            0
        }
    });
    check("k___reduce_add_sync_div", &|i| {
        if i % 32 >= 8 {
            (8..32).fold(0u32, |a, l| a.wrapping_add(x[warp(i) + l]))
        } else {
            1
        }
    });
    check("k___match_any_sync_64", &|i| {
        lanes_where(i, &|j| x[j] & 1 == x[i] & 1 && y[j] & 1 == y[i] & 1)
    });
    rows.push(Row {
        name: "k___activemask",
        cases: N,
        bound: "contains the caller's lane",
        max: 0.0,
    });
    table(&rows);
}

/// Whether the old values `olds` returned by contending atomics `new = f(old, v)` started at
/// `init` form one valid order (each thread saw the value its predecessor left) ending at
/// `fin`; `seen(cur, old)`: whether a thread's recorded old matches memory `cur`.
fn valid_order(
    init: u64,
    vals: &[u64],
    olds: &[u64],
    fin: u64,
    f: &dyn Fn(u64, u64) -> u64,
    seen: &dyn Fn(u64, u64) -> bool,
) -> bool {
    fn go(
        cur: u64,
        used: &mut Vec<bool>,
        left: usize,
        c: &(
            &[u64],
            &[u64],
            u64,
            &dyn Fn(u64, u64) -> u64,
            &dyn Fn(u64, u64) -> bool,
        ),
        budget: &mut u32,
    ) -> bool {
        if left == 0 {
            return cur == c.2;
        }
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let mut tried = Vec::new();
        for i in 0..used.len() {
            let next = (c.3)(cur, c.0[i]);
            if !used[i] && (c.4)(cur, c.1[i]) && !tried.contains(&next) {
                // Threads that saw `cur` and leave the same value are interchangeable.
                tried.push(next);
                used[i] = true;
                if go(next, used, left - 1, c, budget) {
                    return true;
                }
                used[i] = false;
            }
        }
        false
    }
    let mut used = vec![false; vals.len()];
    let mut budget = 1_000_000;
    go(
        init,
        &mut used,
        vals.len(),
        &(vals, olds, fin, f, seen),
        &mut budget,
    )
}

#[test]
fn contending_atomics_give_the_sequential_result_in_a_valid_order() {
    // Guide, "Atomic Functions": each is one indivisible read-modify-write, so the final
    // value is the fold of all operands in some order and the olds are that order's prefix.
    let mut rows = Vec::new();
    let small: Vec<u32> = (0..N as u32).map(|i| (i * 37 + 5) % 61).collect();
    let rnd = sweep_u32(51);
    let floats: Vec<u32> = (0..N)
        .map(|i| ((i as f32 - 20.0) * 0.37 + 1e-3 * i as f32).to_bits())
        .collect();
    let h2: Vec<u32> = (0..N as u32)
        .map(|i| (0x3C00 + i * 13) | ((0xB800 + i * 7) << 16))
        .collect();
    let b2: Vec<u32> = (0..N as u32)
        .map(|i| (0x3F80 + i * 3) | ((0xBF00 + i * 5) << 16))
        .collect();
    let hadd = |c: u64, v: u64| {
        lanes2(c as u32, v as u32, 0, |a, b, _| {
            to_h(h2f(a) + h2f(b), 0, Rd::N)
        }) as u64
    };
    let badd = |c: u64, v: u64| {
        lanes2(c as u32, v as u32, 0, |a, b, _| {
            to_b(b2f(a) + b2f(b), 0, Rd::N)
        }) as u64
    };
    type F = Box<dyn Fn(u64, u64) -> u64>;
    let cases: Vec<(&'static str, &Vec<u32>, u32, F)> = vec![
        (
            "k_atomicAdd_int",
            &rnd,
            7,
            Box::new(|c, v| (c as u32).wrapping_add(v as u32) as u64),
        ),
        (
            "k_atomicAdd_uint",
            &rnd,
            9,
            Box::new(|c, v| (c as u32).wrapping_add(v as u32) as u64),
        ),
        (
            "k_atomicSub",
            &rnd,
            9,
            Box::new(|c, v| (c as u32).wrapping_sub(v as u32) as u64),
        ),
        (
            "k_atomicAdd_float",
            &floats,
            0x3F80_0000,
            Box::new(|c, v| {
                round32(
                    f32::from_bits(c as u32) as f64 + f32::from_bits(v as u32) as f64,
                    0,
                    Rd::N,
                )
                .to_bits() as u64
            }),
        ),
        ("k_atomicAdd_half2", &h2, 0x3C00_3C00, Box::new(hadd)),
        ("k_atomicAdd_bf162", &b2, 0x3F80_3F80, Box::new(badd)),
        ("k_atomicExch", &rnd, 3, Box::new(|_, v| v)),
        (
            "k_atomicMin",
            &rnd,
            0x4000_0000,
            Box::new(|c, v| (c as u32 as i32).min(v as u32 as i32) as u32 as u64),
        ),
        ("k_atomicMax", &rnd, 5, Box::new(|c, v| c.max(v))),
        (
            "k_atomicMax_int",
            &rnd,
            5,
            Box::new(|c, v| (c as u32 as i32).max(v as u32 as i32) as u32 as u64),
        ),
        (
            "k_atomicMin_uint",
            &rnd,
            0xF000_0000,
            Box::new(|c, v| c.min(v)),
        ),
        ("k_atomicAnd", &rnd, 0xFFFF_FFFF, Box::new(|c, v| c & v)),
        ("k_atomicOr", &rnd, 0, Box::new(|c, v| c | v)),
        ("k_atomicXor", &rnd, 0x5555_5555, Box::new(|c, v| c ^ v)),
        // inc: old >= v ? 0 : old + 1; dec: old == 0 || old > v ? v : old - 1 (Guide).
        (
            "k_atomicInc",
            &small,
            17,
            Box::new(|c, v| if c >= v { 0 } else { c + 1 }),
        ),
        (
            "k_atomicDec",
            &small,
            17,
            Box::new(|c, v| if c == 0 || c > v { v } else { c - 1 }),
        ),
    ];
    for (k, a, init, f) in cases {
        let mut initv = vec![0u32; N + 2];
        initv[N] = init;
        let o = words32(&launch(
            k,
            &bytes32(a),
            &bytes32(&[init]),
            &bytes32(a),
            &bytes32(&initv),
        ));
        let vals: Vec<u64> = a.iter().map(|&v| v as u64).collect();
        let olds: Vec<u64> = o[..N].iter().map(|&v| v as u64).collect();
        // The global word: a valid order of the recorded olds that ends at its final value.
        assert!(
            valid_order(init as u64, &vals, &olds, o[N] as u64, &*f, &|c, old| c
                == old),
            "{k}: the olds {olds:x?} and final {:#x} are no sequential order",
            o[N]
        );
        // The shared word: its final value is that of some order (for the commutative ops
        // every order's).
        let fin_shared = o[N + 1] as u64;
        let commutative = !matches!(
            k,
            "k_atomicExch"
                | "k_atomicInc"
                | "k_atomicDec"
                | "k_atomicAdd_float"
                | "k_atomicAdd_half2"
                | "k_atomicAdd_bf162"
        );
        if commutative {
            let seq = vals.iter().fold(init as u64, |c, &v| f(c, v));
            assert_eq!(fin_shared, seq, "{k}: shared final");
            assert_eq!(o[N] as u64, seq, "{k}: global final");
        } else if k == "k_atomicExch" {
            assert!(
                vals.contains(&fin_shared),
                "{k}: shared final {fin_shared:#x}"
            );
        }
        rows.push(Row {
            name: k,
            cases: N,
            bound: "0 (sequential order)",
            max: 0.0,
        });
    }
    // atomicCAS(&w, i, i + 1) from 0: the successful threads are exactly 0..final-1.
    let o = words32(&launch(
        "k_atomicCAS",
        &bytes32(&small),
        &bytes32(&small),
        &bytes32(&small),
        &vec![0u8; 4 * (N + 2)],
    ));
    let fin = o[N];
    for i in 0..N as u32 {
        assert_eq!(
            o[i as usize] == i,
            i < fin,
            "k_atomicCAS: thread {i} saw {} (final {fin})",
            o[i as usize]
        );
        assert!(o[i as usize] <= fin);
    }
    rows.push(Row {
        name: "k_atomicCAS",
        cases: N,
        bound: "0 (sequential order)",
        max: 0.0,
    });
    // A CAS loop on shared memory: every increment lands once.
    let o = words32(&launch(
        "k_atomicCAS_shared",
        &bytes32(&small),
        &bytes32(&small),
        &bytes32(&small),
        &vec![0u8; 4 * (N + 2)],
    ));
    let vals: Vec<u64> = small.iter().map(|&v| v as u64).collect();
    let olds: Vec<u64> = o[..N].iter().map(|&v| v as u64).collect();
    let total: u64 = vals.iter().sum();
    assert_eq!(o[N + 1] as u64, total, "k_atomicCAS_shared final");
    assert!(
        valid_order(0, &vals, &olds, total, &|c, v| c + v, &|c, old| c == old),
        "k_atomicCAS_shared order"
    );
    rows.push(Row {
        name: "k_atomicCAS_shared",
        cases: N,
        bound: "0 (sequential order)",
        max: 0.0,
    });
    // 64-bit add: the olds' high bits (old >> 20) in a valid order, the exact sum.
    let o = launch(
        "k_atomicAdd_ull",
        &bytes32(&rnd),
        &bytes32(&small),
        &bytes32(&small),
        &vec![0u8; 4 * (N + 2)],
    );
    let w = words32(&o);
    let vals: Vec<u64> = (0..N)
        .map(|i| ((rnd[i] as u64) << 20) | small[i] as u64)
        .collect();
    let fin = u64::from_le_bytes(o[4 * N..4 * N + 8].try_into().unwrap_or([0; 8]));
    let total = vals.iter().fold(0u64, |c, &v| c.wrapping_add(v));
    assert_eq!(fin, total, "k_atomicAdd_ull final");
    let olds: Vec<u64> = w[..N].iter().map(|&v| v as u64).collect();
    assert!(
        valid_order(
            0,
            &vals,
            &olds,
            total,
            &|c, v| c.wrapping_add(v),
            &|c, old| (c >> 20) as u32 as u64 == old
        ),
        "k_atomicAdd_ull order"
    );
    rows.push(Row {
        name: "k_atomicAdd_ull",
        cases: N,
        bound: "0 (sequential order)",
        max: 0.0,
    });
    // f64 adds of small integers are exact in any order.
    let o = launch(
        "k_atomicAdd_double",
        &bytes32(&small),
        &bytes32(&small),
        &bytes32(&small),
        &vec![0u8; 4 * (N + 4)],
    );
    let d = |k: usize| f64::from_le_bytes(o[4 * k..4 * k + 8].try_into().unwrap_or([0; 8]));
    assert_eq!(
        d(N),
        small.iter().map(|&v| v as f64).sum::<f64>(),
        "k_atomicAdd_double"
    );
    assert_eq!(d(N + 2), 32.0, "k_atomicAdd_double (block scope)");
    rows.push(Row {
        name: "k_atomicAdd_double",
        cases: N,
        bound: "0 (exact sums)",
        max: 0.0,
    });
    let o = words32(&launch(
        "k_atomic_sem",
        &bytes32(&small),
        &bytes32(&small),
        &bytes32(&small),
        &vec![0u8; 4 * (N + 4)],
    ));
    let vals: Vec<u64> = small.iter().map(|&v| v as u64).collect();
    let olds: Vec<u64> = o[..N].iter().map(|&v| v as u64).collect();
    let total: u64 = vals.iter().sum();
    assert!(
        valid_order(0, &vals, &olds, total, &|c, v| c + v, &|c, old| c == old)
            && o[N] as u64 == total,
        "k_atomic_sem"
    );
    assert_eq!(
        (o[N + 1], o[N + 2]),
        (64, 128),
        "k_atomic_sem: system and block scope adds"
    );
    rows.push(Row {
        name: "k_atomic_sem",
        cases: N,
        bound: "0 (sequential order)",
        max: 0.0,
    });
    table(&rows);
}

/// 64 f64 inputs: edge values, then random ones over a wide range.
fn sweep64(seed: u64) -> Vec<u64> {
    let mut v: Vec<f64> = vec![
        0.0,
        -0.0,
        f64::from_bits(1),
        f64::MIN_POSITIVE,
        1.0,
        -1.0,
        0.5,
        2.0,
        3.0,
        0.1,
        -0.1,
        1e300,
        -1e300,
        1e-300,
        700.0,
        -700.0,
        1e10,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        2.5,
        -2.5,
        1.5,
        4503599627370497.0,
        -9.3e18,
        1.8e19,
        3e9,
    ];
    let mut r = Lcg(seed);
    while v.len() < N {
        let m = 1.0 + (r.next() % 1_000_000_007) as f64 / 1_000_000_007.0;
        let e = (r.next() % 81) as i32 - 40;
        let s = if r.next().is_multiple_of(3) {
            -1.0
        } else {
            1.0
        };
        v.push(s * m * 2f64.powi(e));
    }
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn f64_functions_carry_chains_and_conversions() {
    let (x, y, z) = (sweep64(61), sweep64(62), sweep64(63));
    let d = f64::from_bits;
    let mut rows = Vec::new();
    let same64 = |o: u64, w: u64| o == w || (d(o).is_nan() && d(w).is_nan());
    // Exact: IEEE operations in their rounding (Guide, "Double-Precision Floating-Point
    // Functions": sqrt, fma, division, rint, floor... 0 ulp; "Intrinsic Functions": __dadd_rz
    // etc. IEEE-rounded), carry chains and conversions (PTX ISA add.cc/addc/sub.cc/subc/mad.cc,
    // cvt: exact in the stated rounding).
    type G = Box<dyn Fn(u64, u64, u64) -> u64>;
    let r64 = |(s, r): (f64, i8), m: Rd| round64(s, r, m).to_bits();
    let lo = |v: u64| v as u32 as u64;
    let hi = |v: u64| v >> 32;
    let cases: Vec<(&'static str, &'static str, G)> = vec![
        (
            "k_sqrt",
            "0 ulp",
            Box::new(move |x, _, _| r64(x_sqrt(d(x)), Rd::N)),
        ),
        (
            "k_fma",
            "0 ulp",
            Box::new(move |x, y, z| r64(x_fma(d(x), d(y), d(z)), Rd::N)),
        ),
        (
            "k_rcp",
            "0 ulp",
            Box::new(move |x, _, _| r64(x_div(1.0, d(x)), Rd::N)),
        ),
        (
            "k_ddiv",
            "0 ulp",
            Box::new(move |x, y, _| r64(x_div(d(x), d(y)), Rd::N)),
        ),
        (
            "k___dadd_rz",
            "0 ulp (rz)",
            Box::new(move |x, y, _| r64(x_add(d(x), d(y)), Rd::Z)),
        ),
        (
            "k___dadd_rd",
            "0 ulp (rd)",
            Box::new(move |x, y, _| {
                let (a, b) = (d(x), d(y));
                let (s, r) = x_add(a, b);
                // IEEE 754 6.3: an exact zero sum rounds down to -0 unless both addends are +0.
                if s == 0.0
                    && r == 0
                    && !(a == 0.0 && b == 0.0 && a.is_sign_positive() && b.is_sign_positive())
                {
                    return (-0.0f64).to_bits();
                }
                r64((s, r), Rd::Down)
            }),
        ),
        (
            "k___dsub_ru",
            "0 ulp (ru)",
            Box::new(move |x, y, _| r64(x_add(d(x), -d(y)), Rd::Up)),
        ),
        (
            "k___dmul_ru",
            "0 ulp (ru)",
            Box::new(move |x, y, _| r64(x_mul(d(x), d(y)), Rd::Up)),
        ),
        (
            "k___dmul_rz",
            "0 ulp (rz)",
            Box::new(move |x, y, _| r64(x_mul(d(x), d(y)), Rd::Z)),
        ),
        (
            "k___ddiv_rd",
            "0 ulp (rd)",
            Box::new(move |x, y, _| r64(x_div(d(x), d(y)), Rd::Down)),
        ),
        (
            "k___ddiv_ru",
            "0 ulp (ru)",
            Box::new(move |x, y, _| r64(x_div(d(x), d(y)), Rd::Up)),
        ),
        (
            "k___dsqrt_rd",
            "0 ulp (rd)",
            Box::new(move |x, _, _| r64(x_sqrt(d(x)), Rd::Down)),
        ),
        (
            "k___dsqrt_ru",
            "0 ulp (ru)",
            Box::new(move |x, _, _| r64(x_sqrt(d(x)), Rd::Up)),
        ),
        (
            "k___drcp_rz",
            "0 ulp (rz)",
            Box::new(move |x, _, _| r64(x_div(1.0, d(x)), Rd::Z)),
        ),
        (
            "k___fma_rz",
            "0 ulp (rz)",
            Box::new(move |x, y, z| r64(x_fma(d(x), d(y), d(z)), Rd::Z)),
        ),
        (
            "k_rint",
            "0",
            Box::new(move |x, _, _| d(x).round_ties_even().to_bits()),
        ),
        (
            "k_floor",
            "0",
            Box::new(move |x, _, _| d(x).floor().to_bits()),
        ),
        (
            "k_trunc",
            "0",
            Box::new(move |x, _, _| d(x).trunc().to_bits()),
        ),
        (
            "k_ceil",
            "0",
            Box::new(move |x, _, _| d(x).ceil().to_bits()),
        ),
        (
            "k_fmin",
            "0",
            Box::new(move |x, y, _| fminmax(false, false, d(x), d(y)).to_bits()),
        ),
        (
            "k_fmax",
            "0",
            Box::new(move |x, y, _| fminmax(true, false, d(x), d(y)).to_bits()),
        ),
        (
            "k_add_cc",
            "0",
            Box::new(move |x, y, _| {
                let l = lo(x) + lo(y);
                ((hi(x) + hi(y) + (l >> 32)) << 32) | (l & 0xFFFF_FFFF)
            }),
        ),
        ("k_sub_cc", "0", Box::new(move |x, y, _| x.wrapping_sub(y))),
        (
            "k_mad_cc",
            "0",
            Box::new(move |x, y, z| {
                let p = lo(x) * lo(y);
                let l = (p & 0xFFFF_FFFF) + lo(z);
                let h = ((p >> 32) + hi(z) + (l >> 32)) & 0xFFFF_FFFF;
                (h << 32) | (l & 0xFFFF_FFFF)
            }),
        ),
        (
            "k_add_cc_u64",
            "0",
            Box::new(|x, y, z| {
                let (l, c) = x.overflowing_add(y);
                z.wrapping_add(x ^ y).wrapping_add(c as u64) ^ l.wrapping_mul(3)
            }),
        ),
        (
            "k_sub_cc_u64",
            "0",
            Box::new(|x, y, z| {
                let (l, b) = x.overflowing_sub(y);
                z.wrapping_sub(x ^ y).wrapping_sub(b as u64) ^ l.wrapping_mul(3)
            }),
        ),
        (
            "k_add_cc_96",
            "0",
            Box::new(move |x, y, z| {
                // Words: lo x + lo y, hi x + hi y, lo z + hi z, carries rippling up.
                let s = (x as u128)
                    + (y as u128)
                    + (((z & 0xFFFF_FFFF) as u128 + (z >> 32) as u128) << 64);
                let (a, b, c) = (
                    s as u32 as u64,
                    (s >> 32) as u32 as u64,
                    (s >> 64) as u32 as u64,
                );
                ((b ^ c) << 32) | a
            }),
        ),
        (
            "k_sub_cc_96",
            "0",
            Box::new(move |x, y, z| {
                let s = (x as u128)
                    .wrapping_sub(y as u128)
                    .wrapping_add(((z & 0xFFFF_FFFF) as u128) << 64)
                    .wrapping_sub(((z >> 32) as u128) << 64);
                let (a, b, c) = (
                    s as u32 as u64,
                    (s >> 32) as u32 as u64,
                    (s >> 64) as u32 as u64,
                );
                ((b ^ c) << 32) | a
            }),
        ),
        (
            "k_madc_cc_u32",
            "0",
            Box::new(move |x, y, z| {
                let s = lo(x) as u128 * lo(y) as u128
                    + lo(z) as u128
                    + ((hi(z) as u128) << 32)
                    + ((hi(z) as u128) << 64);
                let (a, b, c) = (
                    s as u32 as u64,
                    (s >> 32) as u32 as u64,
                    (s >> 64) as u32 as u64,
                );
                ((b ^ c) << 32) | a
            }),
        ),
        (
            "k___umul64hi",
            "0",
            Box::new(|x, y, _| ((x as u128 * y as u128) >> 64) as u64),
        ),
        ("k___popcll", "0", Box::new(|x, _, _| x.count_ones() as u64)),
        (
            "k___clzll",
            "0",
            Box::new(|x, _, _| x.leading_zeros() as u64),
        ),
        ("k___brevll", "0", Box::new(|x, _, _| x.reverse_bits())),
        (
            "k___ffsll",
            "0",
            Box::new(|x, _, _| {
                if x == 0 {
                    0
                } else {
                    x.trailing_zeros() as u64 + 1
                }
            }),
        ),
        (
            "k___double2ll_rn",
            "0",
            Box::new(move |x, _, _| {
                let v = d(x);
                if v.is_nan() {
                    0
                } else {
                    v.round_ties_even().clamp(i64::MIN as f64, i64::MAX as f64) as i64 as u64
                }
            }),
        ),
        (
            "k___ll2double_rn",
            "0",
            Box::new(|x, _, _| {
                let s = x as i64 as f64;
                round64(s, (x as i64 as i128 - s as i128).signum() as i8, Rd::N).to_bits()
            }),
        ),
        (
            "k___ull2float_rn",
            "0",
            Box::new(|x, _, _| {
                let s = x as f64;
                round32(s, (x as i128 - s as i128).signum() as i8, Rd::N).to_bits() as u64
            }),
        ),
        (
            "k___ll2float_ru",
            "0",
            Box::new(|x, _, _| {
                let s = x as i64 as f64;
                round32(s, (x as i64 as i128 - s as i128).signum() as i8, Rd::Up).to_bits() as u64
            }),
        ),
        (
            "k___float2ll_rz",
            "0",
            Box::new(|x, _, _| {
                let v = f32::from_bits(x as u32) as f64;
                if v.is_nan() {
                    0
                } else {
                    v.trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64 as u64
                }
            }),
        ),
        (
            "k___double2float_rn",
            "0",
            Box::new(move |x, _, _| round32(d(x), 0, Rd::N).to_bits() as u64),
        ),
        (
            "k___double2float_rz",
            "0",
            Box::new(move |x, _, _| round32(d(x), 0, Rd::Z).to_bits() as u64),
        ),
        (
            "k___double2float_rd",
            "0",
            Box::new(move |x, _, _| round32(d(x), 0, Rd::Down).to_bits() as u64),
        ),
        (
            "k___double2float_ru",
            "0",
            Box::new(move |x, _, _| round32(d(x), 0, Rd::Up).to_bits() as u64),
        ),
        (
            "k___double2int_rz",
            "0",
            Box::new(move |x, _, _| {
                if d(x).is_nan() {
                    0
                } else {
                    d(x).trunc().clamp(i32::MIN as f64, i32::MAX as f64) as i32 as u32 as u64
                }
            }),
        ),
        (
            "k___double2uint_ru",
            "0",
            Box::new(move |x, _, _| {
                if d(x).is_nan() {
                    0
                } else {
                    d(x).ceil().clamp(0.0, u32::MAX as f64) as u32 as u64
                }
            }),
        ),
        (
            "k___double2ull_rd",
            "0",
            Box::new(move |x, _, _| {
                if d(x).is_nan() {
                    0
                } else {
                    d(x).floor().clamp(0.0, u64::MAX as f64) as u64
                }
            }),
        ),
        (
            "k___int2double_rn",
            "0",
            Box::new(|x, _, _| (x as u32 as i32 as f64).to_bits()),
        ),
        (
            "k___ull2double_rz",
            "0",
            Box::new(|x, _, _| {
                let s = x as f64;
                round64(s, (x as i128 - s as i128).signum() as i8, Rd::Z).to_bits()
            }),
        ),
        (
            "k___double2half_rn",
            "0",
            Box::new(move |x, _, _| to_h(d(x), 0, Rd::N) as u64),
        ),
    ];
    for (k, bound, f) in cases {
        let out = run64(k, &x, &y, &z);
        let fl = k.contains("2float") && !k.contains("ll2float") || k.contains("ull2float");
        for i in 0..N {
            let want = f(x[i], y[i], z[i]);
            let ok = if k.contains("half") {
                same16(1, false)(out[i] as u32, want as u32) && out[i] >> 16 == 0
            } else if fl || k == "k___ll2float_ru" {
                f32_same(out[i] as u32, want as u32)
            } else {
                same64(out[i], want)
            };
            assert!(
                ok,
                "{k}({:#x}, {:#x}, {:#x}) = {:#x}, want {want:#x}",
                x[i], y[i], z[i], out[i]
            );
        }
        rows.push(Row {
            name: k,
            cases: N,
            bound,
            max: 0.0,
        });
    }
    // exp, log: Guide, "Double-Precision Floating-Point Functions": 1 ulp. The host's libm
    // is the reference (itself within about 0.5 ulp), so the measured error may be 1.5.
    for (k, fun) in [("k_exp", f64::exp as fn(f64) -> f64), ("k_log", f64::ln)] {
        let out = run64(k, &x, &y, &z);
        let mut max: f64 = 0.0;
        for i in 0..N {
            let (o, e) = (d(out[i]), fun(d(x[i])));
            if e.is_nan() || e.is_infinite() || e == 0.0 || o == e {
                assert!(
                    o == e || (o.is_nan() && e.is_nan()) || (e == 0.0 && o.abs() < 1e-300),
                    "{k}({}) = {o}, want {e}",
                    d(x[i])
                );
                continue;
            }
            let ulp = 2f64.powi((e.abs().log2().floor() as i32).max(-1022) - 52);
            let err = (o - e).abs() / ulp;
            assert!(
                err <= 1.5,
                "{k}({}) = {o}, reference {e}: {err} ulp",
                d(x[i])
            );
            max = max.max(err);
        }
        rows.push(Row {
            name: k,
            cases: N,
            bound: "1 ulp",
            max,
        });
    }
    table(&rows);
}
