"""Tiny random models of each MTP family with random MTP weights saved beside them in the
family's own checkpoint layout (`mtp.*`; extra decoder layers after `num_hidden_layers`;
`model.mtp_layers.*`), as the original checkpoints carry them: mlx-lm loads the folder and its
`sanitize` drops the MTP keys, as it does for the real checkpoints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.utils import save_config, save_model

from engine.bench.random_model import predict_exactly, silence_blocks
from engine.speculative.mtp.checkpoint import DEEPSEEK_FAMILIES, MIMO_FAMILIES, QWEN_FAMILIES
from engine.speculative.mtp.module import build_mtp
from tests.architectures.build import build_model, liven
from tests.architectures.catalog import CATALOG
from tests.architectures.tokenizer import tiny_tokenizer_dir

MTP_FAMILIES = ("qwen3_next", "qwen3_5", "deepseek_v3", "glm4_moe", "mimo")
MTP_FILE = "model-mtp.safetensors"  # matches mlx-lm's model*.safetensors: it loads and drops it

_QWEN = {"norm_embed": "pre_fc_norm_embedding", "norm_hidden": "pre_fc_norm_hidden", "fc": "fc"}
_QWEN.update({"proj": "fc", "norm": "norm"})
_DEEPSEEK = {"norm_embed": "enorm", "norm_hidden": "hnorm", "proj": "eh_proj"}
_DEEPSEEK["norm"] = "shared_head.norm"
_MIMO = {
    "norm_embed": "token_layernorm",
    "norm_hidden": "hidden_layernorm",
    "proj": "input_proj",
    "norm": "final_layernorm",
}


def arch(family: str):
    base = next(a for a in CATALOG if a.name == family)
    config = dict(base.config)
    if family in QWEN_FAMILIES:
        key = "text_config" if "text_config" in config else None
        if key:
            config[key] = {**config[key], "mtp_num_hidden_layers": 1}
        else:
            config["mtp_num_hidden_layers"] = 1
    else:
        config["num_nextn_predict_layers"] = 1
    return dataclasses.replace(base, config=config)


def checkpoint_key(family: str, name: str, prefix: str) -> str:
    """Our layout's key (module.py) as the family's checkpoint spells it."""
    head, _, rest = name.partition(".")
    names = (
        _QWEN if family in QWEN_FAMILIES else _DEEPSEEK if family in DEEPSEEK_FAMILIES else _MIMO
    )
    if head == "layer":
        inner = "layers.0." + rest if family in QWEN_FAMILIES else rest
        return prefix + inner
    return f"{prefix}{names[head]}.{rest}"


def make_mtp_folder(
    family: str,
    path: Path,
    *,
    seed: int = 0,
    separate: Path | None = None,
    predictable: bool = False,
) -> Path:
    """A tiny `family` model folder with random MTP weights (in `separate` instead, a file,
    when given: the folder then has none).

    `predictable`: every block of the target adds nothing, so its next token is a function of
    the current one only (t -> G(t)), and the MTP layer passes the next token's embedding
    through to the same final norm and head: it predicts G(t_{p+1}) = t_{p+2}, the target's
    choice. Its drafts are then accepted (nearly always: two norms in a row differ by eps)."""
    spec = arch(family)
    model, config = build_model(spec, seed=seed)
    if predictable:
        silence_blocks(model)
    path.mkdir(parents=True, exist_ok=True)
    save_model(path, model)
    save_config(config, path / "config.json")
    for f in tiny_tokenizer_dir().iterdir():
        (path / f.name).write_bytes(f.read_bytes())
    mx.random.seed(seed + 1)
    mtp = build_mtp(model, family)
    liven(mtp)
    if predictable:
        predict_exactly(model, mtp)
    mx.eval(mtp.parameters())
    text = config.get("text_config", config)
    if family in QWEN_FAMILIES:
        prefix = "mtp."
    elif family in DEEPSEEK_FAMILIES:
        prefix = f"model.layers.{text['num_hidden_layers']}."
    else:
        assert family in MIMO_FAMILIES
        prefix = "model.mtp_layers.0."
    weights = {}
    params = dict(tree_flatten(mtp.parameters()))
    embed_q = next((k for k in params if k.endswith("self_attn.embed_q.weight")), None)
    if embed_q is not None:  # MLA: the checkpoint holds kv_b_proj, which sanitize splits
        wk = params.pop(embed_q)
        wv = params.pop(embed_q.replace("embed_q", "unembed_out"))
        v = mx.concatenate([wk.swapaxes(-1, -2), wv], axis=1)
        kv_b = embed_q.replace("embed_q", "kv_b_proj")
        params[kv_b] = v.reshape(-1, v.shape[-1])
    for name, value in params.items():
        if (
            family in QWEN_FAMILIES
            and name.endswith("norm.weight")
            or (family in QWEN_FAMILIES and name.split(".")[0] in ("norm_embed", "norm_hidden"))
        ):
            value = value - 1.0  # zero-centred in the checkpoint
        if ".switch_mlp." in name:  # the checkpoint keeps experts apart
            before, _, after = name.partition(".switch_mlp.")
            for e in range(value.shape[0]):
                weights[checkpoint_key(family, f"{before}.experts.{e}.{after}", prefix)] = value[e]
            continue
        weights[checkpoint_key(family, name, prefix)] = value
    mx.save_safetensors(str(separate or path / MTP_FILE), weights)
    # the checkpoint's config names its MTP layers (mlx-lm ignores the key)
    config_file = path / "config.json"
    saved = json.loads(config_file.read_text())
    target = saved.get("text_config", saved)
    target.update({k: v for k, v in text.items() if "mtp" in k or "nextn" in k})
    config_file.write_text(json.dumps(saved, indent=2))
    return path
