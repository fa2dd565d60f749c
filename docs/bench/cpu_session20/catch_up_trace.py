"""Session 20: one turn of the long-prompt benchmark with every request drafting with a draft
model (the default model drafting for itself), the catch-up paced; the whole JSON, with each
step's prompt tokens, joins and catch-up seconds. Run: PYTHONPATH=. python THIS OUT.json."""

from __future__ import annotations

import json
import sys

from catch_up_ab import measure_once

if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(measure_once(1024), f, indent=1)
