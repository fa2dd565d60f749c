"""Tiny random mlx-lm model folders for engine tests (built in seconds, fp32, no download).

They use the default model's tokenizer (vocab 49152) unless told otherwise, so prompts tokenize
exactly as with the real model. Import `engine` before this module so OpenBLAS is interposed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import engine  # noqa: F401  (interposes OpenBLAS before mlx.core loads)

# isort: split
import mlx.core as mx
from mlx_lm.utils import quantize_model, save_config, save_model

DEFAULT_TINY_VOCAB = 49152  # the default model's tokenizer
DEFAULT_TINY_HIDDEN = 64
DEFAULT_TINY_LAYERS = 2
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


def default_tokenizer_dir() -> Path:
    """The converted default model's folder (converted once into the user cache)."""
    from engine.default_model import ensure_default_model

    return ensure_default_model()


def copy_tokenizer(dst: Path, src: Path | None = None) -> None:
    src = src or default_tokenizer_dir()
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)


def _save(
    path: Path,
    config: dict[str, Any],
    *,
    seed: int,
    quantize_bits: int | None,
    group_size: int,
    tokenizer_src: Path | None,
) -> Path:
    from engine.cache.mlx_lm_private import model_classes as _get_classes

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model_class, args_class = _get_classes(config)
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(config))
    mx.eval(model.parameters())
    if quantize_bits:
        model, config = quantize_model(model, config, group_size=group_size, bits=quantize_bits)
    save_model(path, model)
    save_config(config, path / "config.json")
    copy_tokenizer(path, tokenizer_src)
    return path


def tiny_llama(*, vocab_size: int, **overrides: Any) -> Any:
    """A tiny random llama built in memory (two layers, width 64, grouped heads), no folder."""
    from mlx_lm.models import llama

    config: dict[str, Any] = dict(
        model_type="llama",
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=vocab_size,
    )
    config.update(overrides)
    return llama.Model(llama.ModelArgs(**config))


def make_tiny_llama_dir(
    path: Path,
    *,
    vocab_size: int = DEFAULT_TINY_VOCAB,
    hidden_size: int = DEFAULT_TINY_HIDDEN,
    num_layers: int = DEFAULT_TINY_LAYERS,
    seed: int = 0,
    quantize_bits: int | None = None,
    group_size: int = 32,
    tokenizer_src: Path | None = None,
    **overrides: Any,
) -> Path:
    """A random llama (SmolLM2-shaped, tiny) saved as an mlx-lm folder at `path`."""
    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": hidden_size * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": hidden_size // 4,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab_size,
        "max_position_embeddings": 2048,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "eos_token_id": 2,
        "bos_token_id": 1,
    }
    config.update(overrides)
    return _save(
        path,
        config,
        seed=seed,
        quantize_bits=quantize_bits,
        group_size=group_size,
        tokenizer_src=tokenizer_src,
    )


def make_tiny_gemma3_dir(
    path: Path,
    *,
    sliding_window: int = 8,
    sliding_window_pattern: int = 2,
    vocab_size: int = DEFAULT_TINY_VOCAB,
    hidden_size: int = DEFAULT_TINY_HIDDEN,
    num_layers: int = 4,
    seed: int = 0,
    quantize_bits: int | None = None,
    group_size: int = 32,
    tokenizer_src: Path | None = None,
    **overrides: Any,
) -> Path:
    """A random Gemma 3 text model: every `sliding_window_pattern`-th layer is global, the
    others use a RotatingKVCache of `sliding_window` tokens."""
    head_dim = 16
    config: dict[str, Any] = {
        "model_type": "gemma3_text",
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": hidden_size * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": head_dim,
        "query_pre_attn_scalar": head_dim,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "sliding_window": sliding_window,
        "sliding_window_pattern": sliding_window_pattern,
        "max_position_embeddings": 4096,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "eos_token_id": 2,
        "bos_token_id": 1,
    }
    config.update(overrides)
    return _save(
        path,
        config,
        seed=seed,
        quantize_bits=quantize_bits,
        group_size=group_size,
        tokenizer_src=tokenizer_src,
    )


def make_tiny_qwen3_next_dir(
    path: Path,
    *,
    vocab_size: int = DEFAULT_TINY_VOCAB,
    hidden_size: int = DEFAULT_TINY_HIDDEN,
    num_layers: int = 4,
    seed: int = 0,
    quantize_bits: int | None = None,
    group_size: int = 32,
    tokenizer_src: Path | None = None,
    **overrides: Any,
) -> Path:
    """A random Qwen3-Next (the Qwen3.5 family's hybrid): gated-delta linear attention layers
    (ArraysCache: conv and recurrent state) with a full attention layer every fourth."""
    config: dict[str, Any] = {
        "model_type": "qwen3_next",
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": hidden_size * 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "shared_expert_intermediate_size": hidden_size,
        "mlp_only_layers": [],
        "moe_intermediate_size": hidden_size,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "max_position_embeddings": 4096,
        "full_attention_interval": 4,
        "eos_token_id": 2,
        "bos_token_id": 1,
    }
    config.update(overrides)
    return _save(
        path,
        config,
        seed=seed,
        quantize_bits=quantize_bits,
        group_size=group_size,
        tokenizer_src=tokenizer_src,
    )


def prefill(model: Any, tokens: list[int], *, one_by_one: int = 0) -> list:
    """A cache holding `tokens`: one forward over the first ones, then `one_by_one` single-token
    steps (the decode path, where a sliding window wraps in place)."""
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    head = len(tokens) - one_by_one
    model(mx.array(tokens[:head])[None], cache=cache)
    for t in tokens[head:]:
        model(mx.array([[t]]), cache=cache)
    mx.eval([c.state for c in cache])
    return cache
