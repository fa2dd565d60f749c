"""The CUDA gated-delta kernel's Python side, on the CPU: install, dispatch and the source MLX
compiles. The kernel's numbers are checked on a CUDA machine by engine/bench/gated_delta_check.py;
nothing here runs it."""

import re

import mlx.core as mx
import pytest
from mlx_lm.models import gated_delta

from engine.kernels import gated_delta_cuda as gdc

VARIANTS = [(m, v) for m in (False, True) for v in (False, True)]
TEMPLATE_NAMES = {"InT", "StT", "Dk", "Dv", "Hk", "Hv"}
ONLY_CPU = pytest.mark.skipif(mx.cuda.is_available(), reason="checks the CPU behaviour")


def small_inputs(*, vector_gate: bool = False, masked: bool = False, B: int = 2, T: int = 3):
    Hk, Hv, Dk, Dv = 2, 4, 32, 8
    keys = mx.random.split(mx.random.key(0), 6)
    q = mx.random.normal((B, T, Hk, Dk), key=keys[0])
    k = mx.random.normal((B, T, Hk, Dk), key=keys[1])
    v = mx.random.normal((B, T, Hv, Dv), key=keys[2])
    g_shape = (B, T, Hv, Dk) if vector_gate else (B, T, Hv)
    g = mx.random.uniform(0.7, 1.0, g_shape, key=keys[3])
    beta = mx.sigmoid(mx.random.normal((B, T, Hv), key=keys[4]))
    state = mx.random.normal((B, Hv, Dv, Dk), key=keys[5])
    mask = mx.array([[True] * T, [False] + [True] * (T - 1)][:B]) if masked else None
    return q, k, v, g, beta, state, mask


@ONLY_CPU
def test_install_does_nothing_on_the_cpu():
    before = gated_delta.gated_delta_ops
    assert gdc.install() is False
    assert gated_delta.gated_delta_ops is before
    assert not gdc.is_installed()


def test_the_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv(gdc.DISABLE_ENV, "1")
    before = gated_delta.gated_delta_ops
    assert gdc.install() is False
    assert gated_delta.gated_delta_ops is before


@ONLY_CPU
def test_nothing_is_eligible_on_the_cpu():
    assert not gdc.eligible(*small_inputs())


@pytest.mark.parametrize("has_mask,vectorized", VARIANTS)
def test_source_has_every_placeholder_filled_and_balanced(has_mask, vectorized):
    source = gdc.kernel_source(has_mask=has_mask, vectorized=vectorized)
    assert "__G_" not in source and "__MASK_" not in source
    for open_, close in ("{}", "()", "[]"):
        assert source.count(open_) == source.count(close)
    assert ("mask_[t]" in source) == has_mask
    assert ("g_[s_idx]" in source) == vectorized
    identifiers = set(re.findall(r"[A-Za-z_]\w*", source))
    assert TEMPLATE_NAMES <= identifiers  # all arrive as template arguments
    for name in gdc.kernel_input_names(has_mask=has_mask) + ["y", "state_out"]:
        assert name in identifiers


@pytest.mark.parametrize("has_mask,vectorized", VARIANTS)
def test_only_q_shape_is_asked_of_mlx(has_mask, vectorized):
    # MLX adds `<input>_shape/_strides/_ndim` parameters for every input whose name plus suffix
    # appears anywhere in the source (a substring search); the kernel wants q's shape alone.
    source = gdc.kernel_source(has_mask=has_mask, vectorized=vectorized)
    asked = {
        name + suffix
        for name in gdc.kernel_input_names(has_mask=has_mask)
        for suffix in ("_shape", "_strides", "_ndim")
        if name + suffix in source
    }
    assert asked == {"q_shape"}


@pytest.mark.parametrize("has_mask,vectorized", VARIANTS)
def test_the_launch_matches_what_the_source_expects(monkeypatch, has_mask, vectorized):
    calls = []

    def recording_kernel(**kwargs):
        calls.append(kwargs)
        return [
            mx.zeros(s, dtype=d) for s, d in zip(kwargs["output_shapes"], kwargs["output_dtypes"])
        ]

    chosen = []
    monkeypatch.setattr(gdc, "_kernel", lambda **kw: chosen.append(kw) or recording_kernel)
    q, k, v, g, beta, state, mask = small_inputs(vector_gate=vectorized, masked=has_mask)
    q = q.astype(mx.bfloat16)
    mask = None if mask is None else mask.astype(mx.int32)  # cast to bool on the way in
    y, new_state = gdc.gated_delta_cuda(q, k, v, g, beta, state, mask)

    assert chosen == [{"has_mask": has_mask, "vectorized": vectorized}]
    (call,) = calls
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    assert call["grid"] == (32, Dv, B * Hv)
    assert call["threadgroup"] == (32, gdc.THREADS_Y, 1)
    assert dict(call["template"]) == {
        "InT": mx.bfloat16,
        "StT": mx.float32,
        "Dk": Dk,
        "Dv": Dv,
        "Hk": Hk,
        "Hv": Hv,
    }
    inputs = call["inputs"]
    assert len(inputs) == len(gdc.kernel_input_names(has_mask=has_mask))
    if has_mask:
        assert inputs[-1].dtype == mx.bool_
    assert call["output_shapes"] == [(B, T, Hv, Dv), state.shape]
    assert (y.dtype, new_state.dtype) == (mx.bfloat16, mx.float32)


@pytest.mark.parametrize("masked", [False, True])
def test_the_dispatcher_falls_back_to_the_original(masked):
    original = gated_delta.gated_delta_ops
    seen = []

    def recording(*args):
        seen.append(args)
        return original(*args)

    dispatcher = gdc.make_dispatcher(recording, use_kernel=lambda *a: False)
    args = small_inputs(masked=masked)
    y, state = dispatcher(*args)
    y_ref, state_ref = original(*args)
    assert len(seen) == 1 and all(a is b for a, b in zip(seen[0], args))
    assert mx.array_equal(y, y_ref) and mx.array_equal(state, state_ref)


def test_the_dispatcher_makes_the_zero_state_as_the_original_does():
    seen = []
    dispatcher = gdc.make_dispatcher(lambda *a: seen.append(a) or (None, None))
    q, k, v, g, beta, _, _ = small_inputs()
    dispatcher(q, k, v, g, beta)
    state = seen[0][5]
    assert state.dtype == mx.float32 and state.shape == (2, 4, 8, 32)
    assert mx.array_equal(state, mx.zeros_like(state))


def test_the_dispatcher_runs_the_kernel_when_eligible(monkeypatch):
    ran = []
    monkeypatch.setattr(gdc, "gated_delta_cuda", lambda *a: ran.append(a) or ("y", "s"))
    dispatcher = gdc.make_dispatcher(
        lambda *a: pytest.fail("fell back"), use_kernel=lambda *a: True
    )
    assert dispatcher(*small_inputs(masked=True)) == ("y", "s")
    assert len(ran) == 1


def test_gated_delta_update_reaches_a_patched_module_global(monkeypatch):
    # What install() relies on: mlx-lm looks gated_delta_ops up at each call.
    original = gated_delta.gated_delta_ops
    seen = []
    patched = gdc.make_dispatcher(
        lambda *a: seen.append(a) or original(*a), use_kernel=lambda *a: False
    )
    monkeypatch.setattr(gated_delta, "gated_delta_ops", patched)
    q, k, v, _, _, state, mask = small_inputs(masked=True)
    B, T, Hv = v.shape[:3]
    a = mx.zeros((B, T, Hv))
    b = mx.zeros((B, T, Hv))
    gated_delta.gated_delta_update(q, k, v, a, b, mx.zeros((Hv,)), mx.zeros((Hv,)), state, mask)
    assert len(seen) == 1


def test_uninstall_restores_the_original(monkeypatch):
    original = gated_delta.gated_delta_ops
    monkeypatch.setattr(gated_delta, "gated_delta_ops", gdc.make_dispatcher(original))
    assert gdc.is_installed()
    gdc.uninstall()
    assert gated_delta.gated_delta_ops is original


def test_a_build_without_mx_cuda_counts_as_no_cuda(monkeypatch):
    """MLX builds for Metal or the CPU need not have `mx.cuda`: loading a model must not fail."""
    import mlx.core as mx

    from engine.kernels import gated_delta_cuda

    monkeypatch.delattr(mx, "cuda", raising=False)
    assert gated_delta_cuda.cuda_available() is False
    assert gated_delta_cuda.install() is False
