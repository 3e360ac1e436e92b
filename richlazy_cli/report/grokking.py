"""Figures of the ``grokking`` model (docs/grokking.md §5), drawn by ``auto``.

* The grokking panel: training (dashed) and validation (solid) accuracy against optimiser
  steps, one colour per α, the median over seeds (at τ = 1 when τ is swept and 1 is on the
  grid, else at its first value).
* When α is swept: a heat map over (τ, α) of the median over seeds of ``steps_to_val``, a
  censored run counted as the step budget (Kunin et al. 2024, Fig. 12 protocol); a cell whose
  median is censored (at least half its seeds never reached the threshold) is hatched. The
  medians are also in ``summary.json`` (``median_steps_to_val``).

Failed points (status ≠ 0) are left out.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from matplotlib import colormaps, colors

from .data import ResultFile
from .style import MISSING_FACE, figure_entry, new_figure


def median_censored(steps: np.ndarray, censored: np.ndarray, budget: float
                    ) -> tuple[float, bool]:
    """The median of ``steps`` over runs, a censored run counted as ``budget``, and whether
    that median is censored (at least half the runs censored). NaN for no runs."""
    steps = np.asarray(steps, float)
    cens = np.asarray(censored, bool)
    ok = np.isfinite(steps) | cens
    if not ok.any():
        return float("nan"), False
    vals = np.where(cens[ok], budget, steps[ok])
    return float(np.median(vals)), bool(2 * cens[ok].sum() >= ok.sum())


def _select(rf: ResultFile, da: xr.DataArray, keep: tuple[str, ...]
            ) -> tuple[xr.DataArray, list[str]]:
    """Other grid dimensions than ``keep`` at their first value (τ at 1 when it is there)."""
    notes = []
    for d in rf.grid_dims:
        if d in da.dims and d not in keep:
            vals = rf.ds[d].values
            at = int(np.flatnonzero(np.isclose(vals.astype(float), 1.0))[0]) \
                if d == "tau" and np.isclose(vals.astype(float), 1.0).any() else 0
            notes.append(f"{d} = {vals[at]}")
            da = da.isel({d: at})
    return da, notes




def _alpha_colours(alphas: list[float]) -> list[Any]:
    lo, hi = min(alphas), max(alphas)
    norm = colors.LogNorm(lo, hi) if hi > lo else colors.LogNorm(lo / 2, lo * 2)
    return [colormaps["viridis"](norm(a)) for a in alphas]


def _panel(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
           ) -> dict[str, Any]:
    steps = rf.ds["eval_step"].values.astype(float)
    keep = steps > 0
    fig = new_figure(height=2.8)
    ax = fig.add_subplot()
    curves: list[tuple[float, np.ndarray, np.ndarray]] = []
    notes: list[str] = []
    for name in ("train_acc", "val_acc"):
        da, notes = _select(rf, rf.masked(name), ("alpha", "seed"))
        alphas = [float(a) for a in da["alpha"].values] if "alpha" in da.dims \
            else [float(rf.params.get("alpha", 1.0) or 1.0)]
        for k, a in enumerate(alphas):
            sub = da.isel(alpha=k) if "alpha" in da.dims else da
            vals = sub.transpose(..., "eval_step").values.reshape(-1, steps.size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
                med = np.nanmedian(vals, axis=0)
            curves.append((a, med, np.array(name == "train_acc")))
    alphas = sorted({a for a, _, _ in curves})
    cols = dict(zip(alphas, _alpha_colours(alphas), strict=True))
    for a, med, is_train in curves:
        ax.plot(steps[keep], med[keep], "--" if is_train else "-", color=cols[a],
                label=None if is_train else f"α = {a:g}")
    ax.plot([], [], "k--", label="train")
    ax.plot([], [], "k-", label="validation")
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("accuracy")
    ax.set_title("grokking: train (dashed) and validation (solid) accuracy", fontsize="small")
    ax.legend(fontsize="small", loc="upper left")
    text = ("Training (dashed) and validation (solid) accuracy on the full sets against "
            "optimiser steps (logarithmic; step 0 left out), median over seeds, per embedding "
            "scale α" + (f" ({'; '.join(notes)})" if notes else "") + ".")
    return figure_entry(rf, out_dir, fig, "accuracy", "val_acc", fmt, text, fields,
                        prefix="grokking")


def _heatmap(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
             ) -> dict[str, Any]:
    budget = float(rf.params.get("steps") or np.nanmax(rf.ds["eval_step"].values))
    S, notes = _select(rf, rf.masked("steps_to_val"), ("alpha", "tau", "seed"))
    C, _ = _select(rf, rf.masked("censored_val"), ("alpha", "tau", "seed"))
    C = C.fillna(0).astype(bool)  # failed points: NaN, so neither censored nor measured
    alphas = S["alpha"].values.astype(float)
    taus = S["tau"].values.astype(float) if "tau" in S.dims \
        else np.array([float(rf.params.get("tau", 1.0) or 1.0)])
    med = np.full((taus.size, alphas.size), np.nan)
    cens = np.zeros(med.shape, bool)
    for i in range(taus.size):
        for j in range(alphas.size):
            sel = {"alpha": j, **({"tau": i} if "tau" in S.dims else {})}
            med[i, j], cens[i, j] = median_censored(S.isel(sel).values.ravel(),
                                                    C.isel(sel).values.ravel(), budget)
    fig = new_figure(height=2.8)
    ax = fig.add_subplot()
    shown = np.ma.masked_invalid(med)
    finite = med[np.isfinite(med)]
    norm = colors.LogNorm(max(finite.min(), 1.0), max(finite.max(), 2.0)) if finite.size \
        else None
    ax.set_facecolor(MISSING_FACE)
    mesh = ax.pcolormesh(np.arange(alphas.size + 1), np.arange(taus.size + 1), shown,
                         cmap="viridis_r", norm=norm)
    for i, j in zip(*np.nonzero(cens), strict=True):
        ax.add_patch(_hatch(j, i))
    for i in range(taus.size):
        for j in range(alphas.size):
            if np.isfinite(med[i, j]) and norm is not None:
                dark = norm(med[i, j]) > 0.5  # viridis_r: large values are dark
                ax.text(j + 0.5, i + 0.5, ("≥" if cens[i, j] else "") + f"{med[i, j]:.0f}",
                        ha="center", va="center", fontsize=5, color="w" if dark else "k")
    ax.set_xticks(np.arange(alphas.size) + 0.5, [f"{a:g}" for a in alphas])
    ax.set_yticks(np.arange(taus.size) + 0.5, [f"{t:g}" for t in taus])
    ax.set_xlabel("embedding scale α")
    ax.set_ylabel("logit scale τ")
    ax.set_title("median steps to validation accuracy ≥ threshold", fontsize="small")
    fig.colorbar(mesh, ax=ax, label="steps")
    table = {f"tau={t:g}": {f"alpha={a:g}": (None if not np.isfinite(med[i, j])
                                             else float(med[i, j]))
                            for j, a in enumerate(alphas)} for i, t in enumerate(taus)}
    best = np.unravel_index(np.nanargmin(np.where(cens, np.inf, med)), med.shape) \
        if np.isfinite(np.where(cens, np.nan, med)).any() else None
    where = ("not reached in any cell" if best is None
             else f"fastest at τ = {taus[best[0]]:g}, α = {alphas[best[1]]:g}")
    text = ("Median over seeds of the steps to the validation-accuracy threshold, a censored "
            f"run counted as the budget of {budget:g} steps; hatched cells: censored median "
            f"(at least half the seeds never reached it); {where}"
            + (f" ({'; '.join(notes)})" if notes else "") + ".")
    return figure_entry(rf, out_dir, fig, "steps-to-val", "steps_to_val", fmt, text, fields,
                        prefix="grokking", median_steps_to_val=table,
                        censored_cells=[[bool(c) for c in row] for row in cens])


def _hatch(x: int, y: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, fill=False, hatch="////", lw=0)


def grokking_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                     ) -> list[dict[str, Any]]:
    """The grokking figures of one ``grokking`` result file (``report/families.py`` chooses
    the family; none when the file lacks the validation curves)."""
    if "val_acc" not in rf.ds or "eval_step" not in rf.ds.coords:
        return []
    entries = [_panel(rf, out_dir, fmt, fields)]
    if "alpha" in rf.ds.dims and "steps_to_val" in rf.ds:
        entries.append(_heatmap(rf, out_dir, fmt, fields))
    return entries
