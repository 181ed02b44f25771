"""Wording shared by every output a person reads: one pluralisation rule ("1 flow", "2 flows"), one way
to quote a long value (`cut`), and one escaping rule for values read from a topology or a cluster (names,
tags, topic names and patterns, principals: issue 44): `term` for a terminal, `md_inline`,
`md_code_span` and `md_fence` for Markdown (docs/security.md, "Hostile names in outputs"). The HTML
report escapes with `html.escape` on its own (render/drift_html.py)."""

from __future__ import annotations

import re

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

#: How much of a value a message echoes (a name, a pattern, a path): past it, the start and the length.
SHOWN_CHARS = 200
#: How long a whole message may be (a list of names, a value with blanks in it).
MESSAGE_CHARS = 4_000
_LONG_RUN = re.compile(rf"\S{{{SHOWN_CHARS + 1},}}")


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` whole when it is at most `limit` characters, else its start and its length:
    `xxxx... (1,048,576 chars)`."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} chars)"


def cut_values(message: str) -> str:
    """`message` with every run of more than SHOWN_CHARS non-blank characters (an echoed value) cut,
    and the whole cut at MESSAGE_CHARS: a 100 MB name is shown as its first 200 characters and its length."""
    if len(message) <= SHOWN_CHARS:
        return message
    return cut(_LONG_RUN.sub(_cut_run, message), MESSAGE_CHARS)


def _cut_run(m: re.Match[str]) -> str:
    run = m.group()
    quote = run[0] if run[0] in "'\"" else ""
    inner, after = run[len(quote) :], ""
    if len(inner) == SHOWN_CHARS + 3 and inner.endswith("..."):  # cut already (`cut`): its length follows
        return run
    if quote and quote in inner:  # a repr: the count is the value's, without its quotes
        end = inner.rindex(quote)
        inner, after = inner[:end], inner[end + 1 :]
    return quote + cut(inner) + after


_IRREGULAR = {"policy": "policies", "this": "these", "is": "are", "was": "were"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural unless n is 1: plural(1, "flow") == "1 flow"; thousands grouped."""
    if n == 1:
        return f"1 {word}"
    return f"{n:,} {many or _IRREGULAR.get(word) or (word + 'es' if word.endswith(('s', 'x', 'ch', 'sh')) else word + 's')}"


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


# --- escaping (issue 44) -------------------------------------------------------------------------------
#: Characters a terminal or a Markdown viewer does not show as themselves: C0 controls, DEL, C1 controls
#: (ESC and CSI among them), the Unicode line and paragraph separators, the bidirectional controls
#: (U+202E "right-to-left override" among them), zero-width characters and the byte-order mark.
_INVISIBLE = "\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[\x00-\x1f{_INVISIBLE}]")
_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_INVISIBLE}]")
#: What Markdown could read as syntax in a value: emphasis, code, links and images, headings, lists, tables,
#: HTML and entities, strikethrough, math (`$`); `:` and `.` so `http://x.y` and `www.x.y` are no GFM autolink.
_MD_META = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>&~:$])")
_BACKTICKS = re.compile(r"`+")


def _shown(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def term(value: object, newlines: bool = False) -> str:
    """`value` for a terminal: every control character, escape sequence, bidi override or invisible
    character shown as `\\x1b`, `\\u202e`; a newline too (`\\x0a`), unless `newlines` (a block of lines).
    A backslash already in the value is kept as it is (regular expressions stay readable)."""
    return (_CONTROL_BUT_NEWLINE if newlines else _CONTROL).sub(_shown, str(value))


def md_inline(value: object) -> str:
    """`value` in Markdown text, a title or a table cell: controls shown as in `term` (no new line, no
    hidden text), every Markdown metacharacter backslash-escaped, so it reads literally and forms no link,
    image, autolink, HTML, comment, emphasis, heading or table cell of its own."""
    return _MD_META.sub(r"\\\1", term(value))


def md_code_span(value: object, in_table: bool = False) -> str:
    """`value` as inline code: delimited by a backtick run longer than any inside it, controls shown as in
    `term`. `in_table`: `|` escaped too (GFM splits a table row on every unescaped `|`, even in code)."""
    text = term(value)
    if in_table:
        text = text.replace("|", "\\|")
    tick = "`" * (1 + max((len(r) for r in _BACKTICKS.findall(text)), default=0))
    pad = " " if not text or text[0] in "` " or text[-1] in "` " else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def md_fence(content: str, info: str = "") -> str:
    """`content` (lines) as a fenced code block whose fence is longer than any backtick run inside, so no
    line closes it early; controls but the newlines between lines shown as in `term`."""
    text = term(content.rstrip("\n"), newlines=True)
    fence = "`" * max(3, 1 + max((len(r) for r in _BACKTICKS.findall(text)), default=0))
    return f"{fence}{info}\n{text}\n{fence}"
