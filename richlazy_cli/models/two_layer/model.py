"""``two-layer``: teacher–student two-layer piecewise-linear networks over (τ, δ)
(docs/two-layer.md).

The headline experiment of Kunin et al. (Fig. 1, 5b, 10), following Chizat et al. A ReLU
teacher with ``k`` neurons (unit-norm ``w*_i`` uniform on the sphere, readouts ``a*_i = ±1``)
labels ``n`` training and ``n_test`` test inputs uniform on ``S^{d−1}``. The student

    f(x) = Σ_{k=1}^h a_k σ(w_kᵀ x),      σ(z) = max(z, γ z),  γ = ``leak``,  σ'(0) = 1,

starts from a balanced base initialisation (``‖u_k‖ = |ε_k| = 1``; with ``symmetrize`` the
``h/2`` base neurons are duplicated with ``a → −a`` so ``f ≡ 0``) rescaled to ``w_k = τα u_k``,
``a_k = (τ/α) ε_k`` with ``α(τ, δ)`` of docs/two-layer.md, eq. (2), hence ``|a_k|‖w_k‖ = τ²`` and
``a_k² − ‖w_k‖² = δ`` for every neuron. Training is full-batch gradient descent on the mean
squared error of the authors' code,

    L = (1/n) Σ_i (f(x_i) − y_i)²        (gradient factor 2/n),

with step ``lr/τ²`` (``lr_scaling = tau2``, the paper) or ``lr`` (``none``). The gradient-flow
time of the sum loss ½‖r‖² is ``t = lr_eff · step · 2/n`` (output ``time``; docs/two-layer.md,
eq. (5)).

All configurations of one ``seed`` share teacher, data, test set and base initialisation
(streams ``rng(seed, "teacher" | "data" | "test" | "init")``), so a batch is, e.g., a whole
τ × δ slice of one seed, trained together (see :mod:`._kernels` for the kernel).

Metrics at each checkpoint step (their products in the training dtype, every sum in float64):

* ``train_loss``, ``test_loss``: the mean squared error above on the training / test set;
* ``kernel_distance``: ``S(0,t) = 1 − ⟨K0,Kt⟩_F / (‖K0‖_F ‖Kt‖_F)`` of the empirical NTK over
  the training set and both layers with ``η = 1`` (docs/two-layer.md, eq. (7)), from the closed form
  ``K = σ(XWᵀ)σ(XWᵀ)ᵀ + (XXᵀ) ∘ (GGᵀ)``, ``G_ik = a_k σ'(w_kᵀx_i)`` — never the Jacobian;
* ``hamming_distance``: the *fraction* of training (sample, neuron) activation signs
  (``np.sign``, zero counts as its own sign) that differ from initialisation, docs/two-layer.md,
  eq. (8) (the authors' code reports ``h`` times this);
* ``param_distance``: ``‖θ_t − θ_0‖₂ = √(‖W_t − W_0‖_F² + ‖a_t − a_0‖²)``.

A configuration whose training loss becomes non-finite or exceeds 10⁶ × its initial loss is
frozen and marked ``status = 1``; its metrics from that step on are NaN; the others go on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from ...errors import DIVERGENCE_FACTOR, BadInput, Status
from ...numerics import compute
from ...numerics.compute import Implementation
from ...numerics.records import record_grid
from ...params import Param
from ..base import Batch, Model, Progress, register, var
from . import _data as tl_data
from . import _geometry as geo
from . import _kernels as kern

PROBE_STEPS = 200
"""Fewest steps of the configuration that ``sweep --dry-run`` times (:meth:`TwoLayer.probe`)."""
PROBE_GFLOP = 1.0
"""A dry run's probe trains for at least :data:`PROBE_STEPS` steps and as many as this many
GFLOP of steps (the cost's 4 n d h per step): a fraction of a second on one core."""


_K0_STORE_BYTES = 512 * 2**20
"""Above this many bytes of stored initial-kernel panels per batch, recompute K0 instead."""

_GROUP_SIZE = 4
"""Configurations per group, whose products are stacked where that is bitwise exact. Chosen by
timing at the paper's size: groups of 2 to 5 train a few per cent faster per configuration than
single configurations, and larger groups, whose stacked products are not bitwise exact at that
size, issue one product per configuration and gain nothing."""


def group_positions(B: int, g_max: int = _GROUP_SIZE) -> list[np.ndarray]:
    """Batch positions of the groups that train together: consecutive runs of ``g_max``
    configurations, and the rest (17 = 4 + 4 + 4 + 4 + 1)."""
    return [np.arange(s, min(s + g_max, B)) for s in range(0, B, g_max)]


def effective_lr(lr: Any, tau: Any, scaling: str) -> Any:
    """The gradient-descent step: ``lr/τ²`` with ``lr_scaling = tau2`` (the paper's, so that
    the function moves at a rate independent of τ), else ``lr``."""
    return lr / tau**2 if scaling == "tau2" else lr * np.ones_like(tau)


SMALLEST_STEP = 10.0
"""Least effective step, in rounding units of the training dtype, that ``check`` accepts:
below it the updates fall under the weights' rounding (at lr = 0.005 with ``tau2``: frozen
from τ ≈ 300 in float32 and 10⁷ in float64, 13% off the lazy limit's loss at τ = 100 in
float32 where the step is 4 units; 0.14% off at τ = 30, 47 units; docs/two-layer.md)."""


def checkpoint_steps(steps: int, n_records: int, records: Any) -> np.ndarray:
    """Explicit ``records`` (sorted, unique), or ``0`` plus ``n_records − 1`` log-spaced
    integer steps from 1 to ``steps`` with duplicates removed."""
    return record_grid(int(steps), max(n_records - 1, 1), with_last=True, explicit=records)


IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("numba", "the reference: compiled loop, BLAS", ("train",), reference=True,
                   run="_train_numpy"),
    Implementation("torch", "the whole batch as one computation, on a CPU or GPU", ("train",),
                   devices=("cpu", "cuda"), requires=("torch",), tolerance=1e-10,
                   float32_tolerance=1e-5, batchable=("seed",), run="_train_torch"),
    Implementation("torch-compiled", "the torch implementation with its step compiled by "
                   "torch.compile (CUDA graphs on a GPU); an eager step where compiling fails",
                   ("train",), devices=("cpu", "cuda"), requires=("torch",), tolerance=1e-10,
                   float32_tolerance=1e-5, batchable=("seed",), run="_train_compiled"),
)
"""Where two-layer trains (docs/two-layer.md, "The torch backend"). On the CPU the torch row
is bitwise across batching: every batched product whose kernel would change an item's bits
(a batch of one included) is computed one item at a time (:mod:`._torch`); so is
the compiled row, whose compiled passes are elementwise or reduce within one configuration
(docs/performance.md, "The compiled step"). Both torch rows batch over ``seed`` besides
(``batchable``): a batch holds several seeds' data sets, each seed's configurations
multiplied with its own data (:class:`._torch.Blocks`), so that a whole job of
several seeds trains in one chunk on a GPU; a configuration's bits on the CPU are those of
its own seed's batch. Each row names the method that trains on it (the model's dispatch
calls it)."""


@register
class TwoLayer(Model):
    """Teacher–student two-layer piecewise-linear network trained by full-batch GD
    (docs/two-layer.md)."""

    name = "two-layer"
    summary = (
        "teacher-student two-layer ReLU networks over (tau, delta): rich vs lazy "
        "(Kunin et al. 2024)"
    )
    actions = ("train",)
    params = (
        Param("d", "int", 100, "input dimension", low=1),
        Param("h", "int", 50, "student width (number of hidden neurons m)", low=1),
        Param("k", "int", 3, "teacher width", low=1),
        Param("n", "int", 1000, "number of training samples", low=1),
        Param("n_test", "int", 10000, "number of test samples", low=1),
        Param("tau", "float", 1.0, "overall scale: |a_k| ||w_k|| = tau^2", low=0.0,
              low_open=True, batchable=True),
        Param("delta", "float", 0.0, "relative scale: a_k^2 - ||w_k||^2 = delta",
              batchable=True),
        Param("leak", "float", 0.0, "leaky-ReLU slope gamma in sigma(z) = max(z, gamma z)",
              low=0.0, high=1.0, batchable=True),
        Param("lr", "float", 5e-3, "learning rate (divided by tau^2 when lr_scaling = tau2)",
              low=0.0, low_open=True, batchable=True),
        Param("lr_scaling", "str", "tau2", "step = lr/tau^2 (tau2, the paper) or lr (none)",
              choices=("tau2", "none")),
        Param("steps", "int", 10000, "number of gradient-descent steps", low=0),
        Param("n_records", "int", 41,
              "log-spaced checkpoint steps including 0 and steps (duplicates removed)", low=2),
        Param("records", "int_list", None, "explicit checkpoint steps (overrides n_records)",
              low=0, optional=True),
        Param("seed", "int", 0, "seed of teacher, data, test set and base initialisation",
              low=0),
        Param("symmetrize", "bool", True, "duplicate neurons with a -> -a so f = 0 at init"),
        Param("dtype", "str", "float64", "floating-point type of training (metrics in float64)",
              choices=("float64", "float32")),
        Param("save_params", "bool", False, "also return W and a at every checkpoint"),
        Param("data", "str", "teacher", "training data: the ReLU teacher, the 2-D xor task or "
              "the .npz of data_file", choices=("teacher", "xor", "npz")),
        Param("xor_labels", "str", "smooth", "xor labels: 2 x1 x2 (smooth) or sign(x1 x2)",
              choices=("smooth", "sign")),
        Param("data_file", "path", None, ".npz with X (n x d), y (n) and optionally X_test, "
              "y_test (data = npz)", optional=True),
        Param("save_surface", "bool", False, "d = 2: also return f and the parity of the "
              "activation pattern on 720 angles of the circle at every checkpoint"),
        compute.implementation_param(IMPLEMENTATIONS),
        compute.device_param(),
    )
    implementations: ClassVar[tuple[Implementation, ...]] = IMPLEMENTATIONS
    implementation_aliases: ClassVar[dict[str, dict[str, dict[str, tuple[str, ...]]]]] = {
        "train": {"backend": {"numpy": ("numba",), "torch": ("torch",)}}}
    """The older, deprecated parameters that chose the implementation (docs/usage.md, "Older
    parameter names")."""
    aliases: ClassVar[dict[str, dict[str, str]]] = {
        "n_checkpoints": {"train": "n_records"},
        "checkpoints": {"train": "records"},
    }
    """The older names of the record count and points (docs/engine.md, "Records")."""
    overrides: ClassVar[dict[str, tuple[str, ...]]] = {"records": ("n_records",)}
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": (
            {"d": 5, "h": 4, "k": 2, "n": 12, "n_test": 20, "steps": 20, "n_records": 4,
             "tau": 0.5, "delta": 0.5},
            {"d": 5, "h": 4, "k": 2, "n": 12, "n_test": 20, "steps": 20, "n_records": 4,
             "tau": 1.2, "delta": -0.4, "leak": 0.1},
            {"d": 5, "h": 4, "k": 2, "n": 12, "n_test": 20, "steps": 20, "n_records": 4,
             "tau": 0.5, "delta": 0.5, "seed": 1, "save_params": True},
            {"d": 2, "h": 4, "k": 2, "n": 12, "n_test": 20, "steps": 20, "n_records": 4,
             "tau": 0.5, "delta": -0.5, "data": "xor", "save_surface": True},
        ),
    }

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        """With ``data = npz``: ``n`` and ``n_test`` are the file's sizes."""
        tl_data.derive_data(values)

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        if values["symmetrize"] and values["h"] % 2:
            raise BadInput(f"parameter h: {values['h']} must be even when symmetrize is true")
        ck = values.get("records")
        if ck is not None and np.any(np.asarray(ck) > values["steps"]):
            raise BadInput(
                f"parameter records: every step must be in [0, steps={values['steps']}]"
            )
        tl_data.check_data(values)
        step = float(effective_lr(float(values["lr"]), float(values["tau"]),
                                  str(values["lr_scaling"])))
        unit = float(np.finfo(np.dtype(str(values["dtype"]))).eps)
        if step < SMALLEST_STEP * unit:
            formula = "lr/tau²" if values["lr_scaling"] == "tau2" else "lr"
            remedy = ("dtype = float64, a larger lr or a smaller tau"
                      if values["dtype"] == "float32" else "a larger lr or a smaller tau")
            raise BadInput(
                f"parameter tau: the step {formula} = {step:.2g} (lr = {values['lr']:g}, "
                f"tau = {values['tau']:g}) is below {SMALLEST_STEP:g} rounding units of "
                f"{values['dtype']} ({SMALLEST_STEP * unit:.2g}): the weights would not move; "
                f"use {remedy}")

    @classmethod
    def _probe(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same configuration for fewer steps: at least 200, and as many as one
        GFLOP of training steps (:data:`PROBE_GFLOP`), with the run's density of checkpoints
        (evenly spaced, at least the first and the last). A probe of a run's first steps
        alone would hold most of its log-spaced checkpoints, whose metrics run at other
        flop rates than the steps: the probe's mix of steps and checkpoints is the run's, so
        that its time per unit of :meth:`_cost` is the run's."""
        short = dict(values)
        steps = int(values["steps"])
        per_step = 4.0 * values["n"] * values["d"] * values["h"] / 1e9
        probe_steps = min(steps, max(PROBE_STEPS, math.ceil(PROBE_GFLOP / per_step)))
        if probe_steps == steps:
            return short
        n_ck = len(checkpoint_steps(steps, values["n_records"], values.get("records")))
        m = max(2, round(n_ck * probe_steps / steps))
        short["steps"] = probe_steps
        short["records"] = np.unique(np.linspace(0, probe_steps, m).round()
                                     .astype(np.int64))
        return short

    @classmethod
    def _cost(cls, values: Mapping[str, Any]) -> float:
        n, d, h = values["n"], values["d"], values["h"]
        n_ck = len(checkpoint_steps(values["steps"], values["n_records"],
                                    values.get("records")))
        per_ck = 2.0 * n * n * h + 2.0 * values["n_test"] * d * h
        return (4.0 * n * d * h * values["steps"] + n_ck * per_ck) / 1e9

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Over the checkpoints (``n_ck`` of :func:`checkpoint_steps`), float64: the six
        metrics (train_loss, test_loss, kernel_distance, hamming_distance, param_distance,
        time), direction_change and preconditioner_drift, teacher_alignment (``data =
        teacher``), partition_change, n_regions and output_sup (``d = 2``); ``alpha``; with the
        teacher, teacher_W (k, d) and teacher_a (k); with ``save_params``, W (n_ck, h, d) and
        a (n_ck, h); with ``save_surface`` (``d = 2``), the surface (n_ck, 720) in float64 and
        its parity in int8. No output's shape depends on the number of samples, so the
        ``npz`` data of a file are declared too."""
        d, h, k = int(values["d"]), int(values["h"]), int(values["k"])
        n_ck = len(checkpoint_steps(int(values["steps"]), int(values["n_records"]),
                                    values.get("records")))
        teacher = values["data"] == "teacher"
        per_ck = 6 + 2 + (1 if teacher else 0) + (3 if d == 2 else 0)
        floats = n_ck * per_ck + 1
        if teacher:
            floats += k * d + k
        if values["save_params"]:
            floats += n_ck * h * (d + 1)
        surface = 0
        if values["save_surface"] and d == 2:
            floats += n_ck * geo.PARTITION_GRID
            surface = n_ck * geo.PARTITION_GRID  # the int8 parity
        return 8.0 * floats + surface

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """The torch implementation's memory per configuration of a batch, on its device
        (``s`` the training dtype's bytes): the step's four (h, n) buffers ``Z``, ``σ'(Z)``,
        ``A``, ``E`` and its sign mask (:class:`._torch.FusedStep`), the initial
        features ``A₀``, ``G₀`` and signs kept for the kernel and Hamming distances, a
        checkpoint's (h, n) temporaries (signs, masks, the current ``G``), the parameters'
        copies (``W``, ``a``, ``W₀``, ``a₀`` in float64, ``ξ``), and the data every
        configuration of a seed shares, counted per configuration (a batch of several seeds
        holds each seed's once, at most one set per configuration): ``X`` and ``Xᵀ``, the Gram
        matrix ``XXᵀ``, the test inputs and targets, and the configuration's own copy of its
        targets that a batch of several seeds holds. Not counted: the checkpoint metrics' scratch, a
        slice of configurations bounded by one GiB of kernels whatever the batch, which the
        engine's headroom on a GPU covers (docs/performance.md, "Chunks on a GPU"). At the
        paper's size (d = 100, h = 50, n = 1000, n_test = 10⁴): 22 MB in float64, 11 MB in
        float32. The NumPy implementation's is :func:`numpy_working_bytes`."""
        impl = cls.implementation(values, action)
        if impl is None or not impl.on_devices:
            return numpy_working_bytes(values)
        s = 8 if values["dtype"] == "float64" else 4
        d, h, n, n_test = (int(values[k]) for k in ("d", "h", "n", "n_test"))
        activations = (4 + 2 + 3) * h * n * s + (1 + 1 + 2) * h * n
        params = 4 * h * (d + 1) * s + 2 * h * (d + 1) * 8 + 2 * n * 8
        shared = (2 * n * d + n * n + (d + 1) * n_test + 2 * n) * s
        return float(activations + params + shared)

    @classmethod
    def load_native(cls) -> None:
        kern.jit()  # numba's compiled loop and the BLAS its products call (SciPy's)

    # ------------------------------------------------------------------------------------------
    def _train_numpy(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """Train the batch (see the module docstring) with one BLAS thread.

        One BLAS thread is not only fastest for these small products (n × d × h), it is
        required for reproducibility: OpenBLAS sums the backward product ``(D∘r)ᵀX`` in a
        different order with 2 threads than with 1 (measured), so results would otherwise
        depend on the thread count of the process that runs the batch.
        """
        self.load_native()  # before the limit is set, so that it covers their BLAS
        with threadpool_limits(limits=1, user_api="blas"):
            return self._train(batch, progress)

    def _train(self, batch: Batch, progress: Progress | None) -> xr.Dataset:
        v = batch.values
        B = batch.size
        n = int(v["n"])
        steps = int(v["steps"])
        dtype = np.dtype(v["dtype"])
        tau, delta, leak, lr_eff, ck = _schedule(batch)
        prob = _problem(v)
        W_init, a_init = kern.initial_params(prob, tau, delta)
        W = W_init.astype(dtype)
        a = a_init.astype(dtype)
        X = np.ascontiguousarray(prob.X.astype(dtype))
        XT = np.ascontiguousarray(X.T)
        y = prob.y.astype(dtype)
        coef = lr_eff * 2.0 / n

        metrics = _Metrics(prob, W, a, leak, ck, bool(v["save_params"]))
        metrics.geometry = _geometry(v, (prob.teacher_w, prob.teacher_a), metrics.W0,
                                     metrics.a0, leak, len(ck))
        status = np.zeros(B, dtype=np.int8)
        spaces: dict[int, kern.GroupWorkspace] = {}
        groups = [kern.ConfigGroup(idx, W[idx], a[idx], leak[idx], coef[idx], n, spaces)
                  for idx in group_positions(B)]
        report_every = max(1, steps // 200)

        def advance(t_begin: int, t_end: int) -> None:
            """Steps ``t_begin … t_end − 1`` of every group; diverged configurations are
            marked and leave their group."""
            for c0 in range(t_begin, t_end, report_every):
                c1 = min(c0 + report_every, t_end)
                for grp in groups:
                    t = c0
                    while t < c1 and grp.size:
                        t, removed = grp.advance(X, XT, y, t, c1, steps, DIVERGENCE_FACTOR)
                        status[removed] = Status.DIVERGED
                groups[:] = [grp for grp in groups if grp.size]
                if progress is not None:
                    progress(c1 / max(steps, 1))

        # Step t evaluates the loss at θ_t (a configuration diverged there is frozen at θ_t),
        # then updates to θ_{t+1} unless t = steps; the last step runs only if it is a
        # checkpoint. Metrics of checkpoint t are of θ_t, for the configurations that pass
        # step t's divergence test.
        t = 0
        for j, t_ck in enumerate(ck):
            advance(t, int(t_ck))
            if not groups:
                break
            snap = (np.concatenate([grp.idx for grp in groups]),
                    np.concatenate([grp.W for grp in groups]),
                    np.concatenate([grp.a for grp in groups]))
            advance(int(t_ck), int(t_ck) + 1)
            ok = status[snap[0]] == 0
            metrics.record(j, snap[0][ok], snap[1][ok], snap[2][ok])
            t = int(t_ck) + 1
        advance(t, steps)
        if progress is not None:
            progress(1.0)
        return metrics.dataset(ck, status, lr_eff, n, kern.alpha_of(tau, delta))

    def _train_torch(self, batch: Batch, progress: Progress | None,
                     placement: compute.Placement) -> xr.Dataset:
        """The torch implementation (:mod:`._torch`), its step run eagerly."""
        return self._train_on_torch(batch, progress, placement, compiled=False)

    def _train_compiled(self, batch: Batch, progress: Progress | None,
                        placement: compute.Placement) -> xr.Dataset:
        """The torch implementation with its step compiled by ``torch.compile``."""
        return self._train_on_torch(batch, progress, placement, compiled=True)

    def _train_on_torch(self, batch: Batch, progress: Progress | None,
                        placement: compute.Placement, compiled: bool) -> xr.Dataset:
        """The torch implementation (:mod:`._torch`) on ``placement``'s device: same
        problem, initialisation, step rule, divergence test and metrics as the NumPy
        implementation. A batch of several seeds trains as one, each seed's configurations
        on its own problem (teacher, data, test set, base initialisation), ordered by seed
        on the device and given back in the batch's order."""
        seeds = batch.column("seed").astype(np.int64)
        order = np.argsort(seeds, kind="stable")
        if np.array_equal(order, np.arange(batch.size)):
            return self._train_torch_sorted(batch, seeds, progress, placement, compiled)
        ds = self._train_torch_sorted(_reordered(batch, order), seeds[order], progress,
                                      placement, compiled)
        return ds.isel(point=np.argsort(order))

    def _train_torch_sorted(self, batch: Batch, seeds: np.ndarray, progress: Progress | None,
                            placement: compute.Placement, compiled: bool) -> xr.Dataset:
        from . import _torch as tb

        v = batch.values
        n, steps = int(v["n"]), int(v["steps"])
        tau, delta, leak, lr_eff, ck = _schedule(batch)
        distinct, group = np.unique(seeds, return_inverse=True)
        group = group.reshape(-1)
        probs = [_problem({**v, "seed": int(seed)}) for seed in distinct]
        B, (h, d) = batch.size, probs[0].base_w.shape
        W0, a0 = np.empty((B, h, d)), np.empty((B, h))
        for k, prob in enumerate(probs):
            mine = group == k
            W0[mine], a0[mine] = kern.initial_params(prob, tau[mine], delta[mine])
        dtype = np.dtype(v["dtype"])
        teacher = None  # each configuration's own seed's teacher
        if v["data"] == "teacher":
            teacher = (np.stack([probs[k].teacher_w for k in group]),
                       np.stack([probs[k].teacher_a for k in group]))
        geometry = _geometry(v, teacher, W0.astype(dtype).astype(np.float64),
                             a0.astype(dtype).astype(np.float64), leak, len(ck))
        device = placement.device
        one = len(probs) == 1

        def data(name: str) -> np.ndarray:
            return getattr(probs[0], name) if one else np.stack([getattr(p, name) for p in probs])

        run = tb.TorchRun(data("X"), data("y"), data("X_test"), data("y_test"), W0, a0, leak,
                          lr_eff * 2.0 / n, steps, ck, DIVERGENCE_FACTOR, str(v["dtype"]),
                          device, bool(v["save_params"]), geometry.record_rows,
                          compiled=compiled, group=None if one else group)
        out = tb.train(placement.torch, run, progress)
        return metrics_dataset(out, ck, out["status"], lr_eff, n, kern.alpha_of(tau, delta),
                               bool(v["save_params"]), geometry)


def numpy_working_bytes(values: Mapping[str, Any]) -> float:
    """The NumPy implementation's peak memory for one configuration (``s`` the training
    dtype's bytes; :meth:`TwoLayer._train`, :class:`_Metrics`, :mod:`._kernels`):

    * ``h × d``: in float64 the seed's base directions, the scaled initialisation ``W₀`` and
      the metrics' copy of it, a checkpoint's ``W`` and the temporaries of its distances
      (``W − W₀``, the unit directions of both); in the training dtype the trained ``W``,
      its group's copy, the checkpoint's snapshot, the backward product ``P`` and the
      step's temporaries: ``60 + 6·s`` bytes per entry (measured: 107 in float64, 83 in
      float32);
    * ``n × d``: ``X`` in float64 and three copies in the training dtype (``X``, ``Xᵀ``, the
      metrics'); ``n_test × d``: ``X_test`` and its transpose in the training dtype;
    * ``h × n``: a checkpoint's ``Z``, ``σ'(Z)``, ``σ(Z)``, ``G``, the step's block of
      pre-activations and the initial signs (int8); with the initial kernel recomputed
      (:data:`_K0_STORE_BYTES` exceeded), the initial features ``σ(Z₀)`` and ``G₀`` besides;
      ``h × n_test``: the test pass's pre-activations;
    * ``n²``: the upper panels of ``XXᵀ`` in the training dtype and of the initial kernel in
      float64 where they are stored (``n (n + n_b) / 2`` entries each, ``n_b`` rows a panel).

    Every product of a configuration is of these shapes; the outputs are the model's
    ``_output_bytes``. Checked against the measured peak by tests/models/test_memory.py."""
    s = 8 if values["dtype"] == "float64" else 4
    d, h, n, n_test = (int(values[k]) for k in ("d", "h", "n", "n_test"))
    panels = n * (n + kern._panel_rows(n)) / 2
    stored = n * (n + kern._panel_rows(n)) * 4 <= _K0_STORE_BYTES
    per_hn = 5 * s + 1 + (0 if stored else 2 * s)
    return float(h * d * (60 + 6 * s) + n * d * (8 + 3 * s) + n_test * d * (8 + s)
                 + h * n * per_hn + h * n_test * s + panels * (s + (8 if stored else 0)))


def _reordered(batch: Batch, order: np.ndarray) -> Batch:
    """``batch`` with its configurations in ``order`` (every batchable value reindexed)."""
    values = {k: (np.asarray(x)[order] if k in batch.batchable else x)
              for k, x in batch.values.items()}
    return Batch(size=batch.size, values=values, batchable=batch.batchable)


def _schedule(batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                     np.ndarray]:
    """τ, δ and the leak (B,), the effective step ``lr_eff`` (``lr/τ²`` with
    ``lr_scaling = tau2``) and the checkpoint steps of a batch."""
    v = batch.values
    tau = batch.column("tau").astype(np.float64)
    lr = batch.column("lr").astype(np.float64)
    lr_eff = effective_lr(lr, tau, str(v["lr_scaling"]))
    ck = checkpoint_steps(int(v["steps"]), int(v["n_records"]), v.get("records"))
    return (tau, batch.column("delta").astype(np.float64),
            batch.column("leak").astype(np.float64), lr_eff, ck)


def _problem(v: Mapping[str, Any]) -> kern.Problem:
    """The seed's teacher (or data set), training and test sets and base initialisation."""
    return kern.make_problem(int(v["seed"]), int(v["d"]), int(v["h"]), int(v["k"]), int(v["n"]),
                             int(v["n_test"]), bool(v["symmetrize"]), v["data"],
                             v["xor_labels"],
                             tl_data.load_npz(v["data_file"]) if v["data"] == "npz" else None)


def _geometry(v: Mapping[str, Any], teacher: tuple[np.ndarray, np.ndarray] | None,
              W0: np.ndarray, a0: np.ndarray, leak: np.ndarray, n_ck: int
              ) -> geo.GeometryRecorder:
    """The recorder of the geometric checkpoint outputs (docs/two-layer.md, eqs. (10)-(14)),
    against the ``teacher`` (one shared, or one per configuration) where the data are a
    teacher's."""
    return geo.GeometryRecorder(W0, a0, leak, n_ck,
                                teacher if v["data"] == "teacher" else None,
                                bool(v["save_surface"]))


class _Metrics:
    """Checkpoint metrics of a batch (products in the training dtype, sums in float64), with
    the initial NTK kept in panels."""

    def __init__(self, prob: kern.Problem, W: np.ndarray, a: np.ndarray, leak: np.ndarray,
                 ck: np.ndarray, save_params: bool) -> None:
        B, h, d = W.shape
        n = prob.X.shape[0]
        n_ck = len(ck)
        self.prob = prob
        self.leak = leak
        self.save_params = save_params
        self.geometry: geo.GeometryRecorder | None = None
        # The products of a checkpoint (features, NTK panels, the test-set forward pass) run in
        # the training dtype, which in float32 halves them; every sum (losses, the Frobenius
        # products of the kernel distance) is taken in float64. A float32 run's parameters
        # carry float32 rounding anyway, so this loses nothing it had.
        self.X = np.ascontiguousarray(prob.X.astype(W.dtype))
        self.y = prob.y.astype(W.dtype)
        self.C = kern.gram_panels(self.X)
        self.X_test_T = np.ascontiguousarray(prob.X_test.T.astype(W.dtype))
        self.y_test = prob.y_test.astype(W.dtype)
        self.Zt = np.empty((h, self.X_test_T.shape[1]), W.dtype)
        self.W0 = W.astype(np.float64)
        self.a0 = a.astype(np.float64)
        nan = np.full((B, n_ck), np.nan)
        self.out: dict[str, np.ndarray] = {
            name: nan.copy() for name in
            ("train_loss", "test_loss", "kernel_distance", "hamming_distance", "param_distance")}
        if save_params:
            self.W_hist = np.full((B, n_ck, h, d), np.nan)
            self.a_hist = np.full((B, n_ck, h), np.nan)
        self.store_K0 = B * n * (n + kern._panel_rows(n)) * 4 <= _K0_STORE_BYTES
        # two workspaces: the current kernel's panels and, when K0 is not stored, K0's
        self.work = [kern.panel_workspace(n, W.dtype) for _ in range(2)]
        self.work64 = ([np.empty(w.shape[1]) for w in self.work]  # float32 panels, widened
                       if W.dtype != np.float64 else [])
        self.K0: list[list[np.ndarray] | None] = [None] * B
        self.feat0: list[tuple[np.ndarray, np.ndarray]] = []
        self.sign0: list[np.ndarray] = []
        self.norm0 = np.empty(B)
        for i in range(B):
            Z, A, G = kern.features(self.X, W[i], a[i], float(leak[i]))
            self.sign0.append(np.sign(Z).astype(np.int8))
            self.feat0.append((A, G))
            panels = []
            total = 0.0
            for i0, K in self._panels(A, G, None if self.store_K0 else 0):
                total += kern.panel_inner(K, K, i0, i0 + K.shape[0])
                if self.store_K0:
                    panels.append(K)
            self.norm0[i] = total
            if self.store_K0:
                self.K0[i] = panels
        if self.store_K0:
            self.feat0 = []

    def _panels(self, A: np.ndarray, G: np.ndarray, slot: int | None
                ) -> Iterator[tuple[int, np.ndarray]]:
        """The NTK's upper panels, computed in the training dtype and returned in float64:
        in workspace ``slot`` (each panel valid until the next), or as new arrays (None)."""
        work = None if slot is None else self.work[slot]
        for i0, K in kern.ntk_panels(A, G, self.C, work):
            if K.dtype != np.float64:
                K64 = (np.empty(K.shape) if slot is None
                       else self.work64[slot][:K.size].reshape(K.shape))
                np.copyto(K64, K)
                K = K64
            yield i0, K

    def _K0_panels(self, i: int) -> list[np.ndarray] | Any:
        panels = self.K0[i]
        if panels is not None:
            return panels
        A, G = self.feat0[i]
        return (K for _, K in self._panels(A, G, 1))

    def record(self, j: int, active: np.ndarray, W: np.ndarray, a: np.ndarray) -> None:
        for row, i in enumerate(active):
            Wf = W[row].astype(np.float64)
            af = a[row].astype(np.float64)
            gamma = float(self.leak[i])
            Z, A, G = kern.features(self.X, W[row], a[row], gamma)
            r = (A @ a[row] - self.y).astype(np.float64)
            self.out["train_loss"][i, j] = float(r @ r) / r.size
            Zt = np.matmul(W[row], self.X_test_T, out=self.Zt)  # h × n_test, reused buffer
            np.maximum(Zt, gamma * Zt if gamma else 0.0, out=Zt)  # σ(z) = max(z, γz), γ ≤ 1
            rt = (a[row] @ Zt - self.y_test).astype(np.float64)
            self.out["test_loss"][i, j] = float(rt @ rt) / rt.size
            self.out["hamming_distance"][i, j] = float(
                np.count_nonzero(np.sign(Z).astype(np.int8) != self.sign0[i])) / Z.size
            inner = 0.0
            normt = 0.0
            for (i0, K), K0 in zip(self._panels(A, G, 0), self._K0_panels(i), strict=True):
                i1 = i0 + K.shape[0]
                inner += kern.panel_inner(K0, K, i0, i1)
                normt += kern.panel_inner(K, K, i0, i1)
            self.out["kernel_distance"][i, j] = kern.kernel_distance_from(
                inner, self.norm0[i], normt)
            self.out["param_distance"][i, j] = math.sqrt(
                float(np.sum((Wf - self.W0[i]) ** 2)) + float(np.sum((af - self.a0[i]) ** 2)))
            if self.save_params:
                self.W_hist[i, j] = Wf
                self.a_hist[i, j] = af
            if self.geometry is not None:
                self.geometry.record(i, j, Wf, af)

    def dataset(self, ck: np.ndarray, status: np.ndarray, lr_eff: np.ndarray, n: int,
                alpha: np.ndarray) -> xr.Dataset:
        out = dict(self.out)
        if self.save_params:
            out["W"], out["a"] = self.W_hist, self.a_hist
        return metrics_dataset(out, ck, status, lr_eff, n, alpha, self.save_params,
                               self.geometry)


def metrics_dataset(o: Mapping[str, np.ndarray], ck: np.ndarray, status: np.ndarray,
                    lr_eff: np.ndarray, n: int, alpha: np.ndarray,
                    save_params: bool, geometry: Any = None) -> xr.Dataset:
    """The model's result from checkpoint arrays (B, n_checkpoints) of either backend, with
    the geometry recorder's variables (teacher alignment, partitions, ...) when given."""
    P = ("point", "step")
    data = {
        "train_loss": var(P, o["train_loss"], "training mean squared error (1/n) sum (f-y)^2"),
        "test_loss": var(P, o["test_loss"], "test mean squared error on n_test fresh points"),
        "kernel_distance": var(P, o["kernel_distance"],
                               "kernel distance S(0,t) of the empirical NTK (both layers)"),
        "hamming_distance": var(
            P, o["hamming_distance"],
            "fraction of training (sample, neuron) activation signs differing from "
            "initialisation"),
        "param_distance": var(P, o["param_distance"],
                              "parameter distance ||theta_t - theta_0||_2"),
        "time": var(P, lr_eff[:, None] * ck[None, :].astype(np.float64) * 2.0 / n,
                    "gradient-flow time of the sum loss, lr_eff * step * 2/n", "time"),
        "alpha": var(("point",), alpha, "layer ratio alpha(tau, delta) of the initialisation"),
        "status": var(("point",), status, "0 ok, 1 diverged (frozen)"),
    }
    if save_params:
        data["W"] = var(("point", "step", "neuron", "dim"), o["W"],
                        "first-layer weights w_k")
        data["a"] = var(("point", "step", "neuron"), o["a"], "readout weights a_k")
    coords = {"step": var(("step",), ck, "gradient-descent step", "steps")}
    if geometry is not None:
        extra, extra_coords = geometry.variables()
        data.update(extra)
        coords.update(extra_coords)
    return xr.Dataset(data, coords=coords)
