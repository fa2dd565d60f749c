"""Turning a row's new tokens into events: EOS, stop strings and max tokens end a row at the
right token; text deltas are whole UTF-8 characters, with the text each token released; stats
are copied out as plain values. (vLLM keeps the same job apart from its scheduler, in its
OutputProcessor.)"""

from __future__ import annotations

import time

from engine.core.request_state import RequestState
from engine.requests import (
    ErrorEvent,
    Event,
    FinishedEvent,
    FinishReason,
    RequestStats,
    RequestStatus,
    SpecStats,
    StatsEvent,
    TokenEvent,
)


class OutputProcessor:
    """Events for the rows' new tokens, stats and ends."""

    def __init__(self, eos_token_ids: set[int], *, stats_interval_s: float) -> None:
        self.eos = eos_token_ids
        self.stats_interval_s = stats_interval_s
        self.events: list[Event] = []
        self.generated_tokens = 0
        self.spec_totals = SpecStats()  # of finished requests

    def take(self) -> list[Event]:
        events, self.events = self.events, []
        return events

    def record(self, state: RequestState, tokens: list[int], drafted: list[bool]) -> int:
        """The tokens join the row up to EOS or max tokens, so the next round can draft from
        them; `stream` turns them into text (stop strings may then give some back). Returns
        how many tokens the reply used, an EOS included."""
        if state.first_token_at is None:
            state.first_token_at = time.perf_counter()
        kept, eos_hit = 0, False
        for token, from_draft in zip(tokens, drafted):
            if token in self.eos:
                state.ends_with, eos_hit = FinishReason.STOP, True
                state.eos_token = token
                break
            state.generated.append(token)
            state.from_draft.append(from_draft)
            kept += 1
            if len(state.generated) >= state.max_new_tokens:
                state.ends_with = FinishReason.LENGTH
                break
        state.unstreamed += kept
        self.generated_tokens += kept
        return kept + eos_hit

    def stream(self, state: RequestState) -> bool:
        """Text for the recorded tokens; finish the row if it ended. True when it finished."""
        new, state.unstreamed = state.unstreamed, 0
        start = len(state.generated) - new
        reason = state.ends_with
        text = []
        for used, token in enumerate(state.generated[start:], 1):
            text.append(state.text.add(token))
            if state.text.stopped:
                reason = FinishReason.STOP
                dropped = new - used  # recorded after the stop string: not part of the reply
                if dropped:
                    del state.generated[-dropped:]
                    del state.from_draft[-dropped:]
                    self.generated_tokens -= dropped
                # an EOS after the stop string was never reached either
                eos = state.ends_with == FinishReason.STOP
                state.stats.spec.emitted_tokens -= dropped + eos
                break
        tokens = state.generated[start:]
        if reason is not None:
            held = state.text.finish()
            if text:
                text[-1] += held
            else:
                text.append(held)
        delta = "".join(text)
        if tokens or delta:
            pieces = text if len(text) == len(tokens) else []
            self.events.append(
                TokenEvent(state.request_id, tokens, delta, state.from_draft[start:], pieces)
            )
        if reason is not None:
            self.finish(state, reason)
            return True
        return False

    def emit_stats(self, rows: list[RequestState]) -> None:
        """Stats events for the rows due one."""
        now = time.perf_counter()
        for state in rows:
            if now - state.last_stats_at >= self.stats_interval_s:
                state.last_stats_at = now
                self.events.append(StatsEvent(state.request_id, copy_stats(state, now)))

    def finish(self, state: RequestState, reason: FinishReason) -> None:
        state.finish_reason = reason
        state.status = RequestStatus.FINISHED
        stats = copy_stats(state)
        self.spec_totals.add(stats.spec)
        self.events.append(
            FinishedEvent(state.request_id, reason, state.text.text, list(state.generated), stats)
        )

    def cancel(self, state: RequestState) -> None:
        held = state.text.finish()  # text held back (half a character, a stop prefix)
        if held:
            self.events.append(TokenEvent(state.request_id, [], held, []))
        self.finish(state, FinishReason.CANCELLED)

    def fail(self, state: RequestState, message: str) -> None:
        state.finish_reason = FinishReason.ERROR
        state.status = RequestStatus.FINISHED
        self.events.append(ErrorEvent(state.request_id, message, copy_stats(state)))


def copy_stats(state: RequestState, now: float | None = None) -> RequestStats:
    return state.refresh_stats(now).copy()
