"""The MTP layer of each family, as the reference implementations (vLLM's qwen3_next_mtp,
deepseek_mtp, mimo_mtp) build it: normalise the next token's embedding and the target's hidden
state, project their concatenation back to the model width, run one decoder layer of the
family (mlx-lm's own class, built like the target's full-attention layers), normalise, and read
the target's own LM head."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.models.base import create_attention_mask

from engine.speculative.mtp.checkpoint import (
    DEEPSEEK_FAMILIES,
    MIMO_FAMILIES,
    QWEN_FAMILIES,
    MtpWeightsError,
)


class MtpModule(nn.Module):
    """One MTP layer: (embedding of token p+1, hidden state at p) -> hidden state that the LM
    head turns into token p+2."""

    def __init__(self, layer: nn.Module, *, dims: int, eps: float, family: str) -> None:
        super().__init__()
        self.norm_embed = nn.RMSNorm(dims, eps=eps)
        self.norm_hidden = nn.RMSNorm(dims, eps=eps)
        self.proj = nn.Linear(2 * dims, dims, bias=False)
        self.layer = layer
        self.norm = nn.RMSNorm(dims, eps=eps)
        self.family = family
        self.hidden_first = family in MIMO_FAMILIES  # MiMo concatenates [hidden, embedding]
        # what a chained step reads as its "hidden state": DeepSeek's before the shared head's
        # norm, the others' after their final norm (as their reference implementations)
        self.chain_normed = family not in DEEPSEEK_FAMILIES

    def __call__(self, embeds: mx.array, hidden: mx.array, cache: Any) -> tuple[mx.array, mx.array]:
        """(normed output for the LM head, the state a chained step reads)."""
        e, h = self.norm_embed(embeds), self.norm_hidden(hidden)
        x = self.proj(mx.concatenate([h, e] if self.hidden_first else [e, h], axis=-1))
        mask = create_attention_mask(x, cache, return_array=True)
        x = self.layer(x, mask, cache)
        out = self.norm(x)
        return out, (out if self.chain_normed else x)


def _args_of(model: nn.Module) -> Any:
    inner = getattr(model, "language_model", model)
    args = getattr(inner, "args", None) or getattr(model, "args", None)
    if args is None:
        raise MtpWeightsError("the model has no args to build its MTP layer from")
    return args


def build_mtp(target_model: nn.Module, family: str) -> MtpModule:
    """An MTP layer for `target_model` (random weights until loaded)."""
    args = _args_of(target_model)
    layers = target_model.layers
    if family in QWEN_FAMILIES:
        full = next((layer for layer in layers if not getattr(layer, "is_linear", False)), None)
        if full is None:
            raise MtpWeightsError("the model has no full-attention layer to copy")
        layer = type(full)(args, args.full_attention_interval - 1)
    elif family in DEEPSEEK_FAMILIES:
        layer = type(layers[0])(args, args.num_hidden_layers)
    elif family in MIMO_FAMILIES:
        layer = type(layers[0])(args)
    else:
        raise MtpWeightsError(f"no MTP layer is known for model type {family!r}")
    return MtpModule(layer, dims=args.hidden_size, eps=args.rms_norm_eps, family=family)


def load_mtp(target_model: nn.Module, family: str, weights: dict[str, mx.array]) -> MtpModule:
    """The MTP layer with its checkpoint weights, cast to the target's float type; every
    parameter must be given (strict), so a wrong layout fails with the missing names."""
    module = build_mtp(target_model, family)
    dtype = _float_dtype(target_model)
    weights = {
        k: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) else v for k, v in weights.items()
    }
    want = {k for k, _ in tree_flatten(module.parameters())}
    missing = sorted(want - weights.keys())
    extra = sorted(weights.keys() - want)
    if missing or extra:
        raise MtpWeightsError(
            f"MTP weights do not fit the {family} layer: missing {missing[:4]}, "
            f"unexpected {extra[:4]}"
        )
    module.load_weights(list(weights.items()), strict=True)
    module.eval()
    mx.eval(module.parameters())
    return module


def _float_dtype(model: nn.Module) -> mx.Dtype:
    for _, v in tree_flatten(model.parameters()):
        if mx.issubdtype(v.dtype, mx.floating):
            return v.dtype
    return mx.float32
