"""Best-so-far over Episodes used: the figure both pages draw, per Run and per agent.

A Submission's score counts against the best so far only as evidence of the kind it is:
``matched`` when it was scored on the same pool indices as the Submission holding the best
(a like-for-like comparison), ``unmatched`` when on other Episodes (a reference point, not a
comparison), ``first`` for the first published one.
"""

from __future__ import annotations

from dataclasses import dataclass

from evopolicygym.records.runs import RunSummary, better

__all__ = ["CurvePoint", "best_so_far"]


@dataclass(frozen=True)
class CurvePoint:
    submission_id: int
    episodes_used: int  # the Run's budget used once this Submission was reserved
    score: float
    best: float  # the best published score so far, this one included
    evidence: str  # first, matched or unmatched


def best_so_far(summary: RunSummary) -> list[CurvePoint]:
    """One point per published Submission, in order."""
    points: list[CurvePoint] = []
    best: float | None = None
    best_indices: list[int] | None = None
    for sid in sorted(summary.submissions):
        sub = summary.submissions[sid]
        if sub.status != "published" or sub.score is None:
            continue
        if best_indices is None:
            evidence = "first"
        else:
            evidence = "matched" if sub.indices == best_indices else "unmatched"
        if better(sub.score, best, summary.score_direction):
            best, best_indices = sub.score, sub.indices
        assert best is not None
        points.append(CurvePoint(sid, sub.budget_used or 0, sub.score, best, evidence))
    return points
