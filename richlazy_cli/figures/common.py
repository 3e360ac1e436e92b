"""What every paper figure shares: the built figure, categorical and floored axes, the text
checks the tests and the gallery run (docs/figures.md).

A builder (one per registered figure, :mod:`.registry`) takes the loaded result files and
returns a :class:`Built`: the matplotlib figure, drawn as the paper lays it out, and the
*measured value* that tests the paper's claim, as numbers and as one sentence for the caption.
Numbers live in the caption, never in a title (a title holds a panel's setting only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FuncFormatter

from ..errors import BadInput
from ..report.data import ResultFile
from ..report.style import new_figure

__all__ = ["Built", "categorical", "check_text", "find", "layout", "log_floor", "new_figure",
           "overflowing_text", "plain_math"]

FLOOR = 1e-12
"""Loss-like values below this are integrator round-off, not dynamics: log axes stop here."""


@dataclass
class Built:
    """A drawn paper figure and the measured value testing its claim."""

    fig: Figure
    measured: dict[str, Any]
    text: str
    notes: list[str] = field(default_factory=list)


def find(files: Sequence[ResultFile], model: str, need: Sequence[str] = (),
         grid: Sequence[str] = (), figure: str = "") -> ResultFile:
    """The first file of ``model`` holding every variable of ``need`` and grid dimension of
    ``grid``; a BadInput naming what is missing otherwise."""
    for rf in files:
        if rf.model == model and all(v in rf.ds for v in need) \
                and all(g in rf.ds.dims for g in grid):
            return rf
    what = ", ".join([*need, *(f"a grid over {g}" for g in grid)]) or "its outputs"
    raise BadInput(f"figure {figure}: needs a {model} result with {what} "
                   f"(given: {', '.join(rf.path.name for rf in files) or 'no file'})")


def categorical(ax: Axes, values: Sequence[Any], which: str = "x", label: str = "",
                fmt: str = "{:g}") -> np.ndarray:
    """Put the listed ``values`` at positions 0..n-1 of a categorical axis, ticks labelled by
    value; returns the positions. A list grid such as τ ∈ {0.1, 2} is two categories, not an
    interval (a continuous axis would give its τ = 0.1 cell negative τ)."""
    pos = np.arange(len(values), dtype=float)
    texts = [fmt.format(v) if isinstance(v, int | float | np.number) else str(v)
             for v in values]
    if which == "x":
        ax.set_xticks(pos, texts)
        ax.set_xlim(-0.5, len(values) - 0.5)
        if label:
            ax.set_xlabel(label)
    else:
        ax.set_yticks(pos, texts)
        ax.set_ylim(-0.5, len(values) - 0.5)
        if label:
            ax.set_ylabel(label)
    return pos


def log_floor(ax: Axes, values: Any, floor: float = FLOOR, which: str = "y") -> None:
    """A log axis that stops at ``floor`` (or at the smallest value above it): loss curves
    that fall to 1e-40 round-off do not flatten the dynamics above it."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if which == "y":
        ax.set_yscale("log")
    else:
        ax.set_xscale("log")
    if v.size:
        lo, hi = max(float(v.min()), floor), float(v.max())
        lim = (lo / 2.0, hi * 2.0) if hi > lo else (lo / 10.0, lo * 10.0)
        (ax.set_ylim if which == "y" else ax.set_xlim)(*lim)


# -- checks of the drawn text (tests and gallery) ---------------------------------------------
_MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
_GREEK = re.compile(r"\b(alpha|beta|gamma|delta|eta|theta|kappa|lambda|mu|nu|phi|psi|rho|"
                    r"sigma|tau|upsilon|zeta)\b")
_PLAIN = re.compile(r"(\|\||[A-Za-z0-9)\]]_[A-Za-z0-9{]|\^[0-9A-Za-z{T*]|\\[a-zA-Z]+)")


def plain_math(text: str) -> list[str]:
    """Pieces of ``text`` outside ``$…$`` that look like untypeset mathematics (``a_k``,
    ``||w||``, ``w^T``, a Greek letter's name, a TeX command); empty when all is typeset."""
    outside = _MATH.sub(" ", text)
    return [m.group(0) for m in _PLAIN.finditer(outside)] + \
        [m.group(0) for m in _GREEK.finditer(outside)]


def _texts(fig: Figure) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    # the title Text objects are private attributes: matplotlib's getters give only strings
    suptitle = fig._suptitle  # type: ignore[attr-defined]
    if suptitle is not None:
        out.append(("suptitle", suptitle))
    for legend in fig.legends:
        out += [("legend", t) for t in legend.get_texts()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        side_titles = (ax._left_title, ax._right_title)  # type: ignore[attr-defined]
        out += [("title", t) for t in (ax.title, *side_titles)]
        out += [("xlabel", ax.xaxis.label), ("ylabel", ax.yaxis.label)]
        ax_legend = ax.get_legend()
        if ax_legend is not None:
            out += [("legend", t) for t in ax_legend.get_texts()]
    return [(k, t) for k, t in out if t.get_text() and t.get_visible()]


def check_text(fig: Figure) -> list[str]:
    """Every label, title and legend entry with untypeset mathematics, as ``kind: text``."""
    return [f"{kind}: {t.get_text()!r} ({', '.join(plain_math(t.get_text()))})"
            for kind, t in _texts(fig) if plain_math(t.get_text())]


def overflowing_text(fig: Figure) -> list[str]:
    """Titles, labels and legend entries whose rendered extent leaves the figure (measured
    with the Agg renderer after a full draw, so constrained layout has placed everything)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig) if fig.canvas is None or not hasattr(
        fig.canvas, "get_renderer") else fig.canvas
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    bad = []
    for kind, t in _texts(fig):
        box = t.get_window_extent(renderer)
        if box.x0 < -1 or box.x1 > width + 1 or box.y0 < -1 or box.y1 > height + 1:
            bad.append(f"{kind}: {t.get_text()!r} spans x {box.x0:.0f}..{box.x1:.0f} of "
                       f"{width:.0f} px")
    return bad


def _axis_kind(ax: Axes, which: str) -> str:
    axis = ax.xaxis if which == "x" else ax.yaxis
    if axis.get_scale() == "log":
        return "log"
    # categories: ticks at 0, 1, ..., n-1 labelled by values that are not those positions
    ticks = np.asarray(axis.get_majorticklocs(), dtype=float)
    if ticks.size and np.allclose(ticks, np.arange(ticks.size)):
        formatter = axis.get_major_formatter()
        labels = [formatter(t, i) for i, t in enumerate(ticks)]
        if isinstance(formatter, FixedFormatter | FuncFormatter) and any(
                lab.replace("−", "-").strip("$") not in (f"{t:g}", f"{t:.1f}")
                for lab, t in zip(labels, ticks, strict=True)):
            return "categorical"
    return "linear"


def is_colorbar(ax: Axes) -> bool:
    return hasattr(ax, "_colorbar")


def layout(fig: Figure) -> dict[str, Any]:
    """The panels (visible axes that are not colour bars or 3-D insets' helpers): their count,
    labels and axis kinds (``categorical``, ``log`` or ``linear``)."""
    panels = [ax for ax in fig.axes if ax.get_visible() and not is_colorbar(ax)]
    return {
        "panels": len(panels),
        "xlabels": [ax.get_xlabel() for ax in panels],
        "ylabels": [ax.get_ylabel() for ax in panels],
        "x": [_axis_kind(ax, "x") for ax in panels],
        "y": [_axis_kind(ax, "y") for ax in panels],
    }


def seed_note(rf: ResultFile, sel: dict[str, int]) -> list[str]:
    if "seed" in rf.ds.dims:
        sel["seed"] = 0
        return [f"seed {int(rf.ds['seed'].values[0])} of {rf.ds.sizes['seed']}"]
    return []


def values(rf: ResultFile, dim: str) -> list[float]:
    return [float(v) for v in np.asarray(rf.ds[dim].values, dtype=float)]


def fmt(x: float, digits: int = 3) -> str:
    """A number for a caption: ``4.72e-09``, never truncated."""
    if not np.isfinite(x):
        return "n/a"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"
