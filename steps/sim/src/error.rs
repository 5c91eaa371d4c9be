//! What a simulated run can end with other than success.

use std::fmt;

/// Every way a parse or a simulated run fails. `Display` is one line a learner can act on.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// The PTX text is malformed (or uses syntax outside the subset this parser reads).
    Parse { ptx_line: u32, detail: String },
    /// An instruction (or a modifier of one) the simulator does not model: never skipped.
    Unsupported { opcode: String, ptx_line: u32 },
    /// A named ordering rule was broken; `rule` is spelled as the GPU emulation prints it.
    Rule {
        rule: &'static str,
        cta: u32,
        warp: u32,
        ptx_line: u32,
        source_line: u32,
        detail: String,
    },
    /// No thread can run and no pending asynchronous operation could wake one.
    Deadlock { report: Vec<String> },
    /// The run executed more instructions than `Options::max_steps` allows.
    StepLimit { steps: u64 },
    /// The host's deadline (`Options::deadline`) passed after `steps` steps.
    Deadline { steps: u64 },
    /// A fault a GPU would raise: a bad address, a misaligned access, `trap`, a tcgen05 misuse.
    Fault {
        cta: u32,
        warp: u32,
        lane: u32,
        ptx_line: u32,
        source_line: u32,
        detail: String,
    },
    /// The launch or its parameters do not fit the kernel.
    Launch(String),
    /// A device `assert` failed (NVVM's call of `__assertfail`): the kernel traps, as on a GPU,
    /// where the CUDA runtime prints the same facts (`file:line: function: block: [..],
    /// thread: [..] Assertion `message` failed.`) and the launch fails with
    /// `cudaErrorAssert`.
    Assert(Box<Assertion>),
}

/// A failed device `assert`: what `__assertfail` was given, and who failed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    /// The asserted expression as written in the source.
    pub message: String,
    pub file: String,
    pub line: u32,
    pub function: String,
    /// blockIdx and threadIdx of the failing thread.
    pub block: [u32; 3],
    pub thread: [u32; 3],
    pub ptx_line: u32,
    pub source_line: u32,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Parse { ptx_line, detail } => {
                write!(f, "PTX line {ptx_line}: cannot parse: {detail}")
            }
            // wgmma is an architecture-accelerated feature of sm_90a (PTX ISA "wgmma.mma_async",
            // target ISA notes: requires sm_90a; "a" targets' features exist on that
            // architecture only): an sm_100a kernel cannot contain it, so it is not a gap.
            SimError::Unsupported { opcode, ptx_line } if opcode.starts_with("wgmma") => write!(
                f,
                "{opcode} at PTX line {ptx_line} is not an sm_100a instruction: wgmma exists on sm_90a only (PTX ISA \"wgmma.mma_async\", target notes); Blackwell's tensor cores run tcgen05.mma"
            ),
            SimError::Unsupported { opcode, ptx_line } => write!(
                f,
                "not modelled by the simulator: {opcode} at PTX line {ptx_line}"
            ),
            SimError::Rule {
                rule,
                cta,
                warp,
                ptx_line,
                source_line,
                detail,
            } => write!(
                f,
                "rule {rule}: CTA {cta}, warp {warp}, PTX line {ptx_line} (source line {source_line}): {detail}"
            ),
            SimError::Deadlock { report } => {
                write!(f, "deadlock: no thread can make progress")?;
                for l in report {
                    write!(f, "\n  {l}")?;
                }
                Ok(())
            }
            SimError::StepLimit { steps } => write!(
                f,
                "the run exceeded its budget of {steps} steps (an instruction each, an MMA or a copy by its size: a spin loop that never ends, or a problem too large for the budget the command or rubric sets)"
            ),
            SimError::Deadline { steps } => write!(
                f,
                "the run passed its wall-clock deadline after {steps} steps (a kernel that spins, or far more work than the shape needs)"
            ),
            SimError::Fault {
                cta,
                warp,
                lane,
                ptx_line,
                source_line,
                detail,
            } => write!(
                f,
                "fault in CTA {cta}, warp {warp}, lane {lane}, PTX line {ptx_line} (source line {source_line}): {detail}"
            ),
            SimError::Launch(d) => write!(f, "launch: {d}"),
            SimError::Assert(a) => write!(
                f,
                "assertion failed: {} at {}:{} in {}, block [{},{},{}], thread [{},{},{}] (PTX line {})",
                a.message,
                a.file,
                a.line,
                a.function,
                a.block[0],
                a.block[1],
                a.block[2],
                a.thread[0],
                a.thread[1],
                a.thread[2],
                a.ptx_line
            ),
        }
    }
}

impl std::error::Error for SimError {}
