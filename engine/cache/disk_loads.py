"""Disk entries on their way into RAM: read and checked (header, namespace, checksum) on the disk
tier's reader thread, then turned into MLX arrays on the MLX thread a layer at a time, so that
neither the file's bytes nor its checksum are handled between two engine steps all at once."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.cache.disk_format import DiskEntry
from engine.cache.disk_jobs import ReadTicket
from engine.cache.disk_tier import DiskTier
from engine.cache.layers import LayerState, from_numpy
from engine.cache.namespace import CacheNamespace
from engine.cache.ram_tier import StoredEntry

log = logging.getLogger(__name__)

READ_WAIT_S = 60.0  # longest wait for a disk read when the engine has nothing else to do


class Loading:
    """The answer while an entry is still being read from disk: ask again later."""

    def __repr__(self) -> str:
        return "LOADING"


LOADING = Loading()


@dataclass
class _Load:
    ticket: ReadTicket
    states: list[LayerState] = field(default_factory=list)  # converted so far


class DiskLoads:
    """The reads in progress, by file."""

    def __init__(self, disk: DiskTier) -> None:
        self._disk = disk
        self._loads: dict[Path, _Load] = {}

    def get(
        self, ns: CacheNamespace, d: DiskEntry, *, wait: bool, deadline: float | None
    ) -> StoredEntry | Loading | None:
        """The entry as MLX arrays; LOADING while it is read or converted (only without
        `wait`); None when the file was bad (then it is gone). Starts the read if needed."""
        load = self._loads.get(d.path)
        if load is None:
            load = self._loads[d.path] = _Load(ReadTicket(ns, d))
            self._disk.read(load.ticket)
        if not load.ticket.done.is_set():
            if not wait:
                return LOADING
            if not load.ticket.done.wait(READ_WAIT_S):
                log.warning("prompt cache: reading %s takes too long; not waiting", d.path)
                return None
        if not _convert(load, None if wait else deadline):
            return LOADING
        return self._finish(load)

    def advance(self, deadline: float | None) -> list[StoredEntry]:
        """Convert the finished reads until `deadline`; returns the entries completed."""
        done = []
        for load in list(self._loads.values()):
            if deadline is not None and time.perf_counter() > deadline:
                break
            if load.ticket.done.is_set() and _convert(load, deadline):
                entry = self._finish(load)
                if entry is not None:
                    done.append(entry)
        return done

    def clear(self) -> None:
        self._loads.clear()

    def _finish(self, load: _Load) -> StoredEntry | None:
        ticket = load.ticket
        self._loads.pop(ticket.entry.path, None)
        if ticket.header is None:
            return None
        n_target = len(ticket.header.target)
        draft = load.states[n_target:] if ticket.header.draft is not None else None
        return StoredEntry(ticket.ns.key(), ticket.header.tokens, load.states[:n_target], draft)


def _convert(load: _Load, deadline: float | None) -> bool:
    """Turn the read arrays into MLX arrays, at least one layer, until `deadline`; True when
    every layer is done (or there is nothing to convert)."""
    header, arrays = load.ticket.header, load.ticket.arrays
    if header is None or arrays is None:
        return True
    infos = [("t", i, x) for i, x in enumerate(header.target)]
    infos += [("d", i, x) for i, x in enumerate(header.draft or [])]
    while len(load.states) < len(infos):
        prefix, i, info = infos[len(load.states)]
        mine = {name: arrays[f"{prefix}{i}.{name}"] for name in info.arrays}
        load.states.append(from_numpy(info, mine))
        if len(load.states) < len(infos) and deadline is not None:
            if time.perf_counter() > deadline:
                return False
    return True
