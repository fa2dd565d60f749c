"""Every CUDA kernel of Tandem is compiled under a name that carries a digest of its source:
MLX keeps compiled kernels on disk by name and template arguments only, so a changed source under
an old name would run the old code. Checked on the CPU with MLX's kernel factory recorded."""

import mlx.core as mx
import pytest

from engine.kernels import depthwise_conv_cuda as dw
from engine.kernels import gated_delta_cuda as gd
from engine.kernels import skinny_matmul_cuda as sm
from engine.kernels import verify_attention_cuda as vac
from engine.kernels.kernel_names import DEFAULT_DIGEST_CHARS, versioned_name
from engine.kernels.stale_kernels import current_kernel_names


def test_the_name_changes_with_the_source_and_only_with_it():
    a = versioned_name("tandem_x", "int a = 1;")
    assert a == versioned_name("tandem_x", "int a = 1;")
    assert a != versioned_name("tandem_x", "int a = 2;")
    assert a.startswith("tandem_x_") and len(a) == len("tandem_x_") + DEFAULT_DIGEST_CHARS
    assert a.replace("_", "").isalnum()  # a C identifier, as MLX builds the function's name
    assert versioned_name("k", "ab", "c") != versioned_name("k", "a", "bc")  # parts kept apart


@pytest.fixture
def built(monkeypatch):
    """The (name, source) of every kernel built, each returning zeros of its output shapes."""
    made = []

    def cuda_kernel(*, name, input_names, output_names, source, **kwargs):
        made.append((name, source))

        def run(*, inputs, output_shapes, output_dtypes, **kwargs):
            return [mx.zeros(s, d) for s, d in zip(output_shapes, output_dtypes, strict=True)]

        return run

    monkeypatch.setattr(mx.fast, "cuda_kernel", cuda_kernel, raising=False)
    monkeypatch.setattr(vac, "_kernels", {})
    monkeypatch.setattr(gd, "_kernels", {})
    monkeypatch.setattr(dw, "_kernel", None)
    monkeypatch.setattr(sm, "_kernel", None)
    return made


def _check(made, base):
    name, source = made[-1]
    assert name == versioned_name(base, source)


def test_every_kernel_is_built_under_its_sources_name(built):
    q = mx.zeros((1, 8, 5, 64), mx.float16)
    kv = mx.zeros((1, 2, 32, 64), mx.float16)
    mask = mx.ones((1, 1, 5, 32), mx.bool_)
    vac.verify_attention(q, kv, kv, scale=0.125, mask=mask)
    _check(built, "tandem_verify_attention_grouped")
    vac.verify_attention(q[:, :, :1], kv, kv, scale=0.125, mask=mask[:, :, :1])
    _check(built, "tandem_verify_attention")
    dw.depthwise_conv_cuda(mx.zeros((1, 8, 4)), mx.zeros((4, 3, 1)))
    _check(built, "tandem_depthwise_conv1d")
    sm.skinny_matmul(mx.zeros((3, 64)), mx.zeros((16, 64)))
    _check(built, "tandem_skinny_matmul")
    B, T, Hk, Hv, D = 1, 2, 2, 4, 32
    gd.gated_delta_cuda(
        mx.zeros((B, T, Hk, D)),
        mx.zeros((B, T, Hk, D)),
        mx.zeros((B, T, Hv, D)),
        mx.zeros((B, T, Hv)),
        mx.zeros((B, T, Hv)),
        mx.zeros((B, Hv, D, D)),
    )
    _check(built, "tandem_gated_delta")
    assert len({name for name, _ in built}) == len(built) == 5
    assert {name for name, _ in built} <= current_kernel_names()  # none pruned as stale


def test_the_value_rows_a_lane_loads_fit_its_registers():
    assert [vac.value_rows(d) for d in vac.HEAD_DIMS] == [8, 8, 8, 4]
    assert all(vac.value_rows(d) in vac.VALUE_ROWS for d in vac.HEAD_DIMS)


def test_value_rows_outside_those_compiled_are_refused(built):
    q = mx.zeros((1, 8, 5, 64), mx.float16)
    kv = mx.zeros((1, 2, 32, 64), mx.float16)
    mask = mx.ones((1, 1, 5, 32), mx.bool_)
    with pytest.raises(ValueError, match="rows_at_once"):
        vac.verify_attention(q, kv, kv, scale=0.1, mask=mask, rows_at_once=3)
