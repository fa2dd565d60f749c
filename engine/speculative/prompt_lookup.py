"""Prompt lookup decoding: propose what followed the most recent earlier occurrence of the
longest n-gram that ends the row's history (prompt and reply so far). No second model.

Its cost per round is bounded whatever the history: it searches the last `search_window`
tokens for n-grams of at most `MAX_NGRAM` tokens (engine/requests.py caps what a request asks).
"""

from __future__ import annotations

from engine.requests import SpecMethod
from engine.speculative.drafter import Drafter, DraftRow

DEFAULT_SEARCH_WINDOW = 4096  # tokens of history searched; bounds the cost of long chats
DEFAULT_STRONG_NGRAM = 3  # a match this long is trusted over a model drafter ("auto")


class PromptLookupDrafter(Drafter):
    """Drafts by copying from the row's own history."""

    name = "lookup"
    kind = SpecMethod.PROMPT_LOOKUP.value
    drafts_ahead = True

    def __init__(self, *, search_window: int = DEFAULT_SEARCH_WINDOW) -> None:
        self.search_window = search_window

    def propose(self, rows: list[DraftRow]) -> list[list[int]]:
        return [
            lookup(
                row.history(self.search_window),
                row.k,
                ngram_min=row.params.ngram_min,
                ngram_max=row.params.ngram_max,
                window=self.search_window,
            )
            for row in rows
        ]


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


def strong_match(tokens: list[int], k: int, *, ngram_max: int, window: int) -> list[int]:
    """lookup() with n-grams of at least DEFAULT_STRONG_NGRAM tokens: a continuation worth
    drafting before a model drafter's guess (rewrites, quotes, code being edited)."""
    if ngram_max < DEFAULT_STRONG_NGRAM:
        return []
    return lookup(tokens, k, ngram_min=DEFAULT_STRONG_NGRAM, ngram_max=ngram_max, window=window)
