"""Draft model drafter: a smaller mlx-lm model with the target's tokenizer proposes tokens.

It keeps its own batched KV cache over the rows it drafts for, keyed by request id, and catches
up from the tokens it is shown: each round it keeps what still matches the row's history (the
prompt, the accepted tokens), gives back the rest per row (masked holes, engine/cache/ragged.py)
and feeds what it lacks, in one forward for all its rows, before drafting k tokens greedily. So it
needs nothing from the running batch: rows that join catch up alone (in chunks, within each
round's share while other rows wait: engine/speculative/catch_up_pacer.py), rows that had no
draft for a while catch up next time they draft, a failure resets it.

Drafting is greedy; at temperature > 0 the target still samples every position and a draft token
is kept only when it equals the target's sample, so the output distribution stays the target's.

A sliding-window draft keeps its whole history in a plain cache instead of a rotating buffer (a
rotated buffer has overwritten what a rollback needs); its masks still limit attention to the
window (the last `window` real positions, holes skipped).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache

from engine.cache.batch_rows import merge_row_cache
from engine.cache.cache_list import map_leaves
from engine.cache.recurrent import RecurrentSnapshot, has_recurrent, set_lengths
from engine.config import DEFAULT_PREFILL_CHUNK
from engine.hosting.memory_budget import held_bytes
from engine.requests import SpecMethod
from engine.speculative.catch_up_pacer import CatchUpPacer
from engine.speculative.drafter import Drafter, DraftRow
from engine.speculative.rollback import rollback_rows

DEFAULT_CATCH_UP_TOKENS = 64  # tokens a batched row may lack and still draft this round


@dataclass
class _Fed:
    """The tokens one row's draft cache holds: `real` of them from the row's history, then the
    draft's own guesses (`extra`), which the next round checks against the history."""

    real: int = 0
    extra: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.real + len(self.extra)


@dataclass
class _Joining:
    """A row catching up alone before it joins the batched cache."""

    cache: list[Any]
    fed: int = 0


class DraftModelDrafter(Drafter):
    """Drafts with a smaller model that shares the target's tokenizer."""

    name = SpecMethod.DRAFT_MODEL.value
    kind = SpecMethod.DRAFT_MODEL.value

    def __init__(
        self,
        loaded: Any,
        *,
        prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
        catch_up_tokens: int = DEFAULT_CATCH_UP_TOKENS,
        pow2: bool = False,
    ) -> None:
        self.loaded = loaded  # engine.models.LoadedModel
        self.model = loaded.model
        # recurrent state cannot hold guesses it may have to give back: such a draft goes
        # back to its state from before its guesses every round (engine/cache/recurrent.py)
        self.recurrent = has_recurrent(make_prompt_cache(self.model))
        self.prefill_chunk = prefill_chunk
        # new rows' histories, fed within each round's share while other rows wait
        self.pacer = CatchUpPacer(max_chunk=prefill_chunk, pow2=pow2)
        self.catch_up_tokens = catch_up_tokens
        self._ids: list[str] = []  # the batched cache's rows, in order
        self._fed: list[_Fed] = []
        self._cache: list[Any] | None = None
        self._joining: dict[str, _Joining] = {}

    # -- the Drafter interface -----------------------------------------------------------------

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        try:
            return self._propose(rows)
        except Exception:
            self.reset()  # its caches may be half-updated: catch up again from scratch
            raise

    def forget(self, request_ids: Iterable[str]) -> None:
        gone = set(request_ids)
        for rid in gone & self._joining.keys():
            del self._joining[rid]
        if gone & set(self._ids):
            self._keep([i for i, rid in enumerate(self._ids) if rid not in gone])

    def pace(self, share_s: float | None) -> None:
        self.pacer.begin_step(share_s)

    def catch_up_s(self) -> float:
        return self.pacer.spent_s

    def cache_bytes(self) -> int:
        return held_bytes(self._cache) + held_bytes([j.cache for j in self._joining.values()])

    # -- catching up -------------------------------------------------------------------------------

    def new_row_cache(self) -> list[Any]:
        layers = make_prompt_cache(self.model)
        # inside CacheLists too (Baichuan-M1's attention keeps one next to its conv state)
        return map_leaves(layers, lambda c: KVCache() if isinstance(c, RotatingKVCache) else c)

    def _propose(self, rows: list[DraftRow]) -> list[list[int]]:
        index = {rid: i for i, rid in enumerate(self._ids)}
        self._catch_up([row for row in rows if row.request_id not in index])
        index = {rid: i for i, rid in enumerate(self._ids)}
        asked = {row.request_id: row for row in rows if row.request_id in index}
        drafts = self._draft_batch(asked) if asked else {}
        return [drafts.get(row.request_id, []) for row in rows]

    def _catch_up(self, rows: list[DraftRow]) -> None:
        """Feed new rows' histories (all but the pending token), each alone, within this
        round's budget: the rows with the fewest tokens left first, so a chat's next turn does
        not wait behind a long prompt. A row fed to its end joins the batched cache."""
        budget, fed = self.pacer.budget(), 0
        start = time.perf_counter()
        for row in sorted(rows, key=self._left):
            fed += self._catch_up_alone(row, max(budget - fed, 0))
        self.pacer.took(fed, time.perf_counter() - start)

    def _left(self, row: DraftRow) -> int:
        joining = self._joining.get(row.request_id)
        return len(row) - 1 - (joining.fed if joining is not None else 0)

    def _catch_up_alone(self, row: DraftRow, budget: int) -> int:
        """Feed up to `budget` tokens of a new row's history in one forward; once all are
        fed the row joins the batched cache. Returns the tokens fed."""
        todo = len(row) - 1
        if todo < 1:
            return 0  # nothing to hold yet (a one-token prompt): next round
        joining = self._joining.setdefault(row.request_id, _Joining(self.new_row_cache()))
        n = min(budget, todo - joining.fed)
        if n > 0:
            chunk = row.history()[joining.fed : joining.fed + n]
            self.model(mx.array(chunk)[None], cache=joining.cache)
            mx.eval([c.state for c in joining.cache])
            joining.fed += n
        if joining.fed == todo:
            del self._joining[row.request_id]
            self._join(row.request_id, joining.cache, todo)
        return max(n, 0)

    def _join(self, request_id: str, row_cache: list[Any], fed: int) -> None:
        batch_cache = merge_row_cache(row_cache)
        if self._cache is None:
            self._cache = batch_cache
        else:
            for mine, theirs in zip(self._cache, batch_cache):
                mine.extend(theirs)
        self._ids.append(request_id)
        self._fed.append(_Fed(real=fed))

    def _keep(self, indices: list[int]) -> None:
        if not indices:
            self._ids, self._fed, self._cache = [], [], None
            return
        self._ids = [self._ids[i] for i in indices]
        self._fed = [self._fed[i] for i in indices]
        for layer in self._cache:
            layer.filter(indices)

    def reset(self) -> None:
        self._ids, self._fed, self._cache, self._joining = [], [], None, {}

    # -- drafting ----------------------------------------------------------------------------------

    def _draft_batch(self, asked: dict[str, DraftRow]) -> dict[str, list[int]]:
        """Feed every batched row what it lacks (rows not asked get nothing new), then draft
        max k tokens greedily; rows that lacked too much only catch up this round."""
        missing, surplus = [], []
        for rid, fed in zip(self._ids, self._fed):
            row = asked.get(rid)
            history = row.history() if row is not None else None
            keep = fed.real
            if history is not None:
                for token in fed.extra:  # the draft's guesses the target kept
                    if keep < len(history) and history[keep] == token:
                        keep += 1
                    else:
                        break
            surplus.append(fed.length - keep)
            todo = history[keep:] if history is not None else []
            missing.append(todo[: self.catch_up_tokens])
            fed.real, fed.extra = keep, []
        if any(surplus):
            rollback_rows(self._cache, surplus)
        width = max(len(m) for m in missing)
        if width == 0:
            return {}
        x = mx.array([m + [0] * (width - len(m)) for m in missing], dtype=mx.uint32)
        if self.recurrent:  # padding never enters the recurrent state
            set_lengths(self._cache, [len(m) for m in missing])
        try:
            logits = self.model(x, cache=self._cache)
        finally:
            if self.recurrent:
                set_lengths(self._cache, None)
        last = mx.array([max(len(m) - 1, 0) for m in missing])
        column = mx.argmax(logits[mx.arange(len(missing)), last], axis=-1).astype(mx.uint32)
        rollback_rows(self._cache, [width - len(m) for m in missing])
        ready = [
            rid in asked and len(m) > 0 and fed.real + len(m) == len(asked[rid])
            for rid, m, fed in zip(self._ids, missing, self._fed)
        ]
        for fed, m in zip(self._fed, missing):
            fed.real += len(m)
        k = max((asked[rid].k for rid, ok in zip(self._ids, ready) if ok), default=0)
        if k == 0:
            return {}
        columns = [column]
        snapshot = RecurrentSnapshot.take(self._cache) if self.recurrent else None
        for _ in range(k - 1):  # the last draft token is never fed
            logits = self.model(column[:, None], cache=self._cache)
            column = mx.argmax(logits[:, -1, :], axis=-1).astype(mx.uint32)
            columns.append(column)
        tokens = mx.stack(columns, axis=1).tolist()
        if snapshot is not None and k > 1:  # keep only the history: guesses are fed again
            rollback_rows(self._cache, [k - 1] * len(self._ids))
            snapshot.restore_rows([True] * len(self._ids))
        out = {}
        for rid, ok, fed, row_tokens in zip(self._ids, ready, self._fed, tokens):
            # what was fed after the history (a recurrent draft gave it back)
            fed.extra = [] if snapshot is not None else row_tokens[: k - 1]
            if ok:
                out[rid] = row_tokens[: asked[rid].k]
        return out
