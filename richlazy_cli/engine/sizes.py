"""Sizes in bytes as people write and read them: ``20GB``, ``500MiB``, ``1.6 GB``; and the
largest result a sweep accepts unless told otherwise. Pure Python, so that the command line
declares its options without importing the numerical libraries (docs/engine.md, "Result
files")."""

from __future__ import annotations

import math
import re
from typing import Any

DEFAULT_MAX_BYTES = 10**10
"""The largest result (10 GB, uncompressed) a sweep accepts unless ``--max-bytes`` says more."""
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgtpKMGTP]i?)?[bB]?\s*$")


def parse_bytes(text: Any) -> int:
    """A size as given on the command line or in a job file: ``20GB``, ``500MiB``, ``1e9``
    or an integer number of bytes (powers of 1000 for k, M, G, T, P; of 1024 with ``i``)."""
    if isinstance(text, bool):
        raise ValueError(text)
    if isinstance(text, int):
        if text < 1:
            raise ValueError(text)
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(text)
    number, unit = match.groups()
    value = float(number) * _UNITS[(unit or "").lower()]
    if not math.isfinite(value) or value < 1:
        raise ValueError(text)
    return int(value)


def size_problem(value: Any) -> str | None:
    """Why ``value`` is not a size (for the run option's check), or None."""
    try:
        parse_bytes(value)
    except ValueError:
        return "expected a size such as 20GB, 500MiB or a number of bytes (at least 1)"
    return None


def human(nbytes: float) -> str:
    """``nbytes`` in the largest unit of 1000 that keeps it at least 1 (``1.6 GB``)."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} bytes"
