"""Where the suite finds the development tools the `[test]` extra installs (actionlint, shellcheck, ruff, mypy)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def tool(name: str) -> str:
    """The tool beside this interpreter (the project's venv), else on PATH; a failing test says how to install it."""
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    return shutil.which(name) or pytest.fail(f"{name} not installed: pip install -e .[test]")
