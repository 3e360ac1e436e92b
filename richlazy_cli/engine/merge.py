"""Merging shard files (``richlazy store merge``) into one result.

Inputs are shard files (variables over ``point``, the shard's points only) or results over
the grid, in any mix. Every input must be a richlazy sweep result (with a ``status`` variable
and readable ``params`` and ``grid``) of the same model, action, parameters and grid, computed
from the same input files (equal ``inputs`` sizes and SHA-256, hence equal ``fingerprint``);
a shard file must hold exactly the points of its ``shard`` attribute; a point computed in two
inputs must carry identical status and data (bitwise, NaN equal to NaN). Anything else is a
BadInput and nothing is written. The merge holds the output's lock (:mod:`.lock`) like a
sweep, and its ``history`` lists the shards' runs followed by the merge itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from ..errors import BadInput
from ..models.base import get_model
from .assemble import merge_chunks, result_as_chunk
from .chunk import ChunkResult
from .fingerprint import fingerprint
from .grid import Grid, parse_grid
from .lock import output_lock
from .output import history_entry, result_as_named_now
from .parts import remove_stale
from .store import check_writable, json_attr, open_result, provenance, write_result


def _readable(path: Path, ds: xr.Dataset) -> None:
    for key in ("params", "grid"):
        value = json_attr(ds, key)
        if not isinstance(value, dict):
            raise BadInput(f"{path}: attribute {key} is missing or not valid JSON")
    if "status" not in ds:
        raise BadInput(f"{path} has no status variable: not a sweep result")


def _inputs(ds: xr.Dataset) -> list[dict[str, Any]]:
    return [
        {"param": i.get("param"), "size": i.get("size"), "sha256": i.get("sha256")}
        for i in json_attr(ds, "inputs", []) or []
    ]


def _points(path: Path, ds: xr.Dataset, grid: Grid) -> ChunkResult:
    """The computed points of one input (a shard file or a result over the grid)."""
    try:
        return result_as_chunk(ds, grid)
    except BadInput as exc:
        raise BadInput(f"{path}: {exc}") from None


def merge_results(out: Path, inputs: Sequence[Path], force: bool, command: list[str]) -> xr.Dataset:
    """Merge ``inputs`` into ``out``; return the merged Dataset."""
    if not inputs:
        raise BadInput("store merge needs at least one input file")
    out = Path(out)
    if any(Path(p).resolve() == out.resolve() for p in inputs):
        raise BadInput(f"{out} is also an input; write the merge to a new file")
    check_writable(out, force)
    with output_lock(out):
        remove_stale(out)
        return _merge(out, inputs, force, command)


def _merge(out: Path, inputs: Sequence[Path], force: bool, command: list[str]) -> xr.Dataset:
    check_writable(out, force)  # again, now that no other run can be writing it
    datasets = [open_result(Path(p)) for p in inputs]
    for path, ds in zip(inputs, datasets, strict=True):
        _readable(Path(path), ds)
    datasets = [result_as_named_now(ds) for ds in datasets]  # shards written before, or now
    first = datasets[0]
    for path, ds in zip(inputs[1:], datasets[1:], strict=True):
        for key in ("model", "action"):
            if ds.attrs.get(key) != first.attrs.get(key):
                raise BadInput(f"{path}: {key} differs from {inputs[0]}")
        for key in ("params", "grid"):
            if json_attr(ds, key) != json_attr(first, key):
                raise BadInput(f"{path}: {key} differ from {inputs[0]}")
        if _inputs(ds) != _inputs(first):
            raise BadInput(
                f"{path}: computed from other input files than {inputs[0]} (their sizes or "
                "SHA-256 differ); rerun the shards with the same files"
            )
    model = get_model(str(first.attrs["model"]))
    specs = json_attr(first, "grid", {}) or {}
    grid = parse_grid(model, list(specs.items()))
    assembler = merge_chunks(model, grid, (_points(Path(p), ds, grid)
                                           for p, ds in zip(inputs, datasets, strict=True)))
    params = json_attr(first, "params", {})
    attrs = provenance(model.name, str(first.attrs["action"]), params, specs, command)
    recorded = json_attr(first, "inputs", []) or []
    attrs["inputs"] = json.dumps(recorded)
    attrs["fingerprint"] = fingerprint(model.name, str(first.attrs["action"]), params, specs,
                                       recorded)
    history: list[Any] = []
    for ds in datasets:
        history.extend(json_attr(ds, "history", []) or [])
    history.append(history_entry("merge", command))
    attrs["history"] = json.dumps(history)
    merged = assembler.dataset(attrs)
    write_result(merged, out, force=force)
    return merged
