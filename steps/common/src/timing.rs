//! Timing with CUDA events: warm-up, then the median over many runs, with the L2 cache flushed
//! between runs by default so every run reads its operands from HBM.

use crate::gpu::{check, Gpu};
use anyhow::{anyhow, Result};
use cudarc::driver::sys;
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub runs: usize,
}

impl Stats {
    pub fn from_samples(mut us: Vec<f64>) -> Stats {
        us.sort_by(|a, b| a.total_cmp(b));
        let n = us.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            us[n / 2]
        } else {
            0.5 * (us[n / 2 - 1] + us[n / 2])
        };
        Stats {
            median_us: median,
            min_us: us.first().copied().unwrap_or(f64::NAN),
            max_us: us.last().copied().unwrap_or(f64::NAN),
            runs: n,
        }
    }
    pub fn tflops(&self, flops: f64) -> f64 {
        flops / (self.median_us * 1e-6) / 1e12
    }
}

/// Wait for everything queued on the stream, but give up after `timeout`: a kernel waiting on
/// an mbarrier phase that never completes spins forever. On a hang the process exits at once
/// (code 124) with `_exit`: dropping buffers or modules a running kernel still uses could block,
/// and so does `exit`, whose atexit handlers include the CUDA driver's teardown, which waits for
/// the kernel (the grader's worker sat there until its 240 s limit killed it). The driver frees
/// the context, and stops the kernel, when the process is gone.
pub fn sync_with_timeout(gpu: &Gpu, timeout: Duration, what: &str) -> Result<()> {
    sync_diagnosed(gpu, timeout, what, &|| None, &Vec::new)
}

/// [`sync_with_timeout`], asking `diagnose` before calling a timeout a hang: under the tcgen05
/// emulation a kernel that broke a rule records the fault in host-mapped memory and traps, but
/// the trap can take longer to reach the host than the limit when many contexts share the GPU
/// (the parallel GPU check). A recorded fault is then reported as the error it is (`error:` and
/// exit code 2, as for any error), not as a hang. The process still ends at once, as for a hang:
/// returning instead let the caller free buffers and unload the module under the still-running
/// kernel, which blocked (on the H200 two such runs waited until an outer 150 s limit).
/// A hang with no recorded fault is then explained by `waiting` (the emulation's watchdog
/// records: which warp waits on which barrier, and what that barrier still lacks), one line each.
pub fn sync_diagnosed(
    gpu: &Gpu,
    timeout: Duration,
    what: &str,
    diagnose: &dyn Fn() -> Option<String>,
    waiting: &dyn Fn() -> Vec<String>,
) -> Result<()> {
    let event = gpu
        .stream
        .record_event(None)
        .map_err(|e| anyhow!("cannot record an event: {e:?}"))?;
    let start = Instant::now();
    loop {
        // SAFETY: the event is alive for the loop.
        let r = unsafe { sys::cuEventQuery(event.cu_event()) };
        match r {
            sys::CUresult::CUDA_SUCCESS => return Ok(()),
            sys::CUresult::CUDA_ERROR_NOT_READY => {
                if start.elapsed() > timeout {
                    if let Some(d) = diagnose() {
                        eprintln!("error: {d}");
                        exit_now(2);
                    }
                    let waits = waiting();
                    if waits.is_empty() {
                        eprintln!(
                            "error: {what} did not finish within {:.0} s: it hangs. The usual cause is an mbarrier wait on a phase that never completes (wrong parity, or a missing arrive/commit). Raise the limit with --timeout if the problem is just large.",
                            timeout.as_secs_f64()
                        );
                    } else {
                        eprintln!(
                            "error: {what} did not finish within {:.0} s: it hangs; the emulation's watchdog saw these mbarrier waits never succeed (raise the limit with --timeout if the problem is just large):",
                            timeout.as_secs_f64()
                        );
                        for w in &waits {
                            eprintln!("  waiting: {w}");
                        }
                    }
                    exit_now(124);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            other => return Err(anyhow!("{what} faulted: {other:?}")),
        }
    }
}

/// End the process now, without atexit handlers (see [`sync_with_timeout`]).
fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process without running atexit handlers; nothing after this point relies
    // on them.
    unsafe { libc::_exit(code) }
}

/// Time several launches against each other with events: `warmup` untimed runs of each, then
/// `iters` rounds in which each runs once, in turn, each preceded (outside the timed region) by
/// overwriting `flush` to evict L2. Alternating keeps clocks and temperature the same for all,
/// so their ratio is fair. Returns one `Stats` per launch, in order.
pub fn time_interleaved(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    flush: Option<(sys::CUdeviceptr, usize)>,
    timeout: Duration,
    launches: &mut [&mut dyn FnMut() -> Result<()>],
) -> Result<Vec<Stats>> {
    for launch in launches.iter_mut() {
        for _ in 0..warmup {
            launch()?;
        }
    }
    sync_with_timeout(gpu, timeout, "warm-up")?;
    let mut samples = vec![Vec::with_capacity(iters); launches.len()];
    for _ in 0..iters {
        for (launch, samples) in launches.iter_mut().zip(samples.iter_mut()) {
            samples.push(time_once(gpu, flush, timeout, launch)?);
        }
    }
    Ok(samples.into_iter().map(Stats::from_samples).collect())
}

/// Microseconds between events recorded around `launch` on the GPU's stream, after evicting L2
/// with `flush` (outside the timed region); waits for the launch under `timeout`.
fn time_once(
    gpu: &Gpu,
    flush: Option<(sys::CUdeviceptr, usize)>,
    timeout: Duration,
    launch: &mut dyn FnMut() -> Result<()>,
) -> Result<f64> {
    let pending = enqueue_timed(gpu, flush, launch)?;
    sync_with_timeout(gpu, timeout, "timed run")?;
    pending.elapsed_us()
}

/// A timed launch enqueued (L2 flush, start event, launch, end event) but not yet waited for.
struct PendingTiming {
    start: cudarc::driver::CudaEvent,
    end: cudarc::driver::CudaEvent,
}

impl PendingTiming {
    /// Only once the stream has passed the end event.
    fn elapsed_us(&self) -> Result<f64> {
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(|e| anyhow!("{e:?}"))?;
        Ok(ms as f64 * 1e3)
    }
}

fn enqueue_timed(
    gpu: &Gpu,
    flush: Option<(sys::CUdeviceptr, usize)>,
    launch: &mut dyn FnMut() -> Result<()>,
) -> Result<PendingTiming> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    if let Some((ptr, bytes)) = flush {
        // SAFETY: `ptr` is a live device buffer of `bytes` bytes.
        check(
            unsafe { sys::cuMemsetD8Async(ptr, 0x5A, bytes, gpu.stream.cu_stream()) },
            "L2 flush",
        )?;
    }
    let start = gpu
        .stream
        .record_event(flags)
        .map_err(|e| anyhow!("{e:?}"))?;
    launch()?;
    let end = gpu
        .stream
        .record_event(flags)
        .map_err(|e| anyhow!("{e:?}"))?;
    Ok(PendingTiming { start, end })
}

/// One contender of [`time_rounds`]: untimed work before and after each of its launches.
pub trait Timed {
    /// Before launch `round` (0-based, warm-up rounds included), outside the timed region: e.g.
    /// fresh inputs, a poisoned output.
    fn prepare(&mut self, round: usize) -> Result<()>;
    /// The launch itself, on the GPU's stream.
    fn launch(&mut self) -> Result<()>;
    /// After launch `round` has finished, outside the timed region: e.g. verify its output. An
    /// error stops the timing.
    fn check(&mut self, round: usize) -> Result<()>;
}

/// [`time_interleaved`] for contenders that need work around every launch (the grader's: each
/// output verified, inputs rotated): `warmup` untimed rounds, then `iters` timed rounds. A round
/// runs every contender's `prepare`, then `prime`, then every contender's launch back to back
/// (each after the L2 flush, each timed when the round is), then waits, then every `check`.
///
/// Why `prime`: the checks verify outputs on the CPU, which leaves the GPU idle for milliseconds,
/// and an idle H200 leaves its working state within about 5 ms and needs about 2 ms of steady
/// tensor-core work to return to it; memsets do not bring it back. Measured on an H200 (2048^3
/// f16 cuBLAS, `assets/results/grade-timing-h200-2026-11-22.txt`): 27 us back to back, 117-172 us
/// after 5-200 ms idle (NVML showed the SM clock falling too, by less than that slowdown).
/// Whichever contender ran first after the checks was timed in that state, which once made
/// cuBLAS look 3x slower than a kernel timed right after it. `prime` must keep the
/// tensor cores busy for a few milliseconds on data no contender can use (the caller's scratch
/// buffers), so every timed launch starts at working clocks; the launches of a round follow each
/// other with no host work between them.
pub fn time_rounds(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    flush: Option<(sys::CUdeviceptr, usize)>,
    timeout: Duration,
    prime: &mut dyn FnMut() -> Result<()>,
    contenders: &mut [&mut dyn Timed],
) -> Result<Vec<Stats>> {
    let mut samples = vec![Vec::with_capacity(iters); contenders.len()];
    for round in 0..warmup + iters {
        for c in contenders.iter_mut() {
            c.prepare(round)?;
        }
        prime()?;
        let mut pending = Vec::with_capacity(contenders.len());
        for c in contenders.iter_mut() {
            if round < warmup {
                c.launch()?;
            } else {
                pending.push(enqueue_timed(gpu, flush, &mut || c.launch())?);
            }
        }
        let what = if round < warmup {
            "warm-up"
        } else {
            "timed run"
        };
        sync_with_timeout(gpu, timeout, what)?;
        for (p, samples) in pending.iter().zip(samples.iter_mut()) {
            samples.push(p.elapsed_us()?);
        }
        for c in contenders.iter_mut() {
            c.check(round)?;
        }
    }
    Ok(samples.into_iter().map(Stats::from_samples).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let s = Stats::from_samples(vec![5.0, 1.0, 3.0]);
        assert_eq!(
            (s.median_us, s.min_us, s.max_us, s.runs),
            (3.0, 1.0, 5.0, 3)
        );
        let s = Stats::from_samples(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.median_us, 2.5);
        // 2 * 4096 * 8192 * 4096 flops in 1000 us = 274.9 TFLOP/s.
        let s = Stats::from_samples(vec![1000.0]);
        assert!((s.tflops(2.0 * 4096.0 * 8192.0 * 4096.0) - 274.88).abs() < 0.01);
    }
}
