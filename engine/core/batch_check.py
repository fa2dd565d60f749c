"""Can this model run rows of different lengths in one batch? Checked once, when it loads.

Some mlx-lm models cannot take a batch mask (gemma2's attention: a broadcast error at three rows
or more, and silently wrong logits at exactly two; mlx-lm's own BatchGenerator is wrong the same
way). So rows of different lengths are run batched and alone, one decode step and one
multi-token step, on the engine's own batch caches, and compared. A model that fails runs one row
at a time, with the reason in its ModelInfo, instead of ever being batched wrong.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import RotatingKVCache, make_prompt_cache

from engine.cache.batch_rows import merge_row_cache
from engine.cache.kv_quant import extend_layer

log = logging.getLogger(__name__)

DEFAULT_TOLERANCE = 0.05  # of the largest logit: far above 16-bit rounding, far below a bad mask
_PROMPTS = ([5, 6, 7, 8, 9, 10], [11], [14, 15, 16, 17])  # one short as a first turn can be
_STEP = ([20, 21, 22], [23, 24, 25], [26, 27, 28])
MAX_CHUNKING_PROBE = 4096  # longest sliding window probed (a forward one window long, at load)


ROLLS_BACK = ("KVCache", "RotatingKVCache", "QuantizedKVCache", "ArraysCache")


def speculation_problem(model: Any) -> str | None:
    """None when every cache the model makes can give back single rows' positions (or, for
    recurrent state, go back to an earlier state); else which one cannot."""
    from engine.cache.cache_list import leaves

    kinds = {type(c).__name__ for c in leaves(make_prompt_cache(model))}
    other = sorted(kinds - set(ROLLS_BACK))
    if other:
        return f"its {', '.join(other)} cache cannot give back rejected draft tokens row by row"
    return None


def batching_problem(model: Any) -> str | None:
    """None when batched rows give what each row gives alone; else what went wrong."""
    try:
        alone = [_alone(model, p, s) for p, s in zip(_PROMPTS, _STEP)]
        together = _together(model)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"a batched forward fails ({exc})"
    for (one_a, many_a), (one_b, many_b) in zip(alone, together):
        scale = max(1.0, float(mx.abs(one_a).max()))
        worst = max(float(mx.abs(one_a - one_b).max()), float(mx.abs(many_a - many_b).max()))
        if worst > DEFAULT_TOLERANCE * scale:
            return f"batched rows differ from the same rows alone (by {worst / scale:.0%})"
    return None


def _alone(model: Any, prompt: list[int], step: list[int]) -> tuple[mx.array, mx.array]:
    cache = make_prompt_cache(model)
    model(mx.array([prompt]), cache=cache)
    one = model(mx.array([step[:1]]), cache=cache)[0, -1]
    many = model(mx.array([step[1:]]), cache=cache)[0]
    mx.eval(one, many)
    return one, many


def _together(model: Any) -> list[tuple[mx.array, mx.array]]:
    batch = None
    for prompt in _PROMPTS:
        cache = make_prompt_cache(model)
        model(mx.array([prompt]), cache=cache)
        rows = merge_row_cache(cache)
        batch = rows if batch is None else [extend_layer(m, t) for m, t in zip(batch, rows)]
    one = model(mx.array([s[:1] for s in _STEP]), cache=batch)[:, -1]
    many = model(mx.array([s[1:] for s in _STEP]), cache=batch)
    mx.eval(one, many)
    return [(one[i], many[i]) for i in range(len(_PROMPTS))]


_FEEDS = ([20, 21, 22], [23], [24, 25])  # what three rows feed in one padded forward


def padding_check(model: Any) -> tuple[str | None, bool]:
    """`padding_problem` and, where there is one, `recompute_undoes_padding`, with the rows
    run alone once for both (at load)."""
    try:
        alone = _rows_alone(model)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"a padded forward fails ({exc})", False
    problem = _padded_round(model, alone, recompute=False)
    return problem, problem is not None and _recompute_round(model, alone)


def padding_problem(model: Any) -> str | None:
    """For models with recurrent state: None when rows that feed fewer tokens than a forward's
    width keep the padding out of their state (the `lengths` mlx-lm's mixers take), as
    batched prompts and verify rounds need; else what went wrong. Some mixers ignore it."""
    try:
        alone = _rows_alone(model)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"a padded forward fails ({exc})"
    return _padded_round(model, alone, recompute=False)


def recompute_undoes_padding(model: Any) -> bool:
    """For a model with a `padding_problem`: whether recomputing every padded row's recurrent
    state from what the forward fed it (engine/cache/recurrent.py) gives each row what it gives
    alone, so that verify rounds can still pad (prompts then go one at a time)."""
    try:
        return _recompute_round(model, _rows_alone(model))
    except Exception:  # noqa: BLE001 - then it does not
        return False


def _rows_alone(model: Any) -> list[mx.array] | None:
    """Each row's logits for one more token after its prompt and feed, alone; None for a model
    without recurrent state (nothing to check)."""
    from engine.cache.recurrent import has_recurrent

    if not has_recurrent(make_prompt_cache(model)):
        return None
    alone = []
    for prompt, feed in zip(_PROMPTS, _FEEDS):
        cache = make_prompt_cache(model)
        model(mx.array([prompt + feed]), cache=cache)
        alone.append(model(mx.array([[30]]), cache=cache)[0, -1])
    mx.eval(alone)
    return alone


def _recompute_round(model: Any, alone: list[mx.array] | None) -> bool:
    from engine.cache import recurrent_capture

    if alone is None or not recurrent_capture.enabled():
        return False
    recurrent_capture.install()  # the model's module is imported by now
    return _padded_round(model, alone, recompute=True) is None


def _padded_round(model: Any, alone: list[mx.array] | None, *, recompute: bool) -> str | None:
    """Three rows feed 3, 1 and 2 tokens in one forward (right-padded), then one more token;
    None when each row's logits match `alone` (the same tokens fed to that row alone)."""
    from engine.cache import recurrent_capture
    from engine.cache.recurrent import RecurrentSnapshot, set_lengths
    from engine.speculative.rollback import rollback_rows

    if alone is None:
        return None
    try:
        batch = None
        for prompt in _PROMPTS:
            cache = make_prompt_cache(model)
            model(mx.array([prompt]), cache=cache)
            rows = merge_row_cache(cache)
            batch = rows if batch is None else [extend_layer(m, t) for m, t in zip(batch, rows)]
        fed = [len(f) for f in _FEEDS]
        width = max(fed)
        snapshot = RecurrentSnapshot.take(batch)
        set_lengths(batch, fed)
        with recurrent_capture.capturing(recompute) as capture:
            model(mx.array([f + [0] * (width - len(f)) for f in _FEEDS]), cache=batch)
        set_lengths(batch, None)
        if recompute and not snapshot.recompute_rows(capture, fed, [n < width for n in fed]):
            return "its recurrent layers cannot be recomputed"
        rollback_rows(batch, [width - n for n in fed])
        together = model(mx.array([[30]] * len(_FEEDS)), cache=batch)[:, -1]
        mx.eval(together)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"a padded forward fails ({exc})"
    for i, one in enumerate(alone):
        scale = max(1.0, float(mx.abs(one).max()))
        worst = float(mx.abs(one - together[i]).max())
        if worst > DEFAULT_TOLERANCE * scale:
            return f"its recurrent layers take padding into their state (rows differ by {worst / scale:.0%})"
    return None


def chunking_problem(model: Any) -> str | None:
    """For models with sliding-window layers: None when a forward of several tokens over a
    cache past its window gives what one-token steps give (as verify rounds and prompt-cache
    hits need); else how far they differ. mlx-lm's plamo3, for one, masks window + 1 positions
    over a cache of window, so its output depends on how tokens are chunked."""
    from engine.cache.cache_list import leaves

    windows = [
        c.max_size for c in leaves(make_prompt_cache(model)) if isinstance(c, RotatingKVCache)
    ]
    if not windows:
        return None
    window = min(windows)
    if window > MAX_CHUNKING_PROBE:
        log.info("sliding window of %d positions: too long to probe for chunking", window)
        return None
    prompt = [5 + (7 * i) % 200 for i in range(window + 6)]
    steps = [11, 12, 13, 14]
    try:
        cache = make_prompt_cache(model)
        model(mx.array([prompt]), cache=cache)
        mx.eval([c.state for c in cache])
        twin = copy.deepcopy(cache)  # the prompt once, not twice (a window-long forward)
        one = mx.stack([model(mx.array([[t]]), cache=cache)[0, -1] for t in steps])
        many = model(mx.array([steps]), cache=twin)[0]
        mx.eval(one, many)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"a forward past its sliding window fails ({exc})"
    scale = max(1.0, float(mx.abs(one).max()))
    worst = float(mx.abs(one - many).max())
    if worst > DEFAULT_TOLERANCE * scale:
        return (
            "its output depends on how tokens are chunked past its sliding window (several "
            f"tokens at once differ from one at a time by {worst / scale:.0%})"
        )
    return None
