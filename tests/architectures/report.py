"""docs/architectures.md from the architecture matrix.

    python -m tests.architectures.report                   # run the whole matrix here, then write
    python -m tests.architectures.report --from-json       # use artifacts/architectures.json, as
                                                           # the pytest session wrote it
    python -m tests.architectures.report --known-failures  # also rewrite known_failures.py

One row per architecture: its cache types and, per case, ✓ (every row exact, fp32 and 4-bit) or
✗ with a numbered note saying which rows failed how; the failures grouped by cause; the
architectures that cannot be built small, with the reason.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.architectures.cases import make_cases
from tests.architectures.catalog import BY_NAME
from tests.architectures.run import DEFAULT_JSON, MatrixRun, matrix_cases, variant_skip

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DOC = ROOT / "docs" / "architectures.md"
KNOWN_FILE = Path(__file__).with_name("known_failures.py")


@dataclass(frozen=True)
class Failure:
    """A failed case of the matrix."""

    arch: str
    caches: tuple[str, ...]
    variant: str
    case: str
    summary: str

    @property
    def cause(self) -> str:
        """The engine fault it points at (the first of CAUSES that matches)."""
        return next((name for name, test in CAUSES if test(self)), "other")


CAUSES = (  # the first that matches names a failure's cause
    ("ArraysCache rollback", lambda f: "ArraysCache cannot roll back" in f.summary),
    ("CacheList rollback", lambda f: "CacheList cannot roll back" in f.summary),
    (
        "a cache class the batch cannot merge (ChunkedKVCache, LayerCache)",
        lambda f: "attribute 'merge'" in f.summary,
    ),
    ("gemma2: mlx-lm's attention cannot take a batch mask", lambda f: f.arch == "gemma2"),
    (
        "gpt_bigcode: mlx-lm makes its position ids from one scalar cache offset",
        lambda f: "Only length-1 arrays can be converted" in f.summary,
    ),
    (
        "longcat_flash_ngram: a short prompt's n-gram context does not merge into the batch",
        lambda f: "[concatenate]" in f.summary,
    ),
    (
        "plamo3: mlx-lm's own output depends on how tokens are chunked (it masks window + 1 "
        "positions over a cache of window)",
        lambda f: f.arch == "plamo3",
    ),
    (
        "afm7: its KV-reuse layers go wrong for left-padded rows (rows of different lengths; "
        "the wrong token can differ from run to run)",
        lambda f: f.arch == "afm7",
    ),
    (
        "prompt cache: a turn that ended with EOS past the sliding window is not stored",
        lambda f: (
            f.case == "prompt_cache"
            and ": 0 cached tokens" in f.summary
            and any("RotatingKVCache" in c for c in f.caches)
            and all(c in ("KVCache", "RotatingKVCache") for c in f.caches)
        ),
    ),
    (
        "prompt cache stores nothing",
        lambda f: f.case == "prompt_cache" and ": 0 cached tokens" in f.summary,
    ),
    (
        "sliding window: a short row joining a rotated batch",
        lambda f: any("RotatingKVCache" in c for c in f.caches) and "wrong from token" in f.summary,
    ),
)


def run_matrix() -> dict[str, Any]:
    logging.disable(logging.CRITICAL)  # each failure is in its outcome; progress goes to stderr
    run = MatrixRun()
    run.plan(matrix_cases())
    try:
        for i, (arch, variant, case) in enumerate(matrix_cases()):
            if variant_skip(BY_NAME[arch], variant):
                continue
            outcome = run.outcome(arch, variant, case)
            mark = "ok" if outcome.passed else "FAILED"
            print(f"[{i}] {arch} {variant} {case}: {mark}", file=sys.stderr, flush=True)
        run.write_json()
        return run.as_json()
    finally:
        run.close()


def failures(data: dict[str, Any]) -> list[Failure]:
    out = []
    for a in data["architectures"]:
        for variant, v in a["variants"].items():
            for case, o in v["cases"].items():
                if not o["passed"]:
                    caches = tuple(a.get("caches", ()))
                    out.append(Failure(a["name"], caches, variant, case, o["summary"]))
    return out


def _cell(a: dict[str, Any], case: str, titles: dict[str, str], notes: list[str]) -> str:
    bad, marks = [], set()
    for variant, v in a["variants"].items():
        o = v["cases"].get(case)
        if v["skipped"] or o is None:
            continue
        if not o["passed"]:
            bad.append((variant, o["summary"]))
        for r in o["rows"]:
            if r["verdict"] in ("refused", "plain-with-note"):
                marks.add("refused" if r["verdict"] == "refused" else "plain")
        if o.get("notes"):
            marks.add("refused")
    if not bad:
        ran = any(case in v["cases"] for v in a["variants"].values())
        return ("✓" + (f" ({', '.join(sorted(marks))})" if marks else "")) if ran else "–"
    if len(bad) == 2 and bad[0][1] == bad[1][1]:
        text = f"fp32 and 4-bit: {bad[0][1]}"
    else:
        text = "; ".join(f"{variant}: {summary}" for variant, summary in bad)
    notes.append(f"{a['name']}, {titles[case].lower()}: {text}")
    only = f" ({bad[0][0]})" if len(bad) == 1 else ""
    return f"✗{only} [{len(notes)}](#n{len(notes)})"


def _partial(data: dict[str, Any]) -> list[str]:
    """A warning line when the run behind `data` left cases out (e.g. pytest -k)."""
    wanted = [k for k in matrix_cases() if not variant_skip(BY_NAME[k[0]], k[1])]
    ran = sum(len(v["cases"]) for a in data["architectures"] for v in a["variants"].values())
    if ran >= len(wanted):
        return []
    return [f"**Partial run: {ran} of {len(wanted)} cases ran (– marks the others).**", ""]


def render(data: dict[str, Any]) -> str:
    cases = make_cases(lambda p, n: [], lambda p, n: [])  # titles and descriptions only
    titles = {name: case.title for name, case in cases.items()}
    archs = data["architectures"]
    built = [a for a in archs if not a["unbuildable"]]
    fails = failures(data)
    notes: list[str] = []
    lines = [
        "# Architectures",
        "",
        "Generated by `python -m tests.architectures.report` from the architecture matrix",
        "(tests/engine/test_architecture_matrix.py). A tiny random model of every architecture in",
        "mlx-lm's `models/` that a small config can build (tests/architectures/catalog.py: hidden",
        "64, 2 layers or 4 where a layer pattern needs them, 4 experts, sliding windows of 8,",
        "the default model's tokenizer cut to 1024 tokens) is saved as a model folder in fp32 and",
        "as a 4-bit copy, run through `engine.api.Engine` and compared on every row with",
        "`mlx_lm.generate` alone (greedy, the same prefill step).",
        "",
        "Cases:",
        "",
        *[f"- **{c.title}**: {c.description}." for c in cases.values()],
        "",
        '✓: every row exact in fp32 and 4-bit (with "refused": a speculating row was refused at',
        "once by a message naming the model and the method, or the model said why it uses no",
        'prompt cache; with "plain": it ran without speculation and said why). ✗: a wrong token',
        "or an error; the note names the rows, the first wrong position, or the message; (fp32)",
        "or (4bit): only that copy failed.",
        "",
        *_partial(data),
        f"{len(built)} architectures built, {len(archs) - len(built)} not buildable small;",
        f"{len(fails)} failing cases. The matrix took {data['seconds']:.0f} s on this machine",
        f"({platform.machine()}, {platform.system()}, {os.cpu_count()} cores).",
        "",
        "| Architecture | Caches | " + " | ".join(titles[c] for c in data["cases"]) + " |",
        "|" + " --- |" * (len(data["cases"]) + 2),
    ]
    for a in built:
        cells = [_cell(a, c, titles, notes) for c in data["cases"]]
        lines.append(f"| {a['name']} | {', '.join(a['caches'])} | " + " | ".join(cells) + " |")
    lines += ["", "## Failures by cause", ""]
    for name, items in by_cause(fails).items():
        lines.append(f"- **{name}** ({len(items)} cases): {_compact(items, titles)}")
    if not fails:
        lines.append("None: every case of every architecture built passes.")
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f'<a id="n{i}"></a>{i}. {n}' for i, n in enumerate(notes, 1)]
    lines += ["", "## Not buildable small", "", "| Architecture | Why |", "| --- | --- |"]
    lines += [f"| {a['name']} | {a['unbuildable']} |" for a in archs if a["unbuildable"]]
    for a in archs:
        skip = a["variants"].get("4bit", {}).get("skipped")
        if not a["unbuildable"] and skip:
            lines.append(f"| {a['name']} (4-bit copy only) | {skip} |")
    return "\n".join(lines) + "\n"


def by_cause(fails: list[Failure]) -> dict[str, list[Failure]]:
    """The failures grouped by cause, in the order of CAUSES ("other" last)."""
    order = [name for name, _ in CAUSES] + ["other"]
    grouped: dict[str, list[Failure]] = {}
    for f in sorted(fails, key=lambda f: order.index(f.cause)):
        grouped.setdefault(f.cause, []).append(f)
    return grouped


def _compact(items: list[Failure], titles: dict[str, str]) -> str:
    """ "arch (case, case [fp32 only]); ..." for a list of failures."""
    per_arch: dict[str, dict[str, list[str]]] = {}
    for f in items:
        per_arch.setdefault(f.arch, {}).setdefault(f.case, []).append(f.variant)
    parts = []
    for arch, cases in per_arch.items():
        both = not variant_skip(BY_NAME[arch], "4bit")  # else the fp32 copy is the only one
        shown = [
            titles[c].lower() + (f" [{v[0]} only]" if both and len(v) == 1 else "")
            for c, v in cases.items()
        ]
        parts.append(f"{arch} ({', '.join(shown)})")
    return "; ".join(parts)


def known_failures_source(data: dict[str, Any]) -> str:
    """known_failures.py holding today's failures, grouped by cause."""
    out = [
        '"""Cases of the architecture matrix that fail today, by cause, each with its exact',
        "failure (wrong tokens: the row, the first wrong position, expected and got; errors: the",
        "message). The matrix marks them xfail(strict=True): when a fix lands, the case passes, the",
        "strict xfail fails, and its entry is removed here. Written by",
        '`python -m tests.architectures.report --known-failures` from a run of the matrix."""',
        "",
        "# fmt: off",
        "KNOWN_FAILURES: dict[tuple[str, str, str], str] = {",
    ]
    for name, items in by_cause(failures(data)).items():
        out.append(f"    # {name}: {len(items)} cases")
        for f in items:
            out.append(f"    {(f.arch, f.variant, f.case)!r}: {f'{name}: {f.summary}'!r},")
    out += ["}", "# fmt: on"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-json", nargs="?", const=str(DEFAULT_JSON), default=None)
    parser.add_argument("--out", default=str(DEFAULT_DOC))
    parser.add_argument("--known-failures", action="store_true")
    args = parser.parse_args(argv)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
    else:
        data = run_matrix()
    Path(args.out).write_text(render(data), encoding="utf-8")
    print(f"wrote {args.out}")
    if args.known_failures:
        KNOWN_FILE.write_text(known_failures_source(data), encoding="utf-8")
        print(f"wrote {KNOWN_FILE}")


if __name__ == "__main__":
    main()
