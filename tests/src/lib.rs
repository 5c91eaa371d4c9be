//! Cross-crate tests live in `tests/`; this library holds what several of them share.

use std::path::PathBuf;
use std::process::Command;

/// Compile `program` (C++17) with the host compiler (`$CXX`, else `c++`) and return what it prints.
/// The twin tests use it to run a function cut out of a kernel on the host, next to its Rust twin.
pub fn run_host_cpp(name: &str, program: &str) -> String {
    let dir: PathBuf = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let cpp = dir.join(format!("{name}.cpp"));
    let exe = dir.join(name);
    std::fs::write(&cpp, program).expect("write the C++ program");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let built = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-o"])
        .arg(&exe)
        .arg(&cpp)
        .output()
        .unwrap_or_else(|e| panic!("this test needs a host C++ compiler ({cxx}): {e}"));
    assert!(
        built.status.success(),
        "{name}: the kernel's code does not compile on the host:\n{}\n{program}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().expect("run the host program");
    assert!(out.status.success(), "{name} failed: {:?}", out.status);
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(out.stdout).expect("the program prints text")
}
