"""The prompt cache: KV caches of earlier prompts and conversations, reused by later requests that
start with the same tokens (a chat's next turn, an edited message, a shared system prompt).

Two tiers: RAM (`ram_tier.py`, an LRU bounded in bytes) in front of disk (`disk_tier.py`, one
safetensors file per entry, surviving restarts). Entries are keyed by their namespace (model,
tokenizer, drafter, KV quantization) and token ids, and checked against the model's cache layout
before they are restored (`layout.py`).

Nothing here stalls decoding for long. `publish` only takes lazy copies of a row's caches; `tick`,
which the engine calls between steps, evaluates them a layer at a time within a small time budget
(all at once when the engine is idle), then hands zero-copy numpy views to the disk writer. A disk
entry is read and checksummed on the reader thread; `lookup(wait=False)` answers LOADING until it
is, and its conversion into MLX arrays also proceeds in ticks.

Threads: `lookup`, `publish`, `tick`, `flush`, `clear` and `close` run on the engine's MLX thread.
`stats` may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from engine.cache.disk_format import DiskEntry
from engine.cache.disk_jobs import WriteJob
from engine.cache.disk_loads import LOADING, DiskLoads, Loading
from engine.cache.disk_tier import DiskTier
from engine.cache.layers import (
    LayerState,
    UnsupportedCache,
    numpy_views,
    snapshot,
    to_cache,
    trim_state,
)
from engine.cache.layout import ModelLayouts
from engine.cache.namespace import CacheNamespace
from engine.cache.ram_tier import RamTier, StoredEntry
from engine.cache.settings import (
    DEFAULT_DISK_BYTES,
    DEFAULT_RAM_BYTES,
    MIN_RAM_BYTES,
    PromptCacheSettings,
)
from engine.engine_reports import CacheStats

log = logging.getLogger(__name__)

DEFAULT_TICK_S = 0.01  # MLX-thread time a tick may spend between two engine steps
MAX_UNEVALUATED = 4  # published entries not yet evaluated; beyond this a tick finishes the oldest
MAX_QUEUED_WRITE_BYTES = 1 << 30  # writes waiting for the writer; beyond this they are dropped
CLOSE_FLUSH_S = 10.0


@dataclass
class CacheMatch:
    """A restored prefix: fresh mlx-lm single-row caches the caller may mutate."""

    tokens: int  # how many leading tokens of the request the restored caches hold
    source: str  # "ram" or "disk"
    target: list[Any]  # per-layer mlx-lm single-row caches
    draft: list[Any] | None  # the draft model's, when stored


@dataclass
class _Unevaluated:
    ns: CacheNamespace
    entry: StoredEntry
    layers: list[list[mx.array]]  # arrays still to evaluate, a layer at a time


class PromptCache:
    """Reusable KV caches of earlier prompts, in RAM and on disk."""

    def __init__(
        self,
        *,
        ram_bytes: int = DEFAULT_RAM_BYTES,
        disk_dir: Path | str | None = None,
        disk_bytes: int = DEFAULT_DISK_BYTES,
        tick_s: float = DEFAULT_TICK_S,
    ) -> None:
        self.ram = RamTier(ram_bytes)
        self.tick_s = tick_s
        self._lock = threading.Lock()  # guards the counters (stats() may come from any thread)
        self._counts = CacheStats()
        self._unevaluated: deque[_Unevaluated] = deque()
        self._writing: list[tuple[WriteJob, list[mx.array]]] = []  # what the writer still reads
        self._disk: DiskTier | None = None
        self._loads: DiskLoads | None = None
        if disk_dir is not None:
            # queued writes hold their arrays: at most about what the RAM tier may hold
            queued = min(MAX_QUEUED_WRITE_BYTES, max(self.ram.limit, MIN_RAM_BYTES))
            self._disk = DiskTier(
                Path(disk_dir), int(disk_bytes), self._skip, max_queued_bytes=queued
            )
            self._loads = DiskLoads(self._disk)

    @classmethod
    def from_config(cls, config: Any) -> PromptCache:
        """The cache an EngineConfig asks for (see PromptCacheSettings.of)."""
        s = PromptCacheSettings.of(config)
        return cls(ram_bytes=s.ram_bytes, disk_dir=s.disk_dir, disk_bytes=s.disk_bytes)

    @property
    def disk_dir(self) -> Path | None:
        return None if self._disk is None else self._disk.root

    # --- lookup ---

    def lookup(
        self,
        ns: CacheNamespace,
        tokens: list[int],
        *,
        layouts: ModelLayouts | None = None,
        wait: bool = True,
    ) -> CacheMatch | Loading | None:
        """The longest cached prefix usable for `tokens`, at most len(tokens) - 1 of them.
        RAM first, then disk. A longer or diverging entry is trimmed to the common prefix when
        its caches allow it; a sliding-window cache that wrapped can only serve requests it is
        a whole prefix of (else counted in skipped["untrimmable"], as recurrent state). An entry that does not
        fit `layouts` is removed (skipped["mismatch"]). Without `wait`, LOADING while the best
        entry is still being read from disk."""
        match = None
        window_skipped = False
        if len(tokens) >= 2:
            ids = np.asarray(tokens, np.int64)
            for usable, item in self._candidates(ns, ids):
                if usable < len(item.tokens) and not item.trimmable:
                    window_skipped = True
                    continue
                if not self._fits(item, layouts):
                    continue
                entry = item if isinstance(item, StoredEntry) else self._load(ns, item, wait)
                if entry is LOADING:
                    return LOADING  # counted when it is answered
                if entry is None:
                    continue
                source = "ram" if entry is item else "disk"
                match = self._restore(entry, usable, source, layouts)
                break
        with self._lock:
            c = self._counts
            if window_skipped:
                c.skipped["untrimmable"] = c.skipped.get("untrimmable", 0) + 1
            if match is None:
                c.misses += 1
            else:
                c.hits += 1
                c.cached_tokens += match.tokens
        return match

    def _candidates(
        self, ns: CacheNamespace, ids: np.ndarray
    ) -> list[tuple[int, StoredEntry | DiskEntry]]:
        """(usable tokens, entry), best first: longest, then RAM, then no trimming needed."""
        key, n = ns.key(), len(ids)
        found: list[tuple[int, bool, bool, StoredEntry | DiskEntry]] = []
        ram = self.ram.entries(key)
        in_ram = {e.tokens for e in ram}
        disk = self._disk.entries(key) if self._disk is not None else []
        for entry in ram + [d for d in disk if d.tokens not in in_ram]:
            usable = min(_common_prefix(entry.ids, ids), n - 1)
            if usable > 0:
                found.append(
                    (usable, isinstance(entry, DiskEntry), usable < len(entry.tokens), entry)
                )
        found.sort(key=lambda f: (-f[0], f[1], f[2]))
        return [(usable, entry) for usable, _, _, entry in found]

    def _fits(self, item: StoredEntry | DiskEntry, layouts: ModelLayouts | None) -> bool:
        """Does the entry fit the model? One that does not is removed, with its reason."""
        if layouts is None:
            return True
        why = layouts.mismatch(item.target_info, item.draft_info)
        if why is None:
            return True
        if isinstance(item, StoredEntry):
            log.warning("prompt cache: dropping an entry that does not fit the model: %s", why)
            self.ram.drop(item.key)
            self._skip("mismatch")
            if self._disk is not None:  # its file holds the same
                self._disk.delete_tokens(item.ns_key, item.tokens)
        else:
            assert self._disk is not None
            self._disk.discard(item.path, "mismatch", f"does not fit the model: {why}")
        return False

    def _load(self, ns: CacheNamespace, d: DiskEntry, wait: bool) -> StoredEntry | Loading | None:
        """The disk entry in RAM, LOADING while it is read, or None when the file was bad."""
        assert self._loads is not None
        deadline = time.perf_counter() + self.tick_s
        entry = self._loads.get(ns, d, wait=wait, deadline=deadline)
        if isinstance(entry, StoredEntry):
            self.ram.insert(entry)
        return entry

    def _restore(
        self, entry: StoredEntry, usable: int, source: str, layouts: ModelLayouts | None
    ) -> CacheMatch:
        target = [to_cache(trim_state(s, usable)) for s in entry.target]
        draft = None
        if entry.draft is not None and (layouts is None or layouts.draft is not None):
            draft = [to_cache(trim_state(s, usable)) for s in entry.draft]
        self.ram.touch(entry.key)
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
        cannot be is left out (skipped["draft-mismatch"]). Nothing is evaluated here."""
        toks = tuple(int(t) for t in tokens)
        n = len(toks)
        if n == 0 or not target:
            return
        try:
            tstates = [snapshot(c, n) for c in target]
        except UnsupportedCache as exc:
            self._skip(exc.reason)
            return
        wrong = [s.offset for s in tstates if s.offset != n]
        if wrong:
            raise ValueError(f"the target caches hold {wrong[0]} tokens, not {n}")
        dstates = self._draft_states(draft, n) if draft is not None else None
        entry = StoredEntry(ns.key(), toks, tstates, dstates)
        if self.ram.insert(entry):
            if entry.trimmable:  # it serves its prefixes: drop them
                self.ram.drop_prefixes_of(entry)
        else:
            self._skip("ram-too-large")
        self._unevaluated.append(_Unevaluated(ns, entry, entry.layer_arrays()))

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

    # --- background work, between engine steps ---

    def tick(self, *, idle: bool) -> None:
        """Evaluate published entries and convert disk reads, a layer at a time, for about
        `tick_s` (everything when `idle`); queue finished entries for the disk writer."""
        deadline = None if idle else time.perf_counter() + self.tick_s
        self._writing = [(job, a) for job, a in self._writing if not job.done.is_set()]
        while len(self._unevaluated) > MAX_UNEVALUATED:
            self._evaluate(self._unevaluated[0], None)  # a backlog: catch up
        while self._unevaluated and self._evaluate(self._unevaluated[0], deadline):
            if _past(deadline):
                return
        if self._loads is not None and not _past(deadline):
            for entry in self._loads.advance(deadline):
                self.ram.insert(entry)

    def _evaluate(self, item: _Unevaluated, deadline: float | None) -> bool:
        """Evaluate an entry's layers, at least one, until `deadline`; True when it is done
        with (queued for the disk, or dropped when it failed)."""
        try:
            while item.layers:
                mx.eval(item.layers.pop())
                if item.layers and _past(deadline):
                    return False
            if self._disk is not None and not item.entry.superseded:
                self._write(item.ns, item.entry)
        except Exception:  # noqa: BLE001 - a bad entry must not stop the engine's thread
            log.exception("prompt cache: dropping an entry that could not be stored")
            self.ram.drop(item.entry.key)
            self._skip("store-failed")
        self._unevaluated.popleft()
        return True

    def _write(self, ns: CacheNamespace, entry: StoredEntry) -> None:
        """Queue an evaluated entry for the writer (numpy views: no copy)."""
        disk = self._disk
        assert disk is not None
        if disk.has(entry.ns_key, entry.tokens):
            return
        tensors: dict[str, np.ndarray] = {}
        owners: list[mx.array] = []
        for prefix, states in (("t", entry.target), ("d", entry.draft or [])):
            for i, s in enumerate(states):
                views, arrays = numpy_views(s)
                tensors.update({f"{prefix}{i}.{k}": v for k, v in views.items()})
                owners += arrays
        job = WriteJob(
            ns, entry.tokens, entry.target_info, entry.draft_info, tensors, entry.trimmable
        )
        if disk.submit(job):
            self._writing.append((job, owners))  # alive while the writer reads their memory

    # --- stats and lifecycle ---

    def count_skip(self, reason: str) -> None:
        """Something was not stored or not used, for this reason (in CacheStats.skipped)."""
        self._skip(reason)

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
                ram_bytes=self.ram.used,
                disk_bytes=disk_bytes,
                ram_entries=len(self.ram),
                disk_entries=disk_entries,
                skipped=dict(c.skipped),
            )

    def clear(self) -> int:
        """Forget every entry, in RAM and on disk (every model's); returns the bytes freed."""
        freed = self.ram.clear()
        self._unevaluated.clear()
        if self._disk is not None and self._loads is not None:
            self._loads.clear()
            freed += self._disk.clear()
        return freed

    def flush(self, timeout: float | None = None) -> None:
        """Finish every pending evaluation and disk write and read (tests, shutdown)."""
        self.tick(idle=True)
        if self._disk is not None:
            self._disk.flush(timeout)
        self.tick(idle=True)

    def close(self) -> None:
        """Finish pending disk writes (bounded wait), stop the threads and free the RAM tier."""
        if self._disk is not None:
            self.flush(CLOSE_FLUSH_S)
            self._disk.close()
            self._disk = self._loads = None
        self._unevaluated.clear()
        self._writing.clear()
        self.ram.clear()


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    diff = np.flatnonzero(a[:m] != b[:m])
    return int(diff[0]) if diff.size else m
