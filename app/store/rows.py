"""Rows of the conversation database as the app's records."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from app.settings.chat_settings import ChatSettings
from app.store.records import Conversation, ConversationSummary, Message, MessageStatus, Role


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=row["title"],
        system_prompt=row["system_prompt"],
        settings=ChatSettings.from_dict(_json(row["settings"], {})),
        created=row["created"],
        updated=row["updated"],
        is_open=bool(row["is_open"]),
        tab_index=row["tab_index"],
        pinned=bool(row["pinned"]),
        current_leaf=row["current_leaf"],
        queue=[str(t) for t in _json(row["queue"], [])],
    )


def message_from_row(row: sqlite3.Row, siblings: tuple[int, ...] = ()) -> Message:
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        parent_id=row["parent_id"],
        siblings=siblings,
        role=Role(row["role"]),
        content=row["content"],
        status=MessageStatus(row["status"]),
        draft_spans=[tuple(span) for span in _json(row["draft_spans"], [])],
        stats=_json(row["stats"], None),
        error=row["error"],
        created=row["created"],
    )


def summary_from_row(
    row: sqlite3.Row,
    snippet: str = "",
    marks: tuple[tuple[int, int], ...] = (),
    hit_message_id: int | None = None,
) -> ConversationSummary:
    first = (row["first"] or "").strip()
    return ConversationSummary(
        id=row["id"],
        title=row["title"],
        updated=row["updated"],
        message_count=row["n"],
        snippet=snippet,
        snippet_marks=marks,
        is_open=bool(row["is_open"]),
        pinned=bool(row["pinned"]),
        first_line=first.splitlines()[0] if first else "",
        hit_message_id=hit_message_id,
    )


def _json(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
