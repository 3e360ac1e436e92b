"""Every model declares its working memory, and a run too large for the memory is refused
before anything of its size is allocated (docs/engine.md; engine/footprint.py).

Two kinds of test:

* the declared working memory of each family (``working_bytes`` of
  :meth:`richlazy_cli.models.base.Model.footprint`), plus its declared outputs, against the
  peak measured in a fresh process (tests/memory_probe.py): within a factor of 2 either way, at
  sizes where the formula's dominant terms dominate the peak;
* the refusal: a configuration whose declared working memory exceeds what the process may
  use (``ulimit -v`` of :data:`LIMIT`) is one line, exit 2, naming the size, the memory
  available and the parameter to change, before anything runs (the command without
  ``--dry-run``: before this check, each of them allocated, failed or was killed).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from richlazy_cli.engine.footprint import human
from richlazy_cli.models.base import get_model
from tests.conftest import CliResult, assert_one_line_error
from tests.memory_probe import measure

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 12 * 10**9
"""The address space the refused commands run under (``ulimit -v``): the memory available
to them is at most this, whatever the machine."""

MEASURED: list[tuple[str, str, dict[str, Any]]] = [
    ("two-layer", "train", {"d": 1000, "h": 3000, "n": 200, "n_test": 200, "steps": 3,
                            "n_records": 2}),
    ("two-layer", "train", {"d": 20, "h": 1000, "n": 3000, "n_test": 4000, "steps": 2,
                            "n_records": 2}),
    ("linear", "train", {"d": 1000, "h": 1000, "n": 10, "data_kind": "gaussian", "steps": 2,
                         "n_records": 2}),
    ("linear", "train", {"d": 10, "h": 10, "n": 2000, "steps": 2, "n_records": 2}),
    ("linear", "solve", {"d": 600, "h": 600, "n": 10, "data_kind": "gaussian", "t_max": 0.01,
                         "n_records": 20}),
    ("diagonal", "solve", {"d": 100000, "N": 50, "r": 2, "t_max": 10, "n_records": 4}),
    ("diagonal", "train", {"d": 1500, "N": 1500, "r": 2, "max_steps": 3, "n_records": 4,
                           "tol": 1e-30}),
    ("single-neuron", "solve", {"d": 10000, "t_max": 1.0, "beta_star": [1.0] + [0.0] * 9999,
                                "beta0": [0.01] * 10000}),
    ("hermite", "solve", {"m": 500, "d": 4000, "P": 4, "t_max": 0.001, "n_records": 3}),
    ("hermite", "train", {"m": 500, "d": 10000, "P": 4, "steps": 3, "n_records": 2}),
    ("hermite", "train", {"m": 10, "d": 10000, "P": 4, "steps": 2, "n_records": 2,
                          "batch": 800}),
    ("cnn", "train", {"kernel": "full", "probe_fraction": 0.25, "epochs": 1, "first_steps": 0,
                      "records": [1]}),
]
"""One configuration or two per family and action, each peaking at 100–700 MB (about
two minutes together: ``slow``; bench/memory.py prints the same side by side)."""


@pytest.mark.slow
@pytest.mark.system
@pytest.mark.parametrize(("name", "action", "params"), MEASURED,
                         ids=[f"{n}-{a}-{i}" for i, (n, a, _) in enumerate(MEASURED)])
def test_declared_working_memory_is_the_measured_peak_within_2x(
        name: str, action: str, params: dict[str, Any]) -> None:
    model = get_model(name)
    values = model.resolve(action, params)
    footprint = model.footprint(action, values)
    assert footprint.working_bytes is not None, f"{name} {action} declares no working memory"
    declared = float(footprint.working_bytes) + float(footprint.output_bytes or 0.0)
    measured = measure(name, action, params)["measured"]
    assert measured > 50e6, (name, measured)  # large enough to be the configuration's own
    assert 0.5 <= measured / declared <= 2.0, (name, action, measured, declared)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _run_limited(*args: str, cwd: Path) -> CliResult:
    proc = subprocess.run([sys.executable, "-m", "richlazy_cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, preexec_fn=_limited, check=False,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                               "OMP_NUM_THREADS": "1", "HOME": str(cwd)})
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def _single_neuron_job(path: Path, d: int) -> Path:
    """A job of one data row as wide as ``d`` (its ``XᵀX`` is ``d × d``)."""
    zeros = ", ".join(["0.0"] * (d - 1))
    path.write_text('action = "solve"\nmodel = "single-neuron"\n\n[params]\n'
                    f'd = {d}\nmethod = "numeric"\nX = [[1.0, {zeros}]]\ny = [1.0]\n'
                    f'beta0 = [{", ".join(["0.01"] * d)}]\n')
    return path


REFUSED: list[tuple[str, str, dict[str, Any], str]] = [
    ("two-layer", "train", {"d": 1000, "h": 10_000_000}, "h (now 10000000;"),
    ("linear", "train", {"d": 2, "h": 2, "n": 10_000_000}, "n (now 10000000;"),
    ("diagonal", "solve", {"d": 100_000_000, "N": 100_000}, "N (now 100000;"),
    ("hermite", "solve", {"m": 1_000_000, "d": 100_000}, "m (now 1000000;"),
    ("cnn", "train", {"dataset": "mnist1d", "arch": "smooth1d", "kernel": "full",
                      "probe_fraction": 1.0, "epochs": 1}, "probe_fraction (now 1;"),
    ("single-neuron", "solve", {"d": 200_000, "method": "numeric"}, "d (now 200000;"),
]
"""A configuration per family whose declared working memory is past :data:`LIMIT`, and the
parameter its refusal names."""


@pytest.mark.system
@pytest.mark.parametrize(("name", "action", "params", "lever"), REFUSED,
                         ids=[r[0] for r in REFUSED])
def test_a_run_past_the_memory_is_refused_before_it_runs(
        tmp_path: Path, name: str, action: str, params: dict[str, Any], lever: str) -> None:
    model = get_model(name)
    out = tmp_path / "out.h5"
    if name == "single-neuron":
        job = _single_neuron_job(tmp_path / "job.toml", int(params["d"]))
        args = [action, "-c", str(job)]
        values = model.resolve(action, {**params, "X": [[1.0] + [0.0] * (params["d"] - 1)],
                                        "y": [1.0], "beta0": [0.01] * params["d"]})
    else:
        args = [action, name, *[x for k, v in params.items() for x in ("-p", f"{k}={v}")]]
        values = model.resolve(action, params)
    declared = float(model.footprint(action, values).working_bytes or 0.0)
    assert declared > LIMIT
    result = _run_limited(*args, "-o", str(out), cwd=tmp_path)
    assert_one_line_error(result)
    line = result.err.strip()
    assert f"{human(declared)} working memory per configuration" in line, line
    assert "GB available" in line, line
    assert f"use a smaller {lever}" in line, line
    assert not out.exists() and not list(tmp_path.glob("out.h5*"))


@pytest.mark.system
def test_hermite_dry_run_is_refused_without_drawing_the_weights(tmp_path: Path) -> None:
    """The dry run prices hermite by the greedy theory of the initial directions: it draws
    no ``m × d`` matrix (before, 745 GiB here: an internal error, exit 3) and the memory
    check refuses the run in one line."""
    out = tmp_path / "out.h5"
    result = _run_limited("sweep", "solve", "hermite", "-p", "m=1000000", "-p", "d=100000",
                          "-g", "seed=0,1", "--dry-run", "-o", str(out), cwd=tmp_path)
    assert_one_line_error(result)
    assert "working memory" in result.err and "use a smaller m" in result.err, result.err
    assert not out.exists()


def test_hermite_initial_overlaps_are_the_initial_directions_first_columns() -> None:
    """:func:`initial_overlaps`, drawn a block of rows at a time, is bit for bit the first
    ``P`` columns of :func:`initial_directions` (one block, several, a partial last one)."""
    import numpy as np

    from richlazy_cli.models.hermite import model as hm

    for m, d, P in ((3, 5, 5), (1000, 64, 16), (7, hm.OVERLAP_BLOCK // 3 + 1, 4)):
        assert np.array_equal(hm.initial_overlaps(3, m, d, P),
                              hm.initial_directions(3, m, d)[:, :P]), (m, d, P)
