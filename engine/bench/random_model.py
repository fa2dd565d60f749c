"""Random-weight targets of a set size, for benchmarks on machines without real weights (the
H200 reaches no model hub). Spec: "random:1b", "random:8b", "random:tiny" (llama), or
"random:hybrid-1b", "random:hybrid-tiny" (Qwen3.5-shaped: gated-delta linear attention with a
full attention layer every fourth, the same sizes as the llama of that name); a hybrid with
"-mtp" ("random:hybrid-1b-mtp") also has a random Qwen3.5 MTP layer (speculative method "mtp":
its drafts are random, so only the cost of drafting and verifying is measured); with
"-mtp-exact" ("random:hybrid-1b-mtp-exact") every block's output projection is zero (the
target's next token depends on the current one only; every layer still runs) and the MTP layer
predicts it exactly: the best case, every draft accepted.

The tokenizer is the default model's (SmolLM2's 49152-token BPE), from TANDEM_TOKENIZER_DIR or
the converted default model, so the engine runs exactly as with a real model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.engine_reports import ModelInfo
from engine.models import RANDOM_SPEC_PREFIX as RANDOM_PREFIX

DEFAULT_DTYPE = "bfloat16"
PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
    ),
    # the 1B's sixteen layers and head layout at a tiny width: a step costs its host work and
    # MLX's per-op costs, not the model's arithmetic (where a round's time goes, on a CPU)
    "host": dict(
        hidden_size=128,
        num_hidden_layers=16,
        intermediate_size=256,
        num_attention_heads=8,
        num_key_value_heads=2,
    ),
    # the 8B's 32 layers at a tiny width: host work a step at the 8B's depth
    "host32": dict(
        hidden_size=64,
        num_hidden_layers=32,
        intermediate_size=128,
        num_attention_heads=8,
        num_key_value_heads=2,
    ),
    "1b": dict(
        hidden_size=2048,
        num_hidden_layers=16,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
    "8b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
}
VOCAB_SIZE = 49152
HYBRID_PREFIX = "hybrid-"
MTP_SUFFIX = "-mtp"
EXACT_SUFFIX = "-exact"
SILENCED = ("o_proj.weight", "out_proj.weight", "down_proj.weight")  # each block's output
# Qwen3.5's linear attention, scaled to the preset: value heads of 128, key heads of 128
HYBRID_EXTRA: dict[str, dict[str, int]] = {
    "tiny": dict(linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16,
                 linear_value_head_dim=16, head_dim=16, num_hidden_layers=4),
    "1b": dict(linear_num_value_heads=16, linear_num_key_heads=8, linear_key_head_dim=128,
               linear_value_head_dim=128, head_dim=64),
}  # fmt: skip


def is_random_spec(spec: str | None) -> bool:
    return bool(spec) and spec.startswith(RANDOM_PREFIX)


def tokenizer_dir() -> Path:
    env = os.environ.get("TANDEM_TOKENIZER_DIR")
    if env:
        return Path(env)
    from engine.default_model import ensure_default_model

    return ensure_default_model()


def open_random(spec: str, *, seed: int = 0) -> Any:
    """An OpenedModel (engine.models) with lazy random weights of the preset's shape."""
    from engine.cache.mlx_lm_private import model_classes
    from engine.models import LoadedModel, OpenedModel

    preset = spec[len(RANDOM_PREFIX) :]
    exact = preset.endswith(MTP_SUFFIX + EXACT_SUFFIX)
    with_mtp = exact or preset.endswith(MTP_SUFFIX)
    size = preset.removesuffix(EXACT_SUFFIX).removesuffix(MTP_SUFFIX).removeprefix(HYBRID_PREFIX)
    hybrid = preset.startswith(HYBRID_PREFIX)
    if size not in PRESETS or (hybrid and size not in HYBRID_EXTRA) or (with_mtp and not hybrid):
        names = sorted(PRESETS) + [HYBRID_PREFIX + s for s in sorted(HYBRID_EXTRA)]
        names += [HYBRID_PREFIX + s + MTP_SUFFIX for s in sorted(HYBRID_EXTRA)]
        names += [HYBRID_PREFIX + s + MTP_SUFFIX + EXACT_SUFFIX for s in sorted(HYBRID_EXTRA)]
        raise ValueError(f"unknown random model {preset!r}; choose from {names}")
    dtype = mx.float32 if str(mx.default_device()).startswith("Device(cpu") else mx.bfloat16
    config: dict[str, Any] = dict(
        model_type="qwen3_5" if hybrid else "llama",
        vocab_size=VOCAB_SIZE,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        **PRESETS[size],
    )
    if hybrid:
        config.update(HYBRID_EXTRA[size], full_attention_interval=4)
    model_class, args_class = model_classes(config)
    args = args_class.from_dict(config)
    mx.random.seed(seed)
    model = model_class(args)
    # small weights keep bf16 activations finite through many random layers
    model.update(nn.utils.tree_map(lambda p: (p * 0.02).astype(dtype), model.parameters()))
    mtp = None
    if with_mtp:
        from engine.speculative.mtp.module import build_mtp

        mtp = build_mtp(model, "qwen3_5")
        mtp.update(nn.utils.tree_map(lambda p: (p * 0.02).astype(dtype), mtp.parameters()))
        if exact:
            predict_exactly(model, mtp)
    folder = tokenizer_dir()
    n_params = sum(v.size for _, v in nn.utils.tree_flatten(model.parameters()))
    name = f"random-{preset} ({n_params / 1e9:.2f}B, {dtype})"
    # the prompt cache's namespace: these weights are the preset's shapes, the seed and the dtype
    weights_id = json.dumps(
        {"random": preset, "args": config, "seed": seed, "dtype": str(dtype)},
        sort_keys=True,
        default=str,
    )

    def finish(model: Any, tokenizer: Any) -> Any:
        info = ModelInfo(
            name=name,
            path=str(folder),
            architecture=config["model_type"],
            parameters=n_params,
            bytes=n_params * dtype.size,
            vocab_size=VOCAB_SIZE,
            context_length=config["max_position_embeddings"],
            dtype=str(dtype),
            mtp=with_mtp,
        )
        if mtp is not None:
            mx.eval(mtp.parameters())
        return LoadedModel(
            model=model,
            tokenizer=tokenizer,
            path=folder,
            info=info,
            config=config,
            weights_id=weights_id,
            mtp=mtp,
        )

    return OpenedModel(model, name, folder, None, finish)


def silence_blocks(module: nn.Module) -> None:
    """Every attention, linear-attention and MLP block adds nothing to the residual stream (it
    still runs): the next token then depends on the current token only."""
    flat = nn.utils.tree_flatten(module.parameters())
    zeros = [(k, mx.zeros_like(v)) for k, v in flat if k.endswith(SILENCED)]
    module.update(nn.utils.tree_unflatten(zeros))


def predict_exactly(model: nn.Module, mtp: Any) -> None:
    """Silence the target's blocks and make its MTP layer pass the next token's embedding to
    the target's own final norm and head: it then drafts exactly the target's next token
    (t_{p+2} = G(t_{p+1})), chained ones too."""
    silence_blocks(model)
    silence_blocks(mtp)
    d = mtp.norm.weight.shape[0]
    dtype = mtp.norm.weight.dtype
    eye, zero = mx.eye(d, dtype=dtype), mx.zeros((d, d), dtype=dtype)
    proj = mx.concatenate([zero, eye] if mtp.hidden_first else [eye, zero], axis=1)
    inner = getattr(model, "language_model", model).model
    mtp.update(
        {
            "proj": {"weight": proj},
            "norm": {"weight": inner.norm.weight},
            "norm_embed": {"weight": mx.ones((d,), dtype=dtype)},
        }
    )


def load_random(spec: str, *, seed: int = 0) -> Any:
    """A LoadedModel with random weights of the preset's shape."""
    from engine.models import load_tokenizer

    opened = open_random(spec, seed=seed)
    mx.eval(opened.weights)
    return opened.finish(opened.model, load_tokenizer(opened))
