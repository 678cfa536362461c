"""Best-so-far over Episodes used, as one Run's page draws it.

The best so far and what it rests on come from ``submissions_df`` (the analysis frames):
``first``, ``matched`` (every Submission so far ran on the same pool indices, so the best
is a like-for-like comparison) or ``unmatched`` (scores taken on different Episodes: a
reference point, not a comparison).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evopolicygym.records.runs import RunSummary
from evopolicygym.report.run_data import Lineage

__all__ = ["CurvePoint", "best_so_far"]


@dataclass(frozen=True)
class CurvePoint:
    submission_id: int
    episodes_used: int  # the Run's budget used once this Submission was reserved
    score: float
    best: float  # the best published score so far, this one included
    evidence: str  # first, matched or unmatched


def best_so_far(summary: RunSummary, lineage: Mapping[int, Lineage]) -> list[CurvePoint]:
    """One point per published Submission, in order."""
    points: list[CurvePoint] = []
    for sid in sorted(summary.submissions):
        sub, line = summary.submissions[sid], lineage.get(sid)
        if (
            sub.status != "published"
            or sub.score is None
            or line is None
            or line.best_so_far_score is None
        ):
            continue
        points.append(
            CurvePoint(
                sid,
                sub.budget_used or 0,
                sub.score,
                line.best_so_far_score,
                line.best_so_far_basis or "first",
            )
        )
    return points
