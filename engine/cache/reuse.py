"""The scheduler's side of the prompt cache: restore a request's longest cached prefix before
prefill, and publish a row's processed history (prompt plus reply) when it leaves the batch."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from engine.cache.layout import ModelLayouts, probe_layout
from engine.cache.namespace import CacheNamespace, model_identity, tokenizer_hash
from engine.cache.prompt_cache import LOADING, PromptCache
from engine.request_state import RequestState

log = logging.getLogger(__name__)


class PromptReuse:
    """The prompt cache as one loaded model (and draft model) uses it."""

    def __init__(self, cache: PromptCache, target: Any, *, kv: Any | None = None) -> None:
        """`kv`: the KV quantization settings (engine.cache.kv_quant.KVQuant) or None; a cache
        made under other settings holds other values, so they are part of the namespace."""
        self.cache = cache
        self._target = target
        self._draft: Any | None = None
        self._kv = kv
        kv_fields = kv.namespace_fields() if kv is not None else {}
        self.namespace = CacheNamespace(model_identity(target), tokenizer_hash(target), **kv_fields)
        self._layouts: ModelLayouts | None = None  # probed on first use
        self._probe_failed = False

    def set_draft(self, draft: Any | None) -> None:
        """Draft caches are stored with the target's, so the drafter is part of the namespace."""
        drafter = "none" if draft is None else model_identity(draft.loaded)
        self.namespace = dataclasses.replace(self.namespace, drafter=drafter)
        self._draft = draft
        self._layouts, self._probe_failed = None, False

    def layouts(self) -> ModelLayouts | None:
        """The caches the models make (what a restored entry must fit); None when they cannot
        be probed (then nothing is restored)."""
        if self._layouts is None and not self._probe_failed:
            model = self._target.model
            try:
                target = probe_layout(model, lambda: make_prompt_cache(model))
                draft = None
                if self._draft is not None:
                    draft = probe_layout(self._draft.model, self._draft.new_row_cache)
            except Exception:  # noqa: BLE001 - without a layout the cache only stores
                log.exception("prompt cache: cannot tell this model's cache layout")
                self._probe_failed = True
                return None
            kv = self._kv
            self._layouts = ModelLayouts(
                target,
                draft,
                kv_bits=kv.bits if kv is not None else None,
                kv_group_size=kv.group_size if kv is not None else self.namespace.kv_group_size,
            )
        return self._layouts

    def restore_all(
        self, states: list[RequestState], *, with_draft: bool, wait: bool
    ) -> list[RequestState]:
        """Restore every request not asked yet; returns those ready for prefill (the others
        wait for an entry being read from disk, unless `wait`)."""
        return [s for s in states if self.restore(s, with_draft=with_draft, wait=wait)]

    def restore(self, state: RequestState, *, with_draft: bool, wait: bool = True) -> bool:
        """Fill a waiting request's caches from the longest cached prefix, if any. False while
        the entry it needs is still being read from disk (only without `wait`): ask again."""
        if state.cache is not None or state.cache_checked:
            return True
        layouts = self.layouts()
        match = None
        if layouts is not None:
            try:
                match = self.cache.lookup(self.namespace, state.prompt, layouts=layouts, wait=wait)
            except Exception:  # noqa: BLE001 - a cache failure never fails the request
                log.exception("prompt cache lookup failed for %s", state.request_id)
            if match is LOADING:
                return False
        state.cache_checked = True
        if match is None or (with_draft and match.draft is None):
            return True
        state.cache = match.target
        state.draft_cache = match.draft if with_draft else None
        state.prefilled = match.tokens
        state.stats.cached_tokens = match.tokens
        state.stats.cache_source = match.source
        return True

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
