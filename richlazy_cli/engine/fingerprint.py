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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..models.params import jsonable
from ..userfiles import open_regular

_BLOCK = 1 << 20


def sha256_file(path: Path) -> tuple[int, str]:
    """``(size in bytes, hex SHA-256)`` of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    size = 0
    with open_regular(path, "input file") as fh:  # a FIFO or a device: BadInput, no block
        while block := fh.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


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
