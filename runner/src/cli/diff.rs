//! `runner diff A B`: what step B changes relative to step A.

use super::{ArchArg, ColorArg};
use anyhow::Result;
use runner::steps;
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The step to compare from.
    a: u32,
    /// The step to compare to.
    b: u32,
    /// Which kernels: sm_100a (the Blackwell kernels) or sm_90a (the Hopper twins).
    #[arg(long, value_enum, default_value = "sm_100a")]
    arch: ArchArg,
    /// Also diff the host code (the steps' lib.rs).
    #[arg(long)]
    host: bool,
    /// Colour the diff: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let sa = steps::get(a.a)?;
    let sb = steps::get(a.b)?;
    let colored = match a.color {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    print!(
        "{}",
        crate::diff::steps(sa.info(), sb.info(), a.arch.arch(), a.host, colored)
    );
    Ok(ExitCode::SUCCESS)
}
