"""The command line starts without the numerical libraries: importing its entry point, printing
``--version`` and answering a tab completion import none of xarray, pandas, NumPy, SciPy,
h5py, numba, torch or matplotlib (they come with the command that needs them; start-up times
in bench/startup.py); importing the Python API imports none of them either; a one-point dry
run imports neither the executors nor the progress bar nor an integrator it does not use nor
anything that writes a result file, nor Dask or Pint (which xarray's checks of an array would
import, numerics/duck_arrays.py). A check of the module set in a fresh interpreter, not a
timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.system

HEAVY = ("xarray", "pandas", "numpy", "scipy", "h5py", "numba", "torch", "matplotlib",
         "richlazy_cli.models.base", "richlazy_cli.engine.job")
"""What the start-up must not import (the last two import the others)."""

PROBE = """
import json, sys
heavy = {heavy!r}
def report():
    print("MODULES=" + json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
try:
{body}
finally:
    report()
"""


def _imported(body: str, env: dict[str, str] | None = None,
              names: tuple[str, ...] = HEAVY) -> tuple[list[str], str]:
    """Which of ``names`` running ``body`` in a fresh interpreter imports, and its stdout."""
    code = PROBE.format(heavy=names, body="\n".join("    " + line for line in body.splitlines()))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          cwd=ROOT, timeout=120, check=False)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES=")]
    assert line, proc.stderr
    return json.loads(line[-1].removeprefix("MODULES=")), proc.stdout


def test_importing_the_entry_point_imports_no_numerical_library() -> None:
    modules, _ = _imported("import richlazy_cli.cli.app")
    assert modules == []


def test_version_imports_no_numerical_library() -> None:
    modules, out = _imported("from richlazy_cli.cli.app import run\nrun(['--version'])")
    assert modules == [] and out.startswith("richlazy ")


def test_completion_imports_no_numerical_library() -> None:
    env = {"_RICHLAZY_COMPLETE": "complete_bash", "COMP_WORDS": "richlazy sw",
           "COMP_CWORD": "1"}
    modules, out = _imported("from richlazy_cli.cli.app import run\nrun([])", env)
    assert modules == [] and out.split() == ["sweep"]


DRY_RUN_SKIPS = ("richlazy_cli.engine.executors", "richlazy_cli.engine.progress", "joblib",
                 "rich", "scipy.integrate", "scipy.optimize", "h5py", "h5netcdf", "matplotlib",
                 "richlazy_cli.mathtext", "distributed", "dask", "pint")
"""What a one-point dry run of the exact single neuron must not import: the executors (loky)
and the progress bar (rich) are the run's alone, the exact method integrates nothing, and the
dry run writes nothing, so none of the writing stack (h5netcdf and h5py, the CF layer's labels
through matplotlib's mathtext, dask's distributed scheduler that xarray's write looks up) is
imported: the final write is priced by the result's bytes (docs/estimates.md). A dry run does
import NumPy and xarray: its estimate computes a probe, which the model returns as a
Dataset (whose checks import neither Dask nor Pint, numerics/duck_arrays.py)."""


def test_importing_the_api_imports_no_numerical_library() -> None:
    """``richlazy`` (the Python API, which the command's sweep goes through) imports xarray
    where a function needs it, not on import."""
    modules, _ = _imported("import richlazy")
    assert modules == []


def test_a_one_point_dry_run_imports_no_executor_writer_or_unused_integrator(
        tmp_path: Path) -> None:
    argv = ["richlazy", "sweep", "solve", "single-neuron", "-g", "delta=1", "-p", "method=exact",
            "-o", str(tmp_path / "x.h5"), "--dry-run"]
    body = f"import sys\nsys.argv = {argv!r}\nfrom richlazy_cli.cli.app import main\nmain()"
    modules, out = _imported(body, names=DRY_RUN_SKIPS)
    assert "estimated time:" in out and not (tmp_path / "x.h5").exists(), out
    assert modules == []


BENCH_DRY_RUN_SKIPS = ("dask", "pint", "distributed", "richlazy_cli.engine.executors",
                       "richlazy_cli.engine.progress", "h5py", "h5netcdf", "matplotlib")
"""What the one-point dry run that bench/startup.py times (the single neuron's default method,
``both``) must not import: xarray builds its Dataset without importing Dask or Pint
(numerics/duck_arrays.py), and, as for the exact method, no executor and nothing that writes.
It does import SciPy's integrators: its probe integrates the flow."""


def test_the_benchmarked_dry_run_imports_neither_dask_nor_pint(tmp_path: Path) -> None:
    argv = ["richlazy", "sweep", "solve", "single-neuron", "-g", "delta=1",
            "-o", str(tmp_path / "x.h5"), "--dry-run", "--json"]
    body = f"import sys\nsys.argv = {argv!r}\nfrom richlazy_cli.cli.app import main\nmain()"
    modules, out = _imported(body, names=(*BENCH_DRY_RUN_SKIPS, "scipy.integrate", "xarray"))
    assert json.loads(out)["estimate"]["wall_seconds"] > 0 and not (tmp_path / "x.h5").exists()
    assert modules == ["scipy.integrate", "xarray"]


def test_the_probe_sees_a_heavy_import() -> None:
    """The check can fail: a command that runs a model imports them."""
    modules, _ = _imported("import richlazy_cli.engine.job")
    assert {"numpy", "xarray", "richlazy_cli.models.base"} <= set(modules)
