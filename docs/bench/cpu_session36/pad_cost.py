"""A decode step of rows of one short length beside one long row, against each alone and four
long rows (the default model, the engine's ragged cache): what attending over the longest row's
padding costs. `python pad_cost.py 300 2048` from the repo root's venv."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import statistics
import sys
import time

import mlx.core as mx

from engine.bench.profile_round import prefilled_batch
from engine.models import load_model

model = load_model(None).model


def step_ms(lengths: list[int], reps: int = 8) -> float:
    prompts = [[100 + i] * n for i, n in enumerate(lengths)]
    cache = prefilled_batch(model, [p[:-1] for p in prompts], ours=True)
    x = mx.array([[p[-1]] for p in prompts], dtype=mx.uint32)
    spent = []
    for _ in range(reps):
        start = time.perf_counter()
        mx.eval(model(x, cache=cache))
        spent.append(time.perf_counter() - start)
        for layer in cache:
            layer.trim(1)
    return 1e3 * statistics.median(spent[2:])


short, long = int(sys.argv[1]), int(sys.argv[2])
print(
    f"3x{short}: {step_ms([short] * 3):.1f} ms; 1x{long}: {step_ms([long]):.1f} ms; "
    f"mixed 3x{short}+{long}: {step_ms([short] * 3 + [long]):.1f} ms; "
    f"4x{long}: {step_ms([long] * 4):.1f} ms"
)
