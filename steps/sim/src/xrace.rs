//! Races on global memory between clusters (rule `cross-cluster-race`).
//!
//! PTX ISA, "Memory Consistency Model" ("Data races" and "Morally strong operations"): two
//! overlapping memory operations conflict when at least one is a write; a conflicting pair
//! that is not morally strong (both strong, i.e. atomic, `.relaxed`/`.acquire`/`.release` or
//! `.volatile`, with a scope that includes both threads) and that causality order does not
//! order is a data race, and the values it produces are undefined. Clusters synchronise only
//! through global memory, so between two clusters the only orders are release/acquire patterns
//! at gpu (or sys) scope: a strong write that releases, a strong read that acquires.
//!
//! The checker here is the simplest sound one, built so that it can become an observer of the
//! vector-clock happens-before checker later (it sees only: a read or a write of global bytes
//! by a cluster at a site, a strong access, a cluster admitted or finished):
//! - each cluster is one agent with a vector clock over the grid's clusters; accesses of one
//!   cluster are never compared with each other (ordering inside a cluster is the ordering
//!   rules' and the happens-before checker's business);
//! - every strong global access at gpu or sys scope (any `atom`/`red`; `ld`/`st` that are
//!   `.volatile`, or `.relaxed`/`.acquire`/`.release` at `.gpu`/`.sys`) both releases (the
//!   location's clock joins the cluster's) and acquires (the cluster's clock joins the
//!   location's). That credits more order than the ISA gives (a relaxed access or a plain
//!   access before a release fence gets the benefit; a fence is then not needed): it can miss
//!   a race, never invent one. Strong accesses are not checked against each other (atomics do
//!   not race with each other); `.cta`/`.cluster`-scoped ones are plain across clusters;
//! - shadow memory at 16-byte granules keeps the last write and the last read (with a byte
//!   mask), so a read that a later read replaced can be missed, not misreported.

use crate::error::SimError;
use crate::mem::GLOBAL_BASE;
use std::collections::HashMap;

/// Where an access came from: the CTA (linear), warp and (PTX, source) line.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Site {
    pub cta: u32,
    pub warp: u32,
    pub line: (u32, u32),
}

#[derive(Debug, Clone, Copy, Default)]
struct Access {
    /// Cluster linear number + 1 (0: none).
    cl: u32,
    clock: u32,
    mask: u16,
    site: Site,
}

#[derive(Debug, Clone, Copy, Default)]
struct Gran {
    write: Access,
    read: Access,
}

/// How an opcode takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    #[default]
    Plain,
    Strong,
}

fn kind_of(opcode: &str) -> Kind {
    let mods: Vec<&str> = opcode.split('.').collect();
    let has = |m: &str| mods.contains(&m);
    let base = mods.first().copied().unwrap_or("");
    let narrow = has("cta") || has("cluster");
    match base {
        // Atomics default to .gpu scope (PTX ISA, atom: "the default scope is .gpu").
        "atom" | "red" if !narrow => Kind::Strong,
        "ld" | "st" if has("volatile") => Kind::Strong,
        "ld" | "st"
            if (has("relaxed") || has("acquire") || has("release"))
                && (has("gpu") || has("sys")) =>
        {
            Kind::Strong
        }
        _ => Kind::Plain,
    }
}

#[derive(Default)]
pub(crate) struct XRace {
    on: bool,
    n: usize,
    kinds: Vec<Kind>,
    /// Vector clock of each resident cluster (indexed by linear number; empty otherwise).
    vc: Vec<Vec<u32>>,
    /// The clock each synchronising location holds (by 4-byte word address).
    sync: HashMap<u64, Vec<u32>>,
    shadow: Vec<Gran>,
    active: u32,
}

impl XRace {
    /// For a launch of `clusters` clusters: off when there is only one.
    pub fn new(opcodes: &[String], clusters: u32) -> XRace {
        XRace {
            on: clusters > 1,
            n: clusters as usize,
            kinds: opcodes.iter().map(|o| kind_of(o)).collect(),
            vc: vec![Vec::new(); clusters as usize],
            ..XRace::default()
        }
    }

    pub fn on(&self) -> bool {
        self.on
    }

    pub fn set_active(&mut self, linear: u32) {
        self.active = linear;
    }

    pub fn admit(&mut self, linear: u32) {
        if self.on {
            let mut v = vec![0u32; self.n];
            v[linear as usize] = 1;
            self.vc[linear as usize] = v;
        }
    }

    pub fn finish(&mut self, linear: u32) {
        if self.on {
            self.vc[linear as usize] = Vec::new();
        }
    }

    /// Whether opcode `key` is a strong (synchronising) access across clusters.
    pub fn strong(&self, key: u32) -> bool {
        self.kinds.get(key as usize) == Some(&Kind::Strong)
    }

    /// A strong access at `addr` by the active cluster: acquire, then release.
    pub fn sync_access(&mut self, addr: u64) {
        if !self.on {
            return;
        }
        let me = self.active as usize;
        let word = addr & !3;
        let loc = self.sync.entry(word).or_insert_with(|| vec![0; self.n]);
        let v = &mut self.vc[me];
        for (a, b) in v.iter_mut().zip(loc.iter_mut()) {
            let m = (*a).max(*b);
            *a = m;
            *b = m;
        }
        v[me] += 1;
    }

    /// A plain read (`write == false`) or write of `len` global bytes at `addr` by the active
    /// cluster, at `site`. Err: the conflicting earlier access and this one, in words.
    pub fn access(&mut self, addr: u64, len: u64, write: bool, site: Site) -> Result<(), String> {
        if !self.on || len == 0 {
            return Ok(());
        }
        let Some(off) = addr.checked_sub(GLOBAL_BASE) else {
            return Ok(());
        };
        let me = self.active;
        let first = off / 16;
        let last = (off + len - 1) / 16;
        if self.shadow.len() <= last as usize {
            self.shadow.resize(last as usize + 1, Gran::default());
        }
        let vc = &self.vc[me as usize];
        let now = Access {
            cl: me + 1,
            clock: vc[me as usize],
            mask: 0,
            site,
        };
        for g in first..=last {
            let lo = if g == first { off % 16 } else { 0 };
            let hi = if g == last { (off + len - 1) % 16 } else { 15 };
            let mask = ((0xFFFFu32 >> (15 - hi + lo)) << lo) as u16;
            let e = &mut self.shadow[g as usize];
            let unordered = |a: &Access| {
                a.cl != 0
                    && a.cl != me + 1
                    && a.mask & mask != 0
                    && vc[(a.cl - 1) as usize] < a.clock
            };
            let earlier = if unordered(&e.write) {
                Some((e.write, "wrote"))
            } else if write && unordered(&e.read) {
                Some((e.read, "read"))
            } else {
                None
            };
            if let Some((a, what)) = earlier {
                let at = GLOBAL_BASE + g * 16 + u64::from(a.mask.trailing_zeros());
                return Err(format!(
                    "global memory at {at:#x}: CTA {} warp {} of cluster {} {what} it at source line {} (PTX line {}), and CTA {} warp {} of cluster {} {} it at source line {} (PTX line {}), with nothing ordering the two: no gpu-scope release and acquire (st.release.gpu / ld.acquire.gpu, an atomic, or a fence with a strong access) between the clusters (PTX ISA, Memory Consistency Model: a data race, whose values are undefined)",
                    a.site.cta, a.site.warp, a.cl - 1, a.site.line.1, a.site.line.0,
                    site.cta, site.warp, me, if write { "writes" } else { "reads" }, site.line.1, site.line.0
                ));
            }
            let rec = Access { mask, ..now };
            if write {
                e.write = rec;
                e.read = Access::default();
            } else {
                e.read = rec;
            }
        }
        Ok(())
    }
}

/// The rule's error at a site.
pub(crate) fn race_error(site: Site, detail: String) -> SimError {
    SimError::Rule {
        rule: "cross-cluster-race",
        cta: site.cta,
        warp: site.warp,
        ptx_line: site.line.0,
        source_line: site.line.1,
        detail,
    }
}

impl crate::machine::Machine<'_> {
    /// A global access by thread `t` (its current instruction) to `len` bytes at `addr`.
    pub(crate) fn global_access(
        &mut self,
        t: u32,
        addr: u64,
        len: u64,
        write: bool,
    ) -> Result<(), SimError> {
        let th = &self.threads[t as usize];
        let Some(ins) = self.k.code.get(th.pc as usize) else {
            return Ok(());
        };
        if self.xr.strong(ins.key) {
            self.xr.sync_access(addr);
            return Ok(());
        }
        let site = Site {
            cta: self.cta_linear(th.cta),
            warp: th.warp,
            line: self.line_of(t),
        };
        self.xr
            .access(addr, len, write, site)
            .map_err(|d| race_error(site, d))
    }

    /// Global bytes an asynchronous operation (a TMA load or store) of thread `t`, issued at
    /// `line`, read or wrote.
    pub(crate) fn global_ranges(
        &mut self,
        t: u32,
        line: (u32, u32),
        ranges: &[(u64, u64)],
        write: bool,
    ) -> Result<(), SimError> {
        let th = &self.threads[t as usize];
        let site = Site {
            cta: self.cta_linear(th.cta),
            warp: th.warp,
            line,
        };
        for &(a, n) in ranges {
            self.xr
                .access(a, n, write, site)
                .map_err(|d| race_error(site, d))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strong_accesses_by_spelling() {
        assert_eq!(kind_of("atom.global.add.u32"), Kind::Strong);
        assert_eq!(kind_of("atom.cta.global.add.u32"), Kind::Plain);
        assert_eq!(kind_of("ld.acquire.gpu.global.u32"), Kind::Strong);
        assert_eq!(kind_of("ld.acquire.cluster.global.u32"), Kind::Plain);
        assert_eq!(kind_of("st.volatile.global.u32"), Kind::Strong);
        assert_eq!(kind_of("st.global.u32"), Kind::Plain);
    }

    #[test]
    fn disjoint_bytes_do_not_conflict_and_overlapping_ones_do() {
        let mut x = XRace::new(&[], 2);
        x.admit(0);
        x.admit(1);
        let s = Site::default();
        x.set_active(0);
        x.access(GLOBAL_BASE, 2, true, s).unwrap();
        x.set_active(1);
        x.access(GLOBAL_BASE + 2, 2, true, s).unwrap();
        x.access(GLOBAL_BASE + 4, 1, false, s).unwrap();
        x.set_active(0);
        assert!(x.access(GLOBAL_BASE + 3, 1, false, s).is_err());
        // After a release by cluster 1 that cluster 0 acquires, the write is ordered.
        x.set_active(1);
        x.sync_access(GLOBAL_BASE + 64);
        x.set_active(0);
        x.sync_access(GLOBAL_BASE + 64);
        x.access(GLOBAL_BASE + 3, 1, false, s).unwrap();
    }
}
