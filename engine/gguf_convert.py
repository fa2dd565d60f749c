"""Convert a llama-architecture GGUF (as `mx.load` reads it) into an mlx-lm model folder.

mx.load returns GGUF's Q4_0/Q4_1/Q8_0 tensors as MLX affine weight/scales/biases (group 32) and
the metadata (hyperparameters, vocabulary, merges, chat template) as Python values, so no GGUF
library is needed. Two things differ from a Hugging Face checkpoint: the tensor names, and the
row order of the Q and K projections, which llama.cpp's converter permutes (undone here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx

from engine.gguf_tokenizer import GGUFTokenizerSpec, write_tokenizer_files

GGUF_GROUP_SIZE = 32  # GGUF Q4_0/Q4_1/Q8_0 blocks hold 32 weights
SUPPORTED_QUANT_BITS = (4, 8)

Progress = Callable[[str, float], None]


class GGUFConvertError(ValueError):
    pass


# GGUF tensor names -> mlx-lm llama names (blk.N. prefix handled separately)
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


def convert_gguf(
    gguf: Path,
    out: Path,
    *,
    dtype: str = "float32",
    quantize_bits: int | None = None,
    progress: Progress | None = None,
) -> list[str]:
    """Convert a llama-architecture GGUF into an mlx-lm folder at `out` (which must exist).

    `dtype`: float type of the weights (of the scales when quantized). `quantize_bits` None:
    dequantize everything; 4: keep GGUF's Q4_0/Q4_1/Q8_0 blocks as they are (MLX affine, group
    32, lossless; the Q8_0 embedding stays 8-bit); 8: everything 8-bit. Returns the file names.
    """
    report = progress or (lambda message, fraction: None)
    report("Reading the embedded model", 0.0)
    tensors, meta = mx.load(str(gguf), return_metadata=True)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise GGUFConvertError(f"cannot convert GGUF architecture {arch!r} (only llama)")
    config = _llama_config(meta, dtype)
    tok_spec = GGUFTokenizerSpec.from_metadata(meta)

    weights, quant = _convert_weights(tensors, config, getattr(mx, dtype), quantize_bits, report)
    if quant is not None:
        config["quantization"] = quant
        config["quantization_config"] = quant
    if "lm_head.weight" not in weights:
        config["tie_word_embeddings"] = True

    report("Writing weights", 0.8)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    del weights

    report("Writing tokenizer", 0.93)
    files = ["model.safetensors", "config.json", "generation_config.json"]
    config["eos_token_id"] = tok_spec.eos_id
    config["bos_token_id"] = tok_spec.bos_id
    config["pad_token_id"] = tok_spec.pad_id
    _write_json(out / "config.json", config)
    _write_json(
        out / "generation_config.json",
        {
            "bos_token_id": tok_spec.bos_id,
            # <|im_end|> ends a turn; <|endoftext|> too: llama.cpp treats both as end of generation
            "eos_token_id": tok_spec.eog_ids,
            "pad_token_id": tok_spec.pad_id,
        },
    )
    files += write_tokenizer_files(
        tok_spec, out, model_max_length=config.get("max_position_embeddings")
    )
    return files


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _meta_int(meta: dict, key: str) -> int:
    return int(meta[key].item()) if hasattr(meta[key], "item") else int(meta[key])


def _meta_float(meta: dict, key: str) -> float:
    value = meta[key].item() if hasattr(meta[key], "item") else meta[key]
    # GGUF stores f32: 9.999999747e-06 means 1e-05
    return float(f"{float(value):.6g}")


def _llama_config(meta: dict, dtype: str) -> dict[str, Any]:
    hidden = _meta_int(meta, "llama.embedding_length")
    heads = _meta_int(meta, "llama.attention.head_count")
    head_dim = hidden // heads
    rope_dims = (
        _meta_int(meta, "llama.rope.dimension_count")
        if "llama.rope.dimension_count" in meta
        else head_dim
    )
    if rope_dims != head_dim:
        raise GGUFConvertError("partial rotary embeddings are not supported")
    vocab = (
        _meta_int(meta, "llama.vocab_size")
        if "llama.vocab_size" in meta
        else len(meta["tokenizer.ggml.tokens"])
    )
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": _meta_int(meta, "llama.feed_forward_length"),
        "num_hidden_layers": _meta_int(meta, "llama.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": _meta_int(meta, "llama.attention.head_count_kv"),
        "head_dim": head_dim,
        "rms_norm_eps": _meta_float(meta, "llama.attention.layer_norm_rms_epsilon"),
        "rope_theta": _meta_float(meta, "llama.rope.freq_base"),
        "rope_traditional": False,
        "max_position_embeddings": _meta_int(meta, "llama.context_length"),
        "vocab_size": vocab,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": dtype,
        "tandem_source": "GGUF " + str(meta.get("general.name", "")),
    }


def _mlx_name(gguf_name: str) -> tuple[str, str]:
    """'blk.3.attn_q.weight' -> ('model.layers.3.self_attn.q_proj', 'weight')."""
    base, _, suffix = gguf_name.rpartition(".")
    if base.startswith("blk."):
        _, idx, part = base.split(".", 2)
        if part not in _LAYER_NAMES:
            raise GGUFConvertError(f"unexpected GGUF tensor {gguf_name}")
        return f"model.layers.{idx}.{_LAYER_NAMES[part]}", suffix
    if base not in _TOP_NAMES:
        raise GGUFConvertError(f"unexpected GGUF tensor {gguf_name}")
    return _TOP_NAMES[base], suffix


def unpermute_rows(w: mx.array, n_head: int) -> mx.array:
    """Undo llama.cpp's converter permutation of Q/K projection rows.

    convert_hf_to_gguf.py stores rows (head, half, i) at (head, i, half) so that GGML's
    interleaved ("normal") RoPE works; mlx-lm's llama uses the half-split (NeoX) layout of the
    HF weights. Works on packed quantized rows, scales and biases alike: only rows move.
    """
    rows = w.shape[0]
    rest = w.shape[1:]
    return w.reshape(n_head, rows // n_head // 2, 2, *rest).swapaxes(1, 2).reshape(rows, *rest)


def _convert_weights(
    tensors: dict[str, mx.array],
    config: dict[str, Any],
    dtype: mx.Dtype,
    quantize_bits: int | None,
    report: Progress,
) -> tuple[dict[str, mx.array], dict[str, Any] | None]:
    groups: dict[str, dict[str, mx.array]] = {}
    for name, arr in tensors.items():
        module, suffix = _mlx_name(name)
        groups.setdefault(module, {})[suffix] = arr

    out: dict[str, mx.array] = {}
    quant: dict[str, Any] | None = None
    if quantize_bits:
        quant = {"group_size": GGUF_GROUP_SIZE, "bits": quantize_bits, "mode": "affine"}
    heads = {
        "self_attn.q_proj": config["num_attention_heads"],
        "self_attn.k_proj": config["num_key_value_heads"],
    }
    for n, (module, parts) in enumerate(sorted(groups.items())):
        n_head = next((h for key, h in heads.items() if module.endswith(key)), None)
        if n_head is not None:
            parts = {k: unpermute_rows(v, n_head) for k, v in parts.items()}
        if "scales" in parts:  # GGUF Q4_0/Q4_1/Q8_0: affine groups of 32
            new, bits = _convert_quantized(parts, dtype, quantize_bits)
            if quant is not None and bits != quant["bits"]:
                quant[module] = {"group_size": GGUF_GROUP_SIZE, "bits": bits}
        else:
            new = {suffix: arr.astype(dtype) for suffix, arr in parts.items()}
        mx.eval(list(new.values()))  # one module at a time bounds the peak memory
        out.update({f"{module}.{suffix}": arr for suffix, arr in new.items()})
        report("Converting weights", 0.05 + 0.75 * (n + 1) / len(groups))
    return out, quant


def _convert_quantized(
    parts: dict[str, mx.array], dtype: mx.Dtype, quantize_bits: int | None
) -> tuple[dict[str, mx.array], int]:
    """One GGUF-quantized module -> (weights, bits they are stored with; 0 when dequantized)."""
    w, scales, biases = parts["weight"], parts["scales"], parts["biases"]
    in_dims = scales.shape[-1] * GGUF_GROUP_SIZE
    bits = w.shape[-1] * 32 // in_dims
    if quantize_bits and (bits == quantize_bits or quantize_bits == 4):
        # keep the GGUF blocks as they are (lossless); so the Q8_0 embedding stays 8-bit at q4
        return {"weight": w, "scales": scales.astype(dtype), "biases": biases.astype(dtype)}, bits
    # dequantize in fp32 so fp16 scales do not round the products
    full = mx.dequantize(
        w,
        scales.astype(mx.float32),
        biases.astype(mx.float32),
        group_size=GGUF_GROUP_SIZE,
        bits=bits,
    )
    if not quantize_bits:
        return {"weight": full.astype(dtype)}, 0
    qw, qs, qb = mx.quantize(full, group_size=GGUF_GROUP_SIZE, bits=quantize_bits)
    return {"weight": qw, "scales": qs.astype(dtype), "biases": qb.astype(dtype)}, quantize_bits
