"""A damaged conversation database at start: found (quick_check, or any sqlite3.DatabaseError),
moved aside with a timestamp, and what SQLite can still read copied row by row into a fresh file
(the approach of the sqlite3 shell's .recover), so that the app starts with what survived."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TABLES = ("conversations", "messages", "settings")  # in the order they are copied
SIDE_FILES = ("-wal", "-shm")
READ_CHUNK_ROWS = 256
UNKNOWN_MAX_ROWID = 1 << 20  # probed when even max(rowid) cannot be read
SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100


@dataclass(frozen=True)
class DamageReport:
    """A damaged database found at start: where it went, and what was read back from it."""

    damaged_path: Path  # the damaged file, moved aside
    problem: str  # what SQLite said
    conversations: int = 0
    messages: int = 0
    unreadable_rows: int = 0

    @property
    def message(self) -> str:
        saved = (
            f"{self.conversations} chat{'s' if self.conversations != 1 else ''} and "
            f"{self.messages} message{'s' if self.messages != 1 else ''} were recovered from it"
        )
        return (
            f"The conversation database was damaged ({self.problem}). It was moved to "
            f"{self.damaged_path}; {saved}."
        )


def problem(path: Path) -> str | None:
    """None when the database at `path` is sound (or absent), else what SQLite reports."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(str(path))
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        return str(exc) or type(exc).__name__
    results = [row[0] for row in rows]
    return None if results == ["ok"] else "; ".join(results[:3])


def salvage(path: Path, reason: str) -> DamageReport:
    """Move the damaged database at `path` aside and put what can be read of it at `path`."""
    aside = move_aside(path)
    fresh = path.with_name(path.name + ".salvaging")
    fresh.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="tandem-salvage-") as folder:
        copy = Path(folder) / "damaged.sqlite3"
        for suffix in ("", *SIDE_FILES):
            if Path(str(aside) + suffix).exists():
                shutil.copyfile(str(aside) + suffix, str(copy) + suffix)
        _match_header_to_file(copy)
        counts = _copy_readable(copy, fresh)
    os.replace(fresh, path)
    report = DamageReport(damaged_path=aside, problem=reason, **counts)
    log.warning("%s", report.message)
    return report


def move_aside(path: Path) -> Path:
    """Rename the database and its -wal/-shm files to `<name>.damaged-<timestamp>`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    for suffix in SIDE_FILES[::-1]:  # the main file last: it is what marks a database
        side = Path(str(path) + suffix)
        if side.exists():
            os.replace(side, str(target) + suffix)
    os.replace(path, target)
    return target


def _match_header_to_file(path: Path) -> None:
    """A truncated file's header still counts the pages it lost, and SQLite then refuses to read
    even the schema: make the header count the whole pages that are there."""
    with open(path, "r+b") as f:
        header = f.read(HEADER_BYTES)
        if len(header) < HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
            return
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        if page_size < 512 or page_size & (page_size - 1):
            return
        pages = path.stat().st_size // page_size
        if pages and int.from_bytes(header[28:32], "big") != pages:
            f.truncate(pages * page_size)
            f.seek(28)
            f.write(pages.to_bytes(4, "big"))


def _copy_readable(source: Path, target: Path) -> dict[str, int]:
    counts = {"conversations": 0, "messages": 0, "unreadable_rows": 0}
    dst = sqlite3.connect(str(target), isolation_level=None)
    try:
        src = sqlite3.connect(str(source))
    except sqlite3.DatabaseError:
        dst.close()
        return counts
    try:
        schema = _readable_schema(src)
        if not schema:
            return counts
        dst.execute("BEGIN")
        for table in TABLES:
            if table not in schema:
                continue
            dst.execute(schema[table])
            columns = [row[1] for row in dst.execute(f"PRAGMA table_info({table})")]
            copied, lost = _copy_table(src, dst, table, columns)
            counts["unreadable_rows"] += lost
            if table in counts:
                counts[table] = copied
        if "conversations" in schema and "messages" in schema:
            _adopt_orphans(dst)
        dst.execute(f"PRAGMA user_version={_version(src, dst)}")
        dst.execute("COMMIT")
    finally:
        src.close()
        dst.close()
    return counts


def _readable_schema(src: sqlite3.Connection) -> dict[str, str]:
    """CREATE statements of our tables, from whatever of sqlite_master can be read."""
    try:
        rows = src.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        log.warning("the damaged database's schema cannot be read: %s", exc)
        return {}
    return {name: sql for name, sql in rows if name in TABLES}


def _copy_table(
    src: sqlite3.Connection, dst: sqlite3.Connection, table: str, columns: list[str]
) -> tuple[int, int]:
    """Copy every readable row, reading rowid ranges and halving those that fail down to single
    rows; return (rows copied, rows that could not be read)."""
    names = ",".join(columns)
    insert = f"INSERT OR IGNORE INTO {table} (rowid,{names}) VALUES (?{',?' * len(columns)})"
    select = f"SELECT rowid,{names} FROM {table} WHERE rowid BETWEEN ? AND ?"
    copied = lost = 0
    top = _max_rowid(src, table)
    ranges = [(lo, min(lo + READ_CHUNK_ROWS - 1, top)) for lo in range(1, top + 1, READ_CHUNK_ROWS)]
    ranges.reverse()  # popped from the end: lowest rowids first
    while ranges:
        lo, hi = ranges.pop()
        try:
            rows = src.execute(select, (lo, hi)).fetchall()
        except sqlite3.DatabaseError:
            if lo == hi:
                lost += 1
            else:
                mid = (lo + hi) // 2
                ranges += [(mid + 1, hi), (lo, mid)]
            continue
        for row in rows:
            try:
                dst.execute(insert, row)
                copied += 1
            except sqlite3.DatabaseError:  # a value that breaks a constraint: leave the row out
                lost += 1
    return copied, lost


def _max_rowid(src: sqlite3.Connection, table: str) -> int:
    for sql, args in (
        (f"SELECT max(rowid) FROM {table}", ()),
        ("SELECT seq FROM sqlite_sequence WHERE name=?", (table,)),
    ):
        try:
            row = src.execute(sql, args).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row and row[0] is not None:
            return int(row[0])
        if sql.startswith("SELECT max"):
            return 0  # read, and empty
    return UNKNOWN_MAX_ROWID


def _adopt_orphans(dst: sqlite3.Connection) -> None:
    """Messages whose chat was lost get a chat of their own; a message whose parent was lost
    answers the nearest earlier message that survived."""
    dst.execute(
        "INSERT INTO conversations (id, title, created, updated, is_open)"
        " SELECT conversation_id, 'Recovered chat', MIN(created), MAX(updated), 0"
        " FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations)"
        " GROUP BY conversation_id"
    )
    columns = {row[1] for row in dst.execute("PRAGMA table_info(messages)")}
    if "parent_id" in columns:
        dst.execute(  # the nearest earlier survivor of the chat stands in for a lost parent
            "UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p"
            "  WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id)"
            " WHERE parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM messages)"
        )
        dst.execute(
            "UPDATE conversations SET current_leaf=NULL"
            " WHERE current_leaf NOT IN (SELECT id FROM messages)"
        )


def _version(src: sqlite3.Connection, dst: sqlite3.Connection) -> int:
    try:
        return int(src.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError:
        columns = {row[1] for row in dst.execute("PRAGMA table_info(messages)")}
        return 2 if "parent_id" in columns else 1
