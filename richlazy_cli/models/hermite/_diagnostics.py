"""Diagnostics of multi-task Hermite runs: the plateau the recovered tasks predict, the
neurons that co-learn, and the decoupling measurements of Ren et al. 2025 (§3.2, Lemma B.1).

Pure functions over a run's outputs (docs/claims.md §Ren; docs/hermite-sgd.md §3, §5–6):

* **Plateaus.** The greedy rule (docs/hermite-sgd.md, eq. (8)) predicts that a width-``m``
  student learns the ``min(m, P)`` tasks it pairs, leaving ``½ (Σ_j c_j²) Σ_{p unpaired}
  a_p²``. When a neuron co-learns (it settles on a mixture of teachers, or takes a teacher
  other than its greedy one) a different set of tasks is recovered. The co-learning-aware
  prediction uses the tasks actually recovered: ``½ (Σ_j c_j²) Σ_{p not recovered} a_p²``.
* **Co-learning neurons.** At the final state, neuron ``k`` has squared overlaps
  ``cos²_kp = ⟨v̄_k, e_p⟩²``. It *recovered* ``p`` when ``cos²_kp ≥ 0.9``; it is
  *diverted* when that ``p`` is not its greedy teacher, *spare* when the greedy rule paired
  it with none (m > P: it shares a learned direction); it *co-learns* when two or more
  teachers hold ``cos²_kp ≥ mix`` (default 0.1) and none reaches 0.9; *as greedy* and
  *idle* complete the labels.
* **Decoupling.** For teacher ``q`` with winner ``k_q`` recovered at ``t_q``, the norm phase
  lasts ``τ_q = ln(a_q/σ0²)/(4 a_q)`` (logistic growth of ‖v‖², h4). The competitors are the
  neurons ``j ≠ k_q``. *Before recovery*: ``max_{j, t ≤ t_q} cos²_jq(t)/cos²_jq(0)``.
  *After recovery* (the paper's "after" is measured from ``t_q + 2τ_q``, once the winner's
  norm has settled): ``max_{j, t ≥ t_q+2τ_q} cos²_jq(t)/max(cos²_jq(t_q+2τ_q), cos²_jq(0))``
  (a competitor that has meanwhile taken another teacher sits at cos²_jq ≈ 1e-16, whose
  ratios are round-off: the initial overlap is the floor of the reference). The lemma's
  conditions are reported as the ratios ``a_min/d^{-0.3}`` and ``a_min P^{1/2}/d^{-0.8}``
  (both must be ≫ 1).
* **Time law.** The idealised loss ``loss_theory`` = ``½ (Σ_j c_j²) Σ_p a_p² 1[t < t̂_p]``
  (the greedy times t̂_p of the run's own initial overlaps) is the time law of Prop. 2.2 and
  of its heavy-tail remark. How late a flow follows it is read horizontally: at each loss
  level ℓ, ``t(L ≤ ℓ)`` measured against ``t(L_ideal ≤ ℓ)``. Their ratio → 1 as d grows when
  the law holds asymptotically; their difference is the d-independent norm phase (of order
  τ_p), which the search time t̂_p ∝ d outgrows (docs/claims.md §Ren heavy-tail time law).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

RECOVERED = 0.9
MIX = 0.1


def plateau(a: np.ndarray, learned: np.ndarray, c: np.ndarray | None = None) -> float:
    """``½ (Σ_{j≥1} c_j²) Σ_p a_p² 1[not learned_p]`` (h4: Σ c_j² = 1)."""
    scale = 1.0 if c is None else float(np.sum(np.asarray(c)[1:] ** 2))
    a = np.asarray(a, dtype=float)
    return 0.5 * scale * float(np.sum(a[~np.asarray(learned, bool)] ** 2))


def plateau_predictions(a: np.ndarray, t_recover: np.ndarray, t_recover_theory: np.ndarray,
                        c: np.ndarray | None = None) -> dict[str, float]:
    """The greedy plateau (tasks the greedy rule pairs, finite ``t_recover_theory``) and the
    co-learning-aware one (tasks actually recovered, finite ``t_recover``)."""
    return {"greedy": plateau(a, np.isfinite(t_recover_theory), c),
            "recovered": plateau(a, np.isfinite(t_recover), c)}


def neuron_roles(V: np.ndarray, P: int, winner_theory: np.ndarray, mix: float = MIX
                 ) -> list[dict[str, Any]]:
    """One row per neuron of the final weights ``V`` (m, d): its greedy teacher (1-based, 0:
    none), its squared overlaps above ``mix`` and its role (``as greedy``, ``diverted``,
    ``spare``, ``co-learning``, ``idle``; see the module docstring)."""
    V = np.asarray(V, dtype=float)
    r2 = np.maximum(np.einsum("kd,kd->k", V, V), 1e-300)
    cos2 = V[:, :P] ** 2 / r2[:, None]
    greedy = np.zeros(V.shape[0], np.int64)
    for p, k in enumerate(np.asarray(winner_theory)):
        if k >= 0:
            greedy[k] = p + 1
    rows = []
    for k in range(V.shape[0]):
        big = np.flatnonzero(cos2[k] >= mix)
        best = int(np.argmax(cos2[k]))
        if cos2[k, best] >= RECOVERED:
            role = ("as greedy" if greedy[k] == best + 1
                    else "spare" if greedy[k] == 0 else "diverted")
        elif big.size >= 2:
            role = "co-learning"
        else:
            role = "idle"
        rows.append({"neuron": k, "greedy_teacher": int(greedy[k]),
                     "overlaps": {int(p) + 1: round(float(cos2[k, p]), 3) for p in big},
                     "role": role})
    return rows


def co_learning_neurons(V: np.ndarray, P: int, winner_theory: np.ndarray,
                        mix: float = MIX) -> list[dict[str, Any]]:
    """The rows of :func:`neuron_roles` whose role is ``co-learning`` or ``diverted``."""
    return [r for r in neuron_roles(V, P, winner_theory, mix)
            if r["role"] in ("co-learning", "diverted")]


def norm_phase(a: float, sigma0: float) -> float:
    """``τ = ln(a/σ0²)/(4a)``: the logistic growth time of ‖v‖² from σ0² to ≈ a (h4)."""
    return math.log(a / sigma0**2) / (4 * a)


def decoupling(times: np.ndarray, V: np.ndarray, a: np.ndarray, t_recover: np.ndarray,
               winner: np.ndarray, sigma0: float) -> dict[str, Any]:
    """The competitors' growth before and after recovery (module docstring) from saved
    weights ``V`` (time, neuron, dim). Per recovered teacher with a checkpoint after
    ``t_q + 2τ_q``: ``before`` and ``after`` ratios; ``max_before``/``max_after`` over them.
    Teachers without such a checkpoint are listed in ``not_settled``, never dropped
    silently."""
    times = np.asarray(times, dtype=float)
    V = np.asarray(V, dtype=float)
    P = a.size
    d = V.shape[2]
    r2 = np.maximum(np.einsum("tkd,tkd->tk", V, V), 1e-300)
    cos2 = V[:, :, :P] ** 2 / r2[:, :, None]  # (time, neuron, teacher)
    before, after, level, not_settled = {}, {}, {}, []
    for q in range(P):
        w = int(winner[q])
        if not np.isfinite(t_recover[q]) or w < 0:
            continue
        comp = np.delete(cos2[:, :, q], w, axis=1)  # (time, m-1)
        pre = times <= t_recover[q]
        before[q + 1] = float(np.max(comp[pre] / comp[0]))
        level[q + 1] = float(np.max(comp[pre])) * d**0.9
        t_after = t_recover[q] + 2 * norm_phase(float(a[q]), sigma0)
        post = times >= t_after
        if not post.any():
            not_settled.append(q + 1)
            continue
        ref = np.maximum(comp[int(np.argmax(post))], comp[0])
        after[q + 1] = float(np.max(comp[post] / ref))
    a_min = float(np.min(a[a > 0]))
    return {
        "before": before, "after": after, "not_settled": not_settled,
        "level": level,
        "max_before": max(before.values()) if before else math.nan,
        "max_level": max(level.values()) if level else math.nan,
        "max_after": max(after.values()) if after else math.nan,
        "a_min_over_d_pow": a_min / d**-0.3,
        "a_min_sqrtP_over_d_pow": a_min * math.sqrt(P) / d**-0.8,
    }


def decoupling_run(d: int, P: int, m: int, seed: int, a: list[float] | None = None,
                   beta: float = 0.8, sigma0: float = 1e-2, t_max: float = 4000.0,
                   checkpoints: int = 400) -> dict[str, Any]:
    """:func:`decoupling` of one population flow (``hermite solve`` with ``save_params`` and
    ``early_stop``), with the configuration and the co-learning neurons beside it."""
    from ..base import Batch
    from .model import Hermite, teacher_weights

    given: dict[str, Any] = {"d": d, "P": P, "m": m, "seed": seed, "sigma0": sigma0,
                             "t_max": t_max, "n_records": checkpoints, "early_stop": True,
                             "save_params": True}
    if a is None:
        given["beta"] = beta
    else:
        given["a"] = list(a)
    values = Hermite.resolve("solve", given)
    ds = Hermite().solve(Batch.from_points(Hermite, [values])).isel(point=0)
    weights = teacher_weights(P, beta, None if a is None else np.asarray(a, dtype=float))
    out = decoupling(ds["time"].values, ds["v"].values, weights, ds["t_recover"].values,
                     ds["winner"].values, sigma0)
    out.update(d=d, P=P, m=m, seed=seed, a_min=float(np.min(weights)),
               recovered=int(np.isfinite(ds["t_recover"].values).sum()),
               co_learning=co_learning_neurons(ds["v"].values[-1], P,
                                               ds["winner_theory"].values))
    return out


def greedy_plateaus(P: int, beta: float, d: int, widths: tuple[int, ...],
                    seeds: range) -> np.ndarray:
    """(seed, width) greedy plateaus ½ Σ a_p² over the tasks the greedy rule leaves unpaired
    (h4; docs/hermite-sgd.md eq. (8)), from the initial directions alone: no flow is run."""
    from .model import greedy_pairs, hermite_coeffs, initial_directions, teacher_weights

    c = hermite_coeffs(4, None)
    a = teacher_weights(P, beta)
    out = np.empty((len(seeds), len(widths)))
    for i, s in enumerate(seeds):
        for j, m in enumerate(widths):
            T = greedy_pairs(initial_directions(s, m, d)[:, :P], a, c)[0]
            out[i, j] = plateau(a, np.isfinite(T))
    return out


def time_law_lag(times: np.ndarray, loss: np.ndarray, loss_theory: np.ndarray,
                 levels: tuple[float, ...] = (0.4, 0.3, 0.2, 0.1)) -> tuple[float, float]:
    """(geometric mean over ``levels`` of t(L ≤ ℓ)/t(L_ideal ≤ ℓ), mean of their difference)
    for one run (module docstring, "Time law"); linear interpolation between checkpoints.
    NaN where a level is never reached."""
    from richlazy_cli.models.hermite.model import first_crossing

    t = np.asarray(times, float)
    meas = np.array([first_crossing(t, -np.asarray(loss), -lev) for lev in levels], float)
    ideal = np.array([first_crossing(t, -np.asarray(loss_theory), -lev) for lev in levels],
                     float)
    return float(np.exp(np.mean(np.log(meas / ideal)))), float(np.mean(meas - ideal))
