//! The simulator in the HTML book: what `runner book` adds to the built book for the widgets
//! (`book/widgets/`): the simulator compiled to WebAssembly (`steps/simweb`), the widgets'
//! JavaScript and CSS, and for every step the sm_100a PTX of its kernel and of each seeded bug
//! with the launch `runner step N --sim` makes, as static files. The page needs no network.
//!
//! A chapter embeds a step's widgets with the marker `{{#sim-widget N}}` ([`marker`]): a
//! runner, a ring player, the step's seeded bugs and (with `layouts`) the layouts figure; the
//! committed trace figure stays as the fallback without JavaScript.

use anyhow::{anyhow, bail, Context, Result};
use common::compile::{KernelSource, Target};
use common::mutation::MUTATIONS;
use common::problem::Dtype;
use common::simulate::{default_shape, DEFAULT_CLUSTERS};
use common::step::{Arch, KernelSpec, OutputArg};
use common::toolkit::project_root;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The widgets' sources in the repository.
const SOURCES: &str = "book/widgets";
/// Files of [`SOURCES`] copied into the book.
const FILES: &[&str] = &[
    "sim-widget.js",
    "sim-worker.js",
    "sim-widget.css",
    "player.js",
];

/// The chapter marker: `{{#sim-widget N}}` or `{{#sim-widget N layouts}}`.
pub fn marker(spec: &str, html: bool) -> Result<String> {
    let mut words = spec.split_whitespace();
    let n: u32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| anyhow!("sim-widget needs a step number, e.g. {{{{#sim-widget 3}}}}"))?;
    let layouts = words.any(|w| w == "layouts");
    if !html {
        return Ok(format!(
            "(The HTML book runs step {n}'s kernel here in the simulator, with its ring player and its seeded bugs.)"
        ));
    }
    Ok(format!(
        r#"<div class="wb-sim" data-step="{n}"{}><noscript>The simulator widget needs JavaScript; the figure above shows a recorded run.</noscript></div>
<link rel="stylesheet" href="widgets/sim-widget.css">
<script src="widgets/player.js"></script>
<script src="widgets/sim-widget.js"></script>"#,
        if layouts { r#" data-layouts="1""# } else { "" }
    ))
}

/// Build the WebAssembly module (cargo, offline once the registry is warm) and return it.
fn build_wasm() -> Result<PathBuf> {
    let root = project_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(&cargo)
        .current_dir(&root)
        .args([
            "build",
            "-p",
            "simweb",
            "--target",
            "wasm32-unknown-unknown",
            // Cargo.toml's `wasm` profile: release with LTO and one codegen unit.
            "--profile",
            "wasm",
            "--quiet",
        ])
        .output()
        .with_context(|| format!("cannot run {cargo} to build the simulator for the book"))?;
    if !out.status.success() {
        bail!(
            "cannot build the simulator for the book (cargo build -p simweb --target wasm32-unknown-unknown --profile wasm; `rustup target add wasm32-unknown-unknown` if the target is missing):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let wasm = target.join("wasm32-unknown-unknown/wasm/simweb.wasm");
    if !wasm.is_file() {
        bail!("the simulator's build left no {}", wasm.display());
    }
    Ok(wasm)
}

/// One kernel for the page: its PTX, its launch, its sources.
pub(super) fn bundle(spec: &KernelSpec, source: &KernelSource, extra: Value) -> Result<Value> {
    let k = spec.shape();
    let shape = default_shape(&k);
    let plan = k.plan(shape, DEFAULT_CLUSTERS);
    let ptx = super::ptx_cache::ptx(source, Target::Sm100a, &spec.defines(Dtype::F16))
        .with_context(|| format!("PTX of {}", source.path))?;
    let d = &plan.dims;
    let c_box = match plan.output {
        OutputArg::Pointer => Value::Null,
        OutputArg::TensorMap { box_rows, box_cols } => json!([box_rows, box_cols]),
    };
    let mut v = json!({
        "step": spec.info().number,
        "ptx": ptx,
        "launch": {
            "grid": [d.grid.0, d.grid.1, d.grid.2],
            "block": [d.block, 1, 1],
            "cluster": [d.cluster.0, d.cluster.1, d.cluster.2],
            "smem": d.smem_bytes,
            "m": shape.m, "n": shape.n, "k": shape.k,
            "dtype": "f16",
            "a_box": [plan.a_box.0, plan.a_box.1],
            "b_box": [plan.b_box.0, plan.b_box.1],
            "c_box": c_box,
        },
        "sources": [[source.path, source.text]],
    });
    if let (Value::Object(o), Value::Object(x)) = (&mut v, extra) {
        o.extend(x);
    }
    Ok(v)
}

/// Write the widgets' files into the built book at `dir`.
pub fn build(dir: &Path) -> Result<()> {
    let w = dir.join("widgets");
    let kdir = w.join("kernels");
    std::fs::create_dir_all(&kdir).with_context(|| format!("cannot create {}", kdir.display()))?;
    let wasm = build_wasm()?;
    std::fs::copy(&wasm, w.join("simweb.wasm")).context("cannot copy the simulator")?;
    let src = project_root().join(SOURCES);
    for f in FILES {
        std::fs::copy(src.join(f), w.join(f))
            .with_context(|| format!("cannot copy {SOURCES}/{f}"))?;
    }
    // Every step's stock kernel and seeded bugs, compiled in parallel.
    let mut jobs: Vec<(u32, Option<&'static common::mutation::Mutation>)> = Vec::new();
    let steps = runner::steps::all();
    for s in &steps {
        let info = s.info();
        jobs.push((info.number, None));
        for m in MUTATIONS
            .iter()
            .filter(|m| m.applies_to(info, Arch::Blackwell))
        {
            jobs.push((info.number, Some(m)));
        }
    }
    let one = |&(n, m): &(u32, Option<&'static common::mutation::Mutation>)| -> Result<(u32, Option<&'static str>, Value)> {
        let step = steps
            .iter()
            .find(|s| s.info().number == n)
            .ok_or_else(|| anyhow!("step {n}"))?;
        let spec = KernelSpec::new(*step, Arch::Blackwell);
        let stock = spec.source();
        let (source, extra) = match m {
            None => (stock, json!({"name": "stock"})),
            Some(m) => (
                KernelSource {
                    path: stock.path.clone(),
                    text: m.apply(&stock.text)?,
                },
                json!({"name": m.name, "description": m.description}),
            ),
        };
        Ok((n, m.map(|m| m.name), bundle(&spec, &source, extra)?))
    };
    // NVRTC on every core (a few hundred ms per kernel).
    let cores = std::thread::available_parallelism().map_or(2, |c| c.get());
    let chunk = jobs.len().div_ceil(cores).max(1);
    let done: Vec<Result<(u32, Option<&str>, Value)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = jobs
            .chunks(chunk)
            .map(|c| sc.spawn(move || c.iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err(anyhow!("a PTX compile thread panicked"))])
            })
            .collect()
    });
    let mut index: Vec<Value> = Vec::new();
    for r in done {
        let (n, bug, v) = r?;
        let name = bug.unwrap_or("stock");
        let file = format!("step{n}-{name}.json");
        std::fs::write(kdir.join(&file), v.to_string())
            .with_context(|| format!("cannot write {file}"))?;
        index.push(json!({"step": n, "name": name, "file": file,
            "path": v["sources"][0][0].clone(),
            "description": v.get("description").cloned().unwrap_or(Value::Null)}));
    }
    std::fs::write(kdir.join("index.json"), Value::Array(index).to_string())
        .context("cannot write the kernels' index")?;
    // What the reader brings: nothing in the static book (`runner book --serve` answers this
    // path itself), so the page asks without a failed request.
    let reader = w.join("reader");
    std::fs::create_dir_all(&reader)
        .with_context(|| format!("cannot create {}", reader.display()))?;
    std::fs::write(
        reader.join("index.json"),
        super::serve::offer(None, None).to_string(),
    )
    .context("cannot write widgets/reader/index.json")?;
    Ok(())
}
