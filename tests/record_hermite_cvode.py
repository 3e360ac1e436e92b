"""Record the hermite flow's outputs by CVODE and RK45+CVODE on a few cases into
``tests/data/hermite_cvode.npz``.

The file is the stored reference of the stiff-aware methods
(``tests/models/hermite/test_hermite_cvode_reference.py``): recovery times, counts and records,
keyed ``case/variable``, with the fingerprint of the machine that computed them beside it
(``tests/machine_kind.py``) and the scikit-sundae version that integrated them (``solver``).
The contract examples and ``hermite_flow.npz`` pin RK45; these cases pin the methods that
call SUNDIALS, whose arithmetic moves with its build.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.record_hermite_cvode [OUT.npz]``
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import model as H
from tests.machine_kind import write_fingerprint

OUT = Path(__file__).parent / "data" / "hermite_cvode.npz"
VARIABLES = ("t_recover", "nfev", "njev", "t_stop", "winner", "status", "loss", "overlap",
             "norm")
SWITCHED_VARIABLES = ("nlin", "switches", "t_stiff")
"""Recorded by RK45+CVODE only: its linearisations, hand-overs and time under CVODE."""
PLATEAU = dict(d=16, P=4, m=6, k=4, beta=0.8, sigma0=0.05, decades=3.0, n_records=30, seed=0)
"""Learns three of its four teachers by t = 11, then sits on its plateau (stiff)."""
CASES: dict[str, dict[str, Any]] = {
    "cvode_plateau": {**PLATEAU, "t_max": 100.0, "method": "CVODE"},
    "switched_plateau": {**PLATEAU, "t_max": 350.0, "method": "RK45+CVODE"},
    "switched_escapes": dict(d=64, P=16, m=16, k=4, beta=0.8, sigma0=0.01, t_max=2000.0,
                             decades=3.0, n_records=40, seed=2, method="RK45+CVODE"),
}
"""Each case: one configuration's values. ``switched_escapes`` hands over to CVODE on its
first plateau and back to RK45 for the late escapes (t ≈ 858 and 1,893): five hand-overs."""


def solver() -> str:
    """The binding (and the SUNDIALS it bundles) that integrated the reference."""
    return f"scikit-sundae {version('scikit-sundae')}"


def outputs() -> dict[str, np.ndarray]:
    """Every case's recorded variables (``case/variable``)."""
    arrays: dict[str, np.ndarray] = {}
    for name, values in CASES.items():
        ds = H.Hermite().solve(Batch.from_points(H.Hermite,
                                                 [H.Hermite.resolve("solve", values)]))
        extra = SWITCHED_VARIABLES if values["method"] == H.SWITCHED else ()
        for var in (*VARIABLES, *extra):
            arrays[f"{name}/{var}"] = np.asarray(ds[var].values)
    return arrays


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    arrays = outputs()
    np.savez_compressed(out, **{"solver": np.array(solver()), **arrays})
    write_fingerprint(out)
    print(f"{len(arrays)} arrays -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
