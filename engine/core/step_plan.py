"""The plain data between the three parts of an engine step: what the scheduler plans
(`StepPlan`), and what the executor produced running it (`StepOutput`), which the scheduler's
`update` applies to the requests (as vLLM v1's SchedulerOutput and ModelRunnerOutput)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.request_state import RequestState
from engine.core.step_timing import StepTiming


@dataclass
class PrefillChunk:
    """Process the next `tokens` prompt tokens of a request."""

    state: RequestState
    tokens: int
    pad: int = 0  # filler tokens after them, dropped from the cache again (one forward shape)


@dataclass
class DecodeRow:
    """A row of the running batch and its draft this step: `k` tokens from `drafter` (0: plain)."""

    state: RequestState
    k: int = 0
    drafter: str | None = None
    note: str | None = None  # why it runs plain although it asked to speculate
    lookup_first: bool = False  # a strong prompt-lookup match drafts instead of `drafter`


@dataclass
class StepPlan:
    """What one step runs, in this order: rows leave, rows join, one decode or verify round of
    the running batch, prompt chunks, then the prompt cache is asked for newly admitted rows."""

    leave: list[RequestState] = field(default_factory=list)  # finished: publish, then drop
    join: list[RequestState] = field(default_factory=list)  # prompt processed: join the batch
    decode: list[DecodeRow] = field(default_factory=list)  # the running batch
    prefill: list[PrefillChunk] = field(default_factory=list)
    paced: bool = False  # the prompt budget keeps decoding rows' gap (not a burst's own rows)
    admit: list[RequestState] = field(default_factory=list)  # look up their cached prefix
    # seconds drafters may spend catching up on new rows' histories while other rows wait
    # (Drafter.pace; None: nobody waits)
    catch_up_s: float | None = None

    @property
    def empty(self) -> bool:
        return not (self.leave or self.join or self.decode or self.prefill or self.admit)


@dataclass
class TokenRun:
    """Tokens that one target forward produced for a row: with a draft, the accepted draft
    tokens then the target's own; without, one token."""

    tokens: list[int]
    draft: list[int] | None = None  # the draft this forward verified (None: a plain step)
    accepted: int = 0
    drafter: str | None = None  # the drafter that made `draft`
    drafter_kind: str | None = None  # its Drafter.kind (SpecStats.rounds_by_drafter)
    # the draft was drawn on a guessed history that proved wrong (engine/core/lookahead.py):
    # its rejection says nothing of the drafter, so the policy does not learn from it
    guessed: bool = False
    ahead: bool = False  # the forward was a round queued before the last was read back


@dataclass
class CacheHit:
    """The prompt cache restored this many prompt tokens of a request."""

    tokens: int
    source: str  # "ram" or "disk"


@dataclass
class StepOutput:
    """What running a StepPlan produced, by request id."""

    runs: dict[str, list[TokenRun]] = field(default_factory=dict)
    prefilled: dict[str, int] = field(default_factory=dict)  # prompt tokens now cached
    cache_hits: dict[str, CacheHit] = field(default_factory=dict)
    cache_loading: list[str] = field(default_factory=list)  # prefix still read from disk: ask again
    failed: dict[str, str] = field(default_factory=dict)  # request id -> message
    missed: dict[str, str] = field(default_factory=dict)  # request id -> drafter that had no draft
    # (batch, width, seconds) of each plain step or verify round, all its wall time
    forward_costs: list[tuple[int, int, float]] = field(default_factory=list)
    timing: StepTiming = field(default_factory=StepTiming)
    draft_s: float = 0.0  # this step's drafting, shared by the rows that drafted
    verify_s: float = 0.0
    sample_s: float = 0.0
    # one-off work the step also did (a model's check, about a second on the H200): its wall
    # time less this is what its work cost (the prefill pacer's measurement)
    one_off_s: float = 0.0
    # drafters catching up on new rows' histories (Drafter.catch_up_s): prompt work, so not
    # part of the step's decode time either
    catch_up_s: float = 0.0

    def add_run(self, request_id: str, run: TokenRun) -> None:
        self.runs.setdefault(request_id, []).append(run)

    def runs_now(self, tokens: list[tuple[str, list[int]]]) -> None:
        """Plain tokens read back in the step that made them (rows that failed left out)."""
        for request_id, run in tokens:
            if request_id not in self.failed:
                self.add_run(request_id, TokenRun(run))

    def fail(self, request_id: str, message: str) -> None:
        self.failed.setdefault(request_id, message)

    def histories(self, rows: list[RequestState]) -> list[list[int]]:
        """Each row's tokens with those this step has read back so far (not yet recorded)."""
        return [
            s.history + [t for run in self.runs.get(s.request_id, []) for t in run.tokens]
            for s in rows
        ]
