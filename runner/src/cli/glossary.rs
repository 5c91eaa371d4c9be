//! `runner glossary [TERM]`: the workbook's terms.

use crate::book::terminal;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Only the terms containing this (case-insensitive).
    term: Option<String>,
    /// Print {"schema", "runner", "terms": [{"term", "aliases", "line", "step", "chapter"}]}.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.json {
        let v = crate::report::envelope(
            "glossary",
            serde_json::json!({ "terms": crate::book::glossary::json(a.term.as_deref())? }),
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let md = crate::book::glossary::markdown(a.term.as_deref())?;
    terminal::show(&md, true)?;
    Ok(ExitCode::SUCCESS)
}
