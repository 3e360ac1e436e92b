"""The test suite's own tiers (tests/conftest.py): the quick tier holds the unit folders'
in-process tests, and under pytest-xdist every test reaches the scheduler with its group."""

from __future__ import annotations

import os

import pytest


def test_a_unit_folders_test_is_quick(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("quick") is not None


@pytest.mark.system
def test_a_system_test_is_not_quick(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("quick") is None


def test_a_quick_test_cannot_start_a_process() -> None:
    import subprocess
    import sys

    from tests.conftest import StartedAProcess

    with pytest.raises(StartedAProcess):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_under_xdist_the_group_reaches_the_scheduler(request: pytest.FixtureRequest) -> None:
    """pytest-xdist's loadgroup reads the group from the node id (``id@group``); a pytest
    that keeps node ids elsewhere would spread a group over the workers (pyproject pins it)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        pytest.skip("not under pytest-xdist (make test runs it)")
    assert request.node.nodeid.endswith("@tests/architecture/test_test_tiers.py")
