"""How one Program was edited into another: the edit's kind, its size, and the parent.

One definition for every reader (the ``programs`` and ``sft`` exports, the analysis
dataframes), so an edit's kind and a Submission's parent mean the same everywhere.

- ``edit_kind(before, after)`` compares the programs' Python syntax trees with numeric
  constants blanked out: equal trees mean only numbers moved (``parametric``), a
  different tree, or a file added or removed, is new structure (``synthesis``); equal
  trees before blanking mean only comments or layout changed (``cosmetic``), and an
  identical program is ``none``. Non-Python files changing alone count as parametric
  (weights, tables).
- ``program_distance(before, after)``: lines added plus lines removed, over every file
  (a file added or removed counts its lines).
- ``nearest_parent``: the **parent** of a program the Agent did not name one for is the
  earlier program with the smallest distance to it, ties going to the most recent (an
  identical earlier program is therefore always the parent). A parent the Agent names
  (``session submit --parent``, recorded as the Submission's ``parent_submission_id``)
  is taken as it is instead.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Sequence
from typing import TypeVar

from evopolicygym.program import Program

__all__ = [
    "EDIT_KINDS",
    "Lines",
    "edit_kind",
    "file_lines",
    "lines_distance",
    "nearest_parent",
    "program_distance",
]

EDIT_KINDS = ("none", "cosmetic", "parametric", "synthesis")  # from no change to new structure

Lines = dict[str, list[str]]
K = TypeVar("K")


# --------------------------------------------------------------------------- edit kind


def _numeric(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float | complex)
        and not isinstance(node.value, bool)
    )


class _Blank(ast.NodeTransformer):
    """Numeric constants (and their signs) become one placeholder: a name no source can
    spell, so it equals no real constant or name."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return _placeholder() if _numeric(node) else node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.USub | ast.UAdd) and _numeric(node.operand):
            return _placeholder()
        return self.generic_visit(node)


def _placeholder() -> ast.AST:
    return ast.Name(id="<number>", ctx=ast.Load())


def _shapes(path: str, data: bytes) -> tuple[str | bytes, str | bytes]:
    """A file's syntax tree, and the same with numbers blanked (its structure). Data files
    carry parameters only; text that is not Python we can read is all structure."""
    if not path.endswith(".py"):
        return data, b""
    try:
        tree = ast.parse(data)
        return ast.dump(tree), ast.dump(_Blank().visit(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # deep nesting, bad bytes
        return data, data


def edit_kind(before: Program, after: Program) -> str:
    """``none`` (same program), ``cosmetic`` (comments, layout), ``parametric`` (numbers, data
    files) or ``synthesis`` (new structure, a file added or removed)."""
    if before.digest == after.digest:
        return "none"
    old, new = dict(before.files), dict(after.files)
    if old.keys() != new.keys():
        return "synthesis"
    kind = "cosmetic"
    for path, data in new.items():
        if data == old[path]:
            continue
        (tree_a, shape_a), (tree_b, shape_b) = _shapes(path, old[path]), _shapes(path, data)
        if shape_a != shape_b:
            return "synthesis"
        if tree_a != tree_b:
            kind = "parametric"
    return kind


# --------------------------------------------------------------------------- edit size


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "surrogateescape")
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def file_lines(program: Program) -> Lines:
    """Each file's lines (split at newlines only), the form the distances compare."""
    return {path: _lines(data) for path, data in program.files}


def program_distance(before: Program, after: Program) -> int:
    """Lines added plus lines removed from ``before`` to ``after``, over every file."""
    return lines_distance(file_lines(before), file_lines(after))


def _lower_bound(old: Lines, new: Lines) -> int:
    """A bound no diff of the two can be under: the difference in line counts per file."""
    total = 0
    for path in old.keys() | new.keys():
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            total += max(1, len(a or b or ()))
        else:
            total += abs(len(a) - len(b))
    return total


def lines_distance(
    old: Lines, new: Lines, matchers: dict[str, difflib.SequenceMatcher[str]] | None = None
) -> int:
    """``program_distance`` of two programs' ``file_lines``; ``matchers`` keeps the analysis
    of ``new``'s files for comparing it with several ``old`` ones."""
    matchers = {} if matchers is None else matchers
    total = 0
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            total += max(1, len(a or b or ()))
            continue
        if a == b:
            continue
        matcher = matchers.get(path)
        if matcher is None:  # the new program's side is analysed once per file
            matcher = matchers[path] = difflib.SequenceMatcher(None, b=b)
        matcher.set_seq1(a)
        total += sum(
            (i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
        )
    return total


# --------------------------------------------------------------------------- the parent


def nearest_parent(
    earlier: Sequence[tuple[K, str]], digest: str, lines_of: Callable[[str], Lines]
) -> tuple[K, str, int]:
    """Of ``earlier`` programs (``(key, digest)``, oldest first, at least one), the one the
    program ``digest`` most likely was edited from: the smallest ``program_distance``,
    ties to the most recent. Returns its key, digest and the distance. ``lines_of`` gives
    a program's ``file_lines`` by digest (a caller caches them across Submissions)."""
    new = lines_of(digest)
    matchers: dict[str, difflib.SequenceMatcher[str]] = {}
    best: tuple[K, str, int] | None = None
    known: dict[str, int] = {}
    for candidate, other in reversed(earlier):  # the most recent first: it wins ties
        if other == digest:
            return candidate, other, 0
        distance = known.get(other)
        if distance is None:
            old = lines_of(other)
            if best is not None and _lower_bound(old, new) >= best[2]:
                continue  # cannot be strictly nearer than the more recent one found
            distance = known[other] = lines_distance(old, new, matchers)
        if best is None or distance < best[2]:
            best = (candidate, other, distance)
    if best is None:
        raise ValueError("nearest_parent needs at least one earlier program")
    return best
