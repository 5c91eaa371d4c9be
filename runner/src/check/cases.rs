//! The case lists of the GPU checks, as data: which runs of `runner step` each check makes and
//! what each must come to. Pure functions of the ladder, the seeded bugs and an [`EmulationSet`],
//! [`TwinSet`] or [`StressSet`], so the lists are tested here without a GPU.

use crate::contenders::{Contender, CONTENDERS};
use crate::pool::Child;
use crate::results::{Expected, StressExpected};
use anyhow::Result;
use common::mutation::{self, Expect, Mutation, TwinCatch, TwinMutation, MUTATIONS};
use common::run::RunOptions;
use common::step::{Arch, KernelSpec, Step};
use common::stress::{self, StressCase};
use common::KernelSource;
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
    /// Where the seeded bugs, the extra schedule seeds and the other distributions run.
    pub control: Shape,
    /// Input distributions besides the default (gaussian): every step runs each on the control
    /// shape.
    pub dists: Vec<Dist>,
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
            control: CONTROL,
            dists: Vec::new(),
        }
    }

    /// What the CPU simulator checks (`runner check sim`), and the GPU emulation over the same
    /// cases for the agreement (`runner check emulation --sim-cases`): small shapes a CPU runs
    /// in seconds (one with K of five k-blocks), both dtypes, every input distribution, persistent
    /// grids capped so one cluster runs eight tiles or two clusters three, and every seeded bug on
    /// every step it applies to, each under two schedule seeds. The control shape gives a
    /// persistent kernel's one cluster three tiles, so steps 5 and 6 reuse an accumulator slot;
    /// 512x768 (six tiles, two clusters) does the same in both dtypes.
    pub fn simulator() -> EmulationSet {
        EmulationSet {
            shapes: vec![shape(256, 256, 512), shape(512, 768, 320)],
            dtypes: vec![Dtype::F16, Dtype::Bf16],
            seeds: vec![1],
            emu_seeds: vec![1, 2],
            multi_tile: vec![(shape(512, 1024, 512), 1), (shape(256, 768, 320), 2)],
            only_mutations: Vec::new(),
            first_step_only: false,
            control: shape(256, 768, 512),
            dists: Dist::ALL
                .into_iter()
                .filter(|&d| d != Dist::Gaussian)
                .collect(),
        }
    }

    /// The simulator's set with one shape, one schedule seed, and each seeded bug on the first
    /// step it applies to: what CI runs.
    pub fn simulator_quick() -> EmulationSet {
        EmulationSet {
            shapes: vec![shape(256, 256, 512)],
            emu_seeds: vec![1],
            multi_tile: vec![(shape(512, 1024, 512), 1)],
            first_step_only: true,
            ..EmulationSet::simulator()
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
    pub dist: Dist,
    pub mutation: Option<&'static Mutation>,
    pub expected: Expected,
}

impl EmulationCase {
    /// The case's name in logs and the summary table.
    pub fn name(&self) -> String {
        format!(
            "s{} {} {} seed{} emu{}{}{}{}",
            self.step,
            self.shape,
            self.dtype,
            self.seed,
            self.emu_seed,
            self.clusters
                .map_or(String::new(), |c| format!(" clusters{c}")),
            if self.dist == Dist::Gaussian {
                String::new()
            } else {
                format!(" {}", self.dist)
            },
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
        if self.dist != Dist::Gaussian {
            a.extend(["--dist".into(), self.dist.to_string()]);
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
        .map(|s| s.info().kernel(arch).launch.schedule().fills_the_gpu())
        .unwrap_or(false)
}

/// Whether step `n`'s Blackwell kernel uses cluster launch control (`--clusters` caps how many
/// clusters are resident on the simulator).
fn launch_control(n: u32) -> bool {
    runner::steps::get(n)
        .map(|s| {
            s.info().kernel(Arch::Blackwell).launch.schedule()
                == common::step::Schedule::ClusterLaunchControl
        })
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
    let control = set.control;
    let pass = |step, shape, dtype, seed, emu_seed, clusters| EmulationCase {
        step,
        shape,
        dtype,
        seed,
        emu_seed,
        clusters,
        dist: Dist::Gaussian,
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
            out.push(pass(step, control, Dtype::F16, 1, e, None));
        }
        for &dist in &set.dists {
            out.push(EmulationCase {
                dist,
                ..pass(step, control, Dtype::F16, 1, first, None)
            });
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
            .steps(&runner::steps::infos(), Arch::Blackwell)
            .into_iter()
            .filter(|s| steps.contains(s))
            .take(if set.first_step_only { 1 } else { usize::MAX })
            .collect();
        for step in on {
            // A persistent kernel runs the bug with one cluster looping over every tile; under
            // cluster launch control one cluster runs at a time (the simulator's residency, the
            // emulation stand-in's cap), which then cancels every other launch and computes every
            // tile.
            let clusters = (persistent(step, Arch::Blackwell) || launch_control(step)).then_some(1);
            for &e in &set.emu_seeds {
                out.push(EmulationCase {
                    mutation: Some(m),
                    expected: match m.expect {
                        mutation::Expect::Caught => Expected::Fail,
                        mutation::Expect::Harmless => Expected::Pass,
                    },
                    ..pass(step, control, Dtype::F16, 1, e, clusters)
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
}

impl TwinCase {
    pub fn name(&self) -> String {
        format!(
            "t{} {} {} seed{} {}{}",
            self.step,
            self.shape,
            self.dtype,
            self.seed,
            self.dist,
            self.clusters
                .map_or(String::new(), |c| format!(" clusters={c}"))
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
        let persistent = spec.shape().schedule.fills_the_gpu();
        let base = |shape, dtype, seed, dist, clusters| TwinCase {
            step: n,
            shape,
            dtype,
            seed,
            dist,
            clusters,
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

// ---------------------------------------------------------------------------------------------
// the twins' stress pass (`runner check twins --stress`)

/// What the stress pass runs.
#[derive(Debug, Clone)]
pub struct StressSet {
    /// The stress seeds (`--stress SEED`) every stressed case runs under.
    pub seeds: Vec<u64>,
    /// Each stock twin at every shape of [`common::stress::cases`]; else only at the shape its
    /// mutations run at (the capped grid of a persistent twin).
    pub every_stock_shape: bool,
    /// Beside each stress-caught mutation, a plain run (no stress) for the record: where it
    /// passes and a stressed one does not, the bug is stress-only.
    pub plain: bool,
}

impl StressSet {
    pub fn full() -> StressSet {
        StressSet {
            seeds: stress::CHECK_SEEDS.to_vec(),
            every_stock_shape: true,
            plain: true,
        }
    }

    /// Every stock twin and every twin mutation under every seed, without the plain runs and
    /// the stock twins' second shape.
    pub fn quick() -> StressSet {
        StressSet {
            every_stock_shape: false,
            plain: false,
            ..StressSet::full()
        }
    }
}

/// How a case of the stress pass runs its [`StressCase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StressRun {
    /// Built with the case's stress seed, as [`stress_options`] makes it.
    Stressed,
    /// The same without stress (the seed unused), for the record.
    Plain,
    /// Without stress and with the static checks on: the twin's static check must refuse the
    /// mutation, naming its rule.
    Refusal,
}

/// One run of the stress pass: a [`StressCase`] of `common::stress` (or of a statically caught
/// twin mutation, which that list leaves out), how it runs and what it must come to.
#[derive(Debug, Clone)]
pub struct StressCaseRun {
    pub case: StressCase,
    pub run: StressRun,
    pub expected: StressExpected,
    /// A stress control ([`STRESS_CONTROLS`]) run in place of the stock twin.
    pub contender: Option<&'static Contender>,
}

/// The stress controls: contenders that keep more in flight than their stock twin, correctly,
/// and must verify under every seed and shape like it. `6-wait2` keeps two wgmma groups in
/// flight and releases the ring slot two k-blocks back, which no pending group reads: a twin
/// check that fired on it would fire on a correct kernel.
pub const STRESS_CONTROLS: &[&str] = &["6-wait2"];

/// The options every stress child starts from, before [`stress_options`]: f16 inputs of
/// seed 5 and a short hang limit for a seeded bug (one may hang by design, and the runner must
/// then say so, exit 124).
fn stress_base(mutation: bool) -> RunOptions {
    RunOptions {
        dtype: Dtype::F16,
        dist: Dist::Gaussian,
        seed: 5,
        timeout: Duration::from_secs(if mutation { 15 } else { 30 }),
        ..RunOptions::default()
    }
}

impl StressCaseRun {
    pub fn mutation(&self) -> Option<&'static TwinMutation> {
        self.case.mutation.and_then(mutation::find_twin)
    }

    /// `t5-2048x2048x512-c2-s3-twin-no-out-empty-wait`; `-plain-` or `-static-` in place of
    /// the seed for a run without stress.
    pub fn name(&self) -> String {
        let c = &self.case;
        let mut s = format!("t{}-{}", c.step, c.shape);
        if let Some(n) = c.clusters {
            s.push_str(&format!("-c{n}"));
        }
        s.push_str(&match self.run {
            StressRun::Stressed => format!("-s{}", c.seed),
            StressRun::Plain => "-plain".into(),
            StressRun::Refusal => "-static".into(),
        });
        if let Some(c) = self.contender {
            s.push('-');
            s.push_str(c.name);
        }
        if let Some(m) = c.mutation {
            s.push('-');
            s.push_str(m);
        }
        s
    }

    /// The run options of the child: [`stress_options`] over [`stress_base`], less the stress
    /// for a plain run, with the static checks on for a refusal.
    pub fn options(&self) -> Result<RunOptions> {
        let step = runner::steps::get(self.case.step)?;
        let mut o = stress_options(&self.case, step, &stress_base(self.case.mutation.is_some()))?;
        if let Some(c) = self.contender {
            o.source = Some(c.source()?);
        }
        match self.run {
            StressRun::Stressed => {}
            StressRun::Plain => o.stress = None,
            StressRun::Refusal => {
                o.stress = None;
                o.static_check = true;
            }
        }
        Ok(o)
    }

    /// `runner step` arguments that make [`Self::options`] (a test parses them back): the
    /// mutation by name (`--mutate`), which the child applies to the same twin.
    pub fn args(&self) -> Result<Vec<String>> {
        let o = self.options()?;
        let shape = o.shape.unwrap_or(Shape::DEFAULT);
        let mut a = step_args(self.case.step, shape, o.dtype, o.seed);
        a.extend([
            "--arch".into(),
            Arch::Hopper.sm().into(),
            "--dist".into(),
            o.dist.to_string(),
            "--iters".into(),
            o.iters.to_string(),
            "--timeout".into(),
            o.timeout.as_secs().to_string(),
        ]);
        if let Some(c) = o.clusters {
            a.extend(["--clusters".into(), c.to_string()]);
        }
        if let Some(s) = o.stress {
            a.extend(["--stress".into(), s.to_string()]);
        }
        if let Some(m) = self.case.mutation {
            a.extend(["--mutate".into(), m.into()]);
        }
        if let Some(c) = self.contender {
            // The child runs in a scratch folder: the path must not be relative.
            a.extend(["--kernel".into(), c.file()?.display().to_string()]);
            for p in c.params {
                a.extend(["--param".into(), p.to_string()]);
            }
        }
        if !o.static_check {
            a.push("--no-static-check".into());
        }
        Ok(a)
    }

    /// The child that runs it, killed at 90 s: past the runner's own `--timeout`.
    pub fn child(&self) -> Result<Child> {
        Ok(Child {
            args: self.args()?,
            limit: Duration::from_secs(90),
        })
    }
}

/// The run options of a stress case over `base` (dtype, timeout, ...): its shape, grid cap and
/// stress seed, no timing, and for a mutation the edited twin with the static checks off.
pub fn stress_options(case: &StressCase, step: &dyn Step, base: &RunOptions) -> Result<RunOptions> {
    let mut o = base.clone();
    o.shape = Some(case.shape);
    o.clusters = case.clusters;
    o.stress = Some(case.seed);
    o.iters = 0;
    o.trace_clusters = None;
    if let Some(name) = case.mutation {
        let Some(t) = mutation::find_twin(name) else {
            anyhow::bail!("{name:?} is not a twin mutation");
        };
        let source = step.info().kernel_source(Arch::Hopper);
        o.source = Some(KernelSource {
            text: t.mutation.apply(&source.text)?,
            path: source.path,
        });
        o.static_check = false;
    }
    Ok(o)
}

/// The stress pass, in the order it is reported: [`common::stress::cases`] over every twin
/// (the stock twins, each to verify under every seed, and the stress-caught twin mutations,
/// each to be caught under every seed on each twin), a plain run beside each of those
/// mutations; then the stress controls ([`STRESS_CONTROLS`]) under every seed; then each
/// statically caught twin mutation on each twin it applies to: refused by the static check, and
/// under every seed with the check off, for the record.
pub fn stress_cases(set: &StressSet) -> Vec<StressCaseRun> {
    let steps = &runner::steps::infos();
    // The last of a twin's stress shapes: many tiles per cluster where the twin loops.
    let last_shape = |step: u32| {
        steps
            .iter()
            .find(|s| s.number == step)
            .and_then(|s| stress::shapes(s).pop())
            .unwrap_or((Shape::DEFAULT, None))
    };
    let expected = |c: &StressCase| match (c.mutation, c.expect) {
        (None, _) | (Some(_), Expect::Harmless) => StressExpected::Pass,
        (Some(_), Expect::Caught) => StressExpected::Caught,
    };
    let mut out = Vec::new();
    let mut plain_done = Vec::new();
    for case in stress::cases(steps, &set.seeds) {
        if case.mutation.is_none()
            && !set.every_stock_shape
            && (case.shape, case.clusters) != last_shape(case.step)
        {
            continue;
        }
        if let Some(m) = case.mutation.filter(|_| set.plain) {
            // One plain run per mutation, twin and shape, before its stressed ones.
            let key = (m, case.step, case.shape);
            if !plain_done.contains(&key) {
                plain_done.push(key);
                out.push(StressCaseRun {
                    case: case.clone(),
                    run: StressRun::Plain,
                    expected: StressExpected::Record,
                    contender: None,
                });
            }
        }
        out.push(StressCaseRun {
            expected: expected(&case),
            case,
            run: StressRun::Stressed,
            contender: None,
        });
    }
    // The controls, under every seed at their stock twin's stress shapes.
    for c in CONTENDERS
        .iter()
        .filter(|c| STRESS_CONTROLS.contains(&c.name))
    {
        let Some(&info) = steps.iter().find(|s| s.number == c.step) else {
            continue;
        };
        let step = info.number;
        for &seed in &set.seeds {
            for case in stress::cases(&[info], &[seed])
                .into_iter()
                .filter(|k| k.mutation.is_none())
                .filter(|k| set.every_stock_shape || (k.shape, k.clusters) == last_shape(step))
            {
                out.push(StressCaseRun {
                    case,
                    run: StressRun::Stressed,
                    expected: StressExpected::Pass,
                    contender: Some(c),
                });
            }
        }
    }
    for t in mutation::TWIN_MUTATIONS
        .iter()
        .filter(|t| t.caught == TwinCatch::Static)
    {
        for step in steps.iter().filter(|s| t.applies_to(s)).map(|s| s.number) {
            let (shape, clusters) = last_shape(step);
            let case = |seed| StressCase {
                step,
                shape,
                clusters,
                seed,
                mutation: Some(t.mutation.name),
                expect: t.mutation.expect,
            };
            out.push(StressCaseRun {
                case: case(set.seeds.first().copied().unwrap_or(0)),
                run: StressRun::Refusal,
                expected: StressExpected::Refused,
                contender: None,
            });
            for &seed in &set.seeds {
                out.push(StressCaseRun {
                    case: case(seed),
                    run: StressRun::Stressed,
                    expected: StressExpected::Record,
                    contender: None,
                });
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
        // the persistent steps (as their crates declare) 3 capped grids x 5 schedules.
        let steps = runner::steps::all().len();
        let persistent = runner::steps::infos()
            .iter()
            .filter(|s| super::persistent(s.number, Arch::Blackwell))
            .count();
        assert!(persistent >= 1, "the check covers a capped persistent grid");
        let runs = cases.iter().filter(|c| c.mutation.is_none()).count();
        assert_eq!(runs, steps * (20 + 4) + persistent * 15);
        // Every seeded bug on every step it applies to, under every schedule seed.
        let bugs: usize = MUTATIONS
            .iter()
            .map(|m| m.steps(&runner::steps::infos(), Arch::Blackwell).len() * 5)
            .sum();
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
            .filter(|c| c.mutation.is_some() && super::persistent(c.step, Arch::Blackwell))
            .all(|c| c.clusters == Some(1)));
    }

    #[test]
    fn the_simulator_set_runs_persistent_kernels_over_several_tiles_in_both_dtypes() {
        // The simulator's default grid cap is two clusters: six tiles give each three, so
        // steps 5 and 6 reuse an accumulator slot, in f16 and in bf16.
        let cases = emulation_cases(&EmulationSet::simulator()).unwrap();
        for s in runner::steps::all() {
            let k = KernelSpec::new(s, Arch::Blackwell).shape();
            if !k.schedule.fills_the_gpu() {
                continue;
            }
            let step = s.info().number;
            for dtype in [Dtype::F16, Dtype::Bf16] {
                assert!(
                    cases.iter().any(|c| c.step == step
                        && c.mutation.is_none()
                        && c.dtype == dtype
                        && c.clusters.is_none()
                        && k.num_tiles(c.shape) >= 3 * common::simulate::DEFAULT_CLUSTERS),
                    "step {step} {dtype}"
                );
            }
        }
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
        // About ten cases a step (its shape, a capped grid, its seeded bugs twice).
        assert!(
            cases.len() < 10 * runner::steps::all().len(),
            "{} cases",
            cases.len()
        );
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
                k.schedule.fills_the_gpu() && c.shape == shape(2048, 2048, 512)
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
        assert!(twin_cases(&TwinSet::quick()).len() < cases.len());
    }

    /// The stress pass over every twin: `common::stress::cases` for the stock twins and the
    /// stress-caught mutations, plus the static ones; each under every seed.
    #[test]
    fn the_stress_pass_runs_every_stock_twin_and_twin_mutation_under_every_seed() {
        let set = StressSet::full();
        assert_eq!(set.seeds, common::stress::CHECK_SEEDS);
        let cases = stress_cases(&set);
        let twins = runner::steps::all().len() as u32;
        let n_persistent = runner::steps::infos()
            .iter()
            .filter(|s| persistent(s.number, Arch::Hopper))
            .count();
        assert!(
            n_persistent >= 1,
            "the pass covers a capped persistent grid"
        );
        let seeds = set.seeds.len();
        // Stock: every twin at the default shape, the persistent ones at the capped grid too,
        // under every seed; each must verify.
        let stock: Vec<_> = cases
            .iter()
            .filter(|c| c.case.mutation.is_none() && c.contender.is_none())
            .collect();
        assert_eq!(stock.len(), (twins as usize + n_persistent) * seeds);
        // The controls: 6-wait2 where step 6's twin runs, under every seed; each must verify.
        let controls: Vec<_> = cases.iter().filter(|c| c.contender.is_some()).collect();
        assert_eq!(controls.len(), STRESS_CONTROLS.len() * 2 * seeds);
        for c in &controls {
            let k = c.contender.unwrap();
            assert!(STRESS_CONTROLS.contains(&k.name));
            assert_eq!(c.case.step, k.step);
            assert!(c.case.mutation.is_none() && c.expected == StressExpected::Pass);
            assert!(c.name().ends_with(k.name), "{}", c.name());
        }
        assert!(stock
            .iter()
            .all(|c| c.run == StressRun::Stressed && c.expected == StressExpected::Pass));
        for n in 0..twins {
            for &seed in &set.seeds {
                assert!(
                    stock
                        .iter()
                        .any(|c| c.case.step == n && c.case.seed == seed),
                    "twin {n} seed {seed}"
                );
            }
        }
        // Every twin mutation on every twin it applies to, under every seed.
        for t in mutation::TWIN_MUTATIONS {
            let m = t.mutation.name;
            for n in t.mutation.steps(&runner::steps::infos(), Arch::Hopper) {
                let mine: Vec<_> = cases
                    .iter()
                    .filter(|c| c.case.mutation == Some(m) && c.case.step == n)
                    .collect();
                let (others, want) = match t.caught {
                    TwinCatch::Stress => (StressRun::Plain, StressExpected::Caught),
                    TwinCatch::Static => (StressRun::Refusal, StressExpected::Record),
                };
                // A stress-caught bug at the default shape and, on a persistent twin, where a
                // store warp is slow against a short main loop; a static one where the stock
                // twin's last stress shape is.
                let shapes: Vec<Shape> = match (t.caught, persistent(n, Arch::Hopper)) {
                    (TwinCatch::Stress, true) => vec![Shape::DEFAULT, stress::PERSISTENT_SHAPE],
                    (_, true) => vec![stress::PERSISTENT_SHAPE],
                    (_, false) => vec![Shape::DEFAULT],
                };
                assert!(mine.iter().all(|c| shapes.contains(&c.case.shape)), "{m}");
                for shape in &shapes {
                    let at: Vec<_> = mine.iter().filter(|c| &c.case.shape == shape).collect();
                    let stressed: Vec<u64> = at
                        .iter()
                        .filter(|c| c.run == StressRun::Stressed)
                        .map(|c| c.case.seed)
                        .collect();
                    assert_eq!(stressed, set.seeds, "{m} on twin {n} at {shape}");
                    assert_eq!(
                        at.iter().filter(|c| c.run == others).count(),
                        1,
                        "{m} on twin {n} at {shape}: {others:?} runs"
                    );
                }
                assert!(mine
                    .iter()
                    .filter(|c| c.run == StressRun::Stressed)
                    .all(|c| c.expected == want));
            }
        }
        let names: std::collections::BTreeSet<String> = cases.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), cases.len(), "every case has its own name");
        assert!(names.contains("t5-2048x2048x512-c2-s11-twin-no-out-empty-wait"));
        assert!(names.contains("t5-2048x2048x512-c2-plain-twin-no-out-empty-wait"));
        assert!(names.contains("t0-4096x8192x4096-static-twin-wgmma-wait-shallow"));
        // The quick pass: no plain runs and one shape per stock twin, every mutation still
        // under every seed.
        let quick = stress_cases(&StressSet::quick());
        assert!(quick.iter().all(|c| c.run != StressRun::Plain));
        assert_eq!(
            quick
                .iter()
                .filter(|c| c.case.mutation.is_none() && c.contender.is_none())
                .count(),
            twins as usize * seeds
        );
        assert_eq!(
            quick.iter().filter(|c| c.contender.is_some()).count(),
            STRESS_CONTROLS.len() * seeds
        );
        let muts = |v: &[StressCaseRun]| {
            v.iter()
                .filter(|c| c.case.mutation.is_some() && c.run == StressRun::Stressed)
                .count()
        };
        assert_eq!(muts(&quick), muts(&cases));
    }

    /// What each child is asked is what `stress_options` says: its arguments, parsed back
    /// by `runner step`'s own parser, give the same run options and the same mutation.
    #[test]
    fn each_stress_child_is_asked_for_its_cases_options() {
        use clap::Parser;
        let mut kinds = std::collections::BTreeSet::new();
        for c in stress_cases(&StressSet::full()) {
            let want = c.options().unwrap();
            let args = c.args().unwrap();
            let cli = crate::cli::Cli::try_parse_from(
                std::iter::once("runner".to_string()).chain(args.iter().cloned()),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
            let crate::cli::Command::Step(a) = cli.command else {
                panic!("{}: not a step command", args.join(" "))
            };
            let (req, got) = crate::cli::step::request(*a).unwrap();
            let what = c.name();
            assert_eq!(req.step.info().number, c.case.step, "{what}");
            assert_eq!(req.arch, Some(Arch::Hopper), "{what}");
            assert_eq!(req.mutate.as_deref(), c.case.mutation, "{what}");
            assert_eq!(got.shape, want.shape, "{what}");
            assert_eq!(got.shape, Some(c.case.shape), "{what}");
            assert_eq!(got.clusters, want.clusters, "{what}");
            assert_eq!(got.stress, want.stress, "{what}");
            assert_eq!(got.static_check, want.static_check, "{what}");
            assert_eq!(
                (got.dtype, got.dist, got.seed, got.iters, got.timeout),
                (want.dtype, want.dist, want.seed, want.iters, want.timeout),
                "{what}"
            );
            assert_eq!(got.trace_clusters, None, "{what}");
            assert_eq!(want.iters, 0, "{what}: verified, not timed");
            // The mutation the child applies (--mutate) is the source the case's options hold.
            // A control's kernel (--kernel) is the source its options hold.
            assert_eq!(
                req.kernel_file,
                c.contender.map(|k| k.file().unwrap()),
                "{what}"
            );
            // The child runs in a scratch folder: its kernel file is named absolutely and is there.
            if let Some(f) = &req.kernel_file {
                assert!(f.is_absolute() && f.is_file(), "{what}: {}", f.display());
            }
            match (c.case.mutation, &want.source) {
                (None, Some(src)) if c.contender.is_some() => {
                    let k = c.contender.unwrap();
                    assert_eq!(k.source().unwrap().text, src.text, "{what}");
                }
                (Some(m), Some(src)) => {
                    let stock = runner::steps::get(c.case.step)
                        .unwrap()
                        .info()
                        .kernel_source(Arch::Hopper);
                    let t = mutation::find_twin(m).unwrap();
                    assert_eq!(t.mutation.apply(&stock.text).unwrap(), src.text, "{what}");
                }
                (None, None) => {}
                _ => panic!("{what}: a mutation and a source go together"),
            }
            match c.run {
                StressRun::Stressed => assert_eq!(got.stress, Some(c.case.seed), "{what}"),
                StressRun::Plain | StressRun::Refusal => assert_eq!(got.stress, None, "{what}"),
            }
            // Stock twins and refusals keep the static check; stressed mutations run without.
            assert_eq!(
                got.static_check,
                c.case.mutation.is_none() || c.run == StressRun::Refusal,
                "{what}"
            );
            kinds.insert(format!("{:?}", c.run));
        }
        assert_eq!(kinds.len(), 3, "{kinds:?}");
    }
}
