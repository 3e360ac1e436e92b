"""The report's dispatch tables (richlazy_cli/report/build.py, report/families.py,
report/neurons.py) and its module names: each figure has one home, a kind is one row, and a
family's figures are chosen by the table, not by comparing names."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from richlazy_cli.report import build, families, neurons
from richlazy_cli.report.options import ReportKind

PACKAGE = Path(__file__).resolve().parents[2] / "richlazy_cli"


def _module_names(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}


def test_no_report_module_shares_a_name_with_a_figures_module_or_a_top_level_one() -> None:
    top = _module_names(PACKAGE) | {p.name for p in PACKAGE.iterdir()
                                     if (p / "__init__.py").is_file()}
    report = _module_names(PACKAGE / "report")
    assert {"build", "families", "neurons", "plots"} <= report  # the glob sees the modules
    assert report & (_module_names(PACKAGE / "figures") | top) == set()


def test_every_report_kind_is_one_row_and_every_planned_kind_draws() -> None:
    assert set(build.REPORT_KINDS) == {k.value for k in ReportKind}
    for kind in (*build.GENERIC, *neurons.KINDS):
        assert build.REPORT_KINDS[kind].draw is not build._draws_nothing, kind
    for kind in ("auto", "scaling"):  # whole-file or composite: drawn by other rows
        assert build.REPORT_KINDS[kind].draw is build._draws_nothing


def test_family_set_figures_get_their_family_and_action_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each row's builder sees the files of its (family, action), in input order; a kind other
    than auto keeps the rows of that kind only."""
    seen: list[tuple[str, list[str]]] = []

    def builder(tag: str) -> Any:
        def build_set(files: list[Any], out_dir: Path, fmt: str,
                      fields: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
            seen.append((tag, [rf.stem for rf in files]))
            return [{"file": f"{tag}.{fmt}"}]
        return build_set

    monkeypatch.setattr(families, "FAMILY_SET_FIGURES", {
        ("linear", "solve"): (("theory", builder("b1")),),
        ("cnn", "train"): (("curves", builder("cnn")),),
    })
    files = [SimpleNamespace(model=m, action=a, stem=s) for m, a, s in (
        ("linear", "solve", "l1"), ("linear", "train", "l2"), ("cnn", "train", "c1"),
        ("linear", "solve", "l3"), ("hermite", "solve", "h1"))]
    out = families.family_set_figures(files, tmp_path, "png", {})  # type: ignore[arg-type]
    assert seen == [("b1", ["l1", "l3"]), ("cnn", ["c1"])]
    assert [e["file"] for e in out] == ["b1.png", "cnn.png"]
    seen.clear()
    assert families.family_set_figures(files, tmp_path, "svg", {}, "theory") == [  # type: ignore[arg-type]
        {"file": "b1.svg"}]
    assert seen == [("b1", ["l1", "l3"])]
    seen.clear()
    assert families.family_set_figures(files[4:], tmp_path, "png", {}) == []  # type: ignore[arg-type]
    assert seen == []

