"""Benchmark: what the per-variable checksums of a result file cost (engine/checksums.py).

A synthetic result of about 1 GB with the variables of ``jobs/fig1b-gpu.toml`` (two-layer
``train``: the grid tau × delta × seed = 17 × 17 × 16, each metric over ``step``, the
teacher's weights) is written through the project's writer (:func:`.store.write_result`):
its structure (names, dimensions, attributes) is taken from a tiny run of the same model and
parameters, its values are random (so that compression does not shrink them more than real
trajectories), and ``step`` is stretched to make the file about 1 GB.

Printed, side by side: the write without checksums, with them (the SHA-256 pass the final
write adds), and with HDF5's ``fletcher32`` filter on every variable instead (the
alternative); the time to read the file (``open_result``, loaded) and ``store verify``'s
time on it, with and without checksums, and their ratio to the read (goal: verify ≤ 2× the
read); and the load average, since the machine may be shared.

Run: ``.venv/bin/python bench/verify.py [--gigabytes 1.0]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import richlazy
from richlazy_cli.engine import checksums, store
from richlazy_cli.engine.store import open_result, verify_report, write_result

ROOT = Path(__file__).resolve().parents[1]
GRID = {"tau": np.logspace(-1, 0.3, 17), "delta": np.linspace(-1, 1, 17),
        "seed": np.arange(100, 116)}


def structure() -> xr.Dataset:
    """One tiny configuration of fig1b-gpu's model and parameters (10 steps, 7 records)."""
    job = tomllib.loads((ROOT / "jobs" / "fig1b-gpu.toml").read_text())
    params = dict(job["params"])
    params.pop("device", None)
    params.update(steps=10, records=[0, 1, 2, 3, 5, 8, 10], implementation="numba")
    return richlazy.train(job["model"], **params)


def synthetic(gigabytes: float) -> xr.Dataset:
    """The grid of fig1b-gpu filled with random values, ``step`` stretched to the size."""
    one = open_result_of(structure())
    points = int(np.prod([v.size for v in GRID.values()]))
    per_step = sum(v.dtype.itemsize for v in one.data_vars.values() if "step" in v.dims)
    fixed = sum(v.nbytes for v in one.data_vars.values() if "step" not in v.dims)
    steps = max(int((gigabytes * 1e9 / points - fixed) / per_step), 1)
    g = np.random.default_rng(0)
    grid_dims = tuple(GRID)
    shape = tuple(v.size for v in GRID.values())
    data_vars: dict[str, Any] = {}
    for name, item in one.data_vars.items():
        trailing = tuple(steps if d == "step" else one.sizes[d] for d in item.dims)
        if name == "status":
            values = np.zeros(shape, np.int8)
        elif np.issubdtype(item.dtype, np.floating):
            values = g.standard_normal((*shape, *trailing))
        else:
            values = np.zeros((*shape, *trailing), item.dtype)
        data_vars[name] = xr.Variable((*grid_dims, *item.dims), values, dict(item.attrs))
    coords: dict[str, Any] = {k: (k, v, {"long_name": k}) for k, v in GRID.items()}
    coords["step"] = ("step", np.arange(steps) * 10, dict(one["step"].attrs))
    for name in one.coords:
        if name not in coords and name not in GRID:
            coords[name] = one.coords[name].variable
    attrs = dict(one.attrs)
    attrs["grid"] = '{"tau": "logspace(-1,0.3,17)", "delta": "linspace(-1,1,17)", ' \
                    '"seed": "range(100,116)"}'
    attrs["errors"] = "[]"
    attrs.pop("fingerprint", None)
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def open_result_of(ds: xr.Dataset) -> xr.Dataset:
    """A result as the API returns it, in the internal names the writer expects."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "one.h5"
        ds.to_netcdf(path, engine="h5netcdf")
        return open_result(path)


def timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    args = parser.parse_args()
    ds = synthetic(args.gigabytes)
    raw = sum(v.nbytes for v in ds.variables.values())
    print(f"synthetic fig1b-gpu result: {len(ds.data_vars)} variables, grid "
          f"{' x '.join(str(v.size) for v in GRID.values())}, step {ds.sizes['step']}, "
          f"{raw / 1e9:.2f} GB uncompressed")
    add = checksums.add
    encoding = store.encoding
    with tempfile.TemporaryDirectory() as folder:
        plain, summed, fletcher = (Path(folder) / n for n in ("plain.h5", "sha.h5", "f32.h5"))
        try:
            checksums.add = lambda path: None  # type: ignore[assignment]
            t_plain = timed(lambda: write_result(ds, plain))

            def with_fletcher(data: xr.Dataset, compress: bool = True) -> dict[str, Any]:
                enc = encoding(data, compress)
                return {str(name): {**enc.get(str(name), {}), "fletcher32": True}
                        for name, item in data.variables.items() if item.ndim > 0}

            store.encoding = with_fletcher  # type: ignore[assignment]
            t_fletcher = timed(lambda: write_result(ds, fletcher))
        finally:
            checksums.add = add  # type: ignore[assignment]
            store.encoding = encoding  # type: ignore[assignment]
        t_summed = timed(lambda: write_result(ds, summed))
        size = summed.stat().st_size
        t_read = min(timed(lambda: open_result(summed)) for _ in range(2))
        t_verify = min(timed(lambda: verify_report(summed)) for _ in range(2))
        t_verify_old = min(timed(lambda: verify_report(plain)) for _ in range(2))
        problems, _ = verify_report(summed)
        assert not problems, problems
        assert verify_report(plain)[1], "a file without checksums verifies with a note"
    print(f"file on disk: {size / 1e9:.2f} GB (gzip level 1 after shuffling, as written)")
    print(f"{'':34}{'seconds':>9}{'ratio':>9}")
    print(f"{'write, no checksums':34}{t_plain:9.2f}{1.0:9.2f}")
    print(f"{'write, SHA-256 per variable':34}{t_summed:9.2f}{t_summed / t_plain:9.2f}")
    print(f"{'write, fletcher32 on every dataset':34}{t_fletcher:9.2f}"
          f"{t_fletcher / t_plain:9.2f}")
    print(f"{'read (open_result, loaded)':34}{t_read:9.2f}{1.0:9.2f}")
    print(f"{'store verify, with checksums':34}{t_verify:9.2f}{t_verify / t_read:9.2f}")
    print(f"{'store verify, no checksums (old)':34}{t_verify_old:9.2f}"
          f"{t_verify_old / t_read:9.2f}")
    print(f"verify / read: {t_verify / t_read:.2f} (goal <= 2)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
