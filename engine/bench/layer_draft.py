"""python -m engine.bench.layer_draft: a draft model cut from a target's first layers.

No registry these machines reach carries a draft/target pair with one tokenizer, so the
benchmark makes one from the target itself: its first and last decoder layers, the middle ones
skipped, with its own embeddings, final norm and output head (self-speculative layer skipping,
as in Draft & Verify). It is a real mlx-lm model folder with the target's tokenizer, so it
loads anywhere a draft does, mlx-lm's own speculative decoding included. Nothing was trained
for the skip, so it is a weak but honest draft.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import mlx.core as mx

import engine  # noqa: F401  (OpenBLAS before MLX)
from engine.bench.cli_args import non_negative_int

DEFAULT_FIRST = 8
DEFAULT_LAST = 4
LAYER_KEY = re.compile(r"^model\.layers\.(\d+)\.")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


def make_layer_draft(
    target: Path, out: Path, *, first: int = DEFAULT_FIRST, last: int = DEFAULT_LAST
) -> Path:
    """Write the first `first` and the last `last` decoder layers of the model folder `target`
    to `out`, as a model of first + last layers."""
    config = json.loads((target / "config.json").read_text())
    total = config["num_hidden_layers"]
    kept = list(range(first)) + list(range(total - last, total))
    if first < 0 or last < 0 or not 1 <= len(kept) < total or len(set(kept)) != len(kept):
        raise ValueError(f"a draft needs 1 to {total - 1} distinct layers of the target's {total}")
    renumber = {old: new for new, old in enumerate(kept)}
    weights: dict[str, mx.array] = {}
    for shard in sorted(target.glob("*.safetensors")):
        for key, value in mx.load(str(shard)).items():
            match = LAYER_KEY.match(key)
            if match is None:
                weights[key] = value
            elif int(match.group(1)) in renumber:
                new = renumber[int(match.group(1))]
                weights[f"model.layers.{new}." + key[match.end() :]] = value
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    config["num_hidden_layers"] = len(kept)
    config["tandem_source"] = f"layers {kept} of the {total} of {target.name}"
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in TOKENIZER_FILES:
        if (target / name).exists():
            shutil.copy(target / name, out / name)
    return out


def main(argv: list[str] | None = None) -> None:
    from engine.default_model import ensure_default_model

    p = argparse.ArgumentParser(prog="python -m engine.bench.layer_draft", description=__doc__)
    p.add_argument("--target", type=Path, default=None, help="model folder (default model)")
    p.add_argument(
        "--first", type=non_negative_int, default=DEFAULT_FIRST, help="first layers kept"
    )
    p.add_argument("--last", type=non_negative_int, default=DEFAULT_LAST, help="last layers kept")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.first + args.last < 1:
        p.error("--first and --last keep no layer: together they must be >= 1")
    target = args.target or ensure_default_model()
    # the target's own layer count bounds them too: read from its config, before any weight
    try:
        total = int(json.loads((target / "config.json").read_text())["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        p.error(f"--target {target} is not a model folder with a layer count: {exc}")
    if args.first + args.last >= total:
        p.error(
            f"--first {args.first} and --last {args.last} keep every layer of the target's "
            f"{total}: together they must be <= {total - 1}"
        )
    print(make_layer_draft(target, args.out, first=args.first, last=args.last))


if __name__ == "__main__":
    from engine.bench.process_exit import run_and_exit

    run_and_exit(main)
