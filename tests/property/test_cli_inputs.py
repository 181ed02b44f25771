"""Property-based tests of every file the CLI reads (issue 24): for any generated topology, MirrorMaker 2
properties file or Strimzi KafkaMirrorMaker2 resource,

    reconciler validate FILE | reconciler import mm2 FILE | reconciler import strimzi FILE

exits 0 or 1, prints no traceback, names FILE in its error when it exits 1, and stays within the
time and memory bounds (tests/property/cli.py), with stderr of bounded size.

The quick run (the normal test command) draws a fixed number of inputs per kind from a fixed seed:
the same inputs every time. The long run (`--fuzz-long`: 10,000 per kind) prints its seed; any failure
replays with `--fuzz-seed S` (and `--fuzz-examples N`). the README's Tests section has the commands.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.property import strategies
from tests.property.cli import CliWorker, describe, problems, signature

KINDS: dict[
    str, tuple[Callable[[strategies.Profile], st.SearchStrategy[strategies.FileInput]], Callable[[str], list[str]], str]
] = {
    "validate": (strategies.topologies, lambda f: ["validate", f], ".yaml"),
    "mm2": (strategies.mm2_files, lambda f: ["import", "mm2", f], ".properties"),
    "strimzi": (strategies.strimzi_files, lambda f: ["import", "strimzi", f], ".yaml"),
}


def _say(request, line: str) -> None:
    """A line on the terminal even when output is captured (the seed must be seen to replay)."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():
        print(line, file=sys.stderr, flush=True)


def _save(directory: Path, kind: str, data: bytes, suffix: str, record: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    path.write_bytes(data)
    with open(directory / "failures.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({**record, "input": str(path)}) + "\n")
    return path


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_input_is_handled(kind, fuzz, cli_worker: CliWorker, tmp_path, request):
    make, argv, suffix = KINDS[kind]
    count = fuzz.count(kind)
    profile = strategies.LONG if fuzz.long else strategies.QUICK
    _say(request, f"\n[fuzz] {kind}: {count} inputs, seed {fuzz.seed} (replay: --fuzz-seed {fuzz.seed})")
    found: dict[str, tuple[int, str]] = {}  # finding -> (times seen, first failing input as saved)
    path = tmp_path / f"input{suffix}"
    seen = 0
    started = time.monotonic()

    @seed(fuzz.seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=False,
        # a failing input is printed and saved whole; shrinking a 10 s time bound would take hours
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(make(profile))
    def every_input(case: strategies.FileInput) -> None:
        nonlocal seen
        data = case.take()
        seen += 1
        if seen % 500 == 0:
            took = time.monotonic() - started
            _say(request, f"[fuzz] {kind}: {seen} of {count} inputs, {took:.0f} s, {len(found)} distinct failures")
        path.write_bytes(data)
        result = cli_worker.run(argv(str(path)))
        broken = problems(result, path, data)
        if not broken:
            return
        key = signature(kind, broken)
        record = {
            "kind": kind,
            "seed": fuzz.seed,
            "example": seen,
            "finding": key,
            "detail": describe(broken),
            "exception": (result.exception or "")[-3000:],
            "stderr": result.err[:2000],
        }
        if key in found:
            found[key] = (found[key][0] + 1, found[key][1])
            if not fuzz.keep_going:
                raise AssertionError(key)
            return
        saved = _save(fuzz.failures_dir, kind, data, suffix, record)
        found[key] = (1, str(saved))
        if fuzz.keep_going:
            _say(request, f"[fuzz] {kind} #{seen}: {describe(broken)} (input: {saved})")
            return
        raise AssertionError(
            f"{describe(broken)}\n  input ({len(data)} bytes, saved as {saved}): {data[:600]!r}"
            f"\n  replay: --fuzz-seed {fuzz.seed} (input #{seen} of the {kind} run)\n{result.exception or ''}"
            f"\n  stderr: {result.err[:1000]}"
        )

    every_input()
    took = time.monotonic() - started
    _say(request, f"[fuzz] {kind}: {seen} inputs in {took:.0f} s, {len(found)} distinct failures, seed {fuzz.seed}")
    assert not found, f"{len(found)} distinct failures in {seen} {kind} inputs (seed {fuzz.seed}):\n" + "\n".join(
        f"  {n} x {key}  (first input: {first})" for key, (n, first) in sorted(found.items())
    )
