//! Named bench contenders: kernels that are not steps of the ladder but are worth timing beside
//! it (`runner bench --contenders 5-pingpong`), each a variant of one step's kernel that runs
//! under that step's host plan with some parameters overridden. Their sources are embedded, so
//! the runner binary times them without the repository at hand.

use anyhow::{bail, Result};
use common::compile::KernelSource;
use common::step::{Arch, KernelSpec};

#[derive(Debug, Clone, Copy)]
pub struct Contender {
    /// What the bench calls it, in its table and its JSON (`kernel`).
    pub name: &'static str,
    /// The step whose host plan it runs under.
    pub step: u32,
    pub arch: Arch,
    /// The file in the repository, named in compiler messages.
    pub path: &'static str,
    pub text: &'static str,
    /// Overrides of the step's parameters, as `--param` takes them.
    pub params: &'static [&'static str],
    pub description: &'static str,
}

pub const CONTENDERS: &[Contender] = &[
    Contender {
        name: "5-pingpong",
        step: 5,
        arch: Arch::Hopper,
        path: "exercises/hopper/step5_pingpong_sm90.cu",
        text: include_str!("../../../exercises/hopper/step5_pingpong_sm90.cu"),
        params: &["tile_m=64"],
        description: "step 5's twin as ping-pong: the consumers take turns on whole 64 x 256 tiles",
    },
    Contender {
        name: "6-l2hints",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_l2hints_sm90.cu",
        text: include_str!("../../../exercises/hopper/step6_l2hints_sm90.cu"),
        params: &[],
        description:
            "step 6's twin with L2 eviction hints: the band's operand evict_last, C evict_first",
    },
    Contender {
        name: "6-streamk",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_streamk_sm90.cu",
        text: include_str!("../../../exercises/hopper/step6_streamk_sm90.cu"),
        params: &[],
        description: "step 6's twin with a stream-K tail: the last, partial wave's k-blocks split evenly over every cluster",
    },
    Contender {
        name: "6-waves",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_waves_sm90.cu",
        text: include_str!("../../../exercises/hopper/step6_waves_sm90.cu"),
        params: &[],
        description: "step 6's twin on a grid of whole waves: as few clusters as take the same number of waves",
    },
    Contender {
        name: "6-wait2",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_wait2_sm90.cu",
        text: include_str!("../../../exercises/hopper/step6_wait2_sm90.cu"),
        params: &[],
        description: "step 6's twin with two wgmma groups in flight (wait_group 2), one ring slot less for the producer",
    },
    Contender {
        name: "6-workspace",
        step: 6,
        arch: Arch::Hopper,
        path: "exercises/hopper/step6_workspace_sm90.cu",
        text: include_str!("../../../exercises/hopper/step6_workspace_sm90.cu"),
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

    pub fn source(&self) -> KernelSource {
        KernelSource {
            path: self.path.to_string(),
            text: self.text.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contenders_are_found_by_name_and_plan_under_their_step() {
        let c = find("5-pingpong").expect("known");
        let spec = c.spec().expect("its parameters are the step's");
        assert_eq!(spec.params.get("tile_m"), 64);
        assert_eq!(spec.shape().cluster_tile, (128, 256));
        assert!(c.source().text.contains("math_turn"));
        let err = find("nope").unwrap_err().to_string();
        for name in CONTENDERS.iter().map(|c| c.name) {
            assert!(err.contains(name), "{name} missing from {err}");
        }
        assert!(err.contains("5-pingpong (step 5's twin as ping-pong"));
        let stock = KernelSpec::new(runner::steps::get(6).expect("step 6"), Arch::Hopper);
        for name in [
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
            assert!(
                c.source().text.contains("#include \"hopper.cuh\""),
                "{}",
                c.name
            );
        }
    }
}
