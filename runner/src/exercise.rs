//! `runner exercise N.M [--kernel FILE]`: the check each exercise of the book names, runnable
//! without a B200. A kernel edit is run under the tcgen05 emulation (on an H100/H200) in a child
//! `runner step` with its outcome compared with the expected one; resource questions are
//! answered from the kernel shapes; reasoning questions from the host twins. Without a GPU the
//! kernel still compiles for sm_100a and every host check runs.
//!
//! The solutions that edit a kernel live in `exercises/solutions.toml`.

use crate::sandbox::{self, ChildSpec};
use anyhow::{anyhow, bail, Context, Result};
use common::edits;
use common::model::tiling::{tile_coords, MinorDim};
use common::step::{Arch, KernelSpec};
use common::verdict::Verdict;
use serde::Deserialize;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const SOLUTIONS: &str = include_str!("../../exercises/solutions.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Solution {
    id: String,
    edit: Vec<edits::Edit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SolutionFile {
    snippets: std::collections::BTreeMap<String, String>,
    solution: Vec<Solution>,
}

/// What running the kernel must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Verifies,
    /// A wrong result, and nothing else: a kernel the simulator stops (a spin loop, a rule, a
    /// deadlock) has not made the exercise's break.
    FailsVerification,
    /// One of these breaks, the ones the exercise asks for; any other failure (a spin loop that
    /// runs into the instruction budget, a compile error, a different rule) does not pass.
    Breaks(&'static [Break]),
}

/// A way a "break it" exercise's kernel may fail, as the book's exercise names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    /// The verification fails.
    WrongResult,
    /// A barrier phase never completes: the simulator's deadlock, a GPU's timeout.
    Deadlock,
    /// This ordering rule (the simulator's `rule NAME`, the emulation's fault naming it).
    Rule(&'static str),
}

impl Break {
    fn describe(self) -> String {
        match self {
            Break::WrongResult => "a wrong result".into(),
            Break::Deadlock => "a deadlock (a hang on a GPU)".into(),
            Break::Rule(r) => format!("the rule {r}"),
        }
    }
}

/// The edit a "change it" exercise asks for, checked in the kernel's text (comments and
/// whitespace removed): the stock kernel verifies too, so a run alone cannot tell that the
/// exercise was done.
#[derive(Clone, Copy)]
struct Edit {
    /// What the edit is, for the message.
    what: &'static str,
    /// Text the edited kernel holds.
    must: &'static [&'static str],
    /// Text the edit removes.
    must_not: &'static [&'static str],
}

#[derive(Clone, Copy)]
enum Check {
    /// Run the kernel under emulation with these `--param`s and extra arguments, once per
    /// emulation seed.
    Run {
        params: &'static [&'static str],
        args: &'static [&'static str],
        seeds: &'static [u64],
        expect: Expect,
    },
    /// A host-side computation.
    Host(fn() -> Result<Vec<String>>),
    /// The kernel makes the exercise's edit (checked in its text).
    Edited(Edit),
}

pub struct Exercise {
    pub id: &'static str,
    pub step: u32,
    pub title: &'static str,
    checks: &'static [Check],
}

const VERIFIES: Check = Check::Run {
    params: &[],
    args: &[],
    seeds: &[0],
    expect: Expect::Verifies,
};

pub const EXERCISES: &[Exercise] = &[
    Exercise {
        id: "0.1",
        step: 0,
        title: "Prefetch distance STAGES - 1",
        checks: &[
            Check::Edited(Edit {
                what: "PREFETCH = STAGES - 1",
                must: &["PREFETCH=STAGES-1;"],
                must_not: &[],
            }),
            VERIFIES,
        ],
    },
    Exercise {
        id: "0.2",
        step: 0,
        title: "Fewer stages",
        checks: &[
            Check::Host(|| smem_drop(0, 4, 3, 48)),
            Check::Run {
                params: &["stages=3"],
                args: &[],
                seeds: &[0],
                expect: Expect::Verifies,
            },
        ],
    },
    Exercise {
        id: "0.3",
        step: 0,
        title: "Predict, then run: the two parity edits",
        checks: &[
            Check::Host(parity_predictions),
            Check::Run {
                params: &[],
                args: &["--mutate", "no-first-round-guard"],
                seeds: &[0],
                expect: Expect::Verifies,
            },
            Check::Run {
                params: &[],
                args: &["--mutate", "wrong-parity", "--timeout", "10"],
                seeds: &[0, 1, 2],
                expect: Expect::Breaks(&[Break::Deadlock, Break::WrongResult]),
            },
        ],
    },
    Exercise {
        id: "1.1",
        step: 1,
        title: "Move the producer to warp 3",
        checks: &[
            Check::Edited(Edit {
                what: "the producer's role on warp 3",
                must: &["warp==3"],
                must_not: &[],
            }),
            VERIFIES,
        ],
    },
    Exercise {
        id: "1.2",
        step: 1,
        title: "Two stages",
        checks: &[
            Check::Host(|| smem_drop(1, 4, 2, 96)),
            Check::Run {
                params: &["stages=2"],
                args: &[],
                seeds: &[0],
                expect: Expect::Verifies,
            },
        ],
    },
    Exercise {
        id: "2.1",
        step: 2,
        title: "Single staging buffer",
        checks: &[
            Check::Edited(Edit {
                what: "one staging buffer per warp (no `sub % 2`)",
                must: &[],
                must_not: &["[sub%2]"],
            }),
            VERIFIES,
        ],
    },
    Exercise {
        id: "2.2",
        step: 2,
        title: "No swizzle in the staging tile",
        checks: &[Check::Run {
            params: &[],
            args: &[],
            seeds: &[0],
            expect: Expect::FailsVerification,
        }],
    },
    Exercise {
        id: "3.1",
        step: 3,
        title: "Count the bytes",
        checks: &[Check::Host(flop_per_byte)],
    },
    Exercise {
        id: "3.2",
        step: 3,
        title: "Break the byte count",
        checks: &[Check::Run {
            params: &[],
            args: &["--timeout", "10"],
            seeds: &[0],
            // The book: the MMA reads the peer's half before it has landed (the simulator's
            // operand-loaded rule, or a wrong result on a GPU), or a phase never completes.
            expect: Expect::Breaks(&[
                Break::Rule("operand-loaded"),
                Break::WrongResult,
                Break::Deadlock,
            ]),
        }],
    },
    Exercise {
        id: "4.1",
        step: 4,
        title: "Fewer clusters",
        checks: &[
            Check::Host(every_tile_once),
            Check::Run {
                params: &[],
                args: &["--clusters", "2"],
                seeds: &[0],
                expect: Expect::Verifies,
            },
        ],
    },
    Exercise {
        id: "4.2",
        step: 4,
        title: "Remove the acc_empty wait",
        checks: &[Check::Run {
            params: &[],
            args: &["--clusters", "1", "--timeout", "20"],
            seeds: &[0, 1, 2],
            // On an H100 (2026-11-25, commit 0692115) release-before-overwrite faulted the
            // solution on every seed (assets/results/gpu-runs-h100-2026-11-25.md).
            expect: Expect::Breaks(&[Break::Rule("release-before-overwrite")]),
        }],
    },
    Exercise {
        id: "5.1",
        step: 5,
        title: "One accumulator slot",
        checks: &[
            Check::Edited(Edit {
                what: "ACC_STAGES = 1",
                must: &["ACC_STAGES=1;"],
                must_not: &[],
            }),
            VERIFIES,
        ],
    },
    Exercise {
        id: "5.2",
        step: 5,
        title: "Where do the idle warps go?",
        checks: &[Check::Host(idle_warps)],
    },
    Exercise {
        id: "6.1",
        step: 6,
        title: "Turn the snake off",
        checks: &[
            Check::Host(snake_off),
            Check::Edited(Edit {
                what: "every band in the same direction (no `major_count - 1 - along`)",
                must: &[],
                must_not: &["major_count-1-along"],
            }),
            VERIFIES,
        ],
    },
    Exercise {
        id: "6.2",
        step: 6,
        title: "Pick a width",
        checks: &[Check::Host(pick_width)],
    },
    Exercise {
        id: "7.1",
        step: 7,
        title: "Predict the tail, then watch it balance",
        checks: &[
            Check::Host(tail_shares),
            Check::Run {
                params: &[],
                args: &["--mutate", "clc-stops-asking"],
                seeds: &[0],
                expect: Expect::Breaks(&[Break::Rule("clc-canceled-id-dropped")]),
            },
            VERIFIES,
        ],
    },
];

/// Exercise 0.3's prediction, from the phase simulator: in steps 0 and 1, with slow loads or
/// slow MMAs, dropping the first-round guard changes nothing and the wrong parity never
/// completes cleanly (a race or a hang).
fn parity_predictions() -> Result<Vec<String>> {
    use common::model::phases::{model, simulate, Counter, EmptyWait, FullWait, Ring, Timing};
    let mut lines = Vec::new();
    for step in [0, 1] {
        let m = model(runner::steps::get(step)?);
        for (timing_name, timing) in [
            ("slow loads", Timing::LOAD_BOUND),
            ("slow MMAs", Timing::MMA_BOUND),
        ] {
            for (wait, must_complete) in [
                (EmptyWait::NoFirstRoundGuard, true),
                (EmptyWait::WrongParity, false),
            ] {
                let outcome = simulate(&Ring {
                    stages: m.stages,
                    k_blocks: 16,
                    tiles: m.tiles,
                    roles: m.roles,
                    empty_wait: wait,
                    full_wait: FullWait::Correct,
                    counter: Counter::AcrossTiles,
                    timing,
                })
                .outcome;
                let name = wait.mutation().unwrap_or("the kernels' code");
                if outcome.is_completes() != must_complete {
                    bail!(
                        "step {step}, {name}, {timing_name}: the model says {}",
                        outcome.label()
                    );
                }
                lines.push(format!(
                    "step {step}, {name}, {timing_name}: {}",
                    outcome.label()
                ));
            }
        }
    }
    Ok(lines)
}

pub fn find(id: &str) -> Result<&'static Exercise> {
    EXERCISES.iter().find(|e| e.id == id).ok_or_else(|| {
        anyhow!(
            "there is no exercise {id}; exercises: {}",
            EXERCISES
                .iter()
                .map(|e| e.id)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// The committed solution's kernel for `ex`, if it edits one.
pub fn solution(ex: &Exercise) -> Result<Option<String>> {
    let file: SolutionFile = toml::from_str(SOLUTIONS).context("exercises/solutions.toml")?;
    let Some(s) = file.solution.iter().find(|s| s.id == ex.id) else {
        return Ok(None);
    };
    let base = runner::steps::get(ex.step)?
        .info()
        .kernel(Arch::Blackwell)
        .text;
    edits::apply(
        &format!("solution {}", ex.id),
        base,
        &s.edit,
        &file.snippets,
    )
    .map(Some)
}

// ---- host checks ----------------------------------------------------------------------------

fn spec_with(step: u32, params: &[String]) -> Result<KernelSpec> {
    let mut spec = KernelSpec::new(runner::steps::get(step)?, Arch::Blackwell);
    spec.params.apply(params).map_err(|e| anyhow!(e))?;
    Ok(spec)
}

/// Dynamic shared memory drops by `kib` KiB from `from` to `to` stages.
fn smem_drop(step: u32, from: u32, to: u32, kib: u32) -> Result<Vec<String>> {
    let smem = |s: u32| -> Result<u32> {
        Ok(spec_with(step, &[format!("stages={s}")])?
            .shape()
            .smem_bytes)
    };
    let (a, b) = (smem(from)?, smem(to)?);
    if a - b != kib * 1024 {
        bail!(
            "{from} -> {to} stages changes shared memory by {} bytes, not {kib} KiB",
            a - b
        );
    }
    Ok(vec![format!(
        "shared memory per CTA: {a} B with {from} stages, {b} B with {to}: {kib} KiB less, {} stage(s) of A and B",
        from - to
    )])
}

/// Exercise 7.1: the budget model's last wave under step 6's fixed grid, at two shapes: how many
/// tiles the last round holds of the clusters a B200 runs at once, and the share of the rounds
/// it is (what the student predicts, then reads in a trace).
fn tail_shares() -> Result<Vec<String>> {
    use common::model::budget::{budget, Assumptions, BudgetInput, B200};
    let step = runner::steps::get(6)?;
    let mut out = Vec::new();
    for shape in [
        common::Shape::DEFAULT,
        common::Shape {
            m: 8192,
            n: 8192,
            k: 8192,
        },
    ] {
        let b = budget(
            BudgetInput::from_step(step),
            &B200,
            shape,
            Assumptions::DEFAULT,
        );
        if b.clusters_at_once == 0 || b.rounds == 0 {
            bail!("the budget of step 6 at {shape} has no clusters or rounds");
        }
        let idle = b.clusters_at_once - b.last_round_tiles.min(b.clusters_at_once);
        out.push(format!(
            "{shape}: {} tiles over {} clusters at once = {} rounds; the last holds {} tiles, so {} of {} clusters idle through 1 round in {} ({:.1} % of the cluster-rounds)",
            b.tiles,
            b.clusters_at_once,
            b.rounds,
            b.last_round_tiles,
            idle,
            b.clusters_at_once,
            b.rounds,
            100.0 * f64::from(idle) / f64::from(b.clusters_at_once * b.rounds)
        ));
    }
    Ok(out)
}

/// FLOP per byte loaded per CTA and k-block, for steps 2 and 3: the book says 85.3 and 128.
fn flop_per_byte() -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (step, expected) in [(2u32, 85.3f64), (3, 128.0)] {
        let k = spec_with(step, &[])?.shape();
        let rows_per_cta = k.cluster_tile.0 / k.cluster;
        let flops = 2.0 * rows_per_cta as f64 * k.cluster_tile.1 as f64 * k.tile_k as f64;
        let bytes = ((k.a_box.0 + k.b_box.0) * k.tile_k * 2) as f64;
        let ratio = flops / bytes;
        if (ratio - expected).abs() > 0.05 {
            bail!("step {step}: {ratio:.1} FLOP per byte, but the book says {expected}");
        }
        out.push(format!(
            "step {step}: a CTA computes {rows_per_cta} x {} per k-block of {} ({flops:.0} FLOP) from {bytes:.0} B of A and B ({} + {} rows): {ratio:.1} FLOP/B; shared memory {} B",
            k.cluster_tile.1, k.tile_k, k.a_box.0, k.b_box.0, k.smem_bytes
        ));
    }
    Ok(out)
}

/// A persistent grid of any size visits every tile exactly once (cluster c takes tiles c,
/// c + clusters, ...).
fn every_tile_once() -> Result<Vec<String>> {
    let k = spec_with(4, &[])?.shape();
    let shape = common::Shape::DEFAULT;
    let tiles = k.num_tiles(shape) as usize;
    let max = k.default_max_clusters(None) as usize;
    for clusters in 1..=max {
        let mut seen = vec![0u32; tiles];
        for c in 0..clusters {
            for t in (c..tiles).step_by(clusters) {
                seen[t] += 1;
            }
        }
        if let Some(t) = seen.iter().position(|&n| n != 1) {
            bail!(
                "with {clusters} clusters tile {t} is visited {} times",
                seen[t]
            );
        }
    }
    Ok(vec![format!(
        "{tiles} tiles of the default problem: with any number of clusters from 1 to {max}, the loop `for tile = cluster; tile < tiles; tile += clusters` visits each exactly once"
    )])
}

/// Step 5 has 8 warps; the tensor-memory lane quarter of warp w is w % 4, and warps 4..7
/// already cover all four, so warps 2 and 3 cannot add epilogue bandwidth.
fn idle_warps() -> Result<Vec<String>> {
    let k = spec_with(5, &[])?.shape();
    let warps = k.threads / 32;
    if warps != 8 {
        bail!("step 5 has {warps} warps per CTA, the exercise assumes 8");
    }
    let quarters: Vec<u32> = (4..8).map(|w| w % 4).collect();
    if quarters != [0, 1, 2, 3] {
        bail!("the epilogue warpgroup does not cover the four lane quarters");
    }
    Ok(vec![
        format!("{warps} warps: 0 produces, 1 issues MMAs, 4-7 form the epilogue warpgroup"),
        "warp w may read only tensor-memory lanes 32*(w % 4)..: warps 4-7 already cover quarters 0, 1, 2, 3, so a fifth epilogue warp would share a quarter".into(),
        "what idle warps can do instead: prefetch the next tile's tensor maps, split the TMA issue (A and B from two warps), or be dropped (a 192-thread CTA leaves registers to the epilogue)".into(),
    ])
}

/// Whether consecutive tiles `a` and `b` (bands `width` wide across N) share an operand band:
/// the same band of B's blocks, or (at a turn) the same row of tiles, hence the same A block.
fn shares_band(a: (usize, usize), b: (usize, usize), width: usize) -> bool {
    a.1 / width == b.1 / width || a.0 == b.0
}

/// With the snake, consecutive tiles always share an A or B band; every band running forwards,
/// the band turns break that.
fn snake_off() -> Result<Vec<String>> {
    let k = spec_with(6, &[])?.shape();
    let shape = common::Shape::DEFAULT;
    let (tm, tn) = (
        shape.m / k.cluster_tile.0 as usize,
        shape.n / k.cluster_tile.1 as usize,
    );
    let width = 8;
    let snake: Vec<_> = (0..tm * tn)
        .map(|t| tile_coords(t, tm, tn, width, MinorDim::N))
        .collect();
    let forward: Vec<_> = (0..tm * tn)
        .map(|t| {
            let band = t / (width * tm);
            let bw = width.min(tn - band * width);
            let inb = t - band * width * tm;
            (inb / bw, band * width + inb % bw)
        })
        .collect();
    let breaks = |v: &[(usize, usize)]| {
        v.windows(2)
            .filter(|w| !shares_band(w[0], w[1], width))
            .count()
    };
    let (s, f) = (breaks(&snake), breaks(&forward));
    if s != 0 || f == 0 {
        bail!("expected the snake to keep every step within a band ({s} breaks) and the forward order to break at band turns ({f})");
    }
    Ok(vec![format!(
        "{tm} x {tn} tiles, bands {width} wide: the snake never moves to a tile sharing neither A nor B rows; running every band forwards does so {f} times (at each band turn); the order changes speed, not the result"
    )])
}

/// Distinct A and B blocks touched by the first 74 tiles (74 clusters of a B200) for several
/// band widths; the default width must do best.
fn pick_width() -> Result<Vec<String>> {
    let spec = spec_with(6, &[])?;
    let k = spec.shape();
    let shape = common::Shape::DEFAULT;
    let (tm, tn) = (
        shape.m / k.cluster_tile.0 as usize,
        shape.n / k.cluster_tile.1 as usize,
    );
    let clusters = k.default_max_clusters(None) as usize;
    let default = spec.params.get("grid_tile_width") as usize;
    let mut out = Vec::new();
    let mut best = (usize::MAX, 0);
    let mut at_default = usize::MAX;
    for width in [1usize, 4, 8, 16, 32] {
        let tiles: Vec<_> = (0..clusters.min(tm * tn))
            .map(|t| tile_coords(t, tm, tn, width, MinorDim::N))
            .collect();
        let a: std::collections::BTreeSet<_> = tiles.iter().map(|t| t.0).collect();
        let b: std::collections::BTreeSet<_> = tiles.iter().map(|t| t.1).collect();
        let sum = a.len() + b.len();
        out.push(format!(
            "width {width:>2}: {:>2} A blocks + {:>2} B blocks = {sum}",
            a.len(),
            b.len()
        ));
        if sum < best.0 {
            best = (sum, width);
        }
        if width == default {
            at_default = sum;
        }
    }
    if at_default != best.0 {
        bail!(
            "grid_tile_width = {default} touches {at_default} blocks, but width {} touches {}",
            best.1,
            best.0
        );
    }
    out.push(format!(
        "the default grid_tile_width = {default} touches the fewest ({})",
        best.0
    ));
    Ok(out)
}

// ---- runs -----------------------------------------------------------------------------------

enum Outcome {
    Verified,
    /// Verified on the CPU simulator.
    Simulated,
    Failed(String),
    Hung,
    Error(String),
    /// The CPU simulator stopped the kernel: its kind ("rule", "deadlock", "step-limit", ...),
    /// the rule broken, and its message's first line.
    Stopped {
        kind: String,
        rule: Option<String>,
        text: String,
    },
    /// No GPU that runs it: compiled for sm_100a only.
    NotRun(String),
}

fn run_kernel(
    step: u32,
    kernel: &Path,
    params: &[&str],
    args: &[&str],
    seed: u64,
) -> Result<Outcome> {
    let dir = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}-{seed}", std::process::id()));
    let mut a: Vec<std::ffi::OsString> = vec![
        "step".into(),
        step.to_string().into(),
        "--arch".into(),
        "sm_100a".into(),
        "--kernel".into(),
        kernel.as_os_str().into(),
        "--json".into(),
        "--iters".into(),
        "0".into(),
    ];
    // The seed goes to what runs the kernel (a flag that applies to nothing is refused): the
    // emulation's schedule on a GPU, else the CPU simulator's.
    a.push(
        if matches!(common::gpu::open(), common::gpu::GpuStatus::Present(_)) {
            "--emu-seed".into()
        } else {
            "--sim-seed".into()
        },
    );
    a.push(seed.to_string().into());
    for p in params {
        a.push("--param".into());
        a.push((*p).into());
    }
    a.extend(args.iter().map(|s| s.into()));
    let mut env = Vec::new();
    if let Ok(d) = std::env::var("WORKBOOK_DEVICE") {
        env.push(("WORKBOOK_DEVICE".to_string(), d));
    }
    // The child runs in a scratch folder: it compiles with this checkout's headers, not with
    // whatever it would find (or not) from there.
    if let Some(root) = common::project::root() {
        env.push((
            common::project::ROOT_ENV.to_string(),
            root.display().to_string(),
        ));
    }
    let o = sandbox::run(&ChildSpec {
        program: std::env::current_exe()?,
        args: a,
        cwd: dir.clone(),
        env,
        limit: Duration::from_secs(600),
        log_bytes: 1 << 20,
        stdin: Vec::new(),
        // A GPU child: no address-space limit (the CUDA driver reserves terabytes of it).
        rlimits: sandbox::Rlimits::for_limit(Duration::from_secs(600), None),
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    // The child's whole error report (a compile error is NVRTC's full log), without its notes.
    let err_line = || {
        let text: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| !l.starts_with("note: "))
            .collect();
        text.join("\n        ").trim().to_string()
    };
    let all: serde_json::Value = serde_json::from_str(&o.stdout).unwrap_or_default();
    let v = &all["runs"][0];
    // The simulator's stop (a rule, a deadlock, a spin, a fault) is in its JSON, whatever the
    // exit status it maps to (2 or 124): the kind decides what the exercise accepts.
    if let Some(why) = v["failure"]["message"].as_str() {
        // A deadlock's report names every blocked warp, a line each: the first line here, the
        // rest in `runner step`'s own report.
        let first = why.lines().next().unwrap_or("").to_string();
        let more = why.lines().count().saturating_sub(1);
        return Ok(Outcome::Stopped {
            kind: v["failure"]["kind"].as_str().unwrap_or("").to_string(),
            rule: v["failure"]["rule"].as_str().map(str::to_string),
            text: if more > 0 {
                format!("{first} ({more} more lines name the blocked warps: runner step {step} --sim with the same kernel prints them)")
            } else {
                first
            },
        });
    }
    // The child's verdict is its exit status (`Verdict`); its JSON only adds why.
    Ok(match o.exit.verdict().0 {
        Verdict::Verified => {
            if v["ran"] == false {
                Outcome::NotRun(v["reason"].as_str().unwrap_or("no GPU").to_string())
            } else if v["simulated"] == true {
                Outcome::Simulated
            } else {
                Outcome::Verified
            }
        }
        Verdict::Failed => {
            if v["ran"] == false {
                return Ok(Outcome::Error(format!(
                    "the build lacks the step's key instructions: {}",
                    v["missing_instructions"]
                )));
            }
            Outcome::Failed(format!(
                "{} of {} elements wrong",
                v["verification"]["bad_count"], v["verification"]["elements"]
            ))
        }
        // Built but not run (no GPU that runs it): the child's JSON says why.
        Verdict::Partial => match v["reason"].as_str() {
            Some(why) => Outcome::NotRun(why.to_string()),
            None => Outcome::Error(err_line()),
        },
        Verdict::Hang => Outcome::Hung,
        Verdict::Error => Outcome::Error(err_line()),
    })
}

/// The check's lines: printed as they come, or kept for one JSON object at the end.
struct Lines {
    json: bool,
    items: Vec<crate::results::ExerciseLine>,
}

impl Lines {
    /// One line: `mark` is ok, FAIL, part (could not run here), note or run.
    fn emit(&mut self, mark: &str, text: String) {
        if self.json {
            self.items.push(crate::results::ExerciseLine {
                status: mark.to_ascii_lowercase(),
                detail: text,
            });
        } else {
            println!("  {mark:<4}  {text}");
        }
    }
}

/// How `runner exercise` was asked to check: the student's files and prediction.
pub struct Options<'a> {
    /// Replaces the committed solution of the Blackwell kernel.
    pub kernel: Option<&'a Path>,
    /// Replaces the committed edit of the Hopper twin in a timed exercise (`crate::bench::measure`).
    pub twin: Option<&'a Path>,
    /// The student's prediction for a timed exercise (else asked on a terminal).
    pub predict: Option<crate::bench::measure::Verdict>,
    pub write: Option<&'a Path>,
    /// With `write`: overwrite an existing file (never a tracked one).
    pub force: bool,
    pub json: bool,
}

/// The prefix of this module's scratch files and folders in the temp folder.
const SCRATCH_PREFIX: &str = "workbook-exercise-";

/// Remove the scratch files of earlier exercise runs that ended without cleaning up (Ctrl-C):
/// `workbook-exercise-<pid>-...` whose process no longer exists. Linux only (`/proc`); a live
/// process's files, and files this user may not remove, are left alone.
fn sweep_stale_scratch() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH_PREFIX)) else {
            continue;
        };
        let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if pid.is_empty() || Path::new("/proc").join(&pid).exists() {
            continue;
        }
        let p = e.path();
        let _ = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
    }
}

/// The kernel an exercise checks: its text (`None`: the exercise changes no kernel) and where it
/// came from, for the report.
struct Subject {
    text: Option<String>,
    from: String,
}

/// What the checks found so far; it decides the verdict and the exit status.
#[derive(Default)]
struct Tally {
    failed: bool,
    partial: bool,
    /// The timing part alone was skipped for want of a GPU.
    timing_skipped: bool,
}

/// Run the exercise's checks; `kernel` replaces the committed solution.
pub fn run(id: &str, o: &Options) -> Result<ExitCode> {
    sweep_stale_scratch();
    if let Some(w) = o.write {
        crate::outdir::check_new_file(w, o.force)?;
    }
    let ex = find(id)?;
    let info = runner::steps::get(ex.step)?.info();
    let subject = read_subject(id, ex, o.kernel)?;
    if let Some(w) = o.write {
        return write_solution(id, w, &subject);
    }
    let twin = read_twin(id, o.twin)?;
    let mut out = Lines {
        json: o.json,
        items: Vec::new(),
    };
    if !o.json {
        println!(
            "exercise {id} (step {}, {}): {}",
            ex.step, info.title, ex.title
        );
    }
    if o.kernel.is_none() {
        out.emit(
            "note",
            format!(
                "checking {}; pass --kernel FILE to check your own kernel",
                subject.from
            ),
        );
    }
    let stock = info.kernel(Arch::Blackwell).text;
    let mut tally = Tally::default();
    run_checks(id, ex, o.kernel, &subject, stock, &mut out, &mut tally)?;
    let measured = time_counterpart(id, o, twin.as_ref(), &mut out, &mut tally)?;
    let verdict = verdict_line(id, &tally);
    if o.json {
        print_json(id, ex, o.kernel, out, measured, &tally, verdict)?;
    } else {
        println!("{verdict}");
    }
    // 3: not failed, but not fully checked either (a kernel not run, or the timing part
    // skipped: the closing line says which and why), so a script cannot take it for a pass.
    Ok(if tally.failed {
        Verdict::Failed
    } else if tally.partial || tally.timing_skipped {
        Verdict::Partial
    } else {
        Verdict::Verified
    }
    .into())
}

/// Read the participant's `--kernel` (refusing a Hopper twin), else the committed solution.
fn read_subject(id: &str, ex: &Exercise, kernel: Option<&Path>) -> Result<Subject> {
    let Some(k) = kernel else {
        return Ok(Subject {
            text: solution(ex)?,
            from: "the solution in exercises/solutions.toml".to_string(),
        });
    };
    crate::contenders::check_edit_target(
        k,
        common::compile::read_kernel,
        ex.step,
        Some(Arch::Blackwell),
    )?;
    let text = common::compile::read_kernel(k)?;
    let src = common::compile::KernelSource {
        path: k.display().to_string(),
        text,
    };
    // The exercises edit the Blackwell kernel; a twin fails on unrelated asserts.
    if src.implied_arch() == Arch::Hopper {
        bail!(
            "{} is a Hopper twin (it includes hopper.cuh): exercise {id} checks step {}'s Blackwell kernel (kernel.cu){}",
            k.display(),
            ex.step,
            if crate::bench::measure::find(id)
                .is_some_and(|m| m.variants.iter().any(|v| v.edited))
            {
                "; give an edited twin with --twin FILE"
            } else {
                ""
            }
        );
    }
    Ok(Subject {
        text: Some(src.text),
        from: k.display().to_string(),
    })
}

/// `--write FILE`: write the kernel to `w` instead of checking it.
fn write_solution(id: &str, w: &Path, subject: &Subject) -> Result<ExitCode> {
    let t = subject.text.as_deref().ok_or_else(|| {
        anyhow!("exercise {id} changes no kernel: its answer is the check itself")
    })?;
    std::fs::write(w, t).with_context(|| format!("cannot write {}", w.display()))?;
    println!("wrote the solution of exercise {id} to {}", w.display());
    Ok(ExitCode::SUCCESS)
}

/// Your twin for the timed counterpart (`--twin`), checked before anything runs.
fn read_twin(id: &str, twin: Option<&Path>) -> Result<Option<common::compile::KernelSource>> {
    Ok(match (twin, crate::bench::measure::find(id)) {
        // Parameter changes only (0.1, 1.2): the twin's source is the stock one.
        (Some(p), Some(m)) if !m.variants.iter().any(|v| v.edited) => {
            eprintln!(
                "warning: exercise {id} times the stock twin with other parameters ({}): --twin {} is not used",
                m.variants.iter().map(|v| v.label).collect::<Vec<_>>().join(", "),
                p.display()
            );
            None
        }
        (Some(p), Some(m)) => {
            let src = common::compile::KernelSource {
                path: p.display().to_string(),
                text: common::compile::read_kernel(p)?,
            };
            // A Blackwell kernel would fail on the twin's sm_90a compile, far from the cause.
            if src.implied_arch() != Arch::Hopper {
                bail!(
                    "{} is not a Hopper twin (it does not include hopper.cuh): --twin takes your edited copy of step {}'s twin (kernel_sm90.cu)",
                    p.display(),
                    m.step
                );
            }
            Some(src)
        }
        // No timed counterpart: the warning below says --twin is not used.
        _ => None,
    })
}

/// Run every check of the exercise in order, host checks and kernel runs, into `out` and `tally`.
fn run_checks(
    id: &str,
    ex: &Exercise,
    kernel: Option<&Path>,
    subject: &Subject,
    stock: &str,
    out: &mut Lines,
    tally: &mut Tally,
) -> Result<()> {
    // A participant's file is run where it is (so compiler messages name it); the committed
    // solution goes through a temporary copy.
    let temp = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}-{id}.cu", std::process::id()));
    let kernel_path = match kernel {
        Some(k) => {
            std::path::absolute(k).with_context(|| format!("cannot read {}", k.display()))?
        }
        None => {
            std::fs::write(&temp, subject.text.as_deref().unwrap_or(stock))
                .with_context(|| format!("cannot write {}", temp.display()))?;
            temp.clone()
        }
    };
    let runs_kernel = ex
        .checks
        .iter()
        .any(|c| matches!(c, Check::Run { .. } | Check::Edited(_)));
    if kernel.is_some() && !runs_kernel {
        eprintln!("warning: exercise {id} runs no kernel (its checks are worked out on the host): --kernel is not used");
    }
    for check in ex.checks {
        match check {
            Check::Edited(e) => match check_edit(e, subject.text.as_deref().unwrap_or(stock)) {
                Ok(line) => out.emit("ok", line),
                Err(why) => {
                    out.emit("FAIL", why);
                    tally.failed = true;
                }
            },
            Check::Host(f) => match f() {
                Ok(lines) => lines.iter().for_each(|l| out.emit("ok", l.clone())),
                Err(e) => {
                    out.emit("FAIL", format!("{e:#}"));
                    tally.failed = true;
                }
            },
            Check::Run {
                params,
                args,
                seeds,
                expect,
            } => {
                let seeded = args.contains(&"--mutate");
                if subject.text.as_deref().unwrap_or(stock) == stock
                    && *expect != Expect::Verifies
                    && !seeded
                {
                    out.emit("note", "the kernel is the stock one: make the exercise's edit first (or pass --kernel)".to_string());
                }
                let from = match args.iter().position(|a| *a == "--mutate") {
                    Some(i) => format!(
                        "{} with the seeded bug {}",
                        subject.from,
                        args.get(i + 1).copied().unwrap_or("?")
                    ),
                    None => subject.from.clone(),
                };
                out.emit(
                    "run",
                    format!(
                        "step {}'s Blackwell kernel from {from}, under the tcgen05 emulation on an H100/H200, else on the CPU simulator{}",
                        ex.step,
                        if params.is_empty() {
                            String::new()
                        } else {
                            format!(" with {}", params.join(" "))
                        }
                    ),
                );
                for &seed in *seeds {
                    let outcome = run_kernel(ex.step, &kernel_path, params, args, seed)?;
                    let (ok, what) = judge(&outcome, expect);
                    if matches!(outcome, Outcome::NotRun(_)) {
                        tally.partial = true;
                    }
                    let seed_note = if seeds.len() > 1 {
                        format!("schedule seed {seed}: ")
                    } else {
                        String::new()
                    };
                    let mark = match (&outcome, ok) {
                        (Outcome::NotRun(_), _) => "part",
                        (_, true) => "ok",
                        (_, false) => "FAIL",
                    };
                    out.emit(mark, format!("{seed_note}{what}"));
                    tally.failed |= !ok;
                }
            }
        }
    }
    if kernel.is_none() {
        let _ = std::fs::remove_file(&temp);
    }
    Ok(())
}

/// Whether one run's outcome is what the check expects, and the line that says so.
fn judge(outcome: &Outcome, expect: &Expect) -> (bool, String) {
    match (outcome, expect) {
        (Outcome::NotRun(why), _) => (
            true,
            format!("compiled for sm_100a; not run here ({why}): run it on an H100/H200 for the full check"),
        ),
        (Outcome::Verified, Expect::Verifies) => (true, "verifies".into()),
        (Outcome::Simulated, Expect::Verifies) => (true, "verifies (simulated on the CPU)".into()),
        (Outcome::Simulated, _) => (
            false,
            "verifies on the CPU simulator, but it should not".into(),
        ),
        (Outcome::Verified, _) => (false, "verifies, but it should not".into()),
        (Outcome::Failed(d), Expect::FailsVerification) => {
            (true, format!("fails verification as expected: {d}"))
        }
        (Outcome::Failed(d), Expect::Breaks(b)) if b.contains(&Break::WrongResult) => {
            (true, format!("fails verification as expected: {d}"))
        }
        (Outcome::Hung, Expect::Breaks(b)) if b.contains(&Break::Deadlock) => {
            (true, "hangs, and the runner says so".into())
        }
        (Outcome::Stopped { kind, text, .. }, Expect::Breaks(b))
            if kind == "deadlock" && b.contains(&Break::Deadlock) =>
        {
            (true, format!("caught by the simulator: {text}"))
        }
        (Outcome::Stopped { rule: Some(r), text, .. }, Expect::Breaks(b))
            if b.iter().any(|x| matches!(x, Break::Rule(n) if n == r)) =>
        {
            (true, format!("caught by the simulator: {text}"))
        }
        // The GPU emulation reports a broken rule as a fault whose message names it.
        (Outcome::Error(e), Expect::Breaks(b))
            if b.iter().any(|x| matches!(x, Break::Rule(r) if e.contains(r))) =>
        {
            (true, format!("caught: {e}"))
        }
        (Outcome::Stopped { text, .. }, Expect::Verifies) => {
            (false, format!("the simulator stopped it: {text}"))
        }
        (Outcome::Stopped { text, .. }, Expect::FailsVerification) => (
            false,
            format!("the simulator stopped it ({text}), but this exercise's edit gives a wrong result, nothing else: make the edit the exercise asks for, and only that"),
        ),
        (Outcome::Failed(d), Expect::Verifies) => (false, format!("fails verification: {d}")),
        (Outcome::Hung, Expect::Verifies) => (false, "hangs".into()),
        (Outcome::Hung, _) => (
            false,
            "hangs, but this exercise's edit gives a wrong result, nothing else".into(),
        ),
        (other, Expect::Breaks(b)) => (
            false,
            format!(
                "{}: not the break this exercise asks for ({}); make the exercise's edit, and only that",
                match other {
                    Outcome::Failed(d) => format!("fails verification ({d})"),
                    Outcome::Stopped { text, .. } => format!("the simulator stopped it: {text}"),
                    Outcome::Error(e) => e.clone(),
                    _ => "it ran".into(),
                },
                b.iter().map(|x| x.describe()).collect::<Vec<_>>().join(", or ")
            ),
        ),
        (Outcome::Error(e), _) => (false, e.clone()),
    }
}

/// A kernel's text as an [`Edit`] reads it: comments and whitespace removed.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            if !c.is_whitespace() {
                out.push(c);
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Whether `text` makes the edit `e` asks for; the message that says what is missing.
fn check_edit(e: &Edit, text: &str) -> Result<String, String> {
    let code = code_only(text);
    let squeeze = |p: &str| p.split_whitespace().collect::<String>();
    if let Some(m) = e.must.iter().find(|m| !code.contains(&squeeze(m))) {
        return Err(format!(
            "the kernel does not make the exercise's edit ({}): it lacks `{m}`",
            e.what
        ));
    }
    if let Some(m) = e.must_not.iter().find(|m| code.contains(&squeeze(m))) {
        return Err(format!(
            "the kernel does not make the exercise's edit ({}): it still holds `{m}`",
            e.what
        ));
    }
    Ok(format!("the kernel makes the exercise's edit ({})", e.what))
}

/// The timed Hopper counterpart, after the prediction is recorded; its JSON for `--json`.
fn time_counterpart(
    id: &str,
    o: &Options,
    twin: Option<&common::compile::KernelSource>,
    out: &mut Lines,
    tally: &mut Tally,
) -> Result<Option<crate::results::ExerciseMeasured>> {
    let Some(m) = crate::bench::measure::find(id) else {
        if o.twin.is_some() || o.predict.is_some() {
            eprintln!("warning: exercise {id} times nothing on the Hopper twin: --twin and --predict are not used");
        }
        return Ok(None);
    };
    let predicted = o
        .predict
        // No question where no GPU can answer it.
        .or_else(|| {
            (!o.json && common::gpu::driver_present())
                .then(|| crate::bench::measure::prompt(m))
                .flatten()
        });

    let r = crate::bench::measure::run(m, twin, predicted)?;
    for (mark, text) in r.lines {
        out.emit(mark, text);
    }
    tally.failed |= r.failed;
    // Without a GPU the timing alone is skipped, and said so: the correctness checks above
    // ran in full on the simulator, and they decide the exit status.
    if r.partial && matches!(common::gpu::open(), common::gpu::GpuStatus::Absent(_)) {
        tally.timing_skipped = true;
    } else {
        tally.partial |= r.partial;
    }
    Ok(r.json)
}

/// The closing line: fails, passes, passes but the timing was skipped, or ran only in part.
fn verdict_line(id: &str, tally: &Tally) -> String {
    if tally.failed {
        format!("exercise {id}: the check fails")
    } else if tally.timing_skipped && !tally.partial {
        format!("exercise {id}: the check passes; its timing part needs an H100/H200 and was skipped here (no GPU)")
    } else if tally.partial {
        format!("exercise {id}: the check ran only in part (compiled, not run: no GPU here); what ran passes — run it on an H100/H200 for the full check")
    } else {
        format!("exercise {id}: the check passes")
    }
}

/// `--json`: print the run as one `exercise` report.
fn print_json(
    id: &str,
    ex: &Exercise,
    kernel: Option<&Path>,
    out: Lines,
    measured: Option<crate::results::ExerciseMeasured>,
    tally: &Tally,
    verdict: String,
) -> Result<()> {
    let v = crate::results::ExerciseRun {
        runner: crate::results::RunnerVersion {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("WB_BUILD_COMMIT").to_string(),
        },
        exercise: id.to_string(),
        step: ex.step,
        title: ex.title.to_string(),
        kernel: kernel.map(|k| k.display().to_string()),
        checks: out.items,
        measured,
        result: if tally.failed {
            "fail"
        } else if tally.partial {
            "partial"
        } else {
            "pass"
        }
        .to_string(),
        summary: verdict,
    };
    let v = crate::report::envelope("exercise", serde_json::to_value(&v)?);
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// `runner exercise --timings`: every exercise with a timed Hopper counterpart
/// ([`crate::bench::measure::MEASURES`]), each `runner exercise N.M --json` in a child of the
/// check's sandbox, one at a time (they time the GPU), read back through
/// [`crate::results::ExerciseRun`] and written as one `exercise-timings` file,
/// `exercises-<gpu>-<date>.json` in `out` (which `{{#exercise-timing N.M}}` quotes once it is
/// committed to assets/results/), with each child's errors in `exercises-log.txt`. Verified only
/// if every exercise passed and was timed.
pub fn timings(out: &Path) -> Result<Verdict> {
    use crate::bench::measure::MEASURES;
    use crate::pool::{self, Child};
    use crate::results::{ExerciseRun, ExerciseTimings, Results};
    pool::require_hopper("runner exercise --timings")?;
    if out != common::toolkit::project_root().join("assets/results") {
        crate::outdir::OutDir::make_own(out, "--out", "the timings write their results there")?;
    }
    let head = crate::provenance::current();
    let children = MEASURES
        .iter()
        .map(|m| Child {
            args: vec!["exercise".into(), m.id.into(), "--json".into()],
            // One emulated run of the Blackwell solution, a few twin builds, 35 timed rounds.
            limit: Duration::from_secs(150),
        })
        .collect();
    // One GPU, one at a time: a timing shares the GPU with nothing else.
    let gpu = pool::default_gpus(&[]).first().copied().unwrap_or(0);
    let ran = pool::run_all(children, &[gpu], 1, &|i, r| {
        println!(
            "exercise {}: {} ({:.0} s)",
            MEASURES[i].id, r.verdict, r.seconds
        );
    })?;
    let names: Vec<String> = MEASURES
        .iter()
        .map(|m| format!("exercise {}", m.id))
        .collect();
    pool::write_log(&out.join("exercises-log.txt"), &names, &ran)?;
    let mut runs = Vec::new();
    let mut ok = true;
    for (m, r) in MEASURES.iter().zip(&ran) {
        // The verdict is the exit status; the run is kept wherever it printed its JSON.
        ok &= r.verdict == Verdict::Verified;
        match serde_json::from_str::<ExerciseRun>(&r.stdout) {
            Ok(run) => {
                ok &= run.measured.is_some();
                for c in &run.checks {
                    if c.detail.contains("the GPU measured") || c.status == "fail" {
                        println!("  {} {}: {}", m.id, c.status, c.detail);
                    }
                }
                runs.push(run);
            }
            Err(e) => {
                ok = false;
                eprintln!("exercise {}: no results ({e}); see exercises-log.txt", m.id);
            }
        }
    }
    let file = out.join(format!(
        "exercises-{}-{}.json",
        crate::provenance::gpu_slug(&head.gpu),
        head.date
    ));
    Results::ExerciseTimings(ExerciseTimings {
        gpu: head.gpu,
        date: head.date,
        commit: head.commit,
        runs,
    })
    .write(&file)?;
    println!(
        "wrote {}: {}",
        file.display(),
        if ok {
            "every measuring exercise passed and was timed"
        } else {
            "SOME MEASURING EXERCISE FAILED OR WAS NOT TIMED"
        }
    );
    Ok(if ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}

/// The exercises as the book lists them, with their checks (`runner exercise --list`).
pub fn list(json: bool) -> Result<()> {
    if json {
        let items: Vec<_> = EXERCISES
            .iter()
            .map(|e| {
                serde_json::json!({
                    "id": e.id, "step": e.step, "title": e.title,
                    "timed_on_twin": crate::bench::measure::find(e.id).is_some(),
                })
            })
            .collect();
        let v = crate::report::envelope("exercises", serde_json::json!({ "exercises": items }));
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for e in EXERCISES {
        let timed = if crate::bench::measure::find(e.id).is_some() {
            "  (also timed on the Hopper twin: --predict)"
        } else {
            ""
        };
        println!("{:<5} step {}  {}{timed}", e.id, e.step, e.title);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exercise_of_the_book_has_a_check() {
        // The book's chapters number their exercises 1., 2., ... under "## Exercises".
        for step in runner::steps::all() {
            let n = step.info().number;
            let chapter =
                std::fs::read_to_string(common::toolkit::project_root().join(step.info().chapter))
                    .unwrap();
            let section = chapter
                .split("## Exercises")
                .nth(1)
                .expect("an Exercises section");
            let section = section.split("\n## ").next().unwrap();
            let count = section
                .lines()
                .filter(|l| {
                    l.split_once(". ")
                        .is_some_and(|(d, _)| d.parse::<u32>().is_ok())
                })
                .count();
            assert!(count > 0, "chapter {n} has exercises");
            for m in 1..=count {
                let id = format!("{n}.{m}");
                find(&id).unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    section.contains(&format!("runner exercise {id}")),
                    "chapter {n}: exercise {id} names its check"
                );
            }
        }
    }

    #[test]
    fn every_solution_applies_to_its_kernel_and_compiles() {
        for ex in EXERCISES {
            let Some(k) = solution(ex).unwrap() else {
                continue;
            };
            let stock = runner::steps::get(ex.step)
                .unwrap()
                .info()
                .kernel(Arch::Blackwell)
                .text;
            assert_ne!(k, stock, "{}: the solution changes nothing", ex.id);
            let spec = KernelSpec::new(runner::steps::get(ex.step).unwrap(), Arch::Blackwell);
            let src = common::compile::KernelSource {
                path: format!("exercise-{}.cu", ex.id),
                text: k,
            };
            common::compile::compile(
                &src,
                common::Target::Sm100a,
                &spec.defines(common::Dtype::F16),
            )
            .unwrap_or_else(|e| panic!("{}: {e:#}", ex.id));
        }
    }

    #[test]
    fn every_timed_counterpart_is_an_exercise_of_the_book() {
        for m in crate::bench::measure::MEASURES {
            let ex = find(m.id).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(ex.step, m.step, "exercise {}", m.id);
        }
    }

    #[test]
    fn the_host_checks_hold() {
        for ex in EXERCISES {
            for c in ex.checks {
                if let Check::Host(f) = c {
                    f().unwrap_or_else(|e| panic!("{}: {e:#}", ex.id));
                }
            }
        }
    }
}
