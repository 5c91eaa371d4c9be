//! The names the grader and its children agree on: the variables a child is started with, the
//! files it leaves in its scratch folder, the kernel it launches and the name its source goes
//! by. Plain names, below every other module of the grader, so the parent's and the children's
//! sides share them without importing each other.

use common::Dtype;
use std::path::{Path, PathBuf};

/// The name the compiler gives the submission's file in its messages (a job's `source_name`).
pub const SOURCE_NAME: &str = "kernel.cu";

/// The kernel the grader launches, whose instructions count.
pub const ENTRY: &str = "gemm_kernel";

/// The variable that tells a compile child where nvdisasm is (the grader resolves, or installs,
/// it before any child starts: a confined child can neither search nor install).
pub const NVDISASM_ENV: &str = "WORKBOOK_GRADE_NVDISASM";

/// The variable naming the CUPTI library for a measuring child (the grader resolves, or
/// installs, it before any child starts).
pub const CUPTI_ENV: &str = "WORKBOOK_GRADE_CUPTI";
/// Set instead of [`CUPTI_ENV`] where none could be found: why (each executed row says so).
pub const CUPTI_MISSING_ENV: &str = "WORKBOOK_GRADE_CUPTI_MISSING";

/// The folders a measuring child may read besides the GPU's: the CUPTI library's (CUPTI opens
/// its `libnvperf_*` neighbours itself).
pub fn cupti_dir() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var_os(CUPTI_ENV)?);
    if !p.is_absolute() {
        return None;
    }
    let p = p.canonicalize().ok()?;
    p.parent().map(Path::to_path_buf)
}

/// A run (or simulating) child's results, one JSON line each, in its folder.
pub const RESULTS_FILE: &str = "results.jsonl";

/// The measuring child's report, in its folder.
pub const MEASURED_FILE: &str = "measure.json";
/// Written by the measuring child just before the launch: a missing report after it is the
/// kernel's doing.
pub const LAUNCHING_FILE: &str = "measure-launching";
/// The measuring child's account of every count (for the instructor: `--keep-scratch`).
pub const DEBUG_FILE: &str = "measure-debug.txt";

/// Where the compile child leaves a build's PTX for the simulating children.
pub fn ptx_path(dir: &Path, dtype: Dtype) -> PathBuf {
    dir.join(format!("ptx-{dtype}.ptx"))
}
