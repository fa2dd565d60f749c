"""Which model a stored cache belongs to: a cache is reusable only by the same weights, tokenizer,
drafter and KV quantization, so every entry lives under its namespace's key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

FORMAT_VERSION = 1  # bump when the stored layout changes: old entries then live under other keys


@dataclass(frozen=True)
class CacheNamespace:
    model_id: str  # e.g. model path + weight file sizes/mtime hash (the caller builds it)
    tokenizer_hash: str
    drafter: str = "none"  # draft model id when its caches are stored too
    kv_bits: int | None = None
    kv_group_size: int = 64
    kv_start: int = 0

    def fields(self) -> dict[str, object]:
        return asdict(self)

    def key(self) -> str:
        """A stable short hash of every field and FORMAT_VERSION (a folder name on disk)."""
        blob = json.dumps(
            {"format_version": FORMAT_VERSION, **self.fields()}, sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:24]


def tokens_digest(tokens: list[int] | tuple[int, ...]) -> str:
    """The file name stem of an entry: a hash of its token ids."""
    return hashlib.sha256(json.dumps(list(tokens)).encode()).hexdigest()[:32]
