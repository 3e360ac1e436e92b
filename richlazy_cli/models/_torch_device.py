"""The torch backends' device: importing PyTorch, choosing the device, one worker per GPU.

Shared by the models that offer ``backend = torch`` (docs/two-layer.md and docs/hermite.md,
"The torch backend"). PyTorch is the optional extra ``practice``; without it a torch backend
is a bad input naming the extra, and everything else works.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import BadInput
from ..practice.torchenv import INSTALL_HINT
from .params import Param


def backend_params(numpy_help: str, torch_help: str) -> tuple[Param, Param]:
    """The ``backend`` (numpy | torch) and ``device`` (cpu | cuda | auto) parameters."""
    return (
        Param("backend", "str", "numpy", f"numpy ({numpy_help}) or torch ({torch_help})",
              choices=("numpy", "torch")),
        Param("device", "str", "cpu", "device of the torch backend: cpu, cuda or auto (cuda "
              "when available)", choices=("cpu", "cuda", "auto")),
    )


def check_backend(values: Mapping[str, Any]) -> None:
    """BadInput unless the device can be had: torch installed, a GPU for ``cuda``, and no
    ``cuda`` with the NumPy backend."""
    if values["backend"] == "torch":
        resolve_device(values["device"])
    elif values["device"] == "cuda":
        raise BadInput("parameter device: cuda needs backend = torch")


def import_torch() -> Any:
    """Import torch, or raise :class:`~richlazy_cli.errors.BadInput` naming the extra."""
    try:
        import torch
    except ImportError:
        raise BadInput(f"backend torch needs PyTorch, which is not installed: {INSTALL_HINT}"
                       ) from None
    return torch


def resolve_device(name: str) -> str:
    """``cpu``, ``cuda`` or ``auto`` (cuda when available) as a torch device string; BadInput
    for ``cuda`` on a machine without a usable GPU."""
    torch = import_torch()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise BadInput("parameter device: cuda was asked for, but no CUDA GPU is available")
    return name


def gpu_workers(values: Any) -> int | None:
    """One worker per GPU for configurations on the torch backend's GPU (``max_workers``)."""
    if values.get("backend") != "torch" or values.get("device") == "cpu":
        return None
    try:
        import torch
    except ImportError:
        return None
    count = torch.cuda.device_count()
    return count or None


def device_description(device: str) -> str:
    """The device in words for the provenance (GPU model for cuda)."""
    torch = import_torch()
    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return "cpu"
