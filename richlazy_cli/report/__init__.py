"""Figures and the HTML index built from result files (``richlazy report``).

:func:`build_report` turns result files into phase diagrams, learning curves, line plots and
theory overlays (matplotlib, no display needed), a self-contained ``index.html`` and
``summary.json``; :func:`summary_table` renders the summary for the terminal.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_report", "summary_table"]


def __getattr__(name: str) -> Any:
    """Import the plotting side on first use, so that importing a light module of the package
    (its command-line choices, :mod:`.options`) does not load matplotlib."""
    if name == "build_report":
        from .build import build_report

        return build_report
    if name == "summary_table":
        from .summary import summary_table

        return summary_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
