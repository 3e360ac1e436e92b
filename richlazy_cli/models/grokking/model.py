"""``grokking``: time to grokking of modular arithmetic against the embedding scale α
(Kunin et al. 2024, Fig. 6d and Fig. 12; Power et al. 2022; docs/grokking.md).

Data (docs/grokking.md §1): every pair (x, y) of residues mod a prime p (y ≠ 0 for ``x/y``)
as the token sequence [x, op, y, =], labelled (x ∘ y) mod p; the pairs are permuted by
``rng(seed, "split")`` and the first ⌊train_fraction·N⌋ are the training set, the rest the
validation set.

Network (docs/grokking.md eq. (2)–(5)): token and position embeddings, ``n_layers`` post-LN
decoder blocks (causal multi-head attention, a GELU feed-forward layer of width 4·d_model),
a final LayerNorm and a linear unembedding to p + 2 logits, read at the last position and
multiplied by τ. Initial values follow PyTorch's default initialisations, drawn from
``rng(seed, "init")``; the token and position embeddings are then divided by α (the relative
scale of docs/practice.md §2 applied to the embedding only: the network is normalised).

Training (docs/grokking.md eq. (6)): AdamW with learning rate lr/τ², betas (0.9, 0.98),
weight decay ``weight_decay``, a linear warm-up of the learning rate from 0.1·lr to lr over
the first 9 steps, mini-batches of min(batch, ⌈N/2⌉) from a fresh permutation of the training
set per epoch (``rng(seed, "batches")``, the last batch of an epoch possibly smaller).
Accuracy and mean cross-entropy on the full training and validation sets every ``eval_every``
steps (0: once per epoch) and after the last step; ``steps_to_train`` and ``steps_to_val`` are
the first evaluated step at which the accuracy reaches ``threshold``.

On the CPU every configuration trains on its own with one intra-op thread: its numbers depend
on nothing but its parameters (docs/practice.md §1). On a GPU a chunk's runs train together,
their parameters stacked (:mod:`._stacked`): the same training within rounding, with
the ``batch-dependent`` guarantee of a GPU batch (docs/engine.md).
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
from ..base import Batch, Model, Progress, register, rng, var
from ._schedule import BETAS, EVAL_ROWS, WARMUP_START, WARMUP_STEPS

DECAY_TIMES_TO_STOP = 5.5
"""Where the dry run expects a run with ``early_stop`` to stop, in units of AdamW's
weight-decay time scale ``1/(η λ)`` steps (η = lr/τ², the step; λ = ``weight_decay``; the
decoupled decay multiplies the weights by ``1 − η λ`` a step): :meth:`Grokking._stop_share`
(docs/estimates.md, "grokking's early stop"). Grokking waits for the weight decay to
shrink the memorising solution (Liu et al. 2023, *Omnigrok*), so its step scales with that
time scale; no theory gives the factor. 5.5 is the mean stop of ``jobs/grokking-reduced.toml``'s
nine runs (5,550 steps at ``1/(η λ)`` = 1,000; α = 0.3–3 spreads them over 2,700–9,700);
the job files at other steps (τ = 0.5 and 1.5, a held step, a 2,000-step budget) check it."""

OPS = ("x+y", "x-y", "x*y", "x/y")
SEQ_POSITIONS = 5
"""Rows of the position embedding (the reference implementation's; the sequence uses 4)."""


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % k for k in range(2, math.isqrt(n) + 1))


def modular_data(p: int, op: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (N, 4) = [x, op, y, =] with tokens op = p, "=" = p + 1, and labels (x ∘ y) mod p
    (docs/grokking.md eq. (1)); x/y is x·y^(p−2) mod p over y ≠ 0 (p prime)."""
    y0 = 1 if op == "x/y" else 0
    grid_x, grid_y = np.meshgrid(np.arange(p), np.arange(y0, p), indexing="ij")
    x, y = grid_x.ravel().astype(np.int64), grid_y.ravel().astype(np.int64)
    if op == "x+y":
        labels = (x + y) % p
    elif op == "x-y":
        labels = (x - y) % p
    elif op == "x*y":
        labels = (x * y) % p
    else:
        inv = np.array([pow(int(b), p - 2, p) for b in range(p)], dtype=np.int64)
        labels = (x * inv[y]) % p
    inputs = np.stack([x, np.full_like(x, p), y, np.full_like(x, p + 1)], axis=1)
    return inputs, labels


def n_pairs(p: int, op: str) -> int:
    return p * (p - 1) if op == "x/y" else p * p


def batch_size(batch: int, p: int, op: str) -> int:
    """min(batch, ⌈N/2⌉), the reference implementation's cap."""
    return min(batch, math.ceil(n_pairs(p, op) / 2))


def eval_steps(steps: int, every: int) -> np.ndarray:
    """Step 0, every multiple of ``every`` and the last step."""
    return np.unique(np.concatenate([np.arange(0, steps + 1, every), [steps]])).astype(np.int64)


class Grokking(Model):
    """One-layer transformer on modular arithmetic: steps to 99% train and validation accuracy."""

    name = "grokking"
    summary = ("grokking of modular arithmetic by a one-layer transformer against embedding "
               "scale alpha and logit scale tau (Kunin et al. Fig. 6d/12; needs the practice "
               "extra)")
    actions = ("train",)
    requires = ("torch",)
    implementations = compute.TORCH_TRAINING
    params = (
        Param("p", "int", 97, "modulus (prime for x/y)", low=3, high=2000),
        Param("op", "str", "x+y", "operation", choices=OPS),
        Param("train_fraction", "float", 0.5, "fraction of the pairs in the training set",
              low=0.0, high=1.0, low_open=True, high_open=True),
        Param("d_model", "int", 128, "model width", low=1),
        Param("n_heads", "int", 4, "attention heads (divides d_model)", low=1),
        Param("n_layers", "int", 1, "decoder blocks", low=1),
        Param("alpha", "float", 1.0, "embedding scale: token and position embeddings / alpha",
              low=0.0, low_open=True, batchable=True),
        Param("tau", "float", 1.0, "logit scale: logits * tau, learning rate / tau^2",
              low=0.0, low_open=True, batchable=True),
        Param("lr", "float", 1e-3, "AdamW learning rate at tau = 1", low=0.0, low_open=True),
        Param("weight_decay", "float", 1.0, "AdamW weight decay", low=0.0),
        Param("batch", "int", 512, "mini-batch size (capped at ceil(N/2))", low=1),
        Param("steps", "int", 30000, "optimiser steps (the budget)", low=1),
        Param("eval_every", "int", 0,
              "steps between full-set evaluations (0: once per epoch)", low=0),
        Param("threshold", "float", 0.99, "accuracy that counts as learnt", low=0.0,
              high=1.0, low_open=True),
        Param("early_stop", "bool", False,
              "stop once both accuracies reached the threshold (later evaluations NaN)"),
        *compute.run_params("seed of split, initialisation and batches"),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "train": (
            {"p": 7, "d_model": 8, "n_heads": 2, "steps": 3, "alpha": 1.0, "tau": 1.0,
             "seed": 0},
            {"p": 7, "d_model": 8, "n_heads": 2, "steps": 3, "alpha": 10.0, "tau": 0.5,
             "seed": 1},
        ),
    }

    @classmethod
    def check(cls, action: str, values: Mapping[str, Any]) -> None:
        p, op = values["p"], values["op"]
        if op == "x/y" and not is_prime(p):
            raise BadInput(f"parameter p: x/y needs a prime modulus; {p} is not prime")
        if values["d_model"] % values["n_heads"]:
            raise BadInput(f"parameters d_model, n_heads: {values['n_heads']} heads do not "
                           f"divide d_model = {values['d_model']}")
        N = n_pairs(p, op)
        n_train = math.floor(values["train_fraction"] * N)
        if n_train < 1 or n_train > N - 1:
            raise BadInput(
                f"parameter train_fraction: {values['train_fraction']:g} gives {n_train} "
                f"training pairs of {N}; both the training and the validation set need at "
                "least one")

    @classmethod
    def _cost(cls, values: Mapping[str, Any]) -> float:
        d, p = values["d_model"], values["p"]
        per_token = values["n_layers"] * 12 * d * d + d * (p + 2)
        b = batch_size(values["batch"], p, values["op"])
        return 6.0 * 4 * b * per_token * values["steps"] / 1e9

    @classmethod
    def _probe(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same configuration for at most 300 steps, without stopping early (the cost is
        linear in the steps; a run that stops early takes less than the estimate)."""
        return {**values, "steps": min(int(values["steps"]), 300), "early_stop": False}

    @classmethod
    def _stops_early(cls, values: Mapping[str, Any]) -> str | None:
        """With ``early_stop`` a run ends once both accuracies reach ``threshold``, at a
        step that no theory predicts (where a run groks is what this model measures), while
        the cost counts the whole budget: the dry run prices it at :meth:`_stop_share` of
        the budget and says so."""
        if not values.get("early_stop"):
            return None
        return (f"runs stop early at early_stop, once both accuracies reach "
                f"{float(values['threshold']):g}; priced at {DECAY_TIMES_TO_STOP:g} times the "
                f"weight decay's time scale, τ²/(lr·weight_decay) steps, within the budget")

    @classmethod
    def _stop_share(cls, values: Mapping[str, Any]) -> float:
        """The share of the step budget a run is expected to take: with ``early_stop``,
        :data:`DECAY_TIMES_TO_STOP` times AdamW's weight-decay time scale ``τ²/(lr λ)``
        over ``steps``, at most 1 (a budget shorter than that runs whole); 1 without
        ``early_stop`` or without weight decay (nothing then drives the grokking)."""
        decay = float(values["lr"]) / float(values["tau"]) ** 2 * float(values["weight_decay"])
        if not values.get("early_stop") or decay <= 0:
            return 1.0
        return min(1.0, DECAY_TIMES_TO_STOP / decay / int(values["steps"]))

    @classmethod
    def _output_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Four float64 curves (train_acc, val_acc, train_loss, val_loss) over the evaluated
        steps (:func:`eval_steps` of ``steps`` and ``eval_every``, or of one epoch's batches
        when ``eval_every`` is 0), float64 ``steps_to_train`` and ``steps_to_val``, int8
        ``censored_train`` and ``censored_val``. Every case is declared: with ``early_stop``
        (or a divergence) the evaluations after the stop are NaN, not dropped."""
        p, op = int(values["p"]), str(values["op"])
        n_train = math.floor(float(values["train_fraction"]) * n_pairs(p, op))
        every = int(values["eval_every"]) or math.ceil(
            n_train / batch_size(int(values["batch"]), p, op))
        n_eval = eval_steps(int(values["steps"]), every).size
        return 8.0 * (4 * n_eval + 2) + 2

    @classmethod
    def _working_bytes(cls, action: str, values: Mapping[str, Any]) -> float | None:
        """Peak memory of one configuration: the parameters with their gradients and AdamW's
        two moments (4 copies of ``n_layers·(12·d² + 13·d) + 2·(p+2)·d + 5·d`` values), a
        training batch's activations kept for the backward pass (4 positions, about
        ``17·d`` values per layer and position, and the logits, twice: the forward values and
        their gradients), one evaluation batch of :data:`EVAL_ROWS` pairs (the same values
        once: it runs without gradients), and the data (the pairs and their split, 90 bytes
        per pair). An upper bound within a factor of 2.5 of the measured growth of the
        resident memory (tests/faults/test_faults.py); the interpreter and torch themselves
        (about 400 MB per process) are not counted."""
        s = 4 if values.get("dtype", "float32") == "float32" else 8
        d, p, L = int(values["d_model"]), int(values["p"]), int(values["n_layers"])
        V, h = p + 2, int(values["n_heads"])
        N = n_pairs(p, str(values["op"]))
        params = L * (12 * d * d + 13 * d) + 2 * V * d + 5 * d
        per_row = 4 * L * (17 * d + 8 * h) + 3 * V
        rows = batch_size(int(values["batch"]), p, str(values["op"]))
        evaluated = min(N, EVAL_ROWS)
        return float(4 * params * s + 2 * rows * per_row * s + evaluated * per_row * s
                     + 90 * N)

    # ------------------------------------------------------------------------------------------
    def _train(self, batch: Batch, progress: Progress | None,
               placement: compute.Placement) -> xr.Dataset:
        """Train the batch on ``placement``'s device (the torch row's function)."""
        v = batch.values
        device = placement.device
        p, op = int(v["p"]), str(v["op"])
        inputs, labels = modular_data(p, op)
        N = labels.size
        n_train = math.floor(float(v["train_fraction"]) * N)
        bsz = batch_size(int(v["batch"]), p, op)
        steps = int(v["steps"])
        every = int(v["eval_every"]) or math.ceil(n_train / bsz)
        ev = eval_steps(steps, every)
        B = batch.size
        names = ("train_acc", "val_acc", "train_loss", "val_loss")
        out = {k: np.full((B, ev.size), np.nan) for k in names}
        status = np.zeros(B, dtype=np.int8)
        n_params = n_embed = 0
        if stacked_by_default(device):
            n_params, n_embed = _train_stacked(v, batch, inputs, labels, n_train, bsz, ev,
                                               device, out, status, progress)
        else:
            for i in range(B):
                pt = batch.point(i)
                seed = int(pt["seed"])
                perm = rng(seed, "split").permutation(N)
                run = _Run(v, float(pt["alpha"]), float(pt["tau"]), seed, device)
                n_params, n_embed = run.n_params, run.n_embedding
                res, ok = run.train(inputs[perm[:n_train]], labels[perm[:n_train]],
                                    inputs[perm[n_train:]], labels[perm[n_train:]], bsz,
                                    ev)
                for k in names:
                    out[k][i] = res[k]
                status[i] = Status.OK if ok else Status.DIVERGED
                if progress is not None:
                    progress((i + 1) / B)
        thr = float(v["threshold"])
        s_train, c_train = first_reached(out["train_acc"], ev, thr)
        s_val, c_val = first_reached(out["val_acc"], ev, thr)
        E = ("point", "eval_step")
        data = {
            "train_acc": var(E, out["train_acc"], "training-set accuracy"),
            "val_acc": var(E, out["val_acc"], "validation-set accuracy"),
            "train_loss": var(E, out["train_loss"], "training-set mean cross-entropy"),
            "val_loss": var(E, out["val_loss"], "validation-set mean cross-entropy"),
            "steps_to_train": var(("point",), s_train,
                                  f"first evaluated step with training accuracy >= {thr:g}",
                                  "steps"),
            "steps_to_val": var(("point",), s_val,
                                f"first evaluated step with validation accuracy >= {thr:g}",
                                "steps"),
            "censored_train": var(("point",), c_train.astype(np.int8),
                                  "1: training accuracy never reached the threshold"),
            "censored_val": var(("point",), c_val.astype(np.int8),
                                "1: validation accuracy never reached the threshold"),
            "status": var(("point",), status, "0 ok, 1 diverged"),
        }
        for k in names:
            data[k].attrs["nan_meaning"] = (
                "not evaluated: training stopped earlier (early_stop, or the loss diverged)")
        for k in ("steps_to_train", "steps_to_val"):
            data[k].attrs["nan_meaning"] = (
                f"censored: the threshold was not reached within the budget of {steps} steps")
        attrs = {"n_train": int(n_train), "n_val": int(N - n_train), "batch_used": int(bsz),
                 "eval_every_used": int(every), "n_params": int(n_params),
                 "embedding_params": int(n_embed),
                 "embedding_fraction": float(n_embed / n_params) if n_params else 0.0}
        coords = {"eval_step": var(("eval_step",), ev, "optimiser steps taken", "steps")}
        return xr.Dataset(data, coords=coords, attrs=attrs)


register(Grokking)


def stacked_by_default(device: str) -> bool:
    """Whether a chunk's runs train together (:mod:`._stacked`): on a GPU, where a
    batch is one computation (``batch-dependent``, docs/engine.md); on the CPU each run
    trains alone, bitwise independent of its chunk."""
    return device != "cpu"


def _train_stacked(v: Mapping[str, Any], batch: Batch, inputs: np.ndarray, labels: np.ndarray,
                   n_train: int, bsz: int, ev: np.ndarray, device: str,
                   out: dict[str, np.ndarray], status: np.ndarray, progress: Progress | None
                   ) -> tuple[int, int]:
    """Every run of ``batch`` trained together; fills ``out`` and ``status`` in place and
    returns the parameter and embedding counts."""
    import torch

    from . import _stacked as _grokking_stacked

    with torch.random.fork_rng(devices=[]):
        net = transformer(int(v["p"]), int(v["d_model"]), int(v["n_heads"]), int(v["n_layers"]))
    inits, taus, rngs, train_sets, val_sets = [], [], [], [], []
    for i in range(batch.size):
        pt = batch.point(i)
        seed = int(pt["seed"])
        perm = rng(seed, "split").permutation(labels.size)
        inits.append(initial_values(net, rng(seed, "init"), float(pt["alpha"])))
        taus.append(float(pt["tau"]))
        rngs.append(rng(seed, "batches"))
        train_sets.append((inputs[perm[:n_train]], labels[perm[:n_train]]))
        val_sets.append((inputs[perm[n_train:]], labels[perm[n_train:]]))
    res, ok = _grokking_stacked.train(v, inits, np.asarray(taus), rngs, train_sets, val_sets,
                                      bsz, ev, device, progress)
    for k, curves in res.items():
        out[k][:] = curves
    status[:] = np.where(ok, Status.OK, Status.DIVERGED)
    n_params = sum(int(q.numel()) for q in net.parameters())
    n_embed = sum(int(q.numel()) for n, q in net.named_parameters() if n in EMBEDDINGS)
    return n_params, n_embed


def first_reached(acc: np.ndarray, ev: np.ndarray, threshold: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``acc`` (points × evaluations): the first evaluated step with
    accuracy ≥ ``threshold`` (NaN if none) and whether it is censored (none)."""
    with np.errstate(invalid="ignore"):
        hit = np.nan_to_num(acc, nan=-1.0) >= threshold
    reached = hit.any(axis=1)
    steps = np.where(reached, ev[np.argmax(hit, axis=1)], np.nan).astype(float)
    return steps, ~reached


# -- the network (docs/grokking.md §2) -----------------------------------------------------------

def transformer(p: int, d: int, n_heads: int, n_layers: int) -> Any:
    """The reference implementation's decoder-only transformer as a ``torch.nn.Module``:
    ``forward(tokens (B, 4), tau) -> logits (B, p + 2)`` at the last position, × τ."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self_attn = nn.MultiheadAttention(d, n_heads)
            self.self_attn_norm = nn.LayerNorm(d)
            self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.ffn_norm = nn.LayerNorm(d)

        def forward(self, x: Any, mask: Any) -> Any:  # (seq, batch, d)
            a, _ = self.self_attn(x, x, x, attn_mask=mask, need_weights=False)
            a = self.self_attn_norm(x + a)
            return self.ffn_norm(a + self.ffn(a))

    class Transformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token_embeddings = nn.Embedding(p + 2, d)
            self.position_embeddings = nn.Embedding(SEQ_POSITIONS, d)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, p + 2)

        def forward(self, tokens: Any, tau: float) -> Any:
            n = tokens.shape[1]
            pos = torch.arange(n, device=tokens.device)
            h = (self.token_embeddings(tokens) + self.position_embeddings(pos)).transpose(0, 1)
            mask = torch.triu(torch.full((n, n), float("-inf"), device=tokens.device,
                                         dtype=h.dtype), diagonal=1)
            for block in self.blocks:
                h = block(h, mask)
            return self.head(self.ln_f(h[-1])) * tau

    return Transformer()


EMBEDDINGS = ("token_embeddings.weight", "position_embeddings.weight")


def initial_values(net: Any, g: np.random.Generator, alpha: float) -> dict[str, np.ndarray]:
    """PyTorch's default initial values of every parameter of ``net`` (float64, drawn from
    ``g`` in parameter order), then the embeddings ÷ α (docs/grokking.md eq. (2)).

    Embedding N(0, 1); attention input projection Xavier-uniform U(±√(6/(d + 3d))) with zero
    bias; attention output projection U(±1/√d) with zero bias; Linear weight and bias
    U(±1/√fan_in); LayerNorm weight 1 and bias 0."""
    out: dict[str, np.ndarray] = {}
    for name, prm in net.named_parameters():
        shape = tuple(prm.shape)
        if name.endswith("_embeddings.weight"):
            val = g.standard_normal(shape)
        elif "norm" in name or name.startswith("ln_f"):
            val = np.ones(shape) if name.endswith("weight") else np.zeros(shape)
        elif name.endswith("in_proj_weight"):
            bound = math.sqrt(6.0 / (shape[0] + shape[1]))
            val = g.uniform(-bound, bound, shape)
        elif name.endswith("in_proj_bias") or name.endswith("out_proj.bias"):
            val = np.zeros(shape)
        elif name.endswith("weight"):
            val = g.uniform(-1.0, 1.0, shape) / math.sqrt(shape[1])
        else:  # a Linear bias: U(±1/√fan_in) of its layer's weight
            fan_in = dict(net.named_parameters())[name[:-4] + "weight"].shape[1]
            val = g.uniform(-1.0, 1.0, shape) / math.sqrt(fan_in)
        out[name] = val
    for name in EMBEDDINGS:
        out[name] = out[name] / alpha
    return out


def build(v: Mapping[str, Any], alpha: float, seed: int, device: str = "cpu") -> Any:
    """The network of one configuration with its initial values, in ``v['dtype']``."""
    import torch

    # the layers' own initialisation draws from torch's global generator, whose values are
    # overwritten below: fork it, so that the process's random state is left as it was
    with torch.random.fork_rng(devices=[]):
        net = transformer(int(v["p"]), int(v["d_model"]), int(v["n_heads"]),
                          int(v["n_layers"]))
    values = initial_values(net, rng(seed, "init"), alpha)
    dtype = compute.torch_dtype(v["dtype"])
    with torch.no_grad():
        for name, prm in net.named_parameters():
            prm.data = torch.tensor(values[name], dtype=dtype)
    return net.to(device=device)


def optimizer(net: Any, lr: float, tau: float, weight_decay: float) -> tuple[Any, Any]:
    """AdamW at lr/τ² with the reference's betas and its linear warm-up (docs/grokking.md
    eq. (6))."""
    import torch

    opt = torch.optim.AdamW(net.parameters(), lr=lr / tau**2, betas=BETAS,
                            weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=WARMUP_START,
                                              total_iters=WARMUP_STEPS)
    return opt, sched


def evaluate(net: Any, A: Any, b: Any, tau: float) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``net`` on the pairs ``A`` with labels ``b``, in
    batches of :data:`EVAL_ROWS` pairs (call under ``torch.no_grad()``). Where the loss is not
    finite the logits hold no prediction, so the accuracy is NaN too."""
    import torch.nn.functional as F

    n = int(b.shape[0])
    if n <= EVAL_ROWS:
        logits = net(A, tau)
        loss = float(F.cross_entropy(logits, b))
        acc = float((logits.argmax(1) == b).double().mean())
        return loss, acc if math.isfinite(loss) else math.nan
    total, correct = 0.0, 0
    for start in range(0, n, EVAL_ROWS):
        logits = net(A[start:start + EVAL_ROWS], tau)
        part = b[start:start + EVAL_ROWS]
        total += float(F.cross_entropy(logits, part, reduction="sum"))
        correct += int((logits.argmax(1) == part).sum())
    return total / n, correct / n if math.isfinite(total) else math.nan


class _Run:
    """One configuration: its network, optimiser and batch order."""

    def __init__(self, v: Mapping[str, Any], alpha: float, tau: float, seed: int,
                 device: str) -> None:
        self.v, self.tau, self.seed, self.device = v, tau, seed, device
        self.net = build(v, alpha, seed, device)
        self.n_params = sum(int(q.numel()) for q in self.net.parameters())
        self.n_embedding = sum(int(q.numel()) for n, q in self.net.named_parameters()
                               if n in EMBEDDINGS)

    def train(self, Xtr: np.ndarray, ytr: np.ndarray, Xva: np.ndarray, yva: np.ndarray,
              bsz: int, ev: np.ndarray) -> tuple[dict[str, np.ndarray], bool]:
        import torch
        import torch.nn.functional as F

        dev, tau, net = self.device, self.tau, self.net
        X, y = torch.as_tensor(Xtr, device=dev), torch.as_tensor(ytr, device=dev)
        Xv, yv = torch.as_tensor(Xva, device=dev), torch.as_tensor(yva, device=dev)
        opt, sched = optimizer(net, float(self.v["lr"]), tau, float(self.v["weight_decay"]))
        g = rng(self.seed, "batches")
        thr, early = float(self.v["threshold"]), bool(self.v["early_stop"])
        out = {k: np.full(ev.size, np.nan)
               for k in ("train_acc", "val_acc", "train_loss", "val_loss")}
        n = y.shape[0]

        def record(j: int) -> bool:
            with torch.no_grad():
                for tag, A, b in (("train", X, y), ("val", Xv, yv)):
                    out[f"{tag}_loss"][j], out[f"{tag}_acc"][j] = evaluate(net, A, b, tau)
            return math.isfinite(out["train_loss"][j])

        def reached(j: int) -> bool:
            return early and out["train_acc"][j] >= thr and out["val_acc"][j] >= thr

        if not record(0):
            return out, False
        if reached(0):
            return out, True
        j, step, steps = 1, 0, int(ev[-1])
        while step < steps:
            order = torch.as_tensor(g.permutation(n), device=dev)
            for b0 in range(0, n, bsz):
                idx = order[b0:b0 + bsz]
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(net(X[idx], tau), y[idx]).backward()
                opt.step()
                sched.step()
                step += 1
                if step == ev[j]:
                    if not record(j):
                        return out, False
                    if reached(j):
                        return out, True
                    j += 1
                if step == steps:
                    break
        return out, True
