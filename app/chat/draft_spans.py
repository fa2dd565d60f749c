"""Which characters of a reply came from accepted draft tokens, as merged [start, end) spans."""

from __future__ import annotations

Span = tuple[int, int]


def split_delta(text: str, from_draft: list[bool], pieces: list[str] | None = None) -> list[Span]:
    """Spans, relative to the start of `text`, of the characters that came from drafts.

    With `pieces` (one text piece per token) the spans are exact. Without them, a delta whose
    tokens all came from drafts is highlighted whole, and a mixed one in proportion to the token
    counts (accepted draft tokens come first in a verify round, the target's own token last).
    """
    if not text or not from_draft or not any(from_draft):
        return []
    if pieces is not None and len(pieces) == len(from_draft):
        spans: list[Span] = []
        at = 0
        for piece, drafted in zip(pieces, from_draft):
            if drafted and piece:
                spans.append((at, at + len(piece)))
            at += len(piece)
        return merge(spans)
    if all(from_draft):
        return [(0, len(text))]
    leading = 0
    for drafted in from_draft:
        if not drafted:
            break
        leading += 1
    if leading == 0:
        return []
    end = round(len(text) * leading / len(from_draft))
    return [(0, end)] if end > 0 else []


def shifted(spans: list[Span], offset: int) -> list[Span]:
    return [(start + offset, end + offset) for start, end in spans]


def merge(spans: list[Span]) -> list[Span]:
    """Sort and join touching or overlapping spans."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def covered(spans: list[Span]) -> int:
    return sum(end - start for start, end in spans)
