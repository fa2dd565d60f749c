"""Build a Hugging Face `tokenizers` tokenizer from a GGUF file's "gpt2" (byte-level BPE) metadata.

Only what the embedded default model needs: llama.cpp's "smollm" pre-tokenizer, which first
splits every digit off on its own and then applies the GPT-2 pattern. The result is written as
tokenizer.json + tokenizer_config.json, which `mlx_lm.load` (through transformers'
AutoTokenizer) reads without any download.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

DEFAULT_TOKENIZER_CLASS = "PreTrainedTokenizerFast"  # loads tokenizer.json as written, no rebuild
GGUF_TOKEN_TYPE_CONTROL = 3
GGUF_TOKEN_TYPE_USER_DEFINED = 4
# llama.cpp's pre-tokenizer names we know how to reproduce, mapped to our split regex (applied
# before the byte-level GPT-2 pattern). "smollm": digits one by one (llama-vocab.cpp).
SUPPORTED_PRE_TOKENIZERS = {"smollm": r"\p{N}"}


class GGUFTokenizerError(ValueError):
    pass


@dataclass
class GGUFTokenizerSpec:
    """The tokenizer part of a GGUF file's metadata."""

    tokens: list[str]
    merges: list[str]
    token_types: list[int]
    pre: str
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    chat_template: str | None
    add_bos: bool
    add_eos: bool

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> GGUFTokenizerSpec:
        model = meta.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise GGUFTokenizerError(f"unsupported GGUF tokenizer model {model!r} (need 'gpt2')")
        pre = str(meta.get("tokenizer.ggml.pre", "default"))
        if pre not in SUPPORTED_PRE_TOKENIZERS:
            raise GGUFTokenizerError(f"unsupported GGUF pre-tokenizer {pre!r}")
        return cls(
            tokens=list(meta["tokenizer.ggml.tokens"]),
            merges=list(meta["tokenizer.ggml.merges"]),
            token_types=[int(t) for t in _as_list(meta.get("tokenizer.ggml.token_type", []))],
            pre=pre,
            bos_id=_opt_int(meta.get("tokenizer.ggml.bos_token_id")),
            eos_id=_opt_int(meta.get("tokenizer.ggml.eos_token_id")),
            unk_id=_opt_int(meta.get("tokenizer.ggml.unknown_token_id")),
            pad_id=_opt_int(meta.get("tokenizer.ggml.padding_token_id")),
            chat_template=meta.get("tokenizer.chat_template"),
            add_bos=bool(_opt_int(meta.get("tokenizer.ggml.add_bos_token")) or 0),
            add_eos=bool(_opt_int(meta.get("tokenizer.ggml.add_eos_token")) or 0),
        )

    @property
    def control_ids(self) -> list[int]:
        return [i for i, t in enumerate(self.token_types) if t == GGUF_TOKEN_TYPE_CONTROL]

    @property
    def user_defined_ids(self) -> list[int]:
        return [i for i, t in enumerate(self.token_types) if t == GGUF_TOKEN_TYPE_USER_DEFINED]

    def token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.tokens[token_id]

    @property
    def eog_ids(self) -> list[int]:
        """End-of-generation ids: eos, plus the control tokens llama.cpp also treats as EOG."""
        ids = [] if self.eos_id is None else [self.eos_id]
        for name in ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
            if name in self.tokens:
                i = self.tokens.index(name)
                if i not in ids and i in self.control_ids:
                    ids.append(i)
        return ids


def _as_list(value: Any) -> list:
    # mx.load returns array metadata as mx.array; gguf-py returns lists
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    return int(value.item()) if hasattr(value, "item") else int(value)


def build_tokenizer(spec: GGUFTokenizerSpec) -> Tokenizer:
    """Byte-level BPE with the pre-tokenizer llama.cpp uses for this vocabulary."""
    vocab = {tok: i for i, tok in enumerate(spec.tokens)}
    if len(vocab) != len(spec.tokens):
        raise GGUFTokenizerError("GGUF vocabulary has duplicate tokens")
    merges = []
    for m in spec.merges:
        parts = m.split(" ")
        if len(parts) != 2:
            raise GGUFTokenizerError(f"malformed merge {m!r}")
        merges.append((parts[0], parts[1]))
    # llama.cpp's BPE only looks up a whole word in the vocabulary for llama3 (ignore_merges);
    # for "smollm" every word goes through the merges, as here.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SUPPORTED_PRE_TOKENIZERS[spec.pre]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    # Control tokens (<|im_start|> ...) are matched whole in the text, as llama.cpp does with
    # parse_special; they keep their GGUF ids because they are already in the vocabulary.
    tok.add_special_tokens(
        [AddedToken(spec.tokens[i], special=True, normalized=False) for i in spec.control_ids]
    )
    user = [
        AddedToken(spec.tokens[i], special=False, normalized=False) for i in spec.user_defined_ids
    ]
    if user:
        tok.add_tokens(user)
    return tok


def write_tokenizer_files(
    spec: GGUFTokenizerSpec, folder: Path, *, model_max_length: int | None = None
) -> list[str]:
    """Write tokenizer.json and tokenizer_config.json; returns the file names written."""
    tok = build_tokenizer(spec)
    tok.save(str(folder / "tokenizer.json"))
    added = {
        str(i): {
            "content": spec.tokens[i],
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "single_word": False,
            "special": True,
        }
        for i in spec.control_ids
    }
    config: dict[str, Any] = {
        "tokenizer_class": DEFAULT_TOKENIZER_CLASS,
        "add_bos_token": spec.add_bos,
        "add_eos_token": spec.add_eos,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,  # decode must give back the exact text
        "bos_token": spec.token(spec.bos_id),
        "eos_token": spec.token(spec.eos_id),
        "unk_token": spec.token(spec.unk_id),
        "pad_token": spec.token(spec.pad_id),
        "added_tokens_decoder": added,
    }
    if model_max_length:
        config["model_max_length"] = model_max_length
    if spec.chat_template:
        config["chat_template"] = spec.chat_template
    (folder / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    special_map = {
        k: v
        for k, v in (
            ("bos_token", config["bos_token"]),
            ("eos_token", config["eos_token"]),
            ("unk_token", config["unk_token"]),
            ("pad_token", config["pad_token"]),
        )
        if v is not None
    }
    (folder / "special_tokens_map.json").write_text(
        json.dumps(special_map, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
