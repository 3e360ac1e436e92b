"""The batched Runge–Kutta solvers (richlazy_cli/numerics/solvers/runge_kutta.py) against SciPy's,
which integrate one state with the same tableau and step control (docs/engine.md, "Solvers")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from richlazy_cli.numerics.solvers.runge_kutta import TABLEAUS, BatchedRungeKutta

torch = pytest.importorskip("torch")

RATES = np.array([0.5, 2.0, 7.0])
"""ẏ = −k y ⊙ (1 + y²): a nonlinear decay, one rate per configuration (B = 3, N = 2)."""


def fun(y: Any, idx: np.ndarray) -> Any:
    k = torch.as_tensor(RATES[idx], dtype=y.dtype)[:, None]
    return -k * y * (1.0 + y * y)


@pytest.mark.parametrize("method", sorted(TABLEAUS))
def test_each_configuration_takes_scipys_steps(method: str) -> None:
    y0 = np.array([[1.0, -0.5]] * 3)
    rtol, atol = 1e-6, np.full(3, 1e-9)
    solver = BatchedRungeKutta(torch, fun, torch.as_tensor(y0), 3.0, rtol, atol,
                               tableau=TABLEAUS[method])
    while solver.running.any():
        solver.step()
    assert not solver.failed.any()
    nfev = solver.nfev.numpy()
    for b, k in enumerate(RATES):
        ref = solve_ivp(lambda t, y, k=k: -k * y * (1.0 + y * y), (0.0, 3.0), y0[b],
                        method=method, rtol=rtol, atol=atol[b])
        assert nfev[b] == ref.nfev, (method, b)
        np.testing.assert_allclose(solver.y[b].numpy(), ref.y[:, -1], rtol=1e-12, atol=1e-15)


def test_the_dense_output_interpolates_the_last_step() -> None:
    y0 = torch.as_tensor(np.array([[1.0, -0.5]] * 3))
    solver = BatchedRungeKutta(torch, fun, y0, 0.5, 1e-8, np.full(3, 1e-12))
    solver.step()
    b = 0
    ends = solver.dense(b, np.array([solver.t_old[b].item(), solver.t[b].item()]))
    np.testing.assert_allclose(ends[0].numpy(), solver.y_start[solver.slot, b].numpy(),
                               rtol=1e-14)
    np.testing.assert_allclose(ends[1].numpy(), solver.y[b].numpy(), rtol=1e-12)


def test_a_window_keeps_each_accepted_steps_dense_output() -> None:
    """With ``window = W`` the dense output of each of the last W attempts stays available:
    evaluated afterwards it equals the one evaluated right after the step."""
    y0 = torch.as_tensor(np.array([[1.0, -0.5]] * 3))
    solver = BatchedRungeKutta(torch, fun, y0, 3.0, 1e-6, np.full(3, 1e-9), window=4)
    right_after = []
    for _ in range(4):
        acc = solver.step().numpy()
        t0, t1 = solver.t_start[solver.slot].numpy(), solver.t_end[solver.slot].numpy()
        right_after.append([solver.dense(b, np.array([0.5 * (t0[b] + t1[b])])) if acc[b]
                            else None for b in range(3)])
    for w, row in enumerate(right_after):
        for b, state in enumerate(row):
            if state is not None:
                later = solver.dense(b, np.array([0.5 * (solver.t_start[w, b].item()
                                                         + solver.t_end[w, b].item())]), w)
                assert torch.equal(later, state)


def test_a_step_reads_nothing_back_to_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    y0 = torch.as_tensor(np.array([[1.0, -0.5]] * 3))
    solver = BatchedRungeKutta(torch, fun, y0, 3.0, 1e-6, np.full(3, 1e-9))
    calls = []
    for name in ("cpu", "item", "tolist", "numpy", "__bool__", "__float__", "__int__"):
        method = getattr(torch.Tensor, name)

        def counted(self: Any, *args: Any, _m: Any = method, _n: str = name,
                    **kwargs: Any) -> Any:
            calls.append(_n)
            return _m(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    for _ in range(20):
        solver.step()
    assert calls == []
