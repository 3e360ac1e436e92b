"""The self-contained ``index.html``: inline style, relative links, no scripts, no timestamps.

It lists, for each input file, its provenance (model, action, parameters that differ from
their defaults, grid, point counts, creation time, source file), every figure with its caption
and the table of variable extremes that ``summary.json`` also holds.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .data import ResultFile, format_value

CSS = """
body { font-family: system-ui, sans-serif; max-width: 75em; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: 600; } dd { margin: 0; }
figure { display: inline-block; vertical-align: top; width: 28em; max-width: 100%;
         margin: 0.5em 1em 1em 0; }
nav ol { columns: 2; font-size: 0.9em; }
figure img, figure object { width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: left; }
code { font-size: 0.9em; }
"""


def _figure(entry: dict[str, Any], fmt: str) -> str:
    """One figure at its own size: a CSS inch is 96 px, so a 3.4 in figure with 8 pt text is
    shown 3.4 in wide with 8 pt text (never shrunk to fit a fixed column), at most the page."""
    href = escape(entry["file"])
    width = entry.get("width_in")
    size = f' style="width: {float(width):.2f}in"' if width else ""
    alt = escape(f"{entry['kind']} figure of {entry['var']}")
    if entry["file"].lower().endswith(".pdf"):
        body = (f'<object data="{href}" type="application/pdf">'
                f'<a href="{href}">{href}</a></object>')
    else:
        body = f'<a href="{href}"><img src="{href}" alt="{alt}"></a>'
    link = ""
    if entry.get("explore"):  # a phase diagram's interactive view (report/explore.py)
        from .explore import link_html

        link = link_html(str(entry["explore"]))
    return (f'<figure id="{escape(entry["file"])}"{size}>{body}'
            f"<figcaption>{escape(entry['caption'])}</figcaption>{link}</figure>")


def _arg(arg: dict[str, Any] | None) -> str:
    return "" if not arg else ", ".join(f"{k} = {format_value(v)}" for k, v in arg.items())


def _stats_table(stats: dict[str, dict[str, Any]]) -> str:
    rows = []
    for name, s in stats.items():
        lo = "—" if s["min"] is None else f"{s['min']:.6g}"
        hi = "—" if s["max"] is None else f"{s['max']:.6g}"
        rows.append(
            f"<tr><td><code>{escape(name)}</code></td><td>{escape(s.get('long_name', ''))}</td>"
            f"<td>{escape(s.get('units', ''))}</td><td>{lo}</td><td>{escape(_arg(s['argmin']))}"
            f"</td><td>{hi}</td><td>{escape(_arg(s['argmax']))}</td></tr>"
        )
    head = ("<tr><th>variable</th><th>long name</th><th>units</th><th>min</th><th>at</th>"
            "<th>max</th><th>at</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def render_index(
    files: list[tuple[ResultFile, dict[str, str]]],
    figures: list[dict[str, Any]],
    variables: dict[str, dict[str, dict[str, Any]]],
    fmt: str,
    notes: dict[str, list[str]] | None = None,
) -> str:
    """The HTML page; ``files`` pairs each input with its provenance fields (label -> text),
    ``notes`` says per file what was not drawn and why."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>richlazy report</title>',
        f"<style>{CSS}</style></head><body>",
        "<h1>richlazy report</h1>",
        f"<p>{len(files)} result file{'s' if len(files) != 1 else ''}, {len(figures)} "
        f"figure{'s' if len(figures) != 1 else ''}. Machine-readable: "
        '<a href="summary.json">summary.json</a>. Failed or missing points are drawn hatched '
        "grey and are never interpolated.</p>",
    ]
    toc = []
    for rf, _ in files:
        items = "".join(f'<li><a href="#{escape(f["file"])}">{escape(f["kind"])}: '
                        f'{escape(f["var"])}</a></li>' for f in figures if f["stem"] == rf.stem)
        toc.append(f'<li><a href="#{escape(rf.stem)}">{escape(rf.stem)}</a><ol>{items}</ol>'
                   "</li>")
    parts.append(f"<nav><h2>Contents</h2><ol>{''.join(toc)}</ol></nav>")
    for rf, fields in files:
        parts.append(f'<section id="{escape(rf.stem)}"><h2>{escape(rf.stem)}</h2><dl>')
        for key, value in fields.items():
            parts.append(f"<dt>{escape(key)}</dt><dd>{escape(value)}</dd>")
        parts.append("</dl>")
        parts.extend(
            f'<p class="note"><strong>Note:</strong> {escape(text)}</p>'
            for text in (notes or {}).get(rf.stem, [])
        )
        parts.extend(_figure(f, fmt) for f in figures if f["stem"] == rf.stem)
        parts.append("<h3>Extremes of each variable</h3>")
        parts.append(_stats_table(variables.get(rf.stem, {})))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
