//! `runner diff A B`: what step B changes relative to step A.

use super::{ArchArg, ColorArg};
use anyhow::Result;
use runner::steps;
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    a: u32,
    b: u32,
    /// Which kernels: sm_100a (the Blackwell kernels) or sm_90a (the Hopper twins).
    #[arg(long, value_enum, default_value = "sm_100a")]
    arch: ArchArg,
    #[arg(long)]
    host: bool,
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let sa = steps::get(a.a)?;
    let sb = steps::get(a.b)?;
    let colored = match a.color {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => std::io::stdout().is_terminal(),
    };
    print!(
        "{}",
        crate::diff::steps(sa.info(), sb.info(), a.arch.arch(), a.host, colored)
    );
    Ok(ExitCode::SUCCESS)
}
