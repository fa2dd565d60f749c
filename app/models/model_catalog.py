"""The models the user can pick: the embedded default model, the Hugging Face cache, folders the
user added. Listing and folder checks come from `engine.models`; nothing here touches MLX."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_MODEL_LABEL = "SmolLM2-135M-Instruct (built in)"
SOURCE_LABELS = {"default": "Built in", "hf-cache": "Hugging Face cache", "hf": "Hugging Face cache",
                 "folder": "Added folder", "user": "Added folder"}  # fmt: skip


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str | None  # what to load: a folder or repo id; None: the embedded default model
    size_bytes: int = 0
    source: str = "folder"
    location: str = ""  # the folder on disk, for display

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, self.source.replace("-", " ").capitalize())


DEFAULT_ENTRY = ModelEntry(name=DEFAULT_MODEL_LABEL, path=None, source="default")


def list_models(extra_dirs: list[str]) -> list[ModelEntry]:
    """Every model found; the default model first. Falls back to a plain folder scan when the
    engine has no listing yet."""
    entries: list[ModelEntry] = []
    try:
        from engine.models import list_local_models

        found = list_local_models([Path(d) for d in extra_dirs])
    except (ImportError, AttributeError):
        found = None
    except Exception:  # noqa: BLE001 - a broken cache folder must not break the dialog
        log.exception("listing models failed")
        found = None
    if found is None:
        found = [_scan(Path(d)) for d in extra_dirs]
        found = [entry for entry in found if entry is not None]
    else:
        found = [_entry(m) for m in found]
    if not any(e.source == "default" or e.path is None for e in found):
        entries.append(DEFAULT_ENTRY)
    entries.extend(found)
    return entries


def _entry(model) -> ModelEntry:
    """An engine.models.ModelEntry as the app's entry."""
    source = str(getattr(model, "source", "folder"))
    spec = getattr(model, "spec", None) or (
        str(model.path) if getattr(model, "path", None) else None
    )
    name = str(getattr(model, "name", "") or spec)
    if source == "default":
        spec, name = None, DEFAULT_MODEL_LABEL
    return ModelEntry(
        name=name,
        path=spec,
        size_bytes=int(getattr(model, "size_bytes", 0) or 0),
        source=source,
        location=str(getattr(model, "path", "") or ""),
    )


def validate_folder(path: str) -> str | None:
    """Why `path` cannot be a model folder, or None when it looks fine."""
    try:
        from engine.models import validate_model_dir
    except (ImportError, AttributeError):
        validate_model_dir = None
    if validate_model_dir is not None:
        try:
            result = validate_model_dir(Path(path))
        except Exception as exc:  # noqa: BLE001 - the engine's reason is the message
            return str(exc)
        return result if isinstance(result, str) else None
    folder = Path(path)
    if not folder.is_dir():
        return f"{path} is not a folder"
    if not (folder / "config.json").is_file():
        return f"{folder.name} has no config.json: not an MLX / Hugging Face model folder"
    if not any(folder.glob("*.safetensors")):
        return f"{folder.name} has no .safetensors weights"
    return None


def check_draft(
    target_folder: str | None, draft_path: str | None, *, target_vocab: int | None = None
) -> str | None:
    """Why `draft_path` cannot draft for the model in `target_folder`, or None when it can (or
    when that cannot be told from the files).

    A first check from the folders' files (vocabulary size, tokenizer vocabulary); the engine
    checks again when the chat's next reply uses the draft (engine.models.check_draft_compatible).
    `target_vocab`: the target's vocabulary size when known (else read from its config.json)."""
    if not draft_path:
        return None
    problem = validate_folder(draft_path)
    if problem:
        return problem
    draft = Path(draft_path)
    if not target_folder:
        return None
    target = Path(target_folder)
    if target.resolve() == draft.resolve():
        return "the draft model is this chat's model itself"
    vocab = _vocab_size(draft)
    target_vocab = target_vocab or _vocab_size(target)
    if vocab is not None and target_vocab and vocab != target_vocab:
        return (
            f"its vocabulary has {vocab} tokens, this chat's model's has {target_vocab}: "
            "a draft model must share the target's tokenizer"
        )
    mine, theirs = _tokenizer_digest(draft), _tokenizer_digest(target)
    if mine and theirs and mine != theirs:
        return "its tokenizer differs from this chat's model's: a draft must share the tokenizer"
    return None


def model_folder(spec: str | None, entries: list[ModelEntry]) -> str | None:
    """The folder a chat's model setting names (a listed repo id's snapshot, or the folder
    itself); None for the default model or when unknown."""
    if spec is None:
        return None
    for entry in entries:
        if entry.path == spec and entry.location:
            return entry.location
    return spec if Path(spec).expanduser().is_dir() else None


def _scan(folder: Path) -> ModelEntry | None:
    if validate_folder(str(folder)):
        return None
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    return ModelEntry(name=folder.name, path=str(folder), size_bytes=size, source="folder")


def _vocab_size(folder: Path) -> int | None:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    return int(value) if value else None


def _tokenizer_digest(folder: Path) -> str | None:
    try:
        data = json.loads((folder / "tokenizer.json").read_text())
    except (OSError, ValueError):
        return None
    vocab = data.get("model", {}).get("vocab")
    if not vocab:
        return None
    return hashlib.sha1(json.dumps(vocab, sort_keys=True).encode()).hexdigest()
