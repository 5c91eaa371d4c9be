//! Disassembling a CUBIN with nvdisasm and counting its instructions.

use crate::toolkit;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
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
    let out = Command::new(&nvdisasm)
        .arg("-c")
        .arg(&path)
        .output()
        .with_context(|| format!("cannot run {}", nvdisasm.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        bail!(
            "nvdisasm failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(Sass::parse(&String::from_utf8_lossy(&out.stdout)))
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
    }
}
