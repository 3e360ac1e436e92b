"""Grid specifications, the points they span, and sharding.

A grid is an ordered list of dimensions, each a model parameter with its values::

    tau=logspace(-1,0.3,17)      base-10 exponents, like numpy.logspace
    delta=linspace(-1,1,17)
    sigma0=geomspace(1e-3,1e-1,5)
    seed=range(16)               or range(a,b) / range(a,b,step)
    h=10,20,50                   an explicit list
    beta0=[[1,0],[0,1]]          a JSON list (vector parameters take lists of lists)

Points are numbered in C order over the grid's shape (the last dimension fastest); that flat
index is the identity of a point in part files, shards and merges.

Specs are checked before anything is allocated: arguments must be finite, a range's step
non-zero, counts positive integers, and the grid's size, computed from the specs without
expanding them (:func:`spec_size`), at most ``max_points`` (:data:`DEFAULT_MAX_POINTS` unless
``--max-points`` raises it). Values must be distinct as numbers (``0`` and ``-0`` are one
value) and integers must fit in 64 bits.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInput
from ..models.base import Model
from ..params import Param, jsonable
from .options import DEFAULT_MAX_POINTS

_CALL = re.compile(r"^\s*(linspace|logspace|geomspace|range)\s*\((.*)\)\s*$")
GRAMMAR = ("a grid is linspace(a,b,n), logspace(a,b,n) with base-10 exponents, "
           "geomspace(a,b,n), range(n), range(a,b[,step]) or a list 1,2,5")
"""The grid grammar, named in the messages of a spec that does not parse."""
"""The largest grid a sweep accepts without ``--max-points``: at a few hundred bytes of
bookkeeping per point in the parent (parameters, status, chunking) and the model's output on
top, larger grids belong in shards or separate sweeps."""
_INT64 = 2**63


@dataclass(frozen=True)
class GridDim:
    """One grid dimension: a parameter, its spec text and its validated values."""

    name: str
    spec: str
    values: tuple[Any, ...]
    spacing: str  # "linear", "log" or "list"

    @property
    def size(self) -> int:
        return len(self.values)

    def coordinate(self) -> np.ndarray:
        """Values as a 1-D coordinate; vector values become their JSON text."""
        if any(isinstance(v, np.ndarray) for v in self.values):
            return np.array([json.dumps(jsonable(v)) for v in self.values], dtype=object)
        return np.asarray(self.values)

    def describe(self) -> str:
        """First value, last value and count (``tau: 0.1 ... 2 (17 values, log)``), so that a
        dry run shows what a spec means before anything runs."""
        values = self.coordinate()

        def show(v: Any) -> str:
            if isinstance(v, float | np.floating):
                return f"{float(v):.4g}"
            return _short(str(v), 30)

        if self.size == 1:
            return f"{self.name}: {show(values[0])} (1 value)"
        return (f"{self.name}: {show(values[0])} ... {show(values[-1])} "
                f"({self.size} values, {self.spacing})")


@dataclass(frozen=True)
class Grid:
    """An ordered product of :class:`GridDim`."""

    dims: tuple[GridDim, ...] = ()

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @functools.cached_property
    def size(self) -> int:
        return math.prod(self.shape)

    def specs(self) -> dict[str, str]:
        return {d.name: d.spec for d in self.dims}

    def point(self, flat: int) -> dict[str, Any]:
        """The grid values of the point with flat (C-order) index ``flat``."""
        values = {}
        rest = int(flat)
        for dim in reversed(self.dims):  # C order: the last dimension varies fastest
            rest, i = divmod(rest, dim.size)
            values[dim.name] = dim.values[i]
        return {name: values[name] for name in self.names}

    def points(self, flats: np.ndarray | Sequence[int]) -> list[dict[str, Any]]:
        """The grid values of many points at once (vectorised :meth:`point`)."""
        flats = np.asarray(flats, dtype=np.int64)
        if not self.dims:
            return [{} for _ in flats]
        index = np.unravel_index(flats, self.shape)
        columns = [
            [d.values[i] for i in idx.tolist()] for d, idx in zip(self.dims, index, strict=True)
        ]
        names = self.names
        return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]

    def positions(self, flats: np.ndarray | Sequence[int]) -> list[tuple[int, ...]]:
        """Each point's index along every grid dimension (``()`` for an empty grid)."""
        flats = np.asarray(flats, dtype=np.int64)
        if not self.dims:
            return [() for _ in flats]
        index = np.unravel_index(flats, self.shape)
        return list(zip(*(i.tolist() for i in index), strict=True))

    def label(self, flat: int) -> dict[str, Any]:
        """A JSON-friendly description of a point, for messages and the errors attribute."""
        return {k: jsonable(v) for k, v in self.point(flat).items()}


def _short(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters for a message."""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _numbers(args: str, spec: str) -> list[float]:
    try:
        nums = [float(a) for a in args.split(",")]
    except ValueError:
        raise BadInput(f"grid {_short(spec)!r}: arguments must be numbers") from None
    if not all(math.isfinite(x) for x in nums):
        raise BadInput(f"grid {_short(spec)!r}: arguments must be finite numbers")
    return nums


def _count(x: float, spec: str) -> int:
    if x != round(x) or x < 1:
        raise BadInput(f"grid {_short(spec)!r}: the number of values must be a positive integer")
    return int(x)


def _range_args(nums: list[float], spec: str) -> tuple[int, ...]:
    if not 1 <= len(nums) <= 3 or any(x != round(x) for x in nums):
        raise BadInput(f"grid {_short(spec)!r}: range takes 1 to 3 integers")
    args = tuple(int(x) for x in nums)
    if len(args) == 3 and args[2] == 0:
        raise BadInput(f"grid {_short(spec)!r}: the range's step must not be zero")
    return args


def spec_size(name: str, text: str | Sequence[Any]) -> int:
    """The number of values a spec spans, computed without expanding it."""
    if not isinstance(text, str):
        return len(text)
    spec = f"{name}={text}"
    match = _CALL.match(text)
    if match:
        func, args = match.groups()
        nums = _numbers(args, spec)
        if func == "range":
            return len(range(*_range_args(nums, spec)))
        if len(nums) != 3:
            raise BadInput(f"grid {_short(spec)!r}: {func} takes (start, stop, count)")
        return _count(nums[2], spec)
    stripped = text.strip()
    if stripped.startswith("["):
        return -1  # a JSON list: parsed (it is already in memory as text) and counted later
    return stripped.count(",") + 1


def check_size(specs: Sequence[tuple[str, str | Sequence[Any]]], max_points: int) -> int:
    """The grid's number of points from its specs; BadInput beyond ``max_points``."""
    sizes = [spec_size(name, text) for name, text in specs]
    total = math.prod(max(n, 1) for n in sizes)
    if total > max_points:
        shape = " x ".join(f"{n:,}" if n >= 0 else "?" for n in sizes)
        raise BadInput(
            f"the grid has {total:,} points ({shape}), more than the limit of {max_points:,}; "
            "split it into shards or sweeps, or raise the limit with --max-points"
        )
    return total


def _expand(name: str, text: str) -> tuple[list[Any], str]:
    """Raw values (before type coercion) and their spacing for one spec."""
    spec = f"{name}={text}"
    match = _CALL.match(text)
    if match:
        func, args = match.groups()
        nums = _numbers(args, spec)
        if func == "range":
            values: list[Any] = list(range(*_range_args(nums, spec)))
            if not values:
                raise BadInput(f"grid {spec!r}: the range is empty")
            return values, "linear"
        if len(nums) != 3:
            raise BadInput(f"grid {spec!r}: {func} takes (start, stop, count)")
        start, stop, n = nums[0], nums[1], _count(nums[2], spec)
        if func == "linspace":
            return list(np.linspace(start, stop, n)), "linear"
        if func == "logspace":
            return list(np.logspace(start, stop, n)), "log"
        if start <= 0 or stop <= 0:
            raise BadInput(f"grid {spec!r}: geomspace needs positive start and stop")
        return list(np.geomspace(start, stop, n)), "log"
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            parsed = json.loads(stripped)
        except json.JSONDecodeError:
            raise BadInput(f"grid {spec!r}: not a valid JSON list") from None
        if not isinstance(parsed, list):
            raise BadInput(f"grid {spec!r}: expected a JSON list")
        return parsed, "list"
    if re.match(r"^\s*[A-Za-z_]\w*\s*\(", stripped):
        raise BadInput(
            f"grid {spec!r}: unknown function; use linspace, logspace, geomspace or range"
        )
    parts = [p.strip() for p in stripped.split(",")]
    if any(p == "" for p in parts):
        raise BadInput(f"grid {spec!r}: empty value in the list")
    return parts, "list"


def _list_spacing(values: Sequence[Any]) -> str:
    """'log' for a positive geometric list, else 'list'."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return "list"
    if arr.ndim != 1 or arr.size < 3 or np.any(arr <= 0):
        return "list"
    ratios = arr[1:] / arr[:-1]
    if np.allclose(ratios, ratios[0], rtol=1e-6) and not np.isclose(ratios[0], 1.0):
        return "log"
    return "list"


def make_dim(param: Param, text: str | Sequence[Any]) -> GridDim:
    """Validate one grid dimension given as spec text or as a list (from a TOML job file)."""
    name = param.name
    if isinstance(text, str):
        raw, spacing = _expand(name, text)
        spec = text.strip()
    else:
        raw, spacing = list(text), "list"
        spec = json.dumps(jsonable(raw))
    if not raw:
        raise BadInput(f"grid {name}: no values")
    values = []
    for item in raw:
        if param.kind in ("vector", "int_list", "matrix") and not isinstance(item, list | str):
            raise BadInput(f"grid {name}: each value of a vector parameter must be a list")
        try:
            value = param.coerce(item)
        except (OverflowError, BadInput) as exc:
            if isinstance(exc, BadInput) and len(str(exc)) <= 200:
                if spacing == "list" and isinstance(text, str) and isinstance(item, str):
                    raise BadInput(f"{exc} (in grid {name}={_short(text, 30)}; {GRAMMAR})"
                                   ) from None
                raise
            short = _short(str(item), 30)
            raise BadInput(f"grid {name}: value {short!r} is out of range") from None
        if isinstance(value, int) and not -_INT64 <= value < _INT64:
            raise BadInput(f"grid {name}: value {_short(str(item), 30)!r} does not fit in 64 bits")
        values.append(value)
    keys = [json.dumps(jsonable(_signless_zero(v))) for v in values]
    if len(set(keys)) != len(keys):
        raise BadInput(f"grid {name}: values repeat (0 and -0 count as one)")
    if spacing == "list":
        spacing = _list_spacing(values)
    return GridDim(name=name, spec=spec, values=tuple(values), spacing=spacing)


def _signless_zero(value: Any) -> Any:
    """``value`` with -0.0 as 0.0 (for telling repeated values apart)."""
    if isinstance(value, float):
        return value + 0.0
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value + 0.0
    return value


def parse_grid(
    model: type[Model],
    specs: Sequence[tuple[str, str | Sequence[Any]]],
    max_points: int = DEFAULT_MAX_POINTS,
    action: str | None = None,
) -> Grid:
    """Build a :class:`Grid` from ``(name, spec)`` pairs, in order (at most ``max_points``);
    a name may be a parameter's older name for ``action`` (deprecated: the dimension takes
    the parameter's own name)."""
    check_size(specs, max_points)
    dims: list[GridDim] = []
    seen: set[str] = set()
    for name, text in specs:
        param = model.param(name, action)
        if param.name in seen:
            raise BadInput(f"grid dimension {param.name} is given twice")
        seen.add(param.name)
        dims.append(make_dim(param, text))
    grid = Grid(tuple(dims))
    if grid.size > max_points:  # JSON lists are counted once parsed
        check_size([(d.name, list(d.values)) for d in grid.dims], max_points)
    return grid


def split_assignment(text: str, flag: str) -> tuple[str, str]:
    """'NAME=VALUE' -> (NAME, VALUE), or BadInput naming the flag."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise BadInput(f"{flag} {text!r}: expected NAME=VALUE")
    return name.strip(), value


# -- sharding -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, size: int) -> np.ndarray:
        """The flat indices of this shard: a deterministic, balanced round-robin subset
        (``index - 1``, ``index - 1 + count``, ... below ``size``), as 64-bit integers
        whatever the count (a count past the grid selects one point or none)."""
        if self.index > size:
            return np.zeros(0, dtype=np.int64)
        return np.arange(self.index - 1, size, min(self.count, size), dtype=np.int64)

    def check_fits(self, size: int, source: str = "") -> None:
        """BadInput unless every one of the ``count`` shards has a point of a ``size``-point
        grid: more shards than points is a mistake (``--shard 1/N`` with N of the wrong
        grid, a SLURM array larger than the sweep), refused before any work."""
        if self.count > size:
            flag = f"--shard slurm ({source})" if source else f"--shard {self}"
            raise BadInput(f"{flag}: {self.count} shards for a grid of {size} point"
                           f"{'s' if size != 1 else ''}; give at most {size} shards")


def parse_shard(text: str) -> Shard:
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise BadInput(f"--shard {text!r}: expected K/N, e.g. 2/8")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise BadInput(f"--shard {text!r}: K must be between 1 and N (shards are 1-based)")
    return Shard(k, n)


SLURM_SHARD = "slurm"
"""``--shard slurm``: the shard of the SLURM array task this process runs in."""


def shard_from_env(env: Mapping[str, str]) -> Shard:
    """The shard of the SLURM array task described by ``env`` (``--shard slurm``).

    An array ``--array=MIN-MAX:STEP`` runs the task ids ``MIN, MIN+STEP, ..., <= MAX``, that is
    ``SLURM_ARRAY_TASK_COUNT`` of them: task ``ID`` computes shard
    ``K = (ID - MIN) / STEP + 1`` of ``N = COUNT``. SLURM sets the count and step for ranges
    (``STEP`` is 1 without one); an array given as an irregular list (``--array=1,4,9``) has no
    such numbering and is refused, as is any task outside its array (use ``--shard K/N``).
    """
    task = env.get("SLURM_ARRAY_TASK_ID")
    if task is None:
        raise BadInput("--shard slurm: not in a SLURM array task (SLURM_ARRAY_TASK_ID is unset)")
    try:
        task_id = int(task)
        low = int(env["SLURM_ARRAY_TASK_MIN"])
        step = int(env.get("SLURM_ARRAY_TASK_STEP", "1"))
        if "SLURM_ARRAY_TASK_MAX" in env:
            high = int(env["SLURM_ARRAY_TASK_MAX"])
            count = int(env.get("SLURM_ARRAY_TASK_COUNT", (high - low) // max(step, 1) + 1))
        else:
            count = int(env["SLURM_ARRAY_TASK_COUNT"])
            high = low + (count - 1) * step
    except KeyError:
        raise BadInput("--shard slurm: SLURM_ARRAY_TASK_MIN (or _COUNT) is unset") from None
    except ValueError:
        raise BadInput("--shard slurm: the SLURM_ARRAY_TASK_* variables are not integers") from None
    if step < 1 or (task_id - low) % step or (high - low) // step + 1 != count:
        raise BadInput(
            f"--shard slurm: array {low}-{high}:{step} of {count} tasks is not a range with a "
            "step (an irregular --array list?); give --shard K/N"
        )
    index = (task_id - low) // step + 1
    if not 1 <= index <= count:
        raise BadInput(f"--shard slurm: task {task_id} is outside its array {low}-{high}:{step}")
    return Shard(index, count)


def describe_slurm_task(env: Mapping[str, str]) -> str:
    """``task ID of array MIN-MAX:STEP`` for the line that names a SLURM shard."""
    step = env.get("SLURM_ARRAY_TASK_STEP", "1")
    span = f"{env.get('SLURM_ARRAY_TASK_MIN')}-{env.get('SLURM_ARRAY_TASK_MAX')}"
    if "SLURM_ARRAY_TASK_MAX" not in env:  # the count and the first id: the array SLURM set
        span = f"{env.get('SLURM_ARRAY_TASK_COUNT')} tasks from {env.get('SLURM_ARRAY_TASK_MIN')}"
    job = env.get("SLURM_ARRAY_JOB_ID")
    return (f"SLURM array {'job ' + job + ' ' if job else ''}task {env.get('SLURM_ARRAY_TASK_ID')}"
            f" of {span}{':' + step if step != '1' else ''}")
