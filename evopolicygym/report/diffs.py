"""Unified diffs between two Programs, as the diff viewer shows them.

Programs arrive as ``{path: bytes}`` (a Program's files); text files are compared line by
line, binary ones named. ``redact`` is applied to the diff text before it is escaped, so a
credential in a program reads as the exports show it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

from evopolicygym.report.html import esc

__all__ = ["DIFF_LIMIT", "diff_lines", "diff_markup", "program_diff"]

DIFF_LIMIT = 200_000  # characters of one diff kept in the page (the record keeps it all)


def _text(data: bytes) -> list[str] | None:
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def program_diff(
    before: Mapping[str, bytes], after: Mapping[str, bytes], before_label: str, after_label: str
) -> str:
    """A unified diff of every file of two Programs (empty: the same files)."""
    parts: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        old_lines = _text(old) if old is not None else []
        new_lines = _text(new) if new is not None else []
        if old_lines is None or new_lines is None:
            parts.append(f"Binary file {path} differs\n")
            continue
        for line in difflib.unified_diff(
            old_lines,
            new_lines,
            f"{before_label}/{path}" if old is not None else "/dev/null",
            f"{after_label}/{path}" if new is not None else "/dev/null",
        ):
            parts.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(parts)


def diff_lines(diff: str, redact: Callable[[str], str]) -> list[tuple[str, str]]:
    """The diff's lines, redacted and held to ``DIFF_LIMIT`` characters, each with its kind:
    ``hunk`` (file and hunk headers), ``add``, ``del`` or ``ctx``. Text, never markup."""
    diff = redact(diff)
    if len(diff) > DIFF_LIMIT:
        diff = diff[:DIFF_LIMIT] + f"\n[diff truncated at {DIFF_LIMIT:,} characters]\n"
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "@@")):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        lines.append((kind, line))
    return lines


_CLASSES = {"hunk": "h", "add": "a", "del": "d"}


def diff_markup(diff: str, redact: Callable[[str], str]) -> str:
    """The diff's lines escaped, each marked as added, deleted or a hunk header."""
    return "".join(
        f'<span class="{_CLASSES[kind]}">{esc(line)}</span>'
        if kind in _CLASSES
        else esc(line) + "\n"
        for kind, line in diff_lines(diff, redact)
    )
