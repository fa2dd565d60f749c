"""What the engine reports about itself, beside each request's own events: its models, prompt
cache and totals (`Engine.stats()`), and the engine-wide events its listeners get."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.requests import SpecStats


@dataclass
class CacheStats:
    """The prompt cache's hits, misses and sizes in RAM and on disk."""

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
    """A loaded model: its name, folder, architecture and sizes."""

    name: str
    path: str
    architecture: str
    parameters: int
    bytes: int
    vocab_size: int
    context_length: int | None
    dtype: str
    sliding_window: int | None = None
    batching_note: str | None = None  # why this model runs one request at a time, if it does
    speculation_note: str | None = None  # why this model cannot speculate, if it cannot
    prompt_cache_note: str | None = None  # why the prompt cache serves this model nothing
    mtp: bool = False  # its checkpoint's MTP layers draft for it (speculative method "mtp")
    mtp_note: str | None = None  # why MTP weights it has (or was given) cannot be used
    draft_head: str | None = None  # its trained draft head (methods "draft" and "auto"), if any
    draft_head_note: str | None = None  # why the draft head it has cannot be used


@dataclass
class ModelStats:
    """One model the engine holds (or is loading): its batch, speed, memory and users."""

    key: str  # what identifies it: its resolved folder (or a "random:" spec)
    name: str
    status: str = "ready"  # loading, ready
    info: ModelInfo | None = None  # None while loading
    specs: list[str] = field(default_factory=list)  # what requests called it ("" for None)
    configured: bool = False  # the engine's configured model (GenerationRequest.model None)
    pinned: bool = False  # never unloaded to make room
    running: int = 0  # rows in its batch or being prefilled
    waiting: int = 0  # queued for its batch, or waiting for it to load
    batch_size: int = 0
    steps: int = 0
    generated_tokens: int = 0
    tokens_per_s: float = 0.0  # over a recent window
    weights_bytes: int = 0
    cache_bytes: int = 0  # its rows' KV caches, its drafters' included
    request_ids: list[str] = field(default_factory=list)  # requests running on it as target
    draft_request_ids: list[str] = field(default_factory=list)  # requests drafting with it
    idle_s: float = 0.0  # since a request last used it
    load_fraction: float = 1.0  # while loading: 0..1, or -1 when unknown

    @property
    def memory_bytes(self) -> int:
        return self.weights_bytes + self.cache_bytes

    @property
    def busy(self) -> bool:
        return bool(self.request_ids or self.draft_request_ids or self.status == "loading")


@dataclass
class EngineStats:
    """The engine as a whole: its status, models, batch, speed and prompt cache."""

    status: str = "stopped"  # stopped, loading, ready, error (of the configured model)
    model: ModelInfo | None = None  # the configured model (GenerationRequest.model None)
    draft_model: ModelInfo | None = None  # the configured draft model
    models: list[ModelStats] = field(default_factory=list)  # every model held or loading
    memory_budget_bytes: int = 0  # what the loaded models may hold together
    memory_used_bytes: int = 0  # what they hold: weights and KV caches
    active_memory_bytes: int = 0  # MLX's allocated memory (mx.get_active_memory)
    running: int = 0
    waiting: int = 0
    batch_size: int = 0
    steps: int = 0
    generated_tokens: int = 0
    tokens_per_s: float = 0.0  # over a recent window
    spec: SpecStats = field(default_factory=SpecStats)  # since the engine started
    spec_recent: SpecStats = field(default_factory=SpecStats)  # the last recent_window_s
    recent_window_s: float = 60.0
    uptime_s: float = 0.0
    cache: CacheStats = field(default_factory=CacheStats)
    blas: str = ""
    device: str = ""
    error: str | None = None


# Engine-wide events, for listeners (`Engine.add_listener`): models loaded and unloaded, failures.


@dataclass
class LoadProgressEvent:
    """How far a model load has come."""

    message: str
    fraction: float  # 0..1, or -1 when unknown
    model: str = ""  # the name of the model being loaded


@dataclass
class ModelUnloadedEvent:
    """A model was unloaded (by hand, or to make room for another) and its memory freed."""

    model: ModelInfo
    reason: str  # e.g. "unloaded by hand", "made room for X"


@dataclass
class ModelLoadedEvent:
    """A model (and its draft model, if any) finished loading."""

    model: ModelInfo
    draft_model: ModelInfo | None = None


@dataclass
class EngineErrorEvent:
    """An error of the engine itself, not of one request."""

    message: str
    fatal: bool = False  # the MLX thread died: every stream ended; Engine.start() restarts


EngineEvent = LoadProgressEvent | ModelLoadedEvent | ModelUnloadedEvent | EngineErrorEvent
