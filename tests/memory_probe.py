"""The measured peak memory of one configuration, beside the working memory its model declares.

:func:`measure` runs one configuration in a fresh Python process, the way the engine runs a
chunk of one point (:meth:`richlazy_cli.models.base.Model.run` on a one-point batch, BLAS
held at one thread). The process first computes a small configuration of the same
implementation (the model's first example for the action) so that compiled kernels, torch
and the BLAS are loaded and warm; it then resets the kernel's record of its peak resident
memory (``echo 5 > /proc/self/clear_refs``, Linux), reads its resident memory, runs the
configuration and reads the peak (``VmHWM``). The difference is the configuration's peak,
NumPy's and torch's allocations alike (``tracemalloc`` does not see torch's), its outputs
included. Used by tests/models/test_memory.py and bench/memory.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import gc, json, sys
from threadpoolctl import threadpool_limits
from richlazy_cli.models.base import Batch, get_model

name, action, params = json.loads(sys.stdin.read())
M = get_model(name)
values = M.resolve(action, params)
keep = {k: params[k] for k in ("implementation", "dtype", "device") if k in params}
warm = M.resolve(action, {**M.examples[action][0], **keep})

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

M.load_native()
with threadpool_limits(limits=1, user_api="blas"):
    M().run(action, Batch.from_points(M, [warm]))
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    out = M().run(action, Batch.from_points(M, [values]))
    peak = status("VmHWM")
declared = M.footprint(action, values).working_bytes
print(json.dumps({"measured": peak - before, "declared": declared}))
"""


def measure(name: str, action: str, params: dict[str, Any], timeout: float = 300
            ) -> dict[str, float]:
    """``{"measured": bytes, "declared": bytes}`` of one configuration of model ``name``
    (``params`` as given on the command line, before validation), run in a fresh process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps([name, action, params]),
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
                          check=False)
    if done.returncode:
        raise RuntimeError(f"measuring {name} {action} failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
