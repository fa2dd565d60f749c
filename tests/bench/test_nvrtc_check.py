"""engine/bench/nvrtc_check.py: Tandem's CUDA kernels compiled by NVRTC as MLX wraps them. The
compiling tests run where NVRTC is installed (nvidia-cuda-nvrtc-cu12 and -runtime-cu12, or the
tool's environment variables); the rest run everywhere."""

import ctypes

import pytest

from engine.bench import nvrtc_check
from engine.kernels import skinny_matmul_cuda

FOUND = nvrtc_check.find_nvrtc()
NEEDS_NVRTC = pytest.mark.skipif(FOUND is None, reason="NVRTC is not installed here")


def test_the_wrapper_declares_what_mlx_passes():
    source = nvrtc_check.wrap(
        "k",
        [("x", "float"), ("w", "float")],
        [("out", "float")],
        [("T", "float"), ("ROWS", 4)],
        skinny_matmul_cuda.kernel_source(),
    )
    assert "const float* x,\n    const __grid_constant__ Shape x_shape" in source
    assert "float* out) {" in source
    assert "using T = float;" in source and "constexpr int ROWS = 4;" in source


def test_every_kernel_the_engine_launches_has_a_variant():
    labels = [label for label, _ in nvrtc_check.variants()]
    assert any(label.startswith("verify_attention bfloat16") for label in labels)
    assert "skinny_matmul bfloat16 ROWS=16" in labels
    assert any(label.startswith("depthwise_conv") for label in labels)
    assert "gated_delta bfloat16 mask=True per-key gate=True" in labels


def test_without_nvrtc_it_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setenv(nvrtc_check.NVRTC_ENV, "/nonexistent/libnvrtc.so")
    monkeypatch.setenv(nvrtc_check.INCLUDE_ENV, "/nonexistent")
    assert nvrtc_check.main([]) == 0
    assert "no NVRTC here" in capsys.readouterr().out


@NEEDS_NVRTC
def test_every_variant_compiles():
    assert nvrtc_check.main([]) == 0


@NEEDS_NVRTC
def test_a_kernel_that_does_not_compile_is_reported():
    lib, include = FOUND
    source = nvrtc_check.wrap("k", [("x", "float")], [("out", "float")], [], "out[0] = y;")
    code, log = nvrtc_check.compile_source(
        ctypes.CDLL(str(lib)), source, include=include, arch=nvrtc_check.DEFAULT_ARCH
    )
    assert code != 0 and "identifier" in log
