#!/usr/bin/env python3
"""Regenerate the PTX of the own test kernels (tests/own_kernels.rs) from their .cu files with
NVRTC, compute_100a, the options of steps/sim/tests/corpus/gen.py; a planted-bug variant is
the same file with a -D define. Usage: WORKBOOK_CUDA_CACHE=/work/cuda-cache python3 gen.py"""
import ctypes, os, sys
here = os.path.dirname(os.path.abspath(__file__))
cache = os.environ.get("WORKBOOK_CUDA_CACHE", "/work/cuda-cache")
libdir = os.path.join(cache, "nvidia/cu13/lib")
# NVRTC loads its builtins library by name at compile time: load it first, globally.
for f in sorted(os.listdir(libdir)):
    if f.startswith("libnvrtc-builtins.so"):
        ctypes.CDLL(os.path.join(libdir, f), mode=ctypes.RTLD_GLOBAL)
        break
lib = ctypes.CDLL(os.path.join(libdir, "libnvrtc.so.13"))
# (output name, source, defines)
VARIANTS = [
    ("body_shared", "body_shared.cu", []),
    ("wait_loop_3x", "wait_loop_3x.cu", []),
    ("wide_access", "wide_access.cu", []),
    ("handoff", "handoff.cu", []),
    ("handoff_no_sync", "handoff.cu", ["-DPLANT_NO_SYNC"]),
    ("handoff_no_fence", "handoff.cu", ["-DPLANT_NO_FENCE"]),
    ("smem_operands", "smem_operands.cu", []),
    ("dsmem_leader", "dsmem_leader.cu", []),
    ("dsmem_leader_mapa", "dsmem_leader.cu", ["-DUSE_MAPA"]),
    ("pair_mma", "pair_mma.cu", []),
    ("pair_mma_peer_skips", "pair_mma.cu", ["-DPLANT_PEER_SKIPS_ALLOC"]),
]
for out, src_name, defines in VARIANTS:
    src = open(os.path.join(here, src_name), "rb").read()
    prog = ctypes.c_void_p()
    name = ("steps/sim/tests/ptx/own/" + src_name).encode()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None) == 0
    opts = [b"--gpu-architecture=compute_100a",
            ("--include-path=" + os.path.join(here, "stub")).encode(),
            ("--include-path=" + os.path.join(cache, "nvidia/cu13/include")).encode(),
            b"--std=c++17", b"-lineinfo"] + [d.encode() for d in defines]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.stderr.write(out + ": " + log.value.decode()); sys.exit(1)
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, buf)
    open(os.path.join(here, out + ".ptx"), "w").write(buf.value.decode())
    print(out)
