//! The ladder: every step crate, in order. The runner and the cross-crate tests both list the
//! steps through it, so the tests need not build the runner binary to find them.
//!
//! A new step is its crate (a `pub static INFO: StepInfo` declaring its kernels and their facts),
//! one line in [`STEPS`] (plus the crate in this crate's and the workspace's `Cargo.toml`), and
//! its chapter.

use anyhow::{bail, Context, Result};
use common::compile::KernelSource;
use common::step::Arch;
use common::{Step, StepInfo};
use std::cell::RefCell;
use std::path::Path;

/// The steps, in order: each crate's declared [`StepInfo`].
pub static STEPS: &[&StepInfo] = &[
    &step0_naive::INFO,
    &step1_warp_specialization::INFO,
    &step2_tiled_epilogue::INFO,
    &step3_collective_mma::INFO,
    &step4_persistent::INFO,
    &step5_epilogue_warpgroup::INFO,
    &step6_grid_tiling::INFO,
    &step7_last_wave::INFO,
];

thread_local! {
    /// Steps a test added after [`STEPS`] on its own thread ([`scaffold`]).
    static SCAFFOLDED: RefCell<Vec<&'static StepInfo>> = const { RefCell::new(Vec::new()) };
}

/// Every step: [`STEPS`], then any this thread scaffolded.
pub fn infos() -> Vec<&'static StepInfo> {
    let mut v = STEPS.to_vec();
    SCAFFOLDED.with(|s| v.extend(s.borrow().iter().copied()));
    v
}

pub fn all() -> Vec<&'static dyn Step> {
    infos()
        .into_iter()
        .map(|s| s as &'static dyn Step)
        .collect()
}

pub fn get(n: u32) -> Result<&'static dyn Step> {
    let steps = infos();
    match steps.iter().find(|s| s.number == n) {
        Some(&s) => Ok(s),
        None => bail!(
            "there is no step {n}; steps available: {}",
            steps
                .iter()
                .map(|s| s.number.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Step `n`'s `arch` kernel as it is now (the checkout's file, so an edit counts without a
/// rebuild): what a `.toml` edit file's edits apply to ([`common::edits::edited_kernel`]).
pub fn stock_kernel(n: u32, arch: Arch) -> Result<KernelSource> {
    Ok(get(n)?.info().kernel_source(arch))
}

/// A step added to the ladder for the current thread only, until the guard drops: how a test
/// shows that a new step (its data, not yet a crate, not yet measured) passes every
/// step-generic check before any GPU has run it. Nothing outside tests calls it.
pub fn scaffold(info: &'static StepInfo) -> Scaffolded {
    SCAFFOLDED.with(|s| s.borrow_mut().push(info));
    Scaffolded {
        number: info.number,
    }
}

/// While alive, [`scaffold`]'s step is in this thread's ladder.
pub struct Scaffolded {
    number: u32,
}

impl Drop for Scaffolded {
    fn drop(&mut self) {
        SCAFFOLDED.with(|s| s.borrow_mut().retain(|i| i.number != self.number));
    }
}

/// A new step made of an existing one's data, as a newcomer starts one: step `of`'s kernels
/// copied into `dir/src/`, its facts and parameters, under `number` (a crate folder outside the
/// checkout, given by its absolute path, so the kernels are read from there). For
/// [`scaffold`]; it is leaked, as a step's data is `'static`.
pub fn scaffold_copy(of: u32, number: u32, dir: &Path) -> Result<&'static StepInfo> {
    let base = get(of)?.info();
    let src = dir.join("src");
    std::fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let kernel = |arch: Arch| -> Result<common::step::KernelFile> {
        let to = src.join(arch.file());
        let text = base.kernel_source(arch).text;
        std::fs::write(&to, &text).with_context(|| format!("writing {}", to.display()))?;
        Ok(common::step::KernelFile {
            text: leak(text),
            ..*base.kernel(arch)
        })
    };
    let (blackwell, hopper) = (kernel(Arch::Blackwell)?, kernel(Arch::Hopper)?);
    let dir = std::path::absolute(dir).with_context(|| format!("{}", dir.display()))?;
    Ok(Box::leak(Box::new(StepInfo {
        number,
        crate_dir: leak(dir.display().to_string()),
        title: leak(format!("Scaffold of step {number} (step {of}'s data)")),
        blackwell,
        hopper,
        ..*base
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::edits;

    #[test]
    fn edit_files_name_their_stock_kernel() {
        let e = edits::edited_kernel(
            "x.toml",
            "step = 4\narch = \"sm_90a\"\n[[edit]]\nbefore = \"a\"\ntext = \"b\"\n",
            stock_kernel,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("arch must be"), "{e:#}");
        let e = edits::edited_kernel(
            "x.toml",
            "step = 4\narch = \"hopper\"\n[[edit]]\nreplace = \"no such line\"\ntext = \"b\"\n",
            stock_kernel,
        )
        .unwrap_err();
        assert!(e.to_string().contains("matches 0 lines"), "{e:#}");
        // No edit at all would run the stock kernel under the file's name.
        let e = edits::edited_kernel(
            "x.toml",
            "step = 6\narch = \"blackwell\"\nedit = []\n",
            stock_kernel,
        )
        .unwrap_err();
        assert!(e.to_string().contains("holds no [[edit]]"), "{e:#}");
        let k = edits::edited_kernel(
            "x.toml",
            "step = 6\narch = \"blackwell\"\n[[edit]]\nbefore = \"gemm_kernel(\"\ntext = \"// edited\"\n",
            stock_kernel,
        )
        .expect("one edit before the kernel's signature");
        assert_eq!(k.path, "steps/step6_grid_tiling/src/kernel.cu+x.toml");
        assert!(k.text.contains("// edited"));
    }
}
