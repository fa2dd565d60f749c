"""Prompt processing: chunks of several waiting prompts in one forward.

A prompt alone is processed exactly as `mlx_lm.generate` does. Several prompts share one
forward the way mlx-lm's BatchGenerator does it: their single-row caches merge into a batch
cache (left padding), the chunks are right-padded, and `prepare`/`finalize` roll the padding out
of the way; each row then gets its own cache back (`extract`). One weight read serves every
prompt, which is what prompt processing on a memory-bound CPU needs. A batched forward works on
merged copies, so when it fails the rows' own caches are untouched and each can run alone.

On CUDA a prompt's last chunk beside decoding rows may carry filler tokens after its own, up to
a power of two (one forward shape: engine/core/prefill_pacer.py); they are trimmed off the cache
after the forward, so only models whose caches all trim exactly get them (`takes_filler`).

With KV quantization (`kv`), a row's cache is quantized once it holds `kv.start` positions,
checked before the first chunk and after every chunk (engine/cache/kv_quant.py); rows share a
forward only with rows whose caches have the same layer types (all quantized, or none).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, QuantizedKVCache, make_prompt_cache

from engine.cache.kv_quant import KVQuant, cache_signature, merge_layer, quantize_row_cache
from engine.core.packed_forward import Part
from engine.core.recovery import trim_to
from engine.core.step_plan import StepOutput, StepPlan
from engine.hidden import split_forward

log = logging.getLogger(__name__)


@dataclass
class PrefillWork:
    """One request's chunk: `tokens` go into its single-row `cache`."""

    request_id: str
    cache: list[Any]
    tokens: list[int]
    wants_hidden: bool = False  # its drafter reads hidden states: set `hidden` [n, d]
    hidden: Any = None
    held: int = 0  # positions its cache held before this chunk
    pad: int = 0  # filler tokens after `tokens` (one forward shape on CUDA), dropped after

    def inputs(self) -> list[int]:
        """The forward's tokens: the chunk, then its filler (its last token again)."""
        return self.tokens + self.tokens[-1:] * self.pad

    def drop_filler(self) -> None:
        """Trim the filler's positions off the cache again (only caches that can trim are
        given filler: engine/core/prefill_pacer.py)."""
        if self.pad and not trim_to(self.cache, self.held + len(self.tokens)):
            raise RuntimeError("the prompt cache cannot drop the chunk's filler tokens")


def plan_work(plan: StepPlan, caches: dict[str, list[Any]], inputs: Any) -> list[PrefillWork]:
    """The plan's prompt chunks as work on their rows' `caches` (by request id); `inputs`
    (engine/core/drafter_inputs.py) says which drafters read hidden states."""
    return [
        PrefillWork(
            c.state.request_id,
            caches[c.state.request_id],
            c.state.prompt[c.state.prefilled : c.state.prefilled + c.tokens],
            wants_hidden=inputs.wants_hidden(c.state),
            held=c.state.prefilled,
            pad=c.pad,
        )
        for c in plan.prefill
        if c.tokens > 0
    ]


def takes_filler(model: Any) -> bool:
    """Whether a prompt chunk of this model may carry filler tokens: every layer's cache is a
    plain KV cache, which trims exactly (a sliding window, a recurrent state cannot)."""
    return all(type(c) in (KVCache, QuantizedKVCache) for c in make_prompt_cache(model))


def prefill_alone(work: PrefillWork, model: Any, kv: KVQuant | None = None) -> None:
    x = mx.array(work.inputs())[None]
    if work.wants_hidden:
        hidden, _ = split_forward(model, x, work.cache)
        work.hidden = hidden[0, : len(work.tokens)]
    else:
        model(x, cache=work.cache)
    work.drop_filler()
    quantize_row_cache(work.cache, kv)
    mx.eval([c.state for c in work.cache], [work.hidden] if work.wants_hidden else [])


def rider(work: PrefillWork) -> Part:
    """The chunk as a part of the decoding rows' forward (engine/core/packed_forward.py)."""
    return Part(mx.array(work.inputs(), dtype=mx.uint32)[None], work.cache)


def finish_rider(work: PrefillWork, hidden: Any, kv: KVQuant | None = None) -> None:
    """After the shared forward: what `prefill_alone` does after its own."""
    work.drop_filler()
    quantize_row_cache(work.cache, kv)
    if work.wants_hidden:
        work.hidden = hidden[0, : len(work.tokens)]
    mx.eval([c.state for c in work.cache], [work.hidden] if work.wants_hidden else [])


def restore_rider(work: PrefillWork) -> bool:
    """After a shared forward failed: the chunk's cache back to the positions it held before
    (False: it cannot be, e.g. recurrent state already overwritten)."""
    try:
        return trim_to(work.cache, work.held)
    except Exception:  # noqa: BLE001 - that prompt cannot be saved
        log.exception("could not restore the prompt cache of %s", work.request_id)
        return False


def prefill_together(
    group: list[PrefillWork], model: Any, kv: KVQuant | None = None
) -> list[PrefillWork]:
    """One forward over the chunks of the requests whose caches have the same layer types
    (each such set in its own forward). Returns the work left for the caller to run alone:
    requests with no partner, and those of a batched forward that failed."""
    parts: dict[tuple[str, ...], list[PrefillWork]] = {}
    for work in group:
        parts.setdefault(cache_signature(work.cache), []).append(work)
    left = []
    for part in parts.values():
        if len(part) == 1:
            left += part
            continue
        try:
            _prefill_padded(part, model, kv)
        except Exception:  # noqa: BLE001 - the caller retries them alone
            log.warning("batched prefill failed; retrying the prompts one by one", exc_info=True)
            left += part
    return left


def _prefill_padded(group: list[PrefillWork], model: Any, kv: KVQuant | None) -> None:
    lengths = [len(w.tokens) for w in group]
    width = max(len(w.inputs()) for w in group)  # a row's filler is right padding here
    padding = [width - n for n in lengths]
    tokens = mx.array([w.tokens + [0] * (width - len(w.tokens)) for w in group], dtype=mx.uint32)
    row_caches = [w.cache for w in group]
    layers = [merge_layer([c[i] for c in row_caches]) for i in range(len(row_caches[0]))]
    for layer in layers:
        layer.prepare(lengths=lengths, right_padding=padding)
    hidden = None
    if any(w.wants_hidden for w in group):
        hidden, _ = split_forward(model, tokens, layers)
    else:
        model(tokens, cache=layers)
    for layer in layers:
        layer.finalize()
    mx.eval([layer.state for layer in layers], [hidden] if hidden is not None else [])
    for row, caches in enumerate(row_caches):  # only now: a failure above leaves them as they were
        caches[:] = [layer.extract(row) for layer in layers]
        quantize_row_cache(caches, kv)
        if group[row].wants_hidden:  # right-padded: the row's positions come first
            group[row].hidden = hidden[row, : lengths[row]]


def finish_shared(riders: list[PrefillWork], outputs: mx.array, out: StepOutput) -> None:
    """Prompt chunks that shared the decode step's forward are done within their step, as a
    forward of their own is (so the pacer's step times stay whole)."""
    if riders:
        mx.eval(outputs, [c.state for w in riders for c in w.cache])
        out.timing.shared_steps += 1
        out.timing.shared_tokens += sum(len(w.tokens) for w in riders)
