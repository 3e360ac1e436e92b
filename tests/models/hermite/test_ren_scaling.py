"""Ren et al. 2025 beyond the single flow (docs/hermite-sgd.md): online-SGD sample complexity,
SGD ≈ GF and Thm 2.1 in the SGD regime, sharpening with d, width and compute exponents on
simulated flows (Fig. 2b), the heavy-tailed barrier, the budget-tuned step (Cor. 2.3), and the
initial gaps of Lemma 3.1. The sizes follow each claim's protocol; the long ones are slow."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.integrate import solve_ivp

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite.model import (
    RECOVERY,
    Hermite,
    emergence_time_h4,
    hermite_coeffs,
    initial_directions,
    population_loss_grad,
    teacher_weights,
)
from richlazy_cli.report.scaling import (
    emergence_order_fit,
    fit_scaling,
    greedy_agreement,
    sample_complexity_fit,
    scaling_figures,
    tail_loss,
    unstable_exponent,
    unstable_window_slope,
)

H4 = hermite_coeffs(4, None)
ROOT = Path(__file__).resolve().parents[3]


def run_batch(action: str, points: list[dict[str, object]]) -> xr.Dataset:
    values = [Hermite.resolve(action, p) for p in points]
    return Hermite().run(action, Batch.from_points(Hermite, values))


def run(action: str, **given: object) -> xr.Dataset:
    return run_batch(action, [given]).isel(point=0)


def theory_time(d: int, seed: int, m: int = 4) -> float:
    return float(run("solve", d=d, P=1, m=m, seed=seed, t_max=1.0,
                     n_records=2)["t_recover_theory"][0])


def flow_time(d: int, seed: int, m: int = 4) -> float:
    t_hat = theory_time(d, seed, m)
    return float(run("solve", d=d, P=1, m=m, seed=seed, t_max=3 * t_hat, n_records=10,
                     early_stop=True)["t_recover"][0])


def sgd_ratio(d: int, seed: int, c_lr: float, budget: float = 3.0,
              reference: float | None = None) -> tuple[float, float]:
    """(t_recover/t̂, steps_recover) of one SGD run at lr = c_lr/d², P = 1, m = 4, σ0 = 1e-2
    (t_recover/``reference`` if given)."""
    t_hat = theory_time(d, seed)
    lr = c_lr / d**2
    ds = run("train", d=d, P=1, m=4, seed=seed, lr=lr, steps=math.ceil(budget * t_hat / lr),
             n_records=20, stop_on_recovery=True)
    ref = t_hat if reference is None else reference
    return float(ds["t_recover"][0]) / ref, float(ds["steps_recover"][0])


# -- sample complexity and SGD ≈ GF (docs/hermite-sgd.md, eqs. (4)-(6)) -----------------------
def test_sample_complexity_fit_on_a_synthetic_sweep(tmp_path: Path) -> None:
    d = np.array([16.0, 32.0, 64.0, 128.0])
    g = np.random.default_rng(0)
    steps = 5.0 * d[:, None] ** 3 * np.exp(0.2 * g.standard_normal((4, 9)))
    steps[0, 0] = np.nan  # one run that never recovered: +inf in the median
    ds = xr.Dataset({"steps_recover": (("d", "seed", "teacher"), steps[:, :, None])},
                    coords={"d": d, "seed": np.arange(9), "teacher": [1]})
    ds.attrs["params"] = json.dumps({"k": 4, "P": 1})
    fit = sample_complexity_fit(ds)
    assert fit["theory"] == 3.0 and fit["ci_low"] <= 3.0 <= fit["ci_high"]
    assert abs(fit["slope"] - 3.0) < 0.15 and fit["recovered"] == [8, 9, 9, 9]
    out = scaling_figures(ds, tmp_path, "dscale", "png")
    assert out[0]["file"] == "dscale-scaling-samples.png" and "samples" in out[0]["fits"]
    assert (tmp_path / out[0]["file"]).stat().st_size > 1000


@pytest.mark.slow
def test_sample_complexity_exponent_is_k_minus_1() -> None:
    """jobs/ren-sgd-dscaling.toml: d = 24…128, 8 seeds, lr = 0.1/d², P = 1, m = 4, budget
    3 t̂/lr. The OLS slope of log median steps_recover against log d is in [2.4, 3.4]
    (theory k* − 1 = 3; the noise-driven speed-up grows with d at fixed lr·d², which pulls the
    estimate below 3: docs/hermite-sgd.md §2)."""
    ds_list = []
    for d in (24, 32, 48, 64, 96, 128):
        steps = [sgd_ratio(d, seed, 0.1)[1] for seed in range(8)]
        ds_list.append(steps)
    ds = xr.Dataset({"steps_recover": (("d", "seed"), np.array(ds_list))},
                    coords={"d": [24, 32, 48, 64, 96, 128], "seed": np.arange(8)})
    ds.attrs["params"] = json.dumps({"k": 4})
    fit = sample_complexity_fit(ds)
    print("sample-complexity fit", fit)
    assert 2.4 <= fit["slope"] <= 3.4, fit


@pytest.mark.slow
def test_sgd_follows_gradient_flow_and_spread_shrinks_with_lr() -> None:
    """SGD ≈ GF (Ren et al. §3.3; docs/hermite-sgd.md, eq. (6)).

    lr = 1e-3/d², d ∈ {24, 32}, 8 seeds: seed-median t_recover/t̂ ∈ [0.9, 1.1] and every run
    in [0.67, 1.5]. lr = 0.1/d², d ∈ {32, 64, 96}: only the seed median of t^SGD/t^GF (the
    flow of the same seed) is asserted, in [0.6, 1.8]. The spread of single runs at d = 32 is
    printed for lr = 0.1, 1e-2 and 1e-3 over d², and must shrink as the step does."""
    for d in (24, 32):
        r = np.array([sgd_ratio(d, s, 1e-3)[0] for s in range(8)])
        print(f"lr=1e-3/d², d={d}: ratios {np.round(r, 3)}")
        assert 0.9 <= float(np.median(r)) <= 1.1, r
        assert np.all((r >= 0.67) & (r <= 1.5)), r
    spread = {}
    for c in (0.1, 1e-2, 1e-3):
        r = np.array([sgd_ratio(32, s, c)[0] for s in range(8)])
        spread[c] = float(np.nanmax(r) - np.nanmin(r))
        print(f"lr={c}/d², d=32: ratios {np.round(r, 3)}, spread {spread[c]:.3f}")
    assert spread[1e-3] < spread[1e-2] < spread[0.1]
    for d in (32, 64, 96):
        r = np.array([sgd_ratio(d, s, 0.1, reference=flow_time(d, s))[0] for s in range(8)])
        print(f"lr=0.1/d², d={d}: t_SGD/t_GF {np.round(r, 3)}, median {np.median(r):.3f}")
        assert 0.6 <= float(np.median(r)) <= 1.8, r


@pytest.mark.slow
def test_theorem_2_1_in_the_sgd_regime() -> None:
    """P = 4, a = (0.8, 0.45, 0.3, 0.2), d = 32, m = 8, σ0 = 1e-2, batch 1, lr = 0.01 a_min/d²
    (≈ 10⁷ steps per seed), seeds 0-1; the claims tier runs seed 0
    (tests/claims/test_claims.py::theorem_2_1_check states the protocol and the bounds).

    For the teachers whose GF recovery is not slowed by competition (t^GF ≤ 1.5 t̂):
    t^SGD/t^GF ∈ [0.8, 1.25] and the same order; winners = greedy winners (Eq. 5); search
    phase (Thm 2.1(c), finite-d form): overlap ≤ 2.3 overlap(0) for t ≤ t_p/2.

    Norm convergence (Thm 2.1(b)): the squared norm carried along e_p, Σ ‖v_k‖² over the
    neurons with cos² ≥ 0.9 to e_p, is in [0.85, 1.15] a_p once the norm phase is over. After
    the direction is found ‖v‖² grows logistically, d‖v‖²/dt ≈ 4‖v‖²(a_p − ‖v‖²), which takes
    τ_p = ln(a_p/σ0²)/(4 a_p) ≈ 2.6–11 time units here; the theorem's "after (1+Δ)T_p" is
    asymptotic in d (τ_p/T_p ∝ log d/d), so the bound is asserted for t ≥ t_p + 2τ_p, at
    every one of at least 5 checkpoints there: the run lasts until 1.5 (t_p + 2τ_p) of the
    slowest clean teacher instead of stopping at its recovery, so the window is never empty.
    """
    from tests.claims.test_claims import assert_theorem_2_1, theorem_2_1_check

    for seed in (0, 1):
        assert_theorem_2_1(theorem_2_1_check(32, seed))


def _crossing_times(d: int, m: int, seed: int) -> tuple[float, float, float]:
    """(t(overlap² = 0.1), t(0.9), x0) of the population flow, P = 1, by solve_ivp events
    on the closed-form gradient (an integration independent of the model's)."""
    V0 = 1e-2 * initial_directions(seed, m, d)
    a = np.array([1.0])

    def rhs(t: float, y: np.ndarray) -> np.ndarray:
        g = population_loss_grad(y.reshape(m, d), a, H4)[1]
        assert g is not None
        return -g.ravel()

    def best(y: np.ndarray) -> float:
        V = y.reshape(m, d)
        return float(np.max(V[:, 0] ** 2 / np.sum(V * V, axis=1)))

    events = [lambda t, y, lv=lv: best(y) - lv for lv in (0.1, RECOVERY)]
    events[1].terminal = True  # type: ignore[attr-defined]
    x0 = best(V0.ravel())
    sol = solve_ivp(rhs, (0, 20 * d), V0.ravel(), events=events, rtol=1e-9,
                    atol=1e-14, method="DOP853")
    t1 = sol.t_events[0][0] if x0 < 0.1 else 0.0
    return t1, sol.t_events[1][0], x0


def test_emergence_sharpens_with_d() -> None:
    """Thm 2.1 transition width at finite d (docs/hermite-sgd.md, eq. (7)): the fraction
    Δ = 1 − t(0.1)/t(0.9) follows the exact single-task law to 1e-3 and shrinks ∝ 1/d:
    Δ(512) ≤ 0.35 Δ(32) (median over 3 seeds, m = 8)."""
    med = {}
    for d in (32, 512):
        deltas = []
        for seed in range(3):
            t1, t9, x0 = _crossing_times(d, 8, seed)
            delta = 1 - t1 / t9
            m0 = math.sqrt(x0)
            pred = 1 - (emergence_time_h4(m0, math.sqrt(0.1), 1.0) if x0 < 0.1 else 0.0) / \
                emergence_time_h4(m0, math.sqrt(RECOVERY), 1.0)
            assert abs(delta - pred) <= 1e-3, (d, seed, delta, pred)
            deltas.append(delta)
        med[d] = float(np.median(deltas))
    print("median Δ", med)
    assert med[512] <= 0.35 * med[32], med


# -- Fig. 2b: width, compute, time and per-task laws on simulated flows -----------------------
@pytest.mark.slow
def test_width_and_compute_exponents_on_simulated_flows(cli, tmp_path: Path) -> None:
    """jobs/ren-width.toml (d = 256, P = 128, β = 0.8, m = 8…256, seeds 0-2, early_stop;
    8.6-12.6 min with --jobs 2 on a loaded 2-core machine). Fits of report/scaling.py.

    Asserted (measured on the first full run):
    * time: finite-P-corrected slope within 0.15 of −0.75 (−0.716 [−0.731, −0.702]);
    * compute frontier: corrected slope within 0.1 of −(2β−1)/(1+β) = −1/3
      (−0.410 [−0.413, −0.406]) and the raw one ≤ −1/3 + 0.02 (−0.541): steeper, as the paper
      says of its Fig. 2b;

    Verdicts asserted as measured, so that a change in them fails (docs/claims.md):
    * width: corrected slope −0.78 [−1.23, −0.33] over m = 8…64 (theory −0.6, margin 0.1);
      not asserted against the theory: the plateaus are the tail of the tasks actually
      recovered (asserted in tests/claims/test_claims.py), which the horizon and co-learning cut.
      At t_max = 7000 the narrow students have not finished: 24–28 of 32 and 45–52 of 64
      learnable tasks are recovered, and with m ≪ P the greedy pairs include lucky tail
      tasks, so the loss at t_max (m = 8: 0.12–0.31) lies above ½ Σ_{p>m} a_p² (0.085);
    * Prop. 2.2(a): slope of log(t_p v̄_p(0)²) against log p over p ∈ [2, 128] at m = 256 is
      0.89, 0.92, 0.91 (β = 0.8, margin 0.1: mean 0.905); the raw log t_p slope 0.98–0.99;
    * greedy agreement (claim ≥ 0.8): 0.71 over all widths, 0.79 over m ≤ P; it falls with
      the width (1.0–0.86 at m = 8, 0.7–0.78 at m = P, 0.59–0.62 at m = 2P), since more
      neurons with similar initial overlaps compete for each teacher.
    """
    out = tmp_path / "width.h5"
    res = cli("sweep", "-c", str(ROOT / "jobs" / "ren-width.toml"), "-o", str(out), "-q",
              "--jobs", "2")
    assert res.code == 0, res.err
    ds = xr.open_dataset(out, engine="h5netcdf").load()
    fits = fit_scaling(ds)
    print(json.dumps({k: fits[k] for k in ("time", "width", "compute")}, indent=1))
    assert abs(fits["time"]["corrected"]["slope"] + 0.75) <= 0.15
    assert abs(fits["compute"]["corrected"]["slope"] + 1 / 3) <= 0.1
    assert fits["compute"]["slope"] <= -1 / 3 + 0.02
    agree = {}
    for m in ds["m"].values:
        one = ds.sel(m=m)
        agree[int(m)] = float(np.mean([greedy_agreement(one.sel(seed=s)["winner"].values,
                                                        one.sel(seed=s)["winner_theory"].values)
                                       for s in one["seed"].values]))
    print("greedy agreement by width", agree)
    # near ties: agreement falls with the width (measured 0.86-1.0 at m = 8, 0.59-0.62 at 2P)
    assert agree[8] >= 0.85 and agree[256] <= 0.7 and agree[8] - agree[256] >= 0.2, agree
    widest = ds.sel(m=256)
    slopes = []
    for seed in widest["seed"].values:
        one = widest.sel(seed=seed)
        f = emergence_order_fit(one["t_recover"].values, one["winner_overlap0"].values,
                                (2, 128))
        print("Prop 2.2(a)", seed, f["slope"], "raw", f["raw"]["slope"])
        slopes.append(f["slope"])
    # Prop. 2.2(a) at d = 256: steeper than β = 0.8 (0.89-0.92); its trend over d is in
    # scripts/claims_trends.py (docs/claims.md §Prop. 2.2(a))
    assert 0.85 <= float(np.mean(slopes)) <= 0.95, slopes


# -- β < ½ and the budget-tuned step (docs/hermite-sgd.md §6) ---------------------------------
def test_heavy_tail_barrier_numbers() -> None:
    """Eq. (13): exact sums at P = 64, m = P/2 = 32: 0.357 (β = 0.2) against the continuum
    ½[1 − 0.5^0.6] = 0.170·2 = 0.340, and 0.032 at β = 0.8. The paper's displayed width term
    (1 − (P/m)^(1−2β))₊ is 0 for every m < P: the derived form is asserted instead."""
    assert tail_loss(teacher_weights(64, 0.2), 32) / 0.5 == pytest.approx(0.357, abs=1e-3)
    assert tail_loss(teacher_weights(64, 0.8), 32) / 0.5 == pytest.approx(0.032, abs=1e-3)
    # the exact sums approach the continuum form (13) as P grows, the error shrinking with P
    err = [abs(tail_loss(teacher_weights(P, 0.2), P // 2) / 0.5 - (1 - 0.5**0.6))
           for P in (64, 1024, 16384)]
    assert err[0] > err[1] > err[2] and err[2] <= 2e-3, err
    assert unstable_exponent(0.8) == pytest.approx(-0.375)


def test_budget_tuned_law_at_finite_p() -> None:
    """The derived law (docs/claims.md §5) over the window [n̂_1, n̂_P] that a run sees, with
    the exact tail sums: slope −0.90 at P = 8 (the measured envelope: −1.06 and −1.10), −0.65
    at P = 64 and −0.44 at P = 32768. It moves toward −(2β−1)/(2β) = −0.375 with P, but
    slowly: P = 64 would test −0.65, not −0.375. Checked against a hand sum at P = 2, where
    the window [1, 2^1.6) learns one task throughout: L = ½a_2², a flat line (slope 0)."""
    s = {P: unstable_window_slope(P, 0.8) for P in (8, 64, 512, 4096, 32768)}
    assert s[8] == pytest.approx(-0.901, abs=2e-3) and s[64] == pytest.approx(-0.651, abs=2e-3)
    Ps = sorted(s)
    assert all(s[a] < s[b] for a, b in itertools.pairwise(Ps)), s
    assert 0 < unstable_exponent(0.8) - s[32768] < 0.1, s  # −0.444: still 0.07 away
    assert unstable_window_slope(2, 0.8) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow
def test_heavy_tail_barrier_on_simulated_flows() -> None:
    """d = 256, P = 64, σ0 = 1e-2, t_max = 1000, early_stop, seed 0 (part of
    jobs/ren-heavy-tail.toml; about 1 min). Asserted: the barrier at m = P/2 depends on the
    tail, L∞/L(0) ≥ 0.25 at β = 0.2 (measured 0.466 and 0.492 for seeds 0-1); for m < P,
    L∞(m) is within ±20% of ½ Σ a_p² over the teachers not recovered (measured ratio
    1.00–1.06 over the whole job), and m' ≥ 0.8 m teachers are recovered.

    Verdict at β = 0.8, m = 32 (asserted as measured): L∞/L(0) is 0.067 and 0.059 > 0.05 (the
    claim's ≤ 0.05 does not hold here) and lies above the top-32 tail 0.032: 26–28 tasks are
    recovered and not only the top ones; the co-learning-aware prediction above accounts for
    it (docs/claims.md §heavy tail)."""
    barrier, above_top = {}, {}
    for beta, m in ((0.2, 32), (0.8, 32), (0.35, 16)):
        ds = run("solve", d=256, P=64, m=m, beta=beta, t_max=1000.0, n_records=60,
                 early_stop=True)
        L = ds["loss"].values
        a = teacher_weights(64, beta)
        rec = np.isfinite(ds["t_recover"].values)
        left = 0.5 * float(np.sum(a[~rec] ** 2))
        print(f"beta={beta} m={m}: L_inf/L0 {L[-1] / L[0]:.4f}, recovered {rec.sum()}, "
              f"predicted {left:.4f}, measured {L[-1]:.4f}")
        assert rec.sum() >= 0.8 * m
        assert abs(L[-1] / left - 1) <= 0.2
        barrier[beta] = L[-1] / L[0]
        above_top[beta] = L[-1] / tail_loss(a, m)
    assert barrier[0.2] >= 0.25, barrier
    assert barrier[0.8] > 0.05 and above_top[0.8] > 1.0, (barrier, above_top)


@pytest.mark.slow
def test_budget_tuned_envelope_beats_stable_step() -> None:
    """jobs/ren-unstable.toml at seeds 0-1 (Cor. 2.3; docs/hermite-sgd.md, eqs. (14)-(15)):
    d = 24, P = 8, β = 0.8, m = 16, lr_q = 0.1 a_q/d² for q = 1, 2, 4, 8 (q = 8: the stable
    step); 35 s per seed.

    Asserted: the envelope L_u(n) = min_q L_q(n) is ≤ 0.8 L_stable(n) over
    [n̂_1, n̂_P/10], where n̂_1 is the step at which the fastest (q = 1) run has completed half
    of its first drop (L ≤ L(0) − a_1²/4; before it no step has learned anything and both are
    L(0)) and n̂_P the stable run's predicted last recovery. Measured max ratio 0.62 (seed 0),
    0.68 (seed 1).

    Asserted as measured, because they do not hold at this size (docs/claims.md §Cor. 2.3):
    the envelope's log-log
    slope over [n̂_1, n̂_P] is −1.10 and −1.06 (derived −(2β−1)/(2β) = −0.375): with only 8
    tasks the window is the finite-P cut-off of the tail (the stable curve's slope is −1.03
    there too); and in the q = 2 run the teachers p > 2 reach overlap² ≈ 20/d before teacher 2
    is recovered (claim: ≤ 5/d): at d = 24 the larger steps do not freeze the small tasks,
    the q = 1 run recovers 7 of the 8 teachers, so the "unstable" regime of §3.3 is not
    reached. Both need larger d and P (docs/hermite-sgd.md §6). How far the slope lies from
    the finite-P law is a property of many seeds, not of these two (seeds 0-1 are the
    flattest of eight): `tests/claims/test_claims_slow.py` asserts it over seeds 0-7 at P = 8 and 16
    (docs/claims.md §5.1).
    """
    d, P = 24, 8
    a = teacher_weights(P, 0.8)
    lrs = [0.1 * a[q - 1] / d**2 for q in (1, 2, 4, 8)]
    for seed in (0, 1):
        ds = run_batch("train", [{"d": d, "P": P, "m": 16, "beta": 0.8, "lr": lr,
                                  "seed": seed, "steps": 1_200_000, "n_records": 200}
                                 for lr in lrs])
        n = ds["step"].values.astype(float)
        L = ds["loss"].values  # (q, step)
        Lu = np.min(L, axis=0)
        Ls = L[3]
        n_P = float(np.nanmax(ds["t_recover_theory"].values[3]) / lrs[3])
        n_1 = float(n[np.argmax(L[0] <= L[0, 0] - a[0] ** 2 / 4)])
        early = (n >= n_1) & (n <= n_P / 10)
        assert early.sum() >= 10
        print(f"seed {seed}: n_1 {n_1:.3g}, n_P {n_P:.3g}, max L_u/L_stable "
              f"{np.max(Lu[early] / Ls[early]):.3f}")
        assert np.all(Lu[early] <= 0.8 * Ls[early])
        win = (n >= n_1) & (n <= n_P)
        slope = np.polyfit(np.log(n[win]), np.log(Lu[win]), 1)[0]
        ov = ds["overlap"].values[1]
        t2 = ds["steps_recover"].values[1, 1]
        frozen = ov[n < t2][:, 2:].max() * d
        print(f"  envelope slope {slope:.3f} (derived {unstable_exponent(0.8)}); q=2 run: "
              f"max overlap² of p > 2 before p = 2 is recovered {frozen:.1f}/d")
        # the finite-P cut-off, not the derived −0.375; the small tasks are not frozen
        assert slope <= -0.9 and frozen >= 10, (slope, frozen)


# -- Lemma 3.1: initial gaps (R15) ------------------------------------------------------------
def greedy_gap(U0: np.ndarray, a: np.ndarray, n_top: int) -> float:
    """min over p ≤ n_top of the relative gaps of the greedy matrix G_kq = a_q v̄_kq(0)²
    (h4, I = 2): diagonal D_p against the rest of its row (later teachers), of its column
    (neurons not yet taken) and the threshold gap of D_{n_top} against the lower-right block."""
    G = a[None, :] * U0[:, : a.size] ** 2
    m, P = G.shape
    rows, cols = np.ones(m, bool), np.ones(P, bool)
    gaps = []
    D = []
    for _ in range(n_top):
        sub = np.where(rows[:, None] & cols[None, :], G, -np.inf)
        k, q = np.unravel_index(np.argmax(sub), sub.shape)
        Dp = G[k, q]
        rows[k] = False
        cols[q] = False
        row_rest = G[k, cols].max() if cols.any() else 0.0
        col_rest = G[rows, q].max() if rows.any() else 0.0
        gaps.append((Dp - max(row_rest, col_rest)) / Dp)
        D.append(Dp)
    block = G[np.ix_(rows, cols)].max()
    gaps.append((D[-1] - block) / D[-1])
    return float(min(gaps))


@pytest.mark.integration
def test_lemma_3_1_gaps_scale_with_p_not_d() -> None:
    """P = 16, m = 32, a_p ∝ p^-0.8, 400 seeds: the 5th percentile of the smallest relative gap
    over the first P/2 greedy pairs is flat in d (q5(4096)/q5(256) ≥ 0.5) and falls with P at
    d = 1024 (q5(P = 32) < q5(P = 8)) (Ren et al. Lemma 3.1: 1/poly P, not 1/poly d)."""
    def q5(d: int, P: int, m: int) -> float:
        a = teacher_weights(P, 0.8)
        g = [greedy_gap(initial_directions(s, m, d), a, P // 2) for s in range(400)]
        return float(np.percentile(g, 5))

    q256, q4096 = q5(256, 16, 32), q5(4096, 16, 32)
    q8, q32 = q5(1024, 8, 16), q5(1024, 32, 64)
    print(f"q5: d=256 {q256:.4f}, d=4096 {q4096:.4f}; P=8 {q8:.4f}, P=32 {q32:.4f}")
    assert q4096 / q256 >= 0.5
    assert q32 < q8



@pytest.mark.slow
def test_greedy_agreement_and_prop_2_2a_move_toward_the_paper_with_d() -> None:
    """scripts/claims_trends.py ren-width's m = 2P runs at d = 64 and 256 (P = 32, β = 0.8,
    m = 64, t_max = 30 d, early_stop, seeds 0-3; 171 s on 2 cores at load average 5). As d
    grows the greedy agreement at m = 2P rises beyond the d = 64 interval (measured 0.55
    [0.49, 0.66] → 0.77 [0.73, 0.81]; the claim: ≥ 0.8) and the Prop. 2.2(a) slope falls
    toward β = 0.8 (1.19 [1.11, 1.26] → 0.85 [0.84, 0.87]). Verdict for both: holds
    asymptotically (docs/claims.md §3)."""
    from tests.claims.test_claims import _bootstrap_mean

    agree, slope = {}, {}
    for d in (64, 256):
        a_s, p_s = [], []
        for seed in range(4):
            ds = run("solve", d=d, P=32, m=64, beta=0.8, seed=seed, t_max=30.0 * d,
                     n_records=200, early_stop=True)
            a_s.append(greedy_agreement(ds["winner"].values, ds["winner_theory"].values))
            p_s.append(emergence_order_fit(ds["t_recover"].values, ds["winner_overlap0"].values,
                                           (2, 32))["slope"])
        agree[d], slope[d] = _bootstrap_mean(np.array(a_s)), _bootstrap_mean(np.array(p_s))
    print("agreement", agree, "Prop 2.2(a)", slope)
    assert agree[256][0] > agree[64][2], agree
    assert slope[256][0] < slope[64][1] and abs(slope[256][0] - 0.8) < abs(slope[64][0] - 0.8)
