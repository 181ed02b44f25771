"""Java `.properties` syntax (java.util.Properties.load), with the line number of every entry.

Natural lines end at `\\n`, `\\r` or `\\r\\n`; a line ending in an odd number of backslashes continues
on the next one (whose leading whitespace is dropped); blank lines and lines starting with `#` or `!`
are comments (a comment never continues). The key runs to the first unescaped `=`, `:` or
whitespace; whitespace, then at most one `=`/`:`, then whitespace separate it from the value.
Escapes: `\\t \\n \\r \\f`, `\\uXXXX`, and `\\` before any other character stands for that character.

Java is lenient; we refuse what it would throw on (a malformed `\\uXXXX`) and what no MirrorMaker 2
file can mean (an empty key), as `PropertiesError` naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.textutil import cut_values

_WS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class Property:
    key: str
    value: str
    file: str
    line: int  # 1-based: the line the entry starts on

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


class PropertiesError(Exception):
    """Malformed input: `FILE:LINE: error: ...` when printed."""

    def __init__(self, file: str, line: int, message: str, hint: str | None = None):
        self.file, self.line, self.message, self.hint = file, line, message, hint
        super().__init__(self.render())

    def render(self) -> str:
        """One error line and its hint, each with any long value in it cut (`cut_values`: an importer quotes names
        and values of the input, which may be megabytes long)."""
        out = f"{self.file}:{self.line}: error: {cut_values(self.message)}"
        return out + (f"\n  hint: {cut_values(self.hint)}" if self.hint else "")


def _natural_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(raw: str, file: str, line: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(raw):
            break  # a lone trailing backslash (only possible at end of input): Java drops it
        c = raw[i]
        if c == "u":
            digits = raw[i + 1 : i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(
                    file,
                    line,
                    f"malformed \\uXXXX escape: \\u{digits}",
                    hint="a \\u escape needs exactly four hex digits, e.g. \\u00e9; write \\\\u for a literal backslash-u",
                )
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_SIMPLE_ESCAPES.get(c, c))
        i += 1
    return "".join(out)


#: A raw key: up to the first unescaped `=`, `:` or whitespace (a backslash escapes the next character;
#: a lone one at the end belongs to the key). A regular expression, so a 10 MB key is read at C speed.
_PLAIN = r"[^=:" + _WS + r"\\]*"
_RAW_KEY = re.compile(_PLAIN + r"(?:\\.?" + _PLAIN + ")*", re.S)  # runs of plain characters, then escapes


def _split_key(logical: str) -> tuple[str, str]:
    """Raw (still escaped) key and value of one logical line."""
    m = _RAW_KEY.match(logical)
    i = m.end() if m else 0
    key = logical[:i]
    n = len(logical)
    j = i
    while j < n and logical[j] in _WS:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _WS:
            j += 1
    return key, logical[j:]


def parse_properties(text: str, file: str) -> list[Property]:
    """Every entry in file order (duplicates kept: the caller decides; Java keeps the last)."""
    lines = _natural_lines(text)
    out: list[Property] = []
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _ends_with_continuation(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_WS)
            i += 1
        parts.append(line)
        logical = "".join(parts)
        raw_key, raw_value = _split_key(logical)
        key = _unescape(raw_key, file, start + 1)
        if not key:
            raise PropertiesError(
                file,
                start + 1,
                f"no key before the value {logical.strip()[:40]!r}",
                hint="an entry is `key = value`; escape a leading '=' or ':' in a key as \\= or \\:",
            )
        out.append(Property(key, _unescape(raw_value, file, start + 1), file, start + 1))
    return out


def _escape(text: str, is_key: bool) -> str:
    out = []
    for idx, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!" and (is_key or idx == 0):
            out.append("\\" + c)
        elif c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def format_property(key: str, value: str) -> str:
    """One `key = value` line that `parse_properties` (and Java) reads back as (key, value)."""
    return f"{_escape(key, True)} = {_escape(value, False)}"
