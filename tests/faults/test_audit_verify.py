"""``richlazy store verify`` reads the data: each corruption of a 4-point result (a bit
flipped inside a variable, compressed or not, or inside ``status``; a variable scaled by
1.0001, deleted or zeroed; a failed point without its ``errors`` entry; a NaN at a point of
status 0) exits 1 naming the variable; a file written before checksums verifies with a note."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from richlazy_cli.engine.checksums import ATTRIBUTE

SWEEP = ["sweep", "solve", "toy", "-g", "slope=linspace(0,1,4)", "-p", "steps=2048",
         "--jobs", "1", "-q"]
"""Four points; ``y`` (4 × 2048 × 2 float64, 128 kB) is stored compressed, ``y_final``,
``status`` and the coordinates contiguous."""


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> Path:
    from richlazy_cli.cli.app import run

    out = tmp_path_factory.mktemp("verify") / "r.h5"
    with pytest.MonkeyPatch.context() as mp:
        from ..conftest import ROOT, TEST_MODELS

        mp.setenv("RICHLAZY_MODELS", TEST_MODELS)
        mp.syspath_prepend(str(ROOT))
        assert run([*SWEEP, "-o", str(out)]) == 0
    with h5py.File(out) as fh:
        assert fh["y"].compression == "gzip" and fh["status"].chunks is None
        assert fh["y_final"].chunks is None and list(fh["status"][()]) == [0, 0, 0, 0]
    return out


def _flip_a_bit(path: Path, name: str) -> None:
    """One bit flipped in the middle of the variable's bytes in the file (its first chunk,
    when it is chunked)."""
    with h5py.File(path) as fh:
        item = fh[name]
        if item.chunks is None:
            offset, size = item.id.get_offset(), item.id.get_storage_size()
        else:
            info = item.id.get_chunk_info(0)
            offset, size = info.byte_offset, info.size
    with open(path, "r+b") as fh:
        fh.seek(offset + size // 2)
        byte = fh.read(1)[0]
        fh.seek(offset + size // 2)
        fh.write(bytes([byte ^ 0x10]))


def _edit(name: str, change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        with h5py.File(path, "r+") as fh:
            fh[name][...] = change(fh[name][()])
    return apply


def _delete(name: str) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        with h5py.File(path, "r+") as fh:
            del fh[name]
    return apply


def _nan_at_an_ok_point(values: np.ndarray) -> np.ndarray:
    values = values.copy()
    values[2, 5, 1] = np.nan
    return values


def _failed_without_entry(values: np.ndarray) -> np.ndarray:
    values = values.copy()
    values[1] = 2
    return values


def _without_checksums(path: Path) -> None:
    with h5py.File(path, "r+") as fh:
        del fh.attrs[ATTRIBUTE]


CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "bit in a compressed variable": (lambda p: _flip_a_bit(p, "y"), "y", ""),
    "bit in a contiguous variable": (lambda p: _flip_a_bit(p, "y_final"), "y_final", ""),
    "bit in status": (lambda p: _flip_a_bit(p, "status"), "status", ""),
    "scaled by 1.0001": (_edit("y", lambda v: v * 1.0001), "y", "differs from its checksum"),
    "deleted": (_delete("y_final"), "y_final", "is missing"),
    "zeroed": (_edit("y", np.zeros_like), "y", "differs from its checksum"),
    "status 2 without an errors entry": (_edit("status", _failed_without_entry), "status",
                                         "no entry in errors"),
    "NaN at a status-0 point": (_edit("y", _nan_at_an_ok_point), "y", "non-finite values"),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_each_corruption_exits_1_naming_the_variable(result, tmp_path, cli, case) -> None:
    corrupt, name, why = CORRUPTIONS[case]
    path = tmp_path / "r.h5"
    shutil.copyfile(result, path)
    assert cli("store", "verify", path).code == 0
    corrupt(path)
    verdict = cli("store", "verify", path)
    assert verdict.code == 1, (verdict.out, verdict.err)
    assert f"variable {name} " in verdict.err or f"variable {name}:" in verdict.err, verdict.err
    assert why in verdict.err, verdict.err
    assert "Traceback" not in verdict.err and len(verdict.err.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["status 2 without an errors entry", "NaN at a status-0 point"])
def test_consistency_is_checked_without_checksums_too(result, tmp_path, cli, case) -> None:
    """A file written before checksums: status, errors and non-finite values still checked."""
    corrupt, name, why = CORRUPTIONS[case]
    path = tmp_path / "r.h5"
    shutil.copyfile(result, path)
    _without_checksums(path)
    corrupt(path)
    verdict = cli("store", "verify", path)
    assert verdict.code == 1 and why in verdict.err and name in verdict.err, verdict.err


def test_a_file_without_checksums_verifies_with_a_note(result, tmp_path, cli) -> None:
    path = tmp_path / "old.h5"
    shutil.copyfile(result, path)
    _without_checksums(path)
    verdict = cli("store", "verify", path)
    assert verdict.code == 0, verdict.err
    assert verdict.out.startswith(f"{path}: ok (note: no checksums")
    as_json = json.loads(cli("store", "verify", path, "--json").out)
    assert as_json["ok"] and as_json["notes"] and not as_json["problems"]


def test_an_errors_entry_for_a_point_that_succeeded_is_a_problem(result, tmp_path, cli) -> None:
    path = tmp_path / "r.h5"
    shutil.copyfile(result, path)
    with h5py.File(path, "r+") as fh:
        slope = float(fh["slope"][1])
        fh.attrs["errors"] = json.dumps([{"point": {"slope": slope}, "status": 2,
                                          "message": "planted"}])
    verdict = cli("store", "verify", path)
    assert verdict.code == 1 and "disagree with their entry in errors" in verdict.err, verdict.err
