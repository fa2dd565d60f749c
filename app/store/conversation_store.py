"""Conversations, messages and settings in SQLite (WAL), in the data folder.

Every write commits at once. In WAL mode with synchronous=NORMAL a commit is one write() to the
log, so whatever was committed survives the process being killed (SIGKILL); only a power cut can
lose the last commits. A reply being written has status "generating"; opening the store marks
those left over from a crash "interrupted".
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from app.settings.chat_settings import ChatSettings
from app.store.records import Conversation, ConversationSummary, Message, MessageStatus, Role

SCHEMA_VERSION = 1
DEFAULT_SEARCH_LIMIT = 200
SNIPPET_CHARS = 80

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    is_open INTEGER NOT NULL DEFAULT 1,
    tab_index INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'done',
    draft_spans TEXT NOT NULL DEFAULT '[]',
    stats TEXT,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, position);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class Store:
    """The app's only door to SQLite. Used from the GUI thread only."""

    def __init__(self, path: str | Path, *, recover: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path))
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._db:
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.recovered = self.recover_interrupted() if recover else 0

    def close(self) -> None:
        self._db.close()

    @property
    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    def recover_interrupted(self) -> int:
        """Mark replies left "generating" by a crash as "interrupted"; return how many."""
        with self._db:
            cursor = self._db.execute(
                "UPDATE messages SET status=? WHERE status=?",
                (MessageStatus.INTERRUPTED.value, MessageStatus.GENERATING.value),
            )
        return cursor.rowcount

    # -- conversations -------------------------------------------------------------------------

    def create_conversation(self, conversation: Conversation) -> Conversation:
        now = time.time()
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO conversations (title, system_prompt, settings, created, updated,"
                " is_open, tab_index) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation.title,
                    conversation.system_prompt,
                    json.dumps(conversation.settings.to_dict()),
                    now,
                    now,
                    int(conversation.is_open),
                    conversation.tab_index,
                ),
            )
        conversation.id = cursor.lastrowid
        conversation.created = conversation.updated = now
        return conversation

    def save_conversation(self, conversation: Conversation) -> None:
        conversation.updated = time.time()
        with self._db:
            self._db.execute(
                "UPDATE conversations SET title=?, system_prompt=?, settings=?, updated=?,"
                " is_open=?, tab_index=? WHERE id=?",
                (
                    conversation.title,
                    conversation.system_prompt,
                    json.dumps(conversation.settings.to_dict()),
                    conversation.updated,
                    int(conversation.is_open),
                    conversation.tab_index,
                    conversation.id,
                ),
            )

    def set_tab_state(self, conversation_id: int, *, is_open: bool, tab_index: int = 0) -> None:
        with self._db:
            self._db.execute(
                "UPDATE conversations SET is_open=?, tab_index=? WHERE id=?",
                (int(is_open), tab_index, conversation_id),
            )

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id=?", (conversation_id,)
        ).fetchone()
        return _conversation(row) if row else None

    def open_conversations(self) -> list[Conversation]:
        rows = self._db.execute(
            "SELECT * FROM conversations WHERE is_open=1 ORDER BY tab_index, id"
        ).fetchall()
        return [_conversation(row) for row in rows]

    def list_conversations(
        self, query: str = "", *, limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[ConversationSummary]:
        """Saved conversations, newest first; with `query`, those whose title or text has it."""
        counts = "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id=c.id)"
        if not query.strip():
            rows = self._db.execute(
                f"SELECT c.id, c.title, c.updated, c.is_open, {counts} AS n, '' AS hit"
                " FROM conversations c ORDER BY c.updated DESC LIMIT ?",
                (limit,),
            ).fetchall()
        else:
            pattern = "%" + _escape_like(query.strip()) + "%"
            rows = self._db.execute(
                f"SELECT c.id, c.title, c.updated, c.is_open, {counts} AS n,"
                " (SELECT m.content FROM messages m WHERE m.conversation_id=c.id"
                "  AND m.content LIKE ? ESCAPE '\\' ORDER BY m.position LIMIT 1) AS hit"
                " FROM conversations c"
                " WHERE c.title LIKE ? ESCAPE '\\' OR c.system_prompt LIKE ? ESCAPE '\\'"
                "  OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id"
                "   AND m.content LIKE ? ESCAPE '\\')"
                " ORDER BY c.updated DESC LIMIT ?",
                (pattern, pattern, pattern, pattern, limit),
            ).fetchall()
        return [
            ConversationSummary(
                id=row["id"],
                title=row["title"],
                updated=row["updated"],
                message_count=row["n"],
                snippet=_snippet(row["hit"] or "", query.strip()),
                is_open=bool(row["is_open"]),
            )
            for row in rows
        ]

    def delete_conversation(self, conversation_id: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    # -- messages ------------------------------------------------------------------------------

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id=? ORDER BY position", (conversation_id,)
        ).fetchall()
        return [_message(row) for row in rows]

    def message(self, message_id: int) -> Message | None:
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        return _message(row) if row else None

    def add_message(self, conversation_id: int, message: Message) -> Message:
        now = time.time()
        with self._db:
            position = self._db.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id=?",
                (conversation_id,),
            ).fetchone()[0]
            cursor = self._db.execute(
                "INSERT INTO messages (conversation_id, position, role, content, status,"
                " draft_spans, stats, error, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    conversation_id,
                    position,
                    message.role.value,
                    message.content,
                    message.status.value,
                    json.dumps(message.draft_spans),
                    json.dumps(message.stats) if message.stats is not None else None,
                    message.error,
                    message.created,
                    now,
                ),
            )
            self._touch(conversation_id, now)
        message.id = cursor.lastrowid
        message.conversation_id = conversation_id
        return message

    def update_message(
        self,
        message_id: int,
        *,
        content: str,
        status: MessageStatus,
        draft_spans: list[tuple[int, int]] | None = None,
        stats: dict | None = None,
        error: str | None = None,
    ) -> None:
        now = time.time()
        with self._db:
            self._db.execute(
                "UPDATE messages SET content=?, status=?, draft_spans=COALESCE(?, draft_spans),"
                " stats=COALESCE(?, stats), error=?, updated=? WHERE id=?",
                (
                    content,
                    status.value,
                    json.dumps(draft_spans) if draft_spans is not None else None,
                    json.dumps(stats) if stats is not None else None,
                    error,
                    now,
                    message_id,
                ),
            )

    def delete_messages_from(self, conversation_id: int, message_id: int) -> None:
        """Delete a message and every later one of its conversation (edit, regenerate)."""
        with self._db:
            self._db.execute(
                "DELETE FROM messages WHERE conversation_id=? AND position >="
                " (SELECT position FROM messages WHERE id=?)",
                (conversation_id, message_id),
            )
            self._touch(conversation_id, time.time())

    # -- settings ------------------------------------------------------------------------------

    def setting(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        if row is None:
            return default
        try:
            return json.loads(row[0])
        except ValueError:
            return default

    def set_setting(self, key: str, value: Any) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(value)),
            )

    def default_chat_settings(self) -> ChatSettings:
        return ChatSettings.from_dict(self.setting("chat_defaults"))

    def set_default_chat_settings(self, settings: ChatSettings) -> None:
        self.set_setting("chat_defaults", settings.to_dict())

    def _touch(self, conversation_id: int, now: float) -> None:
        self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))


def _conversation(row: sqlite3.Row) -> Conversation:
    try:
        settings = json.loads(row["settings"])
    except ValueError:
        settings = {}
    return Conversation(
        id=row["id"],
        title=row["title"],
        system_prompt=row["system_prompt"],
        settings=ChatSettings.from_dict(settings),
        created=row["created"],
        updated=row["updated"],
        is_open=bool(row["is_open"]),
        tab_index=row["tab_index"],
    )


def _message(row: sqlite3.Row) -> Message:
    try:
        spans = [tuple(span) for span in json.loads(row["draft_spans"] or "[]")]
    except ValueError:
        spans = []
    return Message(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        content=row["content"],
        status=MessageStatus(row["status"]),
        draft_spans=spans,
        stats=json.loads(row["stats"]) if row["stats"] else None,
        error=row["error"],
        created=row["created"],
    )


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _snippet(text: str, query: str) -> str:
    if not text or not query:
        return ""
    at = text.lower().find(query.lower())
    if at < 0:
        return ""
    start = max(0, at - SNIPPET_CHARS // 3)
    piece = text[start : start + SNIPPET_CHARS].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")
