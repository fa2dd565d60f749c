"""A temporary folder MLX's compilers can use.

MLX compiles at run time and writes what it compiles under C++'s `temp_directory_path()`: the
CPU backend's compiled functions (a shared library per graph, built with the system's compiler)
and, where `MLX_PTX_CACHE_DIR` is not set, the CUDA backend's kernels. That call takes the first
of TMPDIR, TMP, TEMP and TEMPDIR that is set, and fails outright when it names no folder, where
Python's `tempfile` quietly tries the next: with TEMP=0 set (and TMPDIR not) every reply on the
CPU failed with "decoding failed: filesystem error: temp_directory_path: No such file or
directory". The engine thread points such a variable at a folder of Tandem's own, and says so.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TEMP_ENVS = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")  # the order C++ reads them in
DEFAULT_FOLDER = "tmp"  # under Tandem's cache folder


def mend_temp_folder(cache_root: Path) -> str | None:
    """Where the variable C++ reads names no folder, point it at `cache_root`/tmp (made if
    need be); returns that variable's name, or None when nothing needed mending (or the folder
    cannot be made: MLX then reports the error itself). Never raises."""
    name = next((n for n in TEMP_ENVS if n in os.environ), None)
    if name is None or os.path.isdir(os.environ[name]):
        return None
    folder = cache_root / DEFAULT_FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("%s=%r is not a folder and %s cannot be made: %s", name, os.environ[name],
                    folder, exc)  # fmt: skip
        return None
    log.warning(
        "%s=%r is not a folder; MLX compiles into a temporary folder: using %s",
        name,
        os.environ[name],
        folder,
    )
    os.environ[name] = str(folder)
    return name
