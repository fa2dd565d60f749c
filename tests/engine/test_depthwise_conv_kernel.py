"""The CUDA depthwise-convolution kernel's Python side, on the CPU: which calls it takes, the
dispatch (bias included), install under the recurrent-state capture, and the source MLX compiles.
Its numbers are checked on a CUDA machine by engine/bench/conv_check.py; nothing here runs it."""

import re

import mlx.core as mx
import mlx.nn as nn
import pytest

from engine.cache import recurrent_capture
from engine.kernels import depthwise_conv_cuda as dcc
from engine.kernels import switch

ONLY_CPU = pytest.mark.skipif(mx.cuda.is_available(), reason="checks the CPU behaviour")
CHANNELS, TAPS = 12, 4


def depthwise(*, bias: bool = False, **options) -> nn.Conv1d:
    return nn.Conv1d(CHANNELS, CHANNELS, TAPS, groups=CHANNELS, bias=bias, **options)


def inputs(steps: int = 5, dtype=mx.float32) -> mx.array:
    return mx.random.normal((2, steps + TAPS - 1, CHANNELS), key=mx.random.key(1)).astype(dtype)


def test_it_takes_the_short_depthwise_convolutions_of_recurrent_layers():
    assert dcc.takes(depthwise(), inputs())
    assert dcc.takes(depthwise(bias=True), inputs(steps=1))


@pytest.mark.parametrize(
    "conv,x",
    [
        (nn.Conv1d(CHANNELS, CHANNELS, TAPS, bias=False), inputs()),  # not depthwise
        (depthwise(padding=1), inputs()),
        (depthwise(stride=2), inputs()),
        (depthwise(dilation=2), inputs()),
        (depthwise(), inputs()[:, :2]),  # shorter than the filter
        (depthwise(), inputs()[..., :6]),  # other channels
        (depthwise(), inputs(dtype=mx.bfloat16)),  # weight float32, input bfloat16
        (depthwise(), inputs()[0]),  # no batch axis
    ],
)
def test_it_leaves_every_other_convolution_to_mlx(conv, x):
    assert not dcc.takes(conv, x)


@ONLY_CPU
def test_install_does_nothing_on_the_cpu():
    before = nn.Conv1d.__call__
    assert dcc.install() is False
    assert nn.Conv1d.__call__ is before
    assert not dcc.eligible(depthwise(), inputs())


def test_the_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv(dcc.DISABLE_ENV, "1")
    before = nn.Conv1d.__call__
    assert dcc.install() is False
    assert nn.Conv1d.__call__ is before


@pytest.mark.parametrize("bias", [False, True])
def test_the_dispatch_gives_what_the_layer_gives(monkeypatch, bias):
    conv = depthwise(bias=bias)
    if bias:
        conv.bias = mx.arange(CHANNELS, dtype=mx.float32)
    calls = []

    def reference(x, weight):  # stands in for the kernel, which needs CUDA
        calls.append(x.shape)
        return mx.conv1d(x, weight, groups=CHANNELS)

    monkeypatch.setattr(dcc, "depthwise_conv_cuda", reference)
    original = nn.Conv1d.__call__
    x = inputs()
    through = dcc.make_call(original, use_kernel=lambda conv, x: True)(conv, x)
    assert calls == [x.shape]
    assert mx.array_equal(through, original(conv, x))
    skipped = dcc.make_call(original, use_kernel=lambda conv, x: False)(conv, x)
    assert calls == [x.shape] and mx.array_equal(skipped, original(conv, x))


def test_install_sees_itself_under_the_capture_and_never_wraps_the_capture(monkeypatch):
    original = nn.Conv1d.__call__
    while hasattr(original, "__wrapped__"):  # MLX's own, under any hook an earlier test left
        original = original.__wrapped__
    monkeypatch.setattr(nn.Conv1d, "__call__", original)
    monkeypatch.setattr(switch, "on_cuda", lambda: True)
    assert dcc.install() and dcc.is_installed()
    nn.Conv1d.__call__ = recurrent_capture._conv_hook(nn.Conv1d.__call__)
    assert dcc.is_installed() and dcc.install()  # a second model's load: nothing changes
    captured = nn.Conv1d.__call__
    dcc.uninstall()  # not on top: left alone
    assert nn.Conv1d.__call__ is captured
    nn.Conv1d.__call__ = recurrent_capture._conv_hook(original)  # capture first, no kernel
    assert dcc.install() is False and not dcc.is_installed()


def test_source_asks_mlx_only_for_x_shape_and_uses_its_template_arguments():
    source = dcc.kernel_source()
    asked = {
        name + suffix
        for name in ("x", "w")
        for suffix in ("_shape", "_strides", "_ndim")
        if name + suffix in source
    }
    assert asked == {"x_shape"}
    identifiers = set(re.findall(r"[A-Za-z_]\w*", source))
    assert {"InT", "OutT", "K", "x", "w", "y"} <= identifiers
    for open_, close in ("{}", "()", "[]"):
        assert source.count(open_) == source.count(close)
