"""Draft model drafter: a smaller mlx-lm model with the target's tokenizer proposes tokens.

It keeps its own batched cache with the target batch's rows and positions: it prefills every
prompt alongside the target, consumes every plain decode input and rolls back with the target.
A verify round runs the draft k times, as mlx-lm's speculative loop does: the last draft token
is never fed, so after the round the draft lacks the target's last kept position, whose token
(`lag`) it feeds together with the next input. Joining rows and extracting a row's cache bring
it back in step first (`sync`). Drafting is greedy; at temperature
> 0 the target still samples every position and a draft token is kept only when it equals the
target's sample, so the output distribution stays the target's.

A sliding-window draft keeps its whole history instead of a rotating buffer: a rotated buffer
has overwritten what a rollback would need. Its masks still limit attention to the window (the
last `window` real positions, rolled-back holes skipped: engine/cache/ragged.py).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, RotatingKVCache, make_prompt_cache

from engine.batch import merge_row_cache
from engine.speculative.rollback import rollback_rows


class DraftModelDrafter:
    name = "draft"

    def __init__(self, loaded: Any) -> None:
        self.loaded = loaded  # engine.models.LoadedModel
        self.model = loaded.model
        self.cache: list[Any] | None = None
        self.lag: mx.array | None = None  # [B] tokens the target's cache holds and ours lacks
        self._columns: mx.array | None = None  # the last round's [B, width + 1] columns

    # -- keeping the batched cache in step with the target's ------------------------------------

    def new_row_cache(self) -> list[Any]:
        layers = make_prompt_cache(self.model)
        return [KVCache() if isinstance(c, RotatingKVCache) else c for c in layers]

    def prefill(self, row_cache: list[Any], chunk: mx.array) -> None:
        self.model(chunk, cache=row_cache)
        mx.eval([c.state for c in row_cache])

    def sync(self) -> None:
        """Feed the lagging position, so the draft's cache holds what the target's holds."""
        if self.lag is not None and self.cache is not None:
            self.model(self.lag[:, None], cache=self.cache)
        self.lag = None

    def join(self, row_cache: list[Any]) -> None:
        self.sync()
        batch_cache = merge_row_cache(row_cache)
        if self.cache is None:
            self.cache = batch_cache
        else:
            for mine, theirs in zip(self.cache, batch_cache):
                mine.extend(theirs)

    def keep(self, indices: list[int]) -> None:
        if not indices:
            self.cache, self.lag = None, None
            return
        if self.lag is not None:
            self.lag = self.lag[mx.array(indices)]
        if self.cache is not None:
            for layer in self.cache:
                layer.filter(indices)

    def consume(self, inputs: mx.array) -> None:
        """A plain decode step fed these [B] tokens to the target: feed them here too."""
        self.model(self._with_lag(inputs[:, None]), cache=self.cache)

    def rollback(self, surplus: list[int]) -> None:
        """Drop what the target drops; after a drafting round keep one position less, and
        remember its token."""
        rollback_rows(self.cache, surplus)
        if self._columns is not None:
            width = self._columns.shape[1] - 1
            kept_last = mx.array([width - s for s in surplus])
            self.lag = mx.take_along_axis(self._columns, kept_last[:, None], axis=1)[:, 0]
            self._columns = None

    def _with_lag(self, x: mx.array) -> mx.array:
        """Prefix the lagging tokens to [B, n] inputs (and clear the lag)."""
        if self.lag is None:
            return x
        x, self.lag = mx.concatenate([self.lag[:, None], x], axis=1), None
        return x

    # -- drafting ------------------------------------------------------------------------------

    def draft_columns(self, first: mx.array, given: list[list[int]], use: list[bool], width: int):
        """Run the draft over `width` columns; return [B, width + 1] target inputs.

        Column 0 is each row's pending token. For rows in `use`, column j+1 is the draft's own
        greedy token; other rows feed their `given` draft (padded), so every row's draft cache
        holds the positions the target will hold, less the last (see the module's docstring).
        """
        rows = len(given)
        self._columns = None
        if not any(use):  # nothing to draft: write the known columns in one forward
            firsts = first.tolist()
            x = mx.array(
                [[t] + g[:width] + [0] * (width - len(g[:width])) for t, g in zip(firsts, given)],
                dtype=mx.uint32,
            )
            self.model(self._with_lag(x), cache=self.cache)
            return x
        padded = mx.array(
            [g[:width] + [0] * (width - len(g[:width])) for g in given], dtype=mx.uint32
        ).reshape(rows, width)
        mask = mx.array(use)
        column = first
        columns = [first]
        for j in range(width):
            x = column[:, None] if j else self._with_lag(column[:, None])
            logits = self.model(x, cache=self.cache)[:, -1, :]
            mine = mx.argmax(logits, axis=-1).astype(mx.uint32)
            column = mx.where(mask, mine, padded[:, j])
            columns.append(column)
        self._columns = mx.stack(columns, axis=1)
        return self._columns

    def propose(self, row: Any, k: int) -> list[int]:  # the batch drafts for these rows
        raise NotImplementedError("draft-model rows are drafted by the batch, all at once")

    def observe(self, row: Any, drafted: list[int], accepted: int) -> None:
        pass
