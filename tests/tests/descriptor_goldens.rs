//! Golden descriptor values produced by CUTLASS's own sm100 descriptor code, asserted against the
//! workbook's encoders: the host mirror (`common::model::descriptors`) and the device builders of
//! `blackwell.cuh` (their text compiled with the host C++ compiler, as `tiling_twin` does).
//!
//! Provenance. CUTLASS commit 7107b05535f8977f5ecb9d01ee203205b1fd9bc4 (github.com/NVIDIA/cutlass),
//! built on the host (g++ -std=c++17, CUDA 13.0 headers) in a throw-away program that is not part
//! of this repository; `__cvta_generic_to_shared` was stood in by the identity so that a shared
//! "address" is the pointer value.
//! - Instruction descriptors: `cute::UMMA::make_instr_desc<A, B, float, M, N, UMMA::Major::K,
//!   UMMA::Major::K>()` (include/cute/arch/mma_sm100_desc.hpp, union `UMMA::InstrDescriptor`),
//!   A = B = `cute::half_t` or `cute::bfloat16_t`, defaults for negation, saturation, sparsity and
//!   max shift.
//! - Shared-memory descriptors: `cute::UMMA::make_umma_desc<UMMA::Major::K>(t)` (same header,
//!   union `UMMA::SmemDescriptor`) on `t = local_tile(make_tensor(make_smem_ptr((T*)addr),
//!   tile_to_shape(UMMA::Layout_K_SW128_Atom<T>{}, (128, 64))), (128, 16), (0, k))`: the K = 16
//!   slice k of a 128 x 64 K-major tile with the 128-byte swizzle, the operand of one kind::f16
//!   MMA. CUTLASS sets version 1, LBO 1 (16 B), SBO 64 (1024 B), base offset 0, layout
//!   SWIZZLE_128B (2).

use common::model::descriptors::{decode_smem_desc, make_idesc_f16, make_smem_desc_sw128};

/// (M, N, bf16, CUTLASS's descriptor).
const IDESC: &[(u32, u32, bool, u32)] = &[
    (128, 256, false, 0x0840_0010),
    (128, 256, true, 0x0840_0490),
    (256, 256, false, 0x1040_0010),
    (256, 256, true, 0x1040_0490),
    (128, 128, false, 0x0820_0010),
];

/// (tile address, k slice, CUTLASS's descriptor); the element type does not change it.
const SMEM: &[(u32, u32, u64)] = &[
    (0x400, 0, 0x4000_4040_0001_0040),
    (0x400, 1, 0x4000_4040_0001_0042),
    (0x400, 2, 0x4000_4040_0001_0044),
    (0x400, 3, 0x4000_4040_0001_0046),
    (0x8000, 0, 0x4000_4040_0001_0800),
    (0x8000, 3, 0x4000_4040_0001_0806),
    (0x1c400, 0, 0x4000_4040_0001_1c40),
    (0x1c400, 2, 0x4000_4040_0001_1c44),
];

/// The kernels step K inside the 128-byte row by 16 elements of 2 bytes.
const K_STEP_BYTES: u32 = 32;
const SBO: u32 = 8 * 128;

#[test]
fn the_host_mirror_encodes_as_cutlass_does() {
    for &(m, n, bf16, golden) in IDESC {
        assert_eq!(
            make_idesc_f16(m, n, bf16),
            golden,
            "idesc M={m} N={n} bf16={bf16}"
        );
    }
    for &(addr, k, golden) in SMEM {
        let d = make_smem_desc_sw128(addr + K_STEP_BYTES * k, SBO);
        assert_eq!(
            d,
            golden,
            "smem desc at {addr:#x}, k slice {k}: {:?}",
            decode_smem_desc(d)
        );
    }
}

/// The text of `name`'s definition in blackwell.cuh, from its signature to its closing brace.
fn device_function(header: &str, name: &str) -> String {
    let sig = format!("__device__ __forceinline__ u64 {name}(");
    let sig32 = format!("__device__ __forceinline__ u32 {name}(");
    let start = header
        .find(&sig)
        .or_else(|| header.find(&sig32))
        .unwrap_or_else(|| panic!("blackwell.cuh defines {name}"));
    let len = header[start..].find("\n}\n").expect("closing brace") + 3;
    header[start..start + len].to_string()
}

#[test]
fn the_device_builders_encode_as_cutlass_does() {
    let header = include_str!("../../steps/include/blackwell.cuh");
    let mut calls = String::new();
    for &(m, n, bf16, _) in IDESC {
        calls.push_str(&format!(
            "  std::printf(\"%u\\n\", make_idesc_f16({m}, {n}, {bf16}));\n"
        ));
    }
    for &(addr, k, _) in SMEM {
        calls.push_str(&format!(
            "  std::printf(\"%llu\\n\", make_smem_desc_sw128({addr} + {K_STEP_BYTES} * {k}, {SBO}));\n"
        ));
    }
    let program = format!(
        "#include <cstdio>\ntypedef unsigned int u32;\ntypedef unsigned long long u64;\n\
         #define __device__\n#define __forceinline__ inline\n{}\n{}\nint main() {{\n{calls}}}\n",
        device_function(header, "make_smem_desc_sw128"),
        device_function(header, "make_idesc_f16")
    );
    let out = workbook_tests::run_host_cpp("descriptor-goldens", &program);
    let values: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    let goldens: Vec<u64> = IDESC
        .iter()
        .map(|g| u64::from(g.3))
        .chain(SMEM.iter().map(|g| g.2))
        .collect();
    assert_eq!(values, goldens);
}
