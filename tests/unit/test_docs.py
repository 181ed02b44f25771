"""The documentation stays true: the site builds strictly, generated pages are current, every path a page names
exists, every `reconciler` command and flag a page shows exists in the CLI, every topology a page shows validates,
and the README stays a front door (docs/contributing.md, "Conventions")."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import build_parser
from reconciler.cli.reference import pages, walk
from tests import doc_steps

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Top-level folders and files of the repository a page may name as a path.
TOP = ("reconciler/", "docs/", "tests/", "scripts/", "bench/", "deploy/", "schemas/", "topologies/", "jobs/", "ci/")
TOP += (".github/", ".ci/")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`: a broken link, a page missing from the nav or a nav entry without a page fails."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is not installed: it is in the [docs] extra, which [test] includes"
    out = subprocess.run(
        [mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "getting-started" / "index.html").exists()


def test_the_generated_reference_pages_are_current():
    stale = [name for name, text in pages().items() if (ROOT / name).read_text(encoding="utf-8") != text]
    assert stale == [], f"run `.venv/bin/python scripts/generate_settings.py`: stale {stale}"


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for must in (
        "bash scripts/demo.sh",
        "bash scripts/test.sh",
        "apiVersion: reconciler/v1",
        "docs/getting-started.md",
    ):
        assert must in text
    # the README's test command is what CI runs
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _named_paths(text: str) -> set[str]:
    """Repository paths a page names in backticks or as a link target (placeholders and globs left out)."""
    found = set(re.findall(r"`([^`\s]+)`", text)) | set(re.findall(r"\]\(([^)#\s]+)", text))
    out = set()
    for item in found:
        item = item.rstrip(".,:;")
        if not item.startswith(TOP) or re.search(r"[<>*${}\[\]|]|\.\.\.", item):
            continue
        if re.fullmatch(r"reconciler/[a-z-]+", item):
            continue  # a Kubernetes annotation key (`reconciler/restart-hash`), not a path: those end in / or .py
        out.add(item.split(":", 1)[0])  # path:LINE
    return out


def test_every_path_a_page_names_exists():
    missing = [
        f"{_rel(page)} names {path}"
        for page in PAGES
        for path in sorted(_named_paths(page.read_text(encoding="utf-8")))
        if not (ROOT / path).exists()
    ]
    assert missing == []


def test_the_path_check_sees_a_missing_path():
    assert _named_paths("see `deployers/monitoring/` and `deploy/nothing.yaml` and [x](docs/nope.md)") == {
        "deploy/nothing.yaml",
        "docs/nope.md",
    }


def _commands() -> dict[str, argparse.ArgumentParser]:
    return {name: parser for name, _, parser in walk(build_parser())}


def _groups() -> set[str]:
    """Command words that only lead to subcommands (`dev`, `offsets`, `import`, ...)."""
    return {name.rsplit(" ", 1)[0] for name in _commands() if " " in name}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}  # noqa: SLF001


def _shown_commands(text: str) -> list[str]:
    """`reconciler ...` command lines a page shows: in code blocks (after an optional `$ `) and inline code."""
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("reconciler "):
                lines.append(line.split("  #", 1)[0].split(" # ", 1)[0])
    lines += [m for m in re.findall(r"`(reconciler [^`]+)`", text)]
    return lines


def _check(line: str, commands: dict[str, argparse.ArgumentParser], groups: set[str]) -> str | None:
    words = [w for w in line.split()[1:] if w not in ("-v", "-vv", "--verbose")]
    name = ""
    for w in words:
        if w.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", w):
            break
        candidate = f"{name} {w}".strip()
        if candidate in commands or candidate in groups:
            name = candidate
        else:
            break
    if name not in commands:
        return None if name in groups or not name else f"no command `reconciler {name}`"
    options = _options(commands[name]) | {"-h", "--help"}
    flags = [w.split("=", 1)[0] for w in words if re.fullmatch(r"--?[a-zA-Z][-a-zA-Z]*(=.*)?", w)]
    unknown = [f for f in flags if f not in options]
    return f"`reconciler {name}` has no {', '.join(unknown)}" if unknown else None


def test_every_command_and_flag_a_page_shows_exists():
    commands, groups = _commands(), _groups()
    wrong = [
        f"{_rel(page)}: {line!r}: {problem}"
        for page in PAGES
        for line in _shown_commands(page.read_text(encoding="utf-8"))
        if (problem := _check(line, commands, groups))
    ]
    assert wrong == []


def test_the_command_check_sees_a_wrong_flag_and_command():
    commands, groups = _commands(), _groups()
    assert _check("reconciler plan topologies/demo --no-such-flag", commands, groups)
    assert _check("reconciler stop west->east", commands, groups) is None  # not a command word at all: no claim
    assert _check("reconciler dev up --engine noida t.yaml", commands, groups) is None
    assert "no --frobnicate" in (_check("reconciler drift t --frobnicate", commands, groups) or "")


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_topology_a_page_shows_validates(page, tmp_path):
    from reconciler.topology import environments
    from reconciler.topology.build import load_topology
    from reconciler.topology.diagnostics import Diagnostics
    from reconciler.topology.loader import load_text

    blocks = [
        b
        for b in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
        if "kind: Topology" in b
    ]
    for i, block in enumerate(blocks):
        if "..." in block:
            continue  # an excerpt
        yaml.safe_load(block)
        path = tmp_path / f"block{i}.yaml"
        path.write_text(block, encoding="utf-8")
        for env in environments.names(load_text(block, str(path), Diagnostics())) or (None,):  # each one it declares
            _, diagnostics = load_topology([path], env=env)
            assert diagnostics.errors == [], f"{_rel(page)} block {i} (environment {env}): {diagnostics.errors}"


# --- pages whose commands run (tests/doc_steps.py; tests/integration/test_tutorial.py runs the tutorial) -----------
TUTORIAL = ROOT / "docs" / "getting-started.md"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_doctest_marker_parses(page):
    doc_steps.steps(page.read_text(encoding="utf-8"))  # an unknown kind or option is a ValueError


def test_every_transcript_and_file_of_the_tutorial_is_run():
    """No output on the tutorial goes unchecked: each `console` block is a run block, each topology and script a
    file block (only the set-up `sh` block, which the test does its own way, is not run)."""
    text = TUTORIAL.read_text(encoding="utf-8")
    unmarked = [
        block
        for block in re.findall(r"(?<!-->\n)```(?:console|yaml|python)\n(.*?)```", text, flags=re.S)
        if block.strip()
    ]
    assert unmarked == []
    steps = doc_steps.steps(text)
    commands = [s.line for s in steps if isinstance(s, doc_steps.Command)]
    assert commands[0] == "reconciler validate first.yaml" and commands[-1] == "reconciler dev down"
    assert {"reconciler dev up first.yaml", "reconciler status first.yaml", "reconciler drift first.yaml"} <= set(
        commands
    )
    assert doc_steps.page_ports(text) == ["19092", "19093"]


def _cmd(expected: str, **options) -> doc_steps.Command:
    return doc_steps.Command("reconciler x", expected, **options)


def test_the_output_comparison_normalises_only_what_varies():
    ports = {"40001": "19092"}  # the run's -> the page's
    page = "west 127.0.0.1:19092 started pid 15916 (Tansu)\nspec fa3e4c709d8b in 2.8s at 2026-11-28T22:51:37Z"
    run = "west 127.0.0.1:40001 started pid 7 (Tansu)\nspec 0123456789ab in 14.1s at 2027-01-01T00:00:00Z"
    assert doc_steps.mismatch(_cmd(page), run, ports) is None
    assert doc_steps.mismatch(_cmd(page), run.replace("40001", "40002"), ports), "another port of a cluster"
    assert doc_steps.mismatch(_cmd(page), run.replace("(Tansu)", "(noida-db)"), ports)
    assert doc_steps.mismatch(_cmd("Plan: 6 to create"), "Plan: 7 to create", ports), "a count is not a placeholder"
    assert doc_steps.mismatch(_cmd("a\n...\nz"), "a\nb\nc\nz", ports) is None, "`...` stands for lines"
    assert doc_steps.mismatch(_cmd("a\n...\nz"), "a\nb\nc", ports)


def test_the_table_options_free_only_their_columns():
    page = "FLOW  LAG  REC/S  RECORDS\nw->e  0    101    1003"
    cmd = _cmd(page, vary=("REC/S",), at_least=("RECORDS",))
    assert doc_steps.mismatch(cmd, "FLOW    LAG  REC/S  RECORDS\nw->e    0    7      1027", {}) is None
    assert doc_steps.mismatch(cmd, "FLOW  LAG  REC/S  RECORDS\nw->e  0    7      998", {}), "fewer records"
    assert doc_steps.mismatch(cmd, "FLOW  LAG  REC/S  RECORDS\nw->e  5    101    1003", {}), "LAG is not freed"


def test_a_marker_with_an_unknown_option_is_refused():
    with pytest.raises(ValueError, match="unknown option"):
        doc_steps.steps("<!-- doctest: run wiat=5 -->\n```console\n$ reconciler x\n```\n")
    [cmd] = doc_steps.steps('<!-- doctest: run exit=1 wait=5 vary="A B,C" -->\n```console\n$ x\nout\n```\n')
    assert (cmd.line, cmd.expected, cmd.exit_code, cmd.wait_s, cmd.vary) == ("x", "out", 1, 5.0, ("A B", "C"))
