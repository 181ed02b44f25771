"""Shared fixtures: real Kafka-protocol brokers (Tansu, or noida-db where a test asks) on free loopback ports.

`broker_factory` starts as many brokers as a test needs; `two_clusters` is the common source/target pair,
`noida_clusters` a pair on noida-db (for what Tansu cannot show: partitions grown, aborted transactions
hidden). `secure_ca` is a throwaway private CA (openssl) and `secure_factory.start(mutual=...)` a Tansu broker
reachable only through stunnel with TLS (and with `mutual`, a client certificate required), advertising the TLS
port (reconciler/dev/tls.py); tests using them skip, saying why, without openssl or stunnel4. Brokers are stopped (and noida's data removed) at the end of the session. `driver_runs` runs replication
drivers in threads and stops them at the test's end.

Replication jobs are left out of plans (RECONCILER_JOBS=off) except in tests marked `jobs`:
the topic tests run against the memory double or brokers no job should be started for.

Every plan JSON made during the session is checked against schemas/plan.schema.json (RECONCILER_TEST_PLAN_SCHEMA,
set in `pytest_configure`, reconciler/plan/document.py).
"""

from __future__ import annotations

import gc
import itertools
import os
from pathlib import Path

import pytest

from reconciler.dev.brokers import Broker, Engine, default_engine, discard, free_port, start_broker
from tests.helpers import DRIVER_STOP_S, DriverRuns


class BrokerFactory:
    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.brokers: list[Broker] = []
        self._n = itertools.count()

    def start(self, engine: Engine | None = None) -> Broker:
        """A broker on `engine` (default: $RECONCILER_DEV_ENGINE, else Tansu)."""
        engine = engine or default_engine()
        port = free_port()
        n = next(self._n)
        broker = start_broker(
            "127.0.0.1",
            port,
            log_path=self.log_dir / f"{engine.value}-{n}-{port}.log",
            engine=engine,
            data_dir=self.log_dir / f"{engine.value}-{n}-{port}.data",
        )
        self.brokers.append(broker)
        return broker

    def stop_all(self) -> None:
        for b in self.brokers:
            discard(b)
        self.brokers.clear()


@pytest.fixture(scope="session")
def broker_factory(tmp_path_factory):
    factory = BrokerFactory(tmp_path_factory.mktemp("brokers"))
    yield factory
    gc.collect()  # test clients held in reference cycles (an AdminClient and its futures) go before their brokers
    factory.stop_all()


class SecureFactory:
    """Brokers behind a TLS terminator, each with certificates of `ca`; stopped at the end of the session."""

    def __init__(self, work: Path, ca):
        self.work, self.ca = work, ca
        self.brokers: list = []
        self._n = itertools.count()

    def start(self, mutual: bool = False, sasl: bool = False):
        from reconciler.dev.tls import start_secure_broker

        n = next(self._n)
        broker = start_secure_broker(
            self.work / f"tls-{n}", self.ca, mutual=mutual, sasl=sasl, log_path=self.work / f"tansu-tls-{n}.log"
        )
        self.brokers.append(broker)
        return broker

    def stop_all(self) -> None:
        for b in self.brokers:
            b.stop()
        self.brokers.clear()


@pytest.fixture(scope="session")
def secure_ca(tmp_path_factory):
    """A throwaway private CA (reconciler.dev.tls.CertificateAuthority); skips without openssl or stunnel4."""
    from reconciler.dev.tls import CertificateAuthority, missing_tools

    if missing := missing_tools():
        pytest.skip(
            f"the secure brokers need the Debian package(s) {', '.join(missing)} (scripts/test.sh installs them)"
        )
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def secure_factory(secure_ca, tmp_path_factory):
    factory = SecureFactory(tmp_path_factory.mktemp("secure"), secure_ca)
    yield factory
    gc.collect()
    factory.stop_all()


@pytest.fixture(scope="session")
def two_clusters(broker_factory) -> tuple[Broker, Broker]:
    """A session-wide source ('west') and target ('east') broker. Tests must use unique topic names."""
    return broker_factory.start(), broker_factory.start()


@pytest.fixture
def noida_clusters(broker_factory) -> tuple[Broker, Broker]:
    """Two noida-db brokers of this test's own."""
    return broker_factory.start(Engine.NOIDA), broker_factory.start(Engine.NOIDA)


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


@pytest.fixture
def driver_runs():
    """Replication drivers run in daemon threads (`driver_runs.run(driver, max_seconds=...)`, tests/helpers.py
    DriverRun), each stopped at the test's end with a bounded wait: one that did not stop is a test error (with its
    thread's stack), never a session that hangs."""
    runs = DriverRuns()
    yield runs
    stuck = runs.stop_all()
    if stuck:
        pytest.fail(
            f"{len(stuck)} replication driver(s) did not stop within {DRIVER_STOP_S:.0f} s:\n" + "\n".join(stuck)
        )


def pytest_addoption(parser):
    group = parser.getgroup("fuzz", "property-based tests of the CLI's inputs (tests/property, README: Tests)")
    group.addoption(
        "--fuzz-long",
        action="store_true",
        help="the long run: 10,000 generated inputs per kind (RECONCILER_FUZZ_EXAMPLES=N sets another count)",
    )
    group.addoption("--fuzz-examples", type=int, default=None, metavar="N", help="generated inputs per kind")
    group.addoption(
        "--fuzz-seed", type=int, default=None, metavar="S", help="the seed (default 24, or RECONCILER_FUZZ_SEED)"
    )
    group.addoption(
        "--fuzz-keep-going",
        action="store_true",
        help="go on after a failing input; fail at the end with every distinct failure (one line each)",
    )
    group.addoption(
        "--fuzz-failures",
        metavar="DIR",
        default=None,
        help="write failing inputs and a failures.jsonl there (default: the test's temporary directory)",
    )

    parser.getgroup("golden", "golden files (tests/golden)").addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the golden files under tests/golden with what the code makes now, instead of comparing "
        "(review the diff before committing it: docs/contributing.md)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "jobs: plans and applies include replication jobs (RECONCILER_JOBS on)")
    # Every plan JSON document the reconciler makes during the run is checked against schemas/plan.schema.json
    # where it is made (reconciler/plan/document.py, the one place plans become JSON): in this process and in
    # every CLI the tests start, which inherit the variable. A document that does not follow the schema raises
    # there, so the test that made it fails. A setting, not a patch: no module global is replaced.
    os.environ["RECONCILER_TEST_PLAN_SCHEMA"] = "on"


@pytest.fixture
def golden(request):
    """`golden(name, text)`: `text` must be tests/golden/NAME exactly; with --update-golden the file is rewritten."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = Path(__file__).resolve().parent / "golden" / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"no golden file {path}: run the test with --update-golden and review it"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"{name} differs from the golden file (after a deliberate change: --update-golden)"

    return check


@pytest.fixture(autouse=True)
def _jobs_only_where_marked(request, monkeypatch):
    if request.node.get_closest_marker("jobs") is None:
        monkeypatch.setenv("RECONCILER_JOBS", "off")


def pytest_report_header(config):
    from tests.property.conftest import fuzz_settings

    fuzz = fuzz_settings(config)
    return [
        f"RECONCILER_STATE_DIR={os.environ.get('RECONCILER_STATE_DIR', '(per test)')}",
        f"fuzz (tests/property): seed {fuzz.seed}, "
        + (f"{fuzz.count('validate')} inputs per kind" if fuzz.long or fuzz.examples else "the quick run")
        + (", keep going" if fuzz.keep_going else ""),
    ]
