"""Tests of the scaling-law fits (richlazy_cli/report/scaling.py) on synthetic power laws."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.models.hermite.model import (
    greedy_recovery_times,
    hermite_coeffs,
    idealised_loss,
    initial_directions,
    teacher_weights,
)
from richlazy_cli.report.scaling import (
    compute_envelope,
    finite_p_offset,
    fit_scaling,
    ols_fit,
    scaling_figures,
    theory_exponents,
)

ALPHA, GAMMA = 0.75, 0.6  # β = 0.8: time and width exponents


def synthetic(ms: np.ndarray, seeds: int = 0, noise: float = 0.0,
              with_theory: bool = False) -> xr.Dataset:
    """``L(t, m) = max(t^-α, m^-γ)`` (exact power laws; optional log-normal noise per seed)."""
    t = np.concatenate([[0.0], np.geomspace(1e-2, 1e6, 400)])
    tt = np.where(t > 0, t, 1e-2)
    L = np.maximum(np.minimum(tt[None, :] ** -ALPHA, 1.0), ms[:, None].astype(float) ** -GAMMA)
    dims: tuple[str, ...] = ("m", "time")
    if seeds:
        g = np.random.default_rng(0)
        L = L[:, None, :] * np.exp(noise * g.standard_normal((len(ms), seeds, len(t))))
        dims = ("m", "seed", "time")
    coords = {"m": ms, "time": t}
    if seeds:
        coords["seed"] = np.arange(seeds)
    ds = xr.Dataset({"loss": (dims, L)}, coords=coords)
    ds.attrs["params"] = json.dumps({"beta": 0.8, "P": 10**6, "d": 100})
    if with_theory:  # recovery times T_p = p for p ≤ m (only their ranks matter)
        p = np.arange(1, 1001, dtype=float)
        T = np.where(p[None, :] <= ms[:, None], p[None, :], np.nan)
        ds["t_recover"] = (("m", "teacher"), T)
    return ds


def test_theory_exponents_beta_08() -> None:
    th = theory_exponents(0.8)
    assert th["time"] == pytest.approx(-0.75)
    assert th["width"] == pytest.approx(-0.6)
    assert th["compute"] == pytest.approx(-1 / 3)


def test_ols_fit_interval_and_degenerate_cases() -> None:
    x = np.linspace(0, 1, 50)
    g = np.random.default_rng(1)
    fit = ols_fit(x, 2 - 0.5 * x + 0.01 * g.standard_normal(50))
    assert fit["ci_low"] < -0.5 < fit["ci_high"]
    assert fit["ci_high"] - fit["ci_low"] < 0.05
    two = ols_fit(np.array([0.0, 1.0]), np.array([1.0, 3.0]))
    assert two["slope"] == pytest.approx(2.0) and np.isnan(two["ci_low"])
    assert np.isnan(ols_fit(np.array([1.0]), np.array([1.0]))["slope"])


def test_recovers_known_exponents_from_exact_power_laws() -> None:
    ms = np.geomspace(10, 1e4, 25).round().astype(int)
    fits = fit_scaling(synthetic(ms), window=(10.0, 1e3))
    assert fits["time"]["slope"] == pytest.approx(-ALPHA, abs=1e-9)
    assert fits["width"]["slope"] == pytest.approx(-GAMMA, abs=1e-9)
    # the envelope of max((C/m)^-α, m^-γ) over a dense width grid: slope -αγ/(α+γ) = -1/3
    assert fits["compute"]["slope"] == pytest.approx(-1 / 3, abs=0.02)
    assert fits["compute"]["theory"] == pytest.approx(-1 / 3)
    json.dumps(fits)  # JSON-able


def test_window_from_theory_times_and_seed_average() -> None:
    ms = np.array([100, 300, 3000])
    ds = synthetic(ms, seeds=4, noise=0.02, with_theory=True)
    fits = fit_scaling(ds)
    lo, hi = fits["time"]["window"]
    assert lo == pytest.approx(4.0)  # T_(4)
    assert hi == pytest.approx(500.0)  # T_(n/2), n = min(m, 1000 teachers) = 1000
    assert fits["time"]["ci_low"] <= -ALPHA <= fits["time"]["ci_high"]
    assert abs(fits["time"]["slope"] + ALPHA) < 0.01
    assert abs(fits["width"]["slope"] + GAMMA) < 0.02


def test_compute_envelope_is_the_minimum_over_widths() -> None:
    ds = synthetic(np.array([10, 100]))
    C, E, best = compute_envelope(ds["loss"].transpose("m", "time"))
    # at every C the envelope is the smaller of the two curves (up to log-log interpolation)
    curves = [np.maximum(np.minimum((C / m) ** -ALPHA, 1.0), m**-GAMMA) for m in (10, 100)]
    np.testing.assert_allclose(E, np.minimum(*curves), rtol=0.02)
    assert set(np.unique(best)) == {10.0, 100.0}


def test_scaling_figures_write_files(tmp_path: pathlib.Path) -> None:
    ms = np.array([10, 30, 100, 300])
    out = scaling_figures(synthetic(ms, with_theory=True), tmp_path, "demo", "png")
    assert [d["file"] for d in out] == ["demo-scaling-time.png", "demo-scaling-width.png",
                                        "demo-scaling-compute.png"]
    for d in out:
        assert (tmp_path / d["file"]).stat().st_size > 1000
        assert d["kind"] == "scaling" and d["var"] == "loss" and d["caption"]
        json.dumps(d["fits"])


def test_finite_p_offset_is_the_missing_tail() -> None:
    # Σ_{k<p≤P} a_p² + 2 L_P ≈ k^(1-2β)/((2β-1)Z²) (the tail of docs/hermite.md, before
    # eq. (11)), for k well inside [1, P]
    P, beta = 4096, 0.8
    a = teacher_weights(P, beta)
    Z2 = np.sum(np.arange(1, P + 1) ** (-2 * beta))
    for k in (64, 512, 2048):
        finite = np.sum(a[k:] ** 2)
        assert finite + 2 * finite_p_offset(P, beta) == pytest.approx(
            k ** (1 - 2 * beta) / ((2 * beta - 1) * Z2), rel=0.01)


def test_idealised_curve_exponent_trends_to_theory_with_p() -> None:
    """The idealised curve ½ Σ_{unlearned} a_p² on greedy times from random overlaps (m = 2P,
    d = 8P): over the window [T_(4), T_(P/2)] the raw slope moves toward -0.75 as P grows (slowly:
    the finite-P steepening near k = P/2 is scale-free) and the finite-P-corrected slope is
    within 0.05 of -0.75 from P = 256 on."""
    raw, corrected = [], []
    for P in (64, 256, 1024):
        a = teacher_weights(P, 0.8)
        T = greedy_recovery_times(initial_directions(0, 2 * P, 8 * P)[:, :P], a,
                                  hermite_coeffs(4, None))
        Ts = np.sort(T)
        t = np.geomspace(Ts[0] / 2, Ts[-1] * 2, 2000)
        L = idealised_loss(t, T, a, hermite_coeffs(4, None))
        sel = (t >= Ts[3]) & (t <= Ts[P // 2 - 1])
        raw.append(ols_fit(np.log10(t[sel]), np.log10(L[sel]))["slope"])
        off = finite_p_offset(P, 0.8)
        corrected.append(ols_fit(np.log10(t[sel]), np.log10(L[sel] + off))["slope"])
    assert raw[0] < raw[1] < raw[2] < -0.75
    assert all(abs(c + 0.75) < 0.05 for c in corrected[1:])
    assert abs(corrected[2] + 0.75) < abs(corrected[0] + 0.75)


def test_fits_recover_theory_on_the_idealised_curve() -> None:
    """The idealised model of docs/hermite.md, eq. (10), P = 2^14, β = 0.8, T_p = 1/a_p
    (uniform initial overlaps), width m learns the m largest tasks: L_m(t) = ½[Σ_{p>m} a_p² +
    Σ_{p≤m, T_p>t} a_p²].
    The finite-P-corrected fits give Prop. 2.2 and the compute frontier within 0.03."""
    P, beta = 2**14, 0.8
    a = teacher_weights(P, beta)
    T = 1 / a
    ms = 2 ** np.arange(4, 15)
    t = np.concatenate([[0.0], np.geomspace(T[0] / 10, T[-1] * 3, 600)])
    a2 = a**2
    tail = np.concatenate([np.cumsum(a2[::-1])[::-1], [0.0]])  # tail[k] = Σ_{p>k} a_p²
    # tasks p ≤ m not yet learned at t: T_p > t  <=>  p > k(t) = #{p: T_p ≤ t} (T increasing)
    k = np.searchsorted(T, t, side="right")
    L = 0.5 * tail[np.minimum(k[None, :], ms[:, None])]
    Tm = np.where(np.arange(P)[None, :] < ms[:, None], T[None, :], np.nan)
    ds = xr.Dataset({"loss": (("m", "time"), L), "t_recover": (("m", "teacher"), Tm)},
                    coords={"m": ms, "time": t})
    ds.attrs["params"] = json.dumps({"beta": beta, "P": P})
    fits = fit_scaling(ds)
    for key in ("time", "width", "compute"):
        assert abs(fits[key]["corrected"]["slope"] - fits[key]["theory"]) < 0.03, (key, fits[key])
    assert fits["time"]["slope"] < fits["time"]["corrected"]["slope"]  # finite P steepens
