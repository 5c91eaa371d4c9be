//! The GEMM every step solves, and its inputs: C = A * B^T, A (M x K), B (N x K), C (M x N),
//! all row-major; f16 or bf16 inputs and output, f32 accumulation.

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F16,
    Bf16,
}

impl Dtype {
    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            Dtype::F16 => half::f16::from_bits(bits).to_f32(),
            Dtype::Bf16 => half::bf16::from_bits(bits).to_f32(),
        }
    }
    pub fn from_f32(self, v: f32) -> u16 {
        match self {
            Dtype::F16 => half::f16::from_f32(v).to_bits(),
            Dtype::Bf16 => half::bf16::from_f32(v).to_bits(),
        }
    }
    /// The CUDA C++ type the kernels are compiled with.
    pub fn cuda_type(self) -> &'static str {
        match self {
            Dtype::F16 => "__half",
            Dtype::Bf16 => "__nv_bfloat16",
        }
    }
    /// Unit roundoff of the storage format (2^-11 for f16, 2^-8 for bf16).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Dtype::F16 => 2f64.powi(-11),
            Dtype::Bf16 => 2f64.powi(-8),
        }
    }
    /// All-ones bits: a NaN in both formats, used to poison outputs.
    pub const POISON: u16 = 0xFFFF;
}

impl FromStr for Dtype {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "f16" | "fp16" | "half" => Ok(Dtype::F16),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            _ => bail!("unknown dtype {s:?}: use f16 or bf16"),
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        })
    }
}

/// How the inputs are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// iid N(0, 1): the default; realistic magnitudes and cancellation.
    Gaussian,
    /// iid U(-1, 1).
    Uniform,
    /// Integers in [-4, 4]: products and sums are exact in f32, so any error is a bug.
    Int,
    /// Every element 1: each output is exactly K, so a lost or doubled k-block shows at once.
    #[serde(rename = "all-ones")]
    AllOnes,
    /// Random sign times a power of two from 2^-8 to 2^2 times 1 + U(0, 1): magnitudes over three
    /// decades in one matrix, so a kernel that rounds early or drops small terms fails. The top is
    /// 2^2 so that C stays inside f16's range for every K the workbook uses (2^6, the first
    /// choice, made sums of 512 products overflow f16 on the GPU, and a correct kernel then
    /// "failed" against cuBLAS's f32 reference).
    #[serde(rename = "wide-range")]
    WideRange,
    /// Integers whose partial sums leave f16's exact range while every result stays exact in
    /// f16 and bf16: in each row the first half of k holds integers in [1, 16] (so the running
    /// sum of a dot product climbs past 8192, where f16's spacing is 8), and the second half
    /// cancels it (A's second half is minus its first, B's repeats its first) up to eight ±1
    /// nudges in A, which leave |C| <= 128. Any reduced-precision intermediate shows as an
    /// inexact result; with K >= 512 the partial sums pass 8192.
    #[serde(rename = "exact-int")]
    ExactInt,
}

impl Dist {
    pub const ALL: [Dist; 6] = [
        Dist::Gaussian,
        Dist::Uniform,
        Dist::Int,
        Dist::AllOnes,
        Dist::WideRange,
        Dist::ExactInt,
    ];
}

impl FromStr for Dist {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "gaussian" | "normal" => Ok(Dist::Gaussian),
            "uniform" => Ok(Dist::Uniform),
            "int" | "small-int" | "integer" => Ok(Dist::Int),
            "all-ones" | "ones" => Ok(Dist::AllOnes),
            "wide-range" | "wide" => Ok(Dist::WideRange),
            "exact-int" => Ok(Dist::ExactInt),
            _ => bail!(
                "unknown distribution {s:?}: use gaussian, uniform, int, all-ones, wide-range or exact-int"
            ),
        }
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dist::Gaussian => "gaussian",
            Dist::Uniform => "uniform",
            Dist::Int => "int",
            Dist::AllOnes => "all-ones",
            Dist::WideRange => "wide-range",
            Dist::ExactInt => "exact-int",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    pub const DEFAULT: Shape = Shape {
        m: 4096,
        n: 8192,
        k: 4096,
    };
    /// Small default for emulated runs: emulation proves logic, not speed.
    pub const EMULATION_DEFAULT: Shape = Shape {
        m: 512,
        n: 1024,
        k: 512,
    };

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// GPU memory one verified run of this shape allocates: A, B and C in 16 bits and cuBLAS's
    /// f32 reference product (saturating: a nonsense shape must not wrap to a small number).
    pub fn device_bytes(&self) -> u64 {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        let a_b_c = m
            .saturating_mul(k)
            .saturating_add(n.saturating_mul(k))
            .saturating_add(m.saturating_mul(n));
        a_b_c
            .saturating_mul(2)
            .saturating_add(m.saturating_mul(n).saturating_mul(4))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

/// The inputs of one run, as 16-bit patterns of `dtype`.
#[derive(Debug, Clone)]
pub struct Problem {
    pub shape: Shape,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    pub a: Vec<u16>,
    pub b: Vec<u16>,
}

fn draw(rng: &mut impl Rng, dist: Dist) -> f32 {
    match dist {
        Dist::Gaussian => StandardNormal.sample(rng),
        Dist::Uniform => rng.random_range(-1.0f32..1.0),
        Dist::Int => rng.random_range(-4i32..=4) as f32,
        Dist::AllOnes => 1.0,
        Dist::WideRange => {
            let sign = if rng.random::<bool>() { 1.0 } else { -1.0 };
            let exponent = rng.random_range(-8i32..=2);
            sign * 2f32.powi(exponent) * (1.0 + rng.random::<f32>())
        }
        // Drawn a row at a time (exact_int_row); never element by element.
        Dist::ExactInt => 0.0,
    }
}

/// One row of A (`a_side`) or B for [`Dist::ExactInt`].
fn exact_int_row(rng: &mut impl Rng, k: usize, a_side: bool) -> Vec<f32> {
    let half = k / 2;
    let mut row = vec![0f32; k];
    for i in 0..half {
        let v = rng.random_range(1i32..=16) as f32;
        row[i] = v;
        row[half + i] = if a_side { -v } else { v };
    }
    if a_side && half > 0 {
        for _ in 0..8 {
            let p = half + rng.random_range(0..half);
            row[p] += if rng.random::<bool>() { 1.0 } else { -1.0 };
        }
    }
    row
}

impl Problem {
    /// Draw A and B from `dist` with a seeded generator: the same seed gives the same inputs.
    pub fn generate(shape: Shape, dtype: Dtype, dist: Dist, seed: u64) -> Problem {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (a, b) = if dist == Dist::ExactInt {
            let mut rows = |count: usize, a_side: bool| -> Vec<u16> {
                (0..count)
                    .flat_map(|_| exact_int_row(&mut rng, shape.k, a_side))
                    .map(|x| dtype.from_f32(x))
                    .collect()
            };
            let a = rows(shape.m, true);
            (a, rows(shape.n, false))
        } else {
            let mut fill = |len: usize| -> Vec<u16> {
                (0..len)
                    .map(|_| dtype.from_f32(draw(&mut rng, dist)))
                    .collect()
            };
            let a = fill(shape.m * shape.k);
            (a, fill(shape.n * shape.k))
        };
        Problem {
            shape,
            dtype,
            dist,
            seed,
            a,
            b,
        }
    }

    /// C[i][j] in f64 from the (already rounded) inputs: the CPU reference.
    pub fn reference_entry(&self, i: usize, j: usize) -> f64 {
        let k = self.shape.k;
        let a = &self.a[i * k..(i + 1) * k];
        let b = &self.b[j * k..(j + 1) * k];
        a.iter()
            .zip(b)
            .map(|(&x, &y)| self.dtype.to_f32(x) as f64 * self.dtype.to_f32(y) as f64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_int_partial_sums_leave_f16_while_results_stay_exact() {
        let s = Shape {
            m: 16,
            n: 16,
            k: 512,
        };
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let p = Problem::generate(s, dtype, Dist::ExactInt, 3);
            for i in 0..s.m {
                for j in 0..s.n {
                    let c = p.reference_entry(i, j);
                    assert!(c.abs() <= 128.0 && c.fract() == 0.0, "{c}");
                    assert_eq!(dtype.to_f32(dtype.from_f32(c as f32)) as f64, c);
                    // The running sum at the middle of k is far past f16's exact integers.
                    let mid: f64 = (0..s.k / 2)
                        .map(|x| {
                            dtype.to_f32(p.a[i * s.k + x]) as f64
                                * dtype.to_f32(p.b[j * s.k + x]) as f64
                        })
                        .sum();
                    assert!(mid > 8192.0, "{mid}");
                }
            }
            // Not all zero: the nudges leave a result.
            assert!((0..s.m).any(|i| p.reference_entry(i, 0) != 0.0));
        }
    }

    #[test]
    fn generation_is_seeded_and_nonzero() {
        let s = Shape {
            m: 64,
            n: 32,
            k: 128,
        };
        let p1 = Problem::generate(s, Dtype::F16, Dist::Gaussian, 7);
        let p2 = Problem::generate(s, Dtype::F16, Dist::Gaussian, 7);
        let p3 = Problem::generate(s, Dtype::F16, Dist::Gaussian, 8);
        assert_eq!(p1.a, p2.a);
        assert_eq!(p1.b, p2.b);
        assert_ne!(p1.a, p3.a);
        assert_eq!(p1.a.len(), 64 * 128);
        assert_eq!(p1.b.len(), 32 * 128);
    }

    #[test]
    fn gaussian_inputs_have_unit_variance() {
        let s = Shape {
            m: 256,
            n: 1,
            k: 256,
        };
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let p = Problem::generate(s, dtype, Dist::Gaussian, 1);
            let v: Vec<f64> = p.a.iter().map(|&x| dtype.to_f32(x) as f64).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
            assert!(mean.abs() < 0.02, "mean {mean}");
            assert!((var - 1.0).abs() < 0.05, "variance {var}");
            assert!(v.iter().all(|x| x.is_finite()));
        }
    }

    #[test]
    fn small_int_inputs_are_exact_integers() {
        let p = Problem::generate(Shape { m: 8, n: 8, k: 64 }, Dtype::Bf16, Dist::Int, 3);
        for &x in &p.a {
            let f = Dtype::Bf16.to_f32(x);
            assert_eq!(f, f.round());
            assert!((-4.0..=4.0).contains(&f));
        }
    }

    #[test]
    fn all_ones_gives_k_in_every_output() {
        let p = Problem::generate(Shape { m: 4, n: 8, k: 96 }, Dtype::F16, Dist::AllOnes, 5);
        assert!(p.a.iter().chain(&p.b).all(|&x| Dtype::F16.to_f32(x) == 1.0));
        assert_eq!(p.reference_entry(3, 7), 96.0);
    }

    #[test]
    fn wide_range_spans_four_decades_with_both_signs() {
        let s = Shape {
            m: 64,
            n: 64,
            k: 256,
        };
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let p = Problem::generate(s, dtype, Dist::WideRange, 9);
            let v: Vec<f32> = p.a.iter().map(|&x| dtype.to_f32(x)).collect();
            let mags: Vec<f32> = v.iter().map(|x| x.abs()).collect();
            let (lo, hi) = mags
                .iter()
                .fold((f32::MAX, 0f32), |(lo, hi), &m| (lo.min(m), hi.max(m)));
            assert!(
                lo >= 2f32.powi(-8) * 0.99 && lo < 2f32.powi(-7),
                "{dtype}: min {lo}"
            );
            assert!(hi <= 2f32.powi(3) && hi > 2f32.powi(2), "{dtype}: max {hi}");
            assert!(v.iter().any(|&x| x < 0.0) && v.iter().any(|&x| x > 0.0));
            assert!(v.iter().all(|x| x.is_finite() && *x != 0.0));
        }
        // The products and their sums stay well inside f16's range (65504) at the largest K the
        // rubrics use with this distribution: the output format, not the kernel, must not fail.
        let big = Shape {
            m: 8,
            n: 8,
            k: 8192,
        };
        let p = Problem::generate(big, Dtype::F16, Dist::WideRange, 11);
        for i in 0..8 {
            for j in 0..8 {
                assert!(p.reference_entry(i, j).abs() < 4096.0);
            }
        }
    }

    #[test]
    fn every_distribution_round_trips_its_name() {
        for d in Dist::ALL {
            assert_eq!(d.to_string().parse::<Dist>().unwrap(), d);
            assert_eq!(
                serde_json::to_value(d).unwrap(),
                serde_json::Value::String(d.to_string())
            );
        }
        assert_eq!("small-int".parse::<Dist>().unwrap(), Dist::Int);
        assert!("bogus"
            .parse::<Dist>()
            .unwrap_err()
            .to_string()
            .contains("wide-range"));
    }

    #[test]
    fn poison_is_nan_in_both_formats() {
        assert!(Dtype::F16.to_f32(Dtype::POISON).is_nan());
        assert!(Dtype::Bf16.to_f32(Dtype::POISON).is_nan());
    }

    #[test]
    fn reference_entry_is_a_dot_product() {
        let mut p = Problem::generate(Shape { m: 2, n: 2, k: 3 }, Dtype::F16, Dist::Int, 0);
        p.a = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0]
            .map(|v| Dtype::F16.from_f32(v))
            .to_vec();
        p.b = [4.0, 5.0, 6.0, 1.0, 1.0, 1.0]
            .map(|v| Dtype::F16.from_f32(v))
            .to_vec();
        assert_eq!(p.reference_entry(0, 0), 32.0);
        assert_eq!(p.reference_entry(0, 1), 6.0);
        assert_eq!(p.reference_entry(1, 0), 0.0);
    }

    #[test]
    fn parses_names() {
        assert_eq!("BF16".parse::<Dtype>().unwrap(), Dtype::Bf16);
        assert!("f32".parse::<Dtype>().is_err());
        assert_eq!("int".parse::<Dist>().unwrap(), Dist::Int);
    }
}
