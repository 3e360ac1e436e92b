"""Ren et al. 2025 §3.2 / Lemma B.1: the decoupling numbers, measured as the paper defines
them (docs/claims.md §Decoupling; richlazy_cli/models/hermite/_diagnostics.py).

For each configuration and seed it prints the lemma's conditions (a_min/d^-0.3 and
a_min √P/d^-0.8, both ≫ 1), the competitors' largest growth before recovery, their
largest growth after t_q + 2τ_q, and the co-learning neurons. Usage:

    PYTHONPATH=. python scripts/ren_decoupling.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time

from richlazy_cli.models.hermite._diagnostics import decoupling_run

#: (d, P, m, a or None for a_p ∝ p^-0.8): the first two satisfy the lemma's condition, the
#: last is the configuration of docs/hermite-sgd.md §7, which violates a_min ≫ d^-0.3.
CONFIGS: tuple[tuple[int, int, int, list[float] | None], ...] = (
    (256, 4, 8, [0.5] * 4),
    (1024, 4, 8, [0.5] * 4),
    (64, 4, 8, [0.5] * 4),
    (256, 16, 32, None),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args()
    rows = []
    for d, P, m, a in CONFIGS:
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            r = decoupling_run(d, P, m, seed, a=a)
            r["wall_s"] = round(time.perf_counter() - t0, 2)
            rows.append(r)
            print(f"d={d:5d} P={P:3d} m={m:3d} seed={seed}: a_min/d^-0.3 "
                  f"{r['a_min_over_d_pow']:.2f}, a_min√P/d^-0.8 "
                  f"{r['a_min_sqrtP_over_d_pow']:.1f}; before ≤ {r['max_before']:.2f}× "
                  f"(level d^0.9·cos² ≤ {r['max_level']:.2f}), "
                  f"after t_q+2τ_q ≤ {r['max_after']:.3f}× "
                  f"(not settled {r['not_settled']}); co-learning neurons "
                  f"{[(c['neuron'], c['role'], c['overlaps']) for c in r['co_learning']]}; "
                  f"{r['wall_s']} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
