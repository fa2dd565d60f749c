"""Benchmark scripts leave through engine/bench/process_exit.py: main's own code, argparse's
codes (--help is 0, a usage error 2), and code 1 with the traceback when main raised."""

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
    if how == "raise":
        raise RuntimeError("the prompt is too long")
    raise SystemExit(None if how == "none" else int(how))
run_and_exit(main)
"""


@pytest.mark.parametrize(
    "how, code", [("return", 3), ("0", 0), ("2", 2), ("none", 0), ("raise", 1)]
)
def test_the_exit_code_is_mains(how, code):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == code, result.stderr
    if how == "raise":
        assert "RuntimeError: the prompt is too long" in result.stderr
