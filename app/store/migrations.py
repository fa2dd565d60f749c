"""Bringing a conversation database up to the current schema, one version at a time, each step in
one transaction; a copy of the old file is kept next to it first."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from app.store.schema import (
    SCHEMA_VERSION,
    TABLES,
    create,
    create_search_index,
    run_script,
    transaction,
)

BACKUP_SUFFIX = ".before-v{version}"


class SchemaTooNew(RuntimeError):
    """The database was written by a newer Tandem."""


def schema_version(db: sqlite3.Connection) -> int:
    """The database's schema version; 0 for an empty database."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == 0 and _has_table(db, "conversations"):
        return 1  # the first schema did not always set user_version
    return version


def migrate(db: sqlite3.Connection, path: Path | None = None) -> int:
    """Create or upgrade the schema of `db` (its file is `path`); return the version it had.
    Needs a connection in autocommit mode (isolation_level=None) with foreign keys off."""
    version = schema_version(db)
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path or 'the database'} was written by a newer Tandem (schema {version}); "
            f"this version reads schema {SCHEMA_VERSION} and older"
        )
    if version == 0:
        with transaction(db):
            create(db)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return 0
    if version < SCHEMA_VERSION and path is not None:
        backup(db, path.with_name(path.name + BACKUP_SUFFIX.format(version=SCHEMA_VERSION)))
    for step in range(version, SCHEMA_VERSION):
        with transaction(db):
            MIGRATIONS[step](db)
            db.execute(f"PRAGMA user_version={step + 1}")
        problems = db.execute("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise sqlite3.IntegrityError(
                f"migration to schema {step + 1}: {len(problems)} bad links"
            )
    with transaction(db):
        create_search_index(db)  # idempotent: also rebuilds an index lost to salvage
    return version


def backup(db: sqlite3.Connection, target: Path) -> None:
    """A consistent copy of the whole database (SQLite's online backup)."""
    copy = sqlite3.connect(str(target))
    try:
        db.backup(copy)
    finally:
        copy.close()


def _v1_to_v2(db: sqlite3.Connection) -> None:
    """Messages become a tree: each message's parent is the one before it; the last message of
    each chat is the branch on screen. Adds pins, the message queue and the search index."""
    for column in (
        "pinned INTEGER NOT NULL DEFAULT 0",
        "current_leaf INTEGER",
        "queue TEXT NOT NULL DEFAULT '[]'",
    ):
        db.execute(f"ALTER TABLE conversations ADD COLUMN {column}")
    db.execute("ALTER TABLE messages RENAME TO messages_v1")
    db.execute("DROP INDEX IF EXISTS messages_by_conversation")
    run_script(db, TABLES)
    db.execute(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, status,"
        " draft_spans, stats, error, created, updated, chosen)"
        " SELECT id, conversation_id,"
        "  LAG(id) OVER (PARTITION BY conversation_id ORDER BY position, id),"
        "  role, content, status, draft_spans, stats, error, created, updated, created"
        " FROM messages_v1 WHERE conversation_id IN (SELECT id FROM conversations)"
    )
    db.execute("DROP TABLE messages_v1")
    db.execute(
        "UPDATE conversations SET current_leaf = (SELECT m.id FROM messages m"
        " WHERE m.conversation_id = conversations.id AND NOT EXISTS"
        "  (SELECT 1 FROM messages c WHERE c.parent_id = m.id))"
    )
    create_search_index(db)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    row = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,))
    return row.fetchone() is not None
