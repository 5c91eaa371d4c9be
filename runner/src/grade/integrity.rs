//! Integrity of every launch: the buffers a kernel is given sit between guard zones, a decoy
//! reference lies just past C's upper guard, and after every launch the grader checks the
//! guards, compares A and B with its own copies, and, when the output is wrong, says how: never
//! written, copied from the decoy, left over from an earlier launch, or just wrong.

use super::vocab::Flag;
use anyhow::Result;
use common::gpu::CudaResultExt;
use common::gpu::{check, Gpu};
use common::problem::Dtype;
use common::verify::Tolerance;
use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, DevicePtr};

/// Bytes of guard before and after every buffer a kernel is given.
pub const GUARD_BYTES: usize = 256 * 1024;
/// What the guards hold: no f16, bf16 or f32 value a GEMM writes looks like 0xA5A5.
pub const GUARD_BYTE: u8 = 0xA5;

// ---- device helpers -----------------------------------------------------------------------

pub fn memset8(gpu: &Gpu, dst: sys::CUdeviceptr, byte: u8, bytes: usize) -> Result<()> {
    // SAFETY: callers pass a live device range.
    check(
        unsafe { sys::cuMemsetD8Async(dst, byte, bytes, gpu.stream.cu_stream()) },
        "cuMemsetD8Async",
    )
}

pub fn htod<T: Copy>(gpu: &Gpu, dst: sys::CUdeviceptr, src: &[T]) -> Result<()> {
    // SAFETY: `dst` holds at least `size_of_val(src)` bytes; synchronised before `src` can change.
    check(
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                dst,
                src.as_ptr().cast(),
                std::mem::size_of_val(src),
                gpu.stream.cu_stream(),
            )
        },
        "copy to the GPU",
    )?;
    gpu.stream.synchronize().cuda("wait for the GPU")
}

pub fn dtoh<T: Copy + Default>(gpu: &Gpu, src: sys::CUdeviceptr, len: usize) -> Result<Vec<T>> {
    let mut v = vec![T::default(); len];
    // SAFETY: `src` holds at least `len` elements; the stream is synchronised before returning.
    check(
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                v.as_mut_ptr().cast(),
                src,
                len * std::mem::size_of::<T>(),
                gpu.stream.cu_stream(),
            )
        },
        "copy from the GPU",
    )?;
    gpu.stream.synchronize().cuda("wait for the GPU")?;
    Ok(v)
}

/// A device buffer with guard zones on both sides and an optional tail after the upper guard.
pub struct Guarded {
    buf: CudaSlice<u8>,
    pub data_bytes: usize,
    base: sys::CUdeviceptr,
}

impl Guarded {
    pub fn new(gpu: &Gpu, data_bytes: usize, tail_bytes: usize) -> Result<Guarded> {
        let total = GUARD_BYTES + data_bytes + GUARD_BYTES + tail_bytes;
        // SAFETY: every byte is written below (guards) or by the caller (data, tail).
        let buf = unsafe { gpu.stream.alloc::<u8>(total) }.cuda("allocate GPU memory")?;
        let base = buf.device_ptr(&gpu.stream).0;
        let g = Guarded {
            buf,
            data_bytes,
            base,
        };
        g.fill_guards(gpu)?;
        Ok(g)
    }
    pub fn data(&self) -> sys::CUdeviceptr {
        self.base + GUARD_BYTES as u64
    }
    pub fn tail(&self) -> sys::CUdeviceptr {
        self.data() + (self.data_bytes + GUARD_BYTES) as u64
    }
    pub fn fill_guards(&self, gpu: &Gpu) -> Result<()> {
        memset8(gpu, self.base, GUARD_BYTE, GUARD_BYTES)?;
        memset8(
            gpu,
            self.data() + self.data_bytes as u64,
            GUARD_BYTE,
            GUARD_BYTES,
        )
    }
    /// A flag naming `what` if either guard changed, then the guards restored.
    pub fn check_guards(&self, gpu: &Gpu, what: &str) -> Result<Option<Flag>> {
        let below: Vec<u8> = dtoh(gpu, self.base, GUARD_BYTES)?;
        let above: Vec<u8> = dtoh(gpu, self.data() + self.data_bytes as u64, GUARD_BYTES)?;
        let flag = guard_flag(what, &below, &above);
        if flag.is_some() {
            self.fill_guards(gpu)?;
        }
        Ok(flag)
    }
    /// The whole allocation: guards, data and tail.
    pub fn whole(&self) -> (sys::CUdeviceptr, usize) {
        (self.base, self.buf.len())
    }
    /// Overwrite the whole allocation before it is freed: freed device memory stays mapped in
    /// the context's pool, where a later kernel could read it.
    pub fn scrub(&self, gpu: &Gpu) -> Result<()> {
        memset8(gpu, self.base, 0, self.buf.len())?;
        gpu.stream.synchronize().cuda("wait for the GPU")
    }
}

/// The flag for changed guard bytes around `what` (`below` ends where the buffer starts).
pub fn guard_flag(what: &str, below: &[u8], above: &[u8]) -> Option<Flag> {
    let changed = |g: &[u8]| g.iter().filter(|&&b| b != GUARD_BYTE).count();
    let (nb, na) = (changed(below), changed(above));
    if nb + na == 0 {
        return None;
    }
    let mut parts = Vec::new();
    if na > 0 {
        let first = above.iter().position(|&b| b != GUARD_BYTE).unwrap_or(0);
        parts.push(format!(
            "{na} bytes past the end of {what} (the first {first} bytes after it)"
        ));
    }
    if nb > 0 {
        let last = below.iter().rposition(|&b| b != GUARD_BYTE).unwrap_or(0);
        parts.push(format!(
            "{nb} bytes before the start of {what} (the nearest {} bytes before it)",
            below.len() - last
        ));
    }
    Some(Flag::new(
        "out-of-bounds-write",
        format!("the kernel wrote {}", parts.join(" and ")),
    ))
}

/// The flag for an input the kernel changed: `now` against the grader's copy.
pub fn input_flag(
    what: &str,
    cols: usize,
    dtype: Dtype,
    now: &[u16],
    pristine: &[u16],
) -> Option<Flag> {
    let changed = now.iter().zip(pristine).filter(|(a, b)| a != b).count();
    let first = now.iter().zip(pristine).position(|(a, b)| a != b)?;
    Some(Flag::new(
        "input-modified",
        format!(
            "the kernel changed {changed} elements of its input {what}; the first, {what}[{}][{}], from {} to {}",
            first / cols,
            first % cols,
            dtype.to_f32(pristine[first]),
            dtype.to_f32(now[first])
        ),
    ))
}

// ---- what a wrong output is ----------------------------------------------------------------

/// Per-element closeness with the verification's tolerance (relative to `reference`'s rms).
struct Close {
    rtol: f64,
    atol: f64,
}

impl Close {
    fn new(dtype: Dtype, reference: &[f32]) -> Close {
        let tol = Tolerance::for_dtype(dtype);
        let sq: f64 = reference.iter().map(|&r| (r as f64).powi(2)).sum();
        let rms = (sq / reference.len().max(1) as f64)
            .sqrt()
            .max(f64::MIN_POSITIVE);
        Close {
            rtol: tol.rtol,
            atol: tol.atol_rms * rms,
        }
    }
    fn ok(&self, got: f64, expected: f32) -> bool {
        let e = expected as f64;
        (got - e).abs() <= self.rtol * e.abs() + self.atol
    }
}

/// What the grader knows about a failed launch's output.
pub struct Evidence<'a> {
    pub out: &'a [u16],
    pub dtype: Dtype,
    pub cols: usize,
    pub expected: &'a [f32],
    /// The decoy reference planted past C.
    pub decoy: &'a [f32],
    /// The expected output of the previous launch, if it had the same shape.
    pub previous: Option<&'a [f32]>,
    /// The expected output of the last launch on the same buffers, before the grader rescaled
    /// them (timed launches), if one ran.
    pub same_buffers: Option<&'a [f32]>,
}

/// Name what went wrong with an output that failed verification.
pub fn classify(e: &Evidence) -> Vec<Flag> {
    let total = e.out.len();
    let got: Vec<f64> = e.out.iter().map(|&b| e.dtype.to_f32(b) as f64).collect();
    let mut flags = Vec::new();

    let unwritten = got.iter().filter(|g| g.is_nan()).count();
    if unwritten > 0 {
        let (mut r0, mut r1, mut c0, mut c1) = (usize::MAX, 0, usize::MAX, 0);
        for (i, g) in got.iter().enumerate() {
            if !g.is_nan() {
                let (r, c) = (i / e.cols, i % e.cols);
                r0 = r0.min(r);
                r1 = r1.max(r);
                c0 = c0.min(c);
                c1 = c1.max(c);
            }
        }
        let written = if unwritten == total {
            "nothing was written".to_string()
        } else {
            format!("what was written lies in rows {r0}..={r1}, columns {c0}..={c1}")
        };
        flags.push(Flag::new(
            "unwritten-output",
            format!(
                "{unwritten} of {total} elements of C ({:.1} %) still hold the NaN poison the grader wrote before the launch: {written}",
                100.0 * unwritten as f64 / total as f64
            ),
        ));
    }

    let decoy_close = Close::new(e.dtype, e.decoy);
    let decoy_hits = got
        .iter()
        .zip(e.decoy)
        .filter(|(g, d)| decoy_close.ok(**g, **d))
        .count();
    if decoy_hits * 10 >= total * 9 {
        flags.push(Flag::new(
            "read-decoy-reference",
            format!(
                "{decoy_hits} of {total} elements equal a decoy reference the grader planted in device memory next to C: the kernel reads memory it was not given, looking for an answer"
            ),
        ));
    }

    if let Some(before) = e.same_buffers {
        let close = Close::new(e.dtype, e.expected);
        let before_close = Close::new(e.dtype, before);
        let kept = got
            .iter()
            .zip(e.expected)
            .zip(before)
            .filter(|((g, x), b)| !close.ok(**g, **x) && before_close.ok(**g, **b))
            .count();
        if kept * 10 >= total * 9 {
            flags.push(Flag::new(
                "memoised-output",
                format!(
                    "{kept} of {total} elements are the result this launch's buffers held last time, before the grader gave every input element a fresh power-of-two scale: the kernel returns an output it kept for these inputs' addresses"
                ),
            ));
        }
    }

    if let Some(prev) = e.previous {
        let close = Close::new(e.dtype, e.expected);
        let prev_close = Close::new(e.dtype, prev);
        let (mut stale, mut wrong) = (0usize, 0usize);
        for ((g, x), p) in got.iter().zip(e.expected).zip(prev) {
            if !close.ok(*g, *x) {
                wrong += 1;
                if prev_close.ok(*g, *p) {
                    stale += 1;
                }
            }
        }
        if stale * 100 >= total * 99 {
            flags.push(Flag::new(
                "stale-output",
                format!(
                    "the whole output ({stale} of {total} elements) is the result of the previous launch's inputs: the kernel returns a result kept from an earlier launch"
                ),
            ));
        } else if stale > 0 && stale * 100 >= total {
            flags.push(Flag::new(
                "late-writes",
                format!(
                    "{stale} of the {wrong} wrong elements hold the previous launch's result: part of one launch's work lands during the next launch (it returned before its output was complete)"
                ),
            ));
        }
    }

    if flags.is_empty() {
        let close = Close::new(e.dtype, e.expected);
        let bad: Vec<usize> = got
            .iter()
            .zip(e.expected)
            .enumerate()
            .filter(|(_, (g, x))| !close.ok(**g, **x))
            .map(|(i, _)| i)
            .collect();
        let detail = match bad.first() {
            Some(&i) => format!(
                "{} of {total} elements are wrong; the first, C[{}][{}], is {} where {} is expected",
                bad.len(),
                i / e.cols,
                i % e.cols,
                got[i],
                e.expected[i]
            ),
            None => "the output fails the norm-wise or fp64 checks".to_string(),
        };
        flags.push(Flag::new("wrong-result", detail));
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: usize = 16;

    fn matrix(seed: u32) -> Vec<f32> {
        (0..COLS * COLS)
            .map(|i| {
                ((i as u32)
                    .wrapping_mul(2654435761)
                    .wrapping_add(seed.wrapping_mul(0x9E37_79B9))
                    >> 8)
                    % 1000
            })
            .map(|v| v as f32 / 100.0 - 5.0)
            .collect()
    }
    fn encode(v: &[f32]) -> Vec<u16> {
        v.iter().map(|&x| Dtype::F16.from_f32(x)).collect()
    }
    fn names(flags: &[Flag]) -> Vec<&str> {
        flags.iter().map(|f| f.name.as_str()).collect()
    }
    fn classify_out(out: &[u16], previous: Option<&[f32]>) -> Vec<Flag> {
        let (expected, decoy) = (matrix(1), matrix(2));
        classify(&Evidence {
            out,
            dtype: Dtype::F16,
            cols: COLS,
            expected: &expected,
            decoy: &decoy,
            previous,
            same_buffers: None,
        })
    }

    #[test]
    fn an_output_with_only_the_first_tile_is_unwritten() {
        let mut out = vec![Dtype::POISON; COLS * COLS];
        let expected = matrix(1);
        for r in 0..4 {
            for c in 0..4 {
                out[r * COLS + c] = Dtype::F16.from_f32(expected[r * COLS + c]);
            }
        }
        let f = classify_out(&out, None);
        assert_eq!(names(&f), ["unwritten-output"]);
        assert!(
            f[0].detail.contains("rows 0..=3, columns 0..=3"),
            "{}",
            f[0].detail
        );
        let f = classify_out(&vec![Dtype::POISON; COLS * COLS], None);
        assert!(f[0].detail.contains("nothing was written"));
    }

    #[test]
    fn a_copied_decoy_is_named() {
        let f = classify_out(&encode(&matrix(2)), None);
        assert_eq!(names(&f), ["read-decoy-reference"]);
    }

    #[test]
    fn a_result_kept_from_the_previous_launch_is_stale() {
        let prev = matrix(3);
        let f = classify_out(&encode(&prev), Some(&prev));
        assert_eq!(names(&f), ["stale-output"]);
        // Half from the previous launch, half this launch's: late writes.
        let mut mixed = encode(&matrix(1));
        let stale = encode(&prev);
        mixed[COLS * COLS / 2..].copy_from_slice(&stale[COLS * COLS / 2..]);
        let f = classify_out(&mixed, Some(&prev));
        assert_eq!(names(&f), ["late-writes"], "{f:?}");
    }

    #[test]
    fn an_output_kept_for_the_same_buffers_is_memoised() {
        // The buffers last held inputs whose product was `before`; rescaled, the product is
        // `expected` = 4 * before, and the kernel returned `before` (all but a few elements).
        let before = matrix(4);
        let expected: Vec<f32> = before.iter().map(|x| x * 4.0).collect();
        let mut out = encode(&before);
        out[0] = Dtype::F16.from_f32(expected[0]);
        let f = classify(&Evidence {
            out: &out,
            dtype: Dtype::F16,
            cols: COLS,
            expected: &expected,
            decoy: &matrix(2),
            previous: None,
            same_buffers: Some(&before),
        });
        assert_eq!(names(&f), ["memoised-output"], "{f:?}");
        // The same output without the knowledge of the buffers' last result: just wrong.
        let f = classify(&Evidence {
            out: &out,
            dtype: Dtype::F16,
            cols: COLS,
            expected: &expected,
            decoy: &matrix(2),
            previous: None,
            same_buffers: None,
        });
        assert_eq!(names(&f), ["wrong-result"]);
    }

    #[test]
    fn anything_else_is_a_wrong_result_with_its_first_element() {
        let mut out = encode(&matrix(1));
        out[3 * COLS + 5] = Dtype::F16.from_f32(1234.0);
        let f = classify_out(&out, Some(&matrix(3)));
        assert_eq!(names(&f), ["wrong-result"]);
        assert!(f[0].detail.contains("C[3][5], is 1234"), "{}", f[0].detail);
    }

    #[test]
    fn guards_name_the_side_and_distance() {
        let clean = vec![GUARD_BYTE; 64];
        assert_eq!(guard_flag("C", &clean, &clean), None);
        let mut above = clean.clone();
        above[8] = 0;
        above[9] = 1;
        let f = guard_flag("C", &clean, &above).unwrap();
        assert_eq!(f.name, "out-of-bounds-write");
        assert!(
            f.detail
                .contains("2 bytes past the end of C (the first 8 bytes"),
            "{}",
            f.detail
        );
        let mut below = clean.clone();
        below[60] = 0;
        let f = guard_flag("A", &below, &clean).unwrap();
        assert!(
            f.detail
                .contains("1 bytes before the start of A (the nearest 4 bytes"),
            "{}",
            f.detail
        );
    }

    #[test]
    fn edited_inputs_are_named_with_the_first_element() {
        let pristine = encode(&matrix(1));
        assert_eq!(
            input_flag("A", COLS, Dtype::F16, &pristine, &pristine),
            None
        );
        let mut now = pristine.clone();
        now[COLS + 2] = Dtype::F16.from_f32(0.0);
        now[COLS + 3] = Dtype::F16.from_f32(0.0);
        let f = input_flag("A", COLS, Dtype::F16, &now, &pristine).unwrap();
        assert_eq!(f.name, "input-modified");
        assert!(
            f.detail
                .contains("changed 2 elements of its input A; the first, A[1][2]"),
            "{}",
            f.detail
        );
    }
}
