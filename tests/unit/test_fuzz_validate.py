"""Seeded, bounded fuzz of `reconciler validate` (issue 12): no traceback on any input, and every
refusal is a located error (FILE:LINE), exit 1.

Inputs are the example topologies mutated (cut, spliced, values swapped for hostile ones) plus
hostile YAML constructs. The seed is fixed (override with RECONCILER_FUZZ_SEED to explore); the
count is bounded so the test stays fast.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("RECONCILER_FUZZ_SEED", "12"))
CASES = 300

HOSTILE_VALUES = [
    "&a [*a]",
    "*nope",
    "99999999999999999999999999",
    "1e999",
    "-.inf",
    ".nan",
    "'" + "x" * 300 + "'",
    "[" * 200 + "]" * 200,
    "{a: " * 80 + "1" + "}" * 80,
    '"(?P<g>a)"',
    '"(?i)orders"',
    '"a{99999999999}"',
    '"("',
    '"[z-a]"',
    '"' + "(" * 120 + "a" + ")" * 120 + '"',
    "!!python/object:os.system ls",
    "~",
    "null",
    "true",
    "[]",
    "{}",
    "2026-13-45",
    "0x" + "f" * 40,
    "<<: *m",
    '"\\uD800"',
    "!!binary AAAA",
    "? [a]\n  : b",
    "'" + "9" * 5000 + "'",
    "9" * 5000,
]
HOSTILE_DOCS = [
    "",
    "# only a comment\n",
    "---\n---\n",
    "a: &a\n  b: *a\n",
    "\n".join(
        ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
        + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 9)]
    )
    + "\n",
    "x: " + "[" * 5000 + "]" * 5000 + "\n",
    "- " * 3000 + "a\n",
    "apiVersion: reconciler/v1\nkind: Topology\n",
    "\t\tbad: tabs\n",
    "key: [unclosed\n",
    "\x00\x01binary",
    "{" * 100,
]


def _examples() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted((ROOT / "topologies").rglob("*.yaml"))]


def _mutate(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    op = rng.randrange(6)
    if op == 0 and lines:  # truncate
        return "\n".join(lines[: rng.randrange(len(lines))]) + ("\n" if rng.random() < 0.5 else "")
    if op == 1 and lines:  # cut inside a line
        cut = rng.randrange(len(text))
        return text[:cut]
    if op == 2 and lines:  # replace a value
        i = rng.randrange(len(lines))
        if ":" in lines[i]:
            head = lines[i].split(":", 1)[0]
            lines[i] = f"{head}: {rng.choice(HOSTILE_VALUES)}"
        return "\n".join(lines) + "\n"
    if op == 3 and lines:  # duplicate or drop lines
        i = rng.randrange(len(lines))
        if rng.random() < 0.5:
            lines.insert(i, lines[rng.randrange(len(lines))])
        else:
            del lines[i]
        return "\n".join(lines) + "\n"
    if op == 4:
        return rng.choice(HOSTILE_DOCS)
    # splice: a hostile value into a flow's topic filter
    return text.replace('include: ["', f'include: [{rng.choice(HOSTILE_VALUES)}, "', 1)


def _inputs() -> list[str]:
    rng = random.Random(SEED)
    examples = _examples()
    out = list(HOSTILE_DOCS)
    while len(out) < CASES:
        text = rng.choice(examples)
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(rng, text)
        out.append(text)
    return out


def test_validate_never_raises_and_every_refusal_is_located(tmp_path, capsys):
    failures = []
    for i, text in enumerate(_inputs()):
        f = tmp_path / f"case{i}.yaml"
        f.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            rc = main(["validate", str(f)])
        except BaseException as exc:  # noqa: BLE001 - the point of the test
            failures.append(f"case {i}: {type(exc).__name__}: {exc!s:.200}\n{text[:300]!r}")
            continue
        out = capsys.readouterr()
        if rc not in (0, 1):
            failures.append(f"case {i}: exit {rc}")
        if rc == 1 and f"{f}:" not in out.err:
            failures.append(f"case {i}: error without FILE:LINE: {out.err[:300]!r}\n{text[:300]!r}")
        if "Traceback" in out.err:
            failures.append(f"case {i}: traceback printed")
    assert not failures, f"{len(failures)} of {CASES} inputs failed:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("text", HOSTILE_DOCS[:7])
def test_hostile_documents_are_one_located_error(tmp_path, capsys, text):
    f = tmp_path / "t.yaml"
    f.write_text(text, encoding="utf-8")
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:" in err and "Traceback" not in err
