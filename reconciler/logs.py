"""Where the logs of the Kafka clients we create go: a Python logger, never the terminal by default.

librdkafka prints its own log lines (`%3|...|FAIL|rdkafka#consumer-1| ... Connection refused`) to
stderr unless the client is given a `logger`. Every client the reconciler creates passes its
configuration through `client_config()`; the lines then go to the `reconciler.kafka` logger, which
shows nothing unless the command runs with `-v` (warnings) or `-vv` (debug), see `configure()`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

CLIENT_LOGGER = logging.getLogger("reconciler.kafka")
CLIENT_LOGGER.addHandler(logging.NullHandler())
CLIENT_LOGGER.propagate = False


def client_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """`conf` for a confluent-kafka Consumer/Producer/AdminClient with its log routed to CLIENT_LOGGER."""
    return {**conf, "logger": CLIENT_LOGGER}


def configure(verbosity: int) -> None:
    """`-v`: client warnings and errors on stderr; `-vv`: everything. Default: none."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    CLIENT_LOGGER.addHandler(handler)
    CLIENT_LOGGER.setLevel(logging.WARNING if verbosity == 1 else logging.DEBUG)


# --- structured logs (RECONCILER_LOG_FORMAT=json) ----------------------------------------------------
LOG_FORMAT_ENV = "RECONCILER_LOG_FORMAT"
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
        if self.flow is not None:
            doc["flow"] = self.flow
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                doc[key] = value if isinstance(value, (int, float, bool)) or value is None else str(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        doc = {k: self.redact(v) if isinstance(v, str) else v for k, v in doc.items()}
        return json.dumps(doc, ensure_ascii=False, default=str)


class RedactingFormatter(logging.Formatter):
    """The human line format, with secrets redacted."""

    def __init__(self, fmt: str, redact: Any = None):
        super().__init__(fmt)
        self.redact = redact or (lambda text: text)

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


def log_format(environ: Mapping[str, str] | None = None) -> str:
    """`json` or `text` from $RECONCILER_LOG_FORMAT (anything else: text)."""
    import os

    env = os.environ if environ is None else environ
    return "json" if env.get(LOG_FORMAT_ENV, "").strip().lower() == "json" else "text"


def formatter(
    flow: str | None = None, redact: Any = None, environ: Mapping[str, str] | None = None
) -> logging.Formatter:
    """The formatter of the process' log lines: JSON when RECONCILER_LOG_FORMAT=json, human lines otherwise."""
    if log_format(environ) == "json":
        return JsonFormatter(flow, redact)
    prefix = f"[{flow}] " if flow else ""
    return RedactingFormatter(f"%(asctime)s %(levelname)s %(name)s: {prefix}%(message)s", redact)
