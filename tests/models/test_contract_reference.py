"""Every contract example's outputs (and its second implementations', on the CPU) equal the
stored reference: bit for bit on the kind of machine that recorded it, within measured
tolerances on any other.

``tests/data/contract_reference.npz`` is written by ``tests/record_contract.py``, with the
fingerprint of the machine beside it (``contract_reference.machine.json``: CPU, ATen
capability, NumPy's dispatched features, BLAS, numba's target, the versions;
``tests/machine_kind.py``). Where this machine's fingerprint is the same, every output must
keep its bits (docs/engine.md, "Reproducibility"). Anywhere, every output keeps its dtype,
shape and NaN pattern, every integer is exact, and every float is within its family's
:data:`TOLERANCES` of the reference: ``rtol`` of the variable's scale (its largest finite
magnitude) plus ``atol``. The tolerances are about ten times or more the largest difference measured
by ``scripts/reference_spread.py`` (table: ``tests/data/reference_spread.json``) between this
machine's outputs and those of two emulated kinds of machine (AVX2; no vector extension past
SSE4.2) and of the reference recorded earlier on another processor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ..machine_kind import differences, fingerprint
from ..record_contract import OUT as REFERENCE
from ..record_contract import outputs

DEFAULT = (1e-10, 1e-12)
"""(rtol of the scale, atol) for float64 outputs. Measured at most 5.9e-12 of the scale
(linear's kernel distance, avx2 kind; the NumPy, numba and float64 torch paths) and 1.6e-14
absolute for quantities that are rounding noise about zero (single-neuron's ``delta_t`` and
``kkt_residual``, linear's ``delta_drift``)."""
TOLERANCES: dict[str, tuple[float, float]] = {
    "rhm": (1e-8, 1e-12),  # measured 2.2e-10: float64 convolutions summed in another order
    "grokking": (1e-6, 1e-12),  # measured 1.1e-7 (9x): trains in float32 (a rounding of the loss)
}
"""Families whose outputs move more than :data:`DEFAULT` on another kind of machine."""


def tolerance(key: str) -> tuple[float, float]:
    return TOLERANCES.get(key.split("/", 1)[0], DEFAULT)


def differing(before: dict[str, np.ndarray], now: dict[str, np.ndarray]) -> list[str]:
    """The keys whose outputs differ beyond what another kind of machine may give."""
    changed = []
    for key, old in before.items():
        new = now[key]
        if old.dtype != new.dtype or old.shape != new.shape:
            changed.append(key)
        elif old.dtype.kind != "f":
            if not np.array_equal(old, new):
                changed.append(key)
        elif not np.array_equal(np.isnan(old), np.isnan(new)):
            changed.append(key)
        else:
            rtol, atol = tolerance(key)
            finite = np.isfinite(old)
            scale = float(np.max(np.abs(old[finite]))) if finite.any() else 0.0
            if not np.allclose(new, old, rtol=0.0, atol=rtol * scale + atol, equal_nan=True):
                changed.append(key)
    return changed


@pytest.fixture(scope="module")
def before() -> dict[str, np.ndarray]:
    with np.load(REFERENCE) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def now() -> dict[str, np.ndarray]:
    return outputs()


@pytest.mark.integration
def test_every_recorded_output_is_still_computed(before: dict, now: dict) -> None:
    assert set(before) <= set(now), sorted(set(before) - set(now))[:5]


@pytest.mark.integration
def test_outputs_equal_the_reference_within_the_stated_tolerances(before: dict,
                                                                   now: dict) -> None:
    changed = differing(before, now)
    assert not changed, f"{len(changed)} outputs changed, e.g. {changed[:5]}"


def test_on_the_references_kind_of_machine_no_bit_moved(before: dict, now: dict) -> None:
    """The same fingerprint: every output keeps every bit. Another kind of machine: skipped,
    saying what differs (the test above still holds there)."""
    other = differences(REFERENCE)
    if other:
        pytest.skip(f"the reference was recorded on another kind of machine ({other[0]}; "
                    f"{len(other)} differences)")
    moved = [key for key, old in before.items() if old.tobytes() != now[key].tobytes()]
    assert not moved, f"{len(moved)} outputs changed bits on the reference's machine: {moved[:5]}"


def test_the_tolerances_catch_a_change_of_code(before: dict) -> None:
    """The comparison is not vacuous: in every family, one float output changed by ten times
    its family's relative tolerance (1e-9 of the scale for most) is caught."""
    caught = set()
    for key, old in before.items():
        family = key.split("/", 1)[0]
        if old.dtype.kind != "f" or family in caught:
            continue
        finite = np.isfinite(old) & (old != 0)
        if not finite.any() or np.max(np.abs(old[finite])) < 1e-3:
            continue
        new = old.copy()
        i = np.flatnonzero(finite.ravel())[np.argmax(np.abs(old[finite]))]
        new.flat[i] *= 1 + 10 * tolerance(key)[0]
        assert differing({key: old}, {key: new}) == [key]
        caught.add(family)
    assert caught == {"single-neuron", "two-layer", "linear", "diagonal", "hermite", "rhm",
                      "cnn", "grokking"}


@pytest.mark.system
def test_the_fingerprint_tells_another_kind_of_machine_apart() -> None:
    """An emulated machine (torch's kernels chosen for another CPU) has another fingerprint."""
    code = ("import json; from tests.machine_kind import fingerprint; "
            "print(json.dumps(fingerprint()))")
    env_torch = {"ATEN_CPU_CAPABILITY": "default", "NUMBA_CPU_NAME": "generic"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, **env_torch},
                          cwd=REFERENCE.parents[2], timeout=120)
    there = json.loads(proc.stdout)
    here = json.loads(json.dumps(fingerprint()))
    assert there != here
    assert there["numba"]["cpu_name"] == "generic"
