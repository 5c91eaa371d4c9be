//! The one timing protocol of the workbook, used by `runner step`, `runner bench`, `runner
//! selftest` and the grader: [`time_rounds`]. Every round primes the tensor cores, then runs the
//! contenders back to back in a rotated order, each after an L2 flush and between two CUDA
//! events; outputs are verified by the callers before timing (and, in the grader, after every
//! launch, on inputs given a fresh power-of-two scale before each round: [`Protocol::rescale`]). The result is the median, minimum and interquartile range of each contender's
//! times, with the SM clock, power and clock-event reasons NVML read while its launches ran.

use crate::gpu::CudaResultExt;
use crate::gpu::{check, Gpu};
use crate::nvml::{reason_names, Nvml, Reading};
use anyhow::{anyhow, Result};
use cudarc::driver::sys;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// First and third quartiles (linear interpolation between order statistics): the
    /// interquartile range `q3_us - q1_us` is the spread a reader should compare differences to.
    #[serde(default)]
    pub q1_us: f64,
    #[serde(default)]
    pub q3_us: f64,
    pub runs: usize,
}

/// The `p`-quantile of sorted samples, interpolating linearly between neighbours.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n => {
            let x = p * (n - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
        }
    }
}

impl Stats {
    pub fn from_samples(mut us: Vec<f64>) -> Stats {
        us.sort_by(|a, b| a.total_cmp(b));
        Stats {
            median_us: quantile(&us, 0.5),
            min_us: us.first().copied().unwrap_or(f64::NAN),
            max_us: us.last().copied().unwrap_or(f64::NAN),
            q1_us: quantile(&us, 0.25),
            q3_us: quantile(&us, 0.75),
            runs: us.len(),
        }
    }
    pub fn iqr_us(&self) -> f64 {
        self.q3_us - self.q1_us
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
    sync_diagnosed(gpu, timeout, what, &|| None, &|| None)
}

/// What explains a hang: who saw it ("the emulation's watchdog saw these mbarrier waits never
/// succeed"), and one line per finding, printed indented under the hang's `error:` line.
#[derive(Debug, Clone, PartialEq)]
pub struct HangReport {
    pub source: String,
    pub lines: Vec<String>,
}

/// [`sync_with_timeout`], asking `diagnose` before calling a timeout a hang: under the tcgen05
/// emulation a kernel that broke a rule records the fault in host-mapped memory and traps, but
/// the trap can take longer to reach the host than the limit when many contexts share the GPU
/// (the parallel GPU check). A recorded fault is then reported as the error it is (`error:` and
/// exit code 2, as for any error), not as a hang. The process still ends at once, as for a hang:
/// returning instead let the caller free buffers and unload the module under the still-running
/// kernel, which blocked (on the H200 two such runs waited until an outer 150 s limit).
/// A hang with no recorded fault is then explained by `waiting`, where it can: the emulation's
/// watchdog records (which warp waits on which barrier, and what that barrier still lacks), or a
/// native twin's re-run as a hang diagnosis build (`common::run::HangRerun`).
pub fn sync_diagnosed(
    gpu: &Gpu,
    timeout: Duration,
    what: &str,
    diagnose: &dyn Fn() -> Option<String>,
    waiting: &dyn Fn() -> Option<HangReport>,
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
                        exit_now(crate::verdict::Verdict::Error.code().into());
                    }
                    match waiting().filter(|r| !r.lines.is_empty()) {
                        None => eprintln!(
                            "error: {what} did not finish within {:.0} s: it hangs. The usual cause is an mbarrier wait on a phase that never completes (wrong parity, or a missing arrive/commit). Raise the limit with --timeout if the problem is just large.",
                            timeout.as_secs_f64()
                        ),
                        Some(r) => {
                            eprintln!(
                                "error: {what} did not finish within {:.0} s: it hangs; {} (raise the limit with --timeout if the problem is just large):",
                                timeout.as_secs_f64(),
                                r.source
                            );
                            for line in &r.lines {
                                eprintln!("  {line}");
                            }
                        }
                    }
                    exit_now(crate::verdict::Verdict::Hang.code().into());
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
            .cuda("read a CUDA event's time")?;
        Ok(ms as f64 * 1e3)
    }
}

fn enqueue_timed(
    gpu: &Gpu,
    flush: Option<(sys::CUdeviceptr, usize)>,
    c: &mut dyn Timed,
) -> Result<PendingTiming> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    if let Some((ptr, bytes)) = flush {
        // SAFETY: `ptr` is a live device buffer of `bytes` bytes.
        check(
            unsafe { sys::cuMemsetD8Async(ptr, 0x5A, bytes, gpu.stream.cu_stream()) },
            "L2 flush",
        )?;
    }
    let start = gpu.stream.record_event(flags).cuda("record a CUDA event")?;
    c.launch()?;
    let end = gpu.stream.record_event(flags).cuda("record a CUDA event")?;
    c.after_launch()?;
    Ok(PendingTiming { start, end })
}

/// One contender of [`time_rounds`]: its launch, and untimed work around it.
pub trait Timed {
    /// Before launch `round` (0-based, warm-up rounds included), outside the timed region: e.g.
    /// fresh inputs, a poisoned output.
    fn prepare(&mut self, _round: usize) -> Result<()> {
        Ok(())
    }
    /// After every contender's `prepare` for `round`, only when the protocol asks for it
    /// ([`Protocol::rescale`]): give the inputs of this contender's next launch a fresh
    /// power-of-two scale ([`crate::rescale`]), so that no input element is what it was the last
    /// time these buffers were used, and expect the output scaled to match. The grader's
    /// defence against memoisation; `runner step` and `runner bench` time unscaled inputs.
    fn rescale(&mut self, _round: usize) -> Result<()> {
        Ok(())
    }
    /// The launch itself, on the GPU's stream.
    fn launch(&mut self) -> Result<()>;
    /// Enqueued right after the launch's end event, outside the timed region, before the next
    /// contender's launch: e.g. the grader poisons cuBLAS's output here, so a submission timed
    /// after cuBLAS in the same round cannot find this round's answer.
    fn after_launch(&mut self) -> Result<()> {
        Ok(())
    }
    /// After launch `round` has finished, outside the timed region: e.g. verify its output. An
    /// error stops the timing.
    fn check(&mut self, _round: usize) -> Result<()> {
        Ok(())
    }
}

/// A plain launch as a contender (nothing to do around it).
pub struct Launch<F: FnMut() -> Result<()>>(pub F);

impl<F: FnMut() -> Result<()>> Timed for Launch<F> {
    fn launch(&mut self) -> Result<()> {
        (self.0)()
    }
}

/// NVML's readings taken while one contender's timed launches ran: each clock was read after
/// the launch's start event had passed and before its end event had (see [`time_rounds`]), so
/// it describes that contender, not its neighbours.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Clocks {
    pub readings: usize,
    pub sm_mhz_median: f64,
    pub sm_mhz_min: u32,
    pub sm_mhz_max: u32,
    /// NVML's power draw (a one-second average on Hopper: the load of the whole run so far).
    pub power_w_median: Option<f64>,
    pub temperature_c_max: Option<u32>,
    /// Every reason NVML gave, in any reading, for a clock below its maximum (e.g.
    /// `sw_power_cap`: the power limit, not the kernel, set the clock).
    pub clock_event_reasons: Vec<String>,
}

impl Clocks {
    pub fn from_readings(r: &[Reading]) -> Option<Clocks> {
        if r.is_empty() {
            return None;
        }
        let mut mhz: Vec<f64> = r.iter().map(|x| f64::from(x.sm_mhz)).collect();
        mhz.sort_by(|a, b| a.total_cmp(b));
        let mut watts: Vec<f64> = r.iter().filter_map(|x| x.power_w).collect();
        watts.sort_by(|a, b| a.total_cmp(b));
        let mask = r.iter().filter_map(|x| x.reasons).fold(0, |m, x| m | x);
        Some(Clocks {
            readings: r.len(),
            sm_mhz_median: quantile(&mhz, 0.5),
            sm_mhz_min: r.iter().map(|x| x.sm_mhz).min().unwrap_or(0),
            sm_mhz_max: r.iter().map(|x| x.sm_mhz).max().unwrap_or(0),
            power_w_median: (!watts.is_empty()).then(|| quantile(&watts, 0.5)),
            temperature_c_max: r.iter().filter_map(|x| x.temperature_c).max(),
            clock_event_reasons: reason_names(mask),
        })
    }
}

/// One contender's times, and the clocks they ran at.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measured {
    pub stats: Stats,
    /// None without NVML, or when no reading fell inside one of its launches.
    pub clocks: Option<Clocks>,
    /// Every timed round's time, in round order: the same index is the same round for every
    /// contender, which pairs them (`crate::confidence`). Not written to results files.
    #[serde(skip)]
    pub samples_us: Vec<f64>,
}

/// [`Protocol::until`]: every contender's times so far, round by round; true stops.
pub type Until<'a> = dyn FnMut(&[Vec<f64>]) -> bool + 'a;

/// How [`time_rounds`] times. Every caller states each part; [`Protocol::standard`] is what
/// `runner step`, `runner bench` and the grader use.
pub struct Protocol<'a> {
    /// Untimed rounds first (the same work as a timed round, times discarded).
    pub warmup: usize,
    /// Timed rounds.
    pub iters: usize,
    /// Overwritten before every launch, outside the timed region, to evict the L2.
    pub flush: Option<(sys::CUdeviceptr, usize)>,
    /// Hang limit of each round.
    pub timeout: Duration,
    /// Tensor-core work on scratch data before every round (`cublas::Warmup`); None skips it
    /// (only `runner bench --diagnose` does, to measure what it is for).
    pub prime: Option<&'a mut dyn FnMut() -> Result<()>>,
    /// Contender `(round + j) % n` is the `j`-th of round `round`: no contender always follows
    /// the prime, or always follows one particular other contender. Only the diagnosis turns
    /// it off.
    pub rotate: bool,
    /// Read the clocks while timed launches run.
    pub nvml: Option<&'a Nvml>,
    /// Wait for each launch before enqueueing the next (the GPU idles for the host's round
    /// trip between launches), as `runner step` and `runner bench` timed before this module
    /// was the only protocol. Only the diagnosis sets it, to reproduce them.
    pub sync_each: bool,
    /// Call every contender's [`Timed::rescale`] before each round (warm-up rounds included):
    /// the grader sets it, so a kernel cannot return an output it kept from an earlier launch on
    /// the same buffers. Off in [`Protocol::standard`].
    pub rescale: bool,
    /// Asked after every timed round with every contender's times so far (round order, the
    /// contenders' order): true ends the timing there, before `iters` rounds. The bench's
    /// adaptive rounds (`crate::confidence::StopRule`); None in [`Protocol::standard`].
    pub until: Option<&'a mut Until<'a>>,
}

impl<'a> Protocol<'a> {
    /// Primed, rotated, L2 flushed: the workbook's timing.
    pub fn standard(
        warmup: usize,
        iters: usize,
        flush: Option<(sys::CUdeviceptr, usize)>,
        timeout: Duration,
        prime: &'a mut dyn FnMut() -> Result<()>,
        nvml: Option<&'a Nvml>,
    ) -> Protocol<'a> {
        Protocol {
            warmup,
            iters,
            flush,
            timeout,
            prime: Some(prime),
            rotate: true,
            nvml,
            sync_each: false,
            rescale: false,
            until: None,
        }
    }
}

/// The order of round `round` over `n` contenders.
pub fn round_order(round: usize, n: usize, rotate: bool) -> Vec<usize> {
    let first = if rotate && n > 0 { round % n } else { 0 };
    (0..n).map(|j| (first + j) % n).collect()
}

/// Time contenders against each other: `warmup` untimed rounds, then `iters` timed rounds (fewer
/// where [`Protocol::until`] ends them). A
/// round runs every contender's `prepare` (and, if the protocol rescales, `rescale`), then the prime, then every contender's launch back
/// to back in the round's [`round_order`] (each after the L2 flush, between two events, then
/// its `after_launch`), then waits, then every `check`. Returns one [`Measured`] per contender,
/// in the order given.
///
/// Why prime every round: callers verify outputs on the CPU between rounds (the grader after
/// every launch), which leaves the GPU idle for milliseconds, and an idle H200 leaves its
/// working state within about 5 ms and needs about 2 ms of steady tensor-core work to return to
/// it; memsets do not bring it back. Measured on an H200 (2048^3 f16 cuBLAS,
/// `assets/results/grade-timing-h200-2026-11-22.txt`): 27 us back to back, 117-172 us after
/// 5-200 ms idle (NVML showed the SM clock falling too, by less than that slowdown). Whichever
/// contender ran first after the checks was timed in that state, which once made cuBLAS look 3x
/// slower than a kernel timed right after it. The prime keeps the tensor cores busy for a few
/// milliseconds on data no contender can use, so every timed launch starts at working clocks;
/// the launches of a round follow each other with no host work between them.
///
/// Why rotate: the first contender after the prime and the one after a heavier neighbour see
/// slightly different states (clock, power averaging, L2 write-backs of the flush); rotating
/// gives each contender every position equally often.
///
/// The clocks: during a timed round, the host waits for each launch's start event and, if its
/// end event has not passed yet, reads the SM clock and its clock-event reasons, keeping them
/// only if the end event still has not passed when they are read: no clock is attributed to a
/// launch it did not fall inside. The power and temperature (averages on the driver's side) are
/// read after and attached to the kept reading.
pub fn time_rounds(
    gpu: &Gpu,
    protocol: &mut Protocol<'_>,
    contenders: &mut [&mut dyn Timed],
) -> Result<Vec<Measured>> {
    let n = contenders.len();
    let iters = protocol.iters;
    // `iters` is only a bound when `until` decides.
    let mut samples = vec![Vec::with_capacity(iters.min(1 << 12)); n];
    let mut readings: Vec<Vec<Reading>> = vec![Vec::new(); n];
    for round in 0..protocol.warmup + iters {
        for c in contenders.iter_mut() {
            c.prepare(round)?;
        }
        if protocol.rescale {
            for c in contenders.iter_mut() {
                c.rescale(round)?;
            }
        }
        if let Some(prime) = protocol.prime.as_mut() {
            prime()?;
        }
        let order = round_order(round, n, protocol.rotate);
        let timed = round >= protocol.warmup;
        let wait = |pending: &[(usize, PendingTiming)], readings: &mut [Vec<Reading>]| {
            if let (true, Some(nvml)) = (timed, protocol.nvml) {
                read_during(nvml, pending, protocol.timeout, readings);
            }
            let what = if timed { "timed run" } else { "warm-up" };
            sync_with_timeout(gpu, protocol.timeout, what)
        };
        let mut pending = Vec::with_capacity(n);
        for &i in &order {
            pending.push((i, enqueue_timed(gpu, protocol.flush, &mut *contenders[i])?));
            if protocol.sync_each {
                wait(&pending[pending.len() - 1..], &mut readings)?;
            }
        }
        if !protocol.sync_each {
            wait(&pending, &mut readings)?;
        }
        if timed {
            for (i, p) in &pending {
                samples[*i].push(p.elapsed_us()?);
            }
        }
        for c in contenders.iter_mut() {
            c.check(round)?;
        }
        if let (true, Some(until)) = (timed, protocol.until.as_mut()) {
            if until(&samples) {
                break;
            }
        }
    }
    Ok(samples
        .into_iter()
        .zip(readings)
        .map(|(s, r)| Measured {
            stats: Stats::from_samples(s.clone()),
            clocks: Clocks::from_readings(&r),
            samples_us: s,
        })
        .collect())
}

/// Whether the stream has passed `event` (an error counts as passed: the wait that follows
/// reports it).
fn passed(event: &cudarc::driver::CudaEvent) -> bool {
    // SAFETY: the event is alive for the call.
    let r = unsafe { sys::cuEventQuery(event.cu_event()) };
    r != sys::CUresult::CUDA_ERROR_NOT_READY
}

/// NVML readings inside each launch of a round (see [`time_rounds`]). Spins on the events (a
/// round lasts milliseconds); gives up at `timeout`, leaving the hang to the wait that follows.
fn read_during(
    nvml: &Nvml,
    pending: &[(usize, PendingTiming)],
    timeout: Duration,
    readings: &mut [Vec<Reading>],
) {
    let t0 = Instant::now();
    for (i, p) in pending {
        while !passed(&p.start) {
            if t0.elapsed() > timeout {
                return;
            }
            std::hint::spin_loop();
        }
        if passed(&p.end) {
            continue;
        }
        if let Ok(r) = nvml.read_clock() {
            if !passed(&p.end) {
                readings[*i].push(nvml.add_power(r));
            }
        }
    }
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
        assert_eq!(s.iqr_us(), 0.0);
        assert!(Stats::from_samples(Vec::new()).median_us.is_nan());
    }

    #[test]
    fn quartiles_interpolate() {
        // 1..=9: quartiles at positions 2 and 6 (0-based) exactly.
        let s = Stats::from_samples((1..=9).rev().map(f64::from).collect());
        assert_eq!((s.q1_us, s.median_us, s.q3_us), (3.0, 5.0, 7.0));
        assert_eq!(s.iqr_us(), 4.0);
        // 1..=4: positions 0.75 and 2.25.
        let s = Stats::from_samples(vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.q1_us, s.q3_us), (1.75, 3.25));
        // One outlier moves the maximum, not the quartiles.
        let s = Stats::from_samples(vec![10.0, 10.0, 11.0, 11.0, 500.0]);
        assert_eq!((s.q1_us, s.q3_us, s.max_us), (10.0, 11.0, 500.0));
    }

    #[test]
    fn rounds_rotate_every_contender_through_every_position() {
        assert_eq!(round_order(0, 3, true), vec![0, 1, 2]);
        assert_eq!(round_order(1, 3, true), vec![1, 2, 0]);
        assert_eq!(round_order(5, 3, true), vec![2, 0, 1]);
        assert_eq!(round_order(5, 3, false), vec![0, 1, 2]);
        assert_eq!(round_order(7, 0, true), Vec::<usize>::new());
        // Over n rounds each contender is first exactly once.
        let firsts: Vec<usize> = (0..4).map(|r| round_order(r, 4, true)[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2, 3]);
    }

    #[test]
    fn clocks_summarise_readings() {
        assert!(Clocks::from_readings(&[]).is_none());
        let r = |mhz, w, reasons| Reading {
            sm_mhz: mhz,
            power_w: Some(w),
            temperature_c: Some(60),
            reasons: Some(reasons),
        };
        let c = Clocks::from_readings(&[r(1980, 500.0, 0), r(1755, 700.0, 0x4), r(1830, 690.0, 0)])
            .unwrap();
        assert_eq!(c.readings, 3);
        assert_eq!(
            (c.sm_mhz_median, c.sm_mhz_min, c.sm_mhz_max),
            (1830.0, 1755, 1980)
        );
        assert_eq!(c.power_w_median, Some(690.0));
        assert_eq!(c.clock_event_reasons, vec!["sw_power_cap"]);
    }
}
