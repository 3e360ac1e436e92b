"""The compute layer (richlazy_cli/numerics/compute.py; docs/engine.md, "Implementations and
devices"):
one device parameter and resolution, one requirement message, one worker per GPU for every
family that computes on a device."""

from __future__ import annotations

from typing import Any

import pytest

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import all_models
from richlazy_cli.numerics import compute

torch = pytest.importorskip("torch")

ON_DEVICES = {name: cls for name, cls in all_models().items()
              if any(impl.on_devices for impl in cls.implementations)}


def on_device(cls: Any, action: str, **more: Any) -> dict[str, Any]:
    """The first example of ``action`` on the family's first device implementation."""
    impl = next(i for i in cls.implementations if i.on_devices and action in i.actions)
    chosen = {"implementation": impl.name} if len(cls.implementations) > 1 else {}
    return {**cls.examples[action][0], **chosen, **more}


def device_action(cls: Any) -> str:
    return next(a for a in cls.actions
                if any(a in i.actions and i.on_devices for i in cls.implementations))


def test_the_torch_families_all_declare_a_device_implementation() -> None:
    assert {"two-layer", "hermite", "rhm", "cnn", "grokking"} <= set(ON_DEVICES)


@pytest.mark.parametrize("name", sorted(ON_DEVICES))
def test_a_gpu_device_starts_one_worker_per_gpu(name: str, monkeypatch: Any) -> None:
    """With 3 faked GPUs every family on a device implementation and ``device = cuda`` (or
    ``auto``) allows 3 workers; on the CPU, or on a CPU implementation, no limit."""
    cls = ON_DEVICES[name]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    action = device_action(cls)
    values = cls.resolve(action, on_device(cls, action))
    for device, workers in (("cuda", 3), ("auto", 3), ("cpu", None)):
        assert cls.footprint(action, {**values, "device": device}).workers == workers, device
    for cpu_only in (i for i in cls.implementations if not i.on_devices):
        assert cls.footprint(action, {**values, "implementation": cpu_only.name,
                                      "device": "auto"}).workers is None


def test_no_gpu_wording_is_one(monkeypatch: Any) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BadInput, match="no CUDA device is present"):
        compute.resolve_device("cuda")
    assert compute.resolve_device("auto") == "cpu"
    for cls in ON_DEVICES.values():
        action = device_action(cls)
        with pytest.raises(BadInput, match=compute.NO_GPU):
            cls.resolve(action, on_device(cls, action, device="cuda"))


def test_a_missing_module_names_its_extra(monkeypatch: Any) -> None:
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    with pytest.raises(compute.MissingRequirement, match=r"richlazy\[practice\]"):
        compute.import_torch("model x")


def test_the_session_is_deterministic_with_one_thread() -> None:
    before = torch.get_num_threads()
    with compute.session() as t:
        assert t.get_num_threads() == 1 and t.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == before


def test_every_torch_result_carries_the_same_provenance() -> None:
    from richlazy_cli.models.base import Batch

    for cls in ON_DEVICES.values():
        action = device_action(cls)
        point = cls.resolve(action, on_device(cls, action))
        ds = cls().run(action, Batch.from_points(cls, [point]))
        assert ds.attrs["torch_version"] == torch.__version__, cls.name
        assert ds.attrs["device"] == "cpu", cls.name
