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


class ArrayNamespace:
    """An array namespace: the module's own functions (``xp.sqrt``, ``xp.full_like``, …, by
    attribute) plus the few reductions NumPy and torch spell differently, each on the last
    axis, in the kernels each library used before code was shared between them, so that
    sharing changed no bits (docs/engine.md, "One array namespace")."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.module, name)
        setattr(self, name, value)  # looked up once per namespace
        return value

    def sum_last(self, x: Any) -> Any:
        """``Σ_i x_i`` over the last axis."""
        raise NotImplementedError

    def squared_norm(self, x: Any) -> Any:
        """``Σ_i x_i²`` over the last axis (rows' squared norms)."""
        raise NotImplementedError

    def vecdot(self, x: Any, y: Any) -> Any:
        """``Σ_i x_i y_i`` over the last axis."""
        raise NotImplementedError

    def clamp_min(self, x: Any, low: float) -> Any:
        """``max(x, low)`` elementwise (NaN stays NaN)."""
        raise NotImplementedError


class _NumpyNamespace(ArrayNamespace):
    """NumPy: squared norms by ``einsum``, dot products by BLAS (``matmul``)."""

    def sum_last(self, x: Any) -> Any:
        return np.sum(x, axis=-1)

    def squared_norm(self, x: Any) -> Any:
        return np.einsum("...i,...i->...", x, x)

    def vecdot(self, x: Any, y: Any) -> Any:
        return np.matmul(x[..., None, :], y[..., :, None])[..., 0, 0]

    def clamp_min(self, x: Any, low: float) -> Any:
        return np.maximum(x, low)


class _TorchNamespace(ArrayNamespace):
    """torch: reductions as products summed over the last dimension."""

    def sum_last(self, x: Any) -> Any:
        return x.sum(dim=-1)

    def squared_norm(self, x: Any) -> Any:
        return (x * x).sum(dim=-1)

    def vecdot(self, x: Any, y: Any) -> Any:
        return (x * y).sum(dim=-1)

    def clamp_min(self, x: Any, low: float) -> Any:
        return self.module.clamp(x, min=low)


NUMPY = _NumpyNamespace(np)
"""The NumPy namespace (also for Python floats)."""
_TORCH: list[ArrayNamespace] = []  # torch's, made on first use


def array_namespace(*arrays: Any) -> ArrayNamespace:
    """The :class:`ArrayNamespace` of ``arrays``: torch's when any is a torch tensor, else
    NumPy's (scikit-learn's ``get_namespace`` and array-api-compat's ``array_namespace``
    choose alike)."""
    xp = namespace(*arrays)
    if xp is np:
        return NUMPY
    if not _TORCH:
        _TORCH.append(_TorchNamespace(xp))
    return _TORCH[0]
