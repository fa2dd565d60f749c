"""Host CPU time of the engine thread per step (time.thread_time: Python, MLX's graph building
and encoding; not the kernels MLX runs on its own threads), for plain steps and verify rounds
(synthetic, k=4) at `B` rows, against a bare loop at widths 1 and 5. Ties are not broken on the
host (the GPU's path), so a random model's many near ties do not count.
`python host_cpu.py random:host32 16`."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import statistics
import sys
import time
from types import SimpleNamespace

import mlx.core as mx

from engine.bench import ladder_rungs as rungs
from engine.bench import profile_ladder
from engine.bench.profile_round import prefilled_batch
from engine.core import lookahead

lookahead.near_ties = lambda logits: None
lookahead.raw_argmax = lambda logits: mx.argmax(logits, axis=-1)
spec = sys.argv[1] if len(sys.argv) > 1 else "random:host32"
B = int(sys.argv[2]) if len(sys.argv) > 2 else 16
args = SimpleNamespace(model=spec, batch=[B], context=256, tokens=48, prefill_chunk=None, only=None)
ladder = profile_ladder.Ladder(args)
prompts = ladder.prompts(B)
ladder.expect(prompts)


def bare(width: int) -> float:
    cache = prefilled_batch(ladder.model, [p[:-1] for p in prompts], ours=True)
    x = mx.array([[p[-1]] * width for p in prompts], dtype=mx.uint32)
    spent = []
    for _ in range(20):
        start = time.thread_time()
        y = mx.argmax(ladder.model(x, cache=cache)[:, -1], axis=-1)
        mx.async_eval(y)
        spent.append(time.thread_time() - start)
        y.tolist()
        if width > 1:
            for layer in cache:
                layer.trim(width - 1)
    return 1e3 * statistics.median(spent[3:])


for width in (1, 5):
    print(f"bare width {width}: host cpu {bare(width):.2f} ms")
for name, verify, ahead in (
    ("plain", False, False),
    ("ahead", True, True),
    ("serial", True, False),
):
    samples = []
    step = ladder.core.step

    def timed_step(step=step, samples=samples):
        start = time.thread_time()
        events = step()
        samples.append(time.thread_time() - start)
        return events

    ladder.core.step = timed_step
    result = rungs.engine_core(ladder.core, prompts, 48, verify=verify, ahead=ahead)
    ladder.core.step = step
    middle = samples[len(samples) // 3 : -len(samples) // 4]
    print(
        f"engine {name}: host cpu a step {1e3 * statistics.median(middle):.2f} ms "
        f"(wall {result['ms']:.1f} ms), tokens a round {result['tokens_per_round']}"
    )
ladder.close()
