"""What the engine keeps for one request while it waits, is prefilled and decodes.

Only the scheduler changes a RequestState (admission, and `Scheduler.update` with what a step
produced); the executor reads it. It holds no MLX object: the caches belong to the executor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.requests import (
    FinishReason,
    GenerationRequest,
    RequestStats,
    RequestStatus,
)
from engine.sampling import RowSampler
from engine.speculative.metrics import RecentAcceptance
from engine.speculative.plain_estimate import PlainEstimate
from engine.text_stream import TextStream


@dataclass
class RequestState:
    """One request inside the engine: its prompt, reply so far, text stream and stats."""

    request: GenerationRequest
    prompt: list[int]
    sampler: RowSampler
    text: TextStream
    max_new_tokens: int
    status: RequestStatus = RequestStatus.WAITING
    prefilled: int = 0  # prompt tokens already in the request's cache
    cache_ready: bool = False  # the executor made its cache (after the prompt-cache lookup)
    generated: list[int] = field(default_factory=list)
    from_draft: list[bool] = field(default_factory=list)
    stats: RequestStats = field(default_factory=RequestStats)
    arrival: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    joined_at: float | None = None  # when its row joined the running batch
    last_stats_at: float = 0.0
    finish_reason: FinishReason | None = None
    unstreamed: int = 0  # tokens at the end of `generated` not yet turned into text
    ends_with: FinishReason | None = None  # EOS or max tokens reached; text not yet streamed
    eos_token: int | None = None  # the end-of-sequence token that ended it (fed, not in the reply)
    recent: RecentAcceptance = field(default_factory=RecentAcceptance)
    draft: str | None = None  # the drafter name of its draft model ("draft" and "auto"), if any
    plain: PlainEstimate = field(default_factory=PlainEstimate)  # its speed without its drafts

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def finished(self) -> bool:
        return self.status == RequestStatus.FINISHED

    @property
    def prompt_done(self) -> bool:
        """Every prompt token but the last is in the cache: the row can join the batch (the
        last one is its first input, as in `mlx_lm.generate`)."""
        return self.prefilled >= len(self.prompt) - 1

    @property
    def history(self) -> list[int]:
        """Every token the model has seen or produced for this row."""
        return self.prompt + self.generated

    def refresh_stats(self, now: float | None = None) -> RequestStats:
        now = time.perf_counter() if now is None else now
        s = self.stats
        s.prompt_tokens = len(self.prompt)
        s.generated_tokens = len(self.generated)
        s.context_tokens = s.prompt_tokens + s.generated_tokens
        s.elapsed_s = now - self.arrival
        if self.first_token_at is not None:
            s.ttft_s = self.first_token_at - self.arrival
            decode_time = now - self.first_token_at
            if len(self.generated) > 1 and decode_time > 0:
                s.decode_tokens_per_s = (len(self.generated) - 1) / decode_time
                s.plain_tokens_per_s = self.plain.rate(len(self.generated) - 1, decode_time)
        s.finish_reason = self.finish_reason
        s.recent_acceptance = self.recent.rate
        return s
