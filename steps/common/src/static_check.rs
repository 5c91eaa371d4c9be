//! The static checks every Blackwell build gets, whatever it is built for (`runner step` with or
//! without a GPU, `--emulate`, `--kernel`, `--mutate`, the exercises, the grader): the tcgen05
//! rules of [`crate::ptx_check`] on the kernel's sm_100a PTX, and the native sm_100a compile, whose
//! ptxas enforces rules the sm_90 emulation build cannot see (one `.cta_group` per kernel, say).
//! A kernel that breaks either is refused with its findings tied to the source lines.

use crate::compile::{compile, compile_ptx, CompileError, Compiled, KernelSource, Target};
use crate::ptx_check;
use anyhow::Result;
use std::collections::HashMap;

/// One `ptx_check` finding, placed in the kernel source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFinding {
    pub rule: &'static str,
    /// 1-based line in the kernel source, if the PTX's line information leads there.
    pub line: Option<usize>,
    /// That source line, trimmed.
    pub source: String,
    /// The PTX instruction.
    pub ptx: String,
}

/// What the rules mean, for the error message.
fn rule_words(rule: &str) -> &'static str {
    match rule {
        "fence-after-wait" => "a tcgen05.mma or tcgen05.ld reachable from an mbarrier wait or thread barrier with no tcgen05.fence::after_thread_sync in between",
        "wait-before-use" => "a register a tcgen05.ld loads is used on a path without tcgen05.wait::ld first: the load is asynchronous",
        "one-cta-group" => "tcgen05 instructions of one kernel use different .cta_group values (ptxas refuses this for sm_100a)",
        "proxy-fence-before-store" => "a TMA store reads shared memory written by ordinary stores with no fence.proxy.async.shared::cta after the writes: the TMA engine may read stale data",
        "wgmma-wait-before-use" => "an accumulator register of a wgmma is read before a wgmma.wait_group has completed its group (the wait is too shallow, or missing)",
        "barrier-before-store" => "a TMA store follows the staging writes' proxy fence with no barrier (__syncwarp, bar.sync) in between: the issuing thread does not wait for the other threads' writes",
        _ => "a tcgen05 rule",
    }
}

/// Where PTX line `ptx_line` (1-based) comes from in the kernel file `kernel_path`: the nearest
/// `.loc` before it that names the kernel file, directly or as the call site it was inlined at.
pub fn source_line(ptx: &str, ptx_line: usize, kernel_path: &str) -> Option<usize> {
    let want = kernel_path.trim_start_matches("./");
    let mut files: HashMap<&str, bool> = HashMap::new();
    for l in ptx.lines() {
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix(".file") {
            let mut parts = rest.split_whitespace();
            if let (Some(idx), Some(name)) = (parts.next(), parts.next()) {
                let name = name.trim_matches('"');
                files.insert(
                    idx,
                    !want.is_empty() && (name == want || name.ends_with(&format!("/{want}"))),
                );
            }
        }
    }
    let lines: Vec<&str> = ptx.lines().collect();
    let upto = ptx_line.min(lines.len());
    for l in lines[..upto].iter().rev() {
        let Some(rest) = l.trim_start().strip_prefix(".loc") else {
            continue;
        };
        // `.loc F L C[, function_name X, inlined_at F2 L2 C2]`
        let mut places = vec![rest.split(',').next().unwrap_or("")];
        if let Some(at) = rest.split("inlined_at").nth(1) {
            places.push(at);
        }
        for place in places {
            let mut p = place.split_whitespace();
            if let (Some(f), Some(line)) = (p.next(), p.next()) {
                if files.get(f) == Some(&true) {
                    if let Ok(n) = line.parse::<usize>() {
                        if n > 0 {
                            return Some(n);
                        }
                    }
                }
            }
        }
    }
    None
}

/// The `ptx_check` findings of `source`'s sm_100a PTX, placed in the source.
pub fn ptx_findings(
    source: &KernelSource,
    defines: &[(String, String)],
) -> Result<Vec<SourceFinding>> {
    ptx_findings_for(source, Target::Sm100a, defines)
}

/// The `ptx_check` findings of `source`'s PTX for `target`, placed in the source.
pub fn ptx_findings_for(
    source: &KernelSource,
    target: Target,
    defines: &[(String, String)],
) -> Result<Vec<SourceFinding>> {
    let ptx = compile_ptx(source, target, defines)?;
    let lines: Vec<&str> = source.text.lines().collect();
    let mut out: Vec<SourceFinding> = ptx_check::check(&ptx)
        .into_iter()
        .map(|f| {
            let line = source_line(&ptx, f.line, &source.path);
            SourceFinding {
                rule: f.rule,
                line,
                source: line
                    .and_then(|n| lines.get(n - 1))
                    .map_or(String::new(), |s| s.trim().to_string()),
                ptx: f.text,
            }
        })
        .collect();
    // The compiler may copy a source line (an unrolled or peeled loop): one finding per line.
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| f.line.is_none() || seen.insert((f.rule, f.line)));
    Ok(out)
}

/// A PTX instruction cut to a readable length (tcgen05.ld names 32 registers).
fn short(ptx: &str) -> String {
    let one_line = ptx.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 90 {
        format!("{}...", one_line.chars().take(87).collect::<String>())
    } else {
        one_line
    }
}

/// The findings as the lines of one error message.
pub fn describe(path: &str, findings: &[SourceFinding]) -> String {
    describe_for(path, "sm_100a", findings)
}

fn describe_for(path: &str, arch: &str, findings: &[SourceFinding]) -> String {
    let mut out = format!(
        "{path} breaks {} rule(s) in its {arch} PTX (common::ptx_check):",
        findings.len()
    );
    for f in findings {
        let place = match f.line {
            Some(n) => format!("{path}:{n}: `{}`", f.source),
            None => format!("{path} (no line information)"),
        };
        out.push_str(&format!(
            "\n  {}: {place}: {} (PTX: `{}`)",
            f.rule,
            rule_words(f.rule),
            short(&f.ptx)
        ));
    }
    out.push_str("\n  (runner step --no-static-check runs the kernel anyway, on the CPU simulator or under the emulation on a GPU, to see what it makes of the bug)");
    out
}

/// A kernel that breaks rules of [`ptx_check`]: the error of [`check_ptx`] and
/// [`check_blackwell`], kept typed so a caller (the grader) can report each finding as a
/// compiler message on its source line.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(path, findings))]
pub struct RuleError {
    pub path: String,
    pub findings: Vec<SourceFinding>,
}

impl RuleError {
    /// The findings as compiler messages, `PATH(LINE): error: RULE: ...`, each followed by its
    /// source line indented (line 1 where the PTX carries no line information).
    pub fn as_diagnostics(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&format!(
                "{}({}): error: {}: {}{} (PTX: `{}`)\n",
                self.path,
                f.line.unwrap_or(1),
                f.rule,
                rule_words(f.rule),
                if f.line.is_none() {
                    " [no line information: the line is a placeholder]"
                } else {
                    ""
                },
                short(&f.ptx)
            ));
            if !f.source.is_empty() {
                out.push_str(&format!("    {}\n", f.source));
            }
        }
        out
    }
}

/// The PTX rules alone, for a caller that compiles for sm_100a itself (a native run).
pub fn check_ptx(source: &KernelSource, defines: &[(String, String)]) -> Result<()> {
    let findings = ptx_findings(source, defines)?;
    if !findings.is_empty() {
        return Err(RuleError {
            path: source.path.clone(),
            findings,
        }
        .into());
    }
    Ok(())
}

/// The static check of a Hopper twin: the rules of `ptx_check` that apply to it (the staging
/// tile's proxy fence and barrier before a TMA store, the wgmma wait depth; the tcgen05 rules
/// find nothing there).
pub fn check_twin(source: &KernelSource, defines: &[(String, String)]) -> Result<()> {
    let findings = ptx_findings_for(source, Target::Sm90a, defines)?;
    if !findings.is_empty() {
        anyhow::bail!("{}", describe_for(&source.path, "sm_90a", &findings));
    }
    Ok(())
}

/// The static checks of a Blackwell kernel: the PTX rules, then the native sm_100a compile
/// (ptxas). Returns that compile (`runner step` without a GPU reports it); an error names every
/// finding with its source line ([`RuleError`]), or carries ptxas' log (a [`CompileError`] under
/// its context). The one entry point: the runner and the grader call it for every Blackwell
/// build.
pub fn check_blackwell(source: &KernelSource, defines: &[(String, String)]) -> Result<Compiled> {
    check_ptx(source, defines)?;
    compile(source, Target::Sm100a, defines).map_err(|e| {
        if e.downcast_ref::<CompileError>().is_some() {
            e.context("the native sm_100a compile, which every Blackwell kernel must pass (also when it runs emulated), fails")
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.visible .entry k()
{
\t.loc\t1 10 3
\tmov.u32 %r1, 0;
\t.loc\t3 172 3, function_name $L__info_string23, inlined_at 1 162 7
\t.loc\t2 83 3, function_name $L__info_string16, inlined_at 3 172 3
\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%r10, %r11}, [%r4];
\tret;
}
\t.file\t1 \"/work/x/steps/step4_persistent/src/kernel.cu\"
\t.file\t2 \"/work/x/common.cuh\"
\t.file\t3 \"/work/x/blackwell.cuh\"
";

    #[test]
    fn ptx_lines_lead_to_the_kernel_line_through_inlining() {
        let path = "steps/step4_persistent/src/kernel.cu";
        assert_eq!(source_line(PTX, 4, path), Some(10));
        // Inlined twice (common.cuh into blackwell.cuh into the kernel): the kernel's call site.
        assert_eq!(source_line(PTX, 7, path), Some(162));
        assert_eq!(source_line(PTX, 7, "other.cu"), None);
    }

    #[test]
    fn findings_name_rule_file_line_and_source() {
        let f = SourceFinding {
            rule: "wait-before-use",
            line: Some(190),
            source: "out[e] = acc[j + e];".into(),
            ptx: "mov.b32 %f1, %r10".into(),
        };
        let s = describe("k.cu", &[f]);
        assert!(
            s.contains("wait-before-use: k.cu:190: `out[e] = acc[j + e];`"),
            "{s}"
        );
        assert!(s.contains("tcgen05.wait::ld"), "{s}");
    }
}
