"""Results on the CPU equal those recorded before the compute layer was introduced.

``tests/data/contract_before.npz`` holds every contract example's outputs (and its second
implementations', on the CPU), written by ``tests/record_contract.py`` from the code as it was
before the refactoring that introduced ``richlazy_cli/compute.py``. Every value must be
bit-for-bit the same, except the variables of :data:`SHARED_DEFINITION`: there one shared
definition replaced several hand-written ones (the kernel distance, docs/engine.md), and the
values agree within :data:`TOLERANCE` with NaN where there was NaN; and the two-layer torch
examples (:data:`KERNEL_CHANGED`), whose one-configuration products now take the kernel of an
item's own product so that a configuration alone has the bits it has in a batch
(docs/engine.md): within :data:`TOLERANCE` too; and the hermite torch flow
(:data:`STEP_CONTROL_ON_DEVICE`), whose step-size factor ``err^(-1/5)`` is now computed on the
device with the C library's power (SciPy's scalar rule), where the host took NumPy's vectorised
power, which differs in the last bit on some CPUs: within :data:`TOLERANCE` too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .record_contract import outputs

REFERENCE = Path(__file__).parent / "data" / "contract_before.npz"
TOLERANCE = 1e-12
SHARED_DEFINITION: frozenset[str] = frozenset({"kernel_distance"})
"""Variables now computed by one shared function (equal within :data:`TOLERANCE`)."""
KERNEL_CHANGED = "+backend=torch/"
"""Examples whose matrix products changed kernel (equal within :data:`TOLERANCE`)."""
STEP_CONTROL_ON_DEVICE = ("hermite/solve/", "+backend=torch/")
"""The hermite torch flow's examples (prefix, variant): equal within :data:`TOLERANCE`."""


@pytest.fixture(scope="module")
def now() -> dict[str, np.ndarray]:
    return outputs()


def test_every_recorded_output_is_still_computed(now: dict[str, np.ndarray]) -> None:
    before = np.load(REFERENCE)
    assert set(before.files) <= set(now), sorted(set(before.files) - set(now))[:5]


def test_outputs_equal_the_recorded_ones(now: dict[str, np.ndarray]) -> None:
    before = np.load(REFERENCE)
    changed = []
    for key in before.files:
        old, new = before[key], now[key]
        if key.rsplit("/", 1)[1] in SHARED_DEFINITION or (
                key.startswith("two-layer/") and KERNEL_CHANGED in key) or (
                key.startswith(STEP_CONTROL_ON_DEVICE[0])
                and STEP_CONTROL_ON_DEVICE[1] in key):
            same = old.shape == new.shape and bool(
                np.allclose(new, old, rtol=0.0, atol=TOLERANCE, equal_nan=True))
        else:
            same = old.dtype == new.dtype and old.shape == new.shape and (
                old.tobytes() == new.tobytes())
        if not same:
            changed.append(key)
    assert not changed, f"{len(changed)} outputs changed, e.g. {changed[:5]}"
