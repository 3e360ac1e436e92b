"""``rhm``: sample complexity of the random hierarchy model against the relative scale α
(Kunin et al. 2024 §5, Fig. 6c; docs/rhm.md).

Data: the random hierarchy model of Cagnetta et al. 2024, enumerated exactly
(:mod:`..practice.hierarchy`; docs/rhm.md eq. (1)): P_max inputs, permuted by
``rng(seed, "split")``; the last ``test_size`` are the test set and the first
⌊train_fraction·P_max⌋ of the rest the training set. Inputs are one-hot, position-major.

Network (docs/rhm.md eq. (3)): a bias-free ReLU MLP of ``hidden_layers`` layers of ``width``
units with standard-normal weights, hidden layers scaled by 1/√fan_in and the mean-field
readout f = W_out h_L / width; at initialisation W₁ ← W₁/α and W_out ← α W_out, which leaves f
unchanged (docs/practice.md eq. (1)).

Training (docs/rhm.md eq. (4)): SGD with momentum μ (PyTorch's convention
b ← μ b + g, θ ← θ − η_e b), mini-batches of ``batch`` from a fresh permutation per epoch
(``rng(seed, "batches")``, the last batch possibly smaller), mean cross-entropy, learning rate
per epoch η_e = η₀(1 + cos(π e/T))/2 with T = 0.8·epochs, held at 0 for e ≥ T
(``cosine_clamped``, the paper's "decayed … down to 80% of epochs"); ``cosine_torch`` lets it
rise again after T as PyTorch's ``CosineAnnealingLR`` does; ``constant`` keeps η₀. An epoch of
η_e = 0 leaves every parameter unchanged and is skipped.

Configurations of a chunk with the same training-set size train together, on the CPU
(docs/practice.md §1): their parameters stacked to (G, out, in), each step one batched matrix
product per layer, every configuration with its own data, mini-batches, momentum and
divergence. Each configuration's slice of a batched product is computed alone, so its numbers
depend on nothing but its parameters, whatever the group; a configuration alone is a group of
one on the same code path. On a GPU every chunk's configurations of one training-set size
train stacked whatever their shapes (a batch is one computation there, ``batch-dependent`` in
docs/engine.md); on the CPU, shapes that could round otherwise in a stack train alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from ...errors import BadInput, Status
from ...numerics import compute
from ...numerics.records import record_grid
from ...params import Param
from ...practice import hierarchy, nets
from ...practice.metrics import accuracy, evaluate
from ..base import Batch, Model, Progress, register, rng, var

SCHEDULES = ("cosine_clamped", "cosine_torch", "constant")


def checkpoint_epochs(epochs: int, n_records: int) -> np.ndarray:
    """Epoch 0, ``n_records`` − 2 log-spaced epochs from 1 and the last epoch, rounded to
    integers with duplicates removed."""
    return record_grid(int(epochs), max(n_records - 1, 1), with_last=True)


def learning_rate(lr0: float, epoch: int, epochs: int, schedule: str) -> float:
    """η_e of docs/rhm.md eq. (4)."""
    if schedule == "constant":
        return lr0
    T = 0.8 * epochs
    if schedule == "cosine_clamped" and epoch >= T:
        return 0.0
    return lr0 * (1.0 + math.cos(math.pi * epoch / T)) / 2.0


STEP_OVERHEAD = 3.0e7
"""The fixed work of one mini-batch step, in floating-point operations of the products it
would equal: measured with torch on one CPU thread (width 64, batch 128), a step took
0.95 ms, of which 0.25 ms its 9.8 MFLOP of products at the 40 GFLOP/s that a full-set
evaluation runs at; the other 0.7 ms (autograd, the optimiser's updates, the gathered batch)
are about 3 · 10⁷ operations at that rate (docs/estimates.md, "rhm's training steps")."""


def _trained_epochs(values: Mapping[str, Any]) -> int:
    """Epochs whose learning rate is not 0 (``cosine_clamped`` skips the last 20%)."""
    epochs = int(values["epochs"])
    return epochs if values["schedule"] != "cosine_clamped" else math.ceil(0.8 * epochs)


def _work(values: Mapping[str, Any]) -> tuple[int, int, int]:
    """(full-set evaluations, mini-batch steps, training-set size) of one configuration."""
    P = hierarchy.p_max(values["n_classes"], values["m"], values["s"], values["L"])
    n_train = math.floor(float(values["train_fraction"]) * P)
    steps = math.ceil(n_train / int(values["batch"])) * _trained_epochs(values)
    evaluations = checkpoint_epochs(int(values["epochs"]), int(values["n_records"])).size
    return evaluations, steps, n_train


class RHM(Model):
    """Random hierarchy model: an MLP's test accuracy against training fraction and α."""

    name = "rhm"
    summary = ("random hierarchy model: MLP sample complexity against relative scale alpha "
               "(Kunin et al. Fig. 6c; needs the practice extra)")
    actions = ("train",)
    requires = ("torch",)
    implementations = compute.TORCH_TRAINING
    params = (
        Param("L", "int", 3, "levels of the hierarchy", low=1),
        Param("n_classes", "int", 8, "classes n_c", low=2),
        Param("m", "int", 4, "synonyms: rules per symbol", low=1),
        Param("s", "int", 2, "tuple length of a rule", low=2),
        Param("v", "int", 8, "symbols per level", low=2),
        Param("width", "int", 64, "hidden width", low=1),
        Param("hidden_layers", "int", 3, "hidden layers", low=1),
        Param("alpha", "float", 1.0, "relative scale: first layer / alpha, readout * alpha",
              low=0.0, low_open=True, batchable=True),
        Param("train_fraction", "float", 0.05, "training-set size as a fraction of P_max",
              low=0.0, high=1.0, low_open=True, batchable=True),
        Param("test_size", "int", 20000, "held-out test inputs (the last of the permutation)",
              low=1),
        Param("epochs", "int", 250, "training epochs", low=1),
        Param("batch", "int", 128, "mini-batch size", low=1),
        Param("lr", "float", None, "initial learning rate (default 0.1 * width)", low=0.0,
              low_open=True, optional=True),
        Param("momentum", "float", 0.9, "SGD momentum", low=0.0, high=1.0, high_open=True),
        Param("schedule", "str", "cosine_clamped", "learning-rate schedule per epoch",
              choices=SCHEDULES),
        Param("n_records", "int", 26,
              "evaluation epochs: 0, log-spaced ones and the last", low=2),
        *compute.run_params("seed of rules, split, initialisation and batches"),
    )
    aliases: ClassVar[dict[str, dict[str, str]]] = {"n_checkpoints": {"train": "n_records"}}
    """The older name of the record count (docs/engine.md, "Records")."""
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": (
            {"L": 2, "width": 16, "epochs": 3, "test_size": 100, "train_fraction": 0.3,
             "alpha": 1.0, "seed": 0, "n_records": 3},
            {"L": 2, "width": 16, "epochs": 3, "test_size": 100, "train_fraction": 0.5,
             "alpha": 10.0, "seed": 1, "n_records": 3},
            {"L": 2, "width": 16, "epochs": 3, "test_size": 100, "train_fraction": 0.3,
             "alpha": 0.1, "seed": 2, "n_records": 3},
        ),
    }

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        n_c, m, s, v = values["n_classes"], values["m"], values["s"], values["v"]
        if n_c * m > v**s:
            raise BadInput(f"parameters n_classes, m: n_c*m = {n_c * m} exceeds v^s = {v**s} "
                           "(the top-level rules must be distinct)")
        if m * v > v**s:
            raise BadInput(f"parameters m, v: m*v = {m * v} exceeds v^s = {v**s} "
                           "(a level's rules must be distinct)")
        P = hierarchy.p_max(n_c, m, s, values["L"])
        if P > 2**24:
            raise BadInput(f"parameters L, m, s: P_max = {P} inputs is too many to enumerate")
        if values["test_size"] >= P:
            raise BadInput(f"parameter test_size: {values['test_size']} must be below "
                           f"P_max = {P}")
        n_train = math.floor(values["train_fraction"] * P)
        if n_train < 1 or n_train > P - values["test_size"]:
            raise BadInput(
                f"parameter train_fraction: {values['train_fraction']:g} gives {n_train} "
                f"training inputs; between 1 and P_max - test_size = "
                f"{P - values['test_size']} are available")

    @classmethod
    def _cost(cls, values: Mapping[str, Any]) -> float:
        """GFLOP-equivalents of one configuration (docs/estimates.md, "rhm's training steps"):
        its mini-batch steps, each ``6 · macs · rows`` of forward and backward products plus
        :data:`STEP_OVERHEAD` (the step's fixed work: autograd, the optimiser's updates, the
        gathered batch), and its full-set evaluations, ``2 · macs`` per row of the training
        and test sets, with ``macs`` the network's multiply-adds per input. Epochs of learning
        rate 0 are skipped (``cosine_clamped`` trains the first 80%). A stacked chunk pays a
        step's fixed work once for the whole stack; the dry run's chunk probe measures that."""
        w, d = values["width"], values["s"] ** values["L"] * values["v"]
        macs = d * w + (values["hidden_layers"] - 1) * w * w + w * values["n_classes"]
        evaluations, steps, n_train = _work(values)
        train = 6.0 * macs * n_train * _trained_epochs(values) + STEP_OVERHEAD * steps
        evaluate = 2.0 * macs * (n_train + int(values["test_size"])) * evaluations
        return (train + evaluate) / 1e9

    @classmethod
    def _probe(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same configuration for a tenth of its epochs (at least 2) with the run's
        density of full-set evaluations (at least those of epochs 0, 1 and the last), so
        that the probe holds the run's mix of training steps and evaluations."""
        epochs = int(values["epochs"])
        short = min(epochs, max(2, math.ceil(epochs / 10)))
        records = checkpoint_epochs(epochs, int(values["n_records"])).size
        return {**values, "epochs": short,
                "n_records": max(3, round(records * short / epochs))}

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Three float64 curves over the checkpoint epochs, the final test accuracy and the
        training-set size."""
        n_ck = checkpoint_epochs(int(values["epochs"]), int(values["n_records"])).size
        return 8.0 * (3 * n_ck + 2)

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration: the network's ``d·w + (H-1)·w² + w·n_c``
        weights (and biases) four times (weights, gradients, momentum, the initial copy),
        the enumerated inputs (``P_max`` strings of ``s^L`` int64 symbols with labels), the
        one-hot training and test sets (``(n_train + test_size)·d`` values) and the
        activations of a full-set evaluation (``(n_train + test_size)·(2·H·w + n_c)``
        values), with ``d = s^L·v`` (docs/rhm.md). An upper bound on one configuration; a
        chunk trains configurations of equal training-set size stacked, which adds their
        weights. The interpreter and torch themselves are not counted."""
        itemsize = 4 if values.get("dtype", "float32") == "float32" else 8
        L, s, nv = int(values["L"]), int(values["s"]), int(values["v"])
        w, H, n_c = int(values["width"]), int(values["hidden_layers"]), int(values["n_classes"])
        d = s**L * nv
        P = hierarchy.p_max(n_c, int(values["m"]), s, L)
        rows = math.floor(float(values["train_fraction"]) * P) + int(values["test_size"])
        weights = d * w + (H - 1) * w * w + w * n_c + H * w + n_c
        values_held = 4 * weights + rows * d + rows * (2 * H * w + n_c)
        return float(values_held * itemsize + P * (s**L + 1) * 8)

    # ------------------------------------------------------------------------------------------
    def _train(self, batch: Batch, progress: Progress | None,
               placement: compute.Placement) -> xr.Dataset:
        """Train the batch on ``placement``'s device (the torch row's function)."""
        v = batch.values
        device = placement.device
        epochs = int(v["epochs"])
        ck = checkpoint_epochs(epochs, int(v["n_records"]))
        B = batch.size
        out = {k: np.full((B, ck.size), np.nan) for k in ("test_acc", "train_acc", "train_loss")}
        n_train = np.zeros(B, dtype=np.int64)
        status = np.zeros(B, dtype=np.int8)
        problems: dict[int, _Problem] = {}
        for i in range(B):
            seed = int(batch.point(i)["seed"])
            if seed not in problems:
                problems[seed] = _Problem(v, seed)
            n_train[i] = math.floor(float(batch.point(i)["train_fraction"])
                                    * problems[seed].P)
        done = 0
        for group in training_groups(n_train, stackable(v, device)):
            members = [batch.point(i) for i in group]
            res, ok = _train_group([problems[int(p["seed"])] for p in members], v,
                                   [float(p["alpha"]) for p in members],
                                   int(n_train[group[0]]), ck, device)
            for k in out:
                out[k][group] = res[k]
            status[group] = np.where(ok, Status.OK, Status.DIVERGED)
            done += len(group)
            if progress is not None:
                progress(done / B)
        P_ = ("point", "epoch")
        data = {
            "test_acc": var(P_, out["test_acc"], "test accuracy"),
            "train_acc": var(P_, out["train_acc"], "training accuracy"),
            "train_loss": var(P_, out["train_loss"], "training mean cross-entropy"),
            "final_test_acc": var(("point",), out["test_acc"][:, -1],
                                  "test accuracy after the last epoch"),
            "n_train": var(("point",), n_train, "training-set size floor(f * P_max)"),
            "status": var(("point",), status, "0 ok, 1 diverged"),
        }
        for k in ("test_acc", "train_acc", "train_loss"):
            data[k].attrs["nan_meaning"] = "not reached: the configuration diverged earlier"
        attrs = {"P_max": int(next(iter(problems.values())).P) if problems else 0,
                 "input_dim": int(v["s"] ** v["L"] * v["v"])}
        coords = {"epoch": var(("epoch",), ck, "training epoch (0: initialisation)", "epochs")}
        return xr.Dataset(data, coords=coords, attrs=attrs)


register(RHM)


ALIGN_BYTES = 64
"""Every configuration's slice of a stacked tensor starts at a multiple of this many bytes, as
a tensor of its own does: Intel MKL's products can round differently on operands that are not
so aligned (seen in float64 for slices of an odd number of elements)."""
ROW_ALIGN = 16
"""Mini-batches are padded to a multiple of this many rows (with weight 0 in the loss), which
aligns every (G, rows, features) slice whatever the number of features."""


def stackable(v: Mapping[str, Any], device: str) -> bool:
    """Whether configurations of these (non-batchable) parameters may train stacked: on a
    GPU always (batch-dependent there in any case); on the CPU, when every weight matrix of
    one configuration fills a whole number of ``ALIGN_BYTES`` (docs/practice.md §1), the
    condition for a stacked configuration to get the bits it gets alone."""
    itemsize = 4 if v["dtype"] == "float32" else 8
    d = int(v["s"]) ** int(v["L"]) * int(v["v"])
    w, c = int(v["width"]), int(v["n_classes"])
    sizes = (w * d, w * w, c * w) if int(v["hidden_layers"]) > 1 else (w * d, c * w)
    return device != "cpu" or all(n * itemsize % ALIGN_BYTES == 0 for n in sizes)


def training_groups(n_train: np.ndarray, stack: bool) -> list[np.ndarray]:
    """Indices of the points that train together: with ``stack``, those with the same
    training-set size (the same number of steps), in order of first appearance; otherwise each
    point alone (a group of one, on the same code path)."""
    if not stack:
        return [np.array([i]) for i in range(n_train.size)]
    _, first, inverse = np.unique(n_train, return_index=True, return_inverse=True)
    return [np.flatnonzero(inverse == g) for g in np.argsort(first)]


class _Problem:
    """The enumerated data of one seed: input strings in permuted order and their labels."""

    def __init__(self, v: Mapping[str, Any], seed: int) -> None:
        self.seed = seed
        L, n_c, m, s, nv = (int(v[k]) for k in ("L", "n_classes", "m", "s", "v"))
        self.v = nv
        R = hierarchy.rules(rng(seed, "rules"), L, n_c, m, s, nv)
        strings, labels = hierarchy.enumerate_inputs(R)
        self.P = strings.shape[0]
        perm = rng(seed, "split").permutation(self.P)
        self.strings = strings[perm]
        self.y = labels[perm]
        self.test = slice(self.P - int(v["test_size"]), self.P)

    def inputs(self, rows: slice) -> np.ndarray:
        """One-hot inputs of the permuted rows ``rows`` (docs/rhm.md eq. (2))."""
        return hierarchy.one_hot(self.strings[rows], self.v)

    def init_rng(self) -> np.random.Generator:
        return rng(self.seed, "init")

    def batch_rng(self) -> np.random.Generator:
        return rng(self.seed, "batches")


def _train_group(probs: list[_Problem], v: Mapping[str, Any], alphas: list[float],
                 n_train: int, ck: np.ndarray, device: str
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Train G configurations with the same training-set size together (docs/rhm.md §3);
    metrics (G, checkpoints) at the checkpoint epochs ``ck`` and whether each stayed finite.

    Parameters, momentum buffers, inputs and mini-batch indices carry a leading group axis.
    A mini-batch of b rows is padded to a multiple of ``ROW_ALIGN`` rows (copies of its first
    row) weighted 0; the loss Σ_g Σ_i w_i CE_gi with w_i = 1/b on the real rows has for
    gradient with respect to configuration g's parameters exactly that of its own mean
    cross-entropy. Momentum and steps update each configuration's slice as a tensor of its
    own (a ``_foreach`` over the slices), so that no elementwise kernel sees a configuration at
    another offset than when it is alone. Evaluations run on each configuration's own
    tensors, one configuration at a time, as :func:`..practice.metrics.evaluate` does. A
    configuration whose loss stops being finite keeps its NaN outputs from then on (its slices
    cannot reach the others')."""
    import torch
    import torch.nn.functional as F

    G = len(probs)
    dtype = compute.torch_dtype(v["dtype"])
    width, epochs, bsz = int(v["width"]), int(v["epochs"]), int(v["batch"])
    lr0 = float(v["lr"]) if v["lr"] is not None else 0.1 * width
    mom = float(v["momentum"])
    net = nets.mlp(probs[0].strings.shape[1] * probs[0].v, width, int(v["hidden_layers"]),
                   int(v["n_classes"]))
    trains = [(torch.tensor(p.inputs(slice(0, n_train)), dtype=dtype, device=device),
               torch.tensor(p.y[:n_train], device=device)) for p in probs]
    X = torch.cat([t[0] for t in trains])  # (G·n_train, d): mini-batches are gathered
    y = torch.cat([t[1] for t in trains])
    tests = [(torch.tensor(p.inputs(p.test), dtype=dtype, device=device),
              torch.tensor(p.y[p.test], device=device)) for p in probs]
    inits = [net.init(p.init_rng(), a) for p, a in zip(probs, alphas, strict=True)]
    params = {k: torch.tensor(np.stack([q[k] for q in inits]), dtype=dtype, device=device,
                              requires_grad=True) for k in net.shapes}
    plist = list(params.values())
    bufs = [torch.zeros_like(q) for q in plist]
    with torch.no_grad():
        mine = [{k: q[g] for k, q in params.items()} for g in range(G)]
        slices = [q[g] for q in plist for g in range(G)]
        buf_slices = [b[g] for b in bufs for g in range(G)]
    rngs = [p.batch_rng() for p in probs]
    offsets = torch.arange(G, device=device)[:, None] * n_train
    row_weights = {b: torch.cat([torch.full((b,), 1.0 / b, dtype=dtype, device=device),
                                 torch.zeros(-b % ROW_ALIGN, dtype=dtype, device=device)])
                   for b in {min(bsz, n_train - b0) for b0 in range(0, n_train, bsz)}}
    out = {k: np.full((G, ck.size), np.nan) for k in ("test_acc", "train_acc", "train_loss")}
    alive = np.ones(G, dtype=bool)

    def record(j: int) -> None:
        for g in np.flatnonzero(alive):  # on each configuration's own data, not slices of X
            loss, acc = evaluate(net.forward, mine[g], *trains[g])
            out["train_loss"][g, j], out["train_acc"][g, j] = loss, acc
            out["test_acc"][g, j] = accuracy(net.forward, mine[g], *tests[g])
            alive[g] = math.isfinite(loss)

    j = 0
    if ck[0] == 0:
        record(0)
        j = 1
    for epoch in range(epochs):
        if not alive.any():
            break
        order = torch.as_tensor(np.stack([g.permutation(n_train) for g in rngs]),
                                device=device) + offsets  # rows of X and y
        lr = learning_rate(lr0, epoch, epochs, str(v["schedule"]))
        if lr != 0.0:
            for b0 in range(0, n_train, bsz):
                b = min(bsz, n_train - b0)
                pad = -b % ROW_ALIGN
                idx = order[:, b0:b0 + b]
                if pad:
                    idx = torch.cat([idx, idx[:, :1].expand(G, pad)], dim=1)
                flat = idx.flatten()
                logits, _ = net.forward(params, X.index_select(0, flat).view(G, b + pad, -1))
                loss = (F.cross_entropy(logits.flatten(0, 1), y.index_select(0, flat),
                                        reduction="none").view(G, -1) * row_weights[b]).sum()
                grads = torch.autograd.grad(loss, plist)
                with torch.no_grad():
                    torch._foreach_mul_(buf_slices, mom)
                    torch._foreach_add_(buf_slices, [g[i] for g in grads for i in range(G)])
                    torch._foreach_add_(slices, buf_slices, alpha=-lr)
        if j < ck.size and epoch + 1 == ck[j]:
            record(j)
            j += 1
    return out, alive
