"""The hash-locked requirement files (scripts/lock.sh) agree with pyproject.toml and constraints.txt: a
dependency added or re-pinned without re-locking fails here, not at install time in CI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {"ci": None, "image": "spark", "test": "test"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> dict[str, str]:
    return {_norm(m[0]): m[1] for m in re.findall(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s\\;]+)", text, re.M)}


def _names(specs: list[str]) -> set[str]:
    return {_norm(re.match(r"[A-Za-z0-9_.\-]+", s).group(0)) for s in specs}  # type: ignore[union-attr]


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS = _pins((ROOT / "constraints.txt").read_text())


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_locked_file_has_hashes_and_the_constrained_versions(lock):
    text = (ROOT / "requirements" / f"{lock}.txt").read_text()
    pins = _pins(text)
    assert pins, lock
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[-1]):
        if block.strip() and not block.startswith("#"):
            assert "--hash=sha256:" in block, f"{lock}: {block.splitlines()[0]} has no hash"
    wrong = {n: (v, CONSTRAINTS[n]) for n, v in pins.items() if n in CONSTRAINTS and CONSTRAINTS[n] != v}
    assert not wrong, f"requirements/{lock}.txt differs from constraints.txt: run bash scripts/lock.sh ({wrong})"


@pytest.mark.parametrize("lock,extra", sorted(LOCKS.items()))
def test_every_dependency_is_locked(lock, extra):
    pins = _pins((ROOT / "requirements" / f"{lock}.txt").read_text())
    project = PYPROJECT["project"]
    wanted = _names(project["dependencies"])
    extras = project["optional-dependencies"]
    todo = [extra] if extra else []
    while todo:
        for spec in extras[todo.pop()]:
            inner = re.match(r"kafka-replication-reconciler\[(.+)\]", spec)
            if inner:
                todo += inner.group(1).split(",")
            else:
                wanted |= _names([spec])
    missing = sorted(wanted - set(pins))
    assert not missing, f"requirements/{lock}.txt lacks {missing}: run bash scripts/lock.sh"


def test_build_requirements_are_pinned_and_locked():
    requires = PYPROJECT["build-system"]["requires"]
    build_in = _pins((ROOT / "requirements" / "build.in").read_text())
    assert _pins("\n".join(requires)) == build_in and all("==" in r for r in requires)
    for lock in LOCKS:
        pins = _pins((ROOT / "requirements" / f"{lock}.txt").read_text())
        assert {n: pins.get(n) for n in build_in} == build_in, lock
