"""Full-text search over every message with SQLite FTS5: the user's words as prefix phrases, and
snippets that keep the matched words marked."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from app.store.schema import SEARCH_TABLE

MARK_START, MARK_END = "\ue000", "\ue001"  # private-use characters: never in real text
SNIPPET_TOKENS = 14
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


def split_marks(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Text without the snippet's markers, and where the marked words are in it."""
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    at, start = 0, -1
    for ch in marked:
        if ch == MARK_START:
            start = at
        elif ch == MARK_END:
            if start >= 0:
                marks.append((start, at))
            start = -1
        else:
            out.append(" " if ch == "\n" else ch)
            at += 1
    return "".join(out), tuple(marks)
