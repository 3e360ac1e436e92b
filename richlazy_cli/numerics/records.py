"""Where a run records its state: the one helper behind every model's record grid.

A record grid is ``0`` followed by ``count`` points up to ``last`` (docs/engine.md, "One
definition per concept"): geometric (``spacing = "log"``, from ``first``, default 1) or even
(``spacing = "linear"``, from 0). Integer grids (steps, epochs) are rounded and lose their
duplicates, so they may hold fewer than ``count + 1`` points; float grids (times) keep all.
Every model builds its grid here, from its ``n_records`` (the count) or ``records`` (explicit
points): the record vocabulary (docs/engine.md, "Records"), whose counts each family's
parameter documents.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def record_grid(last: float, count: int, *, first: float | None = None,
                spacing: str = "log", with_last: bool = False,
                explicit: Any = None) -> np.ndarray:
    """The record points of a run of length ``last`` (an int: integer steps; a float: times).

    ``explicit`` points, when given, are the grid (sorted, duplicates removed). Otherwise
    ``0``, then ``count`` points: ``log`` spaces them geometrically from ``first`` (1 for
    integers) to ``last``; ``linear`` evenly from 0, so ``count + 1`` points in all with 0
    included. Every grid with ``count ≥ 1`` ends at ``last``, so a run's horizon is its
    grid's last point: a ``log`` grid of one point is ``last`` alone (not ``first``).
    ``with_last`` appends ``last`` to an integer grid whatever ``count`` (so a ``count`` of 0
    gives ``0, last``). A run of length 0 records step 0 only.
    """
    if explicit is not None:
        return np.unique(np.asarray(explicit, dtype=np.int64))
    integer = isinstance(last, int | np.integer)
    if spacing == "linear" and not integer:
        return np.linspace(0.0, last, count + 1)
    if spacing == "linear":
        return np.unique(np.round(np.linspace(0, last, count + 1)).astype(np.int64))
    if spacing != "log":
        raise ValueError(f"unknown spacing {spacing!r}")
    if not integer:
        start = float(last if first is None else first)
        return np.concatenate([[0.0], _geometric(start, last, count)])
    if last == 0:
        return np.zeros(1, dtype=np.int64)
    logs = np.round(_geometric(1 if first is None else first, last, count)).astype(np.int64)
    return np.unique(np.concatenate([[0], logs, [last] if with_last else []]).astype(np.int64))


def _geometric(start: float, last: float, count: int) -> np.ndarray:
    """``count`` points geometrically from ``start`` to ``last``, the last one ``last``
    (``np.geomspace`` of one point gives ``start``)."""
    if count <= 1:
        return np.full(count, last, dtype=np.float64)
    return np.geomspace(start, last, count)
