"""The engine's settings: one object from the API to the scheduler; each default once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# prompt tokens one step may process: on the CPU a chat arriving waits for at most such a chunk
# of another's prompt; on a GPU mlx-lm's own prefill_step_size, so that a burst of chats arriving
# together is prefilled in one forward (each new batch shape costs tens of ms there)
DEFAULT_PREFILL_CHUNK = 512
DEFAULT_GPU_PREFILL_CHUNK = 2048
DEFAULT_MAX_BATCH = 16
DEFAULT_STATS_INTERVAL_S = 0.25  # a running request's StatsEvent at most this often
DEFAULT_STREAM_INTERVAL_S = 0.02  # tokens reach asyncio at most this late (hosting/event_outbox.py)
DEFAULT_KV_GROUP_SIZE = 64
DEFAULT_PREFILL_GAP_FACTOR = 3.0  # engine/core/prefill_pacer.py
# Verify rounds ahead (engine/core/lookahead.py) are exact; whether they are faster depends on
# the model and the machine (a random 8B at four rows: 1.3-1.4x serial on one H100, 0.81x on
# another; docs/benchmarks.md), so on a GPU each batch size times both ways and keeps the faster
# (engine/core/ahead_choice.py). On MLX's CPU backend `async_eval` waits until all but ten ops of
# a forward have run: nothing overlaps, and rounds run in series.
DEFAULT_VERIFY_AHEAD: bool | None = None
# A ragged plain step's attention in the CUDA kernel: on three H100s choosing per batch size as
# measured (None) picked it nearly everywhere and ran at a median 0.95 of always-kernel (its
# trials, noise or the switches: open; docs/benchmarks.md, nineteenth pass). One H100 before
# had MLX's ops faster at the step (1-67%): None is for such a machine.
DEFAULT_DECODE_ATTENTION_KERNEL: bool | None = True


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine is started with."""

    # What requests that name no model use: a model folder, a Hugging Face repo id in the local
    # cache, or None (the embedded default model). Loaded at start; other models load on demand.
    model: str | None = None
    # What "draft" and "auto" requests that name no draft model use; same tokenizer as model
    draft_model: str | None = None
    # What the loaded models may hold together (weights and KV caches); None: from the machine
    # (engine/hosting/memory_budget.py). Idle models are unloaded to make room, least recently
    # used first; a model that cannot fit is refused.
    memory_budget_bytes: int | None = None
    prefill_chunk: int | None = None  # None: DEFAULT_GPU_PREFILL_CHUNK on a GPU, else the CPU's
    # while other rows decode, a step's prompt chunk is sized so the step takes about this many
    # decode steps (engine/core/prefill_pacer.py); None: always whole chunks
    prefill_gap_factor: float | None = DEFAULT_PREFILL_GAP_FACTOR
    # chunks beside decoding rows are powers of two (engine/core/prefill_pacer.py); None: on CUDA
    prefill_pow2: bool | None = None
    # a prompt chunk beside decoding rows shares their forward (engine/core/packed_forward.py)
    packed_prefill: bool = True
    # verify rounds are queued before the last one is read back where the drafters and
    # caches allow it (engine/core/lookahead.py): True, False, or None: on a GPU where measured
    # faster for the batch's size, never on the CPU (DEFAULT_VERIFY_AHEAD, `rounds_ahead`)
    verify_ahead: bool | None = DEFAULT_VERIFY_AHEAD
    # a ragged batch's plain decode steps run their attention in Tandem's CUDA kernel (True),
    # in MLX's own ops (False), or None: per batch size as measured faster
    # (engine/core/decode_attention_choice.py); only where that kernel is installed (CUDA)
    decode_attention_kernel: bool | None = DEFAULT_DECODE_ATTENTION_KERNEL
    max_batch: int = DEFAULT_MAX_BATCH
    max_context: int | None = None  # cap below the model's own context length
    stats_interval_s: float = DEFAULT_STATS_INTERVAL_S
    # tokens leave the MLX thread in batches at most this old (a first token and a reply's end
    # at once); 0: every step
    stream_interval_s: float = DEFAULT_STREAM_INTERVAL_S
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
    kv_group_size: int = DEFAULT_KV_GROUP_SIZE
    kv_start: int = 0
    # Separate MTP weights (a safetensors file or a folder of them) for models whose own folder
    # lacks them (converted 4-bit folders usually do): (model folder or name, weights path)
    mtp_weights: tuple[tuple[str, str], ...] = ()
    # More drafters, by speculative method name, made on the engine thread from the loaded
    # target (the benchmarks' synthetic drafter); production code registers none.
    extra_drafters: tuple[tuple[str, Callable[[Any], Any]], ...] = ()

    def rounds_ahead(self) -> bool | None:
        """verify_ahead on this device: True, False, or None (chosen as measured)."""
        if self.verify_ahead is not None:
            return self.verify_ahead
        from engine.device import on_gpu

        return None if on_gpu() else False

    def step_prefill_chunk(self) -> int:
        """The most prompt tokens one step processes (prefill_chunk, or the device's default)."""
        if self.prefill_chunk is not None:
            return self.prefill_chunk
        from engine.device import on_gpu

        return DEFAULT_GPU_PREFILL_CHUNK if on_gpu() else DEFAULT_PREFILL_CHUNK
