//! Confining a grading child with the kernel (Landlock), not with a screen of the source.
//!
//! NVRTC opens whatever file an `#include` names, by a preprocessor the include screen of
//! [`super::policy`] can only model; a red team printed `/etc/passwd` and the grading secret
//! through the compile log. So the compile, run and probe children restrict themselves, before
//! a byte of the submission is in the process, to reading the toolkit's headers and libraries,
//! the system's libraries, the GPU's device files and driver information, and their own scratch
//! folder, and to writing only that folder. Everything else (the instructor's secret, the job
//! of another phase, other students' folders, the grader's `/proc/<pid>/environ`, `/etc`) is
//! out of reach whatever the submission says: `open` fails with `EACCES`.
//!
//! Where: at the start of `runner grade-worker`, in the child, not in `pre_exec`. Two reasons.
//! (1) `/proc/self` must be the child's: a rule made in the parent would name the grader's own
//! `/proc/<pid>`, the very folder (`environ`, `cmdline`) that must stay out of reach.
//! (2) The `landlock` crate allocates while it builds a ruleset, which is not sound between
//! `fork` and `exec` of the multithreaded grader. The window this leaves (from `exec` to the
//! restriction) runs only the runner's own code: the job, and with it the submission's text,
//! arrives over stdin after the restriction (see [`super::worker::main`]). The GPU and cuBLAS
//! are opened just before it, by the grader's code, so the driver has its device files open and
//! its threads started; what a submission brings to a run is GPU code, which opens no file.
//!
//! Landlock's `/proc/self` rule allows the child's own `/proc/<pid>` (the CUDA driver reads its
//! maps and status); following `/proc/self/root/...` lands on the real path, which is checked
//! as itself. Signals and abstract UNIX sockets are scoped too (ABI 6): the child cannot signal
//! the grader or a sibling.

use anyhow::{anyhow, bail, Context, Result};
use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// Set, the grader acts as on a kernel without Landlock: how the tests show that an unconfined
/// child does leak (so the tests of the confinement can fail) and that hidden tests are then
/// refused without `--allow-unconfined`.
pub const SIMULATE_NO_LANDLOCK: &str = "WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK";

/// The Landlock ABI the kernel offers (`None`: no Landlock, it is disabled, or
/// [`SIMULATE_NO_LANDLOCK`] is set).
pub fn kernel_abi() -> Option<i32> {
    if std::env::var_os(SIMULATE_NO_LANDLOCK).is_some() {
        return None;
    }
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: no ruleset, size 0, the VERSION flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then_some(v as i32)
}

/// What a child is allowed besides its scratch folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// NVRTC only: the toolkit's headers and libraries.
    Compiler,
    /// The GPU as well: device files, driver information, the system's libraries.
    Gpu,
    /// The GPU, and to count a launch's instructions: the CUPTI library's folder and nvdisasm.
    Measure,
    /// Nothing but the system's libraries: the simulator runs the PTX the compile child left
    /// in the scratch folder, with no GPU, no toolkit and no device file.
    Cpu,
}

impl Needs {
    /// Whether the child opens the GPU (its device files and driver information).
    fn gpu(self) -> bool {
        matches!(self, Needs::Gpu | Needs::Measure)
    }
}

/// Folders (or files) a child may read, for `needs`, that exist here.
pub fn read_only(needs: Needs, toolkit: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = toolkit.to_vec();
    // Shared libraries the process may still load lazily (NVRTC's builtins, cuBLAS's parts,
    // the driver's): system folders, never /etc as a whole (only the loader's cache).
    for p in [
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/etc/ld.so.cache",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/include",
    ] {
        v.push(PathBuf::from(p));
    }
    if needs.gpu() {
        for p in [
            "/proc/self",
            "/proc/driver/nvidia",
            "/proc/cpuinfo",
            "/proc/meminfo",
            "/proc/sys/vm",
            "/sys/devices",
            "/sys/bus/pci",
            "/sys/module/nvidia",
        ] {
            v.push(PathBuf::from(p));
        }
    }
    v.retain(|p| p.exists());
    v.sort();
    v.dedup();
    v
}

/// The GPU's device files (`/dev/nvidia*`, `/dev/nvidia-caps/`), opened read-write with ioctl.
fn device_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("nvidia"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The toolkit folders of this process's toolkit: its headers and the folder of its NVRTC.
pub fn toolkit_dirs() -> Result<Vec<PathBuf>> {
    let tk = common::toolkit::get()?;
    let mut v = vec![tk.include_dir.clone()];
    for lib in [Some(&tk.nvrtc_lib), tk.builtins_lib.as_ref()]
        .into_iter()
        .flatten()
    {
        if let Some(d) = lib.parent() {
            v.push(d.to_path_buf());
        }
    }
    Ok(v)
}

/// The nvdisasm the grader named for a compile child that checks SASS
/// ([`super::protocol::NVDISASM_ENV`]): the one program it may run besides its own, allowed as
/// a single file (read and execute), never its folder.
fn nvdisasm() -> Result<Option<PathBuf>> {
    let Some(p) = std::env::var_os(super::protocol::NVDISASM_ENV).map(PathBuf::from) else {
        return Ok(None);
    };
    if !p.is_absolute() || !p.is_file() || p.file_name().is_none_or(|n| n != "nvdisasm") {
        bail!(
            "{} names {}, which is not an nvdisasm file",
            super::protocol::NVDISASM_ENV,
            p.display()
        );
    }
    Ok(Some(p))
}

/// Restrict this process (and every thread and process it starts from now on) to reading
/// [`read_only`] and writing `scratch`. Fails unless the file-system restriction is in force.
pub fn confine(scratch: &Path, needs: Needs) -> Result<()> {
    let abi = ABI::V6;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .context("Landlock: handling file accesses")?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .context("Landlock: scoping signals and sockets")?
        .create()
        .context("Landlock: creating the ruleset")?;
    let rule = |path: &Path, access| -> Result<PathBeneath<PathFd>> {
        let fd =
            PathFd::new(path).with_context(|| format!("Landlock: opening {}", path.display()))?;
        Ok(PathBeneath::new(fd, access))
    };
    let mut toolkit = if needs == Needs::Cpu {
        Vec::new()
    } else {
        toolkit_dirs()?
    };
    if matches!(needs, Needs::Compiler | Needs::Measure) {
        toolkit.extend(nvdisasm()?);
    }
    if needs == Needs::Measure {
        toolkit.extend(super::protocol::cupti_dir());
    }
    for p in read_only(needs, &toolkit) {
        // A file rule may carry only the rights that apply to files.
        let access = if p.is_dir() {
            read
        } else {
            read & AccessFs::from_file(abi)
        };
        ruleset = ruleset
            .add_rule(rule(&p, access)?)
            .with_context(|| format!("Landlock: allowing {}", p.display()))?;
    }
    if needs.gpu() {
        for dev in device_files() {
            let access = if dev.is_dir() {
                AccessFs::from_read(abi)
            } else {
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev
            };
            ruleset = ruleset
                .add_rule(rule(&dev, access)?)
                .with_context(|| format!("Landlock: allowing {}", dev.display()))?;
        }
    }
    ruleset = ruleset
        .add_rule(rule(scratch, all)?)
        .with_context(|| format!("Landlock: allowing {}", scratch.display()))?;
    let status = ruleset
        .restrict_self()
        .context("Landlock: restricting the process")?;
    if status.ruleset == RulesetStatus::NotEnforced {
        bail!("Landlock is not enforced by this kernel: the child cannot be confined");
    }
    check_confined()
}

/// Prove the restriction holds: the grader's own `/proc/<pid>/environ` must be out of reach.
fn check_confined() -> Result<()> {
    // SAFETY: plain syscall.
    let parent = unsafe { libc::getppid() };
    let probe = format!("/proc/{parent}/environ");
    match std::fs::File::open(&probe) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow!(
            "the confinement check could not open {probe} for an unexpected reason: {e}"
        )),
        Ok(_) => bail!("the confinement does not hold: {probe} is readable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_only_set_never_holds_etc_home_tmp_or_the_whole_proc() {
        for needs in [Needs::Compiler, Needs::Gpu, Needs::Measure, Needs::Cpu] {
            let ro = read_only(needs, &[]);
            for p in &ro {
                for bad in [
                    "/", "/etc", "/home", "/root", "/tmp", "/proc", "/work", "/usr",
                ] {
                    assert_ne!(p, Path::new(bad), "{needs:?} allows {bad}");
                }
                assert!(
                    !p.starts_with("/tmp") && !p.starts_with("/home") && !p.starts_with("/root"),
                    "{}",
                    p.display()
                );
                if p.starts_with("/etc") {
                    assert_eq!(p, Path::new("/etc/ld.so.cache"));
                }
            }
        }
        for needs in [Needs::Compiler, Needs::Cpu] {
            assert!(!read_only(needs, &[])
                .iter()
                .any(|p| p.starts_with("/proc") || p.starts_with("/dev")));
        }
    }
}
