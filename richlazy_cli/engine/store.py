"""Result files: Dataset <-> HDF5 with atomic writes, provenance, reading and verification.

Files are written by ``xarray.Dataset.to_netcdf(engine="h5netcdf")`` and read by
``xarray.open_dataset(path, engine="h5netcdf")``; plain h5py and netCDF tools read them too.
A write goes to a temporary file in the destination folder, is fsynced, then moved into place
with ``os.replace``, so a reader never sees a half-written file and an interrupted write leaves
any earlier file untouched. An existing file is replaced only with ``force=True``.

Global attributes (docs/engine.md, "Result files"): ``richlazy_version``, ``model``,
``action``, ``params`` (JSON), ``grid`` (JSON), ``command`` (JSON argv), ``created`` (UTC
ISO 8601), ``host``, ``versions`` (JSON), ``complete`` (1 or 0), ``errors`` (JSON list), and,
when the package runs from a git checkout, ``git_commit`` and ``git_dirty`` (1 or 0).
Optional: ``shard`` ("K/N").
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .. import __version__
from ..models.params import BadInput, jsonable

REQUIRED_ATTRS = (
    "richlazy_version",
    "model",
    "action",
    "params",
    "grid",
    "command",
    "created",
    "host",
    "versions",
    "complete",
)
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


# -- provenance -----------------------------------------------------------------------------
@functools.cache
def package_versions() -> dict[str, str]:
    """Versions of the packages that shape results."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0], "richlazy": __version__}
    for name in ("numpy", "scipy", "xarray", "h5netcdf", "h5py", "joblib", "distributed"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


@functools.cache
def git_state() -> tuple[str, bool] | None:
    """(commit, dirty) of the checkout the package runs from, or None."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return commit, bool(status.strip())


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def provenance(
    model: str,
    action: str,
    params: dict[str, Any],
    grid: dict[str, str],
    command: Sequence[str],
) -> dict[str, Any]:
    """The global attributes every result file carries (``complete`` and ``errors`` aside)."""
    attrs: dict[str, Any] = {
        "richlazy_version": __version__,
        "model": model,
        "action": action,
        "params": json.dumps(jsonable(params), sort_keys=True),
        "grid": json.dumps(grid),
        "command": json.dumps(list(command)),
        "created": utc_now(),
        "host": socket.gethostname(),
        "versions": json.dumps(package_versions(), sort_keys=True),
    }
    state = git_state()
    if state is not None:
        attrs["git_commit"], dirty = state
        attrs["git_dirty"] = int(dirty)
    return attrs


# -- writing --------------------------------------------------------------------------------
def check_writable(path: Path, force: bool) -> None:
    """Raise BadInput unless ``path`` can be (re)written; create nothing."""
    if path.exists() and not force:
        raise BadInput(f"{path} exists; use --force to replace it")
    if path.is_dir():
        raise BadInput(f"{path} is a folder, not a file")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise BadInput(f"output folder {folder} does not exist")
    try:  # a real probe: permission bits do not stop root, read-only mounts do
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        raise BadInput(f"output folder {folder} is not writable") from None


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, fsync, and move the result onto ``path`` atomically."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dfd = os.open(path.parent or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _encodable(ds: xr.Dataset) -> xr.Dataset:
    """Object (string) arrays as fixed-width unicode, which h5netcdf writes portably."""
    out = ds.copy()
    for name, item in list(out.variables.items()):
        if item.dtype == object:
            out[name] = item.astype(str)
    return out


def write_result(ds: xr.Dataset, path: Path, force: bool = False) -> None:
    """Write ``ds`` to ``path`` atomically; refuse to replace an existing file unless forced."""
    path = Path(path)
    check_writable(path, force)
    ds = _encodable(ds)
    atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf", invalid_netcdf=False))


# -- reading --------------------------------------------------------------------------------
def is_hdf5(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == _HDF5_MAGIC
    except OSError:
        return False


def open_result(path: Path, load: bool = True) -> xr.Dataset:
    """Open a richlazy result file (loaded into memory and closed by default).

    Raises BadInput naming the file when it is missing, not HDF5, unreadable, or not written by
    richlazy.
    """
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: no such file")
    if path.is_dir():
        raise BadInput(f"{path} is a folder, not a result file")
    if not is_hdf5(path):
        raise BadInput(f"{path} is not an HDF5 file")
    try:
        with warnings.catch_warnings():  # h5netcdf warns about foreign files; we say it once
            warnings.simplefilter("ignore")
            ds = xr.open_dataset(path, engine="h5netcdf")
        if load:
            ds.load()
            ds.close()
    except Exception as exc:
        raise BadInput(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if "richlazy_version" not in ds.attrs or "model" not in ds.attrs:
        raise BadInput(f"{path} is an HDF5 file but not a richlazy result")
    return ds


def json_attr(ds: xr.Dataset, name: str, default: Any = None) -> Any:
    text = ds.attrs.get(name)
    if text is None:
        return default
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return default


def grid_dims(ds: xr.Dataset) -> list[str]:
    """The grid dimensions of a result, in grid order."""
    return list(json_attr(ds, "grid", {}) or {})


def point_counts(ds: xr.Dataset) -> dict[str, int]:
    """Points done (status 0), failed (1 or 2) and missing (-1)."""
    if "status" not in ds:
        return {"total": 0, "done": 0, "failed": 0, "missing": 0}
    status = np.asarray(ds["status"].values)
    return {
        "total": int(status.size),
        "done": int(np.sum(status == 0)),
        "failed": int(np.sum((status == 1) | (status == 2))),
        "missing": int(np.sum(status < 0)),
    }


def verify(path: Path) -> list[str]:
    """Problems with a result file (schema and completeness); empty when it is sound."""
    ds = open_result(path)
    problems = [f"missing attribute {a}" for a in REQUIRED_ATTRS if a not in ds.attrs]
    for name in ("params", "grid", "command", "versions"):
        if name in ds.attrs and json_attr(ds, name) is None:
            problems.append(f"attribute {name} is not valid JSON")
    dims = grid_dims(ds)
    for dim in dims:
        if dim not in ds.dims:
            problems.append(f"grid dimension {dim} is missing")
    for name, item in ds.variables.items():
        if "long_name" not in item.attrs:
            problems.append(f"{name} has no long_name")
    if "status" not in ds:
        problems.append("no status variable")
    else:
        if tuple(ds["status"].dims) != tuple(dims):
            problems.append("status is not over the grid dimensions")
        counts = point_counts(ds)
        if counts["missing"]:
            problems.append(f"incomplete: {counts['missing']} of {counts['total']} points missing")
        if not int(ds.attrs.get("complete", 0)) and not counts["missing"]:
            problems.append("the file is marked incomplete")
    return problems


def describe(path: Path) -> dict[str, Any]:
    """A JSON-friendly description of a result file (``store show``)."""
    ds = open_result(path)
    attrs = {
        k: (json_attr(ds, k) if k in ("params", "grid", "command", "versions", "errors") else v)
        for k, v in ds.attrs.items()
    }
    variables = {
        name: {
            "dims": list(item.dims),
            "shape": list(item.shape),
            "dtype": str(item.dtype),
            "long_name": item.attrs.get("long_name", ""),
            "units": item.attrs.get("units", ""),
        }
        for name, item in ds.data_vars.items()
    }
    return {
        "file": str(path),
        "dims": {k: int(v) for k, v in ds.sizes.items()},
        "grid": grid_dims(ds),
        "variables": variables,
        "points": point_counts(ds),
        "attrs": jsonable(attrs),
    }
