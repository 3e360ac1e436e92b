"""Builders of Kunin et al. 2024's figures ("Get rich quick"), drawn as the paper lays them out.

Each ``fig_*`` takes the loaded result files (:func:`.common.find` picks the one it needs) and
returns a :class:`~.common.Built` whose ``measured`` value tests the figure's claim; the claims
and their measures are declared in :mod:`.registry`. Mathematics: docs/single-neuron.md,
docs/two-layer.md, docs/figures.md.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import LogNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..report.data import ResultFile
from .common import Built, categorical, find, fmt, log_floor, new_figure, values

POSITIVE, NEGATIVE = "#c0392b", "#2c6fbb"


def _delta_colours(deltas: Sequence[float]) -> list[Any]:
    """Downstream (δ < 0) blue, balanced black, upstream (δ > 0) red, darker with |δ|."""
    top = max([abs(d) for d in deltas] + [1e-12])
    out: list[Any] = []  # colour names and RGBA tuples
    for d in deltas:
        if d == 0:
            out.append("k")
        else:
            shade = 0.45 + 0.5 * abs(d) / top
            out.append(colormaps["Reds" if d > 0 else "Blues"](shade))
    return out


def _delta_label(d: float) -> str:
    return f"$\\delta = {d:g}$"


def _isel(rf: ResultFile, name: str, **sel: int) -> np.ndarray:
    da = rf.masked(name)
    return np.asarray(da.isel({k: v for k, v in sel.items() if k in da.dims}).values, float)


def _grid_index(rf: ResultFile, dim: str, value: float) -> int:
    vals = np.asarray(rf.ds[dim].values, dtype=float)
    return int(np.argmin(np.abs(vals - value)))


# -- Fig. 1a ----------------------------------------------------------------------------------
FIG1A = ((0.1, 0.0, "rich"), (2.0, 0.0, "lazy"), (0.1, 1.0, "upstream"),
         (0.1, -1.0, "downstream"))


def teacher_angles(W: np.ndarray) -> float:
    """Smallest pairwise angle [deg] between the teacher directions w*_j (rows of ``W``)."""
    ang = np.degrees(np.arctan2(W[:, 1], W[:, 0]))
    gaps = [abs((x - y + 180.0) % 360.0 - 180.0) for i, x in enumerate(ang) for y in ang[i + 1:]]
    return float(min(gaps)) if gaps else float("nan")


def fig1a(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "two-layer", ("W", "a", "teacher_W"), ("tau", "delta"), "kunin-fig1a")
    fig = new_figure(height=2.55, width=6.8)
    axes = fig.subplots(1, 4)
    measured: dict[str, Any] = {}
    for ax, (tau, delta, name) in zip(axes, FIG1A, strict=True):
        i, j = _grid_index(rf, "tau", tau), _grid_index(rf, "delta", delta)
        W, a = _isel(rf, "W", tau=i, delta=j), _isel(rf, "a", tau=i, delta=j)
        traj = np.abs(a)[..., None] * W
        for k in range(traj.shape[1]):
            colour = POSITIVE if a[-1, k] > 0 else NEGATIVE
            ax.plot(traj[:, k, 0], traj[:, k, 1], color=colour, lw=0.7, alpha=0.8)
            ax.plot(traj[-1, k, 0], traj[-1, k, 1], "o", color=colour, ms=1.6)
        lim = 1.1 * float(np.nanmax(np.abs(traj)))
        tw, ta = _isel(rf, "teacher_W", tau=i, delta=j), _isel(rf, "teacher_a", tau=i, delta=j)
        for wj, aj in zip(tw, ta, strict=True):
            end = wj * 2.0 * lim / max(float(np.linalg.norm(wj)), 1e-300)
            ax.plot([0, end[0]], [0, end[1]], ":", color=POSITIVE if aj > 0 else NEGATIVE,
                    lw=1.2, zorder=0)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.set_title(f"{name}: $\\tau = {tau:g}$, $\\delta = {rf.ds['delta'].values[j]:.2g}$",
                     fontsize=6.5)
        ax.set_xlabel("$|a_k|\\,w_{k,1}$")
        ax.tick_params(labelsize=5.5)
        ax.axhline(0, color="0.85", lw=0.4, zorder=0)
        ax.axvline(0, color="0.85", lw=0.4, zorder=0)
        measured[f"direction_change_{name}"] = float(
            _isel(rf, "direction_change", tau=i, delta=j)[-1])
        measured[f"teacher_alignment_{name}"] = float(
            _isel(rf, "teacher_alignment", tau=i, delta=j)[-1])
    axes[0].set_ylabel("$|a_k|\\,w_{k,2}$")
    measured["teacher_min_angle_deg"] = teacher_angles(_isel(rf, "teacher_W", tau=0, delta=0))
    fig.legend(handles=[Line2D([], [], color=POSITIVE, label="$a_k > 0$"),
                        Line2D([], [], color=NEGATIVE, label="$a_k < 0$"),
                        Line2D([], [], color="0.3", ls=":", label="teacher direction $w^*_j$")],
               loc="outside lower center", ncols=3)
    m = measured
    text = (f"direction change (|a_k||w_k|-weighted angle to w_k(0)) upstream "
            f"{m['direction_change_upstream']:.1f}°, rich {m['direction_change_rich']:.1f}°, "
            f"downstream {m['direction_change_downstream']:.2f}°, lazy "
            f"{m['direction_change_lazy']:.2f}°; teacher alignment upstream "
            f"{m['teacher_alignment_upstream']:.3f} against downstream "
            f"{m['teacher_alignment_downstream']:.3f}; teacher directions at least "
            f"{m['teacher_min_angle_deg']:.0f}° apart")
    return Built(fig, measured, text)


# -- Figs. 1b and 5b: phase diagrams ------------------------------------------------------------
def _phase(ax: Any, fig: Any, rf: ResultFile, name: str, label: str, log: bool = True) -> Any:
    da = rf.masked(name).isel(step=-1)
    if "seed" in da.dims:
        da = da.mean("seed", skipna=True)
    z = np.asarray(da.transpose("delta", "tau").values, dtype=float)
    taus, deltas = values(rf, "tau"), values(rf, "delta")
    finite = z[np.isfinite(z) & (z > 0)]
    norm = LogNorm(float(finite.min()), float(finite.max())) if log and finite.size \
        and finite.max() > 10 * finite.min() else None
    te = np.geomspace(taus[0], taus[-1], len(taus))
    ratio = (te[1] / te[0]) ** 0.5 if len(te) > 1 else 2.0
    x_edges = np.concatenate([[taus[0] / ratio], np.sqrt(np.multiply(taus[1:], taus[:-1])),
                              [taus[-1] * ratio]])
    step = (deltas[1] - deltas[0]) / 2 if len(deltas) > 1 else 0.5
    y_edges = np.concatenate([[deltas[0] - step], (np.add(deltas[1:], deltas[:-1])) / 2,
                              [deltas[-1] + step]])
    mesh = ax.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(z), norm=norm, cmap="viridis",
                         shading="flat")
    ax.set_xscale("log")
    ax.set_xlabel("$\\tau$ (overall scale)")
    ax.set_ylabel("$\\delta$ (relative scale)")
    bar = fig.colorbar(mesh, ax=ax)
    bar.set_label(label)
    if np.isfinite(z).sum() >= 4 and np.nanmin(z) < np.nanmax(z):
        levels = np.geomspace(np.nanmin(finite), np.nanmax(finite), 5)[1:-1] if norm \
            else np.linspace(np.nanmin(z), np.nanmax(z), 5)[1:-1]
        cs = ax.contour(taus, deltas, z, levels=levels, colors="w", linewidths=0.5)
        ax.clabel(cs, fontsize=5, fmt=lambda v: f"{v:.2g}")
    return z


def _corner(z: np.ndarray, rf: ResultFile) -> dict[str, float]:
    """Values at small τ upstream (δ max), small τ downstream (δ min), and lazy (τ max)."""
    return {"upstream": float(z[-1, 0]), "downstream": float(z[0, 0]),
            "lazy": float(np.nanmean(z[:, -1])), "balanced": float(z[len(z) // 2, 0])}


def fig1b(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "two-layer", ("test_loss", "kernel_distance"), ("tau", "delta"),
              "kunin-fig1b")
    fig = new_figure(height=2.5, width=6.8)
    a1, a2 = fig.subplots(1, 2)
    loss = _phase(a1, fig, rf, "test_loss", "test loss")
    dist = _phase(a2, fig, rf, "kernel_distance", "kernel distance $S(0,t)$", log=False)
    a1.set_title("test loss", fontsize=7)
    a2.set_title("kernel distance", fontsize=7)
    c_loss, c_dist = _corner(loss, rf), _corner(dist, rf)
    best = np.unravel_index(np.nanargmin(loss), loss.shape)
    measured = {"kernel_distance": c_dist, "test_loss": c_loss,
                "argmin_test_loss": {"tau": values(rf, "tau")[best[1]],
                                     "delta": values(rf, "delta")[best[0]]}}
    text = (f"kernel distance at the smallest τ: upstream {fmt(c_dist['upstream'])}, "
            f"downstream {fmt(c_dist['downstream'])}, against lazy (largest τ, mean over δ) "
            f"{fmt(c_dist['lazy'])}; test loss upstream {fmt(c_loss['upstream'])} against "
            f"downstream {fmt(c_loss['downstream'])}; lowest test loss at τ = "
            f"{measured['argmin_test_loss']['tau']:.3g}, δ = "
            f"{measured['argmin_test_loss']['delta']:.3g}")
    return Built(fig, measured, text)


def fig5b(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "two-layer", ("hamming_distance", "param_distance"), ("tau", "delta"),
              "kunin-fig5b")
    fig = new_figure(height=2.5, width=6.8)
    a1, a2 = fig.subplots(1, 2)
    ham = _phase(a1, fig, rf, "hamming_distance", "Hamming distance $H/m$", log=False)
    par = _phase(a2, fig, rf, "param_distance", "$\\|\\theta_t-\\theta_0\\|_2$")
    a1.set_title("activation (Hamming) distance", fontsize=7)
    a2.set_title("parameter distance", fontsize=7)
    ch, cp = _corner(ham, rf), _corner(par, rf)
    text = (f"at the smallest τ, Hamming distance upstream {fmt(ch['upstream'])} against "
            f"downstream {fmt(ch['downstream'])}; parameter distance upstream "
            f"{fmt(cp['upstream'])} against downstream {fmt(cp['downstream'])}")
    return Built(fig, {"hamming_distance": ch, "param_distance": cp}, text)


# -- single neuron: Figs. 2, 3, 4a, 8 --------------------------------------------------------
def _neuron(files: Sequence[ResultFile], name: str, need: tuple[str, ...] = ("mu",)
            ) -> ResultFile:
    return find(files, "single-neuron", need, ("delta",), name)


def _method(rf: ResultFile, which: str) -> int:
    methods = [str(m) for m in rf.ds["method"].values]
    return methods.index(which) if which in methods else 0


def fig2(files: Sequence[ResultFile]) -> Built:
    rf = _neuron(files, "kunin-fig2", ("a", "w", "delta_t"))
    deltas = values(rf, "delta")
    fig = new_figure(height=3.0, width=6.8)
    cols = _delta_colours(deltas)
    chosen = [k for k, d in enumerate(deltas) if d in (min(deltas), 0.0, max(deltas))]
    axes = [fig.add_subplot(1, len(chosen), p + 1, projection="3d") for p in range(len(chosen))]
    drift = 0.0
    ex = _method(rf, "exact")
    for k in range(len(deltas)):
        for m in range(rf.ds.sizes["method"]):
            dt = _isel(rf, "delta_t", delta=k, method=m)
            drift = max(drift, float(np.nanmax(np.abs(dt - dt[0]))))
    for ax, k in zip(axes, chosen, strict=True):
        d = deltas[k]
        a = _isel(rf, "a", delta=k, method=ex)
        w = _isel(rf, "w", delta=k, method=ex)
        lim = 1.2 * max(float(np.nanmax(np.abs(w))), float(np.nanmax(np.abs(a))), 1.0)
        # the surface a^2 - |w|^2 = delta (eta = 1), by revolution about the a axis
        r = np.linspace(0, lim, 30)
        th = np.linspace(0, 2 * np.pi, 40)
        R, T = np.meshgrid(r, th)
        A2 = d + R**2
        A = np.where(A2 >= 0, np.sqrt(np.clip(A2, 0, None)), np.nan)
        for sign in (1, -1):
            ax.plot_surface(R * np.cos(T), R * np.sin(T), sign * A, color="0.7", alpha=0.25,
                            linewidth=0)
        ax.plot(w[:, 0], w[:, 1], a, color=cols[k], lw=1.5)
        ax.scatter(w[0, 0], w[0, 1], a[0], color=cols[k], s=6)
        ax.set_xlabel("$w_1$", fontsize=6, labelpad=-8)
        ax.set_ylabel("$w_2$", fontsize=6, labelpad=-8)
        ax.set_zlabel("$a$", fontsize=6, labelpad=-8)
        ax.set_title(_delta_label(d) + (" (one sheet)" if d < 0 else " (cone)" if d == 0
                                         else " (two sheets)"), fontsize=6.5)
        ax.tick_params(labelsize=4.5, pad=-3)
        ax.set_zlim(-lim, lim)
    text = (f"largest drift of the conserved δ along any trajectory (exact and numeric), "
            f"max_t |δ(t) − δ(0)| = {fmt(drift)}")
    return Built(fig, {"delta_drift": drift}, text)


def fig3(files: Sequence[ResultFile]) -> Built:
    rf = _neuron(files, "kunin-fig3", ("mu", "phi", "kernel_distance"))
    deltas = values(rf, "delta")
    cols = _delta_colours(deltas)
    t = np.asarray(rf.ds["time"].values, dtype=float)
    fig = new_figure(height=2.6, width=6.8)
    axes = fig.subplots(1, 3)
    ex, nu = _method(rf, "exact"), _method(rf, "numeric")
    worst = 0.0
    for ax, (name, label) in zip(axes, (("mu", "$\\mu = a\\|w\\|$"),
                                        ("phi", "$\\phi = \\cos(w, \\beta^*)$"),
                                        ("kernel_distance", "$S(0, t)$")), strict=True):
        for k, d in enumerate(deltas):
            e = _isel(rf, name, delta=k, method=ex)
            n = _isel(rf, name, delta=k, method=nu)
            ax.plot(t, n, color=cols[k], lw=1.2, label=_delta_label(d))
            ax.plot(t, e, color="k", ls="--", lw=0.6)
            worst = max(worst, float(np.nanmax(np.abs(e - n))))
        ax.set_xlabel("time $t$")
        ax.set_ylabel(label)
    S = {d: float(_isel(rf, "kernel_distance", delta=k, method=ex)[-1])
         for k, d in enumerate(deltas)}
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="k", ls="--", lw=0.6))
    labels.append("exact")
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    text = ("kernel distance at the end S(0, t_max): "
            + ", ".join(f"δ = {d:g}: {fmt(s)}" for d, s in S.items())
            + f"; max |exact − numeric| over μ, φ, S = {fmt(worst)}")
    return Built(fig, {"kernel_distance_end": S, "max_abs_diff": worst}, text)


def fig4a(files: Sequence[ResultFile]) -> Built:
    rf = _neuron(files, "kunin-fig4a", ("beta",))
    deltas = values(rf, "delta")
    cols = _delta_colours(deltas)
    ex = _method(rf, "exact")
    bstar = np.asarray(rf.params.get("beta_star", [0.0, 1.0]), dtype=float)
    fig = new_figure(height=3.0, width=3.4)
    ax = fig.add_subplot()
    dev = {}
    for k, d in enumerate(deltas):
        b = _isel(rf, "beta", delta=k, method=ex)
        ax.plot(b[:, 0], b[:, 1], color=cols[k], lw=1.2, label=_delta_label(d))
        b0 = b[0]
        seg = bstar - b0
        s = np.clip(((b - b0) @ seg) / (seg @ seg), 0, 1)
        dev[d] = float(np.nanmax(np.linalg.norm(b - (b0 + s[:, None] * seg), axis=1)))
    b0 = _isel(rf, "beta", delta=0, method=ex)[0]
    ax.plot(*b0, "ko", ms=3)
    ax.plot(*bstar, "k*", ms=6)
    ax.plot([b0[0], bstar[0]], [b0[1], bstar[1]], color="0.6", ls=":", lw=1,
            label="linear regression path")
    ax.set_aspect("equal")
    ax.set_xlabel("$\\beta_1$")
    ax.set_ylabel("$\\beta_2$")
    ax.legend(fontsize=5.5, loc="best")
    up, down = dev[max(deltas)], dev[min(deltas)]
    text = (f"largest distance of the path β(t) from the straight linear-regression path "
            f"β0 → β*: upstream δ = {max(deltas):g} {fmt(up)}, downstream δ = {min(deltas):g} "
            f"{fmt(down)}")
    return Built(fig, {"path_deviation": dev}, text)


def fig4b(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "single-neuron", ("beta_inf", "beta_implicit"), ("delta",), "kunin-fig4b")
    deltas = values(rf, "delta")
    cols = _delta_colours(deltas)
    fig = new_figure(height=3.4, width=3.4)
    ax = fig.add_subplot()
    X = np.asarray(rf.params.get("X"), dtype=float)
    y = np.asarray(rf.params.get("y"), dtype=float)
    binf = np.asarray(rf.masked("beta_inf").transpose("delta", "dim").values, dtype=float)
    bimp = np.asarray(rf.masked("beta_implicit").transpose("delta", "dim").values, dtype=float)
    nm = _method(rf, "numeric")
    for k, d in enumerate(deltas):
        b = _isel(rf, "beta", delta=k, method=nm)
        ax.plot(b[:, 0], b[:, 1], color=cols[k], lw=0.9, label=_delta_label(d))
    ax.scatter(binf[:, 0], binf[:, 1], c=cols, s=10, zorder=3)
    ax.scatter(bimp[:, 0], bimp[:, 1], facecolors="none", edgecolors="k", s=28, zorder=4,
               linewidths=0.6)
    # the interpolating line X beta = y
    xs = np.linspace(min(binf[:, 0].min(), 0) - 0.3, max(binf[:, 0].max(), 1) + 0.3, 50)
    ax.plot(xs, (y[0] - X[0, 0] * xs) / X[0, 1], color="0.5", lw=0.8, ls="--",
            label="$X\\beta = y$")
    b0 = np.asarray(rf.params.get("beta0"), dtype=float)
    ax.plot(*b0, "ko", ms=3)
    ax.set_xlabel("$\\beta_1$")
    ax.set_ylabel("$\\beta_2$")
    ax.set_aspect("equal", adjustable="datalim")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="k"))
    labels.append("Theorem 3.1")
    fig.legend(handles, labels, loc="outside lower center", fontsize=5.5, ncols=4)
    spread = float(np.nanmax(np.linalg.norm(binf - binf[len(binf) // 2], axis=1)))
    gap = float(np.nanmax(np.linalg.norm(binf - bimp, axis=1)))
    text = (f"the end point β(∞) moves with δ along Xβ = y: largest distance from the δ = 0 end "
            f"point {fmt(spread)}; max |β(∞) − Theorem 3.1| = {fmt(gap)}")
    return Built(fig, {"end_point_spread": spread, "max_gap_theorem": gap}, text)


def fig8(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "single-neuron", ("nu", "phi", "a", "w"), ("delta", "beta0"), "kunin-fig8")
    deltas = values(rf, "delta")
    cols = _delta_colours(deltas)
    t = np.asarray(rf.ds["time"].values, dtype=float)
    rows = rf.ds.sizes["beta0"]
    b0s = np.asarray(rf.ds["beta0"].values) if "beta0" in rf.ds.coords else None
    names = (("nu", "$\\nu = w^\\top\\beta^*/a$"), ("phi", "$\\phi$"), ("a", "$a$"),
             ("w1", "$w_1$"), ("w2", "$w_2$"))
    fig = new_figure(height=1.45 * rows + 0.5, width=6.8)
    axes = fig.subplots(rows, len(names), squeeze=False, sharex=True)
    ex, nm = _method(rf, "exact"), _method(rf, "numeric")
    worst = 0.0
    for r in range(rows):
        for c, (name, label) in enumerate(names):
            ax = axes[r][c]
            for k, d in enumerate(deltas):
                def get(m: int, name: str = name, k: int = k, r: int = r) -> np.ndarray:
                    if name in ("w1", "w2"):
                        return _isel(rf, "w", delta=k, beta0=r, method=m)[:, int(name[1]) - 1]
                    return _isel(rf, name, delta=k, beta0=r, method=m)
                e, n = get(ex), get(nm)
                ax.plot(t, e, color=cols[k], lw=1.0, label=_delta_label(d))
                if nm != ex:
                    worst = max(worst, float(np.nanmax(np.abs(e - n))) if np.isfinite(
                        e - n).any() else 0.0)
            if name == "nu":  # nu = w.beta*/a diverges where a crosses 0: clip to the bulk
                data = np.concatenate([ln.get_ydata() for ln in ax.get_lines()])
                data = data[np.isfinite(data)]
                if data.size:
                    lo, hi = np.percentile(data, [2, 98])
                    pad = 0.1 * (hi - lo + 1e-9)
                    ax.set_ylim(lo - pad, hi + pad)
            ax.tick_params(labelsize=5.5)
            if r == 0:
                ax.set_title(label, fontsize=7)
            if r == rows - 1:
                ax.set_xlabel("time $t$")
        if b0s is not None:
            b0 = b0s[r]
            b0 = np.asarray(json.loads(b0) if isinstance(b0, str) else b0, dtype=float)
            ang = np.degrees(np.arctan2(b0[1], b0[0]))
            axes[r][0].set_ylabel(f"$\\beta_0$ at ${ang:.0f}^\\circ$", fontsize=7)
    handles, labels = axes[0][2].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    text = (f"{rows} rows, one per β0; exact solution drawn, max |exact − numeric| over ν, φ, a, "
            f"w = {fmt(worst)}; ν is clipped to its 2–98 % range (it diverges where a crosses 0)")
    return Built(fig, {"rows": rows, "max_abs_diff": worst}, text)


# -- Fig. 5a ----------------------------------------------------------------------------------
def region_ids(W: np.ndarray, count: int) -> np.ndarray:
    """Activation regions on the circle of a bias-free ReLU layer: ids 0, 1, ... of the runs
    of identical activation pattern 1[w_k · u(φ) > 0] around the circle (the last run joined
    to the first when they share a pattern)."""
    pattern = _patterns(W, count)
    change = np.any(pattern != np.roll(pattern, 1, axis=0), axis=1)
    ids = np.cumsum(change) - (1 if change[0] else 0)
    if not change[0] and ids[-1] > 0:  # the run through φ = 0 continues the last run
        ids[ids == ids[-1]] = 0
    return ids


def _patterns(W: np.ndarray, count: int) -> np.ndarray:
    phi = 2.0 * np.pi * np.arange(count) / count
    U = np.stack([np.cos(phi), np.sin(phi)], axis=1)
    return (U @ W.T) > 0


def pattern_colours(W: np.ndarray, count: int, n_colours: int) -> np.ndarray:
    """A colour index per grid angle that depends on the activation pattern alone (a fixed
    pseudo-random code of the active set), so a region keeps its colour while the partition
    is kept and changes colour where the pattern changes: the lazy rows show a fixed
    partition, reweighted. (Neighbouring regions can share a colour by chance, 1 in
    ``n_colours``; the boundaries are drawn too.)"""
    pattern = _patterns(W, count)
    code = np.random.default_rng(12345).integers(1, 2**31 - 1, size=W.shape[0])
    return (pattern.astype(np.int64) @ code) % n_colours


REGION_PALETTE = ("#f3e3c3", "#c9dbe9", "#d8ead0", "#ead0e0", "#e6e6e6", "#fbe0b8",
                  "#d0d8f0", "#f0d0c8", "#e0f0f0", "#e8e0c8")


#: Fig. 5a's "while f ≈ 0" is read at the first checkpoint with train loss ≤ EARLY_LOSS·L0, and
#: f counts as ≈ 0 there while sup|f| ≤ F_NEAR_ZERO (max|y| = 1; docs/claims.md §9).
EARLY_LOSS, F_NEAR_ZERO = 0.95, 0.1


def fig5a(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "two-layer", ("surface", "W", "train_loss"), ("tau", "delta"),
              "kunin-fig5a")
    from ..report.neurons import partition_columns

    taus, deltas = values(rf, "tau"), values(rf, "delta")
    sels = [(i, j) for i in range(len(taus)) for j in range(len(deltas))]
    n_cols = 4
    fig = new_figure(height=1.05 * len(sels) + 0.6, width=6.8)
    axes = fig.subplots(len(sels), n_cols, squeeze=False, sharex=True)
    count = rf.ds.sizes["angle"]
    phi = np.degrees(np.asarray(rf.ds["angle"].values, dtype=float))
    dphi = phi[1] - phi[0]
    steps = np.asarray(rf.ds["step"].values)
    palette = np.array([[int(h[k:k + 2], 16) / 255 for k in (1, 3, 5)]
                        for h in REGION_PALETTE])
    regions: dict[str, list[int]] = {}
    colours_at_init: dict[str, int] = {}
    for r, (i, j) in enumerate(sels):
        loss = _isel(rf, "train_loss", tau=i, delta=j)
        cols = partition_columns(loss)
        cols = [cols[0], *cols[1:-1][-2:], cols[-1]][:n_cols]
        while len(cols) < n_cols:
            cols.insert(1, cols[0])
        f = _isel(rf, "surface", tau=i, delta=j)
        W = _isel(rf, "W", tau=i, delta=j)
        ymax = 1.1 * max(float(np.nanmax(np.abs(f))), 1e-12)
        key = f"tau={taus[i]:g},delta={deltas[j]:g}"
        regions[key] = []
        for c, s in enumerate(cols):
            ax = axes[r][c]
            ids = region_ids(W[s], count)
            regions[key].append(int(ids.max()) + 1)
            colour = pattern_colours(W[s], count, len(REGION_PALETTE))
            if c == 0:
                colours_at_init[key] = int(np.unique(colour).size)
            ax.imshow(palette[colour][None, :, :], extent=(phi[0], phi[-1] + dphi, -ymax, ymax),
                      aspect="auto", interpolation="nearest")
            edges = phi[np.flatnonzero(np.diff(ids) != 0) + 1]
            ax.vlines(edges, -ymax, ymax, colors="w", linewidths=0.3)
            ax.plot(phi, f[s], color="k", lw=0.7)
            ax.set_xlim(phi[0], phi[-1] + dphi)
            ax.set_ylim(-ymax, ymax)
            ax.set_xticks([0, 180, 360])
            ax.tick_params(labelsize=5)
            if c:
                ax.set_yticks([])
            if r == 0:
                ax.set_title("initialisation" if c == 0 else "end" if c == n_cols - 1
                             else "during training", fontsize=6.5)
            ax.text(0.98, 0.04, f"step {int(steps[s])}", transform=ax.transAxes, ha="right",
                    va="bottom", fontsize=4.5)
            if r == len(sels) - 1:
                ax.set_xlabel("input angle $\\varphi$ [deg]", fontsize=6)
        axes[r][0].set_ylabel(f"$\\tau={taus[i]:g}$\n$\\delta={deltas[j]:g}$", fontsize=6)
    fig.legend(handles=[Line2D([], [], color="k", lw=0.7),
                        Patch(facecolor=REGION_PALETTE[0], edgecolor="0.6", lw=0.3)],
               labels=["output $f(\\varphi)$", "activation region: its colour codes the "
                       "activation pattern (kept partition, kept colours); white lines: "
                       "boundaries"], loc="outside lower center", ncols=2, fontsize=5.5)
    change = {f"tau={taus[i]:g},delta={deltas[j]:g}":
              float(_isel(rf, "partition_change", tau=i, delta=j)[-1]) for i, j in sels}
    lazy = [k for k in change if k.startswith(f"tau={max(taus):g},")]
    rich = [k for k in change if k.startswith(f"tau={min(taus):g},")
            and float(k.split("delta=")[1]) >= 0]
    # "while f ≈ 0" (docs/claims.md §9): at the first checkpoint with train loss ≤ 0.95 L0,
    # sup|f| over the drawn angles and the partition change of each row
    early: dict[str, dict[str, float]] = {}
    for i, j in sels:
        loss = _isel(rf, "train_loss", tau=i, delta=j)
        hits = np.flatnonzero(loss <= EARLY_LOSS * loss[0])
        if hits.size:
            s = int(hits[0])
            early[f"tau={taus[i]:g},delta={deltas[j]:g}"] = {
                "step": float(steps[s]),
                "sup_f": float(np.nanmax(np.abs(_isel(rf, "surface", tau=i, delta=j)[s]))),
                "partition_change": float(_isel(rf, "partition_change", tau=i, delta=j)[s])}
    still = [k for k in early if k in lazy or (k.startswith(f"tau={min(taus):g},")
                                               and float(k.split("delta=")[1]) < 0)]
    moving = [k for k in rich if k in early]
    text = ("fraction of (angle, neuron) activations changed by the end: lazy (τ = "
            f"{max(taus):g}) at most {fmt(max(change[k] for k in lazy))}, rich balanced or "
            f"upstream (τ = {min(taus):g}, δ ≥ 0) up to {fmt(max(change[k] for k in rich))}; "
            f"{regions[lazy[0]][0]} regions at initialisation")
    notes = []
    if moving and still:
        sup = max(early[k]["sup_f"] for k in moving)
        text += (f". When the train loss first reaches {EARLY_LOSS:g} L0: rich sup|f| "
                 f"≤ {fmt(sup)} with partition change ≥ "
                 f"{fmt(min(early[k]['partition_change'] for k in moving))}, against ≤ "
                 f"{fmt(max(early[k]['partition_change'] for k in still))} lazy and downstream")
        if sup > F_NEAR_ZERO:
            notes.append(f"at this step size the output is no longer ≈ 0 when the rich "
                         f"partition moves (sup|f| = {fmt(sup)} > {F_NEAR_ZERO:g} at "
                         f"{EARLY_LOSS:g} L0): the f ≈ 0 phase is not resolved; "
                         "jobs/fig5a-near-gf.toml (lr 1e-5/τ²) resolves it")
    return Built(fig, {"partition_change": change, "regions": regions,
                       "colours_at_init": colours_at_init, "early": early}, text, notes)


# -- Fig. 7 -----------------------------------------------------------------------------------
def fig7(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "single-neuron", ("basin_score", "a"), ("a0",), "kunin-fig7")
    from ..report.neurons import draw_basin

    drawn = draw_basin(rf, {})
    fig = drawn.fig
    for ax in fig.axes:
        ax.set_xlabel("$w_0^\\top\\beta^*/\\|\\beta^*\\|$")
        title = ax.get_title().replace("|w0 perp|", "$\\|w_{0\\perp}\\|$")
        ax.set_title(title, fontsize=7)
        if ax.get_ylabel():
            ax.set_ylabel("$a_0$")
    for legend in fig.legends:
        for t in legend.get_texts():
            t.set_text({"a(end) > 0": "$a(\\infty) > 0$", "a(end) < 0": "$a(\\infty) < 0$",
                        "delta = 0": "$\\delta = 0$"}.get(t.get_text(), t.get_text()))
    score = np.asarray(rf.masked("basin_score").values, dtype=float).ravel()
    a_end = np.asarray(rf.masked("a").isel(method=0, time=-1).values, dtype=float).ravel()
    ok = np.isfinite(score) & np.isfinite(a_end) & (np.abs(score) > 1e-9)
    agree = float(np.mean(np.sign(score[ok]) == np.sign(a_end[ok]))) if ok.any() else float("nan")
    text = (f"{ok.sum()} initialisations; sign of a at the end equals the sign of the basin "
            f"score (the side of the separating surface) for a fraction {agree:.4f}")
    return Built(fig, {"agreement": agree, "points": int(ok.sum())}, text)


# -- Fig. 9 -----------------------------------------------------------------------------------
def fig9(files: Sequence[ResultFile], seed: int = 0) -> Built:
    """A three-layer ReLU net R² → R, 20 units per layer, at He initialisation: the activation
    regions with biases (polytopes) and without (cones), coloured by the parity of the number
    of active units (docs/two-layer.md eq. (14)); drawn from the initialisation alone."""
    from ..models.two_layer import relu_partition as rp

    fig = new_figure(height=3.0, width=6.8)
    axes = fig.subplots(1, 2)
    n = 241
    g = np.linspace(-1.0, 1.0, n)
    X = np.stack(np.meshgrid(g, g), axis=-1).reshape(-1, 2)
    measured: dict[str, Any] = {}
    for ax, (bias, name) in zip(axes, ((0.5, "with biases"), (0.0, "without biases")),
                                strict=True):
        layers = rp.he_network(np.random.default_rng(seed), (20, 20, 20), bias_std=bias)
        pat = rp.patterns(layers, X)
        parity = (pat.sum(axis=1) % 2).reshape(n, n)
        _, inverse = np.unique(pat, axis=0, return_inverse=True)
        ids = inverse.reshape(n, n)
        ax.imshow(parity, origin="lower", extent=(-1, 1, -1, 1), cmap="Greys", vmin=-0.6,
                  vmax=1.6, interpolation="nearest")
        ax.set_title(name, fontsize=7)
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
        # 2-colouring: across a boundary between two regions the parity changes
        horiz = ids[:, 1:] != ids[:, :-1]
        vert = ids[1:, :] != ids[:-1, :]
        flips = np.concatenate([(parity[:, 1:] != parity[:, :-1])[horiz],
                                (parity[1:, :] != parity[:-1, :])[vert]])
        measured[name.replace(" ", "_")] = {"regions": int(ids.max()) + 1,
                                            "parity_flip_fraction": float(flips.mean())}
    m = measured
    text = (f"regions in the square: {m['with_biases']['regions']} with biases, "
            f"{m['without_biases']['regions']} without (cones); fraction of region boundaries "
            f"(grid neighbours in different regions) where the parity flips: "
            f"{m['with_biases']['parity_flip_fraction']:.3f} and "
            f"{m['without_biases']['parity_flip_fraction']:.3f}")
    return Built(fig, measured, text, [f"seed {seed}, He initialisation, bias s.d. 0.5"])


# -- Fig. 10 ----------------------------------------------------------------------------------
def fig10(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "two-layer", ("hamming_distance", "param_distance", "train_loss"),
              ("tau", "delta"), "kunin-fig10")
    names = (("train_loss", "train loss"), ("test_loss", "test loss"),
             ("hamming_distance", "Hamming distance"),
             ("param_distance", "$\\|\\theta_t-\\theta_0\\|_2$"))
    steps = np.asarray(rf.ds["step"].values, dtype=float)
    taus, deltas = values(rf, "tau"), values(rf, "delta")
    fig = new_figure(height=2.4, width=6.8)
    axes = fig.subplots(1, 4)
    keep = steps > 0
    change: dict[str, dict[str, float]] = {}
    colours = _delta_colours(deltas)
    for ax, (name, label) in zip(axes, names, strict=True):
        everything = []
        for i, tau in enumerate(taus):
            for j, d in enumerate(deltas):
                v = _isel(rf, name, tau=i, delta=j)
                everything.append(v[keep])
                ax.plot(steps[keep], v[keep], color=colours[j], ls="-" if i == 0 else ":",
                        marker="o", ms=2)
                key = f"tau={tau:g},delta={d:g}"
                if v[-2] != 0 and np.isfinite(v[-2]):
                    change.setdefault(name, {})[key] = float(abs(v[-1] - v[-2]) / abs(v[-2]))
        ax.set_xscale("log")
        if name.endswith("loss"):
            log_floor(ax, np.concatenate(everything))
        ax.set_xlabel("step")
        ax.set_title(label, fontsize=7)
        ax.tick_params(labelsize=5.5)
    handles = [Line2D([], [], color=c, label=_delta_label(d)) for c, d in zip(colours, deltas,
                                                                            strict=True)]
    handles += [Line2D([], [], color="k", ls="-", label=f"$\\tau = {taus[0]:g}$"),
                Line2D([], [], color="k", ls=":", label=f"$\\tau = {taus[-1]:g}$")]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    med = {k: float(np.median(list(v.values()))) for k, v in change.items()}
    text = (f"relative change over the last decade ({steps[-2]:g} → {steps[-1]:g} steps), "
            "median over the grid: " + ", ".join(f"{k.replace('_', ' ')} {fmt(v)}"
                                                 for k, v in med.items()))
    return Built(fig, {"last_decade_change": med}, text)


# -- Figs. 6a-6d and 12: the practice models ------------------------------------------------------
def _alpha_colours(alphas: Sequence[float]) -> list[Any]:
    lo, hi = min(alphas), max(alphas)
    norm = LogNorm(lo, hi) if hi > lo else LogNorm(lo / 2, lo * 2)
    return [colormaps["viridis"](0.9 * norm(a)) for a in alphas]


def _seed_mean(da: Any) -> Any:
    return da.mean("seed", skipna=True) if "seed" in da.dims else da


def fig6a(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "cnn", ("kernel_distance", "hamming_distance", "param_distance"),
              ("alpha",), "kunin-fig6a")
    from ..report.rhm_cnn import spearman

    epoch = np.asarray(rf.ds["epoch"].values, dtype=float)
    keep = epoch > 0
    alphas = values(rf, "alpha")
    cols = _alpha_colours(alphas)
    fig = new_figure(height=2.4, width=6.8)
    axes = fig.subplots(1, 3)
    labels = {"kernel_distance": "kernel distance $S(0,t)$",
              "hamming_distance": "Hamming distance", "param_distance":
              "$\\|\\theta_t-\\theta_0\\|_2$"}
    end: dict[str, dict[str, float]] = {}
    for ax, name in zip(axes, labels, strict=True):
        da = _seed_mean(rf.masked(name))
        for k, a in enumerate(alphas):
            v = np.asarray(da.isel(alpha=k).values, dtype=float)
            ax.plot(epoch[keep], v[keep], color=cols[k], label=f"$\\alpha = {a:g}$")
            end.setdefault(name, {})[f"{a:g}"] = float(v[-1])
        ax.set_xscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(labels[name])
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
               ncols=len(alphas))
    S = rf.masked("kernel_distance").values.ravel()
    H = rf.masked("hamming_distance").transpose(*rf.masked("kernel_distance").dims).values.ravel()
    P = rf.masked("param_distance").transpose(*rf.masked("kernel_distance").dims).values.ravel()
    rho_h, rho_p = spearman(S, H), spearman(S, P)
    text = ("kernel distance at the end: " + ", ".join(
        f"α = {a}: {fmt(v)}" for a, v in end["kernel_distance"].items())
        + f"; Spearman rank correlation of S with the Hamming distance {rho_h:.3f}, with the "
        f"parameter distance {rho_p:.3f}")
    return Built(fig, {"end": end, "spearman_hamming": rho_h, "spearman_param": rho_p}, text)


#: Fig. 11A's "equal accuracy": the spread of the seed-mean test accuracies over α is at most
#: this (docs/claims.md §8).
EQUAL_ACCURACY = 0.03


def fig6b(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "cnn", ("filter_roughness", "filters"), ("alpha",), "kunin-fig6b")
    alphas = values(rf, "alpha")
    filt = rf.masked("filters")
    if "seed" in filt.dims:
        filt = filt.isel(seed=0)
    filt = filt.isel(in_channel=0)
    n_f = min(int(filt.sizes["out_channel"]), 6)
    acc_name = next((n for n in ("final_test_acc", "test_acc") if n in rf.ds), None)
    fig = new_figure(height=0.85 * len(alphas) + 0.7, width=6.8)
    grid = fig.add_gridspec(len(alphas), n_f + 2, width_ratios=[1] * n_f + [0.3, 2.2])
    rough = _seed_mean(rf.masked("filter_roughness")).isel(checkpoint=-1)
    measured: dict[str, Any] = {"roughness": {}, "accuracy": {}}
    for r, a in enumerate(alphas):
        sub = filt.isel(alpha=r)
        if "checkpoint" in sub.dims:
            sub = sub.isel(checkpoint=-1)
        for c in range(n_f):
            ax = fig.add_subplot(grid[r, c])
            w = np.asarray(sub.isel(out_channel=c).values, dtype=float)
            lim = float(np.nanmax(np.abs(w))) or 1.0
            ax.imshow(w, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(f"$\\alpha = {a:g}$", fontsize=6.5)
        measured["roughness"][f"{a:g}"] = float(rough.isel(alpha=r).values)
        if acc_name is not None:
            acc = _seed_mean(rf.masked(acc_name)).isel(alpha=r)
            for d in [d for d in acc.dims if d != "alpha"]:
                acc = acc.isel({d: -1})
            measured["accuracy"][f"{a:g}"] = float(acc.values)
    ax = fig.add_subplot(grid[:, -1])
    pos = categorical(ax, alphas, "y", "$\\alpha$")
    bars = [measured["roughness"][f"{a:g}"] for a in alphas]
    ax.barh(pos, bars, color="0.7", height=0.6)
    ax.set_xscale("log")
    ax.set_xlim(min(bars) / 3, max(bars) * 12)
    ax.invert_yaxis()  # the first alpha on top, as the filter rows
    ax.set_xlabel("roughness $\\bar R$ (end)")
    for p, a, b in zip(pos, alphas, bars, strict=True):
        acc = measured["accuracy"].get(f"{a:g}")
        if acc is not None:
            ax.text(b * 1.2, p, f"test acc. {acc:.2f}", va="center", fontsize=5.5)
    # what holds in this run, on the figure's face (docs/claims.md §8)
    order = [measured["roughness"][f"{a:g}"] for a in sorted(alphas)]
    smoother = all(b < a for a, b in itertools.pairwise(order))
    accs = list(measured["accuracy"].values())
    gap = max(accs) - min(accs) if accs else float("nan")
    measured["smoother_with_alpha"] = smoother
    measured["accuracy_gap"] = gap
    head = ("smoother filters as α grows" if smoother
            else "roughness does not fall monotonically with α")
    if accs:
        head += (f", at equal accuracy (spread {gap:.2f} ≤ {EQUAL_ACCURACY:g})"
                 if gap <= EQUAL_ACCURACY else f"; accuracies differ by up to {gap:.2f}")
    notes = []
    paper = (rf.params.get("norm", "none") != "none"
             and rf.params.get("rescale", "both") == "first")
    if not paper:
        head += ("\nunnormalised stand-in (readout × α too): not the paper's protocol, and "
                 "it does not reproduce (docs/claims.md §8)")
        notes.append("this run has no normalisation and α rescales the readout as well; that "
                     "protocol does not reproduce the claim (docs/claims.md §8). The asserted "
                     "one is jobs/filters-digits24-bn-converged.toml (norm = channel, "
                     "rescale = first)")
    fig.suptitle(head, fontsize=6.5)
    text = ("first-layer filter roughness R̄ at the end: " + ", ".join(
        f"α = {a}: {fmt(v)}" for a, v in measured["roughness"].items())
        + ("; test accuracy " + ", ".join(f"α = {a}: {v:.3f}" for a, v in
                                           measured["accuracy"].items())
           if measured["accuracy"] else ""))
    return Built(fig, measured, text, notes)


def fig6c(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "rhm", ("final_test_acc",), ("alpha", "train_fraction"), "kunin-fig6c")
    from ..report.rhm_cnn import threshold_fraction

    alphas = values(rf, "alpha")
    cols = _alpha_colours(alphas)
    f = np.asarray(rf.ds["train_fraction"].values, dtype=float)
    da = _seed_mean(rf.masked("final_test_acc")).transpose("alpha", "train_fraction")
    fig = new_figure(height=2.6, width=3.4)
    ax = fig.add_subplot()
    star, best = {}, {}
    for k, a in enumerate(alphas):
        v = np.asarray(da.isel(alpha=k).values, dtype=float)
        ax.plot(f, v, "o-", color=cols[k], ms=2.5, label=f"$\\alpha = {a:g}$")
        star[f"{a:g}"] = threshold_fraction(f, v)
        best[f"{a:g}"] = float(np.nanmax(v))
    n_c = int(rf.params.get("n_classes", 8) or 8)
    ax.axhline(1.0 / n_c, color="0.5", ls=":", lw=0.8, label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("training fraction $P/P_{\\max}$")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=5.5)
    text = "sample complexity (training fraction where the accuracy reaches 0.5): " + ", ".join(
        f"α = {a}: {'not reached' if not np.isfinite(v) else fmt(v)}" for a, v in star.items()
    ) + "; best test accuracy " + ", ".join(f"α = {a}: {v:.3f}" for a, v in best.items())
    return Built(fig, {"f_star": star, "best_accuracy": best}, text)


def _steps_to_val(rf: ResultFile) -> tuple[np.ndarray, np.ndarray, list[float], list[float]]:
    from ..report.grokking import median_censored

    budget = float(rf.params.get("steps") or np.nanmax(rf.ds["eval_step"].values))
    S, C = rf.masked("steps_to_val"), rf.masked("censored_val").fillna(0).astype(bool)
    alphas = values(rf, "alpha")
    taus = values(rf, "tau") if "tau" in S.dims else [float(rf.params.get("tau", 1.0))]
    med = np.full((len(taus), len(alphas)), np.nan)
    cens = np.zeros(med.shape, bool)
    for i in range(len(taus)):
        for j in range(len(alphas)):
            sel = {"alpha": j, **({"tau": i} if "tau" in S.dims else {})}
            med[i, j], cens[i, j] = median_censored(S.isel(sel).values.ravel(),
                                                    C.isel(sel).values.ravel(), budget)
    return med, cens, taus, alphas


def fig6d(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "grokking", ("val_acc", "steps_to_val"), ("alpha",), "kunin-fig6d")
    steps = np.asarray(rf.ds["eval_step"].values, dtype=float)
    keep = steps > 0
    alphas = values(rf, "alpha")
    cols = _alpha_colours(alphas)
    fig = new_figure(height=2.6, width=3.4)
    ax = fig.add_subplot()
    notes = []
    for name, ls in (("train_acc", "--"), ("val_acc", "-")):
        da = rf.masked(name)
        if "tau" in da.dims:
            t = _grid_index(rf, "tau", 1.0)
            da = da.isel(tau=t)
            if name == "val_acc":
                notes.append(f"τ = {rf.ds['tau'].values[t]:g}")
        da = da.median("seed", skipna=True) if "seed" in da.dims else da
        for k, a in enumerate(alphas):
            v = np.asarray(da.isel(alpha=k).values, dtype=float)
            ax.plot(steps[keep], v[keep], ls, color=cols[k],
                    label=f"$\\alpha = {a:g}$" if ls == "-" else None)
    ax.plot([], [], "k--", label="train")
    ax.plot([], [], "k-", label="validation")
    ax.set_xscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=5.5, loc="upper left")
    med, cens, _, _ = _steps_to_val(rf)
    row = _grid_index(rf, "tau", 1.0) if "tau" in rf.ds.dims else 0
    per = {f"{a:g}": (None if cens[row, j] or not np.isfinite(med[row, j]) else
                      float(med[row, j])) for j, a in enumerate(alphas)}
    val = rf.masked("val_acc")
    val = val.isel(tau=row) if "tau" in val.dims else val
    val = val.median("seed", skipna=True) if "seed" in val.dims else val
    final = {f"{a:g}": float(val.isel(alpha=j).values[-1]) for j, a in enumerate(alphas)}
    text = "median steps to validation accuracy ≥ threshold: " + ", ".join(
        f"α = {a}: {'not reached' if v is None else f'{v:.0f}'}" for a, v in per.items()
    ) + "; final validation accuracy " + ", ".join(f"α = {a}: {v:.3f}" for a, v in final.items())
    return Built(fig, {"steps_to_val": per, "final_val_acc": final}, text, notes)


def fig12(files: Sequence[ResultFile]) -> Built:
    rf = find(files, "grokking", ("steps_to_val",), ("alpha", "tau"), "kunin-fig12")
    med, cens, taus, alphas = _steps_to_val(rf)
    fig = new_figure(height=2.6, width=3.4)
    ax = fig.add_subplot()
    finite = med[np.isfinite(med)]
    norm = LogNorm(max(finite.min(), 1.0), max(finite.max(), 2.0)) if finite.size else None
    ax.set_facecolor("0.85")
    mesh = ax.imshow(np.ma.masked_invalid(med), origin="lower", cmap="viridis_r", norm=norm,
                     aspect="auto")
    for i in range(len(taus)):
        for j in range(len(alphas)):
            if np.isfinite(med[i, j]):
                ax.text(j, i, ("≥" if cens[i, j] else "") + f"{med[i, j]:.0f}", ha="center",
                        va="center", fontsize=5.5, color="w" if norm and norm(med[i, j]) > 0.5
                        else "k")
    categorical(ax, alphas, "x", "embedding scale $\\alpha$")
    categorical(ax, taus, "y", "logit scale $\\tau$")
    fig.colorbar(mesh, ax=ax).set_label("median steps to grok")
    free = np.where(cens, np.inf, med)
    best = np.unravel_index(int(np.nanargmin(free)), med.shape) if np.isfinite(free).any() \
        else None
    text = ("fastest grokking " + ("not reached in any cell" if best is None else
                                   f"at τ = {taus[best[0]]:g}, α = {alphas[best[1]]:g} "
                                   f"({med[best]:.0f} steps)")
            + f"; {int(cens.sum())} of {cens.size} cells censored at the budget")
    return Built(fig, {"median_steps": med.tolist(), "best": None if best is None else
                       {"tau": taus[best[0]], "alpha": alphas[best[1]]}}, text)
