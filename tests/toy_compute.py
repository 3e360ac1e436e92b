"""A toy family with a NumPy reference and a torch implementation: all it declares is its
table, and the contract suite (tests/models/test_contract.py) runs it over the whole matrix of
implementations, devices and dtypes (docs/engine.md, "Implementations and devices")."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import xarray as xr

from richlazy_cli.models.base import Batch, Model, Progress, register, rng, var
from richlazy_cli.numerics import compute
from richlazy_cli.numerics.compute import Implementation
from richlazy_cli.params import Param

TABLE = (
    Implementation("numpy", "the reference", ("train",), reference=True, run="_train_numpy"),
    Implementation("torch", "the same sums in torch", ("train",), devices=("cpu", "cuda"),
                   requires=("torch",), tolerance=1e-12, run="_train_torch"),
)


@register
class ToyCompute(Model):
    """Gradient descent on ½‖x − target‖² from a random start: x_t = target + (1−lr)^t x₀'."""

    name = "toy-compute"
    summary = "a toy family with a NumPy and a torch implementation (contract tests)"
    actions = ("train",)
    implementations: ClassVar[tuple[Implementation, ...]] = TABLE
    params = (
        Param("lr", "float", 0.1, "step", low=0.0, high=1.0, low_open=True, batchable=True),
        Param("steps", "int", 5, "gradient steps", low=1),
        Param("dim", "int", 3, "dimension", low=1),
        Param("seed", "int", 0, "seed of the start", low=0),
        compute.implementation_param(TABLE),
        compute.device_param(),
        compute.dtype_param("float64"),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": ({"lr": 0.1}, {"lr": 0.5}, {"seed": 1}),
    }

    @staticmethod
    def _start(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """The steps (B,) and the random start x₀ (B, dim) of every configuration."""
        v = batch.values
        lr = batch.column("lr").astype(np.float64)
        return lr, np.stack([rng(v["seed"], "start").standard_normal(v["dim"])] * batch.size)

    def _train_numpy(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        v = batch.values
        lr, x0 = self._start(batch)
        x = x0.astype(v["dtype"])
        loss = [0.5 * (x * x).sum(axis=1).astype(np.float64)]
        for _ in range(v["steps"]):
            x = x - lr[:, None].astype(v["dtype"]) * x
            loss.append(0.5 * (x * x).sum(axis=1).astype(np.float64))
        return self._dataset(batch, loss)

    def _train_torch(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        torch, dt, device = placement.torch, placement.dtype, placement.device
        lr, x0 = self._start(batch)
        x = torch.as_tensor(x0, dtype=dt, device=device)
        step = torch.as_tensor(lr[:, None], dtype=dt, device=device)
        loss = [0.5 * (x * x).sum(dim=1).double().cpu().numpy()]
        for _ in range(batch.values["steps"]):
            x = x - step * x
            loss.append(0.5 * (x * x).sum(dim=1).double().cpu().numpy())
        return self._dataset(batch, loss)

    @staticmethod
    def _dataset(batch: Batch, loss: list[np.ndarray]) -> xr.Dataset:
        data = {"loss": var(("point", "step"), np.stack(loss, axis=1), "½‖x − target‖²")}
        coords = {"step": var(("step",), np.arange(batch.values["steps"] + 1), "step",
                              "steps")}
        return xr.Dataset(data, coords=coords)
