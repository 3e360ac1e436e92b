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
    Implementation("numpy", "the reference", ("train",), reference=True),
    Implementation("torch", "the same sums in torch", ("train",), devices=("cpu", "cuda"),
                   requires=("torch",), tolerance=1e-12),
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

    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        v = batch.values
        lr = batch.column("lr").astype(np.float64)
        x0 = np.stack([rng(v["seed"], "start").standard_normal(v["dim"])] * batch.size)
        attrs: dict[str, str] = {}
        if v["implementation"] == "torch":
            device = compute.resolve_device(v["device"])
            with compute.session() as torch:
                dt = compute.torch_dtype(v["dtype"])
                x = torch.as_tensor(x0, dtype=dt, device=device)
                step = torch.as_tensor(lr[:, None], dtype=dt, device=device)
                loss = [0.5 * (x * x).sum(dim=1).double().cpu().numpy()]
                for _ in range(v["steps"]):
                    x = x - step * x
                    loss.append(0.5 * (x * x).sum(dim=1).double().cpu().numpy())
            attrs = compute.provenance(device)
        else:
            x = x0.astype(v["dtype"])
            loss = [0.5 * (x * x).sum(axis=1).astype(np.float64)]
            for _ in range(v["steps"]):
                x = x - lr[:, None].astype(v["dtype"]) * x
                loss.append(0.5 * (x * x).sum(axis=1).astype(np.float64))
        data = {"loss": var(("point", "step"), np.stack(loss, axis=1), "½‖x − target‖²")}
        coords = {"step": var(("step",), np.arange(v["steps"] + 1), "step", "steps")}
        return xr.Dataset(data, coords=coords, attrs=attrs)
