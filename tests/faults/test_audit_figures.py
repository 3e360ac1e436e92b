"""``figure -o DIR`` and ``report -o DIR`` delete only files they wrote: a ``figures.json``
planted in the folder (another tool's, or a hostile one) that lists the user's files never
gets them deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fig3_result(tmp_path_factory) -> Path:
    """The single-neuron run of ``kunin-fig3`` with its tiny overrides (a second or so)."""
    from richlazy_cli.cli.app import run

    out = tmp_path_factory.mktemp("fig3") / "kunin-fig3.h5"
    assert run(["sweep", "-c", str(ROOT / "jobs/paper/kunin-fig3.toml"), "-p", "n_records=21",
                "-o", str(out), "-q", "--jobs", "1"]) == 0
    return out


def _plant(folder: Path, manifest: str) -> list[Path]:
    """The user's files, and a manifest naming them (not richlazy's: no marker)."""
    folder.mkdir(parents=True, exist_ok=True)
    mine = [folder / "notes.txt", folder / "kunin-fig3.pdf", folder / "data.csv"]
    for path in mine:
        path.write_text("the user's own\n")
    (folder / manifest).write_text(json.dumps({"files": [p.name for p in mine],
                                               "figures": []}))
    return mine


def test_figure_never_deletes_what_a_planted_figures_json_lists(fig3_result, tmp_path, cli,
                                                                monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = _plant(tmp_path, "figures.json")
    result = cli("figure", "kunin-fig3", str(fig3_result), "-o", ".")
    assert result.code == 0, result.err
    assert (tmp_path / "kunin-fig3.png").is_file()
    assert all(p.read_text() == "the user's own\n" for p in mine)


def test_report_never_deletes_what_a_planted_summary_lists(fig3_result, tmp_path,
                                                           cli) -> None:
    folder = tmp_path / "rep"
    folder.mkdir()
    mine = [folder / "notes.txt"]
    for path in mine:
        path.write_text("the user's own\n")
    (folder / "summary.json").write_text(json.dumps(
        {"figures": [{"file": p.name} for p in mine]}))
    result = cli("report", str(fig3_result), "-o", str(folder), "-q")
    assert result.code == 0, result.err
    assert (folder / "notes.txt").read_text() == "the user's own\n"


def test_figure_deletes_only_registered_names_even_under_richlazys_mark(fig3_result, tmp_path,
                                                                        cli) -> None:
    """A manifest that carries the mark (copied, or forged) still deletes only names of the
    form ``<registered figure>.<format>``; a stale registered figure does go."""
    (tmp_path / "notes.txt").write_text("the user's own\n")
    (tmp_path / "kunin-fig1a.png").write_bytes(b"an older build's figure")
    (tmp_path / "figures.json").write_text(json.dumps(
        {"written_by": "richlazy",
         "figures": [{"file": "notes.txt"}, {"file": "kunin-fig1a.png"}]}))
    result = cli("figure", "kunin-fig3", str(fig3_result), "-o", str(tmp_path))
    assert result.code == 0, result.err
    assert (tmp_path / "notes.txt").read_text() == "the user's own\n"
    assert not (tmp_path / "kunin-fig1a.png").exists()
    assert json.loads((tmp_path / "figures.json").read_text())["written_by"] == "richlazy"
