"""The prompt cache's disk tier: entries survive a restart and continue exactly like a cold run;
the byte cap evicts the least recently used; every dtype round-trips; publishing and reading
leave the MLX thread's work bounded (evaluation in ticks, checksums on the reader thread);
`clear` empties both tiers. Damaged files: test_prompt_cache_damage.py; full disk and the cap
under load: test_prompt_cache_disk_limits.py."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load
from mlx_lm.models.cache import KVCache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import CacheNamespace, PromptCache
from tests.engine.prompt_cache_support import (
    NS,
    assert_continues_like_cold,
    bytes_on_disk,
    files,
    rand_tokens,
    run,
    stored_entry,
)
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir, prefill

NS_GEMMA = CacheNamespace(model_id="tiny-gemma3", tokenizer_hash="tok-a")
NS_DRAFT = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a", drafter="tiny-draft")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


def test_entries_survive_a_restart(llama, tmp_path):
    conv = rand_tokens(40, seed=1)
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(NS, conv[:12], prefill(llama, conv[:12]))
    pc.publish(NS, conv[:26], prefill(llama, conv[:26]))  # replaces its prefix on disk too
    pc.flush(timeout=30)
    assert len(files(tmp_path)) == 1 and pc.stats().disk_entries == 1
    pc.close()

    pc = PromptCache(disk_dir=tmp_path)  # a restart: nothing in RAM
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
    pc = PromptCache(disk_dir=root)
    pc.publish(NS_GEMMA, long, prefill(gemma, long, one_by_one=4))
    draft = mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("d"), seed=1)))[0]
    conv = rand_tokens(15, seed=4)
    pc.publish(NS_DRAFT, conv, prefill(llama, conv), prefill(draft, conv))
    pc.flush()
    pc.close()

    pc = PromptCache(disk_dir=root)
    request = long + rand_tokens(5, seed=5)
    match = pc.lookup(NS_GEMMA, request)
    assert match is not None and match.source == "disk" and match.tokens == len(long)
    assert_continues_like_cold(gemma, match, request)
    assert pc.lookup(NS_GEMMA, long[:10] + [77, 78]) is None  # a wrapped window: no trimming
    assert pc.stats().skipped == {"untrimmable": 1}

    request = conv + [500, 501]
    match = pc.lookup(NS_DRAFT, request)
    assert match is not None and match.source == "disk" and match.draft is not None
    warm = run(draft, request[len(conv) :], match.draft)
    assert warm[0] == run(draft, request)[0]
    pc.close()


def test_disk_byte_cap_evicts_least_recently_used(llama, tmp_path):
    convs = [rand_tokens(12, seed=20 + i) for i in range(3)]
    one = stored_entry(tmp_path / "probe", llama, convs[0]).stat().st_size
    root = tmp_path / "cache"

    pc = PromptCache(disk_dir=root, disk_bytes=int(2.5 * one), ram_bytes=1)  # disk only
    for conv in convs[:2]:
        pc.publish(NS, conv, prefill(llama, conv))
        pc.flush()
    assert pc.lookup(NS, convs[0] + [1]).source == "disk"  # 0 is now the most recent
    pc.publish(NS, convs[2], prefill(llama, convs[2]))
    pc.flush()
    pc.close()

    pc = PromptCache(disk_dir=root, disk_bytes=int(2.5 * one))
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
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(ns, tokens, layers)
    pc.flush()
    pc.close()

    pc = PromptCache(disk_dir=tmp_path)
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


def test_disk_bytes_count_what_is_on_disk_after_a_restart(llama, tmp_path):
    for i in range(3):
        conv = rand_tokens(10 + 3 * i, seed=40 + i)
        stored_entry(tmp_path / "tmp" / str(i), llama, conv)  # one file each, then merged
        for path in (tmp_path / "tmp" / str(i)).rglob("*.safetensors"):
            (tmp_path / "cache" / path.parent.name).mkdir(parents=True, exist_ok=True)
            path.rename(tmp_path / "cache" / path.parent.name / path.name)
    pc = PromptCache(disk_dir=tmp_path / "cache")
    s = pc.stats()
    assert s.disk_entries == 3 and s.disk_bytes == bytes_on_disk(tmp_path / "cache")
    pc.close()


def test_clear_empties_ram_and_disk_and_returns_the_bytes_freed(llama, tmp_path):
    other = CacheNamespace(model_id="another-model", tokenizer_hash="tok-a")
    stored_entry(tmp_path, llama, rand_tokens(12, seed=50), other)  # another model's entry
    (tmp_path / NS.key()).mkdir()
    (tmp_path / NS.key() / ".left-over.tmp").write_bytes(b"x" * 1000)  # a crash's leftover
    pc = PromptCache(disk_dir=tmp_path)
    convs = [rand_tokens(14, seed=51 + i) for i in range(2)]
    for conv in convs:
        pc.publish(NS, conv, prefill(llama, conv))
    pc.flush()
    ram, disk = pc.stats().ram_bytes, bytes_on_disk(tmp_path)
    assert ram > 0 and pc.stats().disk_entries == 3

    pc.publish(NS, rand_tokens(15, seed=60), prefill(llama, rand_tokens(15, seed=60)))
    pc.tick(idle=True)  # queued for the writer; cleared before or while it is written
    freed = pc.clear()
    pc.flush()
    assert ram + disk <= freed <= ram + disk + pc.ram.limit  # the queued entry's RAM, maybe
    assert bytes_on_disk(tmp_path) == 0
    s = pc.stats()
    assert (s.ram_entries, s.ram_bytes, s.disk_entries, s.disk_bytes) == (0, 0, 0, 0)
    assert pc.lookup(NS, convs[0] + [1]) is None

    pc.publish(NS, convs[1], prefill(llama, convs[1]))  # it still works afterwards
    pc.flush()
    assert len(files(tmp_path)) == 1 and pc.stats().disk_bytes == bytes_on_disk(tmp_path)
    pc.close()


def test_disk_reads_and_checksums_happen_off_the_calling_thread(llama, tmp_path, monkeypatch):
    import threading

    import engine.cache.disk_format as disk_format

    conv = rand_tokens(20, seed=70)
    stored_entry(tmp_path, llama, conv)
    threads = []
    checksum = disk_format.checksum

    def recording(*args):
        threads.append(threading.current_thread())
        return checksum(*args)

    monkeypatch.setattr(disk_format, "checksum", recording)
    pc = PromptCache(disk_dir=tmp_path)
    request = conv + [7, 8]
    assert pc.lookup(NS, request, wait=False) is not None  # LOADING, or the match if quick
    pc.flush()  # the read is done and converted: the next lookup is a plain hit
    match = pc.lookup(NS, request, wait=False)
    assert match is not None and match.tokens == len(conv)
    assert_continues_like_cold(llama, match, request)
    assert threads and threading.current_thread() not in threads
    pc.close()


def test_publish_evaluates_nothing_and_ticks_evaluate_one_layer_at_a_time(llama, tmp_path):
    """With no time budget each tick evaluates one layer, so the disk write is queued only
    after as many ticks as the entry has layers; the entry serves lookups all along."""
    conv = rand_tokens(18, seed=80)
    pc = PromptCache(disk_dir=tmp_path, tick_s=0.0)
    cache = prefill(llama, conv)
    pc.publish(NS, conv, cache)
    request = conv + [9]
    match = pc.lookup(NS, request)  # lazy arrays serve a hit too
    assert match is not None and match.source == "ram"
    assert run(llama, request[match.tokens :], match.target)[0] == run(llama, request)[0]
    ticks = 0
    while not files(tmp_path):
        pc.tick(idle=False)
        ticks += 1
        pc._disk.flush()
        assert ticks <= len(cache)
    assert ticks == len(cache)
    pc.close()
