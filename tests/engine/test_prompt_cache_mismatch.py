"""Entries are checked against the model they are restored into: one that does not fit (layer
count, cache kind, head count, head size, dtype) is removed with its reason and never restored,
from RAM or disk. Random-weight benchmark models get their own namespace (preset and seed), so a
random model's cache never lands in the default model's. Through the public Engine, a request
whose cached prefix is mismatched or corrupt still finishes, with a cold run's tokens, even when
it joins a running batch."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import PromptCache
from engine.cache.namespace import model_identity
from tests.engine.engine_harness import (
    P_A,
    TIMEOUT_S,
    collect,
    make_prompt,
    wait_until,
    with_engine,
)
from tests.engine.prompt_cache_support import (
    LOGGER,
    NS,
    assert_continues_like_cold,
    bytes_on_disk,
    files,
    layouts_of,
    rand_tokens,
)
from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir, prefill

BUSY_TOKENS = 200  # the running row of the joining case: long enough to be seen running
OTHER_MODELS = {
    "more-layers": dict(num_layers=3),
    "more-kv-heads": dict(num_key_value_heads=4),
    "smaller-heads": dict(hidden_size=32, head_dim=8),
    "bfloat16": dict(),
    "sliding-window": None,  # a Gemma 3: rotating layers
}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return mlx_load(str(make_tiny_llama_dir(tmp_path_factory.mktemp("llama"))))[0]


def other_model(name: str, folder):
    if name == "sliding-window":
        return mlx_load(str(make_tiny_gemma3_dir(folder)))[0]
    model = mlx_load(str(make_tiny_llama_dir(folder, seed=5, **OTHER_MODELS[name])))[0]
    if name == "bfloat16":
        model.set_dtype(mx.bfloat16)
    return model


@pytest.mark.parametrize("source", ["ram", "disk"])
@pytest.mark.parametrize("other", list(OTHER_MODELS))
def test_entry_that_does_not_fit_the_model_is_removed_not_restored(
    llama, tmp_path, caplog, other, source
):
    model = other_model(other, tmp_path / "other")
    conv = rand_tokens(16, seed=11)
    pc = PromptCache(disk_dir=tmp_path / "cache")
    pc.publish(NS, conv, prefill(model, conv))  # the same namespace, another model's caches
    pc.flush()
    if source == "disk":
        pc.close()
        pc = PromptCache(disk_dir=tmp_path / "cache")
    caplog.set_level(logging.WARNING, logger=LOGGER)

    assert pc.lookup(NS, conv + [5], layouts=layouts_of(llama)) is None
    assert pc.lookup(NS, conv + [5], layouts=layouts_of(llama)) is None
    s = pc.stats()
    assert s.skipped == {"mismatch": 1} and s.misses == 2 and s.ram_entries == 0
    assert files(tmp_path / "cache") == [] and s.disk_entries == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "does not fit" in warnings[0].getMessage()
    pc.close()


def test_entry_that_fits_is_restored(llama, tmp_path):
    conv = rand_tokens(16, seed=12)
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(NS, conv, prefill(llama, conv))
    pc.flush()
    pc.close()
    pc = PromptCache(disk_dir=tmp_path)
    match = pc.lookup(NS, conv + [5], layouts=layouts_of(llama))
    assert match is not None and match.source == "disk"
    assert_continues_like_cold(llama, match, conv + [5])
    pc.close()


def test_random_models_have_their_own_namespace():
    from engine.bench.random_model import load_random

    a, a_again = load_random("random:tiny", seed=0), load_random("random:tiny", seed=0)
    b = load_random("random:tiny", seed=1)
    in_folder = dataclasses.replace(a, weights_id=None)  # what the default model's folder is
    assert model_identity(a) == model_identity(a_again)
    ids = {model_identity(a), model_identity(b), model_identity(in_folder)}
    assert len(ids) == 3


def engine_namespace(model_dir):
    from engine.cache.reuse import PromptReuse
    from engine.models import load_model

    return PromptReuse(PromptCache(), load_model(str(model_dir))).namespace


@pytest.mark.parametrize("busy", [False, True], ids=["alone", "joining-a-running-batch"])
@pytest.mark.parametrize("damage", ["mismatched", "corrupt"])
def test_request_with_a_bad_cached_prefix_finishes_like_a_cold_run(tiny, tmp_path, damage, busy):
    prompt = make_prompt(21, 24)
    ns = engine_namespace(tiny.path)
    if damage == "mismatched":  # another model's caches filed under this model's namespace
        model = other_model("smaller-heads", tmp_path / "other")
    else:
        model = tiny.model
    pc = PromptCache(disk_dir=tmp_path / "cache")
    pc.publish(ns, prompt[:-1], prefill(model, prompt[:-1]))  # a full hit: all but the last
    pc.flush()
    pc.close()
    (path,) = files(tmp_path / "cache", ns)
    if damage == "corrupt":  # found only when read: the request waits, then runs cold
        data = bytearray(path.read_bytes())
        data[-20] ^= 0xFF
        path.write_bytes(bytes(data))

    async def body(eng):
        running = None
        if busy:
            running = asyncio.ensure_future(collect(eng, request(P_A, BUSY_TOKENS)))
            # stats are published every 0.1 s: a short row can end unseen, so stop waiting then
            while eng.stats().running < 1 and not running.done():
                await asyncio.sleep(0.01)
            assert not running.done(), "the running row ended before the other joined"
        out = await asyncio.wait_for(collect(eng, request(prompt, 8)), TIMEOUT_S)
        other = (await running) if running else None
        # the engine's stats are published just after the events they follow
        assert await wait_until(lambda: eng.stats().cache.skipped.get(reason) == 1)
        return out, other

    reason = "mismatch" if damage == "mismatched" else "disk-corrupt"
    out, other = with_engine(tiny.path, body, prompt_cache_dir=str(tmp_path / "cache"))
    assert out.finished.token_ids == tiny.greedy(prompt, 8)
    assert out.finished.stats.cached_tokens == 0
    if other is not None:
        assert other.finished.token_ids == tiny.greedy(P_A, BUSY_TOKENS)
    assert not path.exists()


def request(prompt, max_tokens):
    from engine.requests import GenerationRequest

    return GenerationRequest(prompt_tokens=prompt, max_tokens=max_tokens)


def test_shared_tmp_helpers_stay_clean(tmp_path):
    """bytes_on_disk counts every file, links not followed (a guard for the helpers above)."""
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "c").write_bytes(b"y" * 5)
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert bytes_on_disk(tmp_path) == 15 + len(str(tmp_path / "a"))
    shutil.rmtree(tmp_path / "b")
