"""Settings read from environment variables: the one place they are parsed.

Module constants elsewhere (`DEFAULT_TTL = settings.seconds(...)`) are evaluated at import, before
the command line runs; a malformed value must not be a traceback there. So a bad value falls back
to the default *and is recorded*; `main()` calls `check()` first and refuses to run with
`error: RECONCILER_X=abc is not a number ...`, exit 1, nothing changed.

| variable                      | default | meaning                                                        |
|-------------------------------|---------|----------------------------------------------------------------|
| RECONCILER_ADMIN_TIMEOUT      | 15      | seconds an admin call to a cluster may take                    |
| RECONCILER_LEASE_TTL          | 60      | seconds an apply lease lives without renewal                   |
| RECONCILER_JOB_START_GRACE    | 180     | seconds a new job may run before it must report status         |
| RECONCILER_MAX_REMOTE_TOPICS  | 10000   | remote topics validate/plan accept before refusing (multiplication) |
| RECONCILER_DEV_ENGINE         | tansu   | the embedded brokers' engine: `dev up`, `demo`, the test brokers (tansu, noida) |
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

_errors: dict[str, str] = {}


def _number(
    name: str, default: float, what: str, integer: bool, minimum: float, environ: Mapping[str, str] | None
) -> float:
    process = environ is None  # only the process environment's mistakes are recorded for check()
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip()) if integer else float(raw.strip())
    except ValueError:
        value = None
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or value < minimum:
        kind = "a whole number" if integer else "a number"
        if process:
            _errors[name] = (
                f"{name}={raw} is not {kind} >= {minimum:g} ({what}; default {default:g}); "
                f"set it to e.g. {name}={default:g} or unset it"
            )
        return default
    if process:
        _errors.pop(name, None)
    return value


def seconds(name: str, default: float, what: str, environ: Mapping[str, str] | None = None) -> float:
    """A duration in seconds (> 0) from `name`, else `default`; a malformed value is recorded for `check()`."""
    return _number(name, default, what, False, 0.001, environ)


def count(name: str, default: int, what: str, environ: Mapping[str, str] | None = None) -> int:
    """A whole number >= 1 from `name`, else `default`; a malformed value is recorded for `check()`."""
    return int(_number(name, default, what, True, 1, environ))


def duration(text: str) -> float:
    """A duration given on the command line: `90`, `90s`, `5m`, `1h` (seconds, minutes, hours); >= 0.
    Raises ValueError with a message that says what is accepted."""
    raw = text.strip().lower()
    unit = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], None)
    number = raw[:-1] if unit else raw
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text!r} is not a duration: use seconds or a number with s, m or h (e.g. 90s, 5m)")
    return value


def choice(
    name: str, default: str, choices: tuple[str, ...], what: str, environ: Mapping[str, str] | None = None
) -> str:
    """One of `choices` from `name`, else `default`; a value not among them is recorded for `check()`."""
    process = environ is None
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    if raw not in choices:
        if process:
            _errors[name] = f"{name}={raw} is not one of {', '.join(choices)} ({what}; default {default})"
        return default
    if process:
        _errors.pop(name, None)
    return raw


def dev_engine(environ: Mapping[str, str] | None = None) -> str:
    """The engine of the embedded brokers unless a command says otherwise (read on each call)."""
    return choice("RECONCILER_DEV_ENGINE", "tansu", ("tansu", "noida"), "the embedded brokers' engine", environ)


def errors() -> list[str]:
    """Every malformed setting of the process environment, one line each (settings read at import
    were recorded then; the ones read later are read here)."""
    max_remote_topics()
    dev_engine()
    return [_errors[k] for k in sorted(_errors)]


def max_remote_topics(environ: Mapping[str, str] | None = None) -> int:
    """How many remote topics a topology may make before validate and plan refuse (read on each call)."""
    return count(
        "RECONCILER_MAX_REMOTE_TOPICS",
        10_000,
        "how many remote topics validate and plan accept before refusing",
        environ,
    )
