"""The running batch: rows that decode together over one batched KV cache.

Plain decoding is pipelined as in mlx-lm's GenerationBatch: the forward for step n+1 is queued
(`mx.async_eval`) before the tokens of step n are read back, so Python overhead overlaps compute.
A verify round needs the last tokens to draft from, so it reads them back first (`flush`), then
queues one forward over every row's pending input and draft (`verify_launch`) and returns, so
host work can overlap it, before `verify_collect` picks the target's tokens.

With KV quantization (`kv`), layers whose cache reaches `kv.start` positions are converted to
BatchQuantizedKVCache after a row joins, after each decode step and after each verify round's
rollback (engine/cache/kv_quant.py).

A row that decodes alone without speculating keeps its own plain KVCache (`solo`), as
`mlx_lm.generate` does: a batch cache costs each layer per-row offset arrays and an op more every
step (15% of a 1B step in one H200 profile, where a small model's step is bound by host work).
The row moves into a batch cache when another row joins or it drafts, and back when it is left
alone (one copy each way).
"""

from __future__ import annotations

import time
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, KVCache

from engine.cache import recurrent_capture
from engine.cache.batch_rows import merge_row_caches
from engine.cache.cache_list import cache_arrays, leaves
from engine.cache.kv_quant import KVQuant, extend_layer, quantize_batch_cache
from engine.cache.ragged import RaggedBatchKVCache
from engine.cache.recurrent import RecurrentSnapshot, has_recurrent, is_recurrent, set_lengths
from engine.core.early_launch import launching_early
from engine.core.packed_forward import Part, packed_forward
from engine.core.request_state import RequestState
from engine.core.verify_forward import Verify
from engine.hidden import split_forward
from engine.requests import SpecMethod
from engine.sampling import sample_positions, sample_rows
from engine.speculative.rollback import rollback_rows


class DecodeBatch:
    """Rows decoding together: their batched cache, pending inputs and cache lengths."""

    def __init__(self, model: Any, kv: KVQuant | None = None) -> None:
        self.model = model
        self.kv = kv  # KV cache quantization settings, None: off
        self.rows: list[RequestState] = []
        self.lengths: list[int] = []  # positions each row holds in the cache
        self.cache: list[Any] | None = None
        self.inputs: mx.array | None = None  # [B] next input tokens, possibly not yet evaluated
        self.input_is_sampled: list[bool] = []  # True: the pending input is a new token to emit
        self.sample_failures: dict[int, str] = {}  # rows whose last sampling raised
        # Recurrent layers (engine/cache/recurrent.py): a row whose draft was not all kept gets
        # its state recomputed from the verify forward's inputs where the layers allow it, else
        # feeds its kept tokens again, before its pending input, with the next forward.
        self.recurrent = False
        self.recompute = recurrent_capture.enabled()
        # a model whose recurrent layers take a row's padding into its state (they ignore
        # `lengths`): every padded row is recomputed after a verify forward, never replayed
        # (engine/core/batch_check.py, `recompute_undoes_padding`)
        self.padding_enters_state = False
        self.replay: list[list[int]] = []
        self._verify: Verify | None = None
        # the last verify round, until the next forward or a change of rows: a row leaving
        # right after it can be stored at an earlier position of that round (`extract_at`)
        self._last_round: Verify | None = None
        self.unbatched = False  # the one row decodes on its own (unmergeable) cache
        self.solo = False  # the one row decodes on its own plain KVCache (see above)
        # Some row's drafter reads the target's hidden states (engine/hidden.py): forwards
        # also give them, as `step_hidden` ([B, 1, d] at `step_starts`) and Verify.hidden.
        self.wants_hidden = False
        self.step_hidden: mx.array | None = None
        self.step_starts: list[int] = []
        self.rider_states: list[mx.array | None] = []  # the last step's riders' hidden states

    def __len__(self) -> int:
        return len(self.rows)

    def index(self, state: RequestState) -> int:
        return next(i for i, row in enumerate(self.rows) if row is state)

    # -- membership ------------------------------------------------------------------------------

    def add(self, state: RequestState, row_cache: list[Any], last_prompt_token: int) -> None:
        self.add_rows([state], [row_cache], [last_prompt_token])

    def add_rows(
        self, states: list[RequestState], row_caches: list[list[Any]], last_tokens: list[int]
    ) -> None:
        """Rows join together: their caches are merged into one batch cache per layer (left
        padded, as mlx-lm's BatchGenerator admits a prefill batch), which then extends the
        running batch once per layer; one row at a time would copy the batch once per row."""
        if not states:
            return
        self._last_round = None
        if self.solo:
            self._leave_solo()
        if not self.rows and len(states) == 1 and self._may_run_solo(states[0], row_caches[0]):
            batch_cache, self.solo = row_caches[0], True
        else:
            try:
                batch_cache = merge_row_caches(row_caches)
            except Exception:
                if self.rows or len(states) > 1:
                    raise
                # caches mlx-lm cannot batch (ChunkedKVCache, a model's own kind): such a model
                # runs one row at a time (engine/core/batch_check.py), on the row's own cache
                batch_cache, self.unbatched = row_caches[0], True
        if self.cache is None or not self.rows:
            self.cache = batch_cache
            self.recurrent = has_recurrent(batch_cache)
            if self.recurrent and self.recompute:
                recurrent_capture.install()  # the model's module is imported by now
        else:
            self.cache = [extend_layer(m, t) for m, t in zip(self.cache, batch_cache)]
        quantize_batch_cache(self.cache, self.kv)
        tokens = mx.array(last_tokens, dtype=mx.uint32)
        self.inputs = tokens if self.inputs is None else mx.concatenate([self.inputs, tokens])
        self.rows.extend(states)
        self.lengths.extend(len(s.prompt) - 1 for s in states)
        self.input_is_sampled.extend(False for _ in states)
        self.replay.extend([] for _ in states)

    def keep(self, indices: list[int]) -> None:
        """Keep only these rows (in this order)."""
        if indices == list(range(len(self.rows))):
            return
        self._last_round = None
        self.sample_failures = {}
        if not indices:
            self.rows, self.lengths, self.cache, self.inputs = [], [], None, None
            self.input_is_sampled, self.replay, self.unbatched = [], [], False
            self.solo = False
            return
        self.rows = [self.rows[i] for i in indices]
        self.replay = [self.replay[i] for i in indices]
        self.lengths = [self.lengths[i] for i in indices]
        self.input_is_sampled = [self.input_is_sampled[i] for i in indices]
        assert self.inputs is not None and self.cache is not None
        self.inputs = self.inputs[mx.array(indices)]
        for layer in self.cache:
            layer.filter(indices)
        if len(self.rows) == 1:
            self._enter_solo()

    def remove(self, states: list[RequestState]) -> None:
        gone = {id(s) for s in states}
        self.keep([i for i, row in enumerate(self.rows) if id(row) not in gone])

    def extract(self, state: RequestState) -> list[Any]:
        """Single-row copies of one row's caches (for the prompt cache)."""
        i = self.index(state)
        if self.unbatched or self.solo:
            return list(self.cache)
        return [layer.extract(i) for layer in self.cache]

    def extract_at(self, state: RequestState, positions: int) -> list[Any] | None:
        """Single-row copies of one row's caches holding only its first `positions` positions
        (a row that finished inside its draft, or before a round queued ahead): KV caches are
        trimmed; recurrent state, only back into the last verify round, is recomputed from that
        round's inputs; None when impossible."""
        i = self.index(state)
        held = self.lengths[i]
        if positions == held:
            return self.extract(state)
        if positions > held or self.unbatched or self.solo:
            return None
        last = self._last_round
        arrays = None
        if self.recurrent:
            if last is None or last.snapshot is None or positions < last.starts[i]:
                return None
            arrays = last.snapshot.row_arrays_at(last.capture, i, positions - last.starts[i])
            if arrays is None:
                return None
        caches = self.extract(state)
        recurrent = iter(arrays or [])
        for layer in leaves(caches):
            if is_recurrent(layer):
                for slot, value in next(recurrent).items():
                    layer.cache[slot] = value
            elif layer.is_trimmable():
                layer.trim(held - positions)
            else:
                return None
        return caches

    # -- one row on its own plain cache ----------------------------------------------------------

    def _may_run_solo(self, state: RequestState, row_cache: list[Any]) -> bool:
        return (
            self.kv is None
            and SpecMethod(state.request.speculative.method) is SpecMethod.OFF
            and all(type(layer) is KVCache for layer in row_cache)
        )

    def _enter_solo(self) -> None:
        """The last row left alone takes its cache out of the batch (one copy)."""
        batched = (RaggedBatchKVCache, BatchKVCache)
        if (
            self.unbatched
            or self.replay[0]
            or self.kv is not None
            or SpecMethod(self.rows[0].request.speculative.method) is not SpecMethod.OFF
            or not all(type(layer) in batched for layer in self.cache)
        ):
            return
        self.cache = [layer.extract(0) for layer in self.cache]
        self.solo = True

    def _leave_solo(self) -> None:
        """The row on its own cache joins a batch cache (another row joins, or it drafts)."""
        self.cache = merge_row_caches([self.cache])
        self.solo = False

    # -- plain decoding --------------------------------------------------------------------------

    def step_launch(
        self,
        riders: list[Part] | None = None,
        *,
        rider_hidden: bool = False,
        histories: list[list[int]] | None = None,
    ) -> tuple[mx.array, list[bool]]:
        """Queue one decode step (pipelined); `step_collect` then reads back what the previous
        step produced. Returns what `step_collect` needs. `riders`: prompt chunks that share the
        step's forward (engine/core/packed_forward.py); their hidden states, when
        `rider_hidden`, are left in `rider_states`. `histories`: each row's tokens up to its
        pending input, where the rows' states lag behind (a repetition penalty reads them)."""
        assert self.inputs is not None
        self._last_round = None
        inputs, fresh = self.inputs, self.input_is_sampled
        if histories is not None:
            contexts = [r.sampler.step_context(h, None) for r, h in zip(self.rows, histories)]
        else:
            contexts = [
                row.sampler.step_context(row.history, inputs[i : i + 1] if fresh[i] else None)
                for i, row in enumerate(self.rows)
            ]
        hidden, logits = self._forward(inputs[:, None], riders, rider_hidden)
        logits = logits[:, -1, :]
        quantize_batch_cache(self.cache, self.kv)
        # the token sampled now follows the pending input when that is a new token too
        positions = [len(r.generated) + f for r, f in zip(self.rows, fresh)]
        sampled, failures = sample_rows(logits, [r.sampler for r in self.rows], contexts, positions)
        mx.async_eval(sampled, *([hidden] if hidden is not None else []))
        self.step_hidden, self.step_starts = hidden, list(self.lengths)
        self.lengths = [n + 1 for n in self.lengths]
        self.inputs = sampled
        self.input_is_sampled = [True] * len(self.rows)
        self.sample_failures = failures
        return inputs, fresh

    def step_collect(self, launched: tuple[mx.array, list[bool]]) -> list[tuple[RequestState, int]]:
        """The (row, token) pairs the step before `launched` produced."""
        inputs, fresh = launched
        known = inputs.tolist()
        return [(row, token) for row, token, f in zip(self.rows, known, fresh) if f]

    def flush(self) -> list[tuple[RequestState, int]]:
        """Read back pending sampled inputs; returns the (row, token) pairs to emit."""
        if not any(self.input_is_sampled):
            return []
        assert self.inputs is not None
        known = self.inputs.tolist()
        out = [(r, t) for r, t, fresh in zip(self.rows, known, self.input_is_sampled) if fresh]
        self.input_is_sampled = [False] * len(self.rows)
        return out

    def pending_tokens(self) -> list[int]:
        """Each row's pending input (call `flush` first)."""
        assert self.inputs is not None and not any(self.input_is_sampled)
        return self.inputs.tolist()

    # -- verify rounds ---------------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        """Some row has kept tokens to feed again (recurrent layers only)."""
        return any(self.replay)

    def verify_launch(
        self,
        pending: list[int],
        drafts: list[list[int]],
        riders: list[Part] | None = None,
        *,
        rider_hidden: bool = False,
    ) -> Verify:
        """Queue one target forward over every row's replayed tokens, pending input and draft
        (right-padded), and return at once so host work can overlap it. `riders` as in
        `step_launch` (not beside recurrent layers: their capture would take the chunks in)."""
        assert not (riders and self.recurrent)
        self._last_round = None
        if self.solo:
            self._leave_solo()
        x = [r + [t] + d for r, t, d in zip(self.replay, pending, drafts)]
        width = max(len(row) for row in x)
        snapshot = None
        if self.recurrent:
            snapshot = RecurrentSnapshot.take(self.cache)
            padded = any(len(row) < width for row in x)
            set_lengths(self.cache, [len(row) for row in x] if padded else None)
        tokens = mx.array([row + [0] * (width - len(row)) for row in x], dtype=mx.uint32)
        try:
            with recurrent_capture.capturing(self.recurrent and self.recompute) as capture:
                hidden, logits = self._forward(tokens, riders, rider_hidden)
        finally:
            if self.recurrent:
                set_lengths(self.cache, None)
        mx.async_eval(logits, *([hidden] if hidden is not None else []))
        starts = list(self.lengths)
        self.lengths = [n + width for n in self.lengths]
        self._verify = Verify(x, drafts, logits, snapshot, starts, hidden, capture)
        return self._verify

    @launching_early  # the first layers run while the host builds the rest
    def _forward(
        self, tokens: mx.array, riders: list[Part] | None = None, rider_hidden: bool = False
    ) -> tuple[mx.array | None, mx.array]:
        if riders:
            parts = [Part(tokens, self.cache), *riders]
            wanted = self.wants_hidden or rider_hidden
            (hidden, logits), *rest = packed_forward(self.model, parts, hidden=wanted)
            self.rider_states = [h for h, _ in rest]
            return (hidden if self.wants_hidden else None), logits
        if self.wants_hidden:
            return split_forward(self.model, tokens, self.cache)
        return None, self.model(tokens, cache=self.cache)

    def verify_collect(
        self, pending: Verify, histories: list[list[int]]
    ) -> tuple[list[list[int] | None], dict[int, str]]:
        """The target's tokens at positions 0..len(draft) of each row's draft (None for a row
        whose sampling failed, with its message); `histories[i]` ends with row i's pending
        input."""
        start = time.perf_counter()
        mx.eval(pending.logits)
        pending.wait_s = time.perf_counter() - start
        contexts = [
            row.sampler.draft_contexts(history, d)
            for row, history, d in zip(self.rows, histories, pending.drafts)
        ]
        lengths = [len(d) + 1 for d in pending.drafts]
        starts = [len(r) for r in self.replay]
        positions = [len(h) - len(r.prompt) for r, h in zip(self.rows, histories)]
        return sample_positions(
            pending.logits, [r.sampler for r in self.rows], contexts, lengths, positions, starts
        )

    def rollback(self, kept: list[int], next_inputs: list[int]) -> None:
        """Keep row i's replayed tokens, its pending input and the first `kept[i] - 1` draft
        tokens; give back the rest of what the round wrote; feed `next_inputs` next. With
        recurrent layers, a row that did not keep its whole draft gets its state recomputed
        from what the forward fed it, or (layers that do not allow it) goes back to its state
        from before the round and replays what it kept with the next forward."""
        verify = self._verify
        width = max(len(row) for row in verify.x)
        fed = [len(r) + k for r, k in zip(self.replay, kept)]
        ends = [width if self.padding_enters_state else len(row) for row in verify.x]
        short = [n < end for n, end in zip(fed, ends)]
        recomputed = (
            self.recurrent
            and verify.snapshot is not None
            and verify.snapshot.recompute_rows(verify.capture, fed, short)
        )
        if self.padding_enters_state and any(short) and not recomputed:
            raise RuntimeError("the recurrent state of padded rows could not be recomputed")
        surplus, restore = [], []
        for i, (row, k) in enumerate(zip(verify.x, kept)):
            committed = len(self.replay[i]) + k
            if self.recurrent and short[i] and not recomputed:
                surplus.append(width)
                restore.append(True)
                self.replay[i] = row[:committed]
            else:
                surplus.append(width - committed)
                restore.append(False)
                self.replay[i] = []
        rollback_rows(self.cache, surplus)
        if verify.snapshot is not None:
            verify.snapshot.restore_rows(restore)
        quantize_batch_cache(self.cache, self.kv)
        self.lengths = [n - s for n, s in zip(self.lengths, surplus)]
        self.inputs = mx.array(next_inputs, dtype=mx.uint32)
        self.input_is_sampled = [False] * len(self.rows)
        self._verify, self._last_round = None, verify
        mx.async_eval(*cache_arrays(self.cache))
