"""The process' log lines, one home for the replication job and the CLI.

librdkafka prints its own log lines (`%3|...|FAIL|rdkafka#consumer-1| ... Connection refused`) to
stderr unless the client is given a `logger`. Every client the reconciler creates passes its
configuration through `client_config()`; the lines then go to the `reconciler.kafka` logger, which
shows nothing unless the command runs with `-v` (warnings) or `-vv` (debug), see `configure()`.

`RECONCILER_LOG_FORMAT=json` makes every log line one JSON object (`JsonFormatter`): the job's
(`setup()`, called by the job's entry point) and the CLI's (`cli_logging()`, around every command:
each message the command writes to stderr becomes one event, `event()` adds structured ones, e.g. a
flow's apply result). Secrets are redacted in both formats.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from reconciler import settings
from reconciler.textutil import term
from reconciler.topology.secrets import Redactor

CLIENT_LOGGER = logging.getLogger("reconciler.kafka")
CLIENT_LOGGER.addHandler(logging.NullHandler())
CLIENT_LOGGER.propagate = False


#: The replication job's clients: their librdkafka lines are served by the job's own poll/consume calls
#: (never from a background thread, so a cached client that is no longer used stays silent) and go
#: wherever the job's log goes (`setup`), as WARNING for errors, at the job's level otherwise.
JOB_CLIENT_LOGGER = logging.getLogger("reconciler.job.kafka")


def client_config(conf: Mapping[str, Any], logger: logging.Logger = CLIENT_LOGGER) -> dict[str, Any]:
    """`conf` for a confluent-kafka Consumer/Producer/AdminClient with its log routed to `logger`
    (CLIENT_LOGGER for the CLI's clients, JOB_CLIENT_LOGGER for the replication job's)."""
    return {**conf, "logger": logger}


def configure(verbosity: int) -> None:
    """`-v`: client warnings and errors on stderr; `-vv`: everything. Default: none."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(name)s: %(message)s", REDACT))  # secrets redacted at every level
    CLIENT_LOGGER.addHandler(handler)
    CLIENT_LOGGER.setLevel(logging.WARNING if verbosity == 1 else logging.DEBUG)


# --- structured logs (RECONCILER_LOG_FORMAT=json) ----------------------------------------------------
#: LogRecord attributes that are not user fields (anything else passed with `extra=` becomes a field).
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (ISO 8601 UTC), level, logger, message, flow, plus `extra=` fields and
    the exception; every string goes through `redact` (topology/secrets.py Redactor) so secrets never appear."""

    def __init__(self, flow: str | None = None, redact: Any = None):
        super().__init__()
        self.flow = flow
        self.redact = redact or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        import datetime as dt
        import json

        doc: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self.flow is not None:  # a job's lines; a CLI event may carry its own (`event(..., flow=)`)
            doc["flow"] = self.flow
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                if isinstance(value, (list, tuple)):  # a list of names (e.g. the flows of one action)
                    doc[key] = [str(v) for v in value]
                else:
                    doc[key] = value if isinstance(value, (int, float, bool)) or value is None else str(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        doc = {
            k: self.redact(v) if isinstance(v, str) else [self.redact(x) for x in v] if isinstance(v, list) else v
            for k, v in doc.items()
        }
        return json.dumps(doc, ensure_ascii=False, default=str)


class RedactingFormatter(logging.Formatter):
    """The human line format, with secrets redacted and control characters shown (textutil.term)."""

    def __init__(self, fmt: str, redact: Any = None):
        super().__init__(fmt)
        self.redact = redact or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        flow = getattr(record, "flow", None)
        if flow and f"[{flow}] " not in text:  # a line of one of an engine's flows (the driver's LoggerAdapter)
            head, sep, tail = text.partition(": ")
            text = f"{head}{sep}[{flow}] {tail}" if sep else f"[{flow}] {text}"
        return term(self.redact(text), newlines=True)  # a broker's or a topology's bytes reach no terminal raw


def log_format(environ: Mapping[str, str] | None = None) -> str:
    """`json` or `text` from $RECONCILER_LOG_FORMAT (read and checked in reconciler.settings)."""
    return settings.log_format(environ)


def formatter(
    flow: str | None = None, redact: Any = None, environ: Mapping[str, str] | None = None
) -> logging.Formatter:
    """The formatter of the process' log lines: JSON when RECONCILER_LOG_FORMAT=json, human lines otherwise."""
    if log_format(environ) == "json":
        return JsonFormatter(flow, redact)
    prefix = f"[{flow}] " if flow else ""
    return RedactingFormatter(f"%(asctime)s %(levelname)s %(name)s: {prefix}%(message)s", redact)


def setup(
    level: str | int = "INFO",
    flow: str | None = None,
    redact: Any = None,
    environ: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """A long-running process' log lines (the replication job's driver): every logger to stderr, in the
    format of $RECONCILER_LOG_FORMAT, with the flow (a field in JSON, `[flow]` in text) and secrets redacted."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(flow, redact, environ))
    if isinstance(level, str):
        level = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=level, handlers=[handler], force=True)
    return handler


# --- the CLI's events ------------------------------------------------------------------------------------
#: The CLI's own events: silent in the text format (the commands print their human lines), JSON lines on
#: stderr with RECONCILER_LOG_FORMAT=json.
EVENTS = logging.getLogger("reconciler.cli")
EVENTS.addHandler(logging.NullHandler())
EVENTS.propagate = False
#: The process' redactor for the CLI's JSON lines: commands add the secrets of the topologies they load.
REDACT = Redactor()
_LEVEL = re.compile(r"\b(error|warning|note)s?:", re.IGNORECASE)


def event(message: str, *, level: int = logging.INFO, flow: str | None = None, **fields: Any) -> None:
    """One structured CLI event (a JSON line in the json format; nothing in the text format)."""
    extra = {k: v for k, v in fields.items() if v is not None}
    if flow is not None:
        extra["flow"] = flow
    EVENTS.log(level, message, extra=extra)


class StderrEvents:
    """What a command writes to stderr, as events: one per message (a `print` or one `write` ending a
    line); indented lines continue the message before them (hints under a diagnostic). The level is the
    message's own `error:`/`warning:`/`note:` word (`FILE:LINE: error: ...`, `2 errors: ...`), info otherwise."""

    def __init__(self, logger: logging.Logger = EVENTS):
        self.logger = logger
        self._buffer = ""

    def write(self, text: str) -> int:
        self._buffer += text
        if self._buffer.endswith("\n"):
            self.flush()
        return len(text)

    def flush(self) -> None:
        text, self._buffer = self._buffer.rstrip("\n"), ""
        messages: list[str] = []
        for line in text.split("\n"):
            if messages and line[:1].isspace():
                messages[-1] += "\n" + line
            elif line.strip():
                messages.append(line)
        for message in messages:
            found = _LEVEL.search(message.split("\n", 1)[0])
            kind = found.group(1).lower() if found else "info"
            level = {"error": logging.ERROR, "warning": logging.WARNING}.get(kind, logging.INFO)
            self.logger.log(level, "%s", message)

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("stderr is a JSON event stream")


@contextlib.contextmanager
def cli_logging(verbosity: int = 0, environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """Around one CLI command: text (default) as `configure(verbosity)`; with RECONCILER_LOG_FORMAT=json,
    stderr becomes one JSON line per event (the command's messages, `event()`s, and the Kafka clients'
    lines with -v), redacted with `REDACT`; stdout (the command's report) is left alone."""
    if log_format(environ) != "json":
        configure(verbosity)
        yield
        return
    if isinstance(sys.stderr, StderrEvents):  # a command run by another (the demo): already set up
        yield
        return
    stream = sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(None, REDACT))
    saved = (EVENTS.level, CLIENT_LOGGER.level)
    EVENTS.addHandler(handler)
    EVENTS.setLevel(logging.INFO)
    if verbosity > 0:
        CLIENT_LOGGER.addHandler(handler)
        CLIENT_LOGGER.setLevel(logging.WARNING if verbosity == 1 else logging.DEBUG)
    events = StderrEvents(EVENTS)
    sys.stderr = events
    try:
        yield
    finally:
        events.flush()
        sys.stderr = stream
        EVENTS.removeHandler(handler)
        CLIENT_LOGGER.removeHandler(handler)
        EVENTS.setLevel(saved[0])
        CLIENT_LOGGER.setLevel(saved[1])
