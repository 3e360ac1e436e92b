"""Wide and deep linear networks ``f(x) = Aᵀ W_L ⋯ W_1 x`` (Kunin et al. 2024, §4; docs/linear.md).

**Network.** ``W_1 ∈ R^{h×d}``, ``W_l ∈ R^{h×h}`` (``2 ≤ l ≤ L``), ``A ∈ R^{h×c}``; ``L`` is
``depth`` (``depth = 1`` is the two-layer network of Kunin et al. §4, ``depth = L`` the depth-(L+1)
network of Definition B.7). The end-to-end map is ``β = W_1ᵀ ⋯ W_Lᵀ A = PᵀA ∈ R^{d×c}`` with
``P = W_L ⋯ W_1``. Layer learning rates: ``eta_a`` for ``A`` and ``eta_w`` shared by every
``W_l``.

**Loss** (``loss`` parameter). ``sum`` (default, docs/linear.md, eq. (1)): ``L = ½‖Xβ − y‖_F²``;
``mean``: ``L = ‖Xβ − y‖_F²/(2n)``. Everything below uses ``Σ = XᵀX`` and ``b = Xᵀy`` (divided
by ``n`` for ``mean``), so ``G := ∂L/∂β = Σβ − b``.

**Gradient flow** (action ``solve``). With ``Left_l = W_L ⋯ W_{l+1}`` (``I_h`` for ``l = L``)
and ``Right_l = W_{l−1} ⋯ W_1`` (``I_d`` for ``l = 1``)::

    Ȧ = −η_a P G,      Ẇ_l = −η_w Left_lᵀ A Gᵀ Right_lᵀ.

Integrated by ``scipy.integrate.solve_ivp`` (DOP853, ``rtol``/``atol``) on the flattened
parameters, one configuration at a time so that the adaptive steps -- and so the result -- do
not depend on the batch (a stacked ODE would share step-size control between configurations).
Conserved (docs/linear.md, eq. (3); Definition B.7): ``Δ = η_w AAᵀ − η_a W_L W_Lᵀ`` and, for ``l <
L``, ``C_l = W_{l+1}ᵀW_{l+1} − W_l W_lᵀ``. Outputs ``delta_drift = ‖Δ(t) − Δ(0)‖_F`` and, for
``depth > 1``, ``layer_drift = max_l ‖C_l(t) − C_l(0)‖_F``.

**Gradient descent** (action ``train``). ``θ ← θ − lr · η ⊙ ∇L`` for ``steps`` steps, i.e. the
flow discretised with time step ``lr`` (``time = lr × step``); vectorised over the batch.

**Initialisation** (``init``).

* ``isotropic`` (docs/linear.md, eqs. (8)–(9); Theorems 4.2/B.6, Definition B.7): with random
  orthogonal ``R_1..R_L ∈ O(h)`` and orthonormal columns ``U ∈ R^{d×min(h,d)}``, ``V ∈
  R^{c×min(h,c)}`` drawn from ``rng(seed, "init")`` (or, with ``aligned = true``, the left/right
  singular vectors of ``b = Xᵀy``: the task-aligned case of Theorem B.6)::

      W_1 = R_1 diag(ω) Uᵀ,   W_l = R_l diag(ω) R_{l−1}ᵀ,   A = R_L diag(α) Vᵀ

  (``ω_i = 0`` for ``i > d``, ``α_i = 0`` for ``i > c``), so ``W_{l+1}ᵀW_{l+1} = W_l W_lᵀ``,
  ``Δ = R_L diag(η_w α² − η_a ω²) R_Lᵀ`` and ``β₀ = U diag(ω^L α) Vᵀ``. The magnitudes solve
  ``η_w α_i² − η_a ω_i² = δ`` for every ``i ≤ h`` (so ``Δ = δ I_h`` exactly) and
  ``ω_i^L α_i = scale`` for ``i ≤ r = min(h, c, d)``: **every non-zero singular value of β₀
  equals ``scale``** (``‖β₀‖_F = scale·√r``), independently of δ and of the learning rates, so a
  δ-sweep at one seed starts from one function-space point β₀. For ``L = 1``:
  ``η_a ω² = (κ − δ)/2``, ``η_w α² = (κ + δ)/2``, ``κ = √(δ² + 4η_aη_w scale²)``; for ``L > 1``
  ``u = ω²`` is the unique root of ``u^L (δ + η_a u) = η_w scale²`` (``brentq``). The remaining
  ``i > r`` have ``α_i = √(δ/η_w), ω_i = 0`` (δ > 0), ``ω_i = √(−δ/η_a), α_i = 0`` (δ < 0) or
  both 0 (δ = 0). Hence ``Δ = δI_h`` exists iff δ > 0 ⇒ ``h ≤ c``, δ < 0 ⇒ ``h ≤ d``
  (δ = 0: any ``h``); other combinations are refused by :meth:`Linear.check`.
* ``neuron`` (``depth = 1``; docs/azulay-theory.md §3, eq. 3.1): every neuron ``k`` has its own
  conserved ``δ_k = Δ_kk ~ Unif[δ − delta_spread, δ + delta_spread]`` and ``‖w_k a_kᵀ‖ =
  scale``, with independent directions ``u_k ~ Unif(S^{d−1})``, ``v_k ~ Unif(S^{c−1})`` (a
  random sign for ``c = 1``), all from ``rng(seed, "init")``: ``w_k = r_{w,k} u_k``, ``a_k =
  r_{a,k} v_k`` with ``η_a r_{w,k}² = (κ_k − δ_k)/2``, ``η_w r_{a,k}² = (κ_k + δ_k)/2``,
  ``κ_k = √(δ_k² + 4η_aη_w scale²)``. The off-diagonal part of Δ is not zero, so no closed
  function-space flow applies and ``method`` is ``("numeric",)``.
* ``gaussian``: i.i.d. ``A ~ N(0, sigma_a²/c)``, ``W_1 ~ N(0, sigma_w²/d)`` and hidden
  ``W_l ~ N(0, sigma_w²/h)`` (fan-in), from ``rng(seed, "init")``.

**Data** (``data_kind``). ``whitened``: ``X ∈ R^{n×d}`` with orthonormal columns (``XᵀX = I_d``,
needs ``n ≥ d``) from ``rng(seed, "data")``; ``gaussian``: ``X_ij ~ N(0, 1)``. Teacher
``beta_star`` (``d×c``) or ``β*_ij ~ N(0, 1/d)`` from ``rng(seed, "teacher")``; labels
``y = Xβ* + noise·ε``, ``ε ~ N(0, 1)`` from ``rng(seed, "noise")``. ``file``: the ``data``
``.npz`` holds ``X`` (n×d), ``y`` (n or n×c) and optionally ``beta_star``; ``d``, ``c`` and
``n`` are then taken from it (filled in by :meth:`Linear.check`).

**Function-space theory** (``method = "theory"``, isotropic init, ``depth = 1``; docs/linear.md,
eqs. (4)–(6)). The flow
``β̇ = −[P_W(β) G + G P_A(β)]`` integrated on its own in ``β`` (DOP853, same tolerances), where
(SVD ``β = U_full diag(s) V_fullᵀ`` with singular values padded by zeros)

* Theorem B.6 (δ ≥ 0 with ``h = c``; δ ≤ 0 with ``h = d``; δ = 0 with any ``h``)::

      P_W = G_W = ½(√(δ²I_d + 4η_aη_w ββᵀ) − δ I_d) = U_full diag((κ_i − δ)/2) U_fullᵀ,
      P_A = G_A = ½(√(δ²I_c + 4η_aη_w βᵀβ) + δ I_c) = V_full diag((κ_i + δ)/2) V_fullᵀ,

  ``κ_i = √(δ² + 4η_aη_w s_i²)``; for ``c = 1`` this is Theorem 4.2's ``M = G_W + G_A``.
* ``h = 1`` otherwise (one neuron, Theorem 4.1): ``P_W = (κ−δ)/2 ûûᵀ``, ``P_A = (κ+δ)/2 v̂v̂ᵀ``
  with ``β = ‖β‖ûv̂ᵀ``, ``κ = √(δ² + 4η_aη_w‖β‖²)`` (singular where β passes through 0, i.e.
  when δ < 0 and the neuron's output weight changes sign).

Note: in the B.6 case ``G_W G + G G_A = ½(√(δ²I+4η_aη_wββᵀ) G + G √(δ²I+4η_aη_wβᵀβ))`` (the
``∓δ/2`` terms cancel), so the function-space flow depends on δ only through δ². At δ = 0 the
right-hand side is not smooth where a singular value of β crosses 0, which costs the
integrator accuracy there (about 2e-5 at rtol 1e-10 in ``jobs/linear-delta.toml``, 1e-7 at
rtol 1e-12); elsewhere the two flows agree to ~1e-9.

Because ``delta`` is batchable, the ``method`` coordinate is ``("numeric", "theory")`` for every
isotropic depth-1 run and the theory rows are NaN for points where neither case holds
(``1 < h < c`` with δ > 0 -- refused anyway -- or ``1 < h < d`` with δ < 0, where ``M`` is not a
function of β: Theorem 4.2, docs/linear.md, eq. (5), second case). Otherwise ``method =
("numeric",)``.

**NTK and kernel distance.** With the layer learning rates as the metric, the function-space
velocity is ``β̇ = −Σ_j S_j G T_j`` with ``(S, T) = (η_a PᵀP, I_c)`` for ``A`` and
``(η_w Right_lᵀRight_l, AᵀLeft_l Left_lᵀA)`` for ``W_l``; the training-set NTK is
``K = Σ_j (X S_j Xᵀ) ⊗ T_j``, so ``⟨K, K'⟩_F = Σ_ij tr(S_i Σ S'_j Σ) tr(T_i T'_j)`` and
``kernel_distance(t) = 1 − ⟨K_0, K_t⟩/(‖K_0‖‖K_t‖)`` (docs/linear.md, eq. (11)).
For ``c = 1``, ``depth = 1`` this is ``K = X(η_w‖a‖²I + η_aWᵀW)Xᵀ``.

**Outputs** (``solve`` over ``time``, ``train`` over ``step``): ``loss``, ``beta`` (dim,
output), ``singular_values`` of β (rank, descending) -- these three also over ``method`` for
``solve`` -- ``kernel_distance``, ``delta_drift``, ``layer_drift`` (depth > 1), ``status``;
``beta_star`` (dim, output; NaN when a data file has none); ``train`` adds ``time`` (step) =
``lr × step``. ``noise`` and ``beta_star`` are ignored with a data file (which may hold its own
``beta_star``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from ...errors import BadInput
from ...numerics.kernel_distance import kernel_distance as shared_kernel_distance
from ...numerics.records import record_grid
from ...params import Param
from ...userfiles import read_npz
from ..base import Batch, Model, Progress, register, rng, var

# -- linear algebra helpers (all accept leading batch axes) -----------------------------------


def _tr(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def end_to_end(Ws: list[np.ndarray], A: np.ndarray) -> np.ndarray:
    """``β = W_1ᵀ ⋯ W_Lᵀ A`` (d×c)."""
    P = Ws[0]
    for W in Ws[1:]:
        P = W @ P
    return _tr(P) @ A


def _prefix_suffix(Ws: list[np.ndarray]) -> tuple[list[np.ndarray | None], list[np.ndarray]]:
    """``Right_l = W_{l−1}⋯W_1`` (None for l = 1) and ``Left_l = W_L⋯W_{l+1}`` (I for l = L)."""
    L = len(Ws)
    right: list[np.ndarray | None] = [None] * L
    acc: np.ndarray | None = None
    for i in range(L):
        right[i] = acc
        acc = Ws[i] if acc is None else Ws[i] @ acc
    h = Ws[0].shape[-2]
    eye = np.broadcast_to(np.eye(h), (*Ws[0].shape[:-2], h, h))
    left: list[np.ndarray] = [eye] * L
    accl = eye
    for i in range(L - 1, -1, -1):
        left[i] = accl
        accl = accl @ Ws[i]
    return right, left


def gradients(
    Ws: list[np.ndarray], A: np.ndarray, G: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """``(∂L/∂W_l, ∂L/∂A)`` given ``G = ∂L/∂β``: ``Left_lᵀ A Gᵀ Right_lᵀ`` and ``P G``."""
    right, left = _prefix_suffix(Ws)
    P = Ws[0] if right[-1] is None else Ws[-1] @ right[-1]
    AGt = A @ _tr(G)  # h×d
    dWs = []
    for i in range(len(Ws)):
        g = _tr(left[i]) @ AGt
        r = right[i]
        if r is not None:
            g = g @ _tr(r)
        dWs.append(g)
    return dWs, P @ G


def conserved_delta(Ws: list[np.ndarray], A: np.ndarray, eta_a: Any, eta_w: Any) -> np.ndarray:
    """``Δ = η_w AAᵀ − η_a W_L W_Lᵀ`` (docs/linear.md, eq. (3)), h×h."""
    ea = np.asarray(eta_a)[..., None, None]
    ew = np.asarray(eta_w)[..., None, None]
    return ew * (A @ _tr(A)) - ea * (Ws[-1] @ _tr(Ws[-1]))


def layer_relations(Ws: list[np.ndarray]) -> list[np.ndarray]:
    """``C_l = W_{l+1}ᵀW_{l+1} − W_l W_lᵀ`` for ``l < L`` (Definition B.7)."""
    return [_tr(Ws[i + 1]) @ Ws[i + 1] - Ws[i] @ _tr(Ws[i]) for i in range(len(Ws) - 1)]


def ntk_factors(
    Ws: list[np.ndarray], A: np.ndarray, eta_a: float, eta_w: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pairs ``(S_j, T_j)`` with ``β̇ = −Σ_j S_j G T_j`` (one per layer), unbatched."""
    right, left = _prefix_suffix(Ws)
    d = Ws[0].shape[-1]
    P = Ws[0] if right[-1] is None else Ws[-1] @ right[-1]
    c = A.shape[-1]
    out = [(eta_a * (P.T @ P), np.eye(c))]
    for i in range(len(Ws)):
        r = right[i]
        S = eta_w * np.eye(d) if r is None else eta_w * (r.T @ r)
        LA = left[i].T @ A
        out.append((S, LA.T @ LA))
    return out


def ntk_inner(
    f1: list[tuple[np.ndarray, np.ndarray]],
    f2: list[tuple[np.ndarray, np.ndarray]],
    Sigma: np.ndarray,
) -> float:
    """``⟨K_1, K_2⟩_F`` with ``K = Σ_j (X S_j Xᵀ) ⊗ T_j`` and ``Σ = XᵀX``."""
    total = 0.0
    for S1, T1 in f1:
        S1S = S1 @ Sigma
        for S2, T2 in f2:
            total += float(np.sum(S1S * (S2 @ Sigma).T)) * float(np.sum(T1 * T2))
    return total


def kernel_distance(
    f0: list[tuple[np.ndarray, np.ndarray]],
    ft: list[tuple[np.ndarray, np.ndarray]],
    Sigma: np.ndarray,
) -> float:
    """``S(0, t) = 1 − ⟨K_0, K_t⟩/(‖K_0‖‖K_t‖)`` (docs/linear.md, eq. (11))."""
    return float(shared_kernel_distance(ntk_inner(f0, ft, Sigma), ntk_inner(f0, f0, Sigma),
                                        ntk_inner(ft, ft, Sigma)))


# -- function-space theory (Theorems 4.1, 4.2, B.6) ---------------------------------------------


def theory_case(delta: float, h: int, c: int, d: int) -> str | None:
    """Which closed function-space flow holds for ``Δ = δI_h`` at depth 1, or None.

    ``"B6"``: δ = 0, or δ > 0 with ``h = c``, or δ < 0 with ``h = d`` (Theorem B.6; Theorem 4.2
    for ``c = 1``). ``"neuron"``: ``h = 1`` otherwise (Theorem 4.1 with one neuron).
    """
    if delta == 0.0 or (delta > 0 and h == c) or (delta < 0 and h == d):
        return "B6"
    if h == 1:
        return "neuron"
    return None


def function_space_factors(
    beta: np.ndarray, delta: float, eta_a: float, eta_w: float, case: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(P_W, P_A)`` with ``β̇ = −(P_W G + G P_A)`` as functions of β (module docstring)."""
    d, c = beta.shape
    U, s, Vt = np.linalg.svd(beta, full_matrices=True)
    g2 = 4.0 * eta_a * eta_w
    if case == "B6":
        sd = np.zeros(d)
        sd[: s.size] = s
        sc = np.zeros(c)
        sc[: s.size] = s
        kd = np.sqrt(delta * delta + g2 * sd * sd)
        kc = np.sqrt(delta * delta + g2 * sc * sc)
        PW = (U * ((kd - delta) / 2.0)) @ U.T
        PA = (Vt.T * ((kc + delta) / 2.0)) @ Vt
        return PW, PA
    kappa = math.sqrt(delta * delta + g2 * s[0] * s[0])
    u, v = U[:, 0], Vt[0]
    return (kappa - delta) / 2.0 * np.outer(u, u), (kappa + delta) / 2.0 * np.outer(v, v)


# -- initialisation -----------------------------------------------------------------------------


def _orthonormal(gen: np.random.Generator, m: int, k: int) -> np.ndarray:
    """``m×k`` with orthonormal columns (QR of a Gaussian matrix, signs fixed): Haar on O(m)."""
    q, r = np.linalg.qr(gen.standard_normal((m, m)))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    return q[:, :k]


def isotropic_magnitudes(
    delta: float, scale: float, eta_a: float, eta_w: float, depth: int
) -> tuple[float, float]:
    """``(ω, α) ≥ 0`` with ``η_w α² − η_a ω² = δ`` and ``ω^L α = scale``."""
    if depth == 1:
        kappa = math.sqrt(delta * delta + 4.0 * eta_a * eta_w * scale * scale)
        u = (kappa - delta) / (2.0 * eta_a)
    else:
        target = eta_w * scale * scale
        lo = max(0.0, -delta / eta_a)

        def f(x: float) -> float:
            return x**depth * (delta + eta_a * x) - target

        hi = max(1.0, 2.0 * lo)
        while f(hi) < 0:
            hi *= 2.0
        u = brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    alpha = math.sqrt(max(delta + eta_a * u, 0.0) / eta_w)
    return math.sqrt(u), alpha


def isotropic_init(
    d: int, h: int, c: int, depth: int, delta: float, scale: float, eta_a: float, eta_w: float,
    gen: np.random.Generator, aligned_to: np.ndarray | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """The isotropic initialisation of the module docstring (``Δ = δI_h``)."""
    if delta > 0 and h > c:
        raise BadInput(f"parameter delta: delta > 0 needs h <= c for an isotropic init (h={h})")
    if delta < 0 and h > d:
        raise BadInput(f"parameter delta: delta < 0 needs h <= d for an isotropic init (h={h})")
    Rs = [_orthonormal(gen, h, h) for _ in range(depth)]
    kd, kc = min(h, d), min(h, c)
    if aligned_to is None:
        U = _orthonormal(gen, d, kd)
        V = _orthonormal(gen, c, kc)
    else:
        Ub, _, Vbt = np.linalg.svd(aligned_to, full_matrices=True)
        U, V = Ub[:, :kd], Vbt.T[:, :kc]
    r = min(h, c, d)
    om, al = isotropic_magnitudes(delta, scale, eta_a, eta_w, depth)
    omega = np.zeros(h)
    alpha = np.zeros(h)
    omega[:r] = om
    alpha[:r] = al
    if delta > 0:
        alpha[r:] = math.sqrt(delta / eta_w)
    elif delta < 0:
        omega[r:] = math.sqrt(-delta / eta_a)
    Ufull = np.zeros((d, h))
    Ufull[:, :kd] = U
    Vfull = np.zeros((c, h))
    Vfull[:, :kc] = V
    Ws = [(Rs[0] * omega) @ Ufull.T]
    for i in range(1, depth):
        Ws.append((Rs[i] * omega) @ Rs[i - 1].T)
    A = (Rs[-1] * alpha) @ Vfull.T
    return Ws, A


def neuron_init(
    d: int, h: int, c: int, delta: float, spread: float, scale: float, eta_a: float,
    eta_w: float, gen: np.random.Generator,
) -> tuple[list[np.ndarray], np.ndarray]:
    """The per-neuron initialisation of the module docstring (``init = "neuron"``, depth 1).

    ``(κ ∓ δ)/2`` are evaluated as ``η_aη_w scale²/((κ ± δ)/2)`` where they would cancel.
    """
    deltas = delta + spread * gen.uniform(-1.0, 1.0, size=h)
    U = gen.standard_normal((h, d))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    V = gen.standard_normal((h, c))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    x = eta_a * eta_w * scale * scale
    kappa = np.hypot(deltas, 2.0 * math.sqrt(x))
    big = 0.5 * (kappa + np.abs(deltas))
    small = x / big
    p = np.where(deltas >= 0, big, small)  # (κ + δ)/2 = η_w r_a²
    q = np.where(deltas >= 0, small, big)  # (κ − δ)/2 = η_a r_w²
    W = np.sqrt(q / eta_a)[:, None] * U
    A = np.sqrt(p / eta_w)[:, None] * V
    return [W], A


def gaussian_init(
    d: int, h: int, c: int, depth: int, sigma_a: float, sigma_w: float, gen: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray]:
    """``A ~ N(0, σ_a²/c)``, ``W_1 ~ N(0, σ_w²/d)``, hidden ``W_l ~ N(0, σ_w²/h)``."""
    Ws = [gen.standard_normal((h, d)) * (sigma_w / math.sqrt(d))]
    for _ in range(1, depth):
        Ws.append(gen.standard_normal((h, h)) * (sigma_w / math.sqrt(h)))
    A = gen.standard_normal((h, c)) * (sigma_a / math.sqrt(c))
    return Ws, A


# -- data ---------------------------------------------------------------------------------------


@dataclass
class Data:
    """Training data of one configuration, with the loss normalisation folded into Σ and b."""

    X: np.ndarray  # n×d
    y: np.ndarray  # n×c
    Sigma: np.ndarray  # XᵀX (/n for the mean loss)
    b: np.ndarray  # Xᵀy (/n for the mean loss)
    norm: float  # 1 (sum) or 1/n (mean): L = norm·½‖Xβ − y‖²
    beta_star: np.ndarray | None  # the teacher (d×c), when known

    def loss(self, beta: np.ndarray) -> np.ndarray:
        """``L(β)`` for β of shape (..., d, c), from the residual (no cancellation)."""
        r = self.X @ beta - self.y
        return 0.5 * self.norm * np.sum(r * r, axis=(-2, -1))


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Read and validate a user data file (``X``, ``y``, optional ``beta_star``)."""
    # a regular file, headers checked before loading, only X, y and beta_star read
    content = read_npz(path, "parameter data", ("X", "y"), ("beta_star",))
    X, y = content["X"], content["y"]
    if y.ndim == 1:
        y = y[:, None]
    if X.ndim != 2 or y.ndim != 2 or X.shape[0] != y.shape[0]:
        raise BadInput(f"parameter data: X must be n×d and y n or n×c (got {X.shape}, {y.shape})")
    content["X"], content["y"] = X, y
    if "beta_star" in content:
        bs = content["beta_star"]
        if bs.ndim == 1 and bs.size == X.shape[1] * y.shape[1]:
            bs = bs.reshape(X.shape[1], -1)
        if bs.shape != (X.shape[1], y.shape[1]):
            raise BadInput(f"parameter data: beta_star must be d×c = {X.shape[1]}×{y.shape[1]}")
        content["beta_star"] = bs
    if not all(np.all(np.isfinite(v)) for v in content.values()):
        raise BadInput(f"parameter data: {path!r} holds non-finite numbers")
    return content


def make_data(point: dict[str, Any], file: dict[str, np.ndarray] | None = None) -> Data:
    """The data of one configuration (module docstring, "Data")."""
    d, c, n, seed = int(point["d"]), int(point["c"]), int(point["n"]), int(point["seed"])
    kind = point["data_kind"]
    if kind == "file":
        if file is None:
            file = load_npz(point["data"])
        X, y = file["X"], file["y"]
        beta_star = file.get("beta_star")
    else:
        gen = rng(seed, "data")
        if kind == "whitened":
            X = _orthonormal(gen, n, d)
        else:
            X = gen.standard_normal((n, d))
        if point.get("beta_star") is not None:
            beta_star = np.asarray(point["beta_star"], dtype=float).reshape(d, c)
        else:
            beta_star = rng(seed, "teacher").standard_normal((d, c)) / math.sqrt(d)
        eps = rng(seed, "noise").standard_normal((n, c))
        y = X @ beta_star + float(point["noise"]) * eps
    norm = 1.0 if point["loss"] == "sum" else 1.0 / X.shape[0]
    return Data(X=X, y=y, Sigma=norm * (X.T @ X), b=norm * (X.T @ y), norm=norm,
                beta_star=beta_star)


# -- the model ----------------------------------------------------------------------------------


def recorded_steps(steps: int, n_records: int) -> np.ndarray:
    """The steps ``train`` records: ``n_records`` evenly spaced steps from 0 to ``steps``,
    rounded, duplicates removed."""
    return record_grid(int(steps), n_records - 1, spacing="linear")


def _unflatten(theta: np.ndarray, d: int, h: int, c: int, depth: int) -> tuple[list, np.ndarray]:
    Ws = [theta[: h * d].reshape(h, d)]
    k = h * d
    for _ in range(1, depth):
        Ws.append(theta[k : k + h * h].reshape(h, h))
        k += h * h
    return Ws, theta[k : k + h * c].reshape(h, c)


def _flatten(Ws: list[np.ndarray], A: np.ndarray) -> np.ndarray:
    return np.concatenate([*(W.ravel() for W in Ws), A.ravel()])


def _teacher_variable(teacher: np.ndarray) -> xr.Variable:
    """β* over (point, dim, output); NaN where the data file holds none, which is not a
    divergence."""
    out = var(("point", "dim", "output"), teacher, "teacher β* (NaN if unknown)")
    out.attrs["nan_meaning"] = "no teacher: the data file holds no beta_star"
    return out


@register
class Linear(Model):
    """Wide and deep linear networks (docs/linear.md); see the module docstring."""

    name: ClassVar[str] = "linear"
    summary: ClassVar[str] = (
        "wide/deep linear network A^T W_L...W_1 x: gradient flow, GD, Theorem 4.2/B.6 theory"
    )
    actions: ClassVar[tuple[str, ...]] = ("solve", "train")
    params: ClassVar[tuple[Param, ...]] = (
        Param("depth", "int", 1, "number L of W layers (1 = two weight layers)", low=1, high=20),
        Param("d", "int", 5, "input dimension", low=1),
        Param("h", "int", 5, "hidden width", low=1),
        Param("c", "int", 1, "output dimension", low=1),
        Param("eta_a", "float", 1.0, "learning rate of the output layer A", low=0,
              low_open=True, batchable=True),
        Param("eta_w", "float", 1.0, "learning rate of every W layer", low=0, low_open=True,
              batchable=True),
        Param("init", "str", "isotropic", "initialisation (neuron: per-neuron δ_k, depth 1)",
              choices=("isotropic", "gaussian", "neuron")),
        Param("delta_spread", "float", 0.0,
              "neuron init: δ_k ~ Unif[δ − delta_spread, δ + delta_spread]", low=0,
              batchable=True),
        Param("delta", "float", 0.0,
              "isotropic init: Δ = η_w AAᵀ − η_a W_L W_Lᵀ = δ I_h; neuron init: centre of δ_k",
              batchable=True),
        Param("scale", "float", 0.1,
              "isotropic init: every non-zero singular value of β₀; neuron init: every ‖β_k‖",
              low=0, low_open=True, batchable=True),
        Param("aligned", "bool", False,
              "isotropic init: singular vectors of β₀ taken from those of Xᵀy (Theorem B.6)"),
        Param("sigma_a", "float", 1.0, "gaussian init: A ~ N(0, sigma_a²/c)", low=0,
              batchable=True),
        Param("sigma_w", "float", 1.0, "gaussian init: W_1 ~ N(0, sigma_w²/d)", low=0,
              batchable=True),
        Param("data_kind", "str", "whitened", "whitened (XᵀX = I), gaussian X, or file (data)",
              choices=("whitened", "gaussian", "file")),
        Param("data", "path", None, ".npz with X (n×d), y (n×c), optional beta_star",
              optional=True),
        Param("n", "int", 20, "number of samples (whitened needs n >= d)", low=1),
        Param("beta_star", "matrix", None, "teacher β* (d×c; a row of d numbers when c = 1)",
              optional=True),
        Param("noise", "float", 0.0, "label noise standard deviation", low=0, batchable=True),
        Param("loss", "str", "sum", "sum: ½‖Xβ−y‖²; mean: ‖Xβ−y‖²/(2n)",
              choices=("sum", "mean")),
        Param("seed", "int", 0, "random seed (data, teacher, noise, init)", low=0),
        Param("t_max", "float", 20.0, "solve: final gradient-flow time", unit="time", low=0,
              low_open=True),
        Param("n_records", "int", 101, "how many points a run records: solve, output times "
              "linspace(0, t_max); train, evenly spaced steps, 0 and the last included",
              low=2),
        Param("rtol", "float", 1e-10, "solve: relative tolerance of DOP853", low=0,
              low_open=True),
        Param("atol", "float", 1e-12, "solve: absolute tolerance of DOP853", low=0,
              low_open=True),
        Param("lr", "float", 1e-2, "train: GD step (time per step)", low=0, low_open=True,
              batchable=True),
        Param("steps", "int", 2000, "train: number of GD steps", low=1),
    )
    aliases: ClassVar[dict[str, dict[str, str]]] = {
        "n_times": {"solve": "n_records"},
        "checkpoints": {"train": "n_records"},
    }
    """The older names of the record count (docs/engine.md, "Records")."""
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "solve": (
            {"d": 3, "h": 3, "n": 4, "t_max": 1.0, "n_records": 5, "delta": -0.5},
            {"d": 3, "h": 3, "n": 4, "t_max": 1.0, "n_records": 5, "delta": 0.0, "eta_a": 0.5},
            {"d": 3, "h": 2, "n": 4, "t_max": 1.0, "n_records": 5, "depth": 2, "seed": 1},
            {"d": 3, "h": 4, "n": 4, "t_max": 1.0, "n_records": 5, "init": "neuron",
             "delta": 1.0, "delta_spread": 0.5},
        ),
        "train": (
            {"d": 3, "h": 3, "n": 4, "steps": 50, "n_records": 5, "delta": -0.5},
            {"d": 3, "h": 3, "n": 4, "steps": 50, "n_records": 5, "delta": 0.0, "noise": 0.1},
            {"d": 3, "h": 3, "c": 2, "n": 4, "steps": 50, "n_records": 5, "init": "gaussian",
             "seed": 1},
        ),
    }

    # -- validation -------------------------------------------------------------------------
    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """A ``data`` file makes ``data_kind = file`` and sets ``n``, ``d`` and ``c`` to its
        sizes; a 1×d ``beta_star`` with ``c = 1`` becomes the d×1 column; ``train`` records
        at most ``steps + 1`` steps (``n_records``)."""
        if values.get("data") is not None:
            values["data_kind"] = "file"
        if values["data_kind"] == "file" and values.get("data") is not None:
            content = load_npz(values["data"])
            values["n"], values["d"] = content["X"].shape
            values["c"] = content["y"].shape[1]
        bs = values.get("beta_star")
        if (bs is not None and values["data_kind"] != "file" and values["c"] == 1
                and bs.shape == (1, values["d"])):
            values["beta_star"] = bs.T.copy()
        if action == "train" and values["n_records"] > values["steps"] + 1:
            values["n_records"] = values["steps"] + 1

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        if values["data_kind"] == "file" and values.get("data") is None:
            raise BadInput("parameter data: data_kind=file needs a data=FILE.npz")
        d, h, c = values["d"], values["h"], values["c"]
        if values["data_kind"] == "whitened" and values["n"] < d:
            raise BadInput(f"parameter n: whitened data (XᵀX = I_d) needs n >= d = {d}")
        bs = values.get("beta_star")
        if bs is not None and values["data_kind"] == "file":
            raise BadInput("parameter beta_star: with a data file, store beta_star in the file")
        if values["aligned"] and values["init"] != "isotropic":
            raise BadInput("parameter aligned: applies to init=isotropic only")
        if values["init"] == "neuron" and values["depth"] != 1:
            raise BadInput(
                f"parameter depth: init=neuron is defined for depth = 1 only, got "
                f"{values['depth']}"
            )
        if values.get("delta_spread", 0.0) != 0.0 and values["init"] != "neuron":
            raise BadInput("parameter delta_spread: applies to init=neuron only")
        if bs is not None and bs.shape != (d, c):
            raise BadInput(f"parameter beta_star: expected a {d}×{c} matrix, got {bs.shape}")
        if values["init"] == "isotropic":
            delta = values["delta"]
            if delta > 0 and h > c:
                raise BadInput(
                    f"parameter delta: {delta:g} > 0 needs h <= c for an isotropic init "
                    f"(Δ = δI_h forces rank A = h); got h={h}, c={c}"
                )
            if delta < 0 and h > d:
                raise BadInput(
                    f"parameter delta: {delta:g} < 0 needs h <= d for an isotropic init "
                    f"(Δ = δI_h forces rank W = h); got h={h}, d={d}"
                )

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Float64 throughout. Over the ``T`` output times (``solve``: ``n_records``; ``train``:
        the recorded steps of :func:`recorded_steps`) and, for ``solve``, the ``M`` methods (2
        for the isotropic depth-1 network, else 1): loss (M, T), beta (M, T, d, c) and
        singular_values (M, T, min(d, c)); over ``T``: kernel_distance, delta_drift,
        layer_drift (``depth > 1``) and, for ``train``, time; beta_star (d, c). With a data
        file, ``d`` and ``c`` are the file's (:meth:`check` fills them in)."""
        d, c, depth = int(values["d"]), int(values["c"]), int(values["depth"])
        if action == "solve":
            T = int(values["n_records"])
            M = 2 if values["init"] == "isotropic" and depth == 1 else 1
        else:
            T = recorded_steps(int(values["steps"]), int(values["n_records"])).size
            M = 1
        per_time = M * (1 + d * c + min(d, c)) + 2 + (1 if depth > 1 else 0)
        if action == "train":
            per_time += 1
        return 8.0 * (T * per_time + d * c)

    @classmethod
    def _cost(cls, values: Any) -> float:
        size = values["depth"] * values["h"] ** 2 + values["h"] * (values["d"] + values["c"])
        return float(size) * (1.0 + values["depth"]) / 100.0

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration, float64 throughout, in units of the
        ``p = h·d + (L−1)·h² + h·c`` parameters (``L`` = ``depth``):

        * the data: ``whitened`` draws an ``n × n`` Gaussian matrix and keeps its QR factor
          (:func:`_orthonormal`), about ``5 n²`` values at the peak; ``gaussian`` and a file
          ``2 n (d + c)``;
        * the ``isotropic`` initialisation: the QR of ``h × h`` (one per layer) and of ``d × d``
          and ``c × c`` Gaussian matrices, ``3 (h² + d² + c²)``;
        * the kernel distance's factors (:func:`ntk_factors`): ``d × d`` matrices per layer
          and their products with ``Σ = XᵀX``, ``5 d²`` with ``Σ``;
        * ``train``: the parameters, their gradients, the prefix and suffix products and the
          next step's parameters, ``7 p``; ``solve``: DOP853's stages and state (``20 p``)
          and the ``n_records`` states ``solve_ivp`` keeps at its output times, twice while
          it gathers them (``2 n_records p``).

        The outputs are :meth:`_output_bytes`. Checked against the measured peak by
        tests/models/test_memory.py."""
        d, h, c, n, L = (int(values[k]) for k in ("d", "h", "c", "n", "depth"))
        p = h * d + (L - 1) * h * h + h * c
        data = 5 * n * n if values["data_kind"] == "whitened" else 2 * n * (d + c)
        init = 3 * (h * h + d * d + c * c) if values["init"] == "isotropic" else 0
        run = 7 * p if action == "train" else (20 + 2 * int(values["n_records"])) * p
        return 8.0 * (data + init + 5 * d * d + run)

    # -- shared pieces ----------------------------------------------------------------------
    @staticmethod
    def _file(batch: Batch) -> dict[str, np.ndarray] | None:
        return load_npz(batch["data"]) if batch["data_kind"] == "file" else None

    @staticmethod
    def _init(point: dict[str, Any], data: Data) -> tuple[list[np.ndarray], np.ndarray]:
        gen = rng(int(point["seed"]), "init")
        d, h, c, depth = (int(point[k]) for k in ("d", "h", "c", "depth"))
        if point["init"] == "neuron":
            return neuron_init(d, h, c, float(point["delta"]), float(point["delta_spread"]),
                               float(point["scale"]), float(point["eta_a"]),
                               float(point["eta_w"]), gen)
        if point["init"] == "gaussian":
            return gaussian_init(d, h, c, depth, float(point["sigma_a"]),
                                 float(point["sigma_w"]), gen)
        return isotropic_init(
            d, h, c, depth, float(point["delta"]), float(point["scale"]),
            float(point["eta_a"]), float(point["eta_w"]), gen,
            aligned_to=data.b if point["aligned"] else None,
        )

    @staticmethod
    def _theory_method(batch: Batch) -> bool:
        return batch["init"] == "isotropic" and int(batch["depth"]) == 1

    # -- gradient flow ----------------------------------------------------------------------
    def solve(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        d, c, depth = (int(batch[k]) for k in ("d", "c", "depth"))
        times = record_grid(float(batch["t_max"]), int(batch["n_records"]) - 1, spacing="linear")
        methods = ["numeric", "theory"] if self._theory_method(batch) else ["numeric"]
        B, T, M = batch.size, times.size, len(methods)
        beta = np.full((B, M, T, d, c), np.nan)
        kd = np.full((B, T), np.nan)
        ddrift = np.full((B, T), np.nan)
        ldrift = np.full((B, T), np.nan)
        status = np.zeros(B, dtype=np.int8)
        teacher = np.full((B, d, c), np.nan)
        loss = np.full((B, M, T), np.nan)
        file = self._file(batch)
        for i in range(B):
            pt = batch.point(i)
            data = make_data(pt, file)
            if data.beta_star is not None:
                teacher[i] = data.beta_star
            Ws0, A0 = self._init(pt, data)
            ok = self._numeric_flow(pt, data, Ws0, A0, times, beta[i, 0], kd[i], ddrift[i],
                                    ldrift[i])
            if M == 2:
                self._theory_flow(pt, data, end_to_end(Ws0, A0), times, beta[i, 1])
            loss[i] = data.loss(beta[i])
            # the numeric rows decide the status: the theory's are NaN where no closed
            # function-space flow holds (their nan_meaning), which is no divergence
            status[i] = 0 if ok and np.isfinite(loss[i, 0]).all() else 1
            if progress is not None:
                progress((i + 1) / B)
        sv = np.linalg.svd(np.nan_to_num(beta), compute_uv=False)
        sv[np.isnan(beta).any(axis=(-2, -1))] = np.nan
        ds = self._dataset(
            "time", times, {"long_name": "gradient-flow time", "units": "time"}, methods,
            loss, beta, sv, kd, ddrift, ldrift if depth > 1 else None, status,
        )
        if M == 2:
            for name in ("loss", "beta", "singular_values"):
                ds[name].attrs["nan_meaning"] = (
                    "method = theory: no closed function-space flow holds for this delta, h, "
                    "c and d (docs/linear.md); the numeric rows' failures set status")
        ds["beta_star"] = _teacher_variable(teacher)
        return ds

    @staticmethod
    def _numeric_flow(
        pt: dict[str, Any], data: Data, Ws0: list[np.ndarray], A0: np.ndarray,
        times: np.ndarray, beta: np.ndarray, kd: np.ndarray, ddrift: np.ndarray,
        ldrift: np.ndarray,
    ) -> bool:
        """Parameter-space gradient flow of one configuration; fills the output rows in place.

        Returns False if the integration failed (the rows after the failure stay NaN).
        """
        d, h, c, depth = (int(pt[k]) for k in ("d", "h", "c", "depth"))
        ea, ew = float(pt["eta_a"]), float(pt["eta_w"])

        def rhs(_t: float, theta: np.ndarray) -> np.ndarray:
            Ws, A = _unflatten(theta, d, h, c, depth)
            G = data.Sigma @ end_to_end(Ws, A) - data.b
            dWs, dA = gradients(Ws, A, G)
            return -_flatten([ew * g for g in dWs], ea * dA)

        n_w = h * d

        def rhs_shallow(_t: float, theta: np.ndarray) -> np.ndarray:
            # depth 1: the same products as `rhs` without the identity factors
            W = theta[:n_w].reshape(h, d)
            A = theta[n_w:].reshape(h, c)
            G = data.Sigma @ (W.T @ A) - data.b
            out = np.empty_like(theta)
            out[:n_w] = (-ew * (A @ G.T)).ravel()
            out[n_w:] = (-ea * (W @ G)).ravel()
            return out

        sol = solve_ivp(rhs_shallow if depth == 1 else rhs, (0.0, times[-1]),
                        _flatten(Ws0, A0), method="DOP853", t_eval=times,
                        rtol=float(pt["rtol"]), atol=float(pt["atol"]))
        ok = bool(sol.success) and bool(np.all(np.isfinite(sol.y)))
        f0 = ntk_factors(Ws0, A0, ea, ew)
        D0 = conserved_delta(Ws0, A0, ea, ew)
        C0 = layer_relations(Ws0)
        for j in range(sol.y.shape[1]):
            if not np.all(np.isfinite(sol.y[:, j])):
                break
            Ws, A = _unflatten(sol.y[:, j], d, h, c, depth)
            beta[j] = end_to_end(Ws, A)
            kd[j] = kernel_distance(f0, ntk_factors(Ws, A, ea, ew), data.Sigma)
            ddrift[j] = np.linalg.norm(conserved_delta(Ws, A, ea, ew) - D0)
            if depth > 1:
                ldrift[j] = max(float(np.linalg.norm(Cl - Cl0))
                                for Cl, Cl0 in zip(layer_relations(Ws), C0, strict=True))
        return ok

    @staticmethod
    def _theory_flow(
        pt: dict[str, Any], data: Data, beta0: np.ndarray, times: np.ndarray, beta: np.ndarray
    ) -> None:
        """Function-space flow β̇ = −(P_W G + G P_A) where it holds; fills ``beta`` in place."""
        d, h, c = (int(pt[k]) for k in ("d", "h", "c"))
        delta, ea, ew = float(pt["delta"]), float(pt["eta_a"]), float(pt["eta_w"])
        case = theory_case(delta, h, c, d)
        if case is None:
            return

        def rhs(_t: float, x: np.ndarray) -> np.ndarray:
            b = x.reshape(d, c)
            G = data.Sigma @ b - data.b
            PW, PA = function_space_factors(b, delta, ea, ew, case)
            return -(PW @ G + G @ PA).ravel()

        sol = solve_ivp(rhs, (0.0, times[-1]), beta0.ravel(), method="DOP853", t_eval=times,
                        rtol=float(pt["rtol"]), atol=float(pt["atol"]))
        k = sol.y.shape[1]
        beta[:k] = sol.y.T.reshape(k, d, c)

    # -- gradient descent -------------------------------------------------------------------
    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        d, c, depth = (int(batch[k]) for k in ("d", "c", "depth"))
        steps = int(batch["steps"])
        record = recorded_steps(steps, int(batch["n_records"]))
        B, T = batch.size, record.size
        file = self._file(batch)
        datas = [make_data(batch.point(i), file) for i in range(B)]
        inits = [self._init(batch.point(i), datas[i]) for i in range(B)]
        Ws = [np.stack([ini[0][l] for ini in inits]) for l in range(depth)]
        A = np.stack([ini[1] for ini in inits])
        Sigma = np.stack([dt.Sigma for dt in datas])
        bvec = np.stack([dt.b for dt in datas])
        ea = batch.column("eta_a").astype(float)[:, None, None]
        ew = batch.column("eta_w").astype(float)[:, None, None]
        lr = batch.column("lr").astype(float)[:, None, None]
        f0 = [ntk_factors([W[i] for W in Ws], A[i], float(ea[i, 0, 0]), float(ew[i, 0, 0]))
              for i in range(B)]
        D0 = conserved_delta(Ws, A, ea[:, 0, 0], ew[:, 0, 0])
        C0 = layer_relations(Ws)
        loss = np.full((B, T), np.nan)
        beta = np.full((B, T, d, c), np.nan)
        kd = np.full((B, T), np.nan)
        ddrift = np.full((B, T), np.nan)
        ldrift = np.full((B, T), np.nan)
        status = np.zeros(B, dtype=np.int8)
        alive = np.ones(B, dtype=bool)
        rec_i = 0
        for step in range(steps + 1):
            bt = end_to_end(Ws, A)
            ok = np.all(np.isfinite(bt), axis=(-2, -1)) & (np.abs(bt).max(axis=(-2, -1)) < 1e100)
            newly = alive & ~ok
            if np.any(newly):  # diverged: flag, and park the weights at 0 (outputs stay NaN)
                status[newly] = 1
                alive &= ok
                Ws = [np.where(alive[:, None, None], W, 0.0) for W in Ws]
                A = np.where(alive[:, None, None], A, 0.0)
                bt = end_to_end(Ws, A)
            if step == record[rec_i]:
                for i in np.flatnonzero(alive):
                    Wi = [W[i] for W in Ws]
                    beta[i, rec_i] = bt[i]
                    loss[i, rec_i] = datas[i].loss(bt[i])
                    kd[i, rec_i] = kernel_distance(
                        f0[i], ntk_factors(Wi, A[i], float(ea[i, 0, 0]), float(ew[i, 0, 0])),
                        datas[i].Sigma)
                ddrift[:, rec_i] = np.linalg.norm(
                    conserved_delta(Ws, A, ea[:, 0, 0], ew[:, 0, 0]) - D0, axis=(-2, -1))
                if depth > 1:
                    ldrift[:, rec_i] = np.max(
                        [np.linalg.norm(Cl - Cl0, axis=(-2, -1))
                         for Cl, Cl0 in zip(layer_relations(Ws), C0, strict=True)], axis=0)
                ddrift[~alive, rec_i] = np.nan
                ldrift[~alive, rec_i] = np.nan
                rec_i += 1
                if progress is not None:
                    progress(step / steps)
            if step == steps:
                break
            G = Sigma @ bt - bvec
            dWs, dA = gradients(Ws, A, G)
            keep = alive[:, None, None]
            Ws = [np.where(keep, W - (lr * ew) * g, W) for W, g in zip(Ws, dWs, strict=True)]
            A = np.where(keep, A - (lr * ea) * dA, A)
        sv = np.linalg.svd(np.nan_to_num(beta), compute_uv=False)
        sv[np.isnan(beta).any(axis=(-2, -1))] = np.nan
        ds = self._dataset(
            "step", record, {"long_name": "gradient-descent step"}, None,
            loss, beta, sv, kd, ddrift, None if depth == 1 else ldrift, status,
        )
        ds["time"] = var(("point", "step"), lr[:, 0] * record[None, :].astype(float),
                         "gradient-flow time lr × step", "time")
        teacher = np.full((B, d, c), np.nan)
        for k, dt in enumerate(datas):
            if dt.beta_star is not None:
                teacher[k] = dt.beta_star
        ds["beta_star"] = _teacher_variable(teacher)
        return ds

    # -- output -----------------------------------------------------------------------------
    @staticmethod
    def _dataset(
        tdim: str, tcoord: np.ndarray, tattrs: dict[str, str], methods: list[str] | None,
        loss: np.ndarray, beta: np.ndarray, sv: np.ndarray, kd: np.ndarray,
        ddrift: np.ndarray, ldrift: np.ndarray | None, status: np.ndarray,
    ) -> xr.Dataset:
        lead: tuple[str, ...] = ("point", "method", tdim) if methods else ("point", tdim)
        variables = {
            "loss": var(lead, loss, "training loss"),
            "beta": var((*lead, "dim", "output"), beta, "end-to-end linear map β"),
            "singular_values": var((*lead, "rank"), sv, "singular values of β (descending)"),
            "kernel_distance": var(("point", tdim), kd, "NTK distance 1 − cos(K_0, K_t)"),
            "delta_drift": var(("point", tdim), ddrift, "‖Δ(t) − Δ(0)‖_F"),
            "status": var(("point",), status, "0 ok, 1 diverged"),
        }
        if ldrift is not None:
            variables["layer_drift"] = var(
                ("point", tdim), ldrift,
                "max_l ‖C_l(t) − C_l(0)‖_F, C_l = W_{l+1}ᵀW_{l+1} − W_lW_lᵀ")
        coords: dict[str, Any] = {
            tdim: var((tdim,), tcoord, **tattrs),
            "dim": var(("dim",), np.arange(beta.shape[-2]), "input dimension index"),
            "output": var(("output",), np.arange(beta.shape[-1]), "output index"),
            "rank": var(("rank",), np.arange(sv.shape[-1]), "singular value index"),
        }
        if methods:
            coords["method"] = var(("method",), np.array(methods), "trajectory source")
        return xr.Dataset(variables, coords=coords)
