"""The speculative variants of a `python -m engine.bench` sweep, and switching the running
engine to each (recurrent replay, verify rounds ahead or in series) between alternated runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from engine.api import Engine
from engine.bench.synthetic import SyntheticDrafter
from engine.core.step_timing import StepTiming
from engine.requests import SpecMethod, SpeculativeParams

# --ahead-modes: EngineConfig.verify_ahead's values (None: chosen as measured)
AHEAD_MODES: dict[str, bool | None] = {"measured": None, "on": True, "off": False}
# --decode-attention: EngineConfig.decode_attention_kernel's values
DECODE_ATTENTION: dict[str, bool | None] = {"kernel": True, "mlx": False, "measured": None}


@dataclass(frozen=True)
class SpecConfig:
    """One speculative variant of the sweep (acceptance: the synthetic drafter's rate)."""

    params: SpeculativeParams
    acceptance: float | None = None
    replay: bool = False  # recurrent rows replay kept tokens instead of recomputing their state
    # verify rounds: "default" (EngineConfig's), "measured" (engine/core/ahead_choice.py),
    # "on" (always ahead) or "off" (in series)
    ahead: str = "default"

    @property
    def method(self) -> SpecMethod:
        return SpecMethod(self.params.method)

    @property
    def draft_tokens(self) -> int:
        return self.params.draft_tokens

    @property
    def auto_on_synthetic(self) -> bool:
        """Auto rows drafting with the synthetic drafter (--auto-too): auto picks each k."""
        return self.method == SpecMethod.AUTO and self.acceptance is not None


def spec_configs(args: argparse.Namespace) -> list[SpecConfig]:
    method = SpecMethod(args.speculative)
    if method == SpecMethod.OFF:
        return []
    rates = args.acceptance if method == SpecMethod.SYNTHETIC else [None]
    ngrams = {
        name: value
        for name, value in (("ngram_min", args.ngram_min), ("ngram_max", args.ngram_max))
        if value is not None
    }
    params = [SpeculativeParams(method=method, draft_tokens=k, **ngrams) for k in args.draft_tokens]
    configs = [
        SpecConfig(p, a, replay, ahead)
        for p in params
        for a in rates
        for replay in ((False, True) if args.replay_too else (False,))
        for ahead in ahead_modes(args)
    ]
    if getattr(args, "auto_too", False):
        # one per rate: auto chooses each row's k itself, up to MAX_DRAFT_TOKENS
        auto = SpeculativeParams(method=SpecMethod.AUTO, **ngrams)
        configs += [
            SpecConfig(auto, a, replay, ahead)
            for a in rates
            for replay in ((False, True) if args.replay_too else (False,))
            for ahead in ahead_modes(args)
        ]
    return configs


def ahead_modes(args: argparse.Namespace) -> list[str]:
    """The ways verify rounds run, each alternated in one process (--ahead-modes, --serial-too)."""
    if args.ahead_modes:
        return list(args.ahead_modes)
    return ["on", "off"] if args.serial_too else ["default"]


# the engine's own draft for auto rows, and its drafters, while a run has auto rows draft with
# the synthetic drafter alone
_configured_draft: dict[int, tuple[str | None, frozenset[str]]] = {}
SYNTHETIC = SpecMethod.SYNTHETIC.value
LOOKUP = SpecMethod.PROMPT_LOOKUP.value


async def set_mode(eng: Engine, spec: SpecConfig | None) -> None:
    """The running engine's recurrent rows replay kept tokens or recompute, and its verify
    rounds run ahead or in series, as `spec` says (None: the defaults)."""

    def apply() -> None:
        core = eng._worker.core_for()
        executor = core.executor
        executor.batch.recompute = not (spec and spec.replay)
        policy = core.policy
        if spec is not None and spec.auto_on_synthetic:
            # auto rows naming no draft model draft with the model's own drafter: the synthetic
            # one for this run, and only it (prompt lookup, which auto would take where it
            # yields more, drafts a random model's repetitive replies almost whole: on an
            # H100 auto's rows at p=0.7 kept 9.8 tokens a round). The next set_mode puts back
            # the engine's own.
            if id(policy) not in _configured_draft:
                _configured_draft[id(policy)] = (policy.own_draft, policy.drafters)
            policy.own_draft = SYNTHETIC
            policy.drafters = _configured_draft[id(policy)][1] - {LOOKUP}
        elif id(policy) in _configured_draft:
            policy.own_draft, policy.drafters = _configured_draft.pop(id(policy))
        mode = spec.ahead if spec is not None else "default"
        executor.ahead.on = AHEAD_MODES[mode] if mode != "default" else executor.ahead.configured

    await eng.run_on_engine_thread(apply)


def arm(synth: SyntheticDrafter, config: SpecConfig, prompts, expected) -> SpeculativeParams:
    """The request settings for `config`; the synthetic drafter learns the prompts' replies."""
    if config.acceptance is not None:
        for prompt, reference in zip(prompts, expected):
            synth.expect(prompt, reference, config.acceptance)
    return config.params


async def ahead_choice(eng: Engine) -> dict:
    """The engine's choice between verify rounds ahead and in series, per batch size."""
    return await eng.run_on_engine_thread(
        lambda: eng._worker.core_for().executor.ahead.choice.summary()
    )


async def decode_attention_choice(eng: Engine) -> dict:
    """The engine's choice of a ragged plain step's attention, per batch size (empty where the
    CUDA kernel is not installed: engine/core/decode_attention_choice.py)."""
    return await eng.run_on_engine_thread(
        lambda: eng._worker.core_for().executor.attention.summary()
    )


async def take_timing(eng: Engine) -> StepTiming:
    """The engine's step timing since the last call (reset for the next run)."""

    def swap() -> StepTiming:
        scheduler = eng._worker.core_for().scheduler
        timing, scheduler.timing = scheduler.timing, StepTiming()
        return timing

    return await eng.run_on_engine_thread(swap)
