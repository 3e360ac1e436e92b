"""Explorable phase diagrams: one self-contained HTML page per phase diagram (Bokeh).

The page shows the phase diagram of a result file over two grid dimensions ``x`` and ``y`` as
a heat map of cells. Hovering a cell shows its coordinates, its value and how many of its seeds
computed normally; a *variable* selector picks the quantity drawn and a *checkpoint* selector
the time at which it is drawn (for a quantity recorded over ``step`` or ``time``). The value of
a cell is the same as in the static phase diagram (``report/plots.py``, :mod:`.data`): failed
or missing points and non-finite values are missing (grey), and ``seed`` is reduced with the
nan-aware mean or median.

Tapping a cell shows that configuration's recorded curves against the time coordinate, one
line per seed, exactly as stored (as float32): the losses in one panel, each other scalar
quantity over time (kernel distance S(0, t), Hamming and parameter distance, ...) in its own.
Where a quantity has a ``method`` dimension (a family with a closed form, e.g. the single
neuron of docs/single-neuron.md), the closed form (``exact``) is drawn dashed over the
numerical solution, the theory overlay of the static report. Where the file records them, the
trajectories are drawn for one seed (a selector picks it): the two-layer network's neurons
:math:`|a_k|\\,w_k(t)` coloured by :math:`\\operatorname{sgn} a_k` at the end (Kunin et al.
2024, Fig. 1a; docs/two-layer.md; only for ``d = 2``, as the static ``neurons`` figure), the
single neuron's predictor :math:`\\beta(t) = a(t)\\,w(t)` per method (``d = 2``).

Grid dimensions other than ``x``, ``y`` and ``seed`` are taken at their ``--at`` value, else
at their first value (the page says which).

Everything the page needs is in the file: BokehJS is inlined (``bokeh.resources.INLINE``),
so the page works with no network. The data travel as float32 arrays, which Bokeh encodes as
base64 binary; the curves of all cells and seeds are stored once, and the two short CustomJS
callbacks slice the tapped cell's curves out of them. Curves and trajectories beyond
:data:`MAX_BYTES` keep the first seeds that fit, and the page says so.
"""

from __future__ import annotations

import importlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import xarray as xr

from ..engine.cf import user_name
from ..mathtext import GREEK
from .data import ResultFile, format_value, is_log_spaced, reduce_seed
from .style import wants_log

MAX_BYTES = 8_000_000
"""Most bytes (float32, before base64) of curves and trajectories kept in one page."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # one colour per seed (matplotlib's tab10)
POSITIVE, NEGATIVE = "#c0392b", "#2c6fbb"  # sgn a > 0 red, < 0 blue (as report/neurons.py)
THEORY = ("exact", "theory")
"""Values of ``method`` (and name parts) that mark a closed form: drawn dashed."""
_LOSS = re.compile(r"(^|_)loss($|_)")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
MAX_TICKS = 9
MAX_LEGEND = 10  # seeds named in the colour legend above the curves


@dataclass
class _Heat:
    """One choice of the variable selector: seed-reduced cell values per checkpoint."""

    key: str
    label: str
    values: np.ndarray  # float32 (n_t, n_cells); n_t = 1 without a time dimension
    log: list[bool]
    low: list[float]
    high: list[float]


@dataclass
class _Series:
    """One line set of a curve panel: every cell's and seed's curve, flat."""

    name: str
    label: str
    dashed: bool
    values: np.ndarray  # float32 (n_cells, n_seeds, n_t)
    x: np.ndarray  # float32 (n_t,) or, with per-point times, (n_cells, n_seeds, n_t)


@dataclass
class _Panel:
    key: str
    title: str
    x_label: str
    log_x: bool
    series: list[_Series] = field(default_factory=list)


@dataclass
class _Trajectories:
    title: str
    x: np.ndarray  # float32 (n_cells, n_seeds, n_lines, n_t)
    y: np.ndarray
    colour: np.ndarray  # uint8 (n_cells, n_seeds, n_lines): index into colours
    colours: tuple[str, ...]
    legend: str


def page_name(stem: str, x: str, y: str) -> str:
    """The page's file name: ``<stem>-explore-<x>-<y>.html``."""
    return f"{_UNSAFE.sub('_', stem)}-explore-{_UNSAFE.sub('_', x)}-{_UNSAFE.sub('_', y)}.html"


def explore_axes(rf: ResultFile, at: dict[str, int] | None = None) -> tuple[str, str] | None:
    """The first two numeric grid dimensions (``seed`` and ``--at`` dimensions aside) with
    more than one value, as the static phase diagram chooses them; None if there are fewer."""
    free = [d for d in rf.phase_dims if d not in (at or {})]
    return (free[0], free[1]) if len(free) >= 2 else None


def _greek(name: str) -> str:
    if name in GREEK:
        case = "CAPITAL" if name[0].isupper() else "SMALL"
        letter = "LAMDA" if name.lower() == "lambda" else name.upper()
        return unicodedata.lookup(f"GREEK {case} LETTER {letter}")
    return name


def _coord(rf: ResultFile, dim: str) -> np.ndarray:
    return (np.asarray(rf.ds[dim].values) if dim in rf.ds.coords
            else np.arange(rf.ds.sizes[dim]))


def _fixed(rf: ResultFile, x: str, y: str, at: dict[str, int]) -> tuple[dict[str, int], str]:
    """Index of every other grid dimension but seed, and the note that says so."""
    fixed = {d: at.get(d, 0) for d in rf.grid_dims if d not in (x, y, "seed")}
    if "seed" in at:
        fixed["seed"] = at["seed"]
    note = ", ".join(f"{_greek(d)} = {format_value(_coord(rf, d)[i])}" for d, i in fixed.items())
    return fixed, note


class _Cells:
    """The page's cells: ``x``-major order over (x, y), seeds along a second axis."""

    def __init__(self, rf: ResultFile, x: str, y: str, fixed: dict[str, int]):
        self.rf, self.x, self.y, self.fixed = rf, x, y, fixed
        self.xv, self.yv = _coord(rf, x), _coord(rf, y)
        self.nx, self.ny = self.xv.size, self.yv.size
        self.n = self.nx * self.ny
        self.seeds = (_coord(rf, "seed") if "seed" in rf.ds.dims and "seed" not in fixed
                      else np.array([]))
        self.ns = max(self.seeds.size, 1)

    def arrange(self, da: xr.DataArray, rest: tuple[str, ...]) -> np.ndarray:
        """``da`` as float64 (n_cells, n_seeds, *rest), grid dimensions it lacks broadcast."""
        da = da.isel({d: i for d, i in self.fixed.items() if d in da.dims})
        for d in (self.x, self.y):
            if d not in da.dims:
                da = da.expand_dims({d: self.rf.ds.sizes[d]})
        if self.seeds.size and "seed" not in da.dims:
            da = da.expand_dims({"seed": self.seeds.size})
        order = (self.x, self.y, *(("seed",) if self.seeds.size else ()), *rest)
        out = np.asarray(da.transpose(*order).values, dtype=float)
        return out.reshape(self.n, self.ns, *out.shape[2 + bool(self.seeds.size):])


def _scalar_time(rf: ResultFile, name: str) -> tuple[str | None, list[str]] | None:
    """(time dimension or None, extra dimensions) of a variable the page can draw: over grid
    dimensions, at most one time dimension and ``method``; None for any other."""
    dims = [str(d) for d in rf.ds[name].dims if d not in rf.grid]
    tdim = rf.time_dim(name)
    extra = [d for d in dims if d != tdim]
    if extra and extra != ["method"]:
        return None
    return tdim, extra


def _methods(rf: ResultFile, extra: list[str]) -> list[tuple[int | None, str]]:
    if not extra:
        return [(None, "")]
    return [(i, str(v)) for i, v in enumerate(_coord(rf, "method"))]


def _heat(rf: ResultFile, cells: _Cells, name: str, tdim: str | None, method: int | None,
          suffix: str, reduce: str) -> _Heat:
    da = rf.masked(name)
    if method is not None:
        da = da.isel(method=method)
    da = da.isel({d: i for d, i in cells.fixed.items() if d in da.dims})
    if "seed" in da.dims:
        da = reduce_seed(da, reduce)
    rest = (tdim,) if tdim is not None else ()
    values = cells.arrange(da, rest)[:, 0]  # seed reduced: one column
    values = values.reshape(cells.n, -1).T  # (n_t, n_cells)
    log, low, high = [], [], []
    for row in values:
        finite = row[np.isfinite(row)]
        is_log = wants_log(row)
        lo = float(finite.min()) if finite.size else 0.0
        hi = float(finite.max()) if finite.size else 1.0
        if hi <= lo:
            pad = abs(lo) * 0.05 or 1.0
            lo, hi = (lo - pad, hi + pad) if not is_log else (lo / 1.1, hi * 1.1)
        log.append(is_log)
        low.append(lo)
        high.append(hi)
    long_name = str(rf.ds[name].attrs.get("long_name") or "")
    shown = user_name(name) + suffix
    text = f"{shown}: {long_name}" if long_name else shown
    return _Heat(shown, text, values.astype(np.float32), log, low, high)


def _curve_x(rf: ResultFile, cells: _Cells, tdim: str) -> np.ndarray:
    per_point = f"{tdim}_values"
    if per_point in rf.ds.data_vars:  # a time grid that differs between points
        return cells.arrange(rf.ds[per_point], (tdim,)).astype(np.float32)
    return _coord(rf, tdim).astype(np.float32)


def _log_time(rf: ResultFile, tdim: str) -> bool:
    """A logarithmic time axis: the report's rule (:func:`.data.is_log_spaced`), or positive
    times (a checkpoint at 0 aside) spanning two decades or more that are not evenly spaced
    (integer-rounded geometric checkpoints 0, 1, 2, 3, 4, 7, 11, ..., 10^4)."""
    if is_log_spaced(rf, tdim):
        return True
    t = np.unique(np.asarray(_coord(rf, tdim), dtype=float))
    t = t[np.isfinite(t) & (t > 0)]
    if t.size < 3 or t[-1] / t[0] < 100:
        return False
    steps = np.diff(t)
    return not np.allclose(steps, steps[0], rtol=1e-6)


def _trajectories(rf: ResultFile, cells: _Cells, tdim: str | None) -> _Trajectories | None:
    ds = rf.ds
    if ds.sizes.get("dim") != 2 or tdim is None:
        return None
    if rf.model == "two-layer" and {"W", "a"} <= set(ds.data_vars):
        W = cells.arrange(ds["W"], (tdim, "neuron", "dim"))  # (n, ns, t, k, 2)
        a = cells.arrange(ds["a"], (tdim, "neuron"))
        path = np.abs(a)[..., None] * W
        path = np.moveaxis(path, 3, 2)  # (n, ns, k, t, 2)
        sign = (a[:, :, -1, :] <= 0).astype(np.uint8)  # 0: a_k > 0 at the end, 1: < 0
        return _Trajectories("neurons |a_k| w_k", path[..., 0].astype(np.float32),
                             path[..., 1].astype(np.float32), sign, (POSITIVE, NEGATIVE),
                             "red: a_k > 0 at the end, blue: a_k < 0")
    if rf.model == "single-neuron" and "beta" in ds.data_vars and "method" in ds["beta"].dims:
        beta = cells.arrange(ds["beta"], ("method", tdim, "dim"))  # (n, ns, m, t, 2)
        methods = [str(v) for v in _coord(rf, "method")]
        colour = np.array([0 if m in THEORY else 1 for m in methods], dtype=np.uint8)
        colour = np.broadcast_to(colour, beta.shape[:3]).copy()
        return _Trajectories("predictor β(t) = a(t) w(t)", beta[..., 0].astype(np.float32),
                             beta[..., 1].astype(np.float32), colour, ("#222222", "#ff7f0e"),
                             "black: exact (closed form), orange: numeric")
    return None


def _keep_seeds(arrays: list[np.ndarray], budget: int, ns: int) -> int:
    """How many leading seeds of ``arrays`` (seed on axis 1) fit in ``budget`` bytes."""
    per_seed = sum(a.nbytes // ns for a in arrays if a.ndim >= 2)
    fixed = sum(a.nbytes for a in arrays if a.ndim < 2)
    if per_seed == 0:
        return ns
    return int(max(0, min(ns, (budget - fixed) // per_seed)))


@dataclass
class Explore:
    """What one page shows, gathered from a result file (:func:`gather`)."""

    rf: ResultFile
    cells: _Cells
    heat: list[_Heat]
    panels: list[_Panel]
    times: np.ndarray  # the checkpoint selector's values
    time_dim: str | None
    trajectories: _Trajectories | None
    notes: list[str]
    reduce: str


def gather(rf: ResultFile, x: str, y: str, at: dict[str, int] | None = None,
           reduce: str = "mean", max_bytes: int = MAX_BYTES) -> Explore:
    """The heat maps, curve panels and trajectories of the page of ``rf`` over (``x``, ``y``)."""
    at = at or {}
    fixed, fixed_note = _fixed(rf, x, y, at)
    cells = _Cells(rf, x, y, fixed)
    notes = [f"other grid dimensions at {fixed_note}"] if fixed_note else []
    drawable = [(v, dims) for v in rf.variables if (dims := _scalar_time(rf, v)) is not None]
    tdims = [t for _, (t, _) in drawable if t is not None]
    tdim = max(set(tdims), key=tdims.count) if tdims else None
    heat: list[_Heat] = []
    panels: dict[str, _Panel] = {}
    for name, (vt, extra) in drawable:
        if vt != tdim:
            vt = None  # another time dimension than the selector's: not drawn over time
            if rf.time_dim(name) is not None:
                continue
        for m, method in _methods(rf, extra):
            suffix = f" [{method}]" if method else ""
            heat.append(_heat(rf, cells, name, vt, m, suffix, reduce))
            if vt is None:
                continue
            da = rf.masked(name)
            if m is not None:
                da = da.isel(method=m)
            key = "losses" if _LOSS.search(name) else name
            if key not in panels:
                title = "losses" if key == "losses" else user_name(name)
                panels[key] = _Panel(key, title, user_name(vt, dimension=True),
                                     _log_time(rf, vt))
            dashed = method in THEORY or any(t in name for t in THEORY)
            panels[key].series.append(_Series(
                f"{user_name(name)}{suffix}", method or user_name(name), dashed,
                cells.arrange(da, (vt,)).astype(np.float32), _curve_x(rf, cells, vt)))
    if not heat:
        raise ValueError(f"{rf.path.name}: no variable over {x} and {y} to explore")
    traj = _trajectories(rf, cells, tdim)
    arrays = [a for p in panels.values() for s in p.series for a in (s.values, s.x)]
    keep = _keep_seeds(arrays, max_bytes, cells.ns)
    if keep < cells.ns:
        keep = max(keep, 1)
        notes.append(f"curves of the first {keep} of {cells.ns} seeds (page size limit)")
        for p in panels.values():
            for s in p.series:
                s.values = s.values[:, :keep].copy()
                if s.x.ndim > 1:
                    s.x = s.x[:, :keep].copy()
    if traj is not None:
        used = sum(a.nbytes for p in panels.values() for s in p.series for a in (s.values, s.x))
        tkeep = _keep_seeds([traj.x, traj.y, traj.colour], max_bytes - used, cells.ns)
        if tkeep == 0:
            notes.append(f"{traj.title}: not included (page size limit)")
            traj = None
        elif tkeep < cells.ns:
            notes.append(f"{traj.title}: the first {tkeep} of {cells.ns} seeds (page size limit)")
            traj.x, traj.y = traj.x[:, :tkeep].copy(), traj.y[:, :tkeep].copy()
            traj.colour = traj.colour[:, :tkeep].copy()
    elif rf.model == "two-layer" and "W" in rf.ds.data_vars:
        notes.append("neuron trajectories are drawn for d = 2 only")
    times = _coord(rf, tdim) if tdim is not None else np.array([])
    return Explore(rf, cells, heat, list(panels.values()), times, tdim, traj, notes, reduce)


# -- the page -------------------------------------------------------------------------------
# The callbacks index flat float32 arrays: a curve of cell c and seed k starts at
# (c * n_seeds + k) * n_t; a heat map of checkpoint t at t * n_cells.
UPDATE_JS = """
const v = keys.indexOf(sel_var.value), n = src.data.value.length, nt = nts[v];
const t = nt > 1 ? Math.min(Number(sel_t.value), nt - 1) : 0;
const log = logs[v][t], map = log ? log_map : lin_map;
map.low = lows[v][t]; map.high = highs[v][t];
lin_r.visible = lin_bar.visible = !log; log_r.visible = log_bar.visible = log;
const value = Array.from({length: n}, (_, i) => vals[v][t * n + i]);
src.data = Object.assign({}, src.data, {value});
sel_t.disabled = nt <= 1;
heat_fig.title.text = keys[v] + (nt > 1 ? " at " + sel_t.options[t][1] : "");
for (const s of spans) s.location = times.length ? times[Number(sel_t.value)] : null;
"""
SHOW_JS = """
const c = src.selected.indices.length ? src.selected.indices[0] : -1;
if (c < 0) return;
const take = (a, b, n) => Array.from({length: n}, (_, i) => a[b + i]), ylim = new Map();
for (let i = 0; i < srcs.length; i++) {
  const nt = nts[i], v = vals[i], x = xs[i], per = x.length > nt;
  const data = {xs: [], ys: [], color: [], seed: []};
  for (let k = 0; k < ns; k++) {
    const b = (c * ns + k) * nt;
    data.ys.push(take(v, b, nt));
    data.xs.push(per ? take(x, b, nt) : Array.from(x));
    data.color.push(palette[k % palette.length]); data.seed.push(seeds[k]);
  }
  srcs[i].data = data;
  if (yr[i] !== null) {  // a log axis: at most DECADES below the largest value
    let [lo, hi] = ylim.get(yr[i]) ?? [Infinity, -Infinity];
    for (const row of data.ys) for (const y of row)
      if (y > 0 && isFinite(y)) { lo = Math.min(lo, y); hi = Math.max(hi, y); }
    ylim.set(yr[i], [lo, hi]);
  }
}
for (const [r, [lo, hi]] of ylim)
  if (hi > 0) { r.start = Math.max(lo, hi * 10 ** -decades) / 1.5; r.end = hi * 1.5; }
info.text = "<b>" + src.data.where[c] + "</b>" + legend;
if (traj !== null) {
  const k = Math.min(Number(sel_seed.value), tns - 1), data = {xs: [], ys: [], color: []};
  for (let l = 0; l < tl; l++) {
    const b = ((c * tns + k) * tl + l) * tnt;
    data.xs.push(take(tx, b, tnt));
    data.ys.push(take(ty, b, tnt));
    data.color.push(tcolours[tc[(c * tns + k) * tl + l]]);
  }
  traj.data = data;
}
"""
HASH_JS = """
const key = decodeURIComponent(window.location.hash.slice(1));  // a variable; its first method
const found = keys.find((k) => k === key) ?? keys.find((k) => k.startsWith(key + " ["));
if (key && found !== undefined) sel_var.value = found;
"""
DECADES = 12
"""A logarithmic value axis stops this many decades below its largest value, as the static
figures' do (docs/figures.md: integrator round-off is not dynamics)."""
DASHES = ("solid", "dotted", "dotdash", "dashdot")  # the series of a panel that are not theory


class _Bokeh:
    """Bokeh's modules, imported on first use and untyped: its stubs reject calls that its
    documentation shows (a palette for a colour mapper, a pair of numbers for a range)."""

    def __getattr__(self, name: str) -> Any:
        return importlib.import_module(f"bokeh.{name}")


bk = _Bokeh()


def _ticks(values: np.ndarray) -> tuple[list[int], dict[int, str]]:
    step = max(1, -(-values.size // MAX_TICKS))
    ticks = list(range(0, values.size, step))
    return ticks, {i: f"{float(values[i]):.3g}" if np.issubdtype(values.dtype, np.number)
                   else str(values[i]) for i in ticks}


def _axis_label(rf: ResultFile, dim: str) -> str:
    long_name = str(rf.ds[dim].attrs.get("long_name") or "") if dim in rf.ds.coords else ""
    sym = _greek(dim)
    short = long_name and long_name != dim and len(long_name) <= 45
    return f"{sym}: {long_name}" if short else sym


def _curves(s: _Series, c: int, seeds: list[str]) -> dict[str, list[Any]]:
    """The lines of cell ``c`` of a series, as SHOW_JS builds them on a tap."""
    per = s.x.ndim > 1
    ns = s.values.shape[1]
    return {"xs": [(s.x[c, k] if per else s.x).astype(float).tolist() for k in range(ns)],
            "ys": [s.values[c, k].astype(float).tolist() for k in range(ns)],
            "color": [PALETTE[k % len(PALETTE)] for k in range(ns)], "seed": seeds[:ns]}


def _paths(t: _Trajectories, c: int, k: int) -> dict[str, list[Any]]:
    """The trajectories of cell ``c`` and seed ``k``, as SHOW_JS builds them."""
    return {"xs": [row.astype(float).tolist() for row in t.x[c, k]],
            "ys": [row.astype(float).tolist() for row in t.y[c, k]],
            "color": [t.colours[i] for i in t.colour[c, k]]}


def _heat_figure(ex: Explore, src: Any) -> tuple[Any, dict[str, Any]]:
    """The phase diagram: two renderers of the cells (linear and logarithmic colours), one of
    them visible; returns the figure and the models the callbacks change."""
    m, figure, viridis = bk.models, bk.plotting.figure, bk.palettes.Viridis256

    cells, first = ex.cells, ex.heat[0]
    t0 = len(first.log) - 1
    models: dict[str, Any] = {
        "lin_map": m.LinearColorMapper(viridis, low=first.low[t0], high=first.high[t0],
                                     nan_color="#d9d9d9"),
        "log_map": m.LogColorMapper(viridis, low=first.low[t0], high=first.high[t0],
                                  nan_color="#d9d9d9"),
    }
    fig = figure(width=470, height=430, title=first.key, tools="tap,reset,save", name="heat",
                 x_range=(-0.5, cells.nx - 0.5), y_range=(-0.5, cells.ny - 0.5),
                 toolbar_location="above")
    for scale in ("lin", "log"):
        mapper = models[f"{scale}_map"]
        r = fig.rect("i", "j", 1, 1, source=src, line_color=None,
                     fill_color={"field": "value", "transform": mapper},
                     selection_line_color="black", selection_line_width=2.5,
                     nonselection_fill_alpha=1.0, nonselection_line_color=None)
        bar = m.ColorBar(color_mapper=mapper, width=12)
        fig.add_layout(bar, "right")
        shown = first.log[t0] == (scale == "log")
        r.visible = bar.visible = shown
        models[f"{scale}_r"], models[f"{scale}_bar"] = r, bar
    renderers = [models["lin_r"], models["log_r"]]
    fig.toolbar.tools[0].renderers = renderers  # the tap tool
    x, y = cells.x, cells.y
    fig.add_tools(m.HoverTool(renderers=renderers, tooltips=[
        (_greek(x), "@xv{%.4g}"), (_greek(y), "@yv{%.4g}"), ("value", "@value{%.4g}"),
        ("seeds computed", f"@ok of {cells.ns}")],
        formatters={"@xv": "printf", "@yv": "printf", "@value": "printf"}))
    for axis, dim, values in ((fig.xaxis, x, cells.xv), (fig.yaxis, y, cells.yv)):
        ticks, labels = _ticks(values)
        axis.ticker = m.FixedTicker(ticks=ticks)
        axis.major_label_overrides = labels  # type: ignore[assignment]
        axis.axis_label = _axis_label(ex.rf, dim)
    if cells.nx > 6:
        fig.xaxis.major_label_orientation = 0.8  # radians: long values side by side
    fig.grid.visible = False
    return fig, models


def _panel_figures(ex: Explore, start: int, seeds: list[str]
                   ) -> tuple[list[Any], dict[str, list[Any]]]:
    """One figure per curve panel, showing cell ``start``; returns them and the callbacks'
    lists (sources, flat values, flat times, lengths, checkpoint markers)."""
    m, figure = bk.models, bk.plotting.figure

    figs: list[Any] = []
    lists: dict[str, list[Any]] = {"srcs": [], "vals": [], "xs": [], "nts": [], "yr": [],
                                   "spans": []}
    for p in ex.panels:
        finite = np.concatenate([s.values[np.isfinite(s.values)] for s in p.series])
        log_y = wants_log(finite)
        ranges: dict[str, Any] = {}
        if p.log_x:  # a log axis starts at the first positive time (a checkpoint at 0 aside)
            xall = np.concatenate([s.x.ravel() for s in p.series])
            pos = xall[np.isfinite(xall) & (xall > 0)]
            if pos.size:
                ranges["x_range"] = m.Range1d(float(pos.min()), float(pos.max()))
        if log_y:  # as the static report: at most DECADES below the largest value
            ys = np.concatenate([s.values[start].ravel() for s in p.series])
            ys = ys[np.isfinite(ys) & (ys > 0)]
            top = float(ys.max()) if ys.size else 1.0
            low = max(float(ys.min()), top * 10.0**-DECADES) if ys.size else 0.1
            ranges["y_range"] = m.Range1d(low / 1.5, top * 1.5)
        f = figure(width=330, height=240, title=p.title, name=f"panel-{p.key}",
                   x_axis_type="log" if p.log_x else "linear",
                   y_axis_type="log" if log_y else "linear",
                   tools="pan,box_zoom,wheel_zoom,reset", **ranges)
        f.xaxis.axis_label = p.x_label
        f.title.text_font_size = "8pt"
        plain = iter(DASHES)
        styles = []
        for s in p.series:
            dash = "dashed" if s.dashed else next(plain, "solid")
            styles.append(f"{s.label} ({dash})")
            cds = m.ColumnDataSource(_curves(s, start, seeds), name=f"curves-{s.name}")
            f.multi_line("xs", "ys", source=cds, line_color="color", line_width=1.2,
                         line_dash=dash, line_alpha=0.85)
            lists["srcs"].append(cds)
            lists["vals"].append(s.values.ravel())
            lists["xs"].append(s.x.ravel())
            lists["nts"].append(int(s.values.shape[-1]))
            lists["yr"].append(ranges.get("y_range"))
        if len(p.series) > 1:
            f.title.text = f"{p.title}: {', '.join(styles)}"
        f.add_tools(m.HoverTool(tooltips=[("", "@seed"), ("x", "$data_x{%.4g}"),
                                        ("y", "$data_y{%.4g}")],
                              formatters={"$data_x": "printf", "$data_y": "printf"}))
        span = m.Span(location=float(ex.times[-1]) if ex.times.size else None,
                    dimension="height", line_color="#999999", line_dash="dotted")
        f.add_layout(span)
        lists["spans"].append(span)
        figs.append(f)
    return figs, lists


def render(ex: Explore) -> str:
    """The page of ``ex`` as one self-contained HTML document (BokehJS inlined)."""
    m, figure, layouts = bk.models, bk.plotting.figure, bk.layouts

    rf, cells, first = ex.rf, ex.cells, ex.heat[0]
    x, y = cells.x, cells.y
    ix, iy = np.divmod(np.arange(cells.n), cells.ny)
    ok = np.full(cells.n, cells.ns)
    if rf.ok is not None:
        ok = cells.arrange(rf.ok.astype(int), ()).reshape(cells.n, -1).sum(axis=1)
    full = np.flatnonzero(ok == cells.ns)
    start = int(full[0]) if full.size else 0  # shown first: the first cell whose seeds all ran
    where = [f"{_greek(x)} = {format_value(cells.xv[i])}, {_greek(y)} = "
             f"{format_value(cells.yv[j])}" for i, j in zip(ix, iy, strict=True)]
    src = m.ColumnDataSource({
        "i": ix, "j": iy, "xv": cells.xv[ix].astype(float), "yv": cells.yv[iy].astype(float),
        "value": first.values[-1].astype(float), "ok": ok, "where": where,
    }, name="cells")
    src.selected.indices = [start]
    heat_fig, heat = _heat_figure(ex, src)

    keys = [h.key for h in ex.heat]
    sel_var = m.Select(title="variable", value=keys[0], options=[(h.key, h.label) for h in ex.heat],
                     width=470, name="variable")
    time_name = user_name(ex.time_dim, dimension=True) if ex.time_dim else ""
    t_options = [(str(i), f"{time_name} = {format_value(v)}") for i, v in enumerate(ex.times)]
    sel_t = m.Select(title="checkpoint", value=str(max(len(t_options) - 1, 0)),
                   options=t_options or [("0", "-")], width=220, name="checkpoint",
                   disabled=len(first.log) <= 1)
    if len(first.log) > 1:
        heat_fig.title.text = f"{first.key} at {t_options[-1][1]}"

    seeds = [f"seed {s}" for s in cells.seeds] or [""]
    panel_figs, lists = _panel_figures(ex, start, seeds)
    traj = ex.trajectories
    sel_seed = m.Select(title="seed of the trajectories", value="0", name="seed", width=220,
                      options=[(str(k), str(s)) for k, s in enumerate(cells.seeds)][
                          : traj.x.shape[1] if traj else None] or [("0", "-")])
    traj_src = traj_fig = None
    if traj is not None:
        traj_src = m.ColumnDataSource(_paths(traj, start, 0), name="trajectories")
        traj_fig = figure(width=330, height=330, title=traj.title, match_aspect=True,
                          tools="pan,box_zoom,wheel_zoom,reset,save", name="panel-trajectories")
        traj_fig.multi_line("xs", "ys", source=traj_src, line_color="color", line_width=1.0)
        traj_fig.xaxis.axis_label = traj.legend
    legend = "".join(f" &nbsp;<span style='color:{PALETTE[k % len(PALETTE)]}'>━ {escape(s)}"
                     "</span>" for k, s in enumerate(seeds[:MAX_LEGEND]) if s)
    info = m.Div(text=f"<b>{where[start]}</b>{legend}", width=700, name="info")
    show = m.CustomJS(args={
        "src": src, **{k: v for k, v in lists.items() if k != "spans"},
        "ns": ex.panels[0].series[0].values.shape[1] if ex.panels else 1,
        "palette": list(PALETTE), "seeds": seeds, "info": info, "decades": DECADES,
        "legend": legend,
        "traj": traj_src, "sel_seed": sel_seed,
        "tx": traj.x.ravel() if traj else None, "ty": traj.y.ravel() if traj else None,
        "tc": traj.colour.ravel() if traj else None,
        "tcolours": list(traj.colours) if traj else [], "tns": traj.x.shape[1] if traj else 1,
        "tl": traj.x.shape[2] if traj else 0, "tnt": traj.x.shape[3] if traj else 0,
    }, code=SHOW_JS)
    src.selected.js_on_change("indices", show)
    sel_seed.js_on_change("value", show)
    update = m.CustomJS(args={
        "src": src, "keys": keys,
        "vals": [h.values.ravel() for h in ex.heat], "nts": [len(h.log) for h in ex.heat],
        "logs": [h.log for h in ex.heat], "lows": [h.low for h in ex.heat],
        "highs": [h.high for h in ex.heat], "sel_var": sel_var, "sel_t": sel_t,
        "heat_fig": heat_fig, "spans": lists["spans"], "times": [float(t) for t in ex.times],
        **heat,
    }, code=UPDATE_JS)
    sel_var.js_on_change("value", update)
    sel_t.js_on_change("value", update)

    reduced = f"{ex.reduce} over {cells.seeds.size} seeds" if cells.seeds.size else ""
    notes = "; ".join(n for n in [reduced, *ex.notes] if n)
    head = m.Div(width=1150, name="head", text=(
        f"<h2 style='margin:0'>{escape(rf.stem)}: {escape(rf.model)} {escape(rf.action)}, "
        f"phase diagram over {_greek(x)} and {_greek(y)}</h2><p style='margin:0.3em 0'>Hover "
        "a cell for its coordinates and value; tap it for its recorded curves (one line per "
        "seed; dashed: closed form; dotted vertical line: the checkpoint shown); grey: failed "
        f"or missing. Colours: {escape(notes)}.</p>"))
    several = traj is not None and traj.x.shape[1] > 1  # a seed to choose
    widgets = layouts.row(sel_var, sel_t, *([sel_seed] if several else []))
    figs = [*panel_figs, *([traj_fig] if traj_fig is not None else [])]
    grid = layouts.gridplot(figs, ncols=2, toolbar_location="right") if figs else m.Div()
    doc = bk.document.Document()
    doc.add_root(layouts.column(head, widgets, layouts.row(heat_fig, layouts.column(info, grid))))
    doc.js_on_event(bk.events.DocumentReady, m.CustomJS(args={"keys": keys, "sel_var": sel_var},
                                            code=HASH_JS))
    title = f"{rf.stem}: explore {_greek(x)} × {_greek(y)}"
    return bk.embed.file_html(doc, bk.resources.INLINE, title)


def write_explore(rf: ResultFile, out_dir: Path, x: str | None = None, y: str | None = None,
                  at: dict[str, int] | None = None, reduce: str = "mean") -> Path | None:
    """Write the explorable page of ``rf`` into ``out_dir`` (atomically) and return its path;
    None when the file has no phase diagram (fewer than two free numeric grid dimensions) or
    no variable over it."""
    if x is None or y is None:
        axes = explore_axes(rf, at)
        if axes is None:
            return None
        x, y = axes
    try:
        ex = gather(rf, x, y, at, reduce)
    except ValueError:
        return None
    html = render(ex)
    out_dir = Path(out_dir)
    path = out_dir / page_name(rf.stem, x, y)
    tmp = out_dir / f".{path.name}.{os.getpid()}.tmp"  # created under the umask, as a figure
    try:
        tmp.write_text(html, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def link_html(page: str, var: str | None = None) -> str:
    """The line under a static phase diagram that links its interactive view (``page``,
    relative to the index), opened on ``var`` where given."""
    href = page + (f"#{quote(var)}" if var else "")
    return (f'<p class="explore"><a href="{escape(href)}">Interactive view</a>: hover a cell, '
            "tap it for its curves</p>")


__all__ = ["MAX_BYTES", "Explore", "explore_axes", "gather", "link_html", "page_name",
           "render", "write_explore"]
