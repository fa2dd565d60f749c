"""The engine's side of the prompt cache: restore a request's longest cached prefix before
prefill, and publish a row's processed history (prompt plus reply) when it leaves the batch."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from engine.cache.cache_list import leaves, map_leaves
from engine.cache.disk_loads import Loading
from engine.cache.layout import ModelLayouts, probe_layout
from engine.cache.namespace import CacheNamespace, model_identity, tokenizer_hash
from engine.cache.prompt_cache import CacheMatch, PromptCache

log = logging.getLogger(__name__)


class PromptReuse:
    """The engine's side of the prompt cache: the longest cached prefix of a prompt, and a
    row's history stored when it leaves the batch."""

    def __init__(self, cache: PromptCache, target: Any, *, kv: Any | None = None) -> None:
        """`kv`: the KV quantization settings (engine.cache.kv_quant.KVQuant) or None; a cache
        made under other settings holds other values, so they are part of the namespace."""
        self.cache = cache
        self._target = target
        self._kv = kv
        kv_fields = kv.namespace_fields() if kv is not None else {}
        self.namespace = CacheNamespace(model_identity(target), tokenizer_hash(target), **kv_fields)
        self._layouts: ModelLayouts | None = None  # probed on first use
        self._probe_failed = False
        self._draft_probe: tuple[Any, Any] | None = None  # (model, make_cache) of a drafter
        self.refusal: str | None = None  # why this model's prompts are neither stored nor served

    def set_draft(self, identity: str, model: Any, make_cache: Any) -> None:
        """A drafter whose per-row caches are stored beside the target's (the model's MTP
        layer): its identity joins the namespace, its layout is checked on restore."""
        self.namespace = dataclasses.replace(self.namespace, drafter=identity)
        self._draft_probe = (model, make_cache)
        self._layouts = None

    def layouts(self) -> ModelLayouts | None:
        """The caches the model makes (what a restored entry must fit); None when they cannot
        be probed (then nothing is restored)."""
        if self._layouts is None and not self._probe_failed:
            model = self._target.model
            try:
                target = probe_layout(model, lambda: make_prompt_cache(model), flat=leaves)
            except Exception:  # noqa: BLE001 - without a layout the cache only stores
                log.exception("prompt cache: cannot tell this model's cache layout")
                self._probe_failed = True
                return None
            kv = self._kv
            draft = None
            if self._draft_probe is not None:
                try:
                    draft = probe_layout(*self._draft_probe)
                except Exception:  # noqa: BLE001 - the drafter's caches are then not restored
                    log.exception("prompt cache: cannot tell the drafter's cache layout")
            self._layouts = ModelLayouts(
                target,
                draft=draft,
                kv_bits=kv.bits if kv is not None else None,
                kv_group_size=kv.group_size if kv is not None else self.namespace.kv_group_size,
            )
        return self._layouts

    def restore(self, prompt: list[int], *, wait: bool = True) -> CacheMatch | Loading | None:
        """Single-row caches holding the longest cached prefix of `prompt`, if any, checked
        against the model. Without `wait`, LOADING while that prefix is still being read from
        disk (in the background): ask again on a later step."""
        if self.refusal is not None:
            self.cache.count_skip("chunking")
            return None
        layouts = self.layouts()
        if layouts is None:
            return None
        match = self.cache.lookup(self.namespace, prompt, layouts=layouts, wait=wait)
        if isinstance(match, CacheMatch):  # stored flat: back into the model's CacheLists
            stored = iter(match.target)
            match.target = map_leaves(make_prompt_cache(self._target.model), lambda _: next(stored))
        return match

    def publish(
        self, tokens: list[int], target: list[Any], *, held: int, draft: list[Any] | None = None
    ) -> None:
        """Store single-row caches that hold `held` positions, whose tokens are `tokens`
        (never the pending input). Positions past the known tokens (the reply's end fed one
        more) are trimmed first where the caches allow it; recurrent state cannot be trimmed,
        so then nothing is stored (counted under its reason)."""
        if held <= 0 or self.refusal is not None:
            return
        if held > len(tokens):
            if not can_trim_prompt_cache(target):
                self.cache.count_skip("untrimmable-tail")
                return
            trim_prompt_cache(target, held - len(tokens))
            held = len(tokens)
        try:  # a CacheList's members are stored as layers of their own
            self.cache.publish(self.namespace, tokens[:held], list(leaves(target)), draft)
        except Exception:  # noqa: BLE001 - a cache failure never fails the request
            log.exception("could not publish the prompt cache")
