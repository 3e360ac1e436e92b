"""The report's model-specific figures, declared in one table: model family → the builders
that draw its own figures beside the generic ones (phase diagrams, curves, lines, theory).

A builder takes ``(rf, out_dir, fmt, fields)`` and returns report entries (an empty list when
the file lacks what it draws). Kunin et al.'s ``neurons``/``partition``/``basin`` kinds
(:mod:`.kunin`) and the Theorem B.1 figure (:mod:`.theory_extra`, which draws several files
together) are planned by kind, not by family; the papers' figures as the papers lay them out
are in :mod:`richlazy_cli.figures` (docs/figures.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import grokking, practice
from .data import ResultFile

Builder = Callable[[ResultFile, Path, str, dict[str, str]], list[dict[str, Any]]]


def _cnn_roughness(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                   ) -> list[dict[str, Any]]:
    smooth = str(rf.params.get("arch", "")).startswith("smooth") or "filters" in rf.ds
    return practice._roughness(rf, out_dir, fmt, fields) if smooth else []


FAMILY_FIGURES: dict[str, tuple[Builder, ...]] = {
    "rhm": (practice._rhm,),
    "cnn": (practice._cnn, _cnn_roughness),
    "grokking": (grokking.grokking_figures,),
}


def family_figures(rf: ResultFile, out_dir: Path, fmt: str, fields: dict[str, str]
                   ) -> list[dict[str, Any]]:
    """Every model-specific figure of ``rf`` (none for a family without builders)."""
    return [entry for build in FAMILY_FIGURES.get(rf.model, ())
            for entry in build(rf, out_dir, fmt, fields)]
