"""Continuous batching: admission, chunked prefill and decode steps, one thread, no Qt.

Each `step()` has vLLM's shape: schedule (admit waiting requests), run (one decode or verify
round of the running batch, then one chunk of prompt processing), update (turn new tokens into
events, finish rows; engine/outputs.py). As `mlx_lm.generate` does, a request's prompt is
processed up to its last token (after the longest prefix the prompt cache restores); the last
token joins the running batch as the row's first input.
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
from engine.outputs import OutputProcessor
from engine.prefill import ensure_caches, plan_chunks, prefill_alone, prefill_together
from engine.prompt import build_prompt
from engine.request_state import RequestState
from engine.requests import (
    ErrorEvent,
    Event,
    FinishReason,
    GenerationRequest,
    PrefillProgressEvent,
    RequestStatus,
    SpecStats,
)
from engine.sampling import RowSampler, validate_sampling
from engine.speculative.round_stats import record_round
from engine.speculative.speculator import Speculator
from engine.step_timing import StepTiming
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
        self.out = OutputProcessor(
            set(target.tokenizer.eos_token_ids), stats_interval_s=self.config.stats_interval_s
        )
        self.steps = 0
        self.timing = StepTiming()
        self._deferred: list[RequestState] = []  # rows whose last round's text is not out yet
        self._cancelled: set[str] = set()

    # -- queries -------------------------------------------------------------------------------

    @property
    def context_length(self) -> int | None:
        return self.config.max_context or self.target.info.context_length

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or len(self.batch))

    @property
    def generated_tokens(self) -> int:
        return self.out.generated_tokens

    def spec_snapshot(self) -> SpecStats:
        """Speculation totals: finished requests plus the rows still running."""
        total = copy.deepcopy(self.out.spec_totals)
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
        if self._deferred and (self._cancelled or not self._will_speculate()):
            self._flush_deferred()
        self._apply_cancellations()
        self._admit()
        if len(self.batch):
            self._decode()
        if self.prefilling:
            self._prefill()
        self.steps += 1
        if self.steps % DEFAULT_CLEAR_CACHE_EVERY == 0:
            mx.clear_cache()
        return self.out.take()

    def _will_speculate(self) -> bool:
        return bool(self.batch.rows) and self.speculator.active(self.batch.rows)

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
        ready = list(self.prefilling)
        if self.reuse is not None:  # before planning: a hit shortens what is left to process
            # a request whose entry is being read from disk waits, unless nothing else runs
            wait = not self.batch.rows
            ready = self.reuse.restore_all(ready, with_draft=draft is not None, wait=wait)
        group = plan_chunks(ready, self.config.prefill_chunk, self.config.max_batch)
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
                self.out.events.append(
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
        self.out.fail(state, f"prompt processing failed: {exc}")

    def _decode(self) -> None:
        try:
            if self.speculator.active(self.batch.rows):
                self._speculative_round()
            else:
                self._plain_step()
        except Exception as exc:  # noqa: BLE001 - fail the batch's rows, keep the engine
            log.exception("decode step failed")
            self._deferred = []
            rows = list(self.batch.rows)
            self.batch.keep([])
            for state in rows:
                if not state.finished:
                    self.out.fail(state, f"decoding failed: {exc}")
        self.out.emit_stats(self.batch.rows)

    def _plain_step(self) -> None:
        batch_size = len(self.batch.rows)
        start = time.perf_counter()
        produced = self.batch.step()
        # pipelined: a step waits for the previous forward, so its length is about one forward
        self.speculator.costs.record(batch_size, 1, time.perf_counter() - start)
        for state in self.batch.rows:
            state.stats.spec.target_forwards += 1
        self._accept_all([(state, [token], [False]) for state, token in produced])
        self.timing.plain_steps += 1
        self.timing.plain_s += time.perf_counter() - start

    def _speculative_round(self) -> None:
        """Draft for every row that speculates, verify all rows in one target forward, keep
        each row's accepted prefix plus the target's own next token, roll back the rest.

        The text of the previous round's tokens is made while this round's forward runs."""
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
            self._flush_deferred()
            self._plain_step()
            return
        pending = self.batch.verify_launch(drafts, by_model)
        t_launched = time.perf_counter()
        stopped = {id(s) for s in self._stream_deferred()}  # overlaps the forward
        t_streamed = time.perf_counter()
        drafts, targets = self.batch.verify_collect(pending)
        t2 = time.perf_counter()
        draft_s = (t1 - t0) + self.batch.last_draft_s
        sample_s = self.batch.last_sample_s
        verify_s = t_launched - t1 - self.batch.last_draft_s + self.batch.last_wait_s
        width = max(len(d) for d in drafts)
        self.speculator.costs.record(len(rows), width + 1, verify_s)
        timing = self.timing
        timing.verify_rounds += 1
        timing.plan_s += t1 - t0
        timing.draft_model_s += self.batch.last_draft_s
        timing.forward_s += verify_s
        timing.sample_s += sample_s
        kept, next_inputs, outcomes = [], [], []
        for row, draft, target in zip(rows, drafts, targets):
            accepted = 0
            while accepted < len(draft) and draft[accepted] == target[accepted]:
                accepted += 1
            kept.append(accepted + 1)
            next_inputs.append(target[accepted])
            if id(row) in stopped:
                continue  # a stop string ended it last round; it leaves with this round
            outcomes.append((row, target[: accepted + 1], [True] * accepted + [False]))
            record_round(
                row.stats.spec,
                draft,
                accepted,
                draft_s=draft_s,
                verify_s=verify_s,
                sample_s=sample_s,
            )
            self.speculator.observe(row, draft, accepted)
        self.batch.rollback(kept, next_inputs)
        t3 = time.perf_counter()
        done = [row for row in rows if id(row) in stopped]
        for row, tokens, drafted in outcomes:
            ended = self.out.record(row, tokens, drafted)
            # a row that ended, or the reply's first tokens, stream now; the rest next round
            if ended or row.unstreamed == len(row.generated):
                if self.out.stream(row):
                    done.append(row)
            else:
                self._deferred.append(row)
        if done:
            self._publish(done)
            self.batch.remove(done)
        timing.rollback_s += t3 - t2
        timing.output_s += (t_streamed - t_launched) + (time.perf_counter() - t3)

    def _stream_deferred(self) -> list[RequestState]:
        """Text for the tokens the last round recorded; returns the rows that it ended."""
        rows, self._deferred = self._deferred, []
        return [s for s in rows if not s.finished and s.unstreamed and self.out.stream(s)]

    def _flush_deferred(self) -> None:
        done = self._stream_deferred()
        if done:
            self._publish(done)
            self.batch.remove(done)

    def _accept_all(self, produced: list[tuple[RequestState, list[int], list[bool]]]) -> None:
        done = [
            state for state, tokens, drafted in produced if self.out.accept(state, tokens, drafted)
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

    def _apply_cancellations(self) -> None:
        if not self._cancelled:
            return
        ids, self._cancelled = self._cancelled, set()
        for queue in (self.waiting, self.prefilling):
            for state in [s for s in queue if s.request_id in ids]:
                queue.remove(state)
                state.cache = None
                self.out.finish(state, FinishReason.CANCELLED)
        gone = [s for s in self.batch.rows if s.request_id in ids]
        if gone:
            self._publish(gone)
            self.batch.remove(gone)
            for state in gone:
                self.out.cancel(state)

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
