"""The hermite torch flow with its step-size control on the device (docs/performance.md,
"Hermite on a GPU"): the steps, recovery times and evaluation counts of the stored reference,
the same steps as a control that computes its step factor on the host, and one host
synchronisation per window of attempts instead of several per attempt.

``tests/data/hermite_flow.npz`` holds the outputs of :data:`tests.record_hermite_flow.CASES`,
with the fingerprint of the machine that computed them (``tests/machine_kind.py``): on a
machine of that kind every bit must be the same; on another, the steps, winners and status
must be equal and the rest within :func:`assert_unchanged_up_to_rounding`'s tolerances.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ... import record_hermite_flow as R
from ...machine_kind import differences

torch = pytest.importorskip("torch")
from richlazy_cli.models.hermite import _torch as HT  # noqa: E402
from richlazy_cli.models.hermite._flow import HermiteFlowProblem  # noqa: E402
from richlazy_cli.numerics.solvers.runge_kutta import BatchedRK45  # noqa: E402

EXACT = ("nfev", "winner", "status")
"""Recorded variables that must be equal (the steps taken, the recovering neurons)."""


class HostPowerRK45(BatchedRK45):
    """The device-side control with the step factor ``err^(-1/5)`` computed on the host by
    NumPy's vectorised power, which differs from torch's (the C library's, SciPy's scalar
    rule) in the last bit on some CPUs."""

    def power(self, err: Any) -> Any:
        with np.errstate(divide="ignore"):
            host = err.cpu().numpy() ** self.error_exponent
        return torch.as_tensor(host, dtype=err.dtype, device=err.device)


@pytest.fixture(scope="module")
def before() -> dict[str, np.ndarray]:
    with np.load(R.OUT) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture(scope="module")
def now() -> dict[str, np.ndarray]:
    return R.outputs()


@pytest.mark.integration
def test_on_the_references_kind_of_machine_every_output_keeps_its_bits(before: dict,
                                                                       now: dict) -> None:
    other = differences(R.OUT)
    if other:
        pytest.skip(f"the reference was recorded on another kind of machine ({other[0]}; "
                    f"{len(other)} differences)")
    assert set(now) == set(before)
    changed = [k for k in before if before[k].tobytes() != now[k].tobytes()]
    assert not changed, changed


def test_t_recover_and_evaluation_counts_are_unchanged(before: dict, now: dict) -> None:
    """Any machine: measured within 1.7e-11 (t_stop) and 2.7e-11 (records) of the scale
    between processors and step-factor rules (``tests/data/reference_spread.json``)."""
    assert set(now) == set(before)
    assert_unchanged_up_to_rounding(before, now)


@pytest.mark.integration
def test_the_window_of_attempts_changes_no_bit(now: dict,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Synchronising with the host after every attempt instead of every window gives the same
    bits (docs/engine.md, "Solvers": changing ``window`` changes no result)."""
    monkeypatch.setattr(HT, "SYNC_EVERY", 1)
    every_attempt = R.outputs()
    changed = [k for k in now if now[k].tobytes() != every_attempt[k].tobytes()]
    assert not changed, changed


@pytest.mark.integration
def test_the_hosts_step_factor_takes_the_same_steps(now: dict,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """NumPy's vectorised power on the host, for torch's on the device: the same steps and
    recovering neurons, the rest within rounding."""
    monkeypatch.setattr(HT, "BatchedRK45", HostPowerRK45)
    assert_unchanged_up_to_rounding(now, R.outputs())


def assert_unchanged_up_to_rounding(before: dict[str, np.ndarray],
                                    now: dict[str, np.ndarray]) -> None:
    for key in before:
        old, new = before[key], now[key]
        if key.rsplit("/", 1)[1] in EXACT:
            assert np.array_equal(new, old), key
        elif key.endswith("/t_recover"):  # measured: within 5e-14 relative
            np.testing.assert_allclose(new, old, rtol=1e-12, atol=0.0, err_msg=key)
        elif key.endswith("/t_stop"):  # measured: 1.7e-11 relative after ~1000 steps
            np.testing.assert_allclose(new, old, rtol=1e-10, atol=0.0, err_msg=key)
        else:  # records: measured within 2.4e-11
            np.testing.assert_allclose(new, old, rtol=0.0, atol=1e-10, err_msg=key)


SYNCING = ("cpu", "item", "tolist", "__bool__", "__float__", "__int__", "__index__")
"""torch.Tensor methods that bring a value to the host (a synchronisation on a GPU)."""


def count_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every call of a :data:`SYNCING` method from now on."""
    calls = [0]
    for name in SYNCING:
        method = getattr(torch.Tensor, name)

        def counted(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            calls[0] += 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def flow(sync_every: int) -> dict[str, np.ndarray]:
    """A long flow with few records: 2 output times, one teacher."""
    from richlazy_cli.models.hermite import model as H
    from richlazy_cli.numerics.compute import session

    m, d, P = 3, 6, 1
    U0 = H.initial_directions(0, m, d)
    c = H.hermite_coeffs(4, None)
    problem = HermiteFlowProblem(
        V0=0.05 * U0[None], a=H.teacher_weights(P, 1.0)[None], c=c,
        times=np.array([0.0, 400.0]), method="RK45", rtol=1e-9, atol=np.array([1e-13]),
        recovery=H.RECOVERY, r_floor=H._R_FLOOR)
    with session():
        return HT.integrate_flow(problem, "cpu", sync_every=sync_every)


@pytest.mark.integration
def test_host_synchronisations_fall_by_the_cadence(monkeypatch: pytest.MonkeyPatch) -> None:
    K = 16
    calls = count_syncs(monkeypatch)
    every = flow(1)
    per_step = calls[0]
    calls[0] = 0
    windowed = flow(K)
    per_window = calls[0]
    assert np.array_equal(windowed["nfev"], every["nfev"])
    assert np.array_equal(windowed["t_recover"], every["t_recover"])
    attempts = (int(every["nfev"][0]) - 2) // 6  # 2 evaluations choose the first step
    assert attempts > 200
    assert per_step >= attempts  # at least one per attempt when synchronised every step
    others = per_step - attempts  # set-up, records, recovery-time search: the same in both
    assert per_window <= others + attempts / K + 2, (per_step, per_window, attempts)
    print(f"host syncs: {per_step} (K = 1), {per_window} (K = {K}), {attempts} attempts")


def test_one_batch_on_the_device_path_takes_each_configurations_own_steps() -> None:
    """The GPU path (the whole batch as one computation) run on the CPU: configurations that
    stop early (early stop) or late are carried along masked, and each takes the steps and
    evaluations it takes alone."""
    from richlazy_cli.models.hermite import model as H
    from richlazy_cli.numerics.compute import session

    m, d, P = 4, 16, 4
    U0 = H.initial_directions(2, m, d)
    c = H.hermite_coeffs(4, None)
    sigma0 = np.array([0.02, 0.05, 0.2])
    a = np.stack([H.teacher_weights(P, beta) for beta in (0.5, 1.0, 1.5)])
    rec = np.isfinite(np.stack([H.greedy_recovery_times(U0[:, :P], a[b], c) for b in range(3)]))
    times = H.log_times(2000.0, 30, 4.0)
    atol = 1e-3 * 1e-7 * sigma0 / np.sqrt(d)
    problem = HermiteFlowProblem(
        V0=sigma0[:, None, None] * U0[None], a=a, c=c, times=times, method="RK45", rtol=1e-7,
        atol=atol, recovery=H.RECOVERY, r_floor=H._R_FLOOR, early_stop=True, recoverable=rec,
        settle_tol=H.SETTLE_TOL)
    with session():
        alone = HT.integrate_flow(problem, "cpu")
        batch = HT._integrate(torch, problem, "cpu", 5)
    assert len(set(alone["nfev"].tolist())) == 3  # they end at different steps
    for key in ("nfev", "winner", "status"):
        assert np.array_equal(batch[key], alone[key]), key
    for key in ("t_recover", "t_stop", "loss", "overlap"):
        np.testing.assert_allclose(batch[key], alone[key], rtol=1e-9, atol=1e-12, err_msg=key)
