"""``cnn``: a LeNet's kernel, Hamming and parameter distances against the relative scale α
(Kunin et al. 2024 §5, Fig. 6a and App. D.3; docs/cnn.md).

Data: an offline source of :mod:`..practice.data` (default scikit-learn's ``digits``, a
stratified 80/20 split by ``rng(seed, "split")``), standardised with the training mean and
standard deviation. The probe set of the metrics is a seed-chosen ``probe_fraction`` of the
training set (``rng(seed, "probe")``).

Network (docs/cnn.md eq. (1)): ``lenet_digits`` (3×3 convolutions, for 8×8 or 24×24 images) or
``lenet5`` (5×5, for 28×28 or 32×32 images from an ``npz`` file); or, for the filter-smoothness
experiment (Kunin et al. 2024, Fig. 6b, Fig. 11; docs/cnn.md §5), ``smooth2d`` / ``smooth1d``:
a ``first_kernel``-wide convolution, a 3-wide one and global average pooling (docs/cnn.md
eq. (3)). He-normal weights, zero biases, then conv1 ÷ α and the last dense layer × α
(docs/practice.md eq. (1)).

Training (docs/cnn.md eq. (2)): Adam (β = (0.9, 0.999), ε = 1e-8; the paper does not name its
optimiser) or SGD with ``momentum`` on the mean cross-entropy, mini-batches of ``batch`` from a
fresh permutation per epoch (``rng(seed, "batches")``, the last batch possibly smaller).

Metrics (docs/practice.md §3) at checkpoint steps: 0, the first ``first_steps`` steps, and the
ends of the epochs in ``records`` (default 1, 2, 5, 10, 20, 50, 100, 200, 500, and the last
epoch): the kernel distance S(0,t) of the empirical NTK over the probe set (float64, built
layer by layer from the factorised per-example gradients, docs/practice.md eq. (7)), the
Hamming distance of the probe set's activation bits over every hidden unit, the parameter
distance and its ratio to ‖θ₀‖, losses and accuracies, and the mean roughness R̄ of the
first-layer filters (docs/cnn.md eq. (4)); with ``save_filters``, the first-layer filters at
the end.

On the CPU configurations train one at a time: stacking them is not bitwise safe for float32
convolutions (oneDNN's grouped convolution rounds differently with the group's size) and
gains nothing in float64, whose convolutions already cost most of a step (docs/practice.md
§1). On a GPU the configurations of a chunk with one learning rate train stacked
(:mod:`._stacked`), batch-dependent there and equal to one-at-a-time training up to
rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from ...errors import BadInput, Status
from ...numerics import compute
from ...params import Param
from ...practice import data as sources
from ...practice import filters, metrics, nets
from ..base import Batch, Model, Progress, register, rng, var

DEFAULT_EPOCHS = (1, 2, 5, 10, 20, 50, 100, 200, 500)
"""Checkpoint epochs of docs/cnn.md §3 (those past ``epochs`` are dropped; the last is added)."""


def checkpoint_steps(epochs: int, steps_per_epoch: int, first_steps: int,
                     epoch_list: Any) -> np.ndarray:
    """Sorted unique steps: 0, 1 … ``first_steps``, e·steps_per_epoch for each listed epoch
    e ≤ ``epochs``, and the last step."""
    total = epochs * steps_per_epoch
    listed = np.asarray(DEFAULT_EPOCHS if epoch_list is None else epoch_list, dtype=np.int64)
    listed = listed[listed <= epochs]
    steps = np.concatenate([[0], np.arange(1, min(first_steps, total) + 1),
                            listed * steps_per_epoch, [total]])
    return np.unique(steps.astype(np.int64))


class CNN(Model):
    """LeNet on offline images: NTK movement, activation changes and parameter motion."""

    name = "cnn"
    summary = ("LeNet kernel/Hamming/parameter distance against relative scale alpha "
               "(Kunin et al. Fig. 6a; needs the practice extra)")
    actions = ("train",)
    requires = ("torch",)
    implementations = compute.TORCH_TRAINING
    params = (
        Param("dataset", "str", "digits", "data source", choices=sources.SOURCES),
        Param("data_file", "path", None, "the .npz file of dataset = npz (X, y[, X_test, "
              "y_test])", optional=True),
        Param("arch", "str", "lenet_digits", "network: a LeNet (docs/cnn.md §1) or a "
              "filter-smoothness net smooth2d / smooth1d (docs/cnn.md §5)", choices=nets.ARCHS),
        Param("first_kernel", "int", None, "first convolution's kernel size, odd (smooth2d "
              "default 9, smooth1d 15; the LeNets' is fixed)", low=3, optional=True),
        Param("alpha", "float", 1.0, "relative scale: conv1 / alpha, last dense * alpha",
              low=0.0, low_open=True, batchable=True),
        Param("optimizer", "str", "adam", "optimiser: adam (stands in for the paper's unstated "
              "one) or sgd (with momentum)", choices=("adam", "sgd")),
        Param("momentum", "float", 0.9, "momentum of optimizer = sgd", low=0.0, high=1.0,
              high_open=True),
        Param("lr", "float", 1e-4, "learning rate", low=0.0, low_open=True, batchable=True),
        Param("batch", "int", 512, "mini-batch size", low=1),
        Param("epochs", "int", 500, "training epochs", low=1),
        Param("probe_fraction", "float", 0.1, "fraction of the training set in the probe set "
              "of the metrics", low=0.0, high=1.0, low_open=True),
        Param("kernel", "str", "trace", "NTK: trace (sum_c J_c J_c^T) or full ((n c) x (n c))",
              choices=metrics.KERNELS),
        Param("first_steps", "int", 10, "checkpoint every one of the first steps", low=0),
        Param("records", "int_list", None, "checkpoint epochs (default 1, 2, 5, 10, 20, "
              "50, 100, 200, 500; the last epoch is always added)", low=0, optional=True),
        Param("save_filters", "bool", False, "also store the first layer's filters at the end "
              "(and the roughness of their update w_end − w_0)"),
        Param("norm", "str", "none", "smooth2d/smooth1d: channel normalises conv1's output "
              "per sample (stands in for the paper's batch norm, docs/cnn.md §5)",
              choices=nets.NORMS),
        Param("rescale", "str", "both", "what alpha rescales: both (conv1 / alpha, last dense "
              "* alpha) or first (conv1 / alpha only, the paper's ResNet convention)",
              choices=nets.RESCALES),
        *compute.run_params("seed of split, probe set, initialisation and batches",
                             "float64"),
    )
    aliases: ClassVar[dict[str, dict[str, str]]] = {"checkpoints": {"train": "records"}}
    """The older name of the recorded epochs (docs/engine.md, "Records")."""
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": (
            {"epochs": 1, "batch": 256, "first_steps": 2, "probe_fraction": 0.01,
             "alpha": 1.0, "seed": 0},
            {"epochs": 1, "batch": 256, "first_steps": 2, "probe_fraction": 0.01,
             "alpha": 10.0, "seed": 1},
            {"arch": "smooth1d", "dataset": "mnist1d", "first_kernel": 7, "optimizer": "sgd",
             "lr": 0.05, "epochs": 1, "batch": 1024, "first_steps": 1, "probe_fraction": 0.005,
             "save_filters": True, "alpha": 0.5, "seed": 2},
            {"arch": "smooth1d", "dataset": "mnist1d", "first_kernel": 7, "optimizer": "sgd",
             "lr": 0.05, "epochs": 1, "batch": 1024, "first_steps": 1, "probe_fraction": 0.005,
             "save_filters": True, "alpha": 4.0, "seed": 3},
        ),
    }

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        if values["dataset"] != "npz" and values.get("data_file") is not None:
            raise BadInput("parameter data_file: only read when dataset = npz")
        shape = sources.check_source(values["dataset"], values.get("data_file"))
        if values["optimizer"] != "sgd" and values["momentum"] != 0.9:
            raise BadInput("parameter momentum: only read when optimizer = sgd")
        nets.network(values["arch"], shape, values.get("first_kernel"), values["norm"])

    @classmethod
    def _cost(cls, values: Mapping[str, Any]) -> float:
        shape = sources.SAMPLE_SHAPES.get(values["dataset"], (1, 28, 28))
        n_train = float(sources.TRAIN_SIZES.get(values["dataset"], 4000))
        if values["arch"] in nets.SMOOTH:
            k = values.get("first_kernel") or nets.FIRST_KERNEL[values["arch"]]
            dims = len(shape) - 1
            n1 = math.prod(shape[1:])
            macs = 16 * k**dims * n1 + 32 * 16 * 3**dims * n1 / 2**dims
            n_params = 16 * k**dims + 32 * 16 * 3**dims
        else:
            macs = 36e3 * math.prod(shape) / 64.0
            n_params = 2e4 * math.prod(shape) / 64.0
        train = 6 * macs * n_train * values["epochs"]  # forward and backward
        n_probe = values["probe_fraction"] * n_train
        n_ck = _checkpoints(values, int(n_train)).size
        n_test = 0.25 * n_train
        # per checkpoint: the losses and accuracies, and the NTK built layer by layer
        # (practice/ntk.py): one backward pass per logit, each convolution's per-example
        # gradients (its MACs again), and the Grams of width c x weights (convolutions) or
        # c x outputs + inputs (dense layers), not one Gram of the whole Jacobian
        c = 10.0
        try:
            shapes = nets.network(values["arch"], shape, values.get("first_kernel")).shapes
            width = sum(c * math.prod(s) if len(s) > 2 else c * s[0] + s[1]
                        for s in shapes.values() if len(s) >= 2)
        except Exception:  # a shape the networks refuse: the check says so, not the cost
            width = c * n_params
        if values["kernel"] == "full":
            width *= c
        metrics = (2 * macs * (n_train + n_test) + 3 * c * macs * n_probe
                   + 2 * n_probe * n_probe * width)
        return (train + n_ck * metrics) / 1e9

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration (``s`` the training dtype's bytes; the metrics
        in float64), from ``n_p`` probe samples (``probe_fraction`` of the training set),
        ``A`` hidden units per sample and the Gram width ``F`` of the layer-wise NTK
        (:func:`richlazy_cli.practice.ntk.layer_ntk`: per convolution ``c`` times its
        weights, per dense layer ``c`` times its outputs plus its inputs, ``c = 10``):

        * the NTK and its initial value, with the temporaries of their sums and of the
          kernel distance: six ``n_p × n_p`` matrices (``kernel = trace``) or
          ``(c n_p) × (c n_p)`` (``full``);
        * the layer-wise Gram rows, ``3 n_p F``, and the backward signals of the ``c``
          logits, ``c n_p A``;
        * the activations of a training batch or an evaluation block (4096 samples, at most
          the training set), about four per hidden unit;
        * the data set, in float64 and in the training dtype.

        The training set's size and sample shape are the bundled source's (the ``npz``
        source is priced as 4,000 samples of 1 × 28 × 28, as :meth:`_cost` does). Checked
        against the measured peak by tests/models/test_memory.py."""
        s = 8 if values.get("dtype", "float64") == "float64" else 4
        shape = sources.SAMPLE_SHAPES.get(values["dataset"], (1, 28, 28))
        n_train = int(sources.TRAIN_SIZES.get(values["dataset"], 4000))
        n_all = n_train + math.ceil(n_train * sources.TEST_FRACTION / (1 - sources.TEST_FRACTION))
        n_p = max(1, round(float(values["probe_fraction"]) * n_train))
        c = sources.N_CLASSES
        try:
            net = nets.network(values["arch"], shape, values.get("first_kernel"),
                               values.get("norm", "none"))
        except Exception:  # a shape the networks refuse: the check says so
            return None
        width = sum(c * math.prod(x) if len(x) > 2 else c * x[0] + x[1]
                    for x in net.shapes.values() if len(x) >= 2)
        A = int(net.n_hidden_units)
        kernel = (n_p if values["kernel"] == "trace" else c * n_p) ** 2
        rows = max(min(int(values["batch"]), n_train), min(4096, n_train))
        return float(8 * (6 * kernel + 3 * n_p * width + c * n_p * A)
                     + 4 * s * A * rows + n_all * math.prod(shape) * (8 + s))

    @classmethod
    def _probe(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """A tenth of the epochs (at least 2) with a tenth of the checkpoints (at least the
        first and the last), evenly spaced: the same mix of training steps and checkpoint
        metrics as the run, so that the probe's time per unit of :meth:`_cost` is the run's
        (a training step runs at a few times fewer flop/s than the kernel's Gram products,
        so a probe made mostly of the first steps' checkpoints undercounts the training)."""
        epochs = int(values["epochs"])
        short = min(epochs, max(2, math.ceil(epochs / 10)))
        if short == epochs:
            return dict(values)
        n_train = sources.TRAIN_SIZES.get(str(values["dataset"]), 4000)
        n_ck = _checkpoints(values, int(n_train)).size
        inner = max(0, round(n_ck * short / epochs) - 2)  # besides step 0 and the last
        listed = np.unique(np.linspace(1, short, inner + 2)[1:-1].round().astype(np.int64))
        return {**values, "epochs": short, "first_steps": 0, "records": listed.tolist()}

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Nine float64 metrics over the checkpoints, the float64 first-layer filters and the
        float64 roughness of their update with ``save_filters``; a user's ``npz`` (whose size
        is read only when run) is not declared."""
        n_train = sources.TRAIN_SIZES.get(str(values["dataset"]))
        if n_train is None:
            return None
        n_ck = _checkpoints(values, int(n_train)).size
        size = 8.0 * 9 * n_ck
        if values["save_filters"]:
            shape = sources.SAMPLE_SHAPES[str(values["dataset"])]
            net = nets.network(str(values["arch"]), shape, values.get("first_kernel"))
            size += 8.0 * math.prod(net.shapes[net.first]) + 8.0
        return size

    # ------------------------------------------------------------------------------------------
    def _train(self, batch: Batch, progress: Progress | None,
               placement: compute.Placement) -> xr.Dataset:
        """Train the batch on ``placement``'s device (the torch row's function)."""
        v = batch.values
        device = placement.device
        B = batch.size
        results: list[dict[str, np.ndarray]] = []
        status = np.zeros(B, dtype=np.int8)
        ck = None
        if stacked_by_default(device):
            ck, spe = _train_stacked(batch, v, device, results, status, progress)
        for i in range(B if ck is None else 0):
            p = batch.point(i)
            split = sources.load(str(v["dataset"]), int(p["seed"]), v.get("data_file"))
            res, ok, ck_i, spe = _train_one(split, v, p, device)
            if ck is not None and not np.array_equal(ck, ck_i):
                raise AssertionError("checkpoint steps differ within a batch")
            ck = ck_i
            results.append(res)
            status[i] = Status.OK if ok else Status.DIVERGED
            if progress is not None:
                progress((i + 1) / B)
        assert ck is not None
        C = ("point", "checkpoint")
        stacked = {k: np.stack([r[k] for r in results]) for k in results[0]}
        long = {
            "kernel_distance": "kernel distance S(0,t) of the empirical NTK over the probe set",
            "hamming_distance": "fraction of probe (sample, hidden unit) activation bits "
                                "1[z > 0] differing from initialisation",
            "param_distance": "parameter distance ||theta_t - theta_0||_2",
            "rel_param_distance": "relative parameter distance ||theta_t - theta_0|| / "
                                  "||theta_0||",
            "train_loss": "training mean cross-entropy",
            "test_loss": "test mean cross-entropy",
            "train_acc": "training accuracy",
            "test_acc": "test accuracy",
            "filter_roughness": "mean normalised Laplacian energy ||L * w||^2 / ||w||^2 of "
                                "the first layer's filters (lower is smoother)",
        }
        data = {k: var(C, stacked[k], text) for k, text in long.items()}
        for k in data:
            data[k].attrs["nan_meaning"] = "not reached: the configuration diverged earlier"
        if "filters" in stacked:
            w = stacked["filters"]
            fdims = ("point", "out_channel", "in_channel",
                     *(("filter_row", "filter_col") if w.ndim == 5 else ("filter_col",)))
            data["filters"] = var(fdims, w, "first-layer convolution filters at the end of "
                                  "training")
            data["filters"].attrs["nan_meaning"] = "the configuration diverged"
            data["update_roughness"] = var(
                ("point",), stacked["update_roughness"], "mean roughness of the first "
                "layer's update w_end − w_0 (a random walk of i.i.d. steps has the i.i.d. "
                "level filter_roughness_iid; learned structure lies below it)")
            data["update_roughness"].attrs["nan_meaning"] = "the configuration diverged"
        data["status"] = var(("point",), status, "0 ok, 1 diverged")
        coords = {
            "step": var(("checkpoint",), ck, "optimiser step", "steps"),
            "epoch": var(("checkpoint",), ck / spe, "epoch (steps / steps per epoch)",
                         "epochs"),
        }
        attrs = {"kernel": f"{v['kernel']}: " + (
            "K = sum_c J_c J_c^T over the logits c" if v["kernel"] == "trace"
            else "K = [J_c J_c'^T], (n c) x (n c)"),
            "steps_per_epoch": int(spe),
            "filter_roughness_iid": _iid_level(str(v["arch"]), v.get("first_kernel"))}
        return xr.Dataset(data, coords=coords, attrs=attrs)


register(CNN)


def stacked_by_default(device: str) -> bool:
    """Whether a chunk's configurations train together (:mod:`._stacked`): on a GPU,
    where a batch is one computation (``batch-dependent``, docs/engine.md); on the CPU each
    trains alone, bitwise independent of its chunk."""
    return device != "cpu"


def _train_stacked(batch: Batch, v: Mapping[str, Any], device: str,
                   results: list[dict[str, np.ndarray]], status: np.ndarray,
                   progress: Progress | None) -> tuple[np.ndarray, int]:
    """The points of ``batch`` trained in stacks of one learning rate; fills ``results`` (in
    point order) and ``status``; returns the checkpoint steps and steps per epoch."""
    from . import _stacked as _cnn_stacked

    B = batch.size
    points = [batch.point(i) for i in range(B)]
    lrs = np.array([float(p["lr"]) for p in points])
    slots: list[dict[str, np.ndarray] | None] = [None] * B
    ck: np.ndarray | None = None
    spe = 0
    done = 0
    for lr in dict.fromkeys(lrs.tolist()):
        group = np.flatnonzero(lrs == lr)
        splits = [sources.load(str(v["dataset"]), int(points[i]["seed"]), v.get("data_file"))
                  for i in group]
        res, ok, ck_g, spe = _cnn_stacked.train(splits, v, [points[i] for i in group], device,
                                                _checkpoints)
        if ck is not None and not np.array_equal(ck, ck_g):
            raise AssertionError("checkpoint steps differ within a batch")
        ck = ck_g
        for k, i in enumerate(group):
            slots[i] = res[k]
        status[group] = np.where(ok, Status.OK, Status.DIVERGED)
        done += group.size
        if progress is not None:
            progress(done / B)
    results.extend(r for r in slots if r is not None)
    assert ck is not None
    return ck, spe


def _checkpoints(v: Mapping[str, Any], n_train: int) -> np.ndarray:
    """The checkpoint steps of a configuration on ``n_train`` training samples."""
    spe = math.ceil(n_train / int(v["batch"]))
    return checkpoint_steps(int(v["epochs"]), spe, int(v["first_steps"]), v.get("records"))


def _iid_level(arch: str, first_kernel: int | None) -> float:
    """E R of an i.i.d. Gaussian first-layer filter (docs/cnn.md eq. (4))."""
    k = first_kernel or nets.FIRST_KERNEL[arch]
    return filters.expected_roughness(k, 1 if arch == "smooth1d" else 2)


def _train_one(split: sources.DataSplit, v: Mapping[str, Any], p: Mapping[str, Any],
               device: str) -> tuple[dict[str, np.ndarray], bool, np.ndarray, int]:
    """Train one configuration; metrics at the checkpoint steps (docs/cnn.md §3)."""
    import torch
    import torch.nn.functional as F

    seed, alpha, lr = int(p["seed"]), float(p["alpha"]), float(p["lr"])
    dtype = compute.torch_dtype(v["dtype"])
    f64 = torch.float64
    net = nets.network(str(v["arch"]), split.sample_shape, v.get("first_kernel"),
                       str(v["norm"]))
    dims = len(net.shapes[net.first]) - 2
    n_train = split.y_train.shape[0]
    bsz = int(v["batch"])
    spe = math.ceil(n_train / bsz)
    epochs = int(v["epochs"])
    ck = _checkpoints(v, n_train)
    n_probe = max(1, round(float(v["probe_fraction"]) * n_train))
    probe = np.sort(rng(seed, "probe").choice(n_train, n_probe, replace=False))

    X = torch.tensor(split.X_train, dtype=dtype, device=device)
    y = torch.tensor(split.y_train, device=device)
    Xt = torch.tensor(split.X_test, dtype=dtype, device=device)
    yt = torch.tensor(split.y_test, device=device)
    Xp = torch.tensor(split.X_train[probe], dtype=f64, device=device)
    theta0 = net.init(rng(seed, "init"), alpha, str(v["rescale"]))
    params = nets.to_torch(theta0, dtype, device, requires_grad=True)
    params0 = nets.to_torch(theta0, f64, device)
    plist = list(params.values())
    if v["optimizer"] == "sgd":
        opt: Any = torch.optim.SGD(plist, lr=lr, momentum=float(v["momentum"]), foreach=False)
    else:
        opt = torch.optim.Adam(plist, lr=lr, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    g_batches = rng(seed, "batches")
    names = ("kernel_distance", "hamming_distance", "param_distance", "rel_param_distance",
             "train_loss", "test_loss", "train_acc", "test_acc", "filter_roughness")
    out = {k: np.full(ck.size, np.nan) for k in names}
    K0: Any = None
    bits0: Any = None

    def record(j: int) -> bool:
        nonlocal K0, bits0
        with torch.no_grad():
            p64 = {k: q.detach().to(f64) for k, q in params.items()}
            out["train_loss"][j], out["train_acc"][j] = metrics.evaluate(net.forward, params, X, y)
            out["test_loss"][j], out["test_acc"][j] = metrics.evaluate(net.forward, params, Xt, yt)
            if metrics.diverged(out["train_loss"], j):
                return False
            bits = metrics.activation_bits(net.forward(p64, Xp)[1])
            out["param_distance"][j], out["rel_param_distance"][j] = metrics.param_distance(
                p64, params0)
            out["filter_roughness"][j] = filters.mean_roughness(
                p64[net.first].cpu().numpy(), dims)
        K = metrics.ntk(net.forward, p64, Xp, str(v["kernel"]))
        if K0 is None:
            K0, bits0 = K, bits
        out["kernel_distance"][j] = metrics.kernel_distance(K0, K)
        out["hamming_distance"][j] = metrics.hamming_distance(bits0, bits)
        return True

    step, j = 0, 0
    ok = True
    for _epoch in range(epochs):
        order = torch.as_tensor(g_batches.permutation(n_train), device=device)
        for b0 in range(0, n_train, bsz):
            if j < ck.size and step == ck[j]:
                if not record(j):
                    ok = False
                    break
                j += 1
            idx = order[b0:b0 + bsz]
            logits, _ = net.forward(params, X[idx])
            loss = F.cross_entropy(logits, y[idx])
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            step += 1
        if not ok:
            break
    if ok and j < ck.size and step == ck[j]:
        ok = record(j)
    if v["save_filters"]:
        w = params[net.first].detach().to(f64).cpu().numpy()
        out["filters"] = w if ok else np.full_like(w, np.nan)
        out["update_roughness"] = np.array(filters.mean_roughness(w - theta0[net.first], dims)
                                           if ok else np.nan)
    return out, ok, ck, spe
