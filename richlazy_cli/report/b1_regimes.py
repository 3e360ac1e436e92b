"""The Theorem B.1 regimes figure, drawn from several result files together.

:func:`b1_regimes_figure`: Kunin et al. (2024), Theorem B.1 (docs/azulay-theory.md §4). From
``linear`` ``solve`` files with the per-neuron initialisation and a grid over ``delta``, one per
network shape (``jobs/linear-b1-*.toml``), the kernel distance S(0, t) over time, one panel per
shape -- narrowing (d > c, min(d, c) <= h < max(d, c)), expanding (d < c, same h) and wide
(h >= max(d, c)) -- one line per δ, the mean over every other grid dimension.

:func:`b1_figures` returns it as a report entry for the ``linear`` ``solve`` files of a report;
``report/families.py`` declares it under that family and action (the files reach it already
chosen by family, so nothing here tests a model's name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .data import ResultFile
from .style import new_figure, save

SHAPES = ("narrowing", "expanding", "wide")


def classify(d: int, c: int, h: int) -> str | None:
    """Theorem B.1's shape class of a two-layer linear network, or None (a bottleneck
    h < min(d, c), or d = c with h < d)."""
    if h >= max(d, c):
        return "wide"
    if min(d, c) <= h < max(d, c):
        return "narrowing" if d > c else "expanding"
    return None


def _shape(rf: ResultFile) -> tuple[int, int, int] | None:
    try:
        return int(rf.params["d"]), int(rf.params["c"]), int(rf.params["h"])
    except (KeyError, TypeError, ValueError):
        return None


def b1_applies(rf: ResultFile) -> bool:
    """A ``linear`` ``solve`` file (as chosen by ``report/families.py``) with
    ``init = "neuron"``, a grid over ``delta`` and a shape of Theorem B.1 (the sizes d, c, h
    fix the output's dimensions, so each shape is one file)."""
    shape = _shape(rf)
    return (rf.params.get("init") == "neuron" and "kernel_distance" in rf.ds
            and "delta" in rf.grid and shape is not None and classify(*shape) is not None)


def b1_regimes_figure(files: list[ResultFile], path: Path, fmt: str) -> str:
    """Draw the Theorem B.1 figure of ``files`` (one panel each, ordered narrowing, expanding,
    wide) into ``path``; returns the caption."""
    order = sorted(files, key=lambda rf: SHAPES.index(classify(*_shape(rf))))  # type: ignore[misc]
    fig = new_figure(height=3.2, width=3.4 * len(order))
    axes = fig.subplots(1, len(order), sharey=True, squeeze=False)[0]
    for ax, rf in zip(axes, order, strict=True):
        S = rf.masked("kernel_distance")
        for delta in [v.item() for v in rf.ds["delta"].values]:
            line = S.sel({"delta": delta})
            other = [dim for dim in line.dims if dim != "time"]
            line = line.mean(other) if other else line
            t = line["time"].values
            values = np.clip(line.values, 1e-12, None)
            color = "black" if delta == 0 else ("tab:blue" if delta > 0 else "tab:red")
            ax.plot(t[1:], values[1:], "-" if delta >= 0 else "--", color=color,
                    label=f"δ = {delta:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        d, c, h = _shape(rf)  # type: ignore[misc]
        ax.set_title(f"{classify(d, c, h)} (d={d}, c={c}, h={h})")
        ax.set_xlabel("gradient-flow time")
    axes[0].set_ylabel("kernel distance S(0, t)")
    axes[-1].legend(loc="lower right")
    save(fig, path, fmt)
    return (
        "Theorem B.1 (Kunin et al. 2024): kernel distance S(0, t) per network shape, one line "
        "per δ (mean over the other grid dimensions). Narrowing networks are lazy for δ ≫ 0 "
        "and delayed rich for δ ≪ 0, expanding networks the reverse, wide ones lazy for both; "
        "δ = 0 is rich"
    )


def b1_figures(files: list[ResultFile], out_dir: Path, fmt: str,
               fields: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The Theorem B.1 figure of the ``linear`` ``solve`` files ``files`` as a report entry
    (none when no file is one of its shapes)."""
    b1 = [rf for rf in files if b1_applies(rf)]
    if not b1:
        return []
    name = f"{b1[0].stem}-theory-b1_regimes.{fmt}"
    text = b1_regimes_figure(b1, out_dir / name, fmt)
    sources = "; ".join(f"{rf.stem} (created {fields[rf.stem].get('created', '?')})"
                        for rf in b1)
    return [{"file": name, "kind": "theory", "var": "kernel_distance",
             "source": ", ".join(str(rf.path) for rf in b1), "caption": f"{text}. {sources}.",
             "stem": b1[0].stem, "missing": 0}]
