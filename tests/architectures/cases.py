"""The matrix's cases as data: the rows each submits, in batches, and what it proves.

Every prompt starts with its own token, so no case finds another's prompts in the prompt cache.
Lengths straddle the sliding window (8): inside it (3, 6), just past it (13), far past it (29).
Rows of a batch are admitted in the same engine step, so the cases are deterministic: a late
join is made by queueing short prompts behind a long prompt's chunks while two rows decode.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from engine.requests import SpecMethod
from tests.architectures.build import WINDOW
from tests.architectures.tokenizer import TINY_VOCAB

PREFILL_CHUNK = 16  # the engine's and mlx_lm.generate's: the longer prompts span chunks
MAX_TOKENS = 12
FIRST_ID = 32  # prompts use ids past the special tokens (EOS would end a reply at once)
SHORT, INSIDE, PAST, LONG = 3, WINDOW - 2, 2 * WINDOW - 3, 3 * WINDOW + 5
QUEUE = 6 * PREFILL_CHUNK  # a prompt whose chunks take several steps

OFF, LOOKUP, SYNTHETIC = SpecMethod.OFF, SpecMethod.PROMPT_LOOKUP, SpecMethod.SYNTHETIC
DRAFT, AUTO = SpecMethod.DRAFT_MODEL, SpecMethod.AUTO


@dataclass(frozen=True)
class Row:
    """One request of a case: its prompt and how it speculates."""

    prompt: tuple[int, ...]
    method: SpecMethod = OFF
    k: int = 0
    acceptance: float = 0.0  # the synthetic drafter's
    max_tokens: int = MAX_TOKENS

    @property
    def label(self) -> str:
        kind = self.method.value
        if self.method == SYNTHETIC:
            kind += f" p={self.acceptance}"
        if self.k:
            kind += f" k={self.k}"
        return f"{kind}, prompt {len(self.prompt)}"


@dataclass(frozen=True)
class Case:
    """Batches of rows submitted one after the other (each batch at once)."""

    name: str
    title: str
    description: str
    batches: tuple[tuple[Row, ...], ...]
    draft_model: bool = False  # the folder drafts for itself during the case
    cached_tokens: int | None = None  # the last batch's first row restores this many


def prompt(case: int, row: int, length: int, *, repeats: bool = False) -> tuple[int, ...]:
    """A random prompt whose first token is this (case, row)'s own; `repeats` repeats its first
    half, so prompt lookup finds drafts."""
    rng = random.Random(1000 * case + row)
    first = FIRST_ID + 16 * case + row
    if not repeats:
        return (first, *(rng.randrange(FIRST_ID, TINY_VOCAB) for _ in range(length - 1)))
    part = [first, *(rng.randrange(FIRST_ID, TINY_VOCAB) for _ in range(length // 2 - 1))]
    return tuple((part * 3)[:length])


def make_cases(
    reply: Callable[[tuple[int, ...], int], list[int]],
    turn: Callable[[tuple[int, ...], int], list[int]],
) -> dict[str, Case]:
    """Every case; `reply` is mlx_lm.generate's reply, `turn` the same as a next turn's prompt
    holds it (with the end-of-sequence token that ended it, if one did)."""
    mix = [
        (OFF, 0, 0.0),
        (LOOKUP, 3, 0.0),
        (SYNTHETIC, 4, 0.5),
        (SYNTHETIC, 6, 0.9),
        (AUTO, 5, 0.0),
    ]
    mix_lengths = (LONG, SHORT, PAST, LONG + 4, INSIDE)
    turn1 = prompt(5, 0, PAST + 4)
    turn2 = (*turn1, *turn(turn1, MAX_TOKENS), *prompt(5, 1, 5))
    cases = [
        Case(
            "plain",
            "Plain",
            "four prompts of 3 to 29 tokens in one batch, no speculation",
            (
                (
                    Row(prompt(0, 0, SHORT)),
                    Row(prompt(0, 1, INSIDE)),
                    Row(prompt(0, 2, PAST)),
                    Row(prompt(0, 3, LONG)),
                ),
            ),
        ),
        Case(
            "lookup",
            "Lookup",
            "prompt lookup (k 2 to 5) on four repetitive prompts in one batch",
            (
                tuple(
                    Row(prompt(1, i, n, repeats=True), LOOKUP, k=2 + i)
                    for i, n in enumerate((INSIDE, PAST, LONG, LONG + 6))
                ),
            ),
        ),
        Case(
            "mix",
            "Mix",
            "off, lookup, synthetic drafts at acceptance 0.5 and 0.9 and auto in one batch",
            (
                tuple(
                    Row(prompt(2, i, n, repeats=True), m, k=k, acceptance=p)
                    for i, (n, (m, k, p)) in enumerate(zip(mix_lengths, mix))
                ),
            ),
        ),
        Case(
            "late_join",
            "Late join",
            "a plain and two lookup rows with short prompts (inside their window) join two rows "
            "that are mid-reply and past their window; lookup rounds with and without drafts "
            "alternate around them",
            (
                (
                    Row(prompt(3, 0, LONG), max_tokens=2 * MAX_TOKENS),
                    Row(prompt(3, 1, LONG, repeats=True), LOOKUP, 2, max_tokens=2 * MAX_TOKENS),
                    Row(
                        prompt(3, 2, QUEUE), max_tokens=MAX_TOKENS // 2
                    ),  # holds the next ones back
                    Row(prompt(3, 3, SHORT)),
                    Row(prompt(3, 4, INSIDE, repeats=True), LOOKUP, 3),
                    Row(prompt(3, 5, SHORT + 2), LOOKUP, 1),
                ),
            ),
        ),
        Case(
            "draft",
            "Draft model",
            "the folder drafts for itself (k 4 and 2) next to a plain and an auto row",
            (
                (
                    Row(prompt(4, 0, LONG, repeats=True), DRAFT, 4),
                    Row(prompt(4, 1, SHORT, repeats=True), DRAFT, 2),
                    Row(prompt(4, 2, PAST, repeats=True)),
                    Row(prompt(4, 3, INSIDE, repeats=True), AUTO, 3),
                ),
            ),
            draft_model=True,
        ),
        Case(
            "prompt_cache",
            "Prompt cache",
            "a chat's next turn (the first prompt, its reply and 5 new tokens) restores the first "
            "turn's prompt and reply from the prompt cache and gives the cold reply",
            ((Row(turn1),), (Row(turn2),)),
            cached_tokens=len(turn2) - 5,
        ),
    ]
    return {c.name: c for c in cases}


CASES = ("plain", "lookup", "mix", "late_join", "draft", "prompt_cache")
