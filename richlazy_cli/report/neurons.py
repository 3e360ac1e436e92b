"""The report's neuron-level views of Kunin et al. 2024: figures that read the saved weights,
surfaces or initialisations of a run rather than one variable on the grid.

* ``neurons`` (Fig. 1a): trajectories of :math:`|a_k|\\,w_k` over the checkpoints of a ``d = 2``
  ``two-layer`` run saved with ``save_params``, coloured by :math:`\\operatorname{sgn} a_k`, the
  teacher neurons :math:`a^*_j w^*_j` dotted; one panel per grid point (docs/two-layer.md,
  eqs. (10)–(11)).
* ``partition`` (Fig. 5a): the network output on the circle and its activation regions (the
  parity colouring) at chosen checkpoints, one row per grid point, from a run saved with
  ``save_surface`` (docs/two-layer.md, eq. (13)).
* ``basin`` (Fig. 7): the two basins of a single neuron, ``d = 2``: initialisations
  :math:`(w_0^\\top\\hat\\beta^*, a_0)` coloured by the sign of :math:`a` at the end of the run,
  with the separating surface (basin score 0, docs/single-neuron.md, eq. (15)) drawn from the
  closed form; one panel per value of :math:`\\|w_{0\\perp}\\|`.

Each view is one row of :data:`VIEWS`: the family and variables it reads, the further
conditions it needs (each with the reason given when it fails) and its drawing function.
:func:`plans` plans a view from a loaded :class:`~.data.ResultFile` (a BadInput when it does not
apply) and :func:`draw` draws it as a :class:`~.plots.Drawn`. The papers' own layouts of these
figures are in ``richlazy_cli/figures/kunin.py`` (docs/figures.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D

from ..errors import BadInput
from .data import ResultFile, format_value
from .plots import Drawn
from .style import new_figure

MAX_PANELS = 12
POSITIVE, NEGATIVE = "#c0392b", "#2c6fbb"  # sgn a > 0 red, < 0 blue
PARTITION_LEVELS = (0.9, 0.5, 0.1)  # columns: init, these fractions of the initial loss, end


@dataclass(frozen=True)
class View:
    """One neuron-level report kind: what it reads and how it draws.

    ``family`` (None: any) and ``needs`` (variables of the file) are required, else the kind
    does not apply for the reason ``missing``; each ``(test, reason)`` of ``checks`` is a
    further condition. ``var`` names the figure (``<stem>-<kind>-<var>``)."""

    var: str
    needs: tuple[str, ...]
    missing: str
    draw: Callable[[ResultFile, dict[str, int]], Drawn]
    family: str | None = None
    checks: tuple[tuple[Callable[[ResultFile], bool], str], ...] = ()


def _two_dims(rf: ResultFile) -> bool:
    return bool(rf.ds.sizes.get("dim") == 2)


def _one_teacher(rf: ResultFile) -> bool:
    return "beta_star" not in rf.grid and rf.params.get("X") is None


def _init_grid(rf: ResultFile) -> bool:
    return bool({"a0", "w0"} & set(rf.grid))


def _why(rf: ResultFile, kind: str) -> str | None:
    """None when ``kind`` applies to the file, else the reason it does not."""
    view = VIEWS[kind]
    if (view.family is not None and rf.model != view.family) \
            or not all(name in rf.ds for name in view.needs):
        return view.missing
    return next((reason for test, reason in view.checks if not test(rf)), None)


def plans(rf: ResultFile, kind: str, strict: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """The figures of ``kind`` for ``rf`` as (variable, arguments); with ``strict`` a BadInput
    when the kind does not apply, else an empty list."""
    reason = _why(rf, kind)
    if reason is not None:
        if strict:
            raise BadInput(f"--kind {kind} does not apply to {rf.path.name}: {reason}")
        return []
    return [(VIEWS[kind].var, {})]


def _panels(rf: ResultFile, at: dict[str, int], skip: tuple[str, ...] = ()
            ) -> tuple[list[dict[str, int]], list[str]]:
    """Index selections, one per panel: every combination of the grid dimensions (``--at``
    fixes one; ``seed`` is fixed to its first value unless ``--at`` picks it), at most
    MAX_PANELS. Returns the selections and caption notes."""
    notes = []
    fixed = dict(at)
    if "seed" in rf.grid_dims and "seed" not in fixed:
        fixed["seed"] = 0
        notes.append(f"seed = {format_value(rf.ds['seed'].values[0])}")
    free = [d for d in rf.grid_dims if d not in fixed and d not in skip]
    combos = [dict(zip(free, idx, strict=True))
              for idx in itertools.product(*(range(rf.ds.sizes[d]) for d in free))]
    if len(combos) > MAX_PANELS:
        notes.append(f"first {MAX_PANELS} of {len(combos)} grid points")
        combos = combos[:MAX_PANELS]
    return [{**fixed, **c} for c in combos], notes


def _title(rf: ResultFile, sel: dict[str, int], at: dict[str, int]) -> str:
    parts = []
    for d, i in sel.items():
        if d in at or d == "seed" or d not in rf.ds.coords:
            continue
        parts.append(f"{d} = {format_value(rf.ds[d].values[i])}")
    return ", ".join(parts)


def _grid_shape(count: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(count, max_cols)
    return -(-count // cols), cols


def draw(kind: str, rf: ResultFile, at: dict[str, int]) -> Drawn:
    """Draw the view ``kind`` of ``rf`` (``at``: index selections of grid dimensions)."""
    return VIEWS[kind].draw(rf, at)


def _ok(rf: ResultFile, sel: dict[str, int]) -> bool:
    if rf.ok is None:
        return True
    grid_sel = {d: i for d, i in sel.items() if d in rf.ok.dims}
    return bool(rf.ok.isel(grid_sel).values)


# -- Fig. 1a ------------------------------------------------------------------------------------
def _draw_neurons(rf: ResultFile, at: dict[str, int]) -> Drawn:
    sels, notes = _panels(rf, at)
    rows, cols = _grid_shape(len(sels))
    fig = new_figure(height=2.0 * rows + 0.3, width=2.1 * cols)
    missing = 0
    for p, sel in enumerate(sels):
        ax = fig.add_subplot(rows, cols, p + 1)
        ax.set_aspect("equal")
        ax.set_title(_title(rf, sel, at))
        ax.axhline(0, color="0.8", lw=0.4)
        ax.axvline(0, color="0.8", lw=0.4)
        point = rf.ds.isel({d: i for d, i in sel.items() if d in rf.ds["W"].dims})
        if not _ok(rf, sel):
            missing += 1
            ax.text(0.5, 0.5, "failed", transform=ax.transAxes, ha="center")
            continue
        W = np.asarray(point["W"].values, dtype=float)  # (step, neuron, 2)
        a = np.asarray(point["a"].values, dtype=float)  # (step, neuron)
        traj = np.abs(a)[..., None] * W
        end_sign = np.sign(a[-1])
        for k in range(traj.shape[1]):
            colour = POSITIVE if end_sign[k] > 0 else NEGATIVE
            ax.plot(traj[:, k, 0], traj[:, k, 1], color=colour, lw=0.7, alpha=0.8)
            ax.plot(traj[-1, k, 0], traj[-1, k, 1], "o", color=colour, ms=1.8)
        lim = 1.1 * float(np.nanmax(np.abs(traj)))
        if "teacher_W" in point:  # rays along a*_j w*_j, to the edge of the panel
            for wj, aj in zip(point["teacher_W"].values, point["teacher_a"].values, strict=True):
                end = abs(aj) * wj * 2.0 * lim / max(float(np.linalg.norm(wj)), 1e-300)
                ax.plot([0, end[0]], [0, end[1]], ":", color=POSITIVE if aj > 0 else NEGATIVE,
                        lw=1.2, zorder=0)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.tick_params(labelsize=6)
    fig.legend(handles=[Line2D([], [], color=POSITIVE, label="a_k > 0"),
                        Line2D([], [], color=NEGATIVE, label="a_k < 0"),
                        Line2D([], [], color="0.3", ls=":", label="teacher direction")],
               loc="outside lower center", ncols=3)
    return Drawn(fig, "neuron trajectories |a_k| w_k over the checkpoints (dot: last), "
                 "coloured by the sign of a_k; dotted rays: the teacher neurons' directions w*_j, "
                 "coloured by the sign of a*_j", notes, missing)


# -- Fig. 5a ------------------------------------------------------------------------------------
def partition_columns(train_loss: np.ndarray) -> list[int]:
    """Checkpoint indices shown: the first, the first reaching each fraction of
    PARTITION_LEVELS of the initial training loss (if reached), and the last."""
    cols = [0]
    for level in PARTITION_LEVELS:
        hits = np.flatnonzero(train_loss <= level * train_loss[0])
        if hits.size and hits[0] not in cols:
            cols.append(int(hits[0]))
    last = int(train_loss.size - 1)
    if last not in cols:
        cols.append(last)
    return cols


def _draw_partition(rf: ResultFile, at: dict[str, int]) -> Drawn:
    sels, notes = _panels(rf, at, skip=())
    n_cols = len(PARTITION_LEVELS) + 2
    fig = new_figure(height=1.25 * len(sels) + 0.4, width=1.45 * n_cols)
    cmap = ListedColormap(["#f3e3c3", "#c9dbe9"])
    phi = np.degrees(np.asarray(rf.ds["angle"].values, dtype=float))
    dphi = phi[1] - phi[0] if phi.size > 1 else 1.0
    missing = 0
    for r, sel in enumerate(sels):
        point = rf.ds.isel({d: i for d, i in sel.items() if d in rf.ds["surface"].dims})
        ok = _ok(rf, sel)
        loss = np.asarray(point["train_loss"].values, dtype=float)
        cols = partition_columns(loss) if ok else []
        if not ok:
            missing += 1
        f = np.asarray(point["surface"].values, dtype=float)
        finite = f[np.isfinite(f)]
        ymax = 1.1 * max(float(np.max(np.abs(finite))) if finite.size else 1.0, 1e-12)
        for c in range(n_cols):
            ax = fig.add_subplot(len(sels), n_cols, r * n_cols + c + 1)
            ax.set_xticks([0, 180, 360] if r == len(sels) - 1 else [])
            ax.tick_params(labelsize=5)
            if c:
                ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(_title(rf, sel, at), fontsize=6)
            if c >= len(cols):
                ax.axis("off")
                continue
            j = cols[c]
            parity = np.asarray(point["parity"].values[j], dtype=float)
            ax.imshow(parity[None, :], extent=(phi[0], phi[-1] + dphi, -ymax, ymax),
                      aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
            ax.plot(phi, f[j], color="k", lw=0.7)
            ax.set_xlim(phi[0], phi[-1] + dphi)
            ax.set_ylim(-ymax, ymax)
            step = int(point["step"].values[j])
            ax.set_title(f"step {step}, L/L0 = {loss[j] / loss[0]:.2g}", fontsize=5)
    return Drawn(fig, "network output f on the circle against the angle [degrees], on its "
                 "activation regions coloured by the parity of the number of active neurons; "
                 "columns: initialisation, the first checkpoints with training loss <= "
                 + ", ".join(f"{x:g}" for x in PARTITION_LEVELS) + " of the initial loss, "
                 "and the end", notes, missing)


# -- Fig. 7 -------------------------------------------------------------------------------------
def draw_basin(rf: ResultFile, at: dict[str, int]) -> Drawn:
    from ..models.single_neuron._extras import basin_score

    ds = rf.ds
    bstar = np.asarray(rf.params.get("beta_star", [0.0, 1.0]), dtype=float)
    eta_a = float(rf.params.get("eta_a", 1.0))
    eta_w = float(rf.params.get("eta_w", 1.0))
    b = float(np.linalg.norm(bstar))
    bhat = bstar / b
    perp = np.array([-bhat[1], bhat[0]])
    m0 = 0  # the first method; both start from the same point
    a = ds["a"].isel(method=m0)
    w = ds["w"].isel(method=m0)
    for d, i in at.items():
        if d in a.dims:
            a, w = a.isel({d: i}), w.isel({d: i})
    grid = [d for d in a.dims if d in rf.grid]
    a0 = np.asarray(a.isel(time=0).transpose(*grid).values, dtype=float).ravel()
    a_end = np.asarray(a.isel(time=-1).transpose(*grid).values, dtype=float).ravel()
    w0 = np.asarray(w.isel(time=0).transpose(*grid, "dim").values, dtype=float).reshape(-1, 2)
    z, zp = w0 @ bhat, np.round(np.abs(w0 @ perp), 6)
    values = np.unique(zp[np.isfinite(zp)])
    notes = []
    if values.size > 4:
        notes.append(f"4 of {values.size} values of |w0 perp|")
        values = values[np.linspace(0, values.size - 1, 4).round().astype(int)]
    fig = new_figure(height=2.4, width=2.2 * max(values.size, 1) + 0.2)
    zz, aa = np.meshgrid(np.linspace(np.nanmin(z), np.nanmax(z), 301),
                         np.linspace(np.nanmin(a0), np.nanmax(a0), 301))
    for p, v in enumerate(values):
        ax = fig.add_subplot(1, values.size, p + 1)
        sel = zp == v
        colour = np.where(a_end[sel] > 0, POSITIVE, NEGATIVE)
        ax.scatter(z[sel], a0[sel], c=colour, s=4, linewidths=0)
        W = zz[..., None] * bhat + v * perp
        delta = eta_w * aa**2 - eta_a * (zz**2 + v**2)
        score = basin_score(aa.ravel(), W.reshape(-1, 2), delta.ravel(),
                            np.broadcast_to(bstar, (aa.size, 2)), np.full(aa.size, eta_a),
                            np.full(aa.size, eta_w)).reshape(aa.shape)
        # no mask needed: for delta > 0, lambda_+ |a0| > |w0 . beta*| so the score keeps the
        # sign of a0 and the zero set lies in delta <= 0 (on delta = 0 when w0_perp = 0)
        ax.contour(zz, aa, score, levels=[0.0], colors="k", linewidths=1.0)
        ax.contour(zz, aa, delta, levels=[0.0], colors="0.5", linewidths=0.6, linestyles="--")
        ax.set_title(f"|w0 perp| = {v:.3g}", fontsize=7)
        ax.set_xlabel("w0 . beta*/|beta*|")
        if p == 0:
            ax.set_ylabel("a0")
    fig.legend(handles=[Line2D([], [], marker="o", ls="", color=POSITIVE, label="a(end) > 0"),
                        Line2D([], [], marker="o", ls="", color=NEGATIVE, label="a(end) < 0"),
                        Line2D([], [], color="k", label="basin score = 0"),
                        Line2D([], [], color="0.5", ls="--", label="delta = 0")],
               loc="outside lower center", ncols=2)
    return Drawn(fig, "basins of a single neuron: initialisations coloured by the sign of a at "
                 "the end of the run, the separating surface (basin score 0, only where delta "
                 "<= 0) in black, delta = 0 dashed", notes, 0)


VIEWS: dict[str, View] = {
    "neurons": View("W", ("W",), "it needs a two-layer file saved with save_params = true",
                    _draw_neurons, family="two-layer",
                    checks=((_two_dims, "the neuron trajectories are drawn for d = 2 only"),)),
    "partition": View("surface", ("surface", "parity"),
                      "it needs a two-layer file with d = 2 saved with save_surface = true",
                      _draw_partition),
    "basin": View("basin_score", ("basin_score",),
                  "it needs a single-neuron file with the basin outputs", draw_basin,
                  family="single-neuron",
                  checks=((_two_dims, "the basins are drawn for d = 2 only"),
                          (_one_teacher, "it needs whitened data with one beta_star (not a "
                                         "grid over beta_star)"),
                          (_init_grid, "it needs a grid over the initialisation (a0 and w0)"))),
}
KINDS = tuple(VIEWS)
