"""Same process, alternated: the long prompt beside three chats (default model, 2,048 tokens, the
default config) with the pacer before a374125 and after it."""
import asyncio, importlib.util, json, sys
import engine  # noqa: F401
from engine.bench import long_prompt
import engine.core.scheduler as scheduler_module
from engine.core.prefill_pacer import PrefillPacer as NewPacer

spec = importlib.util.spec_from_file_location("old_pacer", "/tmp/old_pacer.py")
old = importlib.util.module_from_spec(spec); sys.modules["old_pacer"] = old; spec.loader.exec_module(old)

from engine.core.prefill_pacer import PacedStep


class OldPacer(old.PrefillPacer):
    def observe(self, seconds, *, prefill_tokens, decoding, joined=0):
        self._observe(seconds, prefill_tokens=prefill_tokens, decoding=decoding)
        if self.trace is not None:
            self.trace.append(PacedStep(prefill_tokens, decoding, seconds, self.chunk, joined))

rows = []
for variant in sys.argv[2:] or ("new", "old", "new", "old"):
    scheduler_module.PrefillPacer = NewPacer if variant == "new" else OldPacer
    row = asyncio.run(long_prompt.measure(None, long_tokens=2048, running=3, prefill_chunk=None,
                                          settle_tokens=5, gap_factor=3.0, packed=True, repeats=2))
    row["pacer"] = variant
    rows.append(row)
    print(variant, "gap", row["gap_ratio_runs"], "ttft", row["ttft_ratio_runs"],
          [len(t) for t in row["prompt_steps_runs"]], flush=True)
json.dump({"command": "PYTHONPATH=. python docs/bench/cpu_session18/pacer_ab.py OUT.json old new (the old pacer: git show a374125^:engine/core/prefill_pacer.py > /tmp/old_pacer.py)", "results": rows},
          open(sys.argv[1], "w"), indent=1)
