"""One writer per output: an advisory lock held for a whole run (sweep, resume or merge).

The lock is the file ``OUT.h5.lock`` beside the output, locked with ``flock(LOCK_EX | LOCK_NB)``
and holding the owner's ``pid`` and ``host`` as JSON. It lives beside the output rather than
inside ``OUT.h5.parts/`` because that folder is what the runs it protects create, replace
(``--force``) and remove (clean-up): a lock inside it would vanish with it, and two runs
could then each lock a different folder's file and both believe they are alone. The lock file
itself is removed only by its holder, while it still holds it; whoever takes a lock checks
after locking that the path still names the file it locked (same device and inode) and starts
over otherwise, so a run that opened the file just before its removal cannot keep a lock on an
orphan.

Safety:

* The kernel releases a ``flock`` when its holder dies (SIGKILL included), so a lock left by a
  dead process is free: the next run takes it over and rewrites the owner. The pid and host in
  the file are for the message only ("in progress (pid 123, host node7)").
* On Linux, ``flock`` on NFS (v3 with lockd, v4) is carried out as a POSIX byte-range lock on
  the server, so runs on different machines exclude each other; Lustre does the same when
  mounted with ``-o flock`` and GPFS always. Where a file system refuses locks (Lustre with
  ``noflock``, ``ENOLCK``/``EOPNOTSUPP``), the lock falls back to creating the file with
  ``O_EXCL``, which NFSv3+ and the cluster file systems perform atomically: then a lock whose
  owner is a dead process *on this host* is taken over, and one from another host is reported
  with the instruction to remove it if that run is gone.
* HDF5's own file locking (``HDF5_USE_FILE_LOCKING``) is unrelated and may stay off.
* The lock file never follows a link: it is opened with ``O_NOFOLLOW`` (and ``O_NONBLOCK``,
  so a FIFO cannot block), and written only once it is known to be a regular file with one
  link. A symbolic link, a hard link to another file, a FIFO, a device or a folder under the
  lock's name is refused with one line (exit 2) and left as it is: a link planted beside the
  output can never have its target overwritten (docs/engine.md, "Hostile input").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import BadInput, Busy
from .store import check_name_length, os_error_message

LOCK_SUFFIX = ".lock"
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS}


def lock_path(out: Path) -> Path:
    """The lock file of the output ``out``."""
    return Path(str(out) + LOCK_SUFFIX)


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname()}


_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _read_owner(path: Path) -> dict[str, Any]:
    """The owner recorded in a lock file; ``{}`` when it is unreadable or not a lock file."""
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        found = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return found if isinstance(found, dict) else {}


def _not_a_lock(path: Path, what: str) -> BadInput:
    return BadInput(f"{path} is {what}, not a lock file of richlazy's; it is left as it is: "
                    "remove it, or choose another output name")


def _check_lock_file(path: Path, fd: int) -> None:
    """BadInput unless the open ``fd`` is a regular file with one link (see the module doc)."""
    info = os.fstat(fd)
    if stat.S_ISFIFO(info.st_mode):
        raise _not_a_lock(path, "a FIFO (named pipe)")
    if stat.S_ISDIR(info.st_mode):
        raise _not_a_lock(path, "a folder")
    if not stat.S_ISREG(info.st_mode):
        raise _not_a_lock(path, "a device or other special file")
    if info.st_nlink != 1:
        raise _not_a_lock(path, f"a hard link ({info.st_nlink} names for one file)")


def _busy(out: Path, owner: dict[str, Any]) -> Busy:
    who = f"pid {owner.get('pid', '?')}, host {owner.get('host', '?')}"
    return Busy(f"{out}: another run is in progress ({who}); wait for it to finish")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


class OutputLock:
    """An exclusive lock on one output; use as a context manager (see the module doc)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.path = lock_path(self.out)
        self.fd: int | None = None
        self.exclusive_file = False  # the O_EXCL fall-back holds the lock by the file alone

    def acquire(self) -> None:
        check_name_length(self.out)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o666)
            except OSError as exc:
                folder = self.path.parent
                if not folder.is_dir():
                    raise BadInput(f"output folder {folder} does not exist") from None
                if exc.errno == errno.ELOOP or self.path.is_symlink():
                    raise _not_a_lock(self.path, "a symbolic link") from None
                if exc.errno == errno.EISDIR:
                    raise _not_a_lock(self.path, "a folder") from None
                why = os_error_message(exc) or exc.strerror
                raise BadInput(f"{self.path}: cannot create the lock file ({why})") from None
            try:
                _check_lock_file(self.path, fd)
            except BaseException:
                os.close(fd)
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise _busy(self.out, _read_owner(self.path)) from None
            except OSError as exc:
                os.close(fd)
                if exc.errno in _NO_LOCKS:
                    self._acquire_exclusive_file()
                    return
                raise
            try:
                same = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # removed (or replaced) by its previous holder meanwhile: again
                os.close(fd)
                continue
            self.fd = fd
            self._write_owner(fd)
            return

    def _write_owner(self, fd: int) -> None:
        data = json.dumps(_owner()).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def _acquire_exclusive_file(self) -> None:
        """Fall-back where ``flock`` is refused: the lock is the existence of the file.

        The file is made whole (owner written) under a temporary name and linked into place,
        which fails when the name exists: a lock file is never seen half-written. An empty
        file is the probe of an ``flock`` attempt and is no lock.
        """
        with contextlib.suppress(FileNotFoundError):
            info = self.path.lstat()
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise _not_a_lock(self.path, "a link or special file")
            if info.st_size == 0:
                os.unlink(self.path)
        owner = _read_owner(self.path)
        if owner:
            mine = owner.get("host") == socket.gethostname()
            if not (mine and not _pid_alive(int(owner.get("pid", 0)))):
                raise _busy(self.out, owner)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # a dead process of this host left it
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # never write through whatever is under the temporary name
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o666)
        try:
            os.write(fd, json.dumps(_owner()).encode())
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            raise _busy(self.out, _read_owner(self.path)) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.exclusive_file = True

    def release(self) -> None:
        if self.fd is None and not self.exclusive_file:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # while still held: see the module doc
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
        self.fd = None
        self.exclusive_file = False

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[OutputLock]:
    """Hold the single-writer lock of ``out`` for the body; BadInput when another run has it."""
    lock = OutputLock(out)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()
