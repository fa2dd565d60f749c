"""How much memory the loaded models may hold together, and what a model needs.

By default from the machine: on Apple silicon the GPU's recommended working set (what Metal can
keep resident without paging); on a CUDA GPU a share of its memory; on a CPU a share of RAM. The
prompt cache's RAM tier has its own cap, which comes off the top.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten

log = logging.getLogger(__name__)

DEFAULT_RAM_SHARE = 0.7  # of physical RAM, on a CPU: the app, Qt and the OS need the rest
DEFAULT_GPU_SHARE = 0.9  # of a CUDA GPU's memory
MIN_BUDGET_BYTES = 256 << 20
MAX_NESTING = 4  # how deep `held_bytes` looks into a cache object's attributes


def machine_memory_bytes() -> tuple[int, str]:
    """What the models may use on this machine, before the prompt cache's share, and where that
    figure comes from."""
    if mx.default_device() == mx.gpu:
        info = mx.device_info()
        if "max_recommended_working_set_size" in info:  # Metal
            return int(info["max_recommended_working_set_size"]), "Metal's recommended working set"
        total = info.get("total_memory") or info.get("memory_size")
        if total:
            share = int(int(total) * DEFAULT_GPU_SHARE)
            return share, f"{DEFAULT_GPU_SHARE:.0%} of the GPU's memory"
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        ram = 0
    return int(ram * DEFAULT_RAM_SHARE), f"{DEFAULT_RAM_SHARE:.0%} of RAM"


def default_budget_bytes(prompt_cache_ram_bytes: int = 0) -> int:
    """The machine's figure less the prompt cache's RAM cap, at least MIN_BUDGET_BYTES."""
    total, source = machine_memory_bytes()
    budget = max(MIN_BUDGET_BYTES, total - prompt_cache_ram_bytes)
    log.info("model memory budget: %s (%s)", fmt_bytes(budget), source)
    return budget


def parameters_bytes(model: Any) -> int:
    """What a model's weights take once evaluated (known from their shapes, also while lazy)."""
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


def held_bytes(obj: Any, depth: int = 0) -> int:
    """Bytes of the MLX arrays an object holds: itself, its attributes, lists, tuples and dicts
    (whole buffers, including room preallocated for later positions)."""
    if isinstance(obj, mx.array):
        return obj.nbytes
    if depth >= MAX_NESTING or obj is None or isinstance(obj, str | int | float | bool):
        return 0
    if isinstance(obj, list | tuple):
        return sum(held_bytes(x, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(held_bytes(x, depth + 1) for x in obj.values())
    attributes = getattr(obj, "__dict__", None)
    if attributes is None:
        return 0
    return sum(held_bytes(x, depth + 1) for x in attributes.values())


def fmt_bytes(n: int) -> str:
    """1.2 GB, 540 MB: sizes in messages."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit in ("B", "KB") else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
