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

Every configuration trains on its own with one intra-op thread: its numbers depend on nothing
but its parameters (docs/practice.md §1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from ..errors import BadInput, Status
from ..practice import hierarchy, nets, torchenv
from ..practice.metrics import evaluate
from .base import Batch, Model, Progress, register, rng, var
from .params import Param

SCHEDULES = ("cosine_clamped", "cosine_torch", "constant")


def checkpoint_epochs(epochs: int, n_checkpoints: int) -> np.ndarray:
    """Epoch 0, ``n_checkpoints`` − 2 log-spaced epochs from 1 and the last epoch, rounded
    to integers with duplicates removed."""
    logs = np.round(np.geomspace(1, epochs, max(n_checkpoints - 1, 1))).astype(np.int64)
    return np.unique(np.concatenate([[0], logs, [epochs]]))


def learning_rate(lr0: float, epoch: int, epochs: int, schedule: str) -> float:
    """η_e of docs/rhm.md eq. (4)."""
    if schedule == "constant":
        return lr0
    T = 0.8 * epochs
    if schedule == "cosine_clamped" and epoch >= T:
        return 0.0
    return lr0 * (1.0 + math.cos(math.pi * epoch / T)) / 2.0


class RHM(Model):
    """Random hierarchy model: an MLP's test accuracy against training fraction and α."""

    name = "rhm"
    summary = ("random hierarchy model: MLP sample complexity against relative scale alpha "
               "(Kunin et al. Fig. 6c; needs the practice extra)")
    actions = ("train",)
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
        Param("n_checkpoints", "int", 26,
              "evaluation epochs: 0, log-spaced ones and the last", low=2),
        *torchenv.run_params("seed of rules, split, initialisation and batches"),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": (
            {"L": 2, "width": 16, "epochs": 3, "test_size": 100, "train_fraction": 0.3,
             "alpha": 1.0, "seed": 0, "n_checkpoints": 3},
            {"L": 2, "width": 16, "epochs": 3, "test_size": 100, "train_fraction": 0.5,
             "alpha": 10.0, "seed": 1, "n_checkpoints": 3},
        ),
    }

    @classmethod
    def check(cls, action: str, values: dict[str, Any]) -> None:
        torchenv.require_torch(cls.name)
        torchenv.check_device(cls.name, values["device"])
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
    def cost(cls, values: Mapping[str, Any]) -> float:
        P = hierarchy.p_max(values["n_classes"], values["m"], values["s"], values["L"])
        w, d = values["width"], values["s"] ** values["L"] * values["v"]
        flops = 6.0 * (d * w + (values["hidden_layers"] - 1) * w * w + w * values["n_classes"])
        return flops * values["train_fraction"] * P * values["epochs"] / 1e9

    # ------------------------------------------------------------------------------------------
    def train(self, batch: Batch, progress: Progress | None = None) -> xr.Dataset:
        v = batch.values
        device = torchenv.resolve_device(v["device"])
        epochs = int(v["epochs"])
        ck = checkpoint_epochs(epochs, int(v["n_checkpoints"]))
        B = batch.size
        out = {k: np.full((B, ck.size), np.nan) for k in ("test_acc", "train_acc", "train_loss")}
        n_train = np.zeros(B, dtype=np.int64)
        status = np.zeros(B, dtype=np.int8)
        problems: dict[int, Any] = {}
        with torchenv.session():
            for i in range(B):
                p = batch.point(i)
                seed = int(p["seed"])
                if seed not in problems:
                    problems = {seed: _Problem(v, seed)}
                prob = problems[seed]
                n_train[i] = math.floor(float(p["train_fraction"]) * prob.P)
                res, ok = _train_one(prob, v, float(p["alpha"]), int(n_train[i]), ck, device)
                for k in out:
                    out[k][i] = res[k]
                status[i] = Status.OK if ok else Status.DIVERGED
                if progress is not None:
                    progress((i + 1) / B)
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
        attrs = {"P_max": int(problems[next(iter(problems))].P) if problems else 0,
                 "input_dim": int(v["s"] ** v["L"] * v["v"]),
                 **torchenv.provenance(device)}
        coords = {"epoch": var(("epoch",), ck, "training epoch (0: initialisation)", "epochs")}
        return xr.Dataset(data, coords=coords, attrs=attrs)


with torchenv.registering():
    register(RHM)


class _Problem:
    """The enumerated data of one seed: one-hot inputs in permuted order and their labels."""

    def __init__(self, v: Mapping[str, Any], seed: int) -> None:
        self.seed = seed
        L, n_c, m, s, nv = (int(v[k]) for k in ("L", "n_classes", "m", "s", "v"))
        R = hierarchy.rules(rng(seed, "rules"), L, n_c, m, s, nv)
        strings, labels = hierarchy.enumerate_inputs(R)
        self.P = strings.shape[0]
        perm = rng(seed, "split").permutation(self.P)
        self.X = hierarchy.one_hot(strings[perm], nv)
        self.y = labels[perm]
        self.test = slice(self.P - int(v["test_size"]), self.P)

    def init_rng(self) -> np.random.Generator:
        return rng(self.seed, "init")

    def batch_rng(self) -> np.random.Generator:
        return rng(self.seed, "batches")


def _train_one(prob: _Problem, v: Mapping[str, Any], alpha: float, n_train: int,
               ck: np.ndarray, device: str) -> tuple[dict[str, np.ndarray], bool]:
    """Train one configuration (docs/rhm.md §3); metrics at the checkpoint epochs ``ck``."""
    import torch
    import torch.nn.functional as F

    dtype = torchenv.torch_dtype(v["dtype"])
    width, epochs, bsz = int(v["width"]), int(v["epochs"]), int(v["batch"])
    lr0 = float(v["lr"]) if v["lr"] is not None else 0.1 * width
    mom = float(v["momentum"])
    net = nets.mlp(prob.X.shape[1], width, int(v["hidden_layers"]), int(v["n_classes"]))
    X = torch.tensor(prob.X[:n_train], dtype=dtype, device=device)
    y = torch.tensor(prob.y[:n_train], device=device)
    Xt = torch.tensor(prob.X[prob.test], dtype=dtype, device=device)
    yt = torch.tensor(prob.y[prob.test], device=device)
    params = nets.to_torch(net.init(prob.init_rng(), alpha), dtype, device, requires_grad=True)
    plist = list(params.values())
    bufs = [torch.zeros_like(q) for q in plist]
    g_batches = prob.batch_rng()
    out = {k: np.full(ck.size, np.nan) for k in ("test_acc", "train_acc", "train_loss")}

    def record(j: int) -> bool:
        loss, acc = evaluate(net.forward, params, X, y)
        out["train_loss"][j], out["train_acc"][j] = loss, acc
        out["test_acc"][j] = evaluate(net.forward, params, Xt, yt)[1]
        return math.isfinite(loss)

    j = 0
    if ck[0] == 0:
        if not record(0):
            return out, False
        j = 1
    for epoch in range(epochs):
        order = g_batches.permutation(n_train)
        lr = learning_rate(lr0, epoch, epochs, str(v["schedule"]))
        if lr != 0.0:
            idx_all = torch.as_tensor(order, device=device)
            for b0 in range(0, n_train, bsz):
                idx = idx_all[b0:b0 + bsz]
                logits, _ = net.forward(params, X[idx])
                loss = F.cross_entropy(logits, y[idx])
                grads = torch.autograd.grad(loss, plist)
                with torch.no_grad():
                    for q, b, g in zip(plist, bufs, grads, strict=True):
                        b.mul_(mom).add_(g)
                        q.add_(b, alpha=-lr)
        if j < ck.size and epoch + 1 == ck[j]:
            if not record(j):
                return out, False
            j += 1
    return out, True
