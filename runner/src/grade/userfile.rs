//! Files the user names to the grader (the rubric, the secret, Gradescope's metadata, a
//! grade.json to replay or merge): read with a bound, so that `--rubric /dev/zero` or a 2 GB
//! file is one error line rather than a runner the kernel ends for its memory.

use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;

/// The most a rubric or Gradescope's metadata may hold (the stock rubrics hold a few KiB).
pub const MAX_RUBRIC_BYTES: u64 = 1 << 20;
/// The most the instructor's secret may hold (it needs 16 bytes).
pub const MAX_SECRET_BYTES: u64 = 64 << 10;
/// The most a grade.json (or a batch's summary.csv) may hold: a report carries logs cut to the
/// rubric's limit, far below this.
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The bytes of `path`, at most `limit` of them; `what` names the file in errors ("the
/// rubric").
pub fn read(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {what} {shown}"))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {what} {shown}"))?;
    if bytes.len() as u64 > limit {
        bail!(
            "{what} {shown} is larger than {}, more than any such file holds: not read",
            size(limit)
        );
    }
    Ok(bytes)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String> {
    String::from_utf8(read(path, limit, what)?)
        .map_err(|_| anyhow::anyhow!("{what} {} is not UTF-8 text", path.display()))
}

/// `limit` as a person writes it: 64 KiB, 1 MiB.
fn size(limit: u64) -> String {
    if limit >= 1 << 20 {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{} KiB", limit >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read(Path::new("/dev/zero"), 1 << 10, "the rubric").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "the rubric /dev/zero is larger than 1 KiB, more than any such file holds: not read"
        );
        assert_eq!(size(MAX_REPORT_BYTES), "64 MiB");
        assert_eq!(size(MAX_SECRET_BYTES), "64 KiB");
    }
}
