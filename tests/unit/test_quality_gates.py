"""The quality gates run in the test command: ruff (lint and format) over the whole repository and mypy
over the package, with the settings in pyproject.toml. A finding fails the suite, so main stays clean.

Fix locally with `.venv/bin/ruff check --fix . && .venv/bin/ruff format .`, then `.venv/bin/mypy`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.dev_tools import tool

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)


def test_ruff_finds_nothing():
    r = run(tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_code_is_ruff_formatted():
    r = run(tool("ruff"), "format", "--no-cache", "--check", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_finds_nothing():
    r = run(tool("mypy"), "--no-error-summary", "--hide-error-context")
    assert r.returncode == 0, r.stdout + r.stderr
