"""The engine's settings, shared by the API and the MLX thread."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFILL_CHUNK = 512
DEFAULT_MAX_BATCH = 16


@dataclass(frozen=True)
class EngineConfig:
    model: str | None = None  # a model folder, a Hugging Face repo id in the local cache, or None
    draft_model: str | None = None  # for speculative method "draft"; same tokenizer as model
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK
    max_batch: int = DEFAULT_MAX_BATCH
    max_context: int | None = None  # cap below the model's own context length
    # the prompt cache reuses computed prompts across turns, tabs and restarts; None takes the
    # default of engine/cache/settings.py (folder: $TANDEM_PROMPT_CACHE_DIR, else the user cache
    # folder; RAM: DEFAULT_RAM_BYTES; disk: DEFAULT_DISK_BYTES, 0 keeps it in RAM only)
    prompt_cache: bool = True
    prompt_cache_dir: str | None = None
    prompt_cache_ram_bytes: int | None = None
    prompt_cache_disk_bytes: int | None = None
    log_blas: bool = True
    # KV cache quantization (engine/cache/kv_quant.py): None (off), 4 or 8 bits; the group size
    # (32, 64, 128) must divide the model's head size; quantize once a cache holds kv_start
    # positions (mlx-lm's quantized_kv_start). Bad settings make the model load fail.
    kv_bits: int | None = None
    kv_group_size: int = 64
    kv_start: int = 0
