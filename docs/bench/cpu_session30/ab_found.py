"""Run `python -m engine.bench` with auto pricing drafts by how often one is found (OLD unset: the
new code) or as certain (OLD=1: the old pricing, patched in). Session 30, docs/benchmarks.md."""
import os, runpy, sys
import engine.speculative.auto as A
if os.environ.get("OLD") == "1":
    orig = A.expected_tokens
    A.expected_tokens = lambda rate, k, found=1.0: orig(rate, k)
sys.argv = ["engine.bench"] + sys.argv[1:]
runpy.run_module("engine.bench", run_name="__main__")
