//! `runner mutations`: the seeded bugs `--mutate` can plant.

use crate::report;
use anyhow::Result;
use common::mutation;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print the seeded bugs as one JSON array.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(&mutation::listing()?)?);
    } else {
        report::print_mutations(mutation::MUTATIONS, mutation::TWIN_MUTATIONS);
    }
    Ok(ExitCode::SUCCESS)
}
