"""Named random streams: every random number of a model comes from :func:`rng`.

Below both ``models/`` and ``practice/`` (docs/engine.md, "Randomness"): a configuration's
random numbers depend on its seed and the stream's name only.
"""

from __future__ import annotations

import hashlib

import numpy as np


def rng(seed: int, *stream: str | int) -> np.random.Generator:
    """A generator for one named random stream of one seed.

    ``rng(seed, "teacher")`` and ``rng(seed, "data")`` are independent and depend on nothing
    but their arguments (``numpy.random.SeedSequence`` with a spawn key hashed from the stream
    names), so results are identical for any batching, worker count or shard.
    """
    key = tuple(
        int.from_bytes(hashlib.sha256(str(s).encode()).digest()[:4], "little") for s in stream
    )
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=key)))
