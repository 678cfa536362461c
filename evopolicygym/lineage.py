"""A Run's Submissions against their parents and each other: one fold for every reader.

The ``programs`` and ``sft`` exports and the analysis dataframes each label a Submission
with its parent, their matched comparison and whether it was the best so far; they read
the Run differently (an export's history, the Run read API), so each builds
``LineageInput`` rows and calls ``lineage`` here, and the labels mean the same everywhere.

- The **parent** is the earlier program the Agent named (``stated``), else the nearest one
  (``nearest``; ``program_edits.nearest_parent``). A named parent that is no earlier
  Submission is ignored.
- Scores compare only on **matched** evidence, the pool indices both ran on: their
  published scores when they ran on the same indices, else each one's mean per-Episode
  score over the shared indices, where the published score is that mean (a failed Episode
  scoring the Benchmark's failure score, as Gymnasium Benchmarks score); otherwise None.
- ``best_so_far`` compares a published score with every earlier one, whatever indices
  each ran (``best_so_far_basis`` says ``matched`` only when all ran on the same ones);
  ``best_so_far_matched`` compares with the earlier published ones sharing indices, there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evopolicygym.program_edits import Lines, lines_distance, nearest_parent
from evopolicygym.records.runs import better

__all__ = ["Edge", "LineageInput", "lineage"]


@dataclass(frozen=True)
class LineageInput:
    """What the fold needs of one Submission that has a Program, in Submission order."""

    submission_id: int
    program_digest: str
    indices: Sequence[int]
    published: bool
    score: float | None  # the published train score
    stated_parent: int | None  # the parent the Agent named (0: the initial program)
    episodes: Sequence[tuple[int, bool, float]]  # (pool index, ended ok, total reward)


@dataclass(frozen=True)
class Edge:
    """One Submission's labels against its parent and the Submissions before it."""

    parent_submission_id: int | None  # None: the initial program
    parent_digest: str
    parent_distance: int  # lines changed from the parent
    parent_basis: str  # stated | nearest
    matched_indices: list[int]
    matched_score: float | None
    parent_matched_score: float | None
    beats_parent: bool | None  # on matched_indices, in the Benchmark's direction
    best_so_far: bool  # published, and better than every earlier published score
    best_so_far_score: float | None  # the best published score up to and including it
    best_so_far_basis: str | None  # first | matched | unmatched (None: not published)
    best_so_far_matched: bool | None  # beats every earlier one it shares indices with, there


def _episode_scores(
    item: LineageInput, floor: float | None, maximize: bool
) -> dict[int, float] | None:
    """Per-index Episode scores, if the published score is their mean (else None)."""
    if not item.published or item.score is None:
        return None
    scores: dict[int, float] = {}
    for index, ok, total in item.episodes:
        if not ok:
            if floor is None:
                return None
            value = floor
        else:
            value = float(total)
            if floor is not None:
                value = max(value, floor) if maximize else min(value, floor)
        scores[index] = value
    if not scores or sorted(scores) != sorted(item.indices):
        return None
    if not math.isclose(statistics.fmean(scores.values()), item.score, rel_tol=1e-9, abs_tol=1e-9):
        return None
    return scores


def lineage(
    initial_digest: str,
    submissions: Sequence[LineageInput],
    *,
    direction: str,
    failure_score: float | None,
    lines_of: Callable[[str], Lines],
) -> dict[int, Edge]:
    """Each Submission's ``Edge``, by Submission id (``lines_of`` loads a Program's lines)."""
    maximize = direction != "minimize"
    per_episode = {
        s.submission_id: _episode_scores(s, failure_score, maximize) for s in submissions
    }

    def matched(a: LineageInput, b: LineageInput) -> tuple[list[int], float | None, float | None]:
        shared = sorted(set(a.indices) & set(b.indices))
        if not shared or not (a.published and b.published):
            return shared, None, None
        if sorted(a.indices) == sorted(b.indices):
            return shared, a.score, b.score
        sa, sb = per_episode[a.submission_id], per_episode[b.submission_id]
        if sa is None or sb is None:
            return shared, None, None
        return (
            shared,
            statistics.fmean(sa[i] for i in shared),
            statistics.fmean(sb[i] for i in shared),
        )

    found: dict[int, Edge] = {}
    published: list[LineageInput] = []
    best: float | None = None
    for index, item in enumerate(submissions):
        earlier = {s.submission_id: s for s in submissions[:index]}
        stated = item.stated_parent
        parent: LineageInput | None
        if stated is not None and (stated == 0 or stated in earlier):
            parent = earlier.get(stated)
            parent_digest = initial_digest if parent is None else parent.program_digest
            distance = lines_distance(lines_of(parent_digest), lines_of(item.program_digest))
            basis = "stated"
        else:
            choices: list[tuple[LineageInput | None, str]] = [(None, initial_digest)]
            choices += [(s, s.program_digest) for s in submissions[:index]]
            parent, parent_digest, distance = nearest_parent(choices, item.program_digest, lines_of)
            basis = "nearest"
        shared: list[int] = []
        mine = theirs = None
        if parent is not None:
            shared, mine, theirs = matched(item, parent)
        new_best = False
        best_basis: str | None = None
        best_matched: bool | None = None
        if item.published:
            new_best = better(item.score, best, direction)
            if not published:
                best_basis = "first"
            elif all(sorted(p.indices) == sorted(item.indices) for p in published):
                best_basis = "matched"
            else:
                best_basis = "unmatched"
            verdicts = []
            for other in published:
                _, a, b = matched(item, other)
                if a is not None and b is not None:
                    verdicts.append(better(a, b, direction))
            best_matched = all(verdicts) if verdicts else None
            if new_best:
                best = item.score
            published.append(item)
        found[item.submission_id] = Edge(
            parent_submission_id=None if parent is None else parent.submission_id,
            parent_digest=parent_digest,
            parent_distance=distance,
            parent_basis=basis,
            matched_indices=shared,
            matched_score=mine,
            parent_matched_score=theirs,
            beats_parent=None
            if mine is None or theirs is None
            else better(mine, theirs, direction),
            best_so_far=new_best,
            best_so_far_score=best,
            best_so_far_basis=best_basis,
            best_so_far_matched=best_matched,
        )
    return found
