"""The CUDA verify-attention kernel's Python side, on the CPU: which calls it takes, the drop-in
wrapper, install and the environment switch, and the source MLX compiles. Its numbers are checked
on a CUDA machine by engine/bench/attention_check.py; nothing here runs it."""

import mlx.core as mx
import pytest

from engine.bench.attention_check import reference, verify_mask
from engine.kernels import verify_attention_cuda as vac

ONLY_CPU = pytest.mark.skipif(mx.cuda.is_available(), reason="checks the CPU behaviour")


@pytest.fixture
def grouping(monkeypatch):
    """Blocks of grouped query heads, as TANDEM_GROUPED_ATTENTION=1 gives at install."""
    monkeypatch.setitem(vac._grouping, "on", True)


def tensors(batch=2, hq=8, hk=2, n=5, keys=64, d=64, dtype=mx.float16):
    q = mx.random.normal((batch, hq, n, d), key=mx.random.key(1)).astype(dtype)
    k = mx.random.normal((batch, hk, keys, d), key=mx.random.key(2)).astype(dtype)
    v = mx.random.normal((batch, hk, keys, d), key=mx.random.key(3)).astype(dtype)
    mask = mx.ones((batch, 1, n, keys), dtype=mx.bool_)
    return q, k, v, mask


def test_it_takes_a_verify_forwards_attention():
    assert vac.takes(*tensors())
    assert vac.takes(*tensors(n=2, d=128, dtype=mx.bfloat16))
    q, k, v, mask = tensors()
    assert vac.takes(q, k, v, mask[:1])  # one mask for every row


def test_it_takes_a_ragged_batchs_decode_step():
    """Rows of different lengths decode one query each behind a mask of their left padding;
    MLX has no fused kernel for that (unfused matmuls and a softmax per layer)."""
    q, k, v, mask = tensors(batch=4, n=1, keys=300, dtype=mx.bfloat16)
    assert vac.takes(q, k, v, mask)
    assert not vac.takes(q, k, v, None)
    # one query: no byte limit (the kernel was faster at every size measured, 537M included)
    assert vac.takes(*tensors(batch=32, hq=32, hk=8, n=1, keys=4096, dtype=mx.bfloat16))


@pytest.mark.parametrize(
    "change",
    [
        lambda q, k, v, m: (q, k, v, None),  # no mask: MLX's own fused kernel
        lambda q, k, v, m: (q, k, v, "causal"),
        lambda q, k, v, m: (q, k, v, m.astype(mx.float16)),  # an additive mask
        lambda q, k, v, m: (q[:, :, :1], k, v, None),  # one query unmasked: MLX's decode kernel
        lambda q, k, v, m: (q[..., :48], k[..., :48], v[..., :48], m),  # head size 48
        lambda q, k, v, m: (q[:, :7], k, v, m),  # query heads not a multiple of key heads
        lambda q, k, v, m: (q, k, v, mx.ones((2, 8, 5, 64), dtype=mx.bool_)),  # a mask per head
        lambda q, k, v, m: (q, k.astype(mx.float32), v, m),
    ],
)
def test_it_leaves_every_other_call_to_mlx(change):
    assert not vac.takes(*change(*tensors()))


def test_it_leaves_big_products_to_mlx(grouping):
    q, k, v, mask = tensors(batch=16, hq=32, hk=8, n=17, keys=4096)
    assert vac.key_bytes_read(q, k) > vac.DEFAULT_MAX_GROUPED_BYTES
    assert not vac.takes(q, k, v, mask)
    assert not vac.takes(q, k, v, mask, sinks=mx.zeros((32,)))
    # grouped heads read each key once for four: the same call on fewer keys is taken...
    grouped = tensors(batch=16, hq=32, hk=8, n=5, keys=256, d=128, dtype=mx.bfloat16)
    assert vac.takes(*grouped)
    # ...where a block per head (no grouping) reads four times the bytes and is not
    ungrouped = tensors(batch=16, hq=32, hk=32, n=5, keys=256, d=128, dtype=mx.bfloat16)
    assert vac.key_bytes_read(*ungrouped[:2]) > vac.DEFAULT_MAX_BYTES
    assert not vac.takes(*ungrouped)
    # the same shape in float32 reads twice the bytes
    half = tensors(batch=2, hq=8, hk=8, n=9, keys=2048, d=128, dtype=mx.float16)
    assert vac.takes(*half)
    assert not vac.takes(*(a.astype(mx.float32) if a.dtype != mx.bool_ else a for a in half))


@ONLY_CPU
def test_the_wrapper_calls_mlx_on_the_cpu_with_every_argument():
    q, k, v, mask = tensors(dtype=mx.float32)
    calls = []

    def original(*args, **kwargs):
        calls.append((args, kwargs))
        return mx.fast.scaled_dot_product_attention(*args, **kwargs)

    sdpa = vac.make_sdpa(original)
    out = sdpa(q, k, v, scale=0.125, mask=mask)
    assert calls and calls[0][1]["mask"] is mask and calls[0][1]["sinks"] is None
    assert mx.allclose(out, reference(q, k, v, 0.125, mask), atol=1e-4)
    assert sdpa.__wrapped__ is original


@ONLY_CPU
def test_install_does_nothing_on_the_cpu():
    before = mx.fast.scaled_dot_product_attention
    assert vac.install() is False
    assert mx.fast.scaled_dot_product_attention is before


def test_the_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv(vac.DISABLE_ENV, "1")
    before = mx.fast.scaled_dot_product_attention
    assert vac.install() is False
    assert mx.fast.scaled_dot_product_attention is before


def test_the_checkers_mask_is_a_verify_rounds():
    mask = verify_mask(batch=3, queries=4, keys=128)
    assert mask.shape == (3, 1, 4, 128)
    rows = mask[:, 0].tolist()
    written = 128 - 64
    for b, row in enumerate(rows):
        pad = b * 7 % 40
        for n, allowed in enumerate(row):
            query_pos = written - 4 + n
            assert not any(allowed[:pad]) and not any(allowed[query_pos + 1 :])
            assert allowed[query_pos]  # every query sees itself
            hole = range(pad + 5, pad + 8) if b % 2 else range(0)
            assert all(allowed[j] != (j in hole) for j in range(pad, query_pos + 1))


@pytest.mark.parametrize(
    "group,heads",
    [
        (4, 4),  # Llama 3 8B: 32 query heads on 8 key heads, each key read once for four
        (8, 4),  # at most four a block: eight were slower on an H100
        (16, 4),
        (2, 2),
        (6, 2),  # the largest power of two that divides the group
        (3, 1),
        (1, 1),  # no grouping: a block per head, the per-head layout
    ],
)
def test_a_block_computes_the_heads_that_share_a_key_head(grouping, group, heads):
    assert vac.heads_per_block(group) == heads
    assert (vac.kernel_source(heads=heads) == vac.GROUPED_SOURCE) == (heads > 1)


def test_one_query_takes_a_block_a_head_unless_grouping_is_asked_for():
    assert all(vac.heads_per_block(g) == 1 for g in (1, 2, 4, 8))


def test_several_queries_take_grouped_blocks(monkeypatch):
    """A verify forward's heads are grouped by default: on an H100 grouped blocks took a median
    0.77x the per-head layout's time at 4-32 rows over 2-17 queries and 256-2,048 keys."""
    assert [vac.heads_per_block(g, 5) for g in (1, 2, 4, 8)] == [1, 2, 4, 4]
    # the 8B's round at 16 rows over 256 keys: grouped, it reads a quarter of the bytes and
    # is the kernel's (0.57x cuDNN's time); a block a head had left it to cuDNN
    q, k, v, mask = tensors(batch=16, hq=32, hk=8, n=5, keys=256, d=128, dtype=mx.bfloat16)
    assert vac.key_bytes_read(q, k) == 16 * 8 * 5 * 256 * 128 * 2
    assert vac.takes(q, k, v, mask)
    monkeypatch.setitem(vac._grouping_verify, "on", False)  # TANDEM_PER_HEAD_VERIFY_ATTENTION
    assert vac.heads_per_block(4, 5) == 1
    assert not vac.takes(q, k, v, mask)


def test_install_reads_the_per_head_verify_switch(monkeypatch):
    monkeypatch.setitem(vac._grouping, "on", False)
    monkeypatch.setitem(vac._grouping_verify, "on", True)
    monkeypatch.setenv(vac.PER_HEAD_VERIFY_ENV, "1")
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", vac.make_sdpa(lambda *a, **k: 0))
    assert vac.install(force=True)
    assert vac.heads_per_block(4, 5) == 1
    monkeypatch.delenv(vac.PER_HEAD_VERIFY_ENV)
    assert vac.install(force=True)
    assert vac.heads_per_block(4, 5) == 4


def test_install_reads_the_grouping_switch(monkeypatch):
    monkeypatch.setitem(vac._grouping, "on", False)
    monkeypatch.setenv(vac.GROUPED_ENV, "1")
    monkeypatch.setattr(mx.fast, "scaled_dot_product_attention", vac.make_sdpa(lambda *a, **k: 0))
    assert vac.install(force=True)
    assert vac.heads_per_block(4) == 4


def test_the_bytes_read_count_each_groups_keys_once(grouping):
    q, k, _, _ = tensors(batch=4, hq=32, hk=8, n=5, keys=1024, d=128, dtype=mx.bfloat16)
    assert vac.key_bytes_read(q, k) == 4 * 8 * 5 * 1024 * 128 * 2
    q, k, _, _ = tensors(batch=4, hq=8, hk=8, n=5, keys=1024, d=128, dtype=mx.bfloat16)
    assert vac.key_bytes_read(q, k) == 4 * 8 * 5 * 1024 * 128 * 2


def test_the_kernel_source_names_what_mlx_passes_it():
    for source in (vac.kernel_source(heads=1), vac.kernel_source(heads=4)):
        assert "HEADS" in source or source is vac.PER_HEAD_SOURCE
    source = vac.kernel_source()
    for name in ("q_shape", "k_shape", "mask_shape", "scale[0]", "out +", "__shfl_xor_sync"):
        assert name in source


@pytest.mark.parametrize("n,keys", [(4, 4), (5, 64), (17, 100), (32, 40)])
def test_the_causal_mask_means_what_mlx_means_by_causal(n, keys):
    """The last `n` positions, each seeing itself and every key before it: MLX's "causal" with
    fewer queries than keys, the same numbers on the CPU."""
    q, k, v, _ = tensors(n=n, keys=keys, dtype=mx.float32)
    mask = vac.causal_mask(n, keys)
    assert mask.shape == (1, 1, n, keys) and mask.dtype == mx.bool_
    assert mask[0, 0].sum(axis=1).tolist() == list(range(keys - n + 1, keys + 1))
    ours = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=mask)
    mlx = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
    assert mx.allclose(ours, mlx, atol=1e-5)


def test_causal_calls_of_few_queries_only():
    assert vac.causal_mask(vac.MIN_CAUSAL_QUERIES - 1, 64) is None  # MLX's fused kernel
    assert vac.causal_mask(vac.MAX_QUERIES + 1, 64) is None  # a prompt's prefill: cuDNN
    assert vac.causal_mask(6, 5) is None  # more queries than keys
    with vac.causal_calls(False):
        assert vac.causal_mask(5, 64) is None
    assert vac.causal_mask(5, 64) is vac.causal_mask(5, 64)  # one forward's layers share it


def test_the_wrapper_sends_a_causal_verify_call_to_the_kernel(monkeypatch):
    """mlx-lm's caches pass mask "causal" for several queries, which MLX's CUDA backend sends to
    cuDNN from four on: on a GPU the wrapper gives the kernel the same mask as an array."""
    q, k, v, _ = tensors(n=5, keys=64, dtype=mx.float16)
    seen = []
    monkeypatch.setattr(vac, "on_cuda", lambda: True)
    monkeypatch.setattr(vac, "verify_attention", lambda q, k, v, *, scale, mask: seen.append(mask))
    sdpa = vac.make_sdpa(lambda *a, **kw: "mlx")
    sdpa(q, k, v, scale=0.125, mask="causal")
    assert len(seen) == 1 and mx.array_equal(seen[0], vac.causal_mask(5, 64)).item()
    assert sdpa(q[:, :, :3], k, v, scale=0.125, mask="causal") == "mlx"  # MLX's fused kernel
    with vac.causal_calls(False):
        assert sdpa(q, k, v, scale=0.125, mask="causal") == "mlx"
    assert sdpa(q, k, v, scale=0.125, mask=None) == "mlx"
