//! `runner explain TOPIC`: a chapter of the book in the terminal (a step's with its code inlined).

use crate::book::{self, terminal, CHAPTERS};
use anyhow::{bail, Result};
use runner::steps;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A step number (`runner list`), or a chapter: introduction, prerequisites, barriers,
    /// speed-of-light, verification, simulator, emulation, emulation-records, instructor,
    /// running, further-reading, changelog, glossary (also `runner glossary [TERM]`).
    #[arg(value_name = "STEP|CHAPTER")]
    topic: String,
    /// Print the markdown instead of rendering it.
    #[arg(long)]
    markdown: bool,
    /// Show long tables whole instead of folding them (piped output).
    #[arg(long)]
    full: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let md = match a.topic.parse::<u32>() {
        Ok(n) => book::chapter_markdown(steps::get(n)?.info())?,
        Err(_) => {
            let topic = a.topic.to_ascii_lowercase();
            let found = CHAPTERS
                .iter()
                .find(|(name, _)| *name == topic || (topic.len() >= 3 && name.starts_with(&topic)));
            match found {
                Some((_, path)) => book::other_chapter_markdown(path)?,
                // The book's glossary page: what `runner glossary` prints.
                None if topic == "glossary" => crate::book::glossary::markdown(None)?,
                None => bail!(
                    "there is no chapter {:?}: give a step number ({}) or one of {}",
                    a.topic,
                    steps::all()
                        .iter()
                        .map(|s| s.info().number.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    CHAPTERS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    };
    if a.markdown {
        terminal::print(&md)?;
    } else {
        terminal::show(&md, a.full)?;
    }
    Ok(ExitCode::SUCCESS)
}
