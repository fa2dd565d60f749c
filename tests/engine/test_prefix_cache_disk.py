"""The prefix cache's disk tier: entries survive a restart and continue exactly like a cold run;
corrupt, truncated or foreign files are skipped and removed; a full disk leaves RAM working."""

from __future__ import annotations

import errno
import logging
import random
import shutil

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import KVCache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import CacheNamespace, PrefixCache
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir, prefill

N_GEN = 6
ATOL = 1e-3
NS = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a")
NS_GEMMA = CacheNamespace(model_id="tiny-gemma3", tokenizer_hash="tok-a")
NS_DRAFT = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a", drafter="tiny-draft")
LOGGER = "engine.cache"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


def rand_tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100, 49152) for _ in range(n)]


def run(model, prompt: list[int], cache=None) -> tuple[list[int], np.ndarray]:
    steps = list(generate_step(mx.array(prompt), model, prompt_cache=cache, max_tokens=N_GEN))
    return [int(t) for t, _ in steps], np.stack([np.array(lp) for _, lp in steps])


def assert_continues_like_cold(model, match, request: list[int]) -> None:
    assert all(c.offset == match.tokens for c in match.target)
    warm, cold = run(model, request[match.tokens :], match.target), run(model, request)
    assert warm[0] == cold[0]
    np.testing.assert_allclose(warm[1], cold[1], atol=ATOL)


def files(root, ns=NS):
    return sorted((root / ns.key()).glob("*.safetensors"))


def stored_entry(root, model, tokens, ns=NS, draft=None):
    """Publish one entry to disk, wait for the writer, close (the app quits)."""
    pc = PrefixCache(disk_dir=root)
    pc.publish(ns, tokens, prefill(model, tokens), draft)
    pc.flush()
    pc.close()
    (path,) = files(root, ns)
    return path


def test_entries_survive_a_restart(llama, tmp_path):
    conv = rand_tokens(40, seed=1)
    pc = PrefixCache(disk_dir=tmp_path)
    pc.publish(NS, conv[:12], prefill(llama, conv[:12]))
    pc.publish(NS, conv[:26], prefill(llama, conv[:26]))  # replaces its prefix on disk too
    pc.flush(timeout=30)
    assert len(files(tmp_path)) == 1 and pc.stats().disk_entries == 1
    pc.close()

    pc = PrefixCache(disk_dir=tmp_path)  # a restart: nothing in RAM
    assert pc.stats().disk_entries == 1 and pc.stats().ram_entries == 0
    request = conv[:26] + rand_tokens(6, seed=2)
    match = pc.lookup(NS, request)
    assert match is not None and match.source == "disk" and match.tokens == 26
    assert_continues_like_cold(llama, match, request)

    edited = conv[:20] + [4242, 4343]  # from RAM now (promoted), trimmed
    match = pc.lookup(NS, edited)
    assert match is not None and match.source == "ram" and match.tokens == 20
    assert_continues_like_cold(llama, match, edited)
    s = pc.stats()
    assert (s.hits, s.misses, s.skipped) == (2, 0, {})
    pc.close()


def test_sliding_window_and_draft_entries_survive_a_restart(llama, tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    gemma = mlx_load(str(make_tiny_gemma3_dir(tmp_path_factory.mktemp("gemma"))))[0]
    long = rand_tokens(19, seed=3)  # wrapped windows (8), reached by decode steps
    pc = PrefixCache(disk_dir=root)
    pc.publish(NS_GEMMA, long, prefill(gemma, long, one_by_one=4))
    draft = mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("d"), seed=1)))[0]
    conv = rand_tokens(15, seed=4)
    pc.publish(NS_DRAFT, conv, prefill(llama, conv), prefill(draft, conv))
    pc.flush()
    pc.close()

    pc = PrefixCache(disk_dir=root)
    request = long + rand_tokens(5, seed=5)
    match = pc.lookup(NS_GEMMA, request)
    assert match is not None and match.source == "disk" and match.tokens == len(long)
    assert_continues_like_cold(gemma, match, request)
    assert pc.lookup(NS_GEMMA, long[:10] + [77, 78]) is None  # a wrapped window: no trimming
    assert pc.stats().skipped == {"sliding-window": 1}

    request = conv + [500, 501]
    match = pc.lookup(NS_DRAFT, request)
    assert match is not None and match.source == "disk" and match.draft is not None
    warm = run(draft, request[len(conv) :], match.draft)
    assert warm[0] == run(draft, request)[0]
    pc.close()


@pytest.mark.parametrize("damage", ["flip-data", "flip-header", "truncate", "empty"])
def test_damaged_file_is_skipped_and_removed(llama, tmp_path, caplog, damage):
    tokens = rand_tokens(14, seed=6)
    path = stored_entry(tmp_path, llama, tokens)
    data = bytearray(path.read_bytes())
    if damage == "flip-data":
        data[-40] ^= 0xFF
    elif damage == "flip-header":
        data[20] ^= 0x55
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray()
    path.write_bytes(bytes(data))

    pc = PrefixCache(disk_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert pc.lookup(NS, tokens + [1, 2]) is None
        assert pc.lookup(NS, tokens + [1, 2]) is None
    assert not path.exists()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    s = pc.stats()
    assert s.skipped == {"disk-corrupt": 1} and s.misses == 2 and s.disk_entries == 0

    pc.publish(NS, tokens, prefill(llama, tokens))  # the tier still works afterwards
    pc.flush()
    assert len(files(tmp_path)) == 1
    pc.close()


@pytest.mark.parametrize(
    "other",
    [
        CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-b"),
        CacheNamespace(model_id="another-model", tokenizer_hash="tok-a"),
        CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a", kv_bits=4),
    ],
)
def test_foreign_file_is_skipped_and_removed(llama, tmp_path, caplog, other):
    tokens = rand_tokens(14, seed=7)
    foreign = stored_entry(tmp_path / "other", llama, tokens, other)
    (tmp_path / NS.key()).mkdir()
    path = tmp_path / NS.key() / foreign.name  # the right name, another namespace's content
    shutil.copy(foreign, path)

    pc = PrefixCache(disk_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert pc.lookup(NS, tokens + [1, 2]) is None
    assert not path.exists()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert pc.stats().skipped == {"disk-foreign": 1}
    pc.close()


def test_full_disk_keeps_ram_working(llama, tmp_path, caplog):
    pc = PrefixCache(disk_dir=tmp_path)

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    pc._disk._write_file = full
    convs = [rand_tokens(10, seed=8 + i) for i in range(3)]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for conv in convs:
            pc.publish(NS, conv, prefill(llama, conv))
            pc.flush()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "RAM only" in warnings[0].getMessage()
    assert pc.stats().skipped["disk-full"] == 3  # the failed write and the two not tried
    assert files(tmp_path) == [] and not list((tmp_path / NS.key()).glob("*.tmp"))

    match = pc.lookup(NS, convs[1] + [3])
    assert match is not None and match.source == "ram"
    assert_continues_like_cold(llama, match, convs[1] + [3])
    pc.close()


def test_disk_byte_cap_evicts_least_recently_used(llama, tmp_path):
    convs = [rand_tokens(12, seed=20 + i) for i in range(3)]
    one = stored_entry(tmp_path / "probe", llama, convs[0]).stat().st_size
    root = tmp_path / "cache"

    pc = PrefixCache(disk_dir=root, disk_bytes=int(2.5 * one), ram_bytes=1)  # disk only
    for conv in convs[:2]:
        pc.publish(NS, conv, prefill(llama, conv))
        pc.flush()
    assert pc.lookup(NS, convs[0] + [1]).source == "disk"  # 0 is now the most recent
    pc.publish(NS, convs[2], prefill(llama, convs[2]))
    pc.flush()
    pc.close()

    pc = PrefixCache(disk_dir=root, disk_bytes=int(2.5 * one))
    assert pc.stats().disk_entries == 2 and pc.stats().disk_bytes <= 2.5 * one
    assert pc.lookup(NS, convs[1] + [1]) is None  # the least recently used went
    assert pc.lookup(NS, convs[0] + [1]) is not None
    assert pc.lookup(NS, convs[2] + [1]) is not None
    pc.close()


@pytest.mark.parametrize("kind", ["bfloat16", "quantized"])
def test_other_cache_dtypes_round_trip(tmp_path, kind):
    """bf16 travels as uint16 bits; QuantizedKVCache as its packed arrays, bit for bit."""
    tokens = list(range(100, 110))
    mx.random.seed(0)
    layers = []
    for _ in range(2):
        c = KVCache()
        c.update_and_fetch(mx.random.normal((1, 2, 10, 64)), mx.random.normal((1, 2, 10, 64)))
        if kind == "bfloat16":
            c.keys, c.values = c.keys.astype(mx.bfloat16), c.values.astype(mx.bfloat16)
        else:
            c = c.to_quantized(group_size=64, bits=4)
        layers.append(c)
    ns = CacheNamespace(
        model_id="fake", tokenizer_hash="t", kv_bits=4 if kind != "bfloat16" else None
    )
    pc = PrefixCache(disk_dir=tmp_path)
    pc.publish(ns, tokens, layers)
    pc.flush()
    pc.close()

    pc = PrefixCache(disk_dir=tmp_path)
    match = pc.lookup(ns, tokens + [1])
    pc.close()
    assert match is not None and match.source == "disk" and match.tokens == 10
    for got, want in zip(match.target, layers):
        assert type(got) is type(want) and got.offset == 10
        for part in ("keys", "values"):
            g, w = getattr(got, part), getattr(want, part)
            g, w = (g, w) if kind == "quantized" else ((g,), (w,))
            assert len(g) == len(w)
            for a, b in zip(g, w):
                assert a.dtype == b.dtype
                assert mx.array_equal(a[..., :10, :], b[..., :10, :]).item()
