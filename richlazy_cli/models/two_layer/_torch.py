"""The two-layer model's PyTorch backend: the whole batch trained as one computation.

Private helper of :mod:`richlazy_cli.models.two_layer.model`; pure numerics, no I/O. It implements
the same gradient descent, divergence rule and checkpoint metrics as the NumPy backend
(docs/two-layer.md), for the B configurations of a batch at once on one device:

* forward ``Z = W Xᵀ`` (B, h, n) as one batched product, ``A = σ(Z)``, ``f = Σ_k a_k A_k``,
  residual ``r = f − y`` and loss ``(1/n) Σ r²`` (summed in float64);
* backward ``ξ = (σ'(Z) ∘ r) X`` (B, h, d) as one batched product, then
  ``w_k ← w_k − κ a_k ξ_k`` and ``a_k ← a_k − κ w_k·ξ_k`` with ``κ = lr_eff · 2/n``;
* step ``t`` evaluates the loss at ``θ_t``; a configuration whose loss is non-finite or above
  ``factor × loss(θ_0)`` is frozen at ``θ_t`` (its update is masked out) and marked diverged;
  checkpoint ``t`` records the configurations that pass step ``t``'s test;
* at a checkpoint: training and test losses, the fraction of activation signs changed since
  initialisation, the parameter distance, and the kernel distance of the closed-form NTK
  ``K = σ(XWᵀ)σ(XWᵀ)ᵀ + (XXᵀ) ∘ (GGᵀ)``, ``G_ik = a_k σ'(w_kᵀx_i)`` (docs/two-layer.md), all
  computed on the device; only the (B,)-sized checkpoint values are copied back.

The step is :class:`FusedStep` (eager, in preallocated buffers) or, for the ``torch-compiled``
implementation, :class:`CompiledStep`: the same step through ``torch.compile`` (on a GPU the
whole step, matrix products included, with CUDA graphs; on the CPU the elementwise passes, fused,
with the products kept on their exactness rule), falling back to the eager step with one line on
stderr where compilation fails (docs/performance.md, "The compiled step").

The trajectory stays on the device between checkpoints. Products run in the training dtype;
the sums behind losses and kernel distances are taken in float64, as in the NumPy backend.

Reproducibility: on the CPU the backend runs with one intra-op thread and torch's
deterministic algorithms, and every batched product is checked (:func:`batching_is_exact`)
to give each configuration the bits it gets alone, falling back to one product per
configuration where it does not; results are then bitwise independent of batching, chunking
and worker count. On a GPU, cuBLAS may choose a different kernel for a different batch size,
so results are deterministic for a given batch but may differ in the last bits between
batchings.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ...numerics.kernel_distance import kernel_distance

_CHECKPOINT_BATCH_BYTES = 1 << 30
"""Largest scratch (bytes) of one slice of configurations when computing checkpoint metrics."""


_EXACT: dict[tuple[Any, ...], bool] = {}


def batching_is_exact(torch: Any, a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                      dtype: Any, device: str) -> bool:
    """Whether one batched product ``A @ B`` (``A`` of shape ``a_shape`` = (b, p, q); ``B``
    (q, r) shared or (b, q, r)) gives every item exactly the bits of its own product.

    Checked once per shapes on random data (kernels are chosen by shape, not by values), like
    the NumPy backend's stacking check. A batch of one is checked too: a (1, p, q) product
    need not give the bits of the (p, q) one (MKL on AVX-512 machines), and a configuration
    alone must equal itself in a batch.
    """
    key = (a_shape, b_shape, str(dtype), device)
    if key not in _EXACT:
        gen = torch.Generator(device="cpu").manual_seed(20240229)
        A = torch.randn(*a_shape, generator=gen, dtype=torch.float64).to(device, dtype)
        Bm = torch.randn(*b_shape, generator=gen, dtype=torch.float64).to(device, dtype)
        C = torch.matmul(A, Bm)
        _EXACT[key] = all(
            torch.equal(C[i], torch.matmul(A[i], Bm[i] if Bm.dim() == 3 else Bm))
            for i in range(a_shape[0])
        )
    return _EXACT[key]


def batched_matmul(torch: Any, A: Any, Bm: Any) -> Any:
    """``A @ B`` over a leading batch axis; on the CPU one product per item wherever the
    batched product would change any item's bits (:func:`batching_is_exact`)."""
    if A.device.type != "cpu" or batching_is_exact(
            torch, tuple(A.shape), tuple(Bm.shape), A.dtype, "cpu"):
        return torch.matmul(A, Bm)
    return torch.stack([torch.matmul(A[i], Bm[i] if Bm.dim() == 3 else Bm)
                        for i in range(A.shape[0])])


def batched_matmul_out(torch: Any, A: Any, Bm: Any, out: Any) -> Any:
    """:func:`batched_matmul` written into the preallocated ``out`` (no allocation)."""
    if A.device.type != "cpu" or batching_is_exact(
            torch, tuple(A.shape), tuple(Bm.shape), A.dtype, "cpu"):
        return torch.matmul(A, Bm, out=out)
    for i in range(A.shape[0]):
        torch.matmul(A[i], Bm[i] if Bm.dim() == 3 else Bm, out=out[i])
    return out


@dataclass(frozen=True)
class Blocks:
    """The configurations of a batch by data set: block ``k`` is the batch positions
    ``bounds[k] = (start, stop)``, which train on data set ``k`` (one seed's training inputs,
    targets, test set and base initialisation). A batch of one seed is one block.

    A product with a data set's shared operand (``W Xᵀ``, ``E X``) is one batched product per
    block, the call a batch of that seed alone makes, so that on the CPU a configuration gets
    the bits it gets in its own seed's batch (:func:`batched_matmul`'s rule). With
    ``grouped`` (off the CPU, blocks of equal size), the blocks' products are one grouped
    product instead, ``(S, b·h, d) @ (S, d, n)``: one launch for the whole batch.
    """

    bounds: tuple[tuple[int, int], ...]
    grouped: bool = False

    @classmethod
    def of(cls, group: np.ndarray | None, B: int, grouped: bool = False) -> Blocks:
        """The blocks of the data-set index ``group`` (B,), non-decreasing (None: one block);
        ``grouped`` only where the blocks are of equal size."""
        if group is None or B == 0:
            return cls(((0, B),))
        group = np.asarray(group, dtype=np.int64)
        if np.any(np.diff(group) < 0) or group[0] != 0 or np.any(np.diff(group) > 1):
            raise ValueError("the configurations of a data set must be contiguous, in order")
        cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), B]
        bounds = tuple(pairwise(cuts))
        equal = len({s1 - s0 for s0, s1 in bounds}) == 1
        return cls(bounds, grouped and equal and len(bounds) > 1)


def block_matmul(torch: Any, A: Any, Bs: Any, bounds: tuple[tuple[int, int], ...],
                 grouped: bool) -> Any:
    """``A_b @ Bs[k]`` for every configuration ``b`` of block ``k`` (:class:`Blocks`), as
    plain torch operations (traced by ``torch.compile`` with the blocks as constants)."""
    if len(bounds) == 1:
        return torch.matmul(A, Bs[0])
    if grouped:
        S = len(bounds)
        return torch.matmul(A.reshape(S, -1, A.shape[-1]), Bs).reshape(
            A.shape[0], A.shape[1], Bs.shape[-1])
    return torch.cat([torch.matmul(A[s0:s1], Bs[k]) for k, (s0, s1) in enumerate(bounds)])


def block_matmul_out(torch: Any, A: Any, Bs: Any, blocks: Blocks, out: Any) -> Any:
    """:func:`block_matmul` into the preallocated ``out``: each block's product on
    :func:`batched_matmul_out`'s exactness rule, or the grouped product."""
    if blocks.grouped:
        S = len(blocks.bounds)
        torch.matmul(A.view(S, -1, A.shape[-1]), Bs, out=out.view(S, -1, out.shape[-1]))
        return out
    for k, (s0, s1) in enumerate(blocks.bounds):
        batched_matmul_out(torch, A[s0:s1], Bs[k], out[s0:s1])
    return out


class FusedStep:
    """One gradient-descent step of the whole batch in preallocated device buffers.

    The step of the module docstring, with every pass over the (B, h, n) activations written
    into a buffer allocated once (per step only (B, h, d)-sized and smaller temporaries are
    allocated, and the parameters are updated in place, never copied):

    * forward: ``Z = W Xᵀ`` (one batched product into ``Z``), the slope ``D = σ'(Z)`` (1 or
      the configuration's leak), ``A = Z ∘ D``, ``f = aᵀ A`` (one batched product) and the
      residual ``r = f − y`` in place;
    * backward and update: ``E = D ∘ r``, ``ξ = E X`` (one batched product into ``ξ``),
      ``g_a = Σ_d W ∘ ξ`` from the old ``W``, then ``W ← W − (κ a) ∘ ξ`` and
      ``a ← a − κ g_a`` in place (``addcmul_``), with ``κ`` set to 0 for a frozen
      (diverged) configuration, so that its parameters keep their values of ``θ_t``
      wherever its gradient is finite; a diverged configuration's values are never read.

    Every operation is elementwise or a per-configuration product, so a configuration's bits
    do not depend on its neighbours (the batched products follow :func:`batched_matmul`).

    The data: ``X`` (n, d) and ``Xᵀ`` of one seed, ``y`` (n,); or, for a batch of several
    seeds' data sets (``blocks``, :class:`Blocks`), ``X`` (S, n, d) and ``Xᵀ`` (S, d, n)
    stacked by data set and ``y`` (B, n), each configuration's targets.
    """

    def __init__(self, torch: Any, W: Any, a: Any, X: Any, XT: Any, y: Any, leak: Any,
                 coef: Any, blocks: Blocks | None = None) -> None:
        self.torch = torch
        if X.dim() == 2:
            X, XT = X[None], XT[None]
        self.blocks = blocks if blocks is not None else Blocks(((0, W.shape[0]),))
        self.W, self.a, self.X, self.XT, self.y, self.leak, self.coef = \
            W.clone(), a.clone(), X, XT, y, leak, coef
        self.allocate()

    def allocate(self) -> None:
        """The step's buffers, for the shapes of the parameters and data."""
        torch, W = self.torch, self.W
        B, h, _ = W.shape
        n = self.X.shape[-2]
        self.Z = W.new_empty((B, h, n))
        self.Dp = torch.empty_like(self.Z)
        self.A = torch.empty_like(self.Z)
        self.E = torch.empty_like(self.Z)
        self.pos = torch.empty((B, h, n), dtype=torch.bool, device=W.device)
        self.f = W.new_empty((B, 1, n))
        self.xi = torch.empty_like(self.W)
        self.ga = torch.empty_like(self.a)
        self.ca = torch.empty_like(self.a)
        self.one = torch.ones((), dtype=W.dtype, device=W.device)

    def forward(self) -> Any:
        """The residual ``r`` (B, n) at the current parameters (a view of a buffer)."""
        torch = self.torch
        block_matmul_out(torch, self.W, self.XT, self.blocks, self.Z)
        torch.ge(self.Z, 0, out=self.pos)
        torch.where(self.pos, self.one, self.leak, out=self.Dp)
        torch.mul(self.Z, self.Dp, out=self.A)
        batched_matmul_out(torch, self.a[:, None, :], self.A, self.f)
        r = self.f[:, 0, :]
        r.sub_(self.y)
        return r

    def backward_update(self, active: Any) -> None:
        """One step from the residual of :meth:`forward`, frozen where ``active`` is False."""
        torch = self.torch
        r = self.f[:, 0, :]
        torch.mul(self.Dp, r[:, None, :], out=self.E)
        block_matmul_out(torch, self.E, self.X, self.blocks, self.xi)
        torch.sum(self.W * self.xi, dim=2, out=self.ga)
        kappa = torch.where(active, self.coef, torch.zeros_like(self.coef))[:, None]
        torch.mul(kappa, self.a, out=self.ca)
        self.W.addcmul_(self.ca[:, :, None], self.xi, value=-1)
        self.a.addcmul_(kappa, self.ga, value=-1)


COMPILE_FAILED = "two-layer: torch.compile of the step failed ({}); the step runs eagerly"
"""The one line on stderr when :class:`CompiledStep` falls back to the eager step."""

_compiled: dict[tuple[bool, str | None], tuple[Any, Any]] = {}
_warned: list[str] = []


def compiled_functions(torch: Any, whole: bool, mode: str | None) -> tuple[Any, Any]:
    """The step's two compiled functions, made once per process (``torch.compile`` keeps
    one compiled graph per shape; a new batch shape recompiles, about a second).

    ``whole``: ``forward(W, a, XT, y, leak, one, bounds, grouped) → (Z, σ'(Z), A, r)`` and
    ``update(W, a, Dp, r, X, coef, active, bounds, grouped) → (W', a')``, the matrix products
    inside (:func:`block_matmul` over the data sets' blocks, constants of the graph; one graph
    each, which CUDA graphs replay with ``mode = "reduce-overhead"``). Otherwise the
    elementwise parts alone: ``forward(Z, leak, one) → (σ'(Z), A)`` (three passes over the
    (B, h, n) activations in one) and ``update(W, a, xi, coef, active) → (W', a')``."""
    key = (whole, mode)
    if key not in _compiled:
        def forward_whole(W: Any, a: Any, XT: Any, y: Any, leak: Any, one: Any,
                          bounds: tuple[tuple[int, int], ...], grouped: bool) -> Any:
            Z = block_matmul(torch, W, XT, bounds, grouped)
            Dp = torch.where(Z >= 0, one, leak)
            A = Z * Dp
            r = torch.matmul(a[:, None, :], A)[:, 0, :] - y
            return Z, Dp, A, r

        def update_whole(W: Any, a: Any, Dp: Any, r: Any, X: Any, coef: Any, active: Any,
                         bounds: tuple[tuple[int, int], ...], grouped: bool) -> Any:
            xi = block_matmul(torch, Dp * r[:, None, :], X, bounds, grouped)
            return update_parts(W, a, xi, coef, active)

        def forward_parts(Z: Any, leak: Any, one: Any) -> Any:
            Dp = torch.where(Z >= 0, one, leak)
            return Dp, Z * Dp

        def update_parts(W: Any, a: Any, xi: Any, coef: Any, active: Any) -> Any:
            kappa = torch.where(active, coef, torch.zeros_like(coef))[:, None]
            ga = (W * xi).sum(dim=2)
            return W - (kappa * a)[:, :, None] * xi, a - kappa * ga

        forward, update = (forward_whole, update_whole) if whole else (forward_parts,
                                                                       update_parts)
        _compiled[key] = (torch.compile(forward, mode=mode), torch.compile(update, mode=mode))
    return _compiled[key]


class CompiledStep(FusedStep):
    """:class:`FusedStep` through ``torch.compile``: the same step, its passes fused.

    ``whole`` (the default on a GPU): forward and update are each one compiled graph, matrix
    products included, and on a GPU ``mode = "reduce-overhead"`` replays them as CUDA graphs
    (one launch per graph instead of one per operation). Otherwise (the default on the CPU):
    the products stay eager, on :func:`batched_matmul_out`'s exactness rule, and the
    elementwise passes between them are compiled (σ'(Z) and A = Z ∘ σ'(Z) in one pass; the
    update's reductions and products in one). The arithmetic is the eager step's; a compiled
    kernel may contract a multiply and an add or order a reduction otherwise, so a
    configuration's values agree with the eager step's within the torch implementation's
    tolerance, not bit for bit. If compiling (or running a compiled graph) raises, the step
    prints :data:`COMPILE_FAILED` once per process and goes on eagerly from where it was.
    """

    def __init__(self, torch: Any, W: Any, a: Any, X: Any, XT: Any, y: Any, leak: Any,
                 coef: Any, blocks: Blocks | None = None, whole: bool | None = None,
                 mode: str | None = None) -> None:
        super().__init__(torch, W, a, X, XT, y, leak, coef, blocks)
        on_gpu = W.device.type == "cuda"
        self.whole = on_gpu if whole is None else whole
        self.mode = mode if mode is not None else ("reduce-overhead" if on_gpu else None)
        self.eager = False
        try:
            self._forward, self._update = compiled_functions(torch, self.whole, self.mode)
        except Exception as exc:  # torch.compile itself unavailable
            self._fall_back(exc)

    def _fall_back(self, exc: BaseException) -> None:
        text = str(exc).strip().splitlines()
        line = COMPILE_FAILED.format(f"{type(exc).__name__}: {text[0] if text else ''}"
                                     .rstrip(": "))
        if not _warned:
            print(line, file=sys.stderr)
            _warned.append(line)
        self.eager = True
        self.W, self.a = self.W.clone(), self.a.clone()  # out of a graph's memory
        self.allocate()

    def forward(self) -> Any:
        if not self.eager:
            try:
                return self._compiled_forward()
            except Exception as exc:
                self._fall_back(exc)
        return super().forward()

    def backward_update(self, active: Any) -> None:
        if not self.eager:
            try:
                self._compiled_update(active)
                return
            except Exception as exc:
                self._fall_back(exc)
                super().forward()  # the buffers of θ_t again
        super().backward_update(active)

    def _compiled_forward(self) -> Any:
        torch = self.torch
        if self.whole:
            if self.mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            self.Z, self.Dp, self.A, r = self._forward(self.W, self.a, self.XT, self.y,
                                                       self.leak, self.one,
                                                       self.blocks.bounds, self.blocks.grouped)
            self.f = r[:, None, :]
            return r
        block_matmul_out(torch, self.W, self.XT, self.blocks, self.Z)
        self.Dp, self.A = self._forward(self.Z, self.leak, self.one)
        batched_matmul_out(torch, self.a[:, None, :], self.A, self.f)
        r = self.f[:, 0, :]
        r.sub_(self.y)
        return r

    def _compiled_update(self, active: Any) -> None:
        r = self.f[:, 0, :]
        if self.whole:
            W, a = self._update(self.W, self.a, self.Dp, r, self.X, self.coef, active,
                                self.blocks.bounds, self.blocks.grouped)
            if self.mode == "reduce-overhead":  # a graph's outputs are rewritten by its next
                W, a = W.clone(), a.clone()  # replay, which reads them: own copies
            self.W, self.a = W, a
            return
        torch = self.torch
        torch.mul(self.Dp, r[:, None, :], out=self.E)
        block_matmul_out(torch, self.E, self.X, self.blocks, self.xi)
        self.W, self.a = self._update(self.W, self.a, self.xi, self.coef, active)


@dataclass
class TorchRun:
    """Inputs of one batch on the torch backend (NumPy arrays, float64 unless said).

    The data are one seed's, ``X`` (n, d), ``y`` (n,), ``X_test`` (n_test, d), ``y_test``
    (n_test,), or ``S`` seeds' stacked, (S, n, d), (S, n), (S, n_test, d), (S, n_test), with
    ``group`` (B,) the data set of each configuration, non-decreasing (the configurations of a
    data set contiguous, :class:`Blocks`)."""

    X: np.ndarray  # (n, d) or (S, n, d)
    y: np.ndarray  # (n,) or (S, n)
    X_test: np.ndarray  # (n_test, d) or (S, n_test, d)
    y_test: np.ndarray  # (n_test,) or (S, n_test)
    W0: np.ndarray  # (B, h, d)
    a0: np.ndarray  # (B, h)
    leak: np.ndarray  # (B,)
    coef: np.ndarray  # (B,) lr_eff · 2/n
    steps: int
    checkpoints: np.ndarray  # sorted unique steps in [0, steps]
    factor: float
    dtype: str  # "float64" | "float32"
    device: str  # resolved: "cpu" | "cuda" | "cuda:k"
    save_params: bool = False
    on_checkpoint: Callable[[int, np.ndarray, np.ndarray, np.ndarray], None] | None = None
    """Called at checkpoint ``j`` with the batch positions recorded and their float64
    parameters ``W`` (r, h, d) and ``a`` (r, h), on the host (for further outputs)."""
    compiled: bool = False
    """Train with :class:`CompiledStep` (the ``torch-compiled`` implementation)."""
    group: np.ndarray | None = None
    """The data set of each configuration (B,), with stacked data; None: one data set."""
    grouped: bool | None = None
    """Multiply equal blocks as one grouped product (:class:`Blocks`); None: off the CPU."""

    def data_sets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``X``, ``y``, ``X_test``, ``y_test`` stacked by data set (a leading axis of S)."""
        if self.X.ndim == 2:
            return self.X[None], self.y[None], self.X_test[None], self.y_test[None]
        return self.X, self.y, self.X_test, self.y_test


def train(torch: Any, run: TorchRun, progress: Any = None) -> dict[str, np.ndarray]:
    """Train every configuration of ``run``; the checkpoint metrics as NumPy arrays
    ``(B, n_checkpoints)`` (NaN after divergence), ``status`` (B,) int8 and, with
    ``save_params``, ``W`` (B, n_ck, h, d) and ``a`` (B, n_ck, h). Called with the torch
    module inside the model's torch session (one intra-op thread, deterministic algorithms:
    :func:`richlazy_cli.numerics.compute.placed`)."""
    from ...errors import Status

    with torch.no_grad():
        return _train(torch, run, progress, Status)


def _train(torch: Any, run: TorchRun, progress: Any, Status: Any) -> dict[str, np.ndarray]:
    dev = torch.device(run.device)
    dt = torch.float64 if run.dtype == "float64" else torch.float32
    f64 = torch.float64
    B = run.W0.shape[0]
    Xs, ys, _, _ = run.data_sets()
    n = Xs.shape[1]
    ck = np.asarray(run.checkpoints, dtype=np.int64)
    n_ck = ck.size
    grouped = dev.type != "cpu" if run.grouped is None else run.grouped
    blocks = Blocks.of(run.group, B, grouped)

    def t_(x: np.ndarray, dtype: Any = dt) -> Any:
        return torch.as_tensor(np.ascontiguousarray(x)).to(device=dev, dtype=dtype)

    X, XT = t_(Xs), t_(Xs.transpose(0, 2, 1))
    # one seed's targets broadcast over the batch; several seeds': each configuration's
    y = t_(ys[0]) if len(blocks.bounds) == 1 else t_(ys[np.asarray(run.group)])
    W, a = t_(run.W0), t_(run.a0)
    leak = t_(run.leak)[:, None, None]
    coef = t_(run.coef)

    def matmul(Ab: Any, Bm: Any) -> Any:
        return batched_matmul(torch, Ab, Bm)

    metrics = _CheckpointMetrics(torch, run, X, dt, dev, matmul, blocks)
    metrics.initial(W, a)

    active = torch.ones(B, dtype=torch.bool, device=dev)
    status = torch.zeros(B, dtype=torch.int8, device=dev)
    diverged = torch.full_like(status, int(Status.DIVERGED))
    factor = float(run.factor)
    loss0 = None
    next_ck = 0
    report_every = max(1, run.steps // 200)
    step = (CompiledStep if run.compiled else FusedStep)(torch, W, a, X, XT, y, leak, coef,
                                                         blocks=blocks)
    # Nothing below reads a device value back between checkpoints and progress reports, so
    # that the host queues steps ahead of a GPU.
    last = run.steps if (n_ck and ck[-1] == run.steps) else run.steps - 1
    for t in range(last + 1):
        r = step.forward()
        r64 = r.to(f64)
        loss = (r64 * r64).sum(dim=1) / n
        if loss0 is None:
            loss0 = loss.clone()
        bad = active & (~torch.isfinite(loss) | (loss > factor * loss0))
        status = torch.where(bad, diverged, status)
        active = active & ~bad
        if next_ck < n_ck and ck[next_ck] == t:
            metrics.record(next_ck, active, step.W, step.a, step.Z, step.A, step.Dp, r64)
            next_ck += 1
        if t == run.steps:
            break
        step.backward_update(active)
        if (t + 1) % report_every == 0:
            if not bool(active.any()):
                break
            if progress is not None:
                progress((t + 1) / max(run.steps, 1))
    out = metrics.result()
    out["status"] = status.cpu().numpy().astype(np.int8)
    return out


class _CheckpointMetrics:
    """Checkpoint metrics on the device; the initial features kept for the kernel distance.

    Each data set's Gram matrix, test inputs and targets are kept once; the metrics of a
    slice of configurations are computed with its data set's (a slice never crosses a
    block of :class:`Blocks`), so a configuration's values are those of its own seed's batch.
    """

    def __init__(self, torch: Any, run: TorchRun, X: Any, dt: Any, dev: Any, matmul: Any,
                 blocks: Blocks | None = None) -> None:
        self.torch = torch
        self.run = run
        if X.dim() == 2:
            X = X[None]
        self.X = X  # (S, n, d)
        self.dt = dt
        self.dev = dev
        self.matmul = matmul
        B, h, d = run.W0.shape
        self.blocks = blocks if blocks is not None else Blocks(((0, B),))
        _, _, X_test, y_test = run.data_sets()
        # per data set, as a batch of one seed computes them (the Gram matrix a 2-D product)
        self.C = [X[k] @ X[k].T for k in range(X.shape[0])]  # (n, n), training dtype
        self.XtT = [torch.as_tensor(np.ascontiguousarray(x.T)).to(dev, dt) for x in X_test]
        self.y_test = [torch.as_tensor(y).to(dev, dt) for y in y_test]
        n_ck = len(run.checkpoints)
        self.out: dict[str, np.ndarray] = {
            name: np.full((B, n_ck), np.nan) for name in
            ("train_loss", "test_loss", "kernel_distance", "hamming_distance", "param_distance")}
        if run.save_params:
            self.W_hist = np.full((B, n_ck, h, d), np.nan)
            self.a_hist = np.full((B, n_ck, h), np.nan)
        n = X.shape[1]
        n_test = X_test.shape[1]
        itemsize = 8
        per_config = itemsize * max(3 * n * n, 2 * h * n_test)
        self.slice = max(1, min(B, _CHECKPOINT_BATCH_BYTES // max(per_config, 1)))

    def initial(self, W: Any, a: Any) -> None:
        torch = self.torch
        B, h, _ = W.shape
        n = self.X.shape[1]
        leak = torch.as_tensor(self.run.leak).to(self.dev, self.dt)[:, None, None]
        one = torch.ones((), dtype=self.dt, device=self.dev)
        self.A0 = W.new_empty((B, n, h))
        self.G0 = W.new_empty((B, n, h))
        self.sign0 = torch.empty((B, h, n), dtype=torch.int8, device=self.dev)
        for k, (s0, s1) in enumerate(self.blocks.bounds):
            Z = self.matmul(W[s0:s1], self.X[k].T.contiguous())
            Dp = torch.where(Z >= 0, one, leak[s0:s1])
            self.A0[s0:s1] = (Z * Dp).transpose(1, 2)
            self.G0[s0:s1] = (Dp * a[s0:s1, :, None]).transpose(1, 2)
            self.sign0[s0:s1] = torch.sign(Z).to(torch.int8)
        self.W0 = W.to(torch.float64)
        self.a0 = a.to(torch.float64)
        self.norm0 = torch.empty(B, dtype=torch.float64, device=self.dev)
        for k, s in self._slices(np.arange(B)):
            K0 = self._kernel(k, self.A0[s], self.G0[s])
            self.norm0[s] = (K0 * K0).sum(dim=(1, 2))

    def _slices(self, rows: np.ndarray) -> list[tuple[int, slice]]:
        """The sorted batch positions ``rows`` in slices of at most :attr:`slice`, each
        within one block: (data set, slice of ``rows``)."""
        out = []
        for k, (s0, s1) in enumerate(self.blocks.bounds):
            lo, hi = (int(i) for i in np.searchsorted(rows, [s0, s1]))
            out += [(k, slice(i, min(i + self.slice, hi))) for i in range(lo, hi, self.slice)]
        return out

    def _kernel(self, k: int, A: Any, G: Any) -> Any:
        """NTK (b, n, n) in float64 from features in the training dtype, on data set ``k``."""
        K = self.matmul(A, A.transpose(1, 2)) + self.C[k] * self.matmul(G, G.transpose(1, 2))
        return K.to(self.torch.float64)

    def record(self, j: int, active: Any, W: Any, a: Any, Z: Any, A: Any, Dp: Any,
               r64: Any) -> None:
        torch = self.torch
        idx = torch.nonzero(active).flatten()
        if idx.numel() == 0:
            return
        rows = idx.cpu().numpy()
        n = Z.shape[2]
        f64 = torch.float64
        train_loss = (r64[idx] * r64[idx]).sum(dim=1) / n
        hamming = (torch.sign(Z[idx]).to(torch.int8) != self.sign0[idx]).sum(dim=(1, 2))
        hamming = hamming.to(f64) / (Z.shape[1] * n)
        Wf, af = W[idx].to(f64), a[idx].to(f64)
        pdist = torch.sqrt(((Wf - self.W0[idx]) ** 2).sum(dim=(1, 2))
                           + ((af - self.a0[idx]) ** 2).sum(dim=1))
        test_loss = torch.empty(idx.numel(), dtype=f64, device=self.dev)
        kdist = torch.empty(idx.numel(), dtype=f64, device=self.dev)
        At = A.transpose(1, 2)
        Gt = (Dp * a[:, :, None]).transpose(1, 2)
        leak = torch.as_tensor(self.run.leak).to(self.dev, self.dt)
        for k, s in self._slices(rows):
            sel = idx[s]
            Zt = self.matmul(W[sel], self.XtT[k])
            Zt = torch.maximum(Zt, leak[sel][:, None, None] * Zt)
            rt = (self.matmul(a[sel][:, None, :], Zt)[:, 0, :] - self.y_test[k]).to(f64)
            test_loss[s] = (rt * rt).sum(dim=1) / rt.shape[1]
            Kt = self._kernel(k, At[sel].contiguous(), Gt[sel].contiguous())
            K0 = self._kernel(k, self.A0[sel], self.G0[sel])
            inner = (K0 * Kt).sum(dim=(1, 2))
            normt = (Kt * Kt).sum(dim=(1, 2))
            kdist[s] = kernel_distance(inner, self.norm0[sel], normt)
        for name, value in (("train_loss", train_loss), ("test_loss", test_loss),
                            ("kernel_distance", kdist), ("hamming_distance", hamming),
                            ("param_distance", pdist)):
            self.out[name][rows, j] = value.cpu().numpy()
        if self.run.save_params or self.run.on_checkpoint is not None:
            W_host, a_host = Wf.cpu().numpy(), af.cpu().numpy()
            if self.run.save_params:
                self.W_hist[rows, j] = W_host
                self.a_hist[rows, j] = a_host
            if self.run.on_checkpoint is not None:
                self.run.on_checkpoint(j, rows, W_host, a_host)

    def result(self) -> dict[str, np.ndarray]:
        out = dict(self.out)
        if self.run.save_params:
            out["W"] = self.W_hist
            out["a"] = self.a_hist
        return out
