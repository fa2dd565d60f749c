"""Finding, checking and loading mlx-lm model folders: the embedded default model, local folders
and repos already in the Hugging Face cache. Tandem never downloads a model.

All loading happens on the engine's MLX thread; nothing here starts threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine import default_model
from engine.cache.row_groups import install as install_row_groups
from engine.compiled_mlp import compile_mlps
from engine.engine_reports import ModelInfo
from engine.fused_projections import fuse_projections
from engine.kernels.depthwise_conv_cuda import install as install_conv_kernel
from engine.kernels.gated_delta_cuda import install as install_gated_delta_kernel
from engine.kernels.rope_cuda_guard import install_for as install_rope_guard
from engine.kernels.skinny_matmul_cuda import install as install_skinny_matmul
from engine.kernels.verify_attention_cuda import install as install_verify_attention

# Why: huggingface_hub and transformers read this when first imported (mlx_lm is imported lazily,
# below); Tandem must never reach a hub, even by accident.
os.environ["HF_HUB_OFFLINE"] = "1"

DEFAULT_SPEC = "default"
DEFAULT_WEIGHT_GLOB = "model*.safetensors"  # what mlx_lm.utils.load_model reads
DEFAULT_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json")
DEFAULT_CONTEXT_KEYS = ("max_position_embeddings", "max_sequence_length", "n_positions")
DEFAULT_LOAD_SHARE = 0.8  # share of the progress bar the default model's conversion takes
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

Progress = Callable[[str, float], None]


class ModelLoadError(Exception):
    """A model could not be found, checked or loaded; the message is meant for the user."""


@dataclass
class LoadedModel:
    model: nn.Module
    tokenizer: Any  # mlx_lm.tokenizer_utils.TokenizerWrapper
    path: Path
    info: ModelInfo
    config: dict[str, Any]
    weights_id: str | None = None  # what the weights are when no file holds them (random models)
    mtp: Any = None  # a ready MTP layer when no file holds it (random models with "-mtp")


# ---------------------------------------------------------------------------- resolving


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment each time (tests move it)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hf_snapshot(repo_id: str, cache: Path) -> Path | None:
    """The snapshot folder of a cached repo (refs/main first, else the newest), or None."""
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        snap = snapshots / ref.read_text(encoding="utf-8").strip()
        if snap.is_dir():
            return snap
    candidates = [p for p in snapshots.iterdir() if p.is_dir()]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None


RANDOM_SPEC_PREFIX = "random:"  # benchmarks: random weights of a preset size


def is_default_spec(spec: str | None) -> bool:
    return spec is None or spec.strip() in ("", DEFAULT_SPEC)


def resolve_model(
    spec: str | None,
    *,
    progress: Progress | None = None,
    dtype: str | None = None,
    quantize_bits: int | None = None,
) -> Path:
    """A model folder for `spec`: None/"default" (the embedded model, converted on first use),
    a local folder, or a Hugging Face repo id already in the local HF cache. Checks the folder.

    `dtype` (None: fp32 on the CPU, float16 on a GPU) and `quantize_bits` only choose the
    default model's converted form.
    """
    if is_default_spec(spec):
        try:
            path = default_model.ensure_default_model(
                dtype=dtype, quantize_bits=quantize_bits, progress=progress
            )
        except default_model.DefaultModelError as exc:
            raise ModelLoadError(str(exc)) from exc
        except OSError as exc:  # e.g. a full disk or an unwritable cache folder
            raise ModelLoadError(f"Could not prepare the default model: {exc}") from exc
        validate_model_dir(path)
        return path

    assert spec is not None
    text = spec.strip()
    path = Path(text).expanduser()
    if path.exists():
        validate_model_dir(path)
        return path.resolve()
    looks_like_path = text.startswith((".", "/", "~", "\\")) or os.sep in text.replace("/", "", 1)
    if not looks_like_path and _REPO_ID.match(text):
        cache = hf_cache_dir()
        snap = hf_snapshot(text, cache)
        if snap is None:
            raise ModelLoadError(
                f"{text} is not downloaded: it is neither a local folder nor in the Hugging Face "
                f"cache ({cache}). Tandem never downloads models; download it yourself "
                f"(e.g. `hf download {text}`) or choose a local folder."
            )
        validate_model_dir(snap, name=text)
        return snap
    raise ModelLoadError(f"Model path does not exist: {path}")


def validate_model_dir(path: Path, *, name: str | None = None) -> dict[str, Any]:
    """Check that `path` is an mlx-lm loadable folder; returns its config. Raises ModelLoadError."""
    label = name or str(path)
    if not path.exists():
        raise ModelLoadError(f"Model path does not exist: {path}")
    if not path.is_dir():
        raise ModelLoadError(f"{label} is not a folder: choose an MLX model folder")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{label} is not an MLX model folder: config.json is missing")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{label}: config.json cannot be read: {exc}") from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"{label}: config.json does not hold an object")

    model_type = config.get("model_type")
    if not model_type:
        raise ModelLoadError(f"{label}: config.json has no model_type")
    if config.get("model_file"):
        raise ModelLoadError(f"{label} needs custom model code ({config['model_file']}): not run")
    _check_supported(config, label)

    weights = sorted(p for p in path.glob(DEFAULT_WEIGHT_GLOB) if p.is_file())
    if not weights:
        others = sorted(
            p.name
            for p in path.iterdir()
            if p.suffix in (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".npz")
        )
        hint = f" (found {', '.join(others[:4])}; convert with `mlx_lm.convert`)" if others else ""
        raise ModelLoadError(
            f"{label} has no weights: no {DEFAULT_WEIGHT_GLOB} file is in the folder{hint}"
        )
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError) as exc:
            raise ModelLoadError(f"{label}: model.safetensors.index.json is broken: {exc}") from exc
        missing = sorted(s for s in shards if not (path / s).is_file())
        if missing:
            raise ModelLoadError(
                f"{label} is incomplete: weight files missing: {', '.join(missing)}"
            )

    if not _has_tokenizer(path):
        raise ModelLoadError(
            f"{label}: tokenizer files are missing (need tokenizer.json, tokenizer.model or "
            "vocab.json with tokenizer_config.json)"
        )
    return config


def _check_supported(config: dict[str, Any], label: str) -> None:
    from engine.cache.mlx_lm_private import model_classes  # mlx-lm's own lookup

    try:
        model_classes(config)
    except (ValueError, ImportError) as exc:
        raise ModelLoadError(
            f"{label}: model type {config.get('model_type')!r} is not supported by mlx-lm"
        ) from exc


def _has_tokenizer(path: Path) -> bool:
    if any((path / f).is_file() for f in DEFAULT_TOKENIZER_FILES):
        return True
    return any(path.glob("*.tiktoken"))


# ---------------------------------------------------------------------------- loading


@dataclass
class OpenedModel:
    """A model built with lazy weights (nothing read but the weight files' headers): what
    `finish` needs once its weights are evaluated and its tokenizer is loaded."""

    model: nn.Module
    name: str
    tokenizer_dir: Path
    eos_token_ids: Any
    finish: Callable[[nn.Module, Any], LoadedModel]  # (model, tokenizer) -> LoadedModel

    @property
    def weights(self) -> list[mx.array]:
        from mlx.utils import tree_flatten

        return [v for _, v in tree_flatten(self.model.parameters())]


def open_model(
    spec: str | None,
    *,
    progress: Progress | None = None,
    dtype: str | None = None,
    quantize_bits: int | None = None,
) -> OpenedModel:
    """Resolve and check a model and build it with lazy weights (mlx-lm's `lazy=True`): fast,
    and no weight memory yet. A "random:" spec gives a random-weight benchmark model."""
    install_gated_delta_kernel()  # CUDA only: hybrid models' recurrence as one kernel per layer
    install_conv_kernel()  # CUDA only: their short depthwise convolutions without cuDNN
    install_row_groups()  # short rows beside long ones: their own keys (innermost, so first)
    install_verify_attention()  # CUDA only: a verify forward's masked attention without cuDNN
    install_skinny_matmul()  # CUDA only: matmuls of 2-16 token rows without cuBLASLt
    if spec is not None and spec.startswith(RANDOM_SPEC_PREFIX):
        from engine.bench.random_model import open_random

        opened = open_random(spec)
        install_rope_guard(opened.model)
        fuse_projections(opened.model)
        compile_mlps(opened.model)
        return opened
    report = progress or (lambda message, fraction: None)
    is_default = is_default_spec(spec)

    def conversion_progress(message: str, fraction: float) -> None:
        report(message, DEFAULT_LOAD_SHARE * fraction)

    path = resolve_model(
        spec,
        progress=conversion_progress if is_default else None,
        dtype=dtype,
        quantize_bits=quantize_bits,
    )
    from mlx_lm.utils import load_model as mlx_load_model

    try:
        model, config = mlx_load_model(path, lazy=True)
    except Exception as exc:  # mlx-lm raises many kinds; the user needs one
        raise ModelLoadError(f"Could not load {spec or DEFAULT_SPEC} ({path}): {exc}") from exc
    install_rope_guard(model)  # CUDA only: RoPE calls MLX would launch with too many threads
    fuse_projections(model)  # q/k/v and gate/up as one matmul each: fewer launches, same results
    compile_mlps(model)  # CUDA (opt-in elsewhere): few-row MLP calls traced once, replayed
    name = model_name(spec, path)

    def finish(model: nn.Module, tokenizer: Any) -> LoadedModel:
        info = model_info(model, tokenizer, config, name=name, path=path)
        return LoadedModel(model=model, tokenizer=tokenizer, path=path, info=info, config=config)

    return OpenedModel(model, name, path, config.get("eos_token_id"), finish)


def load_tokenizer(opened: OpenedModel) -> Any:
    """The model's tokenizer (no MLX: may run on any thread)."""
    from mlx_lm.utils import load_tokenizer as mlx_load_tokenizer

    try:
        return mlx_load_tokenizer(opened.tokenizer_dir, eos_token_ids=opened.eos_token_ids)
    except Exception as exc:  # transformers raises many kinds; the user needs one
        raise ModelLoadError(
            f"Could not load the tokenizer of {opened.name} ({opened.tokenizer_dir}): {exc}"
        ) from exc


def load_model(
    spec: str | None,
    *,
    progress: Progress | None = None,
    dtype: str | None = None,
    quantize_bits: int | None = None,
) -> LoadedModel:
    """Resolve, check and load a model with mlx-lm (quantized folders included), all at once;
    the engine loads in slices instead (engine/hosting/model_loader.py)."""
    report = progress or (lambda message, fraction: None)
    opened = open_model(spec, progress=progress, dtype=dtype, quantize_bits=quantize_bits)
    report("Loading model", DEFAULT_LOAD_SHARE)
    try:
        mx.eval(opened.weights)
    except Exception as exc:  # e.g. a truncated weight file
        raise ModelLoadError(f"Could not load {opened.name}: {exc}") from exc
    loaded = opened.finish(opened.model, load_tokenizer(opened))
    report("Model ready", 1.0)
    return loaded


def model_name(spec: str | None, path: Path) -> str:
    """What the user calls a model: the default model's name, a repo id, or the folder's name."""
    if is_default_spec(spec):
        return default_model.DEFAULT_MODEL_NAME
    assert spec is not None
    if path.parent.name == "snapshots" and not Path(spec).expanduser().exists():
        return spec.strip()
    return path.name


def model_info(
    model: nn.Module, tokenizer: Any, config: dict[str, Any], *, name: str, path: Path
) -> ModelInfo:
    from mlx.utils import tree_flatten
    from mlx_lm.models.cache import RotatingKVCache
    from mlx_lm.utils import get_total_parameters

    text_config = config.get("text_config") or {}

    def setting(key: str) -> Any:
        return config.get(key, text_config.get(key))

    params = tree_flatten(model.parameters())
    n_bytes = sum(v.nbytes for _, v in params)
    floats: dict[str, int] = {}
    for _, v in params:
        if mx.issubdtype(v.dtype, mx.floating):
            key = str(v.dtype).removeprefix("mlx.core.")
            floats[key] = floats.get(key, 0) + v.nbytes
    dtype = max(floats, key=floats.get) if floats else "unknown"
    quant = config.get("quantization")
    if isinstance(quant, dict) and quant.get("bits"):
        dtype = f"{quant['bits']}-bit {quant.get('mode', 'affine')} ({dtype})"

    sliding_window = None
    if hasattr(model, "make_cache"):
        rotating = [c for c in model.make_cache() if isinstance(c, RotatingKVCache)]
        if rotating:
            sliding_window = setting("sliding_window") or rotating[0].max_size

    vocab_size = setting("vocab_size") or len(tokenizer.get_vocab())
    from engine.speculative.mtp.checkpoint import find_mtp

    try:  # the safetensors headers only; the layers load with the engine (EngineCore)
        has_mtp = find_mtp(path, config) is not None
    except OSError:
        has_mtp = False
    return ModelInfo(
        name=name,
        path=str(path),
        architecture=str(config.get("model_type")),
        parameters=int(get_total_parameters(model)),
        bytes=int(n_bytes),
        vocab_size=int(vocab_size),
        context_length=next((int(setting(k)) for k in DEFAULT_CONTEXT_KEYS if setting(k)), None),
        dtype=dtype,
        sliding_window=sliding_window,
        mtp=has_mtp,
    )


def vocab_fingerprint(tokenizer: Any) -> str:
    """A hash of the token -> id mapping (added tokens included)."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_draft_compatible(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise ModelLoadError unless the draft shares the target's vocabulary (ids mean the same)."""
    names = f"draft {draft.info.name} and target {target.info.name}"
    if target.info.vocab_size != draft.info.vocab_size:
        raise ModelLoadError(
            f"The {names} have different vocabularies: {draft.info.vocab_size} vs "
            f"{target.info.vocab_size} tokens"
        )
    if vocab_fingerprint(target.tokenizer) != vocab_fingerprint(draft.tokenizer):
        raise ModelLoadError(f"The {names} have different tokenizers (token ids differ)")
