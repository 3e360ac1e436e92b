"""The report kinds of Kunin et al.'s figures (richlazy_cli/report/neurons.py): ``neurons``
(Fig. 1a), ``partition`` (Fig. 5a), ``basin`` (Fig. 7); result files made by small sweeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from richlazy_cli.report.neurons import PARTITION_LEVELS, partition_columns
from tests.conftest import assert_one_line_error

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from richlazy_cli.cli.app import run

    root = tmp_path_factory.mktemp("kunin")
    out = {name: root / f"{name}.h5" for name in ("neurons", "partition", "basin", "plain")}
    small = ["-p", "h=6", "-p", "k=2", "-p", "n=10", "-p", "n_test=20", "-p", "steps=30",
             "-p", "n_records=6", "-g", "tau=0.2,2", "-g", "delta=-1,1"]
    assert run(["sweep", "train", "two-layer", "-p", "d=2", "-p", "save_params=true", *small,
                "-o", str(out["neurons"]), "-q", "--jobs", "1"]) == 0
    assert run(["sweep", "train", "two-layer", "-p", "d=2", "-p", "data=xor",
                "-p", "save_surface=true", *small, "-o", str(out["partition"]), "-q",
                "--jobs", "1"]) == 0
    w0 = json.dumps([[x, p] for p in (0.0, 0.5) for x in np.linspace(-1.5, 1.5, 6).tolist()])
    assert run(["sweep", "solve", "single-neuron", "-p", "method=exact", "-p", "n_records=2",
                "-p", "t_max=30", "-p", "beta_star=1,0", "-g", "a0=linspace(-1.5,1.5,6)",
                "-g", f"w0={w0}", "-o", str(out["basin"]), "-q", "--jobs", "1"]) == 0
    assert run(["sweep", "solve", "single-neuron", "-p", "method=exact", "-p", "n_records=5",
                "-g", "delta=-1,1", "-o", str(out["plain"]), "-q", "--jobs", "1"]) == 0
    return out


@pytest.mark.parametrize("kind", ["neurons", "partition", "basin"])
def test_kind_draws_its_figure(kind: str, files: dict[str, Path], tmp_path: Path,
                               cli: Any) -> None:
    result = cli("report", files[kind], "-o", tmp_path / "r", "--kind", kind, "-q")
    assert result.code == 0, result.err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    figs = [f for f in summary["figures"] if f["kind"] == kind]
    assert len(figs) == 1 and figs[0]["missing"] == 0
    assert (tmp_path / "r" / figs[0]["file"]).read_bytes().startswith(PNG)
    # auto draws it too (when its variable is drawn)
    var = {"neurons": "W", "partition": "surface", "basin": "basin_score"}[kind]
    assert cli("report", files[kind], "-o", tmp_path / "auto", "--var", var, "-q").code == 0
    auto = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert [f["file"] for f in auto["figures"] if f["kind"] == kind] == [figs[0]["file"]]


@pytest.mark.parametrize(("kind", "which"), [("neurons", "partition"), ("partition", "neurons"),
                                             ("basin", "plain"), ("neurons", "basin")])
def test_kind_that_does_not_apply_is_one_line(kind: str, which: str, files: dict[str, Path],
                                              tmp_path: Path, cli: Any) -> None:
    result = cli("report", files[which], "-o", tmp_path / "r", "--kind", kind)
    assert_one_line_error(result)
    assert "does not apply" in result.err
    assert not (tmp_path / "r").exists()


def test_plain_single_neuron_auto_has_no_basin(files: dict[str, Path], tmp_path: Path,
                                               cli: Any) -> None:
    assert cli("report", files["plain"], "-o", tmp_path / "r", "-q").code == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert not [f for f in summary["figures"] if f["kind"] == "basin"]


def test_partition_columns() -> None:
    loss = np.array([1.0, 0.95, 0.85, 0.6, 0.4, 0.2, 0.05, 0.01])
    assert partition_columns(loss) == [0, 2, 4, 6, 7]
    assert PARTITION_LEVELS == (0.9, 0.5, 0.1)
    assert partition_columns(np.array([1.0, 0.99])) == [0, 1]
