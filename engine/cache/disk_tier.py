"""The prompt cache's disk tier: an index of the entry files, their byte cap, and the background
threads that read and write them (`disk_jobs.py`; the file format is `disk_format.py`).

The index is built when the tier opens: every file's header is checked then, so a file that is
not a whole, well-formed entry (truncated, a header of the wrong shape, a directory or anything
else in its place, unreadable) is removed with one warning before it can count as an entry.
Tensors and checksums are read only on the reader thread, when an entry is restored.

The byte cap counts what is on disk plus every write queued or in flight: room for a write is
made (least recently used files removed) before it is queued, so the folder never holds more
than the cap, temporary files included.

Threads: the MLX thread queues reads and writes, and asks the index; the reader and writer
threads update it. One lock guards the index and the counters.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.cache.background import BackgroundQueue
from engine.cache.disk_format import SUFFIX, DiskEntry, InvalidFile, corrupt, read_header
from engine.cache.disk_jobs import ReadTicket, WriteJob, read_job, write_job

log = logging.getLogger(__name__)

STALE_TMP_S = 600.0  # temporary files older than this are leftovers of a crash
TMP_SUFFIX = ".tmp"
DISK_FULL_ERRNOS = (28, 122)  # ENOSPC, EDQUOT


class DiskTier:
    """The entry files under `root`, at most `max_bytes` of them, read and written in the
    background."""

    def __init__(
        self,
        root: Path,
        max_bytes: int,
        on_skip: Callable[[str], None],
        *,
        max_queued_bytes: int,
    ) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.max_queued_bytes = max_queued_bytes
        self._on_skip = on_skip
        self._lock = threading.RLock()
        self._files: dict[Path, DiskEntry] = {}
        self._index: dict[str, dict[tuple[int, ...], DiskEntry]] = {}  # ns key -> tokens -> ...
        self.reserved = 0  # bytes of writes queued or in flight
        self.generation = 0  # bumped by clear(): older writes are dropped
        self.off_reason: str | None = None  # set when writes failed: RAM only from then on
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._scan()
        except OSError as exc:
            self.failed(exc)
        self._writer = BackgroundQueue("prompt-cache-writer", lambda job: write_job(self, job))
        self._reader = BackgroundQueue("prompt-cache-reader", lambda job: read_job(self, job))

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    # --- the index ---

    def _scan(self) -> None:
        """Index every entry file (all namespaces); remove what is not one."""
        now = time.time()
        for folder in sorted(self.root.iterdir()):
            if not folder.is_dir() or folder.is_symlink():
                continue
            for item in sorted(folder.iterdir()):
                if item.name.endswith(TMP_SUFFIX):
                    try:
                        if now - item.lstat().st_mtime > STALE_TMP_S:
                            remove_path(item)
                    except OSError:
                        pass
                elif item.name.endswith(SUFFIX):
                    self._index_file(item)

    def _index_file(self, path: Path) -> None:
        try:
            header, size = read_header(path)
            used = path.stat().st_mtime
        except FileNotFoundError:
            return
        except InvalidFile as exc:
            self._discard(path, exc)
            return
        except OSError as exc:  # a file that cannot be read now is no entry
            self._discard(path, corrupt(f"unreadable ({exc.strerror or exc})"))
            return
        self.add(DiskEntry.of(header, path, size, used))

    def add(self, entry: DiskEntry) -> None:
        with self._lock:
            self.forget(entry.path)
            self._files[entry.path] = entry
            self._index.setdefault(entry.ns_key, {})[entry.tokens] = entry

    def forget(self, path: Path) -> None:
        with self._lock:
            entry = self._files.pop(path, None)
            if entry is not None:
                index = self._index.get(entry.ns_key, {})
                if index.get(entry.tokens) is entry:
                    del index[entry.tokens]

    def entries(self, ns_key: str) -> list[DiskEntry]:
        with self._lock:
            return list(self._index.get(ns_key, {}).values())

    def has(self, ns_key: str, tokens: tuple[int, ...]) -> bool:
        with self._lock:
            return tokens in self._index.get(ns_key, {})

    @property
    def nbytes(self) -> int:
        """Bytes of the entry files on disk."""
        with self._lock:
            return sum(e.size for e in self._files.values())

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._files)

    # --- removing ---

    def delete(self, path: Path) -> None:
        with self._lock:
            remove_path(path)
            self.forget(path)

    def delete_tokens(self, ns_key: str, tokens: tuple[int, ...]) -> None:
        with self._lock:
            entry = self._index.get(ns_key, {}).get(tokens)
            if entry is not None:
                self.delete(entry.path)

    def _discard(self, path: Path, exc: InvalidFile) -> None:
        log.warning("prompt cache: removing %s: %s", path, exc)
        self._on_skip(exc.reason)
        self.delete(path)

    def discard(self, path: Path, reason: str, detail: str) -> None:
        """Remove a file found unusable (counted under `reason`, with one warning)."""
        self._discard(path, InvalidFile(reason, detail))

    def make_room(self, nbytes: int) -> bool:
        """Remove least recently used files until `nbytes` more fit under the cap, counting the
        queued writes. False when they cannot fit."""
        with self._lock:
            total = self.nbytes + self.reserved
            by_age = sorted(self._files.values(), key=lambda e: e.used)
            while total + nbytes > self.max_bytes and by_age:
                oldest = by_age.pop(0)
                total -= oldest.size
                self.delete(oldest.path)
            return total + nbytes <= self.max_bytes

    def clear(self) -> int:
        """Remove every file under the root (all models' entries, leftovers); drop the queued
        writes. Returns the bytes freed. Writes are tried again afterwards."""
        with self._lock:
            self.generation += 1
            freed = 0
            if self.root.is_dir():
                for item in list(self.root.iterdir()):
                    freed += tree_size(item)
                    remove_path(item)
            self._files.clear()
            self._index.clear()
            self.off_reason = None
        return freed

    # --- use ---

    def touch(self, entry: DiskEntry) -> None:
        now = time.time()
        with self._lock:
            entry.used = now
        try:
            os.utime(entry.path, (now, now))  # the LRU order survives a restart
        except OSError:
            pass

    def touch_tokens(self, ns_key: str, tokens: tuple[int, ...]) -> None:
        """Mark an entry used (a RAM hit on an entry that is on disk too), if indexed."""
        with self._lock:
            entry = self._index.get(ns_key, {}).get(tokens)
        if entry is not None:
            self.touch(entry)

    # --- reading and writing (jobs run in disk_jobs.py on the background threads) ---

    def read(self, ticket: ReadTicket) -> None:
        self._reader.put(ticket)

    def submit(self, job: WriteJob) -> bool:
        """Queue a write after making room for it; False (counted) when it is not written."""
        if self.off_reason is not None:
            self._on_skip(self.off_reason)
            return False
        with self._lock:
            if job.estimate > self.max_bytes:
                reason = "disk-too-large"
            elif self.reserved and self.reserved + job.estimate > self.max_queued_bytes:
                reason = "disk-busy"  # the writer is behind: drop rather than queue without end
            elif not self.make_room(job.estimate):
                reason = "disk-busy"
            else:
                reason = None
                self.reserved += job.estimate
                job.generation = self.generation
        if reason is not None:
            self._on_skip(reason)
            job.release()
            return False
        self._writer.put(job)
        return True

    def failed(self, exc: OSError) -> None:
        """A write failed: keep entries in RAM only from now on (one warning)."""
        reason = "disk-full" if exc.errno in DISK_FULL_ERRNOS else "disk-error"
        with self._lock:
            first = self.off_reason is None
            self.off_reason = reason
        if first:
            log.warning("prompt cache: disk writes failed (%s); keeping entries in RAM only", exc)
        self._on_skip(reason)

    def skip(self, reason: str) -> None:
        self._on_skip(reason)

    # --- lifecycle ---

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the writes and reads queued so far; False when `timeout` passed first."""
        return self._writer.flush(timeout) and self._reader.flush(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        self._reader.close(timeout)
        self._writer.close(timeout)


def remove_path(path: Path) -> None:
    """Remove a file, link or whole directory (never following links)."""
    try:
        if stat.S_ISDIR(path.lstat().st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("prompt cache: could not remove %s: %s", path, exc)


def tree_size(path: Path) -> int:
    """Bytes of a file, or of every file under a directory (links not followed)."""
    try:
        st = path.lstat()
        if not stat.S_ISDIR(st.st_mode):
            return st.st_size
        return sum(tree_size(p) for p in path.iterdir())
    except OSError:
        return 0
