"""Per-variable checksums of a result file: written at the final write, checked by
``richlazy store verify`` (docs/engine.md, "Result files").

When a result is written (:func:`.store.write_result`), the file is read back and each of its
variables (every HDF5 dataset that is a netCDF variable, coordinates included) gets the SHA-256
of its values as they lie in the file: the digest of ``dtype, shape`` followed by the raw bytes
of the decoded (decompressed) array in C order; a string variable is hashed element by element,
each element's UTF-8 bytes preceded by their length. The digests are stored together as the
global attribute ``checksums`` (JSON: ``{"algorithm": "sha256", "variables": {name: {"shape":
[...], "sha256": hex}}}``), which also records the set of variables written. ``store verify``
recomputes them: a variable whose digest differs (a bit flipped, a value edited, zeroed), that
cannot be read (a flipped bit in a compressed chunk), that is gone, or that was added since is
a problem naming the variable. A variable whose shape differs from the recorded one belongs to a
subset (``ds.isel``, ``ncks -d``) and is not compared. A file without the attribute (written
before checksums were recorded) is verified without them, with a note.

Why SHA-256 and not HDF5's ``fletcher32`` filter: the filter is recomputed by the HDF5 library
whenever a dataset is rewritten, so it catches bits damaged on disk but not a value changed
through a library (a variable scaled or zeroed with h5py); it also forces every small variable
into a chunked layout. The digest pass reads the just-written file back, from the page cache;
``bench/verify.py`` prints its cost on a 1 GB file beside the write without it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ATTRIBUTE = "checksums"
"""The global attribute that holds the digests."""
ALGORITHM = "sha256"
_SLAB_BYTES = 64 << 20
"""Bytes read at a time when hashing a variable."""
_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
_NON_COORD = "_nc4_non_coord_"


class Unreadable(Exception):
    """A variable's data cannot be read back (a damaged chunk)."""


def _datasets(group: Any) -> Iterator[tuple[str, Any]]:
    """``(name, dataset)`` of every netCDF variable of an open h5py file (not the bare
    dimension scales h5netcdf writes for dimensions without a coordinate)."""
    import h5py

    found: list[tuple[str, Any]] = []

    def visit(name: str, item: Any) -> None:
        if not isinstance(item, h5py.Dataset):
            return
        label = item.attrs.get("NAME")
        if isinstance(label, bytes) and label.startswith(_DIMENSION_ONLY):
            return
        base = name.rsplit("/", 1)
        leaf = base[-1][len(_NON_COORD):] if base[-1].startswith(_NON_COORD) else base[-1]
        found.append(("/".join([*base[:-1], leaf]), item))

    group.visititems(visit)
    yield from sorted(found, key=lambda pair: pair[0])


def digest(dataset: Any) -> str:
    """Hex SHA-256 of an h5py dataset's values (module doc); :class:`Unreadable` when HDF5
    cannot decode them."""
    h = hashlib.sha256()
    dtype = dataset.dtype
    h.update(f"{dtype.str}{tuple(dataset.shape)}".encode())
    try:
        if dataset.shape is None or dataset.size == 0:
            return h.hexdigest()
        if dtype.kind == "O" or dataset.ndim == 0:  # variable-length strings, or a scalar
            values = np.asarray(dataset[()], dtype=object if dtype.kind == "O" else dtype)
            if dtype.kind != "O":
                h.update(np.ascontiguousarray(values).tobytes())
                return h.hexdigest()
            for value in values.reshape(-1).tolist():
                raw = value if isinstance(value, bytes) else str(value).encode()
                h.update(len(raw).to_bytes(8, "little"))
                h.update(raw)
            return h.hexdigest()
        row = max(int(np.prod(dataset.shape[1:], dtype=np.int64)) * dtype.itemsize, 1)
        step = max(_SLAB_BYTES // row, 1)
        for start in range(0, dataset.shape[0], step):
            h.update(np.ascontiguousarray(dataset[start:start + step]).tobytes())
    except (OSError, RuntimeError, ValueError) as exc:  # h5py: a chunk that does not decode
        raise Unreadable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    return h.hexdigest()


def compute(path: Path) -> dict[str, Any]:
    """The ``checksums`` record of the file at ``path`` (module doc)."""
    import h5py

    with h5py.File(path, "r") as fh:
        return {"algorithm": ALGORITHM,
                "variables": {name: {"shape": list(item.shape or ()), "sha256": digest(item)}
                              for name, item in _datasets(fh)}}


def add(path: Path) -> None:
    """Read the file at ``path`` back and store its checksums in it (the final write)."""
    import h5py

    record = compute(path)
    with h5py.File(path, "r+") as fh:
        fh.attrs[ATTRIBUTE] = json.dumps(record, sort_keys=True, separators=(",", ":"))


def check(path: Path) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` of the file's data against its recorded checksums (module
    doc). The file must be a readable HDF5 file."""
    import h5py

    problems: list[str] = []
    with h5py.File(path, "r") as fh:
        text = fh.attrs.get(ATTRIBUTE)
        found = dict(_datasets(fh))
        if text is None:
            for name, item in found.items():  # every variable must at least decode
                try:
                    digest(item)
                except Unreadable as exc:
                    problems.append(f"variable {name} cannot be read ({exc})")
            return problems, ["no checksums (a file written before richlazy recorded them): "
                              "the data are checked for consistency only"]
        try:
            record = json.loads(text.decode() if isinstance(text, bytes) else str(text))
            recorded = record["variables"]
            if record.get("algorithm") != ALGORITHM or not isinstance(recorded, dict):
                raise ValueError
        except (ValueError, TypeError, KeyError, AttributeError):
            return [f"attribute {ATTRIBUTE} is not a checksum record"], []
        for name in sorted(set(recorded) - set(found)):
            problems.append(f"variable {name} is missing (it was written, with a checksum)")
        for name in sorted(set(found) - set(recorded)):
            problems.append(f"variable {name} has no checksum (added after the write)")
        for name in sorted(set(found) & set(recorded)):
            item, want = found[name], recorded[name]
            if not isinstance(want, dict):
                problems.append(f"variable {name}: its checksum entry is malformed")
                continue
            try:
                have = digest(item)
            except Unreadable as exc:
                problems.append(f"variable {name} cannot be read ({exc})")
                continue
            if list(item.shape or ()) != want.get("shape"):
                continue  # a subset of the written file (module doc)
            if have != want.get("sha256"):
                problems.append(f"variable {name} differs from its checksum (its data changed "
                                "after the write)")
    return problems, []
