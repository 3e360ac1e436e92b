r"""Geometry of a two-layer network at a checkpoint: teacher alignment, direction change,
preconditioner drift, and (for ``d = 2``) the activation partition of the circle.

Pure NumPy functions of one configuration's parameters ``W`` (h, d), ``a`` (h,) at a checkpoint,
its initial ``W0``, ``a0`` and the problem's teacher; any training backend can call them.
Mathematics: docs/two-layer.md, eqs. (10)–(13) (Kunin et al. 2024, Fig. 1a, §5, Fig. 5a).

* ``teacher_alignment`` :math:`A = \sum_k m_k c_k / \sum_k m_k` with :math:`m_k = |a_k|\|w_k\|`
  and :math:`c_k = \max_j [\cos(w_k, w^*_j)\,\mathbb 1[\operatorname{sgn} a_k = a^*_j]]_+`;
* ``direction_change``: the :math:`m_k`-weighted mean angle (degrees) between :math:`w_k(t)` and
  :math:`w_k(0)`;
* ``preconditioner_drift`` :math:`\max_k \|M_k(t) - M_k(0)\|_F / \|M_k(0)\|_F`,
  :math:`M_k = a_k^2 I + w_k w_k^\top` (unit learning rates);
* on :math:`G` grid angles :math:`\varphi_g = 2\pi g/G`, :math:`u_g = (\cos\varphi_g,
  \sin\varphi_g)`: ``partition_change`` (fraction of (g, k) whose activation
  :math:`\mathbb 1[w_k^\top u_g > 0]` differs from initialisation), ``n_regions`` (pattern changes
  between neighbouring grid angles, around the circle), ``output_sup``
  :math:`\max_g |f(u_g)|`, the surface :math:`f(u_g)` and its ``parity``
  :math:`(\sum_k \mathbb 1[w_k^\top u_g > 0]) \bmod 2`.
"""

from __future__ import annotations

import numpy as np

PARTITION_GRID = 720
"""Number of grid angles on the circle for the partition outputs (``d = 2``)."""


def circle_grid(count: int = PARTITION_GRID) -> tuple[np.ndarray, np.ndarray]:
    """Angles ``φ_g = 2πg/count`` and the unit vectors ``u_g`` (count, 2)."""
    phi = 2.0 * np.pi * np.arange(count) / count
    return phi, np.stack([np.cos(phi), np.sin(phi)], axis=1)


def neuron_mass(W: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``m_k = |a_k| ‖w_k‖`` (h,)."""
    return np.abs(a) * np.linalg.norm(W, axis=-1)


def teacher_alignment(W: np.ndarray, a: np.ndarray, teacher_w: np.ndarray,
                      teacher_a: np.ndarray) -> float:
    """``A = Σ m_k c_k / Σ m_k`` (module docstring); NaN when every ``m_k`` is 0."""
    m = neuron_mass(W, a)
    norms = np.linalg.norm(W, axis=1)
    tn = np.linalg.norm(teacher_w, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = (W @ teacher_w.T) / (norms[:, None] * tn[None, :])
    same = np.sign(a)[:, None] == np.sign(teacher_a)[None, :]
    c = np.max(np.where(same & np.isfinite(cos), np.maximum(cos, 0.0), 0.0), axis=1)
    total = float(m.sum())
    return float(m @ c) / total if total > 0 else float("nan")


def direction_change(W: np.ndarray, a: np.ndarray, W0: np.ndarray) -> float:
    """The ``m_k(t)``-weighted mean angle in degrees between ``w_k(t)`` and ``w_k(0)``."""
    m = neuron_mass(W, a)
    n, n0 = np.linalg.norm(W, axis=1), np.linalg.norm(W0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        u, u0 = W / n[:, None], W0 / n0[:, None]
    # 2 atan2(|u - u0|, |u + u0|): exact 0 for equal directions, accurate at small angles
    ang = np.degrees(2.0 * np.arctan2(np.linalg.norm(u - u0, axis=1),
                                      np.linalg.norm(u + u0, axis=1)))
    ang = np.where(np.isfinite(ang), ang, 0.0)  # a zero neuron has no direction (and m = 0)
    total = float(m.sum())
    return float(m @ ang) / total if total > 0 else float("nan")


def preconditioner_drift(W: np.ndarray, a: np.ndarray, W0: np.ndarray, a0: np.ndarray
                         ) -> float:
    r"""``max_k ‖M_k(t) − M_k(0)‖_F / ‖M_k(0)‖_F`` with ``M_k = a_k² I + w_k w_kᵀ``, from the
    closed forms :math:`\|\alpha I + ww^\top\|_F^2 = d\alpha^2 + 2\alpha\|w\|^2 + \|w\|^4` and
    :math:`\|ww^\top - vv^\top\|_F^2 = \|w\|^4 + \|v\|^4 - 2(w^\top v)^2`."""
    d = W.shape[1]
    al, al0 = a * a, a0 * a0
    q, q0 = np.sum(W * W, axis=1), np.sum(W0 * W0, axis=1)
    cross = np.sum(W * W0, axis=1)
    dal = al - al0
    diff2 = d * dal * dal + 2.0 * dal * (q - q0) + q * q + q0 * q0 - 2.0 * cross * cross
    norm02 = d * al0 * al0 + 2.0 * al0 * q0 + q0 * q0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.sqrt(np.maximum(diff2, 0.0) / norm02)
    return float(np.max(ratio))


def active(W: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Activation pattern ``1[w_kᵀ u_g > 0]`` (G, h) on the grid ``U`` (G, d)."""
    return (U @ W.T) > 0.0


def partition(W: np.ndarray, a: np.ndarray, W0: np.ndarray, leak: float, U: np.ndarray
              ) -> dict[str, float | np.ndarray]:
    """``partition_change``, ``n_regions``, ``output_sup``, ``surface`` (G,) and ``parity`` (G,)
    on the grid ``U`` (module docstring)."""
    Z = U @ W.T
    act = Z > 0.0
    act0 = active(W0, U)
    f = np.maximum(Z, leak * Z) @ a
    changes = np.any(act != np.roll(act, -1, axis=0), axis=1)
    return {
        "partition_change": float(np.count_nonzero(act != act0)) / act.size,
        "n_regions": float(np.count_nonzero(changes)),
        "output_sup": float(np.max(np.abs(f))),
        "surface": f,
        "parity": (np.count_nonzero(act, axis=1) % 2).astype(np.int8),
    }


class GeometryRecorder:
    """The geometry outputs of a batch over its checkpoints (any backend): call
    :meth:`record` with each configuration's float64 ``W`` (h, d), ``a`` (h,) at checkpoint
    ``j``, then :meth:`variables` for the dataset's variables.

    ``teacher`` is ``(teacher_w, teacher_a)`` (one teacher (k, d), (k,) for the batch, or
    each configuration's, (B, k, d), (B, k)) or None (no teacher: data not from a teacher);
    partition outputs are recorded when ``d = 2``, the surface and parity with
    ``save_surface``.
    """

    def __init__(self, W0: np.ndarray, a0: np.ndarray, leak: np.ndarray, n_ck: int,
                 teacher: tuple[np.ndarray, np.ndarray] | None, save_surface: bool) -> None:
        B, _, d = W0.shape
        self.W0 = np.asarray(W0, dtype=np.float64)
        self.a0 = np.asarray(a0, dtype=np.float64)
        self.leak = np.asarray(leak, dtype=np.float64)
        self.teacher = None if teacher is None else (
            np.broadcast_to(teacher[0], (B, *np.shape(teacher[0])[-2:])),
            np.broadcast_to(teacher[1], (B, np.shape(teacher[1])[-1])))
        self.planar = d == 2
        self.save_surface = save_surface and self.planar
        self.phi, self.U = circle_grid()
        names = ["direction_change", "preconditioner_drift"]
        if teacher is not None:
            names.append("teacher_alignment")
        if self.planar:
            names += ["partition_change", "n_regions", "output_sup"]
        self.out = {name: np.full((B, n_ck), np.nan) for name in names}
        if self.save_surface:
            self.surface = np.full((B, n_ck, self.phi.size), np.nan)
            self.parity = np.full((B, n_ck, self.phi.size), -1, dtype=np.int8)

    def record(self, i: int, j: int, W: np.ndarray, a: np.ndarray) -> None:
        o = self.out
        o["direction_change"][i, j] = direction_change(W, a, self.W0[i])
        o["preconditioner_drift"][i, j] = preconditioner_drift(W, a, self.W0[i], self.a0[i])
        if self.teacher is not None:
            o["teacher_alignment"][i, j] = teacher_alignment(W, a, self.teacher[0][i],
                                                             self.teacher[1][i])
        if self.planar:
            part = partition(W, a, self.W0[i], float(self.leak[i]), self.U)
            for name in ("partition_change", "n_regions", "output_sup"):
                o[name][i, j] = part[name]
            if self.save_surface:
                self.surface[i, j] = part["surface"]
                self.parity[i, j] = part["parity"]

    def record_rows(self, j: int, rows: np.ndarray, W: np.ndarray, a: np.ndarray) -> None:
        """Checkpoint ``j`` of the batch positions ``rows`` (W (r, h, d), a (r, h))."""
        for row, i in enumerate(rows):
            self.record(int(i), j, W[row], a[row])

    def variables(self) -> tuple[dict[str, object], dict[str, object]]:
        """(data variables, coordinates) for the dataset."""
        from ..base import var

        P = ("point", "step")
        o = self.out
        text = {
            "direction_change": ("|a_k| |w_k|-weighted mean angle between w_k(t) and w_k(0)",
                                 "degrees"),
            "preconditioner_drift": ("max_k |M_k(t) - M_k(0)|_F / |M_k(0)|_F, "
                                     "M_k = a_k^2 I + w_k w_k^T", ""),
            "teacher_alignment": ("|a_k| |w_k|-weighted alignment of the neurons with the "
                                  "teacher neurons of their sign", ""),
            "partition_change": ("fraction of (grid angle, neuron) activations differing from "
                                 "initialisation", ""),
            "n_regions": ("number of activation-pattern changes around the circle", "regions"),
            "output_sup": ("max over the circle of |f(x)|", ""),
        }
        data: dict[str, object] = {name: var(P, o[name], *text[name]) for name in o}
        coords: dict[str, object] = {}
        if self.teacher is not None:
            tw, ta = self.teacher
            data["teacher_W"] = var(("point", "teacher", "dim"), tw.copy(),
                                    "teacher first-layer weights w*_j (unit rows)")
            data["teacher_a"] = var(("point", "teacher"), ta.copy(), "teacher readouts a*_j")
        if self.save_surface:
            data["surface"] = var(("point", "step", "angle"), self.surface,
                                  "network output f(cos phi, sin phi) on the circle")
            data["parity"] = var(("point", "step", "angle"), self.parity,
                                 "parity of the number of active neurons (-1: not computed)")
        if self.save_surface:
            coords["angle"] = var(("angle",), self.phi, "angle phi on the circle", "radians")
        return data, coords
