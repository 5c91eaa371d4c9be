//! Provenance: what a results file or report records about where and when it was made — the
//! commit, the date, the GPU (its name as a file-name slug), the driver and the clocks as
//! nvidia-smi sees them — and the runner's own version stamp. The bench, the checks, the
//! exercises, `runner step`, the simulator and the grader all record it the same way.

use crate::results::Provenance;

/// One nvidia-smi query of the first GPU, if nvidia-smi is there.
pub fn smi(fields: &str) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            &format!("--query-gpu={fields}"),
            "--format=csv,noheader",
            "--id=0",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// nvidia-smi's view of the clocks of the first GPU, in one line (the bench records it before
/// and after its timed rounds).
pub fn clocks() -> Option<String> {
    smi("clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw")
}

/// The commit being measured: `WB_COMMIT` if set, else the commit this runner was built from
/// (recorded by build.rs; the GPU machine's copy of the repository may have a stale `.git`).
pub fn commit() -> String {
    std::env::var("WB_COMMIT").unwrap_or_else(|_| env!("WB_BUILD_COMMIT").to_string())
}

/// Today's date (UTC), `YYYY-MM-DD`: results files are named and stamped with it.
pub fn today() -> String {
    // Days since the epoch to a civil date (Howard Hinnant's algorithm), to avoid a dependency.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let z = secs.div_euclid(86400) + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A file-name form of the GPU's name: "NVIDIA H200" -> "h200".
pub fn gpu_slug(name: &str) -> String {
    let s: String = name
        .to_ascii_lowercase()
        .replace("nvidia", "")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Clocks and temperature from nvidia-smi, for the GPU with this PCI address.
pub fn nvidia_smi_clocks(pci: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let fields = [
        "clocks.sm",
        "clocks.mem",
        "clocks.max.sm",
        "clocks.max.mem",
        "temperature.gpu",
        "pstate",
        "power.draw",
    ];
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "-i",
            pci,
            &format!("--query-gpu={}", fields.join(",")),
            "--format=csv,noheader",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()?
        .to_string();
    let values: Vec<&str> = line.split(',').map(str::trim).collect();
    (values.len() == fields.len()).then(|| {
        fields
            .iter()
            .zip(values)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

/// The GPU, driver, date and commit a check or timings file records.
pub fn current() -> Provenance {
    let smi = smi("name,driver_version").unwrap_or_default();
    let mut parts = smi.splitn(2, ", ");
    Provenance {
        gpu: parts.next().filter(|s| !s.is_empty()).unwrap_or("?").into(),
        driver: parts.next().unwrap_or("?").into(),
        date: today(),
        commit: commit(),
    }
}

/// The version and build commit, for the JSON reports (`step`, `exercise`, `workshop`).
pub fn version_info() -> serde_json::Value {
    serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env!("WB_BUILD_COMMIT"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_dates() {
        assert_eq!(gpu_slug("NVIDIA H200"), "h200");
        assert_eq!(gpu_slug("NVIDIA H100 80GB HBM3"), "h100-80gb-hbm3");
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }
}
