//! `runner phases --step N --bug B --timing T`: the phase model's timeline of one run of a
//! step's ring, event by event, as the barriers chapter prints it and its figure draws it
//! (`phase_tables::timeline` over `common::model::phases`).

use anyhow::Result;
use clap::ValueEnum;
use std::process::ExitCode;

/// The wait lines the model runs (a seeded bug's, or the kernels' own).
#[derive(Clone, Copy, ValueEnum)]
enum Bug {
    /// The kernels' own wait lines.
    None,
    /// The empty-slot wait without its first-round guard.
    NoFirstRoundGuard,
    /// The empty-slot wait with the opposite parity.
    WrongParity,
    /// The full-slot wait one phase off.
    LoadFullOffByOne,
}

#[derive(Clone, Copy, ValueEnum)]
enum TimingArg {
    /// Loads take longer than the MMAs: the consumer waits for data.
    SlowLoads,
    /// MMAs take longer than the loads: the producer waits for free slots.
    SlowMmas,
}

#[derive(clap::Args)]
pub struct Args {
    /// The step whose ring (stages, roles) the model runs.
    #[arg(long, value_name = "N")]
    step: u32,
    /// The wait lines.
    #[arg(long, value_enum, default_value = "none")]
    bug: Bug,
    /// Which side is slower.
    #[arg(long, value_enum, default_value = "slow-mmas")]
    timing: TimingArg,
    /// K-blocks of the run (1 to 64).
    #[arg(long, value_name = "K", default_value_t = 8)]
    k_blocks: u32,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let name = |v: &dyn Fn() -> Option<clap::builder::PossibleValue>| {
        v().map(|p| p.get_name().to_string()).unwrap_or_default()
    };
    let spec = format!(
        "{} {} {} {}",
        a.step,
        name(&|| a.bug.to_possible_value()),
        name(&|| a.timing.to_possible_value()),
        a.k_blocks
    );
    let md = crate::book::phase_tables::timeline(&spec)?;
    // The timeline is a fenced block for the book; the terminal gets its lines.
    for line in md.lines().filter(|l| !l.starts_with("```")) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
