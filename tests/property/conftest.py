"""Fixtures of the property-based tests: the CLI worker and the run's settings (tests/conftest.py
adds the command-line options; the README's Tests section says how to run them)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.property.cli import CliWorker

QUICK_EXAMPLES = {"validate": 200, "mm2": 300, "strimzi": 200}  # the normal test command: <= ~60 s for all
LONG_EXAMPLES = 10_000
DEFAULT_SEED = 24


@dataclass(frozen=True)
class FuzzRun:
    long: bool
    seed: int
    examples: int | None  # None: QUICK_EXAMPLES[kind], or LONG_EXAMPLES in a long run
    keep_going: bool
    failures_dir: Path

    def count(self, kind: str) -> int:
        if self.examples is not None:
            return self.examples
        return LONG_EXAMPLES if self.long else QUICK_EXAMPLES[kind]


def fuzz_settings(config: pytest.Config, tmp: Path | None = None) -> FuzzRun:
    env_examples = os.environ.get("RECONCILER_FUZZ_EXAMPLES", "").strip()
    examples = config.getoption("fuzz_examples") or (int(env_examples) if env_examples else None)
    long = bool(config.getoption("fuzz_long")) or (examples is not None and examples >= LONG_EXAMPLES)
    seed = config.getoption("fuzz_seed")
    if seed is None:
        seed = int(os.environ.get("RECONCILER_FUZZ_SEED", "").strip() or DEFAULT_SEED)
    failures = config.getoption("fuzz_failures") or os.environ.get("RECONCILER_FUZZ_FAILURES", "")
    return FuzzRun(
        long=long,
        seed=seed,
        examples=examples,
        keep_going=bool(config.getoption("fuzz_keep_going")),
        failures_dir=Path(failures) if failures else (tmp or Path(".")) / "fuzz-failures",
    )


@pytest.fixture(scope="session")
def fuzz(request, tmp_path_factory) -> FuzzRun:
    return fuzz_settings(request.config, tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="session")
def cli_worker(tmp_path_factory):
    worker = CliWorker(tmp_path_factory.mktemp("fuzz-worker"))
    yield worker
    worker.stop()


def pytest_collection_modifyitems(config, items):
    """A run of more inputs than the quick one may take hours: no per-test timeout for it (the time
    bound of each input still holds)."""
    run = fuzz_settings(config)
    if run.long or run.examples is not None:
        for item in items:
            if item.nodeid.startswith("tests/property/"):
                item.add_marker(pytest.mark.timeout(0))
