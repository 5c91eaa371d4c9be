//! What a run reports: executed instructions per opcode and per warp role, and schedule
//! statistics (`deadlock.rs` says who waits on what when no thread can progress).

/// What a simulated launch executed.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Instructions executed (guards true), all threads.
    pub instructions: u64,
    /// Budget steps charged (`budget.rs`): one per instruction issued (a false guard included),
    /// plus an MMA's or a copy's charge by its size. What `Options::max_steps` bounds.
    pub steps: u64,
    /// Per cluster, what its technique instructions did (`attrib.rs`): the grader's per-unit
    /// counts.
    pub attribution: Vec<crate::attrib::ClusterAttribution>,
    /// Executed count per opcode with its modifiers, as written in the PTX.
    pub per_opcode: Vec<(String, u64)>,
    /// Warp-level executed count per opcode: per warp of every CTA, the most times any one of
    /// its lanes executed the opcode with a true guard, summed. Never more than the warps
    /// executed; exact for an instruction one elected lane issues, or all lanes together. An
    /// instruction whose guard is false counts nowhere (it did none of its work).
    pub per_opcode_warps: Vec<(String, u64)>,
    /// Executed count per (warp index in its CTA, opcode), summed over CTAs.
    pub per_warp: Vec<(u32, String, u64)>,
    /// Each warp index's role, from what it issued: "producer", "mma", "epilogue" (joined by
    /// '+'), or "other".
    pub roles: Vec<(u32, String)>,
    /// mbarrier phases completed.
    pub barrier_phases: u64,
    /// Asynchronous operations (TMA loads and stores, tcgen05.mma and commits) issued/retired.
    pub async_issued: u64,
    pub async_retired: u64,
    /// Retired while a thread could have run instead (early) or only once none could (late).
    pub retired_early: u64,
    pub retired_late: u64,
    /// PCT priority changes made.
    pub priority_changes: u64,
    pub clusters: u64,
    /// Events in order (with `Options::trace`).
    pub trace: Vec<String>,
    /// Device `printf` output, one entry per call (its text as formatted, newlines included),
    /// each thread's in program order, threads' in the order the scheduler ran them. Bounded as
    /// the GPU's FIFO is (`calls::PRINTF_FIFO_BYTES`, 1 MiB of text): past it the oldest
    /// entries are dropped, as the GPU's circular buffer overwrites its oldest output.
    pub printf: Vec<String>,
    /// printf calls dropped from the front of `printf` to keep it within the bound.
    pub printf_dropped: u64,
    /// Bytes of text in `printf`.
    pub printf_bytes: u64,
}

impl RunReport {
    /// Executed count per (role, opcode), summed over the warps of each role.
    pub fn per_role(&self) -> Vec<(String, String, u64)> {
        let mut out: Vec<(String, String, u64)> = Vec::new();
        for (w, op, n) in &self.per_warp {
            let role = self
                .roles
                .iter()
                .find(|(x, _)| x == w)
                .map_or("other", |(_, r)| r.as_str());
            match out.iter_mut().find(|(r, o, _)| r == role && o == op) {
                Some(e) => e.2 += n,
                None => out.push((role.to_string(), op.clone(), *n)),
            }
        }
        out.sort();
        out
    }

    /// Executed count of every opcode starting with `prefix`.
    pub fn executed(&self, prefix: &str) -> u64 {
        self.per_opcode
            .iter()
            .filter(|(o, _)| o.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}
