"""The paper figures, each declared once: which paper and panel, which job files feed it,
which variables it reads, how it is laid out, the claim in one sentence and how the measured
value that tests the claim is computed (docs/figures.md).

``REGISTRY`` is in paper order (Kunin et al. 2024, Azulay et al. 2021, Ren et al. 2025); the
gallery (:mod:`.gallery`) draws them in that order. ``jobs`` are the small job files of
``make paper`` (``jobs/paper/``); ``full_jobs`` the paper-scale ones of ``make paper-full``.
``tiny`` holds the overrides (``-p NAME=VALUE``; ``grid.NAME`` for ``-g NAME=SPEC``) that shrink a
job further for the test suite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInput
from ..report.data import ResultFile
from . import azulay, kunin, ren
from .common import Built

KUNIN = "Kunin et al. 2024, Get rich quick"
AZULAY = "Azulay et al. 2021, Implicit bias of initialization shape"
REN = "Ren et al. 2025, Emergence and scaling laws in SGD learning of shallow networks"


@dataclass(frozen=True)
class PaperFigure:
    """One figure of a paper, as richlazy draws it."""

    name: str
    paper: str
    label: str
    panels: str
    jobs: tuple[str, ...]
    variables: tuple[str, ...]
    layout: str
    claim: str
    measure: str
    differs: str
    build: Callable[[Sequence[ResultFile]], Built]
    n_panels: int
    categorical: tuple[str, ...] = ()
    """Axes ("x" or "y") that are categorical in at least one panel (a list grid)."""
    full_jobs: tuple[str, ...] = ()
    tiny: dict[str, dict[str, str]] = field(default_factory=dict)


def _fig(**kw: Any) -> PaperFigure:
    return PaperFigure(**kw)


TWO_LAYER_TINY = {"steps": "300", "n_test": "200"}

REGISTRY: tuple[PaperFigure, ...] = (
    _fig(name="kunin-fig1a", paper=KUNIN, label="Fig. 1a",
         panels="neuron trajectories |a_k| w_k in d = 2: rich, lazy, upstream, downstream",
         jobs=("jobs/paper/kunin-fig1a.toml",), full_jobs=("jobs/fig1a.toml",),
         variables=("W", "a", "teacher_W", "teacher_a", "direction_change",
                    "teacher_alignment"),
         layout="1 x 4 panels, equal aspect, teacher directions dotted",
         claim="Small τ is rich and large τ lazy; at τ = 0.1 upstream (δ > 0) neurons align "
               "with the teacher directions and downstream (δ < 0) neurons do not.",
         measure="direction_change and teacher_alignment at the last checkpoint of each "
                 "panel's run; the teacher's smallest pairwise angle",
         differs="2e5 steps instead of 10^6; seed 2 (three teacher directions ≥ 10° apart) "
                 "and δ = ±0.9999 for the authors' α = 0.1/10",
         build=kunin.fig1a, n_panels=4,
         tiny={"jobs/paper/kunin-fig1a.toml": {"steps": "2000", "n_records": "6",
                                               "n_test": "100"}}),
    _fig(name="kunin-fig1b", paper=KUNIN, label="Fig. 1b",
         panels="phase diagrams over (τ, δ) of the test loss and the kernel distance S(0, t)",
         jobs=("jobs/paper/kunin-fig1b.toml",), full_jobs=("jobs/fig1b.toml",),
         variables=("test_loss", "kernel_distance"),
         layout="1 x 2 heat maps, log τ axis, labelled contours",
         claim="Large τ is lazy (small S), small τ rich; the lowest test loss and rapid rich "
               "learning are at small τ with δ > 0 (upstream).",
         measure="S and test loss at the last step, mean over seeds, at the smallest τ for the "
                 "largest and smallest δ, against the mean over δ at the largest τ",
         differs="d = 20, n = 200, 5 x 5 grid, 1 seed, 3000 steps (paper: d = 100, n = 1000, "
                 "17 x 17, 16 seeds, 10^5 steps)",
         build=kunin.fig1b, n_panels=2,
         tiny={"jobs/paper/kunin-fig1b.toml": {**TWO_LAYER_TINY,
                                               "n_records": "4"}}),
    _fig(name="kunin-fig2", paper=KUNIN, label="Fig. 2",
         panels="trajectories (w1, w2, a) on the conserved surface a² − |w|² = δ",
         jobs=("jobs/paper/kunin-fig3.toml",), full_jobs=("jobs/single-neuron-delta.toml",),
         variables=("a", "w", "delta_t"),
         layout="1 x 3 3-D panels: one-sheet hyperboloid, cone, two-sheet hyperboloid",
         claim="δ = η_w a² − η_a‖w‖² is conserved, so each trajectory stays on a one-sheet "
               "hyperboloid (δ < 0), a double cone (δ = 0) or a two-sheet hyperboloid (δ > 0).",
         measure="max over runs and times of |δ(t) − δ(0)|, exact and RK45 solutions",
         differs="surfaces drawn grey instead of coloured by the loss; δ values chosen "
                 "(the paper gives none)",
         build=kunin.fig2, n_panels=3,
         tiny={"jobs/paper/kunin-fig3.toml": {"n_records": "21"}}),
    _fig(name="kunin-fig3", paper=KUNIN, label="Fig. 3",
         panels="μ(t), φ(t), S(0, t) for a sweep of δ, exact over numeric",
         jobs=("jobs/paper/kunin-fig3.toml",), full_jobs=("jobs/single-neuron-delta.toml",),
         variables=("mu", "phi", "kernel_distance"),
         layout="1 x 3 panels, one line per δ, exact dashed",
         claim="Upstream is lazy (S stays small), balanced is rich, downstream is delayed rich "
               "(μ drops, then climbs; S jumps late).",
         measure="S(0, t_max) of the exact solution per δ; max |exact − numeric|",
         differs="δ values chosen (the paper gives none)",
         build=kunin.fig3, n_panels=3,
         tiny={"jobs/paper/kunin-fig3.toml": {"n_records": "21"}}),
    _fig(name="kunin-fig4a", paper=KUNIN, label="Fig. 4a",
         panels="paths β(t) in the β-plane from one β0, one per δ",
         jobs=("jobs/paper/kunin-fig3.toml",), full_jobs=("jobs/single-neuron-delta.toml",),
         variables=("beta",),
         layout="1 panel, equal aspect, the straight linear-regression path dotted",
         claim="Upstream follows the linear-regression path; downstream first moves along β0, "
               "then sweeps round to β*.",
         measure="largest distance of β(t) from the segment β0 → β*, per δ",
         differs="δ values chosen (the paper gives none)",
         build=kunin.fig4a, n_panels=1,
         tiny={"jobs/paper/kunin-fig3.toml": {"n_records": "21"}}),
    _fig(name="kunin-fig4b", paper=KUNIN, label="Fig. 4b",
         panels="paths and end points β(∞) with low-rank XᵀX, one per δ",
         jobs=("jobs/paper/kunin-fig4b.toml",), full_jobs=("jobs/paper/kunin-fig4b.toml",),
         variables=("beta", "beta_inf", "beta_implicit"),
         layout="1 panel, equal aspect, the line Xβ = y dashed, Theorem 3.1 circles",
         claim="With low-rank XᵀX the interpolating end point β(∞) depends on δ, and Theorem "
               "3.1 predicts it.",
         measure="spread of β(∞) over δ (largest distance from the δ = 0 end point) and "
                 "max |β(∞) − β_implicit|",
         differs="δ values chosen (the paper gives none)",
         build=kunin.fig4b, n_panels=1,
         tiny={"jobs/paper/kunin-fig4b.toml": {"n_records": "21", "t_max": "100"}}),
    _fig(name="kunin-fig5a", paper=KUNIN, label="Fig. 5a",
         panels="output f on the circle over its activation regions, through training",
         jobs=("jobs/paper/kunin-fig5a.toml",), full_jobs=("jobs/fig5a-near-gf.toml",),
         variables=("surface", "W", "train_loss", "partition_change"),
         layout="one row per (τ, δ), 4 columns: initialisation, two checkpoints, end",
         claim="Lazy training keeps the partition and reweights it; rich training first "
               "reorganises the partition, then fits.",
         measure="partition_change (fraction of (angle, neuron) activations changed) at the "
                 "end, lazy (largest τ) against rich (smallest τ); regions at init; sup|f| and "
                 "partition_change when the train loss first reaches 0.95 L0 (while f ≈ 0)",
         differs="xor task, sizes and rates chosen (the paper gives none); the gallery's run "
                 "(lr 1e-3/τ², 2e4 steps) does not resolve f ≈ 0, the paper-full run "
                 "(lr 1e-5/τ², 6000 steps, near gradient flow) does; regions coloured by "
                 "activation pattern, not by parity (under the symmetrised init every count "
                 "is even, so parity is one colour)",
         build=kunin.fig5a, n_panels=24,
         tiny={"jobs/paper/kunin-fig5a.toml": {"steps": "200", "n_test": "720",
                                               "records": "[0, 10, 50, 100, 200]"}}),
    _fig(name="kunin-fig5b", paper=KUNIN, label="Fig. 5b",
         panels="phase diagrams of the Hamming distance and the parameter distance",
         jobs=("jobs/paper/kunin-fig1b.toml",), full_jobs=("jobs/fig1b.toml",),
         variables=("hamming_distance", "param_distance"),
         layout="1 x 2 heat maps, log τ axis, labelled contours",
         claim="At small τ upstream moves the activations far (large Hamming) with little "
               "parameter motion; downstream moves the parameters.",
         measure="Hamming and parameter distance at the last step at the smallest τ, largest "
                 "against smallest δ",
         differs="as Fig. 1b (reduced grid and size)",
         build=kunin.fig5b, n_panels=2,
         tiny={"jobs/paper/kunin-fig1b.toml": {**TWO_LAYER_TINY,
                                               "n_records": "4"}}),
    _fig(name="kunin-fig6a", paper=KUNIN, label="Fig. 6a",
         panels="kernel, Hamming and parameter distance of a CNN against epochs, per α",
         jobs=("jobs/paper/kunin-fig6a.toml",), full_jobs=("jobs/cnn-digits-alpha.toml",),
         variables=("kernel_distance", "hamming_distance", "param_distance"),
         layout="1 x 3 panels, log epoch axis, one line per α",
         claim="Upstream (α > 1) amplifies the early NTK movement, which tracks the activation "
               "(Hamming) change rather than the parameter movement.",
         measure="S at the end per α; Spearman rank correlation of S with the Hamming and with "
                 "the parameter distance over every (α, seed, checkpoint)",
         differs="LeNet on sklearn digits (not MNIST), 20 epochs (not 500), 1 seed (not 8)",
         build=kunin.fig6a, n_panels=3,
         tiny={"jobs/paper/kunin-fig6a.toml": {"epochs": "2", "first_steps": "2"}}),
    _fig(name="kunin-fig6b", paper=KUNIN, label="Figs. 6b and 11",
         panels="first-layer filters per α, with the roughness and test accuracy beside them",
         jobs=("jobs/paper/kunin-fig6b.toml",),
         full_jobs=("jobs/filters-digits24-bn-converged.toml",),
         variables=("filters", "filter_roughness", "final_test_acc"),
         layout="one row of filters per α, a bar of roughness with the accuracy beside it",
         claim="Upstream initialisation gives smoother first-layer filters at equal accuracy.",
         measure="mean filter roughness R̄ (normalised Laplacian energy) at the end, per α, "
                 "and the test accuracy",
         differs="small CNN on 24 x 24 digits (not a ResNet on CIFAR-10), conv1's output "
                 "normalised per channel for batch norm, α on conv1 only; 5 epochs, 1 seed "
                 "(paper-full: 40 epochs, 3 seeds); the unnormalised stand-in "
                 "(jobs/filters-digits24.toml) does not reproduce and is marked so",
         build=kunin.fig6b, n_panels=19, categorical=("y",),
         tiny={"jobs/paper/kunin-fig6b.toml": {"epochs": "1", "records": "[1]"}}),
    _fig(name="kunin-fig6c", paper=KUNIN, label="Fig. 6c",
         panels="test accuracy on the random hierarchy model against the training fraction",
         jobs=("jobs/paper/kunin-fig6c.toml",), full_jobs=("jobs/rhm-alpha.toml",),
         variables=("final_test_acc",),
         layout="1 panel, log training fraction, one line per α",
         claim="The relative scale changes the sample complexity of hierarchical data; "
               "upstream lowers it.",
         measure="training fraction where the seed-mean accuracy first reaches 0.5, per α",
         differs="30 epochs (not 250), 4 fractions ≤ 0.1, 1 seed (not 6), 4000 test points",
         build=kunin.fig6c, n_panels=1,
         tiny={"jobs/paper/kunin-fig6c.toml": {"epochs": "2", "test_size": "200"}}),
    _fig(name="kunin-fig6d", paper=KUNIN, label="Fig. 6d",
         panels="train and validation accuracy of modular addition against steps, per α",
         jobs=("jobs/paper/kunin-fig6d.toml",), full_jobs=("jobs/grokking-alpha.toml",),
         variables=("train_acc", "val_acc", "steps_to_val"),
         layout="1 panel, log step axis, train dashed, validation solid",
         claim="Shrinking the embedding by α shortens the time to grokking.",
         measure="median steps to validation accuracy ≥ 0.99 per α at τ = 1 (censored runs "
                 "counted as the budget)",
         differs="x + y mod 23, 2000 steps (not 30000), 1 seed (not 5)",
         build=kunin.fig6d, n_panels=1,
         tiny={"jobs/paper/kunin-fig6d.toml": {"steps": "100", "eval_every": "25",
                                               "grid.tau": "0.5,1", "grid.alpha": "0.3,3"}}),
    _fig(name="kunin-fig7", paper=KUNIN, label="Fig. 7",
         panels="basins of a single neuron over initialisations (w0 · β*, a0)",
         jobs=("jobs/paper/kunin-fig7.toml",), full_jobs=("jobs/fig7.toml",),
         variables=("basin_score", "a", "w"),
         layout="one panel per |w0⊥|, the separating surface black, δ = 0 dashed",
         claim="There are two basins, separated by w0ᵀβ* + (a0/2)(δ + √(δ² + 4‖β*‖²)) = 0, "
               "which exists only where δ < 0.",
         measure="fraction of initialisations whose sign of a at the end equals the sign of "
                 "the basin score",
         differs="init grid chosen (the paper gives none); 12 x 12 per panel",
         build=kunin.fig7, n_panels=2,
         tiny={}),
    _fig(name="kunin-fig8", paper=KUNIN, label="Fig. 8",
         panels="exact ν, φ, a, w1, w2 against time, one row per β0",
         jobs=("jobs/paper/kunin-fig8.toml",), full_jobs=("jobs/fig8.toml",),
         variables=("nu", "phi", "a", "w"),
         layout="3 rows (β0 at 3π/2, −π/4, π/4) x 5 columns, one line per δ",
         claim="The exact solution gives the time courses of ν = wᵀβ*/a, φ, a and w for any "
               "initialisation.",
         measure="max |exact − numeric| over ν, φ, a, w; the number of β0 rows",
         differs="δ values chosen; ζ (undefined in the paper) not drawn",
         build=kunin.fig8, n_panels=15,
         tiny={"jobs/paper/kunin-fig8.toml": {"n_records": "21"}}),
    _fig(name="kunin-fig9", paper=KUNIN, label="Fig. 9",
         panels="activation regions of a 3-layer ReLU net at init, with and without biases",
         jobs=(), variables=(),
         layout="1 x 2 panels over the square [−1, 1]², parity 2-colouring",
         claim="With biases the partition is polytopes, without biases cones; the parity of "
               "active units 2-colours it.",
         measure="region count with and without biases; fraction of region boundaries where "
                 "the parity flips",
         differs="drawn from one He initialisation (seed 0), bias s.d. 0.5 (the paper gives "
                 "no distribution); no result file",
         build=kunin.fig9, n_panels=2),
    _fig(name="kunin-fig10", paper=KUNIN, label="Fig. 10",
         panels="train and test loss, Hamming and parameter distance against steps",
         jobs=("jobs/paper/kunin-fig10.toml",), full_jobs=("jobs/fig1b.toml",),
         variables=("train_loss", "test_loss", "hamming_distance", "param_distance"),
         layout="1 x 4 panels, log step axis; losses clipped at the integrator floor 1e-12",
         claim="Between the last two decades only the train loss still moves; test loss and "
               "the distances barely change.",
         measure="median over the grid of the relative change of each quantity over the last "
                 "decade of steps",
         differs="d = 20, n = 200, steps to 10^4 (paper: d = 100, 10^5 → 10^6)",
         build=kunin.fig10, n_panels=4,
         tiny={"jobs/paper/kunin-fig10.toml": {"steps": "1000", "n_test": "100",
                                               "records": "[0, 10, 100, 1000]"}}),
    _fig(name="kunin-fig12", paper=KUNIN, label="Fig. 12",
         panels="median steps to grokking over (τ, α)",
         jobs=("jobs/paper/kunin-fig6d.toml",), full_jobs=("jobs/grokking-alpha.toml",),
         variables=("steps_to_val", "censored_val"),
         layout="1 heat map, categorical α and τ axes, censored cells marked ≥",
         claim="The fastest grokking is in an unbalanced rich setting.",
         measure="the (τ, α) cell with the smallest uncensored median steps to grokking",
         differs="3 x 3 grid (paper 5 x 5), 1 seed, 2000 steps",
         build=kunin.fig12, n_panels=1, categorical=("x", "y"),
         tiny={"jobs/paper/kunin-fig6d.toml": {"steps": "100", "eval_every": "25",
                                               "grid.tau": "0.5,1", "grid.alpha": "0.3,3"}}),
    _fig(name="azulay-diagonal", paper=AZULAY, label="Figure 7.1 (§7.1, §9)",
         panels="population error of a diagonal net against α, one line per shape s",
         jobs=("jobs/paper/azulay-diagonal.toml",), full_jobs=("jobs/azulay-diagonal.toml",),
         variables=("population_error",),
         layout="1 panel, log-log, one line per s, ±1 s.d. band over seeds",
         claim="s → 1 moves towards the NTK regime even at tiny α; s = 0 is best.",
         measure="population error at the smallest α, s = 0 against the largest s",
         differs="d = 200, N = 20, r* = 2 (paper d = 1000, N = 100, r* = 5); 8 α, 2 seeds; "
                 "exact flow instead of GD",
         build=azulay.diagonal, n_panels=1,
         tiny={"jobs/paper/azulay-diagonal.toml": {"d": "40", "N": "8"}}),
    _fig(name="azulay-fc", paper=AZULAY, label="§7.2 (fully connected)",
         panels="distance of the fully connected neuron's limit to the kernel predictor",
         jobs=("jobs/paper/azulay-fc.toml",), full_jobs=("jobs/azulay-fc.toml",),
         variables=("beta_inf",),
         layout="1 panel, categorical s axis, one line per α",
         claim="For a fully connected neuron s → 1 gives the kernel regime at any α; a "
               "balanced s ≈ 0 is needed for a non-kernel bias.",
         measure="‖β∞ − β_K‖ / ‖β_K − w̃0‖ per (α, s), β_K the tangent-kernel predictor",
         differs="the authors' code's grid α ∈ {0.01, 0.1}, s ∈ {0, 0.5, 0.95}; d = 50, N = 10",
         build=azulay.fully_connected, n_panels=1, categorical=("x",),
         tiny={"jobs/paper/azulay-fc.toml": {"t_max": "20", "n_records": "5"}}),
    _fig(name="ren-fig1", paper=REN, label="Fig. 1",
         panels="per-task loss curves and their sum",
         jobs=("jobs/paper/ren-fig2.toml",), full_jobs=("jobs/ren-fig2-small.toml",),
         variables=("loss", "overlap", "norm", "t_recover"),
         layout="1 x 2 panels, log time: per-task curves; total loss",
         claim="A smooth power-law loss arises as the superposition of sharp emergent "
               "per-task curves.",
         measure="tasks recovered; median width of a task's emergence (90 % → 10 % of its "
                 "loss) relative to its emergence time",
         differs="population gradient flow, d = 64, P = 16 (illustrative in the paper)",
         build=ren.fig1, n_panels=2,
         tiny={"jobs/paper/ren-fig2.toml": {"d": "16", "P": "4", "t_max": "300",
                                            "n_records": "40"}}),
    _fig(name="ren-fig2a", paper=REN, label="Fig. 2a",
         panels="idealised loss curves for several widths",
         jobs=("jobs/paper/ren-fig2.toml",), full_jobs=("jobs/ren-fig2-small.toml",),
         variables=("loss_theory",),
         layout="1 panel, log-log, one line per width m",
         claim="Idealised curves are a staircase, then a power law, then a plateau; the "
               "compute-optimal frontier is L ∝ (mt)^{−1/3} at β = 0.8.",
         measure="time and width slopes of the idealised curves (report/scaling.py fits) "
                 "against −(2β−1)/β and −(2β−1)",
         differs="the greedy times of the simulated initial overlaps, not identical overlaps",
         build=ren.fig2a, n_panels=1,
         tiny={"jobs/paper/ren-fig2.toml": {"d": "16", "P": "4", "t_max": "300",
                                            "n_records": "40"}}),
    _fig(name="ren-fig2b", paper=REN, label="Fig. 2b",
         panels="simulated loss against time and compute, with the compute-optimal frontier",
         jobs=("jobs/paper/ren-fig2.toml",), full_jobs=("jobs/ren-fig2.toml",),
         variables=("loss",),
         layout="1 x 2 panels, log-log, one line per width m",
         claim="Gradient descent on the population loss has a compute-optimal slope ≈ −1/3.",
         measure="OLS slope of the compute envelope (and its finite-P correction) against "
                 "−(2β−1)/(1+β)",
         differs="d = 64, P = 16, adaptive gradient flow (paper d = 2048, P = 1024, GD)",
         build=ren.fig2b, n_panels=2,
         tiny={"jobs/paper/ren-fig2.toml": {"d": "16", "P": "4", "t_max": "300",
                                            "n_records": "40"}}),
    _fig(name="ren-sample-complexity", paper=REN, label="§1.1 sample complexity",
         panels="online-SGD steps to recovery against d",
         jobs=("jobs/paper/ren-sample.toml",), full_jobs=("jobs/ren-sgd-dscaling.toml",),
         variables=("steps_recover",),
         layout="1 panel, log-log, runs grey, median blue, fit and d^{k*−1} reference",
         claim="The sample complexity of online SGD is n ≍ d^{k*−1} (d³ for h4).",
         measure="OLS slope of log median steps to recovery against log d, with its 95 % "
                 "interval",
         differs="d ≤ 48, 4 seeds (jobs/ren-sgd-dscaling.toml: d ≤ 128, 8 seeds)",
         build=ren.sample_complexity, n_panels=1,
         tiny={"jobs/paper/ren-sample.toml": {"steps": "200000", "grid.d": "8,12,16",
                                               "grid.seed": "range(2)"}}),
)

BY_NAME = {f.name: f for f in REGISTRY}


def get(name: str) -> PaperFigure:
    """The registered figure ``name``; a BadInput listing the names otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise BadInput(f"figure {name!r}: not registered (see 'richlazy figure --list'; "
                       f"names: {', '.join(BY_NAME)})") from None


def job_stem(job: str) -> str:
    """The result file stem of a job file: ``jobs/paper/kunin-fig3.toml`` → ``kunin-fig3``."""
    return job.rsplit("/", 1)[-1].removesuffix(".toml")
