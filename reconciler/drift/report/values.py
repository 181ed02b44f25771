"""How the report writes numbers and times (its JSON is stable: rounded floats, ISO 8601 UTC)."""

from __future__ import annotations

import datetime as dt
from typing import Any


def rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def iso_ms(ms: float | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
