"""Session 32: `python min_gain.py GAIN ARGS...` runs `python -m engine.bench ARGS...` with auto's
MIN_GAIN (the clear win it asks of a round over a plain step) set to GAIN."""

import runpy
import sys

import engine.speculative.auto as auto

auto.MIN_GAIN = float(sys.argv[1])
sys.argv = ["engine.bench", *sys.argv[2:]]
runpy.run_module("engine.bench", run_name="__main__")
