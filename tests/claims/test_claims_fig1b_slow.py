"""Kunin et al. 2024 Fig. 1b and Fig. 5b at the paper's problem size, d = 100 (marker
``slow``; docs/claims.md): `jobs/fig1b-small.toml` as written (d = 100, h = 50, k = 3,
n = 1000, lr 5e-3/τ², float64; a 9 × 9 (τ, δ) grid, seeds 0-1, 10⁴ steps), about 6 minutes
on a quiet 2 cores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.conftest import run_process

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def assert_fig1b_and_fig5b_orderings(ds: xr.Dataset) -> None:
    """The orderings of Fig. 1b (kernel distance S and test loss) and Fig. 5b (Hamming and
    parameter distance) at the last checkpoint of a `jobs/fig1b-small.toml` result. Frozen
    from its two seeds (0-1); measured:

    * lazy at large τ, rich at small: S ≤ 5.0e-4 at τ = 2 for every δ and seed (asserted
      ≤ 2e-3), S ≥ 0.147 at τ = 0.1 (asserted ≥ 50 × the largest S at τ = 2; measured
      295×), and the seed-mean S falls strictly as τ grows in each of the 9 δ columns;
    * the lowest test loss at small τ on the upstream side: the seed-mean test loss is
      smallest at τ = 0.1, δ = 0 (8.3e-4; δ ≥ 0 lies within 8.3e-4-1.0e-3 there), so its
      argmin is asserted at the smallest τ with δ ≥ 0; at τ = 0.1 the mean over δ > 0 is
      ≤ 0.5 × the mean over δ < 0 (measured 0.40), and test_loss(δ = 1) ≤ 0.8 ×
      test_loss(δ = −1) in each seed (0.61, 0.09);
    * Fig. 5b at τ = 0.1, per seed: Hamming(δ = 1)/Hamming(δ = −1) ≥ 2.5 (measured 4.05,
      4.78) and parameter distance(δ = 1)/(δ = −1) ≤ 0.4 (0.247, 0.175); the seed-mean
      parameter distance falls strictly with δ (3.06 … 0.65)."""
    end = ds.isel(step=-1).transpose("tau", "delta", "seed", ...)
    tau, delta = end["tau"].values, end["delta"].values
    assert tau[0] < tau[-1] and delta[0] < 0 < delta[-1]
    S, TL, H, PD = (end[v].values for v in ("kernel_distance", "test_loss",
                                             "hamming_distance", "param_distance"))
    assert np.all(np.isfinite(S)) and np.all(end["status"].values == 0)
    # Fig. 1b: lazy at large tau, rich at small tau, S falling with tau in every delta column
    assert S[-1].max() <= 2e-3, S[-1]
    assert S[0].min() >= 50 * S[-1].max(), (S[0].min(), S[-1].max())
    Sm = S.mean(axis=2)
    assert np.all(np.diff(Sm, axis=0) < 0), Sm
    # the lowest test loss: at the smallest tau, on the upstream side (delta >= 0)
    TLm = TL.mean(axis=2)
    i, j = np.unravel_index(int(np.argmin(TLm)), TLm.shape)
    assert i == 0 and delta[j] >= 0, (tau[i], delta[j], TLm)
    up, down = delta > 0, delta < 0
    assert TLm[0, up].mean() <= 0.5 * TLm[0, down].mean(), TLm[0]
    assert np.all(TL[0, -1] <= 0.8 * TL[0, 0]), (TL[0, -1], TL[0, 0])
    # Fig. 5b at the smallest tau: upstream moves the activations, downstream the parameters
    assert np.all(H[0, -1] >= 2.5 * H[0, 0]), (H[0, -1], H[0, 0])
    assert np.all(PD[0, -1] <= 0.4 * PD[0, 0]), (PD[0, -1], PD[0, 0])
    assert np.all(np.diff(PD[0].mean(axis=1)) < 0), PD[0].mean(axis=1)


def test_fig1b_and_fig5b_orderings_at_d_100(tmp_path: Path) -> None:
    out = tmp_path / "fig1b-small.h5"
    r = run_process("sweep", "-c", ROOT / "jobs" / "fig1b-small.toml", "-o", out, "-q",
                    timeout=7200)
    assert r.code == 0, r.err
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        assert_fig1b_and_fig5b_orderings(ds.load())
