"""``programs``: one row per Submission, for the study of how programs evolve.

A row holds the Submission's files, a unified diff to the previous Submission
of the Run (the initial program for the first), what kind of edit that was,
its train evidence and whether it was the best so far. The edit kind compares
the programs' Python syntax trees with numeric constants blanked out: equal
trees mean only numbers moved (``parametric``), a different tree, or a file
added or removed, is new structure (``synthesis``); equal trees before
blanking mean only comments or layout changed (``cosmetic``), and an identical
program is ``none``. Non-Python files changing alone count as parametric
(weights, tables).
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator
from typing import Any, ClassVar

from datasets import Features, List, Value

from evopolicygym.program import Program
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.history import RunHistory

__all__ = ["PROGRAM_FILES", "ProgramsExporter", "edit_kind", "file_rows", "program_diff"]

PROGRAM_FILES = List(
    {
        "path": Value("string"),
        "content": Value("string"),  # None for a file that is not UTF-8 text
        "size": Value("int64"),
    }
)
_DIFF_LIMIT = 1024 * 1024  # characters of diff kept per row; the files are whole anyway


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_rows(program: Program) -> list[dict[str, Any]]:
    return [{"path": path, "content": _text(data), "size": len(data)} for path, data in program.files]


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


def _lines(text: str) -> list[str]:
    """Lines split at newlines only (``splitlines`` also splits at form feeds and more)."""
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def program_diff(before: Program, after: Program) -> str:
    """A unified diff of every text file; binary files are named, not shown."""
    old, new = dict(before.files), dict(after.files)
    parts: list[str] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        ta, tb = _text(a or b""), _text(b or b"")
        if ta is None or tb is None:
            parts.append(f"Binary file {path} differs\n")
            continue
        parts.extend(
            difflib.unified_diff(
                _lines(ta),
                _lines(tb),
                fromfile="/dev/null" if a is None else f"a/{path}",
                tofile="/dev/null" if b is None else f"b/{path}",
            )
        )
    diff = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in parts)
    return diff if len(diff) <= _DIFF_LIMIT else diff[:_DIFF_LIMIT] + "\n[diff truncated]\n"


class ProgramsExporter(Exporter):
    name: ClassVar[str] = "programs"
    summary: ClassVar[str] = (
        "one Submission: its files, the diff to the previous Submission, the edit kind, "
        "train score and whether it was the best so far"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("text-generation",)
    batch_rows: ClassVar[int] = 128

    def training_columns(self) -> tuple[str, ...]:
        return ("files", "diff")

    def features(self) -> Features:
        return Features(
            {
                "run_id": Value("string"),
                "benchmark_id": Value("string"),
                "submission_id": Value("int32"),
                "previous_submission_id": Value("int32"),
                "program_digest": Value("string"),
                "previous_program_digest": Value("string"),
                "files": PROGRAM_FILES,
                "diff": Value("string"),
                "edit_kind": Value("string"),
                "indices": List(Value("int32")),
                "status": Value("string"),  # published | failed
                "score": Value("float64"),
                "failures": Value("int32"),
                "budget_used": Value("int64"),
                "best_so_far": Value("bool"),
                "selected": Value("bool"),
                "score_direction": Value("string"),
            }
        )

    def rows(self, run: RunHistory) -> Iterator[Row]:
        previous = self.program(run.created.initial_program_digest)
        previous_id: int | None = None
        best: float | None = None
        selected = run.finished.final_submission_id
        for submission in run.submissions:
            program = self.program(submission.program_digest)
            score = submission.score
            new_best = run.better(score, best)
            if new_best:
                best = score
            failures = (
                submission.summary.failures
                if submission.published
                else sum(e.status != "ok" for e in submission.episodes)
            )
            row = {
                "run_id": run.run_id,
                "benchmark_id": run.created.benchmark_id,
                "submission_id": submission.submission_id,
                "previous_submission_id": previous_id,
                "program_digest": program.digest,
                "previous_program_digest": previous.digest,
                "files": file_rows(program),
                "diff": program_diff(previous, program),
                "edit_kind": edit_kind(previous, program),
                "indices": submission.indices,
                "status": "published" if submission.published else "failed",
                "score": score,
                "failures": failures,
                "budget_used": submission.budget_used,
                "best_so_far": new_best,
                "selected": submission.submission_id == selected,
                "score_direction": run.direction,
            }
            yield run.run_id, row
            previous, previous_id = program, submission.submission_id
        self.forget()
