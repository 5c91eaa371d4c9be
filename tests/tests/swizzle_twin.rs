//! The 128-byte swizzle is written once on the device, `wb::sw128_chunk` in `common.cuh`, which
//! every kernel's epilogue calls, and once on the host, `common::model::descriptors::sw128_chunk`,
//! which the descriptor tests and the book's figures use. This test compiles the header's own
//! function text with the host C++ compiler and compares it with the Rust twin over every row of
//! a 256-row tile and every chunk, so the two cannot drift.

use common::model::descriptors::sw128_chunk;
use workbook_tests::run_host_cpp;

/// The text between the header's `ANCHOR: sw128_chunk` markers.
fn device_function() -> String {
    let header = common::compile::HEADERS
        .iter()
        .find(|(name, _)| *name == "common.cuh")
        .expect("common.cuh is embedded")
        .1;
    let start = header
        .find("// ANCHOR: sw128_chunk\n")
        .expect("common.cuh marks sw128_chunk")
        + "// ANCHOR: sw128_chunk\n".len();
    let len = header[start..]
        .find("// ANCHOR_END: sw128_chunk")
        .expect("the marker is closed");
    header[start..start + len].to_string()
}

#[test]
fn the_header_and_the_host_twin_swizzle_alike() {
    let function = device_function();
    assert!(
        function.contains("sw128_chunk(u32 row, u32 chunk)"),
        "{function}"
    );
    let program = format!(
        r#"#include <cstdio>
typedef unsigned int u32;
#define __host__
#define __device__
#define __forceinline__ inline
{function}
static_assert(sw128_chunk(9, 1) == 0, "constexpr on the host too");
int main() {{
  for (u32 row = 0; row < 256; ++row)
    for (u32 chunk = 0; chunk < 8; ++chunk)
      std::printf("%u %u %u\n", row, chunk, sw128_chunk(row, chunk));
}}
"#
    );
    let text = run_host_cpp("swizzle-twin", &program);
    let mut lines = 0;
    for line in text.lines() {
        let v: Vec<u32> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(
            sw128_chunk(v[0], v[1]),
            v[2],
            "row {}, chunk {}",
            v[0],
            v[1]
        );
        lines += 1;
    }
    assert_eq!(lines, 256 * 8);
}

/// Each row's chunks are a permutation, and eight consecutive rows put one logical chunk in eight
/// different physical chunks: the property the epilogues rely on to spread a warp's stores.
#[test]
fn the_swizzle_permutes_rows_and_spreads_columns() {
    for row in 0..64 {
        let mut seen = [false; 8];
        for chunk in 0..8 {
            seen[sw128_chunk(row, chunk) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "row {row}");
    }
    for chunk in 0..8 {
        let mut seen = [false; 8];
        for row in 0..8 {
            seen[sw128_chunk(row, chunk) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "chunk {chunk}");
    }
}
