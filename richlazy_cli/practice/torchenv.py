"""Importing PyTorch lazily, and running one model call reproducibly (docs/practice.md §1).

Every practice model calls :func:`require_torch` in its ``check`` (so that a missing install is
bad input: one line, exit 2, nothing written) and computes inside :func:`session`, which holds
torch at one intra-op thread with deterministic algorithms. One thread is what makes a
configuration's numbers independent of the process that computes it: a reduction split over
threads is summed in another order. Random numbers never come from torch's global generator:
they are drawn from the engine's ``rng(seed, stream)`` (NumPy) and converted, so they are the
same on every device and every torch version.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import BadInput

EXTRA = "practice"
INSTALL_HINT = f"pip install 'richlazy[{EXTRA}]'"


_deferred = False


def run_params(seed_help: str, dtype: str = "float32") -> tuple[Any, Any, Any]:
    """The ``seed``, ``dtype`` and ``device`` parameters every practice model declares."""
    from ..params import Param

    return (
        Param("seed", "int", 0, seed_help, low=0, batchable=True),
        Param("dtype", "str", dtype, "floating-point type of training" + (
            " (metrics in float64)" if dtype == "float64" else ""),
              choices=(dtype, "float32" if dtype == "float64" else "float64")),
        Param("device", "str", "cpu", "cpu, cuda or auto (cuda when present)",
              choices=("cpu", "cuda", "auto")),
    )


@contextlib.contextmanager
def registering() -> Iterator[None]:
    """Within this context :func:`require_torch` and :func:`check_device` pass without torch.

    A model's registration validates its examples with its ``check``; a practice model must
    register (and be listed) where torch is not installed, and be refused only when it runs.
    """
    global _deferred
    previous, _deferred = _deferred, True
    try:
        yield
    finally:
        _deferred = previous


def require_torch(model: str) -> Any:
    """The ``torch`` module, or BadInput naming the extra that provides it (None while
    :func:`registering`)."""
    if _deferred:
        return None
    try:
        import torch
    except ImportError:
        raise BadInput(
            f"model {model} needs PyTorch, which is not installed: {INSTALL_HINT} "
            f"(the '{EXTRA}' extra)"
        ) from None
    return torch


def check_device(model: str, device: str) -> None:
    """BadInput when ``device = cuda`` is asked for and no CUDA device is present."""
    torch = require_torch(model)
    if torch is not None and device == "cuda" and not torch.cuda.is_available():
        raise BadInput("parameter device: 'cuda' was asked for but no CUDA device is present")


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when a CUDA device is present, else ``cpu``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "float64": torch.float64}[name]


_session_lock = threading.Lock()
_session_depth = 0
_saved: tuple[int, bool] = (1, False)


@contextlib.contextmanager
def session() -> Iterator[Any]:
    """One intra-op thread and deterministic algorithms for the duration of a model call.

    The settings are process-wide, and the threads backend runs several model calls in one
    process at once: they are set when the first concurrent session starts and the
    process's previous ones restored when the last ends. Yields the torch module."""
    global _session_depth, _saved
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    import torch

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
    """Attributes a practice model adds to its result: torch version and device."""
    import torch

    attrs = {"torch_version": str(torch.__version__), "device": device}
    if device == "cuda":
        attrs["cuda_device"] = torch.cuda.get_device_name()
    return attrs
