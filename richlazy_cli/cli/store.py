"""``richlazy store``: list, show, verify and merge result files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import BadInput, ExitCode, point_counts
from .common import (
    ForceOpt,
    JsonOpt,
    QuietOpt,
    command_line,
    console,
    flag,
    on_interrupt,
    print_json,
)

store_app = typer.Typer(help="Inspect, verify and merge result files.", no_args_is_help=True)

PARTS_SUFFIX = ".parts"
RESULT_PATTERNS = ("*.h5", "*.nc")


# -- ls -------------------------------------------------------------------------------------
def _result_row(path: Path) -> dict[str, Any]:
    from ..engine.store import describe, is_hdf5

    if not is_hdf5(path):
        return {"file": str(path), "state": "unreadable", "error": "not an HDF5 file"}
    try:
        info = describe(path)
    except BadInput as exc:
        return {"file": str(path), "state": "unreadable", "error": str(exc)}
    attrs = info["attrs"]
    return {
        "file": str(path),
        "state": "complete" if not info["points"]["missing"] else "incomplete",
        "model": attrs.get("model"),
        "action": attrs.get("action"),
        "grid": {d: info["dims"][d] for d in info["grid"]},
        **info["points"],
        "created": attrs.get("created"),
    }


def _in_progress_row(parts: Path) -> dict[str, Any]:
    """A sweep in progress: its parts folder, with its counts when the manifest is readable."""
    from ..engine.grid import parse_grid
    from ..engine.parts import MANIFEST, PartsFolder
    from ..models.base import get_model

    out = parts.with_name(parts.name[: -len(PARTS_SUFFIX)])
    row: dict[str, Any] = {"file": str(out), "state": "in progress", "parts": str(parts)}
    try:
        manifest = json.loads((parts / MANIFEST).read_text())
        grid = parse_grid(get_model(manifest["model"]), list(manifest["grid"].items()))
        status = PartsFolder(parts, manifest).status(max(grid.size, 1))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # BadInput is a ValueError: an unknown model, a corrupt part, a foreign manifest
        row["error"] = f"counts unreadable ({type(exc).__name__})"
        return row
    row.update(
        model=manifest["model"],
        action=manifest.get("action"),
        grid={d.name: d.size for d in grid.dims},
        **point_counts(status),
        created=None,
    )
    return row


def list_folder(folder: Path, recursive: bool) -> list[dict[str, Any]]:
    """One row per result file and per sweep in progress under ``folder``."""
    walk = folder.rglob if recursive else folder.glob
    files = sorted({p for pattern in RESULT_PATTERNS for p in walk(pattern) if p.is_file()})
    parts = sorted(p for p in walk(f"*{PARTS_SUFFIX}") if p.is_dir())
    rows = [_result_row(p) for p in files] + [_in_progress_row(p) for p in parts]
    return sorted(rows, key=lambda r: r["file"])


NARROW_COLUMNS = 120
"""Below this page width ``store ls`` folds its columns into a compact layout."""


@store_app.command("ls")
def store_ls(
    folder: Annotated[Path, typer.Argument(metavar="[DIR]", help="Folder to list.")] = Path(
        "results"
    ),
    top: Annotated[
        bool, flag("--top", help="Only the folder itself, not its sub-folders.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """One row per result file (sub-folders too) and per sweep in progress."""
    if not folder.is_dir():
        raise BadInput(f"{folder} is not a folder")
    rows = list_folder(folder, recursive=not top)
    if as_json:
        print_json(rows)
        return
    from rich import box
    from rich.table import Table

    out = console(longest=max((len(r["file"]) for r in rows), default=0))
    narrow = out.width < NARROW_COLUMNS
    table = Table(title=f"{len(rows)} result file(s) in {folder}", title_justify="left",
                  box=None if narrow else box.HEAVY_HEAD, pad_edge=not narrow)
    columns = (("file", "state", "model action", "grid", "points") if narrow else
               ("file", "state", "model", "action", "grid", "done", "failed", "missing",
                "created"))
    for col in columns:
        table.add_column(col, no_wrap=col in ("file", "state", "grid"))
    for r in rows:
        if "model" not in r:
            table.add_row(r["file"], r["state"], f"[red]{r.get('error', '')}[/red]",
                          *[""] * (len(columns) - 3))
            continue
        created = r["created"] or ""
        if narrow:  # 80 columns: the grid as a shape, the counts together, the date only
            shape = "x".join(str(v) for v in r["grid"].values()) or "-"
            counts = ", ".join(f"{r[k]} {k}" for k in ("done", "failed", "missing")
                               if r[k] or k == "done")
            table.add_row(r["file"], r["state"], f"{r['model']} {r['action']}", shape, counts)
            continue
        shape = " x ".join(f"{k}={v}" for k, v in r["grid"].items()) or "-"
        table.add_row(
            r["file"], r["state"], r["model"], r["action"], shape, str(r["done"]),
            str(r["failed"]), str(r["missing"]), created,
        )
    out.print(table)


# -- show -----------------------------------------------------------------------------------
@store_app.command("show")
def store_show(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="Result file.")],
    as_json: JsonOpt = False,
) -> None:
    """Dimensions, variables, parameters and provenance of a result file."""
    from rich.table import Table

    from ..engine.store import describe

    info = describe(path)
    if as_json:
        print_json(info)
        return
    out = console()
    attrs = info["attrs"]
    out.print(
        f"[bold]{path}[/bold]: {attrs.get('model')} {attrs.get('action')}, "
        f"created {attrs.get('created')} on {attrs.get('host')}"
    )
    out.print("dimensions: " + ", ".join(f"{k}={v}" for k, v in info["dims"].items()))
    pts = info["points"]
    out.print(
        f"points: {pts['done']} done, {pts['failed']} failed, {pts['missing']} missing "
        f"of {pts['total']}"
    )
    table = Table(title="variables")
    for col in ("name", "dims", "dtype", "long_name", "units"):
        table.add_column(col)
    for name, v in info["variables"].items():
        table.add_row(name, ", ".join(v["dims"]), v["dtype"], v["long_name"], v["units"])
    out.print(table)
    ptable = Table(title="parameters")
    ptable.add_column("name")
    ptable.add_column("value")
    grid = attrs.get("grid") or {}
    for name, value in (attrs.get("params") or {}).items():
        ptable.add_row(name, f"swept: {grid[name]}" if name in grid else json.dumps(value))
    out.print(ptable)
    for key in ("command", "richlazy_version", "git_commit", "git_dirty", "versions", "complete"):
        if key in attrs:
            value = attrs[key]
            out.print(f"{key}: {value if isinstance(value, str) else json.dumps(value)}")


# -- verify ---------------------------------------------------------------------------------
@store_app.command("verify")
def store_verify(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="Result file.")],
    as_json: JsonOpt = False,
) -> None:
    """Check schema, completeness and data (each variable against its checksum, status
    against errors and non-finite values); exit 1 with the reasons when anything is wrong."""
    from ..engine.store import verify_report

    notes: list[str] = []
    try:
        problems, notes = verify_report(path)
    except BadInput as exc:
        problems = [str(exc)]
    if as_json:
        print_json({"file": str(path), "ok": not problems, "problems": problems,
                    "notes": notes})
    elif problems:
        print(f"richlazy: {path}: {'; '.join(problems)}", file=sys.stderr)
    else:
        print(f"{path}: ok" + "".join(f" (note: {n})" for n in notes))
    if problems:
        raise typer.Exit(ExitCode.FAILED_POINTS)


# -- merge ----------------------------------------------------------------------------------
@store_app.command("merge")
def store_merge(
    output: Annotated[Path, typer.Argument(metavar="OUT.h5", help="Merged result file.")],
    inputs: Annotated[list[Path], typer.Argument(metavar="SHARD.h5...", help="Shard files.")],
    force: ForceOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Merge shard files of one sweep into one result."""
    from ..engine.merge import merge_results

    on_interrupt(f"nothing written to {output}")
    merged = merge_results(output, inputs, force, command_line())
    counts = point_counts(merged["status"].values) if "status" in merged else None
    if not quiet:
        print(output)
    if counts and counts["missing"]:
        print(
            f"richlazy: {output}: {counts['missing']} of {counts['total']} points still missing",
            file=sys.stderr,
        )
        raise typer.Exit(ExitCode.FAILED_POINTS)
