"""Session 31: `python va_limit.py MODULE ARGS...` runs `python -m MODULE ARGS...` (a benchmark
ending in engine.bench.process_exit) with the verify-attention kernel's limits on the keys a
call reads set from VA_LIMIT (bytes; unset or "shipped": as shipped), counting which calls of
several queries the kernel took and which it left to MLX (printed at exit)."""

import collections
import os
import runpy
import sys

import engine.bench.process_exit as process_exit
import engine.kernels.verify_attention_cuda as va

limit = os.environ.get("VA_LIMIT", "shipped")
if limit != "shipped":
    va.DEFAULT_MAX_BYTES = va.DEFAULT_MAX_GROUPED_BYTES = int(float(limit))
counts: collections.Counter = collections.Counter()
takes = va.takes


def counted(q, k, v, mask, sinks=None):
    taken = takes(q, k, v, mask, sinks)
    if q.shape[2] > 1:
        counts[(taken, tuple(q.shape), k.shape[2], getattr(mask, "dtype", mask))] += 1
    return taken


va.takes = counted
exit_now = process_exit.exit_now


def report_then_exit(code):
    for key, n in sorted(counts.items(), key=lambda kv: -kv[1])[:8]:
        print("calls", n, "kernel" if key[0] else "MLX", key[1:], flush=True)
    exit_now(code)


process_exit.exit_now = report_then_exit
module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__")
