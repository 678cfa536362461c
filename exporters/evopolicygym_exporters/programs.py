"""``programs``: one row per Submission, for the study of how programs evolve.

A row holds the Submission's files, its parent (``outcomes``: the nearest earlier
program of the Run by diff size, the initial program included, ties to the most
recent; the previous Submission, which the Host records, is kept beside it), the
unified diff from the parent, what kind of edit that was, its train evidence, the
matched comparison with the parent (both scores on the indices they share) and
whether it was the best so far (``best_so_far_basis``: on matched evidence or not;
``best_so_far_matched``: on shared indices only). Rows of one program are identical
for the split: they never straddle splits. The edit kind is the kernel's
``evopolicygym.program_edits.edit_kind`` (the analysis dataframes use the same):
``none``, ``cosmetic`` (comments, layout), ``parametric`` (numbers, data files) or
``synthesis`` (new structure, a file added or removed). ``trainer_step`` is the
trainer's step a training Run was made at (null for other Runs).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any, ClassVar

from datasets import Features, List, Value

from evopolicygym.program import Program
from evopolicygym.program_edits import edit_kind
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.history import RunHistory, trainer_step
from evopolicygym_exporters.outcomes import lineage_of

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
    return [
        {"path": path, "content": _text(data), "size": len(data)} for path, data in program.files
    ]


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
    diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in parts
    )
    return diff if len(diff) <= _DIFF_LIMIT else diff[:_DIFF_LIMIT] + "\n[diff truncated]\n"


class ProgramsExporter(Exporter):
    name: ClassVar[str] = "programs"
    summary: ClassVar[str] = (
        "one Submission: its files, its parent (the one the Agent named, else the nearest earlier "
        "program), the diff and edit kind from it, train score, the matched comparison with the "
        "parent and best-so-far"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("text-generation",)
    batch_rows: ClassVar[int] = 128
    version: ClassVar[int] = 3  # 3: trainer_step

    def training_columns(self) -> tuple[str, ...]:
        return ("files", "diff")

    def identity(self, row: dict[str, Any]) -> str | None:
        return str(row["program_digest"])  # one program is one row, wherever it was submitted

    def features(self) -> Features:
        return Features(
            {
                "run_id": Value("string"),
                "benchmark_id": Value("string"),
                "trainer_step": Value("int64"),
                "submission_id": Value("int32"),
                "attempt": Value("int32"),
                "turn": Value("int32"),
                "previous_submission_id": Value("int32"),
                "previous_program_digest": Value("string"),
                "parent_submission_id": Value("int32"),
                "parent_digest": Value("string"),
                "parent_distance": Value("int64"),
                "parent_basis": Value("string"),
                "program_digest": Value("string"),
                "files": PROGRAM_FILES,
                "diff": Value("string"),
                "edit_kind": Value("string"),
                "indices": List(Value("int32")),
                "status": Value("string"),  # published | failed
                "score": Value("float64"),
                "failures": Value("int32"),
                "budget_spent": Value("int64"),
                "budget_used": Value("int64"),
                "matched_indices": List(Value("int32")),
                "matched_score": Value("float64"),
                "parent_matched_score": Value("float64"),
                "matched_delta": Value("float64"),
                "matched_better": Value("bool"),
                "best_so_far": Value("bool"),
                "best_so_far_basis": Value("string"),  # first | matched | unmatched
                "best_so_far_matched": Value("bool"),
                "selected": Value("bool"),
                "score_direction": Value("string"),
                "redacted": Value("bool"),
            }
        )

    def rows(self, run: RunHistory) -> Iterator[Row]:
        group = self.group(run)
        lineage = lineage_of(run, self.program)
        previous = self.program(run.created.initial_program_digest)
        previous_id: int | None = None
        selected = run.finished.final_submission_id
        step = trainer_step(run.created.agent)
        for submission in run.submissions:
            program = self.program(submission.program_digest)
            outcome = lineage.outcomes[submission.submission_id]
            parent = self.program(outcome.parent_digest)
            row = {
                "run_id": run.run_id,
                "benchmark_id": run.created.benchmark_id,
                "trainer_step": step,
                "submission_id": submission.submission_id,
                "attempt": outcome.attempt,
                "turn": outcome.turn,
                "previous_submission_id": previous_id,
                "previous_program_digest": previous.digest,
                "parent_submission_id": outcome.parent_submission_id,
                "parent_digest": outcome.parent_digest,
                "parent_distance": outcome.parent_distance,
                "parent_basis": outcome.parent_basis,
                "program_digest": program.digest,
                "files": file_rows(program),
                "diff": program_diff(parent, program),
                "edit_kind": edit_kind(parent, program),
                "indices": submission.indices,
                "status": outcome.status,
                "score": outcome.score,
                "failures": outcome.failures,
                "budget_spent": outcome.budget_spent,
                "budget_used": outcome.budget_used,
                "matched_indices": outcome.matched_indices,
                "matched_score": outcome.matched_score,
                "parent_matched_score": outcome.parent_matched_score,
                "matched_delta": outcome.matched_delta,
                "matched_better": outcome.matched_better,
                "best_so_far": outcome.best_so_far,
                "best_so_far_basis": outcome.best_so_far_basis,
                "best_so_far_matched": outcome.best_so_far_matched,
                "selected": submission.submission_id == selected,
                "score_direction": run.direction,
            }
            yield group, row
            previous, previous_id = program, submission.submission_id
        self.forget()
