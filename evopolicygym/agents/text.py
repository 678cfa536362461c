"""Text helpers the built-in agents share: a JSON object read from text, a one-line excerpt.

Session replies, feedback files and model API bodies all arrive as text that should hold a
JSON object; the agents read each the same forgiving way (``None`` when it does not).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["json_object", "one_line"]


def json_object(text: str | None) -> dict[str, Any] | None:
    """``text`` as a JSON object, or ``None`` when it is missing, not JSON or not an object."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def one_line(text: str, limit: int = 500) -> str:
    """``text`` with its whitespace collapsed to single spaces, cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
