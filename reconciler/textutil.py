"""Wording shared by every output a person reads: one pluralisation rule ("1 flow", "2 flows"), one way
to quote a long value (`shorten`)."""

from __future__ import annotations

# One name per latency figure, the same in every output (issue 12):
#: how old a record is when the target acknowledges it (its source timestamp to the job's write):
#: MirrorMaker 2's replication-latency-ms. It includes any backlog, so it is what a consumer downstream
#: sees, and what the topology's `slo.max_latency_p99_ms` is checked against.
RECORD_AGE = "record age"
#: produce on the source -> consume on the target for fresh records (measured by the demo only).
LIVE_E2E = "live end-to-end latency"
#: how old the oldest source record the job has not replicated yet is (now - its timestamp): the job's
#: `lag_seconds`, beside its lag in records (the source's end now - the job's position).
LAG_AGE = "age of the oldest record not replicated yet"

_IRREGULAR = {"policy": "policies", "this": "these", "is": "are", "was": "were"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural unless n is 1: plural(1, "flow") == "1 flow"; thousands grouped."""
    if n == 1:
        return f"1 {word}"
    return f"{n:,} {many or _IRREGULAR.get(word) or (word + 'es' if word.endswith(('s', 'x', 'ch', 'sh')) else word + 's')}"


#: How much of a value a message quotes (issue 24: a 10 MB key was printed whole, twice).
SHORT = 200


def shorten(text: str, limit: int = SHORT) -> str:
    """`text` as a message quotes it: whole when short, else its first `limit` characters and how long it is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} chars)"


class LiveLine:
    """Progress of a wait, on one line: rewritten in place on a terminal (`\\r`), else printed every
    `every` seconds, so a log file gets a few lines, not thousands. `done()` ends the line."""

    def __init__(self, stream, every: float = 10.0, clock=None):
        import time

        self.stream = stream
        self.every = every
        self.clock = clock or time.monotonic
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._last: float | None = None
        self._width = 0

    def show(self, text: str) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            now = self.clock()
            if self._last is not None and now - self._last < self.every:
                return
            self._last = now
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
