"""Compiles Tandem's CUDA kernel sources with NVRTC as MLX's `mx.fast.cuda_kernel` wraps them,
on a machine without a GPU: a kernel that does not compile is found before device time is spent.

    pip download --no-deps nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12  # unzip both, then
    TANDEM_NVRTC=.../cuda_nvrtc/lib/libnvrtc.so.12 TANDEM_CUDA_INCLUDE=.../cuda_runtime/include \\
        python -m engine.bench.nvrtc_check

(or `pip install` them, as the test extras do on Linux: they are then found by themselves). It
compiles the template variants of every kernel in engine/kernels/ (verify attention, skinny
matmul, depthwise convolution, gated delta), for the H100 / H200's architecture (sm_90) unless
`--arch` says otherwise, and fails on any error, warning or register spill (`--verbose`: the
registers each variant uses). It says nothing of a kernel's numbers: those are
engine/bench/matmul_check.py's and attention_check.py's, on a GPU. Without NVRTC it says so and
exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import re
from pathlib import Path

from engine.bench.process_exit import run_and_exit
from engine.kernels import (
    depthwise_conv_cuda,
    gated_delta_cuda,
    skinny_matmul_cuda,
    verify_attention_cuda,
)

NVRTC_ENV = "TANDEM_NVRTC"
INCLUDE_ENV = "TANDEM_CUDA_INCLUDE"
DEFAULT_ARCH = "sm_90"  # the H100 / H200; a real architecture, so ptxas reports registers
TYPES = {"bfloat16": "__nv_bfloat16", "float16": "__half", "float32": "float"}
# MLX's own header defines these (mlx/backend/cuda/device/utils.cuh); stand-ins of the same use
_HEADER = """
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using int64_t = long long;
using int32_t = int;
struct Shape {
  int d[10];
  __device__ int operator[](int i) const { return d[i]; }
};
namespace mlx { namespace core { namespace cu {
"""


def wrap(name, inputs, outputs, template, source) -> str:
    """The kernel as MLX's CUDA backend builds it (mlx/backend/cuda/custom_kernel.cpp)."""
    params = []
    for arg, ctype in inputs:
        params.append(f"    const {ctype}* {arg}")
        if f"{arg}_shape" in source:
            params.append(f"    const __grid_constant__ Shape {arg}_shape")
    params += [f"    {ctype}* {arg}" for arg, ctype in outputs]
    constants = "".join(
        f"  using {k} = {v};\n" if isinstance(v, str) else f"  constexpr int {k} = {v};\n"
        for k, v in template
    )
    body = f"__global__ void {name}(\n" + ",\n".join(params) + ") {\n" + constants + source
    return _HEADER + body + "\n}\n}}}\n"


def variants() -> list[tuple[str, str]]:
    """(label, source) of every variant the engine launches."""
    out = []
    layouts = [h for h in (1, 2, 4, 8) if h <= verify_attention_cuda.MAX_HEADS_PER_BLOCK]
    for dtype, d in itertools.product(TYPES, verify_attention_cuda.HEAD_DIMS):
        t = TYPES[dtype]
        inputs = [("q", t), ("k", t), ("v", t), ("mask", "bool"), ("scale", "float")]
        for heads in layouts:  # query heads a block (grouping is opt-in)
            template = [
                ("T", t),
                ("D", d),
                ("WARPS", verify_attention_cuda.WARPS),
                ("VROWS", verify_attention_cuda.value_rows(d)),
            ]
            if heads > 1:
                template.append(("HEADS", heads))
            source = verify_attention_cuda.kernel_source(heads=heads)
            wrapped = wrap("k", inputs, [("out", t)], template, source)
            out.append((f"verify_attention {dtype} D={d} heads={heads}", wrapped))
    rows = [2, 4, 8, 16, 32]
    for dtype, r in itertools.product(TYPES, rows):
        t = TYPES[dtype]
        template = [
            ("T", t),
            ("ROWS", r),
            ("COLS", skinny_matmul_cuda.DEFAULT_COLS),
            ("WARPS", skinny_matmul_cuda.DEFAULT_WARPS),
        ]
        source = skinny_matmul_cuda.kernel_source()
        wrapped = wrap("k", [("x", t), ("w", t)], [("out", t)], template, source)
        out.append((f"skinny_matmul {dtype} ROWS={r}", wrapped))
    for dtype, k in itertools.product(TYPES, (3, 4)):
        t = TYPES[dtype]
        template = [("InT", t), ("OutT", t), ("K", k)]
        source = depthwise_conv_cuda.kernel_source()
        wrapped = wrap("k", [("x", t), ("w", t)], [("y", t)], template, source)
        out.append((f"depthwise_conv {dtype} K={k}", wrapped))
    for dtype, mask, vector in itertools.product(TYPES, (False, True), (False, True)):
        t = TYPES[dtype]
        names = gated_delta_cuda.kernel_input_names(has_mask=mask)
        inputs = [
            (n, "bool" if n == "mask" else ("float" if n == "state_in" else t)) for n in names
        ]
        template = [("InT", t), ("StT", "float"), ("Dk", 128), ("Dv", 128), ("Hk", 16), ("Hv", 32)]
        source = gated_delta_cuda.kernel_source(has_mask=mask, vectorized=vector)
        wrapped = wrap("k", inputs, [("y", t), ("state_out", "float")], template, source)
        out.append((f"gated_delta {dtype} mask={mask} per-key gate={vector}", wrapped))
    return out


def find_nvrtc() -> tuple[Path, Path] | None:
    """libnvrtc and the folder of cuda_bf16.h: from the environment, else the pip packages."""
    lib, include = os.environ.get(NVRTC_ENV), os.environ.get(INCLUDE_ENV)
    if not (lib and include):
        try:
            import nvidia.cuda_nvrtc as nvrtc_pkg  # type: ignore[import-not-found]
            import nvidia.cuda_runtime as runtime_pkg  # type: ignore[import-not-found]
        except ImportError:
            return None
        found = sorted(Path(list(nvrtc_pkg.__path__)[0], "lib").glob("libnvrtc.so*"))
        lib = lib or (str(found[0]) if found else None)
        include = include or str(Path(list(runtime_pkg.__path__)[0], "include"))
    if not lib or not Path(lib).exists() or not Path(include, "cuda_bf16.h").exists():
        return None
    return Path(lib), Path(include)


def gpu_arch(text: str) -> str:
    """--arch: a GPU architecture as NVRTC names it (sm_90, sm_90a, compute_90, lto_90)."""
    if not re.fullmatch(r"(sm|compute|lto)_\d{2,3}[af]?", text):
        raise argparse.ArgumentTypeError(
            f"must be an architecture such as sm_90, sm_90a or compute_90, got {text!r}"
        )
    return text


def compile_source(nvrtc: ctypes.CDLL, source: str, *, include: Path, arch: str) -> tuple[int, str]:
    """NVRTC's result code and its log for one source."""
    program = ctypes.c_void_p()
    code = nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"k.cu", 0, None, None)
    if code:
        return code, "nvrtcCreateProgram failed"
    options = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", f"-I{include}"]
    if arch.startswith("sm_"):
        options.append("--ptxas-options=-v")
    array = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    try:
        code = nvrtc.nvrtcCompileProgram(program, len(options), array)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return code, log.value.decode(errors="replace").strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=gpu_arch, default=DEFAULT_ARCH)
    p.add_argument("--verbose", action="store_true", help="registers of every variant")
    args = p.parse_args(argv)
    found = find_nvrtc()
    if found is None:
        print(f"no NVRTC here (set {NVRTC_ENV} and {INCLUDE_ENV}, see --help): nothing checked")
        return 0
    lib, include = found
    nvrtc = ctypes.CDLL(str(lib))
    failed = 0
    todo = variants()
    for label, source in todo:
        code, log = compile_source(nvrtc, source, include=include, arch=args.arch)
        problems = [
            line
            for line in log.splitlines()
            if not line.startswith("ptxas") or re.search(r"error|warning", line, re.IGNORECASE)
        ]
        spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", log)]
        registers = re.findall(r"Used (\d+) registers", log)
        if code or problems or any(spills):
            failed += 1
            print(f"{label}: NVRTC result {code}, spill stores {spills}\n{log}")
        elif args.verbose:
            print(f"{label}: {', '.join(registers) or '?'} registers, no spills")
    print(f"{len(todo) - failed} of {len(todo)} kernel variants compiled for {args.arch}")
    return 1 if failed else 0


if __name__ == "__main__":
    run_and_exit(main)
