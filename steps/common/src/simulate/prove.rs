//! The proving mode through the product's path (`runner step N --sim --explore all`): every
//! distinct order of a launch's synchronisation events (`sim::prove::explore_all`) on the
//! step's own launch, inputs and fp64 reference, within a state and a time bound.

use super::{failure_of, prepare, read_c, SimFailure, SimKernel, SimProblem, DEFAULT_CLUSTERS};
use crate::problem::Shape;
use crate::step::KernelShape;
use crate::verify::{cpu_reference, verify};
use anyhow::{bail, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The largest problem the proving mode takes: M×N×K at most 2^25 (e.g. 128x256x1024 or
/// 256x256x512). Every run replays the launch from the start, and the number of orders grows
/// with the tiles and k-blocks, so a larger problem would spend its bound on one corner.
pub const PROVE_MAX_WORK: u128 = 1 << 25;
/// Bounds of `--prove-states` and `--prove-seconds` (their defaults, then their maxima).
pub const PROVE_STATES: (u64, u64) = (200_000, 2_000_000);
pub const PROVE_SECONDS: (u64, u64) = (60, 600);

/// The proving mode's bounds.
#[derive(Debug, Clone, Copy)]
pub struct ProveOptions {
    /// Choice points (states) explored at most.
    pub max_states: u64,
    /// Wall-clock seconds at most (checked between runs).
    pub seconds: u64,
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            max_states: PROVE_STATES.0,
            seconds: PROVE_SECONDS.0,
        }
    }
}

/// What the proving mode concluded, with what it covered.
#[derive(Debug, Clone, Serialize)]
pub struct ProveReport {
    pub step: u32,
    pub shape: Shape,
    /// "clean", "incomplete" or "error".
    pub verdict: &'static str,
    /// Why it is incomplete, or the error's message (first line); empty when clean.
    pub detail: String,
    /// The failing schedule (`--replay` takes it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<SimFailure>,
    pub runs: u64,
    pub states: u64,
    pub transitions: u64,
    pub pruned: u64,
    pub max_depth: usize,
    pub wall_s: f64,
}

/// The proving mode's default problem for a kernel: one cluster tile, four k-blocks.
pub fn prove_shape(k: &KernelShape) -> Shape {
    Shape {
        m: k.cluster_tile.0 as usize,
        n: k.cluster_tile.1 as usize,
        k: 4 * k.tile_k as usize,
    }
}

impl SimKernel {
    /// Every order of the synchronisation events of `p`'s launch, within `o`'s bounds, each
    /// finished run verified against the fp64 reference.
    pub fn prove(&self, p: &SimProblem, o: &ProveOptions) -> Result<ProveReport> {
        let k = self.spec.shape();
        let shape = p.shape.unwrap_or_else(|| prove_shape(&k));
        let work = shape.m as u128 * shape.n as u128 * shape.k as u128;
        if work > PROVE_MAX_WORK {
            bail!(
                "{}x{}x{} is too large for the proving mode (it reruns the launch for every order of its synchronisation events): M×N×K must be at most {PROVE_MAX_WORK} (e.g. 256x256x512); without --m/--n/--k it takes one cluster tile and four k-blocks",
                shape.m,
                shape.n,
                shape.k
            );
        }
        self.spec
            .check_shape(shape)
            .map_err(|e| anyhow::anyhow!(e))?;
        if self.program.uses_cluster_launch_control() {
            bail!(
                "step {}: {}",
                self.spec.info().number,
                sim::prove::CLC_NOT_EXPLORED
            );
        }
        let plan = k.plan(shape, p.clusters.unwrap_or(DEFAULT_CLUSTERS));
        let prep = prepare(&self.source, shape, p, &plan)?;
        let reference = cpu_reference(&prep.problem);
        let mut judge = |dev: &sim::Device| {
            let v = verify(
                &prep.problem,
                &read_c(dev, prep.c_addr, shape),
                &reference,
                p.cpu_samples,
            );
            if v.passed {
                Ok(())
            } else {
                Err(format!("wrong result: {}", v.summary()))
            }
        };
        let start = Instant::now();
        let limit = Duration::from_secs(o.seconds);
        let proof = sim::prove::explore_all(
            &self.program,
            &prep.device,
            &prep.launch,
            &sim::Options::default(),
            sim::prove::Bounds {
                max_states: o.max_states,
                ..sim::prove::Bounds::default()
            },
            &mut judge,
            &mut || start.elapsed() > limit,
        );
        let (verdict, detail, witness, failure) = match &proof.verdict {
            sim::prove::Verdict::Clean => ("clean", String::new(), None, None),
            sim::prove::Verdict::Incomplete { why } => ("incomplete", why.clone(), None, None),
            sim::prove::Verdict::Error {
                error,
                cause,
                witness,
            } => (
                "error",
                error.lines().next().unwrap_or("").to_string(),
                Some(witness.to_string()),
                cause
                    .as_ref()
                    .map(|e| failure_of(e, 0, sim::Policy::Random)),
            ),
        };
        Ok(ProveReport {
            step: self.spec.info().number,
            shape,
            verdict,
            detail,
            witness,
            failure,
            runs: proof.runs,
            states: proof.states,
            transitions: proof.transitions,
            pruned: proof.pruned,
            max_depth: proof.max_depth,
            wall_s: start.elapsed().as_secs_f64(),
        })
    }
}
