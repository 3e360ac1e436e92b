"""The long versions of claims-tier checks (marker ``slow``; docs/claims.md): the same
measurement as in tests/claims/test_claims.py, over more sizes or seeds."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.claims.test_claims import _bootstrap_mean, heavy_time_law
from tests.conftest import run_process

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_heavy_tail_time_law_over_d_to_512() -> None:
    """scripts/claims_trends.py heavy-time at β = 0.2: P = 32, m = 2P, seeds 0-3,
    d = 64, 128, 256, 512 (about 6 min at load average 6-9 on the shared 2 cores; d = 512 is
    50-100 s a run). Measured ratio t(L ≤ ℓ)/t_law(L ≤ ℓ), mean [95% bootstrap]:
    1.95 [1.91, 1.99], 1.57 [1.54, 1.60], 1.31 [1.28, 1.35], 1.18 [1.16, 1.20]; lag
    9.4, 10.0, 10.3, 11.3 time units while t̂ grows ≈ 11 → 66.

    Asserted: each d's mean lies below the previous d's interval and above 1; at d = 512 the
    law is met within 25% in time (1.18); the lag stays within a factor 1.5 over the whole
    range (the norm phase, independent of d). Verdict: holds asymptotically (docs/claims.md
    §10)."""
    res = {d: heavy_time_law(d, range(4)) for d in (64, 128, 256, 512)}
    ratio = {d: _bootstrap_mean(r) for d, (r, _) in res.items()}
    lag = {d: float(np.mean(g)) for d, (_, g) in res.items()}
    print(ratio, lag)
    ds = sorted(ratio)
    for lo, hi in itertools.pairwise(ds):
        assert 1.0 < ratio[hi][0] < ratio[lo][1], ratio
    assert ratio[512][0] <= 1.25, ratio
    assert max(lag.values()) <= 1.5 * min(lag.values()), lag


RHM_FRACTIONS = "0.010391223038351695,0.021544346900318843"  # the 2nd and 3rd of the 7


def test_rhm_upstream_sample_complexity_from_ten_seeds(tmp_path: Path) -> None:
    """The thin threshold of tests/practice/test_practice_slow.py (f*(1)/f*(10) ≥ 1.1, measured 1.16
    from seeds 0-2) re-frozen from 10 seeds: jobs/rhm-alpha-small.toml at α = 1 and 10, the
    two training fractions that bracket accuracy 0.5 for both (0.0104, 0.0215), seeds 0-9
    (40 runs, 468 s with --jobs 1 at load average 10; as this test, 106 s with --jobs 2 at
    load average 5, the same ratio to the last bit).

    Measured: f*0.5 = 0.0186 (α = 1) and 0.0152 (α = 10) from the seed-mean accuracies, ratio
    1.22 [1.17, 1.29] (95% bootstrap over the 10 seeds; the 79 of 2000 resamples whose α = 1
    mean stays below 0.5 at both fractions, a larger ratio, are left out: conservative); over
    the 120 three-seed subsets the ratio is ≥ 1.134 (so the 3-seed test's 1.1 has a margin of
    0.03 at its worst subset).
    Asserted: the ratio ≥ 1.1 (margin 0.12) and the bootstrap's 2.5% point ≥ 1.05 (1.165),
    and α = 10 beats α = 1 in ≥ 18 of the 20 (seed, fraction) pairs (measured 20 of 20)."""
    pytest.importorskip("torch")
    from richlazy_cli.report.rhm_cnn import threshold_fraction

    out = tmp_path / "rhm.h5"
    res = run_process("sweep", "-c", ROOT / "jobs" / "rhm-alpha-small.toml", "-g", "alpha=1,10",
                      "-g", f"train_fraction={RHM_FRACTIONS}", "-g", "seed=range(10)",
                      "-o", out, "--jobs", "2", "-q", timeout=7200)
    assert res.code == 0, res.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds.status.values.max()) == 0
        acc = ds.final_test_acc.transpose("alpha", "seed", "train_fraction").values
        f = ds.train_fraction.values

    def ratio(seeds: np.ndarray) -> float:
        m = acc[:, seeds].mean(axis=1)
        return threshold_fraction(f, m[0]) / threshold_fraction(f, m[1])

    g = np.random.default_rng(0)
    boot = [ratio(g.integers(0, 10, 10)) for _ in range(2000)]
    print("f*(1)/f*(10):", ratio(np.arange(10)), np.nanpercentile(boot, [2.5, 97.5]))
    assert ratio(np.arange(10)) >= 1.1
    assert np.nanpercentile(boot, 2.5) >= 1.05
    assert int(np.sum(acc[1] > acc[0])) >= 18, acc


def test_grokking_tau_axis_over_five_seeds(tmp_path: Path) -> None:
    """Fig. 12's τ axis on the CPU-sized protocol over five seeds: jobs/grokking-tau-reduced.toml
    (p = 23, d_model = 64, AdamW lr 1e-3/τ², budget 10,000 steps, early stop) with
    -g tau=0.5,1,1.5 -g alpha=1,10 -g "seed=range(5)": 30 runs, 23 CPU-min (32 min with
    --jobs 2 at nice 5 beside other work). Measured steps to 99% validation accuracy
    (censored at the budget counted as 10,000), seeds 0-4:

    * τ = 0.5: α = 1: 1300, 1950, 1450, 1500, 1450; α = 10: censored, 600, 700, 950, 600;
    * τ = 1  : α = 1: 6350, 6900, 4250, 4450, 6750; α = 10: 2400, 1650, 2750, 1850, 3050;
    * τ = 1.5: α = 1: censored ×3, 8250, 9500;      α = 10: 4200, 3000, 3150, 3750, 3450.

    The ratio α = 10 / α = 1, geometric mean [95% bootstrap over the seeds]: 0.79 [0.38, 2.54]
    at τ = 0.5 (seed 0's α = 10 run does not settle: the step lr/τ² = 4e-3), 0.41 [0.30, 0.53]
    at τ = 1, 0.37 [0.32, 0.42] at τ = 1.5. The fastest of the six cells is (τ = 0.5, α = 10)
    in seeds 1-4 and (τ = 0.5, α = 1) in seed 0; by the median over the seeds (τ = 0.5, α = 10)
    at 700 against 1450 for the next.

    Asserted (margins frozen from this five-seed run): at τ = 1 and 1.5 α = 10 groks first in
    every seed and the interval of the ratio lies below 0.7; the fastest cell by the median is
    (τ = 0.5, α = 10), at most 0.75 of the next cell's median (0.48), and it is the fastest in
    at least 3 of the 5 seeds (4); seed 0 keeps its facts (the flip: α = 1 at τ = 0.5 within
    2000 steps, α = 10 censored). Verdict (docs/claims.md §11): the paper's "fastest grokking
    in an unbalanced rich setting" holds over five seeds on this protocol; seed 0 is the
    exception, and its cause is the 4× step of small τ
    (test_grokking_tau_axis_cause_the_step_of_small_tau)."""
    pytest.importorskip("torch")
    out = tmp_path / "tau.h5"
    res = run_process("sweep", "-c", ROOT / "jobs" / "grokking-tau-reduced.toml",
                      "-g", "tau=0.5,1,1.5", "-g", "alpha=1,10", "-g", "seed=range(5)",
                      "-o", out, "--jobs", "2", "-q", timeout=7200)
    assert res.code == 0, res.err
    check_grokking_tau_axis(out)


def check_grokking_tau_axis(out: Path) -> None:
    """The assertions of :func:`test_grokking_tau_axis_over_five_seeds` on its result."""
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds.status.values.max()) == 0
        steps = ds.steps_to_val.fillna(10_000.0).transpose("tau", "alpha", "seed")
        cens = ds.censored_val.transpose("tau", "alpha", "seed")
        taus, alphas = steps.tau.values.tolist(), steps.alpha.values.tolist()
        v = steps.values
        c = cens.values
    print("steps to 99% validation accuracy [tau, alpha, seed]:", v.tolist())
    i10, i1 = alphas.index(10.0), alphas.index(1.0)
    for tau in (1.0, 1.5):
        t = taus.index(tau)
        assert np.all(v[t, i10] < v[t, i1]), (tau, v[t])
        _, _, hi = _bootstrap_mean(np.log(v[t, i10] / v[t, i1]))
        assert np.exp(hi) < 0.7, (tau, np.exp(hi))
    median = np.median(v, axis=2)
    order = np.argsort(median, axis=None)
    first = np.unravel_index(order[0], median.shape)
    second = np.unravel_index(order[1], median.shape)
    assert (taus[first[0]], alphas[first[1]]) == (0.5, 10.0), median
    assert median[first] <= 0.75 * median[second], median
    fastest = [np.unravel_index(np.argmin(v[:, :, s]), v.shape[:2]) for s in range(v.shape[2])]
    assert sum(cell == first for cell in fastest) >= 3, fastest
    t05 = taus.index(0.5)
    assert v[t05, i1, 0] <= 2000 and int(c[t05, i10, 0]) == 1, v[t05, :, 0]


def test_cnn_downstream_kernel_moves_less_from_ten_seeds(tmp_path: Path) -> None:
    """The thin threshold of tests/practice/test_practice_slow.py (S(0.1) ≤ 0.8 S(1) at 500 epochs,
    measured 0.686 from seeds 0-2) re-frozen from 10 seeds: jobs/cnn-digits-alpha.toml at
    α = 0.1 and 1, seeds 0-9 (20 runs; 247 s as this test with --jobs 2 at load average 5).

    Measured kernel distance at the end: S(0.1)/S(1) per seed 0.43, 0.83, 0.72, 0.90, 0.64,
    0.49, 0.64, 0.73, 0.75, 0.94; on the seed means 0.735 [0.635, 0.817] (95% bootstrap over
    seeds). So 0.8 lies inside the interval: among the 120 three-seed subsets, 17% give more
    than 0.8 (max 0.892). Asserted: the 10-seed ratio ≤ 0.9 (margin 0.165, above the
    interval's upper end) and S(0.1) < S(1) in at least 9 of the 10 seeds (measured 10)."""
    pytest.importorskip("torch")
    out = tmp_path / "cnn.h5"
    res = run_process("sweep", "-c", ROOT / "jobs" / "cnn-digits-alpha.toml",
                      "-g", "alpha=0.1,1", "-g", "seed=range(10)", "-o", out, "--jobs", "2",
                      "-q", timeout=7200)
    assert res.code == 0, res.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds.status.values.max()) == 0
        S = ds.kernel_distance.isel(checkpoint=-1).transpose("alpha", "seed").values
    print("S(0.1)/S(1) per seed:", S[0] / S[1], "on the means:", S[0].mean() / S[1].mean())
    assert S[0].mean() <= 0.9 * S[1].mean(), S
    assert int(np.sum(S[0] < S[1])) >= 9, S


def greedy_recovered_per_seed(d: int, seeds: range, jobs: int = 1) -> np.ndarray:
    """scripts/claims_trends.py ren-width's narrow runs (P = 32, β = 0.8, σ0 = 1e-2,
    t_max = 30 d, early_stop, m = 4, 8, 16): per seed, the fraction of the greedy rule's tasks
    that are recovered, averaged over the three widths (``jobs`` seeds at a time)."""
    from joblib import Parallel, delayed  # n_jobs = 1 runs in this process, in order

    return np.array(Parallel(n_jobs=jobs)(delayed(_greedy_recovered)(d, s) for s in seeds))


def _greedy_recovered(d: int, seed: int) -> float:
    from tests.claims.test_claims import run

    fr = []
    for m in (4, 8, 16):
        ds = run("solve", d=d, P=32, m=m, beta=0.8, seed=seed, t_max=30.0 * d,
                 n_records=200, early_stop=True)
        t_rec, t_th = ds["t_recover"].values, ds["t_recover_theory"].values
        fr.append(float(np.mean(np.isfinite(t_rec[np.isfinite(t_th)]))))
    return float(np.mean(fr))


def test_co_learning_fades_with_d_beyond_its_interval() -> None:
    """scripts/claims_trends.py ren-width --d 64,256 --seeds 12 --narrow-only (149 s at
    d = 64 and 468 s at d = 256 at load average 7 on the shared 2 cores; 449 s as this test
    at load average 3-6). Measured:
    the fraction of the greedy tasks recovered, seed means [95% bootstrap over the 12 seeds],
    0.807 [0.750, 0.868] at d = 64 and 0.932 [0.905, 0.960] at d = 256 (seeds 0-3 alone:
    0.84 [0.72, 0.96] and 0.95 [0.93, 0.98], where the rise was not beyond the interval).
    Asserted: the d = 256 interval lies above the d = 64 interval (lower end 0.905 against
    upper end 0.868: margin 0.04), and neither reaches the greedy rule's 1. Verdict: the rise
    the 1/d transition width predicts holds beyond its interval (docs/claims.md §2.1)."""
    frac = {d: _bootstrap_mean(greedy_recovered_per_seed(d, range(12))) for d in (64, 256)}
    print(frac)
    assert frac[256][1] > frac[64][2], frac
    assert frac[256][2] < 1.0, frac


def test_co_learning_at_d_512_stays_above_d_64_and_level_with_d_256() -> None:
    """The d = 512 row of docs/claims.md §2.1: the same narrow runs at d = 64, 256 and 512,
    seeds 0-11, two seeds at a time (377 s as this test at nice 19 beside a CI run, load
    average 1.2-3). Measured (seed means [95% bootstrap over the 12 seeds]):
    0.807 [0.750, 0.868], 0.932 [0.905, 0.960] and 0.936 [0.894, 0.969] (d = 512 per seed:
    0.94, 0.94, 0.96, 0.98, 0.96, 1.00, 0.92, 0.83, 0.98, 0.98, 0.77, 0.98). Asserted, the
    verdict of §2.1: the d = 512 interval lies above the d = 64 interval (lower end 0.894
    against upper end 0.868: margin 0.026), and the d = 512 mean lies inside the d = 256
    interval, so twelve seeds show no further rise from d = 256 to 512 (the mean moves by
    0.004); neither reaches the greedy rule's 1."""
    frac = {d: _bootstrap_mean(greedy_recovered_per_seed(d, range(12), jobs=2))
            for d in (64, 256, 512)}
    print(frac)
    assert frac[512][1] > frac[64][2], frac
    assert frac[256][1] <= frac[512][0] <= frac[256][2], frac
    assert frac[512][2] < 1.0, frac


def test_grokking_tau_axis_cause_the_step_of_small_tau(tmp_path: Path) -> None:
    """The cause given for the τ axis above: the paper's lr/τ² makes the AdamW step at
    τ = 0.5 four times that of τ = 1. jobs/grokking-tau-stable-step.toml holds the step:
    τ = 0.5, lr = 2.5e-4 (lr/τ² = 1e-3, as at τ = 1), α = 1 and 10, seed 0 (669 s and 815 s
    with --jobs 1 at nice 19, load average 7-13; 384 s as this test at load average 3-6).
    Measured steps to 99% validation accuracy: α = 10 at 4050 (training accuracy still
    dips, to 0.77 at step 1200 and 0.57 at 2200); α = 1 censored (validation accuracy 0.67
    at 10,000). With the paper's step (the test above) the same τ = 0.5 column read α = 1
    at 1500 and α = 10 censored.

    Asserted: with the step held, α = 10 groks within the budget and within 0.7 of α = 1
    (censored counted as the budget: 4050 against 10,000), so the order of the α = 1 and 10
    cells at τ = 0.5 is the one of τ = 1 and 1.5; the flip on the paper's convention comes
    from the step (docs/claims.md §11). Seed 0 only."""
    pytest.importorskip("torch")
    out = tmp_path / "stable.h5"
    res = run_process("sweep", "-c", ROOT / "jobs" / "grokking-tau-stable-step.toml", "-g",
                      "seed=0", "-o", out, "--jobs", "2", "-q", timeout=7200)
    assert res.code == 0, res.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds.status.values.max()) == 0
        val = ds.steps_to_val.isel(seed=0).fillna(10_000.0)
        cens = ds.censored_val.isel(seed=0)
        print("steps to val:", val.values, "censored:", cens.values)
        assert int(cens.sel(alpha=10.0)) == 0
        assert float(val.sel(alpha=10.0)) <= 0.7 * float(val.sel(alpha=1.0))


def test_budget_tuned_envelope_slope_moves_toward_the_law_with_p() -> None:
    """scripts/claims_trends.py cor23 at d = 24: Cor. 2.3's budget-tuned step at P = 8
    (jobs/ren-unstable.toml) and P = 16 (jobs/ren-unstable-p16.toml), m = 2P, β = 0.8,
    lr_q = 0.1 a_q/d² for q = 1, 2, 4, …, P, seeds 0-7 (8 seeds per P; 145 s at P = 8 and
    487 s at P = 16 with one process at nice 19, load average 4-6; 379 s as this test at
    nice 19, load average 2-6, the same numbers to the printed digits). The envelope's slope
    over [n̂_1, n̂_P], read where it is ≥ ½ a_P² (below, every task is learned and it is SGD's
    noise floor), against the derived finite-P law's own slope over that window (−0.901 at
    P = 8, −0.803 at P = 16; −0.375 as P → ∞). Measured, mean [95% bootstrap over seeds]:

    * P = 8: slope −1.45 [−1.73, −1.19], measured − law −0.55 [−0.83, −0.29]; in 3 of the 8
      seeds the envelope falls to the noise floor before n̂_P (the q = 1 run learns all 8
      tasks), and over the whole window those seeds read −5.3 to −6.6;
    * P = 16: slope −0.98 [−1.08, −0.89], measured − law −0.18 [−0.28, −0.08]; no seed
      falls to the floor; the q = 1 run learns 12-15 of the 16 tasks.

    Asserted: the P = 16 mean of measured − law lies above the P = 8 interval's upper end
    (−0.175 against −0.291: margin 0.12), and the mean slope above the P = 8 slope interval
    (−0.98 against −1.19); the P = 16 gap is still negative beyond its interval (upper end
    −0.084 ≤ 0: the envelope still falls faster than the law); ≥ 2 of 8 P = 8 seeds reach the
    floor (3) and none at P = 16; the small tasks are not frozen (d × overlap² ≥ 6 before
    task 2 is recovered in the q = 2 run, min 8.2; freezing means ≲ 5); the envelope is
    ≤ 0.8 of the stable loss over [n̂_1, n̂_P/10] in every seed (max 0.726). Verdict: the
    gap to the derived law shrinks with P beyond its interval (docs/claims.md §5)."""
    from scripts.claims_trends import budget_tuned_seed, envelope_slopes

    rows = {P: [budget_tuned_seed(P, 24, seed, steps) for seed in range(8)]
            for P, steps in ((8, 1_200_000), (16, 1_600_000))}
    res = {P: [{**r, **envelope_slopes(r)} for r in rs] for P, rs in rows.items()}
    gap = {P: _bootstrap_mean(np.array([r["slope"] - r["law"] for r in rs]))
           for P, rs in res.items()}
    slope = {P: _bootstrap_mean(np.array([r["slope"] for r in rs])) for P, rs in res.items()}
    print("measured - law:", gap, "slope:", slope)
    assert gap[16][0] > gap[8][2] and slope[16][0] > slope[8][2], (gap, slope)
    assert gap[16][2] <= 0.0, gap
    brief = {P: [(r["collapsed"], round(r["max_ratio_early"], 3), round(r["frozen"], 1))
                 for r in rs] for P, rs in res.items()}
    assert sum(r["collapsed"] for r in res[8]) >= 2, brief
    assert not any(r["collapsed"] for r in res[16]), brief
    assert all(r["max_ratio_early"] <= 0.8 for rs in res.values() for r in rs), brief
    assert all(r["frozen"] >= 6.0 for rs in res.values() for r in rs), brief


def test_budget_tuned_envelope_follows_the_law_at_p_32() -> None:
    """jobs/ren-unstable-p32.toml through scripts/claims_trends.py cor23: P = 32, d = 32 (P ≤ d),
    m = 64, six steps lr_q = 0.1 a_q/d² (q = 1 … 32), 9.2·10⁶ samples, seeds 0-3, two at a
    time (450-510 s a seed on one core), beside P = 8 at d = 24 (seeds 0-7) from the test
    above. Measured, mean [95% bootstrap over seeds]: slope −0.78 [−0.85, −0.70] against the
    law's −0.72, measured − law −0.065 [−0.132, +0.020] (P = 8: −0.55 [−0.83, −0.29]; P = 16:
    −0.18); per seed −0.865, −0.801, −0.803, −0.662; no seed at the floor before n̂_P; q = 1
    learns 27-29 of 32 tasks; d·overlap² of the later tasks 14-23 before task 2 is recovered
    in the q = 2 run; envelope ≤ 0.736 of the stable loss over [n̂_1, n̂_P/10] (1509 s as
    this test at nice 19 beside a CI run, load average 2-4).

    Asserted: the P = 32 gap's mean lies above the P = 8 interval's upper end (−0.065 against
    −0.291) and within 0.1 of the law (|−0.065|: margin 0.035, four seeds); no seed collapses
    to the floor; the small tasks are not frozen (≥ 6); the envelope ≤ 0.8 of the stable loss.
    Verdict (docs/claims.md §5.1): the gap keeps closing with P; at P = 32 the envelope
    follows the finite-P law."""
    from joblib import Parallel, delayed

    from scripts.claims_trends import budget_tuned_seed, envelope_slopes

    rows32 = Parallel(n_jobs=2)(delayed(budget_tuned_seed)(32, 32, seed, 9_200_000)
                                for seed in range(4))
    rows8 = [budget_tuned_seed(8, 24, seed, 1_200_000) for seed in range(8)]
    res = {P: [{**r, **envelope_slopes(r)} for r in rs] for P, rs in ((8, rows8), (32, rows32))}
    gap = {P: _bootstrap_mean(np.array([r["slope"] - r["law"] for r in rs]))
           for P, rs in res.items()}
    brief = [(r["collapsed"], round(r["max_ratio_early"], 3), round(r["frozen"], 1),
              r["q1_recovered"]) for r in res[32]]
    print("measured - law:", gap, "P = 32 (collapsed, ratio, frozen, q1):", brief)
    assert gap[32][0] > gap[8][2], gap
    assert abs(gap[32][0]) <= 0.1, gap
    assert not any(r["collapsed"] for r in res[32]), brief
    assert all(r["frozen"] >= 6.0 and r["max_ratio_early"] <= 0.8 for r in res[32]), brief


def test_grokking_tau_half_at_seed_1_has_no_flip(tmp_path: Path) -> None:
    """The τ = 0.5 column of the five-seed and the held-step tests at seed 1
    (jobs/grokking-tau-reduced.toml with -g tau=0.5 -g seed=1: 92 s and 24 s;
    jobs/grokking-tau-stable-step.toml with -g seed=1: 280 s and 76 s for α = 1 and 10,
    --jobs 1 at nice 19, load average 3-6;
    669 s as this test with --jobs 2 at nice 19, load average 4-6).
    Measured steps to 99% validation accuracy:

    * the paper's step (lr/τ² = 4e-3): α = 1 at 1800, α = 10 at 600;
    * the step held at τ = 1's (lr/τ² = 1e-3): α = 1 at 8650, α = 10 at 2400.

    So at seed 1 there is no flip to explain: α = 10 groks first on either step, and with the
    step held α = 1 does grok within the budget (seed 0: censored). Asserted: in both
    conventions both cells grok and α = 10 needs ≤ 0.5 of α = 1's steps (0.33 and 0.28).
    Verdict (docs/claims.md §11): the τ = 0.5 flip of seed 0 is not seen at seed 1 (nor at
    seeds 2-4: test_grokking_tau_axis_over_five_seeds)."""
    pytest.importorskip("torch")
    val = {}
    for name, extra in (("paper", ["-g", "tau=0.5"]), ("held", [])):
        job = "grokking-tau-reduced" if name == "paper" else "grokking-tau-stable-step"
        out = tmp_path / f"{name}.h5"
        res = run_process("sweep", "-c", ROOT / "jobs" / f"{job}.toml", *extra, "-g", "seed=1",
                          "-o", out, "--jobs", "2", "-q", timeout=7200)
        assert res.code == 0, res.err
        with xr.open_dataset(out, engine="h5netcdf") as ds:
            assert int(ds.status.values.max()) == 0
            assert int(ds.censored_val.values.max()) == 0, name
            val[name] = {a: float(ds.steps_to_val.sel(alpha=a).squeeze())
                         for a in (1.0, 10.0)}
    print("steps to val at seed 1:", val)
    for name, v in val.items():
        assert v[10.0] <= 0.5 * v[1.0], (name, val)
