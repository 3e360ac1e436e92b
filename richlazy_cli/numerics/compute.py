"""Where the numbers run: implementations, devices, the torch session and its provenance.

One module for the seam between NumPy and PyTorch (docs/engine.md, "Implementations and
devices"). A model family lists its implementations as data (:class:`Implementation`: the
actions, methods, devices and dtypes each supports, what it needs installed, how close it is
to the family's reference and whether its bits depend on the batch); one model parameter,
``implementation``, names the one a configuration runs on. Everything a torch path needs is
defined here once:

* :func:`device_param` — the one ``device`` parameter (``cpu``, ``cuda``, ``auto``);
* :func:`resolve_device` — ``auto`` to ``cuda`` where a GPU is present, ``cuda`` refused with
  :data:`NO_GPU` where none is (or, inside :func:`absent_devices_allowed`, noted as absent:
  a dry run's plan on a machine without the GPU);
* :func:`import_torch` — torch, or :class:`MissingRequirement` naming the extra;
* :func:`session` — one intra-op thread and deterministic algorithms for one model call;
* :func:`provenance` — the attributes every torch result carries (:data:`PROVENANCE_KEYS`);
* :func:`gpu_workers` — how many workers a sweep on a GPU device starts (one per GPU);
* :func:`device_free_bytes` — the free memory of the GPU a device names (None on the CPU),
  which sizes the engine's chunks on a device (docs/performance.md, "Chunks on a GPU");
* :func:`placed` — the :class:`Placement` a row's function computes in: the row, its resolved
  device and, for a row that needs torch, the torch module inside one :func:`session` and
  the torch dtype of the ``dtype`` parameter.

Each row names the function that computes an action on it (``Implementation.run``, a
callable or a name imported when first called, so that torch or numba is imported only by a
run that uses them); :meth:`richlazy_cli.models.base.Model.dispatch` is the one place that
calls it, as neural-tangents dispatches its implementation enum through one dict and
torchdiffeq a method's name through ``SOLVERS[method]``.

Random numbers never come from torch's global generator: models draw them from
:func:`richlazy_cli.numerics.randomness.rng` (NumPy) and convert them, so they are the same on every
device and torch version.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInput
from ..params import Param

EXTRAS: dict[str, str] = {"torch": "practice"}
"""The optional extra that provides each importable requirement."""

DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")
"""The values of the ``device`` parameter."""

NO_GPU = "parameter device: cuda was asked for, but no CUDA device is present"
"""The one wording of "a GPU was asked for and there is none"."""

PROVENANCE_KEYS: tuple[str, ...] = ("torch_version", "device", "cuda_device")
"""What :func:`provenance` writes (``cuda_device``, the GPU's name, on a GPU only)."""

BITWISE = "bitwise"
"""Batching guarantee: a configuration's bits do not depend on its batch, chunk or worker."""
BATCH_DEPENDENT = "batch-dependent"
"""Batching guarantee: deterministic for one batch, but another batch may round otherwise."""


class MissingRequirement(BadInput):
    """A package the computation needs is not installed (one line naming the extra)."""


def install_hint(module: str) -> str:
    """``pip install 'richlazy[EXTRA]'`` for the extra that provides ``module``."""
    extra = EXTRAS.get(module)
    return f"pip install 'richlazy[{extra}]' (the '{extra}' extra)" if extra else \
        f"pip install {module}"


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def require(what: str, modules: tuple[str, ...]) -> None:
    """:class:`MissingRequirement` for the first of ``modules`` that is not installed;
    ``what`` names the thing that needs it (``model rhm``, ``implementation torch``)."""
    for module in modules:
        if not available(module):
            name = "PyTorch" if module == "torch" else module
            raise MissingRequirement(
                f"{what} needs {name}, which is not installed: {install_hint(module)}")


def import_torch(what: str = "the torch implementation") -> Any:
    """The ``torch`` module, or :class:`MissingRequirement` naming the extra."""
    require(what, ("torch",))
    import torch

    return torch


# -- implementations ------------------------------------------------------------------------
FunctionName = Callable[..., Any] | str
"""How a row names its function (:attr:`Implementation.run`): the function itself; a name
``"_train_numpy"``, a method of the model's class; or ``"module:name"``, imported when the
row first computes, a module named relative to the family's package when it starts with a
dot (``"._torch:solve"``). Every form is called as ``function(model, batch, progress,
placement)`` (:class:`Placement`) and returns the action's dataset."""


@dataclass(frozen=True)
class Implementation:
    """One way a model family computes: a row of its table (docs/engine.md).

    ``actions`` it implements; ``methods`` the values of the family's ``method`` parameter it
    accepts (None: all); ``devices`` (``cpu`` alone for a CPU implementation); ``dtypes`` the
    values of ``dtype`` it accepts (None: all); ``requires`` the modules it imports;
    ``reference`` marks the family's reference, ``tolerance`` is the largest difference from
    it (relative to the values' scale, on the CPU) the contract allows in float64 (0: the same
    bits), ``float32_tolerance`` in float32, ``gpu_tolerance`` the float64 difference allowed on
    a GPU, where the reductions round differently from the CPU's and no bit is promised;
    ``batching`` is :data:`BITWISE` on the CPU for every implementation here, and on a GPU
    ``gpu_batching`` (:data:`BATCH_DEPENDENT`: a batch is one computation whose reductions
    round with the batch's shape). ``batchable`` names the parameters, non-batchable in the
    family, that this implementation batches over besides the family's batchable ones (the
    configurations of one batch may differ in them: two-layer's torch rows train several
    seeds' data sets in one batch); the engine's chunks group by the remaining non-batchable
    values only (:meth:`richlazy_cli.models.base.Model.batchable_names`, docs/engine.md).
    ``run`` names the function that computes on the row (:data:`FunctionName`): one for
    every action it lists, or one per action (``{"solve": ..., "train": ...}``); the model's
    :meth:`~richlazy_cli.models.base.Model.dispatch` calls it, and nothing else chooses code
    by a row's name. None: the family overrides the action's method itself.
    """

    name: str
    summary: str
    actions: tuple[str, ...]
    devices: tuple[str, ...] = ("cpu",)
    methods: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    requires: tuple[str, ...] = ()
    reference: bool = False
    tolerance: float = 0.0
    float32_tolerance: float = 1e-6
    gpu_tolerance: float = 1e-9
    batching: str = BITWISE
    gpu_batching: str = BATCH_DEPENDENT
    batchable: tuple[str, ...] = ()
    run: FunctionName | Mapping[str, FunctionName] | None = field(default=None, compare=False)

    def function_name(self, action: str) -> FunctionName | None:
        """What :attr:`run` names for ``action`` (None: nothing, or an action the row does
        not list)."""
        if action not in self.actions:
            return None
        if isinstance(self.run, Mapping):
            return self.run.get(action)
        return self.run

    def function(self, action: str, owner: type) -> Callable[..., Any] | None:
        """The function that computes ``action`` on this row for the model class ``owner``
        (:data:`FunctionName` resolved: a method of ``owner``, or a module's attribute with
        a relative module taken in ``owner``'s package), or None when the row names none."""
        named = self.function_name(action)
        if named is None or callable(named):
            return named
        return _load(named, owner)

    @property
    def on_devices(self) -> bool:
        """Whether it runs on a chosen device (and so reads the ``device`` parameter)."""
        return self.devices != ("cpu",)

    def tolerance_for(self, dtype: str | None, device: str = "cpu") -> float:
        """The allowed difference from the reference (computed on the CPU) in ``dtype``
        (float64 when None) on ``device`` (a resolved device string)."""
        tolerance = self.tolerance if device == "cpu" else max(self.tolerance, self.gpu_tolerance)
        return max(tolerance, self.float32_tolerance) if dtype == "float32" else tolerance

    def guarantee(self, device: str) -> str:
        """The batching guarantee on ``device`` (a resolved device string)."""
        return self.batching if device == "cpu" else self.gpu_batching


def _load(named: str, owner: type) -> Callable[..., Any]:
    """``"method"`` of ``owner``, or ``"module:name"`` (a dotted name within the module; a
    module starting with a dot relative to ``owner``'s package), imported now."""
    module, sep, name = named.rpartition(":")
    if not sep:
        found: Any = getattr(owner, name)
        return found  # type: ignore[no-any-return]
    package = owner.__module__.rpartition(".")[0] or None
    loaded: Any = functools.reduce(getattr, name.split("."),
                                   importlib.import_module(module, package))
    return loaded  # type: ignore[no-any-return]


def implementation_param(table: tuple[Implementation, ...]) -> Param:
    """The one ``implementation`` parameter of a family with several implementations
    (default: each action's first implementation)."""
    names = tuple(impl.name for impl in table)
    text = "; ".join(f"{impl.name}: {impl.summary}" for impl in table)
    return Param("implementation", "str", None, f"where and how it computes ({text}); "
                 "default: the action's first", choices=names, optional=True)


def device_param(help: str = "device of the torch implementation: cpu, cuda or auto "
                 "(cuda when present)") -> Param:
    """The one ``device`` parameter."""
    return Param("device", "str", "cpu", help, choices=DEVICES)


def dtype_param(default: str = "float32") -> Param:
    """The ``dtype`` parameter of the torch models (training in ``dtype``)."""
    other = "float32" if default == "float64" else "float64"
    return Param("dtype", "str", default, "floating-point type of training" + (
        " (metrics in float64)" if default == "float64" else ""), choices=(default, other))


# -- devices --------------------------------------------------------------------------------
_ABSENT: ContextVar[set[str] | None] = ContextVar("richlazy_absent_devices", default=None)
"""The devices found absent inside :func:`absent_devices_allowed` (None outside it)."""


@contextlib.contextmanager
def absent_devices_allowed() -> Iterator[set[str]]:
    """Inside: :func:`resolve_device` notes ``cuda`` without a GPU in the set it yields and
    returns ``cuda``, instead of refusing with :data:`NO_GPU`. A dry run validates its job
    so, to print the plan and size of a GPU job on a machine without the GPU (a cluster's
    login node, a laptop); the run itself validates outside and refuses (docs/engine.md,
    "Implementations and devices")."""
    absent: set[str] = set()
    token = _ABSENT.set(absent)
    try:
        yield absent
    finally:
        _ABSENT.reset(token)


def resolve_device(name: str) -> str:
    """``cpu``, ``cuda`` or ``auto`` (cuda when present) as a torch device string;
    BadInput (:data:`NO_GPU`) for ``cuda`` without a usable GPU (noted, not refused, inside
    :func:`absent_devices_allowed`)."""
    if name == "cpu":
        return "cpu"
    torch = import_torch(f"device {name}")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        absent = _ABSENT.get()
        if absent is None:
            raise BadInput(NO_GPU)
        absent.add(name)
    return name


def device_absent(device: str | None) -> bool:
    """Whether ``device`` (a ``device`` parameter's value) names a GPU this machine lacks:
    ``cuda`` or ``cuda:K`` where torch finds no CUDA device (or torch is not installed)."""
    if device is None or not str(device).startswith("cuda"):
        return False
    if not available("torch"):
        return True
    import torch

    return not torch.cuda.is_available()


def gpu_workers(device: str | None) -> int | None:
    """The most workers for configurations on ``device``: one per GPU for ``cuda`` and
    ``auto`` where GPUs are present, else None (no limit)."""
    if device in (None, "cpu") or not available("torch"):
        return None
    import torch

    return int(torch.cuda.device_count()) or None


def device_free_bytes(device: str | None) -> int | None:
    """The free memory, in bytes, of the GPU that ``device`` (a ``device`` parameter's value:
    ``cuda``, ``cuda:K`` or ``auto``) names, as the CUDA driver reports it
    (``torch.cuda.mem_get_info``); None on the CPU (``cpu``, None, ``auto`` without a GPU, or
    no torch installed), where the engine's chunks are not sized by memory."""
    if device in (None, "cpu") or not available("torch"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    index = torch.device(device).index if str(device).startswith("cuda:") else None
    free, _total = torch.cuda.mem_get_info(index)
    return int(free)


def torch_dtype(name: str) -> Any:
    """``float32`` or ``float64`` as a torch dtype."""
    import torch

    return {"float32": torch.float32, "float64": torch.float64}[name]


# -- the deterministic session --------------------------------------------------------------
_session_lock = threading.Lock()
_session_depth = 0
_saved: tuple[int, bool] = (1, False)


@contextlib.contextmanager
def session() -> Iterator[Any]:
    """One intra-op thread and deterministic algorithms for the duration of a model call.

    One thread is what makes a configuration's numbers independent of the process that
    computes it: a reduction split over threads is summed in another order. The settings are
    process-wide, and the threads backend runs several model calls in one process at once:
    they are set when the first concurrent session starts and the process's previous ones
    restored when the last ends. Yields the torch module."""
    global _session_depth, _saved
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch = import_torch()
    with _session_lock:
        if _session_depth == 0:
            _saved = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
            torch.set_num_threads(1)
            torch.use_deterministic_algorithms(True)
        _session_depth += 1
    try:
        yield torch
    finally:
        with _session_lock:
            _session_depth -= 1
            if _session_depth == 0:
                torch.use_deterministic_algorithms(_saved[1])
                torch.set_num_threads(_saved[0])


def provenance(device: str) -> dict[str, str]:
    """The attributes every torch result carries: ``torch_version``, ``device`` (the
    resolved device) and, on a GPU, ``cuda_device`` (its name)."""
    import torch

    attrs = {"torch_version": str(torch.__version__), "device": device}
    if device.startswith("cuda"):
        attrs["cuda_device"] = str(torch.cuda.get_device_name())
    return attrs


def device_of(values: Mapping[str, Any]) -> str:
    """The ``device`` a configuration asks for (``cpu`` where it declares none)."""
    return str(values.get("device") or "cpu")


# -- the placement of one model call --------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    """Where a batch computes, as :func:`placed` resolves it for a row's function.

    ``implementation`` is the row; ``device`` the resolved torch device string (``cpu`` for
    a row that runs on the CPU only); ``torch`` the torch module, inside the call's
    :func:`session`, for a row that requires torch (None otherwise); ``dtype`` the torch
    dtype of the configuration's ``dtype`` parameter (None without torch or without one).
    """

    implementation: Implementation
    device: str = "cpu"
    torch: Any = None
    dtype: Any = None

    @property
    def provenance(self) -> dict[str, str]:
        """The attributes its result carries: :func:`provenance` for a torch row, else none."""
        return provenance(self.device) if self.torch is not None else {}


@contextlib.contextmanager
def placed(impl: Implementation, values: Mapping[str, Any]) -> Iterator[Placement]:
    """The :class:`Placement` of a batch with ``values`` on row ``impl``, for the duration
    of one model call: the device resolved (:func:`resolve_device`) where the row runs on
    devices; a row that requires torch computes inside one :func:`session`."""
    device = resolve_device(device_of(values)) if impl.on_devices else "cpu"
    if "torch" not in impl.requires:
        yield Placement(impl, device)
        return
    with session() as torch:
        dtype = values.get("dtype")
        yield Placement(impl, device, torch,
                        torch_dtype(dtype) if dtype in ("float32", "float64") else None)


# -- the torch models' shared declarations --------------------------------------------------
TORCH_TRAINING: tuple[Implementation, ...] = (
    Implementation("torch", "PyTorch, on a CPU or GPU (the reference)", ("train",),
                   devices=("cpu", "cuda"), requires=("torch",), reference=True,
                   run="_train"),
)
"""The one-row table of a family that trains in PyTorch only (docs/practice.md): its
function is the family's method ``_train(batch, progress, placement)``."""


def run_params(seed_help: str, dtype: str = "float32") -> tuple[Param, Param, Param]:
    """The ``seed``, ``dtype`` and ``device`` parameters every torch model declares."""
    return (Param("seed", "int", 0, seed_help, low=0, batchable=True), dtype_param(dtype),
            device_param("cpu, cuda or auto (cuda when present)"))
