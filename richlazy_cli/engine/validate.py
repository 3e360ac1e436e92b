"""Checking every point of a grid exactly, at the cost of checking each distinct case once.

A model's preparation of a point (``Model.prepare``: ``derive``, then ``check``; "the check"
below) is a deterministic function of the values it reads, and writes the derived values. Two
points of one grid share every parameter outside the grid, so if a point agrees with an
earlier checked point on every *grid* parameter that the earlier check read before writing
it, the check would run the same way on it, line by line: same reads, same branches, same
writes, same verdict. :class:`PointChecker` therefore runs the check on a mapping that
records the keys it reads and writes, and answers every later point that agrees on those keys
from that record. Nothing is assumed about the model: a check that reads every
swept parameter is run at every point, and one that enumerates the mapping (``keys``,
iteration, copies) or deletes from it is treated as reading everything.

For a 20,000-point sweep of ``single-neuron`` over (delta, eta_a) the check runs once instead of
20,000 times, since with ``beta0 != 0`` it reads neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput
from ..models.base import Model

_MISSING = object()
MAX_RECORDS = 100_000
"""Verdicts kept per table at most: past that (a check that reads most swept parameters of a
huge grid), further points are checked directly, and memory stays bounded."""


class _Recording(dict):  # type: ignore[type-arg]
    """A dict that notes which keys were read before being written, and which were written."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()
        self.written: set[str] = set()
        self.opaque = False  # enumerated, copied or deleted from: treat as reading everything
        self.at: tuple[int, ...] | None = None  # the point's index along each grid dimension

    def depends_on(self, names: Any) -> None:
        """Note ``names`` as read: values put in from elsewhere depend on them."""
        self.read.update(name for name in names if name not in self.written)

    def _note(self, key: Any) -> None:
        if key not in self.written:
            self.read.add(key)

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.written.add(key)
        super().__setitem__(key, value)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        self.written.add(key)
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.opaque = True
        return super().__iter__()

    def keys(self):  # type: ignore[no-untyped-def]
        self.opaque = True
        return super().keys()

    def values(self):  # type: ignore[no-untyped-def]
        self.opaque = True
        return super().values()

    def items(self):  # type: ignore[no-untyped-def]
        self.opaque = True
        return super().items()

    def copy(self) -> dict[str, Any]:
        self.opaque = True
        return dict(super().items())

    def __or__(self, other: Any) -> dict[str, Any]:  # type: ignore[override]  # dict's overloads
        self.opaque = True
        return dict(super().items()) | other

    def __eq__(self, other: object) -> bool:
        self.opaque = True
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        self.opaque = True
        return super().__len__()

    def __delitem__(self, key: Any) -> None:
        self.opaque = True
        super().__delitem__(key)

    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        self.opaque = True
        return super().pop(key) if default is _MISSING else super().pop(key, default)

    def popitem(self) -> tuple[Any, Any]:
        self.opaque = True
        return super().popitem()

    def clear(self) -> None:
        self.opaque = True
        super().clear()


class PointChecker:
    """Checks points of one grid (base values overlaid with grid values), reusing verdicts.

    ``check(point, index)`` takes a point's grid values and its index along each grid
    dimension, and returns its complete checked parameters or raises the model's BadInput.
    """

    def __init__(
        self, model: type[Model], action: str, base: Mapping[str, Any], names: Sequence[str]
    ) -> None:
        self.model = model
        self.action = action
        self.base = dict(base)
        self.names = list(names)
        # one table per distinct set of grid dimensions that a recorded check read:
        # (positions of those dimensions, {their indices: written values, or the error})
        self.records: list[tuple[tuple[int, ...], dict[tuple[int, ...], Any]]] = []
        self.runs = 0  # how many times the model's check actually ran

    def check(self, point: Mapping[str, Any], index: Sequence[int]) -> dict[str, Any]:
        for dims, table in self.records:
            outcome = table.get(tuple(index[k] for k in dims), _MISSING)
            if outcome is not _MISSING:
                if isinstance(outcome, BadInput):
                    raise BadInput(str(outcome))
                values = dict(self.base)
                values.update(point)
                values.update(outcome)
                return values
        return self._run(point, index)

    def _run(self, point: Mapping[str, Any], index: Sequence[int]) -> dict[str, Any]:
        values = dict(self.base)
        values.update(point)
        recording = _Recording(values)
        self.runs += 1
        outcome: Any
        try:
            self.model.prepare(self.action, recording)
            outcome = {k: dict.__getitem__(recording, k) for k in recording.written}
        except BadInput as exc:
            outcome = exc
        if recording.opaque:
            dims = tuple(range(len(self.names)))
        else:
            dims = tuple(k for k, name in enumerate(self.names) if name in recording.read)
        table = next((t for known, t in self.records if known == dims), None)
        if table is None:
            table = {}
            self.records.append((dims, table))
        if len(table) < MAX_RECORDS:
            table[tuple(index[k] for k in dims)] = outcome
        if isinstance(outcome, BadInput):
            raise BadInput(str(outcome))
        return dict.copy(recording)


# -- a whole grid at once -------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """A node of a :class:`CaseTree`: the cases differ along grid dimension ``dim``."""

    dim: int
    children: list[Any]  # one Split or Leaf per index along `dim`


@dataclass(frozen=True)
class Leaf:
    """A case of a :class:`CaseTree`: every point of its box has this outcome."""

    outcome: Any


class TooManyCases(Exception):
    """Raised by :class:`CaseTree` when the cases exceed its ``limit``."""


class CaseTree:
    """The outcome of ``run`` at every point of a grid, computed once per distinct case.

    ``run`` receives a point's values (``base`` overlaid with its grid values) as a mapping
    that records what it reads (as :class:`PointChecker` does) and returns an outcome (or
    raises BadInput, which is the outcome). The grid is explored as a tree of boxes: ``run``
    is evaluated at a box's first point (every dimension not yet fixed at index 0); when it
    read no grid dimension that the box leaves free, its outcome holds for the whole box (a
    leaf: every point of the box would run the same way), otherwise the box is split along
    the first free dimension it read, one child per value. A ``run`` that reads nothing swept
    is evaluated once for the whole grid; one that reads a dimension of 1,000 values, 1,000
    times; only one that reads every dimension (or enumerates its mapping) runs per point.
    Nothing per point is built: the work and memory scale with the number of cases.

    ``visit(fixed, first, outcome)`` is called for every leaf (``fixed``: the dimensions the
    box fixes, and their indices; ``first``: the box's first point, its smallest flat index).
    Past ``limit`` leaves :class:`TooManyCases` is raised; ``keep`` keeps the tree for
    :meth:`outcome` (drop it for a grid explored only to be checked).
    """

    def __init__(
        self,
        grid: Any,
        base: Mapping[str, Any],
        run: Any,
        visit: Any = None,
        limit: int | None = None,
        keep: bool = True,
    ) -> None:
        self.grid = grid
        self.base = dict(base)
        self.run = run
        self.visit = visit
        self.limit = limit
        self.keep = keep
        self.runs = 0
        self.leaves = 0
        self.root: Any = self._explore({}, None)

    def _point(self, at: tuple[int, ...]) -> dict[str, Any]:
        values = dict(self.base)
        for dim, i in zip(self.grid.dims, at, strict=True):
            values[dim.name] = dim.values[i]
        return values

    def _evaluate(self, at: tuple[int, ...]) -> tuple[frozenset[int], Any]:
        recording = _Recording(self._point(at))
        recording.at = at
        self.runs += 1
        outcome: Any
        try:
            outcome = self.run(recording)
        except BadInput as exc:
            outcome = exc
        names = self.grid.names
        if recording.opaque:
            read = frozenset(range(len(names)))
        else:
            read = frozenset(k for k, name in enumerate(names) if name in recording.read)
        return read, outcome

    def _explore(self, fixed: dict[int, int], known: tuple[frozenset[int], Any] | None) -> Any:
        at = tuple(fixed.get(k, 0) for k in range(len(self.grid.dims)))
        read, outcome = known if known is not None else self._evaluate(at)
        free = sorted(read - fixed.keys())
        if not free:
            self.leaves += 1
            if self.limit is not None and self.leaves > self.limit:
                raise TooManyCases
            if self.visit is not None:
                self.visit(fixed, at, outcome)
            return Leaf(outcome) if self.keep else None
        k = free[0]
        children = [
            self._explore({**fixed, k: i}, (read, outcome) if i == 0 else None)
            for i in range(self.grid.dims[k].size)
        ]
        return Split(k, children) if self.keep else None

    def outcome(self, at: Sequence[int]) -> Any:
        """The outcome at the point with index ``at`` along every grid dimension."""
        return self.locate(at)[0]

    def locate(self, at: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
        """The outcome at ``at`` and the grid dimensions it depends on (those its case fixes:
        every point that agrees with ``at`` on them has the same outcome)."""
        node, dims = self.root, []
        while isinstance(node, Split):
            dims.append(node.dim)
            node = node.children[at[node.dim]]
        return node.outcome, tuple(dims)


def written_values(model: type[Model], action: str) -> Any:
    """A ``run`` for :class:`CaseTree`: the model's :meth:`~.Model.prepare` (derive, then
    check), returning the values it wrote."""

    def run(values: _Recording) -> dict[str, Any]:
        model.prepare(action, values)
        return {k: dict.__getitem__(values, k) for k in values.written}

    return run
