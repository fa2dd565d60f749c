"""What auto chooses on the synthetic drafter: the widths of its rounds (histogram per batch
size), the rows' acceptance it priced them with, and its cost table at the end, next to a
fixed k's run. `python auto_widths.py [bench args...]` (the bench's own arguments; add
--auto-too)."""

# isort: off
import engine  # noqa: F401  (OpenBLAS before MLX)

# isort: on
import collections
import json
import sys

from engine.bench.__main__ import main
from engine.speculative import auto

widths: collections.Counter = collections.Counter()
rates: list[float] = []
tables: list[dict] = []
choose = auto.AutoPolicy.choose


def traced(self, rates_now, batch, k_max, forced=(), found=None):
    ks = choose(self, rates_now, batch, k_max, forced, found)
    widths[(batch, max(ks) + 1)] += 1
    rates.extend(rates_now)
    if len(tables) == 0 or tables[-1]["id"] != id(self.costs):
        tables.append({"id": id(self.costs)})
    tables[-1]["ms"] = {
        f"{b}x{w}": round(1e3 * v, 1) for (b, w), v in sorted(self.costs.seconds.items())
    }
    tables[-1]["relative"] = {
        f"{b}x{w}": round(self.costs.relative(b, w), 3) for b in (1, 2, 4) for w in range(1, 10)
    }
    return ks


auto.AutoPolicy.choose = traced
rc = main(sys.argv[1:])
print("widths (batch, width): rounds", sorted(widths.items()))
if rates:
    mean = sum(rates) / len(rates)
    print(f"rates priced: mean {mean:.3f} min {min(rates):.3f} max {max(rates):.3f}")
for t in tables:
    print("relative cost", json.dumps(t["relative"]))
    print("measured ms", json.dumps(t["ms"]))
sys.exit(rc)
