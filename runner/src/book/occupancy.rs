//! `{{#occupancy 0}}`: what Nsight Compute measured of step 0's twin at 3 and at 4 stages (its
//! Occupancy and LaunchStats sections, `gpu/book6.sh`), the measurement behind exercise 0.1's
//! result: how many CTAs an SM holds by its shared memory, and how many warps were active.
//! The files are `assets/results/occupancy/step0-stages{3,4}.csv` (`ncu --csv --page details`)
//! and `provenance.txt` (`key=value` lines: gpu, driver, date, runner, ncu).

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The folder under `assets/results/`.
pub const FOLDER: &str = "occupancy";

/// The stage counts measured: exercise 0.1's shorter distance (3) and the stock twin (4).
pub const STAGES: [u32; 2] = [3, 4];

/// One launch's metrics, by metric name: (value, unit) as Nsight Compute wrote them.
#[derive(Debug, Default, PartialEq)]
pub struct Metrics(BTreeMap<String, (String, String)>);

impl Metrics {
    fn get(&self, name: &str) -> Option<&(String, String)> {
        self.0.get(name)
    }

    /// A metric as a number ("1,024" and "45.3" alike).
    fn number(&self, name: &str) -> Option<f64> {
        self.get(name)?.0.replace(',', "").trim().parse().ok()
    }

    /// "100.35 Kbyte/block" / "154 register/thread", or "not recorded".
    fn shown(&self, name: &str) -> String {
        match self.get(name) {
            Some((v, u)) if u.is_empty() => v.clone(),
            Some((v, u)) => format!("{v} {u}"),
            None => "not recorded".into(),
        }
    }
}

/// The first launch of an `ncu --csv --page details` report: its columns found by name.
pub fn parse_csv(text: &str) -> Result<Metrics> {
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(text.as_bytes());
    let head = rd.headers().context("no CSV header")?.clone();
    let col = |name: &str| {
        head.iter().position(|h| h == name).ok_or_else(|| {
            anyhow!("the CSV has no column {name:?} (is it `ncu --csv --page details`?)")
        })
    };
    // The launch's ID, where the report numbers its launches (`-c 1` profiles one anyway).
    let id = col("ID").ok();
    let (name, unit, value) = (
        col("Metric Name")?,
        col("Metric Unit")?,
        col("Metric Value")?,
    );
    let mut out = Metrics::default();
    let mut first: Option<String> = None;
    for row in rd.records() {
        let row = row.context("a malformed CSV row")?;
        let field = |i: usize| row.get(i).unwrap_or("").to_string();
        // Only the first profiled launch counts.
        let this = id.map(field).unwrap_or_default();
        if first.get_or_insert_with(|| this.clone()) != &this {
            break;
        }
        out.0
            .entry(field(name))
            .or_insert_with(|| (field(value), field(unit)));
    }
    if out.0.is_empty() {
        bail!("the CSV holds no metric");
    }
    Ok(out)
}

/// `key=value` lines.
fn provenance(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The generated part: a table of both launches and what it shows; "not measured yet" where
/// the folder does not hold both.
pub fn markdown_in(dir: &Path) -> Result<String> {
    let mut runs = Vec::new();
    for s in STAGES {
        let p = dir.join(format!("step0-stages{s}.csv"));
        let Ok(text) = std::fs::read_to_string(&p) else {
            return Ok("*Not measured yet: `gpu/book6.sh` profiles step 0's twin at 3 and at 4 stages with Nsight Compute (its Occupancy section), and its files go to `assets/results/occupancy/`.*\n".into());
        };
        runs.push((
            s,
            parse_csv(&text).with_context(|| format!("{}", p.display()))?,
        ));
    }
    let prov = std::fs::read_to_string(dir.join("provenance.txt"))
        .map(|t| provenance(&t))
        .unwrap_or_default();
    let p = |k: &str| {
        prov.get(k)
            .cloned()
            .unwrap_or_else(|| "not recorded".into())
    };
    let rows = [
        (
            "dynamic shared memory per CTA",
            "Dynamic Shared Memory Per Block",
        ),
        ("registers per thread", "Registers Per Thread"),
        (
            "CTAs per SM allowed by shared memory",
            "Block Limit Shared Mem",
        ),
        ("CTAs per SM allowed by registers", "Block Limit Registers"),
        ("theoretical occupancy", "Theoretical Occupancy"),
        (
            "achieved occupancy (active warps, of the SM's maximum)",
            "Achieved Occupancy",
        ),
        ("waves per SM", "Waves Per SM"),
    ];
    let mut md = String::from("| step 0's twin | 3 stages | 4 stages |\n|---|---|---|\n");
    for (label, metric) in rows {
        md.push_str(&format!(
            "| {label} | {} | {} |\n",
            runs[0].1.shown(metric),
            runs[1].1.shown(metric)
        ));
    }
    md.push_str(&format!(
        "\n*Nsight Compute ({}) on {} (driver {}), {}, {}: one launch each of `runner step 0 --arch sm_90a --param stages=S` at 4096 × 8192 × 4096 f16, files in `assets/results/{FOLDER}/`.*\n\n",
        p("ncu"),
        p("gpu"),
        p("driver"),
        p("date"),
        p("runner")
    ));
    let lim = |i: usize| runs[i].1.number("Block Limit Shared Mem");
    let ach = |i: usize| runs[i].1.number("Achieved Occupancy");
    md.push_str(&match (lim(0), lim(1), ach(0), ach(1)) {
        (Some(l3), Some(l4), Some(a3), Some(a4)) if l3 > l4 && a3 > a4 => format!(
            "Measured: at 3 stages an SM's shared memory holds {l3} CTAs of the twin, at 4 stages {l4}, and the warps active on average rose from {a4} % to {a3} % of the SM's maximum. The shorter distance ran with more CTAs per SM; that, not the prefetch distance, is what the timing above compares.\n"
        ),
        (Some(l3), Some(l4), Some(a3), Some(a4)) => format!(
            "Measured: at 3 stages an SM's shared memory holds {l3} CTAs of the twin, at 4 stages {l4}; the warps active on average were {a3} % and {a4} % of the SM's maximum. This does not show more CTAs per SM at 3 stages, so occupancy does not explain the timing above.\n"
        ),
        _ => "The profile does not record the shared-memory block limit and the achieved occupancy of both launches, so it settles nothing.\n".into(),
    });
    Ok(md)
}

/// `{{#occupancy 0}}`.
pub fn marker(spec: &str) -> Result<String> {
    if spec.trim() != "0" {
        bail!("occupancy is measured for step 0 only, not {spec:?}");
    }
    markdown_in(&crate::results::dir().join(FOLDER))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"";

    fn csv(limit: u32, achieved: &str) -> String {
        let row = |section: &str, name: &str, unit: &str, value: &str| {
            format!("\"0\",\"1\",\"runner\",\"h\",\"gemm_kernel\",\"1\",\"7\",\"(128, 1, 1)\",\"(2048, 1, 1)\",\"0\",\"9.0\",\"{section}\",\"{name}\",\"{unit}\",\"{value}\"")
        };
        [
            HEAD.to_string(),
            row("Launch Statistics", "Registers Per Thread", "register/thread", "154"),
            row("Launch Statistics", "Dynamic Shared Memory Per Block", "Kbyte/block", "100.35"),
            row("Occupancy", "Block Limit Shared Mem", "block", &limit.to_string()),
            row("Occupancy", "Achieved Occupancy", "%", achieved),
            // A second launch is not read.
            "\"1\",\"1\",\"runner\",\"h\",\"gemm_kernel\",\"1\",\"7\",\"(128, 1, 1)\",\"(2048, 1, 1)\",\"0\",\"9.0\",\"Occupancy\",\"Block Limit Shared Mem\",\"block\",\"9\"".to_string(),
        ]
        .join("\n")
    }

    #[test]
    fn the_first_launch_is_read_by_column_name() {
        let m = parse_csv(&csv(2, "11.9")).unwrap();
        assert_eq!(m.number("Block Limit Shared Mem"), Some(2.0));
        assert_eq!(
            m.shown("Dynamic Shared Memory Per Block"),
            "100.35 Kbyte/block"
        );
        assert_eq!(m.shown("Waves Per SM"), "not recorded");
        assert!(parse_csv("\"a\",\"b\"\n\"1\",\"2\"").is_err());
    }

    #[test]
    fn the_sentence_follows_the_measurement() {
        let dir = std::env::temp_dir().join(format!("wb-occupancy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(markdown_in(&dir).unwrap().contains("Not measured yet"));
        std::fs::write(
            dir.join("provenance.txt"),
            "gpu=NVIDIA H100 80GB HBM3\ndate=2026-11-27\n",
        )
        .unwrap();
        std::fs::write(dir.join("step0-stages3.csv"), csv(2, "11.9")).unwrap();
        std::fs::write(dir.join("step0-stages4.csv"), csv(1, "6.2")).unwrap();
        let md = markdown_in(&dir).unwrap();
        assert!(
            md.contains("| CTAs per SM allowed by shared memory | 2 block | 1 block |"),
            "{md}"
        );
        assert!(md.contains("holds 2 CTAs of the twin, at 4 stages 1, and the warps active on average rose from 6.2 % to 11.9 %"), "{md}");
        assert!(md.contains("NVIDIA H100 80GB HBM3"), "{md}");
        std::fs::write(dir.join("step0-stages3.csv"), csv(1, "6.1")).unwrap();
        let md = markdown_in(&dir).unwrap();
        assert!(
            md.contains("occupancy does not explain the timing above"),
            "{md}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(marker("1").is_err());
        marker("0").unwrap();
    }
}
