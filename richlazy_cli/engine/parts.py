"""The sidecar folder ``OUT.h5.parts/`` that makes a sweep crash-safe and resumable.

Each finished chunk is written there atomically as ``part-NNNNNN.npz`` (uncompressed numpy
arrays: the chunk's data, flat grid indices, status and timing, with a JSON header for names,
dimensions and attributes), next to ``manifest.json``, which pins what the sweep computes
(model, action, parameters, grid, shard). A killed sweep loses at most the chunks in flight;
``--resume`` reads the parts back, and later parts override earlier ones for the same point
(that is how ``--retry-failed`` replaces failures).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..models.params import BadInput, jsonable
from .chunk import ChunkResult
from .store import atomic_write

MANIFEST = "manifest.json"


def parts_path(out: Path) -> Path:
    return Path(str(out) + ".parts")


class PartsFolder:
    """Finished chunks of one sweep, on disk."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._next = self._last_sequence() + 1

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, manifest: dict[str, Any]) -> PartsFolder:
        path = Path(path)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir()
        text = json.dumps(manifest, sort_keys=True, indent=1)
        atomic_write(path / MANIFEST, lambda tmp: tmp.write_text(text))
        return cls(path, manifest)

    @classmethod
    def open(cls, path: Path, manifest: dict[str, Any]) -> PartsFolder:
        """Open an existing folder, checking it belongs to the same sweep."""
        path = Path(path)
        if not path.is_dir():
            raise BadInput(f"{path}: no parts folder to resume from")
        try:
            found = json.loads((path / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError):
            raise BadInput(
                f"{path} is corrupt (no readable {MANIFEST}); rerun with --force to start over"
            ) from None
        for key in ("model", "action", "params", "grid", "shard"):
            if found.get(key) != manifest.get(key):
                raise BadInput(
                    f"{path} belongs to a different sweep ({key} differs); "
                    "rerun with the same options or use --force to start over"
                )
        return cls(path, found)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    # -- parts ----------------------------------------------------------------------------
    def _files(self) -> list[Path]:
        return sorted(self.path.glob("part-*.npz"))

    def _last_sequence(self) -> int:
        files = self._files()
        if not files:
            return 0
        return max(int(f.stem.split("-")[1]) for f in files)

    def write(self, result: ChunkResult) -> Path:
        """Write one finished chunk atomically (an uncompressed .npz: fast to write and read)."""
        target = self.path / f"part-{self._next:06d}.npz"
        self._next += 1
        arrays: dict[str, np.ndarray] = {
            "flat_index": result.indices,
            "status": result.status,
            "elapsed": result.elapsed,
        }
        meta: dict[str, Any] = {"errors": {str(k): v for k, v in result.errors.items()}}
        if result.data is not None:
            meta["vars"] = {}
            meta["coords"] = {}
            for name, item in result.data.data_vars.items():
                arrays[f"var/{name}"] = item.values
                meta["vars"][name] = {"dims": list(item.dims), "attrs": jsonable(item.attrs)}
            for name, item in result.data.coords.items():
                arrays[f"coord/{name}"] = item.values
                meta["coords"][name] = {"dims": list(item.dims), "attrs": jsonable(item.attrs)}
        arrays["meta"] = np.array(json.dumps(meta))

        def dump(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, allow_pickle=False, **arrays)

        atomic_write(target, dump)
        return target

    def read(self) -> Iterator[ChunkResult]:
        """Every stored chunk, oldest first. A corrupt part is a BadInput."""
        for file in self._files():
            try:
                with np.load(file, allow_pickle=False) as npz:
                    meta = json.loads(str(npz["meta"]))
                    indices = np.asarray(npz["flat_index"], dtype=np.int64)
                    status = np.asarray(npz["status"], dtype=np.int8)
                    elapsed = np.asarray(npz["elapsed"], dtype=float)
                    data = None
                    if "vars" in meta:
                        coords = {
                            k: xr.Variable(v["dims"], npz[f"coord/{k}"], v["attrs"])
                            for k, v in meta["coords"].items()
                        }
                        data = xr.Dataset(
                            {
                                k: xr.Variable(v["dims"], npz[f"var/{k}"], v["attrs"])
                                for k, v in meta["vars"].items()
                            },
                            coords=coords,
                        )
                errors = {int(k): v for k, v in meta["errors"].items()}
            except Exception:
                raise BadInput(
                    f"{file} is corrupt; delete it to recompute its points, or use --force"
                ) from None
            yield ChunkResult(indices, data, status, elapsed, errors)

    def status(self, size: int) -> np.ndarray:
        """Latest status of every point (-1 where no part has it).

        Reads only each part's index and status arrays (``.npz`` members load separately), not
        its data, which :meth:`read` loads once when the sweep is assembled.
        """
        status = np.full(size, -1, dtype=np.int8)
        for file in self._files():
            try:
                with np.load(file, allow_pickle=False) as npz:
                    status[np.asarray(npz["flat_index"], dtype=np.int64)] = npz["status"]
            except Exception:
                raise BadInput(
                    f"{file} is corrupt; delete it to recompute its points, or use --force"
                ) from None
        return status
