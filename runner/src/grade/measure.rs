//! The measuring child (`grade-worker --phase measure`): one launch of one dtype build at the
//! rubric's public measured shape, its instructions counted by CUPTI's SASS metrics, its output
//! checked as a test's, and each count mapped to its instruction by disassembling the very cubin
//! it launched ([`super::executed`] decides from them). Never timed; a process of its own, so the
//! patched code CUPTI counts with never runs in a timed launch.
//!
//! It writes `measure.json` (the [`Measured`] the grader reads) and `measure-debug.txt` (every
//! count, raw and mapped, for the instructor: `runner grade --keep-scratch`).

use super::counts::{CountSource, Counts, Measured, PcCount, SassCounts};
use super::job::{EnvInfo, Job};
use super::protocol::{CUPTI_ENV, DEBUG_FILE, ENTRY, LAUNCHING_FILE, MEASURED_FILE, NVDISASM_ENV};
use super::vocab::Flag;
use super::worker::{check_launch, cubin_path, load_build, one_line, prepare, seal_all, Run};
use crate::sandbox::truncate_log;
use anyhow::{anyhow, Context, Result};
use common::cublas::Blas;
use common::cupti::{self, Cupti, Measurement};
use common::gpu::Gpu;
use common::run::launch_and_wait;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The CUPTI library the grader named ([`CUPTI_ENV`]), loaded, its profiler initialised for
/// `gpu` before any kernel runs; or why not, as the one line the report shows.
pub fn open_cupti(gpu: &Gpu) -> Result<Cupti, String> {
    let path = std::env::var_os(CUPTI_ENV)
        .map(PathBuf::from)
        .ok_or_else(|| format!("internal: the grader named no CUPTI library ({CUPTI_ENV})"))?;
    let mut c = Cupti::open(&path).map_err(|e| one_line(&format!("{e:#}")))?;
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| format!("cannot make the context current: {e:?}"))?;
    c.initialize(gpu.ctx.ordinal() as u32)
        .map_err(|e| one_line(&format!("{e:#}")))?;
    Ok(c)
}

/// The child's work: measure, write the report (an error of the grader's own is a report too).
pub fn run(
    job: &Job,
    dir: &Path,
    gpu: &Gpu,
    blas: &Blas,
    env: EnvInfo,
    cupti: Result<Cupti, String>,
) -> Result<()> {
    let mut debug = String::new();
    let _ = writeln!(
        debug,
        "GPU {} (sm_{}{}), driver {}, device {}",
        env.name,
        env.compute_capability.0,
        env.compute_capability.1,
        env.driver_version,
        gpu.ctx.ordinal()
    );
    let measured = match cupti {
        Err(why) => Measured::Error(why),
        Ok(c) => measure(job, dir, gpu, blas, &c, &mut debug)
            .unwrap_or_else(|e| Measured::Error(one_line(&format!("{e:#}")))),
    };
    let _ = writeln!(debug, "\nverdict: {}", summary(&measured));
    eprintln!("measure: {}", summary(&measured));
    std::fs::write(dir.join(DEBUG_FILE), &debug)?;
    std::fs::write(
        dir.join(MEASURED_FILE),
        serde_json::to_vec_pretty(&measured)?,
    )?;
    Ok(())
}

fn summary(m: &Measured) -> String {
    match m {
        Measured::Ran {
            flags,
            summary,
            counts,
        } => format!(
            "ran ({summary}; {} flag(s)); {} instruction(s) counted by {}",
            flags.len(),
            counts.len(),
            counts.describe()
        ),
        Measured::Failed { detail, .. } => format!("failed: {detail}"),
        Measured::Error(e) => format!("error: {e}"),
    }
}

/// The measurement proper. `Err`: the grader's failure (no proof, no blame).
fn measure(
    job: &Job,
    dir: &Path,
    gpu: &Gpu,
    blas: &Blas,
    cupti: &Cupti,
    debug: &mut String,
) -> Result<Measured> {
    let mj = job
        .measure
        .as_ref()
        .ok_or_else(|| anyhow!("internal: a measure job without its launch"))?;
    let dtypes = job.dtypes()?;
    let [dtype] = dtypes[..] else {
        return Err(anyhow!(
            "internal: a measure job names {} dtypes, not one",
            dtypes.len()
        ));
    };
    let _ = writeln!(
        debug,
        "CUPTI {} (API version {})\nlaunch: {dtype} build, {}x{}x{}, seed {:#x}",
        cupti.path.display(),
        cupti.api_version,
        mj.shape[0],
        mj.shape[1],
        mj.shape[2],
        mj.seed
    );
    // Inputs and reference first: no code of the submission is loaded, nothing is counted yet.
    let test = mj.as_test(dtype);
    let p = prepare(gpu, blas, &test, 0).context("preparing the measured launch")?;
    let seals = seal_all(gpu, std::slice::from_ref(&p))?;
    let mut run = Run::new(
        gpu,
        Duration::from_secs(job.launch_seconds),
        seals,
        vec![test.name.clone()],
    );
    // The map from (function, offset) to instruction, from the cubin this child launches.
    let cubin_file = cubin_path(dir, dtype);
    let cubin = std::fs::read(&cubin_file).context("no compiled kernel to measure")?;
    let nvdisasm = std::env::var_os(NVDISASM_ENV)
        .map(PathBuf::from)
        .ok_or_else(|| anyhow!("internal: the grader named no nvdisasm ({NVDISASM_ENV})"))?;
    let listing = common::sass::listing_of(&nvdisasm, &cubin_file)?;
    let map = common::sass::instructions_of_kernel(&listing, ENTRY)?;
    let crc = cupti.cubin_crc(&cubin)?;
    let _ = writeln!(
        debug,
        "cubin {} bytes, CUPTI CRC {crc:#x} (records carry 32 bits: {:#x}); {} instructions in {ENTRY} and its callees",
        cubin.len(),
        crc as u32,
        map.len()
    );

    // C poisoned before counting starts: a memset inside CUPTI's range (cuMemsetD8Async) leaves
    // the range with no record at all (measured on an H100, CUDA 13.0: `runner check cupti`).
    p.poison_c(gpu)?;
    gpu.stream
        .synchronize()
        .map_err(|e| anyhow!("cannot wait for the GPU: {e:?}"))?;
    // Count from here: CUPTI patches the kernel at its first launch.
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| anyhow!("cannot make the context current: {e:?}"))?;
    let session = cupti.start(
        gpu.ctx.cu_ctx() as *mut std::ffi::c_void,
        gpu.ctx.ordinal() as u32,
    )?;
    let kernel = match load_build(gpu, job, cubin) {
        Ok(k) => k,
        Err(e) => {
            return Ok(Measured::Failed {
                detail: format!(
                    "the kernel could not be loaded: {}",
                    one_line(&format!("{e:#}"))
                ),
                flags: Vec::new(),
            })
        }
    };
    let set = &p.sets[0];
    let plan = kernel.plan(gpu, p.shape, None)?;
    let args = p.args(&plan, set)?;
    std::fs::write(dir.join(LAUNCHING_FILE), b"")?;
    if let Err(e) = launch_and_wait(gpu, &kernel, &plan, &args, None, mj.seed, run_limit(job)) {
        let why = format!("{e:#}");
        return Ok(Measured::Failed {
            detail: "the measured launch faulted".into(),
            flags: vec![Flag::new("kernel-fault", truncate_log(&why, 2048))],
        });
    }
    // The counts first, the output's checks after: nothing but the launch runs in the range.
    let m = session.finish()?;
    let mut checked = check_launch(gpu, &p, set, None)?;
    checked.flags.extend(run.check_seals(true, None)?);
    let counts = join(&m, crc, &map, debug);
    if counts.pcs.is_empty() {
        // Every kernel executes its first instruction: no record at all is CUPTI's failure to
        // patch this launch, not the kernel's choice. No proof, and not the student's doing.
        return Ok(Measured::Error(format!(
            "CUPTI's SASS metrics recorded no instruction of the launched kernel ({} record(s) in all), so its executions could not be counted",
            m.records.len()
        )));
    }
    Ok(Measured::Ran {
        flags: checked.flags,
        summary: checked.summary,
        counts: Counts::Sass(counts),
    })
}

fn run_limit(job: &Job) -> Duration {
    Duration::from_secs(job.launch_seconds)
}

/// CUPTI's records of the launched cubin, each joined to its instruction; everything else
/// (another module's, an offset the listing lacks) is counted in the debug file and dropped.
fn join(
    m: &Measurement,
    crc: u64,
    map: &[common::sass::Instruction],
    debug: &mut String,
) -> SassCounts {
    let _ = writeln!(
        debug,
        "chip {}, metrics {:?}, {} instance(s) per value, {} record(s), {} dropped, {} value(s) of unknown metrics",
        m.chip,
        m.metric_ids,
        m.instances,
        m.records.len(),
        m.dropped_records,
        m.unknown_values
    );
    let _ = writeln!(debug, "first records, raw:");
    for r in m.records.iter().take(12) {
        let _ = writeln!(
            debug,
            "  crc {:#x} fn#{} {} +{:#x} {:?}",
            r.cubin_crc, r.function_index, r.function, r.pc_offset, r.values
        );
    }
    let by_place: BTreeMap<(&str, u32), &common::sass::Instruction> = map
        .iter()
        .map(|i| ((i.function.as_str(), i.offset), i))
        .collect();
    let ours = |r: &cupti::PcRecord| u64::from(r.cubin_crc) == crc || r.cubin_crc == crc as u32;
    // The only module launched while counting is the submission's (its inputs and reference
    // were made before, and a kernel cannot load a module): where no record carries the CRC
    // CUPTI computed for its cubin, its records are told by their function's name instead.
    let by_crc = m.records.iter().any(ours);
    if !by_crc && !m.records.is_empty() {
        let _ = writeln!(
            debug,
            "no record carries the cubin's CRC: records matched by function name alone"
        );
    }
    let (mut other, mut unmatched) = (0usize, 0usize);
    let mut pcs: Vec<PcCount> = Vec::new();
    for r in &m.records {
        if by_crc && !ours(r) {
            other += 1;
            continue;
        }
        let Some(i) = by_place.get(&(r.function.as_str(), r.pc_offset)) else {
            unmatched += 1;
            if unmatched <= 8 {
                let _ = writeln!(
                    debug,
                    "  unmatched: {} +{:#x} {:?}",
                    r.function, r.pc_offset, r.values
                );
            }
            continue;
        };
        let v = |name: &str| r.values.get(name).copied().unwrap_or(0);
        let pc = PcCount {
            function: i.function.clone(),
            offset: i.offset,
            op: i.op.clone(),
            guard: i.guard.clone(),
            warp: v(cupti::INST_EXECUTED),
            threads: v(cupti::THREAD_INST_EXECUTED),
            pred_on: v(cupti::THREAD_INST_EXECUTED_PRED_ON),
        };
        // One record per instruction and metric, or per instruction: merge either way.
        match pcs
            .iter_mut()
            .find(|q| q.function == pc.function && q.offset == pc.offset)
        {
            Some(q) => {
                q.warp += pc.warp;
                q.threads += pc.threads;
                q.pred_on += pc.pred_on;
            }
            None => pcs.push(pc),
        }
    }
    pcs.sort_by(|a, b| (&a.function, a.offset).cmp(&(&b.function, b.offset)));
    let _ = writeln!(
        debug,
        "{} record(s) of other cubins, {} of this cubin at no instruction of {ENTRY} or its callees, {} instruction(s) counted",
        other,
        unmatched,
        pcs.len()
    );
    // By opcode: what a requirement sums.
    let mut ops: BTreeMap<&str, (u64, u64, u64, u64, u64, usize)> = BTreeMap::new();
    for pc in &pcs {
        let e = ops.entry(pc.op.as_str()).or_default();
        e.0 += pc.warp;
        e.1 += pc.threads;
        e.2 += pc.pred_on;
        e.3 += pc.proven();
        e.4 += pc.possible();
        e.5 += 1;
    }
    let _ = writeln!(
        debug,
        "\nby opcode: instructions, warp-executions, thread-executions, predicated-on, proven, possible"
    );
    for (op, (w, t, p, lo, hi, n)) in &ops {
        let _ = writeln!(
            debug,
            "  {op:<40} {n:>4} {w:>10} {t:>12} {p:>12} {lo:>10} {hi:>10}"
        );
    }
    let _ = writeln!(
        debug,
        "\nevery instruction that executed (function +offset op [guard]: warp threads pred_on -> proven..possible):"
    );
    for pc in pcs.iter().filter(|pc| pc.warp > 0 || pc.threads > 0) {
        let _ = writeln!(
            debug,
            "  {} +{:#06x} {} [{}]: {} {} {} -> {}..{}{}",
            pc.function,
            pc.offset,
            pc.op,
            pc.guard.as_deref().unwrap_or(""),
            pc.warp,
            pc.threads,
            pc.pred_on,
            pc.proven(),
            pc.possible(),
            if pc.guard.is_some() && !pc.consistent() {
                "  INCONSISTENT"
            } else {
                ""
            }
        );
    }
    SassCounts {
        source: format!(
            "CUPTI SASS metrics on {} (API version {})",
            m.chip, m.api_version
        ),
        pcs,
    }
}
