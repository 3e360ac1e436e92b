"""What decides the bits of a floating-point result on this machine, and whether a stored
reference was computed on a machine of the same kind.

Bits are promised on one kind of machine only (docs/engine.md, "Reproducibility"): OpenBLAS
picks its kernels by CPU (or by ``OPENBLAS_CORETYPE``), torch's CPU kernels by the ATen
capability (``ATEN_CPU_CAPABILITY``), NumPy's vectorised loops by its dispatched CPU features
(``NPY_DISABLE_CPU_FEATURES``), numba compiles for the host CPU (``NUMBA_CPU_NAME``), and the
versions of all of them matter. :func:`fingerprint` records exactly these; a reference stored
with its fingerprint (``tests/data/*.machine.json``) is compared bit for bit only on a machine
whose fingerprint is the same, and elsewhere within tolerances measured on other kinds
(``scripts/reference_spread.py`` emulates them on one machine).
"""

from __future__ import annotations

import json
import os
import platform
from functools import cache
from pathlib import Path
from typing import Any

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512_bf16", "avx512ifma", "avx512vbmi", "amx_tile")
"""The CPU flags that choose a kernel in OpenBLAS, ATen, NumPy or LLVM."""
SETTINGS = ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES",
            "NUMBA_CPU_NAME")
"""The environment variables that override a library's choice of kernel."""


def _cpu() -> dict[str, Any]:
    info: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"machine": platform.machine(), "processor": platform.processor()}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    flags = set(info.get("flags", "").split())
    return {"vendor": info.get("vendor_id", ""), "family": info.get("cpu family", ""),
            "model": info.get("model", ""),
            "simd": [flag for flag in SIMD_FLAGS if flag in flags]}


def _numpy() -> dict[str, Any]:
    import numpy as np
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return {"version": np.__version__,
            "dispatch": [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]}


def _blas() -> list[dict[str, Any]]:
    """The BLAS libraries NumPy and SciPy load (both imported first, so that the list does not
    depend on what the process happened to import before): only theirs, since a library that
    bundles its own BLAS (scikit-sundae's, loaded by a CVODE test earlier in the process)
    changes none of the references' arithmetic."""
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    def numpy_or_scipy(info: dict[str, Any]) -> bool:
        folder = Path(str(info.get("filepath", ""))).parent.name
        return folder.startswith(("numpy", "scipy"))

    return sorted(({"api": i.get("internal_api"), "version": i.get("version"),
                    "architecture": i.get("architecture")}
                   for i in threadpool_info()
                   if i.get("user_api") == "blas" and numpy_or_scipy(i)),
                  key=lambda d: str(d))


def _torch() -> dict[str, Any] | None:
    try:
        import torch
    except ImportError:
        return None
    return {"version": torch.__version__,
            "capability": torch.backends.cpu.get_cpu_capability()}


def _numba() -> dict[str, Any]:
    import numba
    from numba.core import config

    return {"version": numba.__version__, "cpu_name": config.CPU_NAME or "host"}


@cache
def fingerprint() -> dict[str, Any]:
    """Everything that chooses the bits of this project's float results on this machine."""
    import scipy

    return {"cpu": _cpu(), "python": platform.python_version(),
            "libc": "-".join(platform.libc_ver()), "numpy": _numpy(),
            "scipy": scipy.__version__, "blas": _blas(), "torch": _torch(),
            "numba": _numba(),
            "settings": {name: os.environ[name] for name in SETTINGS if name in os.environ}}


def machine_file(reference: Path) -> Path:
    """The fingerprint stored beside ``reference`` (``X.npz`` → ``X.machine.json``)."""
    return reference.with_suffix(".machine.json")


def write_fingerprint(reference: Path) -> None:
    machine_file(reference).write_text(json.dumps(fingerprint(), indent=1, sort_keys=True) + "\n")


def stored_fingerprint(reference: Path) -> dict[str, Any]:
    return json.loads(machine_file(reference).read_text())


def differences(reference: Path) -> list[str]:
    """What differs between this machine and the one that computed ``reference`` (empty:
    the same kind, where every bit is promised)."""
    here = json.loads(json.dumps(fingerprint()))  # tuples as lists, as stored

    def walk(a: Any, b: Any, at: str) -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [d for k in sorted(set(a) | set(b))
                    for d in walk(a.get(k), b.get(k), f"{at}.{k}" if at else k)]
        return [] if a == b else [f"{at}: {a!r} there, {b!r} here"]

    return walk(stored_fingerprint(reference), here, "")
