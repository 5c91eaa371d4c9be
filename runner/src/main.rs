//! `runner`: compile, verify, time, diff and explain the steps of the Blackwell GEMM workbook.
//! This file parses the command line and dispatches; each subcommand is a module of [`cli`].

mod bench;
mod book;
mod check;
mod cli;
mod contenders;
mod diff;
mod exercise;
mod grade;
mod last_trace;
mod outdir;
mod pool;
mod provenance;
mod report;
mod results;
mod sandbox;
#[cfg(test)]
mod scaffold;
mod step_cmd;
mod step_request;
mod trace;
mod trace_sim;
mod workshop;

use std::process::ExitCode;

fn main() -> ExitCode {
    restore_sigpipe();
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error: {info}");
    }));
    let cli = cli::parse();
    match cli::dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A reader that stops early (`runner inspect 0 --sass | head`) ends the runner quietly, as it
/// ends `cat` or `git log`: Rust ignores SIGPIPE, which turns every later `println!` into a
/// panic. The grader writes to no child's pipe, and sockets (`book --serve`) send with
/// MSG_NOSIGNAL, so only stdout and stderr are affected.
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
