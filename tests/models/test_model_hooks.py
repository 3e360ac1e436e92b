"""The model's hooks: ``derive`` then a pure ``check``, once per case of a grid in ``Job.build``
(the entrance ``Model.resolve`` shares), and one ``footprint`` built from the private hooks
(docs/engine.md, "Writing a model")."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import pytest
import xarray as xr

from richlazy_cli.engine.chunk import compute_chunk
from richlazy_cli.engine.estimation import pending_cost, probe_of
from richlazy_cli.engine.executors import chunk_tasks
from richlazy_cli.engine.footprint import declared_size, declared_working
from richlazy_cli.engine.job import Job
from richlazy_cli.errors import BadInput
from richlazy_cli.models import base
from richlazy_cli.models.base import (
    RECORD_VOCABULARY,
    Batch,
    Footprint,
    Model,
    all_models,
    check_contract,
    var,
)
from richlazy_cli.numerics.compute import MissingRequirement
from richlazy_cli.params import Param

MODELS = all_models()
EXAMPLES = [(name, action, i) for name, cls in MODELS.items() for action in cls.actions
            for i in range(len(cls.examples[action]))]


@pytest.mark.parametrize("name, action, i", EXAMPLES)
def test_check_is_a_pure_verdict_and_resolve_is_the_build(name: str, action: str, i: int) -> None:
    """On prepared values every family's check passes through a read-only view (it writes
    nothing), and a job without a grid records exactly what ``Model.resolve`` returns."""
    cls = MODELS[name]
    example = cls.examples[action][i]
    try:
        values = cls.resolve(action, example)
    except MissingRequirement:
        pytest.skip("needs the practice extra")
    cls.check(action, MappingProxyType(values))
    recorded = Job.build(name, action, example).recorded
    assert recorded.keys() == values.keys()
    for key, value in values.items():
        assert np.array_equal(np.asarray(value), np.asarray(recorded[key])), key


class Counted(Model):
    """``derive`` reads ``n`` (3 values swept), ``check`` reads ``n`` and ``m``'s sign; the
    footprint reads ``steps``. Calls are counted."""

    name = "hooks-counted"
    summary = "counts its hooks"
    actions = ("solve",)
    params = (
        Param("n", "int", 1, "a size", low=1),
        Param("m", "float", 0.0, "a batchable value", batchable=True),
        Param("steps", "int", 4, "a length", low=1),
        Param("doubled", "int", None, "2 n (derived)", optional=True),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {"solve": ({"n": 2},)}
    derived = 0
    checked = 0

    @classmethod
    def derive(cls, action: str, values: dict[str, Any]) -> None:
        cls.derived += 1
        values["doubled"] = 2 * values["n"]

    @classmethod
    def check(cls, action: str, values: Any) -> None:
        cls.checked += 1
        if values["doubled"] != 2 * values["n"]:
            raise BadInput("parameter doubled: must be 2 n")

    @classmethod
    def footprint(cls, action: str, values: Any) -> Footprint:
        return Footprint(float(values["steps"]) * values["doubled"],
                         8.0 * values["doubled"], 100.0, None,
                         lambda: {**values, "steps": 1})

    def solve(self, batch: Batch, progress: Any = None) -> xr.Dataset:
        y = np.tile(batch.column("m")[:, None], (1, int(batch["doubled"])))
        return xr.Dataset({"y": var(("point", "i"), y, "m repeated")})


def test_derive_and_check_run_once_per_case_in_the_build(monkeypatch: Any) -> None:
    """A 3 x 50 grid whose preparation reads only ``n``: three cases, prepared three times in
    ``Job.build``; the declared sizes, the cost and the probe then prepare nothing again."""
    check_contract(Counted)
    monkeypatch.setitem(base._REGISTRY, Counted.name, Counted)
    Counted.derived = Counted.checked = 0
    job = Job.build(Counted.name, "solve", {}, [("n", "1,2,3"), ("m", "linspace(0,1,50)")])
    assert (Counted.derived, Counted.checked) == (3, 3)
    size = declared_size(job, None)
    assert size is not None and size.total == 50 * 8.0 * (2 + 4 + 6) + 150 * 9
    assert declared_working(job) == (100.0, 0)
    total, cheapest = pending_cost(job, None)
    assert total == 50 * 4.0 * (2 + 4 + 6) and cheapest == 0
    assert probe_of(job, 149)["steps"] == 1 and probe_of(job, 149)["doubled"] == 6
    assert Counted.derived == 3  # nothing derived after the build
    assert job.values(149)["doubled"] == 6


class Public(Model):
    """A model naming its footprint's parts without the leading underscore, and a ``check``
    that fills a derived value in place (a model written before ``derive``)."""

    name = "hooks-public"
    summary = "public names that are not hooks"
    actions = ("solve",)
    params = (
        Param("n", "int", 3, "a size", low=1),
        Param("steps", "int", 10, "a length", low=1),
        Param("total", "int", None, "n + steps (derived by the check)", optional=True),
    )
    examples: ClassVar[dict[str, tuple[dict[str, Any], ...]]] = {"solve": ({"n": 2},)}

    @classmethod
    def check(cls, action: str, values: dict[str, Any]) -> None:
        values["total"] = values["n"] + values["steps"]

    @classmethod
    def cost(cls, values: Any) -> float:
        return 2.0 * values["steps"]

    @classmethod
    def output_bytes(cls, action: str, values: Any) -> float:
        return 8.0 * values["n"]

    @classmethod
    def max_workers(cls, values: Any) -> int:
        return 2

    def solve(self, batch: Batch, progress: Any = None) -> xr.Dataset:
        y = np.zeros((batch.size, int(batch["n"])))
        return xr.Dataset({"y": var(("point", "i"), y, "zeros")})


def test_the_footprint_reads_the_private_hooks_only(monkeypatch: Any) -> None:
    """``cost``, ``output_bytes``, ``max_workers`` (the names before the footprint joined
    the parts) are a model's own methods, not hooks: its footprint declares nothing."""
    check_contract(Public)
    monkeypatch.setitem(base._REGISTRY, Public.name, Public)
    values = Public.resolve("solve", {"n": 4})
    assert values["total"] == 14  # its check still derives
    fp = Public.footprint("solve", values)
    assert (fp.cost, fp.output_bytes, fp.working_bytes, fp.workers) == (1.0, None, None, None)
    assert set(base._HOOKS) == {"cost", "probe", "output_bytes", "working_bytes",
                                "max_workers", "stops_early", "stop_share"}


def test_the_default_footprint_declares_nothing() -> None:
    class Plain(Model):
        name = "hooks-plain"
        actions = ("solve",)

    fp = Plain.footprint("solve", {"x": 1})
    assert (fp.cost, fp.output_bytes, fp.working_bytes, fp.workers) == (1.0, None, None, None)
    assert fp.probe == {"x": 1}
    assert Footprint(2.0).probe is None  # none declared: the dry run times the point itself


ALIASED = [(name, alias, action, target) for name, cls in MODELS.items()
           for alias, targets in cls.aliases.items() for action, target in targets.items()]


RECORDING = {"two-layer", "rhm", "cnn", "hermite", "linear", "diagonal", "single-neuron"}


def test_every_family_that_records_speaks_the_record_vocabulary() -> None:
    """The record count and points are parameters named ``n_records`` / ``records`` in every
    family that records; the families' older names are aliases of them, and only of them."""
    for name in RECORDING:
        own = {p.name for p in MODELS[name].params}
        assert own & set(RECORD_VOCABULARY), name
        assert not own & {"n_times", "checkpoints", "n_checkpoints", "n_time", "n_record"}, name
    assert {name for name, *_ in ALIASED} >= RECORDING
    assert {target for *_, target in ALIASED} <= set(RECORD_VOCABULARY)


def test_worker_processes_receive_the_preparation(monkeypatch: Any) -> None:
    """A chunk for another process carries each point's grid and derived values; computing it
    prepares nothing again and gives what the in-process chunk gives."""
    check_contract(Counted)
    monkeypatch.setitem(base._REGISTRY, Counted.name, Counted)
    job = Job.build(Counted.name, "solve", {}, [("n", "1,2"), ("m", "linspace(0,1,4)")])
    chunks = list(job.chunks(np.arange(job.grid.size), 4))
    Counted.derived = Counted.checked = 0
    away = list(chunk_tasks(job, chunks, in_process=False))
    here = list(chunk_tasks(job, chunks, in_process=True))
    assert all(t.prepared and not t.checked for t in away) and all(t.checked for t in here)
    assert away[1].points[0] == {"n": 2, "m": 0.0, "doubled": 4}
    for a, h in zip(away, here, strict=True):
        xr.testing.assert_identical(compute_chunk(a, job.base).data,
                                    compute_chunk(h, job.base).data)
    assert Counted.derived == Counted.checked == 0


@pytest.mark.system
def test_every_road_into_a_model_is_the_one_entrance(monkeypatch: Any, tmp_path: Any,
                                                     cli: Any) -> None:
    """``Model.resolve``, ``Job.build``, the Python API and the command line all take the
    model's one entrance (``base.enter``), once per run, and nothing else calls ``given``."""
    import richlazy
    from richlazy_cli.engine import job as job_module

    entered: list[tuple[str, str, bool]] = []
    real_enter, real_given = base.enter, Model.given.__func__  # type: ignore[attr-defined]

    def spy(model: Any, action: str, params: Any, **kw: Any) -> Any:
        entered.append((model.name, action, kw.get("prepare_cases") is not None))
        return real_enter(model, action, params, **kw)

    given_calls: list[str] = []

    def counted_given(cls: Any, action: str, params: Any) -> Any:
        given_calls.append(cls.name)
        return real_given(cls, action, params)

    monkeypatch.setattr(base, "enter", spy)
    monkeypatch.setattr(job_module, "enter", spy)
    monkeypatch.setattr(Model, "given", classmethod(counted_given))
    small = {"t_max": 1.0, "n_records": 3, "method": "exact"}
    MODELS["single-neuron"].resolve("solve", small)
    Job.build("single-neuron", "solve", small, [("delta", "0,1")])
    richlazy.solve("single-neuron", output=tmp_path / "api.h5", **small)
    assert cli("solve", "single-neuron", "-p", "t_max=1", "-p", "n_records=3", "-p",
               "method=exact", "-o", tmp_path / "cli.h5", "-q").code == 0
    assert cli("sweep", "solve", "single-neuron", "-p", "t_max=1", "-g", "delta=0,1",
               "--jobs", "1", "-q", "-o", tmp_path / "sweep.h5").code == 0
    assert entered == [("single-neuron", "solve", False)] + [("single-neuron", "solve", True)] * 4
    assert given_calls == ["single-neuron"] * 5
