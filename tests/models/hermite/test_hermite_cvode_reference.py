"""The stiff-aware methods' stored reference: CVODE and RK45+CVODE keep their results
(docs/hermite.md, "Integrators").

``tests/data/hermite_cvode.npz`` holds the outputs of :data:`tests.record_hermite_cvode.CASES`,
with the fingerprint of the machine that computed them (``tests/machine_kind.py``) and the
scikit-sundae that integrated them. On a machine of that kind with that scikit-sundae every
bit must be the same. Anywhere, the counts, hand-overs, winners and status must be equal and
the floats within :func:`assert_unchanged_up_to_rounding`'s tolerances, each ten times or
more the largest difference measured on two emulated kinds of machine by
``scripts/reference_spread.py`` (``tests/data/reference_spread.json``). The contract
examples and ``hermite_flow.npz`` pin RK45, so these are the only stored results of the
methods that call SUNDIALS.
"""

from __future__ import annotations

import numpy as np
import pytest

from ... import record_hermite_cvode as R
from ...machine_kind import differences

pytest.importorskip("sksundae")

EXACT = ("nfev", "njev", "nlin", "switches", "winner", "status", "t_stop")
"""Recorded variables that must be equal: the steps taken (measured equal on the emulated
kinds), the recovering neurons, the end of the flow."""


@pytest.fixture(scope="module")
def stored() -> tuple[str, dict[str, np.ndarray]]:
    with np.load(R.OUT) as data:
        return str(data["solver"]), {k: data[k] for k in data.files if k != "solver"}


@pytest.fixture(scope="module")
def now() -> dict[str, np.ndarray]:
    return R.outputs()


def test_on_the_references_kind_of_machine_every_output_keeps_its_bits(
        stored: tuple[str, dict[str, np.ndarray]], now: dict[str, np.ndarray]) -> None:
    solver, before = stored
    other = differences(R.OUT)
    if other or solver != R.solver():
        pytest.skip(f"the reference was recorded on another kind of machine or by another "
                    f"solver ({(other or [solver])[0]})")
    assert set(now) == set(before)
    changed = [k for k in before if before[k].tobytes() != now[k].tobytes()]
    assert not changed, changed


def test_counts_and_recovery_times_are_unchanged(
        stored: tuple[str, dict[str, np.ndarray]], now: dict[str, np.ndarray]) -> None:
    """Any machine: every case recovers its teachers by the same neurons with the same
    counts, its recovery times within 1e-8 relative (measured: 1.1e-9) and its records within
    1e-8 (measured: 1.3e-9 of the overlaps' scale)."""
    before = stored[1]
    assert set(now) == set(before)
    assert_unchanged_up_to_rounding(before, now)


def test_the_cases_cover_a_plateau_hand_over_and_a_switch_back(
        stored: tuple[str, dict[str, np.ndarray]]) -> None:
    """What the reference pins: CVODE alone on a plateau, RK45+CVODE handing over once and
    handing over several times, with teachers recovered under CVODE (after the first
    hand-over)."""
    before = stored[1]
    assert before["cvode_plateau/njev"][0] > 0
    assert before["switched_plateau/switches"][0] == 1
    assert before["switched_escapes/switches"][0] >= 3
    first_hand_over = 2000.0 - before["switched_escapes/t_stiff"][0]
    late = before["switched_escapes/t_recover"][0] > first_hand_over
    assert np.count_nonzero(late) >= 2


def assert_unchanged_up_to_rounding(before: dict[str, np.ndarray],
                                    now: dict[str, np.ndarray]) -> None:
    for key in before:
        old, new = before[key], now[key]
        var = key.rsplit("/", 1)[1]
        if var in EXACT:
            assert np.array_equal(new, old), key
        elif var == "t_recover":  # measured: 1.1e-9 relative
            np.testing.assert_allclose(new, old, rtol=1e-8, atol=0.0, err_msg=key)
        elif var == "t_stiff":  # measured: 8.2e-6 relative (a sum over CVODE's steps)
            np.testing.assert_allclose(new, old, rtol=1e-4, atol=0.0, err_msg=key)
        else:  # records (loss, overlap, norm): measured 1.3e-9 of the scale
            scale = float(np.nanmax(np.abs(old)))
            np.testing.assert_allclose(new, old, rtol=0.0, atol=1e-8 * scale, err_msg=key)
