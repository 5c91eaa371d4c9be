//! `runner mutations`: the seeded bugs `--mutate` can plant.

use crate::report;
use anyhow::Result;
use common::mutation;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print the seeded bugs as one JSON object {"schema", "runner", "mutations": [...]}.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.json {
        let v = crate::report::envelope(
            "mutations",
            serde_json::json!({ "mutations": mutation::listing(&runner::steps::infos())? }),
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        report::print_mutations(mutation::MUTATIONS, mutation::TWIN_MUTATIONS);
    }
    Ok(ExitCode::SUCCESS)
}
