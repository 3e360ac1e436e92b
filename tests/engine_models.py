"""A cheap model for testing the engine on its own (loaded through RICHLAZY_MODELS).

``toy`` draws a noisy line: y(step) = slope * step + scale * noise(seed), with knobs that make
chosen points fail (``fail_at``), return non-finite values (``nan_at``), sleep (``sleep``, to
catch a sweep mid-flight), burn CPU (``work``, matrix products for the scaling bench) or make
NumPy warn (``warn``). It reports progress half-way and at the end of each call.
``RICHLAZY_TOY_SLEEP`` (seconds per call) slows one process down without changing the sweep's
parameters, so that a later ``--resume`` of the same sweep runs at full speed.
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch, Model, Progress, register, rng, var
from richlazy_cli.params import Param


@register
class Toy(Model):
    name = "toy"
    summary = "noisy lines for engine tests"
    actions = ("solve", "train")
    params = (
        Param("slope", "float", 1.0, "slope of the line", batchable=True),
        Param("scale", "float", 0.1, "noise scale", low=0.0, batchable=True),
        Param("steps", "int", 8, "number of steps", low=1),
        Param("seed", "int", 0, "random seed", low=0),
        Param("offset", "vector", [0.0, 0.0], "offset added to y per output", batchable=True),
        Param("label", "str", "a", "a categorical knob", choices=("a", "b")),
        Param(
            "fail_at",
            "float",
            1e300,
            "raise when slope equals this (only while RICHLAZY_TOY_FAIL=1: a transient fault)",
            batchable=True,
        ),
        Param("nan_at", "float", 1e300, "return NaN when slope equals this", batchable=True),
        Param("sleep", "float", 0.0, "seconds to sleep per call", low=0.0),
        Param("work", "int", 0, "size of matrix products to burn CPU with", low=0),
        Param("warn", "bool", False, "divide by zero once, which NumPy warns about"),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        action: ({"slope": 1.0}, {"slope": 2.0, "scale": 0.2, "offset": [1.0, -1.0]},
                 {"seed": 1, "label": "b"})
        for action in ("solve", "train")
    }

    check_calls = 0  # counted, to test that checks are memoised

    @classmethod
    def check(cls, action: str, values: dict) -> None:
        cls.check_calls += 1
        if np.asarray(values["offset"]).shape != (2,):
            raise BadInput("parameter offset: expected 2 values")

    @classmethod
    def _output_bytes(cls, action: str, values: dict) -> float:
        """y over (step, output) and y_final, float64."""
        return 8.0 * (2 * values["steps"] + 1)

    def _run(self, batch: Batch, progress: Progress | None) -> xr.Dataset:
        slope = batch["slope"]
        if os.environ.get("RICHLAZY_TOY_FAIL") == "1" and np.any(slope == batch["fail_at"]):
            raise RuntimeError("requested failure")
        steps = batch["steps"]
        noise = rng(batch["seed"], "noise").standard_normal(steps)
        y = slope[:, None] * np.arange(steps) + batch["scale"][:, None] * noise
        y = y[:, :, None] + batch["offset"][:, None, :]
        y[slope == batch["nan_at"]] = np.nan
        if batch["warn"]:
            np.ones(1) / np.zeros(1)  # a RuntimeWarning: it must not reach the CLI's stderr
        if progress is not None:
            progress(0.5)
        if batch["sleep"]:
            time.sleep(batch["sleep"])
        time.sleep(float(os.environ.get("RICHLAZY_TOY_SLEEP", "0")))
        if progress is not None:
            progress(1.0)
        if batch["work"]:
            m = rng(0, "work").standard_normal((batch["work"], batch["work"]))
            for _ in range(batch.size):
                for _ in range(20):
                    m = np.tanh(m @ m / batch["work"])
        return xr.Dataset(
            {
                "y": var(("point", "step", "output"), y, "noisy line", "m"),
                "y_final": var(("point",), y[:, -1, 0], "last value of output 0", "m"),
            },
            coords={
                "step": var(("step",), np.arange(steps), "step"),
                "output": var(("output",), np.arange(2), "output index"),
            },
        )

    def solve(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        return self._run(batch, progress)

    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        return self._run(batch, progress)
