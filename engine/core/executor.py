"""Runs a StepPlan on the target model: rows leave (their caches go to the prompt cache) and
join, one plain or verify round of the running batch, prompt chunks, prompt-cache lookups. It
owns every MLX object (the batch's caches, the rows' prefill caches, the drafters) and reports
plain values in a StepOutput; it never changes a RequestState.

A failure stays with the row that caused it: drafting and sampling are tried per row when the
batched call raises, a forward that raises is retried row by row (engine/core/recovery.py), and a
prompt chunk that fails fails its request only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from engine.cache import LOADING
from engine.cache.kv_quant import KVQuant, quantize_row_cache
from engine.config import EngineConfig
from engine.core import packed_forward
from engine.core.batch import DecodeBatch
from engine.core.cache_handoff import publish_prompt, publish_row, restore_prefix
from engine.core.decode_attention_choice import DecodeAttentionChoice
from engine.core.drafter_feedback import DrafterFeedback, drafter_kind
from engine.core.drafter_inputs import DrafterInputs
from engine.core.lookahead import RoundsAhead
from engine.core.prefill import (
    PrefillWork,
    finish_rider,
    finish_shared,
    plan_work,
    prefill_alone,
    prefill_together,
    restore_rider,
    rider,
)
from engine.core.proposals import propose
from engine.core.recovery import failed_inputs, recover_batch
from engine.core.request_state import RequestState
from engine.core.step_plan import CacheHit, DecodeRow, StepOutput, StepPlan, TokenRun
from engine.speculative.drafter import Drafter

log = logging.getLogger(__name__)

DEFAULT_CLEAR_CACHE_EVERY = 256  # steps between MLX buffer-cache clears
DEFAULT_MAX_REPLAY = 16  # a recurrent row replaying more than this drafts nothing until it commits


class ModelExecutor:
    """The model side of the engine step (vLLM's model runner)."""

    def __init__(
        self,
        target: Any,
        *,
        config: EngineConfig,
        reuse: Any | None = None,
        drafters: dict[str, Drafter] | None = None,
    ) -> None:
        self.target = target
        self.model = target.model
        self.kv = KVQuant.of(config)
        self.reuse = reuse  # engine.cache.reuse.PromptReuse, or None
        self.drafters: dict[str, Drafter] = dict(drafters or {})
        self.batch = DecodeBatch(self.model, kv=self.kv)
        self.prefilling: dict[str, list[Any]] = {}  # request id -> its single-row cache
        self._last_drafts: dict[str, list[int]] = {}  # this round's drafts, to find a bad row
        self.steps = 0
        self.batched_prefill = True  # several prompts in one forward (engine/core/prefill.py)
        # prompt chunks ride on the decode step (engine/core/packed_forward.py); None: not
        # checked yet (checked at the first chunk beside decoding rows: no first reply waits)
        self.packing: bool | None = None if config.packed_prefill else False
        # the last step, when it only decoded: (rows, width, when it began); its cost is the
        # time to the next step's start, all of it (what auto weighs a round against a step)
        self._timed_step: tuple[int, int, float] | None = None
        self._step_shape: tuple[int, int] | None = None
        self._plain = False  # this step launched a plain decode step
        self._sharing = False  # this step's forward took prompt chunks (a failure: theirs?)
        # hidden states for rows whose drafter reads them (engine/hidden.py), drafter caches
        self.inputs = DrafterInputs(self.drafters)
        self.attention = DecodeAttentionChoice(mode=config.decode_attention_kernel)
        self.ahead = RoundsAhead(
            self.batch,
            self.drafters,
            self.inputs,
            on=config.rounds_ahead(),
            vocab_size=target.info.vocab_size,
        )

    # -- the step ------------------------------------------------------------------------------

    def execute(self, plan: StepPlan, *, while_waiting: Callable[[], None]) -> StepOutput:
        out = StepOutput()
        began = time.perf_counter()
        last = None
        if self._timed_step is not None and plan.decode:  # rows ran on: no idle time between
            rows, width, start = self._timed_step
            out.forward_costs.append((rows, width, began - start))
            last = (width, began - start)
        self.attention.step_began(last)
        self.ahead.step_began(began, decoding=bool(plan.decode))
        self._timed_step, self._step_shape, self._plain = None, None, False
        for drafter in self.drafters.values():
            drafter.pace(plan.catch_up_s)
        if plan.leave or plan.join or not plan.decode:
            self.ahead.settle(out)  # before the batch's rows change
        if plan.leave:
            self._leave(plan.leave)
        if plan.join:
            caches = [self.prefilling.pop(state.request_id) for state in plan.join]
            for state, row_cache in zip(plan.join, caches):
                publish_prompt(self.reuse, state, row_cache)
            self.batch.add_rows(plan.join, caches, [s.prompt[-1] for s in plan.join])
        work = plan_work(plan, self.prefilling, self.inputs)
        riders = work if self._may_share(work, out) else []
        carried = bool(plan.decode) and self._decode(plan.decode, out, while_waiting, riders)
        if not plan.decode:
            while_waiting()
        if plan.prefill:
            self._prefill(plan, out, work, carried=carried)
            if work and self._plain:
                self._read_now(out)
        for state in plan.admit:
            self._admit(state, out)
        out.catch_up_s = sum(drafter.catch_up_s() for drafter in self.drafters.values())
        no_prompts = not (plan.join or plan.prefill or plan.admit or out.catch_up_s)
        self.ahead.step_ended(out, began, prompts=not no_prompts)
        only_decoded = no_prompts and not plan.leave
        if only_decoded and self._step_shape is not None:
            self._timed_step = (*self._step_shape, began)
        self.steps += 1
        if self.steps % DEFAULT_CLEAR_CACHE_EVERY == 0:
            mx.clear_cache()
        return out

    def reset(self) -> None:
        """Forget every row (after a failure the scheduler could not attribute)."""
        self._timed_step = None
        self.ahead.forget()
        self.batch.keep([])
        self.prefilling.clear()
        self.inputs.hidden.clear()
        for drafter in self.drafters.values():
            drafter.reset()

    # -- leaving and joining -------------------------------------------------------------------

    def _leave(self, states: list[RequestState]) -> None:
        in_batch = [s for s in states if any(s is row for row in self.batch.rows)]
        for state in in_batch:
            publish_row(self.reuse, self.batch, self.inputs, state)
        self.batch.remove(in_batch)
        for state in states:
            self.prefilling.pop(state.request_id, None)
        ids = [s.request_id for s in states]
        self.inputs.hidden.forget(ids)
        for drafter in self.drafters.values():
            drafter.forget(ids)

    def _admit(self, state: RequestState, out: StepOutput) -> None:
        cache = None
        if self.reuse is not None:
            # a prefix read from disk is waited for across steps while rows decode
            match = restore_prefix(self.reuse, state, wait=not self.batch.rows)
            if match is LOADING:
                out.cache_loading.append(state.request_id)
                return
            if match is not None:
                cache = match.target
                out.cache_hits[state.request_id] = CacheHit(match.tokens, match.source)
                if match.draft:
                    self.inputs.adopt(state, match.draft, match.tokens)
        if cache is None:
            cache = make_prompt_cache(self.model)
        quantize_row_cache(cache, self.kv)  # start 0: quantized from the first position
        self.prefilling[state.request_id] = cache

    # -- prompt processing ---------------------------------------------------------------------

    def _prefill(
        self, plan: StepPlan, out: StepOutput, work: list[PrefillWork], *, carried: bool
    ) -> None:
        """The step's prompt chunks: done already when they rode on the decode step
        (`carried`), else in forwards of their own."""
        if carried:
            left = []
            for item, hidden in zip(work, self.batch.rider_states):
                finish_rider(item, hidden, self.kv)
        else:  # not those a failed shared forward could not restore
            work = [w for w in work if w.request_id not in out.failed]
            together = self.batched_prefill and len(work) > 1
            left = prefill_together(work, self.model, self.kv) if together else work
        for item in left:
            try:
                prefill_alone(item, self.model, self.kv)
            except Exception as exc:  # noqa: BLE001 - a failing prompt fails only its request
                log.exception("prompt processing failed for %s", item.request_id)
                self.prefilling.pop(item.request_id, None)
                out.fail(item.request_id, f"prompt processing failed: {exc}")
        starts = {c.state.request_id: c.state.prefilled for c in plan.prefill}
        for item in work:
            if item.hidden is not None and item.request_id not in out.failed:
                self.inputs.hidden.add(item.request_id, starts[item.request_id], item.hidden)
        for chunk in plan.prefill:
            rid = chunk.state.request_id
            if rid not in out.failed:
                out.prefilled[rid] = chunk.state.prefilled + chunk.tokens

    def _read_now(self, out: StepOutput) -> None:
        """The plain step's tokens, read now: its prompt work waited for its forward anyway (read
        next step, a new row's first token came a whole chunk later, seconds on a CPU)."""
        out.runs_now([(s.request_id, [t]) for s, t in self.batch.flush()])

    # -- decoding ------------------------------------------------------------------------------

    def _decode(
        self, rows: list[DecodeRow], out: StepOutput, while_waiting, riders: list[PrefillWork]
    ) -> bool:
        """One plain step or verify round; returns whether the `riders` (prompt chunks) shared
        its forward (a verify forward beside recurrent layers takes none)."""
        by_row = {id(r.state): r for r in rows}
        plan = [by_row.get(id(state)) or DecodeRow(state) for state in self.batch.rows]
        self.batch.wants_hidden = any(self.inputs.wants_hidden(s) for s in self.batch.rows)
        self._sharing = False  # set where a forward takes the riders
        try:
            eligible = self.ahead.eligible(plan, riders)
            if eligible and self.ahead.wants():
                drafts, width = self.ahead.round(plan, out, while_waiting)
                self._last_drafts = {r.state.request_id: d for r, d in zip(plan, drafts) if d}
                self._step_shape = (len(self.batch), width)
                self.ahead.way = True
                return False
            self.ahead.settle(out)
            if eligible:  # a round that could have run ahead, run in series
                self.ahead.way = False
            if any(r.k for r in plan) or self.batch.replaying:
                return self._verify_round(plan, out, while_waiting, riders)
            return self._plain_step(out, while_waiting, riders)
        except Exception as exc:  # noqa: BLE001 - find the row that caused it
            log.warning("a decode step failed: %s", exc, exc_info=True)
            self.ahead.settle(out)  # the rows' lengths must be whole before they are probed
            probes = failed_inputs(self.batch, plan, self._last_drafts)
            failed = recover_batch(self.batch, exc, probes, shared=self._sharing)
            for rid, message in failed.items():
                out.fail(rid, message)
            if self._sharing:
                self._unpack(riders, exc, out, rows_failed=bool(failed))
            return False

    def _may_share(self, work: list[PrefillWork], out: StepOutput) -> bool:
        """Prompt chunks ride on the decode step when there are rows to ride on and the chunks
        would not share a forward of their own: several prompts run in one padded forward
        (`prefill_together`), where their attention runs batched; beside the decode rows each
        would run its attention alone."""
        alone = not (work and self.batch.rows) or self.batch.unbatched or self.packing is False
        if alone or (len(work) > 1 and self.batched_prefill):
            return False
        if self.packing is None:  # once per model, timed apart from the step's work
            start = time.perf_counter()
            self.packing = packed_forward.enable(self.model) is None
            out.one_off_s += time.perf_counter() - start
        return self.packing

    def _unpack(
        self, riders: list[PrefillWork], exc: Exception, out: StepOutput, *, rows_failed: bool
    ) -> None:
        """A forward shared with prompt chunks failed: the chunks go back to where they were
        (to run in forwards of their own), and when no row failed alone, sharing is to blame."""
        if not rows_failed:
            log.warning("a decode step shared with prompt chunks failed; no more sharing")
            self.packing = False
        for item in riders:
            if not restore_rider(item):
                self.prefilling.pop(item.request_id, None)
                out.fail(item.request_id, f"prompt processing failed: {exc}")

    def _plain_step(
        self,
        out: StepOutput,
        while_waiting,
        riders: list[PrefillWork] | None = None,
        histories: list[list[int]] | None = None,
    ) -> bool:
        """One pipelined decode step. `histories`: each row's tokens up to its pending input,
        when this step has already read back tokens its rows' states do not hold yet."""
        batch = self.batch
        start = time.perf_counter()
        self._last_drafts = {}
        riders = riders or []
        wanted = any(w.wants_hidden for w in riders)
        self._sharing = bool(riders)
        parts = [rider(w) for w in riders]
        with self.attention.launching(len(batch)):
            launched = batch.step_launch(parts, rider_hidden=wanted, histories=histories)
        t_launched = time.perf_counter()
        if batch.step_hidden is not None:
            self.inputs.keep_step(batch.rows, batch.step_hidden, batch.step_starts)
        while_waiting()
        t_wait = time.perf_counter()
        collected = batch.step_collect(launched)
        finish_shared(riders, batch.inputs, out)
        t_collected = time.perf_counter()
        for state, token in collected:
            out.add_run(state.request_id, TokenRun([token]))
        for i, message in batch.sample_failures.items():
            out.fail(batch.rows[i].request_id, message)
        elapsed = time.perf_counter() - start
        self._step_shape, self._plain = (len(batch), 1), True
        out.timing.plain_steps += 1
        out.timing.plain_s += elapsed
        out.timing.plain_launch_s += t_launched - start
        out.timing.plain_wait_s += t_collected - t_wait
        return bool(riders)

    def _verify_round(
        self, plan: list[DecodeRow], out: StepOutput, while_waiting, riders: list[PrefillWork]
    ) -> bool:
        """Draft for every row that speculates, verify all rows in one target forward, keep
        each row's accepted prefix plus the target's own next token, roll back the rest.
        Returns whether `riders` shared the forward."""
        batch = self.batch
        t0 = time.perf_counter()
        for state, token in batch.flush():
            out.add_run(state.request_id, TokenRun([token]))
        pending = batch.pending_tokens()
        histories = out.histories(batch.rows)
        drafts, used = self._propose(plan, histories, out)
        for i, replay in enumerate(batch.replay):
            if len(replay) > DEFAULT_MAX_REPLAY:
                drafts[i] = []  # commit its state this round: nothing to reject
        self._last_drafts = {r.state.request_id: d for r, d in zip(plan, drafts) if d}
        t1 = time.perf_counter()
        if not any(drafts) and not batch.replaying:
            # the tokens just read back are not in the rows' states yet: penalties must see them
            carried = self._plain_step(out, while_waiting, riders, histories)
            out.timing.plan_s += t1 - t0
            return carried
        if batch.recurrent:
            riders = []
        wanted = any(w.wants_hidden for w in riders)
        parts = [rider(w) for w in riders]
        self._sharing = bool(parts)
        verify = batch.verify_launch(pending, drafts, parts, rider_hidden=wanted)
        t_launched = time.perf_counter()
        while_waiting()
        t_streamed = time.perf_counter()
        targets, failures = batch.verify_collect(verify, histories)
        finish_shared(riders, verify.logits, out)
        t2 = time.perf_counter()
        kept, next_inputs = [], []
        feedback = DrafterFeedback(self.drafters)
        for i, (row, draft, target) in enumerate(zip(plan, drafts, targets)):
            rid = row.state.request_id
            if target is None:
                out.fail(rid, failures[i])
                kept.append(1)
                next_inputs.append(0)
                continue
            accepted = 0
            while accepted < len(draft) and draft[accepted] == target[accepted]:
                accepted += 1
            kept.append(accepted + 1)
            next_inputs.append(target[accepted])
            kind = drafter_kind(self.drafters, used[i]) if draft else None
            out.add_run(rid, TokenRun(target[: accepted + 1], draft, accepted, used[i], kind))
            feedback.add(used[i], rid, draft, accepted, target[: accepted + 1])
        self.inputs.keep_verified(batch.rows, verify, kept, targets)
        batch.rollback(kept, next_inputs)
        feedback.teach()
        t3 = time.perf_counter()
        width = max(len(row) for row in verify.x)
        verify_s = (t_launched - t1) + (t2 - t_streamed)
        self._step_shape = (len(batch), width)
        out.draft_s, out.verify_s, out.sample_s = t1 - t0, verify_s, 0.0
        timing = out.timing
        timing.verify_rounds += 1
        timing.plan_s += t1 - t0
        timing.forward_s += verify_s
        timing.verify_launch_s += t_launched - t1
        timing.verify_wait_s += verify.wait_s
        timing.rollback_s += t3 - t2
        timing.output_s += t_streamed - t_launched
        return bool(riders)

    def _propose(
        self, plan: list[DecodeRow], histories: list[list[int]], out: StepOutput
    ) -> tuple[list[list[int]], list[str | None]]:
        # a method of its own: engine.bench.part_timing times it
        vocab = self.target.info.vocab_size
        return propose(self.drafters, self.inputs, plan, histories, out, vocab_size=vocab)
