"""Benchmark scripts leave through engine/bench/process_exit.py: main's own code, argparse's
codes (--help is 0, a usage error 2), a model that cannot be loaded 2 with one line, and code 1
with the traceback when main raised anything else."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
from engine.bench.process_exit import run_and_exit
how = sys.argv[1]
def main():
    if how == "return":
        return 3
    if how == "return-none":
        return None
    if how == "raise":
        raise RuntimeError("the prompt is too long")
    if how == "not-a-model":
        from engine.models import ModelLoadError
        raise ModelLoadError("/tmp is not an MLX model folder: config.json is missing")
    raise SystemExit(None if how == "none" else int(how))
run_and_exit(main)
"""


@pytest.mark.parametrize(
    "how, code",
    [
        ("return", 3),
        ("return-none", 0),
        ("0", 0),
        ("2", 2),
        ("none", 0),
        ("raise", 1),
        ("not-a-model", 2),
    ],
)
def test_the_exit_code_is_mains(how, code):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == code, result.stderr
    if how == "raise":
        assert "RuntimeError: the prompt is too long" in result.stderr
    if how == "not-a-model":  # bad input: one line, no traceback
        assert (
            result.stderr.strip()
            == "error: /tmp is not an MLX model folder: config.json is missing"
        )
