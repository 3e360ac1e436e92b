r"""Single leaky-ReLU neuron :math:`f(x) = a\,\sigma(w^\top x)`: gradient flow and Theorem 4.

Mathematics: docs/azulay-theory.md §1 (Azulay et al. 2021, Thm 4 and App. G; Kunin et al.
2024, Thm 3.1 for the linear neuron). With :math:`\sigma(z) = \max(z, \rho z)`,
:math:`\rho\in[0, 1]`, :math:`\sigma'(0) = 1`, the sum loss :math:`L = \tfrac12\sum_n r_n^2`,
:math:`r_n = a\sigma(z_n) - y_n`, :math:`z = Xw` and :math:`D = \mathrm{diag}(\sigma'(z))`,
gradient flow is (eq. 1.1)

.. math:: \dot a = -\eta_a \sum_n r_n\sigma(z_n), \qquad \dot w = -\eta_w\, a\, X^\top D r .

Positive homogeneity (:math:`\sigma(z) = \sigma'(z) z`) makes
:math:`\delta = \eta_w a^2 - \eta_a\|w\|^2` conserved, and :math:`\dot w\in\mathrm{range}(X^\top)`
whatever :math:`D` is, so :math:`P_{\mathrm{null}(X)} w(t) = P_{\mathrm{null}(X)} w(0)` exactly
(eq. 1.2). Together with interpolation and the sign of :math:`a(\infty)` this fixes the limit in
closed form (eq. 1.4, :func:`implicit_closed_form`), which is the KKT point of Azulay's
Theorem 4 (eq. 1.3).

Numerics (:func:`leaky_flow`). The right-hand side jumps where some :math:`z_n` crosses 0, and
the flow can *slide* along such a surface (a Filippov sliding mode, docs/azulay-theory.md
§1.3): the flow is integrated piecewise with the activation pattern held fixed inside each
piece and terminal events at the crossings -- DOP853 over the output times, then LSODA (the
late phase is stiff when a sample sits on the leaky side: its kernel entries scale with
:math:`\rho^2`) until the residual falls below its tolerance. Samples on a sliding surface
form a set :math:`S`: there :math:`(Dr)_S` is replaced by the unique :math:`u_S` with
:math:`X_S X^\top u = 0` (so :math:`\dot z_S = 0`), which equals :math:`\theta_n r_n` with
:math:`\theta_n\in[\rho, 1]`; a sample leaves :math:`S` when :math:`\theta_n` reaches
:math:`\rho` or 1. Both invariants hold for every :math:`\theta`, because :math:`\dot w` stays in
:math:`\mathrm{range}(X^\top)` and :math:`\sigma(z_n) = 0` on :math:`S`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

MAX_EVENTS = 20000
"""Most activation-pattern changes one integration may go through."""

STALL_RATIO = 1e-10
"""A flow whose speed :math:`\\|(\\dot a, \\dot w)\\|` falls below this times its residual
:math:`\\|r\\|` (still above its tolerance) has stopped at an equilibrium that does not
interpolate. Converging to an interpolant, the ratio stays near the smallest eigenvalue of the
tangent kernel; at a non-interpolating equilibrium it falls to the rounding level."""


def leaky(z: np.ndarray, rho: float) -> np.ndarray:
    """:math:`\\sigma(z) = \\max(z, \\rho z)` for :math:`\\rho\\le1`."""
    return np.where(z >= 0, z, rho * z)


def leaky_slope(z: np.ndarray, rho: float) -> np.ndarray:
    """:math:`\\sigma'(z)`, with :math:`\\sigma'(0) = 1`."""
    return np.where(z >= 0, 1.0, rho)


@dataclass
class _Mode:
    """The activation pattern of one smooth piece: a side (+1/−1) per sample off ``S``, and
    the sliding set ``S`` (boolean mask)."""

    side: np.ndarray
    sliding: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


@dataclass
class LeakyProblem:
    """Data, leak and layer learning rates of one configuration."""

    X: np.ndarray
    y: np.ndarray
    rho: float
    eta_a: float
    eta_w: float

    def __post_init__(self) -> None:
        self.gram = self.X @ self.X.T
        self.slid = False
        self.stationary = False

    # -- the vector field of one piece ---------------------------------------------------
    def slopes(self, mode: _Mode) -> np.ndarray:
        return np.where(mode.side > 0, 1.0, self.rho)

    def weights(self, a: float, w: np.ndarray, mode: _Mode) -> tuple[np.ndarray, np.ndarray]:
        """``(v, r)``: the vector ``v`` with :math:`\\dot w = -\\eta_w a X^\\top v` and the
        residuals ``r`` (:math:`\\sigma(z_n) = 0` on ``S``)."""
        S = mode.sliding
        D = self.slopes(mode)
        sig = np.where(S, 0.0, D * (self.X @ w))
        r = a * sig - self.y
        v = np.where(S, 0.0, D * r)
        if S.any():
            off = ~S
            rhs = -self.gram[np.ix_(S, off)] @ v[off]
            v[S] = np.linalg.solve(self.gram[np.ix_(S, S)], rhs)
        return v, r

    def theta(self, v: np.ndarray, r: np.ndarray, mode: _Mode) -> np.ndarray:
        """:math:`\\theta_n = u_n / r_n` on ``S`` (NaN elsewhere)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(mode.sliding, v / r, np.nan)

    def rhs(self, state: np.ndarray, mode: _Mode) -> np.ndarray:
        a, w = state[0], state[1:]
        v, r = self.weights(a, w, mode)
        sig = np.where(mode.sliding, 0.0, self.slopes(mode) * (self.X @ w))
        da = -self.eta_a * float(r @ sig)
        dw = -self.eta_w * a * (self.X.T @ v)
        return np.concatenate([[da], dw])

    def z_dot(self, state: np.ndarray, mode: _Mode) -> np.ndarray:
        return self.X @ self.rhs(state, mode)[1:]

    def residual(self, state: np.ndarray) -> np.ndarray:
        a, w = state[0], state[1:]
        return a * leaky(self.X @ w, self.rho) - self.y

    # -- mode changes ---------------------------------------------------------------------
    def project(self, state: np.ndarray, mode: _Mode) -> np.ndarray:
        """Put ``w`` exactly on :math:`\\{X_S w = 0\\}` by a step in
        :math:`\\mathrm{range}(X_S^\\top)` (so :math:`P_{\\mathrm{null}(X)} w` is untouched)."""
        S = mode.sliding
        if not S.any():
            return state
        w = state[1:]
        XS = self.X[S]
        w = w - XS.T @ np.linalg.solve(self.gram[np.ix_(S, S)], XS @ w)
        return np.concatenate([state[:1], w])

    def snap(self, state: np.ndarray, mode: _Mode) -> np.ndarray:
        """After a mode change, place the samples that sit on their kink up to rounding
        (:math:`|z_n|\\le\\epsilon_n = 10^{-12}\\max(1, \\|x_n\\|\\|w\\|)`) by one step in
        :math:`\\mathrm{range}(X^\\top)` (so :math:`P_{\\mathrm{null}}w` does not move): sliding
        samples exactly on the kink, the others at :math:`z_n = 10^{-2}\\epsilon_n` on the side
        their pattern assumes. A crossing event then starts strictly on its own side and fires
        at the next true crossing -- also when the flow first leaves the kink and turns back
        (a rounding error on the wrong side would never fire, and an exact zero would be
        mistaken for a root at once)."""
        w = state[1:]
        z = self.X @ w
        eps = 1e-12 * np.maximum(1.0, np.linalg.norm(self.X, axis=1) * np.linalg.norm(w))
        on = mode.sliding | (np.abs(z) <= eps)
        if not on.any():
            return state
        target = np.where(mode.sliding, 0.0, 1e-2 * eps * mode.side)[on]
        Xo = self.X[on]
        w = w + Xo.T @ np.linalg.solve(self.gram[np.ix_(on, on)], target - Xo @ w)
        return np.concatenate([state[:1], w])

    def release(self, state: np.ndarray, mode: _Mode) -> None:
        """Release, one at a time, every sliding sample whose :math:`\\theta_n` is outside
        :math:`[\\rho, 1]`: to the side ``+`` if :math:`\\theta_n > 1`, ``−`` if below ``ρ``."""
        for _ in range(mode.side.size):
            if not mode.sliding.any():
                return
            v, r = self.weights(state[0], state[1:], mode)
            th = self.theta(v, r, mode)
            excess = np.where(mode.sliding, np.maximum(th - 1.0, self.rho - th), -np.inf)
            n = int(np.argmax(excess))
            if not excess[n] > 0:
                return
            mode.sliding[n] = False
            mode.side[n] = 1.0 if th[n] > 1.0 else -1.0

    def cross(self, state: np.ndarray, mode: _Mode, n: int) -> np.ndarray:
        """``z_n`` reached 0 from ``mode.side[n]``: cross, or slide if the flow on the other
        side points back into the surface too."""
        old = mode.side[n]
        mode.side[n] = -old
        zdot_new = self.z_dot(state, mode)[n]
        if (-old) * zdot_new < 0 and self.y[n] != 0:
            mode.sliding[n] = True
            self.slid = True
            state = self.project(state, mode)
        self.release(state, mode)
        return state


@dataclass
class LeakyFlow:
    """Result of :func:`leaky_flow`."""

    a: np.ndarray  # (T,)
    w: np.ndarray  # (T, d)
    a_inf: float
    w_inf: np.ndarray
    converged: bool
    events: int
    nfev: int
    slid: bool  # whether any sliding mode occurred
    stationary: bool = False  # stopped at an equilibrium that does not interpolate


def _events(problem: LeakyProblem, mode: _Mode) -> tuple[list[Any], list[tuple[str, int]]]:
    fns: list[Any] = []
    tags: list[tuple[str, int]] = []
    X, rho = problem.X, problem.rho
    for n in range(mode.side.size):
        if mode.sliding[n]:
            for kind in ("low", "high"):
                def ev(_t: float, s: np.ndarray, n: int = n, kind: str = kind) -> float:
                    v, r = problem.weights(s[0], s[1:], mode)
                    th = v[n] / r[n]
                    return th - rho if kind == "low" else 1.0 - th

                ev.terminal = True  # type: ignore[attr-defined]
                ev.direction = -1  # type: ignore[attr-defined]
                fns.append(ev)
                tags.append((kind, n))
        else:
            side = float(mode.side[n])

            def cz(_t: float, s: np.ndarray, n: int = n, side: float = side) -> float:
                return side * float(X[n] @ s[1:])

            cz.terminal = True  # type: ignore[attr-defined]
            cz.direction = -1  # type: ignore[attr-defined]
            fns.append(cz)
            tags.append(("cross", n))
    return fns, tags


def _integrate(
    problem: LeakyProblem, state: np.ndarray, mode: _Mode, t0: float, t1: float,
    times: np.ndarray, out: np.ndarray, rtol: float, atol: float, res_tol: float | None,
    budget: list[int],
) -> tuple[np.ndarray, float, bool, int]:
    """Integrate from ``t0`` towards ``t1`` piece by piece, writing ``out`` at ``times``.

    With ``res_tol``, stop once :math:`\\|r\\|` falls below it. Returns the final state, time,
    whether it stopped on the residual, and the number of right-hand-side evaluations.
    """
    t = t0
    nfev = 0
    if res_tol is not None and np.linalg.norm(problem.residual(state)) < res_tol:
        return state, t, True, nfev
    while t < t1:
        speed = float(np.linalg.norm(problem.rhs(state, mode)))
        res = float(np.linalg.norm(problem.residual(state)))
        if speed == 0.0 or (res_tol is not None and speed < STALL_RATIO * res):
            # an equilibrium that does not interpolate (e.g. every sample on a dead ReLU side):
            # the state stays put for ever
            problem.stationary = True
            out[(times > t) & (times <= t1)] = state
            return state, t1, False, nfev
        fns, tags = _events(problem, mode)
        if res_tol is not None:
            def done(_t: float, s: np.ndarray) -> float:
                return float(np.log(np.linalg.norm(problem.residual(s)) / res_tol))

            done.terminal = True  # type: ignore[attr-defined]
            done.direction = -1  # type: ignore[attr-defined]
            fns.append(done)
            tags.append(("done", -1))

            def stalled(_t: float, s: np.ndarray) -> float:
                speed = float(np.linalg.norm(problem.rhs(s, mode)))
                res = float(np.linalg.norm(problem.residual(s)))
                return float(np.log(max(speed, 1e-300) / (STALL_RATIO * res)))

            stalled.terminal = True  # type: ignore[attr-defined]
            stalled.direction = -1  # type: ignore[attr-defined]
            fns.append(stalled)
            tags.append(("stalled", -1))
        sel = (times > t) & (times <= t1)
        sol = solve_ivp(
            lambda _t, s: problem.rhs(s, mode), (t, t1), state,
            method="DOP853" if res_tol is None else "LSODA",
            t_eval=times[sel] if sel.any() else None, events=fns, rtol=rtol, atol=atol,
            dense_output=False,
        )
        nfev += int(sol.nfev)
        if sol.status == -1:
            raise RuntimeError(f"leaky neuron: integration failed: {sol.message}")
        if sel.any():
            ts = np.asarray(sol.t)
            idx = np.flatnonzero(sel)[: ts.size]
            if ts.size:
                out[idx] = np.asarray(sol.y).T
        if sol.status == 0:
            return sol.y[:, -1], t1, False, nfev
        hits = [(float(te[0]), k) for k, te in enumerate(sol.t_events) if te.size]
        t_hit, k = min(hits)
        state = sol.y_events[k][0]
        t = t_hit
        kind, n = tags[k]
        if kind == "done":
            return state, t, True, nfev
        if kind == "stalled":
            problem.stationary = True
            return state, t, False, nfev
        budget[0] += 1
        if budget[0] > MAX_EVENTS:
            raise RuntimeError(f"leaky neuron: more than {MAX_EVENTS} activation-pattern changes")
        if kind == "cross":
            state = problem.cross(state, mode, n)
        else:
            mode.sliding[n] = False
            mode.side[n] = -1.0 if kind == "low" else 1.0
            problem.release(state, mode)
        state = problem.snap(state, mode)
    return state, t, False, nfev


def leaky_flow(
    a0: float,
    w0: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    rho: float,
    eta_a: float,
    eta_w: float,
    times: np.ndarray,
    rtol: float = 1e-12,
    atol: float = 1e-14,
    res_tol: float = 1e-11,
    t_cap: float = 1e8,
) -> LeakyFlow:
    """Gradient flow of the leaky neuron (eq. 1.1) at ``times``, then on to its limit.

    The limit is the state at which :math:`\\|a\\sigma(Xw) - y\\|` first falls below
    ``res_tol`` (``converged``), or an equilibrium that does not interpolate, where the vector
    field vanishes (``stationary``: for ρ = 0 every sample with a nonzero residual can sit on
    its dead side); NaNs if neither happens before ``t_cap``.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    times = np.asarray(times, dtype=float)
    problem = LeakyProblem(X, y, float(rho), float(eta_a), float(eta_w))
    z0 = X @ w0
    mode = _Mode(side=np.where(z0 >= 0, 1.0, -1.0), sliding=np.zeros(y.size, dtype=bool))
    state = np.concatenate([[float(a0)], w0])
    out = np.full((times.size, 1 + w0.size), np.nan)
    if times.size and times[0] == 0.0:
        out[0] = state
    budget = [0]
    t_end = float(times[-1]) if times.size else 0.0
    state, t, _, nfev = _integrate(problem, state, mode, 0.0, t_end, times, out, rtol, atol,
                                   None, budget)
    state, t, done, nfev2 = _integrate(problem, state, mode, t, t_cap, np.zeros(0),
                                       np.zeros((0, state.size)), rtol, atol, res_tol, budget)
    ended = done or problem.stationary
    a_inf = float(state[0]) if ended else float("nan")
    w_inf = state[1:].copy() if ended else np.full(w0.size, np.nan)
    return LeakyFlow(out[:, 0].copy(), out[:, 1:].copy(), a_inf, w_inf, done, budget[0],
                     nfev + nfev2, problem.slid, problem.stationary)


# -- Theorem 4: the predicted limit ----------------------------------------------------------


def _a_squared(B: float, C: float, eta_a: float, eta_w: float) -> float:
    """The positive root of :math:`\\eta_w t^2 - Bt - \\eta_a C = 0`, without cancellation."""
    root = np.sqrt(B * B + 4.0 * eta_a * eta_w * C)
    if B >= 0:
        return float((B + root) / (2.0 * eta_w))
    return float(2.0 * eta_a * C / (root - B))


def implicit_closed_form(
    X: np.ndarray, y: np.ndarray, w0: np.ndarray, delta: float, rho: float,
    eta_a: float, eta_w: float, sign_a: float,
) -> tuple[float, np.ndarray]:
    r"""The unique interpolating point with :math:`P_{\mathrm{null}}w = P_{\mathrm{null}}w_0`,
    conserved :math:`\delta` and :math:`\mathrm{sgn}\,a = \varsigma` (docs/azulay-theory.md
    eq. 1.4), for :math:`\rho > 0`.

    :math:`\tilde y_n = y_n` if :math:`\varsigma y_n\ge0`, else :math:`y_n/\rho`;
    :math:`w_N = P_{\mathrm{null}}w_0`, :math:`C = \tilde y^\top(XX^\top)^{-1}\tilde y`,
    :math:`B = \delta + \eta_a\|w_N\|^2`,
    :math:`a^2 = [B + \sqrt{B^2 + 4\eta_a\eta_w C}]/(2\eta_w)`, :math:`a = \varsigma|a|`,
    :math:`w = w_N + X^\top(XX^\top)^{-1}\tilde y/a`. Returns ``(a, w)``.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w0 = np.asarray(w0, dtype=float)
    y_t = np.where(sign_a * y >= 0, y, y / rho)
    gram = X @ X.T
    lam = np.linalg.solve(gram, y_t)
    w_n = w0 - X.T @ np.linalg.solve(gram, X @ w0)
    C = float(y_t @ lam)
    B = float(delta + eta_a * (w_n @ w_n))
    a = float(sign_a) * np.sqrt(_a_squared(B, C, eta_a, eta_w))
    return float(a), w_n + (X.T @ lam) / a


def implicit_least_squares(
    X: np.ndarray, y: np.ndarray, w0: np.ndarray, delta: float, rho: float,
    eta_a: float, eta_w: float, sign_a: float, lam0: np.ndarray, tol: float = 1e-10,
) -> tuple[float, np.ndarray, bool]:
    r"""Solve :math:`a(\lambda)\sigma(Xw(\lambda)) = y` with ``least_squares`` (Azulay Thm 4 in
    the :math:`\lambda`-parametrisation of docs/azulay-theory.md eq. 1.5):
    :math:`w(\lambda) = P_{\mathrm{null}}w_0 + X^\top\lambda`,
    :math:`a(\lambda) = \varsigma\sqrt{(\delta + \eta_a\|w(\lambda)\|^2)/\eta_w}`.

    The system is piecewise smooth and non-convex; returns ``(a, w, converged)`` with
    ``converged`` meaning :math:`\|a\sigma(Xw) - y\|\le` ``tol``·max(1, ‖y‖).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    gram = X @ X.T
    w_n = w0 - X.T @ np.linalg.solve(gram, X @ w0)

    def unpack(lam: np.ndarray) -> tuple[float, np.ndarray]:
        w = w_n + X.T @ lam
        a = sign_a * np.sqrt(max(delta + eta_a * float(w @ w), 0.0) / eta_w)
        return float(a), w

    def resid(lam: np.ndarray) -> np.ndarray:
        a, w = unpack(lam)
        return a * leaky(X @ w, rho) - y

    sol = least_squares(resid, lam0, xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=2000)
    a, w = unpack(sol.x)
    ok = bool(np.linalg.norm(resid(sol.x)) <= tol * max(1.0, float(np.linalg.norm(y))))
    return a, w, ok


def kkt_residual(
    X: np.ndarray, beta_inf: np.ndarray, beta0: np.ndarray, delta: float,
    eta_a: float, eta_w: float, a0_sign: float, a_inf_sign: float,
) -> float:
    r""":math:`\|P_{\mathrm{null}(X)}\nabla Q(\beta_\infty)\|/\sqrt{2\eta_a}` with
    :math:`Q(\beta) = \Psi_\delta(\beta) - s\,\psi_\delta(\beta_0)^\top\beta`,
    :math:`s = \mathrm{sgn}(a_\infty a_0)` (docs/azulay-theory.md eq. 1.3), computed from the
    function-space points alone: :math:`\psi_\delta(\beta) = \sqrt{\kappa - \delta}\,\hat\beta`,
    :math:`\kappa = \sqrt{\delta^2 + 4\eta_a\eta_w\|\beta\|^2}`.

    It equals :math:`\|P_{\mathrm{null}}(w_\infty - w_0)\|` (Azulay Thm 4's stationarity; the
    pattern matrix :math:`D_\infty` is positive for :math:`\rho > 0`, so
    :math:`\mathrm{null}(D_\infty X) = \mathrm{null}(X)`).
    """
    def psi(beta: np.ndarray) -> np.ndarray:
        nb = float(np.linalg.norm(beta))
        if nb == 0.0:
            return np.zeros_like(beta)
        kappa = np.hypot(delta, 2.0 * np.sqrt(eta_a * eta_w) * nb)
        # kappa - delta without cancellation
        km = (kappa - delta) if delta <= 0 else 4.0 * eta_a * eta_w * nb * nb / (kappa + delta)
        return np.sqrt(km) * beta / nb

    s = float(np.sign(a0_sign * a_inf_sign))
    grad = psi(np.asarray(beta_inf, dtype=float)) - s * psi(np.asarray(beta0, dtype=float))
    Xf = np.asarray(X, dtype=float)
    null_part = grad - Xf.T @ np.linalg.solve(Xf @ Xf.T, Xf @ grad)
    return float(np.linalg.norm(null_part) / np.sqrt(2.0 * eta_a))
