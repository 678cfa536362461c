"""Numeric constants of a policy program, and telling edit kinds apart.

Owns the **parametric** edit: finding a program's tunable float literals with ``ast``
(ints are left alone, since in a policy they are usually actions, indices or counts),
setting them, and perturbing a few of them with Gaussian steps that ``apply_step`` can
replay. Also ``classify_edit``, which compares ASTs with numeric literals stripped, and
``detect_template``, which reads the ``TEMPLATE`` name a generated program declares.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FLOOR_FRACTION",
    "FROZEN_NAMES",
    "EditKind",
    "NumericConstant",
    "apply_step",
    "classify_edit",
    "detect_template",
    "find_constants",
    "format_number",
    "mutate_constants",
    "replace_constants",
    "sparse_rate",
    "strip_constants",
]

EditKind = Literal["synthesis", "parametric", "none"]

# Module-level names whose constants describe the spaces rather than the rule: never tuned.
FROZEN_NAMES = frozenset({"OBS_SCALE", "OBS_START", "ACTION_START", "ACTION_LOW", "ACTION_HIGH"})
# A constant smaller than this fraction of the largest one is perturbed as if it were that
# large: a weight at 0.0 must be able to become as important as the others.
FLOOR_FRACTION = 1.0


@dataclass(frozen=True, slots=True)
class NumericConstant:
    """A tunable float literal, with its source span (1-based lines, byte columns)."""

    value: float
    lineno: int
    col: int
    end_lineno: int
    end_col: int


def _number(node: ast.AST) -> float | int | None:
    """The value of a numeric literal, with a leading unary minus/plus folded in."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value: float | int = node.value  # type: ignore[assignment]
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _frozen_nodes(tree: ast.AST, frozen_names: frozenset[str]) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        value: ast.expr | None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if value is not None and any(
            isinstance(t, ast.Name) and t.id in frozen_names for t in targets
        ):
            skipped.update(id(n) for n in ast.walk(value))
    return skipped


def find_constants(
    source: str, *, frozen_names: frozenset[str] = FROZEN_NAMES
) -> list[NumericConstant]:
    """Tunable float literals of ``source`` in source order (``-0.5`` counts as one)."""
    tree = ast.parse(source)
    skipped = _frozen_nodes(tree, frozen_names)
    found: list[NumericConstant] = []
    inside_negation: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in skipped or id(node) in inside_negation:
            continue
        value = _number(node)
        if not isinstance(value, float):
            continue
        if isinstance(node, ast.UnaryOp):
            inside_negation.update(id(n) for n in ast.walk(node.operand))
        assert isinstance(node, ast.expr)  # only expressions are numbers
        assert node.end_lineno is not None and node.end_col_offset is not None
        found.append(
            NumericConstant(
                value=float(value),
                lineno=node.lineno,
                col=node.col_offset,
                end_lineno=node.end_lineno,
                end_col=node.end_col_offset,
            )
        )
    found.sort(key=lambda c: (c.lineno, c.col))
    return found


def format_number(value: float) -> str:
    """A readable float literal: four significant digits, always a float (``2.0`` not ``2``)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    text = repr(float(f"{value:.4g}"))
    return "0.0" if text == "-0.0" else text


def replace_constants(
    source: str, values: Mapping[int, float], *, frozen_names: frozenset[str] = FROZEN_NAMES
) -> str:
    """``source`` with the i-th tunable constant (as ``find_constants`` lists them) set to
    ``values[i]``; the rest of the text (comments, layout) is kept as it is."""
    constants = find_constants(source, frozen_names=frozen_names)
    lines = source.encode("utf-8").splitlines(keepends=True)
    # Right to left, so earlier spans keep their byte offsets.
    for index in sorted(
        values, key=lambda i: (constants[i].lineno, constants[i].col), reverse=True
    ):
        constant = constants[index]
        text = format_number(values[index])
        start, end = constant.lineno - 1, constant.end_lineno - 1
        head = lines[start][: constant.col]
        if text.startswith("-") and head.rstrip()[-1:] in (b"+", b"-", b"*", b"/", b"%", b"@"):
            text = f"({text})"  # "x - -0.5" parses, but reads badly
        tail = lines[end][constant.end_col :]
        lines[start : end + 1] = [head + text.encode("utf-8") + tail]
    return b"".join(lines).decode("utf-8")


def mutate_constants(
    source: str,
    rng: random.Random,
    sigma: float,
    *,
    frozen_names: frozenset[str] = FROZEN_NAMES,
) -> tuple[str, dict[int, float]]:
    """Gaussian perturbation of a few tunable constants, each scaled to its own magnitude
    (at least ``FLOOR_FRACTION`` of the largest, so a weight at 0.0 can still move).

    Returns the new source and the step taken (constant index -> delta), which
    ``apply_step`` can replay, mirrored or not.
    """
    constants = find_constants(source, frozen_names=frozen_names)
    if not constants:
        return source, {}
    largest = max(abs(c.value) for c in constants) or 1.0
    floor = FLOOR_FRACTION * largest
    n = len(constants)
    rate = sparse_rate(n)
    indices = [i for i in range(n) if rng.random() < rate] or [rng.randrange(n)]
    step = {i: sigma * max(abs(constants[i].value), floor) * rng.gauss(0.0, 1.0) for i in indices}
    return apply_step(source, step, frozen_names=frozen_names), step


def sparse_rate(n: int) -> float:
    """About max(1, sqrt(n)/2) of n parameters move per step: a few coordinates at a time,
    so one good move is not drowned by harmful moves of the others."""
    return min(1.0, max(1.0, math.sqrt(n) / 2) / max(n, 1))


def apply_step(
    source: str,
    step: Mapping[int, float],
    sign: float = 1.0,
    *,
    frozen_names: frozenset[str] = FROZEN_NAMES,
) -> str:
    """``source`` with ``sign * step[i]`` added to its i-th tunable constant."""
    constants = find_constants(source, frozen_names=frozen_names)
    values = {
        i: constants[i].value + sign * delta for i, delta in step.items() if i < len(constants)
    }
    return replace_constants(source, values, frozen_names=frozen_names)


class _StripNumbers(ast.NodeTransformer):
    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if _number(node) is not None:
            return ast.Constant(value=0)
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) in (int, float, complex):
            return ast.Constant(value=0)
        return node


def strip_constants(source: str) -> str:
    """An AST dump of ``source`` with every numeric literal replaced by ``0``."""
    tree = _StripNumbers().visit(ast.parse(source))
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def classify_edit(before: str, after: str) -> EditKind:
    """``parametric`` when only numeric literals changed, ``synthesis`` when the structure
    did, ``none`` when the ASTs are the same (comments and layout do not count)."""
    if strip_constants(before) != strip_constants(after):
        return "synthesis"
    dump = lambda s: ast.dump(ast.parse(s), include_attributes=False)  # noqa: E731
    return "none" if dump(before) == dump(after) else "parametric"


def detect_template(source: str) -> str | None:
    """The template a program was generated from (its module-level ``TEMPLATE`` string)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "TEMPLATE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None
