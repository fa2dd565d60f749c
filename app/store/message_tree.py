"""Queries over the message tree: the branch that ends at a message, the versions at a place,
and the branch shown below a version when the user switches to it."""

from __future__ import annotations

import sqlite3

_BRANCH = """
WITH RECURSIVE up(id, depth) AS (
    SELECT ?, 0
    UNION ALL
    SELECT m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.id
    WHERE m.parent_id IS NOT NULL
)
SELECT m.* FROM up JOIN messages m ON m.id = up.id ORDER BY up.depth DESC
"""


def branch(db: sqlite3.Connection, leaf_id: int | None) -> list[sqlite3.Row]:
    """The messages from the first one down to `leaf_id`, hidden ones included."""
    if leaf_id is None:
        return []
    return db.execute(_BRANCH, (leaf_id,)).fetchall()


def descend(db: sqlite3.Connection, message_id: int) -> int:
    """The last message of the branch under `message_id`: at each step the visible child that
    was on screen most recently (the newest one if none was)."""
    current = message_id
    while True:
        row = db.execute(
            "SELECT id FROM messages WHERE parent_id=?"
            " ORDER BY deleted IS NULL DESC, chosen DESC, id DESC LIMIT 1",
            (current,),
        ).fetchone()
        if row is None:
            return current
        current = row[0]


def versions(
    db: sqlite3.Connection, conversation_id: int, parent_ids: list[int | None]
) -> dict[int | None, tuple[int, ...]]:
    """For each parent, the ids of its visible children (the versions at that place), oldest
    first; None stands for the conversation's first messages."""
    out: dict[int | None, tuple[int, ...]] = {}
    ids = sorted({p for p in parent_ids if p is not None})
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT parent_id, id FROM messages WHERE parent_id IN ({marks})"
            " AND deleted IS NULL ORDER BY id",
            chunk,
        ).fetchall()
        for parent, child in rows:
            out[parent] = out.get(parent, ()) + (child,)
    if None in parent_ids:
        rows = db.execute(
            "SELECT id FROM messages WHERE conversation_id=? AND parent_id IS NULL"
            " AND deleted IS NULL ORDER BY id",
            (conversation_id,),
        ).fetchall()
        out[None] = tuple(r[0] for r in rows)
    return out


def mark_chosen(db: sqlite3.Connection, leaf_id: int, when: float) -> None:
    """Remember that the branch ending at `leaf_id` is the one on screen."""
    ids = [row["id"] for row in branch(db, leaf_id)]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        db.execute(f"UPDATE messages SET chosen=? WHERE id IN ({marks})", [when, *chunk])
