"""What the engine makes for each loaded model when requests run on it: an EngineCore (with
the engine's settings and the shared prompt cache, namespaced per model), and a draft-model
drafter when it drafts for another model."""

from __future__ import annotations

import logging
from typing import Any

from engine.config import EngineConfig

log = logging.getLogger(__name__)


class CoreFactory:
    """Makes EngineCores and draft-model drafters; owns the prompt cache they share."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.prompt_cache = None  # engine.cache.PromptCache, made with the first core

    def core(self, target: Any) -> Any:
        """An EngineCore for a loaded target; raises for settings the model cannot take
        (e.g. a KV group size that does not divide its head size)."""
        from engine.cache.kv_quant import KVQuant
        from engine.core.engine_core import EngineCore

        kv = KVQuant.of(self.config)
        if kv is not None:
            kv.check_model(target.model)
        return EngineCore(target, config=self.config, reuse=self._reuse(target))

    def drafter(self, draft: Any) -> Any:
        """A drafter over a loaded draft model (ValueError when it cannot draft)."""
        from engine.device import on_cuda
        from engine.speculative.draft_model import DraftModelDrafter

        pow2 = self.config.prefill_pow2
        return DraftModelDrafter(
            draft,
            prefill_chunk=self.config.step_prefill_chunk(),
            pow2=on_cuda() if pow2 is None else pow2,
        )

    def _reuse(self, target: Any) -> Any:
        if not self.config.prompt_cache:
            return None
        try:
            from engine.cache import PromptCache
            from engine.cache.kv_quant import KVQuant
            from engine.cache.reuse import PromptReuse

            if self.prompt_cache is None:
                self.prompt_cache = PromptCache.from_config(self.config)
            return PromptReuse(self.prompt_cache, target, kv=KVQuant.of(self.config))
        except Exception:  # noqa: BLE001 - the engine works without a prompt cache
            log.exception("prompt cache unavailable")
            return None
