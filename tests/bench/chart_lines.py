"""The lines a chart draws, recorded as (label, y values) while matplotlib draws them."""

from __future__ import annotations

import pytest


def record_lines(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, list]]:
    """Every `Axes.plot` call from now on, as (label, y values), still drawn."""
    import matplotlib.axes

    drawn: list[tuple[str | None, list]] = []
    plot = matplotlib.axes.Axes.plot

    def recorded(ax, xs, ys, **kw):
        drawn.append((kw.get("label"), list(ys)))
        return plot(ax, xs, ys, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", recorded)
    return drawn
