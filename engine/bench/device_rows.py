"""The JSON the single-step benchmarks write (`shape_cost`, `shared_step`): the model, the
device they ran on, and their rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_device_rows(path: Path | None, model: str | None, rows: list[dict[str, Any]]) -> None:
    """Write `rows` with the model and MLX's default device to `path` (None: nothing)."""
    if path is None:
        return
    import mlx.core as mx

    payload = {"model": model, "device": str(mx.default_device()), "rows": rows}
    path.write_text(json.dumps(payload, indent=1))
