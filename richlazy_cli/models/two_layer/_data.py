"""Data sources of ``two-layer`` besides the ReLU teacher: the 2-D ``xor`` task and a user's
``.npz`` (docs/two-layer.md, eq. (13)). Validation of the data parameters, and reading the
file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import BadInput
from ...userfiles import read_npz


def load_npz(path: str) -> dict[str, np.ndarray]:
    """``X``, ``y``, ``X_test``, ``y_test`` (float64) from ``path``; the test set defaults to the
    training set. BadInput when the file cannot be read, a key is missing or a value is not
    finite."""
    # a regular file, headers checked before loading, only the four arrays read
    arrays = read_npz(path, "parameter data_file", ("X", "y"), ("X_test", "y_test"))
    arrays.setdefault("X_test", arrays["X"])
    arrays.setdefault("y_test", arrays["y"])
    for key in ("X", "y", "X_test", "y_test"):
        if not np.all(np.isfinite(arrays[key])):
            raise BadInput(f"parameter data_file: {key} in {path!r} has non-finite values")
    return {k: arrays[k] for k in ("X", "y", "X_test", "y_test")}


def check_data(values: Mapping[str, Any]) -> None:
    """Cross-parameter rules of ``data``, ``data_file`` and ``save_surface`` (a verdict: the
    file itself is read and checked by :func:`derive_data`)."""
    data, d = values["data"], int(values["d"])
    if data == "xor" and d != 2:
        raise BadInput(f"parameter d: data = xor needs d = 2, got d = {d}")
    if values["save_surface"] and d != 2:
        raise BadInput(f"parameter save_surface: the surface on the circle needs d = 2, got "
                       f"d = {d}")
    path = values.get("data_file")
    if data != "npz":
        if path is not None:
            raise BadInput(f"parameter data_file: only read when data = npz (data = {data})")
        return
    if path is None:
        raise BadInput("parameter data_file: data = npz needs a data_file")


def derive_data(values: dict[str, Any]) -> None:
    """With ``data = npz`` and a ``data_file``: read the file, check its arrays against ``d``,
    and set ``n`` and ``n_test`` to its sizes."""
    path = values.get("data_file")
    if values["data"] != "npz" or path is None:
        return
    d = int(values["d"])
    arrays = load_npz(path)
    for x_key, y_key in (("X", "y"), ("X_test", "y_test")):
        X, y = arrays[x_key], arrays[y_key]
        if X.ndim != 2 or X.shape[1] != d:
            raise BadInput(f"parameter data_file: {x_key} must be a matrix with d = {d} columns,"
                           f" got shape {X.shape}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise BadInput(f"parameter data_file: {y_key} must hold one value per row of "
                           f"{x_key} ({X.shape[0]}), got shape {y.shape}")
        if X.shape[0] == 0:
            raise BadInput(f"parameter data_file: {x_key} has no rows")
    values["n"] = int(arrays["X"].shape[0])
    values["n_test"] = int(arrays["X_test"].shape[0])
