"""The sidecar folder ``OUT.h5.parts/`` that makes a sweep crash-safe and resumable.

Each finished chunk is written there atomically as ``part-NNNNNN.rlp`` next to
``manifest.json``, which pins what the sweep computes (model, action, parameters, grid, shard).
A part is a JSON header (names, dtypes, shapes and offsets of the arrays: the chunk's data,
flat grid indices, status and timing; dimensions, attributes and error messages) followed by
the raw arrays, each 64-byte aligned. Writing one is a single pass over the data: no archive
checksum and no intermediate copy, which for a cheap model was a tenth of the sweep's time
with ``.npz``. Reading the status of a part reads only its header and two small arrays.

A killed sweep loses at most the chunks in flight; ``--resume`` reads the parts back, and
later parts override earlier ones for the same point (that is how ``--retry-failed`` replaces
failures).

Every part carries the fingerprint of its sweep (:mod:`.fingerprint`) in its header, and a
part whose fingerprint is not the manifest's is never read: however a folder came to hold it,
it cannot mix into the result. A finished folder is removed atomically: renamed to a hidden
``.OUT.h5.parts.<pid>.trash`` beside it, then deleted, so that a kill during the deletion
leaves no half-empty folder under the parts name (a later run deletes the trash). A folder is
richlazy's only when it holds nothing but a manifest, parts and temporary files; anything
else under the parts name is never deleted, even with ``--force``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..errors import UNREADABLE, BadInput
from ..params import jsonable
from . import interrupts
from .chunk import ChunkResult
from .fingerprint import fingerprint_as_written
from .store import WriteFailed, atomic_write, space_problem

MANIFEST = "manifest.json"
PART_MAGIC = b"RLPART1\n"
PART_GLOB = "part-*.rlp"
PART_NAME = re.compile(r"part-(\d{6,})\.rlp")
"""The names richlazy gives parts; a folder holding any other name is not richlazy's."""
IDENTITY = ("model", "action", "params", "grid", "shard", "fingerprint")
"""Manifest keys that must agree for a folder to continue a sweep."""
_ALIGN = 64


def write_part(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write ``arrays`` and the JSON-able ``meta`` to ``path`` in the part format."""
    table: list[dict[str, Any]] = []
    offset = 0
    plain: list[np.ndarray] = []
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype == object:  # strings: fixed-width unicode, like the final file
            arr = arr.astype(str)
        arr = np.ascontiguousarray(arr)
        table.append(
            {"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset}
        )
        plain.append(arr)
        offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    header = json.dumps({"arrays": table, "meta": meta, "data_bytes": offset}).encode()
    start = -(-(len(PART_MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
    with open(path, "wb") as fh:
        fh.write(PART_MAGIC)
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        for entry, arr in zip(table, plain, strict=True):
            fh.seek(start + entry["offset"])
            if arr.nbytes:
                fh.write(arr.reshape(-1).view(np.uint8).data)
        fh.truncate(start + offset)


class _Part:
    """An open part file: its header, and its arrays read on demand."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "rb")
        try:
            if self.fh.read(len(PART_MAGIC)) != PART_MAGIC:
                raise ValueError("not a part file")
            (length,) = struct.unpack("<Q", self.fh.read(8))
            header = json.loads(self.fh.read(length))
            self.meta: dict[str, Any] = header["meta"]
            self.table = {entry["name"]: entry for entry in header["arrays"]}
            self.start = -(-(len(PART_MAGIC) + 8 + length) // _ALIGN) * _ALIGN
            if os.fstat(self.fh.fileno()).st_size != self.start + header["data_bytes"]:
                raise ValueError("truncated or extended part file")
        except BaseException:
            self.fh.close()
            raise

    def __enter__(self) -> _Part:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()

    def __contains__(self, name: str) -> bool:
        return name in self.table

    def __getitem__(self, name: str) -> np.ndarray:
        entry = self.table[name]
        dtype = np.dtype(entry["dtype"])
        shape = tuple(entry["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        self.fh.seek(self.start + entry["offset"])
        arr = np.fromfile(self.fh, dtype=dtype, count=count)
        if arr.size != count:
            raise ValueError(f"array {name} is truncated")
        return arr.reshape(shape)


def parts_path(out: Path) -> Path:
    return Path(str(out) + ".parts")


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def folder_state(path: Path) -> str:
    """``absent``; ``empty`` (nothing but temporary files: a clean-up cut short, or a
    creation killed before its manifest); ``sweep`` (a manifest); or ``foreign`` (a folder
    or file richlazy did not make)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return "absent"
    if path.is_symlink() or not path.is_dir():
        return "foreign"
    names = [entry.name for entry in os.scandir(path)]
    ours = all(_is_temporary(n) or n == MANIFEST or PART_NAME.fullmatch(n) for n in names)
    if not ours:
        return "foreign"
    if MANIFEST in names:
        return "sweep"
    return "empty" if not any(n.endswith(".rlp") for n in names) else "foreign"


def remove_folder(path: Path) -> None:
    """Remove a parts folder atomically: rename it to a hidden trash name, then delete."""
    path = Path(path)
    if not path.exists():
        return
    trash = path.with_name(f".{path.name}.{os.getpid()}.trash")
    try:
        os.replace(path, trash)
    except OSError:
        trash = path  # cannot rename (e.g. a busy NFS folder): delete in place
    interrupts.pause_point("remove")
    shutil.rmtree(trash, ignore_errors=True)


def remove_stale(out: Path) -> list[Path]:
    """Delete the debris of killed runs of ``out``: temporary files and trash folders.

    Only under the output's lock (:mod:`.lock`): the files of a live writer look the same.
    """
    removed: list[Path] = []
    for item in stale_paths(out):
        with contextlib.suppress(OSError):
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item)
            else:
                item.unlink()
            removed.append(item)
    return removed


def stale_paths(out: Path) -> list[Path]:
    """What :func:`remove_stale` deletes: the temporary files and trash folders of ``out``
    that killed runs may have left (or a live run's, which only its lock tells apart)."""
    out = Path(out)
    folder = out.parent if str(out.parent) else Path(".")
    ppath = parts_path(out)
    # exactly what atomic_write (mkstemp: 8 random characters) and remove_folder name, so
    # that another output whose name starts with this one's keeps its files
    mine = re.compile(
        rf"\.{re.escape(out.name)}\.[A-Za-z0-9_]{{8}}\.tmp|\.{re.escape(ppath.name)}\.\d+\.trash"
    )
    candidates = [p for p in folder.glob(f".{glob_escape(out.name)}.*") if mine.fullmatch(p.name)]
    if ppath.is_dir() and not ppath.is_symlink():
        candidates += [p for p in ppath.iterdir() if _is_temporary(p.name)]
    return candidates


def glob_escape(name: str) -> str:
    """``name`` with glob metacharacters escaped."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


class PartsFolder:
    """Finished chunks of one sweep, on disk."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._next = self._last_sequence() + 1
        self._space_checked = False

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, manifest: dict[str, Any]) -> PartsFolder:
        """A new folder for ``manifest``'s sweep; an old one of richlazy's is removed first."""
        path = Path(path)
        state = folder_state(path)
        if state == "foreign":
            raise BadInput(
                f"{path} exists but was not made by richlazy; move or remove it yourself"
            )
        if state != "absent":
            remove_folder(path)
        path.mkdir()
        folder = cls(path, manifest)
        folder.save_manifest()
        return folder

    def save_manifest(self) -> None:
        text = json.dumps(self.manifest, sort_keys=True, indent=1)
        atomic_write(self.path / MANIFEST, lambda tmp: tmp.write_text(text))

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
        if not isinstance(found, dict):
            found = {}
        before = fingerprint_as_written(found, manifest)
        if before is not None and found.get("params") != manifest.get("params"):
            if found.get("fingerprint") == before:  # written under older names
                found = _renamed(found, manifest)
            else:  # the same sweep, but its inputs changed: said below
                found = {**found, "params": manifest.get("params"), "grid": manifest.get("grid")}
        for key in IDENTITY[:-1]:
            if found.get(key) != manifest.get(key):
                raise BadInput(
                    f"{path} belongs to a different sweep ({key} differs); "
                    "rerun with the same options or use --force to start over"
                )
        if "fingerprint" not in found:
            raise BadInput(
                f"{path} was made by an older richlazy (its parts carry no sweep fingerprint); "
                "rerun with --force to start over"
            )
        if found["fingerprint"] != manifest.get("fingerprint"):
            raise BadInput(
                f"{path}: an input file changed since the sweep started "
                f"({_input_change(found, manifest)}); restore it, or use --force to start over"
            )
        return cls(path, found)

    def remove(self) -> None:
        remove_folder(self.path)

    # -- parts ----------------------------------------------------------------------------
    def _files(self) -> list[Path]:
        found = [p for p in self.path.glob(PART_GLOB) if PART_NAME.fullmatch(p.name)]
        return sorted(found, key=lambda p: int(p.name[5:-4]))

    def _last_sequence(self) -> int:
        files = self._files()
        if not files:
            return 0
        return int(files[-1].name[5:-4])

    def write(self, result: ChunkResult) -> Path:
        """Write one finished chunk atomically."""
        target = self.path / f"part-{self._next:06d}.rlp"
        self._next += 1
        arrays: dict[str, np.ndarray] = {
            "flat_index": result.indices,
            "status": result.status,
            "elapsed": result.elapsed,
        }
        meta: dict[str, Any] = {
            "errors": {str(k): v for k, v in result.errors.items()},
            "fingerprint": self.manifest.get("fingerprint"),
        }
        if result.data is not None:
            meta["vars"] = {}
            meta["coords"] = {}
            for name, item in result.data.data_vars.items():
                arrays[f"var/{name}"] = item.values
                meta["vars"][name] = {"dims": list(item.dims), "attrs": jsonable(item.attrs)}
            for name, item in result.data.coords.items():
                arrays[f"coord/{name}"] = item.values
                meta["coords"][name] = {"dims": list(item.dims), "attrs": jsonable(item.attrs)}
        if not self._space_checked and result.data is not None:
            self._check_space(sum(np.asarray(a).nbytes for a in arrays.values()), result)
        try:
            atomic_write(target, lambda tmp: write_part(tmp, arrays, meta))
        except OSError as exc:  # e.g. no space: name the folder, keep what is there
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        return target

    def _check_space(self, nbytes: int, result: ChunkResult) -> None:
        """After the first chunk with data: refuse a sweep whose parts and final file (both
        at most the chunk's bytes per point times the sweep's points) cannot fit on the disk,
        before hours are spent computing it. The parts kept so far stay."""
        self._space_checked = True
        points = int(self.manifest.get("points") or result.indices.size)
        per_point = nbytes / max(result.indices.size, 1)
        problem = space_problem(self.path, 2 * per_point * points, single_file=False)
        if problem:
            raise WriteFailed(f"{problem} (parts and final file together)", errno.ENOSPC)

    def _mine(self, meta: dict[str, Any]) -> bool:
        """Whether a part belongs to this folder's sweep: its fingerprint is the manifest's,
        or the one the sweep had under older parameter names (:func:`_renamed`)."""
        mark = meta.get("fingerprint")
        return mark == self.manifest.get("fingerprint") or (
            mark is not None and mark in self.manifest.get(WRITTEN_UNDER, ()))

    def read(self) -> Iterator[ChunkResult]:
        """Every stored chunk, oldest first. A corrupt part is a BadInput."""
        for file in self._files():
            try:
                with _Part(file) as part:
                    meta = part.meta
                    if not self._mine(meta):
                        continue
                    indices = np.asarray(part["flat_index"], dtype=np.int64)
                    status = np.asarray(part["status"], dtype=np.int8)
                    elapsed = np.asarray(part["elapsed"], dtype=float)
                    data = None
                    if "vars" in meta:
                        coords = {
                            k: xr.Variable(v["dims"], part[f"coord/{k}"], v["attrs"])
                            for k, v in meta["coords"].items()
                        }
                        data = xr.Dataset(
                            {
                                k: xr.Variable(v["dims"], part[f"var/{k}"], v["attrs"])
                                for k, v in meta["vars"].items()
                            },
                            coords=coords,
                        )
                errors = {int(k): v for k, v in meta["errors"].items()}
            except UNREADABLE:
                raise BadInput(
                    f"{file} is corrupt; delete it to recompute its points, or use --force"
                ) from None
            yield ChunkResult(indices, data, status, elapsed, errors)

    def status(self, size: int) -> np.ndarray:
        """Latest status of every point (-1 where no part has it).

        Reads only each part's header, index and status arrays, not its data, which
        :meth:`read` loads once when the sweep is assembled.
        """
        status = np.full(size, -1, dtype=np.int8)
        for file in self._files():
            try:
                with _Part(file) as part:
                    if not self._mine(part.meta):
                        continue
                    status[np.asarray(part["flat_index"], dtype=np.int64)] = part["status"]
            except UNREADABLE:
                raise BadInput(
                    f"{file} is corrupt; delete it to recompute its points, or use --force"
                ) from None
        return status


WRITTEN_UNDER = "earlier_fingerprints"
"""Manifest key: the fingerprints this folder's parts were written under, when its sweep was
named by older parameter names (the key as folders on disk hold it)."""


def _renamed(found: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest ``found`` of a folder written under a family's older parameter names
    (:func:`.fingerprint.fingerprint_as_written`), now under ``manifest``'s names and fingerprint;
    the fingerprint its parts carry is kept among the :data:`WRITTEN_UNDER` ones they are read by.
    Saved with the folder's next manifest write (a resume), not here."""
    renamed = dict(found)
    renamed[WRITTEN_UNDER] = [*found.get(WRITTEN_UNDER, []), found["fingerprint"]]
    for key in ("params", "grid", "fingerprint"):
        renamed[key] = manifest[key]
    return renamed


def _input_change(found: dict[str, Any], manifest: dict[str, Any]) -> str:
    before = {i.get("path"): i.get("sha256") for i in found.get("inputs", [])}
    now = {i.get("path"): i.get("sha256") for i in manifest.get("inputs", [])}
    paths = sorted(set(before) | set(now), key=str)
    changed = [str(p) for p in paths if before.get(p) != now.get(p)]
    return ", ".join(changed) or "inputs differ"
