"""The MTP drafter: the model's own multi-token-prediction layer proposes tokens from the
target's hidden states (engine/hidden.py, /work/notes/HIDDEN_API.md).

Per row it keeps the MTP layer's own KV cache, one entry per pair (target hidden state at
position p, embedding of token p+1). Each round it feeds the pairs it was handed (the verify
forward's kept positions, nothing rejected), reads the draft's first token off the last one,
then chains: its own output and its own guess make the next pair (k > 1). The chained entries
are given back at once (they hold no target hidden state), so the cache only ever holds pairs of
the row's real history and nothing needs rolling back when the target rejects a guess. A row
whose handed positions do not follow what it holds (a prompt-cache hit's prefix, rounds another
drafter served) starts a fresh cache there: drafts may be worse, tokens stay exact.

Drafting is greedy; at temperature > 0 the target still samples every position and a draft token
is kept only when it equals the target's sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from engine.hidden import embedding, lm_head
from engine.hosting.memory_budget import held_bytes
from engine.requests import SpecMethod
from engine.speculative.drafter import Drafter, DraftRow
from engine.speculative.mtp.module import MtpModule


@dataclass
class _Row:
    cache: KVCache
    next: int  # the position whose hidden state it expects next


class MtpDrafter(Drafter):
    """Drafts with the MTP layer loaded from the target's checkpoint."""

    name = SpecMethod.MTP.value
    wants_hidden_states = True

    def __init__(self, target_model: Any, mtp: MtpModule) -> None:
        self.mtp = mtp
        self.embed = embedding(target_model)
        self.head = lm_head(target_model)
        self._rows: dict[str, _Row] = {}

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        try:
            drafts = [self._draft(row) for row in rows]
            mx.eval([d for d in drafts if d is not None])
        except Exception:
            self.forget(row.request_id for row in rows)  # their caches may be half-updated
            raise
        return [d.tolist() if d is not None else [] for d in drafts]

    def forget(self, request_ids: Iterable[str]) -> None:
        for rid in request_ids:
            self._rows.pop(rid, None)

    def reset(self) -> None:
        self._rows.clear()

    def cache_bytes(self) -> int:
        return held_bytes([r.cache for r in self._rows.values()])

    def _draft(self, row: DraftRow) -> mx.array | None:
        """Feed the new pairs, then chain k tokens; None when nothing new was handed."""
        if row.hidden is None or row.k <= 0:
            return None
        state = self._rows.get(row.request_id)
        if state is None or state.next != row.hidden_start:
            state = self._rows[row.request_id] = _Row(KVCache(), row.hidden_start)
        n = row.hidden.shape[0]
        history = row.history()
        tokens = mx.array(history[row.hidden_start + 1 : row.hidden_start + 1 + n])
        hidden = row.hidden[None].astype(self.mtp.norm.weight.dtype)
        out, chain = self.mtp(self.embed(tokens[None]), hidden, state.cache)
        state.next = row.hidden_start + n
        token = mx.argmax(self.head(out[:, -1]), axis=-1)
        drafts = [token]
        for _ in range(row.k - 1):
            out, chain = self.mtp(self.embed(token[None]), chain[:, -1:], state.cache)
            token = mx.argmax(self.head(out[:, -1]), axis=-1)
            drafts.append(token)
        if row.k > 1:
            state.cache.trim(row.k - 1)  # guesses, not history
        return mx.concatenate(drafts)
