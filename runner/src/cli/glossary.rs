//! `runner glossary [TERM]`: the workbook's terms.

use crate::book::terminal;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Only the terms containing this (case-insensitive).
    term: Option<String>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let md = crate::book::glossary::markdown(a.term.as_deref())?;
    terminal::show(&md, true)?;
    Ok(ExitCode::SUCCESS)
}
