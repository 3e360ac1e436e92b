"""Record the hermite torch flow's outputs on a few cases into ``tests/data/hermite_flow.npz``.

The file is the reference of ``tests/models/hermite/test_hermite_flow.py``: the flow's recovery
times, evaluation counts and records, keyed ``case/variable``, with the fingerprint of the
machine that computed them beside it (``tests/machine_kind.py``).

Run: ``PYTHONPATH=. .venv/bin/python -m tests.record_hermite_flow [OUT.npz]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import model as H
from tests.machine_kind import write_fingerprint

OUT = Path(__file__).parent / "data" / "hermite_flow.npz"
VARIABLES = ("t_recover", "nfev", "t_stop", "winner", "status", "loss", "overlap", "norm")
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "early_stop": (dict(d=48, P=12, m=6, k=4, beta=0.8, sigma0=0.01, t_max=1000.0,
                        n_records=60, seed=0, early_stop=True), [{}]),
    "batch": (dict(d=12, P=3, m=4, t_max=40.0, n_records=12, save_params=True),
              [{"sigma0": 0.05}, {"sigma0": 0.02, "beta": 1.2}, {"sigma0": 0.1, "beta": 0.3}]),
    "many_checkpoints": (dict(d=16, P=4, m=8, k=6, sigma0=0.3, t_max=300.0, n_records=400,
                              seed=1), [{}]),
}
"""Each case: the common values and the points of one batch (``implementation=torch``)."""


def solve(common: dict[str, Any], points: list[dict[str, Any]], **extra: Any) -> Any:
    values = [H.Hermite.resolve("solve", {**common, **p, "implementation": "torch", **extra})
              for p in points]
    return H.Hermite().solve(Batch.from_points(H.Hermite, values))


def outputs(**extra: Any) -> dict[str, np.ndarray]:
    """Every case's recorded variables (``case/variable``)."""
    arrays: dict[str, np.ndarray] = {}
    for name, (common, points) in CASES.items():
        ds = solve(common, points, **extra)
        for var in (*VARIABLES, *(("v",) if "v" in ds else ())):
            arrays[f"{name}/{var}"] = np.asarray(ds[var].values)
    return arrays


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    arrays = outputs()
    np.savez_compressed(out, **arrays)
    write_fingerprint(out)
    print(f"{len(arrays)} arrays -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
