"""Stopping loky worker pools: an interrupted sweep leaves no worker behind to wait for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from joblib.externals.loky import get_reusable_executor

from richlazy_cli.engine import executors


def _announce_then_sleep(marker: str) -> None:
    Path(marker).write_text("running")
    time.sleep(60)


@pytest.mark.system
def test_stop_pool_kills_the_workers_a_shutdown_leaves_running(tmp_path) -> None:
    """loky's ``shutdown(kill_workers=True)`` stops at a cancelled future before it kills the
    workers; :func:`.executors.stop_pool` kills them all the same, at once."""
    pool = get_reusable_executor(max_workers=1, reuse=False)
    marker = tmp_path / "running"
    futures = [pool.submit(_announce_then_sleep, str(marker)) for _ in range(10)]
    deadline = time.monotonic() + 120
    while not marker.exists():  # the worker runs the first task
        assert time.monotonic() < deadline and not futures[0].done(), futures[0]
        time.sleep(0.01)
    # a few more wait in the full call queue (loky: twice the workers, plus one), the rest in
    # the pool's own table: those are cancelled, as executors.bounded leaves them
    cancelled = [f.cancel() for f in futures]
    assert not cancelled[0] and any(cancelled), cancelled
    workers = list(pool._processes.values())
    assert len(workers) == 1 and workers[0].is_alive()
    executors.stop_pool(pool)
    assert not [w.pid for w in workers if w.is_alive()]


@pytest.mark.system
def test_pools_are_stopped_by_the_exit_function() -> None:
    """:func:`.executors.stop_pools`, an ``atexit`` function, stops every pool a sweep of this
    process computed on (an interrupted command leaves by ``os._exit`` after the ``atexit``
    functions alone, without loky's own exit hook)."""
    pool = get_reusable_executor(max_workers=1, reuse=False)
    assert pool.submit(sum, [1, 2]).result() == 3  # an idle worker, waiting for more work
    workers = list(pool._processes.values())
    executors._POOLS.add(pool)
    executors.stop_pools()
    assert workers and not [w.pid for w in workers if w.is_alive()]
    assert pool not in executors._POOLS
