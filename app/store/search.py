"""Full-text search over every message with SQLite FTS5: the user's words as prefix phrases, and
snippets that keep the matched words marked."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from app.store.schema import SEARCH_TABLE

MARK_START, MARK_END = "\ue000", "\ue001"  # private-use characters: never in real text
SNIPPET_TOKENS = 14
SNIPPET_LEAD_CHARS = 14  # the sidebar shows this much before the first matched word
_DROPPED = set("*`#")  # Markdown marks, noise in a one-line snippet
DEFAULT_MATCH_LIMIT = 2000


@dataclass(frozen=True)
class Hit:
    """The best-matching message of one conversation."""

    conversation_id: int
    message_id: int
    snippet: str
    marks: tuple[tuple[int, int], ...]  # [start, end) of matched words in `snippet`
    rank: float  # bm25: lower is better


def fts_query(text: str) -> str:
    """Each whitespace-separated word as a quoted prefix phrase, all required ("pasta_al" finds
    "pasta_al_dente"); "" when nothing searchable is left."""
    phrases = []
    for word in text.split():
        if any(ch.isalnum() for ch in word):
            phrases.append('"' + word.replace('"', '""') + '"*')
    return " ".join(phrases)


def search_messages(
    db: sqlite3.Connection, text: str, *, limit: int = DEFAULT_MATCH_LIMIT
) -> dict[int, Hit]:
    """Per conversation, its best hit for `text` among visible messages."""
    query = fts_query(text)
    if not query:
        return {}
    rows = db.execute(
        f"SELECT m.conversation_id, m.id,"
        f" snippet({SEARCH_TABLE}, 0, ?, ?, '…', ?) AS snip, bm25({SEARCH_TABLE}) AS rank"
        f" FROM {SEARCH_TABLE} JOIN messages m ON m.id = {SEARCH_TABLE}.rowid"
        f" WHERE {SEARCH_TABLE} MATCH ? ORDER BY rank LIMIT ?",
        (MARK_START, MARK_END, SNIPPET_TOKENS, query, limit),
    ).fetchall()
    hits: dict[int, Hit] = {}
    for conversation_id, message_id, snip, rank in rows:
        if conversation_id not in hits:
            plain, marks = split_marks(snip)
            hits[conversation_id] = Hit(conversation_id, message_id, plain, marks, rank)
    return hits


def split_marks(
    marked: str, *, lead: int = SNIPPET_LEAD_CHARS
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Text without the snippet's markers (nor Markdown emphasis, code and heading marks, nor
    runs of white space), starting a little before the first matched word; and where the matched
    words are in it."""
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    start = -1
    for ch in marked:
        if ch == MARK_START:
            start = len(out)
        elif ch == MARK_END:
            if start >= 0:
                marks.append((start, len(out)))
            start = -1
        elif ch in _DROPPED:
            continue
        elif ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(ch)
    text = "".join(out)
    if marks and marks[0][0] > 2 * lead:
        cut = text.rfind(" ", 0, marks[0][0] - lead) + 1 or marks[0][0] - lead
        text = "…" + text[cut:]
        marks = [(s - cut + 1, e - cut + 1) for s, e in marks]
    return text, tuple(marks)
