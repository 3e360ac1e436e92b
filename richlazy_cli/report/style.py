"""Figure style: sizes, fonts, colour maps and scales, deterministic saving.

Figures are built with :class:`matplotlib.figure.Figure` directly (never ``pyplot``), so the
report needs no display, uses the Agg canvas for raster output and leaves the user's backend
and global rcParams alone: every setting below is applied inside :func:`style`
(``matplotlib.rc_context``).

Sizes suit a paper's single column: 3.4 in wide, 8 pt text, constrained layout.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colors, rc_context
from matplotlib.figure import Figure

from .options import Format

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType  # not in every matplotlib: annotations only

    from .data import ResultFile

WIDTH = 3.4  # inches: one column of a two-column paper
HEIGHT = 2.6
DPI = 300
MISSING_FACE = "0.85"  # failed or missing cells: light grey ...
MISSING_HATCH = "0.55"  # ... hatched in a darker grey
SEQUENTIAL = "viridis"
DIVERGING = "RdBu_r"
FORMATS = tuple(f.value for f in Format)
WRITER = "richlazy"
"""The ``written_by`` value of the manifests richlazy writes (``summary.json``,
``figures.json``): a folder's manifest without it is another tool's, and nothing it lists is
ever deleted (docs/figures.md)."""


def stale_files(manifest: Path, keep: set[str], ours: Callable[[str], bool]) -> list[Path]:
    """The files a previous build listed in ``manifest`` (its ``figures`` entries' ``file``)
    and does not write again: only when the manifest carries richlazy's mark
    (:data:`WRITER`), only plain files directly in its folder, and only names ``ours`` accepts
    (a figure name richlazy would write). Anything else is left alone."""
    try:
        old = json.loads(manifest.read_text(encoding="utf-8"))
        if old.get("written_by") != WRITER:
            return []
        names = {str(entry["file"]) for entry in old.get("figures", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []
    folder = manifest.parent
    return [folder / name for name in sorted(names - keep)
            if "/" not in name and ours(name) and (folder / name).is_file()
            and not (folder / name).is_symlink()]

RC: dict[RcKeyType, Any] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "hatch.linewidth": 0.6,
    "hatch.color": MISSING_HATCH,
    "svg.hashsalt": "richlazy",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "path.simplify": True,
}

METADATA: dict[str, dict[str, Any]] = {
    "png": {"Software": None},
    "svg": {"Date": None},
    "pdf": {"CreationDate": None, "ModDate": None},
}


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The report's rcParams, for the duration of the block only."""
    with rc_context(RC):
        yield


def new_figure(height: float = HEIGHT, width: float = WIDTH) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def save(fig: Figure, path: Path, fmt: str) -> None:
    """Save deterministically: no dates in the metadata, fixed SVG hash salt, fixed dpi."""
    fig.savefig(path, format=fmt, dpi="figure", metadata=METADATA[fmt])


def figure_entry(rf: ResultFile, out_dir: Path, fig: Figure, name: str, var: str, fmt: str,
                 text: str, fields: dict[str, str], prefix: str = "practice",
                 **extra: Any) -> dict[str, Any]:
    """Save ``fig`` as ``STEM-PREFIX-NAME.FMT`` and return its entry in the report index
    (caption: ``text`` and the file's fields)."""
    file = f"{rf.stem}-{prefix}-{name}.{fmt}"
    save(fig, out_dir / file, fmt)
    caption = text + " " + "; ".join(f"{k}: {v}" for k, v in fields.items()) + "."
    return {"file": file, "kind": "practice", "var": var, "source": str(rf.path),
            "caption": caption, "stem": rf.stem, "missing": 0, **extra}


def value_scale(values: np.ndarray, magnitude: bool = False) -> tuple[colors.Normalize, str]:
    """Colour normalisation and map for the finite ``values``.

    * positive values spanning more than two decades: logarithmic, sequential;
    * values of both signs: linear, diverging, centred at 0 (symmetric limits), unless the
      quantity is a ``magnitude`` (a loss, distance, error: see :func:`is_magnitude`), whose
      rounding-level negative values must not switch it to a diverging map;
    * otherwise (losses, distances, any one-signed quantity): linear, sequential.
    """
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return colors.Normalize(0.0, 1.0), SEQUENTIAL
    lo, hi = float(finite.min()), float(finite.max())
    if lo > 0 and hi / lo > 100.0:
        return colors.LogNorm(lo, hi), SEQUENTIAL
    if lo < 0 < hi and not magnitude:
        half = max(-lo, hi)
        return colors.TwoSlopeNorm(0.0, -half, half), DIVERGING
    if lo == hi:
        pad = abs(lo) * 0.05 or 1.0
        return colors.Normalize(lo - pad, hi + pad), SEQUENTIAL
    return colors.Normalize(lo, hi), SEQUENTIAL


def wants_log(values: np.ndarray) -> bool:
    """A logarithmic value axis: positive values spanning more than two decades."""
    finite = values[np.isfinite(values)]
    return bool(finite.size and finite.min() > 0 and finite.max() / finite.min() > 100.0)


def edges(centres: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted cell centres: midpoints (geometric on a log axis)."""
    c = np.asarray(centres, dtype=float)
    t = np.log(c) if log else c
    if t.size == 1:
        e = np.array([t[0] - 0.5, t[0] + 0.5])
    else:
        mid = (t[1:] + t[:-1]) / 2
        e = np.concatenate([[t[0] - (mid[0] - t[0])], mid, [t[-1] + (t[-1] - mid[-1])]])
    return np.exp(e) if log else e


_MAGNITUDE = re.compile(r"loss|distance|error|risk|mse|norm\b", re.IGNORECASE)


def is_magnitude(name: str, long_name: str = "") -> bool:
    """Whether a variable is a non-negative quantity by its name (loss, distance, error...)."""
    return bool(_MAGNITUDE.search(name) or _MAGNITUDE.search(long_name))
