"""Running the matrix: each model folder is built, its `mlx_lm.generate` references computed and
its cases run on one engine, then the folder is deleted. Folders are spread over helper
processes (one per spare core; the engine and mlx_lm.generate are single-threaded at these
sizes), so the matrix takes a few minutes on 2 cores; the caller's own process takes its share.
Every outcome is kept for the JSON that `python -m tests.architectures.report` turns into
docs/architectures.md.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tests.architectures.arch import Arch
from tests.architectures.build import build_model, cache_types, save_folder
from tests.architectures.cases import CASES
from tests.architectures.catalog import BY_NAME, CATALOG
from tests.architectures.outcome import CaseOutcome

VARIANTS = ("fp32", "4bit")
QUANTIZE_BITS = 4
DEFAULT_JSON = Path(__file__).resolve().parents[2] / "artifacts" / "architectures.json"
MAX_HELPERS = 7

Folder = tuple[str, str]  # (architecture, variant)


def variant_skip(arch: Arch, variant: str) -> str | None:
    """Why this folder of the matrix is not built (None: it is)."""
    if arch.unbuildable:
        return arch.unbuildable
    if variant == "4bit" and arch.unquantizable:
        return arch.unquantizable
    return None


def matrix_cases() -> list[tuple[str, str, str]]:
    """(architecture, variant, case) in the order they run: a folder's cases together."""
    return [(a.name, v, c) for a in CATALOG for v in VARIANTS for c in CASES]


def default_helpers() -> int:
    return max(0, min(MAX_HELPERS, (os.cpu_count() or 1) - 1))


def run_folder(arch: str, variant: str, cases: tuple[str, ...], root: str) -> list[CaseOutcome]:
    """Build one folder, run `cases` on it, delete it (in whichever process calls it)."""
    from tests.architectures.session import ModelSession  # imports MLX: not before it is needed

    folder = Path(root) / (arch if variant == "fp32" else f"{arch}-{variant}")
    bits = QUANTIZE_BITS if variant == "4bit" else None
    try:
        save_folder(BY_NAME[arch], folder, bits=bits)
        session = ModelSession(arch, variant, folder)
    except Exception as exc:  # noqa: BLE001 - every case of the folder reports it
        shutil.rmtree(folder, ignore_errors=True)
        message = f"the folder could not be built or loaded: {type(exc).__name__}: {exc}"
        return [CaseOutcome(arch, variant, c, problems=[message]) for c in cases]
    try:
        return [session.run(case) for case in cases]
    finally:
        session.close()
        shutil.rmtree(folder, ignore_errors=True)


def _quiet_helper() -> None:
    """Helpers print nothing: every failure is in the outcomes they return."""
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    logging.disable(logging.CRITICAL)


class MatrixRun:
    """Runs folders on demand (or ahead, in helper processes) and remembers every outcome."""

    def __init__(self, root: Path | None = None, *, helpers: int | None = None) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="tandem-archs-"))
        self.helpers = default_helpers() if helpers is None else helpers
        self.outcomes: dict[tuple[str, str, str], CaseOutcome] = {}
        self.caches: dict[str, list[str]] = {}
        self._wanted: dict[Folder, tuple[str, ...]] = {}
        self._remote: dict[Folder, Future] = {}
        self._pool: ProcessPoolExecutor | None = None
        self.started = time.perf_counter()

    def plan(self, wanted: list[tuple[str, str, str]]) -> None:
        """The cases that will be asked for, in order: every (helpers + 1)-th folder stays
        here, the others start now in the helper processes."""
        for arch, variant, case in wanted:
            if not variant_skip(BY_NAME[arch], variant):
                self._wanted.setdefault((arch, variant), ())
                self._wanted[(arch, variant)] += (case,)
        if not self.helpers:
            return
        context = multiprocessing.get_context("spawn")  # never fork a process running MLX
        self._pool = ProcessPoolExecutor(self.helpers, context, initializer=_quiet_helper)
        for i, (folder, cases) in enumerate(self._wanted.items()):
            if i % (self.helpers + 1):
                self._remote[folder] = self._pool.submit(run_folder, *folder, cases, str(self.root))

    def outcome(self, arch: str, variant: str, case: str) -> CaseOutcome:
        key = (arch, variant, case)
        if key not in self.outcomes:
            folder = (arch, variant)
            cases = self._wanted.get(folder, ()) or (case,)
            if case not in cases:
                cases += (case,)
            remote = self._remote.pop(folder, None)
            try:
                found = remote.result() if remote else run_folder(*folder, cases, str(self.root))
            except Exception as exc:  # noqa: BLE001 - e.g. a helper that crashed
                message = f"the helper process running it failed: {type(exc).__name__}: {exc}"
                found = [CaseOutcome(arch, variant, c, problems=[message]) for c in cases]
            self.outcomes.update({(arch, variant, o.case): o for o in found})
        return self.outcomes[key]

    def cache_types(self, arch: str) -> list[str]:
        if arch not in self.caches:
            model, _ = build_model(BY_NAME[arch])
            self.caches[arch] = cache_types(model)
        return self.caches[arch]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def as_json(self) -> dict[str, Any]:
        archs = []
        for arch in CATALOG:
            row: dict[str, Any] = {"name": arch.name, "unbuildable": arch.unbuildable}
            if arch.buildable:
                row["caches"] = self.cache_types(arch.name)
            row["variants"] = {}
            for variant in VARIANTS:
                cases = {
                    c: self.outcomes[(arch.name, variant, c)].as_dict()
                    for c in CASES
                    if (arch.name, variant, c) in self.outcomes
                }
                row["variants"][variant] = {"skipped": variant_skip(arch, variant), "cases": cases}
            archs.append(row)
        return {
            "cases": list(CASES),
            "variants": list(VARIANTS),
            "seconds": time.perf_counter() - self.started,
            "architectures": archs,
        }

    def write_json(self, path: Path = DEFAULT_JSON) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_json(), indent=1), encoding="utf-8")
        return path
