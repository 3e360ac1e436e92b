"""Merging shard files (``richlazy store merge``) into one result.

Every input must be a richlazy result of the same model, action, parameters and grid; a point
computed in two inputs must carry identical data (bitwise, NaN equal to NaN). Anything else is a
BadInput and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import xarray as xr

from ..models.base import get_model
from ..models.params import BadInput
from .assemble import merge_chunks, result_as_chunk
from .grid import parse_grid
from .store import check_writable, json_attr, open_result, provenance, write_result


def merge_results(out: Path, inputs: Sequence[Path], force: bool, command: list[str]) -> xr.Dataset:
    """Merge ``inputs`` into ``out``; return the merged Dataset."""
    if not inputs:
        raise BadInput("store merge needs at least one input file")
    out = Path(out)
    if any(Path(p).resolve() == out.resolve() for p in inputs):
        raise BadInput(f"{out} is also an input; write the merge to a new file")
    check_writable(out, force)
    datasets = [open_result(Path(p)) for p in inputs]
    first = datasets[0]
    keys = ("model", "action")
    for path, ds in zip(inputs[1:], datasets[1:], strict=True):
        for key in keys:
            if ds.attrs.get(key) != first.attrs.get(key):
                raise BadInput(f"{path}: {key} differs from {inputs[0]}")
        for key in ("params", "grid"):
            if json_attr(ds, key) != json_attr(first, key):
                raise BadInput(f"{path}: {key} differ from {inputs[0]}")
    model = get_model(str(first.attrs["model"]))
    specs = json_attr(first, "grid", {}) or {}
    grid = parse_grid(model, list(specs.items()))
    for path, ds in zip(inputs, datasets, strict=True):
        if tuple(ds["status"].shape) != grid.shape:
            raise BadInput(f"{path}: the status array does not match the grid")
    assembler = merge_chunks(model, grid, (result_as_chunk(ds, grid) for ds in datasets))
    attrs = provenance(
        model.name, str(first.attrs["action"]), json_attr(first, "params", {}), specs, command
    )
    merged = assembler.dataset(attrs)
    write_result(merged, out, force=force)
    return merged
