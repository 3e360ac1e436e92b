"""What a sweep is, as one hash: model, action, parameters, grid and the contents of its inputs.

A parameter of kind ``path`` (a data file, such as the diagonal model's ``data``) is recorded
by its path, size and SHA-256 (:func:`input_record`, the ``inputs`` attribute of a result and
of a parts folder's manifest), so that a file replaced between two runs of one sweep (a resume,
two shards) is noticed instead of mixing results from two data sets.

The **fingerprint** is the SHA-256 of the canonical JSON (sorted keys, no spaces) of
``{model, action, params, grid, inputs}`` with each input reduced to its size and hash (the
content, not where it lies). Every part file carries its sweep's fingerprint; a part whose
fingerprint differs from its folder's manifest belongs to another sweep and is never assembled.
The shard is not part of it: the shards of one sweep share one fingerprint, which
``store merge`` compares.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..params import jsonable
from ..userfiles import open_regular

_BLOCK = 1 << 20


Signature = tuple[int, int, int, int, int]
"""``(device, inode, size, mtime_ns, ctime_ns)`` of a file: any write to it, or a file put
in its place, changes it (the change time cannot be set back by a user)."""
_SEEN: dict[str, tuple[Signature, str]] = {}
"""The signature of every input file this process hashed, with the hash it had then."""


def _signature(info: os.stat_result) -> Signature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def sha256_file(path: Path) -> tuple[int, str]:
    """``(size in bytes, hex SHA-256)`` of a file, read in 1 MiB blocks.

    The file's signature is remembered with the hash when it did not change while being
    read, for :class:`InputGuard`.
    """
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, "input file") as fh:  # a FIFO or a device: BadInput, no block
        before = _signature(os.fstat(fh.fileno()))
        while block := fh.read(_BLOCK):
            digest.update(block)
            size += len(block)
        after = _signature(os.fstat(fh.fileno()))
    if before == after:
        _SEEN[str(path)] = (after, digest.hexdigest())
    return size, digest.hexdigest()


class InputChanged(BadInput):
    """An input file changed while a run was using it (the finished parts are kept)."""


class InputGuard:
    """Re-verifies a run's input files before each part is written (docs/engine.md).

    A part is stamped with the sweep's fingerprint, which holds the inputs' hashes; the guard
    makes that stamp true: before a part is written, each input file's signature
    (:data:`Signature`) is compared with the one it had when it was hashed at the start, and a
    file whose signature differs is hashed again. A changed file (other contents, or modified
    meanwhile even if restored since: the chunk may have read either) stops the run with
    :class:`InputChanged` before the part is written, so no part computed from other contents
    ever carries the fingerprint, and a later ``--resume`` assembles only parts computed from
    the recorded contents. Checking an unchanged file costs one ``stat``.
    """

    def __init__(self, recorded: Sequence[Mapping[str, Any]]) -> None:
        self.entries = [(str(e["path"]), str(e.get("sha256"))) for e in recorded]
        self.seen = {path: _SEEN.get(path) for path, _ in self.entries}

    def check(self, kept: str) -> None:
        """InputChanged when an input file is not as it was hashed; ``kept`` says what the
        run keeps (for the message)."""
        for path, digest in self.entries:
            seen = self.seen[path]
            try:
                now = _signature(os.stat(path))
            except OSError:
                self._refuse(path, "it is gone", kept)
            if seen is not None and seen[0] == now and seen[1] == digest:
                continue
            try:
                _, current = sha256_file(Path(path))
            except (OSError, BadInput):
                self._refuse(path, "it is gone", kept)
            if current != digest:
                self._refuse(path, "its SHA-256 differs", kept)
            if seen is not None:  # same contents now, but written to meanwhile
                self._refuse(path, "written to: the same contents now, but a chunk computed "
                             "meanwhile may have read others", kept)
            self.seen[path] = _SEEN.get(path)  # hashed whole now: its signature is known

    @staticmethod
    def _refuse(path: str, what: str, kept: str) -> None:
        raise InputChanged(
            f"input file {path} changed during the run ({what}); {kept}: restore it and rerun with "
            "--resume, or rerun with --force to start over with the new contents"
        )


def path_values(model: Any, base: Mapping[str, Any], grid: Any) -> list[tuple[str, str]]:
    """Every ``(parameter, path)`` a sweep reads: fixed path parameters and swept ones."""
    found: list[tuple[str, str]] = []
    swept = set(grid.names)
    for param in model.params:
        if param.kind != "path":
            continue
        if param.name in swept:
            dim = next(d for d in grid.dims if d.name == param.name)
            found.extend((param.name, str(v)) for v in dim.values if v)
        elif base.get(param.name):
            found.append((param.name, str(base[param.name])))
    return found


def input_record(model: Any, base: Mapping[str, Any], grid: Any) -> list[dict[str, Any]]:
    """``[{param, path, size, sha256}, ...]`` of every input file of a sweep, in order."""
    record = []
    for name, path in path_values(model, base, grid):
        try:
            size, digest = sha256_file(Path(path))
        except OSError as exc:
            raise BadInput(f"parameter {name}: cannot read {path!r} ({exc.strerror})") from None
        record.append({"param": name, "path": path, "size": size, "sha256": digest})
    return record


def fingerprint(
    model: str,
    action: str,
    params: Mapping[str, Any],
    grid: Mapping[str, Any],
    inputs: Sequence[Mapping[str, Any]],
) -> str:
    """The sweep fingerprint (module doc): hex SHA-256 of its canonical description."""
    contents = [{"param": i["param"], "size": i["size"], "sha256": i["sha256"]} for i in inputs]
    text = json.dumps(
        {
            "model": model,
            "action": action,
            "params": jsonable(dict(params)),
            "grid": dict(grid),
            "inputs": contents,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint_as_written(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> str | None:
    """The fingerprint ``recorded`` should carry if it is the sweep ``now``, written under the
    names ``recorded`` holds (a family's older parameter names perhaps: docs/engine.md,
    "Records"), or None when it is not that sweep under any names.

    ``recorded`` holds ``model``, ``action``, ``params`` and ``grid`` of a result or parts
    folder, ``now`` is a manifest (the same keys and ``inputs``). It is ``now``'s sweep when
    its names as named now (:meth:`.Model.as_named_now`) give ``now``'s parameters and grid;
    the fingerprint returned is then its own names hashed with ``now``'s inputs, so that a
    ``recorded`` fingerprint equal to it says the input files hold the contents it was
    computed from, and another says they changed. For a file written under today's names
    this is :func:`fingerprint` of ``now`` itself; a sweep started under older names is so
    resumed, continued and merged, and its parts keep the fingerprint they carry
    (:class:`.parts.PartsFolder`).
    """
    from ..models.base import get_model

    if (recorded.get("model"), recorded.get("action")) != (now.get("model"), now.get("action")):
        return None
    params, grid = recorded.get("params"), recorded.get("grid")
    if not isinstance(params, dict) or not isinstance(grid, dict):
        return None
    try:
        model = get_model(str(now["model"]))
    except BadInput:
        return None
    action = str(now["action"])
    if (model.as_named_now(action, params) != now.get("params")
            or model.as_named_now(action, grid, swept=True) != now.get("grid")):
        return None
    try:
        return fingerprint(model.name, action, params, grid, now.get("inputs", []))
    except (KeyError, TypeError):
        return None


def changed_inputs(recorded: Sequence[Mapping[str, Any]]) -> list[str]:
    """The recorded input files whose size or SHA-256 differ now (or that are gone)."""
    changed = []
    for entry in recorded:
        try:
            size, digest = sha256_file(Path(entry["path"]))
        except (OSError, BadInput):
            changed.append(f"{entry['path']} (gone)")
            continue
        if size != entry.get("size") or digest != entry.get("sha256"):
            changed.append(str(entry["path"]))
    return changed


def check_inputs_unchanged(recorded: Sequence[Mapping[str, Any]], when: str) -> None:
    """BadInput naming the input files that changed since they were recorded."""
    changed = changed_inputs(recorded)
    if changed:
        raise BadInput(
            f"input file {', '.join(changed)} changed {when} (size or SHA-256 differ); "
            "restore it, or rerun with --force to start over with the new contents"
        )
