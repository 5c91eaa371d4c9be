//! Disassembling a CUBIN with nvdisasm and counting its instructions.

use crate::toolkit;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[derive(Debug, Clone, Serialize)]
pub struct Sass {
    #[serde(skip)]
    pub listing: String,
    /// Opcode with its modifiers (`UTMALDG.2D`, `LDTM.x32`) -> count.
    pub histogram: BTreeMap<String, usize>,
}

impl Sass {
    /// Parse an nvdisasm listing: lines `/*0040*/  @P0 OPCODE.MODS operands ;`.
    pub fn parse(listing: &str) -> Sass {
        let mut histogram = BTreeMap::new();
        for line in listing.lines() {
            let Some(rest) = line.trim_start().strip_prefix("/*") else {
                continue;
            };
            let Some((addr, body)) = rest.split_once("*/") else {
                continue;
            };
            if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            let mut words = body.split_whitespace().peekable();
            if words.peek().is_some_and(|w| w.starts_with('@')) {
                words.next();
            }
            if let Some(op) = words.next() {
                let op = op.trim_end_matches(';');
                if op.starts_with(|c: char| c.is_ascii_uppercase()) {
                    *histogram.entry(op.to_string()).or_insert(0) += 1;
                }
            }
        }
        Sass {
            listing: listing.to_string(),
            histogram,
        }
    }

    /// The instructions of kernel `entry` alone: its own `.text.<entry>` section and those of the
    /// functions it calls, transitively. Another `__global__` function in the same module is
    /// never launched by the grader, so its instructions must not count for the one that is.
    pub fn of_kernel(listing: &str, entry: &str) -> Result<Sass> {
        let text: String = kernel_sections(listing, entry)?
            .into_iter()
            .map(|(_, body)| body)
            .collect();
        Ok(Sass::parse(&text))
    }

    /// Instructions whose opcode starts with `prefix` (`UTCHMMA` also counts `UTCHMMA.2CTA`).
    pub fn count(&self, prefix: &str) -> usize {
        self.histogram
            .iter()
            .filter(|(op, _)| op.as_str() == prefix || op.starts_with(&format!("{prefix}.")))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn total(&self) -> usize {
        self.histogram.values().sum()
    }

    /// Local-memory traffic: the tell-tale of register spills or dynamically indexed arrays.
    pub fn local_memory_ops(&self) -> usize {
        self.count("LDL") + self.count("STL")
    }
}

/// The sections of kernel `entry` and of the functions it calls, transitively: (function name,
/// its listing lines).
fn kernel_sections(listing: &str, entry: &str) -> Result<Vec<(String, String)>> {
    // Section name -> its instruction lines, and the functions its CALLs name.
    let mut sections: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in listing.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(".section") {
            let name = rest.trim_start().split(',').next().unwrap_or("").trim();
            current = name.strip_prefix(".text.").map(str::to_string);
            continue;
        }
        let Some(f) = &current else { continue };
        let (text, calls) = sections.entry(f.clone()).or_default();
        text.push_str(line);
        text.push('\n');
        if t.starts_with("/*") && t.contains(" CALL.") {
            // `CALL.ABS.NOINC `(callee) ;` or `CALL.REL.NOINC `($__internal_0_...) ;`
            if let Some(callee) = t
                .split_once("`(")
                .and_then(|(_, r)| r.split_once(')'))
                .map(|(c, _)| c.trim().to_string())
            {
                calls.push(callee);
            }
        }
    }
    if !sections.contains_key(entry) {
        bail!("the module has no kernel {entry} (its SASS has no .text.{entry} section)");
    }
    let mut todo = vec![entry.to_string()];
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    while let Some(f) = todo.pop() {
        if seen.contains(&f) {
            continue;
        }
        if let Some((body, calls)) = sections.get(&f) {
            out.push((f.clone(), body.clone()));
            todo.extend(calls.iter().cloned());
        }
        seen.push(f);
    }
    Ok(out)
}

/// One instruction of a listing, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Instruction {
    /// The function (section `.text.<function>`) it is in.
    pub function: String,
    /// Its byte offset in the function (`/*0040*/`).
    pub offset: u32,
    /// Opcode with modifiers (`UTMALDG.2D.MULTICAST`).
    pub op: String,
    /// Its guard (`P0`, `!UP1`), if it has one other than the always-true `PT`.
    pub guard: Option<String>,
}

/// The instructions of kernel `entry` and the functions it calls, each at its offset: the map
/// from a measured instruction's (function, offset) to what it is.
pub fn instructions_of_kernel(listing: &str, entry: &str) -> Result<Vec<Instruction>> {
    let mut out = Vec::new();
    for (function, body) in kernel_sections(listing, entry)? {
        for line in body.lines() {
            let Some(rest) = line.trim_start().strip_prefix("/*") else {
                continue;
            };
            let Some((addr, body)) = rest.split_once("*/") else {
                continue;
            };
            if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            let Ok(offset) = u32::from_str_radix(addr, 16) else {
                continue;
            };
            let mut words = body.split_whitespace().peekable();
            let guard = words
                .peek()
                .and_then(|w| w.strip_prefix('@'))
                .map(str::to_string);
            if guard.is_some() {
                words.next();
            }
            let Some(op) = words.next().map(|w| w.trim_end_matches(';')) else {
                continue;
            };
            if !op.starts_with(|c: char| c.is_ascii_uppercase()) {
                continue;
            }
            out.push(Instruction {
                function: function.clone(),
                offset,
                op: op.to_string(),
                guard: guard.filter(|g| g != "PT" && g != "UPT"),
            });
        }
    }
    Ok(out)
}

/// Disassemble a CUBIN (nvdisasm from the toolkit, or installed from PyPI).
pub fn disassemble(cubin: &[u8]) -> Result<Sass> {
    let tk = toolkit::get()?;
    let nvdisasm = tk.nvdisasm()?;
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("workbook-sass-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("kernel.cubin");
    std::fs::write(&path, cubin).with_context(|| format!("cannot write {}", path.display()))?;
    let listing = listing_of(&nvdisasm, &path);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Sass::parse(&listing?))
}

/// The listing `nvdisasm -c` prints for the CUBIN file `cubin` (which it only reads: a grading
/// child disassembles the file it compiled, in its own folder).
pub fn listing_of(nvdisasm: &Path, cubin: &Path) -> Result<String> {
    // A pipe, not /dev/null, for its stdin: a confined grading child may not open /dev/null.
    let out = Command::new(nvdisasm)
        .arg("-c")
        .arg(cubin)
        .stdin(std::process::Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", nvdisasm.display()))?;
    if !out.status.success() {
        bail!(
            "nvdisasm failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_opcodes_with_predicates_and_modifiers() {
        let listing = "\
        /*0000*/                   LDC R1, c[0x0][0x37c] ;\n\
        /*0010*/              @P0  UTMALDG.2D [UR8], [UR14] ;\n\
        /*0020*/             @!UP1 UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR11], UPT ;\n\
        /*0030*/                   LDTM.x32 R4, tmem[UR4] ;\n\
        .L_x_1:\n\
        /*0040*/                   EXIT ;\n";
        let s = Sass::parse(listing);
        assert_eq!(s.count("UTMALDG"), 1);
        assert_eq!(s.count("UTCHMMA"), 1);
        assert_eq!(s.count("LDTM"), 1);
        assert_eq!(s.count("LDT"), 0, "prefix matches whole opcode names only");
        assert_eq!(s.total(), 5);
        assert_eq!(s.local_memory_ops(), 0);
        let listing = format!("\t.section\t.text.k,\"ax\",@progbits\n{listing}");
        let pcs = instructions_of_kernel(&listing, "k").unwrap();
        let guards: Vec<(u32, Option<&str>)> =
            pcs.iter().map(|i| (i.offset, i.guard.as_deref())).collect();
        assert_eq!(
            guards,
            [
                (0, None),
                (0x10, Some("P0")),
                (0x20, Some("!UP1")),
                (0x30, None),
                (0x40, None)
            ]
        );
    }

    #[test]
    fn a_kernel_counts_its_own_section_and_its_callees_only() {
        let listing = "\
\t.section\t.text.decoy,\"ax\",@progbits\n\
        .other          decoy,@\"STO_CUDA_ENTRY STV_DEFAULT\"\n\
        /*0000*/                   UTCHMMA.2CTA gdesc[UR4], gdesc[UR6], tmem[UR8] ;\n\
\t.section\t.text._Z6helperv,\"ax\",@progbits\n\
        /*0000*/                   UTMALDG.2D.MULTICAST [UR8], [UR14] ;\n\
        /*0010*/                   RET.ABS.NODEC R20 0x0 ;\n\
\t.section\t.text.gemm_kernel,\"ax\",@progbits\n\
        /*0000*/                   UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8] ;\n\
        /*0010*/                   CALL.ABS.NOINC `(_Z6helperv) ;\n\
        /*0020*/                   EXIT ;\n\
\t.section\t.nv.constant0.gemm_kernel,\"a\",@progbits\n\
        /*0000*/                   .zero 900 ;\n";
        let k = Sass::of_kernel(listing, "gemm_kernel").unwrap();
        assert_eq!(k.count("UTCHMMA"), 1);
        assert_eq!(
            k.count("UTCHMMA.2CTA"),
            0,
            "the decoy kernel does not count"
        );
        assert_eq!(k.count("UTMALDG"), 1, "the called helper counts");
        assert_eq!(k.total(), 5);
        let pcs = instructions_of_kernel(listing, "gemm_kernel").unwrap();
        let at = |f: &str, o: u32| {
            pcs.iter()
                .find(|i| i.function == f && i.offset == o)
                .map(|i| i.op.as_str())
        };
        assert_eq!(at("gemm_kernel", 0x10), Some("CALL.ABS.NOINC"));
        assert_eq!(at("_Z6helperv", 0), Some("UTMALDG.2D.MULTICAST"));
        assert_eq!(at("decoy", 0), None, "the decoy kernel is not mapped");
        assert_eq!(pcs.len(), 5);
        let e = Sass::of_kernel(listing, "other").unwrap_err();
        assert!(e.to_string().contains("no kernel other"), "{e}");
    }
}
