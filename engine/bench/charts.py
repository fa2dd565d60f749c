"""Charts for docs/: speed-up over our plain decoding against draft acceptance, per k and
concurrency (synthetic drafter)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_DPI = 110


def _save(fig, path: Path, title: str) -> Path:
    """Title, lay out, write and close a chart's figure."""
    import matplotlib.pyplot as plt

    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DEFAULT_DPI)
    plt.close(fig)
    return path


def speedup_chart(results: list[dict], path: Path, *, title: str) -> Path | None:
    synthetic = [r for r in results if r.get("acceptance") is not None]
    # one way of running verify rounds: the sweep's first (--ahead-modes, --serial-too)
    mode = synthetic[0].get("verify_ahead") if synthetic else None
    rows = [r for r in synthetic if not r.get("recurrent_replay") and r.get("verify_ahead") == mode]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    concurrencies = sorted({r["concurrency"] for r in rows})
    fig, axes = plt.subplots(
        1, len(concurrencies), figsize=(4.2 * len(concurrencies), 3.6), sharey=True, squeeze=False
    )
    for ax, c in zip(axes[0], concurrencies):
        for line in sorted({_line(r) for r in rows}, key=lambda name: (len(name), name)):
            pts = sorted(
                (r["acceptance"], r["speedup_vs_plain"])
                for r in rows
                if r["concurrency"] == c and _line(r) == line
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=line)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_title(f"concurrency {c}")
        ax.set_xlabel("draft acceptance (synthetic)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("speed-up vs our plain decoding")
    axes[0][-1].legend()
    return _save(fig, path, title)


def _line(row: dict) -> str:
    """A synthetic row's line in the chart: its fixed draft length, or auto (--auto-too)."""
    return "auto" if row.get("speculative") == "auto" else f"k={row['draft_tokens']}"


def concurrency_chart(results: list[dict], path: Path, *, title: str) -> Path | None:
    """Speed-up over our plain decoding and tokens/s against concurrency (one method)."""
    rows = sorted(results, key=lambda r: r["concurrency"])
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cs = [r["concurrency"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    left.plot(cs, [r["speedup_vs_plain"] for r in rows], marker="o")
    left.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.set_ylabel("speed-up vs our plain decoding")
    right.plot(cs, [r["ours_tokens_per_s"] for r in rows], marker="o", label="speculative")
    right.plot(cs, [r["plain_tokens_per_s"] for r in rows], marker="s", label="plain")
    right.set_ylabel("tokens/s (all rows)")
    right.legend()
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs, [str(c) for c in cs])
        ax.set_xlabel("concurrent chats")
        ax.grid(alpha=0.3)
    return _save(fig, path, title)


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m engine.bench.charts")
    parser.add_argument("kind", choices=["acceptance", "concurrency"])
    parser.add_argument("json", type=Path, help="a benchmark's --json output")
    parser.add_argument("png", type=Path)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    results = json.loads(args.json.read_text())["results"]
    chart = concurrency_chart if args.kind == "concurrency" else speedup_chart
    print(chart(results, args.png, title=args.title) or "nothing to chart")
