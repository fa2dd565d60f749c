"""Conversations, their message trees and settings in SQLite (WAL), in the data folder.

Every write commits at once. In WAL mode with synchronous=NORMAL a commit is one write() to the
log, so whatever was committed survives the process being killed (SIGKILL); only a power cut can
lose the last commits. A reply being written has status "generating"; opening the store marks
those left over from a crash "interrupted".

History is never destroyed: editing or regenerating adds a version next to the old message (the
conversation is a tree; `current_leaf` says which branch is on screen), and deleting one message
hides it (undo lasts until the next start, which then clears its text). Only deleting a whole
chat removes rows. A damaged database is moved aside and salvaged on open (`damaged`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from app.settings.chat_settings import ChatSettings
from app.store import message_tree, salvage
from app.store.migrations import migrate
from app.store.records import Conversation, ConversationSummary, Message, MessageStatus, Role
from app.store.reply_stats import decode
from app.store.rows import conversation_from_row, message_from_row, summary_from_row
from app.store.schema import transaction
from app.store.search import search_messages
from engine.requests import RequestStats

DEFAULT_LIST_LIMIT = 200
FORK_MARK = "(fork)"
CURRENT_LEAF = object()  # add_message's default parent: the last message on screen


class Store:
    """The app's only door to SQLite. Used from the GUI thread only."""

    def __init__(self, path: str | Path, *, recover: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        reason = salvage.problem(self.path)
        self.damaged: salvage.DamageReport | None = (
            salvage.salvage(self.path, reason) if reason else None
        )
        try:
            self._open()
        except sqlite3.DatabaseError as exc:  # damage that quick_check did not see
            if self.damaged is not None:
                raise
            self._db.close()
            self.damaged = salvage.salvage(self.path, str(exc))
            self._open()
        self.recovered = self.recover_interrupted() if recover else 0
        if recover:
            self._tidy()

    def _open(self) -> None:
        self._db = sqlite3.connect(str(self.path), isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self.migrated_from = migrate(self._db, self.path)
        self._db.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        """Fold the write-ahead log into the database file, then close."""
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:  # another instance may hold it; the log is kept then
            pass
        self._db.close()

    @property
    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    def recover_interrupted(self) -> int:
        """Mark replies left "generating" by a crash as "interrupted"; return how many."""
        cursor = self._db.execute(
            "UPDATE messages SET status=? WHERE status=?",
            (MessageStatus.INTERRUPTED.value, MessageStatus.GENERATING.value),
        )
        return cursor.rowcount

    def _tidy(self) -> None:
        """Clear the text of messages deleted before this start (their undo has lapsed) and drop
        closed chats that never got a message."""
        with transaction(self._db):
            self._db.execute(
                "UPDATE messages SET content='', draft_spans='[]'"
                " WHERE deleted IS NOT NULL AND content != ''"
            )
            self._db.execute(
                "DELETE FROM conversations WHERE is_open=0 AND NOT EXISTS (SELECT 1 FROM"
                " messages m WHERE m.conversation_id=conversations.id AND m.deleted IS NULL)"
            )

    # -- conversations -------------------------------------------------------------------------

    def create_conversation(self, conversation: Conversation) -> Conversation:
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO conversations (title, system_prompt, settings, created, updated,"
            " is_open, tab_index, pinned, queue) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                conversation.title,
                conversation.system_prompt,
                json.dumps(conversation.settings.to_dict()),
                now,
                now,
                int(conversation.is_open),
                conversation.tab_index,
                int(conversation.pinned),
                json.dumps(conversation.queue),
            ),
        )
        conversation.id = cursor.lastrowid
        conversation.created = conversation.updated = now
        return conversation

    def save_conversation(self, conversation: Conversation) -> None:
        """Store the title, system prompt, settings and tab state (pins, the branch on screen
        and the queue have setters of their own)."""
        conversation.updated = time.time()
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
        self._db.execute(
            "UPDATE conversations SET is_open=?, tab_index=? WHERE id=?",
            (int(is_open), tab_index, conversation_id),
        )

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        self._db.execute(
            "UPDATE conversations SET title=?, updated=? WHERE id=?",
            (title, time.time(), conversation_id),
        )

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        self._db.execute(
            "UPDATE conversations SET pinned=? WHERE id=?", (int(pinned), conversation_id)
        )

    def set_queue(self, conversation_id: int, texts: list[str]) -> None:
        """The messages waiting for this chat's running reply (kept so nothing typed is lost)."""
        self._db.execute(
            "UPDATE conversations SET queue=? WHERE id=?", (json.dumps(texts), conversation_id)
        )

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            "SELECT * FROM conversations WHERE id=?", (conversation_id,)
        ).fetchone()
        return conversation_from_row(row) if row else None

    def open_conversations(self) -> list[Conversation]:
        rows = self._db.execute(
            "SELECT * FROM conversations WHERE is_open=1 ORDER BY tab_index, id"
        ).fetchall()
        return [conversation_from_row(row) for row in rows]

    def list_conversations(
        self, query: str = "", *, limit: int = DEFAULT_LIST_LIMIT
    ) -> list[ConversationSummary]:
        """Chats that have a message: pinned first, then newest first. With `query`, those whose
        title or any message (every branch) has its words, best match first, with a snippet."""
        select = (
            "SELECT c.id, c.title, c.updated, c.is_open, c.pinned,"
            " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id=c.id"
            "  AND m.deleted IS NULL) AS n,"
            " (SELECT m.content FROM messages m WHERE m.conversation_id=c.id"
            "  AND m.parent_id IS NULL AND m.deleted IS NULL ORDER BY m.chosen DESC LIMIT 1)"
            "  AS first FROM conversations c WHERE n > 0"
        )
        if not query.strip():
            rows = self._db.execute(
                select + " ORDER BY c.pinned DESC, c.updated DESC LIMIT ?", (limit,)
            ).fetchall()
            return [summary_from_row(row) for row in rows]
        hits = search_messages(self._db, query)
        words = query.strip().lower()
        rows = self._db.execute(select).fetchall()
        found = [r for r in rows if r["id"] in hits or words in r["title"].lower()]
        found.sort(key=lambda r: (-r["pinned"], words not in r["title"].lower(),
                                  hits[r["id"]].rank if r["id"] in hits else 0.0))  # fmt: skip
        out = []
        for row in found[:limit]:
            hit = hits.get(row["id"])
            if hit is None:
                out.append(summary_from_row(row))
            else:
                out.append(summary_from_row(row, hit.snippet, hit.marks, hit.message_id))
        return out

    def delete_conversation(self, conversation_id: int) -> None:
        """Remove a chat and every message of it (the one deletion that is not undone)."""
        self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    def fork(self, conversation_id: int, message_id: int) -> Conversation:
        """A new chat holding copies of the branch from the first message down to
        `message_id`, with the same system prompt and settings."""
        source = self.conversation(conversation_id)
        rows = [r for r in message_tree.branch(self._db, message_id) if r["deleted"] is None]
        fork = Conversation(
            title=f"{source.title} {FORK_MARK}",
            system_prompt=source.system_prompt,
            settings=source.settings,
            is_open=True,
        )
        with transaction(self._db):
            self.create_conversation(fork)
            parent = None
            for row in rows:
                copy = message_from_row(row)
                copy.status = MessageStatus.INTERRUPTED if not copy.status.terminal else copy.status
                parent = self._insert_message(fork.id, copy, parent).id
        fork.current_leaf = parent
        return fork

    # -- messages ------------------------------------------------------------------------------

    def messages(self, conversation_id: int) -> list[Message]:
        """The branch on screen: its visible messages, first to last, with their versions."""
        rows = [
            r
            for r in message_tree.branch(self._db, self.current_leaf(conversation_id))
            if r["deleted"] is None
        ]
        versions = message_tree.versions(self._db, conversation_id, [r["parent_id"] for r in rows])
        return [message_from_row(r, versions.get(r["parent_id"], ())) for r in rows]

    def message(self, message_id: int) -> Message | None:
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        return message_from_row(row) if row else None

    def message_count(self, conversation_id: int) -> int:
        """Visible messages of every branch."""
        return self._db.execute(
            "SELECT COUNT(*) FROM messages WHERE conversation_id=? AND deleted IS NULL",
            (conversation_id,),
        ).fetchone()[0]

    def add_message(
        self, conversation_id: int, message: Message, *, parent_id: Any = CURRENT_LEAF
    ) -> Message:
        """Store `message` as a child of `parent_id` (default: the last message on screen; None:
        a new first message) and put it on screen."""
        if parent_id is CURRENT_LEAF:
            parent_id = self.current_leaf(conversation_id)
        with transaction(self._db):
            self._insert_message(conversation_id, message, parent_id)
        versions = message_tree.versions(self._db, conversation_id, [parent_id])
        message.siblings = versions.get(parent_id, (message.id,))
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
        self._db.execute(
            "UPDATE messages SET content=?, status=?, draft_spans=COALESCE(?, draft_spans),"
            " stats=COALESCE(?, stats), error=?, updated=? WHERE id=?",
            (
                content,
                status.value,
                json.dumps(draft_spans) if draft_spans is not None else None,
                json.dumps(stats) if stats is not None else None,
                error,
                time.time(),
                message_id,
            ),
        )

    def set_hidden(self, message_id: int, hidden: bool) -> None:
        """Delete one message (hidden, its text cleared at the next start) or undo that."""
        self._db.execute(
            "UPDATE messages SET deleted=? WHERE id=?",
            (time.time() if hidden else None, message_id),
        )

    def show_version(self, conversation_id: int, message_id: int) -> int:
        """Put the branch through `message_id` on screen (below it, the branch last shown there);
        return its last message."""
        leaf = message_tree.descend(self._db, message_id)
        with transaction(self._db):
            self._set_leaf(conversation_id, leaf)
        return leaf

    def last_reply_stats(self, conversation_id: int) -> RequestStats | None:
        """The full stats of the last reply on screen that has them (for the live panel)."""
        for message in reversed(self.messages(conversation_id)):
            if message.role is Role.ASSISTANT and message.stats:
                return decode(message.stats)
        return None

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
        self._db.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value)),
        )

    def default_chat_settings(self) -> ChatSettings:
        return ChatSettings.from_dict(self.setting("chat_defaults"))

    def set_default_chat_settings(self, settings: ChatSettings) -> None:
        self.set_setting("chat_defaults", settings.to_dict())

    # -- internals -----------------------------------------------------------------------------

    def _insert_message(
        self, conversation_id: int, message: Message, parent_id: int | None
    ) -> Message:
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO messages (conversation_id, parent_id, role, content, status,"
            " draft_spans, stats, error, created, updated, chosen)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                conversation_id,
                parent_id,
                message.role.value,
                message.content,
                message.status.value,
                json.dumps(message.draft_spans),
                json.dumps(message.stats) if message.stats is not None else None,
                message.error,
                message.created,
                now,
                now,
            ),
        )
        message.id = cursor.lastrowid
        message.conversation_id = conversation_id
        message.parent_id = parent_id
        self._set_leaf(conversation_id, message.id, now=now, chosen=False)
        self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
        return message

    def current_leaf(self, conversation_id: int) -> int | None:
        """The last message of the branch on screen (hidden or not); None in an empty chat."""
        row = self._db.execute(
            "SELECT current_leaf FROM conversations WHERE id=?", (conversation_id,)
        ).fetchone()
        if row is not None and row[0] is not None:
            return row[0]
        first = self._db.execute(  # no branch chosen yet (salvaged data): the newest one
            "SELECT id FROM messages WHERE conversation_id=? AND parent_id IS NULL"
            " ORDER BY deleted IS NULL DESC, id DESC LIMIT 1",
            (conversation_id,),
        ).fetchone()
        return message_tree.descend(self._db, first[0]) if first else None

    def _set_leaf(
        self, conversation_id: int, leaf: int, *, now: float | None = None, chosen: bool = True
    ) -> None:
        now = now or time.time()
        self._db.execute(
            "UPDATE conversations SET current_leaf=? WHERE id=?", (leaf, conversation_id)
        )
        if chosen:
            message_tree.mark_chosen(self._db, leaf, now)
