"""Compiled CUDA kernels no current build loads again, removed from Tandem's kernel folder.

Tandem's kernels are compiled under names that carry a digest of their source
(engine/kernels/kernel_names.py), and MLX's own kernels go to one folder per MLX version
(engine/kernels/compiled_cache.py). So every upgrade that changes a kernel leaves its old compiled
files behind, never loaded again, and every MLX upgrade a whole folder. Both are removed here,
once they have gone unused for DEFAULT_UNUSED_DAYS: another install that shares the folder (a
checkout beside the installed app) keeps what it compiled or used lately, and a file or folder
removed too early only costs a compile. Never raises: a folder it cannot read is left as it is.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_UNUSED_DAYS = 30
MLX_PREFIX = "custom_kernel_"  # MLX's module names: this, the kernel's name, its template args
OWN_PREFIX = "tandem_"  # every Tandem kernel's name starts so; MLX's own never do
USED_STAMP = ".last-used"  # touched each time a folder is chosen (a kernel read leaves no trace)
VERSION_PREFIX = "mlx-"


@dataclass(frozen=True)
class Pruned:
    """What one pruning removed: compiled files of old Tandem kernels, folders of other MLX
    versions, and the bytes both held."""

    files: int = 0
    folders: int = 0
    bytes: int = 0


def current_kernel_names() -> set[str]:
    """The name of every kernel variant this build compiles (not compiling any)."""
    from engine.kernels import (
        depthwise_conv_cuda,
        gated_delta_cuda,
        skinny_matmul_cuda,
        verify_attention_cuda,
    )

    modules = (verify_attention_cuda, gated_delta_cuda, skinny_matmul_cuda, depthwise_conv_cuda)
    return {name for module in modules for name in module.kernel_names()}


def is_stale_kernel(file_name: str, current: Iterable[str]) -> bool:
    """A compiled file of a Tandem kernel under no current name. MLX names the file by the kernel's
    name, then `_` and its template arguments and source hash, then `.ptx` or `.txt`."""
    if not file_name.startswith(MLX_PREFIX + OWN_PREFIX):
        return False
    module = file_name[len(MLX_PREFIX) :]
    return not any(module.startswith(name + "_") for name in current)


def mark_used(folder: Path) -> None:
    """Record that this folder is in use now (its age is read from this, see above)."""
    try:
        (folder / USED_STAMP).touch()
    except OSError as exc:
        log.debug("could not stamp %s: %s", folder, exc)


def prune_stale_kernels(
    folder: Path,
    *,
    current: Iterable[str] | None = None,
    unused_days: float = DEFAULT_UNUSED_DAYS,
    now: float | None = None,
) -> Pruned:
    """In `folder` (one MLX version's folder for one GPU, as compiled_cache chose it): remove the
    compiled files of Tandem kernels under no current name, and beside its version folder those
    of other MLX versions, each once unused for `unused_days`."""
    names = current_kernel_names() if current is None else set(current)
    cutoff = (time.time() if now is None else now) - unused_days * 86400
    files = folders = size = 0
    try:
        for path in folder.iterdir():
            if path.is_file() and is_stale_kernel(path.name, names) and _mtime(path) < cutoff:
                held = path.stat().st_size
                path.unlink()
                files, size = files + 1, size + held
        version_folder = folder.parent
        for other in version_folder.parent.iterdir():
            if (
                other.name.startswith(VERSION_PREFIX)
                and other.is_dir()
                and other != version_folder
                and _last_used(other) < cutoff
            ):
                held = _tree_bytes(other)
                shutil.rmtree(other)
                folders, size = folders + 1, size + held
    except OSError as exc:  # a folder another process changes, or one we may not write
        log.warning("old compiled kernels not all removed from %s: %s", folder, exc)
    pruned = Pruned(files=files, folders=folders, bytes=size)
    if files or folders:
        log.info(
            "removed %d old compiled kernel files and %d old MLX kernel folders (%.1f MB)",
            files,
            folders,
            size / 1e6,
        )
    return pruned


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def _last_used(tree: Path) -> float:
    """The newest stamp or file anywhere in the tree (an empty tree: its own time)."""
    newest = _mtime(tree)
    for path in tree.rglob("*"):
        newest = max(newest, _mtime(path))
    return newest


def _tree_bytes(tree: Path) -> int:
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
