//! `runner`: compile, verify, time, diff and explain the steps of the Blackwell GEMM workbook.
//! This file parses the command line and dispatches; each subcommand is a module of [`cli`].

mod bench;
mod book;
mod budget;
mod cli;
mod diff;
mod edits;
mod exercise;
mod figures;
mod glossary;
mod grade;
mod measured;
mod phase_tables;
mod plot;
mod report;
mod step_cmd;
mod terminal;
mod trace;
mod workshop;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error: {info}");
    }));
    let cli = cli::Cli::parse();
    match cli::dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
