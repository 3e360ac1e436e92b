"""Declared model parameters: types, defaults, units, ranges and their validation.

Every value that reaches a model passes through :meth:`Param.coerce` exactly once, at the
boundary (command line, job file or grid). Error messages name the parameter and the accepted
range; they are raised as :class:`BadInput`, which the CLI turns into one line on stderr and
exit code 2.

A parameter's older spelling, accepted so that a user's old job file still runs, passes
through :func:`deprecated`, the one place that says so: a :class:`RichlazyDeprecationWarning`
naming the spelling of now (docs/usage.md, "Older parameter names").
"""

from __future__ import annotations

import difflib
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .errors import BadInput, RichlazyDeprecationWarning

Kind = Literal["int", "float", "bool", "str", "vector", "matrix", "int_list", "path"]


def _fmt_bound(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


@dataclass(frozen=True)
class Param:
    """One model parameter.

    ``kind`` is the value type: ``int``, ``float``, ``bool``, ``str`` (one of ``choices``),
    ``vector`` (1-D float array), ``matrix`` (2-D float array), ``int_list`` (1-D int array) or
    ``path`` (a file name). ``low``/``high`` bound numbers and every element of arrays.
    ``batchable`` parameters may differ between the configurations of one vectorised batch
    (the model receives them as arrays with a leading batch axis); all other parameters are
    equal across a batch, and the engine groups grid points accordingly. ``optional``
    parameters default to ``None`` (not given).
    """

    name: str
    kind: Kind
    default: Any
    help: str
    unit: str = ""
    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    batchable: bool = False
    optional: bool = False

    # -- description -----------------------------------------------------------------------
    def describe_range(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.low is None and self.high is None:
            return ""
        return _fmt_bound(self.low, self.high, self.low_open, self.high_open)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.kind,
            "default": jsonable(self.default),
            "unit": self.unit,
            "help": self.help,
            "range": self.describe_range(),
            "batchable": self.batchable,
            "optional": self.optional,
        }

    # -- parsing and validation ------------------------------------------------------------
    def parse(self, text: str) -> Any:
        """Parse a command-line string (``-p NAME=TEXT``) and validate it."""
        text = text.strip()
        if self.optional and text.lower() in ("none", "null", ""):
            return None
        if self.kind in ("vector", "int_list", "matrix"):
            if text.startswith("["):
                try:
                    value: Any = json.loads(text)
                except json.JSONDecodeError:
                    raise BadInput(f"parameter {self.name}: {text!r} is not valid JSON") from None
            else:
                value = [part for part in text.split(",") if part.strip() != ""]
            return self.coerce(value)
        return self.coerce(text)

    def coerce(self, value: Any) -> Any:
        """Turn ``value`` (a string, a number, a list...) into this parameter's type, or raise."""
        name = self.name
        if value is None:
            if self.optional:
                return None
            raise BadInput(f"parameter {name}: a value is required")
        if self.kind == "bool":
            return self._coerce_bool(value)
        if self.kind == "str":
            text = str(value)
            if self.choices is not None and text not in self.choices:
                raise BadInput(
                    f"parameter {name}: {text!r} is not one of {', '.join(self.choices)}"
                )
            return text
        if self.kind == "path":
            return str(value)
        if self.kind in ("int", "float"):
            return self._check_range(self._scalar(value, self.kind))
        if self.kind in ("vector", "int_list"):
            arr = self._array(value, 1)
            if self.kind == "int_list":
                if not np.all(arr == np.round(arr)):
                    raise BadInput(f"parameter {name}: expected whole numbers, got {value!r}")
                arr = arr.astype(np.int64)
            for x in arr.ravel():
                self._check_range(x)
            return arr
        if self.kind == "matrix":
            arr = self._array(value, 2)
            return arr
        raise AssertionError(f"unknown parameter kind {self.kind}")

    def _coerce_bool(self, value: Any) -> bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise BadInput(f"parameter {self.name}: {value!r} is not true or false")

    def _scalar(self, value: Any, kind: str) -> int | float:
        name = self.name
        if isinstance(value, bool | np.bool_):
            raise BadInput(f"parameter {name}: expected a number, got {value!r}")
        if isinstance(value, str):
            text = value.strip()
            try:
                number = float(text) if kind == "float" else _parse_int(text)
            except ValueError:
                what = "a number" if kind == "float" else "an integer"
                raise BadInput(f"parameter {name}: {value!r} is not {what}") from None
        elif isinstance(value, int | float | np.integer | np.floating):
            number = value  # type: ignore[assignment]  # NumPy scalars are numbers too
        else:
            raise BadInput(f"parameter {name}: expected a number, got {value!r}")
        if kind == "int":
            if isinstance(number, float | np.floating):
                if not math.isfinite(number) or number != round(number):
                    raise BadInput(f"parameter {name}: {value!r} is not an integer")
            if not -(2**63) <= int(number) < 2**63:
                raise BadInput(f"parameter {name}: {_short(int(number))} does not fit in 64 bits")
            return int(number)
        number = float(number)
        if not math.isfinite(number):
            raise BadInput(f"parameter {name}: {value!r} is not a finite number")
        return number

    def _array(self, value: Any, ndim: int) -> np.ndarray:
        name = self.name
        if isinstance(value, str):
            return self.parse(value)
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            what = "numbers" if ndim == 1 else "a rectangular matrix of numbers"
            raise BadInput(f"parameter {name}: expected {what}, got {value!r}") from None
        if ndim == 2 and arr.ndim == 1 and arr.size > 0:
            arr = arr[None, :]
        if arr.ndim != ndim or arr.size == 0:
            what = "a non-empty list of numbers" if ndim == 1 else "a non-empty matrix [[...], ...]"
            raise BadInput(f"parameter {name}: expected {what}")
        if not np.all(np.isfinite(arr)):
            raise BadInput(f"parameter {name}: every entry must be a finite number")
        return arr

    def _check_range(self, x: float) -> Any:
        bad = False
        if self.low is not None:
            bad |= x <= self.low if self.low_open else x < self.low
        if self.high is not None:
            bad |= x >= self.high if self.high_open else x > self.high
        if bad:
            raise BadInput(f"parameter {self.name}: {_short(x)} is outside {self.describe_range()}")
        return x


def _short(x: float) -> str:
    """A number for a message: ``%g`` (an int too large for a float by its digit count)."""
    try:
        return f"{x:g}"
    except OverflowError:
        return f"an integer of {len(str(abs(int(x))))} digits"


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        number = float(text)  # accepts 1e4
        if not math.isfinite(number) or number != round(number):
            raise
        return int(number)


def deprecated(old: str, new: str) -> None:
    """Warn that parameter ``old`` is given by its older name: write ``new`` instead. Every
    older name a model accepts (:attr:`richlazy_cli.models.base.Model.aliases` and
    :attr:`~richlazy_cli.models.base.Model.implementation_aliases`) is said here, and only
    here."""
    warnings.warn(f"parameter {old} is deprecated: write {new}", RichlazyDeprecationWarning,
                  stacklevel=3)


def suggest(name: str, known: list[str]) -> str:
    """' (did you mean X?)' for the closest known name, or ''."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f" (did you mean {close[0]}?)" if close else ""


def jsonable(value: Any) -> Any:
    """A JSON-serialisable version of a parameter value (arrays become lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
