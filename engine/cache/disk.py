"""The prefix cache's disk tier: one safetensors file per entry, written in the background.

Layout: `<root>/<namespace key>/<tokens digest>.safetensors`. The file's metadata (key "tandem",
JSON) holds the format version, the namespace fields, the token ids, each layer's cache class and
small integer state, the dtypes, and a sha256 checksum of the tensors. Files are written to a
temporary name and renamed, so a reader sees either the whole file or none.

Threads: `submit` takes plain numpy arrays (already copied out of MLX on the MLX thread) and a
daemon writer thread writes them; the writer never touches MLX. `entries` and `load` run on the
caller's thread; `load` returns numpy arrays and metadata, which the caller turns into MLX arrays.
A shared lock guards the index. A file that fails any check is removed with one warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.numpy

from engine.cache.layers import layer_trimmable
from engine.cache.namespace import FORMAT_VERSION, CacheNamespace, tokens_digest

log = logging.getLogger(__name__)

META_KEY = "tandem"
SUFFIX = ".safetensors"
MAX_HEADER_BYTES = 64 << 20
STALE_TMP_S = 600.0  # temporary files older than this are leftovers of a crash


class InvalidFile(Exception):
    """A stored file that must not be used; `reason` is its stats key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass
class DiskEntry:
    tokens: tuple[int, ...]
    ids: np.ndarray  # the same tokens, for fast prefix comparison
    path: Path
    trimmable: bool


@dataclass
class WriteJob:
    ns: CacheNamespace
    tokens: tuple[int, ...]
    tensors: dict[str, np.ndarray]  # "t<layer>.<name>" and "d<layer>.<name>"
    layers: dict[str, Any]  # {"target": [layer info...], "draft": [...] or None}
    trimmable: bool

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.tensors.values())


def checksum(tensors: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


def _decode_header(head: bytes, n: int, size: int) -> dict[str, Any]:
    """The "tandem" metadata of a safetensors file, after checking the file is whole."""
    try:
        header = json.loads(head)
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise InvalidFile("disk-corrupt", f"unreadable header ({exc})") from None
    if 8 + n + max(ends, default=0) != size:
        raise InvalidFile("disk-corrupt", "truncated or padded file")
    raw = (header.get("__metadata__") or {}).get(META_KEY)
    if raw is None:
        raise InvalidFile("disk-foreign", "not a tandem prefix cache file")
    try:
        meta = json.loads(raw)
    except ValueError:
        raise InvalidFile("disk-corrupt", "unreadable metadata") from None
    if not isinstance(meta, dict):
        raise InvalidFile("disk-corrupt", "unreadable metadata")
    return meta


def _header_length(first8: bytes, size: int) -> int:
    if len(first8) < 8:
        raise InvalidFile("disk-corrupt", "truncated file")
    n = int.from_bytes(first8, "little")
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise InvalidFile("disk-corrupt", "truncated or corrupt header")
    return n


def read_meta(path: Path) -> dict[str, Any]:
    """Only the header (cheap): the entry's metadata, without the tensors."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        n = _header_length(f.read(8), size)
        return _decode_header(f.read(n), n, size)


def check_meta(ns: CacheNamespace, path: Path, meta: dict[str, Any]) -> DiskEntry:
    """Is this file an entry of `ns` in this format? Raises InvalidFile when not."""
    if meta.get("format_version") != FORMAT_VERSION:
        raise InvalidFile("disk-foreign", f"format version {meta.get('format_version')!r}")
    if meta.get("namespace") != ns.key() or meta.get("fields") != _json(ns.fields()):
        raise InvalidFile("disk-foreign", "another model's cache")
    if meta.get("tokenizer_hash") != ns.tokenizer_hash:
        raise InvalidFile("disk-foreign", "another tokenizer's cache")
    tokens = meta.get("tokens")
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens) or not tokens:
        raise InvalidFile("disk-corrupt", "bad token ids")
    if tokens_digest(tokens) != path.name.removesuffix(SUFFIX):
        raise InvalidFile("disk-corrupt", "token ids do not match the file name")
    try:
        layers = list(meta["target"]) + list(meta.get("draft") or [])
        trimmable = bool(layers) and all(layer_trimmable(i["kind"], i["meta"]) for i in layers)
    except (KeyError, TypeError) as exc:
        raise InvalidFile("disk-corrupt", f"bad layer metadata ({exc})") from None
    return DiskEntry(tuple(tokens), np.asarray(tokens, np.int64), path, trimmable)


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


class DiskTier:
    def __init__(
        self,
        root: Path,
        max_bytes: int,
        on_skip: Callable[[str], None],
        *,
        max_pending_bytes: int = 1 << 30,
    ) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.max_pending_bytes = max_pending_bytes
        self._on_skip = on_skip
        self._lock = threading.RLock()
        self._files: dict[Path, list[float]] = {}  # path -> [size, last used]
        self._index: dict[str, dict[tuple[int, ...], DiskEntry]] = {}  # loaded lazily
        self._pending = 0
        self._queue: queue.Queue[Any] = queue.Queue()
        self.writable = True
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._scan()
        except OSError as exc:
            self._failed(exc)
        self._thread = threading.Thread(target=self._run, name="prefix-cache-writer", daemon=True)
        self._thread.start()

    # --- index ---

    def _scan(self) -> None:
        """Sizes and ages of every stored file (all namespaces); headers are read on first use."""
        now = time.time()
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            for item in folder.iterdir():
                try:
                    st = item.stat()
                except OSError:
                    continue
                if item.name.endswith(".tmp") and now - st.st_mtime > STALE_TMP_S:
                    item.unlink(missing_ok=True)
                elif item.name.endswith(SUFFIX):
                    self._files[item] = [st.st_size, st.st_mtime]

    def _ns_index(self, ns: CacheNamespace) -> dict[tuple[int, ...], DiskEntry]:
        key = ns.key()
        with self._lock:
            index = self._index.get(key)
            if index is None:
                index = self._index[key] = {}
                folder = self.root / key
                for path in sorted(p for p in self._files if p.parent == folder):
                    try:
                        entry = check_meta(ns, path, read_meta(path))
                    except InvalidFile as exc:
                        self._discard(path, exc)
                        continue
                    except OSError:  # unreadable now (gone, permissions): not indexed
                        continue
                    index[entry.tokens] = entry
            return index

    def entries(self, ns: CacheNamespace) -> list[DiskEntry]:
        with self._lock:
            return list(self._ns_index(ns).values())

    def has(self, ns: CacheNamespace, tokens: tuple[int, ...]) -> bool:
        with self._lock:
            return tokens in self._ns_index(ns)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return int(sum(size for size, _ in self._files.values()))

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._files)

    def _delete(self, path: Path) -> None:
        with self._lock:
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            self._files.pop(path, None)
            index = self._index.get(path.parent.name)
            if index:
                for tokens, entry in list(index.items()):
                    if entry.path == path:
                        del index[tokens]

    def _discard(self, path: Path, exc: InvalidFile) -> None:
        log.warning("prefix cache: removing %s: %s", path, exc)
        self._on_skip(exc.reason)
        self._delete(path)

    def _evict(self) -> None:
        with self._lock:
            total = sum(size for size, _ in self._files.values())
            while total > self.max_bytes and self._files:
                path = min(self._files, key=lambda p: self._files[p][1])
                total -= self._files[path][0]
                self._delete(path)

    # --- reading (the caller's thread) ---

    def load(self, ns: CacheNamespace, entry: DiskEntry) -> tuple[dict, dict] | None:
        """The entry's numpy arrays and metadata, or None when the file is gone or bad (then
        removed). The checksum and the token ids are checked here."""
        try:
            data = entry.path.read_bytes()
        except FileNotFoundError:
            self._delete(entry.path)
            return None
        except OSError as exc:
            self._discard(entry.path, InvalidFile("disk-corrupt", f"unreadable ({exc})"))
            return None
        try:
            n = _header_length(data[:8], len(data))
            meta = _decode_header(data[8 : 8 + n], n, len(data))
            if check_meta(ns, entry.path, meta).tokens != entry.tokens:
                raise InvalidFile("disk-corrupt", "token ids changed")
            try:
                arrays = safetensors.numpy.load(data)
            except Exception as exc:  # noqa: BLE001 - any parse failure is a corrupt file
                raise InvalidFile("disk-corrupt", f"unreadable tensors ({exc})") from None
            if checksum(arrays) != meta.get("checksum"):
                raise InvalidFile("disk-corrupt", "checksum mismatch")
        except InvalidFile as exc:
            self._discard(entry.path, exc)
            return None
        self.touch(entry.path)
        return arrays, meta

    def touch(self, path: Path) -> None:
        now = time.time()
        with self._lock:
            if path in self._files:
                self._files[path][1] = now
        try:
            os.utime(path, (now, now))  # the LRU order survives a restart
        except OSError:
            pass

    def touch_tokens(self, ns_key: str, tokens: tuple[int, ...]) -> None:
        """Mark an entry used (a RAM hit on an entry that is on disk too), if it is indexed."""
        with self._lock:
            entry = (self._index.get(ns_key) or {}).get(tokens)
        if entry is not None:
            self.touch(entry.path)

    def discard(self, path: Path, reason: str, detail: str) -> None:
        """Remove a file the caller found unusable after loading it."""
        self._discard(path, InvalidFile(reason, detail))

    # --- writing (the writer thread) ---

    def submit(self, job: WriteJob) -> None:
        if not self.writable:
            self._on_skip("disk-full")
            return
        nbytes = job.nbytes
        with self._lock:
            if self._pending and self._pending + nbytes > self.max_pending_bytes:
                self._on_skip("disk-busy")
                return
            self._pending += nbytes
        self._queue.put(job)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                self._write(item)
            except Exception:  # noqa: BLE001 - the writer must outlive one bad entry
                log.exception("prefix cache: writing an entry failed")
            finally:
                with self._lock:
                    self._pending -= item.nbytes

    def _write_file(self, path: Path, tensors: dict[str, np.ndarray], metadata: dict) -> None:
        safetensors.numpy.save_file(tensors, str(path), metadata=metadata)

    def _write(self, job: WriteJob) -> None:
        if not self.writable:
            self._on_skip("disk-full")
            return
        digest = tokens_digest(job.tokens)
        folder = self.root / job.ns.key()
        path = folder / f"{digest}{SUFFIX}"
        meta = {
            "format_version": FORMAT_VERSION,
            "namespace": job.ns.key(),
            "fields": _json(job.ns.fields()),
            "tokenizer_hash": job.ns.tokenizer_hash,
            "tokens": list(job.tokens),
            **job.layers,
            "checksum": checksum(job.tensors),
        }
        tmp = folder / f".{digest}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._write_file(tmp, job.tensors, {META_KEY: json.dumps(meta)})
            os.replace(tmp, path)
            size = path.stat().st_size
        except OSError as exc:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            self._failed(exc)
            return
        with self._lock:
            self._files[path] = [size, time.time()]
            index = self._ns_index(job.ns)
            index[job.tokens] = DiskEntry(
                job.tokens, np.asarray(job.tokens, np.int64), path, job.trimmable
            )
            if job.trimmable:  # the new entry serves every prefix of itself
                n = len(job.tokens)
                for tokens, entry in list(index.items()):
                    if len(tokens) < n and job.tokens[: len(tokens)] == tokens:
                        self._delete(entry.path)
            self._evict()

    def _failed(self, exc: OSError) -> None:
        with self._lock:
            first = self.writable
            self.writable = False
        if first:
            log.warning("prefix cache: disk writes failed (%s); keeping entries in RAM only", exc)
        self._on_skip("disk-full")

    # --- lifecycle ---

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the writes queued so far; False when `timeout` passed first."""
        if not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)
