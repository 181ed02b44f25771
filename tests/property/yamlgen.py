"""A small YAML writer for generated inputs: what yaml.dump cannot write on purpose.

Trees are plain Python values plus
  * `Pairs`: a mapping as a list of (key, value), so keys may repeat or be a bool, an int or None;
  * `Raw`: text written as it is where a value goes (a tag, an alias, a 10,000-deep flow list).
Block style, two spaces a level, every string double-quoted (JSON escapes are YAML escapes), so a
generated document has one value per line and errors have lines to point at.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Raw:
    text: str


@dataclass(frozen=True)
class Pairs:
    items: tuple[tuple[Any, Any], ...]


def scalar(value: Any, ascii_only: bool = True) -> str:
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    return json.dumps(str(value), ensure_ascii=ascii_only)


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def key(k: Any) -> str:
    """A mapping key: plain where YAML reads it back as the same string, else as `scalar`."""
    if isinstance(k, str) and _PLAIN_KEY.fullmatch(k) and k.lower() not in _YAML_WORDS:
        return k
    return scalar(k)


def _items(node: Any) -> tuple[tuple[Any, Any], ...] | None:
    if isinstance(node, Pairs):
        return node.items
    if isinstance(node, dict):
        return tuple(node.items())
    return None


def _lines(node: Any, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    items = _items(node)
    if items is not None:
        if not items:
            out[-1] += " {}"
            return
        for k, v in items:
            out.append(f"{pad}{key(k)}:")
            _lines(v, indent + 1, out)
        return
    if isinstance(node, list | tuple):
        if not node:
            out[-1] += " []"
            return
        for v in node:
            out.append(f"{pad}-")
            _lines(v, indent + 1, out)
        return
    out[-1] += " " + scalar(node)


def dump(tree: Any) -> str:
    """The YAML text of `tree` (a mapping or a list at the top; anything else is one scalar)."""
    if _items(tree) == ():
        return "{}\n"
    if isinstance(tree, list | tuple) and not tree:
        return "[]\n"
    if _items(tree) is None and not isinstance(tree, list | tuple):
        return scalar(tree) + "\n"
    out = [""]
    _lines(tree, 0, out)
    return "\n".join(out[1:]) + "\n"
