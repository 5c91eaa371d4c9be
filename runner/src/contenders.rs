//! Named bench contenders: kernels that are not steps of the ladder but are worth timing beside
//! it (`runner bench --contenders 5-pingpong`), each a variant of one step's kernel that runs
//! under that step's host plan with some parameters overridden. A contender is either a whole
//! kernel (`.cu`) or, better, edits of the stock kernel it varies (`.toml`, a
//! [`common::edits::EditFile`]), so that it follows that kernel's fixes. Their sources are
//! embedded, so the runner binary times them without the repository at hand. The bench times
//! them; `runner check twins` verifies them beside the stock twins.

use anyhow::{anyhow, bail, Context, Result};
use common::compile::KernelSource;
use common::edits;
use common::step::{Arch, KernelSpec};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy)]
pub struct Contender {
    /// What the bench calls it, in its table and its JSON (`kernel`).
    pub name: &'static str,
    /// The step whose host plan it runs under.
    pub step: u32,
    pub arch: Arch,
    /// The file in the repository, named in compiler messages: a kernel (`.cu`) or edits of a
    /// stock kernel (`.toml`).
    pub path: &'static str,
    pub text: &'static str,
    /// Overrides of the step's parameters, as `--param` takes them.
    pub params: &'static [&'static str],
    pub description: &'static str,
}

pub const CONTENDERS: &[Contender] = &[
    Contender {
        name: "4-snake",
        step: 4,
        arch: Arch::Hopper,
        path: "exercises/hopper/step4_snake_sm90.toml",
        text: include_str!("../../exercises/hopper/step4_snake_sm90.toml"),
        params: &[],
        description:
            "step 4's twin visiting its tiles in step 6's snake order (bands 8 tiles wide across M)",
    },
    Contender {
        name: "5-pingpong",
        step: 5,
        arch: Arch::Hopper,
        path: "exercises/hopper/step5_pingpong_sm90.toml",
        text: include_str!("../../exercises/hopper/step5_pingpong_sm90.toml"),
        params: &["tile_m=64"],
        description: "step 5's twin as ping-pong: the consumers take turns on whole 64 x 256 tiles",
    },
    Contender {
        name: "6-l2hints",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_l2hints_sm90.toml",
        text: include_str!("../../exercises/hopper/step6_l2hints_sm90.toml"),
        params: &[],
        description:
            "step 6's twin with L2 eviction hints: the band's operand evict_last, C evict_first",
    },
    Contender {
        name: "6-streamk",
        step: 6,
        arch: Arch::Hopper,
        // Step 7's twin itself, under step 6's host plan (the same plan): the contender that
        // became a step, kept under its name so that the committed benches stay comparable.
        path: "steps/step7_last_wave/src/kernel_sm90.cu",
        text: include_str!("../../steps/step7_last_wave/src/kernel_sm90.cu"),
        params: &[],
        description: "step 7's twin as a step-6 contender: step 6's twin with a stream-K tail, the last, partial wave's k-blocks split evenly over every cluster where that saves more than the fix-up costs and at least a fifth of a tile (8192^3, not 4096x8192x4096)",
    },
    Contender {
        name: "6-hilbert",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_hilbert_sm90.toml",
        text: include_str!("../../exercises/hopper/step6_hilbert_sm90.toml"),
        params: &[],
        description: "step 6's twin visiting its tiles along a Hilbert curve (power-of-two squares) instead of the snake of bands",
    },
    Contender {
        name: "6-waves",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_waves_sm90.toml",
        text: include_str!("../../exercises/hopper/step6_waves_sm90.toml"),
        params: &[],
        description: "step 6's twin on a grid of whole waves: as few clusters as take the same number of waves",
    },
    Contender {
        name: "6-wait2",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_wait2_sm90.toml",
        text: include_str!("../../exercises/hopper/step6_wait2_sm90.toml"),
        params: &[],
        description: "step 6's twin with two wgmma groups in flight (wait_group 2), one ring slot less for the producer",
    },
    Contender {
        name: "6-workspace",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_workspace_sm90.toml",
        text: include_str!("../../exercises/hopper/step6_workspace_sm90.toml"),
        params: &[],
        description: "a control for 6-streamk: step 6's twin plus 6-streamk's 17 MB workspace, unused",
    },
];

pub fn find(name: &str) -> Result<&'static Contender> {
    match CONTENDERS.iter().find(|c| c.name == name) {
        Some(c) => Ok(c),
        None => bail!(
            "there is no contender {name:?}; contenders: {}",
            CONTENDERS
                .iter()
                .map(|c| format!("{} ({})", c.name, c.description))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl Contender {
    /// The step's kernel spec with this contender's parameters.
    pub fn spec(&self) -> Result<KernelSpec> {
        let mut spec = KernelSpec::new(runner::steps::get(self.step)?, self.arch);
        let overrides: Vec<String> = self.params.iter().map(|p| p.to_string()).collect();
        if let Err(e) = spec.params.apply(&overrides) {
            bail!("contender {}: {e}", self.name);
        }
        Ok(spec)
    }

    /// The file as a child process started in another folder can read it (`--kernel`): the
    /// checkout's copy, by its absolute path, or with no checkout the built-in text, written to
    /// a folder of this process's own in the system's temporary folder.
    pub fn file(&self) -> Result<PathBuf> {
        if let Some(root) = common::project::root() {
            return Ok(root.join(self.path));
        }
        let dir = std::env::temp_dir().join(format!("workbook-contenders-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let name = Path::new(self.path)
            .file_name()
            .ok_or_else(|| anyhow!("contender {}: no file name in {}", self.name, self.path))?;
        let file = dir.join(name);
        std::fs::write(&file, self.text)
            .with_context(|| format!("cannot write {}", file.display()))?;
        Ok(file)
    }

    /// The kernel: the file itself, or its edits applied to the stock kernel they name.
    pub fn source(&self) -> Result<KernelSource> {
        if self.path.ends_with(".toml") {
            edits::edited_kernel(self.path, self.text, runner::steps::stock_kernel)
        } else {
            Ok(KernelSource {
                path: self.path.to_string(),
                text: self.text.to_string(),
            })
        }
    }
}

/// A `--kernel FILE.toml` given for step `step` (and, where the command checks one kernel only,
/// `arch`): refused up front, naming both, when its edits are of another kernel; they would be
/// compiled under this step's plan and fail far from the cause. Any other file passes.
/// `read` reads the user's file (the caller's bounded reader, `common::compile::read_kernel`).
pub fn check_edit_target(
    path: &Path,
    read: impl FnOnce(&Path) -> Result<String>,
    step: u32,
    arch: Option<Arch>,
) -> Result<()> {
    if path.extension().is_none_or(|e| e != "toml") {
        return Ok(());
    }
    let shown = path.display();
    let text = read(path)?;
    let file: edits::EditFile = toml::from_str(&text).with_context(|| shown.to_string())?;
    let edits = file.arch().with_context(|| shown.to_string())?;
    if file.step != step {
        bail!(
            "{shown} edits step {}'s {}, not step {step}'s: give it to step {} (runner step {} --kernel {shown})",
            file.step,
            edits.name(),
            file.step,
            file.step
        );
    }
    if let Some(arch) = arch.filter(|&a| a != edits) {
        bail!(
            "{shown} edits step {step}'s {}; this checks its {}",
            edits.name(),
            arch.name()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::compile::{compile, CompileError, Target};
    use common::Dtype;

    #[test]
    fn contenders_are_found_by_name_and_plan_under_their_step() {
        let c = find("5-pingpong").expect("known");
        let spec = c.spec().expect("its parameters are the step's");
        assert_eq!(spec.params.get("tile_m"), 64);
        assert_eq!(spec.shape().cluster_tile, (128, 256));
        assert!(c.source().expect("applies").text.contains("math_turn"));
        let err = find("nope").unwrap_err().to_string();
        for name in CONTENDERS.iter().map(|c| c.name) {
            assert!(err.contains(name), "{name} missing from {err}");
        }
        assert!(err.contains("5-pingpong (step 5's twin as ping-pong"));
        let stock = KernelSpec::new(runner::steps::get(6).expect("step 6"), Arch::Hopper);
        for name in [
            "6-hilbert",
            "6-l2hints",
            "6-streamk",
            "6-waves",
            "6-wait2",
            "6-workspace",
        ] {
            let spec = find(name).expect("known").spec().expect("plans");
            assert_eq!(spec.params, stock.params, "{name}: step 6's own parameters");
        }
        for c in CONTENDERS {
            let src = c.source().unwrap_or_else(|e| panic!("{}: {e:#}", c.name));
            assert!(src.text.contains("#include \"hopper.cuh\""), "{}", c.name);
        }
    }

    /// Each contender compiles for its GPU under its step's plan, with both element types, without
    /// spills, serialized wgmma or generic stores (what tests/tests/kernels.rs checks of the
    /// steps); and, like the steps' kernels, refuses at compile time a launch it was not written
    /// for (here: another block size).
    #[test]
    fn every_contender_compiles_under_its_plan() {
        for c in CONTENDERS {
            let spec = c.spec().expect("plans");
            let src = c.source().expect("applies");
            let target = Target::native(c.arch);
            for dtype in [Dtype::F16, Dtype::Bf16] {
                let k = compile(&src, target, &spec.defines(dtype))
                    .unwrap_or_else(|e| panic!("{} ({dtype}): {e:#}", c.name));
                assert_eq!(
                    k.resources.spill_store_bytes + k.resources.spill_load_bytes,
                    0,
                    "{} ({dtype}) spills",
                    c.name
                );
                assert!(
                    !k.log
                        .contains("wgmma.mma_async instructions are serialized"),
                    "{} ({dtype}): {}",
                    c.name,
                    k.log
                );
                let sass = common::sass::disassemble(&k.cubin).expect("nvdisasm");
                assert!(
                    sass.count("HGMMA") > 0 && sass.count("UTMASTG") > 0,
                    "{} ({dtype}): {:?}",
                    c.name,
                    sass.histogram
                );
                // Staging stores keep their shared state space (STS, never a generic ST).
                assert_eq!(sass.count("ST"), 0, "{} ({dtype})", c.name);
            }
            let wrong: Vec<(String, String)> = spec
                .defines(Dtype::F16)
                .into_iter()
                .map(|(k, v)| match k.as_str() {
                    "WB_LAUNCH_THREADS" => (k, "128".to_string()),
                    _ => (k, v),
                })
                .collect();
            let err =
                compile(&src, target, &wrong).expect_err("a block size it was not written for");
            let log = &err
                .downcast_ref::<CompileError>()
                .expect("a compile error")
                .log;
            assert!(log.contains("\"WB_LAUNCH_THREADS: "), "{}: {log}", c.name);
        }
    }
}
