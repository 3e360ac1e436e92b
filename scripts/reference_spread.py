"""How far the stored references move on other kinds of machine, emulated on this one.

Computes the outputs that ``tests/data/contract_reference.npz``, ``tests/data/hermite_flow.npz``
and ``tests/data/hermite_cvode.npz`` store (the last only where scikit-sundae is installed),
once natively and once under each emulated kind of machine of :data:`KINDS` (each library
told to choose the kernels another CPU would get: OpenBLAS's core type, torch's ATen
capability, NumPy's dispatched features, numba's target CPU), and prints, per variable, the
largest difference from the native outputs, relative to the variable's scale (its largest
finite magnitude). ``--against FILE.npz`` compares a stored reference recorded elsewhere too.
``--json OUT`` writes the table (``tests/data/reference_spread.json``), which the tolerances
of ``tests/models/test_contract_reference.py``, ``tests/models/hermite/test_hermite_flow.py``
and ``tests/models/hermite/test_hermite_cvode_reference.py`` cite; an existing file keeps its
other rows and columns (stored references compared earlier) and has the measured ones
replaced.

Run: ``PYTHONPATH=. .venv/bin/python scripts/reference_spread.py [--against OLD.npz]
[--json OUT]`` (about a minute a kind on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KINDS: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell",
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
             "NUMBA_CPU_NAME": "haswell"},
    "baseline": {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Nehalem",
                 "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
                 "NUMBA_CPU_NAME": "generic"},
}
"""Two other kinds of x86-64 machine: an AVX2 one (Haswell to Zen 3) and one with no vector
extension past SSE4.2."""
CHILD = """
import importlib.util, sys, numpy as np
from tests import record_contract, record_hermite_cvode, record_hermite_flow
cvode = (record_hermite_cvode.outputs() if importlib.util.find_spec("sksundae") else {})
np.savez(sys.argv[1], **{f"contract:{k}": v for k, v in record_contract.outputs().items()},
         **{f"hermite_flow:{k}": v for k, v in record_hermite_flow.outputs().items()},
         **{f"hermite_cvode:{k}": v for k, v in cvode.items()})
"""
PREFIX = {"contract_reference": "contract:", "hermite_flow": "hermite_flow:",
          "hermite_cvode": "hermite_cvode:"}
"""The key prefix of each stored reference's outputs, by file stem."""


def outputs(env: dict[str, str], out: Path) -> dict[str, np.ndarray]:
    subprocess.run([sys.executable, "-c", CHILD, str(out)], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


def group(key: str) -> str:
    """``contract:model/action/3+backend=torch/var`` → ``contract:model/action/+backend=torch/var``:
    the examples of one variable together."""
    head, _, var = key.rpartition("/")
    parts = head.split("/")
    if len(parts) == 3:
        parts[2] = parts[2].lstrip("0123456789")
    return "/".join([*parts, var])


def spread(base: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> dict[str, dict]:
    """Per group: the largest difference relative to the scale, the largest absolute one,
    and whether any integer, NaN pattern, dtype or shape differs."""
    table: dict[str, dict] = {}
    for key, old in base.items():
        if key not in other:
            continue
        new = other[key]
        row = table.setdefault(group(key), {"relative": 0.0, "absolute": 0.0, "exact": True})
        if old.dtype != new.dtype or old.shape != new.shape:
            row["exact"] = False
            row["relative"] = float("inf")
            continue
        if old.dtype.kind != "f":
            row["exact"] &= bool(np.array_equal(old, new))
            continue
        if not np.array_equal(np.isnan(old), np.isnan(new)):
            row["exact"] = False
            row["relative"] = float("inf")
            continue
        finite = np.isfinite(old)
        if not finite.any():
            continue
        diff = float(np.max(np.abs(new[finite].astype(np.float64) - old[finite])))
        scale = float(np.max(np.abs(old[finite])))
        row["absolute"] = max(row["absolute"], diff)
        if scale > 0:
            row["relative"] = max(row["relative"], diff / scale)
        row["exact"] &= diff == 0.0
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="a stored reference (contract or hermite flow) recorded elsewhere")
    parser.add_argument("--json", type=Path, help="write the table here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        native = outputs({}, Path(tmp) / "native.npz")
        tables = {kind: spread(native, outputs(env, Path(tmp) / f"{kind}.npz"))
                  for kind, env in KINDS.items()}
    for path in args.against:
        prefix = next((p for stem, p in PREFIX.items() if path.stem.startswith(stem)),
                      "contract:")
        with np.load(path) as data:
            stored = {f"{prefix}{k}": data[k] for k in data.files if k != "solver"}
        tables[path.name] = spread({k: native[k] for k in stored if k in native}, stored)
    groups = sorted({g for t in tables.values() for g in t})
    kinds = list(tables)
    print(f"{'variable':70s} " + " ".join(f"{k[:14]:>14s}" for k in kinds))
    for g in groups:
        cells = []
        for k in kinds:
            row = tables[k].get(g)
            if row is None:
                cells.append(f"{'-':>14s}")
            elif row["exact"]:
                cells.append(f"{'bitwise':>14s}")
            else:
                cells.append(f"{row['relative']:14.2e}")
        print(f"{g[:70]:70s} " + " ".join(cells))
    if args.json:
        table = json.loads(args.json.read_text()) if args.json.exists() else {}
        table.setdefault("kinds", {}).update(
            {k: KINDS.get(k, {"stored reference": k}) for k in kinds})
        rows = table.setdefault("spread", {})
        for g in groups:
            rows.setdefault(g, {}).update({k: tables[k][g] for k in kinds if g in tables[k]})
        args.json.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
