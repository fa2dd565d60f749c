"""The EAGLE-style draft head: one llama decoder layer over fc(concat(the target's last hidden
state at position p, the embedding of token p + 1)), predicting the hidden state at p + 1 and,
through the target's own (frozen) LM head restricted to a draft vocabulary, token p + 2.

The head's files: `<name>.safetensors` (float16 weights), `<name>.json` (its config, with the
weights' sha256 checked at load), trained by `python -m engine.train_draft`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama
from mlx_lm.models.base import create_attention_mask

DEFAULT_SAVE_DTYPE = mx.float16
FORMAT_VERSION = 1


class EagleHeadError(RuntimeError):
    """The head's files are missing, corrupt or do not fit the model they are used with."""


@dataclass(frozen=True)
class HeadConfig:
    """Shape of a head and the target it was trained for."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    vocab_size: int  # the target's
    draft_vocab_size: int
    target: str = ""
    weights_sha256: str = ""
    format_version: int = FORMAT_VERSION

    @classmethod
    def for_target(cls, args: Any, *, draft_vocab_size: int, target: str) -> HeadConfig:
        """The head shape that fits a llama target's `ModelArgs`."""
        return cls(
            hidden_size=args.hidden_size,
            intermediate_size=args.intermediate_size,
            num_attention_heads=args.num_attention_heads,
            num_key_value_heads=args.num_key_value_heads,
            rms_norm_eps=args.rms_norm_eps,
            rope_theta=args.rope_theta,
            max_position_embeddings=args.max_position_embeddings or 8192,
            vocab_size=args.vocab_size,
            draft_vocab_size=draft_vocab_size,
            target=target,
        )

    def layer_args(self) -> llama.ModelArgs:
        return llama.ModelArgs(
            model_type="llama",
            hidden_size=self.hidden_size,
            num_hidden_layers=1,
            intermediate_size=self.intermediate_size,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            rms_norm_eps=self.rms_norm_eps,
            vocab_size=self.vocab_size,
            rope_theta=self.rope_theta,
            max_position_embeddings=self.max_position_embeddings,
        )


class EagleHead(nn.Module):
    """fc + one llama decoder layer + a norm; `draft_ids` (not trained) is its vocabulary."""

    def __init__(self, config: HeadConfig):
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.layer = llama.TransformerBlock(config.layer_args())
        self.norm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.draft_ids = mx.arange(config.draft_vocab_size, dtype=mx.int32)
        self.freeze(keys=["draft_ids"], recurse=False)

    def fuse(self, hidden: mx.array, embeds: mx.array) -> mx.array:
        return self.fc(mx.concatenate([hidden, embeds.astype(hidden.dtype)], axis=-1))

    def __call__(
        self, embeds: mx.array, hidden: mx.array, cache: Any = None
    ) -> tuple[mx.array, mx.array]:
        """(predicted next hidden states [B, L, d], the same as what a chained step reads), for
        inputs [B, L, d] each; the shape of MTP's module, so both draft the same way."""
        x = self.fuse(hidden, embeds)
        mask = create_attention_mask(x, cache, return_array=True)
        out = self.norm(self.layer(x, mask, cache))
        return out, out


def target_parts(model: Any) -> tuple[Any, Any]:
    """The target's embedding module and its LM head weight (rows = vocabulary), dequantized."""
    inner = model.model
    embed = inner.embed_tokens
    head = embed if getattr(model.args, "tie_word_embeddings", True) else model.lm_head
    return embed, head


def head_rows(head_module: Any, ids: mx.array) -> mx.array:
    """Rows `ids` of an embedding or LM head (plain or quantized), as a float matrix."""
    if hasattr(head_module, "scales"):
        return mx.dequantize(
            head_module.weight[ids],
            head_module.scales[ids],
            head_module.biases[ids] if getattr(head_module, "biases", None) is not None else None,
            group_size=head_module.group_size,
            bits=head_module.bits,
        )
    return head_module.weight[ids]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_head(head: EagleHead, folder: Path, name: str) -> Path:
    """Write `<name>.safetensors` (float16) then `<name>.json` with its sha256; returns the json."""
    folder.mkdir(parents=True, exist_ok=True)
    weights_path = folder / f"{name}.safetensors"
    weights = {
        key: value if key == "draft_ids" else value.astype(DEFAULT_SAVE_DTYPE)
        for key, value in nn.utils.tree_flatten(head.parameters())
    }
    mx.save_safetensors(str(weights_path), weights, metadata={"format": "mlx"})
    config = {**asdict(head.config), "weights_sha256": file_sha256(weights_path)}
    config_path = folder / f"{name}.json"
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config_path


def load_head(config_path: Path, *, dtype: mx.Dtype = mx.float32) -> EagleHead:
    """Load a head, checking its sha256; EagleHeadError with a clear message otherwise."""
    try:
        raw = json.loads(Path(config_path).read_text(encoding="utf-8"))
        known = {f.name for f in fields(HeadConfig)}
        config = HeadConfig(**{k: v for k, v in raw.items() if k in known})
    except (OSError, ValueError, TypeError) as exc:
        raise EagleHeadError(f"cannot read the draft head's config {config_path}: {exc}") from exc
    if config.format_version != FORMAT_VERSION:
        raise EagleHeadError(f"draft head {config_path} has format {config.format_version}")
    weights_path = Path(config_path).with_suffix(".safetensors")
    if not weights_path.is_file():
        raise EagleHeadError(f"the draft head's weights are missing: {weights_path}")
    actual = file_sha256(weights_path)
    if actual != config.weights_sha256:
        raise EagleHeadError(
            f"the draft head's weights {weights_path} are corrupt (sha256 {actual[:12]}…, "
            f"expected {config.weights_sha256[:12]}…); reinstall Tandem to restore them"
        )
    head = EagleHead(config)
    try:
        weights = mx.load(str(weights_path))
        head.load_weights(list(weights.items()), strict=True)
    except (ValueError, RuntimeError) as exc:
        raise EagleHeadError(f"cannot load the draft head {weights_path}: {exc}") from exc
    head.set_dtype(dtype, predicate=lambda t: mx.issubdtype(t, mx.floating))
    head.draft_ids = head.draft_ids.astype(mx.int32)
    head.freeze()
    mx.eval(head.parameters())
    return head
