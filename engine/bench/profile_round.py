"""python -m engine.bench.profile_round: where a verify round's time goes, part by part, against
a plain decode step, at one batch size (for tuning speculation on a given machine)."""

# ruff: noqa: B023 - the closures below run inside the loop iteration that made them

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from engine.bench.cli_args import positive_int
from engine.cache import recurrent_capture
from engine.cache.batch_rows import merge_row_caches
from engine.cache.kv_quant import merge_layer
from engine.cache.recurrent import RecurrentSnapshot, has_recurrent, set_lengths
from engine.models import load_model as load_any
from engine.sampling import greedy_tokens, log_softmax
from engine.speculative.rollback import rollback_rows


def timed(fn, repeats: int = 5) -> float:
    fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out) * 1e3


def ragged_prompts(batch: int, context: int) -> list[list[int]]:
    """Prompts of about `context` tokens, of up to seven lengths (rows need left padding)."""
    return [[100 + b] * (context - b % 7) for b in range(batch)]


def prefilled_batch(model: Any, prompts: list[list[int]], *, ours: bool = True) -> list[Any]:
    """Each prompt processed alone into mlx-lm's single-row caches, then merged into one batch
    cache per layer (left padding): ours (RaggedBatchKVCache) or mlx-lm's plain BatchKVCache."""
    rows = []
    for prompt in prompts:
        cache = make_prompt_cache(model)
        model(mx.array([prompt]), cache=cache)
        mx.eval([c.state for c in cache])
        rows.append(cache)
    layers = merge_row_caches(rows) if ours else [merge_layer(list(layer)) for layer in zip(*rows)]
    mx.eval([c.state for c in layers])
    return layers


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m engine.bench.profile_round")
    p.add_argument("--model", default=None)
    p.add_argument("--batch", type=positive_int, default=16)
    p.add_argument("--context", type=positive_int, default=256)
    p.add_argument("--widths", type=positive_int, nargs="+", default=[1, 3, 5, 9])
    p.add_argument(
        "--ragged", action="store_true", help="rows feed different lengths (recurrent layers mask)"
    )
    args = p.parse_args(argv)
    shorter = min(args.batch - 1, 6)  # ragged_prompts: rows up to 6 tokens shorter
    if args.context <= shorter:
        p.error(
            f"--context must be > {shorter} at --batch {args.batch}: the rows' prompts are up "
            f"to {shorter} tokens shorter"
        )
    loaded = load_any(args.model)
    model, B, L = loaded.model, args.batch, args.context

    print(f"{loaded.info.name} on {mx.default_device()}, batch {B}, context ~{L}")
    for w in args.widths:
        x = mx.ones((B, w), dtype=mx.uint32)

        fed = [w - i % w if args.ragged else w for i in range(B)]

        def forward():
            cache = prefilled_batch(model, ragged_prompts(B, L))
            recurrent_capture.install()
            forward.snapshot = RecurrentSnapshot.take(cache)
            start = time.perf_counter()
            if args.ragged and w > 1:
                set_lengths(cache, fed)
            with recurrent_capture.capturing(has_recurrent(cache)) as capture:
                logits = model(x, cache=cache)
            forward.capture = capture
            set_lengths(cache, None)
            mx.eval(logits)
            forward.t = time.perf_counter() - start
            return cache, logits

        samples = []
        for _ in range(4):
            cache, logits = forward()
            samples.append(forward.t * 1e3)
        fwd = statistics.median(samples[1:])
        greedy = timed(lambda: greedy_tokens(logits))
        lse = timed(lambda: mx.eval(mx.argmax(log_softmax(logits), axis=-1)))
        surplus = [(i % w) for i in range(B)]
        roll = timed(lambda: (rollback_rows(cache, surplus), mx.eval([c.state for c in cache])), 3)
        line = (
            f"width {w:>2}: forward {fwd:7.2f} ms  greedy {greedy:6.2f} ms  "
            f"argmax(log_softmax) {lse:6.2f} ms  rollback {roll:6.2f} ms"
        )
        if forward.capture is not None and w > 1:
            # recurrent layers: every row keeps one token less than it was fed
            kept, short = [max(n - 1, 1) for n in fed], [n > 1 for n in fed]

            def recompute():
                if not forward.snapshot.recompute_rows(forward.capture, kept, short):
                    raise RuntimeError("this model's layers cannot be recomputed")
                mx.eval([c.state for c in cache])

            line += f"  recompute {timed(recompute, 3):6.2f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
