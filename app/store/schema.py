"""The conversation database's current schema (version 2): conversations, a tree of messages,
settings, and an FTS5 index over message text kept in sync by triggers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

SCHEMA_VERSION = 2

TABLES = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    is_open INTEGER NOT NULL DEFAULT 1,
    tab_index INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0,
    current_leaf INTEGER,
    queue TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'done',
    draft_spans TEXT NOT NULL DEFAULT '[]',
    stats TEXT,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    chosen REAL NOT NULL DEFAULT 0,
    deleted REAL
);
CREATE INDEX IF NOT EXISTS messages_by_parent ON messages (conversation_id, parent_id);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""
# messages.chosen: when the message was last on the branch on screen; below a version switch the
# most recently chosen reply is shown. messages.deleted: hidden by the user (undo until restart).

SEARCH_INDEX = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages
WHEN new.deleted IS NULL BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages
WHEN old.deleted IS NULL BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content, deleted ON messages
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted IS NULL;
    INSERT INTO messages_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted IS NULL;
END;
"""

SEARCH_TABLE = "messages_fts"


def create(db: sqlite3.Connection) -> None:
    """Create every table, index and trigger of the current schema (idempotent)."""
    run_script(db, TABLES)
    create_search_index(db)


def create_search_index(db: sqlite3.Connection) -> None:
    """Create the FTS5 index and its triggers (idempotent) and fill it if it is empty."""
    run_script(db, SEARCH_INDEX)
    indexed = db.execute(f"SELECT COUNT(*) FROM {SEARCH_TABLE}_docsize").fetchone()[0]
    if not indexed:
        rebuild_search_index(db)


def rebuild_search_index(db: sqlite3.Connection) -> None:
    """Index every visible message again ('rebuild' would also index hidden ones)."""
    db.execute(f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}) VALUES ('delete-all')")
    db.execute(
        f"INSERT INTO {SEARCH_TABLE}(rowid, content)"
        " SELECT id, content FROM messages WHERE deleted IS NULL"
    )


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute `script` statement by statement: unlike executescript, inside the caller's
    transaction."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        db.execute(statement)


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception (the connection autocommits
    otherwise: isolation_level=None)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
