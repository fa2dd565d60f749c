"""Continuous batching: admission, chunked prefill and decode steps, one thread, no Qt.

Each `step()` has vLLM's shape: schedule (admit waiting requests), run (one prefill chunk and one
decode step of the running batch), update (turn new tokens into events, finish rows). Requests
are prefilled alone, exactly as `mlx_lm.generate` does (all prompt tokens but the last, in chunks),
then join the running batch with their last prompt token as input.
"""

from __future__ import annotations

import copy
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mlx.core as mx

from engine.batch import DecodeBatch
from engine.cache.kv_quant import KVQuant
from engine.prefill import ensure_caches, plan_chunks, prefill_alone, prefill_together
from engine.prompt import build_prompt
from engine.request_state import RequestState
from engine.requests import (
    ErrorEvent,
    Event,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    PrefillProgressEvent,
    RequestStats,
    RequestStatus,
    SpecStats,
    StatsEvent,
    TokenEvent,
)
from engine.sampling import RowSampler, validate_sampling
from engine.speculative.speculator import Speculator
from engine.text_stream import TextStream

if TYPE_CHECKING:
    from engine.cache.reuse import PromptReuse
    from engine.models import LoadedModel

log = logging.getLogger(__name__)

DEFAULT_PREFILL_CHUNK = 512
DEFAULT_MAX_BATCH = 16
DEFAULT_STATS_INTERVAL_S = 0.25
DEFAULT_CLEAR_CACHE_EVERY = 256


@dataclass(frozen=True)
class SchedulerConfig:
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    max_batch: int = DEFAULT_MAX_BATCH
    stats_interval_s: float = DEFAULT_STATS_INTERVAL_S
    max_context: int | None = None  # overrides the model's own context length
    kv_bits: int | None = None  # KV cache quantization (engine/cache/kv_quant.py); None: off
    kv_group_size: int = 64
    kv_start: int = 0  # quantize once a cache holds this many positions


class Scheduler:
    def __init__(
        self,
        target: LoadedModel,
        *,
        config: SchedulerConfig | None = None,
        reuse: PromptReuse | None = None,
    ) -> None:
        self.target = target
        self.reuse = reuse
        self.config = config or SchedulerConfig()
        self.waiting: deque[RequestState] = deque()
        self.prefilling: deque[RequestState] = deque()
        self.batch = DecodeBatch(target.model, kv=KVQuant.of(self.config))
        self.speculator = Speculator(vocab_size=target.info.vocab_size)
        self._pending_draft: tuple[object | None] | None = None
        self.steps = 0
        self.generated_tokens = 0
        self.spec_totals = SpecStats()
        self._cancelled: set[str] = set()
        self._events: list[Event] = []

    # -- queries -------------------------------------------------------------------------------

    @property
    def context_length(self) -> int | None:
        return self.config.max_context or self.target.info.context_length

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or len(self.batch))

    def spec_snapshot(self) -> SpecStats:
        """Speculation totals: finished requests plus the rows still running."""
        total = copy.deepcopy(self.spec_totals)
        for state in self.batch.rows:
            total.add(state.stats.spec)
        return total

    def counts(self) -> tuple[int, int]:
        """(running, waiting): running includes rows being prefilled."""
        return len(self.batch) + len(self.prefilling), len(self.waiting)

    # -- commands ------------------------------------------------------------------------------

    def add(self, request: GenerationRequest) -> list[Event]:
        """Queue a request; a request that cannot run ends at once with an ErrorEvent."""
        try:
            state = self._new_state(request)
        except Exception as exc:  # noqa: BLE001 - any bad input fails this request only
            log.info("request %s refused: %s", request.request_id, exc)
            return [ErrorEvent(request.request_id, str(exc))]
        self.waiting.append(state)
        return []

    def cancel(self, request_id: str) -> None:
        self._cancelled.add(request_id)

    def cancel_all(self, reason: str) -> None:
        ids = [s.request_id for q in (self.waiting, self.prefilling) for s in q]
        ids += [s.request_id for s in self.batch.rows]
        if ids:
            log.info("cancelling %d requests: %s", len(ids), reason)
        self._cancelled.update(ids)

    # -- the step ------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """Do one round of work; return the events it produced."""
        self._events = []
        self._apply_cancellations()
        self._admit()
        if len(self.batch):
            self._decode()
        if self.prefilling:
            self._prefill()
        self.steps += 1
        if self.steps % DEFAULT_CLEAR_CACHE_EVERY == 0:
            mx.clear_cache()
        return self._events

    def set_draft(self, drafter: object | None) -> None:
        """Use this draft model (or none) from the next request on: it is installed once the
        running batch has drained, since its cache must hold every running row."""
        self._pending_draft = (drafter,)
        self.speculator.draft_available = drafter is not None

    def _admit(self) -> None:
        if self._pending_draft is not None:
            if len(self.batch) or self.prefilling:
                return  # let the current rows finish first
            (drafter,) = self._pending_draft
            self._pending_draft = None
            self.batch.draft = drafter
            self.speculator.draft = drafter
            if self.reuse is not None:
                self.reuse.set_draft(drafter)
        while self.waiting and len(self.batch) + len(self.prefilling) < self.config.max_batch:
            state = self.waiting.popleft()
            state.status = RequestStatus.PREFILLING
            self.prefilling.append(state)

    def _prefill(self) -> None:
        """Spend up to one chunk of prompt tokens on the oldest requests, in one forward."""
        model, draft, kv = self.target.model, self.batch.draft, self.batch.kv
        if self.reuse is not None:  # before planning: a hit shortens what is left to process
            for state in self.prefilling:
                if state.cache is None and not state.cache_checked:
                    state.cache_checked = True
                    self.reuse.restore(state, with_draft=draft is not None)
        group = plan_chunks(list(self.prefilling), self.config.prefill_chunk, self.config.max_batch)
        working = []
        for state, n in group:
            try:
                ensure_caches(state, model, draft, kv)
                working.append((state, n))
            except Exception as exc:  # noqa: BLE001 - a failing prompt fails only its request
                self._prefill_failed(state, exc)
        busy = [(s, n) for s, n in working if n > 0]
        if len(busy) > 1:
            try:  # what is left (no partner, a failed forward) runs alone
                busy = prefill_together(busy, model, draft, kv)
            except Exception:  # noqa: BLE001 - retry alone, so only the bad prompt fails
                log.exception("batched prefill failed; retrying the prompts one by one")
        for state, n in busy:
            try:
                prefill_alone(state, n, model, draft, kv)
            except Exception as exc:  # noqa: BLE001 - a failing prompt fails only its request
                self._prefill_failed(state, exc)
        for state, n in working:
            if state.finished:
                continue
            if n:
                self._events.append(
                    PrefillProgressEvent(state.request_id, state.prefilled + 1, len(state.prompt))
                )
            if state.prefilled >= len(state.prompt) - 1:
                self.prefilling.remove(state)
                self.batch.add(state, state.cache, state.prompt[-1], state.draft_cache)
                state.cache = state.draft_cache = None
                state.status = RequestStatus.RUNNING

    def _prefill_failed(self, state: RequestState, exc: Exception) -> None:
        log.exception("prefill failed for %s", state.request_id)
        if state in self.prefilling:
            self.prefilling.remove(state)
        state.cache = state.draft_cache = None
        self._fail(state, f"prompt processing failed: {exc}")

    def _decode(self) -> None:
        try:
            if self.speculator.active(self.batch.rows):
                self._speculative_round()
            else:
                self._plain_step()
        except Exception as exc:  # noqa: BLE001 - fail the batch's rows, keep the engine
            log.exception("decode step failed")
            rows = list(self.batch.rows)
            self.batch.keep([])
            for state in rows:
                if not state.finished:
                    self._fail(state, f"decoding failed: {exc}")
        self._emit_stats()

    def _plain_step(self) -> None:
        batch_size = len(self.batch.rows)
        start = time.perf_counter()
        produced = self.batch.step()
        # pipelined: a step waits for the previous forward, so its length is about one forward
        self.speculator.costs.record(batch_size, 1, time.perf_counter() - start)
        for state in self.batch.rows:
            state.stats.spec.target_forwards += 1
        self._accept_all([(state, [token], [False]) for state, token in produced])

    def _speculative_round(self) -> None:
        """Draft for every row that speculates, verify all rows in one target forward, keep
        each row's accepted prefix plus the target's own next token, roll back the rest."""
        self._accept_all([(state, [token], [False]) for state, token in self.batch.flush()])
        if not self.batch.rows:
            return
        rows = list(self.batch.rows)
        t0 = time.perf_counter()
        plans = self.speculator.plan(rows)
        by_model = [
            p.k if p.drafter is not None and p.drafter is self.batch.draft else 0 for p in plans
        ]
        drafts = [
            p.drafter.propose(row, p.k)[: p.k] if p.drafter is not None and p.k and not k else []
            for row, p, k in zip(rows, plans, by_model)
        ]
        t1 = time.perf_counter()
        if not any(drafts) and not any(by_model):
            self._plain_step()
            return
        drafts, targets = self.batch.verify(drafts, by_model)
        t2 = time.perf_counter()
        draft_s = (t1 - t0) + self.batch.last_draft_s
        verify_s = t2 - t1 - self.batch.last_draft_s
        width = max(len(d) for d in drafts)
        self.speculator.costs.record(len(rows), width + 1, verify_s)
        kept, next_inputs, outcomes = [], [], []
        for row, draft, target in zip(rows, drafts, targets):
            accepted = 0
            while accepted < len(draft) and draft[accepted] == target[accepted]:
                accepted += 1
            kept.append(accepted + 1)
            next_inputs.append(target[accepted])
            outcomes.append((row, target[: accepted + 1], [True] * accepted + [False]))
            self._record_round(row, draft, accepted, draft_s, verify_s)
            self.speculator.observe(row, draft, accepted)
        self.batch.rollback(kept, next_inputs)
        self._accept_all(outcomes)

    def _record_round(
        self, row: RequestState, draft: list[int], accepted: int, draft_s: float, verify_s: float
    ) -> None:
        spec = row.stats.spec
        spec.target_forwards += 1
        spec.draft_time_s += draft_s
        spec.verify_time_s += verify_s
        if not draft:
            return
        spec.rounds += 1
        spec.draft_tokens += len(draft)
        spec.accepted_tokens += accepted
        for pos in range(len(draft)):
            if len(spec.drafted_by_position) <= pos:
                spec.drafted_by_position.append(0)
                spec.accepted_by_position.append(0)
            spec.drafted_by_position[pos] += 1
            spec.accepted_by_position[pos] += pos < accepted

    def _accept_all(self, produced: list[tuple[RequestState, list[int], list[bool]]]) -> None:
        done = [
            state
            for state, tokens, drafted in produced
            if self._accept_tokens(state, tokens, drafted)
        ]
        if done:
            self._publish(done)
            self.batch.remove(done)

    def _publish(self, states: list[RequestState]) -> None:
        if self.reuse is None:
            return
        for state in states:
            try:
                target, draft = self.batch.extract(state)
            except Exception:  # noqa: BLE001 - caching is best effort
                log.exception("could not extract the cache of %s", state.request_id)
                continue
            self.reuse.publish(state, target, draft)

    # -- turning tokens into events ------------------------------------------------------------

    def _accept_tokens(self, state: RequestState, tokens: list[int], drafted: list[bool]) -> bool:
        """Append new tokens to a row, stream them, and finish the row when it must end.

        Returns True when the row finished (it must then leave the batch).
        """
        now = time.perf_counter()
        if state.first_token_at is None:
            state.first_token_at = now
        eos = self.target.tokenizer.eos_token_ids
        text = []
        kept_tokens: list[int] = []
        kept_drafted: list[bool] = []
        reason = None
        eos_hit = False
        for token, from_draft in zip(tokens, drafted):
            if token in eos:
                reason, eos_hit = FinishReason.STOP, True
                break
            state.generated.append(token)
            state.from_draft.append(from_draft)
            kept_tokens.append(token)
            kept_drafted.append(from_draft)
            text.append(state.text.add(token))
            if state.text.stopped:
                reason = FinishReason.STOP
                break
            if len(state.generated) >= state.max_new_tokens:
                reason = FinishReason.LENGTH
                break
        state.stats.spec.emitted_tokens += len(kept_tokens) + eos_hit
        self.generated_tokens += len(kept_tokens)
        if reason is not None:
            text.append(state.text.finish())
        delta = "".join(text)
        if kept_tokens or delta:
            self._events.append(TokenEvent(state.request_id, kept_tokens, delta, kept_drafted))
        if reason is not None:
            self._finish(state, reason)
            return True
        return False

    def _emit_stats(self) -> None:
        now = time.perf_counter()
        for state in self.batch.rows:
            if now - state.last_stats_at >= self.config.stats_interval_s:
                state.last_stats_at = now
                self._events.append(StatsEvent(state.request_id, _copy_stats(state, now)))

    def _finish(self, state: RequestState, reason: FinishReason) -> None:
        state.finish_reason = reason
        state.status = RequestStatus.FINISHED
        stats = _copy_stats(state)
        self.spec_totals.add(stats.spec)
        self._events.append(
            FinishedEvent(state.request_id, reason, state.text.text, list(state.generated), stats)
        )

    def _fail(self, state: RequestState, message: str) -> None:
        state.finish_reason = FinishReason.ERROR
        state.status = RequestStatus.FINISHED
        self._events.append(ErrorEvent(state.request_id, message, _copy_stats(state)))

    def _apply_cancellations(self) -> None:
        if not self._cancelled:
            return
        ids, self._cancelled = self._cancelled, set()
        for queue in (self.waiting, self.prefilling):
            for state in [s for s in queue if s.request_id in ids]:
                queue.remove(state)
                state.cache = None
                self._finish(state, FinishReason.CANCELLED)
        gone = [s for s in self.batch.rows if s.request_id in ids]
        if gone:
            self._publish(gone)
            self.batch.remove(gone)
            for state in gone:
                held = state.text.finish()  # text held back (half a character, a stop prefix)
                if held:
                    self._events.append(TokenEvent(state.request_id, [], held, []))
                self._finish(state, FinishReason.CANCELLED)

    # -- admission -----------------------------------------------------------------------------

    def _new_state(self, request: GenerationRequest) -> RequestState:
        tokenizer = self.target.tokenizer
        vocab = self.target.info.vocab_size
        prompt = build_prompt(request, tokenizer, vocab_size=vocab)
        validate_sampling(request.sampling, vocab)
        self.speculator.validate(request.speculative)
        if request.max_tokens < 1:
            raise ValueError(f"max tokens must be at least 1, got {request.max_tokens}")
        max_new = request.max_tokens
        context = self.context_length
        if context is not None:
            if len(prompt) >= context:
                raise ValueError(
                    f"the prompt is {len(prompt)} tokens but the model's context holds "
                    f"{context}: shorten the conversation or start a new chat"
                )
            max_new = min(max_new, context - len(prompt))
        state = RequestState(
            request=request,
            prompt=prompt,
            sampler=RowSampler(request.sampling),
            text=TextStream(tokenizer.detokenizer, stop=tuple(s for s in request.stop if s)),
            max_new_tokens=max_new,
        )
        state.stats.prompt_tokens = len(prompt)
        return state


def _copy_stats(state: RequestState, now: float | None = None) -> RequestStats:
    return copy.deepcopy(state.refresh_stats(now))
