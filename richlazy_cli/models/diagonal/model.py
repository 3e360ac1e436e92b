"""Diagonal linear networks with untied weights (Azulay et al. 2021, §4 and §7/§9;
docs/diagonal.md).

Model (docs/diagonal.md, eqs. (1)–(3)). ``w = u₊∘v₊ − u₋∘v₋`` and ``f(x) = wᵀx``.
Initialisation is *unbiased and symmetric* (``u₊ = u₋ = u₀``, ``v₊ = v₋ = v₀``, so ``w(0) = 0``)
with scale ``alpha`` and shape ``s`` (docs/diagonal.md, eq. (3)): ``u₀ = √(α(1−s)/(1+s))``,
``v₀ = √(α(1+s)/(1−s))``, so ``α = u₀v₀``, ``s = (v₀ − u₀)/(v₀ + u₀)`` and
``√k = 2(u₀² + v₀²) = 4α(1+s²)/(1−s²)``.

Loss convention (the authors' code; docs/diagonal.md, eq. (1)). Gradients are taken of the *mean*
loss ``L(w) = ‖Xw − y‖²/(2N)``, so ``g = ∇_w L = Xᵀ(Xw − y)/N`` and gradient flow is
``u̇₊ = −g∘v₊, v̇₊ = −g∘u₊, u̇₋ = +g∘v₋, v̇₋ = +g∘u₋``. The reported ``train_loss`` is the train
MSE ``(1/N)‖Xw − y‖²`` (no ½), the quantity the study stops on; ``tol`` refers to it. Times are
gradient-flow times of this mean loss (GD with step ``lr`` after ``n`` steps sits at ``t = n·lr``).

``solve`` integrates the flow *exactly reparametrised* (Theorem 1; docs/diagonal.md,
eqs. (4)–(6)): with ``E, F, k = 16EF, θ = ½ ln(E/F)`` from the initialisation,
``w_i(t) = (√k_i/2) sinh(2ν_i(t) + θ_i)`` with ``ν(t) = −Xᵀ∫₀ᵗ r/N ∈ range(Xᵀ)``. Writing
``ν = Xᵀm`` gives the N-dimensional mirror flow

    ṁ = −(X w(m) − y)/N,   w(m) = (√k/2) sinh(2Xᵀm + θ),   m(0) = 0,

whose Jacobian ``−(2/N) X diag((√k/2) cosh(2Xᵀm + θ)) Xᵀ`` is symmetric negative definite. It is
integrated with LSODA (automatic switching between Adams and stiff BDF; analytic Jacobian), one
configuration at a time (adaptive step sizes are per configuration, so a configuration gives
bitwise the same result alone and inside any batch), until the train MSE falls below ``tol`` (a
terminal event) or the time reaches ``t_max``.

Recording. ``solve`` records ``train_loss`` at ``time`` = 0 and ``n_records`` log-spaced times
from ``t_min`` to ``t_max``; ``train`` at ``step`` = 0 and about ``n_records`` log-spaced steps up
to ``max_steps`` (the older names ``n_time`` and ``n_record`` are aliases). Both grids depend
only on non-batchable parameters; once a configuration has stopped (train MSE below ``tol``)
its later entries hold its final value.

``train`` runs full-batch GD on the raw parameters ``u±, v±`` with step ``lr`` until the train MSE
falls below ``tol`` (or ``max_steps``); configurations are vectorised over the batch for the
elementwise updates, and the two matrix-vector products per step are done row by row so the
summation order never depends on the batch size.

BLAS runs single-threaded inside ``solve``/``train`` (``threadpoolctl``): the matrices are
small (N × d), threads only add synchronisation (and, on a busy machine, slow a 100 × 1000
product down tenfold), parallelism comes from the engine's workers, and one thread makes the
summation order independent of the machine's thread count.

``w_implicit`` is Theorem 1's limit ``argmin_{Xw=y} Σ_i q_{k_i}(w_i) − θ_i w_i/2``, computed from
its dual (docs/diagonal.md, eq. (10)): ``w(μ) = (√k/2) sinh(Xᵀμ + θ)`` with ``Xw(μ) = y``,
found by damped Newton on the convex dual ``D(μ) = Σ_i (√k_i/2) cosh((Xᵀμ)_i + θ_i) − yᵀμ``,
whose Hessian ``X diag((√k/2)cosh(Xᵀμ + θ)) Xᵀ`` is SPD.

``population_error`` is ``‖w − β*‖²``: the test MSE against noiseless labels for
``x ~ N(0, I_d)`` (the study's "population error").

Data (Azulay et al. §9, sizes from the authors' code; docs/diagonal.md): ``X`` with i.i.d. N(0, 1)
entries (N × d), ``β*`` with ``r`` non-zeros equal to ``1/√r`` on a uniformly random support,
``y = Xβ* + ε`` with ``Var ε = noise``; or the user's own ``data`` (.npz holding ``X``, ``y`` and
optionally ``beta_star``). Random streams: ``rng(seed, "support")``, ``rng(seed, "data")``,
``rng(seed, "noise")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from scipy.integrate import solve_ivp
from scipy.linalg import cho_factor, cho_solve
from threadpoolctl import threadpool_limits

from ...errors import BadInput, Status
from ...numerics.records import record_grid
from ...params import Param
from ...userfiles import read_npz
from ..base import Batch, Model, Progress, register, rng, var

__all__ = [
    "DiagonalModel",
    "implicit_interpolator",
    "init_scale_shape",
    "q_delta",
    "q_delta_prime",
    "q_k",
    "q_objective",
    "sqrt_k_symmetric",
    "theorem1_constants",
]

# -- closed forms (docs/diagonal.md) ----------------------------------------------------------


def init_scale_shape(alpha: Any, s: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(|u₀|, |v₀|) = (√(α(1−s)/(1+s)), √(α(1+s)/(1−s)))`` (docs/diagonal.md, eq. (3))."""
    alpha = np.asarray(alpha, dtype=float)
    s = np.asarray(s, dtype=float)
    return np.sqrt(alpha * (1.0 - s) / (1.0 + s)), np.sqrt(alpha * (1.0 + s) / (1.0 - s))


def sqrt_k_symmetric(alpha: Any, s: Any) -> np.ndarray:
    """``√k = 4α(1+s²)/(1−s²)`` for the unbiased symmetric initialisation (docs/diagonal.md,
    eq. (3))."""
    alpha = np.asarray(alpha, dtype=float)
    s = np.asarray(s, dtype=float)
    return 4.0 * alpha * (1.0 + s * s) / (1.0 - s * s)


def theorem1_constants(
    u_plus: Any, v_plus: Any, u_minus: Any, v_minus: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``(k, θ)`` of Theorem 1 (docs/diagonal.md, eq. (4)) from a general initialisation,
    coordinate-wise.

    ``E = ¼[(u₊+v₊)² + (u₋−v₋)²]``, ``F = ¼[(u₊−v₊)² + (u₋+v₋)²]``, ``k = 16EF``,
    ``θ = ½ ln(E/F)``; then ``w(0) = (√k/2) sinh θ``.
    """
    up, vp, um, vm = (np.asarray(a, dtype=float) for a in (u_plus, v_plus, u_minus, v_minus))
    e = 0.25 * ((up + vp) ** 2 + (um - vm) ** 2)
    f = 0.25 * ((up - vp) ** 2 + (um + vm) ** 2)
    return 16.0 * e * f, 0.5 * np.log(e / f)


def q_k(x: Any, k: Any) -> np.ndarray:
    """``q_k(x) = ½∫₀ˣ arcsinh(2z/√k) dz`` in closed form (docs/diagonal.md, eq. (8)).

    ``q_k(x) = (√k/4)[1 − √(1 + a²) + a·arcsinh(a)]`` with ``a = 2x/√k``; ``1 − √(1+a²)`` is
    evaluated as ``−a²/(1 + √(1+a²))`` so small ``a`` loses no digits, and ``np.arcsinh`` is
    stable for large ``a`` (the ``k → 0`` limit needs no separate branch this way).
    """
    x = np.asarray(x, dtype=float)
    rk = np.sqrt(np.asarray(k, dtype=float))
    a = 2.0 * x / rk
    root = np.sqrt(1.0 + a * a)
    return 0.25 * rk * (a * np.arcsinh(a) - a * a / (1.0 + root))


def q_objective(w: Any, k: Any, theta: Any = 0.0) -> np.ndarray:
    """Theorem 1's potential ``Q(w) = Σ_i q_{k_i}(w_i) − θ_i w_i/2`` (sum over the last axis)."""
    w = np.asarray(w, dtype=float)
    return np.sum(q_k(w, k) - 0.5 * np.asarray(theta, dtype=float) * w, axis=-1)


def q_delta(x: Any, delta: float) -> np.ndarray:
    """Azulay Theorem 2's ``q_δ(x)`` for a fully connected single neuron (docs/diagonal.md,
    eq. (11)).

    ``q_δ(x) = (x² − (δ/2)(δ/2 + √(x² + δ²/4))) √(√(x² + δ²/4) − δ/2) / x``; the removable
    ``0/0`` at ``x = 0`` evaluates to its limit, ``−max(δ, 0)^{3/2}/2`` (the value of
    ``(3/(2√2))Ψ_δ(0)``; docs/azulay-theory.md eq. 2.2).
    """
    x = np.asarray(x, dtype=float)
    root = np.sqrt(x * x + 0.25 * delta * delta)
    num = (x * x - 0.5 * delta * (0.5 * delta + root)) * np.sqrt(np.maximum(root - 0.5 * delta, 0))
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, -0.5 * np.maximum(delta, 0.0) ** 1.5, num / safe)


def q_delta_prime(x: Any, delta: float) -> np.ndarray:
    """``q_δ'(x) = (3/2)√(√(x² + δ²/4) − δ/2)`` (docs/diagonal.md, eq. (11))."""
    x = np.asarray(x, dtype=float)
    return 1.5 * np.sqrt(np.sqrt(x * x + 0.25 * delta * delta) - 0.5 * delta)


# -- numerics ---------------------------------------------------------------------------------


def _scaled_sinh(z: np.ndarray, log_c: np.ndarray | float) -> np.ndarray:
    """``c·sinh(z)`` computed as ``(e^{z+ln c} − e^{−z+ln c})/2``: no overflow for tiny c."""
    return 0.5 * (np.exp(z + log_c) - np.exp(-z + log_c))


def _scaled_cosh(z: np.ndarray, log_c: np.ndarray | float) -> np.ndarray:
    """``c·cosh(z)`` computed as ``(e^{z+ln c} + e^{−z+ln c})/2``."""
    return 0.5 * (np.exp(z + log_c) + np.exp(-z + log_c))


def implicit_interpolator(
    X: np.ndarray,
    y: np.ndarray,
    sqrt_k: Any,
    theta: Any = 0.0,
    mu0: np.ndarray | None = None,
    rtol: float = 1e-13,
    stall: float = 1e-9,
    max_iter: int = 2000,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``argmin_{Xw = y} Σ_i q_{k_i}(w_i) − θ_i w_i/2`` (Theorem 1; docs/diagonal.md, eqs. (7),
    (10)), by damped Newton.

    KKT: ``w(μ) = (√k/2) sinh(Xᵀμ + θ)`` with ``Xw(μ) = y``. This is the stationarity condition
    of the strictly convex dual ``D(μ) = Σ_i (√k_i/2) cosh((Xᵀμ)_i + θ_i) − yᵀμ``
    (``∇D = Xw(μ) − y``, ``∇²D = X diag((√k/2) cosh(Xᵀμ + θ)) Xᵀ``, SPD for full-row-rank X).
    Newton steps are damped by Armijo backtracking on ``D`` (``sinh`` is very steep for tiny
    k); once the squared Newton decrement is below 1e-10 full steps are taken. Stops when
    ``‖Xw − y‖ ≤ rtol·max(1, ‖y‖)``, or when the residual stops decreasing below
    ``stall·max(1, ‖y‖)`` (the rounding floor of an ill-conditioned Hessian).

    Returns ``(w, μ, iterations)``; raises ``RuntimeError`` if it does not converge.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    log_c = np.broadcast_to(np.log(0.5 * np.asarray(sqrt_k, dtype=float)), (d,))
    theta = np.broadcast_to(np.asarray(theta, dtype=float), (d,))
    mu = np.zeros(n) if mu0 is None else np.array(mu0, dtype=float)
    target = rtol * max(1.0, float(np.linalg.norm(y)))

    def dual(m: np.ndarray) -> tuple[float, np.ndarray]:
        z = X.T @ m + theta
        return float(np.sum(_scaled_cosh(z, log_c)) - y @ m), z

    best = np.inf
    with np.errstate(over="ignore", invalid="ignore"):
        value, z = dual(mu)
        for it in range(max_iter + 1):
            w = _scaled_sinh(z, log_c)
            grad = X @ w - y
            res = float(np.linalg.norm(grad))
            if res <= target:
                return w, mu, it
            if res >= best and res <= stall * max(1.0, float(np.linalg.norm(y))):
                return w, mu, it  # rounding floor reached (residual stopped decreasing)
            best = min(best, res)
            hess = (X * _scaled_cosh(z, log_c)) @ X.T
            step = -cho_solve(cho_factor(hess), grad)
            slope = float(grad @ step)  # minus the squared Newton decrement
            if -slope < 1e-10:
                # quadratic-convergence region: D's decrease is below its rounding, take the step
                mu = mu + step
                value, z = dual(mu)
                continue
            t = 1.0
            while t > 1e-30:
                trial = mu + t * step
                tvalue, tz = dual(trial)
                if np.isfinite(tvalue) and tvalue <= value + 1e-4 * t * slope:
                    break
                t *= 0.5
            else:
                break
            mu, value, z = trial, tvalue, tz
    raise RuntimeError(
        f"implicit_interpolator: no convergence (residual {res:.3g} > {target:.3g})"
    )


def _mirror_rhs(
    X: np.ndarray, y: np.ndarray, log_c: float, theta: np.ndarray | float
) -> tuple[Any, Any, Any]:
    """Right-hand side, Jacobian and weights map of the mirror flow ``ṁ = −(Xw(m) − y)/N``."""
    n = X.shape[0]

    def weights(m: np.ndarray) -> np.ndarray:
        return _scaled_sinh(2.0 * (X.T @ m) + theta, log_c)

    def rhs(_t: float, m: np.ndarray) -> np.ndarray:
        return -(X @ weights(m) - y) / n

    def jac(_t: float, m: np.ndarray) -> np.ndarray:
        return -(X * (2.0 * _scaled_cosh(2.0 * (X.T @ m) + theta, log_c))) @ X.T / n

    return rhs, jac, weights


def train_mse(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """The reported train loss ``(1/N)‖Xw − y‖²``."""
    res = X @ w - y
    return float(res @ res) / X.shape[0]


def solve_flow(
    X: np.ndarray,
    y: np.ndarray,
    sqrt_k: float,
    tol: float,
    times: np.ndarray,
    t_max: float,
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> dict[str, Any]:
    """Integrate the Theorem 1 mirror flow for one configuration (unbiased symmetric, θ = 0).

    Returns the train MSE at ``times`` (after the stopping time: the value at stopping), the end
    point ``w``, the time the MSE first falls below ``tol`` (NaN if it never does before
    ``t_max``), ``m`` at the end, and the number of right-hand-side evaluations.
    """
    log_c = float(np.log(0.5 * sqrt_k))
    rhs, jac, weights = _mirror_rhs(X, y, log_c, 0.0)

    def below_tol(_t: float, m: np.ndarray) -> float:
        return train_mse(X, y, weights(m)) - tol

    below_tol.terminal = True  # type: ignore[attr-defined]
    below_tol.direction = -1  # type: ignore[attr-defined]
    m0 = np.zeros(X.shape[0])
    loss = np.full(times.shape, np.nan)
    if times[0] == 0:
        loss[0] = train_mse(X, y, weights(m0))
    if train_mse(X, y, weights(m0)) < tol:
        loss[:] = loss[0]
        return {"loss": loss, "w": weights(m0), "m": m0, "time_to_tol": 0.0, "nfev": 0}
    inner = times[(times > 0) & (times <= t_max)]
    with np.errstate(over="ignore", invalid="ignore"):
        sol = solve_ivp(rhs, (0.0, t_max), m0, method="LSODA", jac=jac, rtol=rtol, atol=atol,
                        t_eval=inner, events=below_tol)
    if sol.status == -1:
        raise RuntimeError(f"diagonal solve: integrator failed: {sol.message}")
    for j, t in enumerate(sol.t):
        loss[np.searchsorted(times, t)] = train_mse(X, y, weights(sol.y[:, j]))
    if sol.status == 1:
        m_end = sol.y_events[0][0]
        t_end = float(sol.t_events[0][0])
    else:
        m_end = sol.y[:, -1] if sol.y.shape[1] else m0
        t_end = float("nan")
    w_end = weights(m_end)
    final = train_mse(X, y, w_end)
    loss = np.where(np.isnan(loss) & (times > 0), final, loss)
    return {"loss": loss, "w": w_end, "m": m_end, "time_to_tol": t_end, "nfev": int(sol.nfev)}


# -- the model --------------------------------------------------------------------------------


def _load_data(path: str) -> dict[str, np.ndarray]:
    # a regular file, headers checked before loading, only X, y and beta_star read
    arrays = read_npz(path, "parameter data", ("X", "y"), ("beta_star",))
    X, y = arrays["X"], arrays["y"].reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.size:
        raise BadInput(f"parameter data: X must be N×d and y of length N, got {X.shape}, {y.shape}")
    out = {"X": X, "y": y}
    if "beta_star" in arrays:
        beta = arrays["beta_star"].reshape(-1)
        if beta.size != X.shape[1]:
            raise BadInput(f"parameter data: beta_star must have length d = {X.shape[1]}")
        out["beta_star"] = beta
    if not all(np.all(np.isfinite(a)) for a in out.values()):
        raise BadInput("parameter data: every entry must be a finite number")
    return out


def make_data(values: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, β*)`` for one seed: the user's file, or the sparse-regression model of Azulay
    et al., §9.

    ``β*`` is all-NaN when a data file carries no ``beta_star``.
    """
    if values.get("data"):
        arrays = _load_data(values["data"])
        beta = arrays.get("beta_star", np.full(arrays["X"].shape[1], np.nan))
        return arrays["X"], arrays["y"], beta
    d, n, r, seed = int(values["d"]), int(values["N"]), int(values["r"]), int(values["seed"])
    support = rng(seed, "support").choice(d, size=r, replace=False)
    beta = np.zeros(d)
    beta[support] = 1.0 / np.sqrt(r)
    X = rng(seed, "data").standard_normal((n, d))
    y = X @ beta + np.sqrt(values["noise"]) * rng(seed, "noise").standard_normal(n)
    return X, y, beta


def record_times(t_min: float, t_max: float, n_time: int) -> np.ndarray:
    """``0`` then ``n_time`` log-spaced times from ``t_min`` to ``t_max``."""
    return record_grid(float(t_max), n_time, first=t_min)


def record_steps(max_steps: int, n_record: int) -> np.ndarray:
    """``0`` then about ``n_record`` log-spaced distinct step counts up to ``max_steps``."""
    return record_grid(int(max_steps), n_record)


def _not_reached(item: xr.Variable) -> xr.Variable:
    """``time_to_tol`` is NaN where the train MSE never reached tol: not a divergence."""
    item.attrs["nan_meaning"] = "not reached: the train MSE stayed above tol"
    return item


@register
class DiagonalModel(Model):
    """Diagonal linear network ``w = u₊∘v₊ − u₋∘v₋`` (docs/diagonal.md): flow, GD, Theorem 1
    bias."""

    name: ClassVar[str] = "diagonal"
    summary: ClassVar[str] = (
        "Diagonal linear network w = u+v+ - u-v- with scale alpha and shape s (Azulay et al. 2021)"
    )
    actions: ClassVar[tuple[str, ...]] = ("solve", "train")
    params: ClassVar[tuple[Param, ...]] = (
        Param("alpha", "float", 1e-3, "initialisation scale alpha = |u0 v0|", low=0,
              low_open=True, batchable=True),
        Param("s", "float", 0.0, "initialisation shape s = (|v0|-|u0|)/(|v0|+|u0|)", low=-1,
              high=1, low_open=True, high_open=True, batchable=True),
        Param("d", "int", 100, "input dimension (ignored with data)", low=1),
        Param("N", "int", 20, "number of training points (ignored with data)", low=1),
        Param("r", "int", 3, "non-zeros of the sparse teacher, each 1/sqrt(r)", low=1),
        Param("noise", "float", 0.01, "variance of the label noise on training labels", low=0),
        Param("seed", "int", 0, "random seed of support, inputs and noise", low=0),
        Param("data", "path", None, ".npz with X (N×d), y (N) and optionally beta_star (d)",
              optional=True),
        Param("tol", "float", 1e-8, "stop once the train MSE (1/N)|Xw-y|^2 is below this",
              low=0, low_open=True),
        Param("t_max", "float", 1e5, "solve: longest gradient-flow time", unit="time", low=0,
              low_open=True),
        Param("t_min", "float", 1e-2, "solve: first recorded time after 0", unit="time", low=0,
              low_open=True),
        Param("n_records", "int", 120, "how many points a run records after 0: solve, "
              "log-spaced times from t_min; train, about as many log-spaced steps", low=2),
        Param("rtol", "float", 1e-10, "solve: integrator relative tolerance", low=1e-14,
              high=1e-3),
        Param("lr", "float", 1e-2, "train: GD step size", low=0, low_open=True, batchable=True),
        Param("max_steps", "int", 1_000_000, "train: most GD steps", low=1),
    )
    aliases: ClassVar[dict[str, dict[str, str]]] = {
        "n_time": {"solve": "n_records"},
        "n_record": {"train": "n_records"},
    }
    """The older names of the record count (docs/engine.md, "Records")."""
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "solve": (
            {"d": 10, "N": 4, "r": 2, "alpha": 0.1, "tol": 1e-6, "t_max": 1e3, "n_records": 10},
            {"d": 10, "N": 4, "r": 2, "alpha": 0.03, "s": 0.5, "tol": 1e-6, "t_max": 1e3,
             "n_records": 10},
            {"d": 10, "N": 4, "r": 2, "alpha": 0.1, "tol": 1e-6, "t_max": 1e3, "n_records": 10,
             "seed": 1},
        ),
        "train": (
            {"d": 10, "N": 4, "r": 2, "alpha": 0.1, "tol": 1e-6, "lr": 0.05, "max_steps": 2000,
             "n_records": 10},
            {"d": 10, "N": 4, "r": 2, "alpha": 0.03, "s": 0.5, "tol": 1e-6, "lr": 0.02,
             "max_steps": 2000, "n_records": 10},
            {"d": 10, "N": 4, "r": 2, "alpha": 0.1, "tol": 1e-6, "lr": 0.05, "max_steps": 2000,
             "n_records": 10, "seed": 1},
        ),
    }

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """With a data file: ``N`` and ``d`` are its X's shape (which must be underdetermined
        and of full row rank)."""
        if values.get("data"):
            arrays = _load_data(values["data"])
            n, d = arrays["X"].shape
            if n > d:
                raise BadInput(
                    f"parameter data: X is {n}×{d}; need N ≤ d (an underdetermined problem "
                    "whose interpolators the flow selects)"
                )
            if np.linalg.matrix_rank(arrays["X"]) < n:
                raise BadInput("parameter data: X must have full row rank (Xw = y solvable)")
            values["N"], values["d"] = n, d

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        if values.get("data"):
            return  # the file's sizes, checked as they were read (derive)
        if values["N"] > values["d"]:
            raise BadInput(f"parameter N: {values['N']} > d = {values['d']}; need 1 ≤ N ≤ d")
        if values["r"] > values["d"]:
            raise BadInput(f"parameter r: {values['r']} > d = {values['d']}; need 1 ≤ r ≤ d")
        if values["t_min"] >= values["t_max"]:
            raise BadInput("parameter t_min: must be smaller than t_max")

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Over ``dim`` (d), float64: w, w_implicit and beta_star; per point, float64:
        population_error, population_error_implicit, implicit_gap, sqrt_k and time_to_tol,
        int8 converged; ``solve``: train_loss over the ``n_records + 1`` recorded times and
        int64 nfev; ``train``: train_loss over the recorded steps of :func:`record_steps`
        and int64 steps. With a data file, ``d`` is the file's (:meth:`check` fills it in)."""
        d = int(values["d"])
        if action == "solve":
            T = int(values["n_records"]) + 1  # 0, then n_records log-spaced times
        else:
            T = record_steps(int(values["max_steps"]), int(values["n_records"])).size
        return 8.0 * (3 * d + 5 + T + 1) + 1

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration, float64: the inputs ``X`` (N × d) and the
        ``N × d`` temporaries of the Jacobian ``X diag(cosh(2Xᵀm)) Xᵀ`` (the flow's
        implicit integrator, the implicit interpolator's Newton steps), ``3 N d`` together;
        the ``N × N`` Jacobian and its factors, ``2 N²``; and about
        twenty ``d``-vectors (weights, gradients, the mirror map's temporaries). With a data
        file, ``N`` and ``d`` are its X's (:meth:`derive`). The outputs are
        :meth:`_output_bytes`. Checked against the measured peak by
        tests/models/test_memory.py."""
        N, d = int(values["N"]), int(values["d"])
        return 8.0 * (3 * N * d + 2 * N * N + 20 * d)

    @classmethod
    def _cost(cls, values: Mapping[str, Any]) -> float:
        return float(values["N"]) * float(values["d"]) * (1.0 + np.log1p(1.0 / values["alpha"]))

    # -- shared outputs ---------------------------------------------------------------------
    @staticmethod
    def _common(
        X: np.ndarray,
        y: np.ndarray,
        beta: np.ndarray,
        sqrt_k: np.ndarray,
        w: np.ndarray,
    ) -> dict[str, xr.Variable]:
        b, d = w.shape
        w_imp = np.empty_like(w)
        for i in range(b):
            w_imp[i] = implicit_interpolator(X, y, sqrt_k[i])[0]
        pop = np.sum((w - beta) ** 2, axis=1)
        pop_imp = np.sum((w_imp - beta) ** 2, axis=1)
        gap = np.linalg.norm(w - w_imp, axis=1) / np.maximum(np.linalg.norm(w_imp, axis=1), 1e-300)
        teacher = {
            "beta_star": var(("point", "dim"), np.broadcast_to(beta, (b, d)).copy(),
                             "teacher weights beta*"),
            "population_error": var(("point",), pop, "population error |w - beta*|^2"),
            "population_error_implicit": var(("point",), pop_imp,
                                             "population error of w_implicit"),
        }
        for item in teacher.values():  # a data file need not give beta* (module doc)
            item.attrs["nan_meaning"] = "no teacher: the data file holds no beta_star"
        return {
            "w": var(("point", "dim"), w, "weights w = u+ v+ - u- v- at the end"),
            "w_implicit": var(("point", "dim"), w_imp,
                              "Theorem 1 limit argmin Q_k(w) subject to Xw = y"),
            **teacher,
            "implicit_gap": var(("point",), gap,
                                "relative distance |w - w_implicit| / |w_implicit|"),
            "sqrt_k": var(("point",), sqrt_k, "sqrt(k) = 4 alpha (1+s^2)/(1-s^2)"),
        }

    def solve(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        """Gradient flow to train MSE < ``tol`` via the Theorem 1 mirror flow (module doc)."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._solve(batch, progress)

    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        """Full-batch GD on ``u±, v±`` with step ``lr`` until train MSE < ``tol`` (module doc)."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._train(batch, progress)

    def _solve(self, batch: Batch, progress: Progress | None) -> xr.Dataset:
        values = batch.point(0)
        X, y, beta = make_data(values)
        times = record_times(values["t_min"], values["t_max"], values["n_records"])
        sqrt_k = sqrt_k_symmetric(batch.column("alpha"), batch.column("s"))
        b, d = batch.size, X.shape[1]
        loss = np.empty((b, times.size))
        w = np.empty((b, d))
        t_tol = np.empty(b)
        nfev = np.empty(b, dtype=np.int64)
        for i in range(b):
            out = solve_flow(X, y, float(sqrt_k[i]), values["tol"], times, values["t_max"],
                             rtol=values["rtol"], atol=1e-2 * values["rtol"])
            loss[i], w[i], t_tol[i] = out["loss"], out["w"], out["time_to_tol"]
            nfev[i] = out["nfev"]
            if progress is not None:
                progress((i + 1) / b)
        status = np.where(np.all(np.isfinite(w), axis=1), Status.OK, Status.DIVERGED)
        data = self._common(X, y, beta, sqrt_k, w)
        data.update({
            "train_loss": var(("point", "time"), loss, "train MSE (1/N)|Xw - y|^2"),
            "time_to_tol": _not_reached(var(("point",), t_tol, "flow time at which the train "
                                            "MSE reaches tol", "time")),
            "converged": var(("point",), np.isfinite(t_tol).astype(np.int8),
                             "1 if the train MSE reached tol before t_max"),
            "nfev": var(("point",), nfev, "right-hand-side evaluations of the integrator"),
            "status": var(("point",), status.astype(np.int8), "0 ok, 1 diverged"),
        })
        coords = {
            "time": var(("time",), times, "gradient-flow time of L = |Xw - y|^2/(2N)", "time"),
            "dim": var(("dim",), np.arange(d), "input coordinate"),
        }
        return xr.Dataset(data, coords=coords)

    def _train(self, batch: Batch, progress: Progress | None) -> xr.Dataset:
        values = batch.point(0)
        X, y, beta = make_data(values)
        n, d = X.shape
        b = batch.size
        alpha, s = batch.column("alpha"), batch.column("s")
        lr = np.asarray(batch.column("lr"), dtype=float)[:, None]
        u0, v0 = init_scale_shape(alpha, s)
        up = np.repeat(u0[:, None], d, axis=1)
        vp = np.repeat(v0[:, None], d, axis=1)
        um, vm = up.copy(), vp.copy()
        steps_rec = record_steps(values["max_steps"], values["n_records"])
        loss = np.full((b, steps_rec.size), np.nan)
        tol, max_steps = values["tol"], values["max_steps"]
        active = np.ones(b, dtype=bool)
        diverged = np.zeros(b, dtype=bool)
        steps = np.full(b, max_steps, dtype=np.int64)
        last = np.full(b, np.nan)
        res = np.empty((b, n))
        grad = np.empty((b, d))
        rec = 0
        limit0 = None
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(max_steps + 1):
                w = up * vp - um * vm
                idx = np.flatnonzero(active)
                for i in idx:  # row by row: summation order independent of the batch
                    res[i] = X @ w[i] - y
                mse = np.einsum("ij,ij->i", res, res) / n
                if limit0 is None:
                    limit0 = 1e8 * (mse + 1.0)
                last[idx] = mse[idx]
                if rec < steps_rec.size and steps_rec[rec] == k:
                    loss[:, rec] = last
                    rec += 1
                bad = active & ~(np.isfinite(mse) & (mse < limit0))
                diverged |= bad
                done = active & (mse < tol)
                steps[done | bad] = k
                active &= ~(done | bad)
                if not active.any() or k == max_steps:
                    break
                idx = np.flatnonzero(active)
                for i in idx:
                    grad[i] = X.T @ res[i] / n
                g = lr[idx] * grad[idx]
                upi, vpi, umi, vmi = up[idx], vp[idx], um[idx], vm[idx]
                up[idx], vp[idx] = upi - g * vpi, vpi - g * upi
                um[idx], vm[idx] = umi + g * vmi, vmi + g * umi
                if progress is not None and k % 10000 == 0:
                    progress(min(1.0, k / max_steps))
        # fill recorded steps after a configuration stopped with its final value
        loss = np.where(np.isnan(loss), last[:, None], loss)
        w = up * vp - um * vm
        converged = (~diverged) & (last < tol)
        steps = np.where(converged | diverged, steps, max_steps)
        w_ok = np.where(diverged[:, None], np.nan, w)  # diverged: no end point
        data = self._common(X, y, beta, sqrt_k_symmetric(alpha, s), w_ok)
        data.update({
            "train_loss": var(("point", "step"), loss, "train MSE (1/N)|Xw - y|^2"),
            "steps": var(("point",), steps, "GD steps taken (to tol, divergence or max_steps)",
                         "steps"),
            "time_to_tol": _not_reached(var(("point",), np.where(converged, steps * lr[:, 0],
                                                                 np.nan),
                                            "steps x lr when the train MSE reached tol",
                                            "time")),
            "converged": var(("point",), converged.astype(np.int8),
                             "1 if the train MSE reached tol within max_steps"),
            "status": var(("point",), np.where(diverged, Status.DIVERGED, Status.OK)
                          .astype(np.int8), "0 ok, 1 diverged"),
        })
        coords = {
            "step": var(("step",), steps_rec, "GD step"),
            "dim": var(("dim",), np.arange(d), "input coordinate"),
        }
        return xr.Dataset(data, coords=coords)
