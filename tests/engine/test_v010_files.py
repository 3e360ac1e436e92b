"""Result files written by richlazy 0.1.0 read as today's (CHANGELOG.md, "Upgrading"): they
open in the API and the engine, verify with a note that they carry no checksums, report,
merge into a file of today's layout, and their data are what today's reader returns.

The files in tests/data/v0.1.0/ were written by the code of commit 13b2abb (version 0.1.0) with
tiny sweeps (one file per family: single-neuron and linear and hermite solves, two-layer and
diagonal trainings); they carry a ``_FillValue`` on floating-point coordinates, no checksums,
and ``richlazy_version = "0.1.0"``."""

from __future__ import annotations

import json
from pathlib import Path

import h5netcdf
import numpy as np
import pytest

from richlazy_cli.engine.store import open_result, verify_report

from ..conftest import ROOT

FILES = sorted((ROOT / "tests/data/v0.1.0").glob("*.h5"))
NO_CHECKSUMS = "no checksums"


def test_the_stored_files_are_small_and_from_0_1_0() -> None:
    assert {p.stem for p in FILES} == {"single-neuron-solve", "two-layer-train",
                                       "linear-solve", "hermite-solve", "diagonal-train"}
    for path in FILES:
        assert path.stat().st_size <= 50_000, path.name
        with h5netcdf.File(path, "r") as f:
            assert f.attrs["richlazy_version"] == "0.1.0"
            assert f.attrs["Conventions"] == "CF-1.11 richlazy-2"
            history = json.loads(f.attrs["richlazy_history"])
            assert history[0]["richlazy_version"] == "0.1.0"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_0_1_0_file_opens_and_verifies_with_a_note(path: Path) -> None:
    import richlazy

    problems, notes = verify_report(path)
    assert problems == []
    assert any(NO_CHECKSUMS in note for note in notes), notes
    internal = open_result(path)
    assert (internal["status"].values == 0).all()
    view = richlazy.open(path)  # the file layout of today, whatever the file's age
    assert view.attrs["Conventions"] == "CF-1.11 richlazy-2"
    # the data are the file's bits: today's reader changes no value
    with h5netcdf.File(path, "r") as f:
        for name in internal.data_vars:
            stored = f.variables[name if name in f.variables else f"step_{name}"][...]
            np.testing.assert_array_equal(np.asarray(internal[name].values), stored,
                                          err_msg=name)


@pytest.mark.system
def test_0_1_0_files_report_and_merge_into_todays_layout(cli, tmp_path: Path) -> None:
    result = cli("report", *FILES, "-o", tmp_path / "report", "-q")
    assert result.code == 0, result.err
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert set(summary["variables"]) == {p.stem for p in FILES}
    old = ROOT / "tests/data/v0.1.0/single-neuron-solve.h5"
    merged = tmp_path / "merged.h5"
    assert cli("store", "merge", merged, old, "-q").code == 0
    problems, notes = verify_report(merged)
    assert problems == [] and not any(NO_CHECKSUMS in n for n in notes)  # written today
    with h5netcdf.File(merged, "r") as f:
        assert "_FillValue" not in f.variables["time"].attrs  # today's coordinates
    with h5netcdf.File(old, "r") as f:
        assert "_FillValue" in f.variables["time"].attrs  # the earlier layout, read above
    for name, item in open_result(old).data_vars.items():
        np.testing.assert_array_equal(open_result(merged)[name].values, item.values)
