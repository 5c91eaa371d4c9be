//! `runner list`: the ladder of steps.

use crate::report;
use anyhow::Result;
use common::step::{Arch, KernelSpec};
use runner::steps;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// One JSON object {"schema", "runner", "steps": [{number, title, idea, hopper_idea, crate,
    /// tiles: {sm_100a, sm_90a: {cluster_m, cluster_n, tile_k, persistent}}}]}.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if !args.json {
        report::print_list(&steps::all());
        return Ok(ExitCode::SUCCESS);
    }
    let v: Vec<_> = steps::all()
        .iter()
        .map(|&s| {
            let i = s.info();
            // What one cluster covers (M, N) and the k-block, per kernel: the shapes a kernel
            // accepts are multiples of these.
            let tiles: serde_json::Map<String, serde_json::Value> = Arch::ALL
                .iter()
                .map(|&a| {
                    let k = KernelSpec::new(s, a).shape();
                    (
                        a.sm().to_string(),
                        serde_json::json!({
                            "cluster_m": k.cluster_tile.0,
                            "cluster_n": k.cluster_tile.1,
                            "tile_k": k.tile_k,
                            "persistent": k.schedule.fills_the_gpu(),
                            "schedule": k.schedule,
                        }),
                    )
                })
                .collect();
            serde_json::json!({"number": i.number, "title": i.title, "idea": i.idea,
                "hopper_idea": i.hopper_idea, "crate": i.crate_dir, "tiles": tiles})
        })
        .collect();
    let v = crate::report::envelope("list", serde_json::json!({ "steps": v }));
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}
