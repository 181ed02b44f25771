"""Fixtures of the integration tests beside tests/conftest.py's brokers."""

from __future__ import annotations

import pytest

from tests.integration.mirror_helpers import spec_for


@pytest.fixture(scope="module")
def spark():
    """One local SparkContext with two cores for the module's tests, as an engine starts it (the job's tasks in Spark's
    Python workers, as deployed); stopped at the module's end (one SparkContext a process at a time)."""
    from reconciler.engine.session import build_context

    sc = build_context(
        spec_for(type("B", (), {"bootstrap": "x:1"}), type("B", (), {"bootstrap": "x:2"})), master="local[2]"
    )
    yield sc
    sc.stop()
