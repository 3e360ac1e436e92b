"""Drawing registered figures to files (``richlazy figure``) and the paper gallery
(``make paper``): ``index.html`` with a table of contents and every registered figure in paper
order, each captioned with the paper's claim, the measured value from the run, the job file and
sizes used, and where the run differs from the paper's protocol (docs/figures.md).

A folder written here is rewritten whole: the registered figures a previous build listed in
its ``figures.json`` and does not write again are removed, so no stale figure survives; a
manifest that richlazy did not write (no ``written_by`` mark) gets nothing deleted.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..errors import BadInput, point_counts
from ..report.build import changed_params
from ..report.data import ResultFile
from ..report.explore import link_html, write_explore
from ..report.html import CSS
from ..report.style import FORMATS, WRITER, save, stale_files, style
from .common import Built
from .registry import REGISTRY, PaperFigure, get

MANIFEST = "figures.json"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def sizes(rf: ResultFile) -> str:
    """The run's grid and the parameters it changed from the model's defaults, compactly
    (a long value, e.g. a matrix, is shown by its length only)."""
    changed, _ = changed_params(rf)

    def short(v: Any) -> str:
        text = json.dumps(v) if isinstance(v, list | dict) else str(v)
        return text if len(text) <= 24 else f"[{len(v)} values]" if isinstance(v, list) \
            else text[:21] + "..."
    grid = ", ".join(f"{k} = {v}" if len(v) <= 40 else f"{k} = {rf.ds.sizes.get(k, '?')} values"
                     for k, v in rf.grid.items())
    params = ", ".join(f"{k} = {short(v)}" for k, v in sorted(changed.items()))
    return f"grid {grid or 'none'}; {params or 'defaults'}"


def draw(fig_def: PaperFigure, files: Sequence[ResultFile]) -> Built:
    """Build one registered figure from loaded files, in the report's style."""
    with style():
        return fig_def.build(files)


DRAWING_ERRORS = (BadInput, KeyError, ValueError, IndexError)
"""What drawing a figure from results it cannot show raises (matplotlib's "cannot be
log-scaled", a selection with no point): bad input of the figure's files, not a bug."""


def drawn(fig_def: PaperFigure, files: Sequence[ResultFile]) -> Built:
    """:func:`draw`, or BadInput naming the figure, its files and what is wrong: a file
    without one point done (every point failed or missing) has nothing to draw, and an
    error while drawing is the files' (:func:`drawing`)."""
    for rf in files:
        counts = point_counts(rf.ds["status"].values) if "status" in rf.ds.variables else None
        if counts is not None and counts["total"] and not counts["done"]:
            raise BadInput(f"figure {fig_def.name}: {rf.path}: no point is done "
                           f"({counts['failed']} failed, {counts['missing']} missing of "
                           f"{counts['total']}): nothing to draw")
    with drawing(fig_def, files):
        return draw(fig_def, files)


@contextlib.contextmanager
def drawing(fig_def: PaperFigure, files: Sequence[ResultFile]) -> Iterator[None]:
    """Drawing or saving ``fig_def`` from ``files``: an error of :data:`DRAWING_ERRORS`
    (matplotlib's "cannot be log-scaled" raised when the axis is drawn, at the save) is
    BadInput naming the figure, the files and the error."""
    try:
        yield
    except BadInput as exc:
        raise BadInput(f"figure {fig_def.name}: {exc}") from None
    except DRAWING_ERRORS as exc:
        names = ", ".join(str(f.path) for f in files) or "no file"
        why = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"figure {fig_def.name}: {names}: cannot be drawn from these results "
                       f"({type(exc).__name__}: {why})") from None


def caption(fig_def: PaperFigure, built: Built, files: Sequence[ResultFile]) -> dict[str, str]:
    runs = "; ".join(f"{rf.path.name} ({sizes(rf)})" for rf in files) or \
        "no result file (drawn from the initialisation alone)"
    return {
        "claim": fig_def.claim,
        "measured": built.text[0].upper() + built.text[1:] + ".",
        "measure": fig_def.measure,
        "run": runs,
        "jobs": ", ".join(fig_def.jobs) or "none",
        "differs": fig_def.differs,
        "notes": "; ".join(built.notes),
    }


def write_figure(name: str, inputs: Sequence[Path], out_dir: Path, fmt: str = "png"
                 ) -> dict[str, Any]:
    """Draw figure ``name`` from ``inputs`` into ``out_dir/NAME.FMT``; returns its entry
    (file, caption fields, measured value, seconds). BadInput on a bad name, format or file."""
    fig_def = get(name)
    if fmt not in FORMATS:
        raise BadInput(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        files = [ResultFile.load(Path(p)) for p in inputs]  # its lines name the file
    except BadInput as exc:
        raise BadInput(f"figure {name}: {exc}") from None
    if fig_def.jobs and not files:
        raise BadInput(f"figure {name}: needs a result of {', '.join(fig_def.jobs)}")
    start = time.perf_counter()
    built = drawn(fig_def, files)
    out_dir.mkdir(parents=True, exist_ok=True)
    file = f"{name}.{fmt}"
    with style(), drawing(fig_def, files):
        save(built.fig, out_dir / file, fmt)
    return {"name": name, "file": file, "caption": caption(fig_def, built, files),
            "measured": _jsonable(built.measured), "seconds": time.perf_counter() - start,
            "width_in": float(built.fig.get_figwidth())}


def _remove_stale(out_dir: Path, keep: set[str]) -> list[str]:
    """Remove the registered figures a previous build listed in the folder's
    ``figures.json`` and does not write again (:func:`~richlazy_cli.report.style.stale_files`:
    only from richlazy's own manifest, only ``<registered figure>.<format>`` names)."""
    stale = stale_files(out_dir / MANIFEST, keep, _is_registered_figure)
    for path in stale:
        path.unlink()
    return [path.name for path in stale]


def _is_registered_figure(name: str) -> bool:
    stem, _, fmt = name.rpartition(".")
    return fmt in FORMATS and stem in {f.name for f in REGISTRY}


def write_figures(names: Sequence[str], inputs: Sequence[Path], out_dir: Path,
                  fmt: str = "png") -> list[dict[str, Any]]:
    """``richlazy figure NAME… RESULT.h5… -o DIR``: each figure from the inputs it needs. The
    folder's other registered figures stay (and stay in its index); anything else a previous
    build listed is removed."""
    entries = [write_figure(n, inputs, out_dir, fmt) for n in names]
    kept = [e for e in _previous(out_dir) if e.get("name") not in names
            and (out_dir / str(e.get("file", ""))).is_file()]  # figures drawn one at a time
    _finish(out_dir, kept + entries, title="richlazy figures")
    return entries


def _previous(out_dir: Path) -> list[dict[str, Any]]:
    try:
        old = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
        return [e for e in old.get("figures", []) if isinstance(e, dict) and "name" in e
                and e["name"] in {f.name for f in REGISTRY}]
    except (OSError, ValueError, AttributeError):
        return []


def _entry_html(fig_def: PaperFigure, entry: dict[str, Any] | None, why: str = "") -> str:
    head = (f'<section id="{escape(fig_def.name)}"><h2>{escape(fig_def.label)} — '
            f"{escape(fig_def.panels)}</h2><p class=\"paper\">{escape(fig_def.paper)}"
            f" · <code>{escape(fig_def.name)}</code></p>")
    if entry is None:
        return (head + f"<p><strong>Claim:</strong> {escape(fig_def.claim)}</p>"
                f'<p class="missing"><strong>Not built:</strong> {escape(why)}</p></section>')
    c = entry["caption"]
    href = escape(entry["file"])
    rows = [("Claim", c["claim"]), ("Measured", c["measured"]), ("How measured", c["measure"]),
            ("Run", c["run"]), ("Job files", c["jobs"]),
            ("Differs from the paper", c["differs"])]
    if c.get("notes"):
        rows.append(("Note", c["notes"]))
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    width = entry.get("width_in")
    size = f' style="width: {float(width):.2f}in"' if width else ""  # its own size: 8 pt text
    return (head + f'<figure class="paper"{size}><a href="{href}"><img src="{href}" '
            f'alt="{escape(fig_def.label)}"></a></figure>'
            + (link_html(entry["explore"]) if entry.get("explore") else "")
            + f"<dl>{dl}</dl></section>")


GALLERY_CSS = CSS + """
figure.paper { display: block; width: 100%; max-width: 100%; margin: 0.5em 0; }
nav ol { columns: 2; font-size: 0.9em; } p.paper { color: #666; margin-top: -0.5em; }
p.missing { color: #a33; }
"""


def _finish(out_dir: Path, entries: list[dict[str, Any]], title: str,
            sections: list[str] | None = None, toc: list[tuple[str, str]] | None = None) -> None:
    keep = {e["file"] for e in entries} | {"index.html", MANIFEST}
    _remove_stale(out_dir, keep)
    manifest = {"written_by": WRITER, "files": sorted(e["file"] for e in entries),
                "figures": entries}
    (out_dir / MANIFEST).write_text(json.dumps(_jsonable(manifest), indent=2,
                                               allow_nan=False) + "\n", encoding="utf-8")
    if sections is None:
        sections = [_entry_html(get(e["name"]), e) for e in entries]
        toc = [(e["name"], get(e["name"]).label) for e in entries]
    nav = "".join(f'<li><a href="#{escape(k)}">{escape(v)}</a></li>' for k, v in toc or [])
    html = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{GALLERY_CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1><nav><h2>Contents</h2><ol>{nav}</ol></nav>"
            + "\n".join(sections) + "</body></html>\n")
    (out_dir / "index.html").write_text(html, encoding="utf-8")


def result_path(results: Path, job: str) -> Path:
    """Where ``make`` writes the result of a job file: ``jobs/paper/X.toml`` →
    ``RESULTS/paper/X.h5``, ``jobs/X.toml`` → ``RESULTS/X.h5``."""
    rel = job.removeprefix("jobs/").removesuffix(".toml")
    return Path(results) / f"{rel}.h5"


def build_gallery(results: Path, out_dir: Path, fmt: str = "png", full: bool = False
                  ) -> list[dict[str, Any]]:
    """Every registered figure, in paper order, from the results under the folder
    ``results`` (:func:`result_path` of each job file; ``full`` uses the paper-scale
    ``full_jobs``). A figure whose result is missing or unusable is listed as not built,
    with the reason, and links nothing."""
    results = Path(results)
    if not results.is_dir():
        raise BadInput(f"--gallery {results}: not a folder of result files")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    sections: list[str] = []
    toc: list[tuple[str, str]] = []
    cache: dict[Path, ResultFile] = {}
    pages: dict[Path, Path | None] = {}  # the interactive views, per result
    title = "richlazy: the papers' figures" + (" (paper scale)" if full else "")
    for fig_def in REGISTRY:
        jobs = fig_def.full_jobs if full and fig_def.full_jobs else fig_def.jobs
        paths = [result_path(results, j) for j in jobs]
        toc.append((fig_def.name, f"{fig_def.paper.split(',')[0]}: {fig_def.label}"))
        missing = [p for p in paths if not p.exists()]
        if missing:
            sections.append(_entry_html(fig_def, None, "missing result "
                                        + ", ".join(str(p) for p in missing)))
            continue
        try:
            for p in paths:
                if p not in cache:
                    cache[p] = ResultFile.load(p)
            files = [cache[p] for p in paths]
            start = time.perf_counter()
            built = drawn(fig_def, files)
            file = f"{fig_def.name}.{fmt}"
            with style(), drawing(fig_def, files):
                save(built.fig, out_dir / file, fmt)
        except DRAWING_ERRORS as exc:
            sections.append(_entry_html(fig_def, None, f"{type(exc).__name__}: {exc}"))
            continue
        entry = {"name": fig_def.name, "file": file, "caption": caption(fig_def, built, files),
                 "measured": _jsonable(built.measured),
                 "seconds": time.perf_counter() - start,
                 "width_in": float(built.fig.get_figwidth())}
        if "heat map" in fig_def.layout:  # a phase diagram: its interactive view too
            if paths[0] not in pages:  # one page per result (Figs. 1b and 5b share one)
                pages[paths[0]] = write_explore(files[0], out_dir)
            page = pages[paths[0]]
            if page is not None:
                entry["explore"] = page.name
        entries.append(entry)
        sections.append(_entry_html(fig_def, entry))
    _finish(out_dir, entries, title, sections, toc)
    return entries


def listing() -> str:
    """``richlazy figure --list``: one line per registered figure, in paper order."""
    width = max(len(f.name) for f in REGISTRY)
    return "\n".join(f"{f.name:<{width}}  {f.paper.split(',')[0]} {f.label}: {f.panels}"
                     f"  [{', '.join(f.jobs) or 'no job'}]" for f in REGISTRY)
