//! A progress line for long CPU work (the fp64 reference of a large problem): drawn on a
//! terminal only, and only once the work has taken a few seconds, so that short runs and
//! piped or captured output stay as they were.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Work shorter than this shows no line.
const QUIET_FOR: Duration = Duration::from_secs(3);

pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: AtomicBool,
    terminal: bool,
}

impl Progress {
    /// `len` units of `unit` (e.g. rows) of the work `what`.
    pub fn new(len: u64, what: &'static str, unit: &'static str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template =
            format!("{{msg}} {{bar:30}} {{pos}}/{{len}} {unit}, {{elapsed}} (about {{eta}} left)");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style);
        }
        bar.set_message(what);
        Progress {
            bar,
            start: Instant::now(),
            shown: AtomicBool::new(false),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// One unit done (from any thread).
    pub fn inc(&self) {
        self.bar.inc(1);
        if self.terminal
            && !self.shown.load(Ordering::Relaxed)
            && self.start.elapsed() >= QUIET_FOR
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Clear the line (the work's own report follows).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
