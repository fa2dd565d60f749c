"""A chat's title from its first message: short enough that tabs are told apart (the full first
line is the tooltip)."""

from __future__ import annotations

import re

from app.store.records import DEFAULT_TITLE

TITLE_CHARS = 32
# Openers that say nothing about the topic ("Can you plan a trip…" -> "Plan a trip…").
_OPENERS = re.compile(
    r"^(?:(?:hi|hey|hello)\b[,!.]?\s+)?(?:(?:please|pls|can you|could you|would you|"
    r"will you|i want you to|i'd like you to|help me)\b[,]?\s+)?",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"^[\s#>*\-`]+")
_DANGLING = {"a", "an", "the", "of", "to", "for", "in", "on", "at", "and", "or", "with", "about",
             "my", "your", "is", "are"}  # fmt: skip


def first_line(text: str) -> str:
    """The first line that has text, without Markdown marks."""
    for line in text.splitlines():
        line = _MARKUP.sub("", line).strip()
        if line:
            return line
    return ""


def title_from(text: str, *, limit: int = TITLE_CHARS) -> str:
    """A short title: the first line without its opener, cut at a word before `limit`."""
    line = first_line(text)
    if not line:
        return DEFAULT_TITLE
    short = _OPENERS.sub("", line).strip() or line
    short = short[0].upper() + short[1:]
    if len(short) <= limit:
        return short
    cut = short[: limit - 1]
    if " " in cut[limit // 2 :]:
        words = cut.split(" ")[:-1]
        while len(words) > 2 and words[-1].lower() in _DANGLING:
            words.pop()
        cut = " ".join(words)
    return cut.rstrip(" ,.;:-") + "…"
