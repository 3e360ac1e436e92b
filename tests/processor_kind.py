"""Which kind of processor the recorded references were computed on.

``tests/data/contract_before.npz`` and ``tests/data/hermite_flow.npz`` hold bits computed on one
kind of processor. Bits are promised on one kind only (docs/engine.md, "Reproducibility":
OpenBLAS, oneDNN and the vectorised maths library choose their kernels by CPU), so a test that
compares with those bits can ask for them only on that kind. The kind is told by the contract
examples themselves: on the reference's kind, every output that no refactoring changed by
declaration keeps its recorded bits (``tests/models/test_contract_before.py`` checks that this holds
there, and that elsewhere the differences are rounding spread over many families).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .record_contract import OUT, outputs

SHARED_DEFINITION: frozenset[str] = frozenset({"kernel_distance"})
"""Variables now computed by one shared function (equal within the declared tolerance)."""
KERNEL_CHANGED = "+backend=torch/"
"""Examples whose matrix products changed kernel (equal within the declared tolerance)."""
STEP_CONTROL_ON_DEVICE = ("hermite/solve/", "+backend=torch/")
"""The hermite torch flow's examples (prefix, variant): equal within the declared tolerance."""


def declared_change(key: str) -> bool:
    """Whether ``key`` is one of the outputs a refactoring changed by declaration."""
    return key.rsplit("/", 1)[1] in SHARED_DEFINITION or (
        key.startswith("two-layer/") and KERNEL_CHANGED in key) or (
        key.startswith(STEP_CONTROL_ON_DEVICE[0]) and STEP_CONTROL_ON_DEVICE[1] in key)


def bitwise_equal(old: np.ndarray, new: np.ndarray) -> bool:
    return old.dtype == new.dtype and old.shape == new.shape and old.tobytes() == new.tobytes()


@cache
def contract_outputs() -> dict[str, np.ndarray]:
    """The contract examples' outputs now (computed once per test session, about 15 s)."""
    return outputs()


def moved_bits() -> list[str]:
    """The outputs outside the declared changes whose bits differ from the reference."""
    before = np.load(OUT)
    now = contract_outputs()
    return [key for key in before.files
            if not declared_change(key) and not bitwise_equal(before[key], now[key])]


def on_the_reference_processor() -> bool:
    """Whether this processor reproduces the reference's bits (see the module's text)."""
    return not moved_bits()
