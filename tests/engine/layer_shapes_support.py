"""Tiny model folders of the layer layouts the load-time rewrites meet, and the logits of every
shape a batch meets (fused projections, compiled MLPs)."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from tests.tiny_models import make_tiny_gemma3_dir, make_tiny_llama_dir, make_tiny_qwen3_next_dir

PROMPTS = [[5, 9, 14, 3, 77, 120, 6, 8], [40, 41, 42, 43, 44, 45, 46, 47]]


def decode_logits(model, prompts: list[list[int]], steps: int = 4) -> list[mx.array]:
    """A prefill of both rows, then greedy decode steps (width 1) and one verify-like forward
    of five tokens: every shape a batch meets."""
    cache = make_prompt_cache(model)
    out = [model(mx.array(prompts), cache=cache)]
    for _ in range(steps):
        out.append(model(mx.argmax(out[-1][:, -1:], axis=-1), cache=cache))
    out.append(model(mx.array([p[:5] for p in prompts]), cache=cache))
    mx.eval(out)
    return out


def make_layout_folders(root: Path) -> dict[str, Path]:
    """llama, 4-bit llama, qwen2 with biases, gemma3 and qwen3_next (experts, linear attention)."""
    return {
        "llama": make_tiny_llama_dir(root / "llama", tie_word_embeddings=False),
        "llama-4bit": make_tiny_llama_dir(root / "llama4", quantize_bits=4),
        "qwen2-bias": make_tiny_llama_dir(
            root / "qwen2", model_type="qwen2", tie_word_embeddings=False
        ),
        "gemma3": make_tiny_gemma3_dir(root / "gemma3"),
        "qwen3_next": make_tiny_qwen3_next_dir(root / "qwen3_next"),
    }
