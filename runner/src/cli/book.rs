//! `runner book`: build the HTML book, and serve it.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Output folder (default: book/build).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Serve the built book on 127.0.0.1.
    #[arg(long)]
    serve: bool,
    #[arg(long, default_value_t = 3000)]
    port: u16,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let dir = crate::book::build(a.out)?;
    println!("book built: {}", dir.join("index.html").display());
    if a.serve {
        crate::book::serve(&dir, a.port)?;
    }
    Ok(ExitCode::SUCCESS)
}
