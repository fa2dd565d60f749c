"""The scheduler's side of the prefix cache: restore a request's longest cached prefix before
prefill, and publish a row's processed history (prompt plus reply) when it leaves the batch."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from engine.cache.namespace import CacheNamespace
from engine.cache.prefix_cache import PrefixCache
from engine.request_state import RequestState

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
    def __init__(self, cache: PrefixCache, target: Any, *, kv: Any | None = None) -> None:
        """`kv`: the KV quantization settings (engine.cache.kv_quant.KVQuant) or None; a cache
        made under other settings holds other values, so they are part of the namespace."""
        self.cache = cache
        self._model_id = model_identity(target)
        self._tokenizer = tokenizer_hash(target)
        kv_fields = kv.namespace_fields() if kv is not None else {}
        self.namespace = CacheNamespace(self._model_id, self._tokenizer, **kv_fields)

    def set_draft(self, draft: Any | None) -> None:
        """Draft caches are stored with the target's, so the drafter is part of the namespace."""
        drafter = "none" if draft is None else model_identity(draft.loaded)
        self.namespace = dataclasses.replace(self.namespace, drafter=drafter)

    def restore(self, state: RequestState, *, with_draft: bool) -> None:
        """Fill a waiting request's caches from the longest cached prefix, if any."""
        match = self.cache.lookup(self.namespace, state.prompt)
        if match is None or (with_draft and match.draft is None):
            return
        state.cache = match.target
        state.draft_cache = match.draft if with_draft else None
        state.prefilled = match.tokens
        state.stats.cached_tokens = match.tokens
        state.stats.cache_source = match.source

    def publish(self, state: RequestState, target: list[Any], draft: list[Any] | None) -> None:
        """Store a row's caches under the tokens they hold (never the pending token)."""
        history = state.prompt + state.generated
        held = target[0].offset if hasattr(target[0], "offset") else None
        if not isinstance(held, int) or held <= 0:
            return
        extra = held - len(history)  # e.g. an EOS token that was fed but is not in the reply
        if extra > 0:
            caches = target + (draft or [])
            if not can_trim_prompt_cache(caches):
                return
            trim_prompt_cache(target, extra)
            if draft:
                trim_prompt_cache(draft, extra)
            held = len(history)
        try:
            self.cache.publish(self.namespace, history[:held], target, draft)
        except Exception:  # noqa: BLE001 - a cache failure never fails the request
            log.exception("could not publish the prompt cache of %s", state.request_id)
