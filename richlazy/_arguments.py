"""The Python API's arguments, checked before anything runs (docs/api.md, "Arguments").

The command line's arguments are text, typed by the CLI; the API's are Python values, and a
value of the wrong kind must not reach the engine, where it would surface as a raw
``TypeError`` from ``len()`` or a ``ValueError`` from ``dict()``, or be turned into text that
names a file no one asked for (``str(b"o.h5")`` is ``"b'o.h5'"``). Each check here raises

* :class:`~richlazy_cli.errors.ArgumentTypeError` (a ``TypeError`` and a
  :class:`~richlazy_cli.errors.BadInput`) for a value of the wrong type, and
* :class:`~richlazy_cli.errors.ArgumentValueError` (a ``ValueError`` and a ``BadInput``) for
  a value of the right type that cannot be right,

each with one line that names the argument, says what it got and gives an example. Paths are
``str``, ``bytes`` or ``os.PathLike``, read as :func:`os.fspath` and :func:`os.fsdecode` read
them (a ``bytes`` name that is not UTF-8 is the file of that name, as ``open()`` takes it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from richlazy_cli.errors import ArgumentTypeError, ArgumentValueError

RUN_KEYWORDS: dict[str, str] = {
    "worker_timeout": "worker_timeout=120.0",
    "fail_fast": "fail_fast=True",
    "max_points": "max_points=2_000_000",
    "max_bytes": 'max_bytes="20GB"',
    "scheduler": 'scheduler="tcp://host:8786"',
    "cluster": 'cluster={"cores": 4, "memory": "8GB"}',
}
"""The ``[run]`` options that :func:`richlazy.sweep` and :func:`richlazy.estimate` take as
extra keywords, each with an example (the others are their own named arguments)."""

_EXAMPLES: dict[str, str] = {
    "action": 'action="solve"',
    "model": 'model="single-neuron"',
    "grid": 'grid={"delta": "linspace(-1,1,5)", "seed": [0, 1, 2]}',
    "params": 'params={"beta0": [1.0, 0.5], "steps": 1000}',
    "config": 'config="jobs/fig1b-small.toml"',
    "output": 'output="results/fig1b-small.h5"',
    "jobs": "jobs=2",
    "chunk_size": "chunk_size=8",
    "backend": 'backend="loky"',
    "shard": 'shard="2/8"',
    "path": 'path="results/fig1b-small.h5"',
    "inputs": 'inputs=["results/a.h5", "results/b.h5"]',
    **RUN_KEYWORDS,
}


def _got(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _type_error(name: str, expected: str, value: Any) -> ArgumentTypeError:
    example = _EXAMPLES.get(name)
    return ArgumentTypeError(
        f"{name}: expected {expected}, got {_got(value)}"
        + (f" (e.g. {example})" if example else ""))


def path_type_error(name: str, value: Any) -> ArgumentTypeError:
    """The error for a ``name`` that is not a path."""
    return _type_error(name, "a path (str, bytes or os.PathLike)", value)


def path_argument(name: str, value: Any) -> Path | None:
    """``value`` (``str``, ``bytes`` or ``os.PathLike``) as a :class:`~pathlib.Path`, by
    :func:`os.fspath` and :func:`os.fsdecode`; None for None."""
    return None if value is None else required_path(name, value)


def required_path(name: str, value: Any) -> Path:
    """``value`` (``str``, ``bytes`` or ``os.PathLike``) as a :class:`~pathlib.Path`, by
    :func:`os.fspath` and :func:`os.fsdecode`."""
    try:
        text = os.fsdecode(os.fspath(value))
    except TypeError:
        raise path_type_error(name, value) from None
    if not text:
        raise ArgumentValueError(f"{name}: the path is empty (e.g. {_EXAMPLES[name]})")
    if "\0" in text:
        raise ArgumentValueError(f"{name}: the path {text!r} holds a NUL character")
    return Path(text)


def text_argument(name: str, value: Any, optional: bool = True) -> str | None:
    """``value`` when it is a ``str`` (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return value


def flag_argument(name: str, value: Any) -> bool:
    """``value`` when it is a ``bool`` (``force``, ``resume``, ``quiet``)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name}: expected True or False, got {_got(value)}")
    return value


def int_argument(name: str, value: Any) -> int | None:
    """``value`` when it is an integer (not a bool), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an integer", value)
    if value < 1:
        raise ArgumentValueError(f"{name}: expected at least 1, got {value} "
                                 f"(e.g. {_EXAMPLES[name]})")
    return value


def _mapping(name: str, value: Any, of: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _type_error(name, f"a mapping of {of}", value)
    for key in value:
        if not isinstance(key, str):
            raise ArgumentTypeError(
                f"{name}: the names must be strings, got {_got(key)} (e.g. {_EXAMPLES[name]})")
    return dict(value)


def params_argument(value: Any) -> dict[str, Any]:
    """``params``: a mapping of parameter names to values (None: none)."""
    return _mapping("params", value, "parameter names to values")


def grid_argument(value: Any) -> dict[str, Any]:
    """``grid``: a mapping of parameter names to a spec string or a non-empty sequence of
    values (a list, a tuple, a NumPy array), as ``-g NAME=SPEC`` and a job file's
    ``[grid]`` take them; a sequence becomes a list."""
    grid = _mapping("grid", value, "names to specs or lists of values")
    for key, spec in grid.items():
        if isinstance(spec, str):
            continue
        if isinstance(spec, bytes | bytearray | Mapping) or not _is_sequence(spec):
            raise ArgumentTypeError(
                f'grid["{key}"]: expected a spec string or a list of values, got {_got(spec)} '
                f'(e.g. grid={{"{key}": "linspace(0,1,5)"}} or grid={{"{key}": [0, 1]}})')
        values = list(spec)
        if not values:
            raise ArgumentValueError(
                f'grid["{key}"]: the list of values is empty (e.g. grid={{"{key}": [0, 1]}})')
        grid[key] = values
    return grid


def _is_sequence(value: Any) -> bool:
    if isinstance(value, Sequence):
        return True
    try:  # a NumPy array, a range, anything with a length that iterates
        len(value)
        iter(value)
    except TypeError:
        return False
    return True


def run_keywords(function: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The extra keywords of ``function`` (:data:`RUN_KEYWORDS`); an unknown one is an
    :class:`~richlazy_cli.errors.ArgumentTypeError` that lists the known ones."""
    unknown = sorted(set(given) - set(RUN_KEYWORDS))
    if unknown:
        known = ", ".join(_known(function))
        raise ArgumentTypeError(
            f"{function}() got an unexpected keyword argument {unknown[0]!r}; "
            f"it takes: {known}")
    return dict(given)


def _known(function: str) -> list[str]:
    import inspect

    import richlazy

    signature = inspect.signature(getattr(richlazy, function))
    named = [p.name for p in signature.parameters.values()
             if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    return [*named, *RUN_KEYWORDS]


def sweep_arguments(function: str, action: Any, model: Any, grid: Any, params: Any,
                    config: Any, output: Any, flags: Mapping[str, Any],
                    run: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of :func:`richlazy.sweep` and :func:`richlazy.estimate`, checked and
    normalised: ``grid`` and ``params`` as dicts, ``config`` and ``output`` as paths,
    ``run`` holding the named run options (``jobs``, ``chunk_size``, ``backend``,
    ``shard``) and the extra keywords."""
    extra = run_keywords(function, run)
    for key in ("force", "resume", "quiet"):
        if key in flags:
            flag_argument(key, flags[key])
    return {
        "action": text_argument("action", action),
        "model": text_argument("model", model),
        "grid": grid_argument(grid),
        "params": params_argument(params),
        "config": path_argument("config", config),
        "output": path_argument("output", output),
        "run": {"jobs": int_argument("jobs", flags.get("jobs")),
                "chunk_size": int_argument("chunk_size", flags.get("chunk_size")),
                "backend": text_argument("backend", flags.get("backend")),
                "shard": text_argument("shard", flags.get("shard")),
                **extra},
    }
