"""Shared fixtures: real Kafka-protocol brokers (Tansu) on free loopback ports.

`broker_factory` starts as many brokers as a test needs; `two_clusters` is the common
source/target pair. Brokers are in-memory and stopped at the end of the session.

Replication jobs are left out of plans (RECONCILER_JOBS=off) except in tests marked `jobs`:
the topic tests run against the memory double or brokers no job should be started for.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from reconciler.dev.brokers import Broker, free_port, start_broker, stop_pid


class BrokerFactory:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.brokers: list[Broker] = []
        self._n = itertools.count()

    def start(self) -> Broker:
        port = free_port()
        broker = start_broker("127.0.0.1", port, log_path=self.log_dir / f"tansu-{next(self._n)}-{port}.log")
        self.brokers.append(broker)
        return broker

    def stop_all(self) -> None:
        for b in self.brokers:
            if b.pid:
                stop_pid(b.pid)
        self.brokers.clear()


@pytest.fixture(scope="session")
def broker_factory(tmp_path_factory):
    factory = BrokerFactory(tmp_path_factory.mktemp("brokers"))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def two_clusters(broker_factory) -> tuple[Broker, Broker]:
    """A session-wide source ('west') and target ('east') broker. Tests must use unique topic names."""
    return broker_factory.start(), broker_factory.start()


@pytest.fixture
def fresh_clusters(broker_factory) -> tuple[Broker, Broker]:
    """Two brokers of this test's own, for tests that need empty clusters."""
    return broker_factory.start(), broker_factory.start()


@pytest.fixture
def state_dir(tmp_path, monkeypatch) -> Path:
    """An isolated RECONCILER_STATE_DIR."""
    d = tmp_path / "state"
    monkeypatch.setenv("RECONCILER_STATE_DIR", str(d))
    return d


def pytest_configure(config):
    config.addinivalue_line("markers", "jobs: plans and applies include replication jobs (RECONCILER_JOBS on)")


@pytest.fixture(autouse=True)
def _jobs_only_where_marked(request, monkeypatch):
    if request.node.get_closest_marker("jobs") is None:
        monkeypatch.setenv("RECONCILER_JOBS", "off")


def pytest_report_header(config):
    return [f"RECONCILER_STATE_DIR={os.environ.get('RECONCILER_STATE_DIR', '(per test)')}"]
