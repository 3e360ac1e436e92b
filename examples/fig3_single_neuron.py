# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Kunin et al. 2024, Fig. 3 from Python: the single neuron across δ
#
# The single hidden neuron f(x) = a wᵀx on whitened data, β* = (0, 1), started orthogonal to
# it, β(0) = (−1, 0), for several values of the conserved quantity δ = η_w a² − η_a ‖w‖²
# (docs/single-neuron.md). δ < 0 is downstream (delayed rich), δ = 0 balanced (rich), δ > 0
# upstream (lazy as δ grows). The job file `jobs/single-neuron-delta.toml` is the one
# `make fig3` runs; `richlazy.sweep` takes it as `richlazy sweep -c` does and returns the
# result as an `xarray.Dataset`.
#
# Open it as a notebook with `jupytext --to notebook examples/fig3_single_neuron.py`, or run
# it as a script: `python examples/fig3_single_neuron.py` (the figure goes to
# `reports/examples/`, or to the folder in `RICHLAZY_EXAMPLE_OUT`).

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import richlazy

ROOT = Path(richlazy.__file__).resolve().parents[1]
OUT = Path(os.environ.get("RICHLAZY_EXAMPLE_OUT", ROOT / "reports" / "examples"))
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# One call runs the sweep (seven values of δ, exact solution and numeric integration side by
# side); without `output` the file is temporary and only the dataset is kept.

# %%
ds = richlazy.sweep(config=ROOT / "jobs" / "single-neuron-delta.toml", jobs=1)
print(ds["kernel_distance"].dims, dict(ds.sizes))

# %% [markdown]
# The file's layout follows CF: the exact/numeric dimension is `solution_method` (a dimension
# named `method` would be taken by `.sel(method=...)`), and every variable has a short
# `label` for plots beside its `long_name`.

# %%
exact = ds.sel(solution_method="exact")
numeric = ds.sel(solution_method="numeric")
gap = float(np.abs(exact["kernel_distance"] - numeric["kernel_distance"]).max())
print(f"largest |exact - numeric| kernel distance: {gap:.2e}")
assert gap < 1e-6

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True)
colours = plt.cm.coolwarm(np.linspace(0, 1, ds.sizes["delta"]))
for colour, delta in zip(colours, ds["delta"].values, strict=True):
    point = exact.sel(delta=delta)
    axes[0].plot(ds["time"], point["loss"], color=colour, label=f"δ = {delta:g}")
    axes[1].plot(ds["time"], point["kernel_distance"], color=colour)
axes[0].set(xlabel="t", ylabel=ds["loss"].attrs["label"], yscale="log")
axes[1].set(xlabel="t", ylabel=ds["kernel_distance"].attrs["label"])
axes[0].legend(fontsize=7)
fig.suptitle("single neuron, exact solutions: loss and kernel distance across δ")
fig.savefig(OUT / "fig3_single_neuron.png", dpi=110)
print(OUT / "fig3_single_neuron.png")

# %% [markdown]
# Upstream (δ > 0) the kernel barely moves: the lazy regime; balanced and downstream
# initialisations move it far, the rich regime. The final kernel distance falls with δ:

# %%
final = exact["kernel_distance"].isel(time=-1)
print({f"{d:g}": round(float(v), 3) for d, v in zip(ds["delta"].values, final.values,
                                                    strict=True)})
assert float(final.sel(delta=4.0)) < float(final.sel(delta=-4.0))
