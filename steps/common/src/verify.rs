//! Checking a kernel's output against the references.
//!
//! Every output element is compared with cuBLAS (f32 output, f32 accumulation); a sample of
//! elements is also compared with an fp64 CPU dot product of the same rounded inputs. Outputs
//! are poisoned with NaN before the launch, so an element the kernel never wrote fails.

use crate::problem::{Dtype, Problem};
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Acceptance thresholds for one output format.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Tolerance {
    /// Bound on ||out - ref|| / ||ref||.
    pub rel_norm: f64,
    /// Per element: |out - ref| <= rtol * |ref| + atol, with atol = atol_rms * rms(ref).
    pub rtol: f64,
    pub atol_rms: f64,
}

impl Tolerance {
    /// The output is rounded once to `dtype` (error <= u |c|, u the unit roundoff); f32
    /// accumulation in another order adds far less. Twice u leaves room for neither to flake
    /// while a single wrong k-block (error ~ |c| / sqrt(k-blocks)) still fails.
    pub fn for_dtype(dtype: Dtype) -> Tolerance {
        let u = dtype.unit_roundoff();
        Tolerance {
            rel_norm: u,
            rtol: 2.0 * u,
            atol_rms: 2.0 * u,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    pub row: usize,
    pub col: usize,
    pub got: f64,
    pub expected: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub passed: bool,
    pub elements: usize,
    /// Elements still NaN (never written, or computed as NaN).
    pub nan_count: usize,
    /// Elements outside the per-element tolerance.
    pub bad_count: usize,
    pub rel_error_norm: f64,
    pub max_abs_error: f64,
    pub tolerance: Tolerance,
    /// The first few failing elements.
    pub mismatches: Vec<Mismatch>,
    /// Sampled elements checked against the fp64 CPU reference, and how many failed.
    pub cpu_samples: usize,
    pub cpu_sample_failures: usize,
    /// The largest |cuBLAS - fp64| over the samples, relative to rms(C): checks the reference.
    pub reference_vs_cpu: f64,
}

impl Verification {
    pub fn summary(&self) -> String {
        if self.passed {
            format!(
                "PASS  rel. error norm {:.2e} (limit {:.1e}), max |err| {:.2e}, {} CPU fp64 samples agree",
                self.rel_error_norm, self.tolerance.rel_norm, self.max_abs_error, self.cpu_samples
            )
        } else {
            let mut s = format!(
                "FAIL  {} of {} elements wrong ({} NaN/unwritten), rel. error norm {:.2e} (limit {:.1e}), {} of {} CPU samples wrong",
                self.bad_count, self.elements, self.nan_count, self.rel_error_norm,
                self.tolerance.rel_norm, self.cpu_sample_failures, self.cpu_samples
            );
            for m in &self.mismatches {
                s.push_str(&format!(
                    "\n      C[{}][{}] = {} , expected {:.6}",
                    m.row, m.col, m.got, m.expected
                ));
            }
            s
        }
    }
}

/// Positions sampled for the CPU reference: the four corners plus `count` random ones.
pub fn sample_positions(m: usize, n: usize, count: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED_CAFE);
    let mut v = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    v.extend((0..count).map(|_| (rng.random_range(0..m), rng.random_range(0..n))));
    v
}

/// Compare `out` (M x N, `dtype` bits) with the cuBLAS f32 result and the CPU reference.
pub fn verify(
    problem: &Problem,
    out: &[u16],
    cublas_f32: &[f32],
    cpu_samples: usize,
) -> Verification {
    let (m, n) = (problem.shape.m, problem.shape.n);
    let dtype = problem.dtype;
    let tol = Tolerance::for_dtype(dtype);
    assert_eq!(out.len(), m * n, "output has the wrong length");
    assert_eq!(cublas_f32.len(), m * n, "reference has the wrong length");

    let ref_sq: f64 = cublas_f32.iter().map(|&r| (r as f64).powi(2)).sum();
    let rms = (ref_sq / (m * n) as f64).sqrt().max(f64::MIN_POSITIVE);
    let atol = tol.atol_rms * rms;

    let (mut nan_count, mut bad_count) = (0usize, 0usize);
    let (mut err_sq, mut max_abs) = (0f64, 0f64);
    let mut mismatches = Vec::new();
    for (idx, (&o, &r)) in out.iter().zip(cublas_f32).enumerate() {
        let got = dtype.to_f32(o) as f64;
        let expected = r as f64;
        let err = (got - expected).abs();
        let bad = !got.is_finite() || err > tol.rtol * expected.abs() + atol;
        if got.is_nan() {
            nan_count += 1;
        } else {
            err_sq += err * err;
            max_abs = max_abs.max(err);
        }
        if bad {
            bad_count += 1;
            if mismatches.len() < 8 {
                mismatches.push(Mismatch {
                    row: idx / n,
                    col: idx % n,
                    got,
                    expected,
                });
            }
        }
    }
    let rel_error_norm = if nan_count > 0 {
        f64::NAN
    } else {
        (err_sq / ref_sq.max(f64::MIN_POSITIVE)).sqrt()
    };

    let samples = sample_positions(m, n, cpu_samples, problem.seed);
    let mut cpu_sample_failures = 0;
    let mut reference_vs_cpu = 0f64;
    for &(i, j) in &samples {
        let exact = problem.reference_entry(i, j);
        let got = dtype.to_f32(out[i * n + j]) as f64;
        if !(got - exact).abs().le(&(tol.rtol * exact.abs() + atol)) {
            cpu_sample_failures += 1;
        }
        reference_vs_cpu = reference_vs_cpu.max((cublas_f32[i * n + j] as f64 - exact).abs() / rms);
    }
    // cuBLAS accumulates in f32: it must sit far closer to fp64 than the output rounding.
    let reference_ok = reference_vs_cpu < tol.rtol;

    Verification {
        passed: nan_count == 0
            && bad_count == 0
            && rel_error_norm <= tol.rel_norm
            && cpu_sample_failures == 0
            && reference_ok,
        elements: m * n,
        nan_count,
        bad_count,
        rel_error_norm,
        max_abs_error: max_abs,
        tolerance: tol,
        mismatches,
        cpu_samples: samples.len(),
        cpu_sample_failures,
        reference_vs_cpu,
    }
}

/// The exact product on the CPU in f64, rounded to f32: a stand-in for cuBLAS in tests and the
/// simulator's reference. Rows are computed on all of this machine's cores (at 4096³ a single
/// core took minutes, far longer than the simulation); a terminal shows a progress line once
/// it has taken a few seconds.
pub fn cpu_reference(problem: &Problem) -> Vec<f32> {
    use rayon::prelude::*;
    let (m, n) = (problem.shape.m, problem.shape.n);
    let mut c = vec![0f32; m * n];
    if n == 0 {
        return c;
    }
    let progress = crate::progress::Progress::new(m as u64, "fp64 reference", "rows");
    let row = |(i, out): (usize, &mut [f32])| {
        for (j, v) in out.iter_mut().enumerate() {
            *v = problem.reference_entry(i, j) as f32;
        }
        progress.inc();
    };
    // A pool of its own, so that a process whose threads are capped (the grader's confined
    // child, RLIMIT_NPROC) computes on one core instead of failing.
    match rayon::ThreadPoolBuilder::new().build() {
        Ok(pool) => pool.install(|| c.par_chunks_mut(n).enumerate().for_each(row)),
        Err(_) => c.chunks_mut(n).enumerate().for_each(row),
    }
    progress.finish();
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Dist, Shape};

    fn setup(dtype: Dtype) -> (Problem, Vec<f32>, Vec<u16>) {
        let p = Problem::generate(
            Shape {
                m: 64,
                n: 48,
                k: 256,
            },
            dtype,
            Dist::Gaussian,
            11,
        );
        let r = cpu_reference(&p);
        let out: Vec<u16> = r.iter().map(|&v| dtype.from_f32(v)).collect();
        (p, r, out)
    }

    #[test]
    fn accepts_a_correctly_rounded_result() {
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let (p, r, out) = setup(dtype);
            let v = verify(&p, &out, &r, 64);
            assert!(v.passed, "{dtype}: {}", v.summary());
            assert!(
                v.rel_error_norm > 0.0,
                "rounding to {dtype} must show some error"
            );
        }
    }

    #[test]
    fn rejects_an_unwritten_element() {
        let (p, r, mut out) = setup(Dtype::F16);
        out[5 * 48 + 7] = Dtype::POISON;
        let v = verify(&p, &out, &r, 64);
        assert!(!v.passed);
        assert_eq!(v.nan_count, 1);
        assert_eq!((v.mismatches[0].row, v.mismatches[0].col), (5, 7));
    }

    #[test]
    fn rejects_one_element_off_by_a_few_percent() {
        let (p, r, mut out) = setup(Dtype::F16);
        let idx = 17 * 48 + 3;
        out[idx] = Dtype::F16.from_f32(r[idx] * 1.03 + 0.5);
        let v = verify(&p, &out, &r, 64);
        assert!(!v.passed, "{}", v.summary());
        assert_eq!(v.bad_count, 1);
    }

    #[test]
    fn rejects_a_missing_k_block() {
        // The classic pipeline bug: one k-block of 64 skipped in one output tile.
        let (mut p, _, _) = setup(Dtype::Bf16);
        let full = cpu_reference(&p);
        for i in 0..16 {
            for kk in 64..128 {
                p.a[i * 256 + kk] = 0;
            }
        }
        let partial = cpu_reference(&p);
        let out: Vec<u16> = partial.iter().map(|&v| Dtype::Bf16.from_f32(v)).collect();
        p = Problem {
            a: setup(Dtype::Bf16).0.a,
            ..p
        };
        let v = verify(&p, &out, &full, 64);
        assert!(!v.passed, "{}", v.summary());
        assert!(v.bad_count > 0);
    }

    #[test]
    fn rejects_a_transposed_result() {
        let p = Problem::generate(
            Shape {
                m: 32,
                n: 32,
                k: 64,
            },
            Dtype::F16,
            Dist::Gaussian,
            2,
        );
        let r = cpu_reference(&p);
        let mut out = vec![0u16; 32 * 32];
        for i in 0..32 {
            for j in 0..32 {
                out[j * 32 + i] = Dtype::F16.from_f32(r[i * 32 + j]);
            }
        }
        assert!(!verify(&p, &out, &r, 16).passed);
    }

    #[test]
    fn rejects_a_wrong_reference() {
        // If the reference itself disagrees with fp64, verification must not pass.
        let (p, mut r, out) = setup(Dtype::F16);
        for v in r.iter_mut() {
            *v *= 1.01;
        }
        assert!(!verify(&p, &out, &r, 64).passed);
    }

    #[test]
    fn samples_include_the_corners() {
        let s = sample_positions(128, 256, 10, 1);
        assert_eq!(s.len(), 14);
        assert!(s.contains(&(127, 255)));
        assert!(s.iter().all(|&(i, j)| i < 128 && j < 256));
    }
}
