"""Where a wide forward's time goes: pipelined forwards of W tokens for B rows over a plain KV
cache of CONTEXT positions (trimmed back after each, so every step sees the same keys), with the
engine's kernels and as mlx-lm ships them, with attention as it runs and with attention skipped
(the queries returned as its output: every other op unchanged).

    python wide_probe.py --model random:8b --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import mlx.core as mx
from mlx_lm.models import llama as mlx_llama
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from engine.bench.profile_round import prefilled_batch
from engine.kernels.as_shipped import mlx_as_shipped
from engine.models import load_model
from engine.speculative.rollback import rollback_rows

CONTEXT = 256
STEPS = 24
WARM = 4
SHAPES = ((1, 1), (1, 5), (4, 1), (4, 5), (16, 1), (16, 5), (80, 1), (32, 1), (32, 5))


def _pipelined(model, cache, x, give_back) -> float:
    """ms per forward of `x` over `cache`, each queued before the last is read, with
    `give_back()` after each (the positions the step leaves in the cache)."""
    out = None
    start = 0.0
    for i in range(STEPS + WARM):
        if i == WARM:
            mx.eval(out)
            start = time.perf_counter()
        out = mx.argmax(model(x, cache=cache), axis=-1)
        mx.async_eval(out)
        give_back()
    mx.eval(out)
    return 1e3 * (time.perf_counter() - start) / STEPS


def timed(model, batch: int, width: int) -> float:
    cache = make_prompt_cache(model)
    prompt = mx.random.randint(0, 4000, (batch, CONTEXT), key=mx.random.key(batch))
    mx.eval(model(prompt, cache=cache))
    x = mx.random.randint(0, 4000, (batch, width), key=mx.random.key(7))
    return _pipelined(model, cache, x, lambda: trim_prompt_cache(cache, width))


def _ours(model, batch: int, width: int) -> tuple[random.Random, list, mx.array]:
    """A seeded generator, our RaggedBatchKVCache prefilled with `batch` prompts of CONTEXT
    tokens, and a step's input of `width` tokens a row."""
    prompts = [[100 + (7 * b + i) % 3000 for i in range(CONTEXT)] for b in range(batch)]
    x = mx.random.randint(0, 4000, (batch, width), key=mx.random.key(7))
    return random.Random(batch), prefilled_batch(model, prompts, ours=True), x


def compaction_ms(model, batch: int) -> float:
    """One compaction of every layer's cache (holes in every row), evaluated."""
    rng, cache, x = _ours(model, batch, 5)
    for _ in range(8):
        mx.eval(model(x, cache=cache))
        for c in cache:
            c.__dict__["holes"] = 0  # no compaction while the holes are made
        rollback_rows(cache, [5 - rng.randint(1, 5) for _ in range(batch)])
    mx.eval([c.keys for c in cache])
    start = time.perf_counter()
    for c in cache:
        c.compact()
    mx.eval([(c.keys, c.values, c.left_padding) for c in cache])
    return 1e3 * (time.perf_counter() - start)


def timed_ours(model, batch: int, width: int, *, ragged: bool) -> float:
    """The same loop over our RaggedBatchKVCache: each row keeps two of its `width` positions
    (even), or one to `width` of them at random (ragged: rows of different lengths, holes)."""
    rng, cache, x = _ours(model, batch, width)
    keep = min(2, width)

    def give_back() -> None:
        if ragged:
            surplus = [width - rng.randint(1, width) for _ in range(batch)]
        else:
            surplus = [width - keep] * batch
        if any(surplus):
            rollback_rows(cache, surplus)

    return _pipelined(model, cache, x, give_back)


def skip_attention(queries, keys, values, cache, scale, mask, sinks=None):
    return queries


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="random:8b")
    p.add_argument("--json", default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only-ours", action="store_true", help="our kernels, attention on")
    args = p.parse_args()
    model = load_model(args.model).model
    rows = []
    real = mlx_llama.scaled_dot_product_attention
    for shipped in (False,) if args.only_ours else (False, True):
        for attention in ("on",) if args.only_ours else ("on", "skipped"):
            mlx_llama.scaled_dot_product_attention = real if attention == "on" else skip_attention
            for batch, width in SHAPES:
                ms = []
                for _ in range(args.repeats):
                    if shipped:
                        with mlx_as_shipped():
                            ms.append(timed(model, batch, width))
                    else:
                        ms.append(timed(model, batch, width))
                row = dict(
                    shipped=shipped,
                    attention=attention,
                    batch=batch,
                    width=width,
                    ms=round(statistics.median(ms), 3),
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    mlx_llama.scaled_dot_product_attention = real
    from engine.cache.ragged import RaggedBatchKVCache

    compact_if_holey = RaggedBatchKVCache._compact_if_holey
    for batch, width in ((1, 5), (4, 1), (4, 5), (16, 1), (16, 5), (32, 5)):
        for cache in ("ours-even", "ours-ragged", "ours-ragged-nocompact"):
            if cache.endswith("nocompact"):
                RaggedBatchKVCache._compact_if_holey = lambda self: None
            ms = statistics.median(
                timed_ours(model, batch, width, ragged=cache != "ours-even")
                for _ in range(args.repeats)
            )
            RaggedBatchKVCache._compact_if_holey = compact_if_holey
            row = dict(
                shipped=False,
                attention="on",
                cache=cache,
                batch=batch,
                width=width,
                ms=round(ms, 3),
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    for batch in (4, 16):
        ms = statistics.median(compaction_ms(model, batch) for _ in range(args.repeats))
        rows.append(dict(compaction=True, batch=batch, ms=round(ms, 3)))
        print(f"compaction of every layer, {batch} rows: {ms:.2f} ms", flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    base = {
        (r["shipped"], r.get("cache", "plain") + "/" + r["attention"], r["batch"], r["width"]): r[
            "ms"
        ]
        for r in rows
        if "compaction" not in r
    }
    print("| kernels | cache/attention | B x W | ms | x B x 1 |")
    for (s, a, b, w), v in base.items():
        one = base.get((s, a, b, 1))
        print(
            f"| {'mlx' if s else 'ours'} | {a} | {b} x {w} | {v:.2f} | {v / one:.2f} |"
            if one
            else f"| {'mlx' if s else 'ours'} | {a} | {b} x {w} | {v:.2f} | |"
        )


if __name__ == "__main__":
    mx.random.seed(0)
    main()
