"""argparse `type=` checks for the benchmarks' numbers: a value out of range is a usage error."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _integer(text: str, wanted: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None


def _number(text: str, wanted: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    # nan passes no bound check and inf none of the arithmetic after it
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return value


def int_range(low: int, high: int | None = None, *, hint: str = "") -> Callable[[str], int]:
    """A type for integers from `low` to `high` (None: no upper bound); `hint` ends the message."""
    wanted = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(text: str) -> int:
        value = _integer(text, wanted)
        if value < low or (high is not None and value > high):
            more = f" ({hint})" if hint else ""
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {value}{more}")
        return value

    return parse


def float_at_least(low: float) -> Callable[[str], float]:
    """A type for finite numbers >= `low`."""
    wanted = f"a number >= {low:g}"

    def parse(text: str) -> float:
        value = _number(text, wanted)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
        return value

    return parse


def positive_int(text: str) -> int:
    """An integer >= 1: a count of tokens, rows, prompts, repeats."""
    return int_range(1)(text)


def non_negative_int(text: str) -> int:
    """An integer >= 0: a context length or a count where 0 is meaningful."""
    return int_range(0)(text)


def positive_float(text: str) -> float:
    """A finite number > 0: a time budget, a learning rate."""
    value = _number(text, "a number > 0")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0: a temperature."""
    return float_at_least(0.0)(text)


def fraction(text: str) -> float:
    """A number from 0 to 1: a probability or an acceptance rate."""
    value = _number(text, "a number from 0 to 1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text}")
    return value
