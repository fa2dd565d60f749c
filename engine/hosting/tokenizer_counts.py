"""Prompt token counts for a model that is not loaded: its tokenizer alone is loaded (and
kept) on the pool's helper thread, so the MLX thread never waits for it."""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from engine.models import RANDOM_SPEC_PREFIX, ModelLoadError

MAX_KEPT = 8  # tokenizers kept for models that are not loaded


class TokenizerCounts:
    """Counts with tokenizers loaded alone; every call runs on `helper`, one at a time."""

    def __init__(self, helper: ThreadPoolExecutor) -> None:
        self._helper = helper
        self._kept: dict[str, Any] = {}  # key -> tokenizer; touched on the helper thread only

    def count(self, key: str, messages: list[dict[str, str]], *, continue_reply: bool) -> Future:
        return self._helper.submit(self._count, key, messages, continue_reply)

    def _count(self, key: str, messages: list[dict[str, str]], continue_reply: bool) -> int:
        from engine.prompt import apply_chat_template

        tokenizer = self._kept.get(key)
        if tokenizer is None:
            tokenizer = _load(key)
            if len(self._kept) >= MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = tokenizer
        return len(apply_chat_template(messages, tokenizer, continue_reply=continue_reply))


def _load(key: str) -> Any:
    from mlx_lm.utils import load_tokenizer

    if key.startswith(RANDOM_SPEC_PREFIX):
        from engine.bench.random_model import tokenizer_dir

        return load_tokenizer(tokenizer_dir())
    folder = Path(key)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return load_tokenizer(folder, eos_token_ids=config.get("eos_token_id"))
    except Exception as exc:  # noqa: BLE001 - the caller needs one kind of error
        raise ModelLoadError(f"Could not load the tokenizer of {folder.name}: {exc}") from exc
