//! The case lists of the GPU checks, as data: which runs of `runner step` each check makes and
//! what each must come to. Pure functions of the ladder, the seeded bugs and a [`EmulationSet`]
//! or [`TwinSet`], so the lists are tested here without a GPU.

use super::pool::Child;
use crate::results::Expected;
use common::mutation::{self, Mutation, MUTATIONS};
use common::step::{Arch, KernelSpec};
use common::{Dist, Dtype, Shape};
use std::time::Duration;

const fn shape(m: usize, n: usize, k: usize) -> Shape {
    Shape { m, n, k }
}

/// The emulation check's shapes: the default small shape, odd multiples of the tiles, a long K
/// and the headline shape.
const EMU_SHAPES: [Shape; 5] = [
    shape(512, 1024, 512),
    shape(256, 768, 320),
    shape(1024, 512, 2048),
    shape(256, 256, 4096),
    shape(4096, 8192, 4096),
];

/// Where the seeded bugs and the extra schedule seeds run: small, so the emulation is quick,
/// and large enough that a persistent kernel's cluster runs several tiles.
const CONTROL: Shape = shape(512, 1024, 512);

/// Small shapes with the persistent grid capped: 512x1024 gives one cluster 8 tiles (two
/// clusters 4), 256x768 one cluster 3 tiles, so both accumulator slots of steps 5-6 are reused.
const MULTI_TILE: [(Shape, u32); 3] = [
    (shape(512, 1024, 512), 1),
    (shape(512, 1024, 512), 2),
    (shape(256, 768, 320), 1),
];

/// What the emulation check runs.
#[derive(Debug, Clone)]
pub struct EmulationSet {
    pub shapes: Vec<Shape>,
    pub dtypes: Vec<Dtype>,
    pub seeds: Vec<u64>,
    /// The emulation's schedule seeds (`--emu-seed`): the first runs every shape, the others the
    /// control shape, the capped grids and every seeded bug.
    pub emu_seeds: Vec<u64>,
    pub multi_tile: Vec<(Shape, u32)>,
    /// Only these seeded bugs (empty: all).
    pub only_mutations: Vec<String>,
    /// Each seeded bug on the first step it applies to only, not on every one.
    pub first_step_only: bool,
}

impl EmulationSet {
    /// Everything: what the committed `emulation-*.json` files record.
    pub fn full() -> EmulationSet {
        EmulationSet {
            shapes: EMU_SHAPES.to_vec(),
            dtypes: vec![Dtype::F16, Dtype::Bf16],
            seeds: vec![1, 2],
            emu_seeds: vec![1, 2, 3, 4, 5],
            multi_tile: MULTI_TILE.to_vec(),
            only_mutations: Vec::new(),
            first_step_only: false,
        }
    }

    /// A reduced set that still has every kind of case: every step on the control shape in both
    /// dtypes, a capped persistent grid, and every seeded bug (on the first step it applies to)
    /// under two schedule seeds.
    pub fn quick() -> EmulationSet {
        EmulationSet {
            shapes: vec![CONTROL],
            seeds: vec![1],
            emu_seeds: vec![1, 2],
            multi_tile: vec![MULTI_TILE[1]],
            first_step_only: true,
            ..EmulationSet::full()
        }
    }
}

/// One run of the emulation check.
#[derive(Debug, Clone)]
pub struct EmulationCase {
    pub step: u32,
    pub shape: Shape,
    pub dtype: Dtype,
    pub seed: u64,
    pub emu_seed: u64,
    pub clusters: Option<u32>,
    pub mutation: Option<&'static Mutation>,
    pub expected: Expected,
}

impl EmulationCase {
    /// The case's name in logs and the summary table.
    pub fn name(&self) -> String {
        format!(
            "s{} {} {} seed{} emu{}{}{}",
            self.step,
            self.shape,
            self.dtype,
            self.seed,
            self.emu_seed,
            self.clusters
                .map_or(String::new(), |c| format!(" clusters{c}")),
            self.mutation
                .map_or(String::new(), |m| format!(" [{}]", m.name))
        )
    }

    /// `runner step` arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = step_args(self.step, self.shape, self.dtype, self.seed);
        a.extend([
            "--emulate".into(),
            "--emu-seed".into(),
            self.emu_seed.to_string(),
        ]);
        if let Some(c) = self.clusters {
            a.extend(["--clusters".into(), c.to_string()]);
        }
        match self.mutation {
            // Seeded bugs may hang by design: a short limit keeps the run short, and the runner
            // must then say so. The static checks are off: the emulation itself must catch them.
            Some(m) => a.extend([
                "--mutate".into(),
                m.name.into(),
                "--no-static-check".into(),
                "--timeout".into(),
                "5".into(),
            ]),
            None => a.extend(["--timeout".into(), "60".into()]),
        }
        a
    }

    /// The child that runs it, killed at 150 s: past the runner's own `--timeout`.
    pub fn child(&self) -> Child {
        Child {
            args: self.args(),
            limit: Duration::from_secs(150),
        }
    }
}

fn step_args(step: u32, shape: Shape, dtype: Dtype, seed: u64) -> Vec<String> {
    vec![
        "step".into(),
        step.to_string(),
        "--m".into(),
        shape.m.to_string(),
        "--n".into(),
        shape.n.to_string(),
        "--k".into(),
        shape.k.to_string(),
        "--dtype".into(),
        dtype.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--json".into(),
    ]
}

/// Whether step `n`'s kernel for `arch` keeps a persistent grid (`--clusters` caps it).
fn persistent(n: u32, arch: Arch) -> bool {
    runner::steps::get(n)
        .map(|s| KernelSpec::new(s, arch).shape().persistent)
        .unwrap_or(false)
}

/// The emulation check's cases, in the order they are reported.
pub fn emulation_cases(set: &EmulationSet) -> anyhow::Result<Vec<EmulationCase>> {
    for name in &set.only_mutations {
        mutation::find(name)?;
    }
    let Some(&first) = set.emu_seeds.first() else {
        anyhow::bail!("the emulation check needs at least one --emu-seeds value");
    };
    let steps: Vec<u32> = runner::steps::all()
        .iter()
        .map(|s| s.info().number)
        .collect();
    let mut out = Vec::new();
    let pass = |step, shape, dtype, seed, emu_seed, clusters| EmulationCase {
        step,
        shape,
        dtype,
        seed,
        emu_seed,
        clusters,
        mutation: None,
        expected: Expected::Pass,
    };
    for &step in &steps {
        for &shape in &set.shapes {
            for &dtype in &set.dtypes {
                for &seed in &set.seeds {
                    out.push(pass(step, shape, dtype, seed, first, None));
                }
            }
        }
        for &e in &set.emu_seeds[1..] {
            out.push(pass(step, CONTROL, Dtype::F16, 1, e, None));
        }
        if persistent(step, Arch::Blackwell) {
            for &(shape, clusters) in &set.multi_tile {
                for &e in &set.emu_seeds {
                    out.push(pass(step, shape, Dtype::F16, 1, e, Some(clusters)));
                }
            }
        }
    }
    for m in MUTATIONS {
        if !set.only_mutations.is_empty() && !set.only_mutations.iter().any(|n| n == m.name) {
            continue;
        }
        let on: Vec<u32> = m
            .steps
            .iter()
            .copied()
            .filter(|s| steps.contains(s))
            .take(if set.first_step_only { 1 } else { usize::MAX })
            .collect();
        for step in on {
            // A persistent kernel runs the bug with one cluster looping over every tile.
            let clusters = persistent(step, Arch::Blackwell).then_some(1);
            for &e in &set.emu_seeds {
                out.push(EmulationCase {
                    mutation: Some(m),
                    expected: match m.expect {
                        mutation::Expect::Caught => Expected::Fail,
                        mutation::Expect::Harmless => Expected::Pass,
                    },
                    ..pass(step, CONTROL, Dtype::F16, 1, e, clusters)
                });
            }
        }
    }
    Ok(out)
}

/// What the twin check runs.
#[derive(Debug, Clone)]
pub struct TwinSet {
    /// Each twin runs those its tiles divide.
    pub shapes: Vec<Shape>,
    pub dtypes: Vec<Dtype>,
    pub seeds: Vec<u64>,
    /// Other input distributions, at 1024^3 bf16 (small integers make every sum exact).
    pub dists: Vec<Dist>,
    /// Grid caps of the persistent twins, at 2048x2048x512, so each cluster loops over tiles.
    pub clusters: Vec<u32>,
}

impl TwinSet {
    pub fn full() -> TwinSet {
        TwinSet {
            shapes: EMU_SHAPES
                .into_iter()
                // K not a power of two, M and N odd multiples of the tile.
                .chain([shape(768, 1280, 192), shape(2304, 2816, 704)])
                .collect(),
            dtypes: vec![Dtype::F16, Dtype::Bf16],
            seeds: vec![1, 2],
            dists: vec![Dist::Uniform, Dist::Int],
            clusters: vec![1, 3],
        }
    }

    /// Every twin on a small and an odd shape in both dtypes, one other distribution and one
    /// capped grid with several tiles per cluster.
    pub fn quick() -> TwinSet {
        TwinSet {
            shapes: vec![shape(512, 1024, 512), shape(2304, 2816, 704)],
            seeds: vec![1],
            dists: vec![Dist::Int],
            clusters: vec![3],
            ..TwinSet::full()
        }
    }
}

/// One run of the twin check: a Hopper twin natively.
#[derive(Debug, Clone)]
pub struct TwinCase {
    pub step: u32,
    pub shape: Shape,
    pub dtype: Dtype,
    pub seed: u64,
    pub dist: Dist,
    pub clusters: Option<u32>,
    /// `runner step --stress SEED`: a run that perturbs the native schedule with this seed.
    /// Set by `check twins --stress` where the runner has that option.
    pub stress: Option<u64>,
}

impl TwinCase {
    pub fn name(&self) -> String {
        format!(
            "t{} {} {} seed{} {}{}{}",
            self.step,
            self.shape,
            self.dtype,
            self.seed,
            self.dist,
            self.clusters
                .map_or(String::new(), |c| format!(" clusters={c}")),
            self.stress
                .map_or(String::new(), |s| format!(" stress={s}"))
        )
    }

    pub fn args(&self) -> Vec<String> {
        let mut a = step_args(self.step, self.shape, self.dtype, self.seed);
        a.extend([
            "--arch".into(),
            Arch::Hopper.sm().into(),
            "--dist".into(),
            self.dist.to_string(),
            "--iters".into(),
            "0".into(),
            "--timeout".into(),
            "20".into(),
        ]);
        if let Some(c) = self.clusters {
            a.extend(["--clusters".into(), c.to_string()]);
        }
        if let Some(s) = self.stress {
            a.extend(["--stress".into(), s.to_string()]);
        }
        a
    }

    /// The child that runs it, killed at 120 s: past the runner's own `--timeout`.
    pub fn child(&self) -> Child {
        Child {
            args: self.args(),
            limit: Duration::from_secs(120),
        }
    }
}

/// The twin check's cases, in the order they are reported.
pub fn twin_cases(set: &TwinSet) -> Vec<TwinCase> {
    let mut out = Vec::new();
    for step in runner::steps::all() {
        let n = step.info().number;
        let spec = KernelSpec::new(step, Arch::Hopper);
        let persistent = spec.shape().persistent;
        let base = |shape, dtype, seed, dist, clusters| TwinCase {
            step: n,
            shape,
            dtype,
            seed,
            dist,
            clusters,
            stress: None,
        };
        // Only shapes this twin accepts (its tiles divide them; the runner refuses the others).
        let fits = |s: &Shape| spec.check_shape(*s).is_ok();
        for &shape in set.shapes.iter().filter(|s| fits(s)) {
            for &dtype in &set.dtypes {
                for &seed in &set.seeds {
                    out.push(base(shape, dtype, seed, Dist::Gaussian, None));
                }
            }
        }
        for &dist in &set.dists {
            out.push(base(shape(1024, 1024, 1024), Dtype::Bf16, 3, dist, None));
        }
        if persistent {
            for &c in &set.clusters {
                out.push(base(
                    shape(2048, 2048, 512),
                    Dtype::F16,
                    4,
                    Dist::Gaussian,
                    Some(c),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_emulation_set_is_the_committed_check() {
        let cases = emulation_cases(&EmulationSet::full()).unwrap();
        // Every step on 5 shapes x 2 dtypes x 2 seeds, 4 more schedules of the control shape;
        // the persistent steps (4-6) 3 capped grids x 5 schedules.
        let steps = runner::steps::all().len();
        let persistent = (0..steps as u32)
            .filter(|&n| persistent(n, Arch::Blackwell))
            .count();
        assert_eq!(persistent, 3, "steps 4-6 keep a persistent grid");
        let runs = cases.iter().filter(|c| c.mutation.is_none()).count();
        assert_eq!(runs, steps * (20 + 4) + persistent * 15);
        // Every seeded bug on every step it applies to, under every schedule seed.
        let bugs: usize = MUTATIONS.iter().map(|m| m.steps.len() * 5).sum();
        assert_eq!(cases.len() - runs, bugs);
        for m in MUTATIONS {
            let mine: Vec<_> = cases
                .iter()
                .filter(|c| c.mutation.is_some_and(|x| x.name == m.name))
                .collect();
            let seeds: std::collections::BTreeSet<u64> = mine.iter().map(|c| c.emu_seed).collect();
            assert_eq!(seeds.len(), 5, "{} under every schedule", m.name);
            let want = match m.expect {
                mutation::Expect::Caught => Expected::Fail,
                mutation::Expect::Harmless => Expected::Pass,
            };
            assert!(mine.iter().all(|c| c.expected == want), "{}", m.name);
        }
        // A seeded bug of a persistent step runs with one cluster over every tile.
        assert!(cases
            .iter()
            .filter(|c| c.mutation.is_some() && c.step >= 4)
            .all(|c| c.clusters == Some(1)));
    }

    #[test]
    fn the_quick_emulation_set_keeps_every_kind_of_case() {
        let cases = emulation_cases(&EmulationSet::quick()).unwrap();
        for m in MUTATIONS {
            assert_eq!(
                cases
                    .iter()
                    .filter(|c| c.mutation.is_some_and(|x| x.name == m.name))
                    .count(),
                2,
                "{}: one step, two schedules",
                m.name
            );
        }
        assert!(cases.iter().any(|c| c.dtype == Dtype::Bf16));
        assert!(cases
            .iter()
            .any(|c| c.mutation.is_none() && c.clusters.is_some()));
        assert!(cases.len() < 70, "{} cases", cases.len());
    }

    #[test]
    fn mutation_cases_carry_their_flags_and_unknown_ones_are_refused() {
        let set = EmulationSet {
            only_mutations: vec!["wrong-parity".into()],
            ..EmulationSet::quick()
        };
        let cases = emulation_cases(&set).unwrap();
        let bug = cases.iter().find(|c| c.mutation.is_some()).unwrap();
        let args = bug.args().join(" ");
        assert!(
            args.contains("--mutate wrong-parity --no-static-check --timeout 5"),
            "{args}"
        );
        assert!(args.contains("--emulate --emu-seed "), "{args}");
        assert!(args.starts_with(&format!("step {} --m 512 --n 1024 --k 512", bug.step)));
        let set = EmulationSet {
            only_mutations: vec!["nope".into()],
            ..EmulationSet::quick()
        };
        assert!(emulation_cases(&set).is_err());
    }

    #[test]
    fn the_twin_cases_fit_their_tiles_and_cap_the_persistent_grids() {
        let cases = twin_cases(&TwinSet::full());
        for c in &cases {
            let k = KernelSpec::new(runner::steps::get(c.step).unwrap(), Arch::Hopper).shape();
            assert!(
                KernelSpec::new(runner::steps::get(c.step).unwrap(), Arch::Hopper)
                    .check_shape(c.shape)
                    .is_ok(),
                "{}",
                c.name()
            );
            assert_eq!(
                c.clusters.is_some(),
                k.persistent && c.shape == shape(2048, 2048, 512)
            );
            assert!(c.args().join(" ").contains("--arch sm_90a"));
        }
        // Every twin runs, each in both dtypes, the odd shapes and other distributions.
        for n in 0..runner::steps::all().len() as u32 {
            let mine: Vec<_> = cases.iter().filter(|c| c.step == n).collect();
            assert!(mine.iter().any(|c| c.dtype == Dtype::Bf16), "twin {n}");
            assert!(mine.iter().any(|c| c.dist == Dist::Int), "twin {n}");
        }
        assert!(cases.iter().any(|c| c.shape == shape(2304, 2816, 704)));
        assert!(cases.iter().filter(|c| c.clusters == Some(3)).count() >= 3);
        let stressed = TwinCase {
            stress: Some(7),
            ..cases[0].clone()
        };
        assert!(stressed.args().join(" ").ends_with("--stress 7"));
        assert!(twin_cases(&TwinSet::quick()).len() < cases.len());
    }
}
