"""Kunin et al. 2024 Fig. 6a and 6b under the paper's protocol (docs/claims.md §7–8): the
analysis of jobs/cnn-digits-alpha-early.toml and jobs/filters-digits24-bn.toml (beside the
unnormalised jobs/filters-digits24-small.toml), with bootstrap intervals over seeds and a
figure of each.

    PYTHONPATH=. python scripts/claims_practice.py early   RESULT.h5 [MORE.h5 ...] [--out DIR]
    PYTHONPATH=. python scripts/claims_practice.py filters BN.h5 PLAIN.h5 [--out DIR]
    PYTHONPATH=. python scripts/claims_practice.py filters --bn-only BN.h5 [MORE.h5 ...]
    PYTHONPATH=. python scripts/claims_practice.py filters-epochs CONVERGED.h5 [MORE.h5 ...]

early: S(n)/S(end) at n = 120 steps (the paper's first MNIST epoch: 60,000/512 ≈ 118 steps)
and at 10% of the steps, per α; a kernel that moved at a constant rate would give n/N.
filters: per α, test accuracy, R(w_end), R(w_end − w_0) (the drift control) against the
i.i.d. level.
filters-epochs: the run of jobs/filters-digits24-bn-converged.toml read by epoch: test
accuracy and R(w_t) per α at every checkpoint, the spread of the accuracies over α, and
whether the roughness order R(10) < R(1) < R(0.1) holds at each checkpoint.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

PAPER_EPOCH_STEPS = 120  # the checkpoint nearest 60,000 / 512 ≈ 118 steps


def bootstrap_mean(x: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    """[mean, 2.5%, 97.5%] of the mean over resampled seeds."""
    x = np.asarray(x, dtype=float)
    g = np.random.default_rng(seed)
    boot = [np.mean(x[g.integers(0, x.size, x.size)]) for _ in range(n)]
    return [float(np.mean(x)), float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]


def early(paths: list[Path], out: Path) -> dict[str, Any]:
    parts = [xr.open_dataset(p, engine="h5netcdf").load() for p in paths]
    ds = xr.concat(parts, dim="alpha").sortby("alpha") if len(parts) > 1 else parts[0]
    S = ds["kernel_distance"].transpose("alpha", "seed", "checkpoint").values
    steps = ds["step"].values
    N = steps[-1]
    j120 = int(np.argmin(np.abs(steps - PAPER_EPOCH_STEPS)))
    j10 = int(np.argmin(np.abs(steps - 0.1 * N)))
    j1 = int(np.flatnonzero(ds["epoch"].values == 1)[0])
    res: dict[str, Any] = {"steps": int(N), "n_paper_epoch": int(steps[j120]),
                           "n_tenth": int(steps[j10]), "by_alpha": {}}
    for i, a in enumerate(ds["alpha"].values):
        end = S[i, :, -1]
        res["by_alpha"][f"{a:g}"] = {
            "S_end": bootstrap_mean(end),
            "epoch1_over_end": bootstrap_mean(S[i, :, j1] / end),
            "paper_epoch_over_end": bootstrap_mean(S[i, :, j120] / end),
            "tenth_over_end": bootstrap_mean(S[i, :, j10] / end),
            "S_paper_epoch": bootstrap_mean(S[i, :, j120]),
            "seeds": int(S.shape[1])}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    frac = steps[1:] / N
    for i, a in enumerate(ds["alpha"].values):
        r = S[i, :, 1:] / S[i, :, -1:]
        ax.plot(frac, r.mean(axis=0), marker="o", ms=3, label=f"α = {a:g}")
    ax.plot(frac, frac, "k--", lw=1, label="constant rate (n/N)")
    ax.axvline(steps[j120] / N, color="grey", ls=":", label="paper's epoch 1 (≈118 steps)")
    ax.set_xscale("log")
    ax.set_xlabel("fraction of the training steps n/N")
    ax.set_ylabel("S(0, n) / S(0, end)")
    ax.set_title("Fig. 6a: kernel motion by steps (LeNet, digits, 1,500 Adam steps)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "cnn-early-by-steps.png", dpi=110)
    plt.close(fig)
    return res


def _end(ds: xr.Dataset) -> dict[str, Any]:
    res: dict[str, Any] = {}
    end = ds.isel(checkpoint=-1)
    for a in ds["alpha"].values:
        one = end.sel(alpha=a)
        res[f"{a:g}"] = {
            "test_acc": bootstrap_mean(one["test_acc"].values),
            "R_end": bootstrap_mean(one["filter_roughness"].values),
            "R_init": bootstrap_mean(ds.isel(checkpoint=0).sel(alpha=a)[
                "filter_roughness"].values),
            "R_update": bootstrap_mean(one["update_roughness"].values)
            if "update_roughness" in one else None,
            "seeds": int(one["seed"].size)}
    res["iid"] = float(ds.attrs["filter_roughness_iid"])
    return res


def filters(bn: list[Path], plain: Path | None, out: Path) -> dict[str, Any]:
    """``bn``: the runs of jobs/filters-digits24-bn.toml, joined over seeds; ``plain``: the
    unnormalised job beside it, or None (--bn-only: the seeds of the fixed protocol alone)."""
    parts = [xr.open_dataset(p, engine="h5netcdf").load() for p in bn]
    runs = {"channel norm, first layer ÷ α": xr.concat(parts, dim="seed").sortby("seed")
            if len(parts) > 1 else parts[0]}
    if plain is not None:
        runs["no norm, first ÷ α and readout × α"] = xr.open_dataset(
            plain, engine="h5netcdf").load()
    res = {name: _end(ds) for name, ds in runs.items()}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 5.0))
    for k, (name, r) in enumerate(res.items()):
        alphas = [a for a in r if a != "iid"]
        x = np.arange(len(alphas)) + 0.2 * k
        for ax, key, lab in ((axes[0], "R_end", "R(w_end)"),
                             (axes[0], "R_update", "R(w_end − w_0)"),
                             (axes[1], "test_acc", "test accuracy")):
            v = [r[a][key] for a in alphas]
            if any(e is None for e in v):
                continue
            v_arr = np.array(v)
            ax.errorbar(x, v_arr[:, 0], yerr=[v_arr[:, 0] - v_arr[:, 1],
                                              v_arr[:, 2] - v_arr[:, 0]],
                        marker="o" if key != "R_update" else "s", ls="", capsize=3,
                        label=f"{lab}: {name}")
        axes[0].set_xticks(np.arange(len(alphas)) + 0.1, [f"α = {a}" for a in alphas])
        axes[1].set_xticks(np.arange(len(alphas)) + 0.1, [f"α = {a}" for a in alphas])
    axes[0].axhline(res[next(iter(res))]["iid"], color="grey", ls="--",
                    label="i.i.d. level (random walk)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("mean roughness (lower is smoother)")
    axes[0].legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    axes[1].set_ylabel("test accuracy")
    axes[1].legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    seeds = ", ".join(f"{name}: {r[next(iter(r))]['seeds']} seeds" for name, r in res.items())
    fig.suptitle("Fig. 6b: first-layer filters, smooth2d on 24×24 digits, 10 epochs "
                 f"(mean and 95% bootstrap over seeds; {seeds})", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / ("filters-protocol.png" if plain is not None
                       else "filters-protocol-seeds.png"), dpi=110)
    plt.close(fig)
    return res


def filters_by_epoch(paths: list[Path], out: Path) -> dict[str, Any]:
    """Accuracy and roughness against the epoch per α: seed means, with each seed's value."""
    parts = []
    for p in paths:
        ds = xr.open_dataset(p, engine="h5netcdf").load()
        if "seed" not in ds.dims:  # seed given as a parameter: one seed per file
            seed = ds["seed"].values if "seed" in ds else json.loads(ds.attrs["params"])["seed"]
            ds = ds.expand_dims(seed=[int(seed)])
        parts.append(ds)
    ds = xr.concat(parts, dim="seed").sortby("seed").sortby("alpha")
    epochs = [int(e) for e in ds["epoch"].values]
    alphas = [float(a) for a in ds["alpha"].values]
    acc = ds["test_acc"].transpose("alpha", "seed", "checkpoint").values
    rough = ds["filter_roughness"].transpose("alpha", "seed", "checkpoint").values
    upd = ds["update_roughness"].transpose("alpha", "seed").values
    res: dict[str, Any] = {
        "epochs": epochs, "seeds": [int(x) for x in ds["seed"].values],
        "by_alpha": {f"{a:g}": {"test_acc": acc[i].round(4).tolist(),
                                "R": rough[i].round(3).tolist(),
                                "R_update_end": upd[i].round(3).tolist()}
                     for i, a in enumerate(alphas)},
        # per seed and checkpoint: the largest accuracy difference between two alphas
        "acc_spread": (acc.max(axis=0) - acc.min(axis=0)).round(4).tolist(),
        # per seed and checkpoint: R decreases strictly with alpha
        "order_holds": np.all(np.diff(rough, axis=0) < 0, axis=0).tolist(),
        "iid": float(ds.attrs["filter_roughness_iid"]),
    }
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for i, a in enumerate(alphas):
        for ax, v in ((axes[0], acc[i]), (axes[1], rough[i])):
            line, = ax.plot(epochs, v.mean(axis=0), marker="o", ms=3, label=f"α = {a:g}")
            ax.fill_between(epochs, v.min(axis=0), v.max(axis=0), alpha=0.2,
                            color=line.get_color(), lw=0)
    axes[1].axhline(res["iid"], color="grey", ls="--", label="i.i.d. level (random walk)")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(0, epochs[-1] * 1.05)
        ax.set_xlabel("epoch (0: initialisation)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("test accuracy")
    axes[1].set_ylabel("mean roughness R(w_t) (lower is smoother)")
    axes[1].set_yscale("log")
    axes[1].yaxis.set_major_formatter(ScalarFormatter())
    axes[1].yaxis.set_minor_formatter(ScalarFormatter())
    axes[1].tick_params(axis="y", which="minor", labelsize=7)
    seeds = res["seeds"]
    fig.suptitle("Fig. 6b toward convergence: smooth2d on 24×24 digits, channel norm, first "
                 f"layer ÷ α, {epochs[-1]} epochs; mean over seeds {seeds[0]}–{seeds[-1]}, "
                 "band: min–max", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "filters-by-epoch.png", dpi=110)
    plt.close(fig)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("early", "filters", "filters-epochs"))
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("results/trends"))
    ap.add_argument("--bn-only", action="store_true",
                    help="filters: every file is a part (seeds) of the fixed protocol")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "early":
        res = early(args.files, args.out)
    elif args.what == "filters-epochs":
        res = filters_by_epoch(args.files, args.out)
    elif args.bn_only:
        res = filters(args.files, None, args.out)
    else:
        res = filters(args.files[:1], args.files[1], args.out)
    text = json.dumps(res, indent=1)
    (args.out / f"practice-{args.what}.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
