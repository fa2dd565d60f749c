"""Which model a stored cache belongs to: a cache is reusable only by the same weights, tokenizer,
drafter and KV quantization, so every entry lives under its namespace's key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.cache.kv_quant import DEFAULT_KV_GROUP_SIZE

FORMAT_VERSION = 2  # bump when the stored layout changes: old entries then live under other keys
# files whose size and mtime say which weights a model folder holds
IDENTITY_GLOBS = ("*.safetensors", "config.json")


@dataclass(frozen=True)
class CacheNamespace:
    """The identity of a model set-up whose caches are interchangeable."""

    model_id: str  # `model_identity` of the target
    tokenizer_hash: str
    drafter: str = "none"  # `model_identity` of the draft model when its caches are stored too
    kv_bits: int | None = None
    kv_group_size: int = DEFAULT_KV_GROUP_SIZE
    kv_start: int = 0

    def fields(self) -> dict[str, object]:
        return asdict(self)

    def key(self) -> str:
        """A stable short hash of every field and FORMAT_VERSION (a folder name on disk)."""
        return key_of(self.fields())


def key_of(fields: dict[str, Any]) -> str:
    blob = json.dumps({"format_version": FORMAT_VERSION, **fields}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def tokens_digest(tokens: list[int] | tuple[int, ...]) -> str:
    """The file name stem of an entry: a hash of its token ids."""
    return hashlib.sha256(json.dumps(list(tokens)).encode()).hexdigest()[:32]


def model_identity(loaded: Any) -> str:
    """What the weights are. Weights built in memory (random benchmark models) say so in
    `loaded.weights_id` (preset, shapes, seed, dtype); weights in a folder are its path plus the
    size and mtime of every weight and config file, so a re-converted model is a new one."""
    if loaded.weights_id is not None:
        parts = ["in-memory", loaded.weights_id]
    else:
        path = Path(loaded.path)
        parts = ["folder", str(path.resolve())]
        for pattern in IDENTITY_GLOBS:
            for f in sorted(path.glob(pattern)):
                stat = f.stat()
                parts.append(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def tokenizer_hash(loaded: Any) -> str:
    from engine.models import vocab_fingerprint

    return vocab_fingerprint(loaded.tokenizer)[:24]
