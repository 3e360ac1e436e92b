"""Drawing registered figures to files (``richlazy figure``) and the paper gallery
(``make paper``): ``index.html`` with a table of contents and every registered figure in paper
order, each captioned with the paper's claim, the measured value from the run, the job file and
sizes used, and where the run differs from the paper's protocol (docs/figures.md).

A folder written here is rewritten whole: the files a previous build listed in its
``figures.json`` and does not write again are removed, so no stale figure survives.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..report.build import changed_params
from ..report.data import ResultFile
from ..report.html import CSS
from ..report.style import FORMATS, save, style
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
    files = [ResultFile.load(Path(p)) for p in inputs]
    if fig_def.jobs and not files:
        raise BadInput(f"figure {name}: needs a result of {', '.join(fig_def.jobs)}")
    start = time.perf_counter()
    built = draw(fig_def, files)
    out_dir.mkdir(parents=True, exist_ok=True)
    file = f"{name}.{fmt}"
    with style():
        save(built.fig, out_dir / file, fmt)
    return {"name": name, "file": file, "caption": caption(fig_def, built, files),
            "measured": _jsonable(built.measured), "seconds": time.perf_counter() - start,
            "width_in": float(built.fig.get_figwidth())}


def _remove_stale(out_dir: Path, keep: set[str]) -> list[str]:
    manifest = out_dir / MANIFEST
    if not manifest.exists():
        return []
    try:
        old = json.loads(manifest.read_text(encoding="utf-8")).get("files", [])
    except (ValueError, AttributeError):
        return []
    removed = []
    for name in old:
        path = out_dir / str(name)
        if str(name) not in keep and path.parent == out_dir and path.is_file():
            path.unlink()
            removed.append(str(name))
    return removed


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
            f'alt="{escape(fig_def.label)}"></a></figure><dl>{dl}</dl></section>')


GALLERY_CSS = CSS + """
figure.paper { display: block; width: 100%; max-width: 100%; margin: 0.5em 0; }
nav ol { columns: 2; font-size: 0.9em; } p.paper { color: #666; margin-top: -0.5em; }
p.missing { color: #a33; }
"""


def _finish(out_dir: Path, entries: list[dict[str, Any]], title: str,
            sections: list[str] | None = None, toc: list[tuple[str, str]] | None = None) -> None:
    keep = {e["file"] for e in entries} | {"index.html", MANIFEST}
    _remove_stale(out_dir, keep)
    manifest = {"files": sorted(e["file"] for e in entries), "figures": entries}
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
            built = draw(fig_def, files)
            file = f"{fig_def.name}.{fmt}"
            with style():
                save(built.fig, out_dir / file, fmt)
        except (BadInput, KeyError, ValueError, IndexError) as exc:
            sections.append(_entry_html(fig_def, None, f"{type(exc).__name__}: {exc}"))
            continue
        entry = {"name": fig_def.name, "file": file, "caption": caption(fig_def, built, files),
                 "measured": _jsonable(built.measured),
                 "seconds": time.perf_counter() - start,
                 "width_in": float(built.fig.get_figwidth())}
        entries.append(entry)
        sections.append(_entry_html(fig_def, entry))
    _finish(out_dir, entries, title, sections, toc)
    return entries


def listing() -> str:
    """``richlazy figure --list``: one line per registered figure, in paper order."""
    width = max(len(f.name) for f in REGISTRY)
    return "\n".join(f"{f.name:<{width}}  {f.paper.split(',')[0]} {f.label}: {f.panels}"
                     f"  [{', '.join(f.jobs) or 'no job'}]" for f in REGISTRY)
