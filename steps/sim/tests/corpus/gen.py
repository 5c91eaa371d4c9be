#!/usr/bin/env python3
"""Regenerate math.ptx from math.cu (and ftz_atom.ptx from ftz_atom.cu) with NVRTC, with the options of the workbook's
common::compile::compile_ptx for sm_100a (tests/tests/sim_corpus.rs checks the result is current).
Usage: WORKBOOK_CUDA_CACHE=/work/cuda-cache python3 gen.py [math|ftz_atom ...] (default: all)"""
import ctypes, os, sys
here = os.path.dirname(os.path.abspath(__file__))
# The workbook compiles from the checkout root: the .file lines name math.cu from there.
os.chdir(os.path.join(here, "../../../.."))
cache = os.environ.get("WORKBOOK_CUDA_CACHE", "/work/cuda-cache")
# NVRTC dlopens its builtins library by name: load it first so no LD_LIBRARY_PATH is needed.
ctypes.CDLL(os.path.join(cache, "nvidia/cu13/lib/libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(os.path.join(cache, "nvidia/cu13/lib/libnvrtc.so.13"))
def gen(stem):
    src = open(os.path.join(here, stem + ".cu"), "rb").read()
    prog = ctypes.c_void_p()
    name = ("steps/sim/tests/corpus/" + stem + ".cu").encode()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None) == 0
    opts = [b"--gpu-architecture=compute_100a",
            ("--include-path=" + os.path.join(cache, "nvidia/cu13/include")).encode(),
            b"--std=c++17", b"-lineinfo"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.stderr.write(log.value.decode()); sys.exit(1)
    lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetPTX(prog, buf)
    open(os.path.join(here, stem + ".ptx"), "w").write(buf.value.decode())

for stem in sys.argv[1:] or ["math", "ftz_atom"]:
    gen(stem)
