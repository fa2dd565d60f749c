"""`python serial_values.py MODULE ARGS...` runs `python -m MODULE ARGS...` with the
verify-attention kernel of session 33 (value rows loaded one at a time, serial_values_source.py):
the "before" side of an A/B in separate processes. The kernel's name carries a digest of its
source, so the two never share a compiled kernel."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX, where it matters)

# isort: on
import runpy
import sys

import serial_values_source as serial

import engine.kernels.verify_attention_cuda as vac

vac.GROUPED_SOURCE = serial.GROUPED_SOURCE
vac.PER_HEAD_SOURCE = serial.PER_HEAD_SOURCE
vac._kernels.clear()
print("verify attention: session 33's value pass (one row at a time)", file=sys.stderr)
module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
if module.endswith(".py"):
    runpy.run_path(module, run_name="__main__")
else:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
