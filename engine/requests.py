"""Plain dataclasses that cross the engine's boundary: requests, events and stats.

Nothing here holds an MLX array: these values travel between the engine thread and the caller.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

DEFAULT_MAX_TOKENS = 512
DEFAULT_DRAFT_TOKENS = 4
MAX_DRAFT_TOKENS = 16
DEFAULT_NGRAM_MIN = 1
DEFAULT_NGRAM_MAX = 4


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
    SYNTHETIC = "synthetic"  # benchmarks only: the target's own greedy tokens, corrupted


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    repetition_context: int = 20
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class SpeculativeParams:
    method: SpecMethod = SpecMethod.OFF
    draft_tokens: int = DEFAULT_DRAFT_TOKENS
    ngram_min: int = DEFAULT_NGRAM_MIN
    ngram_max: int = DEFAULT_NGRAM_MAX
    synthetic_acceptance: float = 0.7  # only for SpecMethod.SYNTHETIC
    synthetic_reference: tuple[int, ...] = ()  # SYNTHETIC: the target's greedy reply, known ahead


@dataclass
class GenerationRequest:
    """One chat turn. Give `messages` (the chat template is applied) or `prompt_tokens`."""

    messages: list[dict[str, str]] | None = None
    prompt_tokens: list[int] | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop: tuple[str, ...] = ()
    sampling: SamplingParams = field(default_factory=SamplingParams)
    speculative: SpeculativeParams = field(default_factory=SpeculativeParams)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass
class SpecStats:
    """Speculation counters, as vLLM's SpecDecodingStats defines them."""

    rounds: int = 0  # verify rounds in which this row had a draft
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: list[int] = field(default_factory=list)
    drafted_by_position: list[int] = field(default_factory=list)
    target_forwards: int = 0  # target forwards this row took part in (decode or verify)
    emitted_tokens: int = 0  # tokens produced by those forwards
    draft_time_s: float = 0.0
    verify_time_s: float = 0.0
    sample_time_s: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.accepted_tokens / self.rounds if self.rounds else 1.0

    @property
    def tokens_per_forward(self) -> float:
        return self.emitted_tokens / self.target_forwards if self.target_forwards else 0.0

    @property
    def forwards_saved(self) -> int:
        return max(0, self.emitted_tokens - self.target_forwards)

    def add(self, other: SpecStats) -> None:
        self.rounds += other.rounds
        self.draft_tokens += other.draft_tokens
        self.accepted_tokens += other.accepted_tokens
        self.accepted_by_position = _add_lists(
            self.accepted_by_position, other.accepted_by_position
        )
        self.drafted_by_position = _add_lists(self.drafted_by_position, other.drafted_by_position)
        self.target_forwards += other.target_forwards
        self.emitted_tokens += other.emitted_tokens
        self.draft_time_s += other.draft_time_s
        self.verify_time_s += other.verify_time_s
        self.sample_time_s += other.sample_time_s


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


# Events: what `Engine.submit` yields. Exactly one of FinishedEvent / ErrorEvent ends a stream.


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


Event = PrefillProgressEvent | TokenEvent | StatsEvent | FinishedEvent | ErrorEvent


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    cached_tokens: int = 0
    ram_bytes: int = 0
    disk_bytes: int = 0
    ram_entries: int = 0
    disk_entries: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count


@dataclass
class ModelInfo:
    name: str
    path: str
    architecture: str
    parameters: int
    bytes: int
    vocab_size: int
    context_length: int | None
    dtype: str
    sliding_window: int | None = None


@dataclass
class EngineStats:
    status: str = "stopped"  # stopped, loading, ready, error
    model: ModelInfo | None = None
    draft_model: ModelInfo | None = None
    running: int = 0
    waiting: int = 0
    batch_size: int = 0
    steps: int = 0
    generated_tokens: int = 0
    tokens_per_s: float = 0.0  # over a recent window
    spec: SpecStats = field(default_factory=SpecStats)
    cache: CacheStats = field(default_factory=CacheStats)
    blas: str = ""
    device: str = ""
    error: str | None = None


# Engine-wide events, for listeners (`Engine.add_listener`): model loading and failures.


@dataclass
class LoadProgressEvent:
    message: str
    fraction: float  # 0..1, or -1 when unknown


@dataclass
class ModelLoadedEvent:
    model: ModelInfo
    draft_model: ModelInfo | None = None


@dataclass
class EngineErrorEvent:
    message: str


EngineEvent = LoadProgressEvent | ModelLoadedEvent | EngineErrorEvent
