"""The MTP drafter: the model's own multi-token-prediction layer proposes tokens from the
target's hidden states (engine/hidden.py, /work/notes/HIDDEN_API.md).

It keeps the MTP layer's KV cache for all its rows in one batched cache (rows give back
positions as masked holes: engine/cache/ragged.py), one entry per pair (target hidden state at
position p, embedding of token p+1). Each round every asked row feeds the pairs it was handed
(the verify forward's kept positions, nothing rejected) in one forward for all rows, reads its
first draft token off its last pair, then all rows chain together: their own output and their
own guess make the next pair (k > 1). The chained entries are given back at once (they hold no
target hidden state), so the cache only holds pairs of each row's real history and nothing
needs rolling back when the target rejects a guess. A new row, or one whose handed positions do
not follow what it holds (a prompt-cache hit's prefix, rounds another drafter served), first
feeds its pairs alone into a fresh cache and then joins: drafts may be worse, tokens stay exact.
While other rows wait on the round, a long history (a long prompt's every position) is fed a
share of it per round (engine/speculative/catch_up_pacer.py); the row drafts once it has joined.

The prompt cache stores a leaving row's MTP cache beside the target's (`export_row`, once the
pairs up to the target's last cached position are fed) and gives it back with a hit
(`adopt_row`), so the next turn drafts with its whole history.

Drafting is greedy; at temperature > 0 the target still samples every position and a draft token
is kept only when it equals the target's sample.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from engine.cache.batch_rows import merge_row_cache
from engine.device import on_cuda
from engine.hidden import embedding, lm_head
from engine.hosting.memory_budget import held_bytes
from engine.requests import SpecMethod
from engine.speculative.catch_up_pacer import CatchUpPacer
from engine.speculative.drafter import Drafter, DraftRow
from engine.speculative.mtp.module import MtpModule
from engine.speculative.rollback import rollback_rows

DEFAULT_BATCHED_PAIRS = 64  # a row handed more pairs than this feeds them alone first
DEFAULT_CATCH_UP_MAX = 8192  # pairs a row feeds alone in one round when nobody waits


@dataclass
class _Joining:
    """A row feeding its pairs alone before it joins the batched cache: the pairs handed but
    not fed yet, from position `fed_to`."""

    cache: KVCache
    start: int  # the first position its cache holds
    fed_to: int
    tokens: mx.array  # [n] the token after each pending position
    hidden: mx.array  # [n, d] its hidden state

    @property
    def handed_to(self) -> int:
        return self.fed_to + self.tokens.shape[0]


class MtpDrafter(Drafter):
    """Drafts with the MTP layer loaded from the target's checkpoint."""

    name = SpecMethod.MTP.value
    kind = SpecMethod.MTP.value
    wants_hidden_states = True

    def __init__(self, target_model: Any, mtp: MtpModule, *, identity: str = "mtp") -> None:
        self.mtp = mtp
        self.identity = identity  # what its weights are (the prompt cache's namespace)
        self.embed = embedding(target_model)
        self.head = lm_head(target_model)
        self.dtype = mtp.norm.weight.dtype
        self._ids: list[str] = []  # the batched cache's rows, in order
        self._next: list[int] = []  # per row: the position whose hidden state comes next
        self._start: list[int] = []  # per row: the first position its cache holds
        self._cache: list[Any] | None = None  # [one batched cache]: the MTP layer's
        self._joining: dict[str, _Joining] = {}
        self.pacer = CatchUpPacer(max_chunk=DEFAULT_CATCH_UP_MAX, pow2=on_cuda())

    # -- the Drafter interface -----------------------------------------------------------------

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        try:
            return self._propose(rows)
        except Exception:
            self.reset()  # its cache may be half-updated: start again from the next handover
            raise

    def forget(self, request_ids: Iterable[str]) -> None:
        gone = set(request_ids)
        for rid in gone & self._joining.keys():
            del self._joining[rid]
        if gone & set(self._ids):
            self._keep([i for i, rid in enumerate(self._ids) if rid not in gone])

    def reset(self) -> None:
        self._ids, self._next, self._start, self._cache = [], [], [], None
        self._joining = {}

    def pace(self, share_s: float | None) -> None:
        self.pacer.begin_step(share_s)

    def catch_up_s(self) -> float:
        return self.pacer.spent_s

    def cache_bytes(self) -> int:
        joining = [[j.cache, j.hidden] for j in self._joining.values()]
        return held_bytes(self._cache) + held_bytes(joining)

    # -- rows joining and leaving --------------------------------------------------------------

    def _keep(self, indices: list[int]) -> None:
        if not indices:
            self.reset()
            return
        self._ids = [self._ids[i] for i in indices]
        self._next = [self._next[i] for i in indices]
        self._start = [self._start[i] for i in indices]
        for layer in self._cache:
            layer.filter(indices)

    def _join(self, request_id: str, cache: KVCache, next_position: int, start: int) -> None:
        batch = merge_row_cache([cache])
        if self._cache is None:
            self._cache = batch
        else:
            self._cache[0].extend(batch[0])
        self._ids.append(request_id)
        self._next.append(next_position)
        self._start.append(start)

    # -- the prompt cache ------------------------------------------------------------------------

    def probe(self, x: mx.array, cache: list[Any]) -> mx.array:
        """One pair through the layer (for the prompt cache's layout probe)."""
        d = self.mtp.norm.weight.shape[0]
        hidden = mx.zeros((*x.shape, d), dtype=self.dtype)
        return self.mtp(self.embed(x), hidden, cache[0])[0]

    def export_row(
        self, request_id: str, tokens: list[int], held: int, hidden: Any, hidden_start: int
    ) -> list[Any] | None:
        """A single-row copy of a leaving row's cache holding the pairs of positions 0..n-1:
        n = held (the target's cached positions), or held - 1 when the token after the last
        one is not known yet (the pair needs it). The pairs it lacks are fed from `hidden` (the
        waiting hidden states from `hidden_start`) and `tokens` (the row's history). None when
        it cannot (its cache does not start at 0, or a hidden state is missing)."""
        if request_id not in self._ids:
            return None
        i = self._ids.index(request_id)
        have = self._next[i]
        if self._start[i] != 0:
            return None
        cache = self._cache[0].extract(i)
        if cache.offset != have:
            return None
        want = min(held, len(tokens) - 1)
        if have > want:  # e.g. a hybrid row replays kept tokens: its target holds fewer now
            cache.trim(have - want)
        elif have < want:
            n = want - have
            if hidden is None or hidden_start > have or hidden_start + hidden.shape[0] < want:
                return None
            ids = mx.array(tokens[have + 1 : want + 1], dtype=mx.uint32)
            states = hidden[have - hidden_start : have - hidden_start + n].astype(self.dtype)
            self.mtp(self.embed(ids[None]), states[None], cache)
        return [cache]

    def adopt_row(self, request_id: str, cache: Any, positions: int) -> None:
        """A row restored from the prompt cache: its MTP cache holds positions 0..positions-1;
        the hidden states handed next start there."""
        self.forget([request_id])
        if cache is not None and getattr(cache, "offset", None) == positions:
            self._join(request_id, cache, positions, 0)

    # -- drafting ------------------------------------------------------------------------------

    def _greedy(self, out: mx.array) -> mx.array:
        """The most likely token after each output [B, d], as uint32 [B]."""
        return mx.argmax(self.head(out), axis=-1).astype(mx.uint32)

    def _pairs(self, row: DraftRow) -> tuple[mx.array, mx.array]:
        """The row's new pairs: (token ids [n], hidden states [n, d])."""
        n = row.hidden.shape[0]
        start = row.hidden_start
        tokens = row.history()[start + 1 : start + 1 + n]
        return mx.array(tokens, dtype=mx.uint32), row.hidden.astype(self.dtype)

    def _propose(self, rows: list[DraftRow]) -> list[list[int]]:
        asked = {r.request_id: r for r in rows if r.hidden is not None and r.k > 0}
        index = {rid: i for i, rid in enumerate(self._ids)}
        stale = [
            index[rid]
            for rid, r in asked.items()
            if rid in index
            and (
                self._next[index[rid]] != r.hidden_start
                or r.hidden.shape[0] > DEFAULT_BATCHED_PAIRS
            )
        ]
        if stale:
            self._keep([i for i in range(len(self._ids)) if i not in stale])
        last: dict[str, tuple[mx.array, mx.array]] = {}  # rid -> (output, chain state) [1, d]
        index = {rid: i for i, rid in enumerate(self._ids)}
        # new, after a gap, or a long catch-up: alone, then join
        self._catch_up([row for rid, row in asked.items() if rid not in index], last)
        fed = [rid in asked and rid not in last for rid in self._ids]
        if any(fed):
            self._feed_batch([asked[rid] if f else None for rid, f in zip(self._ids, fed)], last)
        if not asked or not self._ids:  # none asked, or all still catching up
            return [[] for _ in rows]
        k = max(r.k for r in asked.values())
        d = self.mtp.norm.weight.shape[0]
        zero = mx.zeros((1, d), dtype=self.dtype)
        outs = mx.concatenate([last.get(rid, (zero, zero))[0] for rid in self._ids])
        chain = mx.concatenate([last.get(rid, (zero, zero))[1] for rid in self._ids])
        token = self._greedy(outs)
        columns = [token]
        cache = self._cache[0]
        for _ in range(k - 1):  # every row chains; rows not asked are given it back below
            out, chain = self.mtp(self.embed(token[:, None]), chain[:, None], cache)
            out, chain = out[:, -1], chain[:, -1]
            token = self._greedy(out)
            columns.append(token)
        drafts = mx.stack(columns, axis=1)
        if k > 1:
            rollback_rows(self._cache, [k - 1] * len(self._ids))  # guesses, not history
        mx.eval(drafts, self._cache[0].state)
        table = dict(zip(self._ids, drafts.tolist()))
        drafted = asked.keys() & table.keys()  # a row still catching up drafts next round
        return [table[r.request_id][: r.k] if r.request_id in drafted else [] for r in rows]

    def _catch_up(self, rows: list[DraftRow], last: dict[str, tuple[mx.array, mx.array]]) -> None:
        """Feed new rows' pairs alone within this round's budget, the rows with the fewest
        pairs pending first; a row fed to the end of its handed pairs joins the batch (its
        first draft comes off `last`), the others keep the rest for the next round."""
        budget, fed = self.pacer.budget(), 0
        start = time.perf_counter()
        joining = [self._hand_over(row) for row in rows]
        for rid, j in sorted(zip([r.request_id for r in rows], joining), key=_pending):
            n = min(j.tokens.shape[0], max(budget - fed, 0))
            if n == 0:
                continue
            out, chain = self.mtp(self.embed(j.tokens[None, :n]), j.hidden[None, :n], j.cache)
            fed += n
            if n < j.tokens.shape[0]:
                mx.eval(j.cache.state)
                j.tokens, j.hidden, j.fed_to = j.tokens[n:], j.hidden[n:], j.fed_to + n
                continue
            last[rid] = (out[:, -1], chain[:, -1])
            mx.eval(j.cache.state, *last[rid])
            del self._joining[rid]
            self._join(rid, j.cache, j.fed_to + n, j.start)
        self.pacer.took(fed, time.perf_counter() - start)

    def _hand_over(self, row: DraftRow) -> _Joining:
        """The row's joining state with its newly handed pairs added; a fresh one when they do
        not follow what it holds."""
        tokens, hidden = self._pairs(row)
        j = self._joining.get(row.request_id)
        if j is None or j.handed_to != row.hidden_start:
            j = _Joining(KVCache(), row.hidden_start, row.hidden_start, tokens, hidden)
        else:
            j.tokens = mx.concatenate([j.tokens, tokens])
            j.hidden = mx.concatenate([j.hidden, hidden])
        self._joining[row.request_id] = j
        return j

    def _feed_batch(
        self, rows: list[DraftRow | None], last: dict[str, tuple[mx.array, mx.array]]
    ) -> None:
        """One forward over every batched row's new pairs (right-padded; rows with none feed
        padding), then each row gives its padding back."""
        pairs = [self._pairs(r) if r is not None else None for r in rows]
        lengths = [p[0].shape[0] if p is not None else 0 for p in pairs]
        width = max(lengths)
        d = self.mtp.norm.weight.shape[0]
        tokens, hidden = [], []
        for p, n in zip(pairs, lengths):
            pad = width - n
            t = p[0] if p is not None else mx.zeros((0,), dtype=mx.uint32)
            h = p[1] if p is not None else mx.zeros((0, d), dtype=self.dtype)
            tokens.append(mx.pad(t, (0, pad)) if pad else t)
            hidden.append(mx.pad(h, ((0, pad), (0, 0))) if pad else h)
        tokens, hidden = mx.stack(tokens), mx.stack(hidden)
        out, chain = self.mtp(self.embed(tokens), hidden, self._cache[0])
        rollback_rows(self._cache, [width - n for n in lengths])
        for i, (row, n) in enumerate(zip(rows, lengths)):
            if row is not None:
                last[row.request_id] = (out[i : i + 1, n - 1], chain[i : i + 1, n - 1])
                self._next[i] = row.hidden_start + n


def _pending(item: tuple[str, _Joining]) -> int:
    return item[1].tokens.shape[0]
