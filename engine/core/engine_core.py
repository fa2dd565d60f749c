"""One engine step in three parts, as vLLM v1's EngineCore: the scheduler plans what runs
(`schedule`), the executor runs it on the model (`execute`), the scheduler applies what it
produced to the requests (`update`). A step that fails where no row can be blamed ends every
request with the error instead of failing again on the next loop."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from mlx_lm.models.cache import KVCache

from engine.config import EngineConfig
from engine.core.batch_check import (
    batching_problem,
    chunking_problem,
    padding_check,
    speculation_problem,
)
from engine.core.executor import ModelExecutor
from engine.core.prefill import takes_filler
from engine.core.scheduler import Scheduler
from engine.device import on_cuda
from engine.hidden import attach
from engine.hosting.memory_budget import held_bytes
from engine.requests import Event, GenerationRequest, SpecMethod
from engine.speculative.auto import AutoPolicy
from engine.speculative.drafter import Drafter
from engine.speculative.eagle_drafter import EAGLE_DRAFTER, HEAD_LABEL, eagle_drafter_for
from engine.speculative.mtp.loading import mtp_drafter_for, mtp_weights_for
from engine.speculative.policy import SpeculationPolicy
from engine.speculative.prompt_lookup import PromptLookupDrafter

log = logging.getLogger(__name__)


class EngineCore:
    """A loaded target model with its scheduler, executor and drafters."""

    def __init__(self, target: Any, *, config: EngineConfig, reuse: Any | None = None) -> None:
        self.target = target
        problem = batching_problem(target.model)
        if problem is not None:
            log.warning("%s runs one request at a time: %s", target.info.name, problem)
            target.info.batching_note = f"runs one request at a time: {problem}"
            # nor can its rows' caches hold holes: rounds run in series (engine/core/lookahead.py)
            config = dataclasses.replace(config, max_batch=1, verify_ahead=False)
        self.policy = SpeculationPolicy(auto=AutoPolicy(few_widths=on_cuda()))
        # verify rounds can still pad a model whose layers take padding into their state
        # where every padded row's state is recomputed after the forward
        padding, recomputed = padding_check(target.model)
        chunking = chunking_problem(target.model)
        problem = speculation_problem(target.model) or (None if recomputed else padding)
        problem = problem or chunking
        if problem is not None:
            note = f"{target.info.name} cannot speculate: {problem}"
            log.warning(note)
            target.info.speculation_note = note
            self.policy.refusal = note
        self.scheduler = Scheduler(target, config=config, policy=self.policy)
        self.scheduler.pacer.pad_tail = takes_filler(target.model)
        if chunking is not None:  # paced or shared chunks would change its replies
            log.warning("%s prefills in whole chunks, unpaced: %s", target.info.name, chunking)
            self.scheduler.reference_chunks = True
            self.scheduler.pacer.gap_factor = None
        self.executor = ModelExecutor(target, config=config, reuse=reuse)
        if chunking is not None and reuse is not None:  # a hit prefills the rest as a chunk
            note = f"{target.info.name} does not use the prompt cache: {chunking}"
            log.warning(note)
            target.info.prompt_cache_note = note
            reuse.refusal = note
        if padding is not None:  # prompts of different lengths would pad one another
            log.warning("%s processes prompts one at a time: %s", target.info.name, padding)
            self.executor.batched_prefill = False
            self.executor.batch.padding_enters_state = recomputed
        self.set_drafter(PromptLookupDrafter())
        self._install_mtp(config)
        self._install_draft_head()
        for name, make in config.extra_drafters:
            self.set_drafter(make(target), name=name)

    def _install_mtp(self, config: EngineConfig) -> None:
        """The checkpoint's MTP layers as drafter "mtp", when it has them (ModelInfo.mtp)."""
        info = self.target.info
        weights = mtp_weights_for(self.target, config.mtp_weights)
        try:
            drafter, note = mtp_drafter_for(self.target, weights)
        except Exception as exc:  # noqa: BLE001 - the model still runs without it
            log.exception("loading the MTP layers of %s failed", info.name)
            drafter, note = None, f"its MTP layers failed to load: {exc}"
        if drafter is not None:
            self.set_drafter(drafter)
            note = self.policy.unavailable.get(drafter.name)
            if note is None and self.executor.reuse is not None:  # its caches stored too
                self.executor.reuse.set_draft(drafter.identity, drafter.probe, lambda: [KVCache()])
        info.mtp = drafter is not None and note is None
        info.mtp_note = note
        if note is not None:
            self.policy.unavailable.setdefault(SpecMethod.MTP.value, f"{info.name}: {note}")
        elif not info.mtp:
            self.policy.unavailable[SpecMethod.MTP.value] = (
                f"{info.name} has no MTP layers (only models whose checkpoint carries them, "
                "such as Qwen3.5/3.6, Qwen3-Next, DeepSeek-V3, GLM-4.5 and MiMo, can draft with "
                "MTP; point the model at separate MTP weights if its folder lacks them)"
            )

    def _install_draft_head(self) -> None:
        """The model's trained draft head (the default model's, shipped with Tandem) serves
        "draft" and "auto" rows that name no draft model (ModelInfo.draft_head)."""
        info = self.target.info
        try:
            drafter, note = eagle_drafter_for(self.target)
        except Exception as exc:  # noqa: BLE001 - the model still runs without it
            log.exception("loading the draft head of %s failed", info.name)
            drafter, note = None, f"its draft head failed to load: {exc}"
        if drafter is not None:
            self.set_drafter(drafter)
            note = self.policy.unavailable.get(drafter.name)
            if note is None:
                self.policy.own_draft = drafter.name
                info.draft_head = HEAD_LABEL
        info.draft_head_note = note
        if note is not None:
            self.policy.unavailable[EAGLE_DRAFTER] = note
            self.policy.own_draft = EAGLE_DRAFTER

    # -- commands ------------------------------------------------------------------------------

    def add(
        self, request: GenerationRequest, *, draft: str | None = None, arrival: float | None = None
    ) -> list[Event]:
        """Queue a request; `draft`: the drafter name of its draft model (installed first);
        `arrival`: when the engine got it (perf_counter), when that was before now."""
        return self.scheduler.add(request, draft=draft, arrival=arrival)

    def cancel(self, request_id: str) -> None:
        self.scheduler.cancel(request_id)

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def has_requests(self) -> bool:
        """Requests that have not ended (rows that ended but are still leaving do not count)."""
        return bool(self.scheduler.states())

    def request_ids(self) -> list[str]:
        return [state.request_id for state in self.scheduler.states()]

    def drafting_with(self, name: str) -> list[str]:
        """The requests whose rows draft (or may draft) with the drafter `name`."""
        return [s.request_id for s in self.scheduler.states() if s.draft == name]

    def cache_bytes(self) -> int:
        """What its rows' caches hold: the batch, prompts being processed, drafters' caches."""
        executor = self.executor
        held = held_bytes(executor.batch.cache) + held_bytes(list(executor.prefilling.values()))
        return held + sum(d.cache_bytes() for d in executor.drafters.values())

    def set_drafter(self, drafter: Drafter | None, *, name: str | None = None) -> None:
        """Install a drafter under its name (None with a name removes it). It serves running
        requests from the next round: drafters catch up from the rows' tokens. A drafter that
        reads hidden states is refused (by name, with the reason) for a model whose hidden
        states cannot be split from its head (engine/hidden.py)."""
        name = name or drafter.name
        self.executor.drafters.pop(name, None)
        self.policy.checks.pop(name, None)
        self.policy.unavailable.pop(name, None)
        if drafter is not None and drafter.wants_hidden_states:
            problem = attach(self.target.model)
            if problem is not None:
                log.warning("%s: drafter %s refused: %s", self.target.info.name, name, problem)
                self.policy.unavailable[name] = (
                    f"{self.target.info.name} cannot hand its hidden states to a drafter: {problem}"
                )
                drafter = None
        if drafter is not None:
            self.executor.drafters[name] = drafter
            if type(drafter).check is not Drafter.check:
                self.policy.checks[name] = drafter.check
        self.policy.drafters = frozenset(self.executor.drafters)

    # -- the step ------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """Do one step's work; return the events it produced."""
        begin = time.perf_counter()
        plan = self.scheduler.schedule()
        try:
            start = time.perf_counter()
            output = self.executor.execute(plan, while_waiting=self.scheduler.stream_deferred)
            self.scheduler.pacer.observe(
                time.perf_counter() - start - output.one_off_s - output.catch_up_s,
                prefill_tokens=sum(c.tokens for c in plan.prefill),
                decoding=bool(plan.decode),
                paced=plan.paced,
                joined=len(plan.join),
                catch_up_s=output.catch_up_s,
            )
            self.scheduler.update(plan, output)
        except Exception as exc:  # noqa: BLE001 - no row can be blamed: end them all, once
            log.exception("an engine step failed")
            self.scheduler.fail_all(f"engine step failed: {exc}")
            self.executor.reset()
        timing = self.scheduler.timing
        timing.core_steps += 1
        timing.core_s += time.perf_counter() - begin
        return self.scheduler.take_events()
