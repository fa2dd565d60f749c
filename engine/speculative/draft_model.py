"""Draft model drafter: a smaller mlx-lm model with the target's tokenizer proposes tokens.

It keeps its own batched cache with exactly the target batch's rows and positions: it prefills
every prompt alongside the target, consumes every plain decode input, writes the same k+1
positions in a verify round and rolls back with the target. Drafting is greedy; at temperature
> 0 the target still samples every position and a draft token is kept only when it equals the
target's sample, so the output distribution stays the target's.

A sliding-window draft keeps its whole history instead of a rotating buffer: a rotated buffer
has overwritten what a rollback would need. Its masks still limit attention to the window
(approximately while a row has rolled-back holes, which only changes what it proposes).
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

    # -- keeping the batched cache in step with the target's ------------------------------------

    def new_row_cache(self) -> list[Any]:
        layers = make_prompt_cache(self.model)
        return [KVCache() if isinstance(c, RotatingKVCache) else c for c in layers]

    def prefill(self, row_cache: list[Any], chunk: mx.array) -> None:
        self.model(chunk, cache=row_cache)
        mx.eval([c.state for c in row_cache])

    def join(self, row_cache: list[Any]) -> None:
        batch_cache = merge_row_cache(row_cache)
        if self.cache is None:
            self.cache = batch_cache
        else:
            for mine, theirs in zip(self.cache, batch_cache):
                mine.extend(theirs)

    def keep(self, indices: list[int]) -> None:
        if not indices:
            self.cache = None
        elif self.cache is not None:
            for layer in self.cache:
                layer.filter(indices)

    def consume(self, inputs: mx.array) -> None:
        """A plain decode step fed these [B] tokens to the target: feed them here too."""
        self.model(inputs[:, None], cache=self.cache)

    def rollback(self, surplus: list[int]) -> None:
        rollback_rows(self.cache, surplus)

    # -- drafting ------------------------------------------------------------------------------

    def draft_columns(self, first: mx.array, given: list[list[int]], use: list[bool], width: int):
        """Run the draft over `width` + 1 columns; return [B, width + 1] target inputs.

        Column 0 is each row's pending token. For rows in `use`, column j+1 is the draft's own
        greedy token; other rows feed their `given` draft (padded), so every row's draft cache
        holds exactly the positions the target will hold.
        """
        rows = len(given)
        if not any(use):  # nothing to draft: write the known columns in one forward
            firsts = first.tolist()
            x = mx.array(
                [[t] + g[:width] + [0] * (width - len(g[:width])) for t, g in zip(firsts, given)],
                dtype=mx.uint32,
            )
            self.model(x, cache=self.cache)
            return x
        padded = mx.array(
            [g[:width] + [0] * (width - len(g[:width])) for g in given], dtype=mx.uint32
        ).reshape(rows, width)
        mask = mx.array(use)
        column = first
        columns = [first]
        for j in range(width + 1):
            logits = self.model(column[:, None], cache=self.cache)[:, -1, :]
            if j == width:
                break  # this forward only writes the last column into the draft cache
            mine = mx.argmax(logits, axis=-1).astype(mx.uint32)
            column = mx.where(mask, mine, padded[:, j])
            columns.append(column)
        return mx.stack(columns, axis=1)

    def propose(self, row: Any, k: int) -> list[int]:  # the batch drafts for these rows
        raise NotImplementedError("draft-model rows are drafted by the batch, all at once")

    def observe(self, row: Any, drafted: list[int], accepted: int) -> None:
        pass
