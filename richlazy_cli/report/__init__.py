"""Figures and the HTML index built from result files (``richlazy report``).

:func:`build_report` turns result files into phase diagrams, learning curves, line plots and
theory overlays (matplotlib, no display needed), a self-contained ``index.html`` and
``summary.json``; :func:`summary_table` renders the summary for the terminal.
"""

from .build import build_report
from .summary import summary_table

__all__ = ["build_report", "summary_table"]
