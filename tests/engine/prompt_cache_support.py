"""Shared pieces of the prompt cache tests: namespaces, token lists, greedy runs compared with a
cold run, and entries stored on disk."""

from __future__ import annotations

import os
import random
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.cache import CacheNamespace, PromptCache
from engine.cache.layout import ModelLayouts, probe_layout
from tests.tiny_models import prefill

N_GEN = 6
ATOL = 1e-3  # log-probability agreement, warm vs cold (a wrong cache is off by > 0.1)
NS = CacheNamespace(model_id="tiny-llama", tokenizer_hash="tok-a")
LOGGER = "engine.cache"


def rand_tokens(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(100, 49152) for _ in range(n)]


def run(model, prompt: list[int], cache=None, n: int = N_GEN) -> tuple[list[int], np.ndarray]:
    """Greedy tokens and their log-probabilities (the tiny random llama tends to repeat one
    token whatever its context, so the tokens alone would hide a wrong cache)."""
    steps = list(generate_step(mx.array(prompt), model, prompt_cache=cache, max_tokens=n))
    return [int(t) for t, _ in steps], np.stack([np.array(lp) for _, lp in steps])


def assert_continues_like_cold(model, match, request: list[int]) -> None:
    assert all(c.offset == match.tokens for c in match.target)
    warm, cold = run(model, request[match.tokens :], match.target), run(model, request)
    assert warm[0] == cold[0]
    np.testing.assert_allclose(warm[1], cold[1], atol=ATOL)


def layouts_of(model) -> ModelLayouts:
    return ModelLayouts(probe_layout(model, lambda: make_prompt_cache(model)))


def files(root: Path, ns: CacheNamespace = NS) -> list[Path]:
    return sorted((Path(root) / ns.key()).glob("*.safetensors"))


def stored_entry(root: Path, model, tokens: list[int], ns: CacheNamespace = NS, draft=None):
    """Publish one entry to disk, wait for the writer, close (the app quits)."""
    pc = PromptCache(disk_dir=root)
    pc.publish(ns, tokens, prefill(model, tokens), draft)
    pc.flush()
    pc.close()
    (path,) = files(root, ns)
    return path


def bytes_on_disk(root: Path) -> int:
    """Every file under `root`, temporary ones included (what `du` would count)."""
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                pass  # renamed or removed while we looked
    return total
