"""What a researcher expects of the figures: typeset mathematics, results only (no bookkeeping),
every slice of a learning curve, vectors as norms, and a word instead of an empty plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from richlazy_cli.mathtext import symbol, to_mathtext
from richlazy_cli.report import build_report
from richlazy_cli.report.data import ResultFile
from richlazy_cli.report.plots import draw_lines, draw_phase
from richlazy_cli.report.style import save, style

from .test_report import DELTA, TAU, coord, phase_file, write  # noqa: F401 - a fixture

TWO_LAYER_DELTA = "relative scale: a_k^2 - ||w_k||^2 = delta"


def test_plain_text_mathematics_becomes_mathtext() -> None:
    assert to_mathtext(TWO_LAYER_DELTA) == r"relative scale: $a_{k}^{2}-\|w_{k}\|^{2}=\delta$"
    assert to_mathtext("learning rate of a (eta_a)") == r"learning rate of a ($\eta_{a}$)"
    assert to_mathtext("training loss") == "training loss"
    assert to_mathtext("costs $5") == r"costs \$5"  # a dollar is not the start of a formula
    assert symbol("tau") == r"$\tau$" and symbol("sigma0") == r"$\sigma_{0}$"
    assert symbol("seed") is None


@pytest.fixture
def two_layer_file(tmp_path: Path) -> Path:
    """A (tau, delta) sweep with a step and a vector dimension, plus bookkeeping variables."""
    t, d, k = np.meshgrid(TAU, DELTA, [0, 10, 100], indexing="ij")
    loss = np.exp(-t * k / 50.0) + 1e-3 * (1 + d)
    w = np.stack([loss, 2 * loss, 2 * loss], axis=-1)  # norm 3 * loss
    alpha = np.outer(TAU, 1 + DELTA)
    return write(
        tmp_path / "tl.h5",
        grid={"tau": (*coord(TAU, "overall scale: |a_k| ||w_k|| = tau^2", "", "log"),
                      "logspace(-1,1,5)"),
              "delta": (*coord(DELTA, TWO_LAYER_DELTA, "", "linear"), "linspace(-1,1,4)")},
        own={"step": coord([0, 10, 100], "training step"), "dim": coord([0, 1, 2], "input")},
        data={"loss": (("tau", "delta", "step"), loss, "training loss", ""),
              "w": (("tau", "delta", "step", "dim"), w, "student weights w_k", ""),
              "alpha": (("tau", "delta"), alpha, "layer ratio of the initialisation", ""),
              "t_max": (("tau", "delta"), np.full((5, 4), 3.0), "time horizon", "s"),
              "step_values": (("tau", "delta", "step"), k.astype(float), "steps", "")},
        params={"tau": 1.0, "delta": 0.0, "t_max": 3.0},
    )


def test_axis_labels_are_mathtext(two_layer_file: Path, tmp_path: Path) -> None:
    rf = ResultFile.load(two_layer_file)
    with style():
        drawn = draw_phase(rf, "loss", "tau", "delta", {}, "mean")
        ax = drawn.fig.axes[0]
        assert ax.get_xlabel().startswith(r"$\tau$: overall scale:")
        assert r"$a_{k}^{2}-\|w_{k}\|^{2}=\delta$" in ax.get_ylabel().replace("\n", " ")
        assert ax.get_ylabel().startswith(r"$\delta$")
        save(drawn.fig, tmp_path / "labels.png", "png")  # mathtext that renders


def test_bookkeeping_variables_are_not_drawn(two_layer_file: Path, tmp_path: Path) -> None:
    summary = build_report([two_layer_file], tmp_path / "rep")
    drawn = {f["var"] for f in summary["figures"]}
    assert drawn == {"loss", "w"}  # not alpha, t_max (a parameter), step_values, status
    asked = build_report([two_layer_file], tmp_path / "alpha", variables=["alpha"])
    assert {f["var"] for f in asked["figures"]} == {"alpha"}  # unless asked for


def test_learning_curves_draw_every_slice(two_layer_file: Path) -> None:
    rf = ResultFile.load(two_layer_file)
    with style():
        drawn = draw_lines(rf, "loss", "step", "tau", {}, "mean", "curves", panel="delta")
    panels = [ax for ax in drawn.fig.axes if ax.get_visible()]
    assert len(panels) == len(DELTA)
    assert all(len(ax.lines) == len(TAU) for ax in panels)
    # each panel holds its own slice
    with_delta = {ax.get_title(): ax.lines[0].get_ydata()[-1] for ax in panels}
    assert len(set(with_delta.values())) == len(DELTA)
    summary_caption = " ".join(drawn.notes)
    assert "one panel per delta" in summary_caption


def test_vector_variables_are_drawn_as_their_norm(two_layer_file: Path, tmp_path: Path
                                                   ) -> None:
    summary = build_report([two_layer_file], tmp_path / "rep", kind="curves", variables=["w"])
    (fig,) = summary["figures"]
    assert "Euclidean norm over dim" in fig["caption"]
    rf = ResultFile.load(two_layer_file)
    with style():
        w = draw_lines(rf, "w", "step", "tau", {}, "mean", "curves", panel="delta")
        loss = draw_lines(rf, "loss", "step", "tau", {}, "mean", "curves", panel="delta")
    for ax_w, ax_loss in zip(w.fig.axes, loss.fig.axes, strict=True):
        for line_w, line_loss in zip(ax_w.lines, ax_loss.lines, strict=True):
            np.testing.assert_allclose(line_w.get_ydata(), 3 * line_loss.get_ydata())


def test_a_file_whose_points_all_failed_says_so(tmp_path: Path, phase_file: Path  # noqa: F811
                                                ) -> None:
    failed = write(
        tmp_path / "failed.h5",
        grid={"tau": (*coord(TAU[:3], "scale", "", "log"), "1,2,3")},
        own={"step": coord([0, 1], "training step")},
        data={"loss": (("tau", "step"), np.full((3, 2), np.nan), "training loss", "")},
        status=np.array([2, 2, 1], dtype=np.int8),
    )
    out = tmp_path / "rep"
    summary = build_report([failed, phase_file], out)
    assert not [f for f in summary["figures"] if f["stem"] == "failed"]
    assert summary["figures"]  # the other file is drawn
    assert summary["notes"] == ["failed: all 3 points failed (3 failed, 0 not computed): "
                                "nothing to draw"]
    assert "all 3 points failed" in (out / "index.html").read_text(encoding="utf-8")
    alone = build_report([failed], tmp_path / "alone", kind="phase")  # not an error either
    assert alone["figures"] == [] and alone["notes"]
