"""Silent wrong data: a data file rewritten with other contents but the same path, size and
modification time is read anew (``practice/data.py``, ``read_npz``: the cache is keyed by
the SHA-256 of the file's bytes, not by its path and mtime)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from richlazy_cli.practice import data

from ..conftest import run_process


def _write(path: Path, labels_shift: int) -> None:
    """A tiny 8×8 image set with its own test set (so no split depends on the labels), the
    labels shifted by ``labels_shift`` (mod 10)."""
    X = np.random.default_rng(0).standard_normal((50, 8, 8))
    y = (np.arange(50) + labels_shift) % 10
    np.savez(path, X=X[:40], y=y[:40], X_test=X[40:], y_test=y[40:])


def _rewrite_keeping_times(path: Path, labels_shift: int) -> None:
    """Other contents of the same size, then the old access and modification times back
    (what ``cp -p``, ``rsync -a`` or ``tar x`` within one second leave)."""
    before = os.stat(path)
    _write(path, labels_shift)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_rewritten_file_with_the_old_mtime_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    _write(path, 0)
    first = data.load("npz", 0, str(path))
    _rewrite_keeping_times(path, 3)
    second = data.load("npz", 0, str(path))
    np.testing.assert_array_equal(second.X_train, first.X_train)  # the same images
    np.testing.assert_array_equal(second.y_train, (first.y_train + 3) % 10)
    np.testing.assert_array_equal(second.y_test, (first.y_test + 3) % 10)


@pytest.mark.system
def test_training_on_a_rewritten_file_matches_a_fresh_process(tmp_path: Path) -> None:
    """The issue's reproduction: ``richlazy.train`` on ``d.npz``, the file rewritten with
    labels (y + 3) mod 10 and its mtime set back, trained again in the same process: the
    second result differs from the first and equals a fresh process's on the new file."""
    import richlazy
    from richlazy_cli.engine.store import open_result

    path = tmp_path / "d.npz"
    _write(path, 0)
    params = {"dataset": "npz", "data_file": str(path), "epochs": 3, "batch": 8}
    richlazy.train("cnn", output=tmp_path / "a.h5", **params)
    _rewrite_keeping_times(path, 3)
    richlazy.train("cnn", output=tmp_path / "b.h5", **params)
    fresh = run_process("train", "cnn", *(a for k, v in params.items()
                                          for a in ("-p", f"{k}={v}")),
                        "-o", tmp_path / "c.h5", "--quiet")
    assert fresh.code == 0, fresh.err
    a, b, c = (open_result(tmp_path / f"{n}.h5") for n in "abc")
    assert json.loads(b.attrs["inputs"]) == json.loads(c.attrs["inputs"])
    assert json.loads(a.attrs["inputs"]) != json.loads(b.attrs["inputs"])
    numbers = [n for n, v in a.data_vars.items() if v.dtype.kind == "f" and n != "elapsed"]
    assert "train_acc" in numbers and "train_loss" in numbers
    for name in numbers:
        np.testing.assert_array_equal(b[name].values, c[name].values, err_msg=name)
    assert any(not np.array_equal(a[n].values, b[n].values, equal_nan=True) for n in numbers)
