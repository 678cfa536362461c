"""Each Submission's outcome: its parent, its matched comparison with it, and the turn
that made it.

The **parent** is the program the edit started from. An Agent may say which
(``evopolicy session submit --parent ID``; the Host records it as the Submission's
``parent_submission_id``): then that one (``parent_basis`` ``stated``). Otherwise it is
the program the edit most likely started from (``nearest``): of the initial program and
every earlier Submission's program, the one with the smallest diff to it (lines added
plus lines removed, over every file; a file added or removed counts its lines), ties
going to the most recent (an identical earlier program is therefore always the parent;
``evopolicygym.program_edits.nearest_parent``, which the analysis dataframes share);
the previous Submission, which is what the Host records otherwise, is often not what an
agent that keeps its best and tries variations of it edited.

Scores compare only on **matched** evidence: the same pool indices. A Submission and
its parent are compared on the indices both were evaluated on (``matched_indices``):
their published scores when they ran on the same indices, else each one's mean
per-Episode score over the shared indices, where its published score is the mean of
its per-Episode scores (a failed Episode scoring the Benchmark's failure score), which
is how Gymnasium Benchmarks score. Where they share no index, or the Benchmark scores
otherwise, there is no matched comparison (null). The initial program has no train
evidence unless it was submitted, in which case that Submission is the parent.

``best_so_far`` compares a published score with every earlier one, on whatever indices
each ran (``best_so_far_basis`` says ``matched`` only when all ran on the same indices);
``best_so_far_matched`` compares with the earlier published Submissions that share
indices with it, on those indices only.

The fold itself is ``evopolicygym.lineage`` (the analysis dataframes use the same one);
this module adds what an export's rows carry beside it: failures, budget and the turn.

A Submission is joined to the assistant turn that asked for it: the last assistant
message of its Agent attempt recorded before the request (the Host records the tool
call that made a session request before the request's events). ``turn`` counts the
attempt's assistant messages from 0, as ``--per-turn`` rows do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evopolicygym.lineage import LineageInput, lineage
from evopolicygym.program import Program
from evopolicygym.program_edits import Lines, file_lines, program_distance
from evopolicygym_exporters.history import RunHistory, SubmissionHistory

__all__ = ["Lineage", "Outcome", "lineage_of", "program_distance"]


@dataclass(frozen=True)
class Outcome:
    """One Submission's labels: what it scored, against its parent on matched indices,
    what it cost, and the turn that made it."""

    submission_id: int
    program_digest: str
    status: str  # published | failed
    indices: list[int]
    score: float | None  # published train score
    failures: int
    budget_spent: int  # Episodes this Submission was charged
    budget_used: int  # the Run's, after it
    parent_submission_id: int | None  # None: the initial program
    parent_digest: str
    parent_distance: int  # lines changed from the parent
    parent_basis: str  # stated (the Agent named it) or nearest (the smallest diff)
    matched_indices: list[int]
    matched_score: float | None
    parent_matched_score: float | None
    matched_delta: float | None  # matched_score - parent_matched_score
    matched_better: bool | None  # beats the parent on matched_indices (Benchmark's direction)
    best_so_far: bool
    best_so_far_basis: str | None  # first | matched | unmatched; None when not published
    best_so_far_matched: bool | None
    attempt: int
    turn: int | None  # the attempt's assistant turn that asked for it (from 0)

    def labels(self) -> dict[str, object]:
        """The per-Submission outcome labels as ``sft`` rows carry them."""
        return {
            "submission_id": self.submission_id,
            "turn": self.turn,
            "program_digest": self.program_digest,
            "status": self.status,
            "score": self.score,
            "failures": self.failures,
            "budget_spent": self.budget_spent,
            "budget_used": self.budget_used,
            "parent_submission_id": self.parent_submission_id,
            "parent_digest": self.parent_digest,
            "parent_basis": self.parent_basis,
            "matched_indices": self.matched_indices,
            "matched_score": self.matched_score,
            "parent_matched_score": self.parent_matched_score,
            "matched_delta": self.matched_delta,
            "matched_better": self.matched_better,
        }


@dataclass(frozen=True)
class Lineage:
    outcomes: dict[int, Outcome]  # by Submission id, in Submission order

    def by_turn(self, attempt: int) -> dict[int, list[Outcome]]:
        """The attempt's Submissions by the turn that asked for them."""
        found: dict[int, list[Outcome]] = {}
        for outcome in self.outcomes.values():
            if outcome.attempt == attempt and outcome.turn is not None:
                found.setdefault(outcome.turn, []).append(outcome)
        return found


def lineage_of(run: RunHistory, program: Callable[[str], Program]) -> Lineage:
    """The Run's lineage (computed once per history; ``program`` loads a Program by digest)."""
    if run.lineage is None:
        run.lineage = _Builder(run, program).build()
    assert isinstance(run.lineage, Lineage)
    return run.lineage


# --------------------------------------------------------------------------- the fold


class _Builder:
    def __init__(self, run: RunHistory, program: Callable[[str], Program]) -> None:
        self.run = run
        self.program = program
        self.lines: dict[str, Lines] = {}
        spec = run.created.benchmark_spec or {}
        floor = spec.get("failure_score")
        self.floor = (
            float(floor) if isinstance(floor, int | float) and not isinstance(floor, bool) else None
        )

    def _lines_of(self, digest: str) -> Lines:
        found = self.lines.get(digest)
        if found is None:
            found = self.lines[digest] = file_lines(self.program(digest))
        return found

    def _turn(self, submission: SubmissionHistory) -> int | None:
        transcript = self.run.transcripts.get(submission.attempt) or []
        mark = min(submission.transcript_mark, len(transcript))
        for i in range(mark - 1, -1, -1):
            if transcript[i].role == "assistant":
                return sum(1 for m in transcript[:i] if m.role == "assistant")
        return None

    def build(self) -> Lineage:
        run = self.run
        edges = lineage(
            run.created.initial_program_digest,
            [
                LineageInput(
                    submission_id=s.submission_id,
                    program_digest=s.program_digest,
                    indices=s.indices,
                    published=s.published,
                    score=s.score,
                    stated_parent=s.summary.parent_submission_id,
                    episodes=[(e.index, e.status == "ok", e.total_reward) for e in s.episodes],
                )
                for s in run.submissions
            ],
            direction=run.direction,
            failure_score=self.floor,
            lines_of=self._lines_of,
        )
        outcomes: dict[int, Outcome] = {}
        for submission in run.submissions:
            edge = edges[submission.submission_id]
            mine, theirs = edge.matched_score, edge.parent_matched_score
            failures = (
                submission.summary.failures or 0
                if submission.published
                else sum(e.status != "ok" for e in submission.episodes)
            )
            spent = submission.summary.budget_reserved or 0
            if not submission.published and submission.summary.budget_consumed is not None:
                spent = submission.summary.budget_consumed
            outcomes[submission.submission_id] = Outcome(
                submission_id=submission.submission_id,
                program_digest=submission.program_digest,
                status="published" if submission.published else "failed",
                indices=list(submission.indices),
                score=submission.score,
                failures=failures,
                budget_spent=spent,
                budget_used=submission.budget_used,
                parent_submission_id=edge.parent_submission_id,
                parent_digest=edge.parent_digest,
                parent_distance=edge.parent_distance,
                parent_basis=edge.parent_basis,
                matched_indices=edge.matched_indices,
                matched_score=mine,
                parent_matched_score=theirs,
                matched_delta=None if mine is None or theirs is None else mine - theirs,
                matched_better=edge.beats_parent,
                best_so_far=edge.best_so_far,
                best_so_far_basis=edge.best_so_far_basis,
                best_so_far_matched=edge.best_so_far_matched,
                attempt=submission.attempt,
                turn=self._turn(submission),
            )
        return Lineage(outcomes)
