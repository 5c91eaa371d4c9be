#!/usr/bin/env python3
"""Regenerate the NVRTC PTX of the front-end tests (steps/sim/tests/frontend.rs).

    WORKBOOK_CUDA_CACHE=/work/cuda-cache python3 nvrtc_ptx.py

Compiles every `*.cu` beside this script for sm_100a with the pinned NVRTC (the wheel
`nvidia-cuda-nvrtc==13.0.88` installed in $WORKBOOK_CUDA_CACHE, as steps/common/src/toolkit.rs
installs it) with line information (`-lineinfo`), and writes `NAME.ptx` beside it. The
simulator's crate is std-only and cannot call NVRTC, so the PTX is committed.
"""
import ctypes, os, sys, pathlib

cache = pathlib.Path(os.environ.get("WORKBOOK_CUDA_CACHE", "/work/cuda-cache"))
ctypes.CDLL(str(cache / "nvidia/cu13/lib/libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(str(cache / "nvidia/cu13/lib/libnvrtc.so.13"))
here = pathlib.Path(__file__).resolve().parent
include = cache / "nvidia/cu13/include"


def check(r, prog=None):
    if r != 0:
        log = b""
        if prog is not None:
            n = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            buf = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value
        sys.exit(f"nvrtc error {r}: {log.decode()}")


# NVRTC names the file after the current folder; "/" keeps the paths short and the same on
# every machine.
os.chdir("/")
for cu in sorted(here.glob("*.cu")):
    prog = ctypes.c_void_p()
    src = cu.read_bytes()
    # The file name NVRTC records in `.file` is the one given here.
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), src, cu.name.encode(), 0, None, None))
    opts = [b"-arch=sm_100a", b"-lineinfo", b"-std=c++17", b"-I" + str(include).encode()]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    check(lib.nvrtcCompileProgram(prog, len(opts), arr), prog)
    n = ctypes.c_size_t()
    check(lib.nvrtcGetPTXSize(prog, ctypes.byref(n)))
    buf = ctypes.create_string_buffer(n.value)
    check(lib.nvrtcGetPTX(prog, buf))
    out = cu.with_suffix(".ptx")
    out.write_bytes(buf.value)
    print(f"wrote {out.name}")
