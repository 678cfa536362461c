"""What commands print: one-line text, terminal-safe strings, values for people, tables
that fit the terminal, JSON."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click
import msgspec

if TYPE_CHECKING:  # rich is imported when a table is printed: `evopolicy --help` needs none of it
    from rich.console import Console
    from rich.text import Text

__all__ = [
    "clip",
    "emit_json",
    "flatten",
    "human",
    "human_block",
    "one_line",
    "print_table",
    "printable",
]


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


# --------------------------------------------------------------------------- values for people


def human(value: Any, limit: int | None = None) -> str:
    """``value`` as a person reads it: ``-`` for nothing, yes/no, floats to 6 significant
    digits, lists and mappings by their values (never a Python repr); cut with "…" past
    ``limit`` characters."""
    text = _human(value)
    return clip(text, limit) if limit is not None else text


def _human(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "infinity" if value > 0 else "-infinity"
        return f"{value:.6g}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {_human(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_human(item) for item in value) + "]"
    return str(value)


def human_block(value: Any, inline: int = 60) -> str:
    """``human(value)``, but a mapping whose one line would pass ``inline`` characters as
    one ``key: value`` line per entry."""
    if isinstance(value, Mapping) and len(_human(value)) > inline:
        return "\n".join(f"{key}: {_human(item)}" for key, item in value.items())
    return _human(value)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with "…"."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The leaves of nested mappings as (dotted key, value), in order."""
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


# --------------------------------------------------------------------------- tables that fit

WORD_CAP = 12  # a longer word (a path, a digest, JSON) may be folded in a narrow column


def print_table(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[str | Text]],
    *,
    keys: Collection[int] = (0,),
) -> None:
    """Print ``rows`` under ``headers`` in the console's width.

    The columns at ``keys`` are identifiers, printed whole on one line; the others wrap
    between words (a word folds only past ``WORD_CAP`` characters) and never narrower than
    their header's longest word. When that does not fit, one block per row (``column
    value`` lines) instead. Strings are plain text (no markup); escape control characters
    with ``printable`` first where a value is untrusted."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    cells = [[_as_text(cell) for cell in row] for row in rows]
    natural = [
        max([_widest_line(header), *(_widest_line(row[i].plain) for row in cells)])
        for i, header in enumerate(headers)
    ]
    least = [
        natural[i]
        if i in keys
        else min(
            natural[i],
            max(
                [
                    _longest_word(header),
                    *(min(_longest_word(row[i].plain), WORD_CAP) for row in cells),
                ]
            ),
        )
        for i, header in enumerate(headers)
    ]
    room = console.width - 3 * (len(headers) - 1)  # " │ " between columns, nothing outside
    if sum(least) > room:
        _print_vertical(console, headers, cells)
        return
    widths = natural if sum(natural) <= room else _share(least, natural, room)
    # No outer frame: a value copied from the table takes no rule characters with it.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, (header, width) in enumerate(zip(headers, widths, strict=True)):
        table.add_column(Text(header), width=width, no_wrap=i in keys, overflow="fold")
    for row in cells:
        table.add_row(*row)
    console.print(table)


def _print_vertical(console: Console, headers: Sequence[str], cells: list[list[Text]]) -> None:
    """One block per row, a line per column (``column  value``, the value wrapped beside it)."""
    from rich.cells import cell_len
    from rich.text import Text

    name_width = max(cell_len(header) for header in headers)
    value_width = max(console.width - name_width - 2, 8)
    for index, row in enumerate(cells):
        if index:
            console.print()
        for header, cell in zip(headers, row, strict=True):
            lines = cell.wrap(console, value_width, overflow="fold") if cell.plain else [Text("")]
            for number, line in enumerate(lines):
                name = header if number == 0 else ""
                line.rstrip()
                out = Text(name.ljust(name_width), style="bold" if name else "")
                out.append("  ")
                out.append_text(line)
                out.rstrip()
                console.print(out, no_wrap=True, overflow="ignore", crop=False, soft_wrap=True)


def _share(least: list[int], natural: list[int], room: int) -> list[int]:
    """Widths from ``least`` towards ``natural``, the spare ``room`` shared by what each lacks."""
    spare = room - sum(least)
    lacking = [n - m for m, n in zip(least, natural, strict=True)]
    total = sum(lacking)
    widths = [m + spare * lack // total for m, lack in zip(least, lacking, strict=True)]
    for i in sorted(range(len(widths)), key=lambda i: lacking[i], reverse=True):
        if sum(widths) >= room:
            break
        if widths[i] < natural[i]:
            widths[i] += 1
    return widths


def _as_text(cell: str | Text) -> Text:
    from rich.text import Text

    return cell if isinstance(cell, Text) else Text(printable(cell))


def _widest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines()), default=0)


def _longest_word(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(word) for word in text.split()), default=0)
