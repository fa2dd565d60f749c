"""The models the user can pick: the built-in model, the Hugging Face cache, folders the user
added. Listing and folder checks come from the engine (`engine.api`); nothing here touches MLX."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from engine.api import LocalModel, ModelLoadError, list_local_models, validate_model_dir

log = logging.getLogger(__name__)

DEFAULT_MODEL_LABEL = "SmolLM2-135M-Instruct (built in)"
BUILT_IN_SPEC = "default"  # what the engine calls the built-in model (engine.models.DEFAULT_SPEC)
SOURCE_LABELS = {"default": "Built in", "hf-cache": "Hugging Face cache", "hf": "Hugging Face cache",
                 "folder": "Added folder", "user": "Added folder"}  # fmt: skip


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str | None  # what to load: a folder, a repo id, or BUILT_IN_SPEC
    size_bytes: int = 0
    source: str = "folder"
    location: str = ""  # the folder on disk, for display
    has_mtp: bool = False  # its checkpoint carries MTP layers (speculative method "mtp")
    draft_head: str | None = None  # its trained draft head (Tandem ships the default model's)

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, self.source.replace("-", " ").capitalize())


DEFAULT_ENTRY = ModelEntry(name=DEFAULT_MODEL_LABEL, path=BUILT_IN_SPEC, source="default")


def list_models(extra_dirs: list[str]) -> list[ModelEntry]:
    """Every model found; the built-in model first."""
    try:
        found = [_entry(m) for m in list_local_models([Path(d) for d in extra_dirs])]
    except OSError:  # a broken cache folder must not break the dialog
        log.exception("listing models failed")
        found = []
    if not any(e.source == "default" for e in found):
        found.insert(0, DEFAULT_ENTRY)
    return found


def _entry(model: LocalModel) -> ModelEntry:
    """The engine's listing entry as the app's."""
    if model.source == "default":
        name, spec = DEFAULT_MODEL_LABEL, BUILT_IN_SPEC
    else:
        name, spec = model.name, model.spec
    return ModelEntry(
        name,
        spec,
        model.size_bytes,
        model.source,
        str(model.path),
        has_mtp=model.has_mtp,
        draft_head=model.draft_head,
    )


def validate_folder(path: str) -> str | None:
    """Why `path` cannot be a model folder, or None when it looks fine."""
    try:
        validate_model_dir(Path(path))
    except ModelLoadError as exc:
        return str(exc)
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
