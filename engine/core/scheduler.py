"""Continuous batching's bookkeeping: which requests wait, are prefilled, run and leave; what each
step runs (`schedule`); and what it produced, applied to the requests (`update`). It never
touches a model (engine/core/executor.py does), as vLLM v1's scheduler.

As `mlx_lm.generate` does, a request's prompt is processed up to its last token (after the
longest prefix the prompt cache restores); the last token joins the running batch as the row's
first input. A verify round's text is made while the next forward runs (`stream_deferred`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from engine.config import EngineConfig
from engine.core.bursts import DEFAULT_BURST_S, owed_a_gap
from engine.core.outputs import OutputProcessor
from engine.core.prefill_pacer import PrefillPacer
from engine.core.request_state import RequestState
from engine.core.step_plan import DecodeRow, PrefillChunk, StepOutput, StepPlan, TokenRun
from engine.core.step_timing import StepTiming
from engine.device import on_cuda
from engine.prompt import build_prompt
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
from engine.speculative import metrics
from engine.speculative.plain_estimate import PlainEstimate, note_runs
from engine.speculative.policy import SpeculationPolicy
from engine.text_stream import TextStream

log = logging.getLogger(__name__)

# prompts prefilled in one step share a forward padded to the widest, over their caches merged:
# a chunk beside another is at most this many times the step's first (shortest) one, and so is
# the cache it extends, or the floor (a burst of chat prompts of unlike lengths still goes in one
# forward). A chat's 4 last tokens beside a 1,900-token prompt's chunk took 1.0 s on the CPU,
# where either alone rides on the decode step's forward for 0.2-0.3 s.
DEFAULT_PREFILL_WIDTH_SPREAD = 2
DEFAULT_PREFILL_WIDTH_FLOOR = 64


class Scheduler:
    """The engine's requests, their queues and their life cycle."""

    def __init__(self, target: Any, *, config: EngineConfig, policy: SpeculationPolicy) -> None:
        self.target = target  # engine.models.LoadedModel: its tokenizer and info
        self.config = config
        self.policy = policy
        self.waiting: deque[RequestState] = deque()
        self.prefilling: list[RequestState] = []
        self.pacer = PrefillPacer(
            max_chunk=config.step_prefill_chunk(),
            gap_factor=config.prefill_gap_factor,
            pow2=on_cuda() if config.prefill_pow2 is None else config.prefill_pow2,
        )
        # the model's output depends on how a prompt is chunked (engine/core/batch_check.py): each
        # prompt goes in mlx_lm.generate's chunks, whole `prefill_chunk`s from its start, unpaced
        self.reference_chunks = False
        self.running: list[RequestState] = []  # in the executor's batch
        self._leaving: list[RequestState] = []  # ended; the executor still holds their caches
        self._deferred: list[RequestState] = []  # rows whose last round's text is not out yet
        self._admit_again: list[RequestState] = []  # their cached prefix is still read from disk
        self._cancelled: set[str] = set()
        self.out = OutputProcessor(
            set(target.tokenizer.eos_token_ids), stats_interval_s=config.stats_interval_s
        )
        self.timing = StepTiming()
        self.steps = 0
        self.burst_s = DEFAULT_BURST_S  # engine/core/bursts.py; < 0: no bursts (benchmarks)

    # -- queries -------------------------------------------------------------------------------

    @property
    def context_length(self) -> int | None:
        return self.config.max_context or self.target.info.context_length

    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.running or self._leaving)

    def states(self) -> list[RequestState]:
        """Every request it holds that has not ended: waiting, prefilling, running."""
        return [*self.waiting, *self.prefilling, *self.running]

    def counts(self) -> tuple[int, int]:
        """(running, waiting): running includes rows being prefilled."""
        return len(self.running) + len(self.prefilling), len(self.waiting)

    def spec_snapshot(self) -> SpecStats:
        """Speculation totals: finished requests plus the rows still running."""
        total = self.out.spec_totals.copy()
        for state in self.running:
            total.add(state.stats.spec)
        return total

    # -- commands ------------------------------------------------------------------------------

    def add(
        self, request: GenerationRequest, *, draft: str | None = None, arrival: float | None = None
    ) -> list[Event]:
        """Queue a request (`draft`: the drafter name of its draft model, if it uses one;
        `arrival`: when the engine got it, if it waited for a model to load first); a request
        that cannot run ends at once with an ErrorEvent."""
        try:
            state = self._new_state(request, draft)
            if arrival is not None:
                state.arrival = arrival  # its time to first token counts the load it waited for
        except Exception as exc:  # noqa: BLE001 - any bad input fails this request only
            log.info("request %s refused: %s", request.request_id, exc)
            return [ErrorEvent(request.request_id, str(exc))]
        self.waiting.append(state)
        return []

    def cancel(self, request_id: str) -> None:
        self._cancelled.add(request_id)

    def cancel_all(self, reason: str) -> None:
        ids = [s.request_id for q in (self.waiting, self.prefilling, self.running) for s in q]
        if ids:
            log.info("cancelling %d requests: %s", len(ids), reason)
        self._cancelled.update(ids)

    def fail_all(self, message: str) -> None:
        """End every request with an error (a step failed in a way no row can be blamed for)."""
        for state in [*self.waiting, *self.prefilling, *self.running]:
            if not state.finished:
                self.out.fail(state, message)
        self.waiting.clear()
        self.prefilling, self.running, self._leaving, self._deferred = [], [], [], []

    def take_events(self) -> list[Event]:
        return self.out.take()

    # -- schedule: what the next step runs -----------------------------------------------------

    def schedule(self) -> StepPlan:
        plan = StepPlan()
        self._apply_cancellations()
        plan.leave, self._leaving = self._leaving, []
        for state in [s for s in self.prefilling if s.prompt_done and s.cache_ready]:
            self.prefilling.remove(state)
            self.running.append(state)
            state.status = RequestStatus.RUNNING
            state.joined_at = time.perf_counter()
            plan.join.append(state)
        if self.running:
            plan.decode = self._decode_rows()
        ready = [s for s in self.prefilling if s.cache_ready and self._prompt_left(s) > 0]
        plan.paced = self._owed_a_gap(ready)
        plan.prefill = self._prefill_chunks(ready, paced=plan.paced)
        plan.catch_up_s = self._catch_up_share(plan)
        plan.admit = [s for s in self._admit_again if s in self.prefilling]
        self._admit_again = []
        while self.waiting and len(self.running) + len(self.prefilling) < self.config.max_batch:
            state = self.waiting.popleft()
            state.status = RequestStatus.PREFILLING
            self.prefilling.append(state)
            plan.admit.append(state)
        self.steps += 1
        return plan

    def _decode_rows(self) -> list[DecodeRow]:
        if not self.policy.speculates(self.running):
            return [DecodeRow(state) for state in self.running]
        choices = self.policy.plan(self.running)
        for state, choice in zip(self.running, choices):
            state.stats.speculation_note = choice.note
        return [
            DecodeRow(s, c.k, c.drafter, c.note, c.lookup_first)
            for s, c in zip(self.running, choices)
        ]

    def _prefill_chunks(self, ready: list[RequestState], *, paced: bool) -> list[PrefillChunk]:
        """A step's prompt tokens: a smaller budget while other rows decode, so that they keep a
        bounded gap between tokens (engine/core/prefill_pacer.py), spent on the prompts with the
        fewest tokens left first. Oldest first, a chat's next message waited behind a long prompt
        for all of it (54 s for a 2,048-token prompt on the 2-core CPU) while its reply could
        have started at once; now a long prompt waits only for prompts shorter than its rest."""
        budget, chunks = self.pacer.budget(paced=paced), []
        # the step's prompts go in one padded forward: each like the first (DEFAULT_PREFILL_WIDTH_*)
        widest, deepest = budget, float("inf")
        for state in sorted(ready, key=self._prompt_left):  # stable: oldest first among equals
            if len(chunks) >= self.config.max_batch or budget <= 0:
                break
            if state.prefilled > deepest:  # its long cache would be merged with the first's
                continue
            todo = self._prompt_left(state)
            if self.reference_chunks:  # whole chunks or none, as mlx_lm.generate takes them
                take = min(todo, self.pacer.max_chunk)
                if take > budget:
                    continue
            else:
                take = min(todo, budget, widest)
                if take < todo and self._sliver(take, chunks):
                    break  # the rest of the budget, padded to the first's width: not worth it
            n, pad = self.pacer.fit(take, paced=paced, ends_prompt=todo <= take)
            chunks.append(PrefillChunk(state, n, pad))
            budget -= n + pad
            if len(chunks) == 1:
                widest = max(DEFAULT_PREFILL_WIDTH_SPREAD * (n + pad), DEFAULT_PREFILL_WIDTH_FLOOR)
                deepest = max(DEFAULT_PREFILL_WIDTH_SPREAD * state.prefilled, widest)
        return chunks

    @staticmethod
    def _sliver(take: int, chunks: list[PrefillChunk]) -> bool:
        """Whether `take` tokens cut short by the budget would ride in the step's padded forward
        at a fraction of its width: padded, they cost what the width does (on the CPU a burst's
        steps of 255 + 255 + 2 tokens took 7.8-8.3 s, steps of 255 + 255 3.6-4.0 s)."""
        if not chunks:
            return False
        first = chunks[0].tokens + chunks[0].pad
        return first > DEFAULT_PREFILL_WIDTH_FLOOR and take * DEFAULT_PREFILL_WIDTH_SPREAD < first

    def _owed_a_gap(self, prompts: list[RequestState]) -> bool:
        """Whether running rows wait on work for `prompts` with a bounded gap promised: rows of
        other models always, this model's unless of the prompts' burst (engine/core/bursts.py)."""
        return self.pacer.others_decoding or owed_a_gap(self.running, prompts, burst_s=self.burst_s)

    def _catch_up_share(self, plan: StepPlan) -> float | None:
        """What a draft model's catch-up on new rows may add to this step while other rows
        wait: the pacer's share, none of it when the step's prompt chunks take that share, and
        no limit for a row that decodes alone (it waits only for itself) or rows of one burst."""
        if len(plan.decode) < 2 and not self.pacer.others_decoding:
            return None
        if not self._owed_a_gap(self.running):  # one burst: none owes another
            return None
        share = self.pacer.share_s(paced=True)
        return 0.0 if share is not None and plan.prefill else share

    @staticmethod
    def _prompt_left(state: RequestState) -> int:
        """Prompt tokens still to process (the last one is the row's first input)."""
        return len(state.prompt) - 1 - state.prefilled

    def _apply_cancellations(self) -> None:
        if not self._cancelled:
            return
        ids, self._cancelled = self._cancelled, set()
        for state in [s for s in self.waiting if s.request_id in ids]:
            self.waiting.remove(state)
            self.out.finish(state, FinishReason.CANCELLED)
        for queue in (self.prefilling, self.running):
            for state in [s for s in queue if s.request_id in ids]:
                queue.remove(state)
                if state.unstreamed:  # its last round's text first
                    self.out.stream(state)
                if not state.finished:
                    self.out.cancel(state)
                self._leaving.append(state)

    # -- update: what a step produced ----------------------------------------------------------

    def update(self, plan: StepPlan, output: StepOutput) -> None:
        for rid, message in output.failed.items():
            state = self._find(rid)
            if state is not None and not state.finished:
                self.out.fail(state, message)
                self._end(state)
        for state in plan.admit:
            if state.request_id in output.cache_loading:
                self._admit_again.append(state)
                continue
            hit = output.cache_hits.get(state.request_id)
            state.cache_ready = True
            state.stats.prompt_cache_note = self.target.info.prompt_cache_note
            if hit is not None and not state.finished:
                state.prefilled = hit.tokens
                state.stats.cached_tokens = hit.tokens
                state.stats.cache_source = hit.source
        for chunk in plan.prefill:
            state = chunk.state
            if state.request_id in output.prefilled and not state.finished:
                state.prefilled = output.prefilled[state.request_id]
                self.out.events.append(
                    PrefillProgressEvent(state.request_id, state.prefilled + 1, len(state.prompt))
                )
        for batch, width, seconds in output.forward_costs:
            self.policy.costs.record(batch, width, seconds)
        self.timing.add(output.timing)
        for row in plan.decode:
            for run in output.runs.get(row.state.request_id, []):
                if row.state.finished:
                    break
                self._apply_run(row.state, run, output)
        for request_id, drafter in output.missed.items():
            self.policy.missed(request_id, drafter)
        rows = {row.state.request_id: row.state.plain for row in plan.decode}
        note_runs(len(plan.decode), output.runs, rows)
        self.out.emit_stats(self.running)

    def _apply_run(self, state: RequestState, run: TokenRun, output: StepOutput) -> None:
        drafted = [True] * run.accepted + [False] * (len(run.tokens) - run.accepted)
        used = self.out.record(state, run.tokens, drafted)
        metrics.record_forward(state.stats.spec, emitted=used, saved=min(run.accepted, used))
        if run.draft is None:
            if self.out.stream(state):
                self._end(state)
            return
        metrics.record_round(
            state.stats.spec,
            run.draft,
            run.accepted,
            draft_s=output.draft_s,
            verify_s=output.verify_s,
            sample_s=output.sample_s,
            drafter=run.drafter_kind,
            guessed=run.guessed,
            ahead=run.ahead,
        )
        if not run.guessed:
            state.recent.add(len(run.draft), run.accepted)
            self.policy.observe(state.request_id, len(run.draft), run.accepted, drafter=run.drafter)
        # a row that ended, the reply's first tokens and rows with stop strings (found now, the
        # row ends before its next round) stream now; the rest while the next forward runs
        if (
            state.ends_with is not None
            or state.unstreamed == len(state.generated)
            or state.text.stop
        ):
            if self.out.stream(state):
                self._end(state)
        elif state not in self._deferred:
            self._deferred.append(state)

    def stream_deferred(self) -> None:
        """Text for the tokens the last round recorded (run while the next forward runs)."""
        rows, self._deferred = self._deferred, []
        for state in rows:
            if not state.finished and state.unstreamed and self.out.stream(state):
                self._end(state)

    def _end(self, state: RequestState) -> None:
        """A request finished: it leaves its queue; the executor drops it next step."""
        for queue in (self.prefilling, self.running):
            if state in queue:
                queue.remove(state)
                self._leaving.append(state)
        self.policy.forget(state.request_id)

    def _find(self, request_id: str) -> RequestState | None:
        for state in [*self.running, *self.prefilling, *self.waiting]:
            if state.request_id == request_id:
                return state
        return None

    # -- admission -----------------------------------------------------------------------------

    def _new_state(self, request: GenerationRequest, draft: str | None) -> RequestState:
        tokenizer = self.target.tokenizer
        vocab = self.target.info.vocab_size
        prompt = build_prompt(request, tokenizer, vocab_size=vocab)
        validate_sampling(request.sampling, vocab)
        self.policy.check(request.speculative, draft=draft)
        draft = self.policy.row_draft(request.speculative, draft)
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
            text=TextStream(
                tokenizer.detokenizer,
                stop=tuple(request.stop),
                continues=request.continue_reply,
            ),
            max_new_tokens=max_new,
            draft=draft,
            plain=PlainEstimate(self.policy.costs),
        )
        state.stats.prompt_tokens = len(prompt)
        return state
