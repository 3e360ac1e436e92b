"""Deprecated: the device handling of the torch implementations is
:mod:`richlazy_cli.numerics.compute`.

Kept as a thin alias for code written against the older spelling, where ``backend = torch``
chose the implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..numerics.compute import gpu_workers as _gpu_workers
from ..numerics.compute import import_torch, resolve_device

__all__ = ["gpu_workers", "import_torch", "resolve_device"]


def gpu_workers(values: Mapping[str, Any]) -> int | None:
    """One worker per GPU for a configuration with ``backend = torch`` on a GPU device."""
    if values.get("backend") != "torch":
        return None
    return _gpu_workers(values.get("device"))
