"""The Episode selector grammar of ``session submit --episodes``.

``3`` (one index), ``0:4`` (half-open range), ``0:2,4:8`` (comma-separated
parts, strictly increasing and non-overlapping). Pure: the decider checks the
indices against the pool and the limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["SelectorError", "format_selector", "parse_selector"]

_PART = re.compile(r"(\d{1,9})(?::(\d{1,9}))?", re.ASCII)  # ASCII digits only
MAX_SELECTOR_CHARS = 1000


class SelectorError(ValueError):
    """A selector that does not follow the grammar; the message says where."""


def parse_selector(text: str) -> list[int]:
    """The pool indices ``text`` names, in increasing order."""
    if len(text) > MAX_SELECTOR_CHARS:
        raise SelectorError(f"selector is longer than {MAX_SELECTOR_CHARS} characters")
    if not text.strip():
        raise SelectorError("empty selector: use an index (3), a range (0:4) or ranges (0:2,4:8)")
    indices: list[int] = []
    for part in text.split(","):
        match = _PART.fullmatch(part.strip())
        if match is None:
            raise SelectorError(
                f"bad selector part {part.strip()!r}: use an index (3) or a half-open range (0:4)"
            )
        start = int(match.group(1))
        stop = start + 1 if match.group(2) is None else int(match.group(2))
        if stop <= start:
            raise SelectorError(f"empty range {part.strip()!r}: the end must exceed the start")
        if indices and start <= indices[-1]:
            raise SelectorError(
                f"selector parts must be strictly increasing and not overlap ({part.strip()!r})"
            )
        if stop - start > 1_000_000 or len(indices) + stop - start > 1_000_000:
            raise SelectorError("selector names more than 1,000,000 Episodes")
        indices.extend(range(start, stop))
    return indices


def format_selector(indices: Sequence[int]) -> str:
    """The shortest selector naming ``indices`` (sorted, distinct; consecutive runs as ranges)."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}:{ordered[j] + 1}")
        i = j + 1
    return ",".join(parts)
