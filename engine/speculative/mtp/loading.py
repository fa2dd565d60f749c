"""Giving a loaded target its MTP drafter: find the MTP weights (in its folder, or a file or
folder the user named), read them, build the layer; say why not when that fails."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from engine.fused_projections import fuse_projections
from engine.speculative.mtp.checkpoint import MtpWeightsError, find_mtp, read_mtp_weights
from engine.speculative.mtp.drafter import MtpDrafter
from engine.speculative.mtp.module import load_mtp

log = logging.getLogger(__name__)


def _identity(source: Any) -> str:
    """What the MTP weights are: their files' paths, sizes and times (as model_identity)."""
    parts = [source.prefix]
    for f in source.files:
        stat = f.stat()
        parts.append(f"{f.resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    return "mtp:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def mtp_weights_for(target: Any, choices: tuple[tuple[str, str], ...]) -> str | None:
    """The separate MTP weights the configuration names for this target (by folder or name)."""
    path = Path(str(target.path)).resolve() if target.path else None
    for model, weights in choices:
        spec = Path(model).expanduser()
        if model == target.info.name or (
            path is not None and spec.exists() and spec.resolve() == path
        ):
            return weights
    return None


def mtp_drafter_for(
    target: Any, weights: str | None = None
) -> tuple[MtpDrafter | None, str | None]:
    """(the drafter, None), (None, why not) when MTP weights were found or named but cannot be
    used, or (None, None) when the model has none."""
    config = target.config or {}
    if getattr(target, "mtp", None) is not None:  # random benchmark models carry their own
        fuse_projections(target.mtp)
        return MtpDrafter(target.model, target.mtp, identity=f"random:{target.weights_id}"), None
    try:
        source = find_mtp(Path(str(target.path)), config, Path(weights) if weights else None)
    except OSError as exc:
        return None, f"its MTP weights cannot be read: {exc}"
    if source is None:
        if weights:
            return None, f"no MTP weights of a {config.get('model_type')} model in {weights}"
        return None, None
    try:
        module = load_mtp(target.model, source.family, read_mtp_weights(source, target.model))
        fuse_projections(module)  # its attention and MLP as the target's: one matmul a group
        return MtpDrafter(target.model, module, identity=_identity(source)), None
    except (MtpWeightsError, ValueError, OSError) as exc:
        log.warning("%s: MTP weights unusable: %s", target.info.name, exc)
        return None, f"its MTP weights cannot be used: {exc}"
