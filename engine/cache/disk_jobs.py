"""What the disk tier's background threads do: write an entry file, read one back.

Writes take numpy views of MLX arrays that the MLX thread keeps alive until `done` is set, so no
copy is made on the MLX thread; the checksum is computed here. Reads check everything (header,
namespace, checksum) here, off the MLX thread, and hand back numpy arrays.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.cache.disk_format import (
    SUFFIX,
    DiskEntry,
    EntryHeader,
    InvalidFile,
    corrupt,
    entry_metadata,
    read_entry,
    write_file,
)
from engine.cache.layers import LayerInfo
from engine.cache.namespace import CacheNamespace, tokens_digest

if TYPE_CHECKING:
    from engine.cache.disk_tier import DiskTier

log = logging.getLogger(__name__)

HEADER_BYTES_PER_TENSOR = 160  # a generous bound on one tensor's entry in the JSON header


@dataclass
class WriteJob:
    """One entry to write: numpy views of its arrays and the layers' descriptions."""

    ns: CacheNamespace
    tokens: tuple[int, ...]
    target: list[LayerInfo]
    draft: list[LayerInfo] | None
    tensors: dict[str, np.ndarray]  # "t<layer>.<name>" and "d<layer>.<name>"
    trimmable: bool
    generation: int = -1
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        # an upper bound of the file's size: the room reserved for it under the byte cap
        layers = [i.to_json() for i in self.target + (self.draft or [])]
        meta = json.dumps([self.ns.fields(), list(self.tokens), layers])
        header = 2 * len(meta) + HEADER_BYTES_PER_TENSOR * len(self.tensors) + 256
        self.estimate = sum(a.nbytes for a in self.tensors.values()) + header

    def release(self) -> None:
        """Drop the views (they hold MLX arrays) and tell the MLX thread it may let go."""
        self.tensors = {}
        self.done.set()


@dataclass
class ReadTicket:
    """A request to read one entry; `done` is set when `header` and `arrays` are (or when the
    file turned out unusable: then they stay None and the file is gone)."""

    ns: CacheNamespace
    entry: DiskEntry
    done: threading.Event = field(default_factory=threading.Event)
    header: EntryHeader | None = None
    arrays: dict[str, np.ndarray] | None = None


def entry_path(root: Path, ns_key: str, tokens: tuple[int, ...]) -> Path:
    return root / ns_key / f"{tokens_digest(tokens)}{SUFFIX}"


def write_job(tier: DiskTier, job: WriteJob) -> None:
    """Write to a temporary name and rename, so a reader sees the whole file or none."""
    tmp = None
    try:
        if job.generation != tier.generation:
            return  # cleared since it was queued
        if tier.off_reason is not None:
            tier.skip(tier.off_reason)
            return
        path = entry_path(tier.root, job.ns.key(), job.tokens)
        tmp = path.parent / f".{path.stem}.{uuid.uuid4().hex[:8]}.tmp"
        metadata = entry_metadata(job.ns, job.tokens, job.target, job.draft, job.tensors)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(tmp, job.tensors, metadata)
            size = tmp.stat().st_size
        except OSError as exc:
            tier.failed(exc)
            return
        with tier.lock:
            if job.generation != tier.generation:
                return
            try:
                os.replace(tmp, path)
            except OSError as exc:
                tier.failed(exc)
                return
            tmp = None
            _add_written(tier, job, path, size)
    finally:
        if tmp is not None:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
        with tier.lock:
            tier.reserved -= job.estimate
        job.release()


def _add_written(tier: DiskTier, job: WriteJob, path: Path, size: int) -> None:
    used = path.stat().st_mtime
    entry = DiskEntry(
        job.ns.key(), job.tokens, path, size, used, job.target, job.draft, job.trimmable
    )
    tier.add(entry)
    if job.trimmable:  # the new entry serves every prefix of itself
        n = len(job.tokens)
        for other in tier.entries(entry.ns_key):
            if len(other.tokens) < n and job.tokens[: len(other.tokens)] == other.tokens:
                tier.delete(other.path)


def read_job(tier: DiskTier, ticket: ReadTicket) -> None:
    path = ticket.entry.path
    try:
        header, arrays = read_entry(path, ticket.ns)
        if header.tokens != ticket.entry.tokens:
            raise corrupt("token ids changed")
    except FileNotFoundError:
        tier.forget(path)
    except InvalidFile as exc:
        tier.discard(path, exc.reason, str(exc))
    except OSError as exc:
        tier.discard(path, "disk-corrupt", f"unreadable ({exc.strerror or exc})")
    except Exception as exc:  # noqa: BLE001 - a file that breaks the reader is not used again
        log.exception("prompt cache: reading %s failed", path)
        tier.discard(path, "disk-corrupt", f"unreadable ({exc})")
    else:
        ticket.header, ticket.arrays = header, arrays
        tier.touch(ticket.entry)
    finally:
        ticket.done.set()
