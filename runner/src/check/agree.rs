//! `runner check agree A.json B.json`: two emulation-check results files (the GPU emulation's
//! `emulation.json`, the simulator's `sim.json`) compared case by case: the same verdict class
//! (verified, or caught), and where both name an ordering rule, the same rule.

use crate::results::{EmulationCase, EmulationCheck, Results};
use anyhow::{bail, Context, Result};
use common::verdict::Verdict;
use std::collections::BTreeMap;
use std::path::Path;

/// What identifies a case in both files.
type CaseKey = (
    u32,
    String,
    String,
    u64,
    Option<u64>,
    Option<u32>,
    String,
    String,
);

fn key(c: &EmulationCase) -> CaseKey {
    (
        c.step,
        c.shape.clone(),
        c.dtype.to_string(),
        c.seed,
        c.emu_seed,
        c.clusters,
        c.dist.map_or_else(|| "gaussian".into(), |d| d.to_string()),
        c.mutation.clone().unwrap_or_default(),
    )
}

fn name(k: &CaseKey) -> String {
    format!(
        "s{} {} {} seed{} sched{}{}{}{}",
        k.0,
        k.1,
        k.2,
        k.3,
        k.4.map_or("-".into(), |s| s.to_string()),
        k.5.map_or(String::new(), |c| format!(" clusters{c}")),
        if k.6 == "gaussian" {
            String::new()
        } else {
            format!(" {}", k.6)
        },
        if k.7.is_empty() {
            String::new()
        } else {
            format!(" [{}]", k.7)
        }
    )
}

/// The ordering rule a case's errors name (`rule NAME:`), if any.
pub fn rule_named(detail: &str) -> Option<&str> {
    let at = detail.find("rule ")? + "rule ".len();
    let rest = &detail[at..];
    let end = rest.find(':')?;
    let r = &rest[..end];
    (!r.is_empty() && r.chars().all(|c| c.is_ascii_lowercase() || c == '-')).then_some(r)
}

fn read(path: &Path) -> Result<EmulationCheck> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    match serde_json::from_str::<Results>(&text)
        .with_context(|| format!("{} is not a results file", path.display()))?
    {
        Results::Emulation(c) => Ok(c),
        other => bail!(
            "{} is a {} results file; agree compares two emulation or simulator check files (emulation.json, sim.json)",
            path.display(),
            other.kind()
        ),
    }
}

/// Whether a case passed (verified) or was caught (anything else).
fn class(v: Verdict) -> &'static str {
    if v == Verdict::Verified {
        "pass"
    } else {
        "caught"
    }
}

/// Compare; prints every disagreement and a summary. Verified: every case of each file is in
/// the other and they agree.
pub fn agree(a_path: &Path, b_path: &Path) -> Result<Verdict> {
    let (a, b) = (read(a_path)?, read(b_path)?);
    let index = |c: &EmulationCheck| -> BTreeMap<CaseKey, EmulationCase> {
        c.cases.iter().map(|x| (key(x), x.clone())).collect()
    };
    let (ia, ib) = (index(&a), index(&b));
    println!(
        "A: {} ({}, {} cases, {} on {})",
        a_path.display(),
        a.mode,
        ia.len(),
        a.head.commit,
        a.head.gpu
    );
    println!(
        "B: {} ({}, {} cases, {} on {})",
        b_path.display(),
        b.mode,
        ib.len(),
        b.head.commit,
        b.head.gpu
    );
    let (mut same, mut differ, mut rules_same) = (0usize, 0usize, 0usize);
    let mut only = 0usize;
    for (k, x) in &ia {
        let Some(y) = ib.get(k) else {
            only += 1;
            println!("only in A: {}", name(k));
            continue;
        };
        let (ra, rb) = (rule_named(&x.detail), rule_named(&y.detail));
        let verdicts = class(x.outcome) == class(y.outcome);
        let rules = match (ra, rb) {
            (Some(p), Some(q)) => p == q,
            _ => true,
        };
        if verdicts && rules {
            same += 1;
            rules_same += usize::from(ra.is_some() && rb.is_some());
        } else {
            differ += 1;
            println!(
                "DISAGREE {}: A {} ({}), B {} ({})",
                name(k),
                x.outcome,
                ra.map_or_else(|| cut(&x.detail), |r| format!("rule {r}")),
                y.outcome,
                rb.map_or_else(|| cut(&y.detail), |r| format!("rule {r}")),
            );
        }
    }
    for k in ib.keys().filter(|k| !ia.contains_key(*k)) {
        only += 1;
        println!("only in B: {}", name(k));
    }
    println!(
        "agree: {same} cases agree ({rules_same} of them name the same rule in both), {differ} disagree, {only} in one file only"
    );
    Ok(if differ > 0 {
        Verdict::Failed
    } else if only > 0 {
        // The runner's exit-3 story: said in one line, what was not compared and why.
        eprintln!("note: exit status 3 (ran in part): {only} cases are in one file only, so they were not compared; the {same} compared agree");
        Verdict::Partial
    } else {
        Verdict::Verified
    })
}

fn cut(s: &str) -> String {
    let one: String = s.chars().take(100).collect();
    if one.is_empty() {
        "-".into()
    } else {
        one
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_read_from_either_machines_words() {
        assert_eq!(
            rule_named("tcgen05 emulation fault in CTA 0, warp 1, lane 0: rule operand-loaded: tcgen05.mma reads"),
            Some("operand-loaded")
        );
        assert_eq!(
            rule_named("error: rule proxy-fence-before-store: CTA 1, warp 0, PTX line 3"),
            Some("proxy-fence-before-store")
        );
        assert_eq!(rule_named("deadlock: no thread can make progress"), None);
        assert_eq!(rule_named("the rule of thumb: x"), None);
    }
}
