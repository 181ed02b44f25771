"""Where the logs of the Kafka clients we create go: a Python logger, never the terminal by default.

librdkafka prints its own log lines (`%3|...|FAIL|rdkafka#consumer-1| ... Connection refused`) to
stderr unless the client is given a `logger`. Every client the reconciler creates passes its
configuration through `client_config()`; the lines then go to the `reconciler.kafka` logger, which
shows nothing unless the command runs with `-v` (warnings) or `-vv` (debug), see `configure()`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Mapping

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
