"""What one matrix case found: every row's verdict against mlx_lm.generate alone, and the case's.

A row is right when its tokens equal the reference (with or without a `speculation_note`), or
when a speculating row was refused before it produced anything, by a message that names the
model and the method. Anything else fails the case: a wrong token, an error after tokens, an
error on a row that did not ask to speculate (a batch-wide failure), an unclear refusal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.requests import SpecMethod

EXACT, NOTED, REFUSED, WRONG, ERROR = "exact", "plain-with-note", "refused", "wrong", "error"
METHOD_WORDS = {  # a refusal names the method with one of these
    SpecMethod.PROMPT_LOOKUP: ("lookup",),
    SpecMethod.DRAFT_MODEL: ("draft",),
    SpecMethod.SYNTHETIC: ("synthetic",),
    SpecMethod.AUTO: ("auto", "speculat"),
}


@dataclass
class RowResult:
    """One request of a case and what became of it."""

    label: str  # e.g. "lookup k=3, prompt 13"
    method: str
    expected: list[int]
    got: list[int]
    verdict: str = EXACT
    message: str | None = None  # the error, refusal or speculation note
    cached_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.verdict in (EXACT, NOTED, REFUSED)

    def describe(self) -> str:
        if self.verdict == WRONG:
            i = first_difference(self.expected, self.got)
            want = self.expected[i] if i < len(self.expected) else "the end of the reply"
            have = self.got[i] if i < len(self.got) else "the end of the reply"
            return (
                f"{self.label}: wrong from token {i} of {len(self.expected)} "
                f"(expected {want}, got {have})"
            )
        if self.message:
            return f"{self.label}: {self.verdict}: {self.message}"
        return f"{self.label}: {self.verdict}"


@dataclass
class CaseOutcome:
    """A case of the matrix on one model folder."""

    arch: str
    variant: str  # "fp32" or "4bit"
    case: str
    rows: list[RowResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # beyond the rows (e.g. cached tokens)
    notes: list[str] = field(default_factory=list)  # what the model refused, with its reason
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems and all(r.ok for r in self.rows)

    @property
    def refused(self) -> list[RowResult]:
        return [r for r in self.rows if r.verdict in (REFUSED, NOTED)]

    def summary(self) -> str:
        """One line: what failed (first problems first), or what was refused or run plain."""
        bad = [r.describe() for r in self.rows if not r.ok] + self.problems
        if bad:
            return "; ".join(bad)
        return "; ".join([r.describe() for r in self.refused] + self.notes)

    def as_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "rows"},
            "passed": self.passed,
            "summary": self.summary(),
            "rows": [
                {k: v for k, v in asdict(r).items() if k not in ("expected", "got")}
                for r in self.rows
            ],
        }


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def judge(
    row: RowResult, *, finished: bool, note: str | None, error: str | None, names: list[str]
) -> None:
    """Set `row.verdict` from how its stream ended; `names` are the model's names a refusal
    must mention (folder or architecture)."""
    method = SpecMethod(row.method)
    if error is not None:
        row.message = error
        text = error.lower()
        clear = (
            method != SpecMethod.OFF
            and not row.got
            and any(n.lower() in text for n in names)
            and any(w in text for w in METHOD_WORDS[method])
        )
        row.verdict = REFUSED if clear else ERROR
    elif not finished:
        row.verdict, row.message = ERROR, "the stream ended without a result"
    elif row.got != row.expected:
        row.verdict = WRONG
    elif note:
        row.verdict, row.message = NOTED, note
