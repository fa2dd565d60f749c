"""Prompt lookup decoding: propose what followed the most recent earlier occurrence of the
longest n-gram that ends the row's history (prompt and reply so far). No second model."""

from __future__ import annotations

from engine.request_state import RequestState

DEFAULT_SEARCH_WINDOW = 4096  # tokens of history searched; bounds the cost of long chats


class PromptLookupDrafter:
    name = "lookup"

    def __init__(self, *, search_window: int = DEFAULT_SEARCH_WINDOW) -> None:
        self.search_window = search_window

    def propose(self, row: RequestState, k: int) -> list[int]:
        spec = row.request.speculative
        return lookup(
            row.history,
            k,
            ngram_min=spec.ngram_min,
            ngram_max=spec.ngram_max,
            window=self.search_window,
        )

    def observe(self, row: RequestState, drafted: list[int], accepted: int) -> None:
        pass


def lookup(tokens: list[int], k: int, *, ngram_min: int, ngram_max: int, window: int) -> list[int]:
    """The continuation (up to k tokens) of the longest n-gram suffix match, most recent first."""
    if k <= 0:
        return []
    history = tokens[-window:]
    n_tokens = len(history)
    best: list[int] = []
    for n in range(min(ngram_max, n_tokens - 1), ngram_min - 1, -1):
        suffix = history[n_tokens - n :]
        first = suffix[0]
        # scan right to left: the most recent earlier occurrence with a full continuation wins
        for start in range(n_tokens - n - 1, -1, -1):
            if history[start] == first and history[start : start + n] == suffix:
                follow = history[start + n : start + n + k]
                if len(follow) == k:
                    return follow
                if len(follow) > len(best):
                    best = follow
        if best:
            return best
    return best
