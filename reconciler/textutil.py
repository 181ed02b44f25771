"""Wording shared by every output a person reads: one pluralisation rule ("1 flow", "2 flows")."""

from __future__ import annotations

_IRREGULAR = {"policy": "policies", "this": "these", "is": "are", "was": "were"}


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural unless n is 1: plural(1, "flow") == "1 flow"; thousands grouped."""
    if n == 1:
        return f"1 {word}"
    return f"{n:,} {many or _IRREGULAR.get(word) or (word + 'es' if word.endswith(('s', 'x', 'ch', 'sh')) else word + 's')}"
