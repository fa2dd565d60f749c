"""The scheduler's side of the prefix cache: restore a request's longest cached prefix before
prefill, and publish a row's processed history (prompt plus reply) when it leaves the batch."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from engine.cache.namespace import CacheNamespace
from engine.cache.prefix_cache import CacheMatch, PrefixCache

log = logging.getLogger(__name__)


def model_identity(loaded: Any) -> str:
    """Path plus the size and mtime of every weight file: a re-converted model is a new one."""
    path = Path(loaded.path)
    parts = [str(path.resolve())]
    for f in sorted(path.glob("*.safetensors")):
        stat = f.stat()
        parts.append(f"{f.name}:{stat.st_size}:{stat.st_mtime_ns}")
    if not parts[1:]:  # weights built in memory (random benchmark models)
        parts.append(loaded.info.name)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def tokenizer_hash(loaded: Any) -> str:
    from engine.models import vocab_fingerprint

    return vocab_fingerprint(loaded.tokenizer)[:24]


class PromptReuse:
    """The engine's side of the prompt cache: the longest cached prefix of a prompt, and a
    row's history stored when it leaves the batch."""

    def __init__(self, cache: PrefixCache, target: Any, *, kv: Any | None = None) -> None:
        """`kv`: the KV quantization settings (engine.cache.kv_quant.KVQuant) or None; a cache
        made under other settings holds other values, so they are part of the namespace."""
        self.cache = cache
        self._model_id = model_identity(target)
        self._tokenizer = tokenizer_hash(target)
        kv_fields = kv.namespace_fields() if kv is not None else {}
        self.namespace = CacheNamespace(self._model_id, self._tokenizer, **kv_fields)

    def restore(self, prompt: list[int]) -> CacheMatch | None:
        """Single-row caches holding the longest cached prefix of `prompt`, if any."""
        return self.cache.lookup(self.namespace, prompt)

    def publish(self, history: list[int], target: list[Any]) -> None:
        """Store a row's caches under the tokens they hold (never the pending token)."""
        held = target[0].offset if hasattr(target[0], "offset") else None
        if not isinstance(held, int) or held <= 0:
            return
        extra = held - len(history)  # e.g. an EOS token that was fed but is not in the reply
        if extra > 0:
            if not can_trim_prompt_cache(target):
                return
            trim_prompt_cache(target, extra)
            held = len(history)
        try:
            self.cache.publish(self.namespace, history[:held], target)
        except Exception:  # noqa: BLE001 - a cache failure never fails the request
            log.exception("could not publish the prompt cache")
