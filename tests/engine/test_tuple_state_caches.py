"""Caches a model defines for itself whose state is a tuple of optional arrays and an offset
(engine/cache/tuple_state.py; deepseek_v41's LayerCache, with compressed groups and index keys)
in the prompt cache: stored untrimmable and restored to the very same state through the RAM and
disk tiers, ill-formed entries in a file refused with their reason, and a chat's next turn in
the engine served from the cache with exactly mlx_lm.generate's tokens."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
from pathlib import Path

import mlx.core as mx
import pytest
from mlx_lm import load as mlx_load

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.api import Engine, EngineConfig
from engine.cache import PromptCache, tuple_state
from engine.cache.layers import UnsupportedCache, snapshot, to_cache, trim_state
from engine.cache.layout import ModelLayouts, probe_layout
from engine.requests import GenerationRequest
from tests.architectures.arch import Arch
from tests.architectures.build import save_folder
from tests.engine.prompt_cache_support import LOGGER, NS, assert_continues_like_cold, files
from tests.engine.test_exactness import reference_tokens
from tests.tiny_models import prefill

KIND = "deepseek_v41.LayerCache"
FIELDS = ("window", "compress_kv", "index_k", "pending_kv", "pending_gate")
# a window of 8 (WINDOW), groups of 4 tokens pooled by layers 1 and 2, index keys in layer 1
DEEPSEEK_V41 = Arch(
    "deepseek_v41",
    {
        "num_hidden_layers": 3,
        "compress_ratios": [0, 4, 4],
        "kv_source_layer_ids": [1, 2],
        "index_source_layer_ids": [1],
        "index_n_heads": 2,
        "index_head_dim": 16,
        "index_topk": 4,
    },
)
PREFILL_CHUNK = 16
MAX_TOKENS = 12


def tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(32, 1024) for _ in range(n)]  # past the tiny tokenizer's specials


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_folder(DEEPSEEK_V41, tmp_path_factory.mktemp("models") / "deepseek_v41")


@pytest.fixture(scope="module")
def model(folder):
    return mlx_load(str(folder))[0]


def layouts_of(model) -> ModelLayouts:
    return ModelLayouts(probe_layout(model, model.make_cache))


def same_state(a, b) -> bool:
    if (a.offset, a.window_size) != (b.offset, b.window_size):
        return False
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None) or (x is not None and not mx.array_equal(x, y)):
            return False
    return True


# --- the layer ---


@pytest.mark.parametrize("n", [12, 13], ids=["groups-closed", "a-group-open"])
def test_a_layer_cache_is_stored_whole_and_restored_to_the_same_state(model, n):
    caches = prefill(model, tokens(n, seed=1))
    states = [snapshot(c) for c in caches]
    assert {s.kind for s in states} == {KIND}
    assert not any(s.trimmable for s in states)
    assert states[0].meta == {"offset": n, "window_size": 8}
    assert set(states[0].arrays) == {"window"}  # no compression in layer 0
    assert set(states[1].arrays) == set(FIELDS)
    assert states[1].arrays["pending_kv"].shape[1] == n % 4  # zero rows when groups closed
    for cache, state in zip(caches, states):
        assert same_state(to_cache(state), cache)
    with pytest.raises(ValueError):
        trim_state(states[1], n - 1)


def test_a_class_whose_state_is_not_the_described_tuple_is_not_stored(model, monkeypatch):
    """An mlx-lm whose LayerCache gained a field: refused, never stored without it."""
    cache = prefill(model, tokens(5, seed=2))[0]
    cls = type(cache)
    monkeypatch.setattr(cls, "state", property(lambda self: (self.window, None, mx.array(0))))
    with pytest.raises(UnsupportedCache) as refused:
        snapshot(cache)
    assert refused.value.reason == "unsupported-cache"


def test_an_mlx_lm_without_the_class_stores_and_loads_none_of_it(model, tmp_path, monkeypatch):
    pc = PromptCache(disk_dir=tmp_path)
    toks = tokens(9, seed=3)
    pc.publish(NS, toks, prefill(model, toks))
    pc.close()
    gone = dataclasses.replace(tuple_state.KINDS[KIND], module="mlx_lm.models.no_such_model")
    monkeypatch.setitem(tuple_state.KINDS, KIND, gone)
    pc = PromptCache(disk_dir=tmp_path)
    assert pc.stats().disk_entries == 0 and pc.stats().skipped == {"disk-corrupt": 1}
    pc.publish(NS, toks, prefill(model, toks))
    assert pc.stats().skipped == {"disk-corrupt": 1, "unsupported-cache": 1}
    pc.close()


# --- the tiers ---


@pytest.mark.parametrize("n", [12, 13], ids=["groups-closed", "a-group-open"])
def test_ram_and_disk_restore_exactly_and_only_whole_prefixes(model, tmp_path, n):
    stored = tokens(n, seed=4)
    request = stored + tokens(6, seed=5)
    layouts = layouts_of(model)
    original = prefill(model, stored)
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(NS, stored, original)
    pc.flush()

    match = pc.lookup(NS, request, layouts=layouts)
    assert (match.tokens, match.source) == (n, "ram")
    assert all(same_state(a, b) for a, b in zip(match.target, original))
    assert_continues_like_cold(model, match, request)
    diverging = stored[:-2] + tokens(4, seed=6)  # would need the entry cut to fewer tokens
    assert pc.lookup(NS, diverging, layouts=layouts) is None
    assert pc.stats().skipped == {"untrimmable": 1}
    pc.close()

    pc = PromptCache(disk_dir=tmp_path)  # a restart: only the file is left
    assert pc.stats().disk_entries == 1
    match = pc.lookup(NS, request, layouts=layouts)
    assert (match.tokens, match.source) == (n, "disk")
    assert all(same_state(a, b) for a, b in zip(match.target, original))
    assert_continues_like_cold(model, match, request)
    pc.close()


def test_an_entry_of_another_window_does_not_fit_the_model(model):
    caches = prefill(model, tokens(9, seed=7))
    infos = [snapshot(c).info() for c in caches]
    layouts = layouts_of(model)
    assert layouts.mismatch(infos, None) is None
    other = [dataclasses.replace(i, meta=dict(i.meta, window_size=16)) for i in infos]
    assert "window_size" in layouts.mismatch(other, None)
    wide = dict(infos[1].arrays, compress_kv=((1, 2, 32), "float32"))
    why = layouts.mismatch([infos[0], dataclasses.replace(infos[1], arrays=wide), infos[2]], None)
    assert why.startswith("layer 1: compress_kv (32,)")


# --- ill-formed files ---


def layer1(m: dict) -> dict:
    return m["target"][1]


def arrays1(m: dict) -> dict:
    return layer1(m)["arrays"]


ILL_FORMED = {
    "kind-a-class-path": (
        lambda m: layer1(m).update(kind="mlx_lm.models.deepseek_v41.LayerCache"),
        "unknown cache kind",
    ),
    "kind-a-bare-class-name": (lambda m: layer1(m).update(kind="LayerCache"), "unknown cache"),
    "meta-extra-key": (lambda m: layer1(m)["meta"].update(module=1), "bad deepseek_v41"),
    "meta-no-window-size": (lambda m: layer1(m)["meta"].pop("window_size"), "bad deepseek_v41"),
    "window-size-zero": (lambda m: layer1(m)["meta"].update(window_size=0), "a window of 0"),
    "window-rows-wrong": (lambda m: arrays1(m)["window"]["shape"].__setitem__(1, 7), "window of 7"),
    "window-missing": (lambda m: arrays1(m).pop("window"), "window of 0 rows"),
    "array-unknown": (lambda m: arrays1(m).update(keys=arrays1(m)["window"]), "has no arrays"),
    "gate-missing": (lambda m: arrays1(m).pop("pending_gate"), "without their gates"),
    "array-4d": (
        lambda m: arrays1(m)["index_k"].update(shape=[1, 1, 3, 16]),
        "index_k of 4 dimensions",
    ),
    "two-rows": (
        lambda m: arrays1(m)["window"]["shape"].__setitem__(0, 2),
        "window of shape (2, 8, 16)",
    ),
    "compressed-too-long": (
        lambda m: arrays1(m)["compress_kv"]["shape"].__setitem__(1, 99),
        "compress_kv holds more rows",
    ),
    "dtype-unknown": (lambda m: arrays1(m)["window"].update(dtype="float64"), "arrays"),
    "offset-wrong": (lambda m: layer1(m)["meta"].update(offset=12), "holds 12 tokens"),
}


def edit_metadata(path: Path, edit) -> None:
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8 : 8 + n])
    meta = json.loads(head["__metadata__"]["tandem"])
    edit(meta)
    head["__metadata__"]["tandem"] = json.dumps(meta)
    raw = json.dumps(head).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + n :])


@pytest.mark.parametrize("damage", list(ILL_FORMED))
def test_an_ill_formed_entry_is_refused_with_its_reason(model, tmp_path, caplog, damage):
    toks = tokens(13, seed=8)
    pc = PromptCache(disk_dir=tmp_path)
    pc.publish(NS, toks, prefill(model, toks))
    pc.close()
    (path,) = files(tmp_path)
    edit, reason = ILL_FORMED[damage]
    edit_metadata(path, edit)

    caplog.set_level(logging.WARNING, logger=LOGGER)
    pc = PromptCache(disk_dir=tmp_path)
    assert pc.stats().disk_entries == 0
    assert pc.lookup(NS, toks + [40, 41], layouts=layouts_of(model)) is None
    assert not path.exists()
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "bad layer t1" in warning.getMessage() and reason in warning.getMessage()
    assert pc.stats().skipped == {"disk-corrupt": 1}
    pc.close()


# --- the engine ---


def test_the_next_turn_of_a_chat_is_restored_and_matches_generate_alone(folder, tmp_path):
    """Turn 2 restores turn 1's prompt and reply from RAM; after a restart, turn 3 restores
    turn 2's from disk; every reply is mlx_lm.generate's."""
    first = tokens(21, seed=9)
    (first_ref,) = reference_tokens(folder, [first], MAX_TOKENS, prefill_step_size=PREFILL_CHUNK)
    second = first + first_ref + tokens(5, seed=10)
    (second_ref,) = reference_tokens(folder, [second], MAX_TOKENS, prefill_step_size=PREFILL_CHUNK)
    third = second + second_ref + tokens(4, seed=11)
    (third_ref,) = reference_tokens(folder, [third], MAX_TOKENS, prefill_step_size=PREFILL_CHUNK)
    config = EngineConfig(
        model=str(folder),
        prefill_chunk=PREFILL_CHUNK,
        prompt_cache_dir=str(tmp_path / "prompt-cache"),
        log_blas=False,
    )

    async def turns(*prompts):
        eng = Engine(config)
        eng.start()
        await eng.wait_ready()
        try:
            out = []
            for p in prompts:
                out.append(await eng.generate(GenerationRequest(prompt_tokens=p, max_tokens=12)))
            return out, eng.stats().cache
        finally:
            await eng.stop()

    (a, b), stats = asyncio.run(turns(first, second))
    assert (a.token_ids, a.stats.cached_tokens) == (first_ref, 0)
    assert b.token_ids == second_ref
    assert (b.stats.cached_tokens, b.stats.cache_source) == (len(first) + len(first_ref), "ram")
    assert "unsupported-cache" not in stats.skipped

    (c,), stats = asyncio.run(turns(third))
    assert c.token_ids == third_ref
    assert (c.stats.cached_tokens, c.stats.cache_source) == (len(second) + len(second_ref), "disk")
