//! Ctrl-C during a batch grading: the first SIGINT (or SIGTERM) stops every running child
//! ([`crate::sandbox::cancel`]), no new student starts, every grade already written stays, and
//! the grading ends with [`Interrupted`], which names the command that resumes it. A second
//! signal ends the process at once (the handler restores the default action).

use std::fmt;

extern "C" fn on_signal(sig: libc::c_int) {
    crate::sandbox::cancel();
    // SAFETY: `signal` is async-signal-safe; the next such signal ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

/// Install the handler for SIGINT and SIGTERM (idempotent).
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores an atomic and resets the signal's action, both
    // async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether a signal asked the grading to stop.
pub fn requested() -> bool {
    crate::sandbox::cancelled()
}

/// A batch stopped by a signal: how many students have a grade, of how many.
#[derive(Debug)]
pub struct Interrupted {
    pub graded: usize,
    pub total: usize,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "interrupted: {} of {} students graded",
            self.graded, self.total
        )
    }
}

impl std::error::Error for Interrupted {}

/// The command that resumes an interrupted batch: this one, with `--resume` (once).
pub fn resume_command(args: &[String]) -> String {
    let mut words: Vec<String> = args.iter().map(|a| quote(a)).collect();
    if !args.iter().any(|a| a == "--resume") {
        words.push("--resume".into());
    }
    words.join(" ")
}

/// `word` as a POSIX shell reads it back.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_command_is_this_one_with_resume_once_and_quoted() {
        let args: Vec<String> = ["runner", "grade", "--batch", "my class", "--out", "o"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            resume_command(&args),
            "runner grade --batch 'my class' --out o --resume"
        );
        let again: Vec<String> = ["runner", "--resume", "it's"].map(String::from).to_vec();
        assert_eq!(resume_command(&again), r"runner --resume 'it'\''s'");
    }
}
