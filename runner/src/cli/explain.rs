//! `runner explain N`: a step's chapter in the terminal.

use crate::{book, terminal};
use anyhow::Result;
use runner::steps;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// Print the markdown instead of rendering it.
    #[arg(long)]
    markdown: bool,
    /// Show long tables whole instead of folding them.
    #[arg(long)]
    full: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let step = steps::get(a.step)?;
    let md = book::chapter_markdown(step.info())?;
    if a.markdown {
        terminal::print(&md)?;
    } else {
        terminal::print(&terminal::render(&md, &terminal::Style::for_stdout(a.full)))?;
    }
    Ok(ExitCode::SUCCESS)
}
