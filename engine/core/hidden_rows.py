"""The target's hidden states kept per row until the row's drafter is handed them
(/work/notes/HIDDEN_API.md): positions are absolute (0-based into prompt + reply), each
position is kept once (a recurrent row that replays kept tokens is not handed them again), and
only the most recent `DEFAULT_HIDDEN_KEEP` positions wait."""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

DEFAULT_HIDDEN_KEEP = 2048  # positions one row may have waiting for its drafter


@dataclass
class _Row:
    start: int = 0  # position of parts[0][0]
    parts: list[mx.array] = field(default_factory=list)  # each [n, d], consecutive positions
    end: int = 0  # one past the last position kept (or handed over)

    @property
    def waiting(self) -> int:
        return sum(p.shape[0] for p in self.parts)


class HiddenRows:
    """Hidden states per request id, waiting for the row's next proposal."""

    def __init__(self, keep: int = DEFAULT_HIDDEN_KEEP) -> None:
        self.keep = keep
        self._rows: dict[str, _Row] = {}

    def add(self, request_id: str, position: int, hidden: mx.array) -> None:
        """`hidden` [n, d] holds positions position..position+n-1 of the row."""
        row = self._rows.setdefault(request_id, _Row(start=position, end=position))
        skip = max(0, row.end - position)  # positions already kept or handed over
        if skip >= hidden.shape[0]:
            return
        if skip:
            hidden, position = hidden[skip:], position + skip
        if position != row.end or not row.parts:  # a gap (not run): start after it
            row.parts, row.start = [], position
        row.parts.append(hidden)
        row.end = position + hidden.shape[0]
        surplus = row.waiting - self.keep
        if surplus > 0:
            joined = mx.concatenate(row.parts, axis=0)[surplus:]
            row.parts, row.start = [joined], row.start + surplus

    def take(self, request_id: str) -> tuple[mx.array | None, int]:
        """(hidden [n, d] or None when nothing waits, the position of its first row); what is
        taken is never handed over again."""
        row = self._rows.get(request_id)
        if row is None or not row.parts:
            return None, row.end if row is not None else 0
        parts, start = row.parts, row.start
        row.parts, row.start = [], row.end
        hidden = parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=0)
        return hidden, start

    def forget(self, request_ids) -> None:
        for rid in request_ids:
            self._rows.pop(rid, None)

    def clear(self) -> None:
        self._rows.clear()
