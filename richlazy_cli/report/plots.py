"""The figures: phase diagrams, learning curves and line plots, theory overlays.

Each ``draw_*`` function takes a loaded :class:`~.data.ResultFile` and one variable, reduces
it to the figure's axes with :func:`~.data.select` (failed points masked first, see
:mod:`.data`), and returns a :class:`Drawn`: the matplotlib figure plus the notes that go into
its caption. Nothing is saved here; :mod:`.build` names and saves the figures.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from ..mathtext import symbol
from .data import ResultFile, format_value, is_log_spaced, label, reduce_seed, select
from .style import (
    MISSING_FACE,
    MISSING_HATCH,
    WIDTH,
    edges,
    is_magnitude,
    new_figure,
    value_scale,
    wants_log,
)

HATCH = "////"
TITLE_CHARS, X_CHARS, Y_CHARS = 60, 55, 38  # what fits a 3.4 in x 2.4 in figure at 7-8 pt
MAX_LINES = 8  # a grid dimension with more values is thinned to SHOWN_LINES evenly spaced ones
SHOWN_LINES = 6
EXACT = re.compile(r"exact|theory|analytic|closed", re.IGNORECASE)
_HAS_HATCHCOLOR = "hatchcolor" in inspect.signature(Patch.__init__).parameters


@dataclass
class Drawn:
    """A drawn figure and what its caption should say about it."""

    fig: Figure
    description: str
    notes: list[str] = field(default_factory=list)
    missing: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _hatch(**kwargs: Any) -> dict[str, Any]:
    out = {"facecolor": MISSING_FACE, "hatch": HATCH, "linewidth": 0, **kwargs}
    if _HAS_HATCHCOLOR:
        out["hatchcolor"] = MISSING_HATCH
    else:  # older matplotlib takes the hatch colour from the edge colour
        out["edgecolor"] = MISSING_HATCH
    return out


def _coord(da: xr.DataArray, dim: str) -> np.ndarray:
    if dim in da.coords:
        return np.asarray(da[dim].values)
    return np.arange(da.sizes[dim])


def _coord_label(rf: ResultFile, dim: str) -> str:
    if dim in rf.ds.coords:
        return label(rf.ds[dim], dim, math=True)
    return symbol(dim) or dim


def _sorted(da: xr.DataArray, *dims: str) -> xr.DataArray:
    for dim in dims:
        if dim in da.coords and np.issubdtype(da[dim].dtype, np.number):
            da = da.sortby(dim)
    return da


_MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
_KEEP = "\u00a0"  # a no-break space while wrapping: a formula is never split across lines


def _fill(text: str, width: int) -> str:
    """Wrap a label onto lines of at most ``width`` characters (matplotlib does not), never
    inside a ``$…$`` formula (a split formula is not mathtext and prints raw)."""
    protected = _MATH.sub(lambda m: m.group(0).replace(" ", _KEEP), text)
    wrapped = textwrap.fill(protected, width, break_long_words=False, break_on_hyphens=False)
    return wrapped.replace(_KEEP, " ")


def _title(ax: Any, name: str, notes: list[str]) -> None:
    """The panel's title: the variable's name in words; its selections and every number go
    into the caption (a title never clips)."""
    ax.set_title(_fill(_name_text(name), TITLE_CHARS), fontsize=7)


def _name_text(name: str) -> str:
    """A variable's name for a title: its symbol when it is a Greek letter (``nu`` → ν),
    else its words (``kernel_distance`` → kernel distance)."""
    return symbol(name) or name.replace("_", " ")


def _group_label(group: str, value: Any) -> str:
    """A legend entry ``$\\tau = 0.1$`` (``group = value`` when the name is not a symbol)."""
    sym = symbol(group) or (f"${group}$" if len(group) == 1 and group.isalpha() else None)
    if sym is not None:
        return f"{sym[:-1]} = {_short(value)}$"
    return f"{group.replace('_', ' ')} = {_short(value)}"


FLOOR = 1e-12  # a log value axis shows at most this many decades below its largest value


def _clip_outliers(ax: Any, values: np.ndarray, notes: list[str]) -> None:
    """A linear value axis whose extremes are spikes (a ratio such as ν = wᵀβ*/a diverges
    where a crosses 0) is limited to the 2-98 % range of the values, padded, with a caption
    note, so that the spikes do not flatten every other curve."""
    v = values[np.isfinite(values)]
    if v.size < 20:
        return
    lo, hi = np.percentile(v, [2, 98])
    if hi > lo and (v.max() - v.min()) > 5.0 * (hi - lo):
        pad = 0.15 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)
        notes.append("value axis limited to the 2–98 % range of the values (spikes beyond)")


def _clip_log(ax: Any, values: np.ndarray) -> None:
    """Stop a log value axis 12 decades below the largest value (integrator round-off, e.g.
    a loss at 1e-42, would flatten every curve above it)."""
    v = values[np.isfinite(values) & (values > 0)]
    if v.size:
        lo, hi = float(v.min()), float(v.max())
        if lo < hi * FLOOR:
            ax.set_ylim(bottom=hi * FLOOR)


def is_categorical(rf: ResultFile, dim: str) -> bool:
    """Whether a grid dimension is a list of values to draw as categories: a ``list`` grid
    (``tau = "0.1,2"``) that is neither evenly nor log-evenly spaced with three or more values.
    Two listed values are always categories: a cell around τ = 0.1 on a continuous axis would
    span negative τ."""
    if dim not in rf.ds.coords or str(rf.ds[dim].attrs.get("spacing", "")) != "list":
        return False
    v = np.asarray(rf.ds[dim].values, dtype=float)
    if v.size <= 2:
        return True
    return not is_log_spaced(rf, dim) and not np.allclose(np.diff(v), np.diff(v)[0])


# -- phase diagrams -------------------------------------------------------------------------
def draw_phase(
    rf: ResultFile,
    name: str,
    x: str,
    y: str,
    at: dict[str, int],
    reduce: str,
    contours: bool = False,
) -> Drawn:
    """Heatmap of ``name`` over (``x``, ``y``); missing cells hatched grey, never interpolated.

    Each grid point is one cell (``pcolormesh`` with flat shading, edges at the midpoints of
    neighbouring coordinates, geometric midpoints on a log axis). Missing cells are masked, so
    the hatched grey patch behind the mesh shows through them.
    """
    da, notes = select(rf, rf.masked(name), (x, y), at, reduce)
    da = _sorted(da.transpose(y, x), x, y)
    xc, yc = _coord(da, x).astype(float), _coord(da, y).astype(float)
    logx, logy = is_log_spaced(rf, x), is_log_spaced(rf, y)
    z = np.ma.masked_invalid(np.asarray(da.values, dtype=float))
    norm, cmap = value_scale(
        z.filled(np.nan), is_magnitude(name, str(rf.ds[name].attrs.get("long_name", "")))
    )

    catx, caty = is_categorical(rf, x), is_categorical(rf, y)
    logx, logy = logx and not catx, logy and not caty
    xp = np.arange(xc.size, dtype=float) if catx else xc  # cell centres as drawn
    yp = np.arange(yc.size, dtype=float) if caty else yc
    fig = new_figure()
    ax = fig.add_subplot()
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    xe, ye = edges(xp, logx), edges(yp, logy)
    ax.add_patch(Rectangle((xe[0], ye[0]), xe[-1] - xe[0], ye[-1] - ye[0], zorder=0, **_hatch()))
    mesh = ax.pcolormesh(xe, ye, z, cmap=cmap, norm=norm, shading="flat", zorder=1,
                         edgecolors="face", linewidth=0)
    ax.set_xlim(xe[0], xe[-1])
    ax.set_ylim(ye[0], ye[-1])
    if catx:
        ax.set_xticks(xp, [_short(v) for v in xc])
    if caty:
        ax.set_yticks(yp, [_short(v) for v in yc])
    ax.set_xlabel(_fill(_coord_label(rf, x), X_CHARS))
    ax.set_ylabel(_fill(_coord_label(rf, y), Y_CHARS))
    bar = fig.colorbar(mesh, ax=ax)
    bar.set_label(_fill(label(rf.ds[name], name, math=True), Y_CHARS))
    if contours and z.count() >= 4 and min(z.shape) >= 2 and z.min() < z.max():
        levels: Any = 5
        if norm.__class__.__name__ == "LogNorm":
            levels = np.geomspace(float(z.min()), float(z.max()), 7)[1:-1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            cs = ax.contour(xp, yp, z, levels=levels, colors="k", linewidths=0.5, zorder=2)
            ax.clabel(cs, fontsize=5, fmt=lambda v: f"{v:.3g}")
    missing = int(np.ma.count_masked(z))
    if missing:
        fig.legend(handles=[Patch(label="failed or missing", **_hatch())],
                   loc="outside lower center", fontsize=7)
    _title(ax, name, notes)
    return Drawn(fig, f"phase diagram of {label(rf.ds[name], name)} over {x} and {y}",
                 notes, missing, {"x": x, "y": y})


# -- learning curves and line plots ---------------------------------------------------------
def _short(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{float(value):.3g}"
    return format_value(value)


def _height(entries: int) -> float:
    """Figure height: 2.4 in for the axes plus the legend rows underneath (3 per row)."""
    return 2.4 + 0.13 * (-(-entries // 3)) if entries else 2.4


def _legend(fig: Figure, handles: list[Any], labels: list[str]) -> None:
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(3, len(handles)),
                   fontsize=6, handlelength=1.5, columnspacing=1.0)


def _floor(values: np.ndarray) -> float | None:
    """Where bands are cut on a log value axis (the lowest positive value), else None."""
    if not wants_log(values):
        return None
    return float(np.nanmin(values[np.isfinite(values) & (values > 0)]))


def _thin(da: xr.DataArray, group: str | None) -> xr.DataArray:
    if group is not None and da.sizes[group] > MAX_LINES:
        idx = np.unique(np.round(np.linspace(0, da.sizes[group] - 1, SHOWN_LINES)).astype(int))
        da = da.isel({group: idx})
    return da


def _centre_band(
    da: xr.DataArray, reduce: str
) -> tuple[xr.DataArray, xr.DataArray | None, xr.DataArray | None]:
    """Centre line and band over ``seed``: mean ± 1 sample std, or median and quartiles."""
    if "seed" not in da.dims:
        return da, None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = reduce_seed(da, reduce)
        if da.sizes["seed"] < 2:
            return centre, None, None
        if reduce == "median":
            q = da.quantile([0.25, 0.75], dim="seed", skipna=True)
            return centre, q.isel(quantile=0, drop=True), q.isel(quantile=1, drop=True)
        sd = da.std("seed", ddof=1, skipna=True)
        return centre, centre - sd, centre + sd


def _group_values(da: xr.DataArray, group: str | None) -> list[Any]:
    return [None] if group is None else list(_coord(da, group))


def _pick(da: xr.DataArray | None, group: str | None, i: int) -> np.ndarray | None:
    if da is None:
        return None
    return np.asarray((da if group is None else da.isel({group: i})).values, dtype=float)


def draw_lines(
    rf: ResultFile,
    name: str,
    x: str,
    group: str | None,
    at: dict[str, int],
    reduce: str,
    kind: str,
    panel: str | None = None,
) -> Drawn:
    """``name`` against ``x``, one line per value of ``group``, one panel per value of
    ``panel``, a band over seeds.

    ``x`` is ``step``/``time`` for learning curves and a grid dimension for line plots. With a
    ``seed`` dimension the line is the mean with a ±1 standard-deviation band (sample standard
    deviation, ddof = 1, over the seeds that did not fail), or the median with the
    inter-quartile band for ``reduce="median"``. Missing values leave gaps. A grid with a
    second free dimension (``panel``) gets one panel per value (thinned to at most
    :data:`SHOWN_LINES`), so that every slice is drawn, not only the first.
    """
    keep = tuple(
        d for d in (x, group, panel, "seed") if d is not None and not (d == "seed" and d in at)
    )
    da, notes = select(rf, rf.masked(name), keep, at, reduce)
    da = _thin(_thin(_sorted(da, x), group), panel)
    centre, lo, hi = _centre_band(da, reduce)
    if "seed" in da.dims:
        n = da.sizes["seed"]
        band = "inter-quartile band" if reduce == "median" else "±1 s.d. band"
        notes.append(f"{reduce} over {n} seeds" + (f", {band}" if n > 1 else ""))
    logx = is_log_spaced(rf, x)
    xs = _coord(centre, x).astype(float)

    values = _group_values(centre, group)
    panels = _group_values(centre, panel)
    columns = min(len(panels), 3)
    rows = -(-len(panels) // columns)
    fig = new_figure(
        height=_height(len(values) if group is not None else 0) + 2.0 * (rows - 1),
        width=WIDTH * (1.0 if columns == 1 else 0.75 * columns),
    )
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True).ravel()
    for extra in axes[len(panels):]:
        extra.set_visible(False)
    all_values = np.asarray(centre.values, dtype=float)
    floor = _floor(all_values)
    palette = colormaps["viridis"](np.linspace(0.0, 0.9, max(len(values), 1)))
    for k, (ax, panel_value) in enumerate(zip(axes, panels, strict=False)):
        c = centre if panel is None else centre.isel({panel: k})
        low_k = lo if lo is None or panel is None else lo.isel({panel: k})
        high_k = hi if hi is None or panel is None else hi.isel({panel: k})
        if logx:
            ax.set_xscale("log", nonpositive="mask")
        for i, value in enumerate(values):
            colour = palette[i] if group is not None else "C0"
            line_label = None if group is None else _group_label(group, value)
            ys = _pick(c, group, i)
            ax.plot(xs, ys, color=colour, label=line_label,
                    marker="o" if xs.size < 20 else None, markersize=2.5)
            low, high = _pick(low_k, group, i), _pick(high_k, group, i)
            if low is not None and high is not None:
                if floor is not None:  # log axis: a band reaching <= 0 is cut at the lowest
                    low = np.maximum(low, floor)
                ax.fill_between(xs, low, high, color=colour, alpha=0.25, linewidth=0)
        if wants_log(all_values):
            ax.set_yscale("log", nonpositive="mask")
            _clip_log(ax, all_values)
        elif k == 0:
            _clip_outliers(ax, all_values, notes)
        if panel is not None:
            ax.set_title(_group_label(panel, panel_value), fontsize=7)
        if k % columns == 0:
            ax.set_ylabel(_fill(label(rf.ds[name], name, math=True), Y_CHARS))
        if k >= len(panels) - columns:
            ax.set_xlabel(_fill(_coord_label(rf, x), X_CHARS))
    if group is not None:
        _legend(fig, *axes[0].get_legend_handles_labels())
    if panel is None:
        _title(axes[0], name, notes)
    else:
        fig.suptitle(_fill(_name_text(name), TITLE_CHARS * columns), fontsize=7)
        notes.append(f"one panel per {panel}")
    missing = int(np.sum(~np.isfinite(all_values)))
    what = "learning curve" if kind == "curves" else "line plot"
    return Drawn(fig, f"{what} of {label(rf.ds[name], name)} against {x}", notes, missing,
                 {"x": x, "lines": group, "panels": panel})


# -- theory overlays ------------------------------------------------------------------------
def exact_methods(values: list[str]) -> list[str]:
    """Methods that are closed-form references (names containing exact/theory/analytic)."""
    return [m for m in values if EXACT.search(m)]


def draw_theory(
    rf: ResultFile,
    name: str,
    x: str,
    group: str | None,
    at: dict[str, int],
    reduce: str,
) -> Drawn:
    """Exact solution (dashed black) over the numerical ones (solid), one panel per variable.

    The panel title gives max |exact − numeric| over everything drawn in the panel (every
    numeric method, line and x value, missing values ignored).
    """
    keep = tuple(d for d in (x, "method", group) if d is not None)
    da, notes = select(rf, rf.masked(name), keep, at, reduce)
    da = _thin(_sorted(da, x), group)
    methods = [str(m) for m in _coord(da, "method")]
    exact = exact_methods(methods)
    reference = exact[0] if exact else None
    numeric = [m for m in methods if m != reference]
    logx = is_log_spaced(rf, x)
    xs = _coord(da, x).astype(float)
    values = _group_values(da, group)
    palette = colormaps["viridis"](np.linspace(0.0, 0.9, max(len(values) * len(numeric), 1)))

    fig = new_figure(height=_height(len(values) * len(numeric) + 1))
    ax = fig.add_subplot()
    if logx:
        ax.set_xscale("log", nonpositive="mask")
    worst = np.nan
    k = 0
    for i, value in enumerate(values):
        sub = da if group is None else da.isel({group: i})
        ref = None
        if reference is not None:
            ref = np.asarray(sub.isel(method=methods.index(reference)).values, dtype=float)
        for m in numeric:
            # isel, not sel: with pandas 3 string indexes, xarray 2026.9 ignores a string
            # scalar in .sel(method="exact") and returns every method
            ys = np.asarray(sub.isel(method=methods.index(m)).values, dtype=float)
            parts = [m] if len(numeric) > 1 or group is None else []
            if group is not None:
                parts.append(_group_label(group, value))
            # two time points are two states, not a trajectory: markers, no joining line
            style: dict[str, Any] = {"ls": "none", "marker": "o", "ms": 3} if xs.size <= 2 else {}
            ax.plot(xs, ys, color=palette[k], label=", ".join(parts), zorder=2, **style)
            k += 1
            if ref is not None:
                diff = np.abs(ref - ys)
                if np.any(np.isfinite(diff)):
                    worst = float(np.nanmax([worst, np.nanmax(diff)]))
        if ref is not None:
            ax.plot(xs, ref, color="k", linestyle="--" if xs.size > 2 else "none",
                    marker=None if xs.size > 2 else "x", linewidth=1.0, zorder=3,
                    label=reference if i == 0 else None)
    if wants_log(np.asarray(da.values, dtype=float)):
        ax.set_yscale("log", nonpositive="mask")
        _clip_log(ax, np.asarray(da.values, dtype=float))
    else:
        _clip_outliers(ax, np.asarray(da.values, dtype=float), notes)
    ax.set_xlabel(_fill(_coord_label(rf, x), X_CHARS))
    ax.set_ylabel(_fill(label(rf.ds[name], name, math=True), Y_CHARS))
    handles, labels = ax.get_legend_handles_labels()
    if reference in labels:  # the exact line last
        k = labels.index(reference)
        handles, labels = handles[:k] + handles[k + 1:] + [handles[k]], [
            *labels[:k], *labels[k + 1:], labels[k]]
    if len(handles) > 12:  # too many lines to name: name the line styles only
        handles = [Line2D([], [], color="k", linestyle="--"), Line2D([], [], color="C0")]
        labels = [reference or "exact", "numeric"]
    _legend(fig, handles, labels)
    _title(ax, name, notes)  # max |exact - numeric| goes into the caption, in full
    missing = int(np.sum(~np.isfinite(np.asarray(da.values, dtype=float))))
    description = f"theory overlay of {label(rf.ds[name], name)} against {x}"
    if reference is not None:
        description += (f", {reference} dashed black, numeric solid" if xs.size > 2 else
                        f" at its {xs.size} output times (markers: no trajectory between "
                        f"them), {reference} black crosses")
        if np.isfinite(worst):
            description += f", max |{reference} − numeric| = {worst:.3g}"
        else:
            description += f"; no numeric method to compare ({', '.join(methods)})"
    else:
        description += f"; no exact method among {', '.join(methods)}"
    return Drawn(fig, description, notes,
                 missing, {"x": x, "lines": group, "max_abs_diff": worst, "reference": reference})
