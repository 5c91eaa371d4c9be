//! Finding (and, where none is found, installing) NVRTC, the CUDA headers and nvdisasm.
//!
//! Search order: `WORKBOOK_CUDA` (an explicit toolkit root), `CUDA_PATH`, `CUDA_HOME`,
//! `/usr/local/cuda*`, the project-local PyPI install (`.cuda/pypi`), then the `nvidia` packages
//! of the `python3` on the PATH. When none is usable, the pinned PyPI packages are installed
//! into `.cuda/pypi` with pip, once; later runs reuse them.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Pinned PyPI packages: 13.0.x matches the CUDA 13.0 driver of the GPU machines; nvdisasm has
/// no 13.0 wheel, and a newer disassembler reads older cubins.
pub const PYPI_NVRTC: &str = "nvidia-cuda-nvrtc==13.0.88";
pub const PYPI_HEADERS: &str = "nvidia-cuda-runtime==13.0.96";
pub const PYPI_NVDISASM: &str = "nvidia-cuda-nvdisasm==13.2.51";
/// cuBLAS for verification and the speed reference, on a GPU machine with a driver and no
/// toolkit: 13.0.x, as the driver's CUDA version (about 550 MB, installed only there).
pub const PYPI_CUBLAS: &str = "nvidia-cublas==13.0.2.14";
/// CUPTI, whose SASS metrics count the instructions a graded kernel executed (the grader's
/// proof of a technique), on a GPU machine without a toolkit: 13.0.x, as the driver's CUDA.
pub const PYPI_CUPTI: &str = "nvidia-cuda-cupti==13.0.85";
/// Every pinned wheel, for an offline lab's `pip download`.
pub const PYPI_ALL: [&str; 5] = [
    PYPI_NVRTC,
    PYPI_HEADERS,
    PYPI_NVDISASM,
    PYPI_CUBLAS,
    PYPI_CUPTI,
];

/// A usable set of CUDA compile tools.
#[derive(Debug, Clone)]
pub struct Toolkit {
    /// Where it came from, for reports ("CUDA_PATH=/usr/local/cuda", "PyPI (.cuda/pypi)", ...).
    pub origin: String,
    /// Directory holding `cuda_fp16.h`.
    pub include_dir: PathBuf,
    /// `libnvrtc.so.*`.
    pub nvrtc_lib: PathBuf,
    /// `libnvrtc-builtins.so.*`, which NVRTC opens by name at compile time.
    pub builtins_lib: Option<PathBuf>,
    /// `nvdisasm`, if this toolkit has one.
    pub nvdisasm: Option<PathBuf>,
}

/// The workbook checkout the runner works in ([`crate::project`]), or the current folder when
/// there is none.
pub fn project_root() -> PathBuf {
    crate::project::root().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Where the toolkit goes with no `WORKBOOK_CUDA_CACHE`: the checkout's `.cuda/pypi`, or, for a
/// runner outside any checkout, `$XDG_CACHE_HOME` (or `~/.cache`) `/blackwell-workbook/pypi`.
/// Only absolute `XDG_CACHE_HOME` and `HOME` count (as the XDG rules say): with neither, there is
/// no default (never a `.cache` in whatever folder the runner was started in).
fn default_pypi_dir() -> Option<PathBuf> {
    if let Some(root) = crate::project::root() {
        return Some(root.join(".cuda").join("pypi"));
    }
    let absolute = |v: &str| {
        std::env::var_os(v)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let cache =
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("blackwell-workbook").join("pypi"))
}

/// Folder the PyPI packages are installed into: `WORKBOOK_CUDA_CACHE` or `<root>/.cuda/pypi`.
/// Empty where there is none ([`install_dir_error`] says why).
pub fn pypi_dir() -> PathBuf {
    std::env::var_os("WORKBOOK_CUDA_CACHE")
        .map(PathBuf::from)
        .or_else(default_pypi_dir)
        .unwrap_or_default()
}

/// Why the toolkit cannot be installed into `dir` (the [`pypi_dir`]), if it cannot.
fn install_dir_error(dir: &Path) -> Option<String> {
    let named = std::env::var_os("WORKBOOK_CUDA_CACHE").is_some();
    if dir.as_os_str().is_empty() {
        return Some(if named {
            "WORKBOOK_CUDA_CACHE is set but empty: give it a folder, or unset it".to_string()
        } else {
            "no folder to install the CUDA toolkit into: the runner is outside any checkout and neither HOME nor XDG_CACHE_HOME is an absolute path; set WORKBOOK_CUDA_CACHE to a folder".to_string()
        });
    }
    if dir.exists() && !dir.is_dir() {
        return Some(format!(
            "{}{} is not a folder: the toolkit is installed into a folder (a new one is created)",
            if named { "WORKBOOK_CUDA_CACHE=" } else { "" },
            dir.display()
        ));
    }
    None
}

/// `<pypi_dir>-<what>`: a folder of its own for a package installed later, so that its install
/// (`pip --target --upgrade` replaces the whole `nvidia/` folder) cannot remove another's files.
fn sibling_dir(what: &str) -> PathBuf {
    let mut name = pypi_dir().into_os_string();
    name.push("-");
    name.push(what);
    PathBuf::from(name)
}

fn nvdisasm_dir() -> PathBuf {
    sibling_dir("nvdisasm")
}

/// Where the pinned cuBLAS wheel is installed when no cuBLAS is found.
pub fn cublas_dir() -> PathBuf {
    sibling_dir("cublas")
}

/// The library folders of the pinned cuBLAS wheel (CUDA 13 wheels use `nvidia/cu13/lib`).
pub fn cublas_lib_dirs() -> Vec<PathBuf> {
    [pypi_dir(), cublas_dir()]
        .iter()
        .map(|d| d.join("nvidia").join("cu13").join("lib"))
        .collect()
}

/// Install the pinned cuBLAS wheel into [`cublas_dir`], once (under the install lock).
pub fn install_cublas(already_there: impl Fn() -> bool) -> Result<()> {
    with_install_lock(|| {
        if already_there() {
            return Ok(());
        }
        pip_install(&cublas_dir(), &[PYPI_CUBLAS])
    })
}

/// Where the pinned CUPTI wheel is installed when no CUPTI is found.
pub fn cupti_dir() -> PathBuf {
    sibling_dir("cupti")
}

/// The library folders of the pinned CUPTI wheel, where it would be.
pub fn cupti_lib_dirs() -> Vec<PathBuf> {
    [pypi_dir(), cupti_dir()]
        .iter()
        .map(|d| d.join("nvidia").join("cu13").join("lib"))
        .collect()
}

/// Install the pinned CUPTI wheel into [`cupti_dir`], once (under the install lock).
pub fn install_cupti(already_there: impl Fn() -> bool) -> Result<()> {
    with_install_lock(|| {
        if already_there() {
            return Ok(());
        }
        pip_install(&cupti_dir(), &[PYPI_CUPTI])
    })
}

fn first_glob(dir: &Path, prefix: &str) -> Option<PathBuf> {
    let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && !n.contains(".alt."))
        })
        .collect();
    hits.sort();
    hits.into_iter().next()
}

/// Try one candidate root (a toolkit or a PyPI `nvidia/cuXX` folder).
fn probe(root: &Path, origin: String) -> Option<Toolkit> {
    let include_dir = root.join("include");
    if !include_dir.join("cuda_fp16.h").is_file() {
        return None;
    }
    let (nvrtc_lib, lib_dir) = ["lib64", "lib", "lib/x64"].iter().find_map(|d| {
        let dir = root.join(d);
        first_glob(&dir, "libnvrtc.so.").map(|lib| (lib, dir))
    })?;
    let builtins_lib = first_glob(&lib_dir, "libnvrtc-builtins.so.");
    let nvdisasm = Some(root.join("bin").join("nvdisasm")).filter(|p| p.is_file());
    Some(Toolkit {
        origin,
        include_dir,
        nvrtc_lib,
        builtins_lib,
        nvdisasm,
    })
}

fn pypi_roots(site: &Path) -> Vec<PathBuf> {
    ["cu13", "cu12", "cuda_nvrtc"]
        .iter()
        .map(|d| site.join("nvidia").join(d))
        .collect()
}

fn python() -> String {
    std::env::var("WORKBOOK_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The site-packages folders holding an `nvidia` package, for the python on the PATH.
pub fn python_site_nvidia() -> Vec<PathBuf> {
    let out = Command::new(python())
        .args([
            "-c",
            "import nvidia, sys; sys.stdout.write('\\n'.join(list(nvidia.__path__)))",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| Path::new(l).parent().map(Path::to_path_buf))
            .collect(),
        _ => Vec::new(),
    }
}

/// Find a toolkit without installing anything.
pub fn find() -> Result<Option<Toolkit>> {
    if let Some(root) = std::env::var_os("WORKBOOK_CUDA") {
        let root = PathBuf::from(root);
        return match probe(&root, format!("WORKBOOK_CUDA={}", root.display())) {
            Some(tk) => Ok(Some(tk)),
            None => bail!(
                "WORKBOOK_CUDA={} holds no include/cuda_fp16.h and lib64/libnvrtc.so.*: point it at a CUDA toolkit root, or unset it",
                root.display()
            ),
        };
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = std::env::var_os(var) {
            let root = PathBuf::from(root);
            if let Some(tk) = probe(&root, format!("{var}={}", root.display())) {
                return Ok(Some(tk));
            }
        }
    }
    let mut system: Vec<PathBuf> = vec![PathBuf::from("/usr/local/cuda")];
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        let mut more: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda-"))
            })
            .collect();
        more.sort();
        more.reverse();
        system.extend(more);
    }
    for root in system {
        if let Some(tk) = probe(&root, root.display().to_string()) {
            return Ok(Some(tk));
        }
    }
    // No folder, no probe: an empty path would look in the current folder.
    let pypi = pypi_dir();
    if !pypi.as_os_str().is_empty() {
        for root in pypi_roots(&pypi) {
            if let Some(tk) = probe(&root, format!("PyPI packages in {}", pypi.display())) {
                return Ok(Some(tk));
            }
        }
    }
    if std::env::var_os("WORKBOOK_NO_SITE_PYTHON").is_none() {
        for site in python_site_nvidia() {
            for root in pypi_roots(&site) {
                if let Some(tk) = probe(&root, format!("python packages in {}", site.display())) {
                    return Ok(Some(tk));
                }
            }
        }
    }
    Ok(None)
}

/// Hold an exclusive lock on `<pypi_dir>.lock` while `f` runs: several runners (parallel tests,
/// two terminals) may find the toolkit missing at once, and only one may install it.
fn with_install_lock<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    let dir = pypi_dir();
    if let Some(why) = install_dir_error(&dir) {
        bail!("{why}");
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let lock_path = dir.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).with_context(|| {
        format!(
            "cannot create {} (the install lock, beside the toolkit's folder: {} must be writable by whoever installs; in a lab, install once as the instructor, and the installed folder is then read by everyone)",
            lock_path.display(),
            parent.display()
        )
    })?;
    lock.lock()
        .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    let out = f();
    let _ = lock.unlock();
    out
}

/// `WORKBOOK_WHEELS`: a folder of pre-fetched wheels (`pip download` of the pinned packages) to
/// install from with no network, for an offline lab.
pub const WHEELS_ENV: &str = "WORKBOOK_WHEELS";

/// Where pip takes the packages from: PyPI, or only the wheel folder `wheels` if given.
pub fn pip_source_args(wheels: Option<&Path>) -> Result<Vec<std::ffi::OsString>> {
    match wheels {
        None => Ok(Vec::new()),
        Some(dir) if dir.is_dir() => Ok(vec![
            "--no-index".into(),
            "--find-links".into(),
            dir.as_os_str().to_owned(),
        ]),
        Some(dir) => bail!(
            "{WHEELS_ENV}={} is not a folder: fill one with `{}` on a machine with network",
            dir.display(),
            pip_download_command("DIR")
        ),
    }
}

/// The `pip download` line that fills an offline lab's wheel folder: Linux wheels of this
/// machine's architecture whatever machine runs it (a Mac, an ARM laptop). The cuBLAS wheel is
/// tagged manylinux_2_27, the others manylinux2014 or older: pip needs both tags named.
pub fn pip_download_command(dest: &str) -> String {
    let arch = std::env::consts::ARCH;
    format!(
        "python3 -m pip download --no-deps --only-binary=:all: --platform manylinux2014_{arch} --platform manylinux_2_27_{arch} --dest {dest} {}",
        PYPI_ALL.join(" ")
    )
}

/// In an offline wheel folder, the wheel of each `name==version` in `packages` for this
/// machine's architecture; an error names the first one missing.
pub fn check_wheels(dir: &Path, packages: &[&str]) -> Result<()> {
    let files: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {WHEELS_ENV}={}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for package in packages {
        let (name, version) = package.split_once("==").unwrap_or((package, ""));
        let prefix = format!("{}-{version}-", name.replace('-', "_"));
        let ours = |f: &&String| f.starts_with(&prefix) && f.ends_with(".whl");
        if !files
            .iter()
            .any(|f| ours(&f) && f.contains(std::env::consts::ARCH))
        {
            let other = files.iter().find(ours);
            bail!(
                "{WHEELS_ENV}={} has no {package} wheel for {}{}: add it with `{}`",
                dir.display(),
                std::env::consts::ARCH,
                other.map_or(String::new(), |f| format!(" (only {f})")),
                pip_download_command(&dir.display().to_string())
            );
        }
    }
    Ok(())
}

/// Install `packages` into `target` with pip. `--target --upgrade` replaces whole top-level
/// folders (`nvidia/`), so everything one folder needs is installed in one call.
fn pip_install(target: &Path, packages: &[&str]) -> Result<()> {
    if std::env::var_os("WORKBOOK_NO_INSTALL").is_some() {
        bail!(
            "{} not found and WORKBOOK_NO_INSTALL is set; install it with: {} -m pip install --target {} {}",
            packages.join(" "),
            python(),
            target.display(),
            packages.join(" ")
        );
    }
    let wheels = std::env::var_os(WHEELS_ENV).map(PathBuf::from);
    let source = pip_source_args(wheels.as_deref())?;
    if let Some(dir) = &wheels {
        check_wheels(dir, packages)?;
    }
    let pip_works = Command::new(python())
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !pip_works {
        bail!(
            "no CUDA toolkit found, and `{} -m pip` cannot run to install NVRTC: install python3 with pip, or a CUDA toolkit (12.8 or newer) and set WORKBOOK_CUDA to its root",
            python()
        );
    }
    eprintln!(
        "note: installing {} into {} (one time; set WORKBOOK_CUDA to use another toolkit)",
        packages.join(" "),
        target.display()
    );
    std::fs::create_dir_all(target)
        .with_context(|| format!("cannot create {}", target.display()))?;
    // On a terminal pip shows its download progress (on stderr: the runner's stdout may be
    // JSON); elsewhere it stays quiet.
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let status = Command::new(python())
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .args(if on_terminal { None } else { Some("--quiet") })
        .stdout(if on_terminal {
            std::process::Stdio::from(std::io::stderr())
        } else {
            std::process::Stdio::null()
        })
        // Quiet pip's warning about running as root (an option only pip >= 22.1 knows; the
        // variable is ignored by older ones).
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .args(&source)
        .args(["--no-deps", "--upgrade", "--target"])
        .arg(target)
        .args(packages)
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => bail!(
            "pip could not install {} ({s}){}; without network access, install a CUDA toolkit (12.8 or newer) and set WORKBOOK_CUDA to its root, or set {WHEELS_ENV} to a folder of the pinned wheels",
            packages.join(" "),
            wheels.map_or(String::new(), |w| format!(" from {}", w.display()))
        ),
        Err(e) => bail!(
            "cannot run `{} -m pip` to install NVRTC ({e}); install python3 with pip, or a CUDA toolkit (12.8 or newer) and set WORKBOOK_CUDA to its root",
            python()
        ),
    }
}

/// Find a toolkit, installing the pinned PyPI packages when none is found.
pub fn find_or_install() -> Result<Toolkit> {
    if let Some(tk) = find()? {
        return Ok(tk);
    }
    with_install_lock(|| {
        // Another process may have installed it while this one waited for the lock.
        if let Some(tk) = find()? {
            return Ok(tk);
        }
        pip_install(&pypi_dir(), &[PYPI_NVRTC, PYPI_HEADERS, PYPI_NVDISASM])?;
        for root in pypi_roots(&pypi_dir()) {
            if let Some(tk) = probe(&root, format!("PyPI packages in {}", pypi_dir().display())) {
                return Ok(tk);
            }
        }
        bail!(
            "installed {PYPI_NVRTC} and {PYPI_HEADERS} into {}, but found no libnvrtc there",
            pypi_dir().display()
        )
    })
}

/// The toolkit of this process, found (or installed) once and preloaded.
pub fn get() -> Result<&'static Toolkit> {
    static TK: OnceLock<Toolkit> = OnceLock::new();
    static SEARCH: Mutex<()> = Mutex::new(());
    if let Some(tk) = TK.get() {
        return Ok(tk);
    }
    let _one_at_a_time = SEARCH.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(tk) = TK.get() {
        return Ok(tk);
    }
    let tk = find_or_install()?;
    preload(&tk)?;
    Ok(TK.get_or_init(|| tk))
}

impl Toolkit {
    /// nvdisasm from this toolkit, from the PyPI folders, or installed into a folder of its own
    /// (`<pypi_dir>-nvdisasm`, so the install cannot replace another toolkit's files).
    pub fn nvdisasm(&self) -> Result<PathBuf> {
        if let Some(p) = &self.nvdisasm {
            return Ok(p.clone());
        }
        let own_dir = nvdisasm_dir();
        let find_local = || {
            pypi_roots(&pypi_dir())
                .into_iter()
                .chain(pypi_roots(&own_dir))
                .map(|r| r.join("bin").join("nvdisasm"))
                .find(|p| p.is_file())
        };
        if let Some(p) = find_local() {
            return Ok(p);
        }
        with_install_lock(|| {
            if let Some(p) = find_local() {
                return Ok(p);
            }
            pip_install(&own_dir, &[PYPI_NVDISASM])?;
            find_local().context("installed nvdisasm, but cannot find the binary")
        })
    }
}

/// Load NVRTC (and its builtins) by absolute path, so that cudarc's by-name loading and NVRTC's
/// own dlopen of the builtins find them without LD_LIBRARY_PATH.
fn preload(tk: &Toolkit) -> Result<()> {
    if let Some(b) = &tk.builtins_lib {
        load_for_process(b)?;
    }
    load_for_process(&tk.nvrtc_lib)
}

/// dlopen `path` globally and keep it loaded for the life of the process, so later by-name opens
/// (cudarc's, NVRTC's) find it through its SONAME.
fn load_for_process(path: &Path) -> Result<()> {
    // SAFETY: loading a shared library runs its initialisers; these are NVIDIA's NVRTC and cuBLAS
    // libraries, which have no unusual load-time behaviour.
    let lib = unsafe {
        libloading::os::unix::Library::open(
            Some(path),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
        )
    }
    .with_context(|| format!("cannot load {}", path.display()))?;
    std::mem::forget(lib);
    Ok(())
}

/// Load the first library starting with each of `prefixes` found in `dirs`, by absolute path;
/// returns whether all were found and loaded. Used for cuBLAS, which cudarc opens by name.
pub fn preload_named(dirs: &[PathBuf], prefixes: &[&str]) -> bool {
    prefixes.iter().all(|prefix| {
        dirs.iter()
            .find_map(|d| first_glob(d, prefix))
            .is_some_and(|p| load_for_process(&p).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offline_wheel_folder_replaces_the_index() {
        assert!(pip_source_args(None).unwrap().is_empty());
        let dir = std::env::temp_dir();
        let args = pip_source_args(Some(&dir)).unwrap();
        assert_eq!(args[0], "--no-index");
        assert_eq!(args[1], "--find-links");
        assert_eq!(args[2], dir.as_os_str());
        let e = pip_source_args(Some(Path::new("/nonexistent/wheels"))).unwrap_err();
        assert!(e.to_string().contains("pip download --no-deps"), "{e}");
    }

    #[test]
    fn a_wheel_folder_missing_a_wheel_names_it() {
        let dir = std::env::temp_dir().join(format!("wheels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let arch = std::env::consts::ARCH;
        std::fs::write(
            dir.join(format!(
                "nvidia_cuda_nvrtc-13.0.88-py3-none-manylinux2010_{arch}.whl"
            )),
            "",
        )
        .unwrap();
        std::fs::write(
            dir.join("nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_riscv.whl"),
            "",
        )
        .unwrap();
        check_wheels(&dir, &[PYPI_NVRTC]).unwrap();
        let e = check_wheels(&dir, &[PYPI_NVRTC, PYPI_HEADERS])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(PYPI_HEADERS) && e.contains("only nvidia_cuda_runtime"),
            "{e}"
        );
        assert!(e.contains("--platform manylinux2014_"), "{e}");
        let e = check_wheels(&dir, &[PYPI_CUBLAS]).unwrap_err().to_string();
        assert!(e.contains(PYPI_CUBLAS), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
