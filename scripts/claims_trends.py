"""Trends over size for the claims of Ren et al. 2025 that did not hold at one size
(docs/claims.md). Each family writes one JSON row per run as it goes (so a partial run is
usable) and a summary with bootstrap intervals over seeds, and draws the trend.

    PYTHONPATH=. python scripts/claims_trends.py ren-width  [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py decoupling [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py greedy-width [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py figures    [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py heavy-time [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py ren-width --d 64,256 --seeds 12 --narrow-only
    PYTHONPATH=. python scripts/claims_trends.py colearning [--out results/trends]
    PYTHONPATH=. python scripts/claims_trends.py cor23 [--seeds 8] [--out results/trends]

ren-width: population flows, P = 32, β = 0.8, σ0 = 1e-2, t_max = 30 d (≈ 10 T_P), early_stop,
d ∈ {64, 128, 256, 512}, m ∈ {4, 8, 16} (m < P: width law, greedy agreement, fraction of the
greedy tasks recovered) and m = 64 = 2P (Prop. 2.2(a) slope over p ∈ [2, 32]), seeds 0-3.
decoupling: P = 4, a_p = ½, m = 8, d ∈ {64, 256, 1024, 4096}, seeds 0-7.
greedy-width: the greedy rule alone (no flow), P ∈ {32, 128, 512, 2048}, m = 4 … P/2.
colearning: from the ren-width rows, the fraction of the greedy tasks recovered over d, the
first four seeds' interval beside that of all the seeds run (docs/claims.md §2.1).
heavy-time: the heavy-tail time law, population flows at P = 32, m = 2P, σ0 = 1e-2,
β ∈ {0.2, 0.35}, d ∈ {64, 128, 256, 512}, seeds 0-3 (its own rows, summary and figure).
cor23: Cor. 2.3's budget-tuned step (online SGD), the envelope's log-log slope over the window
[n̂_1, n̂_P] at P = 8 and P = 16 (d = 24, m = 2P, lr_q = 0.1 a_q/d², q = 1, 2, 4, …, P;
jobs/ren-unstable.toml and jobs/ren-unstable-p16.toml), beside the derived finite-P law
(scaling.unstable_window_slope); P = 16 also at d = 16, the smallest d with P ≤ d; P = 32 at
d = 32 (jobs/ren-unstable-p32.toml, seeds 0-3). ``--run P,d`` limits it to some of these and
``--seed-list`` to some seeds (two processes can share the seeds, each with its own --out;
their cor23-rows.jsonl files joined, ``cor23-summary`` draws all).

Wall times measured on the shared 2-core machine at load average 10-13 (nice 10, one
process): ren-width 150 s (d = 64), 108 s (d = 128), 1254 s (d = 256), d = 512 stopped
partway at the session's deadline; decoupling 5 s, 5 s, 14 s (d = 64, 256, 1024; 8 seeds)
and 238 s for 3 seeds at d = 4096; greedy-width 6 s, 11 s, 22 s, 86 s (P = 32 … 2048).
heavy-time (load average 6-9): 2 s, 2 s, 27 s, 357 s for the 4 seeds at d = 64 … 512
(β = 0.2; β = 0.35: 4 s, 3 s, 52 s, 478 s).
cor23 (one process at nice 19, load average 4-6): 171 s (P = 8, d = 24), 487 s (P = 16,
d = 24), 151 s (P = 16, d = 16), 8 seeds each (54 s, 190 s, 53 s at load average 2); P = 32,
d = 32: 1879 s for 4 seeds (two processes of two seeds, 450-510 s a seed, load average 2-3).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from richlazy_cli.models.base import Batch
from richlazy_cli.models.hermite import _diagnostics as hd
from richlazy_cli.models.hermite.model import Hermite, teacher_weights
from richlazy_cli.report.scaling import (
    emergence_order_fit,
    finite_p_offset,
    greedy_agreement,
    ols_fit,
    unstable_window_slope,
)

WIDTH_D = (64, 128, 256, 512)
WIDTH_M = (4, 8, 16)
WIDE_M = 64
P, BETA = 32, 0.8
SEEDS = range(4)
DEC_D = (64, 256, 1024, 4096)


def solve(**given: Any) -> Any:
    values = Hermite.resolve("solve", given)
    return Hermite().solve(Batch.from_points(Hermite, [values])).isel(point=0)


def bootstrap(values: np.ndarray, stat: Any, n: int = 2000, seed: int = 0
              ) -> tuple[float, float, float]:
    """(stat(values), 2.5%, 97.5%) of ``stat`` over resamples of the first axis (seeds)."""
    g = np.random.default_rng(seed)
    k = values.shape[0]
    boot = [stat(values[g.integers(0, k, k)]) for _ in range(n)]
    return float(stat(values)), float(np.nanpercentile(boot, 2.5)), float(
        np.nanpercentile(boot, 97.5))


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(row, default=float) + "\n")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ren_width(out: Path, ds_: tuple[int, ...] = WIDTH_D, seeds: range = SEEDS,
              wide: bool = True) -> None:
    """The runs of the ren-width family; ``ds_``, ``seeds`` and ``wide`` (the m = 2P run)
    select a part of it (``--d``, ``--seeds``, ``--narrow-only``)."""
    path = out / "ren-width-rows.jsonl"
    done = {(r["d"], r["m"], r["seed"]) for r in _rows(path)}
    a = teacher_weights(P, BETA)
    for d in ds_:
        for seed in seeds:
            for m in (*WIDTH_M, WIDE_M) if wide else WIDTH_M:
                if (d, m, seed) in done:
                    continue
                t0 = time.perf_counter()
                ds = solve(d=d, P=P, m=m, beta=BETA, seed=seed, t_max=30.0 * d,
                           n_records=200, early_stop=True, save_params=m < P)
                t_rec, t_th = ds["t_recover"].values, ds["t_recover_theory"].values
                pred = hd.plateau_predictions(a, t_rec, t_th)
                row = {"d": d, "m": m, "seed": seed, "L_end": float(ds["loss"].values[-1]),
                       "greedy_plateau": pred["greedy"],
                       "recovered_plateau": pred["recovered"],
                       "recovered": int(np.isfinite(t_rec).sum()),
                       "greedy_recovered": float(np.mean(np.isfinite(t_rec[np.isfinite(t_th)]))),
                       "agreement": greedy_agreement(ds["winner"].values,
                                                     ds["winner_theory"].values),
                       "t_stop": float(ds["t_stop"].values),
                       "wall_s": round(time.perf_counter() - t0, 1)}
                if m < P:
                    row["co_learning"] = hd.co_learning_neurons(
                        ds["v"].values[-1], P, ds["winner_theory"].values)
                else:
                    row["prop22a"] = emergence_order_fit(t_rec, ds["winner_overlap0"].values,
                                                         (2, P))["slope"]
                _append(path, row)
                print(json.dumps({k: v for k, v in row.items() if k != "co_learning"}),
                      flush=True)


def width_slope(L: np.ndarray) -> float:
    """Finite-P-corrected OLS slope of log(L + L_P) against log m over ``WIDTH_M``."""
    off = finite_p_offset(P, BETA)
    return float(ols_fit(np.log10(np.array(WIDTH_M, float)), np.log10(L + off))["slope"])


def summarise_width(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    a = teacher_weights(P, BETA)
    ideal = width_slope(np.array([0.5 * float(np.sum(a[m:] ** 2)) for m in WIDTH_M]))
    for d in WIDTH_D:
        mine = [r for r in rows if r["d"] == d]
        seeds = sorted({r["seed"] for r in mine if r["m"] in WIDTH_M})
        full = [s for s in seeds
                if all(any(r["seed"] == s and r["m"] == m for r in mine) for m in WIDTH_M)]
        if not full:
            continue
        L = np.array([[next(r["L_end"] for r in mine if r["seed"] == s and r["m"] == m)
                       for m in WIDTH_M] for s in full])
        Lg = np.array([[next(r["greedy_plateau"] for r in mine if r["seed"] == s
                             and r["m"] == m) for m in WIDTH_M] for s in full])
        frac = np.array([[next(r["greedy_recovered"] for r in mine
                               if r["seed"] == s and r["m"] == m) for m in WIDTH_M]
                         for s in full])
        agree = np.array([[next(r["agreement"] for r in mine if r["seed"] == s and r["m"] == m)
                           for m in WIDTH_M] for s in full])
        entry = {"seeds": len(full),
                 "width_slope": bootstrap(L, lambda x: width_slope(x.mean(axis=0))),
                 "greedy_width_slope": bootstrap(Lg, lambda x: width_slope(x.mean(axis=0))),
                 "greedy_recovered": bootstrap(frac, np.mean),
                 "agreement": bootstrap(agree, np.mean),
                 "wall_s": float(sum(r["wall_s"] for r in mine))}
        wide = np.array([r["prop22a"] for r in mine if r["m"] == WIDE_M])
        if wide.size:
            entry["prop22a"] = bootstrap(wide, np.mean)
            entry["prop22a_seeds"] = int(wide.size)
            entry["agreement_wide"] = bootstrap(
                np.array([r["agreement"] for r in mine if r["m"] == WIDE_M]), np.mean)
        out[str(d)] = entry
    return {"ideal_width_slope_at_P": ideal, "theory_width_slope": -(2 * BETA - 1),
            "theory_prop22a": BETA, "by_d": out}


def decoupling(out: Path) -> None:
    path = out / "decoupling-rows.jsonl"
    done = {(r["d"], r["seed"]) for r in _rows(path)}
    for d in DEC_D:
        for seed in range(8):
            if (d, seed) in done:
                continue
            t0 = time.perf_counter()
            r = hd.decoupling_run(d, 4, 8, seed, a=[0.5] * 4)
            row = {k: r[k] for k in ("d", "seed", "max_before", "max_level", "max_after",
                                     "a_min_over_d_pow", "not_settled")}
            row["wall_s"] = round(time.perf_counter() - t0, 2)
            _append(path, row)
            print(json.dumps(row), flush=True)


def summarise_decoupling(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for d in DEC_D:
        mine = [r for r in rows if r["d"] == d]
        if not mine:
            continue
        out[str(d)] = {k: bootstrap(np.array([r[k] for r in mine]), np.median)
                       for k in ("max_before", "max_level", "max_after")}
        out[str(d)]["seeds"] = len(mine)
        out[str(d)]["wall_s"] = float(sum(r["wall_s"] for r in mine))
    return out


GREEDY_P = ((32, 256, 40), (128, 1024, 40), (512, 1024, 20), (2048, 4096, 8))


def greedy_width(out: Path) -> None:
    """The width exponent of the greedy plateaus over P (no flow: the greedy rule on the
    initial directions), m = 4 … P/2, finite-P-corrected, bootstrap over seeds."""
    rows = []
    for P, d, n in GREEDY_P:
        t0 = time.perf_counter()
        ms = tuple(2**k for k in range(2, 12) if 2**k <= P // 2)
        L = hd.greedy_plateaus(P, BETA, d, ms, range(n))
        off = finite_p_offset(P, BETA)
        x = np.log10(np.array(ms, float))

        def fit(r: np.ndarray, x: np.ndarray = x, off: float = off) -> float:
            return float(ols_fit(x, np.log10(r.mean(axis=0) + off))["slope"])

        top = np.array([0.5 * float(np.sum(teacher_weights(P, BETA)[m:] ** 2)) for m in ms])
        row = {"P": P, "d": d, "seeds": n, "slope": bootstrap(L, fit),
               "top_m_slope": float(ols_fit(x, np.log10(top + off))["slope"]),
               "wall_s": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "greedy-width.json").write_text(json.dumps(rows, indent=1))


HEAVY_D = (64, 128, 256, 512)
HEAVY_BETA = (0.2, 0.35)
HEAVY_LEVELS = (0.4, 0.3, 0.2, 0.1)


def heavy_time(out: Path) -> None:
    path = out / "heavy-time-rows.jsonl"
    done = {(r["beta"], r["d"], r["seed"]) for r in _rows(path)}
    for d in HEAVY_D:
        for beta in HEAVY_BETA:
            for seed in SEEDS:
                if (beta, d, seed) in done:
                    continue
                t0 = time.perf_counter()
                ds = solve(d=d, P=P, m=2 * P, beta=beta, seed=seed, t_max=1000.0,
                           n_records=400, early_stop=True)
                ratio, lag = hd.time_law_lag(ds["time"].values, ds["loss"].values,
                                             ds["loss_theory"].values, HEAVY_LEVELS)
                row = {"beta": beta, "d": d, "seed": seed, "ratio": ratio, "lag": lag,
                       "t_hat_median": float(np.nanmedian(ds["t_recover_theory"].values)),
                       "recovered": int(np.isfinite(ds["t_recover"].values).sum()),
                       "wall_s": round(time.perf_counter() - t0, 1)}
                _append(path, row)
                print(json.dumps(row), flush=True)
    rows = _rows(path)
    summary = {str(beta): {str(d): {**{k: bootstrap(np.array(
        [r[k] for r in rows if r["beta"] == beta and r["d"] == d]), np.mean)
        for k in ("ratio", "lag", "t_hat_median")},
        "seeds": sum(r["beta"] == beta and r["d"] == d for r in rows),
        "wall_s": float(sum(r["wall_s"] for r in rows if r["beta"] == beta and r["d"] == d))}
        for d in HEAVY_D} for beta in HEAVY_BETA}
    (out / "heavy-time.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for k, beta in enumerate(HEAVY_BETA):
        v = np.array([summary[str(beta)][str(d)]["ratio"] for d in HEAVY_D])
        x = np.array(HEAVY_D) * (1 + 0.06 * k)
        ax.errorbar(x, v[:, 0] - 1, yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], marker="o",
                    capsize=3, label=f"β = {beta} (mean over seeds, 95% bootstrap)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d (P = 32, m = 2P)")
    ax.set_ylabel("t_measured(L ≤ ℓ) / t_law(L ≤ ℓ) − 1")
    ax.set_title("Ren et al., heavy tail (β < ½): lag behind the time law", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "heavy-time-trend.png", dpi=110)
    plt.close(fig)


def figures(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary: dict[str, Any] = {}
    rows = _rows(out / "ren-width-rows.jsonl")
    if rows:
        s = summarise_width(rows)
        summary["ren-width"] = s
        ds = sorted(int(d) for d in s["by_d"])
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        panels = (("width_slope", "width exponent (corrected)",
                   [(s["theory_width_slope"], "theory −(2β−1)"),
                    (s["ideal_width_slope_at_P"], "top-m tail at P = 32")]),
                  ("greedy_recovered", "fraction of greedy tasks recovered (m < P)",
                   [(1.0, "greedy rule")]),
                  ("prop22a", "Prop. 2.2(a) slope (m = 2P)", [(BETA, "theory β")]))
        for ax, (key, title, refs) in zip(axes, panels, strict=True):
            x = [d for d in ds if key in s["by_d"][str(d)]]
            v = np.array([s["by_d"][str(d)][key] for d in x])
            if v.size:
                ax.errorbar(x, v[:, 0], yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]],
                            marker="o", capsize=3, label="measured (95% bootstrap)")
            if key == "width_slope":
                g = np.array([s["by_d"][str(d)]["greedy_width_slope"] for d in x])
                ax.errorbar(np.array(x) * 1.08, g[:, 0], yerr=[g[:, 0] - g[:, 1],
                                                               g[:, 2] - g[:, 0]],
                            marker="s", capsize=3, ls=":",
                            label="greedy plateaus of the same seeds")
            for y, lab in refs:
                ax.axhline(y, ls="--", lw=1, color="grey" if "theory" in lab else "C2",
                           label=lab)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("d")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7)
        fig.suptitle("Ren et al. Prop. 2.2 at P = 32, β = 0.8, t_max = 30 d, over d")
        fig.tight_layout()
        fig.savefig(out / "ren-width-trend.png", dpi=110)
        plt.close(fig)
    rows = _rows(out / "decoupling-rows.jsonl")
    if rows:
        s2 = summarise_decoupling(rows)
        summary["decoupling"] = s2
        ds = sorted(int(d) for d in s2)
        fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
        for ax, key, title, ref in ((axes[0], "max_level", "before recovery: d^0.9 · max "
                                     "competitor cos²", None),
                                    (axes[1], "max_after", "after t_q + 2τ_q: competitor "
                                     "growth", 1.2)):
            v = np.array([s2[str(d)][key] for d in ds])
            ax.errorbar(ds, v[:, 0], yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], marker="o",
                        capsize=3, label="median over seeds (95% bootstrap)")
            if ref is not None:
                ax.axhline(ref, ls="--", color="grey", label="bound 1.2×")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("d")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7)
        fig.suptitle("Decoupling (Lemma B.1), P = 4, a_p = ½, m = 8")
        fig.tight_layout()
        fig.savefig(out / "decoupling-trend.png", dpi=110)
        plt.close(fig)
    gw = out / "greedy-width.json"
    if gw.exists():
        rows_g = json.loads(gw.read_text())
        summary["greedy-width"] = rows_g
        fig, ax = plt.subplots(figsize=(5, 3.6))
        Ps = [r["P"] for r in rows_g]
        v = np.array([r["slope"] for r in rows_g])
        ax.errorbar(Ps, v[:, 0], yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], marker="o",
                    capsize=3, label="greedy plateaus (95% bootstrap over seeds)")
        ax.plot(Ps, [r["top_m_slope"] for r in rows_g], "s:", label="top-m tail at the same P")
        ax.axhline(-(2 * BETA - 1), color="grey", ls="--", label="theory −(2β−1)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("P (tasks); widths m = 4 … P/2")
        ax.set_ylabel("width exponent (finite-P corrected)")
        ax.set_title("Prop. 2.2(b) width law from the greedy rule, β = 0.8", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "greedy-width-trend.png", dpi=110)
        plt.close(fig)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    print(json.dumps(summary, indent=1, default=float))


def colearning(out: Path) -> None:
    """The fraction of the greedy tasks recovered (m < P) over d, with the interval from the
    first four seeds beside the interval from every seed in the rows (the --seeds rerun)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _rows(out / "ren-width-rows.jsonl")
    res: dict[str, Any] = {}
    for d in sorted({r["d"] for r in rows}):
        full = sorted(s for s in {r["seed"] for r in rows if r["d"] == d}
                      if all(any(r["d"] == d and r["seed"] == s and r["m"] == m for r in rows)
                             for m in WIDTH_M))
        frac = np.array([[next(r["greedy_recovered"] for r in rows if r["d"] == d
                               and r["seed"] == s and r["m"] == m) for m in WIDTH_M]
                         for s in full])
        res[str(d)] = {"seeds": len(full), "all": bootstrap(frac, np.mean),
                       "first4": bootstrap(frac[:4], np.mean),
                       "wall_s": float(sum(r["wall_s"] for r in rows
                                           if r["d"] == d and r["m"] in WIDTH_M))}
    (out / "colearning.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ds = [int(d) for d in res]
    for k, (key, lab) in enumerate((("first4", "seeds 0-3"), ("all", "all seeds"))):
        v = np.array([res[str(d)][key] for d in ds])
        n = {res[str(d)]["seeds"] for d in ds} if key == "all" else {4}
        ax.errorbar(np.array(ds) * (1 + 0.06 * k), v[:, 0],
                    yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], marker="os"[k], capsize=3,
                    ls="", label=f"{lab} ({'/'.join(map(str, sorted(n)))} seeds; 95% bootstrap)")
    ax.axhline(1.0, color="grey", ls="--", label="greedy rule (no co-learning)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d (P = 32, β = 0.8, m = 4, 8, 16, t_max = 30 d)")
    ax.set_ylabel("fraction of the greedy tasks recovered")
    ax.set_title("Ren et al. Prop. 2.2(b): greedy tasks recovered over d (co-learning)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "colearning-seeds.png", dpi=110)
    plt.close(fig)


# (P, d, steps): steps ≥ 1.09 × the largest predicted n̂_P over the seeds run (8.39·10⁶ over
# seeds 0-7 at P = 32)
COR23_RUNS = ((8, 24, 1_200_000), (16, 24, 1_600_000), (16, 16, 600_000), (32, 32, 9_200_000))


def budget_tuned_seed(P: int, d: int, seed: int, steps: int) -> dict[str, Any]:
    """One seed of Cor. 2.3's protocol (docs/claims.md §5): online SGD at m = 2P, β = 0.8,
    σ0 = 1e-2, batch 1, with the steps lr_q = 0.1 a_q/d² for q = 1, 2, 4, …, P (the last is the
    stable step). Returns the population losses at the 200 log-spaced checkpoints (``n``,
    ``L`` per q), n̂_1 (the step at which the q = 1 run has made half of its first drop,
    L ≤ L(0) − a_1²/4), n̂_P (the stable run's predicted last recovery, max_p t̂_p / lr_P),
    the teachers the q = 1 run recovers, and ``frozen``: d × the largest overlap² of the
    teachers p > 2 in the q = 2 run before teacher 2 is recovered (freezing means ≲ 5).
    :func:`envelope_slopes` reads the slopes from it."""
    a = teacher_weights(P, BETA)
    qs = [2**k for k in range(P.bit_length()) if 2**k <= P]
    lrs = [0.1 * a[q - 1] / d**2 for q in qs]
    t0 = time.perf_counter()
    values = [Hermite.resolve("train", {"d": d, "P": P, "m": 2 * P, "beta": BETA, "lr": lr,
                                        "seed": seed, "steps": steps, "n_records": 200})
              for lr in lrs]
    ds = Hermite().run("train", Batch.from_points(Hermite, values))
    n = ds["step"].values.astype(float)
    L = ds["loss"].values  # (q, step)
    ov = ds["overlap"].values[1]
    t2 = ds["steps_recover"].values[1, 1]
    return {"P": P, "d": d, "seed": seed, "steps": steps, "q": qs,
            "n_1": float(n[np.argmax(L[0] <= L[0, 0] - a[0] ** 2 / 4)]),
            "n_P": float(np.nanmax(ds["t_recover_theory"].values[-1]) / lrs[-1]),
            "q1_recovered": int(np.isfinite(ds["steps_recover"].values[0]).sum()),
            "frozen": float(ov[n < t2][:, 2:].max() * d),
            "n": n.tolist(), "L": L.tolist(), "wall_s": round(time.perf_counter() - t0, 1)}


def envelope_slopes(row: dict[str, Any]) -> dict[str, Any]:
    """The envelope L_u(n) = min_q L_q(n) of one :func:`budget_tuned_seed` row, read three ways
    over the window [n̂_1, n̂_P] (docs/claims.md §5):

    * ``slope_full``: the OLS slope of log L_u against log n over the whole window (the
      measure of the earlier P = 8 runs);
    * ``slope``: the same over the part of the window where L_u ≥ ½ a_P², the smallest value
      the derived law takes before n̂_P. Below it every task is learned and L_u is SGD's noise
      floor (10⁻⁸–10⁻⁶), whose logarithm says nothing about the law; ``collapsed`` says that
      L_u fell below ½ a_P² before n̂_P (the large steps learned every task: nothing frozen);
    * ``stable_slope``: the stable (q = P) curve over the same part of the window;

    and ``max_ratio_early`` = max L_u/L_stable over [n̂_1, n̂_P/10], ``law`` the derived law's
    own slope over [n̂_1, n̂_P] (``scaling.unstable_window_slope``)."""
    P_ = row["P"]
    n, L = np.array(row["n"]), np.array(row["L"])
    Lu, Ls = np.min(L, axis=0), L[-1]
    floor = 0.5 * float(teacher_weights(P_, BETA)[-1] ** 2)
    win = (n >= row["n_1"]) & (n <= row["n_P"])
    above = win & (np.minimum.accumulate(Lu) >= floor)
    early = (n >= row["n_1"]) & (n <= row["n_P"] / 10)
    below = np.flatnonzero(win & (Lu < floor))
    return {"slope_full": float(np.polyfit(np.log(n[win]), np.log(Lu[win]), 1)[0]),
            "slope": float(np.polyfit(np.log(n[above]), np.log(Lu[above]), 1)[0]),
            "stable_slope": float(np.polyfit(np.log(n[above]), np.log(Ls[above]), 1)[0]),
            "collapsed": bool(below.size),
            "window_used": float(np.log(n[above][-1] / row["n_1"])
                                 / np.log(row["n_P"] / row["n_1"])),
            "max_ratio_early": float(np.max(Lu[early] / Ls[early])),
            "law": unstable_window_slope(P_, BETA)}


def cor23(out: Path, seeds: Sequence[int] = range(8),
          only: Sequence[tuple[int, int]] | None = None) -> None:
    """Rows of :func:`budget_tuned_seed` for ``COR23_RUNS`` (or the (P, d) of ``only``;
    resumable), a summary with bootstrap intervals over seeds, and the figure of the measured
    and derived slopes against P."""
    path = out / "cor23-rows.jsonl"
    done = {(r["P"], r["d"], r["seed"]) for r in _rows(path)}
    for P_, d, steps in COR23_RUNS:
        if only is not None and (P_, d) not in only:
            continue
        for seed in seeds:
            if (P_, d, seed) not in done:
                row = budget_tuned_seed(P_, d, seed, steps)
                _append(path, row)
                print(json.dumps({**{k: v for k, v in row.items() if k not in ("n", "L")},
                                  **envelope_slopes(row)}), flush=True)
    cor23_summary(out)


def cor23_summary(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [{**r, **envelope_slopes(r)} for r in _rows(out / "cor23-rows.jsonl")]
    summary: dict[str, Any] = {}
    for P_, d, _ in COR23_RUNS:
        mine = sorted((r for r in rows if r["P"] == P_ and r["d"] == d),
                      key=lambda r: r["seed"])
        if not mine:
            continue
        res: dict[str, Any] = {k: bootstrap(np.array([float(r[k]) for r in mine]), np.mean)
                               for k in ("slope", "stable_slope", "max_ratio_early",
                                         "q1_recovered", "frozen", "window_used")}
        res["gap"] = bootstrap(np.array([r["slope"] - r["law"] for r in mine]), np.mean)
        res.update(law=mine[0]["law"], seeds=[r["seed"] for r in mine],
                   collapsed=int(sum(r["collapsed"] for r in mine)),
                   **{f"per_seed_{k}": [round(float(r[k]), 3) for r in mine]
                      for k in ("slope", "slope_full", "q1_recovered", "n_P")},
                   wall_s=float(sum(r["wall_s"] for r in mine)))
        summary[f"P={P_},d={d}"] = res
    (out / "cor23.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6))
    Pl = np.array([2**k for k in range(1, 16)])
    law = [unstable_window_slope(int(p), BETA) for p in Pl]
    axes[0].plot(Pl, law, "-", color="grey", label="derived law over [n̂_1, n̂_P]")
    axes[0].axhline(-(2 * BETA - 1) / (2 * BETA), ls="--", color="grey", lw=1,
                    label="P → ∞: −0.375")
    # (d, marker, x offset: d = 16 shares P = 16 with d = 24 and is drawn beside it)
    for k, (d, mk, shift) in enumerate(((24, "o", 1.0), (16, "s", 1.05), (32, "^", 1.0))):
        keys = [(P_, f"P={P_},d={dd}") for P_, dd, _ in COR23_RUNS
                if dd == d and f"P={P_},d={dd}" in summary]
        if not keys:
            continue
        x = np.array([p for p, _ in keys], float) * shift
        for ax, key in ((axes[0], "slope"), (axes[1], "gap")):
            v = np.array([summary[s][key] for _, s in keys])
            n_s = "/".join(str(len(summary[s]["seeds"])) for _, s in keys)
            ax.errorbar(x, v[:, 0], yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], marker=mk,
                        capsize=3, ls=":", color=f"C{k}",
                        label=f"measured, d = {d} ({n_s} seeds; 95% bootstrap)")
    axes[1].axhline(0.0, ls="--", color="grey", lw=1, label="measured = law")
    for ax, title in ((axes[0], "envelope slope over [n̂_1, n̂_P], where L_u ≥ ½ a_P²"),
                      (axes[1], "measured − derived law (same window)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("P (tasks), m = 2P, β = 0.8")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_xlim(4, 4e4)
    fig.suptitle("Ren et al. Cor. 2.3, budget-tuned step: measured slope against P", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "cor23-trend.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family", choices=("ren-width", "decoupling", "greedy-width", "figures",
                                       "heavy-time", "colearning", "cor23",
                                       "cor23-summary"))
    ap.add_argument("--out", default="results/trends")
    ap.add_argument("--d", default=None, help="ren-width: comma-separated d (default all)")
    ap.add_argument("--seeds", type=int, default=None,
                    help="ren-width, cor23: seeds 0 … N-1 (default 4; cor23: 8)")
    ap.add_argument("--seed-list", default=None,
                    help="cor23: comma-separated seeds (instead of --seeds)")
    ap.add_argument("--run", action="append", default=None, metavar="P,d",
                    help="cor23: only this (P, d) of COR23_RUNS (repeatable)")
    ap.add_argument("--narrow-only", action="store_true",
                    help="ren-width: only m < P (no m = 2P run)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.family == "ren-width":
        ren_width(out, tuple(int(x) for x in args.d.split(",")) if args.d else WIDTH_D,
                  range(args.seeds) if args.seeds else SEEDS, not args.narrow_only)
        return
    if args.family == "cor23":
        seeds = ([int(x) for x in args.seed_list.split(",")] if args.seed_list
                 else range(args.seeds) if args.seeds else range(8))
        only = ([(int(P_), int(d)) for P_, d in (pd.split(",") for pd in args.run)]
                if args.run else None)
        cor23(out, seeds, only)
        return
    if args.family == "cor23-summary":
        cor23_summary(out)
        return
    {"ren-width": ren_width, "decoupling": decoupling, "greedy-width": greedy_width,
     "figures": figures, "heavy-time": heavy_time, "colearning": colearning}[args.family](out)


if __name__ == "__main__":
    main()
