"""Prompt chunks at an offset take MLX's unfused attention on CUDA (engine/kernels/chunk_attention.py):
it computes what MLX computes, only such chunks are routed to it, and a long prompt prefilled in
chunks beside running chats through it still gives every row mlx_lm.generate's tokens."""

from __future__ import annotations

import mlx.core as mx
import pytest

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.kernels import chunk_attention as ca
from engine.kernels import verify_attention_cuda as vac
from tests.engine.engine_harness import Driver, make_core, make_prompt, make_tiny


def tensors(*, batch=1, hq=8, hk=2, n=16, keys=80, d=64, dtype=mx.bfloat16, seed=0):
    mx.random.seed(seed)
    q = mx.random.normal((batch, hq, n, d)).astype(dtype)
    k = mx.random.normal((batch, hk, keys, d)).astype(dtype)
    v = mx.random.normal((batch, hk, keys, d)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("hq,hk", [(8, 8), (8, 2)])
@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16])
def test_it_computes_what_mlx_computes(hq, hk, dtype):
    q, k, v = tensors(batch=2, hq=hq, hk=hk, dtype=dtype)
    tol = 1e-5 if dtype == mx.float32 else 2e-2
    causal = ca.unfused_attention(q, k, v, scale=0.125, mask="causal")
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
    assert mx.allclose(causal, want, atol=tol, rtol=tol)
    # a ragged batch's mask: row 1 has left padding
    keep = mx.arange(80)[None] >= mx.array([[0], [9]])
    mask = (mx.arange(64, 80)[:, None] >= mx.arange(80)[None])[None, None] & keep[:, None, None]
    got = ca.unfused_attention(q, k, v, scale=0.125, mask=mask)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=mask)
    assert mx.allclose(got, want, atol=tol, rtol=tol)


def test_it_takes_chunks_at_an_offset_only():
    q, k, v = tensors()
    assert ca.takes(q, k, v, "causal")
    assert ca.takes(q, k, v, mx.ones((1, 1, 16, 80), dtype=mx.bool_))
    assert not ca.takes(q, k, v, "causal", sinks=mx.zeros((8,)))  # gpt-oss's sinks: MLX
    assert not ca.takes(*tensors(keys=16), "causal")  # a prompt's first chunk: its shape recurs
    assert not ca.takes(*tensors(n=5), "causal")  # a verify forward
    assert not ca.takes(*tensors(n=1), None)  # a decode step
    assert not ca.takes(q, k, v, None)  # no mask: not a chunk of a prompt
    assert not ca.takes(*tensors(dtype=mx.float32), "causal")  # MLX runs it unfused anyway
    assert not ca.takes(*tensors(n=512, keys=(1 << 26) // (8 * 512) + 1), "causal")  # too big


def test_the_router_sends_chunks_unfused_on_cuda(monkeypatch):
    calls = []

    def original(*args, **kwargs):
        calls.append("mlx")
        return mx.fast.scaled_dot_product_attention(*args, **kwargs)

    monkeypatch.setattr(vac, "on_cuda", lambda: True)
    unfused = ca.unfused_attention
    monkeypatch.setattr(
        ca, "unfused_attention", lambda *a, **kw: calls.append("unfused") or unfused(*a, **kw)
    )
    sdpa = vac.make_sdpa(original)
    sdpa(*tensors(), scale=0.125, mask="causal")
    sdpa(*tensors(keys=16), scale=0.125, mask="causal")
    sdpa(*tensors(n=1), scale=0.125, mask=None)
    assert calls == ["unfused", "mlx", "mlx"]
    calls.clear()
    vac.make_sdpa(original, chunks=False)(*tensors(), scale=0.125, mask="causal")
    assert calls == ["mlx"]


@pytest.fixture
def routed(monkeypatch):
    """The router in place as on CUDA, its kernel left out (none on the CPU), float32 taken."""
    before = mx.fast.scaled_dot_product_attention
    monkeypatch.setattr(vac, "on_cuda", lambda: True)
    monkeypatch.setattr(vac, "takes", lambda *a, **kw: False)
    monkeypatch.setattr(ca, "HALF_FLOATS", (mx.float32, mx.float16, mx.bfloat16))
    monkeypatch.setattr(ca, "DEFAULT_MIN_QUERIES", 4)
    taken = []
    unfused = ca.unfused_attention
    monkeypatch.setattr(
        ca, "unfused_attention", lambda *a, **kw: taken.append(1) or unfused(*a, **kw)
    )
    vac.install(force=True)
    yield taken
    mx.fast.scaled_dot_product_attention = before


def test_a_long_prompt_beside_chats_equals_generate_alone(tmp_path, routed):
    tiny = make_tiny(tmp_path)
    core = make_core(tiny, prefill_chunk=16)
    driver = Driver(core)
    n = 12
    chats = [make_prompt(80 + i, 9 + 3 * i) for i in range(2)]
    rows = {driver.add(p, 40): p for p in chats}
    driver.until(lambda: all(len(driver.tokens[r]) >= 2 for r in rows))
    long = make_prompt(90, 150)
    rows[driver.add(long, n)] = long
    driver.finish()
    for rid, prompt in rows.items():
        assert driver.tokens[rid] == tiny.greedy(prompt, len(driver.tokens[rid]))
    assert routed, "no chunk at an offset went through the unfused path"
