"""Result files: Dataset <-> HDF5 with atomic writes, provenance, reading and verification.

Files are written by ``xarray.Dataset.to_netcdf(engine="h5netcdf")`` and read by
``xarray.open_dataset(path, engine="h5netcdf")``; plain h5py and netCDF tools read them too.
A write goes to a temporary file in the destination folder, is fsynced, then moved into place
with ``os.replace``, so a reader never sees a half-written file and an interrupted write leaves
any earlier file untouched. An existing file is replaced only with ``force=True``.

Global attributes (docs/engine.md, "Result files"): ``richlazy_version``, ``model``,
``action``, ``params`` (JSON), ``grid`` (JSON), ``command`` (JSON argv), ``created`` (UTC
ISO 8601), ``host``, ``versions`` (JSON), ``complete`` (1 or 0), ``errors`` (JSON list),
and, when the package runs from a git checkout, ``git_commit`` and ``git_dirty`` (1 or 0).
Optional: ``shard`` ("K/N").
Sweeps add ``fingerprint``, ``inputs`` and ``history`` (:mod:`.fingerprint`, :mod:`.output`).
Every write goes through :func:`.cf.to_cf` and every read through :func:`.cf.from_cf`: on disk
a result follows CF-1.11 (``Conventions = "CF-1.11 richlazy-2"``), inside richlazy it keeps
its models' names; files of the earlier layout (``richlazy-1``) read the same.

A result file gets the permissions the umask allows (``0666 & ~umask``), like any file a
program creates. Large floating-point variables are stored compressed (:data:`COMPRESSION`).
The HDF5 library cannot recover from a write that fails half-way (no space, a file-size limit):
its handles are left in a state that crashes the interpreter when they are collected. The
final file is therefore written by a forked child process that exits at once whatever happens;
the parent sees a failure as an exception (:class:`WriteFailed` or :class:`OSError`), and an
estimate of the bytes needed is checked against the free space first (:func:`check_space`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import functools
import json
import math
import os
import re
import resource
import signal
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
from ..errors import UNREADABLE, BadInput, Status, point_counts
from ..params import jsonable
from ..userfiles import open_regular, regular_file
from . import checksums, interrupts
from .cf import coordinate_encoding, from_cf, to_cf
from .chunk import _fill_value

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
JSON_ATTRS = ("params", "grid", "command", "versions", "errors", "inputs", "history")
"""Global attributes that hold JSON text."""
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
COMPRESSION = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
"""h5netcdf encoding of compressed variables: zlib level 1 after byte shuffling (on
single-neuron trajectories, 55% of the raw size; level 4 saves 2% more and writes 20% slower,
without shuffling the file is 20% larger: bench/sweep_engine.py)."""
COMPRESS_MIN_BYTES = 1 << 16
"""Floating-point variables of at least this many bytes are compressed (smaller ones gain
nothing measurable and cost a chunk index each)."""
SPACE_SLACK_BYTES = 1 << 20
"""HDF5's own metadata on top of the variables' bytes, in :func:`check_space`."""


class WriteFailed(OSError):
    """Writing a result file failed; the message names the file and the cause."""

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_  # type: ignore[misc]
        self.message = message

    def __str__(self) -> str:
        return self.message


_OS_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (a file-size limit, e.g. ulimit -f, or the file system's)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOTDIR: "a component of the path is not a folder",
    errno.EISDIR: "is a folder",
    errno.EIO: "input/output error",
    errno.EEXIST: "exists and is not a folder",
}


def os_error_message(exc: BaseException) -> str | None:
    """One line for an operating-system failure (no space, read-only, ...), or None.

    HDF5 reports such failures as OSError/RuntimeError with the errno inside its message
    ("errno = 28"), which is recognised too.
    """
    code = getattr(exc, "errno", None)
    if code not in _OS_ERRORS:
        found = re.search(r"errno = (\d+)", str(exc))
        code = int(found.group(1)) if found else None
    if code not in _OS_ERRORS:
        return None
    where = getattr(exc, "filename", None)
    what = _OS_ERRORS[code]
    return f"{where}: {what}" if where else f"cannot write: {what}"


# -- provenance -----------------------------------------------------------------------------
@functools.cache
def package_versions() -> dict[str, str]:
    """Versions of the packages that shape results."""
    from importlib import metadata

    versions = {"python": sys.version.split()[0], "richlazy": __version__}
    for name in ("numpy", "scipy", "numba", "xarray", "h5netcdf", "h5py", "joblib",
                 "distributed", "torch", "scikit-learn", "mnist1d"):
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
    check_name_length(path)
    try:  # a real probe: permission bits do not stop root, read-only mounts do
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        why = _OS_ERRORS.get(exc.errno or 0, exc.strerror or "")
        raise BadInput(f"output folder {folder} is not writable ({why})") from None


def check_name_length(path: Path) -> None:
    """BadInput when ``path``'s name plus the longest suffix richlazy adds is too long."""
    folder = path.parent if str(path.parent) else Path(".")
    longest = len(os.fsencode(path.name)) + len(".parts")  # bytes, whatever the encoding
    if folder.is_dir() and longest > _name_max(folder):
        raise BadInput(
            f"{path.name[:40]}...: output name too long ({len(path.name)} characters; the "
            f"file system allows {_name_max(folder)} including the '.parts' suffix)"
        )


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


@functools.cache
def file_mode() -> int:
    """``0o666`` less the process's umask: the mode ``open()`` would give a new file."""
    try:  # Linux reports the umask without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def check_space(path: Path, nbytes: int) -> None:
    """BadInput when ``nbytes`` (plus HDF5 slack) cannot be written beside ``path``.

    Checks the free space of the file system (for this user) and the process's file-size
    limit (``RLIMIT_FSIZE``). Compression only makes the file smaller, so this is a bound.
    """
    problem = space_problem(path, nbytes, single_file=True)
    if problem:
        raise BadInput(problem)


def space_problem(path: Path, nbytes: float, single_file: bool) -> str | None:
    """Why ``nbytes`` cannot be written beside ``path`` (free space, and for one file the
    file-size limit), or None."""
    need = int(nbytes) + SPACE_SLACK_BYTES
    folder = path.parent if str(path.parent) else Path(".")
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if single_file and soft != resource.RLIM_INFINITY and need > soft:
        return (
            f"{path}: the result needs up to {_mb(need)} but the file-size limit "
            f"(ulimit -f) is {_mb(soft)}"
        )
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    free = stat.f_bavail * stat.f_frsize
    if need > free:
        return (
            f"{path}: no space left: the result needs up to {_mb(need)}, "
            f"{_mb(free)} free on the device"
        )
    return None


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.3g} MB"


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(tmp_path)``, fsync, and move the result onto ``path`` atomically."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())  # mkstemp makes 0600; a result file follows the umask
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
    out = ds.drop_encoding()  # a result read back keeps its file's encoding otherwise
    # the checksums of a file read back describe that file: this one gets its own
    out.attrs = {k: v for k, v in out.attrs.items() if k != checksums.ATTRIBUTE}
    for name, item in list(out.variables.items()):
        if item.dtype == object:
            out[name] = item.astype(str)
    return out


def encoding(ds: xr.Dataset, compress: bool = True) -> dict[str, dict[str, Any]]:
    """Per-variable h5netcdf encoding: no ``_FillValue`` on a coordinate variable
    (:func:`.cf.coordinate_encoding`), and :data:`COMPRESSION` for large floating-point data."""
    enc = coordinate_encoding(ds)
    if not compress:
        return enc
    for name, item in ds.variables.items():
        if (np.issubdtype(item.dtype, np.floating) and item.nbytes >= COMPRESS_MIN_BYTES
                and item.ndim > 0):
            enc.setdefault(str(name), {}).update(COMPRESSION)
    return enc


def write_result(ds: xr.Dataset, path: Path, force: bool = False, compress: bool = True) -> None:
    """Write ``ds`` to ``path`` atomically; refuse to replace an existing file unless forced.

    Raises BadInput when the bytes needed exceed the free space or the file-size limit, and
    :class:`WriteFailed` (with the cause's errno) when the write itself fails.
    """
    path = Path(path)
    check_writable(path, force)
    ds = _encodable(to_cf(ds) if "model" in ds.attrs else ds)
    check_space(path, int(sum(item.nbytes for item in ds.variables.values())))
    enc = encoding(ds, compress)

    def write(tmp: Path) -> None:
        ds.to_netcdf(tmp, engine="h5netcdf", invalid_netcdf=False, encoding=enc)
        checksums.add(tmp)  # read back: each variable's SHA-256 as it lies in the file

    try:
        atomic_write(path, lambda tmp: _isolated(write, tmp))
    except WriteFailed as exc:
        cause = os_error_message(exc)
        why = cause.split(": ", 1)[-1] if cause else exc.message
        raise WriteFailed(f"{path}: cannot write the result ({why})", exc.errno) from None


def _isolated(write: Any, tmp: Path) -> None:
    """Run ``write(tmp)`` in a forked child that leaves by ``os._exit`` (see the module doc)."""
    if not hasattr(os, "fork"):  # pragma: no cover - not POSIX
        write(tmp)
        return
    read_end, write_end = os.pipe()
    try:
        pid = interrupts.fork_writer()  # signals blocked around fork() (engine/interrupts.py)
    except OSError:  # no memory to commit for a copy (strict overcommit): write here
        os.close(read_end)
        os.close(write_end)
        write(tmp)
        return
    if pid == 0:  # the child: write, report, and leave without collecting anything
        code = 0
        try:
            os.close(read_end)
            interrupts.pause_point("writer")
            write(tmp)
        except BaseException as exc:  # everything is reported to the parent
            code = 1
            report = {"errno": getattr(exc, "errno", None), "message": f"{exc}"[:2000],
                      "type": type(exc).__name__}
            with contextlib.suppress(BaseException):
                os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        try:
            interrupts.unblock()  # a signal held back during fork() is raised here
            report_bytes = fh.read()
            _, status = os.waitpid(pid, 0)
        except BaseException:  # interrupted: the writer must not outlive this run
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
            raise
    if os.waitstatus_to_exitcode(status) == 0:
        return
    try:
        report = json.loads(report_bytes or b"{}")
    except ValueError:
        report = {}
    message = report.get("message") or f"the writing process ended with status {status}"
    errno_ = report.get("errno")
    raise WriteFailed(f"{report.get('type', 'error')}: {message}",
                      errno_ if isinstance(errno_, int) else None)


def storage_error_line(exc: BaseException) -> str | None:
    """The one line the CLI prints (exit 2) for a failed write, or None for other errors."""
    if isinstance(exc, WriteFailed):
        return str(exc)
    return os_error_message(exc)


# -- reading --------------------------------------------------------------------------------
def is_hdf5(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as HDF5 does (never blocks)."""
    try:
        with open_regular(path, "result file") as fh:
            return fh.read(8) == _HDF5_MAGIC
    except (OSError, BadInput):
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
    regular_file(path, "result file")  # a FIFO or a device is refused before any open()
    if not is_hdf5(path):
        raise BadInput(f"{path} is not an HDF5 file")
    try:
        with warnings.catch_warnings():  # h5netcdf warns about foreign files; we say it once
            warnings.simplefilter("ignore")
            ds = xr.open_dataset(path, engine="h5netcdf")
        if load:
            ds.load()
            ds.close()
    except UNREADABLE as exc:
        raise BadInput(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    if "richlazy_version" not in ds.attrs or "model" not in ds.attrs:
        raise BadInput(f"{path} is an HDF5 file but not a richlazy result")
    ds.attrs.pop(checksums.ATTRIBUTE, None)  # they describe the file, not the data read
    return from_cf(ds)


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


POINT = "point"
"""The dimension of a shard file's points (and the coordinate of their flat grid indices)."""


def is_shard_layout(ds: xr.Dataset) -> bool:
    """Whether ``ds`` holds its points over ``point`` (a shard file) rather than the grid.

    A shard file (``--shard K/N``) keeps the grid dimensions and their coordinates, but its
    variables run over ``point``, whose coordinate holds each point's flat (C-order) index in
    the grid: only the shard's own points are stored (docs/engine.md, "Shard files").
    """
    return POINT in ds.coords and "status" in ds and ds["status"].dims == (POINT,)


def grid_shape(ds: xr.Dataset) -> tuple[int, ...]:
    """The grid's shape, from the sizes of the grid dimensions (``()`` for a single run)."""
    return tuple(int(ds.sizes[d]) for d in grid_dims(ds) if d in ds.sizes)


def grid_status(ds: xr.Dataset) -> np.ndarray:
    """``status`` of every grid point, flat in C order, whatever the layout.

    In a shard file the points of other shards are :attr:`Status.MISSING`. BadInput when the
    point indices of a shard file do not fit its grid.
    """
    status = np.asarray(ds["status"].values, dtype=np.int8)
    if not is_shard_layout(ds):
        return status.reshape(-1)
    size = math.prod(grid_shape(ds))
    points = shard_points(ds, size)
    full = np.full(size, Status.MISSING, dtype=np.int8)
    full[points] = status
    return full


def shard_points(ds: xr.Dataset, size: int) -> np.ndarray:
    """The flat grid indices a shard file holds: strictly increasing, within the grid.

    BadInput otherwise (a damaged or edited file), and when they are not the points of the
    file's ``shard`` attribute.
    """
    points = np.asarray(ds[POINT].values)
    if points.dtype.kind not in "iu" or points.ndim != 1:
        raise BadInput("the point coordinate of a shard file must hold integer grid indices")
    if points.size and (points[0] < 0 or points[-1] >= size or np.any(np.diff(points) <= 0)):
        raise BadInput(
            "the point coordinate does not hold increasing indices of distinct points "
            f"of the {size:,}-point grid"
        )
    shard = str(ds.attrs.get("shard", ""))
    match = re.fullmatch(r"(\d+)/(\d+)", shard)
    if match:
        k, n = int(match.group(1)), int(match.group(2))
        if not np.array_equal(points, np.arange(k - 1, size, n)):
            raise BadInput(f"its points are not those of shard {shard} of the grid")
    return points.astype(np.int64)


def as_grid(ds: xr.Dataset) -> xr.Dataset:
    """A result over the grid dimensions, whatever its layout (a shard file is expanded).

    The points a shard file does not hold are filled as a sweep fills points not computed:
    NaN (integers -1, status :attr:`Status.MISSING`). Other results are returned unchanged.
    """
    if not is_shard_layout(ds):
        return ds
    dims = [d for d in grid_dims(ds) if d in ds.sizes]
    shape = grid_shape(ds)
    size = math.prod(shape)
    points = shard_points(ds, size)
    data_vars = {}
    for name, item in ds.data_vars.items():
        if POINT not in item.dims:
            data_vars[name] = item.variable
            continue
        item = item.transpose(POINT, ...)
        fill = Status.MISSING if name == "status" else _fill_value(item.dtype)
        full = np.full((size, *item.shape[1:]), fill, dtype=item.dtype)
        full[points] = item.values
        data_vars[name] = xr.Variable(
            (*dims, *item.dims[1:]), full.reshape(shape + item.shape[1:]), item.attrs
        )
    coords = {k: v.variable for k, v in ds.coords.items() if k != POINT and POINT not in v.dims}
    return xr.Dataset(data_vars, coords=coords, attrs=dict(ds.attrs))


def dataset_counts(ds: xr.Dataset) -> dict[str, int]:
    """:func:`~richlazy_cli.errors.point_counts` of a result (all zero without ``status``).

    Counted over the whole grid: a shard file's other points are missing.
    """
    if "status" not in ds:
        return point_counts(np.zeros(0))
    if is_shard_layout(ds):
        try:
            return point_counts(grid_status(ds))
        except BadInput:
            return point_counts(ds["status"].values)
    return point_counts(ds["status"].values)


def verify(path: Path) -> list[str]:
    """Problems with a result file (:func:`verify_report`); empty when sound."""
    return verify_report(path)[0]


def verify_report(path: Path) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of a result file: schema, completeness, consistency and data.

    Besides the schema and ``status``, it checks that the grid coordinates are those of the
    ``grid`` attribute, or a subset of them in order (a CF subset, such as ``ncks -d`` or
    ``ds.isel`` writes; when the model is known here) and that the ``fingerprint`` matches the
    model, action, parameters, grid and recorded inputs. It reads the data: every variable
    against the checksum and the variable set recorded at the write (:mod:`.checksums`; a file
    written before them gets a note instead), ``status`` against the ``errors`` attribute
    (each failed point has its entry, no point that succeeded has one) and every point of
    status 0 against non-finite values (outside variables whose ``nan_meaning`` or
    ``padding`` says what a NaN there means).
    """
    path = Path(path)
    try:
        ds = open_result(path)
    except BadInput:
        if not is_hdf5(path):
            raise
        damaged, _ = _data_problems(path)  # name the damaged variable when there is one
        if damaged:
            return damaged, []
        raise
    problems = _schema_problems(ds)
    data, notes = _data_problems(path)
    return problems + data + _status_problems(ds), notes


def _data_problems(path: Path) -> tuple[list[str], list[str]]:
    try:
        return checksums.check(path)
    except UNREADABLE as exc:
        return [f"cannot be read for its checksums ({type(exc).__name__}: {exc})"], []


def _schema_problems(ds: xr.Dataset) -> list[str]:
    problems = [f"missing attribute {a}" for a in REQUIRED_ATTRS if a not in ds.attrs]
    for name in ("params", "grid", "command", "versions", "inputs", "history"):
        if name in ds.attrs and json_attr(ds, name) is None:
            problems.append(f"attribute {name} is not valid JSON")
    for name in ("params", "grid"):
        if name in ds.attrs and not isinstance(json_attr(ds, name), dict):
            problems.append(f"attribute {name} is not a JSON object")
    dims = grid_dims(ds)
    for dim in dims:
        if dim not in ds.dims:
            problems.append(f"grid dimension {dim} is missing")
    problems += _grid_problems(ds)
    problems += _fingerprint_problems(ds)
    for key, item in ds.variables.items():
        if "long_name" not in item.attrs:
            problems.append(f"{key} has no long_name")
    if "status" not in ds:
        problems.append("no status variable")
    else:
        shard = is_shard_layout(ds)
        if shard:
            try:
                shard_points(ds, math.prod(grid_shape(ds)))
            except BadInput as exc:
                problems.append(f"shard file: {exc}")
        elif tuple(ds["status"].dims) != tuple(dims):
            problems.append("status is not over the grid dimensions")
        counts = dataset_counts(ds)
        if counts["missing"]:
            where = (
                f" (a shard file, {ds.attrs.get('shard', '?')}: merge the shards with "
                "'richlazy store merge')" if shard else ""
            )
            problems.append(
                f"incomplete: {counts['missing']} of {counts['total']} points missing{where}"
            )
        if not int(ds.attrs.get("complete", 0)) and not counts["missing"]:
            problems.append("the file is marked incomplete")
    return problems


def _status_problems(ds: xr.Dataset) -> list[str]:
    """Where ``status`` disagrees with the ``errors`` attribute and with the data
    (:func:`verify_report`)."""
    if "status" not in ds:
        return []  # reported by the schema check
    status = np.asarray(ds["status"].values)
    known = np.isin(status, [s.value for s in Status])
    if status.dtype.kind not in "iu" or not known.all():
        odd = sorted(set(np.asarray(status[~known]).reshape(-1).tolist()))[:3]
        return ["variable status holds values other than -1, 0, 1, 2 "
                f"({', '.join(map(str, odd))})"]
    problems = []
    try:
        flat = grid_status(ds)
    except BadInput:
        return []  # a shard file whose points do not fit: reported by the schema check
    entries = json_attr(ds, "errors", [])
    if not isinstance(entries, list):
        return ["attribute errors is not a JSON list"]
    listed: dict[int, int] = {}
    for entry in entries:
        where = _label_index(ds, entry.get("point") if isinstance(entry, dict) else None)
        if where is not None:  # None: a point outside this file's (subset's) grid
            listed[where] = int(entry.get("status", -9)) if isinstance(
                entry.get("status"), int) else -9
    failed = np.flatnonzero(Status.failed(flat))
    unlisted = [i for i in failed.tolist() if i not in listed]
    if unlisted:
        problems.append(f"variable status: {len(unlisted)} failed point(s) have no entry in "
                        f"errors (first: {_label_of(ds, unlisted[0])}, "
                        f"status {int(flat[unlisted[0]])})")
    wrong = [i for i, s in sorted(listed.items()) if flat[i] != Status.MISSING and flat[i] != s]
    if wrong:
        problems.append(f"variable status: {len(wrong)} point(s) disagree with their entry in "
                        f"errors (first: {_label_of(ds, wrong[0])}: status {int(flat[wrong[0]])}, "
                        f"errors {listed[wrong[0]]})")
    problems += _non_finite_problems(ds, status)
    return problems


def _non_finite_problems(ds: xr.Dataset, status: np.ndarray) -> list[str]:
    """Variables with a non-finite value at a point of status 0."""
    dims = tuple(ds["status"].dims)
    ok = (status == Status.OK).reshape(-1)
    if not ok.any():
        return []
    problems = []
    for name, item in ds.data_vars.items():
        if (name in ("status", "elapsed") or str(name).endswith("_values")
                or "nan_meaning" in item.attrs or "padding" in item.attrs
                or not np.issubdtype(item.dtype, np.inexact) or item.dims[:len(dims)] != dims):
            continue
        values = np.asarray(item.values).reshape(ok.size, -1)
        with np.errstate(over="ignore", invalid="ignore"):
            suspects = np.flatnonzero(ok & ~np.isfinite(values.sum(axis=1)))
        bad = [i for i in suspects.tolist() if not np.isfinite(values[i]).all()]
        if bad:
            problems.append(f"variable {name} holds non-finite values at {len(bad)} point(s) "
                            f"of status 0 (first: {_position_label(ds, bad[0])})")
    return problems


def _label_index(ds: xr.Dataset, label: Any) -> int | None:
    """The flat grid index of an ``errors`` entry's point label, or None when it names no
    point of this file's grid."""
    dims = [d for d in grid_dims(ds) if d in ds.sizes]
    if not dims:
        return 0
    if not isinstance(label, dict):
        return None
    index = []
    for dim in dims:
        if dim not in label:
            return None
        keys = [json.dumps(jsonable(v)) for v in np.asarray(ds[dim].values).tolist()]
        want = json.dumps(jsonable(label[dim]))
        if want not in keys:
            return None
        index.append(keys.index(want))
    return int(np.ravel_multi_index(index, grid_shape(ds)))


def _label_of(ds: xr.Dataset, flat: int) -> str:
    """A grid point, by its flat index, as ``name=value`` pairs."""
    dims = [d for d in grid_dims(ds) if d in ds.sizes]
    if not dims:
        return "the single point"
    where = np.unravel_index(flat, grid_shape(ds))
    return ", ".join(f"{d}={np.asarray(ds[d].values)[i].item()}"
                     for d, i in zip(dims, where, strict=True))


def _position_label(ds: xr.Dataset, position: int) -> str:
    """A point by its position along the status variable (a shard file's own points)."""
    if is_shard_layout(ds):
        return _label_of(ds, int(np.asarray(ds[POINT].values)[position]))
    return _label_of(ds, position)


def _grid_problems(ds: xr.Dataset) -> list[str]:
    """Where the ``grid`` attribute and the grid coordinates disagree."""
    from ..models.base import get_model
    from .grid import parse_grid

    specs = json_attr(ds, "grid")
    if not isinstance(specs, dict) or not all(name in ds.coords for name in specs):
        return []
    try:
        model = get_model(str(ds.attrs.get("model")))
    except BadInput:
        return []  # a model not installed here: the coordinates cannot be recomputed
    try:
        grid = parse_grid(model, list(specs.items()))
    except BadInput as exc:
        return [f"attribute grid does not parse ({exc})"]
    problems = []
    for written, dim in zip(specs, grid.dims, strict=True):  # written: perhaps an older name
        want = dim.coordinate()
        have = np.asarray(ds[written].values)
        if want.dtype == object or have.dtype.kind in "OUS":
            same = _is_subset([str(v) for v in have], [str(v) for v in want])
        else:
            same = have.ndim == 1 and _is_subset(have.tolist(), want.tolist())
        if not same:
            problems.append(f"coordinate {dim.name} disagrees with the grid attribute")
    return problems


def _is_subset(have: list[Any], want: list[Any]) -> bool:
    """Whether the coordinate ``have`` is ``want`` or a part of it in the same order: a CF
    subset of the grid (``ds.isel(...)``, ``ncks -d``) is a valid file of fewer points."""
    if not have:
        return False
    position = 0
    for value in have:
        try:
            position = want.index(value, position) + 1
        except ValueError:
            return False
    return True


def _fingerprint_problems(ds: xr.Dataset) -> list[str]:
    from .fingerprint import fingerprint

    recorded = ds.attrs.get("fingerprint")
    if not recorded:
        return []
    params, specs = json_attr(ds, "params"), json_attr(ds, "grid")
    inputs = json_attr(ds, "inputs", [])
    if not isinstance(params, dict) or not isinstance(specs, dict) or not isinstance(inputs, list):
        return []  # reported above
    try:
        now = fingerprint(
            str(ds.attrs.get("model")), str(ds.attrs.get("action")), params, specs, inputs
        )
    except (KeyError, TypeError):
        return ["attribute inputs is malformed"]
    if now != recorded:
        return ["fingerprint does not match model, action, params, grid and inputs"]
    return []


def describe(path: Path) -> dict[str, Any]:
    """A JSON-friendly description of a result file (``store show``)."""
    ds = open_result(path)
    attrs = {
        k: (json_attr(ds, k) if k in JSON_ATTRS else v)
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
        "points": dataset_counts(ds),
        "attrs": jsonable(attrs),
    }
