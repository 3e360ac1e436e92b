"""richlazy's vocabulary of outcomes: bad input, point statuses and process exit codes.

Each is defined here once and used everywhere else (models, engine, store, report, CLI).

* :class:`BadInput` is a mistake of the user's (a parameter out of range, a malformed job
  file, an unreadable result): the CLI prints its one-line message and exits with
  :attr:`ExitCode.BAD_INPUT`. Anything else that escapes is a bug and exits with
  :attr:`ExitCode.INTERNAL` (the traceback is shown with ``RICHLAZY_DEBUG=1``).
* :class:`Status` is the int8 ``status`` variable of a result file, one value per grid point.
* :class:`ExitCode` is what the ``richlazy`` process returns.
"""

from __future__ import annotations

import enum
import pickle
import zipfile
from typing import Any


class BadInput(ValueError):
    """Invalid user input. The message is one line meant for people."""


class ArgumentTypeError(BadInput, TypeError):
    """An argument of the Python API of the wrong type (``grid="delta=0,1"``, an unknown
    keyword): a ``TypeError``, as Python's own for such a call, and a :class:`BadInput`, whose
    one line names the argument and gives an example (docs/api.md)."""


class ArgumentValueError(BadInput):
    """An argument of the Python API of the right type that cannot be right (an empty path,
    an empty list of grid values): a ``ValueError`` and a :class:`BadInput` (docs/api.md)."""


class Busy(BadInput):
    """The output is locked by another run that is still going: try again later.

    Not a mistake of the input, so the CLI exits with :attr:`ExitCode.BUSY`, which a cron
    wrapper or a retry loop can tell apart from :attr:`ExitCode.BAD_INPUT`.
    """


UNREADABLE: tuple[type[BaseException], ...] = (
    OSError, ValueError, KeyError, TypeError, IndexError, EOFError, zipfile.BadZipFile,
    pickle.UnpicklingError,
)
"""What reading a damaged or foreign file raises (h5py, xarray, NumPy's ``.npz``): bad input
when it is the user's file, unlike any other exception, which is a bug."""


class Status(enum.IntEnum):
    """Outcome of one grid point, stored as int8 in a result's ``status`` variable."""

    MISSING = -1
    """Not computed (yet): another shard's point, or an interrupted run's."""
    OK = 0
    DIVERGED = 1
    """The point ran, but its values became non-finite (or the model declared divergence)."""
    ERROR = 2
    """The model raised for this point; the message is in the ``errors`` attribute."""

    @classmethod
    def failed(cls, status: Any) -> Any:
        """Boolean mask (or bool) of the statuses that count as failures."""
        return (status == cls.DIVERGED) | (status == cls.ERROR)  # type: ignore[operator]


DIVERGENCE_FACTOR = 1e6
"""A training run (two-layer, cnn) diverges when its loss exceeds this multiple of its
initial loss, or is not finite: a loss that large has left the problem whatever its bits."""


class ExitCode(enum.IntEnum):
    """The ``richlazy`` process's exit status."""

    OK = 0
    FAILED_POINTS = 1
    """The run finished, but some points failed (or ``store verify`` found a problem)."""
    BAD_INPUT = 2
    INTERNAL = 3
    """An unexpected error: a bug in richlazy or a model."""
    BUSY = 75
    """Another run holds the output's lock: nothing was done, try later (``EX_TEMPFAIL`` of
    ``sysexits.h``, which mail and cron tools treat as a temporary failure)."""
    INTERRUPTED = 130


def point_counts(status: object) -> dict[str, int]:
    """How many points of a ``status`` array are done, failed and missing, and the total.

    The one count of a result's points, shared by the store (``store ls``/``show``/``verify``),
    the report and the CLI: ``done`` is :attr:`Status.OK`, ``failed`` is
    :meth:`Status.failed`, ``missing`` is :attr:`Status.MISSING` (not computed yet).
    """
    import numpy as np

    values = np.asarray(status)
    return {
        "total": int(values.size),
        "done": int(np.sum(values == Status.OK)),
        "failed": int(np.sum(Status.failed(values))),
        "missing": int(np.sum(values == Status.MISSING)),
    }


class RichlazyDeprecationWarning(DeprecationWarning):
    """An older spelling was given (:func:`richlazy_cli.params.deprecated`); the message names
    the one of now. The command line shows each once, as one line on stderr."""
