"""Plain dataclasses that cross the engine's boundary: requests, their events and stats (the
engine's own reports are in engine/engine_reports.py).

Nothing here holds an MLX array: these values travel between the engine thread and the caller.
"""

from __future__ import annotations

import copy
import enum
import uuid
from dataclasses import dataclass, field

# Defaults, and the largest value a request may set for each size (engine/validation.py checks
# every field against these in `Engine.submit`, before a request reaches the engine thread).
DEFAULT_MAX_TOKENS = 512
MAX_MAX_TOKENS = 1 << 20  # the model's context is the tighter limit, checked at admission
DEFAULT_DRAFT_TOKENS = 4
MAX_DRAFT_TOKENS = 16
DRAFT_HEAD = "head"  # SpecStats.rounds_by_drafter's key for a model's trained draft head
DEFAULT_NGRAM_MIN = 1
DEFAULT_NGRAM_MAX = 4
MAX_NGRAM = 8  # prompt lookup costs O(search window * n-gram) per round: keep it small
DEFAULT_REPETITION_CONTEXT = 20
MAX_REPETITION_CONTEXT = 4096
MAX_TOP_K = 1 << 20  # above every vocabulary; the model's own size is checked at admission
MAX_SEED = 2**64 - 1
MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 256  # characters; every stop is searched for after every token
MAX_PROMPT_TOKENS = 1 << 20
MAX_PROMPT_CHARS = 1 << 23  # all messages' text together; tokenized on the engine thread
MAX_MESSAGES = 10_000
MAX_REQUEST_ID_LENGTH = 256
VALID_ROLES = ("system", "user", "assistant", "tool")


class FinishReason(str, enum.Enum):
    STOP = "stop"  # EOS token or a stop string
    LENGTH = "length"  # max tokens, or the model's context is full
    CANCELLED = "cancelled"
    ERROR = "error"


class RequestStatus(str, enum.Enum):
    WAITING = "waiting"
    PREFILLING = "prefilling"
    RUNNING = "running"
    FINISHED = "finished"


class SpecMethod(str, enum.Enum):
    OFF = "off"
    DRAFT_MODEL = "draft"
    PROMPT_LOOKUP = "lookup"
    AUTO = "auto"
    MTP = "mtp"  # the model's own multi-token-prediction layers (engine/speculative/mtp/)
    SYNTHETIC = "synthetic"  # benchmarks and tests only: engine/bench/synthetic.py, registered


@dataclass(frozen=True)
class SamplingParams:
    """How a row picks its tokens; the ranges are checked at submit (engine/validation.py)."""

    temperature: float = 0.0  # finite, >= 0; 0 is greedy
    top_p: float = 1.0  # (0, 1]; 1 is off
    top_k: int = 0  # 0 (off) to the vocabulary size - 1
    min_p: float = 0.0  # [0, 1); 0 is off
    repetition_penalty: float = 1.0  # finite, > 0; 1 is off
    repetition_context: int = DEFAULT_REPETITION_CONTEXT  # 1..MAX_REPETITION_CONTEXT tokens
    seed: int | None = None  # 0..MAX_SEED; None: a random seed per request

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class SpeculativeParams:
    """Which drafter proposes tokens for a row, and how many; checked at submit."""

    method: SpecMethod = SpecMethod.OFF  # or its value as a string, e.g. "lookup"
    draft_tokens: int = DEFAULT_DRAFT_TOKENS  # 1..MAX_DRAFT_TOKENS
    ngram_min: int = DEFAULT_NGRAM_MIN  # 1 <= ngram_min <= ngram_max <= MAX_NGRAM
    ngram_max: int = DEFAULT_NGRAM_MAX
    # For "draft" and "auto": a model folder or a repo id in the local Hugging Face cache with
    # the target's tokenizer; None: the engine's configured draft model (EngineConfig)
    draft_model: str | None = None


@dataclass
class GenerationRequest:
    """One chat turn. Give `messages` (the chat template is applied) or `prompt_tokens`."""

    messages: list[dict[str, str]] | None = None  # {"role": one of VALID_ROLES, "content": str}
    prompt_tokens: list[int] | None = None  # at most MAX_PROMPT_TOKENS ids, each >= 0
    max_tokens: int = DEFAULT_MAX_TOKENS  # 1..MAX_MAX_TOKENS
    stop: tuple[str, ...] = ()  # at most MAX_STOP_STRINGS non-empty strings
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculative: SpeculativeParams = field(default_factory=SpeculativeParams)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # non-empty
    # The last message is an assistant reply cut short (max tokens): extend it, no new turn.
    continue_reply: bool = False
    # A model folder, a repo id in the local Hugging Face cache, or None: the engine's
    # configured model. A model not loaded yet is loaded first (ModelLoadingEvent meanwhile).
    model: str | None = None


@dataclass
class SpecStats:
    """Speculation counters, as vLLM's SpecDecodingStats defines them (recorded in
    engine/speculative/metrics.py); the derived figures are the properties below."""

    rounds: int = 0  # verify rounds in which this row had a draft
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: list[int] = field(default_factory=list)
    drafted_by_position: list[int] = field(default_factory=list)
    target_forwards: int = 0  # target forwards that produced tokens of this reply
    emitted_tokens: int = 0  # tokens those forwards produced (an EOS included)
    forwards_saved: int = 0  # accepted draft tokens: forwards plain decoding would have needed
    draft_time_s: float = 0.0
    verify_time_s: float = 0.0
    sample_time_s: float = 0.0
    # verify rounds by who drafted (Drafter.kind: a SpecMethod value, DRAFT_HEAD for a trained
    # head); an "auto" row drafts with its model or by prompt lookup, whichever is kept more
    rounds_by_drafter: dict[str, int] = field(default_factory=dict)
    # rounds whose draft was drawn on a guessed history that proved wrong (a round queued
    # before the last was read back: engine/core/lookahead.py); left out of the acceptance
    # figures above, which describe the drafter
    guessed_rounds: int = 0
    # rounds with a draft that were queued before the last one was read back (guessed ones
    # included): on a GPU the engine times both ways per batch size and keeps the faster
    ahead_rounds: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def acceptance_by_position(self) -> list[float]:
        """The share of drafts that reached each position whose token there was kept."""
        return [
            a / d if d else 0.0 for a, d in zip(self.accepted_by_position, self.drafted_by_position)
        ]

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.accepted_tokens / self.rounds if self.rounds else 1.0

    @property
    def ahead_share(self) -> float:
        """The share of verify rounds with a draft that ran ahead."""
        total = self.rounds + self.guessed_rounds
        return self.ahead_rounds / total if total else 0.0

    @property
    def guessed_share(self) -> float:
        """The share of rounds ahead whose draft was drawn on a guess that proved wrong."""
        return self.guessed_rounds / self.ahead_rounds if self.ahead_rounds else 0.0

    @property
    def tokens_per_forward(self) -> float:
        return self.emitted_tokens / self.target_forwards if self.target_forwards else 0.0

    def copy(self) -> SpecStats:
        """A copy sharing nothing mutable (copy.deepcopy walked every field: about 70 objects a
        row, a millisecond a round at 16 rows on the CPU)."""
        twin = copy.copy(self)
        twin.accepted_by_position = list(self.accepted_by_position)
        twin.drafted_by_position = list(self.drafted_by_position)
        twin.rounds_by_drafter = dict(self.rounds_by_drafter)
        return twin

    def add(self, other: SpecStats) -> None:
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.accepted_by_position = _add_lists(
            self.accepted_by_position, other.accepted_by_position
        )
        self.drafted_by_position = _add_lists(self.drafted_by_position, other.drafted_by_position)
        for kind, n in other.rounds_by_drafter.items():
            self.rounds_by_drafter[kind] = self.rounds_by_drafter.get(kind, 0) + n

    def minus(self, earlier: SpecStats) -> SpecStats:
        """What was counted since `earlier` (a previous value of these totals)."""
        out = SpecStats(**{n: getattr(self, n) - getattr(earlier, n) for n in _COUNTERS})
        out.accepted_by_position = _sub_lists(
            self.accepted_by_position, earlier.accepted_by_position
        )
        out.drafted_by_position = _sub_lists(self.drafted_by_position, earlier.drafted_by_position)
        out.rounds_by_drafter = {
            kind: n - earlier.rounds_by_drafter.get(kind, 0)
            for kind, n in self.rounds_by_drafter.items()
            if n != earlier.rounds_by_drafter.get(kind, 0)
        }
        return out


_COUNTERS = (
    "rounds",
    "guessed_rounds",
    "ahead_rounds",
    "draft_tokens",
    "accepted_tokens",
    "target_forwards",
    "emitted_tokens",
    "forwards_saved",
    "draft_time_s",
    "verify_time_s",
    "sample_time_s",
)


def _sub_lists(a: list[int], b: list[int]) -> list[int]:
    return [x - (b[i] if i < len(b) else 0) for i, x in enumerate(a)]


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


@dataclass
class RequestStats:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prompt cache
    cache_source: str | None = None  # "ram", "disk" or None
    generated_tokens: int = 0
    ttft_s: float | None = None
    decode_tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    finish_reason: FinishReason | None = None
    spec: SpecStats = field(default_factory=SpecStats)
    context_tokens: int = 0  # prompt + generated: the chat's context use after this reply
    # this reply's rate had it drafted nothing (engine/speculative/plain_estimate.py)
    plain_tokens_per_s: float | None = None
    recent_acceptance: float | None = None  # draft acceptance over this row's last rounds
    speculation_note: str | None = None  # why the row runs plain although it asked to speculate
    prompt_cache_note: str | None = None  # why the prompt cache neither serves nor stores it

    def copy(self) -> RequestStats:
        """A copy sharing nothing mutable with this one (events carry copies)."""
        twin = copy.copy(self)
        twin.spec = self.spec.copy()
        return twin


# Events: what `Engine.submit` yields. Exactly one of FinishedEvent / ErrorEvent ends a stream.


@dataclass
class ModelLoadingEvent:
    """The request waits while a model it needs (its target or draft) is loaded."""

    request_id: str
    model: str  # the model's name
    message: str
    fraction: float  # 0..1, or -1 when unknown


@dataclass
class PrefillProgressEvent:
    request_id: str
    processed: int
    total: int


@dataclass
class TokenEvent:
    request_id: str
    token_ids: list[int]
    text: str  # the text delta; always whole UTF-8 characters
    from_draft: list[bool]  # per token: did it come from an accepted draft
    # per token, the text it released ("".join == text); empty when token_ids is (text held
    # back until the reply ended, e.g. a partial stop string)
    text_pieces: list[str] = field(default_factory=list)


@dataclass
class StatsEvent:
    request_id: str
    stats: RequestStats


@dataclass
class FinishedEvent:
    request_id: str
    finish_reason: FinishReason
    text: str  # the whole reply
    token_ids: list[int]
    stats: RequestStats


@dataclass
class ErrorEvent:
    request_id: str
    message: str
    stats: RequestStats | None = None


Event = (
    ModelLoadingEvent | PrefillProgressEvent | TokenEvent | StatsEvent | FinishedEvent | ErrorEvent
)
