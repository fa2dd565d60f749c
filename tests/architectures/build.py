"""Tiny random mlx-lm model folders for the architecture matrix.

An architecture's small config is its catalogue entry's overrides on top of `SHARED`, limited to
the fields its `ModelArgs` (or its text model's arguments) has, so every saved config.json holds
only what mlx-lm reads. The model is made by mlx-lm's own classes with a fixed seed, saved with
mlx-lm's `save_model`/`save_config` (4-bit copies through its `quantize_model`) next to the tiny
tokenizer, and loaded back by `mlx_lm.load` like any folder a user picks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
from pathlib import Path
from typing import Any

import engine  # noqa: F401  (interposes OpenBLAS before mlx.core loads)

# isort: split
import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import quantize_model, save_config, save_model

from tests.architectures.tokenizer import TINY_VOCAB, tiny_tokenizer_dir

DEFAULT_SEED = 0
DEFAULT_GROUP_SIZE = 32
WINDOW = 8  # sliding windows wrap within every test prompt
DEFAULT_GAIN = 4.0  # on weight matrices, so random replies vary (see `liven`)

# Small values for the size fields mlx-lm's model arguments share (under their several names).
SHARED: dict[str, Any] = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "hidden_dim", "model_dim"), 64),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers"), 2),
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_hidden_size"), 128),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads"), 4),
    **dict.fromkeys(("num_key_value_heads", "n_kv_heads", "num_kv_heads"), 2),
    **dict.fromkeys(("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"), 1e-5),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx", "block_size"), 1024),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k_experts"), 2),
    **dict.fromkeys(("moe_intermediate_size", "expert_ffn_hidden_size"), 32),
    **dict.fromkeys(("shared_expert_intermediate_size", "shared_intermediate_size"), 32),
    **dict.fromkeys(("n_shared_experts", "num_shared_experts", "num_shared_expert"), 1),
    "head_dim": 16,
    "vocab_size": TINY_VOCAB,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "sliding_window": WINDOW,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 1.0,
    "norm_topk_prob": True,
    "attention_bias": False,
    "mlp_bias": False,
    "use_bias": False,
}


def args_class(ref: str) -> type:
    """`module` (its ModelArgs) or `module:Class` in mlx_lm.models."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(f"mlx_lm.models.{module}"), name or "ModelArgs")


def fill(ref: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """`SHARED`'s values for the fields the arguments class `ref` has, then `overrides`."""
    fields = {f.name for f in dataclasses.fields(args_class(ref))}
    config = {k: v for k, v in SHARED.items() if k in fields}
    config.update(overrides)
    return config


def make_config(arch: Any) -> dict[str, Any]:
    """The architecture's whole config.json (a catalogue entry: engine-independent)."""
    overrides = dict(arch.config)
    text = overrides.pop("text_config", None)
    config = fill(arch.name, {"model_type": arch.name, **overrides})
    if text is not None:
        text = dict(text)
        ref = text.pop("args")
        text.setdefault("model_type", ref.partition(":")[0])
        config["text_config"] = fill(ref, text)
        for key in ("vocab_size", "num_hidden_layers"):  # some wrappers read them outside too
            if key in config["text_config"]:
                config.setdefault(key, config["text_config"][key])
    return config


def build_model(arch: Any, *, seed: int = DEFAULT_SEED) -> tuple[Any, dict[str, Any]]:
    """The random model in memory and its config."""
    from mlx_lm.utils import _get_classes

    config = make_config(arch)
    model_class, model_args = _get_classes(config)
    mx.random.seed(seed)
    model = model_class(model_args.from_dict(config))
    liven(model)
    mx.eval(model.parameters())
    return model, config


def liven(model: Any, *, gain: float = DEFAULT_GAIN) -> None:
    """Make a random model's replies vary. At mlx-lm's initial scale the embedding dominates
    the residual stream and many architectures repeat one token forever (a reply that cannot
    show a misplaced position); weight matrices `gain` times larger let the layers steer. Weight
    matrices mlx-lm initialises to zeros (talkie's lm_head) get random values."""
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_unflatten

    embeddings = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    changed = []
    for key, w in tree_flatten(model.parameters()):
        if key in embeddings or w.ndim < 2 or not mx.issubdtype(w.dtype, mx.floating):
            continue
        if not mx.any(w).item():
            changed.append((key, mx.random.normal(w.shape) * gain * w.shape[-1] ** -0.5))
        elif key.endswith("weight"):
            changed.append((key, w * gain))
    model.update(tree_unflatten(changed))


def save_folder(
    arch: Any, path: Path, *, bits: int | None = None, seed: int = DEFAULT_SEED
) -> Path:
    """Build `arch` and save it as an mlx-lm model folder at `path` (quantized with `bits`)."""
    model, config = build_model(arch, seed=seed)
    if bits:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints the bits per weight
            model, config = quantize_model(model, config, group_size=DEFAULT_GROUP_SIZE, bits=bits)
    path.mkdir(parents=True, exist_ok=True)
    save_model(path, model)
    save_config(config, path / "config.json")
    tokenizer = tiny_tokenizer_dir()
    for f in tokenizer.iterdir():
        (path / f.name).write_bytes(f.read_bytes())
    return path


def cache_types(model: Any) -> list[str]:
    """The distinct cache classes `make_prompt_cache` gives this model's layers, a composite one
    with its parts (e.g. "CacheList(ArraysCache, KVCache)")."""

    def name(cache: Any) -> str:
        parts = getattr(cache, "caches", None)
        if type(cache).__name__ == "CacheList" and parts:
            return f"CacheList({', '.join(name(c) for c in parts)})"
        return type(cache).__name__

    seen: list[str] = []
    for c in make_prompt_cache(model):
        if name(c) not in seen:
            seen.append(name(c))
    return seen
