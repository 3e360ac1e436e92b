"""The practice figures of ``richlazy report`` (docs/rhm.md §6, docs/cnn.md §5–6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("torch")

from richlazy_cli.report.rhm_cnn import spearman, threshold_fraction


def test_threshold_fraction_interpolates_in_log_fraction() -> None:
    f = np.array([0.01, 0.1, 1.0])
    assert threshold_fraction(f, np.array([0.1, 0.3, 0.7])) == pytest.approx(
        math.exp(math.log(0.1) + 0.5 * (math.log(1.0) - math.log(0.1))))
    assert threshold_fraction(f, np.array([0.6, 0.8, 0.9])) == 0.01
    assert math.isnan(threshold_fraction(f, np.array([0.1, 0.2, 0.3])))
    assert spearman(np.arange(5.0), np.arange(5.0) ** 3) == pytest.approx(1.0)


def test_auto_report_draws_the_practice_figures(tmp_path: Path, cli) -> None:
    rhm = tmp_path / "rhm.h5"
    cnn = tmp_path / "cnn.h5"
    r = cli("sweep", "train", "rhm", "-g", "alpha=0.1,10", "-g", "train_fraction=0.1,0.5",
            "-g", "seed=0,1", "-p", "L=2", "-p", "width=16", "-p", "epochs=3",
            "-p", "test_size=100", "-p", "n_records=3", "-o", rhm, "--jobs", "1", "-q")
    assert r.code == 0, r.err
    r = cli("sweep", "train", "cnn", "-g", "alpha=0.1,10", "-p", "epochs=2",
            "-p", "first_steps=2", "-p", "probe_fraction=0.02", "-o", cnn, "--jobs", "1", "-q")
    assert r.code == 0, r.err
    out = tmp_path / "report"
    r = cli("report", rhm, cnn, "-o", out, "-q", "--var", "final_test_acc",
            "--var", "kernel_distance")  # fewer generic figures: the practice ones are drawn
    assert r.code == 0, r.err
    summary = json.loads((out / "summary.json").read_text())
    practice = [f for f in summary["figures"] if f["kind"] == "practice"]
    files = sorted(f["file"] for f in practice)
    assert files == sorted([
        "rhm-practice-accuracy.png", "cnn-practice-kernel_distance.png",
        "cnn-practice-hamming_distance.png", "cnn-practice-param_distance.png",
        "cnn-practice-kernel-vs-hamming.png"])
    for f in files:
        assert (out / f).stat().st_size > 1000
    acc = next(f for f in practice if f["var"] == "final_test_acc")
    assert set(acc["f_star"]) == {"α = 0.1", "α = 10"}
    scatter = next(f for f in practice if f["file"].endswith("kernel-vs-hamming.png"))
    # the figure's ρ is Spearman's ρ of the file's (S, H) pairs, computed independently here
    from scipy.stats import spearmanr

    with xr.open_dataset(cnn, engine="h5netcdf") as ds:
        S = ds["kernel_distance"]
        s, h = S.values.ravel(), ds["hamming_distance"].transpose(*S.dims).values.ravel()
    ok = np.isfinite(s) & np.isfinite(h)
    assert scatter["spearman"] == pytest.approx(spearmanr(s[ok], h[ok]).statistic, abs=1e-9)
    assert "practice-accuracy" in (out / "index.html").read_text()
