"""A run's output file: where a run starts from, what it records, and how it ends.

A run holds its output's lock (:mod:`.lock`) from start to end; under it, this module

* deletes the debris of killed runs (temporary files, trash folders: :func:`.parts.remove_stale`)
  and an empty parts folder without manifest (a clean-up or a creation cut short);
* decides where the run starts (:func:`start_point`): a new parts folder (``--force`` deletes an
  old one only if richlazy made it); the parts folder of the same sweep (``--resume``: same
  model, action, parameters, grid, shard and fingerprint, so the same input contents); or a
  previous result file, whose computed points seed a new folder. A ``--resume`` whose output
  already holds every selected point of this very sweep has **nothing to do** and leaves the
  file untouched, bytes and modification time, so that a cron job may repeat it;
* keeps the provenance of the run that started the sweep (``created``, ``command``, ``host``,
  versions, git state) in a resumed result, and lists every run that worked on it, oldest
  first, in the ``history`` attribute (JSON: ``run`` = start, resume or merge; ``created``;
  ``host``; ``command``; ``richlazy_version``);
* writes the final file (after checking that no input file changed during the run) and removes
  the parts folder atomically (:meth:`StartingPoint.finish`).
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .. import __version__
from ..errors import BadInput
from ..models.base import get_model
from ..params import jsonable
from .assemble import result_as_chunk
from .fingerprint import InputGuard, fingerprint, fingerprint_as_written, input_record
from .lock import lock_path, output_lock
from .parts import (
    PartsFolder,
    folder_state,
    parts_path,
    remove_folder,
    remove_stale,
    stale_paths,
)
from .store import (
    check_writable,
    grid_status,
    json_attr,
    open_result,
    provenance,
    utc_now,
    write_result,
)

PROVENANCE_KEYS = (
    "richlazy_version",
    "created",
    "command",
    "host",
    "versions",
    "git_commit",
    "git_dirty",
)
"""Attributes that describe the run that started a sweep; a resumed result keeps them."""


def stamp_manifest(manifest: dict[str, Any], job: Any) -> None:
    """Add the input files' sizes and hashes and the sweep fingerprint to ``manifest``."""
    inputs = input_record(job.model, job.base, job.grid)
    manifest["inputs"] = inputs
    size = max(job.grid.size, 1)
    shard = manifest.get("shard")
    if shard:  # K/N selects the points K-1, K-1+N, ...: their count, not a list of them
        k, n = (int(x) for x in str(shard).split("/"))
        manifest["points"] = len(range(k - 1, size, n))
    else:
        manifest["points"] = size
    manifest["fingerprint"] = fingerprint(
        manifest["model"], manifest["action"], manifest["params"], manifest["grid"], inputs
    )


def history_entry(run: str, command: list[str]) -> dict[str, Any]:
    return {
        "run": run,
        "created": utc_now(),
        "host": socket.gethostname(),
        "command": list(command),
        "richlazy_version": __version__,
    }


@dataclass
class StartingPoint:
    """Where a run starts: its parts folder (or none), or nothing to do at all."""

    out: Path
    manifest: dict[str, Any]
    folder: PartsFolder | None
    nothing_to_do: bool = False
    original: dict[str, Any] = field(default_factory=dict)  # provenance kept on resume
    history: list[dict[str, Any]] = field(default_factory=list)

    def attrs(self, fresh: dict[str, Any]) -> dict[str, Any]:
        """The final file's global attributes, from this run's ``fresh`` provenance."""
        attrs = dict(fresh)
        attrs.update(self.original)
        history = self.history
        if not history:  # a run without a parts folder
            history = [history_entry("start", json.loads(fresh.get("command", "[]")))]
        attrs["history"] = json.dumps(history)
        attrs["inputs"] = json.dumps(self.manifest.get("inputs", []))
        attrs["fingerprint"] = self.manifest.get("fingerprint", "")
        return attrs

    def finish(self, ds: xr.Dataset) -> None:
        """Write the final file and remove the parts folder (inputs checked first)."""
        kept = ("nothing written" if self.folder is None
                else f"the parts computed before are kept in {self.folder.path}")
        InputGuard(self.manifest.get("inputs", [])).check(kept)
        write_result(ds, self.out, force=True)
        if self.folder is not None:
            self.folder.remove()


def _provenance_of(ds: xr.Dataset) -> dict[str, Any]:
    return {k: jsonable(ds.attrs[k]) for k in PROVENANCE_KEYS if k in ds.attrs}


def _history_of(ds: xr.Dataset) -> list[dict[str, Any]]:
    history = json_attr(ds, "history")
    if isinstance(history, list):
        return history
    command = json_attr(ds, "command", [])
    return [
        {
            "run": "start",
            "created": ds.attrs.get("created"),
            "host": ds.attrs.get("host"),
            "command": command,
            "richlazy_version": ds.attrs.get("richlazy_version"),
        }
    ]


def result_as_named_now(ds: xr.Dataset) -> xr.Dataset:
    """A result ``ds`` with the parameters its ``params`` and ``grid`` attributes name, and
    its grid dimensions, under the names they have now (:meth:`.Model.as_named_now`: a
    family's older record names, docs/engine.md "Records"), so that a result written before is
    resumed or merged with one written now. Its fingerprint is left as it was written; the
    caller that keeps the result writes a new one. Unchanged when nothing was renamed."""
    params, grid = json_attr(ds, "params"), json_attr(ds, "grid")
    if not isinstance(params, dict) or not isinstance(grid, dict):
        return ds
    try:
        model = get_model(str(ds.attrs.get("model")))
    except BadInput:
        return ds
    action = str(ds.attrs.get("action"))
    now_params = model.as_named_now(action, params)
    now_grid = model.as_named_now(action, grid, swept=True)
    if (now_params, now_grid) == (params, grid):
        return ds
    dims = {old: model.aliases[old][action] for old in grid
            if old not in now_grid and old in ds.variables}
    renamed = ds.rename(dims) if dims else ds.copy()
    renamed.attrs.update(params=json.dumps(now_params), grid=json.dumps(now_grid))
    errors = json_attr(ds, "errors")
    if dims and isinstance(errors, list):  # each failed point named by its grid values
        renamed.attrs["errors"] = json.dumps([
            {**e, "point": {dims.get(k, k): v for k, v in e["point"].items()}}
            if isinstance(e, dict) and isinstance(e.get("point"), dict) else e
            for e in errors])
    return renamed


def check_same_sweep(path: Path, ds: xr.Dataset, manifest: dict[str, Any]) -> None:
    """BadInput unless the result ``ds`` (read from ``path``) is of ``manifest``'s sweep."""
    for key in ("model", "action"):
        if ds.attrs.get(key) != manifest[key]:
            raise BadInput(f"{path} holds another sweep ({key} differs); cannot resume")
    for key in ("params", "grid"):
        if json_attr(ds, key) is None:
            raise BadInput(f"{path}: attribute {key} is missing or not valid JSON")
    written = {key: ds.attrs.get(key) for key in ("model", "action", "fingerprint")}
    written.update(params=json_attr(ds, "params"), grid=json_attr(ds, "grid"))
    before = fingerprint_as_written(written, manifest)  # perhaps under older parameter names
    if before is None:
        raise BadInput(f"{path} holds another sweep (parameters or grid differ); cannot resume")
    if "status" not in ds:
        raise BadInput(f"{path} has no status variable: not a sweep result; cannot resume")
    recorded = ds.attrs.get("fingerprint")
    if recorded and recorded not in (manifest.get("fingerprint"), before):
        raise BadInput(
            f"{path}: an input file changed since the result was written (its SHA-256 "
            "differs from the recorded one); restore it, or use --force to start over"
        )


def _pending(status: np.ndarray, selected: np.ndarray, retry_failed: bool) -> int:
    todo = status[selected] < 0
    if retry_failed:
        todo |= status[selected] > 0
    return int(np.count_nonzero(todo))


def _selected(opts: Any, size: int) -> np.ndarray:
    return opts.shard.select(size) if opts.shard else np.arange(size)


def start_point(
    job: Any, out: Path, opts: Any, manifest: dict[str, Any], command: list[str]
) -> StartingPoint:
    """Check the output and parts folder against the options; open or create the parts.

    Call it holding the output's lock (:func:`.lock.output_lock`).
    """
    out = Path(out)
    ppath = parts_path(out)
    remove_stale(out)
    state = folder_state(ppath)
    if state == "foreign":
        raise BadInput(f"{ppath} exists but was not made by richlazy; move or remove it yourself")
    if state == "empty":  # a clean-up or a creation cut short: nothing in it to keep
        remove_folder(ppath)
        state = "absent"
    size = max(job.grid.size, 1)
    selected = _selected(opts, size)
    if opts.resume:
        return _resume(job, out, opts, manifest, command, state == "sweep", size, selected)
    if state == "sweep" and not opts.force:
        raise BadInput(f"{ppath} exists (an unfinished sweep); use --resume to continue or --force")
    check_writable(out, opts.force)
    if not opts.use_parts:
        return StartingPoint(out, manifest, None)
    entry = history_entry("start", command)
    fresh = provenance(job.model.name, job.action, job.recorded, job.grid.specs(), command)
    manifest["provenance"] = {k: fresh[k] for k in PROVENANCE_KEYS if k in fresh}
    manifest["history"] = [entry]
    folder = PartsFolder.create(ppath, manifest)
    return StartingPoint(
        out, manifest, folder, original=dict(manifest["provenance"]), history=[entry]
    )


def _resume(
    job: Any,
    out: Path,
    opts: Any,
    manifest: dict[str, Any],
    command: list[str],
    has_folder: bool,
    size: int,
    selected: np.ndarray,
) -> StartingPoint:
    ppath = parts_path(out)
    entry = history_entry("resume", command)
    if has_folder:
        folder = PartsFolder.open(ppath, manifest)  # BadInput when another sweep's
        if out.exists() and _nothing_pending(out, manifest, size, selected, opts.retry_failed):
            folder.remove()  # the final file was written, the clean-up was cut short
            return StartingPoint(out, manifest, None, nothing_to_do=True)
        folder.manifest.setdefault("history", []).append(entry)
        folder.save_manifest()
        return StartingPoint(
            out,
            folder.manifest,
            folder,
            original=dict(folder.manifest.get("provenance") or {}),
            history=list(folder.manifest["history"]),
        )
    if not out.exists():
        raise BadInput(f"nothing to resume: neither {out} nor {ppath} exists")
    previous = open_result(out)
    status = _checked_status(out, previous, manifest, size)
    if _pending(status, selected, opts.retry_failed) == 0:
        return StartingPoint(out, manifest, None, nothing_to_do=True)
    history = [*_history_of(previous), entry]
    manifest["provenance"] = _provenance_of(previous)
    manifest["history"] = history
    try:
        seed = result_as_chunk(result_as_named_now(previous), job.grid)
    except BadInput as exc:
        raise BadInput(f"{out}: {exc}; cannot resume") from None
    folder = PartsFolder.create(ppath, manifest)
    folder.write(seed)
    return StartingPoint(
        out, manifest, folder, original=dict(manifest["provenance"]), history=history
    )


def _checked_status(
    path: Path, ds: xr.Dataset, manifest: dict[str, Any], size: int
) -> np.ndarray:
    check_same_sweep(path, ds, manifest)
    held = ds.attrs.get("shard") or None
    if held != manifest.get("shard"):
        what = f"shard {held}" if held else "the whole grid"
        want = f"shard {manifest['shard']}" if manifest.get("shard") else "the whole grid"
        raise BadInput(f"{path} holds {what}, not {want}; cannot resume (give each shard "
                       "its own output, and merge them with 'richlazy store merge')")
    try:
        status = grid_status(ds)  # a shard file's other points are missing
    except BadInput as exc:
        raise BadInput(f"{path}: {exc}; cannot resume") from None
    if status.size != size:
        raise BadInput(f"{path}: the status array does not match the grid; cannot resume")
    return status


def _nothing_pending(
    out: Path, manifest: dict[str, Any], size: int, selected: np.ndarray, retry: bool
) -> bool:
    """Whether ``out`` is a result of this very sweep holding every selected point."""
    try:
        status = _checked_status(out, open_result(out), manifest, size)
    except BadInput:
        return False
    return _pending(status, selected, retry) == 0


def previous_status(out: Path, manifest: dict[str, Any], size: int) -> np.ndarray:
    """What an earlier run of this sweep left (for ``--resume --dry-run``), changing nothing."""
    out = Path(out)
    ppath = parts_path(out)
    if folder_state(ppath) == "sweep":
        return PartsFolder.open(ppath, manifest).status(size)
    if out.exists():
        return _checked_status(out, open_result(out), manifest, size)
    raise BadInput(f"nothing to resume: neither {out} nor {ppath} exists")



class ContinueMode:
    """What ``--continue`` does with an output (:func:`continue_mode`)."""

    COMPLETE = "complete"
    """The output holds every selected point of this sweep: nothing to do."""
    RESUME = "resume"
    """A parts folder or an incomplete result of this sweep: continue it."""
    START = "start"
    """Nothing there: start the sweep."""
    REPLACE = "replace"
    """Another sweep's parts or result, and ``--force``: start over, replacing them."""


def continue_mode(out: Path, manifest: dict[str, Any], selected: np.ndarray, size: int,
                  retry_failed: bool, force: bool) -> str:
    """How ``--continue`` proceeds with ``out`` (a :class:`ContinueMode`), changing nothing.

    The parts folder or result of this very sweep (same identity and fingerprint,
    :mod:`.fingerprint`) is resumed, or left alone when complete; an absent output is started.
    Another sweep's parts or result is replaced with ``--force`` (which is how a Makefile
    recomputes a changed job file and keeps the work of an unchanged one) and refused without.
    Read-only: safe to call before taking the output's lock.
    """
    out = Path(out)
    ppath = parts_path(out)
    state = folder_state(ppath)
    if state == "foreign":
        raise BadInput(f"{ppath} exists but was not made by richlazy; move or remove it yourself")
    try:
        if state == "sweep":
            PartsFolder.open(ppath, manifest)  # BadInput when another sweep's
            return ContinueMode.RESUME
        if not out.exists():
            return ContinueMode.START
        status = _checked_status(out, open_result(out), manifest, size)
    except BadInput as exc:
        if force:
            return ContinueMode.REPLACE
        raise BadInput(f"{exc} (--continue --force replaces it)") from None
    if _pending(status, selected, retry_failed) == 0:
        return ContinueMode.COMPLETE
    return ContinueMode.RESUME


def is_complete(out: Path, manifest: dict[str, Any], selected: np.ndarray, size: int,
                retry_failed: bool) -> bool:
    """Whether ``out`` is a finished result of this sweep with no parts folder beside it: the
    nothing-to-do of ``--resume`` and ``--continue``, found without writing anything (so that
    a complete output on a read-only file system, or one whose lock another run holds, still
    counts as done)."""
    if folder_state(parts_path(out)) != "absent" or not Path(out).is_file():
        return False
    return _nothing_pending(Path(out), manifest, size, selected, retry_failed)


def remove_debris(out: Path) -> None:
    """Beside a complete output, the debris of a killed run removed when its lock is free:
    the trash folder of a clean-up cut short, temporary files (:func:`.parts.stale_paths`)
    and the lock file the killed run left. Nothing is taken or written when there is none;
    the debris stays when another run holds the lock (its files look the same) or no lock
    can be taken (a read-only folder): a complete output is done either way."""
    if not stale_paths(out) and not lock_path(out).exists():
        return
    try:
        with output_lock(out):  # releasing it removes the lock file
            remove_stale(out)
    except (BadInput, OSError):
        pass
