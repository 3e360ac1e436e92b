"""Tests of the explorable phase diagrams (``richlazy_cli/report/explore.py``).

The result files are small real runs made in-process (a two-layer train sweep with its
weights saved, d = 2, and a single-neuron solve with the closed form and the numerical
solution); every expected value is read back from the HDF5 file with xarray, independently
of the report's own loading.

The browser tests open a page in headless Chromium (Debian's ``chromium`` and
``chromium-driver``; Selenium drives ``/usr/bin/chromedriver`` and never downloads a driver),
tap a cell with a real pointer and read the plotted values back from the Bokeh document. They
skip where the browser is missing, and fail instead under ``RICHLAZY_REQUIRE_BROWSER=1``
(``.ci/run`` installs the browser and sets it).
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

import richlazy
from richlazy_cli.report.data import ResultFile
from richlazy_cli.report.explore import (
    PALETTE,
    explore_axes,
    gather,
    link_html,
    page_name,
    write_explore,
)

TAU, DELTA, SEEDS = [0.1, 0.5, 2.0], [-1.0, 0.0, 1.0], [0, 1]


@pytest.fixture(scope="module")
def two_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3 x 3 x 2-seed two-layer sweep, d = 2, weights saved at 8 checkpoints."""
    path = tmp_path_factory.mktemp("explore") / "tl.h5"
    richlazy.sweep("train", "two-layer", grid={"tau": TAU, "delta": DELTA, "seed": SEEDS},
                   params={"d": 2, "h": 6, "k": 2, "n": 20, "n_test": 20, "steps": 100,
                           "n_records": 8, "save_params": True}, jobs=1, output=path)
    return path


@pytest.fixture(scope="module")
def single_neuron(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3 x 2 single-neuron solve (delta, eta_a), exact and numeric, 12 times."""
    path = tmp_path_factory.mktemp("explore") / "sn.h5"
    richlazy.sweep("solve", "single-neuron", grid={"delta": DELTA, "eta_a": [0.5, 1.0]},
                   params={"t_max": 3.0, "n_records": 12, "method": "both"}, jobs=1,
                   output=path)
    return path


def on_disk(path: Path) -> xr.Dataset:
    """The file as stored (its CF layout: ``solution_method``), without the report's code."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return xr.load_dataset(path, engine="h5netcdf")


class Tags(HTMLParser):
    """Counts the page's scripts and lists every tag that loads something by address."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0
        self.loads: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.loads += [(tag, str(v)) for k, v in attrs if k in ("src", "href") and v]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cell_index(ny: int, i: int, j: int) -> int:
    return i * ny + j


# -- what the page holds --------------------------------------------------------------------
def test_the_heat_map_is_the_seed_mean_at_every_checkpoint(two_layer: Path) -> None:
    ex = gather(ResultFile.load(two_layer), "tau", "delta")
    ds = on_disk(two_layer)
    heat = {h.key: h for h in ex.heat}
    assert {"train_loss", "test_loss", "kernel_distance", "hamming_distance",
            "param_distance"} <= set(heat)
    kd = heat["kernel_distance"]
    assert kd.values.shape == (ds.sizes["step"], 9)
    for i in range(3):
        for j in range(3):
            expected = ds["kernel_distance"].isel(tau=i, delta=j).mean("seed").values
            np.testing.assert_allclose(kd.values[:, cell_index(3, i, j)], expected, rtol=1e-6)
    np.testing.assert_array_equal(ex.times, ds["step"].values)


def test_the_curves_are_each_seeds_values_from_the_file(two_layer: Path) -> None:
    ex = gather(ResultFile.load(two_layer), "tau", "delta")
    ds = on_disk(two_layer)
    series = {s.name: s for p in ex.panels for s in p.series}
    panels = {p.key: [s.name for s in p.series] for p in ex.panels}
    assert panels["losses"] == ["train_loss", "test_loss"]
    for name in ("train_loss", "kernel_distance", "hamming_distance", "param_distance"):
        s = series[name]
        assert not s.dashed
        np.testing.assert_array_equal(s.x, ds["step"].values)
        for i, j, k in ((0, 2, 0), (2, 1, 1)):
            np.testing.assert_allclose(s.values[cell_index(3, i, j), k],
                                       ds[name].isel(tau=i, delta=j, seed=k).values, rtol=1e-6)


def test_the_closed_form_is_drawn_dashed_over_the_numerical_solution(single_neuron: Path
                                                                     ) -> None:
    ex = gather(ResultFile.load(single_neuron), "delta", "eta_a")
    ds = on_disk(single_neuron)
    panel = next(p for p in ex.panels if p.key == "kernel_distance")
    methods = [str(m) for m in ds["solution_method"].values]
    assert [s.name for s in panel.series] == [f"kernel_distance [{m}]" for m in methods]
    assert [s.dashed for s in panel.series] == [m == "exact" for m in methods]
    for m, s in enumerate(panel.series):
        for i in range(3):
            for j in range(2):
                np.testing.assert_allclose(
                    s.values[cell_index(2, i, j), 0],
                    ds["kernel_distance"].isel(delta=i, eta_a=j, solution_method=m).values,
                    rtol=1e-6)
    assert f"kernel_distance [{methods[0]}]" in {h.key for h in ex.heat}


def test_the_trajectories_are_the_neurons_and_the_predictor(two_layer: Path,
                                                            single_neuron: Path) -> None:
    ex = gather(ResultFile.load(two_layer), "tau", "delta")
    ds = on_disk(two_layer)
    traj = ex.trajectories
    assert traj is not None
    c, k = cell_index(3, 1, 2), 1
    point = ds.isel(tau=1, delta=2, seed=k)
    path = np.abs(point["a"].values)[..., None] * point["W"].values  # (step, neuron, 2)
    np.testing.assert_allclose(traj.x[c, k], path[..., 0].T, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(traj.y[c, k], path[..., 1].T, rtol=1e-6, atol=1e-30)
    colours = [traj.colours[i] for i in traj.colour[c, k]]
    assert colours == ["#c0392b" if a > 0 else "#2c6fbb" for a in point["a"].values[-1]]

    sn = gather(ResultFile.load(single_neuron), "delta", "eta_a").trajectories
    dsn = on_disk(single_neuron)
    assert sn is not None
    beta = dsn["beta"].isel(delta=2, eta_a=0).values  # (method, time, dim)
    np.testing.assert_allclose(sn.x[cell_index(2, 2, 0), 0], beta[..., 0], rtol=1e-6)
    np.testing.assert_allclose(sn.y[cell_index(2, 2, 0), 0], beta[..., 1], rtol=1e-6)


def test_failed_points_are_missing_as_in_the_static_report(two_layer: Path,
                                                          tmp_path: Path) -> None:
    path = tmp_path / "failed.h5"
    shutil.copy(two_layer, path)
    with h5py.File(path, "r+") as f:  # seed 0 of (tau 0, delta 0) diverged
        status = f["status"][...]
        status[0, 0, 0] = 1
        f["status"][...] = status
    ex = gather(ResultFile.load(path), "tau", "delta")
    ds = on_disk(path)
    kd = next(s for p in ex.panels for s in p.series if s.name == "kernel_distance")
    assert np.isnan(kd.values[0, 0]).all()
    np.testing.assert_allclose(kd.values[0, 1], ds["kernel_distance"].isel(
        tau=0, delta=0, seed=1).values, rtol=1e-6)
    heat = next(h for h in ex.heat if h.key == "kernel_distance")
    np.testing.assert_allclose(heat.values[:, 0], ds["kernel_distance"].isel(
        tau=0, delta=0, seed=1).values, rtol=1e-6)  # the mean of the seed that ran


def test_the_size_limit_keeps_the_first_seeds_and_says_so(two_layer: Path) -> None:
    rf = ResultFile.load(two_layer)
    full = gather(rf, "tau", "delta")
    per_seed = sum(s.values.nbytes + (s.x.nbytes if s.x.ndim > 1 else 0)
                   for p in full.panels for s in p.series) // 2
    small = gather(rf, "tau", "delta", max_bytes=per_seed + 1000)
    assert all(s.values.shape[1] == 1 for p in small.panels for s in p.series)
    assert "curves of the first 1 of 2 seeds (page size limit)" in small.notes
    assert small.trajectories is None
    assert any("not included" in n for n in small.notes)


def test_the_page_is_self_contained(two_layer: Path, tmp_path: Path) -> None:
    rf = ResultFile.load(two_layer)
    assert explore_axes(rf) == ("tau", "delta")
    page = write_explore(rf, tmp_path)
    assert page == tmp_path / page_name(rf.stem, "tau", "delta")
    assert [p.name for p in tmp_path.iterdir()] == [page.name]  # no temporary file left
    assert page.stat().st_mode & 0o777 == 0o666 & ~current_umask()  # as any file written
    html = page.read_text(encoding="utf-8")
    tags = Tags()
    tags.feed(html)
    assert tags.loads == []  # no script, style sheet or image from elsewhere
    assert tags.scripts >= 2  # BokehJS inlined, and the document
    assert 1_000_000 < len(html.encode()) < 4_000_000  # BokehJS inlined; the data are small


def test_one_free_grid_dimension_has_no_page(single_neuron: Path, tmp_path: Path) -> None:
    rf = ResultFile.load(single_neuron)
    assert explore_axes(rf, {"eta_a": 0}) is None  # --at eta_a=0.5 leaves delta alone
    assert write_explore(rf, tmp_path, at={"eta_a": 0}) is None
    assert not list(tmp_path.iterdir())


# -- in a browser ---------------------------------------------------------------------------
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through Selenium and Debian's chromedriver (nothing downloaded)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install -e '.[dev]')")
    if missing:
        reason = (f"no browser for the page tests: {', '.join(missing)} missing "
                  "(apt-get install chromium chromium-driver)")
        if os.environ.get("RICHLAZY_REQUIRE_BROWSER") == "1":
            pytest.fail(f"RICHLAZY_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


DOC = "const doc = Bokeh.documents[0], model = doc.get_model_by_name(arguments[0]);"


def open_page(driver: Any, page: Path, fragment: str = "") -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri() + fragment)
    WebDriverWait(driver, 60).until(lambda d: d.execute_script(
        "return !!(window.Bokeh && Bokeh.documents.length && Bokeh.index && "
        "Bokeh.index.get_one(Bokeh.documents[0].get_model_by_name('heat')))"))


def tap_cell(driver: Any, i: int, j: int) -> None:
    """A real pointer click at the centre of cell (i, j) of the heat map."""
    from selenium.webdriver.common.action_chains import ActionChains

    host, px, py = driver.execute_script(
        DOC + "const view = Bokeh.index.get_one(model), f = view.frame;"
        "return [view.el, f.x_scale.compute(arguments[1]), f.y_scale.compute(arguments[2])];",
        "heat", i, j)
    size = host.size
    ActionChains(driver).move_to_element_with_offset(
        host, round(px - size["width"] / 2), round(py - size["height"] / 2)).click().perform()


def model_data(driver: Any, name: str) -> dict[str, Any]:
    return driver.execute_script(
        DOC + "const out = {}; for (const [k, v] of Object.entries(model.data)) "
        "out[k] = Array.from(v, (e) => (e !== null && typeof e === 'object') ? "
        "Array.from(e) : e); return out;", name)


def floats(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def wait_selected(driver: Any, c: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        DOC + "return model.selected.indices;", "cells") == [c])


@pytest.mark.system
def test_in_a_browser_a_tap_shows_the_two_layer_cells_curves(
        browser: Any, two_layer: Path, tmp_path: Path) -> None:
    page = write_explore(ResultFile.load(two_layer), tmp_path)
    assert page is not None
    ds = on_disk(two_layer)
    open_page(browser, page)
    assert browser.execute_script(  # everything the page loaded came from the file itself
        "return performance.getEntriesByType('resource').map((e) => e.name);") == []
    i, j = 1, 2  # tau = 0.5, delta = 1: not the cell shown first
    tap_cell(browser, i, j)
    wait_selected(browser, cell_index(3, i, j))
    assert browser.execute_script(DOC + "return model.text;", "info").startswith(
        "<b>τ = 0.5, δ = 1</b>")
    for name in ("train_loss", "test_loss", "kernel_distance", "hamming_distance",
                 "param_distance"):
        data = model_data(browser, f"curves-{name}")
        expected = ds[name].isel(tau=i, delta=j).values  # (seed, step)
        np.testing.assert_allclose(floats(data["ys"]), expected, rtol=1e-6)
        np.testing.assert_array_equal(floats(data["xs"]), np.broadcast_to(
            ds["step"].values, expected.shape))
        assert data["seed"] == ["seed 0", "seed 1"]
        assert data["color"] == list(PALETTE[:2])
    # the trajectories of the seed the selector picks
    browser.execute_script(DOC + "model.value = '1';", "seed")
    point = ds.isel(tau=i, delta=j, seed=1)
    path = np.abs(point["a"].values)[..., None] * point["W"].values
    data = model_data(browser, "trajectories")
    np.testing.assert_allclose(floats(data["xs"]), path[..., 0].T, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(floats(data["ys"]), path[..., 1].T, rtol=1e-6, atol=1e-30)
    # the selectors: the Hamming distance at the second checkpoint, seed-averaged
    browser.execute_script(DOC + "model.value = 'hamming_distance';", "variable")
    browser.execute_script(DOC + "model.value = '1';", "checkpoint")
    shown = np.array(model_data(browser, "cells")["value"], dtype=float)
    expected = ds["hamming_distance"].isel(step=1).mean("seed").values.ravel()
    np.testing.assert_allclose(shown, expected, rtol=1e-6)
    assert browser.execute_script(DOC + "return model.title.text;", "heat").endswith(
        f"at step = {int(ds['step'].values[1])}")


@pytest.mark.system
def test_in_a_browser_a_tap_shows_the_single_neurons_theory_and_simulation(
        browser: Any, single_neuron: Path, tmp_path: Path) -> None:
    page = write_explore(ResultFile.load(single_neuron), tmp_path)
    assert page is not None
    ds = on_disk(single_neuron)
    href = re.search(r'href="([^"]+)"', link_html(page.name, "kernel_distance [numeric]"))
    assert href is not None and href[1].startswith(page.name + "#")
    open_page(browser, page, href[1].removeprefix(page.name))  # the index's link to a variable
    assert browser.execute_script(DOC + "return model.value;", "variable") == \
        "kernel_distance [numeric]"
    m = [str(v) for v in ds["solution_method"].values].index("numeric")
    shown = np.array(model_data(browser, "cells")["value"], dtype=float)
    np.testing.assert_allclose(shown, ds["kernel_distance"].isel(
        solution_method=m, time=-1).values.ravel(), rtol=1e-6)
    i, j = 2, 1  # delta = 1, eta_a = 1
    tap_cell(browser, i, j)
    wait_selected(browser, cell_index(2, i, j))
    for method_index, method in enumerate(str(v) for v in ds["solution_method"].values):
        for name in ("loss", "kernel_distance", "phi"):
            data = model_data(browser, f"curves-{name} [{method}]")
            expected = ds[name].isel(delta=i, eta_a=j, solution_method=method_index).values
            np.testing.assert_allclose(floats(data["ys"]), expected[None, :], rtol=1e-6)
            np.testing.assert_allclose(floats(data["xs"]), ds["time"].values[None, :],
                                       rtol=1e-6)


def test_the_report_links_each_phase_diagram_to_its_page(two_layer: Path, tmp_path: Path
                                                        ) -> None:
    from richlazy_cli.report import build_report

    summary = build_report([two_layer], tmp_path, variables=["kernel_distance", "test_loss"])
    phase = [f for f in summary["figures"] if f["kind"] == "phase"]
    assert {f["var"] for f in phase} == {"kernel_distance", "test_loss"}
    page = page_name("tl", "tau", "delta")
    assert all(f["explore"] == page for f in phase)
    assert all("explore" not in f for f in summary["figures"] if f["kind"] != "phase")
    assert (tmp_path / page).is_file()
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert index.count(f'href="{page}"') == len(phase)  # under each diagram
