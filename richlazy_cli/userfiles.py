"""Files a user names (data files, result files, job files): refused unless they are regular
files, and ``.npz`` archives read without trusting their headers.

A path given on the command line or in a job file may name anything: a FIFO (whose
``open()`` blocks until a writer appears), a device, a folder. :func:`regular_file` looks
with ``stat`` first and :func:`open_regular` opens with ``O_NONBLOCK`` and checks the open
file, so neither ever blocks, and anything that is not a regular file is one line of bad
input (docs/engine.md, "Hostile input").

:func:`read_npz` reads the members of an ``.npz`` archive that a model needs, and only those:
it reads each member's ``.npy`` header first (dtype and shape) and refuses one whose declared
size is larger than the member's bytes in the archive allow, or than the memory that is
available, before anything is allocated; a plain ``.npy`` file, a pickled member and a
damaged archive are refused with one line too.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from .errors import UNREADABLE, BadInput

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` when it names a regular file (links followed); BadInput otherwise.

    ``what`` names the file in the message (``"data file"``, ``"job file"``). Only ``stat``
    is called: a FIFO is refused without being opened.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{what} {path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")
    return path


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], what: str) -> Iterator[IO[bytes]]:
    """``path`` opened for reading in binary, when it is a regular file; BadInput otherwise.

    Opened with ``O_NONBLOCK`` (so that a FIFO put in its place after a :func:`regular_file`
    check cannot block either), checked with ``fstat``, then read normally.
    """
    path = regular_file(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise BadInput(f"{what} {path}: cannot be read ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BadInput(f"{what} {path} is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        # An interrupt inside fdopen may land after the file object took the descriptor and
        # closed it; the EBADF of a second close must not replace the interrupt (it would be
        # read as "not a readable file" and reported as bad input).
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    with fh:
        yield fh


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The text of a regular file (UTF-8); BadInput when it is anything else or unreadable."""
    with open_regular(path, what) as fh:
        try:
            return fh.read().decode()
        except UnicodeDecodeError:
            raise BadInput(f"{what} {path} is not UTF-8 text") from None
        except OSError as exc:
            raise BadInput(f"{what} {path}: cannot be read ({exc.strerror})") from None


def available_memory() -> int:
    """Bytes this process may still allocate: ``MemAvailable`` of ``/proc/meminfo`` (physical
    memory elsewhere), less than that under an address-space limit (``ulimit -v``)."""
    free = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    if not free:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            free = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        used = 0
        with contextlib.suppress(OSError, ValueError):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
        room = max(int(soft) - used, 0)
        free = min(free, room) if free else room
    return free


def read_npz(
    path: str | os.PathLike[str],
    what: str,
    required: Iterable[str],
    optional: Iterable[str] = (),
    dtype: type | None = np.float64,
) -> dict[str, np.ndarray]:
    """The ``required`` and present ``optional`` arrays of the ``.npz`` archive ``path``.

    Each member's ``.npy`` header is read first: a member whose dtype holds Python objects,
    or whose declared shape needs more bytes than the member holds in the archive (for an
    uncompressed one) or than :func:`available_memory` (for a compressed one), is refused
    before anything is allocated. Other members are never read. With ``dtype`` the arrays are
    converted (a non-numeric member is refused). Any failure is one line of BadInput that
    starts with ``what`` (e.g. ``"parameter data"``).
    """
    with open_regular(path, what) as fh:
        return read_npz_from(fh, os.fspath(path), what, required, optional, dtype)


def read_npz_from(
    fh: IO[bytes],
    name: str,
    what: str,
    required: Iterable[str],
    optional: Iterable[str] = (),
    dtype: type | None = np.float64,
) -> dict[str, np.ndarray]:
    """:func:`read_npz` of an archive already open (a file, or its bytes in an
    ``io.BytesIO``); ``name`` is the file's name in messages."""
    required, optional = list(required), list(optional)
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        with contextlib.suppress(OSError):
            fh.seek(0)
            if fh.read(6) == b"\x93NUMPY":
                raise BadInput(f"{what}: {name!r} is a single .npy array, not an .npz "
                               "archive of named arrays (save it with numpy.savez)"
                               ) from None
        raise BadInput(f"{what}: {name!r} is not a readable .npz archive") from None
    with archive:
        members = {m.filename[:-4]: m for m in archive.infolist()
                   if m.filename.endswith(".npy")}
        missing = [k for k in required if k not in members]
        if missing:
            raise BadInput(f"{what}: {name!r} is missing array {missing[0]!r} "
                           f"(has: {', '.join(sorted(members)) or 'none'})")
        out: dict[str, np.ndarray] = {}
        budget = available_memory()
        for key in [*required, *(k for k in optional if k in members)]:
            out[key] = _member(archive, members[key], f"{what}: {key} in {name!r}",
                               budget, dtype)
    return out


_MEMBER_ERRORS: tuple[type[BaseException], ...] = (*UNREADABLE, MemoryError, OverflowError)
"""What reading one member can raise when the archive is damaged or its header is absurd."""


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, budget: int,
            dtype: type | None) -> np.ndarray:
    try:
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, fortran, kind = np.lib.format.read_array_header_1_0(member)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, kind = np.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError(f"unknown .npy version {version}")
            if kind.hasobject:
                raise BadInput(f"{where} holds Python objects (pickled); only numeric arrays "
                               "are read")
            nbytes = math.prod(shape) * kind.itemsize
            stored = info.file_size
            if info.compress_type == zipfile.ZIP_STORED and nbytes > stored:
                raise BadInput(f"{where}: its header declares shape {tuple(shape)} "
                               f"({nbytes:,} bytes) but the member holds {stored:,} bytes")
            if budget and nbytes * (2 if dtype is not None else 1) > budget:
                raise BadInput(f"{where}: its header declares shape {tuple(shape)} "
                               f"({nbytes:,} bytes), more than the {budget:,} bytes of memory "
                               "available")
            count = math.prod(shape)
            data = member.read(nbytes)
            if len(data) != nbytes:
                raise ValueError("truncated member")
            arr = np.frombuffer(data, dtype=kind, count=count)
            arr = arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)
            if dtype is not None:
                if arr.dtype.kind not in "biuf":
                    raise BadInput(f"{where} has dtype {arr.dtype}, not numbers")
                return np.array(arr, dtype=dtype)
            return arr.copy()
    except BadInput:
        raise
    except _MEMBER_ERRORS as exc:
        raise BadInput(f"{where} cannot be read ({type(exc).__name__})") from None
