"""The ``rhm`` and ``cnn`` families' own figures (docs/rhm.md §6, docs/cnn.md §6), drawn by
``auto`` (declared in ``report/families.py``).

* ``rhm``: final test accuracy against the training fraction, one curve per α (mean ± 1 s.d.
  over seeds, logarithmic fraction axis), and the sample complexity f*₀.₅(α), the smallest
  fraction whose seed-mean accuracy reaches 0.5 by log-linear interpolation
  (:func:`threshold_fraction`), in the caption and ``summary.json``.
* ``cnn``: kernel distance, Hamming distance and parameter distance against epochs, one curve
  per α (mean ± 1 s.d. over seeds); and a scatter of kernel distance against Hamming distance
  over every (α, seed, checkpoint), coloured by α, with their Spearman correlation.
* ``cnn`` with a filter-smoothness net (``smooth2d``/``smooth1d``, docs/cnn.md §5): the mean
  roughness R̄ of the first-layer filters against α at initialisation and at the end, with the
  i.i.d. Gaussian level drawn as a reference line, and, when the filters were saved, a gallery
  of the final filters, one row per α (first seed).

Other grid dimensions than ``alpha``, ``train_fraction`` and ``seed`` are shown at their first
value (said in the caption). Failed or missing points are left out.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from matplotlib import colormaps, colors

from .data import ResultFile
from .style import figure_entry, new_figure

_GRID_KEPT = ("alpha", "train_fraction", "seed")


def threshold_fraction(fractions: np.ndarray, acc: np.ndarray, level: float = 0.5) -> float:
    """The smallest training fraction at which ``acc`` reaches ``level``, interpolating
    linearly in log(fraction) between the grid points around the first crossing (NaN when it
    never does; the smallest fraction when it already does there)."""
    order = np.argsort(fractions)
    f, a = np.asarray(fractions, float)[order], np.asarray(acc, float)[order]
    above = np.flatnonzero(a >= level)
    if above.size == 0:
        return float("nan")
    k = int(above[0])
    if k == 0:
        return float(f[0])
    lf0, lf1 = math.log(f[k - 1]), math.log(f[k])
    t = (level - a[k - 1]) / (a[k] - a[k - 1])
    return float(math.exp(lf0 + t * (lf1 - lf0)))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of the finite pairs (average ranks for ties)."""
    from scipy.stats import spearmanr

    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    return float(spearmanr(x[ok], y[ok]).statistic)


def _fixed(rf: ResultFile, da: xr.DataArray) -> tuple[xr.DataArray, list[str]]:
    notes = []
    for d in rf.grid_dims:
        if d not in _GRID_KEPT and d in da.dims:
            notes.append(f"{d} = {rf.ds[d].values[0]}")
            da = da.isel({d: 0})
    return da, notes


def _by_alpha(da: xr.DataArray) -> list[tuple[float | None, np.ndarray, np.ndarray]]:
    """(α, seed mean, seed s.d.) for each α of ``da`` (α None when it is not a dimension)."""
    out = []
    alphas = da["alpha"].values if "alpha" in da.dims else [None]
    for a in alphas:
        sub = da.sel(alpha=a) if a is not None else da
        if "seed" in sub.dims:
            vals = sub.transpose("seed", ...).values
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
                mean, sd = np.nanmean(vals, axis=0), np.nanstd(vals, axis=0)
        else:
            mean, sd = sub.values, np.zeros(sub.shape)
        out.append((None if a is None else float(a), mean, sd))
    return out


def _colours(alphas: list[float | None]) -> tuple[list[Any], colors.Normalize | None]:
    finite = [a for a in alphas if a is not None]
    if not finite:
        return ["C0"], None
    lo, hi = min(finite), max(finite)
    norm = colors.LogNorm(lo, hi) if hi > lo else colors.LogNorm(lo / 2, lo * 2)
    cmap = colormaps["viridis"]
    return [cmap(norm(a)) for a in finite], norm


def rhm_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
         ) -> list[dict[str, Any]]:
    if "final_test_acc" not in rf.ds or "train_fraction" not in rf.ds.dims:
        return []
    da, notes = _fixed(rf, rf.masked("final_test_acc"))
    da = da.transpose(*[d for d in ("alpha", "seed", "train_fraction") if d in da.dims])
    f = da["train_fraction"].values.astype(float)
    fig = new_figure()
    ax = fig.add_subplot()
    curves = _by_alpha(da)
    cols, _ = _colours([a for a, _, _ in curves])
    f_star: dict[str, float | None] = {}
    for (a, mean, sd), col in zip(curves, cols, strict=False):
        label = "α = " + ("1" if a is None else f"{a:g}")
        ax.plot(f, mean, "o-", color=col, label=label)
        ax.fill_between(f, mean - sd, mean + sd, color=col, alpha=0.2, lw=0)
        fs = threshold_fraction(f, mean)
        f_star[label] = None if not math.isfinite(fs) else fs
    n_c = int(rf.params.get("n_classes", 8) or 8)
    ax.axhline(1.0 / n_c, color="grey", ls=":", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("training fraction f = P / P_max")
    ax.set_ylabel("test accuracy")
    ax.set_title("random hierarchy model", fontsize="small")
    ax.legend(fontsize="small")
    stars = ", ".join(f"{k}: {'not reached' if v is None else f'{v:.3g}'}"
                      for k, v in f_star.items())
    text = ("Final test accuracy against the training fraction, mean ± 1 s.d. over seeds, per "
            f"relative scale α. Sample complexity f*0.5 (seed-mean accuracy 0.5): {stars}"
            + (f" ({'; '.join(notes)})" if notes else "") + ".")
    return [figure_entry(rf, out_dir, fig, "accuracy", "final_test_acc", fmt, text, fields,
                   f_star=f_star)]


def cnn_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
         ) -> list[dict[str, Any]]:
    names = ("kernel_distance", "hamming_distance", "param_distance")
    if not all(n in rf.ds for n in names) or "epoch" not in rf.ds.coords \
            or rf.ds["epoch"].ndim != 1:
        return []
    epoch = rf.ds["epoch"].values.astype(float)
    keep = epoch > 0
    entries = []
    for name in names:
        da, notes = _fixed(rf, rf.masked(name))
        curves = _by_alpha(da.transpose(..., "checkpoint"))
        cols, _ = _colours([a for a, _, _ in curves])
        fig = new_figure()
        ax = fig.add_subplot()
        for (a, mean, sd), col in zip(curves, cols, strict=False):
            label = "α = " + ("1" if a is None else f"{a:g}")
            ax.plot(epoch[keep], mean[keep], "-", color=col, label=label)
            ax.fill_between(epoch[keep], (mean - sd)[keep], (mean + sd)[keep], color=col,
                            alpha=0.2, lw=0)
        ax.set_xscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(name.replace("_", " "))
        ax.set_title(str(rf.ds[name].attrs.get("long_name", name)), fontsize="small")
        ax.legend(fontsize="small")
        text = (f"{name.replace('_', ' ').capitalize()} against epochs (logarithmic; epoch 0, "
                "where every distance is 0, left out), mean ± 1 s.d. over seeds, per relative "
                "scale α" + (f" ({'; '.join(notes)})" if notes else "") + ".")
        entries.append(figure_entry(rf, out_dir, fig, f"{name}", name, fmt, text, fields))
    S, _ = _fixed(rf, rf.masked("kernel_distance"))
    H, _ = _fixed(rf, rf.masked("hamming_distance"))
    H = H.transpose(*S.dims)
    if "alpha" in S.dims:
        A = xr.broadcast(S["alpha"].astype(float), S)[0].values.ravel()
    else:
        A = np.full(S.size, float(rf.params.get("alpha", 1.0) or 1.0))
    s, h = S.values.ravel(), H.values.ravel()
    rho = spearman(s, h)
    fig = new_figure()
    ax = fig.add_subplot()
    _, norm = _colours(sorted(set(A.tolist())))
    sc = ax.scatter(h, s, c=A, cmap="viridis", norm=norm, s=12)
    fig.colorbar(sc, ax=ax, label="α")
    ax.set_xlabel("Hamming distance")
    ax.set_ylabel("kernel distance S(0,t)")
    ax.set_title(f"kernel against Hamming distance (Spearman {rho:.3f})", fontsize="small")
    text = ("Kernel distance against Hamming distance at every (α, seed, checkpoint), coloured "
            f"by α; Spearman rank correlation {rho:.3f}.")
    entries.append(figure_entry(rf, out_dir, fig, "kernel-vs-hamming", "kernel_distance", fmt, text,
                          fields, spearman=None if not math.isfinite(rho) else rho))
    return entries


def roughness_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
               ) -> list[dict[str, Any]]:
    if "filter_roughness" not in rf.ds or rf.ds["filter_roughness"].dims[-1] != "checkpoint":
        return []
    da, notes = _fixed(rf, rf.masked("filter_roughness"))
    da = da.transpose(..., "checkpoint")
    iid = rf.ds.attrs.get("filter_roughness_iid")
    fig = new_figure()
    ax = fig.add_subplot()
    summary: dict[str, dict[str, float | None]] = {}
    curves = {}
    for when, j in (("initialisation", 0), ("end", -1)):
        rows = _by_alpha(da.isel(checkpoint=j))
        a = np.array([1.0 if r[0] is None else r[0] for r in rows])
        mean = np.array([float(r[1]) for r in rows])
        sd = np.array([float(r[2]) for r in rows])
        curves[when] = (a, mean, sd)
        for ai, m in zip(a, mean, strict=True):
            summary.setdefault(f"{ai:g}", {})[when] = None if not math.isfinite(m) else m
    for (when, (a, mean, sd)), style in zip(curves.items(), ("s--", "o-"), strict=True):
        ax.errorbar(a, mean, yerr=sd, fmt=style, capsize=3,
                    color="grey" if when == "initialisation" else "C0", label=f"at {when}")
    if iid is not None:
        ax.axhline(float(iid), color="C3", ls=":", lw=1,
                   label=f"i.i.d. Gaussian filters ({float(iid):.3g})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("relative scale α")
    ax.set_ylabel("mean filter roughness R̄")
    ax.set_title("first-layer filter roughness (lower = smoother)", fontsize="small")
    ax.legend(fontsize="small")
    end = ", ".join(f"α = {k}: {v['end']:.3g}" for k, v in summary.items()
                    if v.get("end") is not None)
    text = ("Mean normalised Laplacian energy R̄ = ‖Λ∗w‖²/‖w‖² of the first-layer filters "
            "against α, at initialisation and at the end of training (mean ± 1 s.d. over "
            f"seeds; dotted: the i.i.d. Gaussian level). At the end: {end}"
            + (f" ({'; '.join(notes)})" if notes else "") + ".")
    entries = [figure_entry(rf, out_dir, fig, "roughness", "filter_roughness", fmt, text,
                            fields, roughness=summary)]
    if "filters" in rf.ds:
        entries.append(_gallery(rf, out_dir, fmt, fields))
    return entries


def _gallery(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
             ) -> dict[str, Any]:
    """The final first-layer filters (input channel 0), one row per α, first seed."""
    da, notes = _fixed(rf, rf.masked("filters"))
    if "seed" in da.dims:
        notes.append(f"seed = {rf.ds['seed'].values[0]}")
        da = da.isel(seed=0)
    da = da.isel(in_channel=0)
    alphas = [float(a) for a in da["alpha"].values] if "alpha" in da.dims else [None]
    n_f = int(da.sizes["out_channel"])
    two_d = "filter_row" in da.dims
    fig = new_figure(height=0.75 * len(alphas) + 0.5, width=0.7 * n_f + 0.5)
    axes = fig.subplots(len(alphas), n_f, squeeze=False)
    for r, a in enumerate(alphas):
        sub = da.sel(alpha=a) if a is not None else da
        for c in range(n_f):
            ax = axes[r][c]
            w = sub.isel(out_channel=c).values
            lim = float(np.nanmax(np.abs(w))) if np.isfinite(w).any() else 1.0
            if two_d:
                ax.imshow(w, cmap="RdBu_r", vmin=-lim, vmax=lim)
            else:
                ax.plot(w, color="k", lw=1)
                ax.set_ylim(-lim * 1.05, lim * 1.05)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel("α = " + ("1" if a is None else f"{a:g}"), fontsize="small")
    fig.suptitle("first-layer filters at the end of training", fontsize="small")
    text = ("Final first-layer filters (input channel 0, each on its own symmetric colour "
            "scale), one row per relative scale α" + (f" ({'; '.join(notes)})" if notes else "")
            + ".")
    return figure_entry(rf, out_dir, fig, "filters", "filters", fmt, text, fields)
