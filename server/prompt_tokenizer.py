"""Text prompts of /v1/completions as token ids, with the model's own tokenizer (no chat
template), loaded once per model folder on a helper thread: tokenizers are plain Python, so the
MLX thread never waits for them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from engine.api import Engine

MAX_KEPT = 8  # tokenizers kept, for as many models


class PromptTokenizer:
    """Tokenizes completion prompts the way mlx_lm.generate does for a text prompt."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._kept: dict[str, Any] = {}  # model folder -> tokenizer
        self._lock = asyncio.Lock()

    async def encode(self, text: str, *, model: str | None) -> list[int]:
        info = await self._engine.load_model(model)  # the folder (and a load it would need anyway)
        loop = asyncio.get_running_loop()
        async with self._lock:
            tokenizer = self._kept.get(info.path)
            if tokenizer is None:
                tokenizer = await loop.run_in_executor(None, _load, info.path)
                if len(self._kept) >= MAX_KEPT:
                    self._kept.pop(next(iter(self._kept)))
                self._kept[info.path] = tokenizer
        return await loop.run_in_executor(None, _encode, tokenizer, text)


def _load(folder: str) -> Any:
    from mlx_lm.utils import load_tokenizer

    path = Path(folder)
    config_file = path / "config.json"
    eos = None
    if config_file.is_file():
        eos = json.loads(config_file.read_text(encoding="utf-8")).get("eos_token_id")
    return load_tokenizer(path, eos_token_ids=eos)


def _encode(tokenizer: Any, text: str) -> list[int]:
    # as mlx_lm.generate: the BOS token is added unless the text already starts with it
    bos = tokenizer.bos_token
    return list(tokenizer.encode(text, add_special_tokens=bos is None or not text.startswith(bos)))
