"""Incremental detokenization with stop strings: emits only whole UTF-8 characters and never
text that might turn out to be the start of a stop string."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CONTINUATION_PRIME = "\x00"  # stands for the reply so far, which this stream does not repeat


@dataclass
class TextStream:
    """One reply's text as tokens arrive, cut at the first stop string."""

    detokenizer: Any  # mlx-lm StreamingDetokenizer (its own copy per request)
    stop: tuple[str, ...] = ()
    # Continuing an earlier reply: mlx-lm's detokenizers drop a reply's leading space, which
    # belongs in a continuation ("This is" + " the"); primed text makes them keep it.
    continues: bool = False
    emitted: int = 0  # characters of `text` already handed out
    stopped: bool = False
    _text: str = field(default="")

    def __post_init__(self) -> None:
        self._skip = 0
        if self.continues:
            self.detokenizer.text = CONTINUATION_PRIME
            self._skip = len(CONTINUATION_PRIME)

    @property
    def text(self) -> str:
        """The reply so far, cut before a stop string once one appeared."""
        return self._text

    def add(self, token: int) -> str:
        """Add one token; return the new text that is safe to show."""
        if self.stopped:
            return ""
        self.detokenizer.add_token(token)
        self._text = self.detokenizer.text[self._skip :]
        return self._release()

    def finish(self) -> str:
        """Flush what the detokenizer held back (the reply ended)."""
        if not self.stopped:
            self.detokenizer.finalize()
            self._text = self.detokenizer.text[self._skip :]
        delta = self._release(final=True)
        return delta

    def _release(self, *, final: bool = False) -> str:
        if not self.stopped:
            hits = [
                at
                for stop in self.stop
                if (at := self._text.find(stop, max(0, self.emitted - len(stop) + 1))) != -1
            ]
            if hits:
                self._text = self._text[: min(hits)]
                self.stopped = True
        hold = 0 if (self.stopped or final) else _partial_stop_suffix(self._text, self.stop)
        end = len(self._text) - hold
        if end <= self.emitted:
            return ""
        delta = self._text[self.emitted : end]
        self.emitted = end
        return delta


def _partial_stop_suffix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of a stop string."""
    best = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:n]):
                best = n
                break
    return best
