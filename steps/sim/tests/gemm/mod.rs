//! Host side of a simulated GEMM: the problem (random A and B, an fp64 reference), the tensor
//! maps as `common::gpu::tensor_map_2d` encodes them, and the launch as
//! `common::step::KernelShape::{blackwell, plan}` computes it. Kept free of the test harness so
//! the runner's simulator backend can take it over as it is.

#![allow(dead_code)]

use sim::units::tensormap::{
    TensorMapDesc, TmaDtype, TmaInterleave, TmaL2Promotion, TmaOobFill, TmaSwizzle,
};
use sim::{Device, Launch, Options, Param, Policy, Program, RunReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F16,
    Bf16,
}

/// What the host knows about a step's Blackwell kernel: `BlackwellLaunch` and the `BLACKWELL`
/// tuning parameters of `steps/stepN_*/src/lib.rs`.
#[derive(Debug, Clone, Copy)]
pub struct StepFacts {
    pub number: u32,
    pub cluster: u32,
    pub threads: u32,
    pub persistent: bool,
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    /// 0: C is stored from registers through a pointer; else the width of the TMA-stored
    /// sub-tiles of C.
    pub epilogue_tile_n: u32,
}

pub fn facts(step: u32) -> StepFacts {
    let (cluster, threads, persistent, tile_n, epi) = match step {
        0 | 1 => (1, 128, false, 256, 0),
        2 => (1, 128, false, 256, 64),
        3 => (2, 128, false, 128, 64),
        4 => (2, 128, true, 128, 64),
        _ => (2, 256, true, 128, 64),
    };
    StepFacts {
        number: step,
        cluster,
        threads,
        persistent,
        tile_m: 128,
        tile_n,
        tile_k: 64,
        stages: 4,
        epilogue_tile_n: epi,
    }
}

impl StepFacts {
    /// `common::step::ring_smem_bytes` with the staging buffers of `KernelShape::blackwell`.
    pub fn smem_bytes(&self) -> u32 {
        let staging = 4 * 2 * 32 * self.epilogue_tile_n * 2;
        self.stages * (self.tile_m + self.tile_n) * self.tile_k * 2 + staging + 1024 + 1024
    }
    pub fn cluster_tile(&self) -> (u32, u32) {
        (self.cluster * self.tile_m, self.cluster * self.tile_n)
    }
    /// `KernelShape::plan`: grid for an m x n problem, at most `max_clusters` clusters for a
    /// persistent kernel.
    pub fn grid(&self, m: u32, n: u32, max_clusters: u32) -> [u32; 3] {
        let (cm, cn) = self.cluster_tile();
        let (tm, tn) = (m / cm, n / cn);
        if self.persistent {
            [(tm * tn).min(max_clusters).max(1) * self.cluster, 1, 1]
        } else {
            [tn * self.cluster, tm, 1]
        }
    }
}

/// splitmix64 for the inputs.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn to_bits(x: f32, d: Dtype) -> u16 {
    match d {
        Dtype::F16 => half::f16::from_f32(x).to_bits(),
        Dtype::Bf16 => half::bf16::from_f32(x).to_bits(),
    }
}

fn from_bits(b: u16, d: Dtype) -> f64 {
    match d {
        Dtype::F16 => half::f16::from_bits(b).to_f64(),
        Dtype::Bf16 => half::bf16::from_bits(b).to_f64(),
    }
}

/// `common::gpu::tensor_map_2d`: a row-major rows x cols matrix of 16-bit elements, a
/// box_rows x box_cols box, 128-byte swizzle.
pub fn tensor_map_2d(
    base: u64,
    d: Dtype,
    rows: u32,
    cols: u32,
    box_rows: u32,
    box_cols: u32,
) -> Result<TensorMapDesc, String> {
    TensorMapDesc::encode_tiled(
        match d {
            Dtype::F16 => TmaDtype::F16,
            Dtype::Bf16 => TmaDtype::Bf16,
        },
        2,
        base,
        &[cols as u64, rows as u64],
        &[cols as u64 * 2],
        &[box_cols, box_rows],
        &[1, 1],
        TmaInterleave::None,
        TmaSwizzle::B128,
        TmaL2Promotion::B256,
        TmaOobFill::None,
    )
    .map_err(|e| e.to_string())
}

/// (elements outside the tolerance, worst error, first bad element: row, column, got, want).
pub type Verdict = (usize, f64, Option<(u32, u32, f64, f64)>);

#[derive(Debug, Clone)]
pub struct Outcome {
    pub report: RunReport,
    /// Elements outside the tolerance (0: verified), and the worst error.
    pub bad: usize,
    pub max_err: f64,
    pub first_bad: Option<(u32, u32, f64, f64)>,
}

pub struct Problem {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub dtype: Dtype,
    pub dev: Device,
    pub a: Vec<u16>,
    pub b: Vec<u16>,
    pub a_addr: u64,
    pub b_addr: u64,
    pub c_addr: u64,
}

impl Problem {
    pub fn new(m: u32, n: u32, k: u32, dtype: Dtype, seed: u64) -> Problem {
        let mut r = Lcg(seed);
        let a: Vec<u16> = (0..m * k).map(|_| to_bits(r.unit(), dtype)).collect();
        let b: Vec<u16> = (0..n * k).map(|_| to_bits(r.unit(), dtype)).collect();
        let mut dev = Device::new();
        let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let a_addr = dev.alloc(a.len() as u64 * 2);
        let b_addr = dev.alloc(b.len() as u64 * 2);
        let c_addr = dev.alloc(m as u64 * n as u64 * 2);
        dev.write(a_addr, &bytes(&a));
        dev.write(b_addr, &bytes(&b));
        // C starts as NaN: a tile the kernel never writes cannot pass.
        let nan = to_bits(f32::NAN, dtype).to_le_bytes();
        let cinit: Vec<u8> = (0..m * n).flat_map(|_| nan).collect();
        dev.write(c_addr, &cinit);
        Problem {
            m,
            n,
            k,
            dtype,
            dev,
            a,
            b,
            a_addr,
            b_addr,
            c_addr,
        }
    }

    pub fn launch(&self, f: &StepFacts, max_clusters: u32) -> Result<Launch, String> {
        let (cm, cn) = f.cluster_tile();
        if !self.m.is_multiple_of(cm)
            || !self.n.is_multiple_of(cn)
            || !self.k.is_multiple_of(f.tile_k)
        {
            return Err(format!(
                "step {} needs M a multiple of {cm}, N of {cn}, K of {}",
                f.number, f.tile_k
            ));
        }
        let d = self.dtype;
        let ta = tensor_map_2d(self.a_addr, d, self.m, self.k, f.tile_m, f.tile_k)?;
        let tb = tensor_map_2d(self.b_addr, d, self.n, self.k, f.tile_n, f.tile_k)?;
        let c = if f.epilogue_tile_n == 0 {
            Param::U64(self.c_addr)
        } else {
            Param::TensorMap(tensor_map_2d(
                self.c_addr,
                d,
                self.m,
                self.n,
                32,
                f.epilogue_tile_n,
            )?)
        };
        Ok(Launch {
            kernel: "gemm_kernel".into(),
            grid: f.grid(self.m, self.n, max_clusters),
            block: [f.threads, 1, 1],
            cluster: [f.cluster, 1, 1],
            dynamic_smem: f.smem_bytes(),
            params: vec![
                Param::TensorMap(ta),
                Param::TensorMap(tb),
                c,
                Param::U32(self.m),
                Param::U32(self.n),
                Param::U32(self.k),
            ],
            barrier_names: Vec::new(),
            sources: vec![("kernel.cu".into(), kernel_source(f.number))],
        })
    }

    /// Compare C in `dev` with the fp64 reference.
    pub fn verify(&self, dev: &Device) -> Verdict {
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let mut c = vec![0u8; m * n * 2];
        dev.read(self.c_addr, &mut c);
        let af: Vec<f64> = self.a.iter().map(|&x| from_bits(x, self.dtype)).collect();
        let bf: Vec<f64> = self.b.iter().map(|&x| from_bits(x, self.dtype)).collect();
        let tol_rel = match self.dtype {
            Dtype::F16 => 2e-3,
            Dtype::Bf16 => 1.6e-2,
        };
        let mut bad = 0;
        let mut max_err = 0.0f64;
        let mut first = None;
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += af[i * k + p] * bf[j * k + p];
                }
                let got = from_bits(
                    u16::from_le_bytes([c[2 * (i * n + j)], c[2 * (i * n + j) + 1]]),
                    self.dtype,
                );
                let err = (got - s).abs();
                let tol = tol_rel * (s.abs() + (k as f64).sqrt() * 0.1);
                if err.is_nan() || err > tol {
                    bad += 1;
                    if first.is_none() {
                        first = Some((i as u32, j as u32, got, s));
                    }
                }
                if err > max_err || err.is_nan() {
                    max_err = if err.is_nan() { f64::INFINITY } else { err };
                }
            }
        }
        (bad, max_err, first)
    }
}

/// Simulate step `f`'s kernel from `ptx` on an m x n x k problem and verify it.
#[allow(clippy::too_many_arguments)]
pub fn simulate_gemm(
    ptx: &str,
    f: &StepFacts,
    m: u32,
    n: u32,
    k: u32,
    dtype: Dtype,
    seed: u64,
    policy: Policy,
    max_clusters: u32,
) -> Result<Outcome, String> {
    let prog = Program::parse(ptx).map_err(|e| e.to_string())?;
    let mut p = Problem::new(m, n, k, dtype, seed);
    let l = p.launch(f, max_clusters)?;
    let o = Options {
        seed,
        policy,
        ..Options::default()
    };
    let mut dev = std::mem::take(&mut p.dev);
    let report = sim::run(&prog, &mut dev, &l, &o).map_err(|e| e.to_string())?;
    let (bad, max_err, first_bad) = p.verify(&dev);
    Ok(Outcome {
        report,
        bad,
        max_err,
        first_bad,
    })
}

/// The step's Blackwell kernel source, for naming barriers in hang reports.
pub fn kernel_source(step: u32) -> String {
    let dir = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|entries| {
            entries.flatten().find(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("step{step}_"))
            })
        })
        .and_then(|e| std::fs::read_to_string(e.path().join("src/kernel.cu")).ok())
        .unwrap_or_default()
}

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/ptx/{name}.ptx", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Apply a `diff` (normal format: `NaR,S`, `N,McR,S`, `N,MdR`) of `base` made by
/// `diff base new`: the seeded bugs' PTX is kept as its difference from the stock kernel's.
pub fn apply_diff(base: &str, diff: &str) -> Result<String, String> {
    let old: Vec<&str> = base.lines().collect();
    let mut out: Vec<&str> = Vec::new();
    let mut next = 0usize; // first old line (0-based) not yet copied
    let range = |s: &str| -> Result<(usize, usize), String> {
        let (a, b) = s.split_once(',').unwrap_or((s, s));
        let p = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("bad diff range {s}"))
        };
        Ok((p(a)?, p(b)?))
    };
    let mut lines = diff.lines().peekable();
    while let Some(cmd) = lines.next() {
        let pos = cmd
            .find(['a', 'c', 'd'])
            .ok_or_else(|| format!("bad diff command {cmd}"))?;
        let (l, kind) = (range(&cmd[..pos])?, &cmd[pos..pos + 1]);
        // Lines up to the change stay.
        let keep_to = if kind == "a" { l.0 } else { l.0 - 1 };
        if keep_to < next || keep_to > old.len() {
            return Err(format!("diff command {cmd} out of order"));
        }
        out.extend(&old[next..keep_to]);
        next = if kind == "a" { l.0 } else { l.1 };
        while let Some(x) = lines.peek() {
            if let Some(t) = x.strip_prefix("> ") {
                out.push(t);
            } else if *x == ">" {
                out.push("");
            } else if !(x.starts_with("< ") || *x == "<" || *x == "---") {
                break;
            }
            lines.next();
        }
    }
    out.extend(&old[next.min(old.len())..]);
    Ok(out.join("\n") + "\n")
}

/// The PTX of seeded bug `name` for `step`: from `SIM_MUTANT_PTX` (files `mut-NAME.stepN.ptx`
/// made by `runner inspect N --ptx --mutate NAME`) when set, else from the committed
/// difference to the stock f16 kernel (`tests/ptx/mut/NAME.stepN.diff`).
pub fn mutant(name: &str, step: u32) -> Option<String> {
    if let Ok(dir) = std::env::var("SIM_MUTANT_PTX") {
        return std::fs::read_to_string(format!("{dir}/mut-{name}.step{step}.ptx")).ok();
    }
    let path = format!(
        "{}/tests/ptx/mut/{name}.step{step}.diff",
        env!("CARGO_MANIFEST_DIR")
    );
    let diff = std::fs::read_to_string(path).ok()?;
    Some(apply_diff(&fixture(&format!("step{step}.f16")), &diff).expect("a committed diff applies"))
}
