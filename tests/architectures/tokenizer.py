"""The matrix's tokenizer: the default model's BPE tokenizer cut to its first 1024 tokens.

The special tokens, the merges that make the kept tokens, the pre-tokenizer, the chat template and
EOS stay as they are, so every id means what it means to the default model; loading it takes
milliseconds instead of a second, which matters over hundreds of model folders.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

TINY_VOCAB = 1024
COPIED = ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


@cache
def tiny_tokenizer_dir() -> Path:
    """A folder holding the cut tokenizer's files (made once per process)."""
    from engine.default_model import ensure_default_model

    src = ensure_default_model()
    data = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    model = data["model"]
    vocab = {token: i for token, i in model["vocab"].items() if i < TINY_VOCAB}
    model["vocab"] = vocab
    model["merges"] = [m for m in model["merges"] if m[0] + m[1] in vocab]
    data["added_tokens"] = [t for t in data["added_tokens"] if t["id"] < TINY_VOCAB]
    out = Path(tempfile.mkdtemp(prefix="tandem-tiny-tokenizer-"))
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for name in COPIED:
        if (src / name).is_file():
            shutil.copy2(src / name, out / name)
    return out
