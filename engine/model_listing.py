"""The models on this machine that Tandem can load: the embedded default model, repos in the
Hugging Face cache and folders the user added. Nothing is downloaded or converted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine import default_model
from engine.models import (
    DEFAULT_SPEC,
    ModelLoadError,
    hf_cache_dir,
    hf_snapshot,
    validate_model_dir,
)
from engine.speculative.eagle_drafter import shipped_head_label
from engine.speculative.mtp.checkpoint import folder_has_mtp


@dataclass
class ModelEntry:
    name: str
    path: Path
    size_bytes: int
    source: str  # "default", "hf-cache" or "folder"
    spec: str  # what to pass to load_model / resolve_model
    has_mtp: bool = False  # its checkpoint carries MTP layers (speculative method "mtp")
    draft_head: str | None = None  # its trained draft head ("draft"/"auto" without a draft model)


def _folder_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size  # follows the HF cache's symlinks to blobs
        except OSError:
            pass
    return total


def _is_model_dir(path: Path) -> bool:
    try:
        validate_model_dir(path)
    except ModelLoadError:
        return False
    return True


def list_local_models(extra_dirs: Iterable[Path] = ()) -> list[ModelEntry]:
    """The default model, loadable repos in the HF cache, and the given folders (each a model
    folder or a folder of model folders). Never downloads or converts anything."""
    entries: list[ModelEntry] = []
    try:
        gguf = default_model.default_gguf_path()
    except default_model.DefaultModelError:
        gguf = None
    if gguf is not None:
        folder = default_model.default_model_dir()
        done = default_model.is_complete(folder, gguf)
        entries.append(
            ModelEntry(
                name=default_model.DEFAULT_MODEL_NAME,
                path=folder,
                size_bytes=_folder_size(folder) if done else gguf.stat().st_size,
                source="default",
                spec=DEFAULT_SPEC,
                draft_head=shipped_head_label(default_model.DEFAULT_MODEL_NAME),
            )
        )

    cache = hf_cache_dir()
    if cache.is_dir():
        for repo_dir in sorted(cache.glob("models--*")):
            repo_id = repo_dir.name.removeprefix("models--").replace("--", "/", 1)
            snap = hf_snapshot(repo_id, cache)
            if snap is not None and _is_model_dir(snap):
                entries.append(ModelEntry(repo_id, snap, _folder_size(snap), "hf-cache", repo_id))

    seen = {e.path.resolve() for e in entries}
    for extra in extra_dirs:
        extra = Path(extra).expanduser()
        if not extra.is_dir():
            continue
        candidates = [extra] if (extra / "config.json").is_file() else sorted(extra.iterdir())
        for cand in candidates:
            if cand.is_dir() and cand.resolve() not in seen and _is_model_dir(cand):
                seen.add(cand.resolve())
                entries.append(ModelEntry(cand.name, cand, _folder_size(cand), "folder", str(cand)))
    for entry in entries:
        entry.has_mtp = folder_has_mtp(entry.path)
    return entries
