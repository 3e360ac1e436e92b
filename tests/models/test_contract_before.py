"""Results on the CPU equal those recorded before the compute layer was introduced.

``tests/data/contract_before.npz`` holds every contract example's outputs (and its second
implementations', on the CPU), written by ``tests/record_contract.py`` from the code as it was
before the refactoring that introduced ``richlazy_cli/numerics/compute.py``. Every value must be
bit-for-bit the same, except the outputs that refactorings changed by declaration
(``tests.processor_kind.declared_change``), which agree within :data:`TOLERANCE` with NaN
where there was NaN: the kernel distance (one shared definition replaced several hand-written
ones, docs/engine.md); the two-layer torch examples, whose one-configuration products now take
the kernel of an item's own product so that a configuration alone has the bits it has in a
batch (docs/engine.md); and the hermite torch flow, whose step-size factor ``err^(-1/5)`` is
now computed on the device with the C library's power (SciPy's scalar rule), where the host
took NumPy's vectorised power, which differs in the last bit on some CPUs.

The reference was recorded on one kind of processor, and bits are promised only on one kind
(docs/engine.md, "Reproducibility": OpenBLAS, oneDNN and the vectorised maths library choose
kernels by CPU). On another kind the differences must be rounding: within
:data:`OTHER_PROCESSOR` of the variable's scale plus :data:`OTHER_PROCESSOR_ABSOLUTE`
(measured on an AMD EPYC on 2026-12-03: 207 of 575 outputs differ, by at most 1.1e-7 of the
scale where the example trains in float32 — one float32 rounding of grokking's loss —,
2.2e-10 elsewhere, and 1e-14 absolute for quantities that are rounding noise about zero:
conserved quantities' drift, a kernel distance of 0, a KKT residual). On the reference's
kind, no bit may move; a move confined to a few families is a change of code there, not of
processor.
"""

from __future__ import annotations

import numpy as np
import pytest

from ..processor_kind import contract_outputs, declared_change, moved_bits
from ..record_contract import OUT as REFERENCE

TOLERANCE = 1e-12
"""The declared changes' tolerance (``tests.processor_kind``: the shared kernel distance,
two-layer torch's product kernels, hermite torch's step control)."""
OTHER_PROCESSOR = 1e-6
"""Relative to a variable's scale (its largest magnitude): the rounding another kind of
processor may give (a few float32 roundings where an example trains in float32)."""
OTHER_PROCESSOR_ABSOLUTE = 1e-12
"""Absolute: rounding noise about zero of quantities computed from O(1) numbers."""


@pytest.fixture(scope="module")
def now() -> dict[str, np.ndarray]:
    return contract_outputs()


def test_every_recorded_output_is_still_computed(now: dict[str, np.ndarray]) -> None:
    before = np.load(REFERENCE)
    assert set(before.files) <= set(now), sorted(set(before.files) - set(now))[:5]


def test_outputs_equal_the_recorded_ones_up_to_rounding(now: dict[str, np.ndarray]) -> None:
    """Every output: the same dtype, shape and NaN pattern; integers exact; floats within the
    declared :data:`TOLERANCE` where a change was declared, else within rounding of another
    processor (:data:`OTHER_PROCESSOR` of the scale plus :data:`OTHER_PROCESSOR_ABSOLUTE`)."""
    before = np.load(REFERENCE)
    changed = []
    for key in before.files:
        old, new = before[key], now[key]
        if old.dtype != new.dtype or old.shape != new.shape:
            changed.append(key)
        elif old.dtype.kind != "f":
            if not np.array_equal(old, new):
                changed.append(key)
        elif declared_change(key):
            if not np.allclose(new, old, rtol=0.0, atol=TOLERANCE, equal_nan=True):
                changed.append(key)
        else:
            finite = np.isfinite(old)
            scale = float(np.max(np.abs(old[finite]))) if finite.any() else 0.0
            if not np.allclose(new, old, rtol=0.0, equal_nan=True,
                               atol=OTHER_PROCESSOR * scale + OTHER_PROCESSOR_ABSOLUTE):
                changed.append(key)
    assert not changed, f"{len(changed)} outputs changed, e.g. {changed[:5]}"


def test_on_the_references_kind_of_processor_no_bit_moved(now: dict[str, np.ndarray]) -> None:
    """Outside the declared changes, either every output keeps its bits (this processor is of
    the reference's kind, and nothing moved) or the processor is another kind: then the
    outputs that moved are spread over the families' BLAS, convolution and maths-library
    paths, and it is not one family alone — a change confined to one model is a change of
    code, not of processor, and fails here even where it stays within rounding."""
    moved = moved_bits()
    families = {key.split("/", 1)[0] for key in moved}
    assert not moved or len(families) >= 4, (
        f"{len(moved)} outputs of {sorted(families)} changed bits: on the reference's kind of "
        f"processor that is a change of code, e.g. {moved[:5]}")
