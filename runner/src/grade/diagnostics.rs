//! What of a compiler's log may reach a student: the messages about the submission's own file
//! and the workbook's headers, and nothing about any other file.
//!
//! The confinement ([`super::confine`]) keeps every other file out of the compiler's reach;
//! this filter is the second wall. NVRTC writes a message as a header line naming a file and a
//! line (`kernel.cu(12): error: ...`) followed by its context (the source line, a caret,
//! "detected during ..."); a message about any other file (a toolkit header, or a file an
//! `#include` trick reached) is dropped whole, context and all, and the log says how many were.
//! ptxas's resource lines (`ptxas info : ...`) and NVRTC's closing count are kept.

/// The file a message header line names, if `line` is one: `NAME(LINE): KIND: ...`.
fn header_file(line: &str) -> Option<&str> {
    let open = line.find("): ")?;
    let head = &line[..open];
    let paren = head.rfind('(')?;
    let (file, num) = (&head[..paren], &head[paren + 1..]);
    if file.is_empty() || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let kind = &line[open + 3..];
    [
        "error",
        "warning",
        "remark",
        "note",
        "catastrophic error",
        "internal error",
    ]
    .iter()
    .any(|k| kind.starts_with(k))
    .then_some(file)
}

/// A message at the end of the translation unit, which NVRTC writes without a file
/// (`At end of source: error: expected a "}"`: a brace left open). Every header is included
/// before the unit ends, so its end is the end of the submission's own file.
fn end_of_source(line: &str) -> bool {
    line.strip_prefix("At end of source: ").is_some_and(|k| {
        ["error", "warning", "catastrophic error"]
            .iter()
            .any(|w| k.starts_with(w))
    })
}

/// ptxas's resource report: `ptxas info    : ...`, `ptxas warning : ...`, and the continuation
/// line of a function's properties, `ptxas         .     0 bytes stack frame, 0 bytes spill
/// stores, 0 bytes spill loads` (every clean compile with `-v` has one; it was withheld as a line
/// about some other file, and a clean report said "1 lines ... withheld").
fn ptxas_report(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("ptxas") else {
        return false;
    };
    let rest = rest.trim_start();
    rest.starts_with("info")
        || rest.starts_with("warning")
        || rest
            .strip_prefix('.')
            .is_some_and(|r| r.trim_start().split(',').all(is_byte_count))
}

/// `N bytes WHAT` (ptxas's stack-frame and spill counts), nothing else.
fn is_byte_count(part: &str) -> bool {
    let mut w = part.split_whitespace();
    matches!(
        (w.next(), w.next()),
        (Some(n), Some("bytes")) if n.bytes().all(|b| b.is_ascii_digit())
    ) && w.all(|x| x.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// Lines outside any message that may pass: ptxas's report, NVRTC's closing count, blanks.
fn free_line_allowed(line: &str, own: &[&str]) -> bool {
    let t = line.trim();
    t.is_empty()
        || t == "Compilation terminated."
        || own.iter().any(|f| {
            t.starts_with(&format!("{f} failed to compile for "))
                || t.starts_with(&format!("{f} breaks "))
        })
        || ptxas_report(t)
        || own
            .iter()
            .any(|f| t.ends_with(&format!("detected in the compilation of \"{f}\".")))
}

/// `log` with only the messages about `own` files (the submission's name, the workbook's
/// headers); every other message, and every line outside a message that is not ptxas's report
/// or NVRTC's count, is replaced by one note of how many lines were withheld.
pub fn student_log(log: &str, own: &[&str]) -> String {
    let mut out = String::new();
    let mut withheld = 0usize;
    // Whether the lines now being read belong to a message about an own file.
    let mut keeping = false;
    for line in log.lines() {
        if end_of_source(line) {
            keeping = true;
        } else if let Some(file) = header_file(line) {
            keeping = own.contains(&file);
        } else if !line.starts_with([' ', '\t']) && !line.trim().is_empty() {
            // Any unindented line that is not a header ends the message before it.
            keeping = false;
            if free_line_allowed(line, own) {
                out.push_str(line);
                out.push('\n');
                continue;
            }
        } else if line.trim().is_empty() {
            out.push('\n');
            continue;
        }
        if keeping {
            out.push_str(line);
            out.push('\n');
        } else {
            withheld += 1;
        }
    }
    if withheld > 0 {
        out.push_str(&format!(
            "[{withheld} line{} of the compiler's log withheld: {} about files other than the submission and the workbook's headers]\n",
            if withheld == 1 { "" } else { "s" },
            if withheld == 1 { "it is" } else { "they are" },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &[&str] = &["kernel.cu", "hopper.cuh"];

    #[test]
    fn messages_about_other_files_are_withheld_whole() {
        let log = "kernel.cu(3): catastrophic error: cannot open source file \"/etc/passwd\"\n  #include \"/etc/passwd\"\n  ^\n\n/etc/passwd(1): error: expected a declaration\n  root:x:0:0:root:/root:/bin/bash\n  ^\n\n/proc/1/environ(1): warning: odd\n  SECRET=hunter2\n\n1 error detected in the compilation of \"kernel.cu\".\nroot:x:0:0:root:/root:/bin/bash\nptxas info    : Used 40 registers\n";
        let s = student_log(log, OWN);
        assert!(s.contains("kernel.cu(3): catastrophic error"), "{s}");
        assert!(s.contains("#include \"/etc/passwd\""), "{s}");
        assert!(!s.contains("root:x:0"), "{s}");
        assert!(!s.contains("hunter2"), "{s}");
        assert!(!s.contains("/proc/1/environ"), "{s}");
        assert!(s.contains("1 error detected in the compilation of \"kernel.cu\"."));
        assert!(s.contains("ptxas info    : Used 40 registers"));
        assert!(s.contains("6 lines of the compiler's log withheld"), "{s}");
    }

    #[test]
    fn own_messages_and_headers_pass_unchanged() {
        let log = "kernel.cu(12): error: identifier \"x\" is undefined\n      x = 1;\n      ^\n    12 | x = 1;\n\nhopper.cuh(40): warning: something\n          detected during instantiation of \"f<T>\" at line 12 of kernel.cu\n";
        assert_eq!(student_log(log, OWN), log);
    }

    #[test]
    fn an_error_at_the_end_of_the_source_is_the_submissions() {
        // NVRTC's log of a kernel whose last brace is missing.
        let log = "kernel.cu failed to compile for sm_90a:\nAt end of source: error: expected a \"}\"\nkernel.cu(2): note #3196-D: to match this \"{\"\n  __global__ void f() {\n                      ^\n\n1 error detected in the compilation of \"kernel.cu\".\n";
        assert_eq!(student_log(log, OWN), log);
        assert!(!end_of_source("At end of source: root:x:0:0"));
    }

    #[test]
    fn a_clean_compile_withholds_nothing() {
        // ptxas -v as NVRTC logs it for the stock step-0 twin: the continuation line of the
        // function's properties starts with "ptxas", not "ptxas info".
        let log = "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'gemm_kernel' for 'sm_90a'\nptxas info    : Function properties for gemm_kernel\nptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 168 registers, used 1 barriers, 384 bytes cmem[0]\n";
        assert_eq!(student_log(log, OWN), log);
        // Anything else after "ptxas ." is not a byte count and stays out.
        let odd = "ptxas         .     root:x:0:0:root:/root:/bin/bash\n";
        assert!(
            student_log(odd, OWN).contains("[1 line of the compiler's log withheld: it is about")
        );
    }

    #[test]
    fn the_stock_kernels_clean_compile_log_passes_whole() {
        // The real log (NVRTC with ptxas -v) of the kernel the cheat suite edits.
        let step = runner::steps::get(0).unwrap();
        let spec = common::step::KernelSpec::new(step, common::step::Arch::Hopper);
        let src = common::compile::KernelSource {
            path: "kernel.cu".into(),
            text: step.info().kernel(common::step::Arch::Hopper).text.into(),
        };
        let c = common::compile::compile(
            &src,
            common::Target::Sm90a,
            &spec.defines(common::Dtype::F16),
        )
        .unwrap();
        assert!(c.log.contains("bytes stack frame"), "{}", c.log);
        let own = super::super::submission::own_files();
        assert_eq!(student_log(&c.log, &own), c.log);
    }

    #[test]
    fn header_lines_are_recognised_strictly() {
        assert_eq!(header_file("kernel.cu(12): error: x"), Some("kernel.cu"));
        assert_eq!(header_file("/a (b)/c.h(1): warning: x"), Some("/a (b)/c.h"));
        assert_eq!(header_file("kernel.cu(x): error: x"), None);
        assert_eq!(header_file("f(1): says hello"), None);
    }
}
