//! `runner inspect N`: a step's compilation, without running it.

use super::ArchArg;
use crate::report;
use anyhow::{anyhow, bail, Result};
use common::compile::{compile, compile_ptx, KernelSource, Target};
use common::step::{Arch, KernelSpec};
use common::{mutation, sass, Dtype};
use runner::steps;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// Which kernel: sm_100a (the Blackwell kernel) or sm_90a (its Hopper twin).
    #[arg(long, value_enum, default_value = "sm_100a")]
    arch: ArchArg,
    /// The Blackwell kernel's sm_90a build for the tcgen05 emulation.
    #[arg(long)]
    emulate: bool,
    /// The dtype the kernel is built for: f16 or bf16.
    #[arg(long, default_value = "f16")]
    dtype: Dtype,
    /// Override a tuning parameter, e.g. --param stages=5 (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Print the whole SASS listing.
    #[arg(long)]
    sass: bool,
    /// Print one JSON object {"schema", "runner", "runs": [...]} instead of the report.
    #[arg(long)]
    json: bool,
    /// Print the PTX NVRTC produces (the text ptxas turns into SASS, and what the CPU simulator
    /// runs) instead of the report.
    #[arg(long, conflicts_with_all = ["json", "sass"])]
    ptx: bool,
    /// Compile this kernel file instead of the step's own, with the step's parameters and launch
    /// (as `runner step N --kernel FILE`). A `.toml` file holds edits of a stock kernel (e.g.
    /// exercises/hopper/step4_snake_sm90.toml); a file that includes hopper.cuh needs --arch sm_90a.
    #[arg(long, value_name = "FILE")]
    kernel: Option<std::path::PathBuf>,
    /// Seed a known bug into the kernel first (`runner mutations` lists them).
    #[arg(long, value_name = "NAME")]
    mutate: Option<String>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let arch = a.arch.arch();
    if a.emulate && arch != Arch::Blackwell {
        bail!("--emulate builds the Blackwell kernel for the emulation; the Hopper twin runs natively");
    }
    let mut spec = KernelSpec::new(steps::get(a.step)?, arch);
    spec.params.apply(&a.params).map_err(|e| anyhow!(e))?;
    let target = if a.emulate {
        Target::Sm90aEmulated
    } else {
        Target::native(arch)
    };
    let mut source = match &a.kernel {
        Some(path) => {
            crate::contenders::check_edit_target(path, common::compile::read_kernel, a.step, None)?;
            crate::step_cmd::kernel_file(path)?
        }
        None => spec.source(),
    };
    if a.kernel.is_some()
        && arch == Arch::Blackwell
        && source.text.contains("#include \"hopper.cuh\"")
    {
        bail!(
            "{} includes hopper.cuh: it is a Hopper twin; add --arch sm_90a",
            source.path
        );
    }
    if let Some(name) = &a.mutate {
        let (m, m_arch) = mutation::lookup(name)?;
        if m_arch != arch {
            bail!(
                "the seeded bug {name:?} edits the {}; add --arch {}",
                m_arch.name(),
                m_arch.sm()
            );
        }
        if !m.applies_to(spec.info(), m_arch) {
            bail!(
                "the seeded bug {name:?} does not apply to step {} (it applies to steps {})",
                a.step,
                m.steps(&steps::infos(), m_arch)
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        source = KernelSource {
            path: source.path.clone(),
            text: m.apply(&source.text)?,
        };
    }
    if a.ptx {
        print!("{}", compile_ptx(&source, target, &spec.defines(a.dtype))?);
        return Ok(ExitCode::SUCCESS);
    }
    let compiled = compile(&source, target, &spec.defines(a.dtype))?;
    // As `runner step`: ptxas names each entry it compiles; a file without `gemm_kernel` (an
    // empty one) has nothing to inspect.
    if !compiled.log.contains("entry function 'gemm_kernel'") {
        bail!(
            "{} defines no kernel `extern \"C\" __global__ void gemm_kernel(...)`: there is nothing to inspect",
            source.path
        );
    }
    let listing = sass::disassemble(&compiled.cubin)?;
    let smem = spec.shape().smem_bytes;
    // The emulation build replaces tcgen05 by design: none of the native key instructions.
    let expect = if a.emulate {
        &[][..]
    } else {
        spec.sass_expect()
    };
    if a.json {
        let mut v = serde_json::json!({
            "step": a.step, "arch": arch, "kernel_path": source.path, "dtype": a.dtype,
            "target": target, "params": &spec.params,
            "compile": &compiled, "smem_bytes": smem, "sass": &listing,
            "missing_instructions": report::missing_instructions(&listing, expect),
        });
        crate::report::json::normalise(&mut v);
        println!(
            "{}",
            serde_json::to_string_pretty(&crate::report::json::runs(vec![v]))?
        );
    } else {
        report::print_header(&spec, &source.path);
        report::print_compile(&compiled, smem);
        report::print_sass(&listing, expect, true);
        if a.sass {
            println!("\n{}", listing.listing);
        }
    }
    Ok(ExitCode::SUCCESS)
}
