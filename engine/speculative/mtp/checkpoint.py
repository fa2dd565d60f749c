"""Finding a checkpoint's MTP weights and reading them (mlx-lm's `sanitize` drops them, so they
are read from the safetensors files directly).

Layouts, by family (the original Hugging Face checkpoints):
- Qwen3.5/3.6 and Qwen3-Next: `mtp.fc`, `mtp.pre_fc_norm_embedding`, `mtp.pre_fc_norm_hidden`,
  `mtp.layers.0.*` (one full-attention decoder layer), `mtp.norm`; norms zero-centred (1 + w).
- DeepSeek-V3 and GLM-4.5+: decoder layer(s) `model.layers.{N}` for N from `num_hidden_layers`,
  `num_nextn_predict_layers` of them, each with `enorm`, `hnorm`, `eh_proj`,
  `shared_head.norm` (and copies of the embedding and head, not read).
- MiMo: `model.mtp_layers.{i}` with `token_layernorm`, `hidden_layernorm`, `input_proj`,
  `final_layernorm` beside a decoder layer's weights.
Each is renamed to one layout (engine/speculative/mtp/module.py): `norm_embed`, `norm_hidden`,
`proj`, `layer.*`, `norm`. Only the first MTP layer is read; k > 1 chains it.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

QWEN_FAMILIES = ("qwen3_next", "qwen3_5", "qwen3_5_moe")
DEEPSEEK_FAMILIES = ("deepseek_v3", "deepseek_v32", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa")
MIMO_FAMILIES = ("mimo",)
FAMILIES = QWEN_FAMILIES + DEEPSEEK_FAMILIES + MIMO_FAMILIES
MTP_FILE_GLOB = "*.safetensors"

_QWEN_NAMES = {
    "pre_fc_norm_embedding": "norm_embed",
    "pre_fc_norm_hidden": "norm_hidden",
    "fc": "proj",
    "norm": "norm",
}
_DEEPSEEK_NAMES = {"enorm": "norm_embed", "hnorm": "norm_hidden", "eh_proj": "proj"}
_MIMO_NAMES = {
    "token_layernorm": "norm_embed",
    "hidden_layernorm": "norm_hidden",
    "input_proj": "proj",
    "final_layernorm": "norm",
}
_EXPERT = re.compile(r"^(.*)\.experts\.(\d+)\.(\w+)\.(weight|scales|biases)$")


class MtpWeightsError(ValueError):
    """MTP weights that cannot be used; the message says why."""


@dataclass(frozen=True)
class MtpSource:
    """Where a model's MTP weights are: the files, and the key prefix of the first layer."""

    family: str
    prefix: str
    files: tuple[Path, ...]
    layers: int  # MTP layers the checkpoint has (only the first is used)


def family_of(config: dict[str, Any]) -> str:
    return str(config.get("model_type", ""))


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def safetensors_keys(path: Path) -> list[str]:
    """The tensor names in a safetensors file (its header only)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return [k for k in header if k != "__metadata__"]


def _prefixes(config: dict[str, Any]) -> list[tuple[str, int]]:
    """The first MTP layer's key prefix candidates, with how many layers the config names."""
    family = family_of(config)
    text = text_config(config)
    if family in QWEN_FAMILIES:
        n = int(text.get("mtp_num_hidden_layers") or 1)
        return [("mtp.", n), ("model.mtp.", n), ("language_model.mtp.", n)]
    if family in DEEPSEEK_FAMILIES:
        n = int(text.get("num_nextn_predict_layers") or 0)
        first = int(text.get("num_hidden_layers", 0))
        return [(f"model.layers.{first}.", n)] if n else []
    if family in MIMO_FAMILIES:
        n = int(text.get("num_nextn_predict_layers") or 1)
        return [("model.mtp_layers.0.", n)]
    return []


def find_mtp(folder: Path, config: dict[str, Any], weights: Path | None = None) -> MtpSource | None:
    """The MTP weights of the model in `folder` (or in `weights`, a file or folder that holds
    them apart from the model), or None when there are none."""
    candidates = _prefixes(config)
    if not candidates:
        return None
    where = Path(weights) if weights is not None else Path(folder)
    files = [where] if where.is_file() else sorted(where.glob(MTP_FILE_GLOB))
    found: list[Path] = []
    prefix = None
    layers = 0
    for path in files:
        try:
            keys = safetensors_keys(path)
        except (OSError, ValueError, struct.error):
            continue
        for p, n in candidates:
            if any(k.startswith(p) for k in keys):
                prefix, layers = p, n
                found.append(path)
                break
    if prefix is None:
        return None
    return MtpSource(family_of(config), prefix, tuple(found), max(layers, 1))


def folder_has_mtp(folder: Path) -> bool:
    """Whether a model folder's checkpoint carries MTP layers (config and headers only)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
        return isinstance(config, dict) and find_mtp(Path(folder), config) is not None
    except (OSError, ValueError):
        return False


def mtp_weights_problem(folder: Path, weights: Path) -> str | None:
    """Why `weights` (a safetensors file or a folder of them) cannot give the model in `folder`
    its MTP layers, or None when they hold its family's MTP weights (headers only)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"the model's config.json cannot be read: {exc}"
    family = family_of(config)
    if not _prefixes(config):
        return f"no MTP layers are known for {family or 'this'} models"
    if not Path(weights).exists():
        return f"{weights} does not exist"
    if find_mtp(Path(folder), config, Path(weights)) is None:
        return f"{weights} holds no MTP weights of a {family} model"
    return None


def read_mtp_weights(source: MtpSource, target_model: Any) -> dict[str, mx.array]:
    """The first MTP layer's weights, renamed to engine/speculative/mtp/module.py's layout
    (experts stacked as mlx-lm's `switch_mlp`, Qwen's zero-centred norms made plain). The
    DeepSeek family's decoder-layer weights go through the target's own `sanitize` as if they
    were its last layer's (fp8 dequantised, `kv_b_proj` split for MLA, experts stacked)."""
    raw: dict[str, mx.array] = {}
    for path in source.files:
        for key, value in mx.load(str(path)).items():
            if key.startswith(source.prefix):
                raw[key[len(source.prefix) :]] = value
    if not raw:
        raise MtpWeightsError(f"no weights under {source.prefix!r} in {source.files[0]}")
    out: dict[str, mx.array] = {}
    for key, value in raw.items():
        name = _rename(source.family, key)
        if name is not None:
            out[name] = value
    if source.family in DEEPSEEK_FAMILIES:
        out = _through_sanitize(out, target_model)
    out = _stack_experts(out)
    if source.family in QWEN_FAMILIES:
        for key, value in out.items():
            plain = key.split(".")[0] in ("norm_embed", "norm_hidden", "norm")
            if value.ndim == 1 and (plain or key.endswith("norm.weight")):
                out[key] = value + 1.0
    return out


def _through_sanitize(weights: dict[str, mx.array], target_model: Any) -> dict[str, mx.array]:
    last = len(target_model.layers) - 1
    inner = f"model.layers.{last}."
    layer = {inner + k[len("layer.") :]: v for k, v in weights.items() if k.startswith("layer.")}
    rest = {k: v for k, v in weights.items() if not k.startswith("layer.")}
    cleaned = target_model.sanitize(dict(layer))
    rest.update({"layer." + k[len(inner) :]: v for k, v in cleaned.items() if k.startswith(inner)})
    return rest


def _rename(family: str, key: str) -> str | None:
    head, _, rest = key.partition(".")
    if family in QWEN_FAMILIES:
        if head in _QWEN_NAMES:
            return f"{_QWEN_NAMES[head]}.{rest}"
        if key.startswith("layers.0."):
            return "layer." + key[len("layers.0.") :]
        return None  # further layers (only the first is used)
    if family in DEEPSEEK_FAMILIES:
        if head in _DEEPSEEK_NAMES:
            return f"{_DEEPSEEK_NAMES[head]}.{rest}"
        if key.startswith("shared_head.norm."):
            return "norm." + key[len("shared_head.norm.") :]
        if key.startswith(("shared_head.head.", "embed_tokens.")):
            return None  # copies of the target's own head and embedding
        return "layer." + key
    if head in _MIMO_NAMES:
        return f"{_MIMO_NAMES[head]}.{rest}"
    return "layer." + key


def _stack_experts(weights: dict[str, mx.array]) -> dict[str, mx.array]:
    """Per-expert weights (`...experts.{e}.gate_proj.weight`) as mlx-lm's stacked
    `...switch_mlp.gate_proj.weight`."""
    groups: dict[str, dict[int, mx.array]] = {}
    out = {}
    for key, value in weights.items():
        m = _EXPERT.match(key)
        if m is None:
            out[key] = value
            continue
        name = f"{m.group(1)}.switch_mlp.{m.group(3)}.{m.group(4)}"
        groups.setdefault(name, {})[int(m.group(2))] = value
    for name, experts in groups.items():
        out[name] = mx.stack([experts[e] for e in sorted(experts)])
    return out
