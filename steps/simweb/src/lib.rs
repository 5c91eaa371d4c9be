//! The simulator in the HTML book. `runner book` builds this crate for
//! `wasm32-unknown-unknown` and ships it with the book's widgets (`book/widgets/`), which call
//! it from a Web Worker through the byte-buffer ABI of [`ffi`]: JSON in, JSON out.
//!
//! - [`run`]: one launch of a step's kernel from its sm_100a PTX (generated when the book was
//!   built, or served by `runner book --serve` from the reader's `--kernel`) on fresh inputs,
//!   verified against an fp64 reference computed here, or stopped by a rule, a deadlock or a
//!   fault; with the first cluster's event trace (`sim::trace_events`, the ring player's
//!   input).
//! - [`layouts`]: the 128-byte swizzle of a tile (a TMA load of the simulator's own tensor-map
//!   unit), the shared-memory and instruction descriptors decoded field by field, and which
//!   warp may reach which tensor-memory lanes, each computed by the simulator's units.
//!
//! The launch description ([`LaunchSpec`]) is what the GPU harness would launch (grid, block,
//! cluster, shared memory, the tensor maps' boxes): `runner book` writes it from the step's
//! plan, so the page launches exactly what `runner step N --sim` launches.

pub mod ffi;

use serde::Deserialize;
use serde_json::{json, Value};
use sim::units::descriptors as desc;
use sim::units::tensormap::{
    TensorMapDesc, TmaDtype, TmaInterleave, TmaL2Promotion, TmaOobFill, TmaSwizzle,
};
use sim::{Device, Launch, Param, Program};

/// One launch as the harness makes it (`common::simulate::sim_launch`).
#[derive(Debug, Clone, Deserialize)]
pub struct LaunchSpec {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub cluster: [u32; 3],
    pub smem: u32,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// "f16" or "bf16".
    pub dtype: String,
    /// Box of A's and B's tensor maps (rows, columns).
    pub a_box: [u32; 2],
    pub b_box: [u32; 2],
    /// C by tensor map with this box; None: C by pointer.
    pub c_box: Option<[u32; 2]>,
}

/// What the page asks [`run`] for.
#[derive(Debug, Clone, Deserialize)]
pub struct RunRequest {
    pub ptx: String,
    pub launch: LaunchSpec,
    /// (path suffix, text) of the kernel's sources: barrier names and source lines.
    #[serde(default)]
    pub sources: Vec<(String, String)>,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default = "random")]
    pub policy: String,
    /// Seed of the inputs.
    #[serde(default = "one")]
    pub data_seed: u64,
    #[serde(default = "yes")]
    pub trace: bool,
    /// Extra `otherData` fields of the trace (step, bug...), as JSON.
    #[serde(default)]
    pub label: Value,
}

fn one() -> u64 {
    1
}
fn random() -> String {
    "random".into()
}
fn yes() -> bool {
    true
}

/// splitmix64, for the inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn to_bits(bf16: bool, x: f32) -> u16 {
    if bf16 {
        half::bf16::from_f32(x).to_bits()
    } else {
        half::f16::from_f32(x).to_bits()
    }
}

fn from_bits(bf16: bool, b: u16) -> f32 {
    if bf16 {
        half::bf16::from_bits(b).to_f32()
    } else {
        half::f16::from_bits(b).to_f32()
    }
}

/// The workbook's 2D tensor map over a row-major `rows x cols` matrix (`common::gpu::
/// TensorMap2d`: the 128-byte swizzle, 256-byte L2 promotion, no OOB fill).
fn tensor_map(
    base: u64,
    bf16: bool,
    rows: usize,
    cols: usize,
    bx: [u32; 2],
) -> Result<TensorMapDesc, String> {
    TensorMapDesc::encode_tiled(
        if bf16 { TmaDtype::Bf16 } else { TmaDtype::F16 },
        2,
        base,
        &[cols as u64, rows as u64],
        &[cols as u64 * 2],
        &[bx[1], bx[0]],
        &[1, 1],
        TmaInterleave::None,
        TmaSwizzle::B128,
        TmaL2Promotion::B256,
        TmaOobFill::None,
    )
    .map_err(|e| format!("tensor map: {e}"))
}

/// Run the request; the answer is JSON (`verdict`: PASS, FAIL, or the stop's kind).
pub fn run(req: &RunRequest) -> Value {
    match run_inner(req) {
        Ok(v) => v,
        Err(e) => json!({"verdict": "error", "message": e}),
    }
}

fn run_inner(req: &RunRequest) -> Result<Value, String> {
    let l = &req.launch;
    let bf16 = match l.dtype.as_str() {
        "bf16" => true,
        "f16" => false,
        other => return Err(format!("dtype {other}: f16 or bf16")),
    };
    if l.m * l.n * l.k > 1 << 28 || l.m == 0 || l.n == 0 || l.k == 0 {
        return Err(format!(
            "{}x{}x{}: the page runs shapes up to 2^28 multiply-adds",
            l.m, l.n, l.k
        ));
    }
    let policy: sim::Policy = req.policy.parse()?;
    let prog = match Program::parse(&req.ptx) {
        Ok(p) => p,
        Err(e) => return Ok(stop_json(&e)),
    };
    let mut rng = Rng(req.data_seed ^ 0x5EED);
    let a: Vec<u16> = (0..l.m * l.k).map(|_| to_bits(bf16, rng.unit())).collect();
    let b: Vec<u16> = (0..l.n * l.k).map(|_| to_bits(bf16, rng.unit())).collect();
    let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut dev = Device::new();
    let pa = dev.alloc(a.len() as u64 * 2);
    let pb = dev.alloc(b.len() as u64 * 2);
    let pc = dev.alloc((l.m * l.n) as u64 * 2);
    dev.write(pa, &bytes(&a));
    dev.write(pb, &bytes(&b));
    // C poisoned with NaN: an element the kernel never writes fails.
    dev.write(pc, &vec![0xFF; l.m * l.n * 2]);
    let out = match l.c_box {
        None => Param::U64(pc),
        Some(bx) => Param::TensorMap(tensor_map(pc, bf16, l.m, l.n, bx)?),
    };
    let launch = Launch {
        kernel: "gemm_kernel".into(),
        grid: l.grid,
        block: l.block,
        cluster: l.cluster,
        dynamic_smem: l.smem,
        params: vec![
            Param::TensorMap(tensor_map(pa, bf16, l.m, l.k, l.a_box)?),
            Param::TensorMap(tensor_map(pb, bf16, l.n, l.k, l.b_box)?),
            out,
            Param::U32(l.m as u32),
            Param::U32(l.n as u32),
            Param::U32(l.k as u32),
        ],
        barrier_names: Vec::new(),
        sources: req.sources.clone(),
    };
    let sink = req.trace.then(sim::trace_events::sink);
    let o = sim::Options {
        seed: req.seed,
        policy,
        events: sink.clone(),
        ..sim::Options::default()
    };
    let r = sim::run(&prog, &mut dev, &launch, &o);
    let mut v = match &r {
        Ok(rep) => {
            let mut c = vec![0u8; l.m * l.n * 2];
            dev.read(pc, &mut c);
            let got: Vec<f32> = c
                .chunks_exact(2)
                .map(|x| from_bits(bf16, u16::from_le_bytes([x[0], x[1]])))
                .collect();
            let mut v = check(&a, &b, &got, l, bf16);
            v["instructions"] = rep.instructions.into();
            v["steps"] = rep.steps.into();
            v
        }
        Err(e) => stop_json(e),
    };
    v["seed"] = req.seed.into();
    v["policy"] = policy.name().into();
    if let Some(s) = sink {
        let mut other = format!(
            r#""seed":{},"policy":{},"verdict":{}"#,
            req.seed,
            json!(policy.name()),
            v["verdict"]
        );
        if let Value::Object(o) = &req.label {
            for (k, x) in o {
                other.push_str(&format!(",{}:{x}", json!(k)));
            }
        }
        let text = sim::trace_events::finish(&s, r.as_ref().err(), &other);
        v["trace"] = serde_json::from_str(&text).map_err(|e| format!("trace: {e}"))?;
    }
    Ok(v)
}

/// A stop as JSON: kind, rule, message, lines.
fn stop_json(e: &sim::SimError) -> Value {
    use sim::SimError as E;
    let (kind, rule, lines) = match e {
        E::Rule {
            rule,
            ptx_line,
            source_line,
            ..
        } => ("rule", Some(*rule), Some((*ptx_line, *source_line))),
        E::Deadlock { .. } => ("deadlock", None, None),
        E::Unsupported { ptx_line, .. } => ("unsupported", None, Some((*ptx_line, 0))),
        E::Fault {
            ptx_line,
            source_line,
            ..
        } => ("fault", None, Some((*ptx_line, *source_line))),
        E::StepLimit { .. } => ("step-limit", None, None),
        E::Deadline { .. } => ("deadline", None, None),
        E::Launch(_) => ("launch", None, None),
        E::Parse { ptx_line, .. } => ("parse", None, Some((*ptx_line, 0))),
        E::Assert(a) => ("assert", None, Some((a.ptx_line, a.source_line))),
    };
    let mut v = json!({"verdict": kind, "message": e.to_string()});
    if let Some(r) = rule {
        v["rule"] = r.into();
    }
    if let Some((p, s)) = lines {
        v["ptx_line"] = p.into();
        v["source_line"] = s.into();
    }
    v
}

/// C against the fp64 reference, with the workbook's tolerance (`common::verify`: the output
/// rounded once, twice the unit roundoff per element and as the norm's bound).
/// An fp64 dot product with four running sums: not one chain of dependent adds, so the
/// reference of a step's whole C costs little of a run in the page (the order changes the
/// fp64 result far below the f16 tolerance it is checked at).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = [0f64; 4];
    let (a4, b4) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = a4
        .remainder()
        .iter()
        .zip(b4.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a4.zip(b4) {
        for ((s, x), y) in s.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    (s[0] + s[1]) + (s[2] + s[3]) + tail
}

fn check(a: &[u16], b: &[u16], got: &[f32], l: &LaunchSpec, bf16: bool) -> Value {
    let u = if bf16 { 2f64.powi(-8) } else { 2f64.powi(-11) };
    let af: Vec<f64> = a.iter().map(|&x| from_bits(bf16, x) as f64).collect();
    let bf: Vec<f64> = b.iter().map(|&x| from_bits(bf16, x) as f64).collect();
    let mut reference = vec![0f64; l.m * l.n];
    for i in 0..l.m {
        let ar = &af[i * l.k..(i + 1) * l.k];
        for j in 0..l.n {
            let br = &bf[j * l.k..(j + 1) * l.k];
            reference[i * l.n + j] = dot(ar, br);
        }
    }
    let ref_sq: f64 = reference.iter().map(|r| r * r).sum();
    let rms = (ref_sq / reference.len() as f64)
        .sqrt()
        .max(f64::MIN_POSITIVE);
    let atol = 2.0 * u * rms;
    let (mut nan, mut bad, mut err_sq, mut max_abs) = (0usize, 0usize, 0f64, 0f64);
    let mut first_bad = Value::Null;
    for (idx, (&g, &r)) in got.iter().zip(&reference).enumerate() {
        let g = g as f64;
        let err = (g - r).abs();
        if g.is_nan() {
            nan += 1;
        } else {
            err_sq += err * err;
            max_abs = max_abs.max(err);
        }
        if !g.is_finite() || err > 2.0 * u * r.abs() + atol {
            bad += 1;
            if first_bad.is_null() {
                first_bad = json!({"row": idx / l.n, "col": idx % l.n, "got": if g.is_finite() { json!(g) } else { json!("NaN") }, "expected": r});
            }
        }
    }
    let norm = if nan > 0 {
        f64::NAN
    } else {
        (err_sq / ref_sq.max(f64::MIN_POSITIVE)).sqrt()
    };
    let pass = nan == 0 && bad == 0 && norm <= u;
    json!({
        "verdict": if pass { "PASS" } else { "FAIL" },
        "elements": got.len(),
        "wrong": bad,
        "unwritten": nan,
        "rel_error_norm": if norm.is_finite() { json!(norm) } else { json!("NaN") },
        "limit": u,
        "max_abs_error": max_abs,
        "first_wrong": first_bad,
        "message": if pass {
            format!("PASS: {} elements within the fp64 reference's tolerance (rel. error norm {norm:.2e}, limit {u:.1e})", got.len())
        } else {
            format!("FAIL: {bad} of {} elements wrong ({nan} unwritten)", got.len())
        },
    })
}

/// The layouts the book's Layouts widget draws, computed by the simulator's units.
pub fn layouts(req: &Value) -> Value {
    let rows = req["rows"].as_u64().unwrap_or(8).clamp(1, 64) as usize;
    let n = req["n"].as_u64().unwrap_or(256) as u32;
    let bf16 = req["dtype"].as_str() == Some("bf16");
    let smem_addr = req["smem_addr"].as_u64().unwrap_or(0x400) as u32;
    // 1. The swizzle: a TMA load (the simulator's tensor-map unit) of a box of `rows` 128-byte
    // rows whose 16-byte chunk (r, c) holds the number r * 8 + c; where each chunk lands.
    let swizzle = (|| -> Result<Value, String> {
        let cols = 64usize; // 64 16-bit elements: one 128-byte row
        let mut g = vec![0u8; rows * cols * 2];
        for r in 0..rows {
            for c in 0..cols {
                let v = (r * 8 + c / 8) as u16;
                g[(r * cols + c) * 2..(r * cols + c) * 2 + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        let map = tensor_map(0x1000, false, rows, cols, [rows as u32, cols as u32])?;
        let mut smem = vec![0u8; rows * 128];
        let mut read = |addr: u64, out: &mut [u8]| {
            let off = (addr - 0x1000) as usize;
            match g.get(off..off + out.len()) {
                Some(s) => {
                    out.copy_from_slice(s);
                    true
                }
                None => false,
            }
        };
        map.load_box(&[0, 0], &mut read, &mut smem)
            .map_err(|e| e.to_string())?;
        // physical[r][p] = the logical chunk of row r stored at physical chunk p.
        let physical: Vec<Vec<u16>> = (0..rows)
            .map(|r| {
                (0..8)
                    .map(|p| {
                        let o = r * 128 + p * 16;
                        u16::from_le_bytes([smem[o], smem[o + 1]]) % 8
                    })
                    .collect()
            })
            .collect();
        Ok(json!({"rows": rows, "physical": physical}))
    })()
    .unwrap_or_else(|e| json!({"error": e}));
    // 2. The descriptors the kernels build, decoded by the simulator's own decoders.
    let sd = desc::make_smem_desc_sw128(smem_addr, 1024);
    let s = desc::decode_smem_desc(sd);
    let idesc = desc::make_idesc_f16(128, n, bf16);
    let i = desc::decode_idesc(idesc);
    let smem_desc = json!({
        "value": format!("{sd:#018x}"),
        "fields": [
            ["start address (bits 0-13, >>4)", s.start_address],
            ["leading byte offset (bits 16-29, >>4)", s.lbo],
            ["stride byte offset (bits 32-45, >>4)", s.sbo],
            ["version (bits 46-47)", s.version],
            ["base offset (bits 49-51)", s.base_offset],
            ["LBO mode (bit 52)", s.lbo_mode],
            ["swizzle (bits 61-63; 2 = 128-byte)", s.swizzle],
        ],
    });
    let instr_desc = json!({
        "value": format!("{idesc:#010x}"),
        "fields": [
            ["D format (bits 4-5; 1 = f32)", i.d_format],
            ["A format (bits 7-9; 0 = f16, 1 = bf16)", i.a_format],
            ["B format (bits 10-12)", i.b_format],
            ["negate A (bit 13)", i.negate_a],
            ["negate B (bit 14)", i.negate_b],
            ["A major (bit 15; 0 = K-major)", i.a_major],
            ["B major (bit 16)", i.b_major],
            ["N (bits 17-22, >>3)", i.n],
            ["M (bits 24-28, >>4)", i.m],
        ],
    });
    // 3. Lane quarters: which warp of a warpgroup may tcgen05.ld which 32 lanes (the tensor
    // memory unit's own access check).
    let mut tm = sim::units::tmem::TensorMemory::new();
    let quarters = match tm.alloc(32) {
        Ok(col) => (0..4u32)
            .map(|w| {
                (0..4u32)
                    .map(|q| {
                        let addr = sim::units::tmem::taddr(32 * q, col);
                        match tm.ld_32x32b(w, 0, addr, 1) {
                            Ok(_) => json!({"ok": true}),
                            Err(e) => json!({"ok": false, "why": e.to_string()}),
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>(),
        Err(e) => vec![vec![json!({"ok": false, "why": e.to_string()})]],
    };
    json!({"swizzle": swizzle, "smem_desc": smem_desc, "instr_desc": instr_desc, "tmem_quarters": quarters})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swizzle_permutes_chunks_by_row() {
        let v = layouts(&json!({"rows": 8}));
        let p = &v["swizzle"]["physical"];
        // Row 0 is in place; row r's chunk c sits at c ^ r (PTX ISA "Tensor Swizzling Modes").
        for r in 0..8u64 {
            for c in 0..8u64 {
                assert_eq!(p[r as usize][(c ^ r) as usize], c, "row {r} chunk {c}");
            }
        }
        let q = &v["tmem_quarters"];
        assert_eq!(q[1][1]["ok"], true);
        assert_eq!(q[1][0]["ok"], false);
        assert_eq!(v["instr_desc"]["fields"][7][1], 256);
    }

    #[test]
    fn bad_requests_are_errors_not_panics() {
        let r: RunRequest = serde_json::from_value(json!({
            "ptx": "not ptx",
            "launch": {"grid":[1,1,1],"block":[128,1,1],"cluster":[1,1,1],"smem":0,"m":128,"n":128,"k":64,
                       "dtype":"f16","a_box":[128,64],"b_box":[128,64],"c_box":null}
        }))
        .unwrap();
        let v = run(&r);
        assert!(
            matches!(v["verdict"].as_str(), Some("parse" | "unsupported")),
            "{v}"
        );
        let mut r2 = r.clone();
        r2.launch.dtype = "f8".into();
        assert_eq!(run(&r2)["verdict"], "error");
    }
}
