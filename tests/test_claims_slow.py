"""The long versions of claims-tier checks (marker ``slow``; docs/claims.md): the same
measurement as in tests/test_claims.py, over more sizes or seeds."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.conftest import run_process
from tests.test_claims import _bootstrap_mean, heavy_time_law

ROOT = Path(__file__).resolve().parents[1]

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
    """The thin threshold of tests/test_practice_slow.py (f*(1)/f*(10) ≥ 1.1, measured 1.16
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
    from richlazy_cli.report.practice import threshold_fraction

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


def test_grokking_tau_axis_on_the_reduced_protocol(tmp_path: Path) -> None:
    """Fig. 12's τ axis on the CPU-sized protocol (jobs/grokking-tau-reduced.toml: p = 23,
    d_model = 64, lr 1e-3/τ², τ = 0.5 and 1.5 at α = 1 and 10, seed 0; 1199 s with --jobs 1
    at load average 8-10). Measured steps to 99% validation accuracy (τ = 1 from
    jobs/grokking-reduced.toml, seed 0: 6350 at α = 1, 2550 at α = 10):

    * τ = 0.5: α = 1 at 1500 (the fastest of the six cells); α = 10 never within 10,000
      steps: validation accuracy reaches 0.78 by step 900 and then hovers at 0.6-0.94 while
      the training accuracy spikes down to 0.85 (the step lr/τ² = 4e-3 is unstable there);
    * τ = 1.5: α = 1 never (0.47 at 10,000 steps); α = 10 at 4000.

    Asserted as measured, because the paper's "fastest in an unbalanced rich cell (α ≥ 3)"
    does not hold on this grid at seed 0 (docs/claims.md §11): the α = 10 cell at τ = 1.5 is
    faster than α = 1 (censored counted as the budget), but at τ = 0.5 α = 1 groks within
    2000 steps and α = 10 is censored. One seed: a verdict about this protocol only."""
    pytest.importorskip("torch")
    out = tmp_path / "tau.h5"
    res = run_process("sweep", "-c", ROOT / "jobs" / "grokking-tau-reduced.toml", "-o", out,
                      "--jobs", "2", "-q", timeout=7200)
    assert res.code == 0, res.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert int(ds.status.values.max()) == 0
        val = ds.steps_to_val.isel(seed=0).fillna(10_000.0)
        cens = ds.censored_val.isel(seed=0)
        assert float(val.sel(tau=1.5, alpha=10.0)) <= 0.7 * float(val.sel(tau=1.5, alpha=1.0))
        assert float(val.sel(tau=0.5, alpha=1.0)) <= 2000
        assert int(cens.sel(tau=0.5, alpha=10.0)) == 1


def test_cnn_downstream_kernel_moves_less_from_ten_seeds(tmp_path: Path) -> None:
    """The thin threshold of tests/test_practice_slow.py (S(0.1) ≤ 0.8 S(1) at 500 epochs,
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


def greedy_recovered_per_seed(d: int, seeds: range) -> np.ndarray:
    """scripts/claims_trends.py ren-width's narrow runs (P = 32, β = 0.8, σ0 = 1e-2,
    t_max = 30 d, early_stop, m = 4, 8, 16): per seed, the fraction of the greedy rule's tasks
    that are recovered, averaged over the three widths."""
    from tests.test_claims import run

    out = []
    for seed in seeds:
        fr = []
        for m in (4, 8, 16):
            ds = run("solve", d=d, P=32, m=m, beta=0.8, seed=seed, t_max=30.0 * d,
                     checkpoints=200, early_stop=True)
            t_rec, t_th = ds["t_recover"].values, ds["t_recover_theory"].values
            fr.append(float(np.mean(np.isfinite(t_rec[np.isfinite(t_th)]))))
        out.append(float(np.mean(fr)))
    return np.array(out)


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
