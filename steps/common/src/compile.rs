//! Compiling a step kernel with NVRTC to a CUBIN, with the shared headers embedded.

use crate::arch::Arch;
use crate::toolkit;
use anyhow::{anyhow, bail, Context, Result};
use cudarc::nvrtc::sys as nvrtc;
use serde::Serialize;
use std::ffi::{CStr, CString};
use std::path::Path;
use std::time::Instant;

/// The shared device headers, embedded so the binary compiles kernels from anywhere; inside a
/// checkout its `steps/include/` copies are used instead ([`crate::project`]).
pub const HEADERS: &[(&str, &str)] = &[
    ("common.cuh", include_str!("../../include/common.cuh")),
    ("stress.cuh", include_str!("../../include/stress.cuh")),
    (
        "twin_check.cuh",
        include_str!("../../include/twin_check.cuh"),
    ),
    ("trace.cuh", include_str!("../../include/trace.cuh")),
    ("blackwell.cuh", include_str!("../../include/blackwell.cuh")),
    ("hopper.cuh", include_str!("../../include/hopper.cuh")),
    ("pipeline.cuh", include_str!("../../include/pipeline.cuh")),
    (
        "tcgen05_emu.cuh",
        include_str!("../../include/tcgen05_emu.cuh"),
    ),
    ("clc.cuh", include_str!("../../include/clc.cuh")),
    ("clc_emu.cuh", include_str!("../../include/clc_emu.cuh")),
];

/// What a kernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Target {
    /// Blackwell B200/GB200, native tcgen05.
    Sm100a,
    /// A Blackwell kernel on Hopper, with tcgen05 replaced by the emulation layer
    /// (tcgen05_emu.cuh).
    Sm90aEmulated,
    /// A Hopper twin (kernel_sm90.cu), native wgmma.
    Sm90a,
}

impl Target {
    pub fn arch(self) -> &'static str {
        match self {
            Target::Sm100a => "sm_100a",
            Target::Sm90aEmulated | Target::Sm90a => "sm_90a",
        }
    }
    pub fn describe(self) -> &'static str {
        match self {
            Target::Sm100a => "sm_100a (native tcgen05)",
            Target::Sm90aEmulated => "sm_90a (tcgen05 emulated)",
            Target::Sm90a => "sm_90a (Hopper twin, native wgmma)",
        }
    }
    /// Which of a step's kernels this target builds.
    pub fn kernel_arch(self) -> Arch {
        match self {
            Target::Sm100a | Target::Sm90aEmulated => Arch::Blackwell,
            Target::Sm90a => Arch::Hopper,
        }
    }
    /// The macros NVRTC is given for this target (`-D`), besides a step's own definitions: the
    /// grader's Blackwell screen refuses every name that differs between two targets' builds.
    pub fn macros(self) -> &'static [&'static str] {
        match self {
            Target::Sm90aEmulated => &["WB_EMULATE_TCGEN05"],
            Target::Sm100a | Target::Sm90a => &[],
        }
    }
    /// The native build of a step's `arch` kernel.
    pub fn native(arch: Arch) -> Target {
        match arch {
            Arch::Blackwell => Target::Sm100a,
            Arch::Hopper => Target::Sm90a,
        }
    }
}

/// A kernel source with the name NVRTC reports errors under.
#[derive(Debug, Clone)]
pub struct KernelSource {
    /// Path shown in compiler messages, e.g. `steps/step0_naive/src/kernel.cu`.
    pub path: String,
    pub text: String,
}

impl KernelSource {
    /// A user's kernel file is a Hopper twin if it includes hopper.cuh.
    pub fn implied_arch(&self) -> Arch {
        let includes_hopper = self
            .text
            .lines()
            .any(|l| l.trim_start().starts_with("#include") && l.contains("hopper.cuh"));
        if includes_hopper {
            Arch::Hopper
        } else {
            Arch::Blackwell
        }
    }
}

/// The most a kernel file may hold (the grader allows 256 KiB): `--kernel /dev/zero` is refused
/// rather than read until memory runs out.
pub const MAX_KERNEL_BYTES: u64 = 1 << 20;

/// What a path that is not a regular file is, for a refusal: "a folder", "a FIFO", ...
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// A user's kernel file, at most [`MAX_KERNEL_BYTES`], as UTF-8 text: what `runner step
/// --kernel`, `runner inspect --kernel` and the exercises read.
pub fn read_kernel(path: &Path) -> Result<String> {
    use std::io::Read;
    // A FIFO would block the open until a writer comes (forever), and a device never ends:
    // refuse anything but a regular file before opening it.
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{} is {}, not a kernel source file",
            path.display(),
            file_kind(&meta)
        );
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_KERNEL_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_KERNEL_BYTES {
        bail!(
            "{} is larger than {} KiB: not a kernel source",
            path.display(),
            MAX_KERNEL_BYTES >> 10
        );
    }
    // A byte-order mark (Windows editors save one) is invisible and not C++: NVRTC would
    // answer with a hundred "unrecognized token" errors.
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| {
        // Where the first bad byte is, so an editor can find it.
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + good.iter().filter(|&&b| b == b'\n').count();
        anyhow!(
            "{} is not UTF-8 text (line {line}, byte {} of the file)",
            path.display(),
            good.len() + 1
        )
    })
}

/// Where a kernel's [`Resources`] were read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceSource {
    /// Nowhere yet: the compile log had no ptxas report and the kernel was not loaded. Reports
    /// say "unknown", never 0.
    #[default]
    Unknown,
    /// ptxas' `-v` report in NVRTC's log: registers, stack frame and spills separately.
    PtxasLog,
    /// `cuFuncGetAttribute` on the loaded function (no log at hand): registers and the local
    /// memory per thread, which holds the stack frame and the spills together.
    LoadedFunction,
}

/// What the loaded function says about itself (`cuFuncGetAttribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FuncAttributes {
    pub registers: u32,
    /// Local memory per thread: stack frame plus spills.
    pub local_bytes: u32,
    pub static_shared_bytes: u32,
    pub max_threads_per_block: u32,
}

/// Resource usage of a compiled kernel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Resources {
    pub registers: u32,
    pub stack_frame_bytes: u32,
    /// With `source` = `loaded_function` the split of local memory into stack and spills is
    /// unknown: both spill fields are 0 and `stack_frame_bytes` holds all the local memory.
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub source: ResourceSource,
    /// The loaded function's own attributes, once loaded.
    pub loaded: Option<FuncAttributes>,
}

impl Resources {
    /// Fill in what the loaded function says: everything, when the log had no ptxas report.
    pub fn with_loaded(mut self, attrs: FuncAttributes) -> Resources {
        if self.source == ResourceSource::Unknown {
            self.registers = attrs.registers;
            self.stack_frame_bytes = attrs.local_bytes;
            self.spill_store_bytes = 0;
            self.spill_load_bytes = 0;
            self.source = ResourceSource::LoadedFunction;
        }
        self.loaded = Some(attrs);
        self
    }

    /// "168 registers, 0 B stack, 0 B spill stores, 0 B spill loads", or what is known, or
    /// "registers unknown (...)": never a 0 that was not read.
    pub fn describe(&self) -> String {
        match self.source {
            ResourceSource::Unknown => {
                "registers and spills unknown (no ptxas report in the compile log, kernel not loaded)"
                    .to_string()
            }
            ResourceSource::PtxasLog => {
                let mut s = format!(
                    "{} registers, {} B stack, {} B spill stores, {} B spill loads",
                    self.registers,
                    self.stack_frame_bytes,
                    self.spill_store_bytes,
                    self.spill_load_bytes
                );
                if let Some(l) = self.loaded.filter(|l| l.registers != self.registers) {
                    s.push_str(&format!(
                        " (the loaded function reports {} registers)",
                        l.registers
                    ));
                }
                s
            }
            ResourceSource::LoadedFunction => format!(
                "{} registers, {} B local memory per thread ({}; read from the loaded function, no ptxas log at hand)",
                self.registers,
                self.stack_frame_bytes,
                if self.stack_frame_bytes == 0 {
                    "so no stack and no spills"
                } else {
                    "stack and spills together"
                }
            ),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Compiled {
    #[serde(skip)]
    pub cubin: Vec<u8>,
    pub target: Target,
    pub compile_ms: f64,
    pub resources: Resources,
    pub nvrtc_version: String,
    #[serde(skip)]
    pub log: String,
}

/// A compile failure: NVRTC's log, each error followed by the source line it names.
#[derive(Debug, thiserror::Error)]
#[error("{path} failed to compile for {arch}:\n{log}")]
pub struct CompileError {
    pub path: String,
    pub arch: &'static str,
    pub log: String,
}

fn check(r: nvrtc::nvrtcResult, what: &str) -> Result<()> {
    if r == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(anyhow!("NVRTC {what} failed: {r:?}"))
    }
}

pub fn nvrtc_version() -> Result<(i32, i32)> {
    toolkit::get()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    check(
        unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) },
        "version query",
    )?;
    Ok((major, minor))
}

/// Add the offending source line, numbered, under each `file(line): error` line of an NVRTC log.
/// Where NVRTC echoes the line itself (with a caret line under it), the numbered line replaces
/// the echo and the caret is shifted to stay under its column, so no line shows twice.
pub fn annotate_log(log: &str, source: &KernelSource) -> String {
    let lines: Vec<&str> = source.text.lines().collect();
    let log_lines: Vec<&str> = log.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < log_lines.len() {
        let l = log_lines[i];
        out.push_str(l);
        out.push('\n');
        i += 1;
        let Some(rest) = l.strip_prefix(&format!("{}(", source.path)) else {
            continue;
        };
        let Some((num, tail)) = rest.split_once(')') else {
            continue;
        };
        if !tail.contains("error") {
            continue;
        }
        let Some(text) = num
            .parse::<usize>()
            .ok()
            .and_then(|n| lines.get(n.wrapping_sub(1)))
            .map(|t| t.trim_end())
        else {
            continue;
        };
        let ours = format!("    {num} | ");
        out.push_str(&format!("{ours}{text}\n"));
        let echo = log_lines.get(i).map(|e| e.trim_end());
        if let Some(echo) = echo.filter(|e| !text.trim().is_empty() && e.ends_with(text)) {
            // Skip the echo; move its caret line by the difference of the two prefixes.
            let shift = ours.len().saturating_sub(echo.len() - text.len());
            i += 1;
            if let Some(caret) = log_lines.get(i).filter(|c| {
                !c.trim().is_empty() && c.trim().chars().all(|ch| ch == '^' || ch == '~')
            }) {
                out.push_str(&format!("{}{caret}\n", " ".repeat(shift)));
                i += 1;
            }
        }
    }
    out
}

/// Parse `ptxas info : Used N registers` and the spill line of a `-v` log. Without a
/// "registers" line the source stays [`ResourceSource::Unknown`].
pub fn parse_resources(log: &str) -> Resources {
    let mut r = Resources::default();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let idx = line.find(unit)?;
        line[..idx].split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        if let Some(v) = number_before(line, "registers") {
            r.registers = v;
            r.source = ResourceSource::PtxasLog;
        }
        if let Some(v) = number_before(line, "bytes stack frame") {
            r.stack_frame_bytes = v;
        }
        if let Some(v) = number_before(line, "bytes spill stores") {
            r.spill_store_bytes = v;
        }
        if let Some(v) = number_before(line, "bytes spill loads") {
            r.spill_load_bytes = v;
        }
    }
    r
}

/// Run NVRTC on `source` with the embedded headers, `--gpu-architecture=gpu_arch` and the
/// workbook's options (plus `extra`), then hand the program to `take` (on success: its CUBIN or
/// PTX). A failed compile becomes a [`CompileError`] with the offending source lines. The one
/// place that drives NVRTC: `compile` and `compile_ptx` differ only in what they ask of it.
fn with_nvrtc<R>(
    source: &KernelSource,
    target: Target,
    gpu_arch: &str,
    defines: &[(String, String)],
    extra: &[&str],
    take: impl FnOnce(nvrtc::nvrtcProgram, &str) -> Result<R>,
) -> Result<R> {
    let tk = toolkit::get()?;
    // A NUL byte cannot reach NVRTC; the message says where it is, never what the text holds
    // (a `--kernel /proc/self/environ` would otherwise print the environment).
    let to_c = |what: &str, s: &str| {
        CString::new(s).map_err(|e| {
            let at = e.nul_position();
            let line = 1 + s.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
            anyhow!(
                "{what} holds a NUL byte (line {line}, byte {} of the file): not a kernel source",
                at + 1
            )
        })
    };
    let src = to_c(&source.path, &source.text)?;
    let name = to_c("the kernel's path", &source.path)?;
    let headers: Vec<(CString, CString)> = HEADERS
        .iter()
        .map(|(n, embedded)| {
            // The checkout's header (edits count), or the embedded copy outside any checkout.
            let rel = format!("steps/include/{n}");
            let text = crate::project::read(&rel, embedded)
                .map_err(|e| anyhow!("cannot read {rel} in the workbook checkout: {e}"))?;
            Ok((to_c(n, n)?, to_c(&rel, &text)?))
        })
        .collect::<Result<_>>()?;
    let header_names: Vec<*const std::ffi::c_char> = headers.iter().map(|h| h.0.as_ptr()).collect();
    let header_texts: Vec<*const std::ffi::c_char> = headers.iter().map(|h| h.1.as_ptr()).collect();
    let mut opts = vec![
        format!("--gpu-architecture={gpu_arch}"),
        format!("--include-path={}", tk.include_dir.display()),
        "--std=c++17".to_string(),
    ];
    opts.extend(extra.iter().map(|o| o.to_string()));
    opts.extend(target.macros().iter().map(|m| format!("-D{m}")));
    opts.extend(defines.iter().map(|(k, v)| format!("-D{k}={v}")));
    let opts_c: Vec<CString> = opts
        .iter()
        .map(|o| to_c("a compiler option", o))
        .collect::<Result<_>>()?;
    let opt_ptrs: Vec<*const std::ffi::c_char> = opts_c.iter().map(|c| c.as_ptr()).collect();
    let mut prog: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer comes from a CString that outlives the calls; counts match.
    unsafe {
        check(
            nvrtc::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                name.as_ptr(),
                headers.len() as i32,
                header_texts.as_ptr(),
                header_names.as_ptr(),
            ),
            "create program",
        )?;
    }
    // SAFETY: `prog` is live; the options outlive the call.
    let result =
        unsafe { nvrtc::nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr()) };
    let log = program_log(prog);
    let outcome = if result != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        Err(CompileError {
            path: source.path.clone(),
            arch: target.arch(),
            log: annotate_log(&log, source),
        }
        .into())
    } else {
        take(prog, &log)
    };
    // SAFETY: destroys the program created above, once.
    unsafe {
        nvrtc::nvrtcDestroyProgram(&mut prog);
    }
    outcome
}

/// Compile `source` for `target` with `-D` definitions; returns the CUBIN and ptxas' report.
pub fn compile(
    source: &KernelSource,
    target: Target,
    defines: &[(String, String)],
) -> Result<Compiled> {
    let (major, minor) = nvrtc_version()?;
    if target == Target::Sm100a && (major, minor) < (12, 8) {
        return Err(anyhow!(
            "NVRTC {major}.{minor} (from {}) cannot target sm_100a: it needs CUDA 12.8 or newer",
            toolkit::get()?.origin
        ));
    }
    let start = Instant::now();
    with_nvrtc(
        source,
        target,
        target.arch(),
        defines,
        &["--ptxas-options=-v", "-lineinfo"],
        |prog, log| {
            let compile_ms = start.elapsed().as_secs_f64() * 1e3;
            cubin(prog).map(|cubin| Compiled {
                cubin,
                target,
                compile_ms,
                resources: parse_resources(log),
                nvrtc_version: format!("{major}.{minor}"),
                log: log.to_string(),
            })
        },
    )
}

/// The PTX of `source` for `target` (the virtual architecture: `compute_100a`, `compute_90a`),
/// with line information, without running ptxas: what `common::ptx_check` reads. Errors as `compile` reports them.
pub fn compile_ptx(
    source: &KernelSource,
    target: Target,
    defines: &[(String, String)],
) -> Result<String> {
    let virtual_arch = target.arch().replace("sm_", "compute_");
    // -lineinfo: `.loc` directives map each PTX instruction back to its source line.
    with_nvrtc(
        source,
        target,
        &virtual_arch,
        defines,
        &["-lineinfo"],
        |prog, _| {
            let mut size = 0usize;
            // SAFETY: `prog` compiled; the buffer has the size NVRTC reported.
            unsafe {
                check(nvrtc::nvrtcGetPTXSize(prog, &mut size), "PTX size")?;
                let mut buf = vec![0u8; size.max(1)];
                check(nvrtc::nvrtcGetPTX(prog, buf.as_mut_ptr().cast()), "PTX")?;
                Ok(CStr::from_bytes_until_nul(&buf)
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default())
            }
        },
    )
}

fn program_log(prog: nvrtc::nvrtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: `prog` is live; the buffer has the size NVRTC reported.
    unsafe {
        if nvrtc::nvrtcGetProgramLogSize(prog, &mut size) != nvrtc::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        let mut buf = vec![0u8; size.max(1)];
        if nvrtc::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast())
            != nvrtc::nvrtcResult::NVRTC_SUCCESS
        {
            return String::new();
        }
        CStr::from_bytes_until_nul(&buf)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

fn cubin(prog: nvrtc::nvrtcProgram) -> Result<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; the buffer has the size NVRTC reported.
    unsafe {
        check(nvrtc::nvrtcGetCUBINSize(prog, &mut size), "CUBIN size")?;
        let mut buf = vec![0u8; size];
        check(nvrtc::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()), "CUBIN")?;
        if buf.is_empty() {
            return Err(anyhow!("NVRTC produced an empty CUBIN"));
        }
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_report() {
        let log = "ptxas info    : Compiling entry function 'gemm_kernel' for 'sm_100a'\n\
                   ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
                   ptxas info    : Used 82 registers, used 1 barriers\n";
        let r = parse_resources(log);
        assert_eq!(r.registers, 82);
        assert_eq!(r.stack_frame_bytes, 8);
        assert_eq!(r.spill_store_bytes, 4);
        assert_eq!(r.spill_load_bytes, 12);
        assert_eq!(r.source, ResourceSource::PtxasLog);
        assert!(r.describe().starts_with("82 registers, 8 B stack"));
    }

    #[test]
    fn resources_without_a_log_are_unknown_until_loaded() {
        let r = parse_resources("");
        assert_eq!(r.source, ResourceSource::Unknown);
        assert!(r.describe().contains("unknown"), "{}", r.describe());
        assert!(!r.describe().contains("0 registers"));
        let attrs = FuncAttributes {
            registers: 168,
            local_bytes: 0,
            static_shared_bytes: 0,
            max_threads_per_block: 384,
        };
        let r = r.with_loaded(attrs);
        assert_eq!(
            (r.registers, r.source),
            (168, ResourceSource::LoadedFunction)
        );
        assert!(
            r.describe().starts_with("168 registers, 0 B local memory"),
            "{}",
            r.describe()
        );
        // A ptxas report is kept; a disagreeing loaded function is shown beside it.
        let r = parse_resources("ptxas info    : Used 90 registers\n").with_loaded(attrs);
        assert_eq!((r.registers, r.source), (90, ResourceSource::PtxasLog));
        assert!(r.describe().contains("the loaded function reports 168"));
    }

    #[test]
    fn annotates_errors_with_source_lines() {
        let src = KernelSource {
            path: "k.cu".into(),
            text: "int a;\nint b = nope;\n".into(),
        };
        let log = "k.cu(2): error: identifier \"nope\" is undefined\n";
        let out = annotate_log(log, &src);
        assert!(out.contains("k.cu(2): error"));
        assert!(out.contains("    2 | int b = nope;"), "{out}");
    }

    #[test]
    fn a_line_nvrtc_echoes_is_not_added_again() {
        let src = KernelSource {
            path: "k.cu".into(),
            text: "int a;\nint b = nope;\n".into(),
        };
        let log =
            "k.cu(2): error: identifier \"nope\" is undefined\n  int b = nope;\n          ^\n";
        let out = annotate_log(log, &src);
        assert_eq!(out.matches("int b = nope;").count(), 1, "{out}");
        // The caret stays under `nope`.
        let l: Vec<&str> = out.lines().collect();
        assert_eq!(l[1], "    2 | int b = nope;", "{out}");
        assert_eq!(l[2].find('^'), l[1].find("nope"), "{out}");
    }
}
