"""Scaling-law analysis of a width sweep of the ``hermite`` model (Ren et al. 2025, Prop. 2.2;
docs/hermite-sgd.md §5).

Input: a result Dataset with a ``loss`` variable over a ``time`` dimension and a grid dimension
``m`` (student width), possibly also ``seed`` (averaged over) -- the output of
``richlazy sweep solve hermite -g m=...``. A dataset without an ``m`` dimension is treated as one
width (taken from the ``params`` attribute). Three log-log OLS fits, each with a 95% confidence
interval ``slope ± t_{0.975, n-2} · stderr`` (the residuals of a staircase are correlated, so the
interval is a lower bound on the real uncertainty), compared with the theory
(docs/hermite-sgd.md, eq. (12)):

* **time**: ``log L`` against ``log t`` over the *emergence window* of the widest student (loss
  averaged over seeds), expecting ``-(2β-1)/β``. The window is ``[T_(4), T_(⌈n/2⌉)]``, where
  ``T_(1) ≤ T_(2) ≤ ...`` are the ``n`` finite recovery times of the widest student (median
  over seeds): the measured ``t_recover`` if present, else the greedy ``t_recover_theory``. So
  the window starts after the first few, isolated and very large steps (``a_1² ≈ ½``) and ends
  at half the learnable tasks, well before ``T_(min(m,P))``. Without recovery times it is
  ``[first t with L ≤ 0.75 L(0), first t with L ≤ 2 L(t_end)]``. An explicit
  ``window=(t_lo, t_hi)`` overrides all of these.
* **width**: the plateau, the loss at the last time (averaged over seeds), against ``m`` over the
  widths ``m < P`` with a positive plateau, expecting ``-(2β-1)``.
* **compute**: the lower envelope ``E(C) = min_m L_m(C/m)`` of the loss against compute
  ``C = m·t`` (log-log interpolation on a common grid over the range every width covers), fitted
  between the first and the last change of the optimal width (the part of the envelope that is a
  trade-off between widths), expecting ``-(2β-1)/(1+β)``.

**Finite P.** With ``P`` tasks the tail ``Σ_{k<p≤P} a_p²`` is the infinite-P tail minus the
constant ``L_P`` (:func:`finite_p_offset`), which steepens every log-log slope (at ``P = 64``,
``β = 0.8`` the raw time slope is about -1.0 instead of -0.75). Each fit therefore also carries
``corrected``: the same OLS on ``log(L + L_P)``, the estimator of the infinite-P exponent.

**Online SGD (Ren et al. 2025, §1.1; docs/hermite-sgd.md, eq. (5)).** A ``train`` sweep over
the input dimension ``d`` (and ``seed``) with ``steps_recover`` is analysed by
:func:`sample_complexity_fit`: OLS of ``log median_seeds steps_recover`` against ``log d``,
expecting ``k* − 1`` (3 for h4). :func:`scaling_figures` draws it with the ``d^(k*−1)``
reference instead of the three width figures.

**Per-task laws** (docs/hermite-sgd.md §5): :func:`emergence_order_fit` (Prop. 2.2(a),
``t_p v̄_p(0)² ∝ p^β``), :func:`greedy_agreement` (the fraction of teachers recovered by the
greedy neuron), :func:`tail_loss` (``½ Σ_{p>k} a_p²``, the approximation barrier, also for
β < ½), :func:`unstable_exponent` (Cor. 2.3).

Everything is JSON-able: :func:`fit_scaling` returns ``{"time": fit, "width": fit,
"compute": fit}``, each ``fit`` with ``slope, intercept, stderr, ci_low, ci_high, theory, window,
n_points`` (log10 units; NaN where a fit is impossible, with a ``note``).
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats

LEVEL = 0.95


def theory_exponents(beta: float) -> dict[str, float]:
    """Prop. 2.2 exponents: time ``-(2β-1)/β``, width ``-(2β-1)``, compute ``-(2β-1)/(1+β)``."""
    return {
        "time": -(2 * beta - 1) / beta,
        "width": -(2 * beta - 1),
        "compute": -(2 * beta - 1) / (1 + beta),
    }


def ols_fit(x: np.ndarray, y: np.ndarray, level: float = LEVEL) -> dict[str, Any]:
    """Least-squares line ``y = intercept + slope x`` with a ``level`` confidence interval."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = int(x.size)
    out: dict[str, Any] = {"slope": math.nan, "intercept": math.nan, "stderr": math.nan,
                           "ci_low": math.nan, "ci_high": math.nan, "n_points": n}
    if n < 2 or np.ptp(x) == 0:
        out["note"] = "fewer than two distinct points"
        return out
    res = stats.linregress(x, y)
    out["slope"] = float(res.slope)
    out["intercept"] = float(res.intercept)
    if n > 2:
        half = float(stats.t.ppf(0.5 + level / 2, n - 2)) * float(res.stderr)
        out["stderr"] = float(res.stderr)
        out["ci_low"], out["ci_high"] = out["slope"] - half, out["slope"] + half
    else:
        out["note"] = "two points: no confidence interval"
    return out


def _params(ds: xr.Dataset) -> dict[str, Any]:
    try:
        return dict(json.loads(ds.attrs.get("params", "{}")))
    except (TypeError, ValueError):
        return {}


def _beta(ds: xr.Dataset) -> float | None:
    p = _params(ds)
    beta = p.get("beta")
    return None if beta is None else float(beta)


def _with_m(da: xr.DataArray, ds: xr.Dataset) -> xr.DataArray:
    if "m" in da.dims:
        return da
    m = _params(ds).get("m")
    if m is None:
        raise ValueError("the dataset has no width dimension m and no m in its params")
    return da.expand_dims(m=[int(m)])


def mean_loss(ds: xr.Dataset) -> xr.DataArray:
    """``loss`` over (m, time), averaged over ``seed`` (non-finite values ignored)."""
    da = ds["loss"]
    if "seed" in da.dims:
        da = da.mean("seed", skipna=True)
    da = _with_m(da, ds)
    extra = [d for d in da.dims if d not in ("m", "time")]
    if extra:
        raise ValueError(f"scaling analysis needs loss over (m, time[, seed]); also got {extra}")
    return da.transpose("m", "time")


def emergence_window(ds: xr.Dataset, L: xr.DataArray) -> tuple[float, float, str]:
    """(t_lo, t_hi, how) of the time fit for the widest student (see the module docstring)."""
    m_ref = L["m"].values.max()
    for name in ("t_recover", "t_recover_theory"):
        if name not in ds:
            continue
        T = _with_m(ds[name], ds).sel(m=m_ref)
        if "seed" in T.dims:
            T = T.median("seed", skipna=True)
        Ts = np.sort(T.values[np.isfinite(T.values)])
        n = Ts.size
        p1, p2 = 4, math.ceil(n / 2)
        if p2 > p1:
            return float(Ts[p1 - 1]), float(Ts[p2 - 1]), (
                f"{name}: T_({p1}) to T_({p2}) of the {n} recovery times at m={m_ref}")
    t = L["time"].values
    y = L.sel(m=m_ref).values
    ok = np.isfinite(y)
    t, y = t[ok], y[ok]
    lo = np.flatnonzero(y <= 0.75 * y[0])
    hi = np.flatnonzero(y <= 2.0 * y[-1])
    t_lo = float(t[lo[0]]) if lo.size else float(t[t > 0][0])
    t_hi = float(t[hi[0]]) if hi.size else float(t[-1])
    return t_lo, t_hi, f"data: L <= 0.75 L(0) to L <= 2 L(end) at m={m_ref}"


def finite_p_offset(P: int | None, beta: float | None) -> float:
    """``L_P = ½ P^(1-2β) / ((2β-1) Z²)``: the tail mass beyond ``P`` of the infinite model.

    The tail: ``Σ_{p>k} a_p² ≈ k^(1-2β)/((2β-1)Z²)``; with only ``P`` tasks the tail is
    ``Σ_{k<p≤P} a_p² ≈ (k^(1-2β) - P^(1-2β))/((2β-1)Z²)``, so ``L + L_P`` is the pure power law
    of the infinite-P theory. 0 when P or β is unknown or β ≤ ½.
    """
    if P is None or beta is None or beta <= 0.5:
        return 0.0
    Z2 = float(np.sum(np.arange(1, int(P) + 1, dtype=float) ** (-2 * beta)))
    return 0.5 * float(P) ** (1 - 2 * beta) / ((2 * beta - 1) * Z2)


def _with_corrected(x: np.ndarray, y: np.ndarray, offset: float) -> dict[str, Any]:
    fit = ols_fit(np.log10(x), np.log10(y))
    if offset > 0:
        fit["corrected"] = ols_fit(np.log10(x), np.log10(y + offset))
        fit["corrected"]["offset"] = offset
    return fit


def _fit_time(ds: xr.Dataset, L: xr.DataArray,
              window: tuple[float, float] | None) -> dict[str, Any]:
    if window is None:
        t_lo, t_hi, how = emergence_window(ds, L)
    else:
        (t_lo, t_hi), how = window, "given"
    m_ref = L["m"].values.max()
    t = L["time"].values
    y = L.sel(m=m_ref).values
    sel = (t >= t_lo) & (t <= t_hi) & (t > 0) & (y > 0)
    fit = _with_corrected(t[sel], y[sel], finite_p_offset(_params(ds).get("P"), _beta(ds)))
    fit.update(window=[t_lo, t_hi], window_rule=how, m=int(m_ref))
    return fit


def plateaus(ds: xr.Dataset, L: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
    """(m, loss at the last time) over the widths ``m < P`` with a positive plateau."""
    P = _params(ds).get("P")
    ms = L["m"].values.astype(float)
    last = L.isel(time=-1).values
    keep = np.isfinite(last) & (last > 0)
    if P is not None:
        keep &= ms < float(P)
    return ms[keep], last[keep]


def _fit_width(ds: xr.Dataset, L: xr.DataArray) -> dict[str, Any]:
    ms, pl = plateaus(ds, L)
    fit = _with_corrected(ms, pl, finite_p_offset(_params(ds).get("P"), _beta(ds)))
    fit.update(window=[float(ms.min()), float(ms.max())] if ms.size else [],
               window_rule="widths m < P with a positive final loss")
    return fit


def compute_envelope(L: xr.DataArray, n_grid: int = 400) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """``(C, E(C), argmin width)``: lower envelope of ``L_m(C/m)`` over the widths."""
    t = L["time"].values
    pos = t > 0
    lt = np.log10(t[pos])
    ms = L["m"].values.astype(float)
    c_lo = max(np.log10(m) + lt[0] for m in ms)
    c_hi = min(np.log10(m) + lt[-1] for m in ms)
    if not c_hi > c_lo:
        return np.array([]), np.array([]), np.array([])
    lc = np.linspace(c_lo, c_hi, n_grid)
    curves = []
    for i, m in enumerate(ms):
        y = L.values[i, pos]
        ok = np.isfinite(y) & (y > 0)
        curves.append(np.interp(lc - np.log10(m), lt[ok], np.log10(y[ok])))
    curves_arr = np.array(curves)
    best = np.argmin(curves_arr, axis=0)
    return 10.0**lc, 10.0 ** curves_arr.min(axis=0), ms[best]


def _fit_compute(L: xr.DataArray, offset: float) -> dict[str, Any]:
    C, E, best = compute_envelope(L)
    if C.size == 0:
        fit = ols_fit(np.array([]), np.array([]))
        fit.update(window=[], window_rule="no compute range common to all widths")
        return fit
    switches = np.flatnonzero(best[1:] != best[:-1])
    if switches.size >= 2:
        i0, i1 = switches[0] + 1, switches[-1]
        how = "between the first and last change of the optimal width"
    else:
        i0, i1 = 0, C.size - 1
        how = "whole common compute range (the optimal width never changes twice)"
    fit = _with_corrected(C[i0:i1 + 1], E[i0:i1 + 1], offset)
    fit.update(window=[float(C[i0]), float(C[i1])], window_rule=how)
    return fit


def fit_scaling(ds: xr.Dataset, window: tuple[float, float] | None = None) -> dict[str, Any]:
    """Fitted time, width and compute exponents with 95% intervals, beside the theory."""
    L = mean_loss(ds)
    beta = _beta(ds)
    theory = theory_exponents(beta) if beta is not None else {}
    fits: dict[str, Any] = {
        "time": _fit_time(ds, L, window), "width": _fit_width(ds, L),
        "compute": _fit_compute(L, finite_p_offset(_params(ds).get("P"), beta))}
    for key, fit in fits.items():
        fit["theory"] = theory.get(key, math.nan)
        if "corrected" in fit:
            fit["corrected"]["theory"] = fit["theory"]
    fits["beta"] = beta
    return _clean(fits)


# -- online SGD: sample complexity -------------------------------------------------------------
def is_sample_complexity(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is a ``train`` sweep over ``d`` with ``steps_recover``."""
    return "steps_recover" in ds and "d" in ds["steps_recover"].dims


def median_steps(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(d, median over seeds and teachers of steps_recover, per-run values (d, runs))``.
    A run that never recovered counts as +∞ in the median (so a median that is not finite
    means at least half the runs failed)."""
    da = ds["steps_recover"]
    other = [k for k in da.dims if k != "d"]
    da = da.transpose("d", *other)
    runs = da.values.reshape(da.sizes["d"], -1)
    with np.errstate(invalid="ignore"):
        med = np.median(np.where(np.isnan(runs), np.inf, runs), axis=1)
    return da["d"].values.astype(float), med, runs


def sample_complexity_fit(ds: xr.Dataset) -> dict[str, Any]:
    """OLS slope of ``log10 median steps_recover`` against ``log10 d`` with its 95% interval,
    beside the theory ``k* − 1`` (Ren et al. 2025, §1.1: ``n ≍ d^(k*−1)``)."""
    d, med, runs = median_steps(ds)
    fit = ols_fit(np.log10(d), np.log10(med))
    k = _params(ds).get("k", 4)
    coeffs = _params(ds).get("sigma_coeffs")
    if coeffs is not None:
        nz = np.flatnonzero(np.asarray(coeffs, dtype=float)[1:] != 0)
        k = int(nz[0]) + 1 if nz.size else k
    fit.update(theory=float(k) - 1.0, d=d.tolist(), median=med.tolist(),
               recovered=[int(np.count_nonzero(np.isfinite(r))) for r in runs],
               runs=int(runs.shape[1]))
    return _clean(fit)


def sample_complexity_figure(ds: xr.Dataset, out_dir: pathlib.Path, stem: str,
                             fmt: str) -> list[dict[str, Any]]:
    """Per-run and median ``steps_recover`` against ``d`` (log-log), the fit and ``d^(k*−1)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fit = sample_complexity_fit(ds)
    d, med, runs = median_steps(ds)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i in range(runs.shape[1]):
        ax.loglog(d, runs[:, i], ".", color="0.6", ms=4, label="runs" if i == 0 else None)
    ax.loglog(d, med, "o", color="C0", label="median over seeds")
    if fit.get("slope") is not None:
        ax.loglog(d, 10 ** (fit["intercept"] + fit["slope"] * np.log10(d)), "k-", lw=2,
                  label=f"fit {_fmt(fit)}")
        ok = np.isfinite(med)
        anchor = np.exp(np.mean(np.log(med[ok]) - fit["theory"] * np.log(d[ok])))
        ax.loglog(d, anchor * d ** fit["theory"], "r--", lw=1.5,
                  label=f"d^{fit['theory']:g} reference")
    ax.set_xlabel("input dimension d")
    ax.set_ylabel("SGD steps (= samples) to recovery")
    ax.legend(fontsize=7)
    name = f"{stem}-scaling-samples.{fmt}"
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out_dir / name)
    plt.close(fig)
    caption = (f"Online-SGD sample complexity: steps to overlap² 0.9 against d; {_fmt(fit)}, "
               "theory k*−1")
    return [{"file": name, "kind": "scaling", "var": "steps_recover", "caption": caption,
             "fits": {"samples": fit}}]


def check_dataset(ds: xr.Dataset) -> None:
    """Raise ValueError/KeyError when neither scaling analysis applies to ``ds``."""
    if is_sample_complexity(ds):
        return
    mean_loss(ds)


# -- per-task laws ------------------------------------------------------------------------------
def emergence_order_fit(t_recover: np.ndarray, overlap0: np.ndarray,
                        p_range: tuple[int, int]) -> dict[str, Any]:
    """Prop. 2.2(a): OLS slope of ``log(t_p · v̄_p(0)²)`` against ``log p`` over teachers
    ``p_range[0] ≤ p ≤ p_range[1]`` (1-based), expecting β, since ``t_p ≈ 1/(8 a_p v̄_p(0)²)``
    with ``a_p ∝ p^−β`` (docs/hermite-sgd.md, eq. (11)); ``raw`` is the slope of
    ``log t_p`` alone (the winners' initial overlaps scatter it)."""
    p = np.arange(1, len(t_recover) + 1, dtype=float)
    sel = (p >= p_range[0]) & (p <= p_range[1])
    fit = ols_fit(np.log10(p[sel]), np.log10(t_recover[sel] * overlap0[sel]))
    fit["raw"] = ols_fit(np.log10(p[sel]), np.log10(t_recover[sel]))
    return _clean(fit)


def greedy_agreement(winner: np.ndarray, winner_theory: np.ndarray) -> float:
    """Fraction of the recovered teachers (``winner ≥ 0``) won by the greedy neuron."""
    winner, winner_theory = np.asarray(winner), np.asarray(winner_theory)
    rec = winner >= 0
    return float(np.mean(winner[rec] == winner_theory[rec])) if rec.any() else math.nan


def tail_loss(a: np.ndarray, k: int) -> float:
    """``½ Σ_{p>k} a_p²``: the loss left when the ``k`` largest tasks are learned. For
    ``a_p ∝ p^−β`` with β < ½ and ``Σ a_p² = 1`` it is ≈ ``½ [1 − (k/P)^(1−2β)]``
    (docs/hermite-sgd.md, eq. (13))."""
    a = np.sort(np.asarray(a, dtype=float))[::-1]
    return 0.5 * float(np.sum(a[k:] ** 2))


def unstable_exponent(beta: float) -> float:
    """Cor. 2.3 (derived, docs/hermite-sgd.md, eq. (15)): with the step tuned to the budget,
    ``L(n) ∝ n^(−(2β−1)/(2β))``."""
    return -(2 * beta - 1) / (2 * beta)


def unstable_window_slope(P: int, beta: float, n_points: int = 400) -> float:
    """The log-log slope that the derived budget-tuned law predicts over the window a run can
    see, at finite ``P`` (docs/claims.md §5): with samples counted in units of the first
    task's, the budget n learns the tasks p ≤ q(n) = n^{1/(2β)} (eq. (14)) and leaves
    ``L(n) = ½ Σ_{p>q(n)} a_p²`` (exact sums, ``a_p ∝ p^{−β}``). OLS of log L against log n
    over ``n_points`` log-spaced budgets in [1, P^{2β}) (the window [n̂_1, n̂_P] of the runs).
    Tends to :func:`unstable_exponent` as P → ∞, slowly (the tail's finite-P cut-off)."""
    from richlazy_cli.models.hermite.model import teacher_weights

    a2 = teacher_weights(P, beta) ** 2
    tail = np.concatenate([0.5 * np.cumsum(a2[::-1])[::-1], [0.0]])  # tail[k] = ½ Σ_{p>k}
    n = np.geomspace(1.0, float(P) ** (2 * beta), n_points, endpoint=False)
    q = np.floor(n ** (1 / (2 * beta)) + 1e-9).astype(int)
    return float(np.polyfit(np.log(n), np.log(tail[q]), 1)[0])


def _clean(obj: Any) -> Any:
    """Make JSON-safe: numpy scalars to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _fmt(fit: dict[str, Any]) -> str:
    s, lo, hi, th = fit.get("slope"), fit.get("ci_low"), fit.get("ci_high"), fit.get("theory")
    if s is None:
        return "no fit"
    text = f"slope {s:.3f}"
    if lo is not None and hi is not None:
        text += f" [{lo:.3f}, {hi:.3f}]"
    if th is not None:
        text += f" (theory {th:.3f})"
    corr = fit.get("corrected")
    if corr and corr.get("slope") is not None:
        text += f"; finite-P corrected {corr['slope']:.3f}"
        if corr.get("ci_low") is not None:
            text += f" [{corr['ci_low']:.3f}, {corr['ci_high']:.3f}]"
    return text


def scaling_figures(ds: xr.Dataset, out_dir: pathlib.Path, stem: str,
                    fmt: str) -> list[dict[str, Any]]:
    """Draw the time, width and compute scaling figures (or, for an online-SGD sweep over d,
    the sample-complexity figure); one dict per figure written."""
    if is_sample_complexity(ds):
        return sample_complexity_figure(ds, out_dir, stem, fmt)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fits = fit_scaling(ds)
    L = mean_loss(ds)
    t = L["time"].values
    pos = t > 0
    ms = L["m"].values
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(ms)))
    written: list[dict[str, Any]] = []

    def line(ax: Any, fit: dict[str, Any], x0: float, x1: float, y0: float | None) -> None:
        xs = np.array([x0, x1])
        if fit.get("slope") is not None:
            ax.plot(xs, 10 ** (fit["intercept"] + fit["slope"] * np.log10(xs)), "k-", lw=2,
                    label=f"fit {_fmt(fit)}")
            if fit.get("theory") is not None:
                anchor = 10 ** (fit["intercept"] + fit["slope"] * np.log10(x0))
                ax.plot(xs, anchor * (xs / x0) ** fit["theory"], "r--", lw=1.5,
                        label=f"theory {fit['theory']:.3f}")

    def save(fig: Any, what: str, caption: str, fit: dict[str, Any]) -> None:
        name = f"{stem}-scaling-{what}.{fmt}"
        fig.tight_layout()
        fig.savefig(out_dir / name)
        plt.close(fig)
        written.append({"file": name, "kind": "scaling", "var": "loss", "caption": caption,
                        "fits": {what: fit}})

    # loss against time, one curve per width
    fit = fits["time"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, m in enumerate(ms):
        ax.loglog(t[pos], L.values[i, pos], color=colours[i], lw=1, label=f"m={m}")
    if fit["window"]:
        ax.axvspan(*fit["window"], color="0.9", zorder=0)
        lo, hi = fit["window"]
        line(ax, fit, lo, hi, None)
    ax.set_xlabel("time t")
    ax.set_ylabel("population loss")
    ax.legend(fontsize=7)
    save(fig, "time", "Loss against time for each width; shaded: the emergence window; "
         f"{_fmt(fit)}, theory -(2β-1)/β.", fit)

    # plateau against width
    fit = fits["width"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    mw, pl = plateaus(ds, L)
    ax.loglog(L["m"].values, L.isel(time=-1).values, "o", color="0.6", label="final loss")
    ax.loglog(mw, pl, "o", color="C0", label="plateaus fitted (m < P)")
    if mw.size >= 2:
        line(ax, fit, float(mw.min()), float(mw.max()), None)
    ax.set_xlabel("width m")
    ax.set_ylabel("loss at the final time")
    ax.legend(fontsize=7)
    save(fig, "width", f"Width plateau: loss at the final time against m; {_fmt(fit)}, "
         "theory -(2β-1).", fit)

    # compute frontier
    fit = fits["compute"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for i, m in enumerate(ms):
        ax.loglog(m * t[pos], L.values[i, pos], color=colours[i], lw=0.8, alpha=0.7,
                  label=f"m={m}")
    C, E, _ = compute_envelope(L)
    if C.size:
        ax.loglog(C, E, "k:", lw=1.5, label="lower envelope")
    if fit["window"]:
        lo, hi = fit["window"]
        line(ax, fit, lo, hi, None)
    ax.set_xlabel("compute C = m·t")
    ax.set_ylabel("population loss")
    ax.legend(fontsize=7)
    save(fig, "compute", f"Compute-optimal frontier over C = m·t; {_fmt(fit)}, "
         "theory -(2β-1)/(1+β).", fit)
    return written
