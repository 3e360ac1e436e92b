"""numerics/duck_arrays.py: after :func:`defer`, xarray's duck-array checks answer as xarray's
own do, without importing Dask or Pint until they are imported, and with them afterwards.
Each check runs in a fresh interpreter (this process may have imported Dask already)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..conftest import ROOT

pytestmark = pytest.mark.system

CHECK = """
import sys
import numpy as np
import xarray as xr
from xarray.namedarray import pycompat, utils
from richlazy_cli.numerics.duck_arrays import defer

defer()
defer()  # idempotent
ds = xr.Dataset({"a": (("t", "m"), np.ones((3, 2)))},
                coords={"t": np.arange(3.0), "m": np.array(["exact", "numeric"])})
assert not {"dask", "dask.array", "pint"} & set(sys.modules), "imported before any use"
assert pycompat.array_type("dask") == () and pycompat.array_type("pint") == ()
assert utils.is_dask_collection(np.ones(2)) is False and "dask" not in sys.modules
assert ds.t.dtype == np.float64 and ds.m.dtype == np.dtype("<U7") and ds.chunks == {}
import tempfile, pathlib
from xarray.backends import locks, writers
folder = pathlib.Path(tempfile.mkdtemp())
ds.to_netcdf(folder / "a.h5", engine="h5netcdf")  # the write looks up no Dask scheduler
assert not {"dask", "distributed"} & set(sys.modules), "the write imported Dask"
assert xr.open_dataset(folder / "a.h5", engine="h5netcdf").load().identical(ds)

import dask.array as da
# once Dask is imported, the write's scheduler lookup is xarray's own
assert locks.get_dask_scheduler() == locks.get_dask_scheduler.__wrapped__() == "threaded"
assert writers.get_dask_scheduler() == "threaded"
import pint

# once imported, the answers are xarray's own, from the entries xarray builds
assert pycompat.array_type("dask") == pycompat.DuckArrayModule("dask").type == (da.Array,)
assert pycompat.array_type("pint") == pycompat.DuckArrayModule("pint").type == (pint.Quantity,)
assert type(pycompat._cached_duck_array_modules["dask"]) is pycompat.DuckArrayModule
assert pycompat.mod_version("pint") == pycompat.DuckArrayModule("pint").version
lazy = xr.Dataset({"a": ("t", da.ones(4, chunks=2))})
assert lazy.chunks == {"t": (2, 2)} and utils.is_dask_collection(lazy.a.data)
lazy.to_netcdf(folder / "lazy.h5", engine="h5netcdf")
assert xr.open_dataset(folder / "lazy.h5", engine="h5netcdf").a.values.tolist() == [1.0] * 4
assert not utils.is_dask_collection(ds) and utils.is_dask_collection(lazy)
masked = da.ma.masked_array(np.arange(3.0), mask=[False, True, False], chunks=1)
v = xr.Variable("t", masked)  # xarray fills a masked Dask array's mask with NaN
assert np.isnan(v.values[1]) and v.values[0] == 0.0
q = pint.UnitRegistry().Quantity(np.arange(3.0), "m")
assert np.array_equal(pycompat.to_numpy(q), np.arange(3.0))
print("CHECKED")
"""


def test_deferred_checks_import_nothing_and_answer_as_xarrays_own() -> None:
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120,
                          check=False)
    assert proc.returncode == 0 and "CHECKED" in proc.stdout, proc.stderr
