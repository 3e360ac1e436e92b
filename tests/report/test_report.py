"""Tests of ``richlazy_cli.report``: figures, index.html and summary.json.

Every result file is written during the test session (by the store, following the schema of
docs/engine.md); nothing binary is checked in.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import h5py
import matplotlib.image as mpimg
import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import QuadMesh
from matplotlib.colors import LogNorm, to_rgb

from richlazy_cli.engine.cf import internal_name, user_name
from richlazy_cli.engine.store import open_result  # the models' names (method)
from richlazy_cli.errors import BadInput
from richlazy_cli.report import build_report, summary_table
from richlazy_cli.report.data import ResultFile, is_log_spaced
from richlazy_cli.report.plots import draw_lines, draw_phase, draw_theory
from richlazy_cli.report.style import is_magnitude, save, style, value_scale

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}
RICHLAZY = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "richlazy"


# -- building result files that follow the schema -------------------------------------------
def coord(values: Any, long_name: str, units: str = "", spacing: str | None = None
          ) -> tuple[str, np.ndarray, dict[str, str]]:
    attrs = {"long_name": long_name}
    if units:
        attrs["units"] = units
    if spacing is not None:
        attrs["spacing"] = spacing
    return np.asarray(values), attrs  # type: ignore[return-value]


def write(
    path: Path,
    grid: dict[str, tuple[np.ndarray, dict[str, str], str]],
    own: dict[str, tuple[np.ndarray, dict[str, str]]],
    data: dict[str, tuple[tuple[str, ...], np.ndarray, str, str]],
    status: np.ndarray | None = None,
    model: str = "two-layer",
    action: str = "train",
    params: dict[str, Any] | None = None,
) -> Path:
    """A result file: grid dims (values, attrs, spec) in order, then the model's own dims."""
    coords = {name: (name, v, a) for name, (v, a, _) in grid.items()}
    coords.update({name: (name, v, a) for name, (v, a) in own.items()})
    gdims = tuple(grid)
    shape = tuple(len(grid[d][0]) for d in gdims)
    if status is None:
        status = np.zeros(shape, dtype=np.int8)
    variables = {
        name: (dims, arr, {"long_name": ln, **({"units": u} if u else {})})
        for name, (dims, arr, ln, u) in data.items()
    }
    if gdims:
        variables["status"] = (gdims, status.astype(np.int8), {"long_name": "point status"})
        variables["elapsed"] = (gdims, np.full(shape, 0.01), {"long_name": "elapsed time",
                                                              "units": "s"})
    errors = [
        {"point": {d: float(grid[d][0][i]) for d, i in zip(gdims, idx, strict=True)},
         "status": int(status[idx]), "message": "test failure"}
        for idx in zip(*np.nonzero(status > 0), strict=True)
    ]
    ds = xr.Dataset(variables, coords=coords)
    ds.attrs = {
        "richlazy_version": "0.1.0", "model": model, "action": action,
        "params": json.dumps(params or {}), "grid": json.dumps({d: grid[d][2] for d in gdims}),
        "command": json.dumps(["richlazy", "sweep", action, model]),
        "created": "2026-11-29T18:00:00Z", "host": "test", "versions": json.dumps({}),
        "complete": 1, "errors": json.dumps(errors),
    }
    try:
        from richlazy_cli.engine.store import write_result
    except ImportError:  # the store not there yet: plain xarray, same format
        ds.to_netcdf(path, engine="h5netcdf")
    else:
        write_result(ds, path)
    return path


TAU = np.logspace(-1, 1, 5)
DELTA = np.linspace(-1, 1, 4)
STEP = np.array([0, 10, 100, 1000])
DIVERGED = (0, 0, 0)  # (tau, delta, seed) index of a diverged point: one seed only
ERRORED = (1, 1)  # (tau, delta) where every seed failed


@pytest.fixture(scope="module")
def phase_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """two-layer-like sweep: tau (log) x delta (linear) x seed, with step; failed points."""
    t, d, s, k = np.meshgrid(TAU, DELTA, [0, 1], STEP, indexing="ij")
    loss = np.exp(-t * k / 50.0) * (1.0 + 0.1 * s) + 1e-6  # positive, many decades
    align = (d * t - 0.3 + 0.05 * s)[..., 0]  # signed, no step dimension
    status = np.zeros((5, 4, 2), dtype=np.int8)
    status[DIVERGED] = 1
    status[ERRORED] = [2, -1]
    loss[DIVERGED] = 1e30  # a diverged point leaves garbage behind: it must not count
    align[DIVERGED] = 1e30
    loss[ERRORED] = np.nan
    align[ERRORED] = np.nan
    path = tmp_path_factory.mktemp("phase") / "tl.h5"
    return write(
        path,
        grid={"tau": (*coord(TAU, "initialisation scale", "", "log"), "logspace(-1,1,5)"),
              "delta": (*coord(DELTA, "relative scale", "", "linear"), "linspace(-1,1,4)"),
              "seed": (*coord([0, 1], "seed", "", "list"), "range(2)")},
        own={"step": coord(STEP, "training step")},
        data={"loss": (("tau", "delta", "seed", "step"), loss, "training loss", ""),
              "align": (("tau", "delta", "seed"), align, "alignment", "rad")},
        status=status, params={"d": 20, "h": 50, "eta": 0.1, "tau": 1.0, "delta": 0.0},
    )


T = np.linspace(0.0, 5.0, 11)
DELTAS = np.array([-0.5, 0.0, 0.5])


@pytest.fixture(scope="module")
def theory_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """single-neuron-like delta sweep with method = (exact, ode) over time."""
    d, tt = np.meshgrid(DELTAS, T, indexing="ij")
    exact = np.exp(-(1 + d) * tt)
    ode = exact + 1e-3 * np.sin(tt + d)
    beta = np.stack([exact, ode], axis=1)  # (delta, method, time)
    path = tmp_path_factory.mktemp("theory") / "sn.h5"
    return write(
        path,
        grid={"delta": (*coord(DELTAS, "relative scale", "", "linear"), "-0.5,0,0.5")},
        own={"method": coord(np.array(["exact", "ode"]), "method"),
             "time": coord(T, "time", "s")},
        data={"beta": (("delta", "method", "time"), beta, "regression coefficient", "")},
        model="single-neuron", action="solve", params={"a0": 1.0, "delta": 0.0},
    )


N = np.array([1, 10, 100, 1000])


@pytest.fixture(scope="module")
def lines_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One grid dimension with geometric values but 'list' spacing; no time, no method."""
    path = tmp_path_factory.mktemp("lines") / "ln.h5"
    return write(
        path,
        grid={"n": (*coord(N, "number of samples", "", "list"), "1,10,100,1000")},
        own={},
        data={"error": (("n",), 1.0 / np.sqrt(N), "test error", "")},
        model="not-a-registered-model", action="train", params={"n": 1, "lr": 0.5},
    )


# -- checks shared by the tests -------------------------------------------------------------
class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [v for k, v in attrs if k in ("href", "src", "data") and v]


def check_report(out: Path, summary: dict[str, Any], fmt: str = "png") -> None:
    """Figures exist and are valid, links resolve, summary.json is what was returned."""
    assert json.loads((out / "summary.json").read_text(encoding="utf-8")) == summary
    assert summary["figures"]
    for fig in summary["figures"]:
        path = out / fig["file"]
        assert path.is_file(), fig["file"]
        head = path.read_bytes()[:200]
        if fmt == "svg":
            assert b"<svg" in head
        else:
            assert head.startswith(MAGIC[fmt]), fig["file"]
        if fmt == "png":
            assert float(np.var(mpimg.imread(path)[..., :3])) > 0.0
        assert fig["caption"] and fig["source"]
    parser = _Links()
    parser.feed((out / "index.html").read_text(encoding="utf-8"))
    files = {f["file"] for f in summary["figures"]}
    assert files <= set(parser.links)  # every figure is on the page
    for link in parser.links:
        assert "://" not in link and not link.startswith("/")
        if link.startswith("#"):  # the table of contents: an anchor on this page
            assert f'id="{link[1:]}"' in (out / "index.html").read_text(encoding="utf-8")
            continue
        assert (out / link).is_file(), link


def direct_extremes(path: Path, name: str) -> xr.DataArray:
    """The variable as summary.json defines it, computed directly with xarray."""
    with open_result(path) as ds:
        da = ds[name].load()
        if "status" in ds:
            da = da.where(ds["status"].load() == 0)
    return da.where(np.isfinite(da))


# -- tests ----------------------------------------------------------------------------------
def test_auto_phase_sweep(phase_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    summary = build_report([phase_file], out)
    check_report(out, summary)
    kinds = {(f["kind"], f["var"]) for f in summary["figures"]}
    assert kinds == {("phase", "loss"), ("phase", "align"), ("curves", "loss")}
    assert (out / "tl-phase-loss.png").is_file()
    # caption: model, action, changed parameters (model not registered -> all given), grid,
    # creation time, source file
    cap = next(f["caption"] for f in summary["figures"] if f["kind"] == "phase")
    for text in ("two-layer", "train", "d = 20", "logspace(-1,1,5)", "2026-11-29T18:00:00Z",
                 str(phase_file)):
        assert text in cap, text
    assert "over tau and delta" in cap  # default axes: the first two grid dimensions
    assert "step = 1000 (last)" in cap and "mean over 2 seeds" in cap
    table = summary_table(summary)
    assert table.row_count == 2


def test_colour_scales_and_labels(phase_file: Path, theory_file: Path) -> None:
    rf = ResultFile.load(phase_file)
    with style():
        signed = draw_phase(rf, "align", "tau", "delta", {}, "mean")
        loss = draw_phase(rf, "loss", "tau", "delta", {}, "mean", contours=True)
    mesh = next(c for c in signed.fig.axes[0].collections if isinstance(c, QuadMesh))
    assert mesh.get_cmap().name == "RdBu_r" and mesh.norm.vcenter == 0.0  # signed: diverging
    assert -mesh.norm.vmin == mesh.norm.vmax  # centred at 0
    assert signed.fig.axes[1].get_ylabel() == "alignment [rad]"  # colour bar: long_name [units]
    mesh = next(c for c in loss.fig.axes[0].collections if isinstance(c, QuadMesh))
    assert mesh.get_cmap().name == "viridis" and isinstance(mesh.norm, LogNorm)
    with xr.open_dataset(phase_file, engine="h5netcdf") as ds:  # the same cells, directly
        direct = ds["loss"].where(ds["status"] == 0).isel(step=-1).mean("seed").load()
    drawn = np.ma.asarray(mesh.get_array()).reshape(len(DELTA), len(TAU))
    np.testing.assert_array_equal(drawn.filled(np.nan), direct.transpose("delta", "tau").values)
    assert len(loss.fig.axes[0].collections) > 1  # contour lines drawn
    # a distance with rounding-level negative values stays sequential
    norm, cmap = value_scale(np.array([-1e-17, 0.2, 0.5]), is_magnitude("kernel_distance"))
    assert cmap == "viridis" and norm.vmin == -1e-17
    assert value_scale(np.array([-1e-17, 0.2, 0.5]))[1] == "RdBu_r"
    assert is_magnitude("x", "training loss") and not is_magnitude("align", "alignment")
    rf = ResultFile.load(theory_file)
    with style():
        drawn = draw_theory(rf, "beta", "time", "delta", {}, "mean")
    lines = drawn.fig.axes[0].lines
    exact = [ln for ln in lines if ln.get_linestyle() == "--"]
    assert len(exact) == len(DELTAS) and len(lines) == 2 * len(DELTAS)
    assert all(to_rgb(ln.get_color()) == (0.0, 0.0, 0.0) for ln in exact)
    # the number is in the caption, in full; the title names the variable only (never clips)
    assert "max |exact − numeric| = " in drawn.description
    assert drawn.fig.axes[0].get_title() == r"$\beta$"


def test_summary_numbers_equal_direct_xarray(phase_file: Path, theory_file: Path,
                                             lines_file: Path, tmp_path: Path) -> None:
    files = [phase_file, theory_file, lines_file]
    summary = build_report(files, tmp_path / "rep")
    check_report(tmp_path / "rep", summary)
    for path in files:
        stats = summary["variables"][path.stem]
        with open_result(path) as ds:
            names = [v for v in ds.data_vars if v not in ("status", "elapsed")]
        # summary.json names variables and dimensions as the file does (engine/cf.py)
        assert sorted(stats) == sorted(user_name(n) for n in names)
        for name in names:
            da = direct_extremes(path, name)
            s = stats[user_name(name)]
            assert s["min"] == float(da.min(skipna=True))
            assert s["max"] == float(da.max(skipna=True))
            for key in ("min", "max"):
                at = {internal_name(d): v for d, v in s["arg" + key].items()}
                assert set(at) == set(da.dims)
                index = {d: int(np.flatnonzero(da[d].values == v)[0]) for d, v in at.items()}
                assert float(da.isel(index)) == s[key]
    # the diverged point's garbage (1e30) and the errored NaNs are excluded
    assert summary["variables"]["tl"]["align"]["max"] < 100


def test_failed_points_are_missing_and_hatched_grey(phase_file: Path, tmp_path: Path) -> None:
    rf = ResultFile.load(phase_file)
    with style():
        drawn = draw_phase(rf, "align", "tau", "delta", {}, "mean")
        png = tmp_path / "p.png"
        save(drawn.fig, png, "png")
    ax = drawn.fig.axes[0]
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    z = np.ma.asarray(mesh.get_array()).reshape(len(DELTA), len(TAU))  # rows: delta
    # every seed failed at ERRORED -> missing; one seed failed at DIVERGED -> the other seed
    assert z.mask[ERRORED[1], ERRORED[0]]
    assert int(np.ma.count_masked(z)) == 1 == drawn.missing
    with xr.open_dataset(phase_file, engine="h5netcdf") as ds:
        other = float(ds["align"].isel(tau=0, delta=0, seed=1))
    assert z[DIVERGED[1], DIVERGED[0]] == other
    # the pixel at the centre of the missing cell is grey (hatch or background); a drawn cell
    # is not (viridis / RdBu have no grey)
    image = mpimg.imread(png)[..., :3]
    height = image.shape[0]

    def pixel(i_tau: int, i_delta: int) -> np.ndarray:
        px, py = ax.transData.transform((TAU[i_tau], DELTA[i_delta]))
        return image[round(height - py), round(px)]

    grey = pixel(ERRORED[0], ERRORED[1])
    assert np.ptp(grey) < 0.02 and 0.4 < grey[0] < 0.95
    coloured = pixel(3, 2)
    assert np.ptp(coloured) > 0.05


def test_seed_reduction_median_and_band(phase_file: Path) -> None:
    rf = ResultFile.load(phase_file)
    with style():
        drawn = draw_lines(rf, "loss", "step", "tau", {}, "mean", "curves")
    ax = drawn.fig.axes[0]
    assert ax.get_xscale() == "log"  # steps 0, 10, 100, 1000: geometric after the 0
    assert ax.get_yscale() == "log"  # losses spanning many decades
    assert any("mean over 2 seeds" in n for n in drawn.notes)
    with xr.open_dataset(phase_file, engine="h5netcdf") as ds:
        loss = ds["loss"].where(ds["status"] == 0).isel(delta=0).load()
    # first line = tau[0]: mean over the seeds that did not fail
    line = ax.lines[0].get_ydata()
    expected = loss.isel(tau=0).mean("seed", skipna=True).values
    np.testing.assert_array_equal(line, expected)
    assert line[-1] == float(loss.isel(tau=0, seed=1, step=-1))  # seed 0 diverged there
    assert len(ax.collections) == len(TAU)  # one band per line


def test_auto_theory_overlay(theory_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    summary = build_report([theory_file], out, fmt="svg")
    check_report(out, summary, "svg")
    assert [(f["kind"], f["var"]) for f in summary["figures"]] == [("theory", "beta")]
    with open_result(theory_file) as ds:
        b = ds["beta"].load()
    methods = list(b["method"].values)  # isel: xarray 2026.9 .sel ignores string scalars
    exact, ode = b.isel(method=methods.index("exact")), b.isel(method=methods.index("ode"))
    worst = float(np.abs(exact - ode).max())
    assert worst > 1e-4  # the overlay has something to show
    assert summary["figures"][0]["max_abs_diff"] == pytest.approx(worst, rel=1e-12)
    assert "single-neuron" in summary["figures"][0]["caption"]


def test_auto_lines_and_log_detection(lines_file: Path, phase_file: Path, tmp_path: Path
                                      ) -> None:
    out = tmp_path / "rep"
    summary = build_report([lines_file], out, fmt="pdf")
    check_report(out, summary, "pdf")
    assert [(f["kind"], f["var"]) for f in summary["figures"]] == [("lines", "error")]
    cap = summary["figures"][0]["caption"]
    assert "parameters: lr = 0.5, n = 1" not in cap  # grid parameter n is not listed
    assert "lr = 0.5" in cap
    rf = ResultFile.load(lines_file)
    assert is_log_spaced(rf, "n")  # 'list' spacing, geometric values
    with style():
        drawn = draw_lines(rf, "error", "n", None, {}, "mean", "lines")
    assert drawn.fig.axes[0].get_xscale() == "log"
    def bare(values: Any, spacing: str | None = None) -> ResultFile:
        attrs = {"long_name": "v"} | ({"spacing": spacing} if spacing else {})
        ds = xr.Dataset(coords={"v": ("v", np.asarray(values), attrs)})
        return ResultFile(Path("x.h5"), "x", ds, "m", "train", {}, {"v": "spec"}, "")

    rounded = np.unique(np.round(np.logspace(0, np.log10(300), 10))).astype(int)  # 1, 2, 4, ...
    assert is_log_spaced(bare(np.concatenate([[0], rounded])), "v")
    assert is_log_spaced(bare([10, 20, 50, 100], "list"), "v")
    assert not is_log_spaced(bare(np.linspace(0, 300, 11)), "v")
    assert not is_log_spaced(bare(np.linspace(0.1, 1, 10)), "v")  # a decade, but arithmetic
    assert not is_log_spaced(bare(np.logspace(-1, 1, 5), "linear"), "v")  # the attribute rules
    assert not is_log_spaced(bare(["a", "b", "c"]), "v")
    tl = ResultFile.load(phase_file)
    assert is_log_spaced(tl, "tau") and not is_log_spaced(tl, "delta")
    with style():
        phase = draw_phase(tl, "align", "tau", "delta", {}, "mean")
    assert phase.fig.axes[0].get_xscale() == "log"
    assert phase.fig.axes[0].get_yscale() == "linear"


def test_at_selection_and_explicit_axes(phase_file: Path, tmp_path: Path) -> None:
    summary = build_report([phase_file], tmp_path / "a", kind="phase", variables=["loss"],
                           x="delta", y="tau", at={"step": "100.0000001", "seed": "1"})
    check_report(tmp_path / "a", summary)
    (fig,) = summary["figures"]
    assert fig["kind"] == "phase" and "step = 100" in fig["caption"]
    assert "seed = 1" in fig["caption"]
    summary = build_report([phase_file], tmp_path / "b", kind="curves", variables=["loss"],
                           at={"tau": "1"}, reduce="median")
    (fig,) = summary["figures"]
    assert "tau = 1" in fig["caption"] and "median over 2 seeds" in fig["caption"]


def test_output_is_deterministic(phase_file: Path, tmp_path: Path) -> None:
    for fmt in ("svg", "pdf", "png"):
        kw: dict[str, Any] = {"fmt": fmt, "contours": True, "variables": ["loss"]}
        a = build_report([phase_file], tmp_path / f"a{fmt}", kind="phase", **kw)
        build_report([phase_file], tmp_path / f"b{fmt}", kind="phase", **kw)
        for f in a["figures"]:
            assert (tmp_path / f"a{fmt}" / f["file"]).read_bytes() == \
                (tmp_path / f"b{fmt}" / f["file"]).read_bytes(), f["file"]
    assert (tmp_path / "asvg" / "index.html").read_bytes() == \
        (tmp_path / "bsvg" / "index.html").read_bytes()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variables": ["nope"]}, "--var nope: no such variable in tl.h5"),
        ({"x": "nope"}, "--x nope: not a dimension of tl.h5"),
        ({"at": {"tau": "0.123"}}, "--at tau=0.123: not on the grid of tl.h5"),
        ({"at": {"tau": "abc"}}, "--at tau=abc: 'abc' is not a number"),
        ({"at": {"nope": "1"}}, "--at nope=1: nope is not a dimension of tl.h5"),
        ({"kind": "theory"}, "--kind theory does not apply to tl.h5"),
        ({"kind": "bogus"}, "--kind 'bogus': expected one of"),
        ({"fmt": "jpg"}, "--format 'jpg': expected one of png, svg, pdf"),
        ({"reduce": "max"}, "--reduce 'max': expected one of mean, median"),
        ({"x": "tau", "y": "tau"}, "--x and --y are both tau"),
    ],
)
def test_bad_options(phase_file: Path, tmp_path: Path, kwargs: dict[str, Any], message: str
                     ) -> None:
    out = tmp_path / "rep"
    with pytest.raises(BadInput, match="^" + re.escape(message)) as info:
        build_report([phase_file], out, **kwargs)
    assert "\n" not in str(info.value)
    assert not out.exists()  # nothing written


def test_bad_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5\n")
    with pytest.raises(BadInput, match="is not an HDF5 file"):
        build_report([text], tmp_path / "a")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as fh:
        fh["x"] = np.arange(3.0)
    with pytest.raises(BadInput, match="not a richlazy result"):
        build_report([foreign], tmp_path / "b")
    with pytest.raises(BadInput, match="no such file"):
        build_report([tmp_path / "missing.h5"], tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_scaling_kind_delegates(phase_file: Path, tmp_path: Path) -> None:
    """--kind scaling hands the (masked) file to report/scaling.py and lists what it drew."""
    from richlazy_cli.report import scaling
    m = np.array([2, 4, 8, 16, 32])
    t = np.concatenate([[0.0], np.logspace(-1, 3, 41)])
    mm, tt, ss = np.meshgrid(m, t, [0, 1], indexing="ij")
    loss = (1.0 / (1.0 + tt) + 0.5 / mm) * (1.0 + 0.01 * ss)  # (m, time, seed)
    loss = loss.transpose(0, 2, 1)  # (m, seed, time)
    status = np.zeros((5, 2), dtype=np.int8)
    status[2, 1] = 2
    loss[2, 1] = 1e30  # garbage at a failed point: must not reach the fits
    path = write(
        tmp_path / "hm.h5",
        grid={"m": (*coord(m, "student width", "", "list"), "2,4,8,16,32"),
              "seed": (*coord([0, 1], "seed", "", "list"), "range(2)")},
        own={"time": coord(t, "time")},
        data={"loss": (("m", "seed", "time"), loss, "population loss", "")},
        status=status, model="hermite", action="solve", params={"beta": 1.5, "P": 64},
    )
    out = tmp_path / "rep"
    summary = build_report([path], out, kind="scaling")
    check_report(out, summary)
    assert {f["kind"] for f in summary["figures"]} == {"scaling"}
    clean = loss.copy()
    clean[2, 1] = np.nan
    ds = xr.open_dataset(path, engine="h5netcdf").load()
    ds["loss"] = (("m", "seed", "time"), clean)
    expected = json.loads(json.dumps(scaling._clean(scaling.fit_scaling(ds))))
    raw = xr.open_dataset(path, engine="h5netcdf").load()
    assert json.loads(json.dumps(scaling._clean(scaling.fit_scaling(raw)))) != expected
    assert sum(len(f["fits"]) for f in summary["figures"]) == 3
    for fig in summary["figures"]:
        for what, fit in fig["fits"].items():
            assert fit == expected[what], what
    with pytest.raises(BadInput, match=re.escape("--kind scaling does not apply to tl.h5")):
        build_report([phase_file], tmp_path / "bad", kind="scaling")
    assert not (tmp_path / "bad").exists()


@pytest.mark.skipif(not RICHLAZY.exists() or shutil.which("true") is None,
                    reason="the richlazy CLI is not installed yet")
def test_report_of_a_real_sweep(tmp_path: Path) -> None:
    out = tmp_path / "sweep.h5"
    run = subprocess.run(
        [str(RICHLAZY), "sweep", "solve", "single-neuron", "-g", "delta=linspace(-1,1,5)",
         "-o", str(out), "-q"], capture_output=True, text=True, timeout=120,
    )
    if run.returncode != 0 and "unknown model" in run.stderr:
        pytest.skip("the single-neuron model is not registered yet")
    assert run.returncode == 0, run.stderr
    rep = tmp_path / "rep"
    run = subprocess.run(
        [str(RICHLAZY), "report", str(out), "-o", str(rep), "--var", "loss", "--var", "beta"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == str(rep / "index.html")
    summary = json.loads((rep / "summary.json").read_text(encoding="utf-8"))
    check_report(rep, summary)
    assert {f["kind"] for f in summary["figures"]} == {"theory"}
    checked = 0
    for name, s in summary["variables"]["sweep"].items():
        da = direct_extremes(out, name)
        if s["min"] is not None:
            assert s["min"] == float(da.min()) and s["max"] == float(da.max())
            checked += 1
        else:  # no finite value: nothing to compare, and the summary says so
            assert int(da.count()) == 0, name
    assert checked >= 2, summary["variables"]["sweep"]  # at least loss and beta compared


@pytest.mark.skipif(not RICHLAZY.exists(), reason="the richlazy CLI is not installed yet")
def test_cli_bad_inputs_exit_2_with_one_line(phase_file: Path, tmp_path: Path) -> None:
    """`richlazy report` on each bad input: exit code 2, one line on stderr, nothing written."""
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5\n")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as fh:
        fh["x"] = np.arange(3.0)
    cases = {
        "not HDF5": ([str(text)], "is not an HDF5 file"),
        "not richlazy": ([str(foreign)], "not a richlazy result"),
        "--var": ([str(phase_file), "--var", "nope"], "--var nope: no such variable"),
        "--x": ([str(phase_file), "--x", "nope"], "--x nope: not a dimension"),
        "--at": ([str(phase_file), "--at", "tau=0.123"], "--at tau=0.123: not on the grid"),
    }
    procs = {
        name: subprocess.Popen([str(RICHLAZY), "report", *args, "-o", str(tmp_path / name)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (args, _) in cases.items()
    }  # concurrently: each process spends most of its time importing
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 2, (name, stderr)
        assert len(stderr.strip().splitlines()) == 1, (name, stderr)
        assert cases[name][1] in stderr, (name, stderr)
        assert not (tmp_path / name).exists()
