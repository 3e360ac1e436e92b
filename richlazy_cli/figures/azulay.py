"""Builders of Azulay et al. 2021's figures ("Implicit bias of initialization shape"):
the diagonal network's population error against the scale α, one line per shape s (§7.1,
"Figure 7.1"), and the fully connected neuron's distance to the kernel predictor against s
(§7.2; docs/azulay-theory.md §2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps

from ..report.data import ResultFile
from .common import Built, categorical, find, fmt, new_figure, values


def diagonal(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "diagonal", ("population_error",), ("alpha", "s"), "azulay-diagonal")
    alphas, shapes = values(rf, "alpha"), values(rf, "s")
    da = rf.masked("population_error")
    n_seeds = rf.ds.sizes.get("seed", 1)
    centre = da.mean("seed", skipna=True) if "seed" in da.dims else da
    spread = da.std("seed", ddof=1, skipna=True) if n_seeds > 1 else None
    fig = new_figure(height=2.6, width=3.4)
    ax = fig.add_subplot()
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(shapes)))
    for k, s in enumerate(shapes):
        y = np.asarray(centre.isel(s=k).transpose("alpha").values, dtype=float)
        ax.plot(alphas, y, "o-", ms=2.5, color=colours[k], label=f"$s = {s:g}$")
        if spread is not None:
            e = np.asarray(spread.isel(s=k).transpose("alpha").values, dtype=float)
            ax.fill_between(alphas, np.clip(y - e, 1e-12, None), y + e, color=colours[k],
                            alpha=0.2, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("initialisation scale $\\alpha$")
    ax.set_ylabel("population error $\\|w-\\beta^*\\|^2$")
    ax.legend(fontsize=6, title="shape", title_fontsize=6)
    small = np.asarray(centre.isel(alpha=0).values, dtype=float)
    ratio = float(small[-1] / small[0])
    text = (f"at the smallest α = {alphas[0]:.2g}, population error s = {shapes[0]:g}: "
            f"{fmt(small[0])} against s = {shapes[-1]:g}: {fmt(small[-1])} "
            f"(ratio {ratio:.3g}); mean over {n_seeds} seed{'s' if n_seeds > 1 else ''}, "
            "band ±1 s.d.")
    return Built(fig, {"error_small_alpha": dict(zip([f"{s:g}" for s in shapes],
                                                     small.tolist(), strict=True)),
                       "ratio_last_first_shape": ratio}, text)


def fully_connected(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "single-neuron", ("beta_inf",), ("alpha", "s"), "azulay-fc")
    from ..models.single_neuron.fully_connected import fc_init, kernel_predictor

    alphas, shapes = values(rf, "alpha"), values(rf, "s")
    X = np.asarray(rf.params["X"], dtype=float)
    y = np.asarray(rf.params["y"], dtype=float)
    u = np.asarray(rf.params["beta0"], dtype=float)
    binf = rf.masked("beta_inf").transpose("alpha", "s", "dim").values
    dist = np.full((len(alphas), len(shapes)), np.nan)
    for i, a in enumerate(alphas):
        for j, s in enumerate(shapes):
            bk = kernel_predictor(X, y, a, s, u)
            a0, w0, _ = fc_init(a, s, u)
            dist[i, j] = np.linalg.norm(binf[i, j] - bk) / np.linalg.norm(bk - a0 * w0)
    fig = new_figure(height=2.6, width=3.4)
    ax = fig.add_subplot()
    pos = categorical(ax, shapes, "x", "shape $s$")
    colours = colormaps["viridis"](np.linspace(0.0, 0.8, len(alphas)))
    for i, a in enumerate(alphas):
        ax.plot(pos, dist[i], "o-", color=colours[i], label=f"$\\alpha = {a:g}$")
    ax.set_yscale("log")
    ax.set_ylabel("$\\|\\beta_\\infty-\\beta_K\\| / \\|\\beta_K-\\tilde w_0\\|$")
    ax.legend(fontsize=6)
    text = ("distance of the gradient-flow limit to the kernel (lazy) predictor, relative: "
            + "; ".join(f"α = {a:g}: " + ", ".join(f"s = {s:g} {fmt(dist[i, j])}"
                                                   for j, s in enumerate(shapes))
                        for i, a in enumerate(alphas)))
    return Built(fig, {"relative_distance_to_kernel": dist.tolist()}, text)
