"""The trained draft head as a drafter: the default model's EAGLE-style head (shipped in
resources/drafts, trained by `python -m engine.train_draft`) proposes from the target's hidden
states, drafting exactly as MTP layers do (engine/speculative/mtp/drafter.py: one batched KV
cache of real (hidden state, next token) pairs per row, chains for k > 1, guesses given back),
over its own draft vocabulary of the target's LM head rows.

It serves the speculative method "draft" (and "auto") of a model it was trained for when the
request names no draft model.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Any

import mlx.core as mx

from engine.fused_projections import fuse_projections
from engine.requests import DRAFT_HEAD
from engine.speculative.eagle_head import (
    EagleHead,
    EagleHeadError,
    head_rows,
    load_head,
    target_parts,
)
from engine.speculative.mtp.drafter import MtpDrafter

log = logging.getLogger(__name__)

EAGLE_DRAFTER = "eagle-head"  # its drafter name
HEAD_LABEL = "trained draft head (EAGLE)"  # what settings and the Models window call it
DEFAULT_HEAD_DIR = ("resources", "drafts")
HEADS = {"SmolLM2-135M-Instruct": "smollm2-135m-eagle.json"}  # target name -> shipped head


class EagleHeadDrafter(MtpDrafter):
    """Drafts with a trained EAGLE-style head over the target's hidden states."""

    name = EAGLE_DRAFTER
    kind = DRAFT_HEAD
    wants_hidden_states = True

    def __init__(self, target_model: Any, head: EagleHead) -> None:
        super().__init__(target_model, head)
        _, head_module = target_parts(target_model)
        self.draft_ids = head.draft_ids.astype(mx.uint32)
        self.rows = head_rows(head_module, head.draft_ids).astype(self.dtype)
        mx.eval(self.rows, self.draft_ids)

    def _greedy(self, out: mx.array) -> mx.array:
        return self.draft_ids[mx.argmax(out @ self.rows.T, axis=-1)]


def head_path(target_name: str) -> Path | None:
    """The shipped head's config for this model (by name), or None when none was trained."""
    config = HEADS.get(target_name)
    if config is None:
        return None
    package, folder = DEFAULT_HEAD_DIR
    # one name per joinpath: a bundle's namespace package (MultiplexedPath) takes only one
    return Path(str(resources.files(package).joinpath(folder).joinpath(config)))


def shipped_head_label(target_name: str) -> str | None:
    """HEAD_LABEL when Tandem ships a draft head for this model (its files are there)."""
    path = head_path(target_name)
    return HEAD_LABEL if path is not None and path.is_file() else None


def eagle_drafter_for(
    target: Any, config: Path | None = None
) -> tuple[EagleHeadDrafter | None, str | None]:
    """(the drafter, None), (None, why not) when a head exists but cannot be used, or (None,
    None) when this model has no trained head."""
    path = config or head_path(target.info.name)
    if path is None:
        return None, None
    model = target.model
    try:
        dtype = model.model.norm.weight.dtype
        head = load_head(path, dtype=dtype if mx.issubdtype(dtype, mx.floating) else mx.float32)
        args, shape = model.args, head.config
        mismatched = [
            key
            for key in ("hidden_size", "vocab_size", "num_attention_heads", "rms_norm_eps")
            if getattr(args, key, None) != getattr(shape, key)
        ]
        if mismatched:
            raise EagleHeadError(f"it was trained for another model ({', '.join(mismatched)})")
        fuse_projections(head)  # its layer's q/k/v and gate/up as one matmul each, as the target's
        return EagleHeadDrafter(model, head), None
    except (EagleHeadError, AttributeError, ValueError) as exc:
        log.warning("%s: draft head unusable: %s", target.info.name, exc)
        return None, f"its draft head cannot be used: {exc}"
