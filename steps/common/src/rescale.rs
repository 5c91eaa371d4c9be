//! Power-of-two rescaling of a GEMM's inputs, exact in f16 and bf16: the grader's defence
//! against memoisation. Before every timed launch A is multiplied by 2^a and B by 2^b, with
//! exponents that differ from the previous launch on the same buffers, so every nonzero input
//! element changes and the exact product changes by 2^(a+b): a kernel that returns an output it
//! kept for these buffers is wrong, and the grader still knows the right answer without
//! computing it again (the reference times 2^(a+b)).
//!
//! Multiplying by a power of two only moves the exponent, so it is exact as long as no value
//! leaves the format's range: no overflow, and no bit below the smallest subnormal's. The
//! exponents are chosen inside the range where that holds for every element ([`exact_range`]),
//! and where the product stays well inside the normal range ([`output_range`]). Accumulation in
//! f32 then scales exactly too, so a kernel's output on scaled inputs is exactly its unscaled
//! output times 2^(a+b), rounding included.

use crate::problem::Dtype;

/// Scale exponents of one launch: A times 2^a, B times 2^b, C times 2^(a+b).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Pow2 {
    pub a: i32,
    pub b: i32,
}

impl Pow2 {
    /// The exponent of C's scale.
    pub fn c(self) -> i32 {
        self.a + self.b
    }
    /// 2^(a+b) (exact in f32 for the exponents [`choose`] returns).
    pub fn c_factor(self) -> f32 {
        pow2(self.c())
    }
}

/// 2^e as f32 (exact for -126 <= e <= 127).
pub fn pow2(e: i32) -> f32 {
    (e as f32).exp2()
}

/// The format's range in exponents: (the exponent of its smallest subnormal's one bit, the
/// exponent of its largest binade, the exponent of its smallest normal binade).
fn format_exponents(dtype: Dtype) -> (i32, i32, i32) {
    match dtype {
        Dtype::F16 => (-24, 15, -14),
        Dtype::Bf16 => (-133, 127, -126),
    }
}

/// floor(log2 |x|) and the exponent of x's lowest set bit, for a finite nonzero f32.
fn exponents_of(x: f32) -> (i32, i32) {
    let bits = x.abs().to_bits();
    let biased = (bits >> 23) as i32;
    let (top, mantissa) = if biased == 0 {
        // An f32 subnormal (no f16 or bf16 value is one, but be exact anyway).
        let m = bits & 0x7F_FFFF;
        (-149 + 31 - m.leading_zeros() as i32, m)
    } else {
        (biased - 127, (bits & 0x7F_FFFF) | 0x80_0000)
    };
    let low = if biased == 0 {
        -149 + mantissa.trailing_zeros() as i32
    } else {
        top - 23 + mantissa.trailing_zeros() as i32
    };
    (top, low)
}

/// The exponents e (an inclusive range) for which every element of `v` times 2^e is exactly
/// representable in `dtype`; all of i32's range for a matrix of zeros. Non-finite elements
/// allow no scale (an empty range).
pub fn exact_range(dtype: Dtype, v: &[u16]) -> (i32, i32) {
    let (grain, top_binade, _) = format_exponents(dtype);
    let (mut lo, mut hi) = (i32::MIN, i32::MAX);
    for &x in v {
        let f = dtype.to_f32(x);
        if f == 0.0 {
            continue;
        }
        if !f.is_finite() {
            return (1, 0);
        }
        let (top, low) = exponents_of(f);
        lo = lo.max(grain - low);
        hi = hi.min(top_binade - top);
    }
    (lo, hi)
}

/// The exponents c (inclusive) for which the exact product `reference` times 2^c keeps its
/// largest element a binade below overflow and its root-mean-square ten binades above the
/// smallest normal, so the kernel's rounding to `dtype` stays what it was unscaled.
pub fn output_range(dtype: Dtype, reference: &[f32]) -> (i32, i32) {
    let (_, top_binade, min_normal) = format_exponents(dtype);
    let max = reference.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return if max == 0.0 {
            (i32::MIN, i32::MAX)
        } else {
            (1, 0)
        };
    }
    let sq: f64 = reference.iter().map(|&x| (x as f64).powi(2)).sum();
    let rms = (sq / reference.len() as f64).sqrt() as f32;
    let hi = top_binade - 1 - exponents_of(max).0;
    let lo = min_normal + 10 - exponents_of(rms.max(f32::MIN_POSITIVE)).0;
    (lo, hi)
}

/// `v` times 2^e, element by element; None if any element would not be exact.
pub fn scale(dtype: Dtype, v: &[u16], e: i32) -> Option<Vec<u16>> {
    let f = pow2(e);
    let mut out = Vec::with_capacity(v.len());
    for &x in v {
        let y = dtype.to_f32(x) * f;
        let bits = dtype.from_f32(y);
        if dtype.to_f32(bits) != y || !y.is_finite() {
            return None;
        }
        out.push(bits);
    }
    Some(out)
}

/// The exponents the grader draws from: at most a factor of 4 either way, so inputs stay near
/// the magnitudes their distribution was designed with.
pub const MAX_EXPONENT: i32 = 2;

/// A fresh scale for the next launch on buffers last used with `previous`: a, b and a+b all
/// differ from `previous`'s (every nonzero element of A and of B changes, and so does the
/// product), within `a_range`, `b_range` (from [`exact_range`]) and `c_range` (from
/// [`output_range`]), drawn by `seed`. None when no exponent pair satisfies all of them.
pub fn choose(
    seed: u64,
    previous: Pow2,
    a_range: (i32, i32),
    b_range: (i32, i32),
    c_range: (i32, i32),
) -> Option<Pow2> {
    let within = |e: i32, (lo, hi): (i32, i32)| lo <= e && e <= hi;
    let mut options = Vec::new();
    for a in -MAX_EXPONENT..=MAX_EXPONENT {
        for b in -MAX_EXPONENT..=MAX_EXPONENT {
            let p = Pow2 { a, b };
            if within(a, a_range)
                && within(b, b_range)
                && within(p.c(), c_range)
                && a != previous.a
                && b != previous.b
                && p.c() != previous.c()
            {
                options.push(p);
            }
        }
    }
    if options.is_empty() {
        return None;
    }
    // splitmix64: a well-mixed index from any seed.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Some(options[(z % options.len() as u64) as usize])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dist, Problem, Shape};

    #[test]
    fn ranges_follow_the_formats() {
        let f16 = |x: f32| Dtype::F16.from_f32(x);
        // 1.0: exact from 2^-24 (its only bit at the smallest subnormal) up to 2^15.
        assert_eq!(exact_range(Dtype::F16, &[f16(1.0)]), (-24, 15));
        // 1 + 2^-10 has a bit at 2^-10: down to 2^-14 (the smallest subnormal's bit).
        assert_eq!(
            exact_range(Dtype::F16, &[f16(1.0 + 1.0 / 1024.0)]),
            (-14, 15)
        );
        // 65504 = 2^15 * (2 - 2^-10): no room above.
        assert_eq!(exact_range(Dtype::F16, &[f16(65504.0), f16(0.0)]).1, 0);
        assert_eq!(exact_range(Dtype::F16, &[f16(0.0)]), (i32::MIN, i32::MAX));
        let (lo, hi) = exact_range(Dtype::F16, &[Dtype::POISON]);
        assert!(lo > hi, "NaN allows no scale");
        // bf16 reaches f32's range.
        assert_eq!(
            exact_range(Dtype::Bf16, &[Dtype::Bf16.from_f32(1.0)]),
            (-133, 127)
        );
    }

    #[test]
    fn scaling_inside_the_range_is_exact_and_outside_it_is_refused() {
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for dist in Dist::ALL {
                let p = Problem::generate(
                    Shape {
                        m: 64,
                        n: 64,
                        k: 96,
                    },
                    dtype,
                    dist,
                    7,
                );
                let (lo, hi) = exact_range(dtype, &p.a);
                // Scaling up is always exact for these distributions; f16 values close to
                // zero use bits down to the smallest subnormal's, so scaling down may not be.
                assert!(lo <= 0 && hi >= MAX_EXPONENT, "{dtype} {dist}: {lo}..{hi}");
                // (Within f32's normal exponents, where 2^e and 2^-e are both exact.)
                for e in [lo.max(-100), 0, 1, hi.min(100)] {
                    let s = scale(dtype, &p.a, e).unwrap_or_else(|| panic!("{dtype} {dist} {e}"));
                    // Back again: the very same bits.
                    assert_eq!(scale(dtype, &s, -e).unwrap(), p.a, "{dtype} {dist} {e}");
                }
                assert!(scale(dtype, &p.a, hi + 1).is_none(), "{dtype} {dist}");
                if lo > i32::MIN {
                    assert!(scale(dtype, &p.a, lo - 1).is_none(), "{dtype} {dist}");
                }
            }
        }
    }

    #[test]
    fn the_scaled_product_is_the_product_scaled_exactly() {
        // fp64 dot products of exactly scaled inputs: every output moves by exactly 2^(a+b).
        let shape = Shape {
            m: 16,
            n: 16,
            k: 64,
        };
        for dist in Dist::ALL {
            let p = Problem::generate(shape, Dtype::F16, dist, 3);
            let s = Pow2 { a: 2, b: -1 };
            let q = Problem {
                a: scale(Dtype::F16, &p.a, s.a).unwrap(),
                b: scale(Dtype::F16, &p.b, s.b).unwrap(),
                ..p.clone()
            };
            for (i, j) in [(0, 0), (3, 7), (15, 15), (9, 2)] {
                assert_eq!(
                    p.reference_entry(i, j) * s.c_factor() as f64,
                    q.reference_entry(i, j),
                    "{dist}"
                );
            }
        }
    }

    #[test]
    fn every_choice_changes_a_b_and_c() {
        let wide = (i32::MIN, i32::MAX);
        let mut seen = std::collections::HashSet::new();
        let mut prev = Pow2::default();
        for seed in 0..200u64 {
            let p = choose(seed, prev, wide, wide, wide).unwrap();
            assert!(
                p.a != prev.a && p.b != prev.b && p.c() != prev.c(),
                "{prev:?} -> {p:?}"
            );
            assert!(p.a.abs() <= MAX_EXPONENT && p.b.abs() <= MAX_EXPONENT);
            seen.insert(p);
            prev = p;
        }
        assert!(seen.len() > 8, "the choice varies: {seen:?}");
        // Ranges are honoured; an impossible one gives None.
        for seed in 0..50 {
            let p = choose(seed, Pow2::default(), (1, 2), (-2, -1), (-1, 1)).unwrap();
            assert!((1..=2).contains(&p.a) && (-2..=-1).contains(&p.b) && p.c().abs() == 1);
        }
        // a + b = 0 is the previous product's scale: nothing is left.
        assert_eq!(choose(1, Pow2::default(), (1, 2), (-2, -1), (0, 0)), None);
        assert_eq!(choose(1, Pow2::default(), (0, 0), wide, wide), None);
    }

    #[test]
    fn output_ranges_keep_the_product_normal() {
        let (lo, hi) = output_range(Dtype::F16, &[1.0, -2.0, 0.5]);
        // max 2 (binade 1): up to 2^13; rms ~1.3 (binade 0): down to 2^-4.
        assert_eq!((lo, hi), (-4, 13));
        assert_eq!(output_range(Dtype::F16, &[0.0]), (i32::MIN, i32::MAX));
    }
}
