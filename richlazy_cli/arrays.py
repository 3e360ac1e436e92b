"""The array namespace of a computation: NumPy or PyTorch, chosen from its inputs.

Like the Python array API's ``array_namespace`` (array-api-compat): a function written once
against ``xp = namespace(*arrays)`` runs on NumPy arrays and Python floats (``xp`` is
:mod:`numpy`) and on torch tensors, on any device (``xp`` is :mod:`torch`). Only the
functions both spell alike are used by such code: ``sqrt``, ``where``, ``isfinite``,
``clip``, ``sum``, ``abs``, ``maximum``, ``exp``, ``tanh``, ``einsum``. Importing this module
never imports torch.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a torch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def namespace(*arrays: Any) -> Any:
    """:mod:`torch` when any of ``arrays`` is a torch tensor, else :mod:`numpy`."""
    for x in arrays:
        if is_torch(x):
            return sys.modules["torch"]
    return np
