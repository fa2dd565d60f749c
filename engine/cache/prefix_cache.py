"""The prefix cache: KV caches of earlier prompts and conversations, reused by later requests that
start with the same tokens (a chat's next turn, an edited message, a shared system prompt).

Two tiers: RAM (an LRU bounded in bytes) in front of disk (`disk.py`: one safetensors file per
entry, written by a background thread, surviving restarts). Entries are keyed by their namespace
(model, tokenizer, drafter, KV quantization) and token ids.

Threads: `lookup` and `publish` run on the engine's MLX thread (they slice, copy and evaluate MLX
arrays, and turn disk files into MLX arrays). The disk writer thread only sees numpy arrays.
`stats` may be called from any thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.cache.disk import DiskEntry, DiskTier, WriteJob
from engine.cache.layers import (
    LayerState,
    UnsupportedCache,
    from_numpy,
    snapshot,
    to_cache,
    to_numpy,
    trim_state,
)
from engine.cache.namespace import CacheNamespace
from engine.requests import CacheStats

log = logging.getLogger(__name__)

MIN_RAM_BYTES = 256 << 20
DEFAULT_DISK_BYTES = 4 << 30
DEFAULT_DISK_DIR = "default"  # platformdirs' user cache folder / "prefix"


def default_disk_dir() -> Path:
    import platformdirs  # here, so the engine imports where platformdirs is absent (GPU box)

    return Path(platformdirs.user_cache_dir("tandem")) / "prefix"


CLOSE_FLUSH_S = 10.0
MAX_PENDING_BYTES = 1 << 30  # numpy copies waiting for the writer; beyond this, writes are dropped


def default_ram_bytes() -> int:
    """10% of the machine's memory, at least 256 MiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = 0
    return max(MIN_RAM_BYTES, total // 10)


DEFAULT_RAM_BYTES = default_ram_bytes()


@dataclass
class CacheMatch:
    tokens: int  # how many leading tokens of the request the restored caches hold
    source: str  # "ram" or "disk"
    target: list[Any]  # per-layer mlx-lm single-row caches: fresh objects the caller may mutate
    draft: list[Any] | None  # the draft model's, when stored


@dataclass
class _Entry:
    ns_key: str
    tokens: tuple[int, ...]
    target: list[LayerState]
    draft: list[LayerState] | None
    ids: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.tokens, np.int64)

    @property
    def layers(self) -> list[LayerState]:
        return self.target + (self.draft or [])

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.layers)

    @property
    def trimmable(self) -> bool:
        return all(s.trimmable for s in self.layers)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    diff = np.flatnonzero(a[:m] != b[:m])
    return int(diff[0]) if diff.size else m


def _pick(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


class PrefixCache:
    def __init__(
        self,
        *,
        ram_bytes: int = DEFAULT_RAM_BYTES,
        disk_dir: Path | str | None = DEFAULT_DISK_DIR,
        disk_bytes: int = DEFAULT_DISK_BYTES,
    ) -> None:
        self.ram_limit = int(ram_bytes)
        self._ram: OrderedDict[tuple[str, tuple[int, ...]], _Entry] = OrderedDict()
        self._ram_used = 0
        self._lock = threading.Lock()  # guards the counters (stats() may come from any thread)
        self._counts = CacheStats()
        self._disk: DiskTier | None = None
        if disk_dir == DEFAULT_DISK_DIR:
            disk_dir = default_disk_dir()
        if disk_dir is not None:
            pending = min(MAX_PENDING_BYTES, max(self.ram_limit, MIN_RAM_BYTES))
            self._disk = DiskTier(
                Path(disk_dir), int(disk_bytes), self._skip, max_pending_bytes=pending
            )

    # --- lookup ---

    def lookup(self, ns: CacheNamespace, tokens: list[int]) -> CacheMatch | None:
        """The longest cached prefix usable for `tokens`, at most len(tokens) - 1 of them.
        RAM first, then disk. A longer or diverging entry is trimmed to the common prefix when
        its caches allow it; a sliding-window cache that wrapped can only serve requests it is
        a whole prefix of (else counted in skipped["sliding-window"])."""
        n = len(tokens)
        match = None
        window_skipped = False
        if n >= 2:
            ids = np.asarray(tokens, np.int64)
            for usable, source, needs_trim, item in self._candidates(ns, ids):
                trimmable = item.trimmable
                if needs_trim and not trimmable:
                    window_skipped = True
                    continue
                entry = item if source == "ram" else self._load(ns, item)
                if entry is None:
                    continue
                match = self._restore(entry, usable, source)
                break
        with self._lock:
            c = self._counts
            if window_skipped:
                c.skipped["sliding-window"] = c.skipped.get("sliding-window", 0) + 1
            if match is None:
                c.misses += 1
            else:
                c.hits += 1
                c.cached_tokens += match.tokens
        return match

    def _candidates(
        self, ns: CacheNamespace, ids: np.ndarray
    ) -> list[tuple[int, str, bool, _Entry | DiskEntry]]:
        """(usable tokens, source, needs trimming, entry), best first."""
        key, n = ns.key(), len(ids)
        found: list[tuple[int, str, bool, _Entry | DiskEntry]] = []
        in_ram = set()
        for (k, toks), entry in self._ram.items():
            if k == key:
                in_ram.add(toks)
                usable = min(_common_prefix(entry.ids, ids), n - 1)
                found.append((usable, "ram", usable < len(toks), entry))
        if self._disk is not None:
            for d in self._disk.entries(ns):
                if d.tokens not in in_ram:
                    usable = min(_common_prefix(d.ids, ids), n - 1)
                    found.append((usable, "disk", usable < len(d.tokens), d))
        found = [f for f in found if f[0] > 0]
        found.sort(key=lambda f: (-f[0], f[1] != "ram", f[2]))
        return found

    def _load(self, ns: CacheNamespace, d: DiskEntry) -> _Entry | None:
        """Read a disk entry into MLX arrays (and into RAM); None when the file was bad."""
        assert self._disk is not None
        got = self._disk.load(ns, d)
        if got is None:
            return None
        arrays, meta = got
        try:
            target = [from_numpy(_pick(arrays, f"t{i}."), x) for i, x in enumerate(meta["target"])]
            draft = None
            if meta.get("draft") is not None:
                draft = [
                    from_numpy(_pick(arrays, f"d{i}."), x) for i, x in enumerate(meta["draft"])
                ]
            entry = _Entry(ns.key(), d.tokens, target, draft)
            if not target or any(s.offset != len(d.tokens) for s in entry.layers):
                raise ValueError("cache offsets do not match the token ids")
        except Exception as exc:  # noqa: BLE001 - a bad file is never the caller's exception
            self._disk.discard(d.path, "disk-corrupt", f"bad cache layers ({exc})")
            return None
        self._insert_ram(entry)
        return entry

    def _restore(self, entry: _Entry, usable: int, source: str) -> CacheMatch:
        target = [to_cache(trim_state(s, usable)) for s in entry.target]
        draft = None
        if entry.draft is not None:
            draft = [to_cache(trim_state(s, usable)) for s in entry.draft]
        key = (entry.ns_key, entry.tokens)
        if key in self._ram:
            self._ram.move_to_end(key)
        if source == "ram" and self._disk is not None:
            self._disk.touch_tokens(entry.ns_key, entry.tokens)  # keep a hot file off the LRU end
        return CacheMatch(usable, source, target, draft)

    # --- publish ---

    def publish(
        self,
        ns: CacheNamespace,
        tokens: list[int],
        target: list[Any],
        draft: list[Any] | None = None,
    ) -> None:
        """Store caches holding exactly `tokens` (every target layer's offset == len(tokens)).
        Entries that are strict prefixes of `tokens` are dropped when the new one can be
        trimmed to serve them. A draft cache holding more tokens is trimmed to `tokens`; one that
        cannot be is left out (skipped["draft-mismatch"])."""
        toks = tuple(int(t) for t in tokens)
        n = len(toks)
        if n == 0 or not target:
            return
        try:
            tstates = [snapshot(c) for c in target]
        except UnsupportedCache as exc:
            self._skip(exc.reason)
            return
        wrong = [s.offset for s in tstates if s.offset != n]
        if wrong:
            raise ValueError(f"the target caches hold {wrong[0]} tokens, not {n}")
        dstates = self._draft_states(draft, n) if draft is not None else None
        entry = _Entry(ns.key(), toks, tstates, dstates)
        if self._insert_ram(entry) and entry.trimmable:  # it serves its prefixes: drop them
            for key in list(self._ram):
                if key[0] == entry.ns_key and len(key[1]) < n and toks[: len(key[1])] == key[1]:
                    self._drop_ram(key)
        if self._disk is not None:
            self._write(ns, entry)

    def _draft_states(self, draft: list[Any], n: int) -> list[LayerState] | None:
        try:
            states = [snapshot(c) for c in draft]
        except UnsupportedCache as exc:
            self._skip(exc.reason)
            return None
        if not states or any(s.offset < n or (s.offset > n and not s.trimmable) for s in states):
            self._skip("draft-mismatch")
            return None
        return [trim_state(s, n) for s in states]

    def _write(self, ns: CacheNamespace, entry: _Entry) -> None:
        """Copy the entry out of MLX (numpy, on this thread) and queue it for the writer."""
        disk = self._disk
        assert disk is not None
        if disk.has(ns, entry.tokens):
            return
        if not disk.writable:
            self._skip("disk-full")
            return
        tensors: dict[str, np.ndarray] = {}
        layers: dict[str, Any] = {"target": [], "draft": None}
        for prefix, states in (("t", entry.target), ("d", entry.draft)):
            if states is None:
                continue
            infos = []
            for i, s in enumerate(states):
                arrays, info = to_numpy(s)
                tensors.update({f"{prefix}{i}.{k}": v for k, v in arrays.items()})
                infos.append(info)
            layers["target" if prefix == "t" else "draft"] = infos
        disk.submit(WriteJob(ns, entry.tokens, tensors, layers, entry.trimmable))

    # --- RAM tier ---

    def _insert_ram(self, entry: _Entry) -> bool:
        key = (entry.ns_key, entry.tokens)
        self._drop_ram(key)
        nbytes = entry.nbytes
        if nbytes > self.ram_limit:
            self._skip("ram-too-large")
            return False
        self._ram[key] = entry
        self._ram_used += nbytes
        while self._ram_used > self.ram_limit:
            self._drop_ram(next(iter(self._ram)))
        return True

    def _drop_ram(self, key: tuple[str, tuple[int, ...]]) -> None:
        old = self._ram.pop(key, None)
        if old is not None:
            self._ram_used -= old.nbytes

    # --- stats and lifecycle ---

    def _skip(self, reason: str) -> None:
        with self._lock:
            self._counts.skipped[reason] = self._counts.skipped.get(reason, 0) + 1

    def stats(self) -> CacheStats:
        # the disk figures first: never hold this lock while taking the disk tier's
        disk_bytes = self._disk.nbytes if self._disk else 0
        disk_entries = self._disk.count if self._disk else 0
        with self._lock:
            c = self._counts
            return CacheStats(
                hits=c.hits,
                misses=c.misses,
                cached_tokens=c.cached_tokens,
                ram_bytes=self._ram_used,
                disk_bytes=disk_bytes,
                ram_entries=len(self._ram),
                disk_entries=disk_entries,
                skipped=dict(c.skipped),
            )

    def flush(self, timeout: float | None = None) -> None:
        """Wait for the disk writes queued so far (tests, shutdown)."""
        if self._disk is not None:
            self._disk.flush(timeout)

    def close(self) -> None:
        """Finish pending disk writes (bounded wait), stop the writer and free the RAM tier."""
        if self._disk is not None:
            self._disk.flush(CLOSE_FLUSH_S)
            self._disk.close()
            self._disk = None
        self._ram.clear()
        self._ram_used = 0
