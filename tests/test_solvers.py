"""The batched Runge–Kutta solvers (richlazy_cli/solvers/runge_kutta.py) against SciPy's, which
integrate one state with the same tableau and step control (docs/engine.md, "Solvers")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from richlazy_cli.solvers.runge_kutta import TABLEAUS, BatchedRungeKutta

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
    for b, k in enumerate(RATES):
        ref = solve_ivp(lambda t, y, k=k: -k * y * (1.0 + y * y), (0.0, 3.0), y0[b],
                        method=method, rtol=rtol, atol=atol[b])
        assert solver.nfev[b] == ref.nfev, (method, b)
        np.testing.assert_allclose(solver.y[b].numpy(), ref.y[:, -1], rtol=1e-12, atol=1e-15)


def test_the_dense_output_interpolates_the_last_step() -> None:
    y0 = torch.as_tensor(np.array([[1.0, -0.5]] * 3))
    solver = BatchedRungeKutta(torch, fun, y0, 0.5, 1e-8, np.full(3, 1e-12))
    solver.step()
    b = 0
    ends = solver.dense(b, np.array([solver.t_old[b], solver.t[b]]))
    np.testing.assert_allclose(ends[0].numpy(), solver.y_old[b].numpy(), rtol=1e-14)
    np.testing.assert_allclose(ends[1].numpy(), solver.y[b].numpy(), rtol=1e-12)
