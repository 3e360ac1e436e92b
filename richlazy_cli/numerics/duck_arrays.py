"""xarray's duck-array checks without importing the duck-array libraries that no array is from.

Every :class:`xarray.Variable` that xarray builds asks whether its data is a Dask array
(``isinstance(data, array_type("dask"))``), and every index it builds whether its values are a
Dask collection (``is_duck_dask_array``, which imports ``dask.base`` to ask) or a Pint quantity
(``array_type("pint")``). xarray answers by importing the library (Dask, ``dask.array`` and Pint:
0.2 to 0.3 s of a process's start) and caching its array type. An object can be an instance of
a library's array type only once that library is imported, so until it is, the answer is
``()``, the empty tuple of types, and ``isinstance(x, ())`` is ``False`` exactly as
``isinstance(x, (dask.array.Array,))`` is for every ``x`` of such a process; and Dask calls
nothing a collection that has no ``__dask_graph__`` (``dask.base.is_dask_collection``).
:func:`defer` puts entries in xarray's cache that answer so, handing over to xarray's own
entry, built as xarray builds it, as soon as the library is imported (by the user, by a Dask
executor, by the Pint layer), and lets xarray's ``is_dask_collection`` answer ``False`` for an
object without ``__dask_graph__`` before it imports Dask: no check answers differently, and
building a model's Dataset imports neither library (a dry run imports neither, docs/estimates.md).
Where xarray keeps no such cache or function (another version), :func:`defer` leaves xarray as
it is.

A write asks too: ``to_netcdf`` looks up Dask's active scheduler (``get_dask_scheduler``,
which imports Dask and ``dask.distributed``: 0.3–0.5 s of every forked writer), to decide
whether to close the file after each chunk (only for data with Dask chunks) and which kind of
lock to take (a thread lock for no scheduler or the threaded one). Where Dask is not imported
no variable can have Dask chunks, and the thread lock is the one a process without Dask's
arrays needs, so :func:`defer` has the lookup answer ``None`` (no scheduler) until Dask is
imported, and xarray's own answer after.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

DEFERRED = {"dask": ("dask.array", "Array"), "pint": ("pint", "Quantity")}
"""xarray's name of each deferred library: the module that defines its array type, and the
type's name there (what xarray's ``DuckArrayModule`` looks up)."""


class _Deferred:
    """Stands in xarray's cache for ``name`` until that library is imported: its ``type`` is
    ``()`` till then; afterwards, and for any other attribute
    (``module``, ``version``, ``available``), it builds xarray's own entry, puts it in the
    cache in its place and answers from it."""

    def __init__(self, name: str, cache: dict[Any, Any], real: Any) -> None:
        self.name = name
        self.cache = cache
        self.real = real

    def _replace(self) -> Any:
        entry = self.real(self.name)
        self.cache[self.name] = entry
        return entry

    @property
    def type(self) -> tuple[type, ...]:
        module, attribute = DEFERRED[self.name]
        if (getattr(sys.modules.get(module), attribute, None) is None
                or not hasattr(sys.modules.get(self.name), "__version__")):
            return ()  # not imported (or still importing): no instance of it can exist
        return self._replace().type  # type: ignore[no-any-return]

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._replace(), attribute)


def _collection_check(original: Callable[[object], bool]) -> Callable[[object], bool]:
    """xarray's ``is_dask_collection`` that answers ``False`` without importing Dask for an
    object without ``__dask_graph__`` (as Dask answers), and asks ``original`` otherwise."""

    def is_dask_collection(x: object) -> bool:
        return hasattr(x, "__dask_graph__") and original(x)

    is_dask_collection.deferred = True  # type: ignore[attr-defined]
    return is_dask_collection


def _scheduler_lookup(original: Callable[..., str | None]) -> Callable[..., str | None]:
    """xarray's ``get_dask_scheduler`` that answers ``None`` while Dask is not imported (see
    the module's docstring) and asks ``original`` once it is."""

    @functools.wraps(original)
    def get_dask_scheduler(get: Any = None, collection: Any = None) -> str | None:
        if "dask" not in sys.modules:
            return None
        return original(get, collection)

    get_dask_scheduler.deferred = True  # type: ignore[attr-defined]
    return get_dask_scheduler


def defer() -> None:
    """Make xarray's duck-array checks for Dask and Pint import neither (see the module's
    docstring); a library already in xarray's cache is left as it is, one already imported is
    answered for by xarray's own entry at the first check. Idempotent."""
    try:
        from xarray.namedarray import pycompat, utils
        cache: dict[Any, Any] = pycompat._cached_duck_array_modules
        real = pycompat.DuckArrayModule
        check: Callable[[object], bool] = utils.is_dask_collection
    except (ImportError, AttributeError):  # pragma: no cover (another xarray)
        return
    if not isinstance(cache, dict):  # pragma: no cover (another xarray)
        return
    for name in DEFERRED:
        cache.setdefault(name, _Deferred(name, cache, real))
    if not getattr(check, "deferred", False):
        utils.is_dask_collection = _collection_check(check)  # type: ignore[assignment]
    try:
        from xarray.backends import locks, writers
    except ImportError:  # pragma: no cover (another xarray)
        return
    for module in (locks, writers):  # the function and the name writers imported
        lookup = getattr(module, "get_dask_scheduler", None)
        if callable(lookup) and not getattr(lookup, "deferred", False):
            setattr(module, "get_dask_scheduler", _scheduler_lookup(lookup))  # noqa: B010
