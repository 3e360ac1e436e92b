"""The one dispatch (docs/engine.md, "One dispatch"): each implementation row names the
function that computes on it, ``Model.dispatch`` resolves the row, the device and the torch
session, calls it and stamps the provenance, and no family chooses code by comparing
implementation names."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch, Model, check_contract, var
from richlazy_cli.numerics import compute
from richlazy_cli.numerics.compute import PROVENANCE_KEYS, Implementation
from richlazy_cli.params import Param

from .. import toy_compute
from ..conftest import ROOT

NAME_TESTS = re.compile(
    r"""implementation["')\]]*\)? *(==|!=|in |not in)|loop *==|in TORCH_ROWS""")
"""A test of an implementation's name (or of the older ``loop``), as code that chooses by it
would write it."""


DISPATCH = ROOT / "richlazy_cli" / "models" / "base.py"
"""Where the row is chosen (from ``implementation`` and its older names) and dispatched."""


def test_no_module_of_the_package_chooses_code_by_an_implementations_name() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "richlazy_cli").rglob(
        "*.py")) if path != DISPATCH
        for n, line in enumerate(path.read_text().splitlines(), 1) if NAME_TESTS.search(line)]
    assert found == []
    assert NAME_TESTS.search('if batch["implementation"] == "torch":')  # the test can fail
    assert NAME_TESTS.search('if values.get("implementation") not in TORCH_ROWS:')


def _toy(implementation: str) -> xr.Dataset:
    cls = toy_compute.ToyCompute
    values = cls.resolve("train", {"implementation": implementation, "steps": 3})
    return cls().train(Batch.from_points(cls, [values]))


def test_a_row_named_by_a_module_and_name_is_imported_when_it_computes() -> None:
    row = Implementation("numpy", "the reference", ("train",),
                         run={"train": ".toy_compute:ToyCompute._train_numpy"})
    assert row.function("train", toy_compute.ToyCompute) is (
        toy_compute.ToyCompute._train_numpy)
    assert row.function("solve", toy_compute.ToyCompute) is None  # not an action of the row
    method = Implementation("numpy", "the reference", ("train",), run="_train_numpy")
    assert method.function("train", toy_compute.ToyCompute) is (
        toy_compute.ToyCompute._train_numpy)


def test_the_dispatch_stamps_a_torch_rows_provenance_and_no_other() -> None:
    assert not set(PROVENANCE_KEYS) & set(_toy("numpy").attrs)
    pytest.importorskip("torch")
    got = _toy("torch")
    assert got.attrs["device"] == "cpu" and "torch_version" in got.attrs
    np.testing.assert_allclose(got["loss"].values, _toy("numpy")["loss"].values, rtol=1e-12)


def test_the_placement_holds_the_resolved_device_and_the_torch_dtype() -> None:
    row = toy_compute.TABLE[0]
    with compute.placed(row, {"device": "auto", "dtype": "float32"}) as placement:
        assert (placement.device, placement.torch, placement.dtype) == ("cpu", None, None)
    torch = pytest.importorskip("torch")
    with compute.placed(toy_compute.TABLE[1], {"device": "cpu", "dtype": "float32"}) as placed:
        assert placed.torch is torch and placed.dtype is torch.float32
        assert torch.get_num_threads() == 1  # inside the session
        assert placed.provenance["device"] == "cpu"


class _Rows(Model):
    """A family whose rows name what computes on them (or fail to)."""

    name = "dispatch-rows"
    summary = "rows naming functions"
    actions = ("train",)
    params = (Param("steps", "int", 1, "steps", low=1),
              Param("implementation", "str", None, "which", choices=("a", "b"),
                    optional=True))
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {"train": ({},)}

    def _a(self, batch: Batch, progress: Any, placement: compute.Placement) -> xr.Dataset:
        return xr.Dataset({"x": var(("point",), np.zeros(batch.size), "x")})


def _with(rows: tuple[Implementation, ...]) -> type[Model]:
    return type("Rows", (_Rows,), {"implementations": rows})


def test_the_contract_refuses_a_row_that_names_no_function_for_its_action() -> None:
    good = _with((Implementation("a", "a", ("train",), run="_a"),
                  Implementation("b", "b", ("train",), run=_Rows._a)))
    check_contract(good)
    values = good.resolve("train", {"implementation": "b"})
    assert good().train(Batch.from_points(good, [values]))["x"].shape == (1,)
    with pytest.raises(BadInput, match="nor named by every implementation row"):
        check_contract(_with((Implementation("a", "a", ("train",), run="_a"),
                              Implementation("b", "b", ("train",)))))
    with pytest.raises(BadInput, match="names '_missing' for train, which is no method"):
        check_contract(_with((Implementation("a", "a", ("train",), run="_missing"),)))
