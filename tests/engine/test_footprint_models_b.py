"""The declared bytes of the hermite and grokking models' outputs (``Model.output_bytes``,
docs/engine.md) equal those of a real one-point run, for configurations other than the
models' examples: other output times, dimensions, widths, evaluation counts, with the flags
that change the outputs (save_params, early stops) on and off, and runs that do stop early."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.models.base import Batch, Model
from richlazy_cli.models.hermite.model import Hermite


def run_one(model: type[Model], action: str, params: dict[str, Any]) -> tuple[float, xr.Dataset]:
    """The declared bytes of one configuration, and its result."""
    values = model.resolve(action, params)
    declared = model.footprint(action, values).output_bytes
    assert declared is not None, (model.name, action, params)
    return declared, model().run(action, Batch.from_points(model, [values]))


def actual_bytes(data: xr.Dataset) -> int:
    data = data.drop_vars("status", errors="ignore")  # the engine's, not the model's
    return sum(int(item.nbytes) for item in data.data_vars.values())


SOLVE = dict(d=6, P=2, m=3, t_max=20.0, n_records=7, sigma0=0.05)
TRAIN = dict(d=6, P=2, m=3, steps=120, n_records=9, batch=2)


@pytest.mark.parametrize("params", [
    SOLVE,
    {**SOLVE, "n_records": 1, "decades": 1.0},
    {**SOLVE, "d": 9, "P": 5, "m": 2, "save_params": True},
    {**SOLVE, "m": 5, "method": "DOP853", "save_params": True, "n_records": 23},
    {**SOLVE, "method": "BDF", "beta": 1.5},
    {**SOLVE, "sigma_coeffs": [0.1, 0, 0, 0, float(np.sqrt(0.99))], "seed": 3},
])
def test_hermite_solve_declares_its_bytes(params: dict[str, Any]) -> None:
    declared, data = run_one(Hermite, "solve", params)
    assert declared == actual_bytes(data)


def test_hermite_solve_declares_its_bytes_when_it_stops_early() -> None:
    """One teacher, learned early: the flow stops well before t_max and the output times
    after the stop hold its state (so the declared size does not depend on the stop)."""
    params = dict(d=4, P=1, m=2, sigma0=0.3, t_max=2000.0, n_records=12, early_stop=True,
                  save_params=True)
    declared, data = run_one(Hermite, "solve", params)
    assert float(data["t_stop"][0]) < params["t_max"]  # it did stop early
    assert declared == actual_bytes(data)


@pytest.mark.parametrize("params", [
    TRAIN,
    {**TRAIN, "steps": 1, "n_records": 1},
    {**TRAIN, "steps": 7, "n_records": 40},  # fewer distinct steps than checkpoints
    {**TRAIN, "d": 8, "P": 4, "m": 6, "save_params": True, "lr": 0.01},
    {**TRAIN, "implementation": "numpy", "save_params": True, "n_records": 4},
])
def test_hermite_train_declares_its_bytes(params: dict[str, Any]) -> None:
    declared, data = run_one(Hermite, "train", params)
    assert declared == actual_bytes(data)


def test_hermite_train_declares_its_bytes_when_it_stops_or_diverges() -> None:
    stopped = dict(d=4, P=1, m=2, sigma0=0.3, lr=0.05, steps=5000, n_records=30,
                   stop_on_recovery=True, save_params=True)
    declared, data = run_one(Hermite, "train", stopped)
    assert int(data["steps_run"][0]) < stopped["steps"]  # it did stop early
    assert declared == actual_bytes(data)
    diverged = dict(d=4, P=2, m=3, sigma0=3.0, lr=50.0, steps=400, n_records=20)
    with np.errstate(over="ignore", invalid="ignore"):
        declared, data = run_one(Hermite, "train", diverged)
    assert int(data["status"][0]) != 0  # it did diverge
    assert declared == actual_bytes(data)


def test_hermite_torch_backend_declares_its_bytes() -> None:
    pytest.importorskip("torch")
    for params in ({**SOLVE, "save_params": True}, {**SOLVE, "m": 4, "n_records": 3}):
        declared, data = run_one(Hermite, "solve", {**params, "implementation": "torch"})
        assert declared == actual_bytes(data)


GROK = dict(p=5, d_model=4, n_heads=1, steps=6, batch=4)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("params", [
    GROK,  # once per epoch: 12 training pairs in batches of 4
    {**GROK, "eval_every": 4},  # the last step is evaluated too
    {**GROK, "eval_every": 1, "steps": 3},
    {**GROK, "eval_every": 50},  # steps 0 and the last only
    {**GROK, "batch": 100, "train_fraction": 0.9},  # batch capped at ⌈N/2⌉: 2 per epoch
    {**GROK, "op": "x/y", "train_fraction": 0.3},
    {**GROK, "p": 7, "d_model": 6, "n_heads": 2, "n_layers": 2, "op": "x*y", "steps": 5},
])
def test_grokking_declares_its_bytes(params: dict[str, Any]) -> None:
    from richlazy_cli.models.grokking.model import Grokking

    declared, data = run_one(Grokking, "train", params)
    assert declared == actual_bytes(data)


@pytest.mark.usefixtures("one_torch_thread")
def test_grokking_declares_its_bytes_when_it_stops_early() -> None:
    """A threshold every run reaches at once: training stops at step 0 and the later
    evaluations are NaN, not dropped."""
    from richlazy_cli.models.grokking.model import Grokking

    params = {**GROK, "eval_every": 2, "early_stop": True, "threshold": 1e-9}
    declared, data = run_one(Grokking, "train", params)
    assert np.isnan(data["train_acc"].values[0, 1:]).all()  # it did stop early
    assert declared == actual_bytes(data)
