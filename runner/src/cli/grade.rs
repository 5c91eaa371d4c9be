//! `runner grade`: its arguments and work live in the `grade` module, which owns the grader.

pub use crate::grade::{run, GradeArgs as Args};
