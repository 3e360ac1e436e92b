"""Record every registered model's contract examples (each example alone) into an ``.npz``.

The file is the reference that ``tests/models/test_contract_reference.py`` compares against:
each numeric variable of each example is stored, keyed ``model/action/example/variable``, and
the fingerprint of the machine that computed it beside it (``tests/machine_kind.py``). Timing
(``elapsed``) and string variables are left out.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.record_contract [OUT.npz]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from richlazy_cli.errors import BadInput
from richlazy_cli.models.base import Batch, all_models
from tests.machine_kind import write_fingerprint

SKIP = {"elapsed"}
VARIANTS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "two-layer": (("+backend=torch", {"implementation": "torch"}),),
    "hermite": (("+backend=torch", {"implementation": "torch"}),
                ("+loop=numpy", {"implementation": "numpy"})),
}
"""Second implementations recorded too (on the CPU), each under ``model/action/example`` and
its tag (the reference's keys name the parameter that chose the implementation when it was
recorded); a variant that does not apply to an action (BadInput) is skipped."""
OUT = Path(__file__).parent / "data" / "contract_reference.npz"


def outputs() -> dict[str, np.ndarray]:
    """Every example's numeric outputs, computed one configuration at a time."""
    arrays: dict[str, Any] = {}
    for name, cls in all_models().items():
        if cls.__module__.startswith("tests."):
            continue
        for action in cls.actions:
            for i, example in enumerate(cls.examples[action]):
                for tag, variant in (("", {}), *VARIANTS.get(name, ())):
                    try:
                        point = cls.resolve(action, {**example, **variant})
                    except BadInput:
                        continue
                    ds = cls().run(action, Batch.from_points(cls, [point]))
                    for var, item in ds.data_vars.items():
                        data = np.asarray(item.values)
                        if var in SKIP or data.dtype.kind not in "fiucb":
                            continue
                        arrays[f"{name}/{action}/{i}{tag}/{var}"] = data
    return arrays


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    arrays = outputs()
    np.savez_compressed(out, **arrays)
    write_fingerprint(out)
    print(f"{len(arrays)} arrays -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
