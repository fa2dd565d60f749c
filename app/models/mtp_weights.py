"""Separate MTP weights for a model whose folder lacks them: the user's choices, kept in the
settings and handed to the engine when it starts (EngineConfig.mtp_weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.api import mtp_weights_problem

MTP_WEIGHTS_KEY = "mtp_weights"  # setting: {model spec: safetensors file}


def check_mtp_weights(model_folder: str, weights: str) -> str | None:
    """Why `weights` cannot give the model in `model_folder` its MTP layers, or None."""
    if not model_folder or not Path(model_folder).is_dir():
        return "the model's folder is not on this computer yet"
    return mtp_weights_problem(Path(model_folder), Path(weights))


def engine_mtp_weights(store: Any) -> tuple[tuple[str, str], ...]:
    """The stored choices as EngineConfig.mtp_weights."""
    choices = store.setting(MTP_WEIGHTS_KEY, {}) or {}
    return tuple((str(k), str(v)) for k, v in choices.items() if k and v)
