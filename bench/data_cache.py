"""Benchmark: what the cnn data cache (``practice/data.py``, ``read_npz``) costs and saves.

Each point of a cnn sweep on a user's ``.npz`` file asks for the file's arrays. The cache is
keyed by the SHA-256 of the file's bytes, so every call reads and hashes the file; a hit then
skips the parsing and validation (conversion, finiteness and label checks). This prints, for
MNIST-like files (28×28 images in uint8 and float32), the time of a cache hit (read + hash)
beside a miss (read + hash + parse), i.e. what each later point would cost without a cache,
and the load average, since the machine may be shared.

Run: ``.venv/bin/python bench/data_cache.py``
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from richlazy_cli.practice import data

SIZES = ((10_000, np.uint8), (10_000, np.float32), (60_000, np.uint8))


def best(call: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    g = np.random.default_rng(0)
    print(f"{'file':>30} {'hit (read+hash)':>16} {'miss (+parse)':>14} {'miss/hit':>12}")
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "d.npz")
        for n, dtype in SIZES:
            X = (g.random((n, 28, 28)) * 255).astype(dtype)
            np.savez(path, X=X, y=np.arange(n) % 10)
            size = os.path.getsize(path)

            def miss() -> None:
                data._CACHE.clear()
                data.read_npz(path)

            t_miss = best(miss)
            data.read_npz(path)
            t_hit = best(lambda: data.read_npz(path))
            label = f"{n} x 28x28 {np.dtype(dtype).name} ({size / 1e6:.0f} MB)"
            print(f"{label:>30} {t_hit * 1e3:13.1f} ms {t_miss * 1e3:11.1f} ms "
                  f"{t_miss / t_hit:10.1f} x")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
