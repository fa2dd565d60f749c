"""Host CPU time (time.thread_time) a token at one row: mlx-lm's generate_step against the
engine's plain step, on the same model (random:host32: the 8B's 32 layers at a tiny width).
`python host_one.py`."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import statistics
import time
from types import SimpleNamespace

import mlx.core as mx
from mlx_lm.generate import generate_step

from engine.bench import ladder_rungs as rungs
from engine.bench import profile_ladder

args = SimpleNamespace(
    model="random:host32", batch=[1], context=256, tokens=64, prefill_chunk=None, only=None
)
ladder = profile_ladder.Ladder(args)
prompt = ladder.prompts(1)[0]


def generate_host() -> float:
    spent = []
    start = time.thread_time()
    for _ in generate_step(mx.array(prompt), ladder.model, max_tokens=200):
        now = time.thread_time()
        spent.append(now - start)
        start = now
    return 1e3 * statistics.median(spent[10:])


def engine_host() -> float:
    samples = []
    step = ladder.core.step

    def timed_step():
        start = time.thread_time()
        events = step()
        samples.append(time.thread_time() - start)
        return events

    ladder.core.step = timed_step
    rungs.engine_core(ladder.core, [prompt], 150)
    ladder.core.step = step
    return 1e3 * statistics.median(samples[10:])


for _ in range(3):
    print(
        f"generate_step host cpu a token {generate_host():.2f} ms, "
        f"engine plain step host cpu {engine_host():.2f} ms"
    )
ladder.close()
