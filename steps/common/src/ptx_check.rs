//! A static check of a kernel's sm_100a PTX (from `compile::compile_ptx`) for three tcgen05 rules
//! of the PTX ISA that the hardware does not check and a B200 punishes only sometimes:
//!
//! - `fence-after-wait`: on every path from an mbarrier wait (`mbarrier.try_wait`/`test_wait`) or
//!   a thread barrier (`bar.sync`, `barrier.sync`, `barrier.cluster.wait`) to a `tcgen05.mma` or
//!   `tcgen05.ld`, a `tcgen05.fence::after_thread_sync` comes first (PTX ISA, tcgen05 memory
//!   consistency model, "Specialized Inter-thread Synchronization" and "Canonical
//!   synchronization patterns");
//! - `wait-before-use`: no destination register of a `tcgen05.ld` is read on a path that has not
//!   passed a `tcgen05.wait::ld` (the workbook's convention, stronger than the ISA's minimum
//!   "Register dependencies, same thread", and what `bw::tmem_wait_ld(acc)` guarantees: it checks
//!   that the compiler kept the wait tied to the registers);
//! - `one-cta-group`: all tcgen05 instructions of a kernel use the same `.cta_group` ("All tcgen05
//!   instructions within a kernel must specify the same value for the .cta_group qualifier");
//! - `proxy-fence-before-store` and `barrier-before-store`: on every path from an ordinary
//!   shared-memory store (`st.shared`, `stmatrix`) to a TMA store (`cp.async.bulk.tensor` global
//!   <- shared), a `fence.proxy.async` comes first (PTX ISA "Memory Consistency Model: Proxies":
//!   generic-proxy writes are not visible to the async proxy otherwise), and after it a thread
//!   barrier (`bar.sync`, `bar.warp.sync`, ...), since the storing thread issues what other
//!   threads wrote. This holds for the Hopper twins' PTX too;
//! - `wgmma-wait-before-use` (the twins): no accumulator register of a `wgmma.mma_async` is read
//!   (other than by a later wgmma accumulating into it) until a `wgmma.wait_group N` has completed
//!   its group, i.e. at most N groups were committed after it (PTX ISA "wgmma.wait_group":
//!   "Accessing the accumulator register ... before the wgmma.wait_group ... is undefined
//!   behavior"). A `mov` of such a register only copies the obligation to its destination.
//!
//! The path rules are forward "may" data-flow analyses over the control-flow graph of each
//! `.entry`, so loops and branches count: a violation on any path is reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One violation: the rule, the 1-based PTX line and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub line: usize,
    pub text: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at PTX line {}: {}", self.rule, self.line, self.text)
    }
}

struct Instr {
    line: usize,
    text: String,
    opcode: String,
    predicated: bool,
    operands: Vec<String>,
}

/// The statements of one function body, with labels as indices into `instrs`.
struct Body {
    instrs: Vec<Instr>,
    labels: HashMap<String, usize>,
}

/// Split `a, {b, c}, [d]` at top-level commas.
fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for ch in s.chars() {
        match ch {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Registers (`%r12`, `%rd3`, `%p1`, ...) named in an operand.
fn registers(operand: &str) -> Vec<String> {
    let mut regs = Vec::new();
    let b = operand.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            regs.push(operand[start..i].to_string());
        } else {
            i += 1;
        }
    }
    regs
}

fn parse_body(lines: &[(usize, &str)]) -> Body {
    let mut body = Body {
        instrs: Vec::new(),
        labels: HashMap::new(),
    };
    for &(line, raw) in lines {
        let code = raw.split("//").next().unwrap_or("");
        for stmt in code.split(';') {
            let mut t = stmt.replace(['{', '}'], " ");
            t = t.trim().to_string();
            // A label: an identifier, then a single colon (`shared::cta` is not one).
            while let Some((label, rest)) = t.split_once(':').filter(|(l, r)| {
                !l.is_empty()
                    && !r.starts_with(':')
                    && l.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            }) {
                body.labels.insert(label.to_string(), body.instrs.len());
                t = rest.trim().to_string();
            }
            if t.is_empty() || t.starts_with('.') {
                continue;
            }
            let predicated = t.starts_with('@');
            let t_body = if predicated {
                t.split_once(char::is_whitespace).map_or("", |x| x.1).trim()
            } else {
                t.as_str()
            };
            let (opcode, rest) = t_body
                .split_once(char::is_whitespace)
                .unwrap_or((t_body, ""));
            body.instrs.push(Instr {
                line,
                text: stmt.trim().to_string(),
                opcode: opcode.to_string(),
                predicated,
                operands: split_operands(rest),
            });
        }
    }
    body
}

/// Successors of instruction `i`.
fn successors(body: &Body, i: usize) -> Vec<usize> {
    let ins = &body.instrs[i];
    let next = (i + 1 < body.instrs.len()).then_some(i + 1);
    if ins.opcode.starts_with("bra") {
        let target = ins
            .operands
            .first()
            .and_then(|l| body.labels.get(l.as_str()).copied());
        let mut s: Vec<usize> = target.into_iter().collect();
        if ins.predicated {
            s.extend(next);
        }
        return s;
    }
    if ins.opcode == "ret" || ins.opcode == "exit" || ins.opcode == "trap" {
        return if ins.predicated {
            next.into_iter().collect()
        } else {
            Vec::new()
        };
    }
    next.into_iter().collect()
}

/// Run a forward may-analysis: `state[i]` is what holds before instruction `i` on some path.
fn fixpoint<S: Clone + PartialEq + Default>(
    body: &Body,
    join: impl Fn(&mut S, &S) -> bool,
    transfer: impl Fn(&Instr, &S) -> S,
) -> Vec<S> {
    let n = body.instrs.len();
    let mut before = vec![S::default(); n];
    let mut work: Vec<usize> = (0..n).rev().collect();
    let mut queued = vec![true; n];
    while let Some(i) = work.pop() {
        queued[i] = false;
        let after = transfer(&body.instrs[i], &before[i]);
        for s in successors(body, i) {
            if join(&mut before[s], &after) && !queued[s] {
                queued[s] = true;
                work.push(s);
            }
        }
    }
    before
}

fn is_sync(op: &str) -> bool {
    op.starts_with("mbarrier.try_wait")
        || op.starts_with("mbarrier.test_wait")
        || op.starts_with("bar.sync")
        || op.starts_with("bar.cta.sync")
        || op.starts_with("barrier.sync")
        || op.starts_with("barrier.cta.sync")
        || op.starts_with("barrier.cluster.wait")
}

/// A barrier after which the writes of the threads it joins are visible to the thread that passes.
fn is_thread_barrier(op: &str) -> bool {
    op.starts_with("bar.sync")
        || op.starts_with("bar.cta.sync")
        || op.starts_with("barrier.sync")
        || op.starts_with("barrier.cta.sync")
        || op.starts_with("bar.warp.sync")
        || op.starts_with("barrier.cluster.wait")
}

/// An ordinary (generic-proxy) write that may go to shared memory: `st.shared`, `stmatrix`, or a
/// generic `st` (the compiler often cannot prove a staging pointer shared).
fn is_shared_store(op: &str) -> bool {
    let other_space = [".global", ".local", ".param", ".const", ".async", ".bulk"]
        .iter()
        .any(|q| op.contains(q));
    (op.starts_with("st.") && (op.contains(".shared") || !other_space))
        || op.starts_with("stmatrix")
}

/// A TMA store: shared memory read by the async proxy.
fn is_tma_store(op: &str) -> bool {
    op.starts_with("cp.async.bulk.tensor") && op.contains(".global.shared")
}

fn is_mma_or_ld(op: &str) -> bool {
    op.starts_with("tcgen05.mma") || op.starts_with("tcgen05.ld")
}

/// Whether an instruction writes its first operand (stores, branches, tcgen05 issue, barriers
/// and fences do not).
fn writes_first_operand(ins: &Instr) -> bool {
    let op = ins.opcode.as_str();
    let first = ins.operands.first().map(String::as_str).unwrap_or("");
    !(first.starts_with('[')
        || op.starts_with("st.")
        || op.starts_with("red.")
        || op.starts_with("bra")
        || op.starts_with("tcgen05.mma")
        || op.starts_with("tcgen05.st")
        || op.starts_with("tcgen05.commit")
        || op.starts_with("tcgen05.dealloc")
        || op.starts_with("tcgen05.cp")
        || op.starts_with("cp.")
        || op.starts_with("fence")
        || op.starts_with("bar")
        || op.starts_with("prefetch"))
}

/// `mov %d, %s` of a register a wgmma still owns: the age of `%s`, which `%d` inherits.
fn wgmma_copy(ins: &Instr, pending: &BTreeMap<String, u8>) -> Option<u8> {
    if !ins.opcode.starts_with("mov.") || ins.operands.len() != 2 {
        return None;
    }
    let src = ins.operands[1].trim();
    let dst = ins.operands[0].trim();
    if registers(src).len() != 1 || registers(dst).len() != 1 || src.contains('{') {
        return None;
    }
    pending.get(src).copied()
}

fn check_body(body: &Body, out: &mut Vec<Finding>) {
    // fence-after-wait: "synchronised since the last fence::after_thread_sync" on some path.
    let dirty = fixpoint::<bool>(
        body,
        |acc, new| {
            let changed = *new && !*acc;
            *acc |= *new;
            changed
        },
        |ins, &d| {
            if is_sync(&ins.opcode) {
                true
            } else if ins.opcode.starts_with("tcgen05.fence::after_thread_sync") {
                false
            } else {
                d
            }
        },
    );
    for (i, ins) in body.instrs.iter().enumerate() {
        if is_mma_or_ld(&ins.opcode) && dirty[i] {
            out.push(Finding {
                rule: "fence-after-wait",
                line: ins.line,
                text: ins.text.clone(),
            });
        }
    }

    // wait-before-use: destination registers of tcgen05.ld not yet covered by tcgen05.wait::ld.
    let pending = fixpoint::<BTreeSet<String>>(
        body,
        |acc, new| {
            let before = acc.len();
            acc.extend(new.iter().cloned());
            acc.len() != before
        },
        |ins, p| {
            let mut p = p.clone();
            if ins.opcode.starts_with("tcgen05.wait::ld") {
                p.clear();
            } else if ins.opcode.starts_with("tcgen05.ld") {
                if let Some(d) = ins.operands.first() {
                    p.extend(registers(d));
                }
            } else if writes_first_operand(ins) {
                if let Some(d) = ins.operands.first() {
                    for r in registers(d) {
                        p.remove(&r);
                    }
                }
            }
            p
        },
    );
    for (i, ins) in body.instrs.iter().enumerate() {
        if ins.opcode.starts_with("tcgen05.ld") || ins.opcode.starts_with("tcgen05.wait") {
            continue;
        }
        let skip_first = writes_first_operand(ins);
        let read = ins
            .operands
            .iter()
            .enumerate()
            .filter(|(k, _)| !(skip_first && *k == 0))
            .flat_map(|(_, o)| registers(o))
            .any(|r| pending[i].contains(&r));
        if read {
            out.push(Finding {
                rule: "wait-before-use",
                line: ins.line,
                text: ins.text.clone(),
            });
        }
    }

    // proxy-fence-before-store / barrier-before-store: 2 = shared memory written since the last
    // proxy fence, 1 = fenced but no barrier since, 0 = clean (the worst state on some path).
    let staged = fixpoint::<u8>(
        body,
        |acc, new| {
            let changed = *new > *acc;
            *acc = (*acc).max(*new);
            changed
        },
        |ins, &st| {
            let op = ins.opcode.as_str();
            if is_shared_store(op) {
                2
            } else if op.starts_with("fence.proxy.async") && st == 2 {
                1
            } else if is_thread_barrier(op) && st == 1 {
                0
            } else {
                st
            }
        },
    );
    for (i, ins) in body.instrs.iter().enumerate() {
        if is_tma_store(&ins.opcode) && staged[i] > 0 {
            out.push(Finding {
                rule: if staged[i] == 2 {
                    "proxy-fence-before-store"
                } else {
                    "barrier-before-store"
                },
                line: ins.line,
                text: ins.text.clone(),
            });
        }
    }

    // wgmma-wait-before-use: per register written by a wgmma and not yet waited for, the fewest
    // commit_groups issued after it on some path (0: its group is not committed yet).
    let wgmma = fixpoint::<BTreeMap<String, u8>>(
        body,
        |acc, new| {
            let mut changed = false;
            for (r, &age) in new {
                match acc.get_mut(r) {
                    Some(a) if *a <= age => {}
                    Some(a) => {
                        *a = age;
                        changed = true;
                    }
                    None => {
                        acc.insert(r.clone(), age);
                        changed = true;
                    }
                }
            }
            changed
        },
        |ins, p| {
            let op = ins.opcode.as_str();
            let mut p = p.clone();
            if op.starts_with("wgmma.mma_async") {
                if let Some(d) = ins.operands.first() {
                    for r in registers(d) {
                        p.insert(r, 0);
                    }
                }
            } else if op.starts_with("wgmma.commit_group") {
                for age in p.values_mut() {
                    *age = (*age + 1).min(8);
                }
            } else if op.starts_with("wgmma.wait_group") {
                let n: u8 = ins
                    .operands
                    .first()
                    .and_then(|o| o.trim().parse().ok())
                    .unwrap_or(0);
                p.retain(|_, age| *age <= n);
            } else if let Some(age) = wgmma_copy(ins, &p) {
                if let Some(d) = ins.operands.first() {
                    p.insert(d.clone(), age);
                }
            } else if writes_first_operand(ins) {
                if let Some(d) = ins.operands.first() {
                    for r in registers(d) {
                        p.remove(&r);
                    }
                }
            }
            p
        },
    );
    for (i, ins) in body.instrs.iter().enumerate() {
        let op = ins.opcode.as_str();
        if op.starts_with("wgmma.") || wgmma_copy(ins, &wgmma[i]).is_some() {
            continue;
        }
        let skip_first = writes_first_operand(ins);
        let read = ins
            .operands
            .iter()
            .enumerate()
            .filter(|(k, _)| !(skip_first && *k == 0))
            .flat_map(|(_, o)| registers(o))
            .any(|r| wgmma[i].contains_key(&r));
        if read {
            out.push(Finding {
                rule: "wgmma-wait-before-use",
                line: ins.line,
                text: ins.text.clone(),
            });
        }
    }

    // one-cta-group: reported at the first instruction whose cta_group differs from the first's.
    let grouped: Vec<(&Instr, &str)> = body
        .instrs
        .iter()
        .filter(|i| i.opcode.starts_with("tcgen05."))
        .filter_map(|i| {
            i.opcode
                .split('.')
                .find(|q| q.starts_with("cta_group::"))
                .map(|g| (i, g))
        })
        .collect();
    let groups: BTreeSet<&str> = grouped.iter().map(|(_, g)| *g).collect();
    if let (true, Some((first, g0))) = (groups.len() > 1, grouped.first()) {
        let odd = grouped
            .iter()
            .find(|(_, g)| g != g0)
            .map_or(*first, |(i, _)| *i);
        out.push(Finding {
            rule: "one-cta-group",
            line: odd.line,
            text: format!(
                "{} (tcgen05 instructions use {}; the first, {}, uses {g0})",
                odd.text,
                groups.into_iter().collect::<Vec<_>>().join(" and "),
                first.opcode
            ),
        });
    }
}

/// Check every `.entry` and `.func` of a PTX module; an empty list means every rule holds.
pub fn check(ptx: &str) -> Vec<Finding> {
    let lines: Vec<(usize, &str)> = ptx.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, (_, l))| l.contains(".entry ") || l.contains(".func "))
        .map(|(k, _)| k)
        .collect();
    let mut out = Vec::new();
    for (n, &s) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(lines.len());
        // The body starts after the parameter list's closing parenthesis.
        let open = (s..end).find(|&k| lines[k].1.trim() == "{").unwrap_or(end);
        check_body(&parse_body(&lines[open..end]), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
.visible .entry k(
\t.param .u32 p
)
{
\t.reg .pred %p<3>;
$L__BB0_1:
\t{
\t.reg .pred p;
\tmbarrier.try_wait.parity.shared::cta.b64 p, [%r1], %r2;
\tselp.u32 %r3, 1, 0, p;
\t}
\tsetp.eq.s32 %p1, %r3, 0;
\t@%p1 bra $L__BB0_1;
\ttcgen05.fence::after_thread_sync;
\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%r10, %r11}, [%r4];
\ttcgen05.wait::ld.sync.aligned;
\tmov.b32 %f1, %r10;
\ttcgen05.mma.cta_group::1.kind::f16 [%r5], %rd1, %rd2, %r6, %p2;
\tret;
}
";

    #[test]
    fn a_kernel_that_follows_the_rules_passes() {
        assert_eq!(check(GOOD), vec![]);
    }

    #[test]
    fn a_missing_fence_after_a_wait_loop_is_found_on_the_loop_exit() {
        let bad = GOOD.replace("\ttcgen05.fence::after_thread_sync;\n", "");
        let f = check(&bad);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|x| x.rule == "fence-after-wait"));
        assert!(f[0].text.starts_with("tcgen05.ld"), "{f:?}");
    }

    #[test]
    fn a_fence_on_one_branch_only_is_not_enough() {
        let bad = GOOD.replace(
            "\ttcgen05.fence::after_thread_sync;\n",
            "\t@%p2 bra $L__BB0_9;\n\ttcgen05.fence::after_thread_sync;\n$L__BB0_9:\n",
        );
        assert_eq!(check(&bad)[0].rule, "fence-after-wait");
    }

    #[test]
    fn reading_a_loaded_register_before_the_wait_is_found() {
        let bad = GOOD.replace(
            "\ttcgen05.wait::ld.sync.aligned;\n\tmov.b32 %f1, %r10;\n",
            "\tmov.b32 %f1, %r10;\n\ttcgen05.wait::ld.sync.aligned;\n",
        );
        let f = check(&bad);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, "wait-before-use");
        assert_eq!(f[0].text, "mov.b32 %f1, %r10");
        // Overwriting the register is not a read.
        let ok = GOOD.replace(
            "\ttcgen05.wait::ld.sync.aligned;\n",
            "\tmov.b32 %r11, 0;\n\ttcgen05.wait::ld.sync.aligned;\n",
        );
        assert_eq!(check(&ok), vec![]);
    }

    #[test]
    fn mixed_cta_groups_are_found() {
        let bad = GOOD.replace(
            "\tret;",
            "\ttcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r7], %rs1;\n\tret;",
        );
        let f = check(&bad);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, "one-cta-group");
        assert!(f[0].text.contains("cta_group::1 and cta_group::2"));
    }

    const STAGED: &str = "\
.visible .entry k()
{
\tst.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};
\tfence.proxy.async.shared::cta;
\tbar.warp.sync -1;
\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, %r7}], [%r1];
\tret;
}
";

    #[test]
    fn a_tma_store_needs_a_proxy_fence_then_a_barrier_after_the_staging_writes() {
        assert_eq!(check(STAGED), vec![]);
        let no_fence = STAGED.replace("\tfence.proxy.async.shared::cta;\n", "");
        assert_eq!(check(&no_fence)[0].rule, "proxy-fence-before-store");
        // A generic store may be one to shared memory; a global one is not.
        let generic = STAGED.replace("st.shared.v4.u32", "st.v4.u32");
        assert_eq!(
            check(&generic.replace("\tfence.proxy.async.shared::cta;\n", ""))[0].rule,
            "proxy-fence-before-store"
        );
        let global = STAGED.replace("st.shared.v4.u32", "st.global.v4.u32");
        assert_eq!(
            check(&global.replace("\tfence.proxy.async.shared::cta;\n", "")),
            vec![]
        );
        let no_barrier = STAGED.replace("\tbar.warp.sync -1;\n", "");
        assert_eq!(check(&no_barrier)[0].rule, "barrier-before-store");
        // A fence before the writes fences nothing.
        let early = STAGED.replace(
            "\tst.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};\n\tfence.proxy.async.shared::cta;\n",
            "\tfence.proxy.async.shared::cta;\n\tst.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};\n",
        );
        assert_eq!(check(&early)[0].rule, "proxy-fence-before-store");
    }

    const WGMMA: &str = "\
.visible .entry k()
{
$L__BB0_1:
\twgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1, %f2}, %rd1, %rd2, %p1, 1, 1, 1, 1;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 1;
\t@%p2 bra $L__BB0_1;
\twgmma.wait_group.sync.aligned 0;
\tmov.f32 %f9, %f1;
\tcvt.rn.bf16.f32 %rs1, %f9;
\tret;
}
";

    #[test]
    fn a_wgmma_accumulator_is_read_only_after_its_group_is_waited_for() {
        assert_eq!(check(WGMMA), vec![]);
        // One group deeper than the use allows: the last group may still be writing.
        let deep = WGMMA.replace("wait_group.sync.aligned 0;", "wait_group.sync.aligned 1;");
        let f = check(&deep);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, "wgmma-wait-before-use");
        assert_eq!(f[0].text, "cvt.rn.bf16.f32 %rs1, %f9");
        // Chaining wgmma on the same accumulator without a wait is the normal pipeline.
        assert_eq!(
            check(&WGMMA.replace("\twgmma.wait_group.sync.aligned 1;\n", "")),
            vec![]
        );
    }

    #[test]
    fn operands_split_at_top_level_commas_and_name_their_registers() {
        assert_eq!(
            split_operands("{%r1, %r2}, [%r3+8], %p1"),
            vec!["{%r1, %r2}", "[%r3+8]", "%p1"]
        );
        assert_eq!(registers("{%r1, %rd22}"), vec!["%r1", "%rd22"]);
    }
}
