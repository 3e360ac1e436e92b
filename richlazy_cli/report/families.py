"""The report's model-specific figures, declared in two tables: what a family draws beside the
generic figures (phase diagrams, curves, lines, theory overlays).

* :data:`FAMILY_FIGURES`: model family → the builders of its own figures, one result file at a
  time. A builder takes ``(rf, out_dir, fmt, fields)`` and returns report entries (an empty list
  when the file lacks what it draws). ``richlazy report`` draws them with ``--kind auto``.
* :data:`FAMILY_SET_FIGURES`: (model family, action) → the report kind and builder of a figure
  drawn from all the report's files of that family and action together (one panel per file). A
  builder takes ``(files, out_dir, fmt, fields)`` (``fields``: stem → the file's provenance) and
  returns report entries. ``richlazy report`` draws them with ``--kind auto`` or their kind.

Nothing else chooses by a family's name: a new family figure is a builder and a row here. The
neuron-level kinds (``neurons``, ``partition``, ``basin``) are declared by kind in
:mod:`.neurons`; the papers' figures as the papers lay them out are in
:mod:`richlazy_cli.figures` (docs/figures.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import b1_regimes, grokking, rhm_cnn
from .data import ResultFile

Builder = Callable[[ResultFile, Path, str, dict[str, str]], list[dict[str, Any]]]
SetBuilder = Callable[[list[ResultFile], Path, str, dict[str, dict[str, str]]],
                      list[dict[str, Any]]]


def _cnn_roughness(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                   ) -> list[dict[str, Any]]:
    smooth = str(rf.params.get("arch", "")).startswith("smooth") or "filters" in rf.ds
    return rhm_cnn.roughness_figures(rf, out_dir, fmt, fields) if smooth else []


FAMILY_FIGURES: dict[str, tuple[Builder, ...]] = {
    "rhm": (rhm_cnn.rhm_figures,),
    "cnn": (rhm_cnn.cnn_figures, _cnn_roughness),
    "grokking": (grokking.grokking_figures,),
}

FAMILY_SET_FIGURES: dict[tuple[str, str], tuple[tuple[str, SetBuilder], ...]] = {
    ("linear", "solve"): (("theory", b1_regimes.b1_figures),),
}


def family_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                   ) -> list[dict[str, Any]]:
    """Every model-specific figure of ``rf`` (none for a family without builders)."""
    return [entry for build in FAMILY_FIGURES.get(rf.model, ())
            for entry in build(rf, out_dir, fmt, fields)]


def family_set_figures(files: list[ResultFile], out_dir: Path, fmt: str,
                       fields: dict[str, dict[str, str]], kind: str = "auto"
                       ) -> list[dict[str, Any]]:
    """The figures of :data:`FAMILY_SET_FIGURES` for ``files``: each row's builder gets the
    files of its family and action, in input order; ``kind`` other than ``auto`` keeps only
    the rows of that kind."""
    entries: list[dict[str, Any]] = []
    for (model, action), rows in FAMILY_SET_FIGURES.items():
        group = [rf for rf in files if (rf.model, rf.action) == (model, action)]
        for row_kind, build in rows:
            if group and kind in ("auto", row_kind):
                entries += build(group, out_dir, fmt, fields)
    return entries
