"""The training curve as a PNG (matplotlib): loss, and held-out top-1 and acceptance length.
`python -m engine.train_draft.curve curve.json curve.png`."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def plot_curve(curve_json: Path, png: Path) -> None:
    """Draw curve.json's points; ImportError when matplotlib is not installed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = json.loads(Path(curve_json).read_text(encoding="utf-8"))["points"]
    steps = [p["step"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(steps, [p["loss"] for p in points], label="total loss")
    left.plot(steps, [p["ce"] for p in points], label="cross-entropy, step 1")
    left.set_xlabel("step")
    left.set_title("training loss")
    left.legend()
    depth = len(points[0]["heldout_top1_by_step"])
    for d in range(depth):
        right.plot(
            steps, [p["heldout_top1_by_step"][d] for p in points], label=f"top-1, step {d + 1}"
        )
    right.set_ylim(0, 1)
    right.set_xlabel("step")
    right.set_title("held-out prompts")
    twin = right.twinx()
    twin.plot(
        steps, [p["heldout_accept_len"] for p in points], "k--", label="acceptance length (k=3)"
    )
    twin.set_ylim(1, depth + 1)
    right.legend(loc="lower left")
    twin.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    plot_curve(Path(sys.argv[1]), Path(sys.argv[2]))
