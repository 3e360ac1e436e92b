"""The model contract, checked for every registered model and action (docs/engine.md).

Like scikit-learn's ``parametrize_with_checks``: the cases are whatever :func:`all_models`
returns (the package's models, this suite's ``toy`` and any model a ``RICHLAZY_MODELS`` module
registers), and each check runs the model's own small ``examples``. A new model is covered
by declaring its examples; nothing here names a model.

What registration itself refuses (:func:`richlazy_cli.models.base.check_contract`) is tested
at the end, in this process and through the command line with a broken model module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.store import write_result
from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import (
    ACTIONS,
    Batch,
    Model,
    all_models,
    check_contract,
    register,
    values_equal,
)
from richlazy_cli.numerics.compute import BITWISE, Implementation
from richlazy_cli.params import Param

from .. import (
    engine_models,  # noqa: F401  (registers `toy`, the engine's test model)
    toy_compute,  # registers `toy-compute` (two implementations); named below too
)
from ..conftest import ROOT, assert_one_line_error, run_process

MODELS = all_models()
CASES = [(name, action) for name, cls in MODELS.items() for action in cls.actions]
IDS = [f"{name}-{action}" for name, action in CASES]

TIME_LIKE = re.compile(r"^t_|(^|_)(time|times|elapsed|steps)(_|$)")
"""Names that say a time, a duration or a count of steps: such variables must carry units."""


# -- helpers --------------------------------------------------------------------------------
def resolved(cls: type[Model], action: str) -> list[dict[str, Any]]:
    return [cls.resolve(action, example) for example in cls.examples[action]]


def batchable_groups(cls: type[Model], points: list[dict[str, Any]]) -> list[list[int]]:
    """Indices of ``points`` grouped as the engine batches them: equal non-batchable values
    (of their implementation, :meth:`Model.batchable_names`)."""
    groups: list[list[int]] = []
    for i, point in enumerate(points):
        for group in groups:
            loose = cls.batchable_names(points[group[0]])
            if all(values_equal(points[group[0]][k], point[k]) for k in point
                   if k not in loose):
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def compute(cls: type[Model], action: str, points: list[dict[str, Any]]) -> xr.Dataset:
    return cls().run(action, Batch.from_points(cls, points))


def same_bits(x: xr.DataArray | xr.Variable | np.ndarray, y: Any) -> bool:
    a, b = np.asarray(x), np.asarray(y)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_point(together: xr.Dataset, i: int, alone: xr.Dataset) -> None:
    assert set(together.data_vars) == set(alone.data_vars)
    for name, item in together.data_vars.items():
        assert same_bits(item.values[i], alone[name].values[0]), name
    assert set(together.coords) == set(alone.coords)
    for name, item in together.coords.items():
        assert same_bits(item.values, alone[name].values), name


def out_of_range(p: Param) -> list[Any]:
    """Values just outside ``p``'s declared bounds (as scalars or one-element lists)."""
    bad: list[float] = []
    if p.low is not None:
        bad.append(p.low if p.low_open else p.low - 1)
    if p.high is not None:
        bad.append(p.high if p.high_open else p.high + 1)
    if p.kind in ("vector", "int_list"):
        return [[x] for x in bad]
    return bad


BOUNDED = [
    (name, action, p)
    for name, action in CASES
    for p in MODELS[name].params
    if p.kind in ("int", "float", "vector", "int_list") and (p.low, p.high) != (None, None)
]


# -- the checks, per model and action ---------------------------------------------------------
@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_examples_make_the_checks_meaningful(name: str, action: str) -> None:
    """At least two examples batch together and differ in a batchable parameter; with a seed
    parameter, at least two examples differ in seed."""
    cls = MODELS[name]
    points = resolved(cls, action)
    batchable = [p.name for p in cls.params if p.batchable]
    assert any(
        len(group) > 1
        and any(not values_equal(points[group[0]][k], points[j][k]) for k in batchable
                for j in group[1:])
        for group in batchable_groups(cls, points)
    ), "no two examples batch together and differ in a batchable parameter"
    if any(p.name == "seed" for p in cls.params):
        assert len({point["seed"] for point in points}) > 1, "every example has the same seed"


@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_result_schema(name: str, action: str) -> None:
    """Leading ``point``; ``long_name`` everywhere; units on times and step counts; coordinates
    of the model's own dimensions only; an optional ``status`` over ``point``."""
    cls = MODELS[name]
    points = resolved(cls, action)
    for group in batchable_groups(cls, points):
        ds = compute(cls, action, [points[i] for i in group])
        assert "point" not in ds.coords
        for var_name, item in ds.data_vars.items():
            assert item.dims[:1] == ("point",), f"{var_name} does not start with point"
            assert item.shape[0] == len(group), var_name
        for coord_name, item in ds.coords.items():
            assert "point" not in item.dims, f"coordinate {coord_name} varies with the point"
        for var_name, item in ds.variables.items():
            assert isinstance(item.attrs.get("long_name"), str), f"{var_name}: no long_name"
            assert item.attrs["long_name"].strip(), f"{var_name}: empty long_name"
            if TIME_LIKE.search(str(var_name)):
                assert item.attrs.get("units"), f"{var_name}: a time or step count without units"
        if "status" in ds:
            assert ds["status"].dims == ("point",)
            assert np.issubdtype(ds["status"].dtype, np.integer)


@pytest.mark.integration
@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_batch_equals_single_configurations_bit_for_bit(name: str, action: str) -> None:
    """Examples that batch together give, in either order, exactly what each gives alone."""
    cls = MODELS[name]
    points = resolved(cls, action)
    alone = [compute(cls, action, [point]) for point in points]
    for group in batchable_groups(cls, points):
        together = compute(cls, action, [points[i] for i in group])
        backwards = compute(cls, action, [points[i] for i in reversed(group)])
        for k, i in enumerate(group):
            assert_same_point(together, k, alone[i])
            assert_same_point(backwards, len(group) - 1 - k, alone[i])


@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_random_numbers_depend_on_the_seed_only(name: str, action: str) -> None:
    """The same configuration gives identical results whatever the global random state (which
    it leaves alone: NumPy's, Python's and, once loaded, PyTorch's); with a ``seed`` parameter,
    another seed gives other results."""
    cls = MODELS[name]
    point = resolved(cls, action)[0]
    np.random.seed(1)  # noqa: NPY002  (the legacy global state, deliberately)
    random.seed(1)
    state, py_state = np.random.get_state(), random.getstate()  # noqa: NPY002
    torch = sys.modules.get("torch")
    torch_state = torch.random.get_rng_state() if torch is not None else None
    first = compute(cls, action, [point])
    after = np.random.get_state()  # noqa: NPY002
    assert all(values_equal(a, b) for a, b in zip(state, after, strict=True))
    assert random.getstate() == py_state
    torch = sys.modules.get("torch")
    if torch is not None and torch_state is not None:
        assert torch.equal(torch.random.get_rng_state(), torch_state)
    np.random.seed(2)  # noqa: NPY002
    random.seed(2)
    again = compute(cls, action, [point])
    assert_same_point(first, 0, again)
    if "seed" in point:
        other = compute(cls, action, [{**point, "seed": point["seed"] + 1}])
        assert any(
            not same_bits(item.values, other[var_name].values)
            for var_name, item in first.data_vars.items()
        ), "another seed gives the same results"


@pytest.mark.parametrize(
    "name, action, param", BOUNDED, ids=[f"{n}-{a}-{p.name}" for n, a, p in BOUNDED]
)
def test_out_of_range_values_are_bad_input(name: str, action: str, param: Param) -> None:
    cls = MODELS[name]
    example = cls.examples[action][0]
    for value in out_of_range(param):
        with pytest.raises(BadInput, match=f"parameter {param.name}"):
            cls.resolve(action, {**example, param.name: value})


@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_cost_is_positive_and_finite(name: str, action: str) -> None:
    cls = MODELS[name]
    for point in resolved(cls, action):
        cost = cls.footprint(action, point).cost
        assert np.isfinite(cost) and cost > 0, cost


@pytest.mark.system
@pytest.mark.parametrize("name, action", CASES, ids=IDS)
def test_file_round_trip(name: str, action: str, tmp_path: Path) -> None:
    """What the store writes, xarray reads back equal: values, dimensions and attributes, plus
    the file's per-variable ``checksums`` (docs/engine.md), one for each variable written."""
    cls = MODELS[name]
    points = resolved(cls, action)
    group = max(batchable_groups(cls, points), key=len)
    ds = compute(cls, action, [points[i] for i in group])
    path = tmp_path / "result.h5"
    write_result(ds, path)
    with xr.open_dataset(path, engine="h5netcdf") as back:
        back.load()
    checksums = json.loads(back.attrs.pop("checksums"))
    assert set(checksums["variables"]) == set(ds.variables), set(ds.variables) ^ set(
        checksums["variables"])
    xr.testing.assert_identical(back, ds)
    for var_name, item in ds.variables.items():
        assert back[var_name].dtype == item.dtype, var_name


# -- what registration refuses ----------------------------------------------------------------
class _Good(Model):
    name = "contract-good"
    summary = "a well-formed model"
    actions = ("solve",)
    params = (
        Param("x", "float", 1.0, "a number", low=0.0, batchable=True),
        Param("n", "int", 2, "a count", low=1),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {
        "solve": ({"x": 0.5}, {"x": 2.0})
    }

    def solve(self, batch: Batch, progress: Any = None) -> xr.Dataset:
        return xr.Dataset({"y": (("point",), batch["x"], {"long_name": "y"})})


def _variant(**changes: Any) -> type[Model]:
    return type("_Broken", (_Good,), changes)


BROKEN = {
    "missing examples": (_variant(examples=None), "'examples' is missing"),
    "missing summary": (_variant(summary=None), "'summary' is missing"),
    "unknown action": (_variant(actions=("solve", "fit")), "'fit' is not one of"),
    "action not implemented": (
        _variant(actions=("solve", "train"), examples={"solve": ({},), "train": ({},)}),
        re.escape("'train' is listed but train() is not implemented"),
    ),
    "parameter twice": (
        _variant(params=(*_Good.params, Param("x", "int", 0, "again"))),
        "'x' is declared twice",
    ),
    "override of an unknown parameter": (
        _variant(overrides={"x": ("nn",)}), "overrides names 'nn', which is no parameter"),
    "bad default": (
        _variant(params=(Param("x", "float", -1.0, "a number", low=0.0),)),
        "default of parameter 'x' fails its own validation",
    ),
    "example of an unknown parameter": (
        _variant(examples={"solve": ({"xx": 1.0},)}),
        "unknown parameter 'xx' \\(did you mean x\\?\\)",
    ),
    "example out of range": (
        _variant(examples={"solve": ({"x": -2.0},)}),
        "example 0 of solve fails validation",
    ),
    "no example for an action": (_variant(examples={"solve": ()}), "examples\\['solve'\\]"),
    "examples for an unlisted action": (
        _variant(examples={"solve": ({},), "train": ({},)}),
        "examples are given for 'train'",
    ),
}


def test_a_well_formed_model_passes() -> None:
    check_contract(_Good)


@pytest.mark.parametrize("broken, rule", list(BROKEN.values()), ids=list(BROKEN))
def test_registration_refuses_a_broken_model(broken: type[Model], rule: str) -> None:
    with pytest.raises(BadInput, match=rule) as info:
        register(broken)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("model ")
    assert broken.name not in all_models()


def test_a_second_class_under_a_taken_name_is_refused() -> None:
    with pytest.raises(BadInput, match="the name is taken"):
        register(_variant(name=next(iter(MODELS))))


def test_every_model_in_the_registry_is_of_a_known_action() -> None:
    for cls in MODELS.values():
        assert set(cls.actions) <= set(ACTIONS)


BROKEN_MODULE = '''
from richlazy_cli.models.base import Model, register
from richlazy_cli.params import Param


@register
class Half(Model):
    name = "half-done"
    summary = "lists train but implements solve only"
    actions = ("solve", "train")
    params = (Param("x", "float", 1.0, "a number", batchable=True),)
    examples = {"solve": ({"x": 1.0},), "train": ({"x": 1.0},)}

    def solve(self, batch, progress=None):
        raise AssertionError("never run")
'''


@pytest.mark.system
def test_cli_refuses_a_broken_model_module(tmp_path: Path) -> None:
    """A RICHLAZY_MODELS module whose model breaks the contract: exit 2, one line naming the
    model and the rule, no traceback."""
    (tmp_path / "half_done_models.py").write_text(textwrap.dedent(BROKEN_MODULE))
    env = {
        **os.environ,
        "RICHLAZY_MODELS": "half_done_models",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    result = run_process("models", env=env, timeout=120)
    assert_one_line_error(result)
    assert "half-done" in result.err
    assert "'train' is listed but train() is not implemented" in result.err


# -- the contract over the implementation matrix ----------------------------------------------
# Every (model, action, implementation, device, dtype) that is available here is a case: each
# non-reference implementation equals the family's reference within the tolerance its table
# row declares (0: the same bits), and batches the way its row promises on that device
# (docs/engine.md, "Implementations and devices"). A family's table is all it takes.
def _devices(impl: Implementation) -> list[str]:
    torch = sys.modules.get("torch")
    gpu = torch is not None and torch.cuda.is_available()
    return [d for d in impl.devices if d == "cpu" or (d == "cuda" and gpu)]


def _dtypes(cls: type[Model], impl: Implementation) -> list[str | None]:
    param = next((p for p in cls.params if p.name == "dtype"), None)
    if param is None or param.choices is None:
        return [None]
    return [d for d in param.choices if impl.dtypes is None or d in impl.dtypes]


def _runnable(impl: Implementation) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in impl.requires)


MATRIX = [
    (name, action, impl.name, device, dtype)
    for name, cls in MODELS.items() for impl in cls.implementations if _runnable(impl)
    for action in cls.actions if action in impl.actions
    for device in _devices(impl) for dtype in _dtypes(cls, impl)
]
MATRIX_IDS = ["-".join(str(x) for x in case if x is not None) for case in MATRIX]


def on(cls: type[Model], action: str, impl: str, device: str, dtype: str | None
       ) -> list[dict[str, Any]]:
    """The action's examples on one implementation, device and dtype."""
    chosen: dict[str, Any] = {"device": device} if device != "cpu" else {}
    if len(cls.implementations) > 1:
        chosen["implementation"] = impl
    if dtype is not None:
        chosen["dtype"] = dtype
    return [cls.resolve(action, {**example, **chosen}) for example in cls.examples[action]]


def _reference(cls: type[Model], action: str) -> Implementation | None:
    return next((i for i in cls.implementations if i.reference and action in i.actions), None)


@pytest.mark.system
@pytest.mark.parametrize("name, action, impl, device, dtype", MATRIX, ids=MATRIX_IDS)
def test_implementation_equals_the_reference(name: str, action: str, impl: str, device: str,
                                             dtype: str | None) -> None:
    cls = MODELS[name]
    row = next(i for i in cls.implementations if i.name == impl)
    ref = _reference(cls, action)
    if ref is None or (ref.name == impl and device == "cpu"):
        pytest.skip("this is the reference")
    for got_point, ref_point in zip(on(cls, action, impl, device, dtype),
                                    on(cls, action, ref.name, "cpu", dtype), strict=True):
        got, want = compute(cls, action, [got_point]), compute(cls, action, [ref_point])
        assert set(got.data_vars) == set(want.data_vars)
        for var_name, item in want.data_vars.items():
            a, b = np.asarray(got[var_name].values), np.asarray(item.values)
            if var_name == "elapsed" or (b.dtype.kind not in "fb" and var_name != "status"):
                continue
            if row.tolerance == 0.0 and device == "cpu":
                assert same_bits(a, b), var_name
            else:
                scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
                tol = row.tolerance_for(dtype, device)
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True,
                                           err_msg=f"{var_name} ({impl} on {device})")


@pytest.mark.system  # torch.compile starts the C++ compiler
@pytest.mark.parametrize("name, action, impl, device, dtype", MATRIX, ids=MATRIX_IDS)
def test_batching_keeps_the_guarantee_of_the_table(name: str, action: str, impl: str,
                                                   device: str, dtype: str | None) -> None:
    """Bitwise guarantee: batched points equal the points alone, bit for bit. Batch-dependent
    (a GPU): the same batch twice gives the same bits (deterministic), and within the
    implementation's tolerance (at least 1e-12) of the points alone."""
    cls = MODELS[name]
    row = next(i for i in cls.implementations if i.name == impl)
    points = on(cls, action, impl, device, dtype)
    group = max(batchable_groups(cls, points), key=len)
    together = compute(cls, action, [points[i] for i in group])
    if row.guarantee(device) == BITWISE:
        for k, i in enumerate(group):
            assert_same_point(together, k, compute(cls, action, [points[i]]))
        return
    again = compute(cls, action, [points[i] for i in group])
    tol = max(row.tolerance_for(dtype, device), 1e-12)
    for k, i in enumerate(group):
        alone = compute(cls, action, [points[i]])
        for var_name, item in together.data_vars.items():
            if var_name == "elapsed":
                continue
            assert same_bits(item.values, again[var_name].values), var_name
            if item.dtype.kind == "f":
                b = alone[var_name].values[0]
                scale = float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 1.0
                np.testing.assert_allclose(item.values[k], b, rtol=tol, atol=tol * scale,
                                           equal_nan=True, err_msg=var_name)


REQUIRING = sorted(name for name, cls in MODELS.items()
                   if cls.__module__.startswith(("richlazy_cli.", toy_compute.__name__))
                   and ("torch" in cls.requires
                        or any("torch" in i.requires for i in cls.implementations)))


@pytest.mark.system
def test_without_torch_every_family_is_listed_and_its_torch_runs_exit_2(tmp_path: Path
                                                                         ) -> None:
    """One check for all families: with torch hidden, ``models`` lists each family that
    needs torch, and a run on a torch implementation is one line naming the extra, exit 2."""
    runs = []
    for name in REQUIRING:
        cls = MODELS[name]
        action = next(a for a in cls.actions
                      if any(a in i.actions and "torch" in i.requires
                             for i in cls.implementations) or "torch" in cls.requires)
        args = [action, name, "-o", str(tmp_path / f"{name}.h5")]
        if "torch" not in cls.requires:
            impl = next(i for i in cls.implementations
                        if action in i.actions and "torch" in i.requires)
            args += ["-p", f"implementation={impl.name}"]
        runs.append(args)
    code = textwrap.dedent("""
        import contextlib, io, json, sys
        sys.modules['torch'] = None
        from richlazy_cli.cli.app import run
        results = []
        for args in [['models', '--json'], *json.loads(sys.argv[1])]:
            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                results.append([run(args), o.getvalue(), e.getvalue()])
        print(json.dumps(results))
    """)
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code, json.dumps(runs)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "RICHLAZY_MODELS": toy_compute.__name__})
    assert proc.returncode == 0, proc.stderr
    (listed, listing, _), *results = json.loads(proc.stdout.splitlines()[-1])
    assert listed == 0 and set(REQUIRING) <= {m["name"] for m in json.loads(listing)}
    for args, (status, _, err) in zip(runs, results, strict=True):
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert status == 2 and len(lines) == 1 and "richlazy[practice]" in lines[0], (args, err)
    assert not list(tmp_path.iterdir())
