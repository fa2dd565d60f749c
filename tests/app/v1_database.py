"""A conversation database as Tandem's schema 1 wrote it (the SQL below is a frozen copy of that
schema), filled with the kinds of data the first version made: open and closed chats, finished,
stopped and interrupted replies, stats summaries, draft spans, gaps left by its old "edit"
(which deleted the later messages), and settings."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

V1_SCHEMA = """
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

SUMMARY = {  # what schema 1 kept of a reply's RequestStats (formatting.stats_summary)
    "prompt_tokens": 31,
    "cached_tokens": 12,
    "cache_source": "ram",
    "generated_tokens": 48,
    "ttft_s": 0.21,
    "decode_tokens_per_s": 14.5,
    "elapsed_s": 3.5,
    "finish_reason": "length",
    "draft_tokens": 40,
    "accepted_tokens": 22,
    "rounds": 10,
    "target_forwards": 27,
    "emitted_tokens": 48,
}

# (title, is_open, tab_index, system prompt, [(position, role, content, status, spans, stats)])
CHATS = [
    ("Trip to Lisbon", 1, 0, "You plan trips", [
        (0, "user", "Plan three days in Lisbon", "done", [], None),
        (1, "assistant", "Day one: Alfama and the castle of São Jorge.", "done", [[0, 7]], SUMMARY),
        (2, "user", "What about Belém?", "done", [], None),
        (3, "assistant", "Belém has the Jerónimos monastery and pastéis", "stopped", [], None),
    ]),
    ("Otters", 0, 0, "", [
        (0, "user", "Tell me about otters", "done", [], None),
        # positions 1-2 were deleted by the old edit-and-resend: a gap
        (3, "user", "Tell me about sea otters", "done", [], None),
        (4, "assistant", "Sea otters hold hands while sleeping", "interrupted", [], None),
    ]),
    ("Empty but open", 1, 1, "", []),
]  # fmt: skip
SETTINGS = {"theme_mode": "dark", "highlight_drafts": True, "model_dirs": ["/models"]}


def make_v1_database(path: Path) -> dict:
    """Write a schema-1 database at `path`; return what it holds, for comparison."""
    db = sqlite3.connect(str(path))
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(V1_SCHEMA)
    db.execute("PRAGMA user_version=1")
    expected = {}
    now = 1_760_000_000.0
    for n, (title, is_open, tab_index, system, messages) in enumerate(CHATS):
        cursor = db.execute(
            "INSERT INTO conversations (title, system_prompt, settings, created, updated,"
            " is_open, tab_index) VALUES (?,?,?,?,?,?,?)",
            (title, system, json.dumps({"max_tokens": 64 + n}), now + n, now + n + 50,
             is_open, tab_index),
        )  # fmt: skip
        conversation_id = cursor.lastrowid
        for position, role, content, status, spans, stats in messages:
            db.execute(
                "INSERT INTO messages (conversation_id, position, role, content, status,"
                " draft_spans, stats, error, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (conversation_id, position, role, content, status, json.dumps(spans),
                 json.dumps(stats) if stats else None, None, now + position, now + position),
            )  # fmt: skip
        expected[title] = [(role, content, status) for _p, role, content, status, *_ in messages]
    for key, value in SETTINGS.items():
        db.execute("INSERT INTO settings (key, value) VALUES (?, ?)", (key, json.dumps(value)))
    db.commit()
    db.close()
    return expected
