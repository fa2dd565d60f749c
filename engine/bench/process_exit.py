"""How a benchmark script leaves: without the interpreter's teardown, with its exit code."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: MLX used from the engine's own thread can abort
    in its static destructors at exit on CUDA ("terminate called without an active exception",
    exit code 134, after the results were written; mlx issue #3126). Everything is written and
    flushed by now, so nothing is lost."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_and_exit(main: Callable[[], int | None]) -> None:
    """main(), then exit_now with its code (None: 0): a SystemExit's own; code 2 and one line
    when the model given cannot be loaded (a folder that is not a model, say: bad input, as a
    usage error is); code 1 and the traceback when it raised anything else."""
    try:
        code = main() or 0
    except SystemExit as done:  # argparse's --help (0) and usage errors (2)
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if done.code is not None and not isinstance(done.code, int):
            print(done.code, file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001 - printed; the teardown would abort over it
        if _cannot_load_model(exc):
            print(f"error: {exc}", file=sys.stderr)
            code = 2
        else:
            traceback.print_exc()
            code = 1
    exit_now(code)


def _cannot_load_model(exc: BaseException) -> bool:
    from engine.models import ModelLoadError  # only now: a script that failed has loaded it

    return isinstance(exc, ModelLoadError)
