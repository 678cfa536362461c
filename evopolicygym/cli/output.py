"""What commands print: one-line text, terminal-safe strings, JSON."""

from __future__ import annotations

from typing import Any

import click
import msgspec

__all__ = ["emit_json", "one_line", "printable"]


def one_line(text: str) -> str:
    return " ".join(text.split())


# C0 controls (but tab and newline), DEL and C1, as \xNN: a terminal would act on them.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}
# The same with tab and newline too: a table cell is one line.
_CONTROL_IN_CELL = {**_CONTROL, 0x09: "\\x09", 0x0A: "\\x0a"}


def printable(text: str, *, cell: bool = False) -> str:
    """``text`` with terminal control characters escaped: recorded strings (a policy's
    output, an error message) are untrusted and must not drive the user's terminal."""
    return text.translate(_CONTROL_IN_CELL if cell else _CONTROL)


def emit_json(value: Any) -> None:
    click.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())
