"""The runnable blocks of a documentation page (docs/contributing.md, "Tested pages").

A fenced block right after `<!-- doctest: file NAME -->` is a file the reader saves as NAME; one right after
`<!-- doctest: run [OPTIONS] -->` is a terminal transcript: each `$ ` line is a command, the lines up to the next
`$ ` line are its output (stdout and stderr together, as a terminal shows them). The steps run in the page's order
in one directory; an output matches when it equals the page's once both went through `normalise` (the
placeholders of what truly varies between runs), runs of spaces count as one, and a line `...` on the page stands
for any number of lines. OPTIONS: `exit=N` (the block's last command exits N, the others 0; default 0), `wait=S` (run the
command again, every 2 s for at most S seconds, until its output matches: for what a replication engine does in
its own time), `vary="COL,COL"` (cells of these table columns may hold anything) and `at-least="COL"` (cells of
these columns hold a number at least the page's).

Ports: every `127.0.0.1:PORT` of the page's files is given a free port for the run (`ports`), written into the
files and commands as the reader's would be, and mapped back in the outputs; any other port is a placeholder.
"""

from __future__ import annotations

import difflib
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BLOCK = re.compile(r"<!-- doctest: (?P<kind>\w+)(?P<options>[^>]*?)-->\n```[^\n]*\n(?P<body>.*?)```", re.S)
ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")
#: What truly varies between two runs of the same commands, each replaced by its placeholder on both sides (after
#: the ports, which `normalise` maps first).
PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bpid \d+"), "pid <pid>"),  # processes
    (re.compile(r"\blocal-\d{10,}"), "local-<app>"),  # Spark application ids (local-EPOCHMS)
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),  # timestamps
    (re.compile(r"\b(?:[0-9a-f]{12}|[0-9a-f]{8})\b"), "<hash>"),  # spec hashes (they hold the ports), instance ids
    (re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)? ?(?:ms|s|m|h)\b"), "<duration>"),  # durations, ages
)
WAIT_EVERY_S = 2.0


@dataclass(frozen=True)
class SaveFile:
    name: str
    text: str


@dataclass(frozen=True)
class Command:
    line: str
    expected: str
    exit_code: int = 0
    wait_s: float = 0.0
    vary: tuple[str, ...] = ()
    at_least: tuple[str, ...] = ()


def steps(page: str) -> list[SaveFile | Command]:
    """The page's marked blocks, in order; a marker with an unknown kind or option is a ValueError."""
    out: list[SaveFile | Command] = []
    for m in BLOCK.finditer(page):
        kind, words, body = m["kind"], shlex.split(m["options"]), m["body"]
        if kind == "file" and len(words) == 1:
            out.append(SaveFile(words[0], body))
        elif kind == "run":
            options = dict(w.split("=", 1) for w in words if "=" in w)
            if len(options) != len(words) or set(options) - {"exit", "wait", "vary", "at-least"}:
                raise ValueError(f"doctest marker: unknown option in {m[0].splitlines()[0]!r}")
            transcript = _transcript(body)
            out += [
                Command(
                    line,
                    expected,
                    int(options.get("exit", 0)) if n == len(transcript) - 1 else 0,
                    float(options.get("wait", 0)),
                    _columns(options.get("vary", "")),
                    _columns(options.get("at-least", "")),
                )
                for n, (line, expected) in enumerate(transcript)
            ]
        else:
            raise ValueError(f"doctest marker: {m[0].splitlines()[0]!r} is neither `file NAME` nor `run ...`")
    return out


def _columns(value: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in value.split(",") if c.strip())


def _transcript(body: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif not pairs:
            raise ValueError(f"doctest run block: output before the first `$ ` command: {line!r}")
        else:
            pairs[-1][1].append(line)
    return [(cmd, "\n".join(lines)) for cmd, lines in pairs]


def page_ports(page: str) -> list[str]:
    """The loopback ports the page's files name."""
    files = [s.text for s in steps(page) if isinstance(s, SaveFile)]
    return sorted({port for text in files for port in ADDRESS.findall(text)})


def normalise(text: str, ports: dict[str, str]) -> list[str]:
    """`text`'s lines with `ports` (run's -> page's) mapped back, other ports and PLACEHOLDERS replaced."""
    text = ADDRESS.sub(lambda m: f"127.0.0.1:{ports.get(m[1], '<port>')}", text)
    for pattern, placeholder in PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return text.rstrip("\n").splitlines()


def _cells(line: str) -> list[str]:
    return re.split(r" {2,}", line.strip())


def _align_tables(expected: list[str], actual: list[str], cmd: Command) -> list[str]:
    """`actual` with the `vary` and (when the number is at least the page's) `at-least` cells of its tables set to
    the page's: rows after a header naming those columns, up to a blank line, paired in order."""
    columns = set(cmd.vary) | set(cmd.at_least)
    if not columns:
        return actual
    actual = list(actual)
    for i, head in enumerate(expected):
        names = _cells(head)
        if not columns <= set(names):
            continue
        j = next((j for j, line in enumerate(actual) if _cells(line) == names), None)
        if j is None:
            continue
        for row, (want, got) in enumerate(zip(expected[i + 1 :], actual[j + 1 :])):
            want_cells, got_cells = _cells(want), _cells(got)
            if not want.strip() or len(want_cells) != len(names) or len(got_cells) != len(names):
                break
            for k, name in enumerate(names):
                if name in cmd.vary or (name in cmd.at_least and _at_least(got_cells[k], want_cells[k])):
                    got_cells[k] = want_cells[k]
            actual[j + 1 + row] = got[: len(got) - len(got.lstrip())] + "  ".join(got_cells)
    return actual


def _at_least(got: str, want: str) -> bool:
    try:
        return int(got.replace(",", "")) >= int(want.replace(",", ""))
    except ValueError:
        return False


def mismatch(cmd: Command, output: str, ports: dict[str, str]) -> str | None:
    """None when `output` (the run's) fits the page's output of `cmd`, else a diff of the two, normalised."""
    page_ports = {p: p for p in ports.values()}
    expected = normalise(cmd.expected, page_ports)
    actual = _align_tables(expected, normalise(output, ports), cmd)
    want, got = [re.sub(r"\s+", " ", x).rstrip() for x in expected], [re.sub(r"\s+", " ", x).rstrip() for x in actual]
    pattern = "".join(r"(?:.*\n)*?" if w.strip() == "..." else re.escape(w) + r"\n" for w in want)
    if re.fullmatch(pattern, "".join(g + "\n" for g in got)):
        return None
    return "\n".join(difflib.unified_diff(want, got, "page", "run", lineterm=""))


def run(steps: list[SaveFile | Command], work: Path, env: dict[str, str], ports: dict[str, str]) -> None:
    """Save and run `steps` in `work` as a reader would (`ports`: the page's -> the run's); an AssertionError names
    the first command whose exit code or output is not the page's."""
    for step in steps:
        if isinstance(step, SaveFile):
            (work / step.name).write_text(_ported(step.text, ports), encoding="utf-8")
            continue
        back = {run_port: page_port for page_port, run_port in ports.items()}
        start = time.monotonic()
        deadline = start + step.wait_s
        while True:
            out = subprocess.run(
                ["bash", "-c", _ported(step.line, ports)],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=180,
            )
            problem = (
                f"exit {out.returncode}, the page says {step.exit_code}"
                if out.returncode != step.exit_code
                else mismatch(step, out.stdout, back)
            )
            if problem is None:
                # the transcript so far, shown when a later step fails (and with -s, to refresh the page)
                print(f"$ {step.line}  # {time.monotonic() - start:.1f} s\n{out.stdout}")
                break
            if time.monotonic() >= deadline:
                raise AssertionError(f"$ {step.line}\n{problem}\n--- the run's output:\n{out.stdout}")
            time.sleep(WAIT_EVERY_S)


def _ported(text: str, ports: dict[str, str]) -> str:
    return ADDRESS.sub(lambda m: f"127.0.0.1:{ports.get(m[1], m[1])}", text)
