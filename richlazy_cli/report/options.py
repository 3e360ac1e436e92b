"""The report's command-line choices, importable without matplotlib, NumPy or xarray (the CLI
declares its options at start-up, and neither ``--version`` nor a sweep should pay for the
plotting library)."""

from __future__ import annotations

import enum


class ReportKind(enum.StrEnum):
    """What ``richlazy report --kind`` draws (see :mod:`.build`)."""

    AUTO = "auto"
    PHASE = "phase"
    CURVES = "curves"
    THEORY = "theory"
    LINES = "lines"
    SCALING = "scaling"
    NEURONS = "neurons"
    PARTITION = "partition"
    BASIN = "basin"


class Format(enum.StrEnum):
    """Figure file formats (``--format``)."""

    PNG = "png"
    SVG = "svg"
    PDF = "pdf"


class Reduction(enum.StrEnum):
    """How ``seed`` is reduced in figures (``--reduce``)."""

    MEAN = "mean"
    MEDIAN = "median"
