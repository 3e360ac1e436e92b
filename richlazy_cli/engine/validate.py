"""Checking every point of a grid exactly, at the cost of checking each distinct case once.

A model's ``check(action, values)`` is a deterministic function of the values it reads, and may
write derived values. Two points of one grid share every parameter outside the grid, so if a
point agrees with an earlier checked point on every *grid* parameter that the earlier check
read before writing it, the check would run the same way on it, line by line: same reads, same
branches, same writes, same verdict. :class:`PointChecker` therefore runs ``check`` on a
mapping that records the keys it reads and writes, and answers every later point that agrees on
those keys from that record. Nothing is assumed about the model: a check that reads every
swept parameter is run at every point, and one that enumerates the mapping (``keys``,
iteration, copies) or deletes from it is treated as reading everything.

For a 20,000-point sweep of ``single-neuron`` over (delta, eta_a) the check runs once instead of
20,000 times, since with ``beta0 != 0`` it reads neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

    def __or__(self, other: Any) -> dict[str, Any]:
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
            self.model.check(self.action, recording)
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
